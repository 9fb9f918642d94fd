// log_writer: appends records to the write-ahead log.
//
// Appends only encode frames into an in-memory group; sync() hands the whole
// group to the kernel in ONE write and, as the fsync policy says, ONE fdatasync.
// So N appends followed by one sync cost one fsync: this is what group commit
// is built on.
//
// Fsync policies:
//   always       sync() always fdatasyncs: a record is durable when sync() returns
//                ok (the default; nothing should be acknowledged earlier).
//   commit_only  sync() only writes; fdatasync happens at commit markers (and on
//                sync_durable()).
//   interval     sync() fdatasyncs when the last fdatasync is at least `interval`
//                old on the injected clock; the owner calls sync_durable() from a
//                timer to bound the window.
// durable_sequence() always tells how far durability really reaches.
//
// Reserved space: the writer keeps the current segment file `preallocate`
// bytes (rounded) ahead of its last frame with env's preallocate, and writes
// frames at their offset into that zero-filled space. Their fdatasync then
// changes no file size and allocates no block (the first write into a
// reserved block still marks it written, which the same fdatasync makes
// durable); on this machine's ext4 it was about 20% faster
// (docs/benchmarks.md). Best effort: where reserving fails, frames extend
// the file as without it. Recovery reads the zero tail of the last segment as
// its unwritten end (docs/formats/wal.md). A segment is cut back to its last
// frame when it is sealed by a checkpoint, so only the last one has a tail.
//
// Checkpoints come in two steps, so that writes go on while the tree that
// will hold the older ones is written (engine/shard.h): begin_checkpoint()
// makes the current segment durable and cut to its last frame, and starts a
// NEW segment (written under a temporary name with a copy of the latest
// replication state, synced, renamed into place, its directory synced: a
// segment is complete or absent); the frames before it are the checkpoint's.
// Appends go on into the new segment. commit(marker), once the tree holding
// those frames is durable, appends the marker (with the last sequence number
// it covers) to the current segment and fdatasyncs it, then removes the
// segments older than the one begin_checkpoint() started. commit() without a
// begun checkpoint does both at once, a sync fewer: the current segment is
// sealed and the new one begins with the marker, covering every frame before.
//
// Fail-stop: after any failed write, fdatasync or segment creation, every later
// call returns a `failed` error. The failing call's own error is `ambiguous`: its
// bytes may or may not be on disk. The owner must drop the writer, recover and
// reopen; a failed fsync is never retried as if it could succeed.
//
// Input that breaks the limits gets invalid_argument and changes nothing.
// Not thread-safe: one owner (a shard actor) drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/env.h"
#include "magnetite/options.h"
#include "wal/recovery.h"

namespace magnetite::wal {

using magnetite::fsync_policy;  // <magnetite/options.h>

struct writer_options {
  fsync_policy policy = fsync_policy::always;
  std::chrono::milliseconds interval{100};
  // How far ahead of the last frame space is reserved; 0: none (append only).
  std::uint64_t preallocate = std::uint64_t{4} << 20;
  std::function<std::chrono::steady_clock::time_point()> clock = [] { return std::chrono::steady_clock::now(); };
};

struct writer_stats {
  std::uint64_t frames = 0;
  std::uint64_t syncs = 0;   // sync() and sync_durable() calls that wrote a group
  std::uint64_t fsyncs = 0;  // fdatasyncs of segment files
  std::uint64_t bytes = 0;   // frame bytes handed to the kernel
  std::uint64_t segments_created = 0;
  std::uint64_t segments_removed = 0;
};

class log_writer {
 public:
  // Continues the log that `recovered` describes, or starts a new one in `dir`.
  // `recovered` must come from recover() with repair, which made the replayed
  // frames durable before anything new can be acknowledged on top of them.
  static result<std::unique_ptr<log_writer>> open(env& e, std::string dir, writer_options options,
                                                  const recovered_log& recovered);

  // Each returns the record's sequence number.
  result<std::uint64_t> append_put(std::string_view key, std::string_view value);
  result<std::uint64_t> append_delete(std::string_view key);
  result<std::uint64_t> append_batch(std::span<const mutation_view> batch);  // all or nothing
  result<std::uint64_t> append_replication_state(std::string_view payload);

  status sync();          // as the policy says
  status sync_durable();  // write and fdatasync whatever the policy
  // The last sequence number the checkpoint covers (see the top); one
  // checkpoint at a time (invalid_argument otherwise).
  result<std::uint64_t> begin_checkpoint();
  // The marker, its covered_sequence set here; the group written so far goes
  // with it.
  status commit(const commit_record& marker);
  bool checkpoint_begun() const noexcept { return checkpoint_segment_.has_value(); }

  std::uint64_t last_sequence() const noexcept { return next_sequence_ - 1; }
  std::uint64_t written_sequence() const noexcept { return written_sequence_; }
  std::uint64_t durable_sequence() const noexcept { return durable_sequence_; }
  std::uint64_t segment() const noexcept { return segment_; }
  std::uint64_t segment_bytes() const noexcept { return segment_size_; }
  std::size_t pending_bytes() const noexcept { return pending_.size(); }
  const writer_stats& stats() const noexcept { return stats_; }
  // ok, or the error that stopped the writer.
  const status& failure() const noexcept { return failure_; }

 private:
  log_writer(env& e, std::string dir, writer_options options);

  status check_usable() const;
  std::uint64_t finish(std::size_t header_at, record_type type);
  status write_pending();
  status fdatasync();
  status create_segment(std::uint64_t number, const commit_record* marker);
  // Reserves space past `end` in `f` (best effort: a file system that cannot
  // is written by extension instead). Returns the file's reserved size.
  std::uint64_t reserve(file& f, std::uint64_t end, std::uint64_t reserved);
  // Makes the current segment end at its last frame, durably.
  status seal();
  // Records the first failure and returns it as ambiguous.
  status fail(status s);

  env& env_;
  std::string dir_;
  writer_options options_;
  std::unique_ptr<file> file_;
  std::uint64_t segment_ = 0;
  std::uint64_t segment_size_ = 0;      // end of the last frame written
  std::uint64_t segment_reserved_ = 0;  // the file's size: frames + zero tail
  bool reserve_failed_ = false;         // no more reserving in this segment
  std::uint64_t salt_ = 0;              // of the current segment
  std::string pending_;                 // encoded frames not yet handed to the kernel
  std::uint64_t next_sequence_ = 1;
  std::uint64_t written_sequence_ = 0;
  std::uint64_t durable_sequence_ = 0;
  bool next_follows_sync_ = true;
  std::chrono::steady_clock::time_point last_fsync_;
  std::optional<std::string> replication_state_;  // carried into each new segment
  // A begun checkpoint: the segment it started, and the last sequence before it.
  std::optional<std::uint64_t> checkpoint_segment_;
  std::uint64_t checkpoint_covered_ = 0;
  writer_stats stats_;
  status failure_;
};

}  // namespace magnetite::wal
