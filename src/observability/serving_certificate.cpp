#include "observability/serving_certificate.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <array>
#include <fstream>
#include <iterator>
#include <memory>

#include "observability/openssl_ptr.h"

namespace autotune::observability {
namespace {

constexpr long kValidSeconds = 365L * 24 * 3600;
// A certificate made now is valid from a little earlier, for scrapers whose clocks run behind.
constexpr long kSkewSeconds = 3600;

using Key = OpenSslPtr<EVP_PKEY, EVP_PKEY_free>;
using Certificate = OpenSslPtr<X509, X509_free>;
using Bio = OpenSslPtr<BIO, BIO_free>;

tl::expected<std::string, std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return tl::unexpected(path + ": cannot be read");
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A P-256 key and a certificate for it, signed by itself, for CN autotune-operator.
tl::expected<std::string, std::string> selfSigned() {
  const Key key(EVP_EC_gen("P-256"));
  const Certificate certificate(X509_new());
  std::array<unsigned char, 16> serial{};
  if (!key || !certificate || RAND_bytes(serial.data(), serial.size()) != 1) {
    return tl::unexpected(std::string("cannot make a key and a certificate"));
  }
  serial[0] &= 0x7FU;  // a positive serial number
  const OpenSslPtr<BIGNUM, BN_free> number(BN_bin2bn(serial.data(), serial.size(), nullptr));
  X509_NAME* name = X509_get_subject_name(certificate.get());
  const auto* const commonName = reinterpret_cast<const unsigned char*>("autotune-operator");
  const bool made =
      number &&
      BN_to_ASN1_INTEGER(number.get(), X509_get_serialNumber(certificate.get())) != nullptr &&
      X509_set_version(certificate.get(), 2) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -kSkewSeconds) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(certificate.get()), kValidSeconds) != nullptr &&
      X509_set_pubkey(certificate.get(), key.get()) == 1 &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1 &&
      X509_set_issuer_name(certificate.get(), name) == 1 &&
      X509_sign(certificate.get(), key.get(), EVP_sha256()) > 0;
  const Bio pem(BIO_new(BIO_s_mem()));
  if (!made || !pem ||
      PEM_write_bio_PrivateKey(pem.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_X509(pem.get(), certificate.get()) != 1) {
    return tl::unexpected(std::string("cannot make a self-signed certificate"));
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(pem.get(), &data);
  return std::string(data, static_cast<std::size_t>(length));
}

// The PEM text of the folder's key and certificate, checked to be a pair.
tl::expected<std::string, std::string> mounted(const std::string& dir) {
  auto key = readFile(dir + "/tls.key");
  auto certificate = readFile(dir + "/tls.crt");
  if (!key || !certificate) {
    return tl::unexpected(key ? certificate.error() : key.error());
  }
  const Bio keyBio(BIO_new_mem_buf(key->data(), static_cast<int>(key->size())));
  const Bio certificateBio(
      BIO_new_mem_buf(certificate->data(), static_cast<int>(certificate->size())));
  const Key privateKey(PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr));
  const Certificate x509(PEM_read_bio_X509(certificateBio.get(), nullptr, nullptr, nullptr));
  if (!privateKey) {
    return tl::unexpected(dir + "/tls.key: holds no PEM private key");
  }
  if (!x509) {
    return tl::unexpected(dir + "/tls.crt: holds no PEM certificate");
  }
  if (X509_check_private_key(x509.get(), privateKey.get()) != 1) {
    return tl::unexpected(dir + "/tls.crt: is not the certificate of tls.key");
  }
  return *key + "\n" + *certificate;
}

}  // namespace

tl::expected<std::string, std::string> servingCertificate(const std::string& certificateDir) {
  return certificateDir.empty() ? selfSigned() : mounted(certificateDir);
}

}  // namespace autotune::observability
