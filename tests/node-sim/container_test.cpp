// What the simulated kubelet derives from a Pod for its container, without a cluster: the host
// name, the hosts file that lets the Pods of a multi-node trial find each other, and the
// environment the Job controller's fields reach.

#include "container.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/lines.h"

namespace autotune::nodesim {
namespace {

using testing::linesOf;

using nlohmann::json;

constexpr const char* kIndexKey = "batch.kubernetes.io/job-completion-index";

// A Pod as the Job controller makes one of an Indexed Job whose template has a subdomain.
json indexedJobPod(const std::string& job, const std::string& uid, int index,
                   const std::string& subdomain = "trial") {
  const std::string rank = std::to_string(index);
  return {{"metadata",
           {{"name", job + "-" + rank + "-x7k2p"},
            {"namespace", "team-a"},
            {"labels",
             {{"batch.kubernetes.io/job-name", job},
              {"job-name", job},
              {"batch.kubernetes.io/controller-uid", uid},
              {kIndexKey, rank}}},
            {"annotations", {{kIndexKey, rank}}},
            {"ownerReferences", json::array({{{"apiVersion", "batch/v1"},
                                              {"kind", "Job"},
                                              {"name", job},
                                              {"uid", uid},
                                              {"controller", true}}})}}},
          {"spec",
           {{"hostname", job + "-" + rank},
            {"subdomain", subdomain},
            {"containers", json::array({{{"name", "trial"}}})}}}};
}

json plainPod() {
  return {{"metadata", {{"name", "trial-1"}, {"namespace", "team-a"}}},
          {"spec", {{"containers", json::array({{{"name", "trial"}}})}}}};
}

bool isLoopbackForAJob(const std::string& address) {
  std::vector<int> octets;
  std::istringstream stream(address);
  for (std::string part; std::getline(stream, part, '.');) {
    int value = -1;
    std::from_chars(part.data(), part.data() + part.size(), value);
    octets.push_back(value);
  }
  return octets.size() == 4 && octets[0] == 127 && octets[1] >= 0 && octets[1] <= 255 &&
         octets[2] >= 0 && octets[2] <= 255 && octets[3] >= 1 && octets[3] <= 254 &&
         address != "127.0.0.1";
}

TEST(Container, TheHostNameIsTheSpecsHostnameElseThePodsName) {
  EXPECT_EQ(hostName(plainPod()), "trial-1");
  EXPECT_EQ(hostName(indexedJobPod("gpt2-z1", "uid-1", 1)), "gpt2-z1-1");
}

TEST(Container, APodWithoutASubdomainKeepsTheMachinesHostsFile) {
  EXPECT_EQ(hostsFile(plainPod(), 2), std::nullopt);
  json named = plainPod();
  named["spec"]["hostname"] = "worker";
  EXPECT_EQ(hostsFile(named, std::nullopt), std::nullopt);
}

TEST(Container, EveryPodOfAnIndexedJobIsNamedInItsHostsFileAtTheJobsAddress) {
  const json pod = indexedJobPod("gpt2-z1", "0b7e5a54-1d1c-4f0e-9c55-5b1f3f7a9e01", 1);
  const auto hosts = hostsFile(pod, 3);
  ASSERT_TRUE(hosts);
  const std::string address = jobAddress("team-a", *jobMembership(pod));
  EXPECT_TRUE(isLoopbackForAJob(address)) << address;
  EXPECT_EQ(linesOf(*hosts), (std::vector<std::string>{
                                 "# Kubernetes-managed hosts file (autotune-node-sim).",
                                 "127.0.0.1\tlocalhost",
                                 "::1\tlocalhost ip6-localhost ip6-loopback",
                                 address + "\tgpt2-z1-0 gpt2-z1-0.trial gpt2-z1-0.trial.team-a.svc "
                                           "gpt2-z1-0.trial.team-a.svc.cluster.local",
                                 address + "\tgpt2-z1-1 gpt2-z1-1.trial gpt2-z1-1.trial.team-a.svc "
                                           "gpt2-z1-1.trial.team-a.svc.cluster.local",
                                 address + "\tgpt2-z1-2 gpt2-z1-2.trial gpt2-z1-2.trial.team-a.svc "
                                           "gpt2-z1-2.trial.team-a.svc.cluster.local",
                             }));
  // Every Pod of the Job writes the same names at the same address.
  EXPECT_EQ(hostsFile(indexedJobPod("gpt2-z1", "0b7e5a54-1d1c-4f0e-9c55-5b1f3f7a9e01", 0), 3),
            hosts);
}

TEST(Container, WithoutTheJobsCompletionsTheHostsFileNamesThePodItself) {
  const json pod = indexedJobPod("gpt2-z1", "uid-1", 1);
  const auto lines = linesOf(*hostsFile(pod, std::nullopt));
  ASSERT_EQ(lines.size(), 4U);
  EXPECT_EQ(lines[3], jobAddress("team-a", *jobMembership(pod)) +
                          "\tgpt2-z1-1 gpt2-z1-1.trial gpt2-z1-1.trial.team-a.svc "
                          "gpt2-z1-1.trial.team-a.svc.cluster.local");
  // A Pod with a host name of its own outside the Job's is named as well.
  json renamed = pod;
  renamed["spec"]["hostname"] = "leader";
  EXPECT_EQ(linesOf(*hostsFile(renamed, 1)).size(), 5U);
}

TEST(Container, EachJobHasALoopbackAddressOfItsOwn) {
  const JobMembership first{"gpt2-z1", "uid-1", 0};
  const JobMembership second{"gpt2-z2", "uid-2", 0};
  EXPECT_NE(jobAddress("team-a", first), jobAddress("team-a", second));
  // The uid decides: a Job made again under the same name is another Job.
  EXPECT_NE(jobAddress("team-a", first), jobAddress("team-a", {"gpt2-z1", "uid-3", 0}));
  EXPECT_EQ(jobAddress("team-a", first), jobAddress("team-b", {"other", "uid-1", 1}));
  // Without a uid, the namespace and the name.
  EXPECT_NE(jobAddress("team-a", {"gpt2-z1", "", 0}), jobAddress("team-b", {"gpt2-z1", "", 0}));
  std::set<std::string> seen;
  for (int job = 0; job < 5000; ++job) {
    const std::string address = jobAddress("team-a", {"job", "uid-" + std::to_string(job), 0});
    EXPECT_TRUE(isLoopbackForAJob(address)) << address;
    seen.insert(address);
  }
  EXPECT_GE(seen.size(), 4990U);
}

TEST(Container, TheJobComesFromTheControllersMarks) {
  const auto job = jobMembership(indexedJobPod("gpt2-z1", "uid-1", 2));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->name, "gpt2-z1");
  EXPECT_EQ(job->uid, "uid-1");
  EXPECT_EQ(job->index, 2);
  // An older Job controller's labels, without an owner reference.
  json older = plainPod();
  older["metadata"]["labels"] = {{"job-name", "bert"}, {"controller-uid", "uid-9"}};
  older["metadata"]["annotations"] = {{kIndexKey, "0"}};
  const auto fromLabels = jobMembership(older);
  ASSERT_TRUE(fromLabels);
  EXPECT_EQ(fromLabels->name, "bert");
  EXPECT_EQ(fromLabels->uid, "uid-9");
  EXPECT_EQ(fromLabels->index, 0);
  EXPECT_EQ(jobMembership(plainPod()), std::nullopt);
}

TEST(Container, TheCompletionIndexReachesTheEnvironmentFromTheAnnotationOrTheLabel) {
  json pod = indexedJobPod("gpt2-z1", "uid-1", 1);
  const json container = {
      {"name", "trial"},
      {"env",
       json::array(
           {{{"name", "JOB_COMPLETION_INDEX"},
             {"valueFrom",
              {{"fieldRef",
                {{"fieldPath",
                  "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}}},
            {{"name", "AUTOTUNE_NODE_RANK"},
             {"valueFrom",
              {{"fieldRef",
                {{"fieldPath", "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}}}},
            {{"name", "AUTOTUNE_MASTER_ADDR"}, {"value", "gpt2-z1-0.trial"}}})}};
  const auto environment = containerEnvironment(pod, container);
  ASSERT_TRUE(environment) << environment.error();
  EXPECT_EQ(*environment, (Environment{{"JOB_COMPLETION_INDEX", "1"},
                                       {"AUTOTUNE_NODE_RANK", "1"},
                                       {"AUTOTUNE_MASTER_ADDR", "gpt2-z1-0.trial"}}));
}

TEST(Container, TheHostsFileIsMountedReadOnlyOverEtcHosts) {
  const auto folder = std::filesystem::temp_directory_path() /
                      ("autotune-node-sim-unit-" + std::to_string(getpid()));
  const json pod = indexedJobPod("gpt2-z1", "uid-1", 0);
  const auto hosts = hostsFile(pod, 2);
  const auto prepared = prepareMounts(pod, pod["spec"]["containers"][0], folder, hosts);
  ASSERT_TRUE(prepared) << prepared.error();
  ASSERT_EQ(prepared->mounts.size(), 2U);
  EXPECT_EQ(prepared->mounts[0].source, folder / "hosts");
  EXPECT_EQ(prepared->mounts[0].target, "/etc/hosts");
  EXPECT_TRUE(prepared->mounts[0].readOnly);
  std::ifstream written(folder / "hosts");
  std::stringstream content;
  content << written.rdbuf();
  EXPECT_EQ(content.str(), *hosts);
  // The termination message stays last, so that it wins over anything mounted above it.
  EXPECT_EQ(prepared->mounts[1].target, "/dev/termination-log");

  const auto plain = prepareMounts(plainPod(), plainPod()["spec"]["containers"][0], folder);
  ASSERT_TRUE(plain) << plain.error();
  ASSERT_EQ(plain->mounts.size(), 1U);
  EXPECT_EQ(plain->mounts[0].target, "/dev/termination-log");
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace autotune::nodesim
