// expiry_index: which keys expire when, for one shard.
//
// A shard arms ONE timer for earliest() and, when it fires, deletes what
// take_expired() returns (through the WAL, in one group) and re-arms for the
// new earliest(). The index is rebuilt on recovery from the durable copy the
// shard keeps in its tree (see engine/keyspace.h) and the log's replayed writes.
//
// Invariants: each key has at most one deadline (set() replaces it); earliest()
// is the smallest deadline held; take_expired(now) removes and returns exactly
// the keys whose deadline is <= now, in deadline order (then key order), at most
// `limit` of them so one sweep stays bounded. Deadlines are absolute, in
// nanoseconds of the shard's clock.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace magnetite::ttl {

struct expired_key {
  std::string key;
  std::uint64_t deadline_ns = 0;
};

class expiry_index {
 public:
  // Sets (or moves) the key's deadline.
  void set(std::string_view key, std::uint64_t deadline_ns);
  // Forgets the key's deadline (a delete, or an overwrite without TTL).
  void erase(std::string_view key);

  std::optional<std::uint64_t> deadline(std::string_view key) const;
  std::optional<std::uint64_t> earliest() const;
  std::vector<expired_key> take_expired(std::uint64_t now_ns, std::size_t limit);

  std::size_t size() const noexcept { return by_key_.size(); }
  bool empty() const noexcept { return by_key_.empty(); }

 private:
  // Looked up by string_view without making a string: every write asks.
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view k) const noexcept { return std::hash<std::string_view>{}(k); }
  };
  std::set<std::pair<std::uint64_t, std::string>> by_deadline_;
  std::unordered_map<std::string, std::uint64_t, key_hash, std::equal_to<>> by_key_;
};

}  // namespace magnetite::ttl
