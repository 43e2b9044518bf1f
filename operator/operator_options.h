#pragma once
// The operator's flags: what each sets, how a command line is read into them, and the cluster
// they name.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "api/labels.h"
#include "controller/objects/measurements.h"
#include "controller/objects/objects.h"
#include "controller/objects/trial_pod.h"
#include "k8s/config.h"
#include "k8s/error.h"

namespace autotune::wiring {

struct Options {
  std::string kubeconfig;
  std::vector<std::string> namespaces;
  std::string metricsAddress = ":8080";
  bool metricsSecure = true;
  std::string metricsCertDir;
  std::string probeAddress = ":8081";
  bool leaderElect = false;
  bool kueue = false;
  std::string workloadSelector{api::kJobLabel};
  std::string nodeSelector{api::kGpuPresentSelector};
  std::string draDriver;  // empty: GPUs are nvidia.com/gpu alone
  std::string leaseNamespace;
  std::string leaseName = "autotune-operator";
  std::string measurementKeySecret = "autotune-operator-measurement-key";
  controller::MeasurementLimits measurementLimits;
  int workers = 2;
  double qps = 20;
  int burst = 30;
  std::string logLevel = "info";
};

// The command line read into Options; every mistake is written to `err` and named. --help and
// --version print and exit at once.
std::optional<Options> parseFlags(const std::vector<std::string>& args, std::ostream& err);

// --kubeconfig, else $KUBECONFIG's files merged as kubectl merges them, else the Pod's own
// service account.
k8s::Result<k8s::ClusterConfig> clusterConfig(const Options& options);

// The variable's value, empty when it is not set.
std::string environment(const char* name);

}  // namespace autotune::wiring
