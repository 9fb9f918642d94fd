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
// The actor system must have been configured with add_message_types() (every
// type that crosses the network, registered under one name on every node) and
// load the middleman. The database must hold cluster.shards shards; its shard
// options' tombstone_retention should be the cluster file's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "actors/database.h"
#include "replication/cluster_file.h"
#include "replication/replica_actor.h"

namespace magnetite::replication {

inline constexpr std::uint32_t protocol_version = 1;

using hello_atom = caf::atom_constant<caf::atom("hello")>;

// (hello, node id, cluster fingerprint, protocol version) -> [replica per shard]
// Node id 0 is a client of the cluster rather than a member: it gets the
// replicas too, and is linked to nothing.
using node_actor =
    caf::typed_actor<caf::replies_to<hello_atom, std::uint32_t, hash128, std::uint32_t>::with<std::vector<caf::actor>>>;

// Registers every message type the replicas exchange.
void add_message_types(caf::actor_system_config& cfg);

// The database a node of `cluster` opens in dir: the cluster's shard count and
// tombstone retention (every replica must purge tombstones alike).
database_options database_options_for(const cluster_file& cluster, std::string dir, caf::actor_system& sys);

struct node_options {
  std::uint32_t id = 0;
  cluster_file cluster;
  database* db = nullptr;
  std::chrono::milliseconds request_timeout{2000};
  // Failure detection, failover and anti-entropy (replica_config); a zero
  // heartbeat leaves elections to explicit `elect` requests.
  std::chrono::milliseconds heartbeat{100};
  std::uint32_t election_ticks = 5;
  std::uint32_t anti_entropy_ticks = 10;
};

class node {
 public:
  struct lost_nodes;  // node.cc
  // Spawns the replicas (reading each shard's promise state) and publishes
  // the node actor on this node's address in the cluster file.
  static result<std::unique_ptr<node>> start(node_options options);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Links every peer not linked yet; the peers still unreachable, by id
  // (their reasons are in last_errors()).
  std::vector<std::uint32_t> connect_peers();
  const std::vector<std::string>& last_errors() const noexcept { return errors_; }
  // The nodes the last connect_peers() found lost (and tried to link again).
  const std::vector<std::uint32_t>& last_lost() const noexcept { return lost_; }

  replica_actor replica(std::size_t shard) const { return replicas_.at(shard); }
  std::uint16_t port() const noexcept { return port_; }

 private:
  explicit node(node_options options);

  node_options options_;
  std::vector<replica_actor> replicas_;
  node_actor published_;
  std::uint16_t port_ = 0;
  // Per peer id: its replicas, once linked.
  std::map<std::uint32_t, std::vector<caf::actor>> linked_;
  std::vector<std::string> errors_;
  std::vector<std::uint32_t> lost_;
  // Monitors the linked nodes' actors; the ids of those gone, until taken.
  std::shared_ptr<lost_nodes> gone_;
  caf::actor watch_;
};

}  // namespace magnetite::replication
