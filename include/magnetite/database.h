// database: what a host program opens (this header pulls in no CAF). A data
// directory of N shards, each a supervised shard actor; blocking and
// asynchronous calls, all thread-safe.
//
// Layout of the data directory:
//   LOCK          held (flock) while open: a second process gets `busy`
//   MANIFEST      "magnetite-manifest 1\nshards N\n": reopening without a
//                 count keeps N; with another count is invalid_argument
//                 (keys would move)
//   CHECKPOINTS   the combined roots commit() made, the last retained_checkpoints
//                 (docs/formats/checkpoints.md)
//   TAGS          the named versions, once tag() named one (docs/formats/tags.md)
//   shard-000/    one shard (wal/, nodes/), and so on
//
// Routing: shard = XXH3-64(routing key) mod shards; the routing key is the key
// unless the caller passes one to keep related keys on one shard.
//
// Keys that begin with the bytes FF FF belong to keyed state, records and
// streams (<magnetite/state.h>): the plain calls refuse them and scans end
// before them.
//
// Reads: get(), range() and scan() do not message the actors. They read the
// shards' latest published views on the calling thread (a get: a few
// microseconds when warm; a scan merges the shards' views in key order). A get
// sees every write acknowledged before it started (read-your-writes across
// threads that hand each other acknowledgements) and, under the `always` fsync
// policy, never a write that is not durable. Views are per shard: two gets on
// two shards are not one snapshot. While a shard restarts its reads fail with
// a transient error.
//
// Writes go to the shard actor as messages and return when durable. The
// calling thread needs no actor of its own: it sleeps until its group's fsync
// is done.
//
// Supervision: a shard that dies (an exception in a handler, a failed fsync)
// or cannot boot is restarted by its factory (reopen, replay) after a backoff
// that doubles from `restart_backoff`; more than `max_restarts` restarts within
// `restart_window` mark it failed, and every request then gets a permanent
// `failed` error. A boot that finds its files damaged or of a newer format
// (permanent corruption / not_supported) is not retried, since that does not
// heal: the shard answers with that error for good. The other shards keep
// serving throughout.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "magnetite/backup.h"
#include "magnetite/config.h"
#include "magnetite/hash128.h"
#include "magnetite/history.h"
#include "magnetite/options.h"
#include "magnetite/range_cursor.h"
#include "magnetite/snapshot.h"
#include "magnetite/stats.h"
#include "magnetite/status.h"
#include "magnetite/write.h"

namespace magnetite {

class database_core;  // the engine's side

class MAGNETITE_API database {
 public:
  static result<std::unique_ptr<database>> open(database_options options);
  // The shard count recorded in `dir`'s MANIFEST, or nullopt for a directory
  // that holds no database yet (a tool opens an existing one with its count).
  static result<std::optional<std::size_t>> recorded_shards(const std::string& dir);
  // Checkpoints every shard and stops them.
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  std::size_t shard_count() const noexcept;
  std::size_t shard_of(std::string_view routing_key) const noexcept;

  result<std::optional<std::string>> get(std::string_view key, std::optional<std::string_view> routing = {});
  status put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl = {},
             std::optional<std::string_view> routing = {});
  status del(std::string_view key, std::optional<std::string_view> routing = {});
  result<cas_outcome> cas(std::string_view key, std::optional<std::string_view> expected,
                          std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl = {},
                          std::optional<std::string_view> routing = {});
  // Atomic within one shard: every key must route to the same shard.
  status batch(std::span<const batch_write> writes, std::optional<std::string_view> routing = {});
  // Bulk ingest of sorted writes: `sorted` holds (key, value) views, keys
  // strictly increasing, values without a TTL (a key's earlier TTL goes).
  // Each shard writes its part straight into its tree (the writes since its
  // last checkpoint checkpointed first, then these, one flush and one commit
  // marker, no log frames), all shards at once. Durable when it returns ok.
  // Each shard's part is all or nothing, the whole is not: after an error
  // some shards may hold their part, and running the same ingest again is
  // harmless. Bad input is invalid_argument and nothing is sent. For loads:
  // a call's keys should follow the previous call's, so that each touches
  // only the right edge of every tree.
  status ingest(std::span<const std::pair<std::string_view, std::string_view>> sorted);
  // Entries of [from, to) across all shards in key order, at most `limit`
  // (`to` empty: no upper bound). Read from the shards' views like get.
  result<std::vector<std::pair<std::string, std::string>>> range(std::string_view from, std::string_view to,
                                                                 std::size_t limit);
  // The same as a cursor that pulls `chunk` entries per shard at a time and
  // merges them in key order, on the calling thread, over one pinned view per
  // shard (<magnetite/range_cursor.h>): for ranges of any length.
  result<range_cursor> scan(std::string_view from, std::string_view to, std::size_t chunk = 256);
  // Checkpoints every shard: their roots, and one root over them.
  using commit_result = magnetite::commit_result;
  result<commit_result> commit();
  result<database_stats> stats();
  // The checkpoints commit() made that are still retained, oldest first: the
  // combined roots diff() accepts.
  std::vector<checkpoint> checkpoints() const;
  // Keys added, removed and changed from root a to root b, in key order: two
  // combined roots of retained checkpoints, or two roots one shard holds.
  // Reads on the calling thread; cost grows with the difference, not the data.
  result<std::vector<key_change>> diff(const hash128& a, const hash128& b);
  // The retained checkpoint whose combined root is `version` (one of
  // checkpoints()), read as its commit() left it: get, range and scan of
  // every shard at that checkpoint (<magnetite/snapshot.h>). The snapshot
  // pins what it reads against gc and reclamation until it is destroyed.
  // not_found for a root that is not a retained checkpoint's. A named
  // version (tag()) reads the same way, by its combined root or its name.
  result<snapshot> at(const hash128& version);
  // `version`: a tag's name, or a combined root as 32 hex digits.
  result<snapshot> at(std::string_view version);
  // The combined root a tag's name (or 32 hex digits) stands for: what diff()
  // and at() take. not_found for a name no tag has.
  result<hash128> resolve(std::string_view version) const;

  // Named versions. tag() keeps a version under `name` until untag(name):
  // its nodes stay out of gc and reclamation however many commits follow,
  // at() and diff() take it, stats() and tags() list it, and the name is
  // durable (TAGS) when it returns. Without `version` it commits first and
  // names that checkpoint, which holds every write acknowledged before the
  // call; with one it names a retained checkpoint or a named version. Names
  // are 1 to 64 bytes of letters, digits, '.', '_' and '-', not beginning
  // with '-' or '.', and not 32 hex digits; at most 1000. Naming a version
  // again under its own name is ok; a name in use for another version,
  // or a bad name, is invalid_argument and changes nothing.
  result<checkpoint> tag(std::string_view name, std::optional<hash128> version = {});
  // not_found if no tag has the name. The version's nodes go with the next
  // gc or reclamation unless something else keeps them.
  status untag(std::string_view name);
  // By name.
  std::vector<version_tag> tags() const;

  // Backs up one version into the backup directory `dest` (made if missing;
  // <magnetite/backup.h>): without `version` it commits first and backs up
  // that checkpoint; with one, a retained checkpoint or a named version (a
  // tag's name becomes the version's label in the backup). Ships only the
  // nodes `dest` lacks; reads and writes go on meanwhile (the version is
  // pinned, the copy runs on the calling thread). Complete when it returns
  // ok; before that `dest` holds its previous complete backup.
  result<backup_report> backup(const std::string& dest, std::optional<std::string_view> version = {});
  // The same, with the version and a rate in `options` (<magnetite/backup.h>).
  result<backup_report> backup(const std::string& dest, const backup_options& options);
  // Reads back every node of every shard's current root and of the retained
  // checkpoints, every log from its last commit marker, the expiry entries;
  // each shard stops writing while it is checked. Damage is in the report.
  result<database_verify_report> verify();
  // Drops every node that no current root, retained checkpoint or view still
  // held (an open scan cursor) reaches, per shard; and rewrites CHECKPOINTS
  // without the lines verify reported damaged.
  result<database_gc_report> gc();
  // Runs a space reclamation cycle on every shard now, to its end, whether or
  // not one is due and whatever max_space_amplification says (even 0): every
  // pack holding garbage is a victim (the cycle aims at 1.01x). The shards
  // also start cycles by themselves after checkpoints. Returns the bytes each
  // gave back. A shard's writes wait while its cycle runs. For operators and
  // tests; gc() does the same job by copying every live node.
  result<std::vector<std::uint64_t>> reclaim();

  // Asynchronous forms: `done` runs on an actor thread when the write is durable
  // (or failed), or on the calling thread when the request fails before it
  // reaches the shard (bad input, a dead shard). It must not block.
  void put_async(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                 std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void del_async(std::string_view key, std::function<void(status)> done, std::optional<std::string_view> routing = {});
  void cas_async(std::string_view key, std::optional<std::string_view> expected,
                 std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                 std::function<void(result<cas_outcome>)> done, std::optional<std::string_view> routing = {});
  void batch_async(std::span<const batch_write> writes, std::function<void(status)> done,
                   std::optional<std::string_view> routing = {});

  // The engine behind this database, for the engine's own layers (state,
  // replication, tools); <magnetite/caf.h> is the way in for hosts.
  database_core& core() noexcept { return *core_; }
  const database_core& core() const noexcept { return *core_; }
  explicit database(std::unique_ptr<database_core> core) noexcept;

 private:
  std::unique_ptr<database_core> core_;
};

}  // namespace magnetite
