// keyspace: how a shard names what it keeps in its tree.
//
// One tree holds two kinds of entries, told apart by the first byte:
//   'd' | user key                      -> the stored value (a TTL envelope)
//   'x' | u64 big-endian deadline | key -> "" (the expiry index, durable)
// So the tree's order within each kind is the user's key order (and deadline
// order for the expiry entries), and recovery rebuilds the in-memory expiry
// index by reading only the 'x' range, never every value. The write-ahead log
// holds user keys and stored values; the 'x' entries are derived from them
// and are never logged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace magnetite::keyspace {

inline constexpr char data_tag = 'd';
inline constexpr char expiry_tag = 'x';

std::string data_key(std::string_view user_key);
std::string expiry_key(std::uint64_t deadline_ns, std::string_view user_key);

// The user key of a data key (which must start with data_tag).
inline std::string_view user_key_of(std::string_view data_key) { return data_key.substr(1); }
// False for anything that is not a well-formed expiry key.
bool parse_expiry_key(std::string_view tree_key, std::uint64_t& deadline_ns, std::string_view& user_key);

// The first tree key past every key of a kind: the end of its range.
inline std::string data_end() { return std::string(1, static_cast<char>(data_tag + 1)); }
inline std::string expiry_end() { return std::string(1, static_cast<char>(expiry_tag + 1)); }

}  // namespace magnetite::keyspace
