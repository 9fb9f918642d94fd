// streams: append-only event streams with optimistic appends.
//
// Contract:
// - A stream is named by any bytes (empty included); names never collide.
//   Its entries are numbered from 0 without gaps: append(s, entries, n) puts
//   them at n, n+1, ... and succeeds only if next_seq(s) == n at the moment
//   the shard applies it (the check runs in the shard actor, against writes
//   not yet durable too, so of two appends at one n exactly one wins). A
//   mismatch is a conflict that names the stream's next_seq; nothing was
//   written. One append is one log frame: all of its entries or none.
// - One stream lives on one shard (its routing key is its name).
// - With a TTL, each entry expires on its own; read skips expired entries and
//   next_seq never goes back.
// - Errors as in records.h.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "magnetite/database.h"
#include "magnetite/state/item.h"
#include "magnetite/state/records.h"

namespace magnetite::state {

struct stream_entry {
  std::uint64_t seq = 0;
  item value;
};

inline constexpr std::size_t max_read_limit = 1000;

class MAGNETITE_API streams {
 public:
  explicit streams(database& db);
  // On a replicated cluster: every call goes to the owner of the stream's
  // shard, with records.h's cluster rules (an append is applied at most once
  // across retries).
  explicit streams(cluster_client& cluster) : store_(&cluster.state_store()) {}

  // entries.size() >= 1. The seq of the first entry (== expected_seq).
  result<std::uint64_t> append(std::string_view stream, std::span<const item> entries, std::uint64_t expected_seq,
                               std::optional<std::chrono::nanoseconds> ttl = {}, std::optional<deadline> d = {});
  // Live entries from from_seq on, in order, at most `limit` (1..1000).
  result<std::vector<stream_entry>> read(std::string_view stream, std::uint64_t from_seq, std::size_t limit) const;
  result<std::uint64_t> next_seq(std::string_view stream) const;
  std::size_t shard_of(std::string_view stream) const;

 private:
  // The meta as the shard holds it: its revision (0: none) and next_seq.
  result<std::pair<std::uint64_t, std::uint64_t>> meta(std::string_view stream) const;
  state_storage* store_;
};

}  // namespace magnetite::state
