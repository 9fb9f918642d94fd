// node: one process's part of a cluster (docs/design/replication.md, 7): the
// database's shards, one replica actor per shard, and the links to the other
// nodes over CAF's network layer (caf::io middleman).
//
// The node publishes one actor on its cluster-file address. A peer that
// connects sends (hello, its node id, its cluster fingerprint, the protocol
// version) and gets back our replica actors, one per shard; any mismatch is
// refused with an error that names both sides' values, and nothing is linked.
// connect_peers() does that with every other node and hands each local replica
// the replicas of its shard on every node linked so far; calling it again
// links the nodes that were not reachable, and those lost since (a linked
// node's actor is monitored: when its process dies or the connection breaks,
// it is unlinked, and linked again to its new actors once it is back).
//
// The actor system must have been set up with configure_system() (the
// middleman, and every type that crosses the network registered under one
// name on every node); unless the cluster file says `tls off`, also
// configure_tls() with this node's certificate. The database must hold
// cluster.shards shards; its shard options' tombstone_retention should be the
// cluster file's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/database_core.h"
#include "replication/cluster_file.h"
#include "replication/guarded_network.h"
#include "replication/replica_actor.h"
#include "replication/tls_context.h"

namespace magnetite::replication {

// 3: rwrite carries a round number and is answered by an rvote message
// (replica_interface.h), not a reply.
inline constexpr std::uint32_t protocol_version = 3;

using hello_atom = caf::atom_constant<caf::atom("hello")>;
using offer_atom = caf::atom_constant<caf::atom("offer")>;

// (hello, node id, cluster fingerprint, protocol version) -> [replica per shard]
// Node id 0 is a client of the cluster rather than a member: it gets the
// replicas too, and is linked to nothing.
// (offer, node id, its node actor) -> true: over TLS, a node that linked to
// us hands us its node actor, so that we link back over the same connection
// (see connect_peers).
using node_actor =
    caf::typed_actor<caf::replies_to<hello_atom, std::uint32_t, hash128, std::uint32_t>::with<std::vector<caf::actor>>,
                     caf::replies_to<offer_atom, std::uint32_t, caf::actor>::with<bool>>;

// Registers every message type the replicas exchange.
void add_message_types(caf::actor_system_config& cfg);

// The actor system of a node, or of a client of a cluster: CAF's network
// layer (the io middleman), add_message_types(), and a scheduler of one
// worker a core (at least 2) that SHARES one queue. Work sharing, not CAF's
// default work stealing: an idle stealing worker polls, napping 50 us (more
// with the kernel's timer slack) between looks, and a replicated write
// crosses an idle worker several times (a client's request, each peer's
// rwrite, each vote back), so it waited for those naps and the naps took
// CPU; a sharing worker sleeps on a condition variable and is woken by the
// message itself. Measured in docs/benchmarks.md ("Replication at the speed
// of its disks"). A database with its own system keeps work stealing: its
// write has one hop, which its workers' spinning (worker_spin_polls) covers.
// CAF's BASP heartbeat is on (every heartbeat_interval, on links that have
// shaken hands), for guarded_network's idle timeout.
void configure_system(caf::actor_system_config& cfg);
inline constexpr std::chrono::seconds heartbeat_interval{2};

// The database a node of `cluster` opens in dir: the cluster's shard count and
// tombstone retention (every replica must purge tombstones alike).
core_options core_options_for(const cluster_file& cluster, std::string dir, caf::actor_system& sys);

// Who can join a cluster that runs without TLS: every local user on
// loopback, anyone who reaches the ports beyond (the warning `magnetite
// serve --insecure` prints at every start says this).
std::string who_can_join(const cluster_file& cluster);
// That, and how to stop it: the refusal of node::start without `insecure`.
std::string plaintext_warning(const cluster_file& cluster);

// tls_context::load(files), its status: what a node would refuse to start
// with, named.
status check_tls_files(const tls_files& files);

// check_tls_files(), then records the files in the actor system's
// configuration, where node::start finds them (and loads them once, into
// its tls_context: a certificate naming this node binds every link to the
// name its peer's certificate shows, design 7.3), and gives the system
// CAF's OpenSSL module for connect_to. After cfg.load<caf::io::middleman>(),
// before the actor system is made from cfg.
status configure_tls(caf::actor_system_config& cfg, const tls_files& files);

// The node actor published at host:port, over TLS if `tls` (the actor system
// then needs configure_tls). Waits at most `timeout`: a peer that accepts the
// connection but never answers (a TLS node reached without TLS, or the other
// way round) is an error, not a hang. Clients (node id 0) use it too, then
// send hello. Through CAF's own middleman actor; connect_via() through
// another (a node's guarded_network).
result<node_actor> connect_to(caf::actor_system& sys, const std::string& host, std::uint16_t port, bool tls,
                              std::chrono::milliseconds timeout);
result<node_actor> connect_via(caf::actor_system& sys, const caf::io::middleman_actor& via, const std::string& host,
                               std::uint16_t port, bool tls, std::chrono::milliseconds timeout);

struct node_options {
  std::uint32_t id = 0;
  cluster_file cluster;
  database* db = nullptr;
  std::chrono::milliseconds request_timeout{2000};
  // Per shard, batches of writes an owner has out at once (replica_config).
  std::size_t batches_in_flight = 1;
  // Failure detection, failover and anti-entropy (replica_config); a zero
  // heartbeat leaves elections to explicit `elect` requests.
  std::chrono::milliseconds heartbeat{100};
  std::uint32_t election_ticks = 5;
  std::uint32_t anti_entropy_ticks = 10;
  // A cluster file that says `tls off` is refused at start, loopback
  // included (every local user could join as any node): unless this is
  // set, by an operator who has put the network itself in order
  // (`magnetite serve --insecure`, which warns on every start with
  // plaintext_warning()).
  bool insecure = false;
  // What one connection may send and how long it may stay silent
  // (guarded_network.h); every connection, TLS or not, both directions.
  connection_limits network;
};

class node {
 public:
  struct lost_nodes;     // node.cc
  struct offered_nodes;  // node.cc
  // Who a CAF node is by its link's certificate (guarded_network::
  // identity_of); empty without identities.
  using identify_fn = std::function<std::optional<peer_identity>(const caf::node_id&)>;
  // Spawns the replicas (reading each shard's promise state) and publishes
  // the node actor on this node's address in the cluster file.
  static result<std::unique_ptr<node>> start(node_options options);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Links every peer not linked yet; the peers still unreachable, by id
  // (their reasons are in last_errors()).
  //
  // Over TLS a pair of nodes must share ONE connection: with CAF 0.17.6's
  // OpenSSL transport, the second connection of a pair (which CAF's BASP
  // closes as redundant) also breaks the first, and with it every link
  // between the two. So the node with the lower id connects, and offers its
  // node actor; the other links back through that actor, over the same
  // connection, and until then reports the peer missing. Without TLS each
  // node connects to every other.
  std::vector<std::uint32_t> connect_peers();
  const std::vector<std::string>& last_errors() const noexcept { return errors_; }
  // The nodes the last connect_peers() found lost (and tried to link again).
  const std::vector<std::uint32_t>& last_lost() const noexcept { return lost_; }

  replica_actor replica(std::size_t shard) const { return replicas_.at(shard); }
  std::uint16_t port() const noexcept { return port_; }
  // The connections of this node's port and to its peers: refused, cut, open.
  network_stats network() const { return network_->stats(); }

 private:
  explicit node(node_options options);
  identify_fn identify() const;
  // The replicas' access check: grants by the client a link's certificate
  // names (empty when the cluster file grants nothing).
  replica_config::access_fn client_access_fn() const;
  // The steps of connect_peers (node.cc).
  bool forget_lost_links();
  bool link(const cluster_node& peer);
  void tell_replicas_their_peers();

  node_options options_;
  std::shared_ptr<guarded_network> network_;
  std::vector<replica_actor> replicas_;
  node_actor published_;
  std::uint16_t port_ = 0;
  // Per peer id, once linked: its node actor and its replicas.
  struct linked_node {
    caf::actor_addr node;              // its node actor, watched
    std::vector<caf::actor> replicas;  // one per shard
  };
  std::map<std::uint32_t, linked_node> linked_;
  std::vector<std::string> errors_;
  std::vector<std::uint32_t> lost_;
  // Monitors the linked nodes' actors; the ids of those gone, until taken.
  std::shared_ptr<lost_nodes> gone_;
  // Over TLS: the node actors offered by lower-id peers, by id.
  std::shared_ptr<offered_nodes> offered_;
  caf::actor watch_;
};

}  // namespace magnetite::replication
