// Exec credential plugins run as real programs: small shell scripts that print what aws, gcloud or
// kubelogin would, or fail as they do.

#include "k8s/exec_credential.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>

#include "object/time.h"

namespace autotune::k8s {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ExecCredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("autotune-exec-credential-test-" + std::to_string(::getpid()) + "-" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Standard input is no terminal here, whoever runs the tests: the plugin is not interactive.
    savedInput_ = dup(STDIN_FILENO);
    const int nothing = open("/dev/null", O_RDONLY);
    dup2(nothing, STDIN_FILENO);
    close(nothing);
  }
  void TearDown() override {
    dup2(savedInput_, STDIN_FILENO);
    close(savedInput_);
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // A cluster whose user runs `script` (a shell script's body) as its exec plugin.
  ClusterConfig withPlugin(const std::string& script,
                           std::string_view apiVersion = kExecCredentialV1) {
    const fs::path path = dir_ / "plugin.sh";
    std::ofstream(path) << "#!/bin/sh\n" << script;
    fs::permissions(path, fs::perms::owner_all);
    ClusterConfig config;
    config.server = "https://10.0.0.1:6443";
    config.caData = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    config.exec = ExecPlugin{};
    config.exec->apiVersion = std::string(apiVersion);
    config.exec->command = path.string();
    config.exec->interactiveMode = ExecPlugin::Interactive::kIfAvailable;
    return config;
  }

  std::string errorOf(const ClusterConfig& config,
                      std::chrono::seconds timeout = std::chrono::seconds(20)) {
    const auto fetched = fetchExecCredential(config, timeout);
    return fetched ? "(no error)" : fetched.error().message;
  }

  fs::path dir_;
  int savedInput_ = -1;
};

std::string printed(const json& status, std::string_view apiVersion = kExecCredentialV1) {
  return "cat <<'EOF'\n" +
         json{{"apiVersion", apiVersion}, {"kind", "ExecCredential"}, {"status", status}}.dump() +
         "\nEOF\n";
}

TEST_F(ExecCredentialTest, ATokenIsReadWithItsExpiry) {
  const auto credential = fetchExecCredential(withPlugin(
      printed({{"token", "k8s-aws-v1.abc"}, {"expirationTimestamp", "2026-11-28T10:15:00Z"}})));
  ASSERT_TRUE(credential) << credential.error().message;
  EXPECT_EQ(credential->token, "k8s-aws-v1.abc");
  EXPECT_EQ(credential->expiresAt, object::parseTime("2026-11-28T10:15:00Z"));
  EXPECT_TRUE(credential->clientCertData.empty());
}

TEST_F(ExecCredentialTest, AClientCertificateIsReadWithoutAToken) {
  const auto credential = fetchExecCredential(
      withPlugin(printed({{"clientCertificateData", "CERT PEM"}, {"clientKeyData", "KEY PEM"}},
                         kExecCredentialV1Beta1),
                 kExecCredentialV1Beta1));
  ASSERT_TRUE(credential) << credential.error().message;
  EXPECT_EQ(credential->clientCertData, "CERT PEM");
  EXPECT_EQ(credential->clientKeyData, "KEY PEM");
  EXPECT_TRUE(credential->token.empty());
  EXPECT_FALSE(credential->expiresAt.has_value());
}

TEST_F(ExecCredentialTest, ThePluginGetsItsArgumentsItsEnvironmentAndTheClusterWhenAsked) {
  ClusterConfig config = withPlugin(
      "echo \"$KUBERNETES_EXEC_INFO\" > \"$(dirname \"$0\")/info\"\n"
      "echo \"$@ $AWS_PROFILE\" > \"$(dirname \"$0\")/said\"\n" +
      printed({{"token", "t"}}));
  config.exec->args = {"eks", "get-token"};
  config.exec->env = {{"AWS_PROFILE", "ml"}};
  config.exec->provideClusterInfo = true;
  ASSERT_TRUE(fetchExecCredential(config));
  std::stringstream said;
  said << std::ifstream(dir_ / "said").rdbuf();
  EXPECT_EQ(said.str(), "eks get-token ml\n");
  const json info = json::parse(std::ifstream(dir_ / "info"));
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["apiVersion"], kExecCredentialV1);
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"],
            "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=");

  config.exec->provideClusterInfo = false;
  ASSERT_TRUE(fetchExecCredential(config));
  EXPECT_FALSE(json::parse(std::ifstream(dir_ / "info"))["spec"].contains("cluster"));
}

TEST_F(ExecCredentialTest, AFailingPluginIsQuotedWithItsExitStatus) {
  EXPECT_EQ(errorOf(withPlugin("echo 'Error loading SSO Token: Token for ml does not exist' >&2\n"
                               "exit 255\n")),
            "exec credential plugin \"" + (dir_ / "plugin.sh").string() +
                "\": exited with status 255: Error loading SSO Token: Token for ml does not exist");
}

TEST_F(ExecCredentialTest, AMissingCommandSaysSoWithItsInstallHint) {
  ClusterConfig config = withPlugin("");
  config.exec->command = "gke-gcloud-auth-plugin-that-is-not-installed";
  config.exec->installHint =
      "Install gke-gcloud-auth-plugin for use with kubectl by following\n"
      "https://cloud.google.com/kubernetes-engine/docs/how-to/"
      "cluster-access-for-kubectl#install_plugin";
  EXPECT_EQ(
      errorOf(config),
      "exec credential plugin \"gke-gcloud-auth-plugin-that-is-not-installed\": not found\n\n" +
          config.exec->installHint);
}

TEST_F(ExecCredentialTest, OutputThatIsNoCredentialNamesWhatIsWrong) {
  const auto wrong = [this](const std::string& script) {
    const std::string error = errorOf(withPlugin(script));
    return error.substr(error.find("\": ") + 3);
  };
  EXPECT_EQ(wrong("echo token\n"), "printed no ExecCredential (its output is not a JSON object)");
  EXPECT_EQ(wrong("echo '{\"kind\":\"Status\"}'\n"), "printed kind \"Status\", not ExecCredential");
  EXPECT_EQ(wrong(printed({{"token", "t"}}, kExecCredentialV1Beta1)),
            "printed apiVersion \"client.authentication.k8s.io/v1beta1\" where the kubeconfig "
            "asks for client.authentication.k8s.io/v1");
  EXPECT_EQ(wrong(printed({{"clientCertificateData", "CERT"}})),
            "printed clientCertificateData without clientKeyData, or the reverse: both are needed");
  EXPECT_EQ(wrong(printed(json::object())),
            "printed an ExecCredential with neither status.token nor status.clientCertificateData");
  EXPECT_EQ(wrong(printed({{"token", "t"}, {"expirationTimestamp", "tomorrow"}})),
            "printed an expirationTimestamp that is not an RFC 3339 time: \"tomorrow\"");
}

TEST_F(ExecCredentialTest, APluginThatHangsIsStopped) {
  EXPECT_EQ(errorOf(withPlugin("exec sleep 30\n"), std::chrono::seconds(1)),
            "exec credential plugin \"" + (dir_ / "plugin.sh").string() +
                "\": did not finish within 1s and was stopped");
}

TEST_F(ExecCredentialTest, AlwaysInteractiveWithoutATerminalIsRefusedWithoutRunningIt) {
  ClusterConfig config =
      withPlugin("touch \"$(dirname \"$0\")/ran\"\n" + printed({{"token", "t"}}));
  config.exec->interactiveMode = ExecPlugin::Interactive::kAlways;
  EXPECT_NE(errorOf(config).find("its interactiveMode is Always, and standard input is not a "
                                 "terminal"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
}

}  // namespace
}  // namespace autotune::k8s
