// stats: what a database reports about itself: counters and holdings of
// each shard (stats()), what verify() checked and found, what gc() dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "magnetite/config.h"
#include "magnetite/history.h"

namespace magnetite {

// Groups are counted by size in buckets of powers of two: bucket b holds the
// groups of 2^b to 2^(b+1) - 1 writes, the last bucket every larger group.
inline constexpr std::size_t group_size_buckets = 12;

// Counters since the shard was opened (a restart starts them again).
struct shard_stats {
  std::uint64_t writes = 0;        // staged (put, del, cas that swapped, batch)
  std::uint64_t acknowledged = 0;  // writes of the groups committed (answered ok); not TTL deletions
  // Groups that held acknowledged writes, by how many (buckets above).
  std::vector<std::uint64_t> group_sizes = std::vector<std::uint64_t>(group_size_buckets);
  std::uint64_t groups = 0;       // commit_group calls that made writes durable
  std::uint64_t checkpoints = 0;  // ingests' commit markers included
  // Of those, the ones that wrote their memtable as a sorted run, and the
  // ones that applied it to the tree (with every run, or alone when its
  // keys all came after every other); the runs kept now, and the entries
  // they hold (deletions included).
  std::uint64_t runs_written = 0;
  std::uint64_t folds = 0;
  std::uint64_t sorted_runs = 0;
  std::uint64_t run_entries = 0;
  // Times the writes waited for a checkpoint because the memtables were full
  // (the active one reached checkpoint_bytes while the one before it was
  // still being written to the tree), and how long in all.
  std::uint64_t write_stalls = 0;
  std::uint64_t write_stall_ns = 0;
  std::uint64_t ingested = 0;          // writes made by ingest()
  std::uint64_t replayed_records = 0;  // at open
  std::uint64_t expired = 0;           // keys deleted by stage_expired
  std::uint64_t log_fsyncs = 0;
};

// What the shard holds now; it costs a count over the tree and file sizes.
struct shard_usage {
  // Keys with a value: the tree's count (from its child references, not a
  // walk) corrected by the layers. A key past its deadline counts until the
  // TTL timer deletes it, normally within milliseconds of the deadline.
  std::uint64_t keys = 0;
  std::uint64_t wal_bytes = 0;   // log segment files, reserved space included
  std::uint64_t node_bytes = 0;  // live pack files
  std::uint64_t cache_hits = 0;  // node cache, since open
  std::uint64_t cache_misses = 0;
  // Of those misses, the ones the record cache answered (leaves kept as
  // stored, compressed: tree/node_store.h, "Caching"); the rest read a pack.
  std::uint64_t record_cache_hits = 0;
  // Since open: records read from the node files (by pread, or through a
  // mapping with shard_options::mapped_reads), and lookups of a key in a
  // leaf (gets that reached the tree). node_reads / leaf_lookups is what a
  // get costs in reads of the files (each a page-cache hit or a disk read).
  std::uint64_t node_reads = 0;
  std::uint64_t leaf_lookups = 0;
  std::uint64_t node_syncs = 0;  // pack fdatasyncs since open
  std::string root;              // the last checkpoint's root, 32 hex digits
  // Space reclamation: the live bytes of the node store (the records the
  // current root, the retained roots and held views reach, measured by a walk
  // of the internal nodes), and since open the bytes reclamation gave back
  // (pack bytes removed less the live bytes copied out of them) and its cycles.
  std::uint64_t live_node_bytes = 0;  // measured now: the records the kept roots reach
  std::uint64_t reclaimed_bytes = 0;
  std::uint64_t reclaim_cycles = 0;
};

// What verify() checked and every problem it found. Each problem names the
// file and offset (a log segment, a pack) where the damage is, when it is in a
// file; a missing node names its parent.
struct shard_verify_report {
  std::uint64_t roots = 0;  // trees walked: the current root and the retained ones given
  std::uint64_t nodes = 0;  // distinct nodes read back from disk and checked against their hash
  std::uint64_t node_bytes = 0;
  std::uint64_t log_frames = 0;     // frames of the log checked against their checksums
  std::uint64_t expiring_keys = 0;  // keys with a deadline matched to their expiry entry and the index
  std::vector<std::string> problems;
};

// What gc() did in one shard's node store.
struct gc_result {
  std::uint64_t position = 0;  // the node store position the next commit marker records
  std::uint64_t nodes_kept = 0;
  std::uint64_t bytes_kept = 0;       // size of the new packs
  std::uint64_t bytes_removed = 0;    // size of the old packs removed
  std::uint64_t bytes_reclaimed = 0;  // bytes_removed - bytes_kept, or 0
  std::uint64_t packs_removed = 0;
};

// Bounded admission of one shard (database_options::admission_bytes), since
// the database opened (a shard's restart keeps these).
struct admission_stats {
  std::uint64_t admitted = 0;  // writes let in
  std::uint64_t waited = 0;    // of those and the refused, blocking writes that waited for room
  std::uint64_t refused = 0;   // answered `busy`: asynchronous ones at once, blocking ones at their deadline
  std::uint64_t waiting = 0;   // blocking writes waiting for room now
  std::uint64_t requests = 0;  // in now: admitted and not yet answered
  std::uint64_t bytes = 0;     // what those count
  std::uint64_t max_requests = 0;
  std::uint64_t max_bytes = 0;
  // Admitted writes that waited for memory: times the shard's memtables were
  // full and its writes waited for a checkpoint (shard_stats::write_stalls,
  // here since the database opened), and how long in all.
  std::uint64_t stalls = 0;
  std::uint64_t stall_ns = 0;
};

struct database_stats {
  std::vector<shard_stats> shards;  // counters since each shard's (re)start
  std::vector<shard_usage> usage;   // what each shard holds now
  std::vector<std::uint64_t> restarts;
  std::vector<admission_stats> admission;  // each shard's
  std::vector<version_tag> tags;           // the named versions (database::tags)
};

struct database_gc_report {
  std::vector<gc_result> shards;
  std::size_t damaged_checkpoints_dropped = 0;  // CHECKPOINTS lines that failed their check
};

struct database_verify_report {
  std::vector<shard_verify_report> shards;
  std::size_t checkpoints = 0;        // retained checkpoints whose roots were walked
  std::size_t tags = 0;               // named versions whose roots were walked
  std::vector<std::string> problems;  // every shard's, prefixed "shard i: ", and the checkpoint log's
  // Not damage: what in the data directory others than its owner may read
  // or write (database_options::warn).
  std::vector<std::string> warnings;
};

}  // namespace magnetite
