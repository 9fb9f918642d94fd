// read_view: an immutable snapshot of one shard, readable from any thread.
//
// A view is the shard's committed tree (a root in its node store) plus the
// layers of durable writes made since that checkpoint, newest first. The shard
// actor publishes a new view after each group of writes is durable and BEFORE
// it acknowledges them, so a host thread that saw an acknowledgement and then
// reads the shard's current view sees that write (read-your-writes), and a view
// never holds a write that is not yet durable under the `always` fsync policy.
// A view never changes: readers need no lock and never talk to the actor.
//
// Invariants: each layer's entries are sorted by tree key and unique; a newer
// layer's entry hides the same key in older layers and in the tree; a layer
// entry without a value is a deletion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"
#include "engine/key_filter.h"
#include "tree/chunker.h"
#include "tree/node_store.h"
#include "tree/prolly_tree.h"

namespace magnetite {

// A tree key (see keyspace.h) and its stored bytes, or nullopt for a deletion:
// what a checkpoint applies to the tree.
using layer_entry = tree::edit_view;

// A layer's entries are views into byte blocks the layer holds. A merge copies
// the views and shares the blocks of both inputs, never the bytes, so building
// the layers copies each write once. A block lives while any layer holding it
// does: a layer holds every write since the checkpoint that reached it, the
// ones a newer write hid included, and `bytes` counts all of that.
//
// A layer made by of() or merge() (every layer a view holds) has a Bloom
// filter over its keys (key_filter.h), so a point read skips the layers
// that cannot hold its key; merge_all's result, which only a checkpoint or a
// scan walks, has none (its filter answers "maybe" to every key).
struct layer {
  std::vector<layer_entry> entries;                        // sorted by key, unique
  std::vector<std::shared_ptr<const std::string>> blocks;  // the bytes entries view
  key_filter filter;                                       // over the entries' keys
  std::size_t bytes = 0;  // memory held: the blocks' bytes, the entry array and the filter

  // The entry of key, with key_filter::hash_of(key) given (one hash for
  // every layer a read probes).
  const layer_entry* find(std::string_view key, std::uint64_t hash) const noexcept;
  const layer_entry* find(std::string_view key) const noexcept { return find(key, key_filter::hash_of(key)); }
  // The index of the first entry whose key is >= key (entries.size() if none).
  std::size_t lower_bound(std::string_view key) const noexcept;
  // The writes of `staged` (tree key -> stored bytes, or nullopt for a
  // deletion), copied into one block.
  static layer of(const std::map<std::string, std::optional<std::string>, std::less<>>& staged);
  // Newer entries win; the result is sorted and unique.
  static layer merge(const layer& newer, const layer& older);
  // All of `newest_first` as one layer: the only one itself, or a merge.
  static std::shared_ptr<const layer> merge_all(const std::vector<std::shared_ptr<const layer>>& newest_first);
};

// A run of live user keys in scan order, with their values.
struct live_run {
  std::vector<std::pair<std::string, std::string>> entries;  // user key, live value
  // Set when the run stopped before the end of its range (a limit, or a cap
  // on its bytes): the bound to read the rest with - forward the next
  // `from`, backward the next `to` (exclusive, so the key just past it).
  std::optional<std::string> resume;
};

class read_view {
 public:
  // `root_pin` is shared by every view of one root: while any of them lives,
  // the owner's gc keeps that root's nodes (shard.h).
  read_view(std::shared_ptr<tree::node_store> store, tree::chunk_policy policy, hash128 root,
            std::vector<std::shared_ptr<const layer>> layers, std::uint64_t sequence,
            std::shared_ptr<const hash128> root_pin = nullptr);

  // The stored bytes under a tree key: true and `out` set, or false if absent.
  result<bool> find(std::string_view tree_key, std::string& out) const;
  // The value of a user key at time now_ns: nullopt if absent or expired.
  result<std::optional<std::string>> get(std::string_view user_key, std::uint64_t now_ns) const;
  // Visits the tree keys in [from, to) in order (to empty: no upper bound) with
  // their stored bytes, layers merged over the tree, deletions hidden; stops
  // when fn returns false. A loop over a view_cursor (view_cursor.h), which
  // reads the same entries one at a time.
  status scan(std::string_view from, std::string_view to,
              const std::function<bool(std::string_view key, std::string_view stored)>& fn) const;
  // The live values of user keys in [from, to) at now_ns (to empty: no
  // upper bound), ascending or (backward) descending: at most `limit`
  // entries, and no more once `max_bytes` of keys and values are in (one
  // entry at least, whatever its size).
  result<live_run> live_range(std::string_view from, std::string_view to, std::uint64_t now_ns, std::size_t limit,
                              bool backward = false, std::size_t max_bytes = SIZE_MAX) const;
  // The same keys of [from, to) in descending order.
  status scan_reverse(std::string_view from, std::string_view to,
                      const std::function<bool(std::string_view key, std::string_view stored)>& fn) const;

  const hash128& root() const noexcept { return root_; }
  const tree::chunk_policy& policy() const noexcept { return policy_; }
  // The node store its tree is in (reads are thread-safe).
  const std::shared_ptr<tree::node_store>& store() const noexcept { return store_; }
  const std::vector<std::shared_ptr<const layer>>& layers() const noexcept { return layers_; }
  std::size_t layer_bytes() const noexcept;
  // The last log sequence whose write this view holds.
  std::uint64_t sequence() const noexcept { return sequence_; }

 private:
  std::shared_ptr<tree::node_store> store_;
  tree::chunk_policy policy_;
  hash128 root_;
  std::vector<std::shared_ptr<const layer>> layers_;
  std::uint64_t sequence_;
  std::shared_ptr<const hash128> root_pin_;
};

}  // namespace magnetite
