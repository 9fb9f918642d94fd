#include "replication/tls_context.h"

#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

namespace magnetite::replication {

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("no detail from OpenSSL") : out;
}

tls_context::~tls_context() { SSL_CTX_free(ctx_); }

x509_st* tls_context::certificate() const noexcept { return SSL_CTX_get0_certificate(ctx_); }

result<std::shared_ptr<const tls_context>> tls_context::load(const tls_files& files) {
  if (files.certificate.empty() || files.key.empty() || files.ca.empty())
    return status::invalid_argument("tls: a certificate, a key and the cluster's CA file are all needed");
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_method());
  if (!raw) return status::failed("tls: cannot make an OpenSSL context: " + openssl_errors());
  std::shared_ptr<const tls_context> out(new tls_context(raw));
  SSL_CTX* ctx = raw;
  // Whatever the machine's OpenSSL configuration allows.
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_cipher_list(ctx, "HIGH:!aNULL:!MD5") != 1)
    return status::failed("tls: cannot set the protocol version and ciphers: " + openssl_errors());
  // An encrypted key fails here instead of OpenSSL asking on the terminal.
  SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });
  if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate.c_str()) != 1)
    return status::invalid_argument(
        fmt::format("tls: cannot load the certificate {}: {}", files.certificate, openssl_errors()));
  // As ssh does for its keys: a key others on the machine may read is no
  // longer this node's alone (and with it, its identity in the cluster).
  struct stat key_stat {};
  if (::stat(files.key.c_str(), &key_stat) == 0 && (key_stat.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    return status::invalid_argument(
        fmt::format("tls: the key {} may be read or written by others than its owner (mode {:04o}): `chmod 600` it",
                    files.key, key_stat.st_mode & 07777));
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
      return status::invalid_argument(fmt::format("tls: the key {} is not the key of the certificate {}: {}", files.key,
                                                  files.certificate, openssl_errors()));
    return status::invalid_argument(
        fmt::format("tls: cannot load the key {} (it must be PEM, unencrypted): {}", files.key, openssl_errors()));
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    return status::invalid_argument(fmt::format("tls: the key {} is not the key of the certificate {}: {}", files.key,
                                                files.certificate, openssl_errors()));
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return status::invalid_argument(fmt::format("tls: cannot load the CA file {}: {}", files.ca, openssl_errors()));
  // The peers will check our certificate against the same CA: check it here,
  // so a wrong file is named at start rather than as refused links.
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> verify(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  if (!verify ||
      X509_STORE_CTX_init(verify.get(), SSL_CTX_get_cert_store(ctx), SSL_CTX_get0_certificate(ctx), chain) != 1)
    return status::failed("tls: cannot check the certificate: " + openssl_errors());
  X509_STORE_CTX_set_purpose(verify.get(), X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(verify.get()) != 1)
    return status::invalid_argument(fmt::format("tls: the certificate {} does not check against the CA file {}: {}",
                                                files.certificate, files.ca,
                                                X509_verify_cert_error_string(X509_STORE_CTX_get_error(verify.get()))));
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // Sessions are not resumed: each link shows its certificate again.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  return out;
}

}  // namespace magnetite::replication
