// view_cursor: the entries of one read_view in [from, to), forward or
// backward, pulled one at a time: the view's memtables and sorted runs
// merged over its tree by a merging_cursor, newest first, a deletion hiding
// the key in older memtables, runs and the tree and then skipped. read_view::scan and
// scan_reverse are loops over it; state/ merges it with a handle's buffered
// writes.
//
// Contract: entries are read in place (key() and value() view a memtable's
// arena or the tree's node, valid until the next next()); the cursor holds
// the tree's nodes on its path, not the view: the caller keeps the view (and
// so its memtables) alive, and the bytes of `from` and `to`, which the
// cursor views (no copy: a scan of a few entries should not pay for one).
// `to` empty: no upper bound.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "engine/merging_cursor.h"
#include "engine/read_view.h"
#include "tree/cursor.h"

namespace magnetite {

// One sorted source of a view, for merging_cursor: a memtable's entries at
// the view's sequence, or the entries of a tree (the view's, or a sorted
// run's, whose values are tagged: sorted_run.h) from a cursor, while they
// stay in range.
class view_source {
 public:
  // The entries of `m` visible at `sequence` in [from, to) (to empty: no
  // bound), in `dir`'s order. The bytes of the bound it stops at must
  // outlive the source.
  static view_source of_memtable(const memtable& m, std::uint64_t sequence, std::string_view from, std::string_view to,
                                 scan_direction dir) {
    view_source s;
    s.stride_ = dir == scan_direction::forward ? 1 : -1;
    s.bound_ = s.stride_ > 0 ? to : from;
    s.table_.emplace(m, sequence);
    if (s.stride_ > 0)
      s.table_->seek(from);
    else if (to.empty())
      s.table_->seek_to_last();
    else
      s.table_->seek_before(to);
    s.settle_table();
    return s;
  }
  // A tree's entries of [from, to) (to empty: no bound) from `c` on, in
  // `dir`'s order. Forward, `c` is on the first entry >= from; backward, on
  // the entry to start from, which counts only if it is below `to`. The
  // bytes of the bound it stops at must outlive the source. `run`: the tree
  // is a sorted run's, its values tagged (deletions are entries).
  static view_source of_tree(tree::cursor c, std::string_view from, std::string_view to, scan_direction dir,
                             bool run = false) {
    view_source s;
    s.run_ = run;
    s.stride_ = dir == scan_direction::forward ? 1 : -1;
    s.bound_ = s.stride_ > 0 ? to : from;
    s.tree_.emplace(std::move(c));
    s.settle_tree();
    // Stepping backward only lowers the key: `to` needs checking once.
    if (s.stride_ < 0 && s.valid_ && !to.empty() && !(s.current_.key < to)) s.valid_ = false;
    return s;
  }

  bool valid() const noexcept { return valid_; }
  std::string_view key() const { return tree_ ? current_.key : table_->key(); }
  bool deletion() const noexcept { return tree_ ? run_ && sorted_run::deletion(current_.value) : table_->deletion(); }
  // The stored bytes (not for a deletion).
  std::string_view value() const {
    if (!tree_) return table_->value();
    return run_ ? sorted_run::stored(current_.value) : current_.value;
  }
  status step() {
    if (!tree_) {
      stride_ > 0 ? table_->next() : table_->prev();
      settle_table();
      return status::ok();
    }
    MAGNETITE_TRY(stride_ > 0 ? tree_->next() : tree_->prev());
    settle_tree();
    return status::ok();
  }

 private:
  view_source() = default;
  bool in_bound(std::string_view key) const noexcept {
    return stride_ > 0 ? bound_.empty() || key < bound_ : key >= bound_;
  }
  void settle_table() { valid_ = table_->valid() && in_bound(table_->key()); }
  // prev() from the first entry stays "before the beginning": not valid.
  // The entry is decoded once here, not at each look.
  void settle_tree() {
    valid_ = tree_->valid();
    if (!valid_) return;
    current_ = tree_->current();
    valid_ = in_bound(current_.key);
  }

  std::ptrdiff_t stride_ = 1;
  std::string_view bound_;  // the caller's bytes
  bool valid_ = false;
  // A memtable: its cursor.
  std::optional<memtable::cursor> table_;
  // A tree: its cursor, and the entry it is on.
  std::optional<tree::cursor> tree_;
  tree::entry_view current_;
  bool run_ = false;
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
