#include "controller/cache/gpu_slots.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/cache/cluster.h"
#include "controller/objects/objects.h"

namespace {

using autotune::controller::CachedAutotuneJob;
using autotune::controller::Cluster;
using autotune::controller::decodeDeviceClaim;
using autotune::controller::decodeDeviceSlice;
using autotune::controller::decodeNode;
using autotune::controller::decodePod;
using autotune::controller::DeviceSlice;
using autotune::controller::fitsSomeNodes;
using autotune::controller::forJob;
using autotune::controller::freeSlotsFor;
using autotune::controller::GpuCapacity;
using autotune::controller::GpuLedger;
using autotune::controller::gpuMemoryBytes;
using autotune::controller::GpuModel;
using autotune::controller::Node;
using autotune::controller::Pod;
using nlohmann::json;

constexpr std::int64_t kMiB = 1024 * 1024;

// A trial of `gpus` GPUs over `nodes` nodes.
autotune::api::Resources shape(int gpus, int nodes = 1) {
  autotune::api::Resources resources;
  resources.gpusPerTrial = gpus;
  resources.nodesPerTrial = nodes;
  return resources;
}

// A Ready node with `gpus` allocatable GPUs, as the API server returns it (quantities as strings).
json gpuNode(const std::string& name, int gpus, std::optional<std::string> memoryMiB = {}) {
  json node = {{"metadata", {{"name", name}, {"labels", json::object()}}},
               {"spec", json::object()},
               {"status",
                {{"allocatable", {{"cpu", "64"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"conditions", json::parse(R"([{"type": "MemoryPressure", "status": "False"},
                                                {"type": "Ready", "status": "True"}])")}}}};
  if (memoryMiB) {
    node["metadata"]["labels"]["nvidia.com/gpu.memory"] = *memoryMiB;
  }
  return node;
}

// The node labelled as GPU feature discovery labels one of that GPU model.
json ofModel(json node, const std::string& product) {
  node["metadata"]["labels"]["nvidia.com/gpu.product"] = product;
  return node;
}

// Which unbound Pods reserve GPUs is the Cluster's rule (its tests are below): here, all of them.
bool everyPod(const std::string& /*podKey*/) { return true; }

// The capacity a ledger given these Nodes and Pods reports.
GpuCapacity gpuCapacity(const std::vector<json>& nodes, const std::vector<json>& pods) {
  GpuLedger ledger;
  for (const auto& node : nodes) {
    ledger.setNode(decodeNode(node).value());
  }
  for (const auto& pod : pods) {
    ledger.setPod(decodePod(pod).value());
  }
  return ledger.capacity(everyPod);
}

json cordoned(json node) {
  node["spec"]["unschedulable"] = true;
  return node;
}

json notReady(json node) {
  node["status"]["conditions"][1]["status"] = "False";
  return node;
}

json container(int gpus) {
  return {{"name", "main"},
          {"resources", {{"limits", {{"nvidia.com/gpu", gpus}, {"memory", "16Gi"}}}}}};
}

// A Pod asking for `gpus` GPUs, bound to `node` (empty: not yet scheduled).
json gpuPod(const std::string& name, int gpus, const std::string& node,
            const std::string& phase = "Running") {
  json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec", {{"containers", json::array({container(gpus)})}}},
              {"status", {{"phase", phase}}}};
  if (!node.empty()) {
    pod["spec"]["nodeName"] = node;
  }
  return pod;
}

TEST(GpuCapacity, CountsTheGpusOfReadySchedulableNodes) {
  const GpuCapacity capacity = gpuCapacity(
      {gpuNode("a", 8), gpuNode("b", 8), cordoned(gpuNode("c", 8)), notReady(gpuNode("d", 8))}, {});
  EXPECT_EQ(capacity.total(), 16);
  EXPECT_EQ(capacity.free(), 16);
  ASSERT_EQ(capacity.nodes.size(), 2U);
  EXPECT_EQ(capacity.nodes[0].name, "a");
  EXPECT_EQ(capacity.nodes[1].name, "b");
}

TEST(GpuCapacity, NodesWithoutGpusOrWithoutAReadyConditionAreLeftOut) {
  json cpuOnly = gpuNode("cpu", 0);
  json silent = gpuNode("silent", 8);
  silent["status"].erase("conditions");
  json numeric = gpuNode("numeric", 0);
  numeric["status"]["allocatable"]["nvidia.com/gpu"] = 4;
  const GpuCapacity capacity = gpuCapacity({cpuOnly, silent, numeric}, {});
  ASSERT_EQ(capacity.nodes.size(), 1U);
  EXPECT_EQ(capacity.nodes[0].name, "numeric");
  EXPECT_EQ(capacity.total(), 4);
}

TEST(GpuCapacity, BoundUnfinishedPodsHoldTheirGpus) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 8)},
                  {gpuPod("train", 4, "a"), gpuPod("starting", 2, "b", "Pending"),
                   gpuPod("done", 8, "b", "Succeeded"), gpuPod("crashed", 8, "a", "Failed")});
  EXPECT_EQ(capacity.used(), 6);
  EXPECT_EQ(capacity.free(), 10);
  EXPECT_EQ(capacity.nodes[0].used, 4);
  EXPECT_EQ(capacity.nodes[1].used, 2);
}

TEST(GpuCapacity, PodsOnLeftOutNodesAndPodsWithoutGpusDoNotCount) {
  const GpuCapacity capacity = gpuCapacity({gpuNode("a", 8), cordoned(gpuNode("c", 8))},
                                           {gpuPod("drained", 8, "c"), gpuPod("cpu-only", 0, "a")});
  EXPECT_EQ(capacity.used(), 0);
  EXPECT_EQ(capacity.free(), 8);
}

TEST(GpuCapacity, RequestsCountWhenLimitsAreAbsentAndInitContainersAsTheSchedulerDoes) {
  json pod = gpuPod("p", 0, "a");
  pod["spec"]["containers"] = json::parse(R"([
      {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"}}},
      {"name": "helper", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])");
  EXPECT_EQ(gpuCapacity({gpuNode("a", 8)}, {pod}).used(), 3);

  pod["spec"]["initContainers"] = json::parse(R"([
      {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": 6}}}])");
  EXPECT_EQ(gpuCapacity({gpuNode("a", 8)}, {pod}).used(), 6);

  pod["spec"]["initContainers"] = json::parse(R"([
      {"name": "sidecar", "restartPolicy": "Always",
       "resources": {"limits": {"nvidia.com/gpu": 1}}}])");
  EXPECT_EQ(gpuCapacity({gpuNode("a", 8)}, {pod}).used(), 4);
}

TEST(GpuCapacity, UnboundPodsReserveWhereTheyFitSoTheyAreNotCountedTwice) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 4)},
                  {gpuPod("big", 8, "", "Pending"), gpuPod("small", 4, "", "Pending"),
                   gpuPod("huge", 16, "", "Pending")});
  EXPECT_EQ(capacity.nodes[0].reserved, 8);
  EXPECT_EQ(capacity.nodes[1].reserved, 4);
  EXPECT_EQ(capacity.reserved(), 12);
  EXPECT_EQ(capacity.waiting, 16);
  EXPECT_EQ(capacity.free(), 0);
}

TEST(GpuCapacity, AnUnboundPodTakesTheTightestNodeThatFits) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 4)}, {gpuPod("small", 4, "", "Pending")});
  EXPECT_EQ(capacity.nodes[0].reserved, 0);
  EXPECT_EQ(capacity.nodes[1].reserved, 4);
  EXPECT_EQ(freeSlotsFor(capacity, shape(8)), 1);
}

// Each unbound Pod sees the nodes as the Pods before it left them.
TEST(GpuCapacity, UnboundPodsFillTheTightestNodeFirstAndTheFirstByNameAmongEquals) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 4), gpuNode("b", 4), gpuNode("c", 8)},
                  {gpuPod("p1", 2, "", "Pending"), gpuPod("p2", 2, "", "Pending"),
                   gpuPod("p3", 2, "", "Pending"), gpuPod("p4", 6, "", "Pending")});
  // p4 (the largest, placed first) leaves c with 2 free, the tightest for p1; then p2 and p3 fill
  // a, which is b's equal until p2 takes half of it.
  EXPECT_EQ(capacity.nodes[0].reserved, 4);
  EXPECT_EQ(capacity.nodes[1].reserved, 0);
  EXPECT_EQ(capacity.nodes[2].reserved, 8);
  EXPECT_EQ(capacity.waiting, 0);
}

// A Pod of one GPU model (its nodeSelector) reserves on that model's nodes only, even where a
// node of another model would fit it tighter.
TEST(GpuCapacity, AnUnboundPodOfOneGpuModelReservesOnThatModelsNodesOnly) {
  json pinned = gpuPod("h100-trial", 4, "", "Pending");
  pinned["spec"]["nodeSelector"] = {{"nvidia.com/gpu.product", "H100"}};
  const GpuCapacity capacity =
      gpuCapacity({ofModel(gpuNode("a", 4), "A100"), ofModel(gpuNode("b", 8), "H100")}, {pinned});
  EXPECT_EQ(capacity.nodes[0].reserved, 0);
  EXPECT_EQ(capacity.nodes[1].reserved, 4);

  // With no node of its model free enough, it waits rather than taking another model's GPUs.
  json larger = pinned;
  larger["spec"]["containers"][0] = container(16);
  const GpuCapacity waiting =
      gpuCapacity({ofModel(gpuNode("a", 16), "A100"), ofModel(gpuNode("b", 8), "H100")}, {larger});
  EXPECT_EQ(waiting.reserved(), 0);
  EXPECT_EQ(waiting.waiting, 16);
}

// A job of one GPU model counts that model's nodes alone: their GPUs and their memory.
TEST(GpuCapacity, AJobOfOneGpuModelCountsThatModelsNodesAlone) {
  const GpuCapacity cluster = gpuCapacity(
      {ofModel(gpuNode("a", 8, "40960"), "A100"), ofModel(gpuNode("b", 8, "81920"), "H100"),
       ofModel(gpuNode("c", 8, "81920"), "H100"), gpuNode("d", 8)},
      {gpuPod("busy", 8, "b")});
  autotune::api::Spec spec;
  spec.resources = shape(8);
  EXPECT_EQ(forJob(cluster, spec).total(), 32);  // no model: every node

  spec.gpuModels = {"H100"};
  const GpuCapacity h100 = forJob(cluster, spec);
  EXPECT_EQ(h100.model, "H100");
  EXPECT_EQ(h100.total(), 16);
  EXPECT_EQ(freeSlotsFor(h100, spec.resources), 1);
  EXPECT_EQ(gpuMemoryBytes(h100, spec.resources), 81920 * kMiB);
  EXPECT_EQ(h100.otherModels, (std::set<std::string>{"", "A100"}));

  spec.gpuModels = {"L40S"};
  const GpuCapacity none = forJob(cluster, spec);
  EXPECT_TRUE(none.nodes.empty());
  EXPECT_FALSE(fitsSomeNodes(none, spec.resources));
}

TEST(FreeSlots, TrialsFitOnOneNodeEach) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 4)}, {gpuPod("train", 2, "a")});
  EXPECT_EQ(freeSlotsFor(capacity, shape(1)), 18);
  EXPECT_EQ(freeSlotsFor(capacity, shape(2)), 9);
  EXPECT_EQ(freeSlotsFor(capacity, shape(4)), 4);
  EXPECT_EQ(freeSlotsFor(capacity, shape(8)), 1);
}

TEST(FreeSlots, FreeGpusSpreadOverNodesDoNotMakeASlot) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 8)}, {gpuPod("x", 4, "a"), gpuPod("y", 4, "b")});
  EXPECT_EQ(capacity.free(), 8);
  EXPECT_EQ(freeSlotsFor(capacity, shape(8)), 0);
  EXPECT_TRUE(fitsSomeNodes(capacity, shape(8)));
}

TEST(FreeSlots, ATrialLargerThanEveryNodeNeverFits) {
  const GpuCapacity capacity = gpuCapacity({gpuNode("a", 8), gpuNode("b", 8)}, {});
  EXPECT_EQ(capacity.free(), 16);
  EXPECT_EQ(freeSlotsFor(capacity, shape(16)), 0);
  EXPECT_FALSE(fitsSomeNodes(capacity, shape(16)));
  EXPECT_EQ(freeSlotsFor(capacity, shape(0)), 0);
}

TEST(FreeSlots, CordonedAndNotReadyNodesGiveNoSlots) {
  const GpuCapacity capacity =
      gpuCapacity({cordoned(gpuNode("a", 16)), notReady(gpuNode("b", 16))}, {});
  EXPECT_EQ(freeSlotsFor(capacity, shape(16)), 0);
  EXPECT_FALSE(fitsSomeNodes(capacity, shape(16)));
}

TEST(FreeSlots, FinishedTrialPodsGiveTheirGpusBack) {
  const std::vector<json> nodes = {gpuNode("a", 16)};
  EXPECT_EQ(freeSlotsFor(gpuCapacity(nodes, {gpuPod("t1", 16, "a")}), shape(16)), 0);
  EXPECT_EQ(freeSlotsFor(gpuCapacity(nodes, {gpuPod("t1", 16, "a", "Succeeded")}), shape(16)), 1);
  EXPECT_EQ(freeSlotsFor(gpuCapacity(nodes, {gpuPod("t1", 16, "a", "Failed")}), shape(16)), 1);
}

TEST(FreeSlots, AnOverCommittedNodeHasNoneFreeRatherThanLessThanNone) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 4), gpuNode("b", 4)}, {gpuPod("x", 8, "a")});
  EXPECT_EQ(capacity.nodes[0].free(), 0);
  EXPECT_EQ(capacity.free(), 4);
  EXPECT_EQ(freeSlotsFor(capacity, shape(4)), 1);
}

// A multi-node trial's slots are whole trials: each needs its share free on as many distinct
// nodes, so a node with room for several shares still gives each trial only one.
TEST(FreeSlots, AMultiNodeTrialNeedsItsShareOnDistinctNodes) {
  const GpuCapacity capacity =
      gpuCapacity({gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 8)}, {gpuPod("x", 4, "c")});
  EXPECT_EQ(freeSlotsFor(capacity, shape(16, 2)), 1);  // 8 on each of a and b; c has 4
  EXPECT_EQ(freeSlotsFor(capacity, shape(8, 2)), 2);   // a+b, then a+b again, or c
  EXPECT_EQ(freeSlotsFor(capacity, shape(24, 3)), 0);  // c cannot give 8
  EXPECT_EQ(freeSlotsFor(capacity, shape(12, 3)), 1);
  EXPECT_TRUE(fitsSomeNodes(capacity, shape(24, 3)));
  EXPECT_FALSE(fitsSomeNodes(capacity, shape(32, 4)));
  EXPECT_FALSE(fitsSomeNodes(capacity, shape(18, 2)));
}

TEST(FreeSlots, ManySharesOnOneNodeAreNotTwoNodes) {
  const GpuCapacity capacity = gpuCapacity({gpuNode("a", 8), gpuNode("b", 2)}, {});
  // a holds four shares of 2, b one: one trial of 2 nodes x 2 can use b, the others cannot.
  EXPECT_EQ(freeSlotsFor(capacity, shape(4, 2)), 1);
  EXPECT_EQ(freeSlotsFor(capacity, shape(4, 1)), 2);
}

// Half of a waiting trial is already on the scheduler's queue: its Pods' GPUs are reserved, so
// the other half's node is not offered to a new trial as well.
TEST(FreeSlots, APartlyBoundTrialsWaitingPodsHoldTheirShare) {
  const GpuCapacity capacity = gpuCapacity(
      {gpuNode("a", 8), gpuNode("b", 8)}, {gpuPod("t-0", 8, "a"), gpuPod("t-1", 8, "", "Pending")});
  EXPECT_EQ(capacity.free(), 0);
  EXPECT_EQ(freeSlotsFor(capacity, shape(16, 2)), 0);
}

TEST(GpuMemory, AMultiNodeTrialCountsOnNodesThatHoldItsShare) {
  const GpuCapacity capacity = gpuCapacity(
      {gpuNode("big", 8, "81920"), gpuNode("small", 4, "16384"), gpuNode("other", 8, "40960")}, {});
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(16, 2)), 40960 * kMiB);
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(8, 2)), 16384 * kMiB);
}

TEST(GpuMemory, TheLabelIsMebibytesAsFeatureDiscoveryWritesIt) {
  const GpuCapacity capacity = gpuCapacity({gpuNode("a", 8, "81920")}, {});
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(8)), 81920 * kMiB);
}

TEST(GpuMemory, TheSmallestOfTheNodesThatCouldHoldTheTrialCounts) {
  const GpuCapacity capacity = gpuCapacity(
      {gpuNode("a100", 8, "81920"), gpuNode("v100", 16, "32768"), gpuNode("t4", 2, "15360"),
       gpuNode("unlabelled", 8), cordoned(gpuNode("l4", 16, "23034"))},
      {});
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(8)), 32768 * kMiB);
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(16)), 32768 * kMiB);
  EXPECT_EQ(gpuMemoryBytes(capacity, shape(1)), 15360 * kMiB);
  EXPECT_FALSE(gpuMemoryBytes(capacity, shape(32)).has_value());
}

TEST(GpuMemory, AQuantityIsReadWithItsUnitAndNonsenseIsIgnored) {
  EXPECT_EQ(gpuMemoryBytes(gpuCapacity({gpuNode("a", 8, "40Gi")}, {}), shape(8)), 40 * 1024 * kMiB);
  EXPECT_FALSE(gpuMemoryBytes(gpuCapacity({gpuNode("a", 8, "lots")}, {}), shape(8)).has_value());
  EXPECT_FALSE(gpuMemoryBytes(gpuCapacity({gpuNode("a", 8, "0")}, {}), shape(8)).has_value());
  EXPECT_FALSE(gpuMemoryBytes(gpuCapacity({gpuNode("a", 8)}, {}), shape(8)).has_value());
}

// The ledger follows each change: a Pod bound, finished and deleted; a Node cordoned and gone.
TEST(GpuLedger, FollowsPodsAndNodesAsTheyChange) {
  GpuLedger ledger;
  ledger.setNode(decodeNode(gpuNode("a", 8)).value());
  ledger.setPod(decodePod(gpuPod("p", 2, "")).value());
  EXPECT_EQ(ledger.capacity(everyPod).reserved(), 2);
  ledger.setPod(decodePod(gpuPod("p", 2, "a")).value());
  EXPECT_EQ(ledger.capacity(everyPod).reserved(), 0);
  EXPECT_EQ(ledger.capacity(everyPod).used(), 2);
  ledger.setPod(decodePod(gpuPod("p", 2, "a", "Succeeded")).value());
  EXPECT_EQ(ledger.capacity(everyPod).used(), 0);
  ledger.setPod(decodePod(gpuPod("q", 4, "a")).value());
  ledger.removePod("ml/q");
  EXPECT_EQ(ledger.capacity(everyPod).free(), 8);
  ledger.setNode(decodeNode(cordoned(gpuNode("a", 8))).value());
  EXPECT_EQ(ledger.capacity(everyPod).total(), 0);
  ledger.setNode(decodeNode(gpuNode("a", 8)).value());
  ledger.removeNode("a");
  EXPECT_TRUE(ledger.capacity(everyPod).nodes.empty());
}

constexpr const char* kDriver = "gpu.nvidia.com";

// A ResourceSlice of `gpus` GPUs of `driver` on `node`, as NVIDIA's DRA driver publishes one, with
// a MIG device beside them.
json deviceSlice(const std::string& name, const std::string& node, int gpus,
                 const std::string& driver = kDriver) {
  json devices = json::array();
  for (int index = 0; index < gpus; ++index) {
    devices.push_back(
        {{"name", "gpu-" + std::to_string(index)},
         {"attributes",
          {{"type", {{"string", "gpu"}}}, {"productName", {{"string", "NVIDIA H100 80GB HBM3"}}}}},
         {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
  }
  devices.push_back({{"name", "mig-0"}, {"attributes", {{"type", {{"string", "mig"}}}}}});
  return {{"metadata", {{"name", name}, {"resourceVersion", "1"}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

// A ResourceClaim allocated `gpus` devices of `driver` on `node`, as the kube-scheduler writes it.
json deviceClaim(const std::string& name, const std::string& node, int gpus,
                 const std::string& driver = kDriver) {
  json results = json::array();
  for (int index = 0; index < gpus; ++index) {
    results.push_back({{"request", "gpus"},
                       {"driver", driver},
                       {"pool", node},
                       {"device", "gpu-" + std::to_string(index)}});
  }
  const json selector = {
      {"nodeSelectorTerms",
       {{{"matchFields", {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}};
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"resourceVersion", "1"}}},
          {"status",
           {{"allocation", {{"devices", {{"results", results}}}, {"nodeSelector", selector}}}}}};
}

TEST(DeviceSlice, CountsTheDriversWholeGpusOnItsNode) {
  const auto slice = decodeDeviceSlice(deviceSlice("a-gpus", "a", 4), kDriver).value();
  EXPECT_EQ(slice.nodeName, "a");
  EXPECT_EQ(slice.gpus, 4) << "the MIG device is no whole GPU";
  EXPECT_EQ(slice.product, "NVIDIA-H100-80GB-HBM3") << "as GPU feature discovery labels it";
  EXPECT_EQ(slice.memoryBytes, std::int64_t{80} * 1024 * kMiB);
  EXPECT_FALSE(decodeDeviceSlice(deviceSlice("a-nics", "a", 4, "nic.example.com"), kDriver));
  EXPECT_FALSE(decodeDeviceSlice(json::object(), kDriver));
  EXPECT_EQ(decodeDeviceSlice(json::parse(R"({"metadata": {"name": "s"},
      "spec": {"driver": "gpu.nvidia.com", "devices": "nonsense"}})"),
                              kDriver)
                ->gpus,
            0);
}

// NVIDIA's DRA driver names A100s as "NVIDIA A100-SXM4-40GB"; nvidia.com/gpu.product says
// "NVIDIA-A100-SXM4-40GB". Whatever a label value cannot hold is a dash, and its ends alphanumeric.
TEST(DeviceSlice, ItsProductNameIsTakenAsAGpuModelLabelValue) {
  const auto productOf = [](const std::string& productName) {
    json slice = deviceSlice("s", "a", 1);
    slice["spec"]["devices"][0]["attributes"]["productName"]["string"] = productName;
    return decodeDeviceSlice(slice, kDriver)->product;
  };
  EXPECT_EQ(productOf("NVIDIA A100-SXM4-40GB"), "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(productOf(" Tesla T4 (PCIe) "), "Tesla-T4--PCIe");
  EXPECT_EQ(productOf("***"), "");
  EXPECT_EQ(productOf(std::string(70, 'x') + " y"), std::string(63, 'x'));
  EXPECT_EQ(productOf(std::string(62, 'x') + ".y"), std::string(62, 'x'));
}

TEST(DeviceClaim, CountsTheDriversDevicesOnTheNodeItsAllocationNames) {
  const auto claim = decodeDeviceClaim(deviceClaim("c", "a", 2), kDriver).value();
  EXPECT_EQ(claim.key, "ml/c");
  EXPECT_EQ(claim.nodeName, "a");
  EXPECT_EQ(claim.gpus, 2);
  EXPECT_EQ(decodeDeviceClaim(deviceClaim("nic", "a", 2, "nic.example.com"), kDriver)->gpus, 0);
  json pending = deviceClaim("p", "a", 2);
  pending.erase("status");
  EXPECT_EQ(decodeDeviceClaim(pending, kDriver)->gpus, 0) << "kept, so that deallocation counts";
}

// A node that advertises no nvidia.com/gpu has its slices' GPUs; its claims hold them, and its
// Pods' requests (an extended-resource Pod has a claim of its own) do not count twice.
TEST(GpuLedger, ANodeWithoutNvidiaGpuCountsItsDriversSlicesLessItsClaims) {
  GpuLedger ledger;
  ledger.setNode(decodeNode(gpuNode("dra", 0)).value());
  ledger.setNode(decodeNode(gpuNode("plugin", 8)).value());
  EXPECT_EQ(ledger.capacity(everyPod).total(), 8) << "no slice yet";
  ledger.setSlice(decodeDeviceSlice(deviceSlice("dra-gpus", "dra", 4), kDriver).value());
  ledger.setSlice(decodeDeviceSlice(deviceSlice("dra-more", "dra", 4), kDriver).value());
  ledger.setSlice(decodeDeviceSlice(deviceSlice("plugin-gpus", "plugin", 8), kDriver).value());
  GpuCapacity capacity = ledger.capacity(everyPod);
  ASSERT_EQ(capacity.nodes.size(), 2U);
  EXPECT_EQ(capacity.nodes[0].name, "dra");
  EXPECT_EQ(capacity.nodes[0].allocatable, 8);
  EXPECT_EQ(capacity.nodes[0].product, "") << "no search of one model can pin a trial to it";
  EXPECT_EQ(capacity.nodes[0].memoryBytes, std::int64_t{80} * 1024 * kMiB);
  EXPECT_EQ(ledger.publishedGpu("dra"),
            (GpuModel{"NVIDIA-H100-80GB-HBM3", std::int64_t{80} * 1024 * kMiB}));
  EXPECT_FALSE(ledger.publishedGpu("elsewhere"));
  EXPECT_EQ(capacity.nodes[1].allocatable, 8) << "the device plugin's count stands";

  ledger.setClaim(decodeDeviceClaim(deviceClaim("c", "dra", 2), kDriver).value());
  ledger.setClaim(decodeDeviceClaim(deviceClaim("on-plugin", "plugin", 3), kDriver).value());
  ledger.setPod(decodePod(gpuPod("extended", 2, "dra")).value());
  ledger.setPod(decodePod(gpuPod("plugin-pod", 1, "plugin")).value());
  capacity = ledger.capacity(everyPod);
  EXPECT_EQ(capacity.nodes[0].used, 2) << "the claim's, not the Pod's requests as well";
  EXPECT_EQ(capacity.nodes[1].used, 1) << "a device plugin node counts its Pods";

  // A trial of claims waiting for the scheduler holds what it asks for; bound, its claim counts.
  json waiting = gpuPod("trial", 0, "");
  waiting["metadata"]["annotations"] = {{"autotune.io/claimed-gpus", "4"}};
  ledger.setPod(decodePod(waiting).value());
  EXPECT_EQ(ledger.capacity(everyPod).reserved(), 4);
  waiting["spec"]["nodeName"] = "plugin";
  ledger.setPod(decodePod(waiting).value());
  EXPECT_EQ(ledger.capacity(everyPod).reserved(), 0);
  EXPECT_EQ(ledger.capacity(everyPod).nodes[1].used, 1) << "the annotation holds nothing bound";
  ledger.removePod("ml/trial");

  json released = deviceClaim("c", "dra", 2);
  released.erase("status");
  ledger.setClaim(decodeDeviceClaim(released, kDriver).value());
  EXPECT_EQ(ledger.capacity(everyPod).nodes[0].used, 0);
  ledger.setClaim(decodeDeviceClaim(deviceClaim("c", "dra", 2), kDriver).value());
  ledger.removeClaim("ml/c");
  EXPECT_EQ(ledger.capacity(everyPod).nodes[0].used, 0);
  ledger.removeSlice("dra-gpus");
  EXPECT_EQ(ledger.capacity(everyPod).nodes[0].allocatable, 4);
  ledger.setNode(decodeNode(cordoned(gpuNode("dra", 0))).value());
  EXPECT_EQ(ledger.capacity(everyPod).nodes.size(), 1U) << "a cordoned node counts no slice";
  EXPECT_TRUE(ledger.publishedGpu("dra")) << "what ran there can still be named";
}

// A slice of more GPUs wakes the oldest waiting jobs that can take them: by the node's GPU model
// label, as the ledger counts the node, never by the slice's own model, since a search of that
// model pins its trials by the label an unlabelled node lacks.
TEST(Cluster, ASliceOfMoreGpusWakesTheJobsItsNodesLabelServes) {
  Cluster cluster;
  cluster.nodes().replace(
      {gpuNode("dra", 0), ofModel(gpuNode("labelled", 0), "NVIDIA-H100-80GB-HBM3")});
  CachedAutotuneJob pinned;
  pinned.key = "ml/h100";
  pinned.creationTimestamp = "2026-11-22T10:00:00Z";
  pinned.decoded->job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3"};
  cluster.jobWaits(pinned, 4);
  CachedAutotuneJob any;
  any.key = "ml/any";
  any.creationTimestamp = "2026-11-22T11:00:00Z";
  cluster.jobWaits(any, 4);

  const DeviceSlice unlabelled =
      decodeDeviceSlice(deviceSlice("dra-gpus", "dra", 4), kDriver).value();
  EXPECT_EQ(unlabelled.product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(cluster.jobsWokenBySlice(nullptr, &unlabelled), std::vector<std::string>{"ml/any"});
  const DeviceSlice labelled =
      decodeDeviceSlice(deviceSlice("labelled-gpus", "labelled", 4), kDriver).value();
  EXPECT_EQ(cluster.jobsWokenBySlice(nullptr, &labelled), std::vector<std::string>{"ml/h100"});
  EXPECT_TRUE(cluster.jobsWokenBySlice(&labelled, &labelled).empty()) << "no more GPUs";
}

// A Node's heartbeat wakes no job; its loss, or a change of its GPUs, wakes the jobs with Pods on
// it.
TEST(Cluster, ANodeHeartbeatConcernsNoJobButItsLossConcernsTheJobsOnIt) {
  Cluster cluster;
  json trial = gpuPod("gpt2-z1-gas1-tmbspg1", 1, "a");
  trial["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "autotune.io/v1alpha1"},
                                                       {"kind", "AutotuneJob"},
                                                       {"name", "gpt2"},
                                                       {"uid", "u-1"},
                                                       {"controller", true}}});
  cluster.addPods("").put(std::make_shared<const Pod>(decodePod(trial).value()));

  const Node ready = decodeNode(gpuNode("a", 8)).value();
  json renewed = gpuNode("a", 8);
  renewed["metadata"]["resourceVersion"] = "2";
  renewed["status"]["conditions"][1]["lastHeartbeatTime"] = "2026-11-24T10:00:10Z";
  const Node heartbeat = decodeNode(renewed).value();
  EXPECT_TRUE(cluster.jobsConcernedBy(&ready, &heartbeat).empty());

  const std::vector<std::string> onIt{"ml/gpt2"};
  const Node down = decodeNode(notReady(gpuNode("a", 8))).value();
  EXPECT_EQ(cluster.jobsConcernedBy(&ready, &down), onIt);
  const Node fewerGpus = decodeNode(gpuNode("a", 4)).value();
  EXPECT_EQ(cluster.jobsConcernedBy(&ready, &fewerGpus), onIt);
  EXPECT_EQ(cluster.jobsConcernedBy(&ready, nullptr), onIt);
  const Node other = decodeNode(gpuNode("b", 8)).value();
  EXPECT_TRUE(cluster.jobsConcernedBy(nullptr, &other).empty());

  // New GPUs wake the oldest waiting job they can serve; a node that offers fewer wakes none.
  CachedAutotuneJob waiting;
  waiting.key = "ml/waiting";
  waiting.creationTimestamp = "2026-11-22T10:00:00Z";
  cluster.jobWaits(waiting, 8);
  EXPECT_EQ(cluster.jobsConcernedBy(nullptr, &other), std::vector<std::string>{"ml/waiting"});
  EXPECT_EQ(cluster.jobsConcernedBy(&down, &ready),
            (std::vector<std::string>{"ml/gpt2", "ml/waiting"}));
  EXPECT_EQ(cluster.jobsConcernedBy(&ready, &fewerGpus), onIt);

  // A job no node could hold is woken by any node that comes to offer more GPUs, until it waits
  // no more or is gone.
  cluster.jobWaitsForNode("ml/too-big", true);
  EXPECT_EQ(cluster.jobsConcernedBy(nullptr, &other),
            (std::vector<std::string>{"ml/too-big", "ml/waiting"}));
  EXPECT_EQ(cluster.jobsConcernedBy(&ready, &fewerGpus), onIt);
  cluster.jobWaitsForNode("ml/too-big", false);
  EXPECT_EQ(cluster.jobsConcernedBy(nullptr, &other), std::vector<std::string>{"ml/waiting"});
}

}  // namespace
