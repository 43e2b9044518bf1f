#pragma once
// The key and certificate /metrics serves HTTPS with: those of a kubernetes.io/tls Secret mounted
// in a folder (cert-manager's, say), or else a key and a self-signed certificate made at start, as
// kubebuilder-made operators do, for scrapers that check who may read rather than who serves.

#include <string>
#include <tl/expected.hpp>

namespace autotune::observability {

// PEM text of the private key, then the certificate: `certificateDir`'s tls.key and tls.crt,
// checked to be a pair, or made now when it is empty. An error names the file and what is wrong.
tl::expected<std::string, std::string> servingCertificate(const std::string& certificateDir);

}  // namespace autotune::observability
