// sorted_run: the writes of one frozen memtable kept on disk as a tree of
// their own, between a shard's memtables and its tree.
//
// Why: applying a memtable to a large tree rewrites most of the tree's
// leaves (writes in random key order touch nearly every leaf once the tree
// holds many memtables' worth), so each checkpoint cost about the whole
// tree and a load slowed as its data grew. A checkpoint now writes the
// memtable as a run: a tree of only its own entries, built without reading
// or rewriting a leaf of the shard's tree. The runs are folded into the
// tree all at once, each leaf rewritten once for all of them, when they
// hold about as many entries as the tree or when there are as many as the
// shard allows (shard.h, "Checkpoint"); an explicit checkpoint folds them
// too, so every root a caller is handed holds every write before it.
//
// Encoding (docs/formats/tree.md, "Sorted runs"): a run is a prolly tree of
// the same chunk policy in the shard's node store. Its keys are tree keys
// (keyspace.h); its values are tagged: an empty value is a deletion, any
// other is the byte 0x01 followed by the stored bytes.
//
// Contract:
// - A run never changes once written. In a shard's list (newest first) a
//   run is newer than the runs after it and than the tree: its entry for a
//   key, a deletion included, hides the key in those.
// - Its filter holds every key of the run (made as the run is written, or
//   from its keys when read back at open), so a read skips a run whose
//   filter says no.
// - Readable from any thread; writing one touches only the node store
//   (whose writes are serialised) and the memtable it is made from.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/hash128.h"
#include "core/status.h"
#include "engine/key_filter.h"
#include "engine/memtable.h"
#include "tree/chunker.h"
#include "tree/node_source.h"

namespace magnetite {

class sorted_run;
using run_ptr = std::shared_ptr<const sorted_run>;

class sorted_run {
 public:
  sorted_run(hash128 root, std::uint64_t entries, std::string last_key, key_filter filter)
      : root_(root), entries_(entries), last_key_(std::move(last_key)), filter_(std::move(filter)) {}

  // A run's value: a deletion, or the stored bytes it tags.
  static bool deletion(std::string_view tagged) noexcept { return tagged.empty(); }
  static std::string_view stored(std::string_view tagged) noexcept { return tagged.substr(1); }
  static constexpr char value_tag = 0x01;

  const hash128& root() const noexcept { return root_; }
  // Entries, deletions included (from the root's child counts).
  std::uint64_t entries() const noexcept { return entries_; }
  // The largest key it holds (a run is never empty).
  const std::string& last_key() const noexcept { return last_key_; }

  enum class lookup { absent, deleted, found };
  // The run's entry for a tree key whose key_filter::hash_of is `key_hash`:
  // absent (look in older runs and the tree), deleted, or found with the
  // stored bytes in `out`.
  result<lookup> find(tree::node_sink& store, const tree::chunk_policy& policy, std::string_view tree_key,
                      std::uint64_t key_hash, std::string& out) const;

 private:
  hash128 root_;
  std::uint64_t entries_;
  std::string last_key_;
  key_filter filter_;
};

// Writes the newest entry of every key of `table` (deletions included) as a
// new run in `store` (not flushed: the caller makes it durable before any
// marker names it).
result<run_ptr> write_run(tree::node_sink& store, const tree::chunk_policy& policy, const memtable& table);
// The run a commit marker names, read back at open: its filter made from a
// walk of its keys (reading past the node cache).
result<run_ptr> read_run(tree::node_sink& store, const tree::chunk_policy& policy, const hash128& root);
// The tree `base` with `table`'s newest entries (none when null) and then
// `runs` (newest first) applied, newest winning, all in one pass over the
// keys: what the shard's tree holds once they are folded into it. The
// result is the root a tree built from that content would have (history
// independence), however the entries were spread among table and runs.
result<hash128> fold_runs(tree::node_sink& store, const tree::chunk_policy& policy, const hash128& base,
                          const memtable* table, std::span<const run_ptr> runs);

}  // namespace magnetite
