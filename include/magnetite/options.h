// options: how a host configures a database (database_options) and each of
// its shards (shard_options). Every field has a default that works; a
// database validates them at open and refuses a wrong one with
// invalid_argument, naming the field.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "magnetite/config.h"
#include "magnetite/status.h"

namespace magnetite {

class env;  // the engine's file layer; tests replace it with a fault-injecting one

// When a shard's log is fdatasynced (docs/embedding.md, "Guarantees"):
//   always       before every acknowledgement (one fsync a group of writes)
//   commit_only  only at checkpoints: an acknowledged write can be lost
//   interval     at most every fsync_interval: a write is acknowledged once in
//                the log and lost only by a crash within about that interval
enum class fsync_policy { always, commit_only, interval };
enum class leaf_form { lz4, zstd, searchable };

// How the prolly tree cuts its nodes (bytes of entries a node). Two trees
// agree on their hashes only when built with the same policy.
struct MAGNETITE_API chunk_policy {
  std::size_t target = 4096;
  std::size_t min = 1024;
  std::size_t max = 16384;

  // min < target <= max, and min > 0.
  status validate() const;
};

// Nanoseconds since the Unix epoch: the clock TTL deadlines are kept in.
using wall_clock_ns = std::function<std::uint64_t()>;
MAGNETITE_API std::uint64_t system_now_ns();

struct MAGNETITE_API shard_options {
  fsync_policy fsync = fsync_policy::always;
  std::chrono::milliseconds fsync_interval{100};
  // Space the log reserves ahead of its last frame; 0: none. Reserving makes
  // each fdatasync cheaper on ext4 (docs/benchmarks.md); a copy-on-write file
  // system may gain nothing from it.
  std::uint64_t wal_preallocate = std::uint64_t{4} << 20;
  std::size_t cache_bytes = std::size_t{64} << 20;
  // The most of cache_bytes that may hold leaves as stored (compressed)
  // rather than decoded (docs/embedding.md, "Tuning when embedding"); 0 to 0.9.
  double record_cache_share = 0.5;
  // How new leaves are written (every form already written reads, whatever
  // this says): compressed by LZ4 (the default) or zstd (smaller, slower to
  // decode), or searchable: uncompressed with the offset of each entry, so
  // that a get that misses the cache decodes only the entry it returns, at
  // about three times the disk space. Searchable leaves with mapped_reads
  // read data in the page cache about twice as fast as LZ4; data larger
  // than memory reads fastest from zstd, which fits the most of it there
  // (docs/benchmarks.md, "Reads beyond the cache, measured in a memory
  // cgroup").
  leaf_form leaves = leaf_form::lz4;
  // Node files no longer written to are read through a read-only memory
  // mapping instead of pread: no system call or copy a read, and searchable
  // leaves are searched in the page cache where they lie. Every read is
  // checked as before. The files must not be truncated by anything else
  // while the database is open (it holds them locked against other
  // databases; a process that truncated one would crash this one, as an
  // LMDB map would).
  bool mapped_reads = false;
  // The size of a memtable: a checkpoint is due when the writes since the
  // last one hold this many bytes in it (every write, rewrites of a key
  // included), or when the oldest of them is checkpoint_interval old. A
  // shard holds at most two memtables: the active one, and the one a
  // checkpoint is writing meanwhile; when the active one fills before that
  // checkpoint ends, writes wait for it (shard_stats::write_stalls).
  std::size_t checkpoint_bytes = std::size_t{32} << 20;
  std::chrono::milliseconds checkpoint_interval{60'000};
  // How many sorted runs a shard may keep beside its tree (0 to 64). A
  // checkpoint writes the memtable as a run of its own (no leaf of the tree
  // read or rewritten) while the runs hold fewer entries than the tree and
  // number fewer than this; otherwise it folds the memtable and every run
  // into the tree in one pass. An explicit checkpoint (commit) always folds.
  // 0: every checkpoint applies the memtable to the tree. More runs make
  // loads cheaper and point reads of absent keys a filter probe dearer.
  std::size_t max_sorted_runs = 16;
  chunk_policy chunking{};
  wall_clock_ns clock = system_now_ns;
  // How long a stamped tombstone left by an expired stamped value is kept
  // (replicated shards; the cluster file gives every replica the same).
  std::chrono::nanoseconds tombstone_retention = std::chrono::hours(24);
  // Space reclamation: a cycle starts when the shard's node files hold at
  // least reclaim_min_bytes and more than this many times the live bytes the
  // last cycle found; 0 turns it off (gc still works). Each step does about
  // reclaim_step_bytes of marking or copying between writes.
  double max_space_amplification = 1.5;
  std::uint64_t reclaim_min_bytes = std::uint64_t{8} << 20;
  std::size_t reclaim_step_bytes = std::size_t{256} << 10;

  status validate() const;
};

// What bounded admission (database_options::admission_bytes) counts for a
// request besides its keys and values: about what the request, its message
// and its answer's callback take on the heap.
inline constexpr std::size_t admission_request_overhead = 512;

struct MAGNETITE_API database_options {
  std::string dir;
  // nullopt: a new database gets default_shards(), an existing one the count
  // its MANIFEST records. A count given must match an existing MANIFEST.
  std::optional<std::size_t> shards;
  shard_options shard;
  // The memory the database may use for the data it holds, in bytes; nullopt:
  // each shard's node cache is `shard.cache_bytes` and its memtables
  // `shard.checkpoint_bytes` each. When set, the shards share it evenly, and
  // each shard's share bounds its caches and its write path together: three
  // quarters for its node caches (shard.cache_bytes is replaced) and an
  // eighth for each of its two memtables (shard.checkpoint_bytes is
  // replaced), so one
  // number bounds the caches and the memtables whatever the shard count. A
  // writer that would take more waits for a checkpoint (a stall, counted in
  // shard_stats and admission_stats), as RocksDB's write buffer manager makes
  // it. At least 1 MiB a shard.
  std::optional<std::size_t> memory_budget;
  // How many of the newest commits (CHECKPOINTS lines) keep their trees for
  // diff(), verify and gc. Every retained commit keeps the nodes only it
  // reaches, so space reclamation counts them as live: with 2, a database
  // whose every key changes between commits holds up to two versions.
  std::size_t retained_checkpoints = 2;
  // How many times an idle worker of the database's own actor system polls
  // its queue before it sleeps (CAF's work-stealing.aggressive-poll-attempts,
  // 100 by default). A worker that just finished a group's fsync spins
  // through these (well under a millisecond) and so picks up the next write
  // at once instead of after a 50 us nap (docs/benchmarks.md). A host that
  // runs the database in its own actor system (<magnetite/caf.h>) sets its
  // system's value itself.
  std::size_t worker_spin_polls = 20'000;
  // How long a host thread blocked on a write spins for its answer before it
  // sleeps, when it is the only host thread so blocked (with more, every one
  // sleeps at once and the group's fsync answers them together). A lone
  // writer waits for one fdatasync a write; spinning through it spares the
  // shard actor the futex wake-up and the writer the wait to be scheduled,
  // about a quarter of a durable write's time on this VM (docs/benchmarks.md),
  // at the cost of one core busy while that writer waits. 0: always sleep.
  // At most 100 ms.
  std::chrono::microseconds writer_spin{500};
  // Bounded admission (docs/embedding.md, "Bounded admission"): the writes
  // accepted and not yet answered (in a shard's mailbox, staged, waiting for
  // their group's fsync) hold at most admission_bytes, counting each
  // request's keys and values plus admission_request_overhead, and at most
  // admission_requests requests; the shards share both evenly. Past its
  // share a shard makes a blocking write wait (until its deadline, for the
  // calls that take one) and answers an asynchronous one `busy` (transient,
  // nothing written). What is admitted is a queue: a write admitted into a
  // full budget waits about admission_requests / throughput for its group
  // (the defaults: about 0.1 s at 40k writes/s), while groups stay large
  // enough to keep the disk busy (docs/benchmarks.md, "A flood of writes").
  std::size_t admission_bytes = std::size_t{16} << 20;
  std::size_t admission_requests = 4096;
  env* fs = nullptr;  // null: the operating system's files
  // Where open's warnings go, one line each without a newline: a data
  // directory, or files in it, that others than its owner may read or write
  // (the engine creates them 0700 and 0600; verify() reports the same).
  // Null: standard error, as "magnetite: warning: ...".
  std::function<void(const std::string&)> warn;
  // Supervision: a shard that fails is reopened after a backoff that doubles
  // from restart_backoff; more than max_restarts within restart_window mark it
  // failed for good.
  std::size_t max_restarts = 5;
  std::chrono::milliseconds restart_window{10'000};
  std::chrono::milliseconds restart_backoff{10};

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

}  // namespace magnetite
