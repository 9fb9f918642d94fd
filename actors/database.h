// database: what a host program opens. A data directory of N shards, each a
// supervised shard actor; blocking and asynchronous calls, all thread-safe.
//
// Layout of the data directory:
//   LOCK          held (flock) while open: a second process gets `busy`
//   MANIFEST      "magnetite-manifest 1\nshards N\n": reopening without a
//                 count keeps N; with another count is invalid_argument
//                 (keys would move)
//   CHECKPOINTS   the combined roots commit() made, the last 16 (checkpoint_log.h)
//   shard-000/    one shard (wal/, nodes/), and so on
//
// Routing: shard = XXH3-64(routing key) mod shards; the routing key is the key
// unless the caller passes one to keep related keys on one shard.
//
// State keys (limits::state_prefix) belong to state/ and go through apply();
// the plain calls refuse them and scans end before them.
//
// Reads: get(), range() and scan() do not message the actors. They read the
// shards' latest published views on the calling thread (a get: a few
// microseconds when warm; a scan merges the shards' views in key order). A get
// sees every write acknowledged before it started (read-your-writes across
// threads that hand each other acknowledgements) and, under the `always` fsync
// policy, never a write that is not durable. Views are per shard: two gets on two shards are not one snapshot.
// While a shard restarts its reads fail with a transient error.
//
// Writes go to the shard actor as messages and return when durable. A host
// thread needs no actor of its own for that: it hands over a host_request and
// sleeps on its own futex word until the group's fsync is done; the actor wakes
// one waiter a group and the waiters wake each other (answer_relay.h). A
// blocking CAF request from a plain thread would cost a scoped actor per call.
//
// Supervision: a shard that dies (an exception in a handler, a failed fsync)
// or cannot boot is restarted by its factory (reopen, replay) after a backoff
// that doubles from `restart_backoff`; more than `max_restarts` restarts within
// `restart_window` mark it failed, and every request then gets a permanent
// `failed` error. A boot that finds its files damaged or of a newer format
// (permanent corruption / not_supported) is not retried, since that does not
// heal: the shard answers with that error for good. The other shards keep
// serving throughout.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/checkpoint_log.h"
#include "actors/range_cursor.h"
#include "tree/diff.h"
#include "actors/shard_actor.h"

namespace magnetite {

struct database_options {
  std::string dir;
  // nullopt: a new database gets default_shards(), an existing one the count
  // its MANIFEST records. A count given must match an existing MANIFEST.
  std::optional<std::size_t> shards;
  shard_options shard;
  // The memory the database may use for the data it holds, in bytes; nullopt:
  // each shard's node cache is `shard.cache_bytes`. When set, the node caches
  // of all shards share it evenly (each shard's shard.cache_bytes is replaced),
  // so one number bounds the caches whatever the shard count. At least 1 MiB a
  // shard.
  std::optional<std::size_t> memory_budget;
  // How many of the newest commits (CHECKPOINTS lines) keep their trees for
  // diff(), verify and gc. Every retained commit keeps the nodes only it
  // reaches, so space reclamation counts them as live: with 2, a database
  // whose every key changes between commits holds up to two versions.
  // Raise it to keep more history.
  std::size_t retained_checkpoints = 2;
  // The host's actor system (embedding), or null: the database makes its own.
  caf::actor_system* system = nullptr;
  // Own system only: how many times an idle CAF worker polls its queue before
  // it starts to sleep (CAF's `work-stealing.aggressive-poll-attempts`, 100 by
  // default). A worker that just finished a group's fsync spins through these
  // (well under a millisecond) and so picks up the next write at once instead
  // of after a 50 us nap: one-writer durable writes went from 0.62-0.96x to
  // 0.98-1.10x RocksDB in an A/B (docs/benchmarks.md). A host embedding its own
  // system may want the same setting.
  std::size_t worker_spin_polls = 20'000;
  env* fs = nullptr;  // null: the POSIX environment
  std::size_t max_restarts = 5;
  std::chrono::milliseconds restart_window{10'000};
  std::chrono::milliseconds restart_backoff{10};
  // Test hook passed to every shard (see shard_actor_config::before_write).
  std::function<void(const std::string& key)> before_write;
  // Test hook: runs on shard i's actor when it begins a reclamation cycle
  // (the torture run kills the process then).
  std::function<void(std::size_t shard)> reclaim_began;

  status validate() const;

  // The shard count of a new database opened without one: one shard a core
  // (std::thread::hardware_concurrency(), 1 if unknown), at most 16. Each
  // shard has its own log, and a group commit shares one fsync among the
  // writers waiting on that shard: shards beyond the cores do not add CPU to
  // use, they split the same writers into more, smaller groups, and every
  // doubling of them doubles the fsyncs a write costs (docs/benchmarks.md).
  // The cap because each shard also keeps its own node cache (64 MiB unless
  // memory_budget is set), log and pack files: on a many-core machine the
  // default would otherwise grow them without bound; 16 shards keep the
  // default caches within 1 GiB. A host that wants more passes a count.
  static std::size_t default_shards() noexcept;
};

struct database_stats {
  std::vector<shard_stats> shards;   // counters since each shard's (re)start
  std::vector<shard_usage> usage;    // what each shard holds now
  std::vector<std::uint64_t> restarts;
};

struct database_gc_report {
  std::vector<tree::gc_result> shards;
  std::size_t damaged_checkpoints_dropped = 0;  // CHECKPOINTS lines that failed their check
};

struct database_verify_report {
  std::vector<shard_verify_report> shards;
  std::size_t checkpoints = 0;        // retained checkpoints whose roots were walked
  std::vector<std::string> problems;  // every shard's, prefixed "shard i: ", and the checkpoint log's
};

// A key that differs between two roots, as tree::diff_entry reports it but
// with the user's key and values (TTL envelope removed; a change of deadline
// alone shows as `changed` with equal values).
using key_change = tree::diff_entry;

class database {
 public:
  static result<std::unique_ptr<database>> open(database_options options);
  // The shard count recorded in `dir`'s MANIFEST, or nullopt for a directory
  // that holds no database yet (a tool opens an existing one with its count).
  static result<std::optional<std::size_t>> recorded_shards(const std::string& dir, env* fs = nullptr);
  // Checkpoints every shard and stops them.
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  std::size_t shard_count() const noexcept { return slots_.size(); }
  std::size_t shard_of(std::string_view routing_key) const noexcept;
  // The typed handle of shard i, for hosts that message it themselves. It
  // changes when the shard restarts.
  shard_actor shard_handle(std::size_t i) const;
  // Shard i's published views (what host reads use), for layers above that
  // read a shard without messaging it (replication/).
  std::shared_ptr<shard_slot> slot_of(std::size_t i) const { return slots_.at(i); }
  caf::actor_system& system() noexcept { return *system_; }

  result<std::optional<std::string>> get(std::string_view key, std::optional<std::string_view> routing = {});
  status put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl = {},
             std::optional<std::string_view> routing = {});
  status del(std::string_view key, std::optional<std::string_view> routing = {});
  result<cas_outcome> cas(std::string_view key, std::optional<std::string_view> expected,
                          std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl = {},
                          std::optional<std::string_view> routing = {});
  // Atomic within one shard: every key must route to the same shard.
  status batch(std::span<const batch_write> writes, std::optional<std::string_view> routing = {});
  // Bulk ingest of sorted writes: `sorted` holds (key, value) views, keys
  // strictly increasing, values without a TTL (a key's earlier TTL goes).
  // Each shard writes its part straight into its tree (shard::ingest: its
  // layers checkpointed first, then the writes, one flush and one commit
  // marker, no log frames), all shards at once. Durable when it returns ok.
  // Each shard's part is all or nothing, the whole is not: after an error
  // some shards may hold their part, and running the same ingest again is
  // harmless. Bad input is invalid_argument and nothing is sent. For loads:
  // a call's keys should follow the previous call's, so that each touches
  // only the right edge of every tree.
  status ingest(std::span<const std::pair<std::string_view, std::string_view>> sorted);
  // Entries of [from, to) across all shards in key order, at most `limit`
  // (`to` empty: no upper bound). Read from the shards' views like get.
  result<std::vector<std::pair<std::string, std::string>>> range(std::string_view from, std::string_view to,
                                                                  std::size_t limit);
  // The same as a cursor that pulls `chunk` entries per shard at a time and
  // merges them in key order, on the calling thread, over one pinned view per
  // shard (range_cursor.h): for ranges of any length.
  result<range_cursor> scan(std::string_view from, std::string_view to, std::size_t chunk = 256);
  // Checkpoints every shard: their roots, and one root over them.
  struct commit_result {
    std::vector<hash128> roots;
    hash128 combined;
  };
  result<commit_result> commit();
  result<database_stats> stats();
  // The checkpoints commit() made that are still retained (checkpoint_log.h),
  // oldest first: the combined roots diff() accepts.
  std::vector<checkpoint> checkpoints() const;
  // Keys added, removed and changed from root a to root b, in key order: two
  // combined roots of retained checkpoints, or two roots one shard holds.
  // Reads on the calling thread; cost grows with the difference, not the data.
  result<std::vector<key_change>> diff(const hash128& a, const hash128& b);
  // Reads back every node of every shard's current root and of the retained
  // checkpoints, every log from its last commit marker, the expiry entries;
  // each shard stops writing while it is checked. Damage is in the report.
  result<database_verify_report> verify();
  // Drops every node that no current root, retained checkpoint or view still
  // held (an open scan cursor) reaches, per shard; and rewrites CHECKPOINTS
  // without the lines verify reported damaged.
  result<database_gc_report> gc();
  // Runs a space reclamation cycle on every shard now, to its end, whether or
  // not one is due and whatever max_space_amplification says (even 0): every
  // pack holding garbage is a victim (the cycle aims at 1.01x). The shards
  // also start cycles by themselves after checkpoints. The bytes each gave back. A shard's writes wait while its cycle runs. For
  // operators and tests; gc() does the same job by copying every live node.
  result<std::vector<std::uint64_t>> reclaim();

  // Asynchronous forms: `done` runs on an actor thread when the write is durable
  // (or failed), or on the calling thread when the request fails before it
  // reaches the shard (bad input, a dead shard). It must not block.
  void put_async(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                 std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void del_async(std::string_view key, std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void cas_async(std::string_view key, std::optional<std::string_view> expected, std::optional<std::string_view> desired,
                 std::optional<std::chrono::nanoseconds> ttl, std::function<void(result<cas_outcome>)> done,
                 std::optional<std::string_view> routing = {});
  void batch_async(std::span<const batch_write> writes, std::function<void(status)> done,
                   std::optional<std::string_view> routing = {});

  // ---- the way in for state/ (keyed state, records, streams) ----
  // The clock TTL deadlines are judged by (shard_options::clock).
  std::uint64_t now_ns() const { return options_.shard.clock(); }
  // Shard i's published view (what get reads), or why it has none.
  result<std::shared_ptr<const read_view>> view_of(std::size_t shard) const { return serving_view(shard); }
  // Hands shard `shard` a conditional batch (shard::apply: every key a state
  // key) and waits for its answer. With a deadline, waits at most until then
  // and answers `timeout`, ambiguous: an admitted request is not recalled and
  // may still be applied. A deadline already past sends nothing (transient).
  result<cas_outcome> apply(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                            std::optional<std::chrono::steady_clock::time_point> deadline = {});
  void apply_async(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                   std::function<void(result<cas_outcome>)> done);

  struct supervision;  // shared with the supervisor actor

 private:
  explicit database(database_options options);
  status start();
  template <class... R, class... Ts>
  result<std::tuple<R...>> ask(std::size_t shard, Ts&&... xs);
  // The shard's published view, or why it has none (restarting, failed).
  result<std::shared_ptr<const read_view>> serving_view(std::size_t shard) const;
  // A checked write request and the shard it goes to.
  struct prepared {
    std::size_t shard;
    host_request_ptr request;
  };
  result<prepared> prepare_put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                               std::optional<std::string_view> routing) const;
  result<prepared> prepare_del(std::string_view key, std::optional<std::string_view> routing) const;
  result<prepared> prepare_cas(std::string_view key, std::optional<std::string_view> expected,
                               std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                               std::optional<std::string_view> routing) const;
  result<prepared> prepare_batch(std::span<const batch_write> writes, std::optional<std::string_view> routing) const;
  result<prepared> prepare_apply(std::size_t shard, std::vector<state_check> checks,
                                 std::span<const batch_write> writes) const;
  // Hands a write to the shard and waits for its answer (no actor on this thread).
  result<cas_outcome> submit(prepared p);
  // Hands each shard's roots in the retained checkpoints to its slot, where
  // space reclamation reads them (checkpoints_mu_ held).
  void publish_retained();
  void submit_async(result<prepared> p, std::function<void(const status&, const cas_outcome&)> done);

  database_options options_;
  env* fs_ = nullptr;
  std::unique_ptr<file_lock> lock_;
  std::unique_ptr<caf::actor_system_config> own_config_;
  std::unique_ptr<caf::actor_system> own_system_;
  caf::actor_system* system_ = nullptr;
  std::vector<std::shared_ptr<shard_slot>> slots_;
  std::shared_ptr<supervision> supervision_;
  // commit, verify and gc run one at a time: a gc between a commit's shard
  // checkpoints and its CHECKPOINTS line could drop a root the line then names.
  std::mutex operations_mu_;
  mutable std::mutex checkpoints_mu_;  // guards checkpoints_ (checkpoints() and diff read it)
  std::optional<checkpoint_log> checkpoints_;
  caf::actor supervisor_;
};

}  // namespace magnetite
