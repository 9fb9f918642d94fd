// state_storage: what state/ needs of the shards that hold its keys, and
// nothing more, so that the same records (keyed state and streams in time)
// run on a data directory (database_core) and on a replicated cluster
// (replication/cluster_state.cc) alike. Declared here, below both state/ and
// replication/, so neither includes the other (docs/design/replication.md, 10).
//
// Contract, for every implementation:
// - Keys are state keys (state_space.h); values read back are live values as
//   a conditional batch wrote them: revision (8 bytes LE), type, body. TTL
//   deadlines are judged by the storage's own clock.
// - read and read_range are linearizable: they see every write whose
//   apply/commit_across returned before they began.
// - apply is all or nothing: every check holds and every write is made, in
//   one durable step, or nothing is written and the first failed check is
//   answered with the revision found. On a cluster a commit is answered
//   once a majority made it durable.
// - Errors keep their categories (status.h): transient proves nothing was
//   written; ambiguous (a timeout, a failure after hand-off) may have been.
// - Revisions grow on every key with every write of it and are never reused
//   across delete and re-create; a commit's writes share one revision.
// Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/read_view.h"
#include "engine/state_space.h"
#include "magnetite/write.h"

namespace magnetite {

// One shard's part of a transaction: checks and writes of state keys
// (values are the caller's bytes, without revision; no ttl).
struct transaction_part {
  std::size_t shard = 0;
  std::vector<state_check> checks;
  std::vector<batch_write> writes;
};

struct transaction_outcome {
  bool committed = false;
  // Committed: the highest revision the writes got (each shard numbers its
  // own; a write's revision is its shard's).
  std::uint64_t revision = 0;
  // Not committed because a check failed: which part and check, and the
  // revision found. Nothing was written.
  std::size_t failed_part = 0;
  std::uint32_t failed_check = 0;
  std::uint64_t found = 0;
};

// A run of live state keys in key order (engine/read_view.h).
using state_range = live_run;

// The reads of one shard that one call of state/ makes (a get_many, a
// scan's chunks, a deque's meta and its slots). On a data directory they
// read one published view, so they agree with each other; on a cluster each
// goes to the owner and is linearizable on its own.
class state_view {
 public:
  virtual ~state_view() = default;
  // The live value of `key`; nullopt when absent or expired.
  virtual result<std::optional<std::string>> read(std::string_view key) const = 0;
  // Live keys in [from, to) (to empty: no bound), ascending or descending,
  // at most `limit` (>= 1).
  virtual result<state_range> read_range(std::string_view from, std::string_view to, std::size_t limit,
                                         bool backward = false) const = 0;
};

class state_storage {
 public:
  using deadline = std::chrono::steady_clock::time_point;
  virtual ~state_storage() = default;

  virtual std::size_t shard_of(std::string_view routing_key) const = 0;
  virtual result<std::shared_ptr<const state_view>> pin(std::size_t shard) = 0;
  // A conditional batch on one shard. With a deadline, waits at most until
  // then and answers `timeout`, ambiguous. A deadline already past sends
  // nothing (transient).
  virtual result<cas_outcome> apply(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                                    std::optional<deadline> d = {}) = 0;
  // The parts of one transaction on two or more shards, committed as a whole
  // (actors/transaction_coordinator.h states the outcomes).
  virtual result<transaction_outcome> commit_across(std::vector<transaction_part> parts,
                                                    std::optional<deadline> d = {}) = 0;

  // One read of one shard, with nothing else to agree with.
  result<std::optional<std::string>> read(std::size_t shard, std::string_view key) {
    auto v = pin(shard);
    if (!v) return v.error();
    return (*v)->read(key);
  }
  result<state_range> read_range(std::size_t shard, std::string_view from, std::string_view to, std::size_t limit) {
    auto v = pin(shard);
    if (!v) return v.error();
    return (*v)->read_range(from, to, limit);
  }
};

}  // namespace magnetite
