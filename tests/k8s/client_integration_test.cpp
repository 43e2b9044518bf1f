// The client against a real kube-apiserver: every request kind, and the errors a controller
// branches on, as the server really sends them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "k8s/access_review.h"
#include "k8s/client.h"
#include "k8s/resources.h"
#include "support/control_plane.h"

namespace autotune::k8s {
namespace {

using nlohmann::json;
using testing::ApiServerTest;

const Resource kDeployments{"apps", "v1", "deployments", true};

[[maybe_unused]] const auto* const kControlPlane =
    ::testing::AddGlobalTestEnvironment(new testing::ControlPlane);

json configMap(const std::string& name, json data = {{"key", "value"}}, json labels = {}) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", name}}},
                 {"data", std::move(data)}};
  if (!labels.is_null()) {
    object["metadata"]["labels"] = std::move(labels);
  }
  return object;
}

class Client : public ApiServerTest {};

TEST_F(Client, CreatesGetsAndUpdatesAnObject) {
  auto created = client().create(kConfigMaps, ns(), configMap("settings"));
  ASSERT_TRUE(created) << describe(created.error());
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());

  auto fetched = client().get(kConfigMaps, ns(), "settings");
  ASSERT_TRUE(fetched) << describe(fetched.error());
  (*fetched)["data"]["key"] = "changed";
  auto updated = client().update(kConfigMaps, ns(), *fetched);
  ASSERT_TRUE(updated) << describe(updated.error());
  EXPECT_EQ((*client().get(kConfigMaps, ns(), "settings"))["data"]["key"], "changed");
}

TEST_F(Client, AStaleResourceVersionIsAConflict) {
  auto created = client().create(kConfigMaps, ns(), configMap("settings"));
  ASSERT_TRUE(created);
  json first = *created;
  json second = *created;
  first["data"]["key"] = "first";
  ASSERT_TRUE(client().update(kConfigMaps, ns(), first));
  second["data"]["key"] = "second";
  const auto stale = client().update(kConfigMaps, ns(), second);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().kind, ErrorKind::kConflict) << describe(stale.error());
  EXPECT_EQ(stale.error().httpStatus, 409);
  EXPECT_FALSE(stale.error().retryable());
}

TEST_F(Client, CreatingTwiceIsAlreadyExistsAndAMissingObjectIsNotFound) {
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("settings")));
  const auto again = client().create(kConfigMaps, ns(), configMap("settings"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::kAlreadyExists) << describe(again.error());

  const auto missing = client().get(kConfigMaps, ns(), "nothing-here");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound) << describe(missing.error());
}

TEST_F(Client, AnInvalidObjectNamesTheFieldThatIsWrong) {
  const auto invalid = client().create(kConfigMaps, ns(), configMap("Not_A_Valid_Name"));
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().kind, ErrorKind::kInvalid) << describe(invalid.error());
  ASSERT_FALSE(invalid.error().causes.empty());
  EXPECT_EQ(invalid.error().causes.front().field, "metadata.name");
}

TEST_F(Client, ListsByLabelAndFollowsContinueTokens) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client().create(
        kConfigMaps, ns(),
        configMap("labelled-" + std::to_string(i), {{"i", "x"}}, {{"autotune.io/job", "one"}})));
  }
  ASSERT_TRUE(client().create(kConfigMaps, ns(),
                              configMap("other", {{"i", "x"}}, {{"autotune.io/job", "two"}})));
  ListOptions options;
  options.labelSelector = "autotune.io/job=one";
  options.limit = 2;
  const auto page = client().list(kConfigMaps, ns(), options);
  ASSERT_TRUE(page) << describe(page.error());
  EXPECT_EQ((*page)["items"].size(), 2U);
  EXPECT_FALSE((*page)["metadata"]["continue"].get<std::string>().empty());

  const auto all = client().listAll(kConfigMaps, ns(), options);
  ASSERT_TRUE(all) << describe(all.error());
  EXPECT_EQ(all->size(), 5U);
}

TEST_F(Client, PagesThroughMoreObjectsThanOnePageHolds) {
  constexpr int kObjects = 1200;
  constexpr int kPageSize = 500;
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(client().create(
        kConfigMaps, ns(),
        configMap("many-" + std::to_string(i), {{"i", "x"}}, {{"autotune.io/job", "many"}})));
  }
  ListOptions options;
  options.labelSelector = "autotune.io/job=many";
  options.limit = kPageSize;
  int pages = 0;
  std::set<std::string> names;
  do {
    const auto page = client().list(kConfigMaps, ns(), options);
    ASSERT_TRUE(page) << describe(page.error());
    ++pages;
    for (const auto& item : (*page)["items"]) {
      names.insert(item["metadata"]["name"].get<std::string>());
    }
    options.continueToken = (*page)["metadata"].value("continue", "");
  } while (!options.continueToken.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kObjects));

  options.continueToken.clear();
  const auto all = client().listAll(kConfigMaps, ns(), options);
  ASSERT_TRUE(all) << describe(all.error());
  EXPECT_EQ(all->size(), names.size());
}

TEST_F(Client, PatchesByMergeByJsonPatchAndByServerSideApply) {
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("settings")));
  ASSERT_TRUE(client().patch(kConfigMaps, ns(), "settings", PatchType::kMerge,
                             {{"data", {{"merged", "yes"}}}}));
  ASSERT_TRUE(
      client().patch(kConfigMaps, ns(), "settings", PatchType::kJson,
                     json::array({{{"op", "add"}, {"path", "/data/patched"}, {"value", "yes"}}})));
  ApplyOptions apply;
  apply.fieldManager = "autotune-operator";
  auto applied = client().patch(kConfigMaps, ns(), "applied", PatchType::kApply,
                                {{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"metadata", {{"name", "applied"}}},
                                 {"data", {{"owner", "operator"}}}},
                                apply);
  ASSERT_TRUE(applied) << describe(applied.error());
  EXPECT_EQ((*applied)["metadata"]["managedFields"][0]["manager"], "autotune-operator");

  const auto settings = client().get(kConfigMaps, ns(), "settings");
  ASSERT_TRUE(settings);
  EXPECT_EQ((*settings)["data"]["key"], "value");
  EXPECT_EQ((*settings)["data"]["merged"], "yes");
  EXPECT_EQ((*settings)["data"]["patched"], "yes");
}

TEST_F(Client, DeletesAnObject) {
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("settings")));
  ASSERT_TRUE(client().remove(kConfigMaps, ns(), "settings"));
  const auto gone = client().get(kConfigMaps, ns(), "settings");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::kNotFound);
}

// An object made again under the same name is not the one a UID precondition names.
TEST_F(Client, ADeleteWithAUidPreconditionLeavesAnotherObjectOfThatName) {
  const auto first = client().create(kConfigMaps, ns(), configMap("reused"));
  ASSERT_TRUE(first);
  const std::string firstUid = (*first)["metadata"]["uid"];
  ASSERT_TRUE(client().remove(kConfigMaps, ns(), "reused"));
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("reused")));
  const auto refused =
      client().remove(kConfigMaps, ns(), "reused", Propagation::kBackground, {}, firstUid);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kConflict);
  EXPECT_TRUE(client().get(kConfigMaps, ns(), "reused"));
}

TEST_F(Client, DeletingWithOrphanPropagationLeavesTheDependentsToBeOrphaned) {
  const json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "owner"}}},
      {"spec",
       {{"replicas", 0},
        {"selector", {{"matchLabels", {{"app", "owner"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "owner"}}}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", "example.org/x:1"}}}}}}}}}}};
  ASSERT_TRUE(client().create(kDeployments, ns(), deployment));
  const auto removed = client().remove(kDeployments, ns(), "owner", Propagation::kOrphan);
  ASSERT_TRUE(removed) << describe(removed.error());
  EXPECT_EQ((*removed)["metadata"]["finalizers"][0], "orphan");
}

TEST_F(Client, AUserWithoutRightsIsForbidden) {
  const k8s::Client nobody = client().impersonating("system:serviceaccount:default:nobody");
  const auto forbidden = nobody.list(kConfigMaps, ns());
  ASSERT_FALSE(forbidden);
  EXPECT_EQ(forbidden.error().kind, ErrorKind::kForbidden) << describe(forbidden.error());
  EXPECT_EQ(forbidden.error().httpStatus, 403);
}

const Resource kServiceAccounts{"", "v1", "serviceaccounts", true};
const Resource kClusterRoles{"rbac.authorization.k8s.io", "v1", "clusterroles", false};
const Resource kClusterRoleBindings{"rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                    false};

// A token of ServiceAccount `name` of namespace `ns`, made by the API server (TokenRequest).
std::string tokenOf(const k8s::Client& client, const std::string& ns, const std::string& name) {
  if (!client.create(
          kServiceAccounts, ns,
          {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}})) {
    return "";
  }
  // The token subresource, reached as a resource path of its own.
  const Resource tokens{"", "v1", "serviceaccounts/" + name + "/token", true};
  const auto requested = client.create(tokens, ns,
                                       {{"apiVersion", "authentication.k8s.io/v1"},
                                        {"kind", "TokenRequest"},
                                        {"spec", {{"expirationSeconds", 600}}}});
  return requested ? requested->at("status").value("token", "") : "";
}

TEST_F(Client, AccessToAnEndpointIsWhatTheApiServerSaysOfTheBearersToken) {
  const std::string reader = tokenOf(client(), ns(), "reader");
  const std::string stranger = tokenOf(client(), ns(), "stranger");
  ASSERT_FALSE(reader.empty());
  ASSERT_FALSE(stranger.empty());
  const std::string role = "metrics-reader-" + ns();
  ASSERT_TRUE(
      client().create(kClusterRoles, "",
                      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                       {"kind", "ClusterRole"},
                       {"metadata", {{"name", role}}},
                       {"rules", {{{"nonResourceURLs", {"/metrics"}}, {"verbs", {"get"}}}}}}));
  ASSERT_TRUE(client().create(
      kClusterRoleBindings, "",
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "ClusterRoleBinding"},
       {"metadata", {{"name", role}}},
       {"roleRef",
        {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
       {"subjects", {{{"kind", "ServiceAccount"}, {"name", "reader"}, {"namespace", ns()}}}}}));

  // The authorizer hears of the binding through its own watch: ask until it has.
  Result<Verdict> verdict = Verdict::kForbidden;
  for (int attempt = 0; attempt < 100 && verdict && *verdict != Verdict::kAllowed; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    verdict = AccessReviewer(client(), "/metrics", "get").review(reader);
  }
  ASSERT_TRUE(verdict) << describe(verdict.error());
  EXPECT_EQ(*verdict, Verdict::kAllowed);

  AccessReviewer reviewer(client(), "/metrics", "get");
  EXPECT_EQ(reviewer.review(stranger), Verdict::kForbidden);
  EXPECT_EQ(reviewer.review("made.up.token"), Verdict::kUnauthenticated);
  EXPECT_EQ(AccessReviewer(client(), "/debug/pprof/", "get").review(reader), Verdict::kForbidden)
      << "the right is to that path alone";
  client().remove(kClusterRoleBindings, "", role);
  client().remove(kClusterRoles, "", role);
}

const Resource kCustomResourceDefinitions{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                          false};
const Resource kWidgets{"test.autotune.io", "v1", "widgets", true};

// A namespaced test CRD with a status subresource, created once per control plane.
bool installWidgetCrd(const k8s::Client& client) {
  const json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.test.autotune.io"}}},
      {"spec",
       {{"group", "test.autotune.io"},
        {"scope", "Namespaced"},
        {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
        {"versions",
         {{{"name", "v1"},
           {"served", true},
           {"storage", true},
           {"subresources", {{"status", json::object()}}},
           {"schema",
            {{"openAPIV3Schema",
              {{"type", "object"},
               {"properties",
                {{"spec", {{"type", "object"}, {"properties", {{"size", {{"type", "integer"}}}}}}},
                 {"status",
                  {{"type", "object"},
                   {"properties", {{"phase", {{"type", "string"}}}}}}}}}}}}}}}}}}};
  auto created = client.create(kCustomResourceDefinitions, "", crd);
  if (!created && created.error().kind != ErrorKind::kAlreadyExists) {
    return false;
  }
  // Requests for the new resource succeed once the CRD is Established.
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto found = client.get(kCustomResourceDefinitions, "", "widgets.test.autotune.io");
    for (const auto& condition :
         found ? (*found)["status"].value("conditions", json::array()) : json::array()) {
      if (condition.value("type", "") == "Established" && condition.value("status", "") == "True") {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST_F(Client, CustomResourcesHaveTheirOwnStatusSubresource) {
  ASSERT_TRUE(installWidgetCrd(client()));
  auto created = client().create(kWidgets, ns(),
                                 {{"apiVersion", "test.autotune.io/v1"},
                                  {"kind", "Widget"},
                                  {"metadata", {{"name", "w"}}},
                                  {"spec", {{"size", 3}}}});
  ASSERT_TRUE(created) << describe(created.error());

  json withStatus = *created;
  withStatus["status"] = {{"phase", "Running"}};
  withStatus["spec"]["size"] = 99;  // ignored: the status subresource writes status only
  auto written = client().updateStatus(kWidgets, ns(), withStatus);
  ASSERT_TRUE(written) << describe(written.error());
  EXPECT_EQ((*written)["status"]["phase"], "Running");
  EXPECT_EQ((*written)["spec"]["size"], 3);

  json stale = *created;
  stale["spec"]["size"] = 4;
  const auto conflict = client().update(kWidgets, ns(), stale);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().kind, ErrorKind::kConflict) << describe(conflict.error());

  json fresh = *written;
  fresh["spec"]["size"] = 4;
  fresh["status"]["phase"] = "Ignored";  // and the main resource writes no status
  auto updated = client().update(kWidgets, ns(), fresh);
  ASSERT_TRUE(updated) << describe(updated.error());
  EXPECT_EQ((*updated)["spec"]["size"], 4);
  EXPECT_EQ((*updated)["status"]["phase"], "Running");
  ASSERT_TRUE(client().remove(kWidgets, ns(), "w"));
}

// A fresh self-signed CA in `directory`: ca.crt and ca.key.
std::string makeCa(const std::string& directory, const std::string& name) {
  const std::string command = "mkdir -p " + directory + " && openssl req -x509 -newkey rsa:2048 " +
                              "-nodes -days 1 -subj '/CN=" + name + "' -keyout " + directory +
                              "/ca.key -out " + directory + "/ca.crt 2>/dev/null";
  // NOLINTNEXTLINE(concurrency-mt-unsafe,cert-env33-c): making the test's own CA
  EXPECT_EQ(std::system(command.c_str()), 0);
  std::ifstream file(directory + "/ca.crt");
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// OpenSSL's default trust store, for as long as the object lives: the file SSL_CERT_FILE names.
class SystemTrustStore {
 public:
  explicit SystemTrustStore(const std::string& file) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the test's own thread, no request in flight
    setenv("SSL_CERT_FILE", file.c_str(), 1);
  }
  SystemTrustStore(const SystemTrustStore&) = delete;
  SystemTrustStore& operator=(const SystemTrustStore&) = delete;
  ~SystemTrustStore() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): as above
    unsetenv("SSL_CERT_FILE");
  }
};

Result<json> getOnce(const ClusterConfig& config, const std::string& ns) {
  RequestPolicy once;
  once.maxRetries = 0;
  return k8s::Client(makeHttpTransport(config), once).get(kNamespaces, "", ns);
}

// A server whose certificate another CA signed is refused before any request is sent.
TEST_F(Client, AServerCertifiedByAnotherCaIsRefused) {
  auto config = loadKubeconfig(testing::ControlPlane::kubeconfigPath());
  ASSERT_TRUE(config) << describe(config.error());
  const std::string directory = ::testing::TempDir() + "other-ca-" + ns();
  config->caData = makeCa(directory, "other-ca");

  const auto refused = getOnce(*config, ns());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kTransport) << describe(refused.error());
  std::filesystem::remove_all(directory);
}

// A kubeconfig that names a CA trusts that CA alone: a server whose CA the system store holds (as
// it holds the public CAs) is refused. One that names none trusts the system store, as kubectl
// does.
TEST_F(Client, TheKubeconfigsCaReplacesTheSystemTrustStore) {
  auto config = loadKubeconfig(testing::ControlPlane::kubeconfigPath());
  ASSERT_TRUE(config) << describe(config.error());
  const std::string directory = ::testing::TempDir() + "system-store-" + ns();
  const std::string serversCa = directory + "/servers-ca.crt";
  std::filesystem::create_directories(directory);
  std::ofstream(serversCa) << config->caData;
  const SystemTrustStore systemStore(serversCa);

  ClusterConfig namingAnotherCa = *config;
  namingAnotherCa.caData = makeCa(directory, "DigiCert Global Root G2");
  const auto refused = getOnce(namingAnotherCa, ns());
  ASSERT_FALSE(refused) << "the system store was trusted beside the kubeconfig's CA";
  EXPECT_EQ(refused.error().kind, ErrorKind::kTransport) << describe(refused.error());

  ClusterConfig namingNoCa = *config;
  namingNoCa.caData.clear();
  const auto trusted = getOnce(namingNoCa, ns());
  EXPECT_TRUE(trusted) << describe(trusted.error());
  std::filesystem::remove_all(directory);
}

// Watching from a list's resourceVersion sees every later change, even those made before the
// watch connected.
TEST_F(Client, AWatchFromAListSeesEveryLaterChangeInOrder) {
  const auto listed = client().list(kConfigMaps, ns());
  ASSERT_TRUE(listed);
  WatchOptions options;
  options.resourceVersion = (*listed)["metadata"]["resourceVersion"];
  options.timeoutSeconds = 60;

  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("watched")));
  ASSERT_TRUE(
      client().patch(kConfigMaps, ns(), "watched", PatchType::kMerge, {{"data", {{"k", "2"}}}}));
  ASSERT_TRUE(client().remove(kConfigMaps, ns(), "watched"));

  std::vector<std::string> seen;
  const auto watched = client().watch(kConfigMaps, ns(), options, [&](const WatchEvent& event) {
    if (event.type != "BOOKMARK") {
      seen.push_back(event.type + " " + event.object["metadata"]["name"].get<std::string>());
    }
    return seen.size() < 3;
  });
  ASSERT_TRUE(watched) << describe(watched.error());
  EXPECT_EQ(seen,
            (std::vector<std::string>{"ADDED watched", "MODIFIED watched", "DELETED watched"}));
}

// --- exec credential plugins, as EKS, GKE and AKS kubeconfigs use them ---------------------------

const Resource kRoles{"rbac.authorization.k8s.io", "v1", "roles", true};
const Resource kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings", true};

class ExecPluginClient : public Client {
 protected:
  void SetUp() override {
    Client::SetUp();
    directory_ = ::testing::TempDir() + "exec-plugin-" + ns();
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override {
    std::filesystem::remove_all(directory_);
    Client::TearDown();
  }

  // A kubeconfig for the control plane whose user runs `script` (a shell script's body), loaded.
  Result<ClusterConfig> kubeconfigRunning(const std::string& script) {
    auto admin = loadKubeconfig(testing::ControlPlane::kubeconfigPath());
    if (!admin) {
      return admin;
    }
    std::ofstream(directory_ + "/ca.crt") << admin->caData;
    const std::string plugin = directory_ + "/plugin.sh";
    std::ofstream(plugin) << "#!/bin/sh\ncd \"$(dirname \"$0\")\"\n" << script;
    std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
    std::ofstream(directory_ + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\ncurrent-context: eks\n"
        << "clusters: [{name: eks, cluster: {server: '" << admin->server
        << "', certificate-authority: ca.crt}}]\n"
        << "contexts: [{name: eks, context: {cluster: eks, user: plugin, namespace: " << ns()
        << "}}]\n"
        << "users:\n- name: plugin\n  user:\n    exec:\n"
        << "      apiVersion: client.authentication.k8s.io/v1\n"
        << "      command: ./plugin.sh\n      interactiveMode: Never\n";
    return loadKubeconfig(directory_ + "/kubeconfig");
  }

  // The ServiceAccount `name` may read ConfigMaps of the test's namespace; its token.
  std::string readerToken(const std::string& name) {
    const json rules = {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"list"}}}};
    const bool granted =
        client().create(kRoles, ns(),
                        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                         {"kind", "Role"},
                         {"metadata", {{"name", name}}},
                         {"rules", rules}}) &&
        client().create(
            kRoleBindings, ns(),
            {{"apiVersion", "rbac.authorization.k8s.io/v1"},
             {"kind", "RoleBinding"},
             {"metadata", {{"name", name}}},
             {"roleRef",
              {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
             {"subjects", {{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", ns()}}}}});
    return granted ? tokenOf(client(), ns(), name) : "";
  }

  // How many times the plugin ran: each run appends a line to `runs`.
  int pluginRuns() const {
    std::ifstream runs(directory_ + "/runs");
    return static_cast<int>(
        std::count(std::istreambuf_iterator<char>(runs), std::istreambuf_iterator<char>(), '\n'));
  }

  std::string directory_;
};

// The plugin's first token is refused (401): the client runs it again and sends the new one; that
// one is kept until its expirationTimestamp, then fetched again.
TEST_F(ExecPluginClient, ItsTokenIsSentKeptUntilItExpiresAndFetchedAgainAfterA401) {
  const std::string token = readerToken("reader");
  ASSERT_FALSE(token.empty());
  // The RBAC authorizer learns of the binding through its watch: ask as the reader until it has.
  auto asReader = loadKubeconfig(testing::ControlPlane::kubeconfigPath());
  ASSERT_TRUE(asReader) << describe(asReader.error());
  asReader->clientCertData.clear();
  asReader->clientKeyData.clear();
  asReader->token = token;
  const k8s::Client reader(makeHttpTransport(*asReader));
  for (int attempt = 0; attempt < 100 && !reader.list(kConfigMaps, ns()); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reader.list(kConfigMaps, ns()));

  // Each token expires 5 s after the plugin printed it; the plugin says when in `expires`.
  auto config = kubeconfigRunning(
      "echo run >> runs\n"
      "if [ \"$(wc -l < runs)\" -eq 1 ]; then token=made.up.token; else token=" +
      token +
      "; fi\n"
      "expires=$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ)\n"
      "echo \"$expires\" > expires\n"
      "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}' \"$token\" \"$expires\"\n");
  ASSERT_TRUE(config) << describe(config.error());
  const k8s::Client asPlugin(makeHttpTransport(*config));
  const auto listed = asPlugin.list(kConfigMaps, ns());
  ASSERT_TRUE(listed) << describe(listed.error());
  EXPECT_EQ(pluginRuns(), 2) << "the refused token was fetched again once";

  ASSERT_TRUE(asPlugin.list(kConfigMaps, ns()));
  EXPECT_EQ(pluginRuns(), 2) << "a token that has not expired is kept";

  std::string expires;
  std::ifstream(directory_ + "/expires") >> expires;
  std::tm parts{};
  ASSERT_NE(strptime(expires.c_str(), "%Y-%m-%dT%H:%M:%SZ", &parts), nullptr) << expires;
  const auto expiry = std::chrono::system_clock::from_time_t(timegm(&parts));
  while (std::chrono::system_clock::now() <= expiry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(asPlugin.list(kConfigMaps, ns()));
  EXPECT_EQ(pluginRuns(), 3) << "an expired token is fetched again before it is sent";
}

// A plugin that fails stops the request before it is sent; its own words say why.
TEST_F(ExecPluginClient, APluginThatFailsIsShownNotSentAnonymously) {
  auto config = kubeconfigRunning(
      "echo run >> runs\n"
      "echo 'error: You must be logged in to the server (the SSO session has expired)' >&2\n"
      "exit 1\n");
  ASSERT_TRUE(config) << describe(config.error());
  const auto listed = k8s::Client(makeHttpTransport(*config)).list(kConfigMaps, ns());
  ASSERT_FALSE(listed);
  EXPECT_NE(listed.error().message.find(
                "exec credential plugin \"" + directory_ +
                "/./plugin.sh\": exited with status 1: error: You must be logged in to the server "
                "(the SSO session has expired)"),
            std::string::npos)
      << describe(listed.error());
  EXPECT_EQ(listed.error().httpStatus, 0) << "no request reached the server";
  EXPECT_GE(pluginRuns(), 1);
}

// A plugin may hand out a client certificate instead of a token: here the control plane's admin
// certificate, which may list Namespaces where no ServiceAccount of the test may.
TEST_F(ExecPluginClient, AClientCertificateItPrintsIsPresented) {
  const std::string admin = testing::ControlPlane::kubeconfigPath();
  auto adminConfig = loadKubeconfig(admin);
  ASSERT_TRUE(adminConfig) << describe(adminConfig.error());
  ASSERT_FALSE(adminConfig->clientCertData.empty());
  std::ofstream(directory_ + "/admin.crt") << adminConfig->clientCertData;
  std::ofstream(directory_ + "/admin.key") << adminConfig->clientKeyData;
  auto config = kubeconfigRunning(
      "python3 -c 'import json; print(json.dumps({\"apiVersion\": "
      "\"client.authentication.k8s.io/v1\", \"kind\": \"ExecCredential\", \"status\": "
      "{\"clientCertificateData\": open(\"admin.crt\").read(), \"clientKeyData\": "
      "open(\"admin.key\").read()}}))'\n");
  ASSERT_TRUE(config) << describe(config.error());
  ASSERT_TRUE(config->clientCertData.empty()) << "the kubeconfig itself names no certificate";
  const auto namespaces = k8s::Client(makeHttpTransport(*config)).get(kNamespaces, "", ns());
  ASSERT_TRUE(namespaces) << describe(namespaces.error());
  EXPECT_EQ((*namespaces)["metadata"]["name"], ns());
}

}  // namespace
}  // namespace autotune::k8s
