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

#include <cstddef>
#include <string_view>

#include "core/limits.h"
#include "core/status.h"

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

}  // namespace magnetite::state_space
