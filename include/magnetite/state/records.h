// records: transactional records, (namespace, key) -> item with a revision.
//
// Contract:
// - A record's revision (on a data directory) is the log sequence number of
//   the commit that wrote it: positive, increasing per key (and across every
//   key of one shard), never reused across delete and re-create. Revisions
//   are not consecutive.
// - One namespace lives on one shard (its routing key is the namespace);
//   shard_of tells which. A transaction may touch namespaces on any shards.
// - Serializable optimistic transactions: the first load of a key records the
//   revision seen (0 for a miss). On one shard, commit sends every such read
//   as a check and every buffered write in ONE conditional batch
//   (shard::apply): one log frame, all or nothing, also across a crash. On
//   two or more shards, commit is two-phase (docs/design/transactions.md):
//   each shard checks its reads and holds its keys, the decision is made
//   durable, then every shard applies its writes; all or nothing, also across
//   a crash at any step. A conflict (some read key has moved, or is held by
//   another transaction being committed) is the only error that proves
//   nothing was written. Loads of the same key repeat the first answer; a
//   transaction reads its own writes (their revision is 0 until committed).
// - A commit that writes on several shards returns the highest revision its
//   writes got: each shard numbers its own, so a record's revision is its
//   shard's (records::load tells).
// - Reads never wait (the shard's published view); a commit waits at most
//   until its deadline, then answers timeout, ambiguous: an admitted commit is
//   not recalled and may still land.
// - Error categories: a caller mistake (bad input, a finished transaction) and
//   a conflict are transient; a refused operation (a failed shard, damaged
//   data) permanent; a timeout or a failure after hand-off
//   ambiguous.
// - On a replicated cluster (records(cluster_client&)) every load, list and
//   commit goes to the owner of the namespace's shard: loads and lists are
//   linearizable, a commit is acknowledged once a majority made it durable,
//   and a retried commit (after a lost answer, at a new owner) is applied at
//   most once (docs/design/replication.md, 10). Revisions there are the
//   owner's: they grow per key and never come back across a delete, but are
//   not log positions. A transaction across shards is two-phase there too,
//   driven by the client: a prepare whose client died holds its keys until
//   a later call meets it past cluster_client_options::resolve_after (that
//   call settles it, and answers a conflict). The cluster client's errors
//   apply (cluster_client.h).
// A transaction is used by one thread at a time; `records` is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "magnetite/cluster_client.h"
#include "magnetite/database.h"
#include "magnetite/state/item.h"

namespace magnetite {
class state_storage;  // the engine's (a database's shards, or a cluster's owners)
}

namespace magnetite::state {

using deadline = std::chrono::steady_clock::time_point;

struct record {
  item value;
  std::uint64_t revision = 0;
};

struct page {
  std::vector<std::pair<std::string, record>> records;
  std::optional<std::string> next;  // pass as start_after; set only when more exist
};

inline constexpr std::size_t max_list_limit = 1000;

class transaction;

class MAGNETITE_API records {
 public:
  explicit records(database& db);
  // On a replicated cluster: every call goes to the owner of the
  // namespace's shard (cluster_client.h), as described above.
  explicit records(cluster_client& cluster) : store_(&cluster.state_store()) {}

  result<std::optional<record>> load(std::string_view ns, std::string_view key) const;
  // Records of `ns` whose key starts with `prefix`, in key order, after
  // `start_after` (the previous page's `next`), at most `limit` (1..1000).
  result<page> list(std::string_view ns, std::string_view prefix, std::optional<std::string_view> start_after,
                    std::size_t limit) const;
  transaction begin() const;
  std::size_t shard_of(std::string_view ns) const;

 private:
  state_storage* store_;
};

class MAGNETITE_API transaction {
 public:
  explicit transaction(state_storage& store) : store_(&store) {}

  result<std::optional<record>> load(std::string_view ns, std::string_view key);
  status put(std::string_view ns, std::string_view key, item value);
  status del(std::string_view ns, std::string_view key);
  // The revision of every write (for a read-only transaction: the log position
  // its reads were validated at). The transaction is finished afterwards,
  // whatever the result.
  result<std::uint64_t> commit(std::optional<deadline> d = {});
  // Discards everything; cannot fail. Finished afterwards.
  void rollback() noexcept;
  bool finished() const noexcept { return finished_; }

 private:
  struct read {
    std::uint64_t revision = 0;  // 0: absent
    std::optional<item> value;
    std::string ns, key;  // for a conflict's message
  };
  struct write {
    std::optional<item> value;  // nullopt: delete
    std::string stored;         // value's stored form, encoded once by put
    std::string ns, key;
  };
  // The state key of (ns, key), once the transaction is usable.
  result<std::string> key_for(std::string_view ns, std::string_view key);

  state_storage* store_;
  std::map<std::string, read> reads_;    // by state key
  std::map<std::string, write> writes_;  // by state key
  bool finished_ = false;
};

}  // namespace magnetite::state
