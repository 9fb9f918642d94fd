// state_space: the two spaces of user keys a shard holds, and what each API
// accepts in them.
//
// - Plain keys: what put, get, del, cas and scans take. Any non-empty key
//   within limits::max_user_key_bytes that does not start with FF FF.
// - State keys: those that start with FF FF (`prefix`). Only a shard's
//   conditional batch (`shard::apply`) writes them, and every value it
//   writes carries its revision (the log sequence number of the batch) in
//   its first revision_bytes bytes, before the caller's bytes.
//
// state/ builds keyed state, records and streams in the state space
// (docs/formats/state.md); the engine gives it revisions and conditional
// writes and interprets nothing else of its keys. The plain API refuses
// state keys and its scans end before them, so neither side can read or
// overwrite the other's keys.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/limits.h"
#include "core/status.h"
#include "magnetite/write.h"

namespace magnetite::state_space {

inline constexpr std::string_view prefix{"\xff\xff", 2};
inline constexpr std::size_t revision_bytes = 8;
inline constexpr std::size_t max_value_bytes = limits::max_user_value_bytes - revision_bytes;

// A plain key: non-empty, within max_user_key_bytes, not in the state space.
status check_user_key(std::string_view key);
status check_user_value(std::string_view value);
// A state key (starts with `prefix`), within max_user_key_bytes.
status check_key(std::string_view key);
// A state value before its revision is added.
status check_value(std::string_view value);

// The revision a stored state value starts with. A value too short to carry
// one, or carrying 0, is corruption naming the key's size: every writer of
// the state space puts a positive revision first.
result<std::uint64_t> revision_of(std::string_view key, std::string_view value);

}  // namespace magnetite::state_space

namespace magnetite {

// A precondition of a conditional batch: the state key's value carries this
// revision (0: the key is absent or expired).
struct state_check {
  std::string key;
  std::uint64_t revision = 0;
};

}  // namespace magnetite

namespace magnetite::state_space {

// The shape every conditional batch must have, wherever it is judged (a
// shard, a cluster's owner): at most limits::max_batch_mutations writes,
// every key a state key, every value within max_value_bytes, a TTL positive
// and never on a delete. Bad input is refused before anything is sent.
status check_batch(std::span<const state_check> checks, std::span<const batch_write> writes);
// One write of such a batch, its `i`th (value null: a delete).
status check_write(std::size_t i, std::string_view key, const std::string* value,
                   std::optional<std::chrono::nanoseconds> ttl);

}  // namespace magnetite::state_space
