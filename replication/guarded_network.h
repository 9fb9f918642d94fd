// guarded_network: the door of a node's port (docs/design/replication.md, 7.1).
//
// CAF's own network layer (the io middleman's doorman, scribes and streams),
// over plain TCP or, for a cluster over TLS (the default), over TLS sessions of ours
// from one context a node (tls_context.h), with these of ours on every
// connection:
//   - a frame_guard on the bytes it delivers (plain text, or what TLS
//     decrypted): no header that claims more than the limit, none but the
//     handshake first; the connection is closed at the header it refuses,
//     before CAF's BASP broker reads it; all connections together may
//     have claimed at most max_inflight_bytes of payload not yet whole;
//   - a connection_watch: a connection that has not shaken hands within
//     handshake_timeout, or has sent nothing for idle_timeout, is shut down;
//     past max_pending_connections accepted connections that have not
//     shaken hands, or max_pending_per_source of them from one address, a
//     new one is closed as it is accepted;
//   - the node a handshake names: a connection we accepted whose peer names
//     this node, or a node that another open connection of ours has shaken
//     hands with, is closed at that handshake. CAF 0.17's BASP would take
//     either: a connection naming this node has its messages delivered as
//     our own process's, one naming a linked node has its messages
//     delivered as that node's, and with BASP's select-connection flag
//     takes over every message we send that node. (Two plaintext nodes
//     that dial each other at once meet this too: the second connection,
//     which CAF would close as redundant, is closed here, and the dialling
//     node's connect still succeeds over the first. Counted apart, in
//     refused_names, not as a refused frame.)
//   - with identities (a TLS network started with a cluster name): the
//     identity the peer's certificate names (peer_identity.h). A handshake
//     is refused when the certificate names no node or client of the
//     cluster, when another open connection speaks for the same node id
//     under another identity, or when another connection speaks for the
//     same node identity as another process. identity_of() tells who a
//     linked node is.
// A node publishes its actor and connects to its peers through actor(), the
// middleman actor this makes; CAF's default one (sys.middleman()) stays as
// it was, unguarded, for whatever else the host does with the system.
//
// Idle detection needs traffic on healthy links: configure_system() turns on
// CAF's heartbeat (every 2 s, both ways, once a link has shaken hands), so
// only a peer that sends nothing at all reaches idle_timeout.
//
// Shutting a connection down from the sweep is ::shutdown() on its socket:
// the network thread then reads end-of-file and CAF closes the connection
// the usual way. The watch holds a connection's entry, under its lock, until
// the stream that owns the socket is destroyed, before the socket is closed,
// so a sweep never touches a descriptor the kernel has given to another.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/caf_headers.h"  // before any other CAF header
#include "core/status.h"
#include "replication/peer_identity.h"

namespace magnetite::replication {

struct connection_limits {
  // The largest payload a frame may claim before the peer's handshake (BASP's
  // handshakes carry a node id, application ids and an interface: a few
  // hundred bytes) and after it. After: at least the largest message a node
  // or client sends (a client's batch of limits::max_batch_bytes, or a
  // replication batch with the largest value on top).
  std::uint32_t max_handshake_bytes = 16 << 10;
  std::uint32_t max_message_bytes = 96 << 20;
  // What all connections together may have claimed and not delivered
  // whole (CAF sizes a read buffer to each claim as its header arrives).
  std::uint64_t max_inflight_bytes = 256ull << 20;
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::size_t max_pending_connections = 64;
  // Of them, from one source address at most (at least 1; above the total,
  // the total bounds it): one host cannot take every slot from the rest.
  std::size_t max_pending_per_source = 8;
};

// Limits a node can run with, or an error that names the one that is not.
status check_limits(const connection_limits& limits);

struct network_stats {
  std::uint64_t accepted = 0;         // connections taken in (refused ones included)
  std::uint64_t refused_pending = 0;  // closed on accept: too many had not shaken hands
  std::uint64_t refused_frames = 0;   // closed at a frame the guard refused
  std::uint64_t refused_names = 0;    // closed at a handshake naming this node, or a node linked elsewhere
  std::uint64_t refused_source = 0;   // closed on accept: its address had max_pending_per_source pending
  std::uint64_t inflight_bytes = 0;   // claimed by open connections' frames, not yet whole
  std::uint64_t timed_out = 0;        // no handshake within handshake_timeout
  std::uint64_t idle = 0;             // nothing received for idle_timeout
  std::uint64_t open = 0;             // guarded connections now, both directions
  std::uint64_t pending = 0;          // of them accepted and not shaken hands
  std::string last_refusal;           // the guard's reason, for the log and tests
};

class connection_watch;
class tls_context;

class guarded_network {
 public:
  // A guarded middleman actor on sys, over TLS from `tls` when it is given
  // (every connection, accepted or made, shares that one context), and its
  // sweep.
  // With `identities` (a cluster's name; only with tls), links are bound
  // to the identities their certificates name in that cluster.
  static result<std::shared_ptr<guarded_network>> start(caf::actor_system& sys, std::shared_ptr<const tls_context> tls,
                                                        const connection_limits& limits,
                                                        std::string identities = std::string());
  ~guarded_network();
  guarded_network(const guarded_network&) = delete;
  guarded_network& operator=(const guarded_network&) = delete;

  // Publish (publish_atom) and connect (connect_atom) through this.
  const caf::io::middleman_actor& actor() const { return middleman_; }
  network_stats stats() const;
  // Who the certificate of a link to `node` (a CAF node, as a message's
  // sender names it) says it is; none without identities, or for a node no
  // open link has shaken hands as. Thread-safe.
  std::optional<peer_identity> identity_of(const caf::node_id& node) const;
  bool identities() const noexcept;

 private:
  guarded_network() = default;
  std::shared_ptr<connection_watch> watch_;
  caf::io::middleman_actor middleman_;
  caf::actor sweeper_;
};

}  // namespace magnetite::replication
