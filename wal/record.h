// record: the logical contents of WAL frames and their payload encodings.
//
// Payloads (varint = LEB128):
//   put                varint key_len | key | value (the rest of the payload)
//   del                key (the whole payload)
//   batch              varint count | count x mutation
//                        mutation = u8 kind (1 put, 2 del) | varint key_len | key
//                                   | put only: varint value_len | value
//   commit             16-byte root hash (big-endian) | u64 LE node-store length
//                      [| u64 LE covered sequence, format version 3]
//                      [| 20-byte stamp bound (core/stamp.h), format version 2]
//   commit_runs        u8 count (1 .. limits::max_sorted_runs) | count x 16-byte
//                      run root (big-endian), newest first | a commit payload
//                      with a covered sequence (32 or 52 bytes): format version 4
//   replication_state  opaque bytes
//
// Invariants: encode_* accept only input that passes the limits (the writer
// checks first); decode_record rejects any payload that encode_* could not have
// produced (trailing bytes, oversized keys, empty batches...) as corruption.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include "core/hash128.h"
#include "core/stamp.h"
#include "core/status.h"
#include "wal/format.h"

namespace magnetite::wal {

enum class mutation_kind : std::uint8_t { put = 1, del = 2 };

struct mutation {
  mutation_kind kind = mutation_kind::put;
  std::string key;
  std::string value;  // empty for del
  friend bool operator==(const mutation&, const mutation&) = default;
};

struct mutation_view {
  mutation_kind kind = mutation_kind::put;
  std::string_view key;
  std::string_view value;
};

struct commit_record {
  hash128 root;                         // tree root the checkpoint produced
  std::uint64_t node_store_length = 0;  // node-store bytes that root needs
  // No stamped value under root, nor in anything checkpointed with it, has
  // a stamp above this (engine/shard.h, stamp_bound); absent: not known (a
  // shard that never kept one, or a log of format version 1).
  std::optional<stamp> stamp_bound{};
  // The last sequence number whose frame the root holds: every put, del and
  // batch frame numbered up to it, wherever it lies in the log, is in the
  // tree; recovery replays the ones above it. Absent (format versions 1 and
  // 2): the frames before the marker's own. The writer sets it.
  std::optional<std::uint64_t> covered_sequence{};
  // The roots of the sorted runs (engine/sorted_run.h) that hold what the
  // marker covers beside `root`, newest first: the covered writes are in
  // the runs and the tree together, a run's entry hiding the same key in
  // older runs and in the tree. Empty: all of them are in the tree. A marker
  // with runs is a commit_runs frame.
  std::vector<hash128> runs{};
  friend bool operator==(const commit_record&, const commit_record&) = default;
};

// One decoded frame. put and del carry one mutation; batch carries all of its own.
struct record {
  record_type type = record_type::put;
  std::uint64_t sequence = 0;
  std::vector<mutation> mutations;  // put, del, batch
  commit_record commit;             // commit
  std::string payload;              // replication_state
  friend bool operator==(const record&, const record&) = default;
};

// Checks a batch against the limits: non-empty, bounded count and bytes, each
// key and value within its limit.
status check_batch(std::span<const mutation_view> batch);

void encode_put(std::string& dst, std::string_view key, std::string_view value);
void encode_del(std::string& dst, std::string_view key);
void encode_batch(std::string& dst, std::span<const mutation_view> batch);
// A commit_runs payload when c names runs (a covered sequence is required
// then), otherwise a commit payload; commit_type(c) is the frame's type.
void encode_commit(std::string& dst, const commit_record& c);
inline record_type commit_type(const commit_record& c) noexcept {
  return c.runs.empty() ? record_type::commit : record_type::commit_runs;
}

result<record> decode_record(record_type type, std::uint64_t sequence, std::string_view payload);

}  // namespace magnetite::wal
