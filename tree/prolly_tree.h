// prolly_tree: the content-addressed Merkle search tree a shard keeps its
// committed data in. Operations take a root hash and return a new one; nothing
// is ever modified in place, so any root stays readable for as long as its
// nodes are kept.
//
// Invariants (tested as properties):
// - History independence: the root depends only on the set of entries, never on
//   the order or batching of the writes that produced it. apply() yields the
//   same bytes as build() of the same content.
// - apply() re-chunks from the node before the first affected one until the new
//   boundaries line up with the old ones, and writes only those nodes and their
//   ancestors: O(changed nodes x depth), never the whole spine of the tree.
// - Keys are 1..limits::max_key_bytes bytes; edits must be sorted with unique
//   keys (invalid_argument otherwise, and nothing is written).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tree/chunker.h"
#include "tree/cursor.h"
#include "tree/node_source.h"

namespace magnetite::tree {

struct edit {
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
};

// The same, viewing bytes the caller keeps alive during the call.
struct edit_view {
  std::string_view key;
  std::optional<std::string_view> value;  // nullopt: delete
};

class prolly_tree {
 public:
  explicit prolly_tree(node_sink& store, chunk_policy policy = {}) : store_(store), policy_(policy) {}

  const chunk_policy& policy() const noexcept { return policy_; }

  // The root of the tree with no entries (an empty leaf).
  result<hash128> empty_root();
  // A tree of `sorted` (strictly increasing keys).
  result<hash128> build(std::span<const entry> sorted);
  // The tree with `sorted_edits` applied (puts replace, deletes of absent keys
  // are no-ops).
  result<hash128> apply(const hash128& root, std::span<const edit> sorted_edits);
  result<hash128> apply(const hash128& root, std::span<const edit_view> sorted_edits);

  result<std::optional<std::string>> get(const hash128& root, std::string_view key);
  // The same into a caller's buffer (no allocation once it is large enough).
  result<bool> get(const hash128& root, std::string_view key, std::string& value);
  result<std::uint64_t> count(const hash128& root);
  // Entries with key < `key`.
  result<std::uint64_t> rank(const hash128& root, std::string_view key);
  // Entries with lo <= key < hi.
  result<std::uint64_t> count_range(const hash128& root, std::string_view lo, std::string_view hi);
  // Height: 1 for a single leaf.
  result<int> depth(const hash128& root);

  // Cursors over the entries of a root.
  result<cursor> seek(const hash128& root, std::string_view key);  // first entry >= key
  result<cursor> first(const hash128& root);
  result<cursor> last(const hash128& root);

  // Streams lo <= key < hi (an empty hi means no upper bound) in key order, or
  // backward from the top when `reverse`; stops early when fn returns false.
  status scan(const hash128& root, std::string_view lo, std::string_view hi, bool reverse,
              const std::function<bool(const entry_view&)>& fn);

  node_sink& store() noexcept { return store_; }

 private:
  result<node_ptr> load(const hash128& h);
  result<node_index> load_index(const hash128& h, node_ptr& hold);
  // Chunks a run of entries at `level` into nodes, writes them, and returns the
  // parent entries (last key -> child_ref) of the nodes made.
  result<std::vector<entry>> build_level(std::uint8_t level, std::span<const entry> entries);
  result<hash128> build_up(std::uint8_t level, std::vector<entry> refs);

  node_sink& store_;
  chunk_policy policy_;
};

}  // namespace magnetite::tree
