// database_core: the engine behind <magnetite/database.h>, which states the
// contract of every call. It opens the data directory (engine/data_directory.h),
// starts the shard supervisor (shard_supervisor.h) and carries the calls to the
// shards. Beyond the public calls it gives the engine's own layers what hosts
// do not get: the shards' typed handles and published views, the actor system,
// the conditional batches of state/.
//
// Host writes: a host thread hands a host_request to the shard actor and
// sleeps on its own futex word until the group's fsync is done; the actor
// wakes one waiter a group and the waiters wake each other (answer_relay.h).
// A blocking CAF request from a plain thread would cost a scoped actor per
// call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/shard_actor.h"
#include "actors/shard_supervisor.h"
#include "actors/state_storage.h"
#include "actors/transaction_coordinator.h"
#include "engine/backup_store.h"
#include "engine/checkpoint_log.h"
#include "engine/merged_cursor.h"
#include "engine/version_tags.h"
#include "magnetite/database.h"
#include "tree/diff.h"

namespace magnetite {

// database_options (<magnetite/options.h>) and what only the engine's own code
// sets: the actor system of a host that embeds the database in its own
// (<magnetite/caf.h>), and the test hooks. The base is private so that a
// core_options never slices silently into database::open(database_options),
// which would drop them: open_database takes a core_options.
struct core_options : private database_options {
  core_options() = default;
  core_options(database_options o) : database_options(std::move(o)) {}  // NOLINT: a host's options as they are
  using database_options::admission_bytes;
  using database_options::admission_requests;
  using database_options::dir;
  using database_options::fs;
  using database_options::max_restarts;
  using database_options::memory_budget;
  using database_options::restart_backoff;
  using database_options::restart_window;
  using database_options::retained_checkpoints;
  using database_options::shard;
  using database_options::shards;
  using database_options::validate;
  using database_options::warn;
  using database_options::worker_spin_polls;
  using database_options::writer_spin;
  // The host's actor system, or null: the database makes its own.
  caf::actor_system* system = nullptr;
  // The shards are replicas of a cluster (replication/): the transaction
  // records in them are the cluster's, prepared and decided by its owners
  // under their stamps, and only an owner may finish them. Open leaves them
  // alone; a single node's open finishes its own (presumed abort).
  bool replicated = false;
  // Test hook passed to every shard (see shard_actor_config::before_write).
  std::function<void(const std::string& key)> before_write;
  // Test hook: runs on shard i's actor when it begins a reclamation cycle
  // (the torture run kills the process then).
  std::function<void(std::size_t shard)> reclaim_began;
};

// Opens a database with the engine's own options (test hooks, a host's actor
// system): what database::open does with core_options(options).
result<std::unique_ptr<database>> open_database(core_options options);

// What database's reads and a snapshot's (<magnetite/snapshot.h>) share.
// A routing key follows the rules of a key (1 to max_user_key_bytes bytes):
// "no routing key" is nullopt, never an empty one.
status check_routing(std::optional<std::string_view> routing);
// A cursor over one view a shard, as database::scan makes it: plain keys
// only (it ends where the state space begins), expiry judged at now_ns.
range_cursor scan_views(std::vector<std::shared_ptr<const read_view>> views, std::string_view from, std::string_view to,
                        std::uint64_t now_ns, std::size_t chunk);
// The chunk a range of `limit` entries scans with, and its first entries.
std::size_t range_chunk_size(std::size_t limit);
result<std::vector<std::pair<std::string, std::string>>> first_entries(result<range_cursor> c, std::size_t limit);

// What a snapshot reads: one pinned view a shard, at the checkpoint's roots.
struct snapshot::impl {
  hash128 version;
  std::vector<hash128> roots;  // one a shard
  std::vector<std::shared_ptr<const read_view>> views;
  wall_clock_ns clock;
};

class database_core final : public state_storage {
 public:
  static result<std::unique_ptr<database_core>> open(core_options options);
  // The shard count recorded in `dir`'s MANIFEST, or nullopt for a directory
  // that holds no database yet (a tool opens an existing one with its count).
  static result<std::optional<std::size_t>> recorded_shards(const std::string& dir, env* fs = nullptr);
  // Checkpoints every shard and stops them.
  ~database_core() override;
  database_core(const database_core&) = delete;
  database_core& operator=(const database_core&) = delete;

  std::size_t shard_count() const noexcept { return slots_.size(); }
  std::size_t shard_of(std::string_view routing_key) const noexcept override;
  // The typed handle of shard i, for hosts that message it themselves. It
  // changes when the shard restarts.
  shard_engine_actor shard_handle(std::size_t i) const;
  // Shard i's published views (what host reads use), for layers above that
  // read a shard without messaging it (replication/).
  std::shared_ptr<shard_slot> slot_of(std::size_t i) const { return slots_.at(i); }
  caf::actor_system& system() noexcept { return *system_; }

  // ---- the calls of <magnetite/database.h> (documented there) ----
  result<std::optional<std::string>> get(std::string_view key, std::optional<std::string_view> routing = {});
  status put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl = {},
             std::optional<std::string_view> routing = {});
  status del(std::string_view key, std::optional<std::string_view> routing = {});
  result<cas_outcome> cas(std::string_view key, std::optional<std::string_view> expected,
                          std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl = {},
                          std::optional<std::string_view> routing = {});
  status batch(std::span<const batch_write> writes, std::optional<std::string_view> routing = {});
  status ingest(std::span<const std::pair<std::string_view, std::string_view>> sorted);
  result<std::vector<std::pair<std::string, std::string>>> range(std::string_view from, std::string_view to,
                                                                 std::size_t limit);
  result<range_cursor> scan(std::string_view from, std::string_view to, std::size_t chunk = 256);
  using commit_result = magnetite::commit_result;
  result<commit_result> commit();
  result<database_stats> stats();
  std::vector<checkpoint> checkpoints() const;
  result<std::vector<key_change>> diff(const hash128& a, const hash128& b);
  result<snapshot> at(const hash128& version);
  result<snapshot> at(std::string_view version);
  result<hash128> resolve(std::string_view version) const;
  result<checkpoint> tag(std::string_view name, std::optional<hash128> version = {});
  result<backup_report> backup(const std::string& dest, const backup_options& options);
  status untag(std::string_view name);
  std::vector<version_tag> tags() const;
  result<database_verify_report> verify();
  result<database_gc_report> gc();
  result<std::vector<std::uint64_t>> reclaim();
  void put_async(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                 std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void del_async(std::string_view key, std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void cas_async(std::string_view key, std::optional<std::string_view> expected,
                 std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                 std::function<void(result<cas_outcome>)> done, std::optional<std::string_view> routing = {});
  void batch_async(std::span<const batch_write> writes, std::function<void(status)> done,
                   std::optional<std::string_view> routing = {});

  // ---- the way in for state/ (keyed state, records, streams) ----
  // The clock TTL deadlines are judged by (shard_options::clock).
  std::uint64_t now_ns() const { return options_.shard.clock(); }
  // Shard i's published view (what get reads), or why it has none.
  result<std::shared_ptr<const read_view>> view_of(std::size_t shard) const { return serving_view(shard); }
  // ---- state_storage (state_storage.h), for a data directory ----
  // pin: the shard's published view as it is now; apply hands the shard a
  // conditional batch (shard::apply: every key a state key) and waits for
  // its answer.
  result<std::shared_ptr<const state_view>> pin(std::size_t shard) override;
  result<cas_outcome> apply(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                            std::optional<deadline> d = {}) override;
  void apply_async(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                   std::function<void(result<cas_outcome>)> done);
  // Each part is checked like a conditional batch first; bad input changes
  // nothing.
  result<transaction_outcome> commit_across(std::vector<transaction_part> parts,
                                            std::optional<deadline> d = {}) override;

 private:
  explicit database_core(core_options options);
  status start();
  status resolve_transactions();
  template <class... R, class... Ts>
  result<std::tuple<R...>> ask(std::size_t shard, Ts&&... xs);
  // The shard's published view, or why it has none (restarting, failed).
  result<std::shared_ptr<const read_view>> serving_view(std::size_t shard) const;
  // A checked write request and the shard it goes to.
  struct prepared {
    std::size_t shard;
    host_request_ptr request;
  };
  result<prepared> prepare_put(std::string_view key, std::string_view value,
                               std::optional<std::chrono::nanoseconds> ttl,
                               std::optional<std::string_view> routing) const;
  result<prepared> prepare_del(std::string_view key, std::optional<std::string_view> routing) const;
  result<prepared> prepare_cas(std::string_view key, std::optional<std::string_view> expected,
                               std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                               std::optional<std::string_view> routing) const;
  result<prepared> prepare_batch(std::span<const batch_write> writes, std::optional<std::string_view> routing) const;
  // What a conditional batch on `shard` must satisfy before it is sent.
  status check_state_batch(std::size_t shard, std::span<const state_check> checks,
                           std::span<const batch_write> writes) const;
  result<prepared> prepare_apply(std::size_t shard, std::vector<state_check> checks,
                                 std::span<const batch_write> writes) const;
  // Hands a write to the shard and waits for its answer (no actor on this
  // thread), and first for room in the shard's admission budget.
  result<cas_outcome> submit(prepared p);
  // Hands each shard's roots in the retained checkpoints and the named
  // versions to its slot, where space reclamation reads them
  // (checkpoints_mu_ held).
  void publish_retained();
  // The versions gc, reclamation and verify keep: the retained checkpoints,
  // then the named ones.
  std::vector<checkpoint> kept_versions() const;
  // A retained checkpoint or a named version, by its combined root
  // (checkpoints_mu_ held).
  std::optional<checkpoint> find_version(const hash128& combined) const;
  // not_found, naming `version`: what find_version's callers answer when it finds none.
  static status unknown_version(const hash128& version);
  result<commit_result> commit_holding_operations();
  // Every shard's view of a retained or named version, each pinned.
  result<snapshot::impl> pin_holding_operations(const hash128& version);
  // Hands a write to the shard; `done` runs once with its answer. Admission:
  // with `admit_by` it waits for room until then, without it a full shard
  // answers `busy` at once (on this thread).
  void submit_async(result<prepared> p, std::optional<deadline> admit_by,
                    std::function<void(const status&, const cas_outcome&)> done);

  core_options options_;
  env* fs_ = nullptr;
  std::unique_ptr<file_lock> lock_;
  std::unique_ptr<caf::actor_system_config> own_config_;
  std::unique_ptr<caf::actor_system> own_system_;
  caf::actor_system* system_ = nullptr;
  std::vector<std::shared_ptr<shard_slot>> slots_;
  // Host threads blocked in submit(); one alone spins for its answer
  // (database_options::writer_spin).
  std::atomic<int> blocked_writers_{0};
  std::shared_ptr<shard_supervision> supervision_;
  // commit, verify and gc run one at a time: a gc between a commit's shard
  // checkpoints and its CHECKPOINTS line could drop a root the line then names.
  std::mutex operations_mu_;
  mutable std::mutex checkpoints_mu_;  // guards checkpoints_ and tags_ (checkpoints(), tags() and diff read them)
  std::optional<checkpoint_log> checkpoints_;
  std::optional<version_tags> tags_;
  caf::actor supervisor_;
  std::unique_ptr<transaction_coordinator> transactions_;
};

}  // namespace magnetite
