#include "k8s/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "k8s/kubeconfig_yaml.h"

namespace autotune::k8s {
namespace {

namespace fs = std::filesystem;
using kubeconfig::child;
using kubeconfig::execPlugin;
using kubeconfig::flag;
using kubeconfig::inQuotes;
using kubeconfig::Parsed;
using kubeconfig::resolved;
using kubeconfig::scalarAt;

Error configError(std::string message) {
  Error error;
  error.kind = ErrorKind::kOther;
  error.message = std::move(message);
  return error;
}

Parsed<std::string> readFileText(const fs::path& path) {
  const std::ifstream file(path, std::ios::binary);
  if (!file) {
    return tl::unexpected(std::generic_category().message(errno));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) {
    return tl::unexpected(std::string("read failed"));
  }
  return text.str();
}

std::string trimmed(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) {
    return "";
  }
  const auto last = text.find_last_not_of(kSpace);
  return std::string(text.substr(first, last - first + 1));
}

// --- base64 (RFC 4648, standard alphabet, padded) ----------------------------------------------

constexpr int kNotBase64 = -1;

constexpr std::array<int, 256> base64Table() {
  std::array<int, 256> table{};
  table.fill(kNotBase64);
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table.at(static_cast<unsigned char>(kAlphabet[i])) = static_cast<int>(i);
  }
  return table;
}

// Line breaks are skipped, as Go's decoder (and so kubectl) skips them: a long certificate may be
// folded over several lines of a YAML block scalar. Anything else outside the alphabet is an error.
std::optional<std::string> decodeBase64(std::string_view text) {
  static constexpr std::array<int, 256> kTable = base64Table();
  std::string symbols;
  symbols.reserve(text.size());
  for (const char c : text) {
    if (c != '\n' && c != '\r') {
      symbols += c;
    }
  }
  if (symbols.size() % 4 != 0) {
    return std::nullopt;
  }
  std::size_t padding = 0;
  while (padding < 2 && padding < symbols.size() && symbols[symbols.size() - 1 - padding] == '=') {
    ++padding;
  }
  std::string bytes;
  bytes.reserve(symbols.size() / 4 * 3);
  std::uint32_t bits = 0;
  int bitCount = 0;
  for (std::size_t i = 0; i < symbols.size() - padding; ++i) {
    const int value = kTable.at(static_cast<unsigned char>(symbols[i]));
    if (value == kNotBase64) {
      return std::nullopt;
    }
    bits = (bits << 6U) | static_cast<std::uint32_t>(value);
    bitCount += 6;
    if (bitCount >= 8) {
      bitCount -= 8;
      bytes += static_cast<char>((bits >> static_cast<unsigned>(bitCount)) & 0xFFU);
    }
  }
  return bytes;
}

// --- kubeconfig ---------------------------------------------------------------------------------

// One kubeconfig file: its content, and the folder its relative paths start from.
struct Document {
  fs::path directory;
  YAML::Node root;
};

// An entry's body (`cluster:`, `context:` or `user:`) with the folder of the file it came from.
struct Entry {
  YAML::Node body;
  fs::path directory;
};

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text.empty() ? "none" : text;
}

// PEM text from `<key>-data` (base64), else from the file `<key>` names; empty when neither.
Parsed<std::string> pem(const Entry& entry, const std::string& owner, const std::string& key) {
  const std::string dataKey = key + "-data";
  if (const auto data = scalarAt(entry.body, dataKey.c_str()); data && !data->empty()) {
    auto decoded = decodeBase64(*data);
    if (!decoded) {
      return tl::unexpected(owner + ": " + dataKey + " is not valid base64");
    }
    return std::move(*decoded);
  }
  const auto file = scalarAt(entry.body, key.c_str());
  if (!file || file->empty()) {
    return std::string();
  }
  const fs::path path = resolved(entry.directory, *file);
  auto text = readFileText(path);
  if (!text) {
    return tl::unexpected(owner + ": " + key + " " + path.string() +
                          " cannot be read: " + text.error());
  }
  return std::move(*text);
}

// Why the credentials `user` names cannot be used, or nothing: a request sent without them would
// only meet a 401 or 403 that hides the cause.
std::string unsupportedCredentials(const YAML::Node& user, const std::string& owner) {
  if (const auto provider = child(user, "auth-provider")) {
    const std::string name = scalarAt(*provider, "name").value_or("unnamed");
    return owner + ": auth-provider " + inQuotes(name) +
           " is not supported (kubectl itself dropped its auth providers); use the exec "
           "credential plugin your cluster's provider ships, such as gke-gcloud-auth-plugin or "
           "kubelogin";
  }
  if (child(user, "username") || child(user, "password")) {
    return owner +
           ": username and password (basic authentication) are not supported; use a token, a "
           "client certificate or an exec credential plugin";
  }
  return "";
}

// --- kubeconfig ---------------------------------------------------------------------------------

// The kubeconfig files read as one, as kubectl merges them: the first file that names a thing
// wins.
class KubeconfigReader {
 public:
  explicit KubeconfigReader(std::vector<Document> documents) : documents_(std::move(documents)) {}

  Parsed<ClusterConfig> read(const std::string& requestedContext) const {
    const std::string contextName = requestedContext.empty() ? currentContext() : requestedContext;
    if (contextName.empty()) {
      return tl::unexpected("no current-context is set and no context was named (contexts: " +
                            joined(entryNames("contexts")) + ")");
    }
    const auto context = namedEntry("contexts", "context", contextName);
    if (!context) {
      return tl::unexpected("no context named " + inQuotes(contextName) +
                            " (contexts: " + joined(entryNames("contexts")) + ")");
    }
    ClusterConfig config;
    config.namespaceName = scalarAt(context->body, "namespace").value_or("");
    auto clusterRead = readCluster(contextName, context->body, config);
    if (!clusterRead) {
      return tl::unexpected(clusterRead.error());
    }
    auto userRead = readUser(contextName, context->body, config);
    if (!userRead) {
      return tl::unexpected(userRead.error());
    }
    return config;
  }

 private:
  std::string currentContext() const {
    for (const auto& document : documents_) {
      if (auto name = scalarAt(document.root, "current-context"); name && !name->empty()) {
        return *name;
      }
    }
    return "";
  }

  // Each of the list's entries as the file that names it first holds it.
  template <typename Visit>
  void forEachEntry(const char* list, Visit visit) const {
    for (const auto& document : documents_) {
      const auto entries = child(document.root, list);
      if (!entries || !entries->IsSequence()) {
        continue;
      }
      for (const auto& entry : *entries) {
        if (!visit(entry, document.directory)) {
          return;
        }
      }
    }
  }

  std::vector<std::string> entryNames(const char* list) const {
    std::vector<std::string> names;
    forEachEntry(list, [&names](const YAML::Node& entry, const fs::path&) {
      const auto name = scalarAt(entry, "name");
      if (name && std::ranges::find(names, *name) == names.end()) {
        names.push_back(*name);
      }
      return true;
    });
    return names;
  }

  // The body of the entry called `name` in one of the three named lists, from the first file
  // that has one; an entry without a body has an empty one.
  std::optional<Entry> namedEntry(const char* list, const char* body,
                                  const std::string& name) const {
    std::optional<Entry> found;
    forEachEntry(list, [&](const YAML::Node& entry, const fs::path& directory) {
      if (scalarAt(entry, "name") != name) {
        return true;
      }
      found = Entry{child(entry, body).value_or(YAML::Node(YAML::NodeType::Map)), directory};
      return false;
    });
    return found;
  }

  Parsed<void> readCluster(const std::string& contextName, const YAML::Node& context,
                           ClusterConfig& config) const {
    const auto clusterName = scalarAt(context, "cluster");
    if (!clusterName) {
      return tl::unexpected("context " + inQuotes(contextName) + " names no cluster");
    }
    const auto cluster = namedEntry("clusters", "cluster", *clusterName);
    if (!cluster) {
      return tl::unexpected("context " + inQuotes(contextName) + " names cluster " +
                            inQuotes(*clusterName) + ", which is not in clusters");
    }
    const std::string owner = "cluster " + inQuotes(*clusterName);
    config.server = scalarAt(cluster->body, "server").value_or("");
    if (config.server.empty()) {
      return tl::unexpected(owner + " has no server");
    }
    auto ca = pem(*cluster, owner, "certificate-authority");
    if (!ca) {
      return tl::unexpected(ca.error());
    }
    config.caData = std::move(*ca);
    auto insecure = flag(cluster->body, owner, "insecure-skip-tls-verify");
    if (!insecure) {
      return tl::unexpected(insecure.error());
    }
    config.insecureSkipTlsVerify = *insecure;
    // cpprestsdk verifies the certificate against the URL's host and offers no way to name
    // another; refusing beats connecting with a check the user did not ask for.
    if (scalarAt(cluster->body, "tls-server-name")) {
      return tl::unexpected(owner +
                            ": tls-server-name is not supported; use a server URL whose host the "
                            "server's certificate names");
    }
    return {};
  }

  // A context without a user connects anonymously, as kubectl's does.
  Parsed<void> readUser(const std::string& contextName, const YAML::Node& context,
                        ClusterConfig& config) const {
    const auto userName = scalarAt(context, "user");
    if (!userName) {
      return {};
    }
    const auto user = namedEntry("users", "user", *userName);
    if (!user) {
      return tl::unexpected("context " + inQuotes(contextName) + " names user " +
                            inQuotes(*userName) + ", which is not in users");
    }
    const std::string owner = "user " + inQuotes(*userName);
    if (auto refused = unsupportedCredentials(user->body, owner); !refused.empty()) {
      return tl::unexpected(std::move(refused));
    }
    auto cert = pem(*user, owner, "client-certificate");
    if (!cert) {
      return tl::unexpected(cert.error());
    }
    config.clientCertData = std::move(*cert);
    auto key = pem(*user, owner, "client-key");
    if (!key) {
      return tl::unexpected(key.error());
    }
    config.clientKeyData = std::move(*key);
    config.token = scalarAt(user->body, "token").value_or("");
    if (const auto tokenFile = scalarAt(user->body, "tokenFile");
        tokenFile && !tokenFile->empty()) {
      config.tokenFile = resolved(user->directory, *tokenFile).string();
    }
    if (const auto exec = child(user->body, "exec")) {
      auto plugin = execPlugin(*exec, user->directory, owner + ": exec");
      if (!plugin) {
        return tl::unexpected(plugin.error());
      }
      config.exec = std::move(*plugin);
    }
    return {};
  }

  std::vector<Document> documents_;
};

std::string markText(const YAML::Mark& mark) {
  if (mark.is_null()) {
    return "";
  }
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ": ";
}

std::string environment(const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; the operator sets no variables
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// The file at `path` as YAML, or why it cannot be read; nothing when `skipMissing` and it does not
// exist.
Parsed<std::optional<Document>> readDocument(const std::string& path, bool skipMissing) {
  const std::string where = "kubeconfig " + path + ": ";
  const auto text = readFileText(path);
  if (!text) {
    if (skipMissing && !fs::exists(path)) {
      return std::nullopt;
    }
    return tl::unexpected(where + "cannot be read: " + text.error());
  }
  try {
    const YAML::Node root = YAML::Load(*text);
    if (!root.IsMap()) {
      return tl::unexpected(where + "is not a YAML mapping");
    }
    return Document{fs::path(path).parent_path(), root};
  } catch (const YAML::Exception& error) {
    return tl::unexpected(where + markText(error.mark) + error.msg);
  }
}

Result<ClusterConfig> readMerged(const std::vector<std::string>& paths, bool skipMissing,
                                 const std::string& context) {
  std::vector<Document> documents;
  for (const auto& path : paths) {
    auto document = readDocument(path, skipMissing);
    if (!document) {
      return tl::unexpected(configError(document.error()));
    }
    if (*document) {
      documents.push_back(std::move(**document));
    }
  }
  std::string named;
  for (const auto& path : paths) {
    named += (named.empty() ? "" : ", ") + path;
  }
  if (documents.empty()) {
    return tl::unexpected(configError("kubeconfig: none of " + named + " exists"));
  }
  auto config = KubeconfigReader(std::move(documents)).read(context);
  if (!config) {
    return tl::unexpected(configError("kubeconfig " + named + ": " + config.error()));
  }
  return std::move(*config);
}

}  // namespace

Result<ClusterConfig> loadKubeconfig(const std::string& path, const std::string& context) {
  return readMerged({path}, false, context);
}

Result<ClusterConfig> loadKubeconfigs(const std::vector<std::string>& paths,
                                      const std::string& context) {
  return readMerged(paths, true, context);
}

std::vector<std::string> defaultKubeconfigFiles() {
  std::vector<std::string> files;
  std::stringstream listed(environment("KUBECONFIG"));
  for (std::string file; std::getline(listed, file, ':');) {
    if (!file.empty()) {
      files.push_back(file);
    }
  }
  if (files.empty()) {
    files.push_back(environment("HOME") + "/.kube/config");
  }
  return files;
}

Result<ClusterConfig> inClusterConfig(const std::filesystem::path& serviceAccountDir) {
  const std::string host = environment("KUBERNETES_SERVICE_HOST");
  const std::string port = environment("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return tl::unexpected(
        configError("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must "
                    "be set; is this running in a Pod?"));
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  ClusterConfig config;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  const fs::path caFile = serviceAccountDir / "ca.crt";
  auto ca = readFileText(caFile);
  if (!ca) {
    return tl::unexpected(
        configError("in-cluster config: " + caFile.string() + " cannot be read: " + ca.error()));
  }
  config.caData = std::move(*ca);
  config.tokenFile = (serviceAccountDir / "token").string();
  return config;
}

Result<std::string> readToken(const ClusterConfig& config) {
  if (!config.token.empty() || config.tokenFile.empty()) {
    return config.token;
  }
  const auto text = readFileText(config.tokenFile);
  if (!text) {
    return tl::unexpected(
        configError("token file " + config.tokenFile + " cannot be read: " + text.error()));
  }
  std::string token = trimmed(*text);
  if (token.empty()) {
    return tl::unexpected(configError("token file " + config.tokenFile + " is empty"));
  }
  return token;
}

}  // namespace autotune::k8s
