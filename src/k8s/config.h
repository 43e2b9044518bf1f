#pragma once
// How to reach and authenticate to an API server: from a kubeconfig file, or from the service
// account Kubernetes mounts into every Pod. Certificates are held as PEM text so the transport can
// load them from memory, without temp files.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k8s/error.h"

namespace autotune::k8s {

// A kubeconfig user's exec credential plugin (client.authentication.k8s.io): a program, such as
// `aws eks get-token` or `gke-gcloud-auth-plugin`, that prints an ExecCredential on its standard
// output (see exec_credential.h).
inline constexpr std::string_view kExecCredentialV1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view kExecCredentialV1Beta1 = "client.authentication.k8s.io/v1beta1";

struct ExecPlugin {
  enum class Interactive { kNever, kIfAvailable, kAlways };

  std::string apiVersion;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;     // found on the PATH, or a path (relative ones next to the kubeconfig)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to the program's environment
  std::string installHint;                               // shown when the command cannot be found
  Interactive interactiveMode = Interactive::kIfAvailable;
  bool provideClusterInfo = false;  // the cluster's server and CA go to the plugin
};

struct ClusterConfig {
  std::string server;              // https://host:port
  std::string caData;              // PEM; empty means the system's trust store
  std::string clientCertData;      // PEM
  std::string clientKeyData;       // PEM
  std::string token;               // a bearer token given inline
  std::string tokenFile;           // a bearer token to re-read (see readToken)
  std::optional<ExecPlugin> exec;  // credentials to fetch from a plugin, when it is set
  bool insecureSkipTlsVerify = false;
  // The context's namespace, for programs that act where kubectl would; empty when it sets none.
  std::string namespaceName;
  // Sent with every request, so that the API server's audit log and metrics name the program,
  // e.g. autotune-operator/0.1.0; empty sends cpprestsdk's own.
  std::string userAgent;
  // How long one request may take, from sending it to the end of the answer (a watch's is the
  // longest quiet spell instead, given with the watch).
  std::chrono::seconds requestTimeout{30};
};

// The cluster and user of `context`, or of the kubeconfig's current-context when `context` is
// empty. Certificate and token files named by relative paths are found next to the kubeconfig;
// *-data fields (base64) win over file paths, as in kubectl. A user with an auth-provider or a
// username and password is an error: those are not supported, and nothing is sent anonymously
// in their place. Every error is of kind kOther and names the file and what in it is wrong.
Result<ClusterConfig> loadKubeconfig(const std::string& path, const std::string& context = "");

// Several kubeconfig files merged as kubectl merges the files of $KUBECONFIG: the first file that
// sets current-context sets it, and of clusters, contexts and users of the same name the first
// file's wins; relative paths are found next to the file that names them. Files that do not exist
// are skipped; it is an error if none does.
Result<ClusterConfig> loadKubeconfigs(const std::vector<std::string>& paths,
                                      const std::string& context = "");

// The kubeconfig files kubectl reads when no --kubeconfig is given: those $KUBECONFIG lists
// (separated by ':'), else ~/.kube/config.
std::vector<std::string> defaultKubeconfigFiles();

// The configuration of a Pod's own service account: the API server from KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT, the CA from `serviceAccountDir`/ca.crt. The token is left as a
// file: it is rotated while the Pod runs, so callers re-read it (readToken) at least every minute
// and after a 401.
Result<ClusterConfig> inClusterConfig(const std::filesystem::path& serviceAccountDir =
                                          "/var/run/secrets/kubernetes.io/serviceaccount");

// The bearer token to send now: `token` if set, else the trimmed content of `tokenFile`, else
// empty (no bearer token; client certificates, if any, authenticate). An empty token file is an
// error.
Result<std::string> readToken(const ClusterConfig& config);

}  // namespace autotune::k8s
