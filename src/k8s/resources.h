#pragma once
// The Kubernetes resources the project's programs ask for, named once.

#include "k8s/client.h"

namespace autotune::k8s {

inline const Resource kNamespaces{"", "v1", "namespaces", false};
inline const Resource kNodes{"", "v1", "nodes", false};
inline const Resource kPods{"", "v1", "pods", true};
inline const Resource kConfigMaps{"", "v1", "configmaps", true};
inline const Resource kEvents{"", "v1", "events", true};
inline const Resource kLeases{"coordination.k8s.io", "v1", "leases", true};
inline const Resource kBatchJobs{"batch", "v1", "jobs", true};
inline const Resource kServices{"", "v1", "services", true};
inline const Resource kSecrets{"", "v1", "secrets", true};
// Dynamic Resource Allocation's (GA since Kubernetes 1.34).
inline const Resource kResourceSlices{"resource.k8s.io", "v1", "resourceslices", false};
inline const Resource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", true};
// Kueue's, where it is installed.
inline const Resource kWorkloads{"kueue.x-k8s.io", "v1beta2", "workloads", true};
inline const Resource kLocalQueues{"kueue.x-k8s.io", "v1beta2", "localqueues", true};

}  // namespace autotune::k8s
