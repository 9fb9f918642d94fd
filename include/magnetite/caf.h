// caf: for hosts that run magnetite inside their own CAF actor system, or
// message the shard actors themselves with typed messages. Including it
// brings in CAF 0.17 (<caf/all.hpp>); link the host with CAF as well:
// `pkg-config --cflags --libs magnetite-caf` (docs/embedding.md).
//
// The typed interface of a shard, what hosts may send:
//
//   message                                          -> reply
//   (get, key)                                       -> (found, value)
//   (put, key, value, ttl_ns)                        -> ok          ttl_ns 0: none
//   (del, key)                                       -> ok
//   (cas, key, has_expected, expected,
//         has_desired, desired, ttl_ns)              -> (swapped, has_current, current)
//   (batch, [batch_op])                              -> ok          all or nothing
//   (range, from, to, limit)                         -> (keys, values, more)  to "": no bound
//   (commit)                                         -> root (32 hex digits)
//   (stats)                                          -> shard_stats    counters since open
//   (usage)                                          -> shard_usage    keys, bytes, cache, root
//
// Writes are answered once durable, as the calls of <magnetite/database.h>
// are. Errors arrive as caf::error in the "magnetite" category: to_status
// turns one into the status the same call of the database would return. The
// handle of a shard changes when it restarts: ask shard_handle() again after
// an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "magnetite/database.h"

namespace magnetite {

using get_atom = caf::atom_constant<caf::atom("get")>;
using put_atom = caf::atom_constant<caf::atom("put")>;
using del_atom = caf::atom_constant<caf::atom("del")>;
using cas_atom = caf::atom_constant<caf::atom("cas")>;
using batch_atom = caf::atom_constant<caf::atom("batch")>;
using range_atom = caf::atom_constant<caf::atom("range")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using usage_atom = caf::atom_constant<caf::atom("usage")>;
using ok_atom = caf::atom_constant<caf::atom("ok")>;

// One write of an atomic batch, as a message carries it.
struct batch_op {
  std::string key;
  bool is_put = true;
  std::string value;
  std::int64_t ttl_ns = 0;  // 0: none
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_op& x) {
  return f(caf::meta::type_name("batch_op"), x.key, x.is_put, x.value, x.ttl_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_stats& x) {
  return f(caf::meta::type_name("shard_stats"), x.writes, x.acknowledged, x.group_sizes, x.groups, x.checkpoints,
           x.runs_written, x.folds, x.sorted_runs, x.run_entries, x.write_stalls, x.write_stall_ns, x.ingested,
           x.replayed_records, x.expired, x.log_fsyncs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_usage& x) {
  return f(caf::meta::type_name("shard_usage"), x.keys, x.wal_bytes, x.node_bytes, x.cache_hits, x.cache_misses,
           x.record_cache_hits, x.node_reads, x.leaf_lookups, x.node_syncs, x.root, x.live_node_bytes,
           x.reclaimed_bytes, x.reclaim_cycles);
}

using shard_actor =
    caf::typed_actor<caf::replies_to<get_atom, std::string>::with<bool, std::string>,
                     caf::replies_to<put_atom, std::string, std::string, std::int64_t>::with<ok_atom>,
                     caf::replies_to<del_atom, std::string>::with<ok_atom>,
                     caf::replies_to<cas_atom, std::string, bool, std::string, bool, std::string,
                                     std::int64_t>::with<bool, bool, std::string>,
                     caf::replies_to<batch_atom, std::vector<batch_op>>::with<ok_atom>,
                     caf::replies_to<range_atom, std::string, std::string,
                                     std::uint32_t>::with<std::vector<std::string>, std::vector<std::string>, bool>,
                     caf::replies_to<commit_atom>::with<std::string>, caf::replies_to<stats_atom>::with<shard_stats>,
                     caf::replies_to<usage_atom>::with<shard_usage>>;

// Opens a database whose shard actors run in `system` (the host keeps it
// alive until the database is closed); otherwise as database::open.
MAGNETITE_API result<std::unique_ptr<database>> open_database(caf::actor_system& system, database_options options);
// The actor system the database's shards run in (its own, or the host's).
MAGNETITE_API caf::actor_system& actor_system_of(database& db);
// The typed handle of shard i (database::shard_of(key) names a key's shard).
MAGNETITE_API shard_actor shard_handle(database& db, std::size_t i);

// A status as a caf::error and back. An error from CAF itself (the shard died
// while the request was queued, say) becomes a transient io_error.
MAGNETITE_API caf::error to_error(const status& s);
MAGNETITE_API status to_status(const caf::error& e);

}  // namespace magnetite
