// view_cursor: the entries of one read_view in [from, to), forward or
// backward, pulled one at a time: the view's layers merged over its tree by a
// merging_cursor, newest first, a layer's deletion hiding the key in older
// layers and in the tree and then skipped. read_view::scan and scan_reverse
// are loops over it; state/ merges it with a handle's buffered writes.
//
// Contract: entries are read in place (key() and value() view the layer's
// block or the tree's node, valid until the next next()); the cursor holds
// the tree's nodes on its path, not the view: the caller keeps the view (and
// so the layers) alive, and the bytes of `from` and `to`, which the cursor
// views (no copy: a scan of a few entries should not pay for one). `to`
// empty: no upper bound.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "engine/merging_cursor.h"
#include "engine/read_view.h"
#include "tree/cursor.h"

namespace magnetite {

// One sorted source of a view, for merging_cursor: a range of a layer's
// entries, or the tree's entries from a cursor while they stay in range.
class view_source {
 public:
  // Entries [lo, hi) of `l` (hi >= lo), in `dir`'s order.
  static view_source of_layer(const layer& l, std::size_t lo, std::size_t hi, scan_direction dir) {
    view_source s;
    s.entries_ = l.entries.data();
    bool forward = dir == scan_direction::forward;
    s.at_ = forward ? static_cast<std::ptrdiff_t>(lo) : static_cast<std::ptrdiff_t>(hi) - 1;
    s.end_ = forward ? static_cast<std::ptrdiff_t>(hi) : static_cast<std::ptrdiff_t>(lo) - 1;
    s.stride_ = forward ? 1 : -1;
    return s;
  }
  // The tree's entries of [from, to) (to empty: no bound) from `c` on, in
  // `dir`'s order. Forward, `c` is on the first entry >= from; backward, on
  // the entry to start from, which counts only if it is below `to`. The
  // bytes of the bound it stops at must outlive the source.
  static view_source of_tree(tree::cursor c, std::string_view from, std::string_view to, scan_direction dir) {
    view_source s;
    s.stride_ = dir == scan_direction::forward ? 1 : -1;
    s.bound_ = s.stride_ > 0 ? to : from;
    s.tree_.emplace(std::move(c));
    s.settle_tree();
    // Stepping backward only lowers the key: `to` needs checking once.
    if (s.stride_ < 0 && s.tree_valid_ && !to.empty() && !(s.current_.key < to)) s.tree_valid_ = false;
    return s;
  }

  bool valid() const noexcept { return tree_ ? tree_valid_ : at_ != end_; }
  std::string_view key() const { return tree_ ? current_.key : entries_[at_].key; }
  bool deletion() const noexcept { return !tree_ && !entries_[at_].value; }
  // The stored bytes (not for a deletion).
  std::string_view value() const { return tree_ ? current_.value : *entries_[at_].value; }
  status step() {
    if (!tree_) {
      at_ += stride_;
      return status::ok();
    }
    MAGNETITE_TRY(stride_ > 0 ? tree_->next() : tree_->prev());
    settle_tree();
    return status::ok();
  }

 private:
  view_source() = default;
  // prev() from the first entry stays "before the beginning": not valid.
  // The entry is decoded once here, not at each look.
  void settle_tree() {
    tree_valid_ = tree_->valid();
    if (!tree_valid_) return;
    current_ = tree_->current();
    tree_valid_ = stride_ > 0 ? bound_.empty() || current_.key < bound_ : current_.key >= bound_;
  }

  // A layer: entries_[at_] is the entry while at_ != end_.
  const layer_entry* entries_ = nullptr;
  std::ptrdiff_t at_ = 0, end_ = 0, stride_ = 1;
  // The tree: its cursor, the entry it is on, and the bound it stops at (the
  // caller's bytes).
  std::optional<tree::cursor> tree_;
  tree::entry_view current_;
  std::string_view bound_;
  bool tree_valid_ = false;
};

class view_cursor {
 public:
  static result<view_cursor> open(const read_view& view, std::string_view from, std::string_view to,
                                  scan_direction dir);

  // Moves to the next entry (the first, on a new cursor); valid() false past
  // the last.
  status next() { return merge_.next(); }
  bool valid() const noexcept { return merge_.valid(); }
  std::string_view key() const { return merge_.key(); }
  std::string_view value() const { return merge_.top().value(); }

 private:
  explicit view_cursor(merging_cursor<view_source> merge) : merge_(std::move(merge)) {}
  merging_cursor<view_source> merge_;
};

}  // namespace magnetite
