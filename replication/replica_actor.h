// replica_actor: one shard's replica on one node (interface in
// replica_interface.h): the acceptor of every election, and the owner when it
// wins one. It drives its node's shard actor for storage; the rules are
// replication/promise_state.h, the transfer tree/tree_puller.h.
//
// Behaviour, as a table of message -> effect:
//   prepare(b)         on_prepare; a promise is made durable (the shard's
//                      `promise`), then the shard checkpoints, then the reply
//                      carries our root. A promise above our own epoch while
//                      owning or campaigning: we step down first.
//   rwrite(e, r, ops)  on_write; refused below the promise (the writer was
//                      deposed). Above it: adopt e durably. Then the ops go to
//                      the shard as ONE stamped apply; after its fsync (or at
//                      once, refused) the writer gets rvote(r, vote).
//   rvote(r, vote)     a peer's vote on our write round r: a majority decides
//                      it; a no above our epoch deposes us, whatever round.
//   rexpire            our timer: write rounds past request_timeout fail.
//   confirm(e)         whether our promise is still e; a yes is the owner
//                      heard (the follower's silence starts again).
//   fetch(hashes)      node encodings from our store (thread-safe reads).
//   sync(root, from)   pull root's missing nodes from peer `from`, import them
//                      bottom up, merge by highest stamp; the report.
//   elect              mint a ballot above all seen, promise it to ourselves
//                      (durable), send prepare to every peer. With a majority
//                      of promises (ourselves included): pull and merge every
//                      promiser's tree that differs from ours, then have the
//                      peers pull ours until a majority (ourselves included)
//                      merged it; only then owner, stamping (b, 1), (b, 2), ...
//                      Otherwise follower again; the answer says which.
//   put / del / cas    owner only. Writes of one key are serialised: a request
//                      on a key with a write in flight waits for it. The owner
//                      checks (CAS), stamps, and adds the write to its batch.
//                      The batch goes out once every message queued before it
//                      was taken (a flush the owner sends itself) while fewer
//                      than `batches_in_flight` batches are undecided (else once
//                      one is decided), or when it is full: ONE stamped apply
//                      to its own shard and ONE rwrite to every peer for all
//                      its writes; each client is answered once its own shard
//                      and majority - 1 peers made the batch durable. A write still
//                      in the batch when the owner steps down is refused
//                      `busy` (it went nowhere). A
//                      refusal from a peer, or no majority within
//                      `request_timeout`, deposes the owner: the client gets
//                      `ambiguous`, every waiting request too, and the replica
//                      is a follower until it wins an election again (its own
//                      shard may hold a write no majority has).
//   beat(chain)        our heartbeat timer, re-armed each time. Owner: a
//                      confirm round to every peer; short of a majority, step
//                      down. Follower: one more silent heartbeat; past its
//                      random patience, probe, then campaign (as `elect`). Every
//                      anti_entropy_ticks: push our root to the next peer
//                      (`sync`), one push at a time.
//   probe              a pre-vote: yes when we are a follower, or running a
//                      pre-vote of our own, that heard no live owner for
//                      election_ticks heartbeats. A follower campaigns of its
//                      own accord only after a majority (itself included)
//                      said yes.
//   down(peer)         the replica we last promised is gone: campaign soon.
//   info               role, promise, epoch, checkpointed root, and where we
//                      stand under the long-absence rule.
//
// The long-absence rule (design, 6): past its horizon (last sync, or last
// settling, + tombstone_retention / 2) a replica is absent. It then answers
// rwrite no, refuses sync and elect, pushes nothing, steps down if it owns,
// and answers a prepare only after recovering: it asks every peer's info and
// adopts the tree of one that synced past its horizon (dropping what only it
// holds), waits for one that soon will, or, when a majority answered and
// none knows recent writes, settles (the whole cluster was away).
//   get                owner only; waits for a write of the key in flight; reads
//                      the value, then a confirm round must find a majority
//                      (ourselves included) still promised to our epoch.
//
// Invariants: no reply depends on promise state that is not durable; an owner
// answers a read only with values a majority holds; a replica never takes a
// write from an epoch below its promise; an absent replica acknowledges,
// promises and pushes nothing, so a tree it adopts need only be synced past
// its horizon to hold everything it ever acknowledged.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "actors/shard_actor.h"
#include "replication/client_access.h"
#include "replication/promise_state.h"
#include "replication/replica_interface.h"

namespace magnetite::replication {

struct replica_config {
  std::uint32_t node = 0;  // this node's id (cluster file), > 0
  std::size_t cluster_size = 1;
  // This node's shard actor now: its handle changes when the database
  // restarts the shard, and the replica follows (its promise state is the
  // shard's durable one either way).
  std::function<shard_engine_actor()> shard;
  std::shared_ptr<shard_slot> slot;  // its published views (reads, node fetches)
  promise_state initial;             // the shard's promise state (from_log of its `(promise)`)
  std::chrono::milliseconds request_timeout{2000};
  // Batches of writes shipped and not yet decided, at most; the writes that
  // arrive meanwhile gather into the next batch, as a shard's group commit
  // gathers writes while it syncs. 1 measured best on one machine
  // (docs/benchmarks.md); more lets a batch go while the one before is
  // still crossing a slow link. A full batch goes out regardless.
  std::size_t batches_in_flight = 1;
  // Client writes (put, del, cas, conditional batches) the owner holds at
  // most, admitted and not yet answered: waiting for a key, in a batch, in
  // a write round. Past it a client write is `busy`, nothing written, so a
  // flood of clients cannot grow a node without bound.
  std::size_t max_client_writes = 4096;
  std::size_t pull_batch = 256;         // nodes per fetch
  wall_clock_ns clock = system_now_ns;  // the owner fixes absolute deadlines with it
  // A delete's purge comes this long after it; half of it is the long-absence
  // rule's horizon (the cluster file's tombstone_retention_s).
  std::chrono::nanoseconds tombstone_retention = std::chrono::hours(24);
  // How long the record of a write with a request_id is kept
  // (request_record.h): retries within it never apply a write twice.
  std::chrono::nanoseconds request_memory = default_request_memory;
  // Failure detection, failover and anti-entropy run on a heartbeat timer
  // (the actor's scheduler clock); zero turns them all off, and elections
  // happen only on `elect` (the deterministic tests drive them so).
  std::chrono::milliseconds heartbeat{0};
  // A follower that hears nothing from an owner, and promises nobody, for a
  // random [election_ticks, 2 x election_ticks) heartbeats campaigns; it
  // campaigns within election_ticks / 2 heartbeats once the owner's replica
  // is known to be down (a CAF monitor across the network).
  std::uint32_t election_ticks = 5;
  // Every so many heartbeats, our checkpointed root goes to the next peer in
  // turn, which pulls what it lacks and merges it; 0: never.
  std::uint32_t anti_entropy_ticks = 0;
  std::uint64_t seed = 0;  // of the random timeouts; 0: from the node id
  // What a client's requests may touch, by the CAF node that sent them
  // (node::client_access_fn: the client its certificate names). Empty:
  // every sender may read and write every key. Members (this process, a
  // peer's node) are never asked. Called once a client request.
  using access_fn = std::function<std::shared_ptr<const client_access>(const caf::node_id&)>;
  access_fn access;
};

replica_actor spawn_replica(caf::actor_system& sys, replica_config config);

}  // namespace magnetite::replication
