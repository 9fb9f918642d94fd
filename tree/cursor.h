// cursor: a position in a tree, kept as the path of nodes from the root.
//
// At level 0 it walks entries in key order, forward and backward, crossing leaf
// boundaries through the path (so it reads each node once per visit and never
// materialises a range). At a level above, it walks the nodes of that level; the
// tree's mutation uses that. The tree under a cursor is immutable (content
// addressed), so a cursor stays valid while new roots are built.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "tree/node_source.h"

namespace magnetite::tree {

class cursor {
 public:
  // Positions at level `level` in the node that covers `key` (the first whose
  // last key is >= key, or the last node), at its first entry >= key (which may
  // be one past its end).
  static result<cursor> seek(node_source& src, const node_ptr& root, std::uint8_t level, std::string_view key);
  static result<cursor> first(node_source& src, const node_ptr& root);
  static result<cursor> last(node_source& src, const node_ptr& root);

  // ---- entries (level 0) ----
  // On an entry: not past the end, not before the beginning. From past the
  // end, prev() goes to the last entry; from before the beginning, next() goes
  // to the first; moving further out stays where it is.
  bool valid() const noexcept { return valid_; }
  entry_view current() const { return node().entries()[index()]; }
  status next();
  status prev();

  // ---- nodes (any level) ----
  const tree::node& node() const noexcept { return *path_.back().n; }
  // The same node, shared: holding it keeps views of its entries valid after
  // the cursor moves on.
  const node_ptr& shared_node() const noexcept { return path_.back().n; }
  // Moves to the next (previous) node of the same level; false (and unmoved) at
  // the end (beginning) of the level.
  result<bool> next_node();
  result<bool> prev_node();
  bool at_last_node() const noexcept;
  // The parent's entry that references the current node; nullopt at the root.
  std::optional<std::string_view> parent_ref() const;

 private:
  struct frame {
    node_ptr n;
    std::size_t i = 0;  // internal: child taken; target level: entry index
  };
  explicit cursor(node_source& src) : src_(&src) {}
  status descend(std::uint8_t level, bool leftmost);
  result<bool> step_node(bool forward);
  std::size_t index() const noexcept { return path_.back().i; }
  void settle() noexcept { valid_ = !before_begin_ && path_.back().i < node().entries().size(); }

  node_source* src_;
  std::vector<frame> path_;
  bool valid_ = false;
  bool before_begin_ = false;
};

}  // namespace magnetite::tree
