#include "replication/cluster_certificates.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>
#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

#include "replication/peer_identity.h"
#include "replication/tls_context.h"

namespace magnetite::replication {

namespace {

using key_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using cert_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

result<key_ptr> new_key() {
  key_ptr k(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!k) return status::failed("cert: cannot make an EC P-256 key: " + openssl_errors());
  return k;
}

bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// What a leaf certificate says besides its name.
struct leaf {
  std::string uses;       // extendedKeyUsage
  std::string alt_names;  // subjectAltName
};

// A certificate for `key`, signed by issuer_key: the CA's own when issuer is
// null (self-signed), else a leaf.
result<cert_ptr> make_certificate(EVP_PKEY* key, const std::string& common_name, X509* issuer, EVP_PKEY* issuer_key,
                                  const leaf* as_leaf, int days) {
  cert_ptr cert(X509_new(), X509_free);
  if (!cert) return status::failed("cert: " + openssl_errors());
  X509* x = cert.get();
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  bool ok = X509_set_version(x, 2) == 1 && serial && BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
            BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(x), -3600) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(x), static_cast<long>(days) * 86'400) != nullptr &&
            X509_set_pubkey(x, key) == 1;
  X509_NAME* name = X509_get_subject_name(x);
  ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                        reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) == 1;
  ok = ok && X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1;
  X509* signer = issuer ? issuer : x;
  if (!as_leaf) {
    ok = ok && add_extension(x, signer, NID_basic_constraints, "critical,CA:TRUE") &&
         add_extension(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
         add_extension(x, signer, NID_subject_key_identifier, "hash");
  } else {
    ok = ok && add_extension(x, signer, NID_basic_constraints, "critical,CA:FALSE") &&
         add_extension(x, signer, NID_key_usage, "critical,digitalSignature") &&
         add_extension(x, signer, NID_ext_key_usage, as_leaf->uses) &&
         add_extension(x, signer, NID_subject_alt_name, as_leaf->alt_names) &&
         add_extension(x, signer, NID_authority_key_identifier, "keyid");
  }
  ok = ok && X509_sign(x, issuer_key, EVP_sha256()) > 0;
  if (!ok)
    return status::failed(fmt::format("cert: cannot make the certificate of {}: {}", common_name, openssl_errors()));
  return cert;
}

// PEM text of a certificate or a key.
result<std::string> pem_of(X509* cert, EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  bool ok = bio && (cert ? PEM_write_bio_X509(bio.get(), cert)
                         : PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)) == 1;
  if (!ok) return status::failed("cert: cannot write PEM: " + openssl_errors());
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

status write_new(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return status::io_error(fmt::format("cert: cannot create {}: {}", path, std::strerror(errno)));
  // The mode asked for, whatever the umask.
  bool ok = ::fchmod(fd, mode) == 0;
  std::size_t at = 0;
  while (ok && at < text.size()) {
    auto n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) at += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok) return status::io_error(fmt::format("cert: cannot write {}: {}", path, std::strerror(saved)));
  return status::ok();
}

// A node's host as a name a certificate may carry beside its URI.
std::string host_name(const std::string& host) {
  unsigned char buf[16];
  bool ip = ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
  return (ip ? "IP:" : "DNS:") + host;
}

}  // namespace

tls_files certificate_files(const std::string& dir, std::string_view who) {
  return {fmt::format("{}/{}.pem", dir, who), fmt::format("{}/{}.key", dir, who), dir + "/ca.pem"};
}

result<std::vector<std::string>> make_cluster_certificates(const cluster_file& cluster, const certificate_set& set) {
  if (set.dir.empty()) return status::invalid_argument("cert: a directory to write into is needed");
  if (set.days < 1 || set.days > 36'500)
    return status::invalid_argument(fmt::format("cert: days {} must be from 1 to 36500", set.days));
  std::vector<std::string> clients;
  for (const auto& [name, _] : cluster.clients) clients.push_back(name);
  for (const auto& c : set.clients)
    if (std::find(clients.begin(), clients.end(), c) == clients.end()) clients.push_back(c);
  for (const auto& c : clients)
    if (!valid_name(c))
      return status::invalid_argument(
          fmt::format("cert: client name '{}' must be 1 to 64 letters, digits, '.', '-' or '_'", c));
  struct planned {
    std::string name;    // file stem
    std::string common;  // CN
    leaf what;
  };
  std::vector<planned> leaves;
  for (const auto& n : cluster.nodes)
    leaves.push_back({fmt::format("node{}", n.id),
                      fmt::format("{} node {}", cluster.name, n.id),
                      {"serverAuth,clientAuth",
                       fmt::format("URI:magnetite://{}/node/{},{}", cluster.name, n.id, host_name(n.host))}});
  for (const auto& c : clients)
    leaves.push_back({"client-" + c,
                      fmt::format("{} client {}", cluster.name, c),
                      {"clientAuth", fmt::format("URI:magnetite://{}/client/{}", cluster.name, c)}});
  std::vector<std::string> files{set.dir + "/ca.pem", set.dir + "/ca.key"};
  for (const auto& l : leaves) {
    auto f = certificate_files(set.dir, l.name);
    files.push_back(std::move(f.certificate));
    files.push_back(std::move(f.key));
  }
  if (::mkdir(set.dir.c_str(), 0700) != 0 && errno != EEXIST)
    return status::io_error(fmt::format("cert: cannot make {}: {}", set.dir, std::strerror(errno)));
  for (const auto& f : files) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) == 0)
      return status::invalid_argument(fmt::format("cert: {} exists: nothing was written (no file is overwritten)", f));
  }
  ERR_clear_error();
  auto ca_key = new_key();
  if (!ca_key) return ca_key.error();
  auto ca =
      make_certificate(ca_key->get(), cluster.name + " development CA", nullptr, ca_key->get(), nullptr, set.days);
  if (!ca) return ca.error();
  std::vector<std::pair<std::string, mode_t>> texts;
  auto add = [&](X509* cert, EVP_PKEY* key) -> status {
    auto c = pem_of(cert, nullptr);
    if (!c) return c.error();
    auto k = pem_of(nullptr, key);
    if (!k) return k.error();
    texts.emplace_back(std::move(*c), 0644);
    texts.emplace_back(std::move(*k), 0600);
    return status::ok();
  };
  MAGNETITE_TRY(add(ca->get(), ca_key->get()));
  for (const auto& l : leaves) {
    auto key = new_key();
    if (!key) return key.error();
    auto cert = make_certificate(key->get(), l.common, ca->get(), ca_key->get(), &l.what, set.days);
    if (!cert) return cert.error();
    MAGNETITE_TRY(add(cert->get(), key->get()));
  }
  for (std::size_t i = 0; i < files.size(); ++i) MAGNETITE_TRY(write_new(files[i], texts[i].first, texts[i].second));
  return files;
}

result<std::vector<std::string>> certificate_names(const std::string& pem_file) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(pem_file.c_str(), "r"), BIO_free);
  if (!bio) return status::io_error(fmt::format("cert: cannot read {}: {}", pem_file, openssl_errors()));
  cert_ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (!cert)
    return status::corruption(fmt::format("cert: {} holds no PEM certificate: {}", pem_file, openssl_errors()));
  return certificate_names(cert.get());
}

}  // namespace magnetite::replication
