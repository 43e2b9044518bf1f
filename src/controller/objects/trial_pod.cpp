#include "controller/objects/trial_pod.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "api/labels.h"
#include "api/names.h"
#include "controller/objects/objects.h"
#include "object/read.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

json objectAt(const json& parent, std::string_view key) {
  const auto found = parent.find(key);
  return found != parent.end() && found->is_object() ? *found : json::object();
}

json arrayAt(const json& parent, std::string_view key) {
  const auto found = parent.find(key);
  return found != parent.end() && found->is_array() ? *found : json::array();
}

// Puts `item` in place of the entries of `list` that share its name (or, for volume mounts, its
// mount path), or at the end.
void upsert(json& list, json item, std::string_view alsoKey = {}) {
  const auto same = [&](const json& entry) {
    if (!entry.is_object()) {
      return false;
    }
    return object::text(entry, "name") == object::text(item, "name") ||
           (!alsoKey.empty() && entry.contains(alsoKey) && entry.at(alsoKey) == item.at(alsoKey));
  };
  json kept = json::array();
  bool placed = false;
  for (const auto& entry : list) {
    if (!same(entry)) {
      kept.push_back(entry);
    } else if (!placed) {
      kept.push_back(item);
      placed = true;
    }
  }
  if (!placed) {
    kept.push_back(std::move(item));
  }
  list = std::move(kept);
}

// The trial's command line in the template's shape: as many words in `command` as the template
// has there, the rest in `args` when the template uses args, else everything in `command`.
void setCommand(json& container, const json& templateContainer, std::vector<std::string> argv) {
  container.erase("command");
  container.erase("args");
  const bool hasCommand = templateContainer.contains("command");
  const bool hasArgs = templateContainer.contains("args");
  if (argv.empty()) {
    return;
  }
  if (!hasCommand) {
    container["args"] = std::move(argv);
    return;
  }
  if (!hasArgs) {
    container["command"] = std::move(argv);
    return;
  }
  const auto split = std::min(argv.size(), arrayAt(templateContainer, "command").size());
  const auto middle = argv.begin() + static_cast<std::ptrdiff_t>(split);
  container["command"] = std::vector<std::string>(argv.begin(), middle);
  container["args"] = std::vector<std::string>(middle, argv.end());
}

// The protocol's variables, then `rendezvous` (a multi-node trial's), then the template's, which
// may refer to both.
json environment(const json& templateContainer, const api::AutotuneJob& job,
                 const tuning::Trial& trial, const tuning::TrialFiles& files,
                 const json& rendezvous) {
  json env = json::array();
  std::set<std::string, std::less<>> protocolNames;
  for (auto& [name, value] : tuning::protocolEnvironment(job.name(), trial, files)) {
    protocolNames.insert(name);
    env.push_back({{"name", std::move(name)}, {"value", std::move(value)}});
  }
  for (const auto& variable : rendezvous) {
    protocolNames.insert(variable.at("name").get<std::string>());
    env.push_back(variable);
  }
  for (json variable : arrayAt(templateContainer, "env")) {
    if (!variable.is_object() || protocolNames.contains(object::text(variable, "name"))) {
      continue;
    }
    if (const auto value = variable.find("value"); value != variable.end() && value->is_string()) {
      *value = tuning::substitutePlaceholders(value->get<std::string>(), trial, job.name());
    }
    env.push_back(std::move(variable));
  }
  return env;
}

// A container that names ResourceClaims and asks for no nvidia.com/gpu itself takes its GPUs from
// its claims (Dynamic Resource Allocation): the scheduler allocates them from the claims'
// devices, and a request of nvidia.com/gpu would ask for GPUs twice.
bool gpusFromClaims(const json& container) {
  const json& resources = object::member(container, "resources");
  return !object::member(resources, "claims").empty() &&
         object::member(object::member(resources, "limits"), kGpuResource).is_null() &&
         object::member(object::member(resources, "requests"), kGpuResource).is_null();
}

// The trial's share of GPUs on this node as the container's nvidia.com/gpu, unless its claims
// give them.
void requestGpus(json& container, const json& templateContainer, int gpus) {
  if (gpusFromClaims(templateContainer)) {
    return;
  }
  json resources = objectAt(container, "resources");
  for (const auto* field : {"limits", "requests"}) {
    json amounts = objectAt(resources, field);
    amounts[std::string(kGpuResource)] = gpus;
    resources[field] = std::move(amounts);
  }
  container["resources"] = std::move(resources);
}

// The read-only autotune-config volume at /etc/autotune.
void mountConfig(json& container) {
  json mounts = arrayAt(container, "volumeMounts");
  upsert(mounts,
         {{"name", std::string(kConfigVolume)},
          {"mountPath", std::string(kConfigMountPath)},
          {"readOnly", true}},
         "mountPath");
  container["volumeMounts"] = std::move(mounts);
}

// The primary container inside a Pod spec built from the template, if it is there.
json* containerAt(json& podSpec, const std::optional<tuning::PrimaryContainer>& primary) {
  if (!primary || !podSpec.contains("containers") || !podSpec["containers"].is_array() ||
      primary->index >= podSpec["containers"].size()) {
    return nullptr;
  }
  return &podSpec["containers"][primary->index];
}

json configVolume() {
  const std::string fieldPath =
      "metadata.annotations['" + std::string(api::kConfigAnnotation) + "']";
  return {
      {"name", std::string(kConfigVolume)},
      {"downwardAPI",
       {{"items",
         json::array({{{"path", "ds_config.json"}, {"fieldRef", {{"fieldPath", fieldPath}}}}})}}}};
}

}  // namespace

json ownerReference(const api::AutotuneJob& job) {
  return {{"apiVersion", std::string(api::kApiVersion)},
          {"kind", std::string(api::kKind)},
          {"name", job.name()},
          {"uid", job.uid()},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

std::string jobLabelValue(std::string_view jobName) { return tuning::labelValue(jobName); }

std::string trialPodName(std::string_view jobName, std::string_view trialName, int attempt) {
  if (attempt <= 0) {
    return tuning::podName(jobName, trialName);
  }
  return tuning::podName(jobName, std::string(trialName) + "_r" + std::to_string(attempt));
}

namespace {

// The environment a multi-node trial's Pods rendezvous with.
json rendezvousEnvironment(const api::AutotuneJob& job, const std::string& name) {
  const std::string rankPath =
      "metadata.annotations['" + std::string(api::kCompletionIndexAnnotation) + "']";
  return json::array(
      {{{"name", "AUTOTUNE_NUM_NODES"},
        {"value", std::to_string(job.spec.resources.nodesPerTrial)}},
       {{"name", "AUTOTUNE_NODE_RANK"}, {"valueFrom", {{"fieldRef", {{"fieldPath", rankPath}}}}}},
       {{"name", "AUTOTUNE_MASTER_ADDR"}, {"value", name + "-0." + name}},
       {{"name", "AUTOTUNE_MASTER_PORT"}, {"value", std::to_string(api::kMasterPort)}}});
}

// Keeps each of a trial's Pods off the nodes of its others.
void spreadOverNodes(json& podSpec, const std::string& name) {
  json affinity = objectAt(podSpec, "affinity");
  json antiAffinity = objectAt(affinity, "podAntiAffinity");
  json required = arrayAt(antiAffinity, "requiredDuringSchedulingIgnoredDuringExecution");
  required.push_back(
      {{"labelSelector", {{"matchLabels", {{std::string(api::kJobNameLabel), name}}}}},
       {"topologyKey", "kubernetes.io/hostname"}});
  antiAffinity["requiredDuringSchedulingIgnoredDuringExecution"] = std::move(required);
  affinity["podAntiAffinity"] = std::move(antiAffinity);
  podSpec["affinity"] = std::move(affinity);
}

// The kubelet stops a trial that outlives spec.trialTimeout even when no operator runs to do it,
// so that its GPUs are freed: activeDeadlineSeconds counts, as the trial timeout does, from the
// kubelet taking the Pod (status.startTime), and leaves the operator kDeadlineGrace to stop the
// trial first and record it.
std::int64_t activeDeadlineSeconds(const api::Spec& spec) {
  return std::chrono::ceil<std::chrono::seconds>(spec.trialTimeout.value() + kDeadlineGrace)
      .count();
}

// A job of one GPU model (spec.gpuModels) runs its trials on that model's nodes only, whatever
// else the template selects.
void selectGpuModel(json& podSpec, const api::Spec& spec) {
  if (spec.gpuModels.empty()) {
    return;
  }
  json selector = objectAt(podSpec, "nodeSelector");
  selector[std::string(api::kGpuProductLabel)] = spec.gpuModels.front();
  podSpec["nodeSelector"] = std::move(selector);
}

// What a trial Pod tells of itself, over the template's own annotations: the config it runs, its
// trial, its attempt and since when it is wanted.
json trialAnnotations(json annotations, const api::Spec& spec, const tuning::Trial& trial,
                      const tuning::TrialFiles& files, const RunOrdinal& run) {
  annotations[std::string(api::kConfigAnnotation)] =
      tuning::launchConfig(spec, trial, files).dump();
  annotations[std::string(api::kTrialNameAnnotation)] = trial.name;
  annotations[std::string(api::kAttemptAnnotation)] = std::to_string(std::max(0, run.attempt));
  if (run.preemptions > 0) {
    annotations[std::string(api::kPreemptionsAnnotation)] = std::to_string(run.preemptions);
  }
  if (run.wantedSince) {
    annotations[std::string(api::kWantedSinceAnnotation)] = formatTime(*run.wantedSince);
  }
  return annotations;
}

json buildPod(const api::AutotuneJob& job, const tuning::Trial& trial, const RunOrdinal& run,
              const json& rendezvous) {
  const int attempt = std::max(0, run.attempt);
  const api::Spec& spec = job.spec;
  const json templateMetadata = objectAt(spec.podTemplate, "metadata");
  json podSpec = objectAt(spec.podTemplate, "spec");
  podSpec["restartPolicy"] = "Never";
  podSpec["activeDeadlineSeconds"] = activeDeadlineSeconds(spec);
  selectGpuModel(podSpec, spec);

  const auto primary = tuning::primaryContainer(spec);
  const json templateContainer = primary ? primary->container : json::object();
  std::string messagePath = object::text(templateContainer, "terminationMessagePath");
  if (messagePath.empty()) {
    messagePath = kDefaultTerminationMessagePath;
  }
  const tuning::TrialFiles files{std::string(tuning::kTrialConfigPath), messagePath};

  if (json* found = containerAt(podSpec, primary)) {
    json& container = *found;
    setCommand(container, templateContainer,
               tuning::trialCommand(spec, job.name(), trial, tuning::kTrialConfigPath));
    container["env"] = environment(templateContainer, job, trial, files, rendezvous);
    requestGpus(container, templateContainer, spec.resources.gpusPerNode());
    container["terminationMessagePath"] = messagePath;
    container["terminationMessagePolicy"] = "FallbackToLogsOnError";
    mountConfig(container);
  }
  json volumes = arrayAt(podSpec, "volumes");
  upsert(volumes, configVolume());
  podSpec["volumes"] = std::move(volumes);

  json labels = objectAt(templateMetadata, "labels");
  labels[std::string(api::kJobLabel)] = jobLabelValue(job.name());
  labels[std::string(api::kTrialLabel)] = tuning::trialLabel(trial.name);
  labels[std::string(api::kSpaceLabel)] = tuning::labelValue(trial.space);
  if (!spec.queueName.empty()) {
    labels[std::string(api::kQueueLabel)] = spec.queueName;
  }
  json annotations =
      trialAnnotations(objectAt(templateMetadata, "annotations"), spec, trial, files, run);
  if (gpusFromClaims(templateContainer)) {
    annotations[std::string(api::kClaimedGpusAnnotation)] =
        std::to_string(spec.resources.gpusPerNode());
  }

  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", trialPodName(job.name(), trial.name, attempt)},
            {"namespace", job.namespaceName()},
            {"labels", std::move(labels)},
            {"annotations", std::move(annotations)},
            {"ownerReferences", json::array({ownerReference(job)})},
            {"finalizers", json::array({std::string(api::kTrialResultFinalizer)})}}},
          {"spec", std::move(podSpec)}};
}

}  // namespace

json trialPod(const api::AutotuneJob& job, const tuning::Trial& trial, const RunOrdinal& run) {
  return buildPod(job, trial, run, json::array());
}

std::string trialBatchJobName(std::string_view jobName, std::string_view trialName, int attempt) {
  // Room for "-<index>" in the host name of each of its Pods.
  constexpr std::size_t kMaxLength = api::kMaxDnsLabelLength - 7;
  std::string name = trialPodName(jobName, trialName, attempt);
  if (name.empty() || std::isalpha(static_cast<unsigned char>(name.front())) == 0) {
    name.insert(0, "t");
  }
  return tuning::boundedName(name, kMaxLength, tuning::CutEnd::kAnyButHyphen);
}

json trialBatchJob(const api::AutotuneJob& job, const tuning::Trial& trial, const RunOrdinal& run) {
  const int attempt = std::max(0, run.attempt);
  const std::string name = trialBatchJobName(job.name(), trial.name, attempt);
  json pod = buildPod(job, trial, run, rendezvousEnvironment(job, name));
  json& metadata = pod["metadata"];
  json& podSpec = pod["spec"];
  podSpec["subdomain"] = name;
  spreadOverNodes(podSpec, name);
  json labels = metadata["labels"];
  json annotations = metadata["annotations"];
  json finalizers = metadata["finalizers"];  // the Job controller puts them on each of its Pods
  // Kueue admits the Job, all its Pods together (its batch/job integration): its Pods are not
  // queued one by one.
  json podLabels = labels;
  podLabels.erase(std::string(api::kQueueLabel));
  const int nodes = job.spec.resources.nodesPerTrial;
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name},
            {"namespace", job.namespaceName()},
            {"labels", labels},
            {"annotations",
             {{std::string(api::kTrialNameAnnotation), trial.name},
              {std::string(api::kAttemptAnnotation), std::to_string(attempt)}}},
            {"ownerReferences", json::array({ownerReference(job)})}}},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", nodes},
            {"parallelism", nodes},
            {"backoffLimit", 0},
            {"podReplacementPolicy", "Failed"},
            {"template",
             {{"metadata",
               {{"labels", std::move(podLabels)},
                {"annotations", std::move(annotations)},
                {"finalizers", std::move(finalizers)}}},
              {"spec", std::move(podSpec)}}}}}};
}

json trialService(const api::AutotuneJob& job, const tuning::Trial& trial, int attempt) {
  const std::string name = trialBatchJobName(job.name(), trial.name, attempt);
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", name},
            {"namespace", job.namespaceName()},
            {"labels",
             {{std::string(api::kJobLabel), jobLabelValue(job.name())},
              {std::string(api::kTrialLabel), tuning::trialLabel(trial.name)}}},
            {"ownerReferences", json::array({ownerReference(job)})}}},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", {{std::string(api::kJobNameLabel), name}}},
            // Ranks look each other up before they are ready: they are what makes each other ready.
            {"publishNotReadyAddresses", true}}}};
}

std::string afterTuningJobName(std::string_view jobName) {
  // The Job controller labels its Pods with the Job's name, so it must be a label value too.
  return tuning::boundedName(std::string(jobName) + "-after-tuning");
}

json afterTuningJob(const api::AutotuneJob& job, const tuning::Trial& best) {
  const api::Spec& spec = job.spec;
  const json jobTemplate = spec.afterTuning.value_or(json::object());
  json batchSpec = objectAt(jobTemplate, "spec");
  json podTemplate = objectAt(batchSpec, "template");
  json podSpec = objectAt(podTemplate, "spec");
  // A Job's Pods may not restart Always, Kubernetes' default for a Pod.
  if (!podSpec.contains("restartPolicy")) {
    podSpec["restartPolicy"] = "Never";
  }
  // The command comes from the after-tuning template's primary container, with the best
  // trial's values through argMappings and placeholders, as a trial's would.
  api::Spec runSpec = spec;
  runSpec.podTemplate = podTemplate;
  if (!tuning::primaryContainer(runSpec)) {
    runSpec.primaryContainer.clear();  // no container of that name here: the first one
  }
  const auto primary = tuning::primaryContainer(runSpec);
  if (json* found = containerAt(podSpec, primary)) {
    json& container = *found;
    setCommand(container, primary->container,
               tuning::trialCommand(runSpec, job.name(), best, tuning::kTrialConfigPath));
    mountConfig(container);
  }
  json volumes = arrayAt(podSpec, "volumes");
  upsert(volumes,
         {{"name", std::string(kConfigVolume)},
          {"configMap",
           {{"name", spec.output.configMapName},
            {"items", json::array({{{"key", "ds_config.json"}, {"path", "ds_config.json"}}})}}}});
  podSpec["volumes"] = std::move(volumes);
  podTemplate["spec"] = std::move(podSpec);
  batchSpec["template"] = std::move(podTemplate);

  json labels = objectAt(objectAt(jobTemplate, "metadata"), "labels");
  labels[std::string(api::kJobLabel)] = jobLabelValue(job.name());
  // Kueue admits it from the job's queue, unless its own template names another.
  if (!spec.queueName.empty() && !labels.contains(std::string(api::kQueueLabel))) {
    labels[std::string(api::kQueueLabel)] = spec.queueName;
  }
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", afterTuningJobName(job.name())},
            {"namespace", job.namespaceName()},
            {"labels", std::move(labels)},
            {"ownerReferences", json::array({ownerReference(job)})}}},
          {"spec", std::move(batchSpec)}};
}

}  // namespace autotune::controller
