#pragma once
// Test support: a real kube-apiserver for one test binary. It uses the control plane whose
// kubeconfig AUTOTUNE_TEST_KUBECONFIG names, or starts one with scripts/controlplane in a
// temporary directory and stops it when the binary ends. Each test gets its own namespace.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/resources.h"

namespace autotune::testing {

class ControlPlane : public ::testing::Environment {
 public:
  // `upArguments` go to `scripts/controlplane up`, e.g. "--apiserver-arg=--watch-cache=false".
  explicit ControlPlane(std::string upArguments = "") : upArguments_(std::move(upArguments)) {}

  void SetUp() override {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any test thread starts
    if (const char* given = std::getenv("AUTOTUNE_TEST_KUBECONFIG"); given != nullptr) {
      kubeconfigPath() = given;
      return;
    }
    directory_ =
        std::filesystem::temp_directory_path() / ("autotune-apiserver-" + std::to_string(getpid()));
    const std::string command = "AUTOTUNE_CONTROLPLANE_DIR=" + directory_.string() + " " +
                                std::string(AUTOTUNE_SOURCE_DIR) + "/scripts/controlplane up " +
                                upArguments_ + " 2>" + directory_.string() + ".log";
    // NOLINTNEXTLINE(concurrency-mt-unsafe,cert-env33-c): starting the test's control plane
    if (std::system(command.c_str()) != 0) {
      FAIL() << "scripts/controlplane up failed; see " << directory_.string() << ".log";
    }
    kubeconfigPath() = (directory_ / "kubeconfig").string();
    etcdUrl() = readFirstLine(directory_ / "etcd.url");
  }

  void TearDown() override {
    if (directory_.empty()) {
      return;
    }
    const std::string command = "AUTOTUNE_CONTROLPLANE_DIR=" + directory_.string() + " " +
                                std::string(AUTOTUNE_SOURCE_DIR) +
                                "/scripts/controlplane down 2>/dev/null";
    // NOLINTNEXTLINE(concurrency-mt-unsafe,cert-env33-c): stopping the test's control plane
    [[maybe_unused]] const int stopped = std::system(command.c_str());
    std::filesystem::remove_all(directory_);
    std::filesystem::remove(directory_.string() + ".log");
  }

  static std::string& kubeconfigPath() {
    static std::string path;
    return path;
  }

  // etcd's client URL, when this fixture started the control plane.
  static std::string& etcdUrl() {
    static std::string url;
    return url;
  }

 private:
  static std::string readFirstLine(const std::filesystem::path& path) {
    std::ifstream file(path);
    std::string line;
    std::getline(file, line);
    return line;
  }

  std::string upArguments_;
  std::filesystem::path directory_;
};

// A test with a client for the control plane and a namespace of its own, deleted afterwards.
class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = k8s::loadKubeconfig(ControlPlane::kubeconfigPath());
    ASSERT_TRUE(config) << k8s::describe(config.error());
    client_ = std::make_unique<k8s::Client>(k8s::makeHttpTransport(*config));
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : name) {
      c = std::isalnum(static_cast<unsigned char>(c)) != 0
              ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
              : '-';
    }
    namespace_ = name.substr(0, 40) + "-" + std::to_string(std::random_device()() % 100000);
    auto created = client_->create(k8s::kNamespaces, "", {{"metadata", {{"name", namespace_}}}});
    ASSERT_TRUE(created) << k8s::describe(created.error());
  }

  void TearDown() override {
    if (client_) {
      [[maybe_unused]] auto removed = client_->remove(k8s::kNamespaces, "", namespace_);
    }
  }

  const k8s::Client& client() const { return *client_; }
  const std::string& ns() const { return namespace_; }

 private:
  std::unique_ptr<k8s::Client> client_;
  std::string namespace_;
};

}  // namespace autotune::testing
