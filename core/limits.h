// limits: the largest inputs magnetite accepts, as named constants, and the
// checks that turn a breach into a clear invalid_argument error.
//
// Why these numbers: keys are copied into internal tree nodes as separators and
// sit in every index entry, so they stay small (LMDB allows 511 bytes, we allow
// 4 KiB). Values are held whole in memory on their way through the WAL and the
// tree, so 16 MiB keeps one write from monopolising a shard. An atomic batch is
// one WAL frame, bounded at 64 MiB so recovery never needs an unbounded buffer.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace magnetite::limits {

inline constexpr std::size_t max_key_bytes = 4 * 1024;
inline constexpr std::size_t max_value_bytes = 16 * 1024 * 1024;
inline constexpr std::size_t max_batch_bytes = 64 * 1024 * 1024;
inline constexpr std::size_t max_batch_mutations = 1 << 20;
// Opaque replication-state payloads (promise records) are small by nature.
inline constexpr std::size_t max_replication_state_bytes = 1024 * 1024;
// Sorted runs a shard keeps beside its tree (engine/sorted_run.h): a read
// probes each one's filter, and a commit marker names them all.
inline constexpr std::size_t max_sorted_runs = 64;

// The database frames what it stores (a keyspace byte and a deadline before a
// key, a TTL envelope around a value), so the limits a host sees are this much
// under the ones the log and the tree enforce.
inline constexpr std::size_t framing_bytes = 16;
inline constexpr std::size_t max_user_key_bytes = max_key_bytes - framing_bytes;
inline constexpr std::size_t max_user_value_bytes = max_value_bytes - framing_bytes;

// Empty keys are refused: they cannot be told apart from "no key" in several
// user-facing APIs (scan bounds, cursors).
status check_key(std::string_view key);
status check_value(std::string_view value);
// The same checks against another limit (the engine's key spaces, which
// frame what they store, check against smaller ones).
status check_key_within(std::string_view key, std::size_t limit);
status check_value_within(std::string_view value, std::size_t limit);

}  // namespace magnetite::limits
