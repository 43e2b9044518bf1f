#pragma once
// Credentials from an exec plugin, as kubectl fetches them: the kubeconfig's user names a program
// (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`) that prints an ExecCredential
// (client.authentication.k8s.io/v1 or v1beta1) on its standard output.

#include <chrono>
#include <optional>
#include <string>

#include "k8s/config.h"
#include "k8s/error.h"

namespace autotune::k8s {

struct ExecCredential {
  std::string token;           // a bearer token, or
  std::string clientCertData;  // a client certificate (PEM)
  std::string clientKeyData;   // and its key (PEM)
  // When it is to be fetched again; nothing when the plugin gave no expiry (it is fetched again
  // after a 401).
  std::optional<std::chrono::system_clock::time_point> expiresAt;
};

// Runs `config.exec` (which must be set) and reads what it prints. The program gets this
// process's environment with the plugin's `env` added, and KUBERNETES_EXEC_INFO (with the
// cluster's server and CA when `provideClusterInfo`). It is interactive (standard input and error
// passed through) when its interactiveMode allows and standard input is a terminal; otherwise its
// standard error is kept for the error, and it is stopped after `timeout`. Errors (kind kOther)
// name the command and say why: not found (with the installHint), its exit status and last words
// on standard error, or what in its output is wrong.
Result<ExecCredential> fetchExecCredential(const ClusterConfig& config,
                                           std::chrono::seconds timeout = std::chrono::minutes(1));

}  // namespace autotune::k8s
