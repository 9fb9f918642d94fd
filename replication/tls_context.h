// tls_context: one node's TLS credentials, loaded once, and the OpenSSL
// context every TLS connection of its guarded network shares
// (docs/design/replication.md, 7).
//
// Why ours and not CAF's: CAF 0.17.6's OpenSSL module builds a new context
// for every connection and reads the certificate, key and CA files again
// each time, on the network thread (a file changed or gone after start
// fails links, or ends the process); it sets no minimum protocol version;
// and its sessions leave a failed handshake's errors in the network
// thread's OpenSSL error queue, where the next read of a healthy link
// finds them and drops that link.
//
// Contract:
// - load() checks the files before any link is made and names what is
//   wrong: a file that cannot be read or parsed, a key its group or others
//   may access, a key that is not the certificate's, a certificate the CA
//   did not sign. Afterwards the files are never read again.
// - Every connection made from the context speaks TLS 1.2 at the least and
//   verifies the peer's certificate against the CA, both ways; a peer
//   without a certificate is refused.
// - The context is immutable after load() and may be shared by threads;
//   each connection has its own SSL object (guarded_network.cc).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

struct ssl_ctx_st;
struct x509_st;

namespace magnetite::replication {

// One node's TLS credentials, PEM files: its certificate (a chain may follow
// it in the file), its key (unencrypted: a node starts unattended; its mode
// its owner's alone), and the cluster's CA, which must have signed the
// certificate of every node and client. The host name in a certificate is
// not checked, so any certificate of the cluster's CA is a member.
struct tls_files {
  std::string certificate;
  std::string key;
  std::string ca;
};

class tls_context {
 public:
  static result<std::shared_ptr<const tls_context>> load(const tls_files& files);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  ssl_ctx_st* native() const noexcept { return ctx_; }
  // This node's own certificate (the first of its chain file).
  x509_st* certificate() const noexcept;

 private:
  explicit tls_context(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

// OpenSSL's queued errors of this thread as one line, emptying the queue.
std::string openssl_errors();

}  // namespace magnetite::replication
