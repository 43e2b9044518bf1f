#pragma once
// Kubernetes' rules for the names and label values the API carries.

#include <cstddef>
#include <string_view>

namespace autotune::api {

inline constexpr std::size_t kMaxLabelValueLength = 63;
// A DNS-1123 label: a Pod's host name, a Service's name, a batch/v1 Job's (its Pods' label).
inline constexpr std::size_t kMaxDnsLabelLength = 63;

// [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*, at most 253 characters: the
// name of most objects.
bool isDnsSubdomain(std::string_view name);

// (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, at most 63 characters; empty is a label value.
bool isLabelValue(std::string_view value);

}  // namespace autotune::api
