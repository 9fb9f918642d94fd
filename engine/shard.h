// shard: one shard's data (its write-ahead log, the memtable of the writes
// since the last checkpoint, and its tree in a node store), with no actor in
// it. The shard actor drives one; tests drive one directly on a fault_env.
//
// Write path (write-ahead before buffer): put / del / cas / batch check their
// input, append to the log's in-memory group and insert the change into the
// active memtable (engine/memtable.h), once: the log frame and the memtable
// node are the write's only copies. Nothing staged is visible to readers:
// views read the memtable at the sequence of the last durable group.
// commit_group() makes every staged write durable with ONE log sync, then
// publishes a new read_view at the memtable's latest sequence; only then may
// the owner acknowledge them. A CAS is checked against everything before it,
// staged writes included, and fails alone.
//
// Fsync policy (shard_options::fsync): under `always` (the default) the above
// holds as written. Under `interval` commit_group() writes the group to the log
// but fdatasyncs only if the last fdatasync is at least fsync_interval old: its
// writes are published (visible to readers) and may be acknowledged BEFORE they
// are durable, and a crash can lose them. The owner bounds that window by
// calling sync_durable() about fsync_interval after a commit_group() that left
// log_pending_durability(); then an acknowledged write is lost only by a crash
// within about fsync_interval of it.
//
// Checkpoint: when the active memtable holds checkpoint_bytes, it becomes
// immutable and a new one takes the writes (begin_checkpoint); the log starts
// a new segment there. The immutable one is then, on a thread of its own
// while writes go on, or at once, (plan_checkpoint)
// - applied to the tree alone, the runs kept, when all its keys lie above
//   every key of the tree and the runs (keys written in order: it touches
//   only the tree's right edge, and no run holds an older version of them);
// - otherwise written as a sorted run (engine/sorted_run.h): a tree of its
//   own entries only, nothing of the shard's tree read or rewritten, while
//   the runs hold fewer entries than the tree and number fewer than
//   max_sorted_runs;
// - otherwise folded, with every run, into the tree in one pass
//   (fold_runs), each leaf rewritten once for all of them.
// So the tree's entries at least double from one fold to the next until
// the run count bounds them, and a write's entry is rewritten in the tree a
// bounded number of times, however large the tree. The node store is then
// flushed (made durable), and finish_checkpoint() appends the commit marker
// (root, the runs, node-store position, the last sequence it covers) to the
// log. Views read the immutable memtable whole until the new runs or root
// replace it. Only one checkpoint runs at a time: when the active memtable
// fills again before the running one ends, the writes wait for it (a stall,
// counted in stats; relieve_memory). So a shard holds at most two
// memtables, each about checkpoint_bytes. checkpoint() (commit, shutdown,
// gc, ingest, merges) folds everything, so the root it returns holds every
// write before it. Recovery (open) reads the runs the last marker names
// back (their filters from their keys) and replays the frames it does not
// cover.
//
// TTL: a write with a time to live stores its ABSOLUTE expiry (clock + ttl,
// fixed here, once) in the value's envelope and a durable expiry entry in the
// tree; reads treat an expired value as absent; stage_expired() deletes due
// keys through the log like any delete. The in-memory expiry index is rebuilt
// at open from the tree's expiry entries and the replayed writes.
//
// Replicated shards (replication/, docs/formats/replication.md): the owner
// stamps each write, and every replica stores it with apply_stamped(), which
// keeps the highest stamp per key (commutative and idempotent); a delete is a
// stamped tombstone. When a stamped value expires, the TTL timer turns it into
// a tombstone of the same stamp purged tombstone_retention after its deadline,
// so an older write arriving late cannot bring the key back. The replication
// layer's promise state is an opaque payload made durable through the log
// (record_replication_state) and recovered at open.
//
// Files: shard.cc holds the write path, recovery; shard_checkpoint.cc the
// checkpoints and ingest;
// shard_stamped.cc what replicated shards add; shard_maintenance.cc the
// operator checks (usage, verify) and space upkeep (gc, reclamation).
//
// Fail-stop: after any failed log or node-store operation every call returns
// the `failed` error; the owner must drop the shard and open it again (which
// replays). A failed sync is never retried as if it could succeed. Bad input
// gets invalid_argument and changes nothing. Not thread-safe (one owner); the
// published views are, and may outlive the shard. A checkpoint's thread
// touches only its immutable memtable and the node store (whose writes are
// serialised); destroying the shard waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/stamp.h"
#include "engine/read_view.h"
#include "engine/state_space.h"
#include "magnetite/options.h"
#include "magnetite/stats.h"
#include "magnetite/write.h"
#include "tree/node_store.h"
#include "ttl/envelope.h"
#include "ttl/expiry_index.h"
#include "wal/log_writer.h"

namespace magnetite {

// One write of a replicated shard as its owner stamped it.
struct stamped_write {
  std::string key;
  magnetite::stamp stamp;
  std::optional<std::string> value;  // nullopt: a delete, kept as a tombstone
  // A value's absolute expiry (none: it does not expire); a tombstone's purge
  // deadline (required). Chosen by the owner, so replicas store equal bytes.
  std::optional<std::uint64_t> expires_at_ns;
};

// What merge_stamped() did.
struct merge_report {
  std::uint64_t differing = 0;  // data entries the foreign tree holds that differ from ours
  std::uint64_t taken = 0;      // of those, staged because their stamp was higher
  std::uint64_t dropped = 0;    // adopt only: stamped entries we held and the foreign tree does not
};

class shard {
 public:
  // Opens (creating if needed) the shard in `dir`: `dir`/wal and `dir`/nodes.
  // The caller holds the data directory's lock.
  static result<std::unique_ptr<shard>> open(env& e, std::string dir, shard_options options);
  ~shard();
  shard(const shard&) = delete;
  shard& operator=(const shard&) = delete;

  // ---- staging (durable and visible after commit_group) ----
  status put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl = {});
  status del(std::string_view key);
  // Swaps in `desired` (nullopt: delete) if the key's value is `expected`
  // (nullopt: absent or expired); otherwise changes nothing and reports the value.
  result<cas_outcome> cas(std::string_view key, std::optional<std::string_view> expected,
                          std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl = {});
  status batch(std::span<const batch_write> writes);  // all or nothing
  // The conditional batch of state/ (docs/formats/state.md): every key, in
  // checks and writes, is a state key (state_space::prefix). If each check
  // holds against the latest state (staged writes included), stages the
  // writes as ONE log frame whose sequence number R is their revision: each
  // stored value is R (u64 LE) followed by the caller's bytes. Otherwise
  // stages nothing and reports the first failed check. No writes: a check
  // only. A value whose revision cannot be read is corruption, naming the key.
  result<cas_outcome> apply(std::span<const state_check> checks, std::span<const batch_write> writes);
  // Stages, as ONE log frame, each write whose stamp is above the stamp the
  // key holds now (staged writes included; an unstamped value or no value
  // holds the zero stamp); the others change nothing. Per write, whether it
  // was taken. Writes of one call are judged in order. Keys of either space
  // (the replica keeps its request records in the state space; it refuses
  // state keys from clients). Bad input (a key or value over the limits, a
  // zero stamp, a tombstone with no deadline) refuses the whole call and
  // changes nothing. A write stamped above stamp_bound() is taken without
  // reading what its key holds.
  result<std::vector<bool>> apply_stamped(std::span<const stamped_write> writes);
  // Deletes (stages) up to `limit` keys whose deadline has passed, turning a
  // stamped value into its tombstone instead; how many.
  result<std::size_t> stage_expired(std::size_t limit);

  // Appends the replication layer's promise state (opaque, at most
  // limits::max_replication_state_bytes); it is durable once the next
  // commit_group() returns ok, and only then may anything depending on it be
  // answered. replication_state() is the latest recorded (or recovered) one.
  status record_replication_state(std::string_view payload);
  const std::optional<std::string>& replication_state() const noexcept { return replication_state_; }
  // See stamp_bound_ below; for tests and stats.
  std::optional<stamp> stamp_bound() const noexcept { return stamp_bound_; }

  std::size_t staged() const noexcept { return staged_writes_; }
  // One log sync for everything staged, then a new published view.
  status commit_group();
  // True when a committed write (published, perhaps acknowledged) is not yet
  // durable: only under a policy other than `always`.
  bool log_pending_durability() const noexcept { return log_->durable_sequence() < log_->written_sequence(); }
  // Makes everything in the log durable (one fdatasync, none if nothing is
  // pending), whatever the policy. A failure stops the shard like a failed group.
  status sync_durable();

  // ---- reading (the published view: committed writes; see the fsync policy) ----
  std::shared_ptr<const read_view> view() const noexcept { return view_; }
  result<std::optional<std::string>> get(std::string_view key) const;
  // A read-only view of an older root this store holds (a retained
  // checkpoint's), with no layers: its tree as it was committed. The view is
  // pinned like a published one: while it (or any view of that root) lives,
  // gc and reclamation keep the root's nodes, retained or not. not_found if
  // the store does not hold `root`.
  result<std::shared_ptr<const read_view>> view_at(const hash128& root);

  // ---- checkpoint and TTL ----
  // The active memtable holds checkpoint_bytes (or more).
  bool checkpoint_due() const noexcept { return active_->bytes() >= options_.checkpoint_bytes; }
  // A checkpoint of the writes the current view holds, all of them, before it
  // returns: commits staged writes, ends a running checkpoint, then folds
  // the active memtable and every sorted run into the tree at once. Returns
  // the new root, which holds every write.
  result<hash128> checkpoint();
  // The steps of a checkpoint that writes go on beside (see the top):
  // begin_checkpoint() commits staged writes, then (if the active memtable
  // holds any and none runs) freezes it, starts the log's new segment,
  // publishes a view reading it whole beside a new active one, and applies it
  // to the tree: on a thread of its own that calls `done` when the work is
  // over (`background`), or before returning. finish_checkpoint(), on the
  // owner's thread, waits for that work if it has not ended, then appends the
  // marker and publishes the view of the new root; it returns that root (the
  // current one when none was running). A failure of either stops the shard.
  status begin_checkpoint(bool background, std::function<void()> done = {});
  result<hash128> finish_checkpoint();
  bool checkpointing() const noexcept { return running_ != nullptr; }
  // The running checkpoint's work is over: finish_checkpoint() will not wait.
  bool checkpoint_ready() const noexcept;
  // After a group, when checkpoint_due(): a running checkpoint is finished
  // first (its writes have waited for it if it had not ended: a stall,
  // counted in stats), then a new one begins, as begin_checkpoint. The root
  // of the checkpoint finished here, if one was.
  result<std::optional<hash128>> relieve_memory(bool background, std::function<void()> done = {});
  // Bytes the memtables hold (active and immutable).
  std::size_t memtable_bytes() const noexcept;
  // Bulk ingest: key i -> value i (user keys strictly increasing, values
  // without a TTL; a key's earlier TTL goes) written straight into the tree,
  // not through the log's frames. The layers are checkpointed first, then the
  // writes are applied to the tree, the node store flushed and the new root
  // recorded by one commit marker, as a checkpoint does: the marker is the
  // commit point, so a crash before it loses the whole ingest and one after it
  // nothing. Costs a checkpoint's fsyncs (pack and log) however many writes;
  // bad input (invalid_argument) is refused before anything changes, staged
  // writes included. Returns the root.
  // The writes come flat: `bytes` holds key 0, value 0, key 1, value 1, ...
  // back to back, and `sizes` their lengths in the same order.
  result<hash128> ingest(std::string_view bytes, std::span<const std::uint32_t> sizes);
  // What ingest refuses (invalid_argument): a key or value out of limits, or
  // keys not strictly increasing. The database checks a whole ingest with it
  // before any shard gets its part.
  static status check_ingest(std::span<const std::pair<std::string_view, std::string_view>> writes);
  std::optional<std::uint64_t> next_deadline() const { return expiry_.earliest(); }
  std::uint64_t now_ns() const { return options_.clock(); }

  shard_stats stats() const noexcept;
  // `retained`: the roots kept for diffs, counted as live.
  result<shard_usage> usage(std::span<const hash128> retained = {}) const;

  // ---- operator checks (each commits staged writes first) ----
  // Reads back every node reachable from the current root and from
  // `retained` (roots kept for diffs; those this store does not hold are
  // skipped), the log from its last commit marker against its checksums, and
  // the expiry entries against the values and the in-memory index. Changes
  // nothing but the checkpoint; damage goes in the report, not the status.
  result<shard_verify_report> verify(std::span<const hash128> retained);
  // Drops every node not reachable from the current root, `retained` (those
  // this store holds) or the root of a view still held anywhere (a scan
  // cursor keeps reading its snapshot). A failed read (damage) fails gc and
  // changes nothing; a failed write stops the shard.
  result<tree::gc_result> gc(std::span<const hash128> retained);
  // ok, or the error that stopped the shard.
  const status& failure() const noexcept { return failure_; }

  // ---- space reclamation, in steps the owner runs between writes ----
  // Due by shard_options' policy, no cycle running, and no import of nodes
  // waiting for its merge (imported nodes are referenced by no root of ours
  // until the merge, and a cycle begun then would drop them) unless the
  // import is a minute old (a pull that never ends must not block it for good).
  bool reclaim_due() const;
  // Starts a cycle keeping the current root, `retained` and pinned views' roots,
  // aiming at `max_amplification` (nullopt: the option's). A running
  // checkpoint goes on: the packs it writes to are no victims of the cycle.
  status begin_reclaim(std::span<const hash128> retained, std::optional<double> max_amplification = {});
  // One step; true when the cycle ended. A damaged node ends the cycle with
  // its error (the shard goes on); a failed write or sync stops the shard.
  result<bool> reclaim_step();
  bool reclaiming() const noexcept { return store_->reclaiming(); }
  // Bytes reclamation gave back since open.
  std::uint64_t reclaimed_bytes() const { return store_->reclamation().bytes_reclaimed; }

  // ---- delta transfer between replicas (tree/tree_puller.h) ----
  // A peer pulls the nodes of our root that it lacks; we pull theirs. The node
  // store only ever holds complete subtrees, so holding a node means holding
  // everything below it.
  bool holds_node(const hash128& h) const;
  // The node's canonical encoding (what its hash is of); not_found if absent.
  result<std::string> node_encoding(const hash128& h) const;
  // Stores a node received from a peer: corruption if the bytes do not decode
  // or do not hash to h; invalid_argument if it is an internal node whose
  // children are not all held yet (import bottom up). Not durable by itself:
  // the next checkpoint's flush makes it so, and nothing refers to it before.
  status import_node(const hash128& h, std::string_view encoding);
  // Merges the tree `foreign_root` (fully held: imported) into this shard:
  // every data entry of it that differs from ours is offered to
  // apply_stamped(), in frames of bounded size, so the higher stamp wins.
  // Checkpoints first (the diff runs between trees). Unstamped foreign values
  // are not replicated data and are skipped. Staged like any write: durable
  // at the next commit_group(). Taken writes are stamped writes in their own
  // right, so a merge stopped half way (an error) leaves a consistent state.
  result<merge_report> merge_stamped(const hash128& foreign_root);
  // merge_stamped, and then every stamped entry this shard holds that the
  // foreign tree lacks is deleted (no tombstone). For a replica that was away
  // longer than the tombstone retention (docs/design/replication.md, 6): what
  // only it holds is a write deleted and purged elsewhere meanwhile, or a write
  // no majority took; the caller must know the foreign tree holds every write
  // this shard acknowledged. Unstamped entries are left alone.
  result<merge_report> adopt_stamped(const hash128& foreign_root);

 private:
  shard(env& e, std::string dir, shard_options options);
  status check_usable() const;
  status fail(status s);
  result<merge_report> merge_foreign(const hash128& foreign_root, bool drop_ours_only);
  // The current root, then the roots of `retained` this store holds.
  std::vector<hash128> kept_roots(std::span<const hash128> retained) const;
  // The expiry entries against the values and the index: problems found.
  result<std::vector<std::string>> check_expiry(std::uint64_t& expiring) const;
  result<std::string> envelope_for(std::string_view value, std::optional<std::chrono::nanoseconds> ttl) const;
  // The stored bytes of a tree key as the next write sees them (staged first).
  result<bool> find_latest(std::string_view tree_key, std::string& out) const;
  // The envelope of a key as the next write sees it, expired or not (nullopt:
  // no entry); its views point into `bytes`. A failed read stops the shard.
  result<std::optional<ttl::unwrapped>> latest_envelope(std::string_view key, std::string& bytes);
  // The user value as the next write sees it (nullopt: absent or expired).
  result<std::optional<std::string>> latest_value(std::string_view key) const;
  // The revision stored with a state key (0: absent or expired).
  result<std::uint64_t> latest_revision(std::string_view key) const;
  // Checks a batch's writes and wraps their values (envelope, TTL); `check_key`
  // is the key rule (plain or state), `prefix` goes before each value.
  result<std::vector<std::optional<std::string>>> prepare_writes(std::span<const batch_write> writes,
                                                                 status (*check_key)(std::string_view),
                                                                 std::string_view prefix) const;
  // Appends ONE batch frame of prepared writes (prepare_writes) and stages
  // them; the frame's sequence number.
  result<std::uint64_t> log_and_stage(std::span<const batch_write> writes,
                                      const std::vector<std::optional<std::string>>& stored);
  // Stages a logged change of a user key (stored bytes or a deletion) in the
  // active memtable, keeping the expiry entries and the index in step.
  status stage(std::string_view key, std::optional<std::string_view> stored);
  // A new view of `root`, the active memtable at published_ and the
  // immutable one, if a checkpoint runs, whole.
  void publish(hash128 root);
  // The pin every view of `root` shares, made and listed the first time.
  std::shared_ptr<const hash128> pin_for(const hash128& root);
  // The new root of a checkpoint in one step (none may run): flushes the
  // node store, records the root in the log's commit marker and publishes it
  // with no runs and a new, empty active memtable (the root must hold every
  // write the runs and the active memtable held).
  result<hash128> commit_to_tree(result<hash128> root);
  // Where a checkpoint puts the frozen memtable: see "Checkpoint" above.
  enum class checkpoint_plan : std::uint8_t { append, run, fold };
  result<checkpoint_plan> plan_checkpoint(const memtable& frozen) const;

  env& env_;
  std::string dir_;
  shard_options options_;
  std::shared_ptr<tree::node_store> store_;
  std::unique_ptr<wal::log_writer> log_;
  // Takes the writes; views read it at published_, the sequence of its last
  // durable group, so what is inserted past it is staged.
  std::shared_ptr<memtable> active_ = std::make_shared<memtable>();
  std::uint64_t published_ = 0;
  // Sorted runs beside the tree, newest first (the current view's), and
  // every run a view was handed: while one lives, its nodes are kept.
  std::vector<run_ptr> runs_;
  std::vector<std::weak_ptr<const sorted_run>> published_runs_;
  // The checkpoint under way (begin_checkpoint), if any: the frozen memtable,
  // the root and runs it began from, and where it puts the memtable;
  // its thread (background) writes `outcome`, then sets `ready`, and the
  // owner reads `outcome` only after that (or after joining the thread).
  struct running_checkpoint {
    std::shared_ptr<const memtable> table;
    hash128 base;
    std::vector<run_ptr> base_runs;
    checkpoint_plan plan = checkpoint_plan::fold;
    // The node store's active pack when it began: its nodes are in this pack
    // or later ones (begin_reclaim keeps them out of a cycle's victims).
    std::uint32_t first_pack = 0;
    std::thread worker;
    std::atomic<bool> ready{false};
    // The new root and runs, and the node-store position that covers them.
    struct done {
      hash128 root;
      std::vector<run_ptr> runs;
      std::uint64_t position = 0;
    };
    result<done> outcome = status::failed("the checkpoint's work did not run");
  };
  std::unique_ptr<running_checkpoint> running_;
  // Waits for a running checkpoint's thread and drops the checkpoint
  // uncommitted (the shard is going away).
  void abandon_checkpoint() noexcept;
  std::size_t staged_writes_ = 0;
  std::size_t staged_expiries_ = 0;         // of staged_writes_, deletions by stage_expired
  bool replication_state_pending_ = false;  // appended, not yet synced
  std::optional<std::string> replication_state_;
  // No value this shard holds (tree, layers, staged) has a stamp above it;
  // nullopt: not known. stage() raises it with every stamped value, so it
  // stays an upper bound; a checkpoint writes it into the log's commit
  // marker, and open() takes it from there and raises it with what replay
  // stages. A new shard's is the zero stamp. What it buys: a stamped write
  // above it is above whatever its key holds, so apply_stamped takes it
  // without reading the key (a read of the tree per write on every replica,
  // which for data beyond the cache is a read of the disk).
  std::optional<stamp> stamp_bound_;
  ttl::expiry_index expiry_;
  std::shared_ptr<const read_view> view_;
  // Every view of one root shares its pin; gc keeps the roots whose pins live.
  std::shared_ptr<const hash128> root_pin_;
  std::vector<std::weak_ptr<const hash128>> pinned_roots_;
  shard_stats stats_;
  status failure_;
  // The last import_node since the last merge (nullopt: none waiting).
  std::optional<std::chrono::steady_clock::time_point> import_waiting_;
  // Entries of the current tree when the last reclamation cycle began: the
  // live bytes that cycle found are scaled by how the count changed since.
  std::optional<std::uint64_t> entries_at_reclaim_;
};

}  // namespace magnetite
