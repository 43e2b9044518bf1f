#include "k8s/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

using autotune::k8s::ClusterConfig;
using autotune::k8s::ErrorKind;
using autotune::k8s::inClusterConfig;
using autotune::k8s::loadKubeconfig;
using autotune::k8s::readToken;
using autotune::k8s::Result;

constexpr std::string_view kCaPem =
    "-----BEGIN CERTIFICATE-----\nMIIBcluster\n-----END CERTIFICATE-----\n";
constexpr std::string_view kCaBase64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjbHVzdGVyCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";
constexpr std::string_view kCertPem =
    "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n";
constexpr std::string_view kCertBase64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJjbGllbnQKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
constexpr std::string_view kKeyPem =
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEkey\n-----END EC PRIVATE KEY-----\n";
constexpr std::string_view kKeyBase64 =
    "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFa2V5Ci0tLS0tRU5EIEVDIFBSSVZBVEUgS0VZLS0tLS"
    "0K";

void writeFile(const fs::path& path, std::string_view content) {
  fs::create_directories(path.parent_path());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << content;
}

// A kubeconfig with one context "kind" (the current one) on cluster "kind" and user "admin";
// `cluster` and `user` are the indented bodies of the two entries.
std::string kubeconfig(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\n"
         "kind: Config\n"
         "current-context: kind\n"
         "clusters:\n"
         "- name: kind\n"
         "  cluster:\n" +
         cluster +
         "contexts:\n"
         "- name: kind\n"
         "  context:\n"
         "    cluster: kind\n"
         "    user: admin\n"
         "users:\n"
         "- name: admin\n"
         "  user:\n" +
         user;
}

const std::string kServer = "    server: https://127.0.0.1:6443\n";

std::string errorOf(const Result<ClusterConfig>& result) {
  return result ? "(no error)" : result.error().message;
}

// A fresh, empty directory per test, removed afterwards.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("autotune-k8s-config-test-" + std::to_string(::getpid()) + "-" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // Writes `text` as dir/config (or another name) and loads it.
  Result<ClusterConfig> load(const std::string& text, const std::string& context = "",
                             const std::string& name = "config") {
    writeFile(dir_ / name, text);
    return loadKubeconfig((dir_ / name).string(), context);
  }

  fs::path dir_;
};

// --- kubeconfig: what it yields -----------------------------------------------------------------

TEST_F(ConfigTest, InlineDataIsDecodedToPem) {
  const auto config =
      load(kubeconfig(kServer + "    certificate-authority-data: " + std::string(kCaBase64) + "\n",
                      "    client-certificate-data: " + std::string(kCertBase64) +
                          "\n"
                          "    client-key-data: " +
                          std::string(kKeyBase64) + "\n"));
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(config->caData, kCaPem);
  EXPECT_EQ(config->clientCertData, kCertPem);
  EXPECT_EQ(config->clientKeyData, kKeyPem);
  EXPECT_TRUE(config->token.empty());
  EXPECT_TRUE(config->tokenFile.empty());
  EXPECT_FALSE(config->insecureSkipTlsVerify);
}

TEST_F(ConfigTest, RelativeFilePathsAreFoundNextToTheKubeconfig) {
  writeFile(dir_ / "kube" / "pki" / "ca.crt", kCaPem);
  writeFile(dir_ / "elsewhere" / "client.crt", kCertPem);
  writeFile(dir_ / "kube" / "pki" / "client.key", kKeyPem);
  const std::string absoluteCert = (dir_ / "elsewhere" / "client.crt").string();
  const auto config = load(kubeconfig(kServer + "    certificate-authority: pki/ca.crt\n",
                                      "    client-certificate: " + absoluteCert +
                                          "\n"
                                          "    client-key: pki/client.key\n"
                                          "    tokenFile: secrets/token\n"),
                           "", "kube/config");
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->caData, kCaPem);
  EXPECT_EQ(config->clientCertData, kCertPem);
  EXPECT_EQ(config->clientKeyData, kKeyPem);
  EXPECT_EQ(config->tokenFile, (dir_ / "kube" / "secrets" / "token").string());
}

TEST_F(ConfigTest, InlineDataWinsOverAFilePath) {
  const auto config = load(kubeconfig(kServer +
                                          "    certificate-authority: does-not-exist.crt\n"
                                          "    certificate-authority-data: " +
                                          std::string(kCaBase64) + "\n",
                                      "    token: abc\n"));
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->caData, kCaPem);
}

TEST_F(ConfigTest, Base64PaddingAndFoldedLinesAreAccepted) {
  const auto padded =
      load(kubeconfig(kServer + "    certificate-authority-data: YQ==\n",
                      "    client-certificate-data: YWI=\n    client-key-data: YWJj\n"));
  ASSERT_TRUE(padded) << errorOf(padded);
  EXPECT_EQ(padded->caData, "a");
  EXPECT_EQ(padded->clientCertData, "ab");
  EXPECT_EQ(padded->clientKeyData, "abc");

  const std::string ca(kCaBase64);
  const auto folded = load(kubeconfig(kServer + "    certificate-authority-data: |\n      " +
                                          ca.substr(0, 40) + "\n      " + ca.substr(40) + "\n",
                                      "    token: abc\n"));
  ASSERT_TRUE(folded) << errorOf(folded);
  EXPECT_EQ(folded->caData, kCaPem);
}

TEST_F(ConfigTest, TheCurrentContextIsUsedUnlessAnotherIsNamed) {
  const std::string text =
      "current-context: dev\n"
      "clusters:\n"
      "- {name: dev, cluster: {server: 'https://dev.example:6443'}}\n"
      "- {name: prod, cluster: {server: 'https://prod.example:6443'}}\n"
      "contexts:\n"
      "- {name: dev, context: {cluster: dev, user: alice}}\n"
      "- {name: prod, context: {cluster: prod, user: bob}}\n"
      "users:\n"
      "- {name: alice, user: {token: alice-token}}\n"
      "- {name: bob, user: {token: bob-token}}\n";

  const auto current = load(text);
  ASSERT_TRUE(current) << errorOf(current);
  EXPECT_EQ(current->server, "https://dev.example:6443");
  EXPECT_EQ(current->token, "alice-token");

  const auto named = load(text, "prod");
  ASSERT_TRUE(named) << errorOf(named);
  EXPECT_EQ(named->server, "https://prod.example:6443");
  EXPECT_EQ(named->token, "bob-token");
}

TEST_F(ConfigTest, ATlsServerNameIsRefusedRatherThanIgnored) {
  const auto refused = load(
      "current-context: c\n"
      "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443', tls-server-name: api}}]\n"
      "contexts: [{name: c, context: {cluster: c}}]\n");
  ASSERT_FALSE(refused);
  EXPECT_NE(errorOf(refused).find("tls-server-name is not supported"), std::string::npos)
      << errorOf(refused);
}

TEST_F(ConfigTest, TlsVerificationIsSkippedOnlyWhenTheKubeconfigSaysSo) {
  const auto unset = load(kubeconfig(kServer, "    token: abc\n"));
  ASSERT_TRUE(unset) << errorOf(unset);
  EXPECT_FALSE(unset->insecureSkipTlsVerify);

  const auto no = load(kubeconfig(kServer + "    insecure-skip-tls-verify: false\n", ""));
  ASSERT_TRUE(no) << errorOf(no);
  EXPECT_FALSE(no->insecureSkipTlsVerify);

  const auto yes = load(kubeconfig(kServer + "    insecure-skip-tls-verify: true\n", ""));
  ASSERT_TRUE(yes) << errorOf(yes);
  EXPECT_TRUE(yes->insecureSkipTlsVerify);
}

TEST_F(ConfigTest, AContextWithoutAUserConnectsWithoutCredentials) {
  const auto config = load(
      "current-context: anon\n"
      "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:443'}}]\n"
      "contexts: [{name: anon, context: {cluster: c}}]\n");
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->server, "https://10.0.0.1:443");
  EXPECT_TRUE(config->token.empty());
  EXPECT_TRUE(config->clientCertData.empty());
}

TEST_F(ConfigTest, TheContextsNamespaceIsKeptForProgramsThatActWhereKubectlWould) {
  const std::string text =
      "current-context: team\n"
      "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:443'}}]\n"
      "contexts:\n"
      "- {name: team, context: {cluster: c, namespace: team-a}}\n"
      "- {name: plain, context: {cluster: c}}\n";

  const auto team = load(text);
  ASSERT_TRUE(team) << errorOf(team);
  EXPECT_EQ(team->namespaceName, "team-a");
  const auto plain = load(text, "plain");
  ASSERT_TRUE(plain) << errorOf(plain);
  EXPECT_EQ(plain->namespaceName, "");
}

// --- kubeconfig: every error names what is wrong ------------------------------------------------

TEST_F(ConfigTest, AMissingFileNamesThePath) {
  const std::string path = (dir_ / "nope" / "config").string();
  const auto config = loadKubeconfig(path);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().kind, ErrorKind::kOther);
  EXPECT_EQ(config.error().message,
            "kubeconfig " + path + ": cannot be read: No such file or directory");
}

TEST_F(ConfigTest, BadYamlNamesTheFileAndTheLine) {
  const auto config = load("clusters:\n- name: [unclosed\n");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().kind, ErrorKind::kOther);
  EXPECT_TRUE(
      config.error().message.starts_with("kubeconfig " + (dir_ / "config").string() + ": line "))
      << config.error().message;
}

TEST_F(ConfigTest, AFileThatIsNotAMappingIsRejected) {
  EXPECT_EQ(errorOf(load("- just\n- a list\n")),
            "kubeconfig " + (dir_ / "config").string() + ": is not a YAML mapping");
  EXPECT_EQ(errorOf(load("")),
            "kubeconfig " + (dir_ / "config").string() + ": is not a YAML mapping");
}

TEST_F(ConfigTest, AnUnknownContextIsNamedWithTheContextsThereAre) {
  EXPECT_EQ(errorOf(load(kubeconfig(kServer, ""), "staging")),
            "kubeconfig " + (dir_ / "config").string() +
                R"(: no context named "staging" (contexts: kind))");
}

TEST_F(ConfigTest, NoCurrentContextAndNoneNamedIsAnError) {
  EXPECT_EQ(errorOf(load("contexts: [{name: a, context: {cluster: a}}, {name: b}]\n")),
            "kubeconfig " + (dir_ / "config").string() +
                ": no current-context is set and no context was named (contexts: a, b)");
}

TEST_F(ConfigTest, AContextNamingAMissingClusterOrUserSaysWhich) {
  const std::string base =
      "current-context: ctx\n"
      "clusters: [{name: real, cluster: {server: 'https://h:6443'}}]\n"
      "users: [{name: someone, user: {token: t}}]\n";
  EXPECT_EQ(errorOf(load(base + "contexts: [{name: ctx, context: {cluster: gone, user: x}}]\n")),
            "kubeconfig " + (dir_ / "config").string() +
                R"(: context "ctx" names cluster "gone", which is not in clusters)");
  EXPECT_EQ(errorOf(load(base + "contexts: [{name: ctx, context: {cluster: real, user: gone}}]\n")),
            "kubeconfig " + (dir_ / "config").string() +
                R"(: context "ctx" names user "gone", which is not in users)");
  EXPECT_EQ(errorOf(load(base + "contexts: [{name: ctx, context: {user: someone}}]\n")),
            "kubeconfig " + (dir_ / "config").string() + R"(: context "ctx" names no cluster)");
}

TEST_F(ConfigTest, AClusterWithoutServerIsAnError) {
  EXPECT_EQ(errorOf(load(kubeconfig("    insecure-skip-tls-verify: true\n", ""))),
            "kubeconfig " + (dir_ / "config").string() + R"(: cluster "kind" has no server)");
}

TEST_F(ConfigTest, AnUnreadableCertificateFileNamesTheKeyAndThePath) {
  const auto config = load(kubeconfig(kServer, "    client-key: pki/missing.key\n"));
  EXPECT_EQ(errorOf(config), "kubeconfig " + (dir_ / "config").string() +
                                 R"(: user "admin": client-key )" +
                                 (dir_ / "pki" / "missing.key").string() +
                                 " cannot be read: No such file or directory");
}

TEST_F(ConfigTest, InvalidBase64NamesTheKey) {
  const std::string where = "kubeconfig " + (dir_ / "config").string() + ": ";
  EXPECT_EQ(errorOf(load(kubeconfig(kServer + "    certificate-authority-data: not*base\n", ""))),
            where + R"(cluster "kind": certificate-authority-data is not valid base64)");
  EXPECT_EQ(errorOf(load(kubeconfig(kServer, "    client-certificate-data: YWJ\n"))),
            where + R"(user "admin": client-certificate-data is not valid base64)");
  EXPECT_EQ(errorOf(load(kubeconfig(kServer, "    client-key-data: Y=Jj\n"))),
            where + R"(user "admin": client-key-data is not valid base64)");
}

TEST_F(ConfigTest, AnInsecureFlagThatIsNotABooleanIsAnError) {
  EXPECT_EQ(errorOf(load(kubeconfig(kServer + "    insecure-skip-tls-verify: maybe\n", ""))),
            "kubeconfig " + (dir_ / "config").string() +
                R"(: cluster "kind": insecure-skip-tls-verify must be true or false)");
}

// --- in-cluster ---------------------------------------------------------------------------------

// Sets (or, given nothing, unsets) an environment variable for one test, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) {  // NOLINT(concurrency-mt-unsafe): tests are serial
      old_ = old;
    }
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ScopedEnv(ScopedEnv&&) = delete;
  ScopedEnv& operator=(ScopedEnv&&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);  // NOLINT(concurrency-mt-unsafe): tests are serial
    } else {
      ::unsetenv(name_);  // NOLINT(concurrency-mt-unsafe): tests are serial
    }
  }

  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(ConfigTest, InClusterReadsTheServiceEnvironmentAndTheCa) {
  writeFile(dir_ / "sa" / "ca.crt", kCaPem);
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  const auto config = inClusterConfig(dir_ / "sa");
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->caData, kCaPem);
  EXPECT_EQ(config->tokenFile, (dir_ / "sa" / "token").string());
  EXPECT_TRUE(config->token.empty());
  EXPECT_FALSE(config->insecureSkipTlsVerify);
}

TEST_F(ConfigTest, InClusterBracketsAnIpv6Host) {
  writeFile(dir_ / "sa" / "ca.crt", kCaPem);
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  const auto config = inClusterConfig(dir_ / "sa");
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->server, "https://[fd00:10:96::1]:6443");
}

TEST_F(ConfigTest, InClusterOutsideAPodSaysWhatIsMissing) {
  writeFile(dir_ / "sa" / "ca.crt", kCaPem);
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  const auto config = inClusterConfig(dir_ / "sa");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().kind, ErrorKind::kOther);
  EXPECT_EQ(config.error().message,
            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set; "
            "is this running in a Pod?");
}

TEST_F(ConfigTest, InClusterWithoutACaNamesTheFile) {
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  EXPECT_EQ(errorOf(inClusterConfig(dir_ / "sa")),
            "in-cluster config: " + (dir_ / "sa" / "ca.crt").string() +
                " cannot be read: No such file or directory");
}

// --- readToken ----------------------------------------------------------------------------------

TEST_F(ConfigTest, ReadTokenTrimsTheFileAndSeesARotatedToken) {
  ClusterConfig config;
  config.tokenFile = (dir_ / "token").string();
  writeFile(config.tokenFile, "first-token\n");
  const auto first = readToken(config);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, "first-token");

  writeFile(config.tokenFile, "second-token");
  const auto second = readToken(config);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(*second, "second-token");
}

TEST_F(ConfigTest, ReadTokenPrefersAnInlineToken) {
  ClusterConfig config;
  config.token = "inline";
  config.tokenFile = (dir_ / "missing").string();
  const auto token = readToken(config);
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(*token, "inline");
}

TEST_F(ConfigTest, ReadTokenWithoutAnyTokenIsEmpty) {
  const auto token = readToken(ClusterConfig{});
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_TRUE(token->empty());
}

TEST_F(ConfigTest, ReadTokenNamesAMissingOrEmptyFile) {
  ClusterConfig config;
  config.tokenFile = (dir_ / "token").string();
  const auto missing = readToken(config);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "token file " + config.tokenFile + " cannot be read: No such file or directory");

  writeFile(config.tokenFile, " \n");
  const auto empty = readToken(config);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "token file " + config.tokenFile + " is empty");
}

// --- several files, as $KUBECONFIG lists them ----------------------------------------------------

TEST_F(ConfigTest, FilesAreMergedAndTheFirstThatNamesAThingWins) {
  writeFile(dir_ / "first",
            "current-context: work\n"
            "users: [{name: me, user: {tokenFile: token}}]\n");
  writeFile(dir_ / "sub" / "second",
            "current-context: home\n"
            "clusters: [{name: c, cluster: {server: 'https://second:6443',"
            " certificate-authority: ca.crt}}]\n"
            "contexts: [{name: work, context: {cluster: c, user: me, namespace: ml}}]\n"
            "users: [{name: me, user: {token: from-the-second-file}}]\n");
  writeFile(dir_ / "sub" / "ca.crt", kCaPem);
  const auto config = autotune::k8s::loadKubeconfigs(
      {(dir_ / "missing").string(), (dir_ / "first").string(), (dir_ / "sub" / "second").string()});
  ASSERT_TRUE(config) << errorOf(config);
  EXPECT_EQ(config->server, "https://second:6443");
  EXPECT_EQ(config->namespaceName, "ml");
  EXPECT_EQ(config->caData, kCaPem) << "a relative path is found next to the file naming it";
  EXPECT_EQ(config->tokenFile, (dir_ / "token").string()) << "the first file's user wins";
  EXPECT_TRUE(config->token.empty());

  const auto none = autotune::k8s::loadKubeconfigs({(dir_ / "a").string(), (dir_ / "b").string()});
  ASSERT_FALSE(none);
  EXPECT_EQ(errorOf(none), "kubeconfig: none of " + (dir_ / "a").string() + ", " +
                               (dir_ / "b").string() + " exists");
}

TEST_F(ConfigTest, TheDefaultFilesAreThoseOfKubeconfigElseTheHomeFolders) {
  {
    const ScopedEnv listed("KUBECONFIG", "/a/config::/b/config");
    EXPECT_EQ(autotune::k8s::defaultKubeconfigFiles(),
              (std::vector<std::string>{"/a/config", "/b/config"}));
  }
  const ScopedEnv unset("KUBECONFIG", std::nullopt);
  const ScopedEnv home("HOME", "/home/me");
  EXPECT_EQ(autotune::k8s::defaultKubeconfigFiles(),
            (std::vector<std::string>{"/home/me/.kube/config"}));
}

// --- credentials ---------------------------------------------------------------------------------

TEST_F(ConfigTest, AnExecPluginIsReadAsKubectlReadsIt) {
  const auto config = load(kubeconfig(kServer,
                                      "    exec:\n"
                                      "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                      "      command: aws\n"
                                      "      args: [eks, get-token, --cluster-name, prod]\n"
                                      "      env: [{name: AWS_PROFILE, value: ml}]\n"
                                      "      installHint: install the AWS CLI\n"
                                      "      provideClusterInfo: true\n"));
  ASSERT_TRUE(config) << errorOf(config);
  ASSERT_TRUE(config->exec.has_value());
  EXPECT_EQ(config->exec->command, "aws") << "a bare name is looked up on the PATH";
  EXPECT_EQ(config->exec->args,
            (std::vector<std::string>{"eks", "get-token", "--cluster-name", "prod"}));
  ASSERT_EQ(config->exec->env.size(), 1U);
  EXPECT_EQ(config->exec->env[0], (std::pair<std::string, std::string>{"AWS_PROFILE", "ml"}));
  EXPECT_EQ(config->exec->installHint, "install the AWS CLI");
  EXPECT_TRUE(config->exec->provideClusterInfo);
  EXPECT_EQ(config->exec->interactiveMode, autotune::k8s::ExecPlugin::Interactive::kIfAvailable)
      << "v1beta1's default";

  const auto relative = load(kubeconfig(kServer,
                                        "    exec:\n"
                                        "      apiVersion: client.authentication.k8s.io/v1\n"
                                        "      command: bin/get-token\n"
                                        "      interactiveMode: Never\n"));
  ASSERT_TRUE(relative) << errorOf(relative);
  EXPECT_EQ(relative->exec->command, (dir_ / "bin/get-token").string());
  EXPECT_EQ(relative->exec->interactiveMode, autotune::k8s::ExecPlugin::Interactive::kNever);
}

TEST_F(ConfigTest, AWrongExecPluginNamesWhatIsWrong) {
  const auto exec = [this](const std::string& body) {
    return errorOf(load(kubeconfig(kServer, "    exec:\n" + body)));
  };
  EXPECT_NE(exec("      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: x\n")
                .find("user \"admin\": exec: apiVersion must be client.authentication.k8s.io/v1 "
                      "or client.authentication.k8s.io/v1beta1, not \"client.authentication.k8s."
                      "io/v1alpha1\""),
            std::string::npos);
  EXPECT_NE(exec("      apiVersion: client.authentication.k8s.io/v1\n      command: x\n")
                .find("interactiveMode must be set"),
            std::string::npos);
  EXPECT_NE(
      exec("      apiVersion: client.authentication.k8s.io/v1beta1\n").find("names no command"),
      std::string::npos);
  EXPECT_NE(exec("      apiVersion: client.authentication.k8s.io/v1beta1\n      command: x\n"
                 "      args: x\n")
                .find("args must be a list of strings"),
            std::string::npos);
  EXPECT_NE(exec("      apiVersion: client.authentication.k8s.io/v1beta1\n      command: x\n"
                 "      env: [{value: y}]\n")
                .find("env: every entry needs a name"),
            std::string::npos);
  EXPECT_NE(exec("      apiVersion: client.authentication.k8s.io/v1beta1\n      command: x\n"
                 "      interactiveMode: Sometimes\n")
                .find("interactiveMode must be Never, IfAvailable or Always, not \"Sometimes\""),
            std::string::npos);
}

TEST_F(ConfigTest, CredentialsThatCannotBeSentAreAnErrorNotAnAnonymousRequest) {
  const auto provider = load(kubeconfig(kServer, "    auth-provider: {name: gcp}\n"));
  ASSERT_FALSE(provider);
  EXPECT_NE(errorOf(provider).find("user \"admin\": auth-provider \"gcp\" is not supported"),
            std::string::npos)
      << errorOf(provider);
  const auto basic = load(kubeconfig(kServer, "    username: admin\n    password: secret\n"));
  ASSERT_FALSE(basic);
  EXPECT_NE(errorOf(basic).find("username and password (basic authentication) are not supported"),
            std::string::npos)
      << errorOf(basic);
}

}  // namespace
