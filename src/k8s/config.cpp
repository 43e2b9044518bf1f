#include "k8s/config.h"

#include <yaml-cpp/yaml.h>

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

namespace autotune::k8s {
namespace {

namespace fs = std::filesystem;

// Internal steps report a bare reason; the public functions prefix it with where it came from.
template <typename T>
using Parsed = tl::expected<T, std::string>;

Error configError(std::string message) {
  Error error;
  error.kind = ErrorKind::kOther;
  error.message = std::move(message);
  return error;
}

std::string inQuotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

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

// The value under `key` of a mapping; nothing when `node` is not a mapping or the value is absent
// or null.
std::optional<YAML::Node> child(const YAML::Node& node, const char* key) {
  if (!node.IsDefined() || !node.IsMap()) {
    return std::nullopt;
  }
  YAML::Node value = node[key];
  if (!value.IsDefined() || value.IsNull()) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> scalarAt(const YAML::Node& node, const char* key) {
  const auto value = child(node, key);
  if (!value || !value->IsScalar()) {
    return std::nullopt;
  }
  return value->Scalar();
}

std::vector<std::string> entryNames(const YAML::Node& root, const char* list) {
  std::vector<std::string> names;
  const auto entries = child(root, list);
  if (entries && entries->IsSequence()) {
    for (const auto& entry : *entries) {
      if (const auto name = scalarAt(entry, "name")) {
        names.push_back(*name);
      }
    }
  }
  return names;
}

// The body (`cluster:`, `context:` or `user:`) of the entry called `name` in one of the three
// named lists; an entry without a body has an empty one.
std::optional<YAML::Node> namedEntry(const YAML::Node& root, const char* list, const char* body,
                                     const std::string& name) {
  const auto entries = child(root, list);
  if (!entries || !entries->IsSequence()) {
    return std::nullopt;
  }
  for (const auto& entry : *entries) {
    if (scalarAt(entry, "name") == name) {
      return child(entry, body).value_or(YAML::Node(YAML::NodeType::Map));
    }
  }
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text.empty() ? "none" : text;
}

class KubeconfigReader {
 public:
  KubeconfigReader(const std::string& path, const YAML::Node& root)
      : directory_(fs::path(path).parent_path()), root_(root) {}

  Parsed<ClusterConfig> read(const std::string& requestedContext) const {
    const std::string contextName = requestedContext.empty()
                                        ? scalarAt(root_, "current-context").value_or("")
                                        : requestedContext;
    if (contextName.empty()) {
      return tl::unexpected("no current-context is set and no context was named (contexts: " +
                            joined(entryNames(root_, "contexts")) + ")");
    }
    const auto context = namedEntry(root_, "contexts", "context", contextName);
    if (!context) {
      return tl::unexpected("no context named " + inQuotes(contextName) +
                            " (contexts: " + joined(entryNames(root_, "contexts")) + ")");
    }
    ClusterConfig config;
    config.namespaceName = scalarAt(*context, "namespace").value_or("");
    auto clusterRead = readCluster(contextName, *context, config);
    if (!clusterRead) {
      return tl::unexpected(clusterRead.error());
    }
    auto userRead = readUser(contextName, *context, config);
    if (!userRead) {
      return tl::unexpected(userRead.error());
    }
    return config;
  }

 private:
  Parsed<void> readCluster(const std::string& contextName, const YAML::Node& context,
                           ClusterConfig& config) const {
    const auto clusterName = scalarAt(context, "cluster");
    if (!clusterName) {
      return tl::unexpected("context " + inQuotes(contextName) + " names no cluster");
    }
    const auto cluster = namedEntry(root_, "clusters", "cluster", *clusterName);
    if (!cluster) {
      return tl::unexpected("context " + inQuotes(contextName) + " names cluster " +
                            inQuotes(*clusterName) + ", which is not in clusters");
    }
    const std::string owner = "cluster " + inQuotes(*clusterName);
    config.server = scalarAt(*cluster, "server").value_or("");
    if (config.server.empty()) {
      return tl::unexpected(owner + " has no server");
    }
    auto ca = pem(*cluster, owner, "certificate-authority");
    if (!ca) {
      return tl::unexpected(ca.error());
    }
    config.caData = std::move(*ca);
    auto insecure = flag(*cluster, owner, "insecure-skip-tls-verify");
    if (!insecure) {
      return tl::unexpected(insecure.error());
    }
    config.insecureSkipTlsVerify = *insecure;
    // cpprestsdk verifies the certificate against the URL's host and offers no way to name
    // another; refusing beats connecting with a check the user did not ask for.
    if (scalarAt(*cluster, "tls-server-name")) {
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
    const auto user = namedEntry(root_, "users", "user", *userName);
    if (!user) {
      return tl::unexpected("context " + inQuotes(contextName) + " names user " +
                            inQuotes(*userName) + ", which is not in users");
    }
    const std::string owner = "user " + inQuotes(*userName);
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
    config.token = scalarAt(*user, "token").value_or("");
    if (const auto tokenFile = scalarAt(*user, "tokenFile"); tokenFile && !tokenFile->empty()) {
      config.tokenFile = resolved(*tokenFile).string();
    }
    return {};
  }

  // PEM text from `<key>-data` (base64), else from the file `<key>` names; empty when neither.
  Parsed<std::string> pem(const YAML::Node& entry, const std::string& owner,
                          const std::string& key) const {
    const std::string dataKey = key + "-data";
    if (const auto data = scalarAt(entry, dataKey.c_str()); data && !data->empty()) {
      auto decoded = decodeBase64(*data);
      if (!decoded) {
        return tl::unexpected(owner + ": " + dataKey + " is not valid base64");
      }
      return std::move(*decoded);
    }
    const auto file = scalarAt(entry, key.c_str());
    if (!file || file->empty()) {
      return std::string();
    }
    const fs::path path = resolved(*file);
    auto text = readFileText(path);
    if (!text) {
      return tl::unexpected(owner + ": " + key + " " + path.string() +
                            " cannot be read: " + text.error());
    }
    return std::move(*text);
  }

  // False unless the kubeconfig says true: skipping verification is never a default.
  static Parsed<bool> flag(const YAML::Node& entry, const std::string& owner, const char* key) {
    const auto value = child(entry, key);
    if (!value) {
      return false;
    }
    bool set = false;
    if (!value->IsScalar() || !YAML::convert<bool>::decode(*value, set)) {
      return tl::unexpected(owner + ": " + key + " must be true or false");
    }
    return set;
  }

  fs::path resolved(const std::string& file) const {
    const fs::path path(file);
    return path.is_relative() ? directory_ / path : path;
  }

  fs::path directory_;
  YAML::Node root_;
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

}  // namespace

Result<ClusterConfig> loadKubeconfig(const std::string& path, const std::string& context) {
  const std::string where = "kubeconfig " + path + ": ";
  const auto text = readFileText(path);
  if (!text) {
    return tl::unexpected(configError(where + "cannot be read: " + text.error()));
  }
  try {
    const YAML::Node root = YAML::Load(*text);
    if (!root.IsMap()) {
      return tl::unexpected(configError(where + "is not a YAML mapping"));
    }
    auto config = KubeconfigReader(path, root).read(context);
    if (!config) {
      return tl::unexpected(configError(where + config.error()));
    }
    return std::move(*config);
  } catch (const YAML::Exception& error) {
    return tl::unexpected(configError(where + markText(error.mark) + error.msg));
  }
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
