#include "engine/view_cursor.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tree/prolly_tree.h"

namespace magnetite {

namespace {

// A cursor of the tree `root` where a scan of [from, to) in `dir` starts.
result<tree::cursor> start_of(tree::prolly_tree& t, const hash128& root, std::string_view from, std::string_view to,
                              scan_direction dir) {
  bool forward = dir == scan_direction::forward;
  auto c = forward ? t.seek(root, from) : to.empty() ? t.last(root) : t.seek(root, to);
  if (!c) return c.error();
  // Backward: seek() lands on the first entry >= to, or past the end of the
  // last node; last() may land past the end of an empty tree. The entry
  // before is where to start.
  if (!forward && (!to.empty() || !c->valid())) MAGNETITE_TRY(c->prev());
  return c;
}

}  // namespace

result<view_cursor> view_cursor::open(const read_view& view, std::string_view from, std::string_view to,
                                      scan_direction dir) {
  std::vector<view_source> sources;
  sources.reserve(view.memtables().size() + view.runs().size() + 1);
  for (const auto& m : view.memtables())
    sources.push_back(view_source::of_memtable(*m.table, m.sequence, from, to, dir));
  tree::prolly_tree t(*view.store(), view.policy());
  for (const auto& r : view.runs()) {
    auto c = start_of(t, r->root(), from, to, dir);
    if (!c) return c.error();
    sources.push_back(view_source::of_tree(std::move(*c), from, to, dir, /*run=*/true));
  }
  auto c = start_of(t, view.root(), from, to, dir);
  if (!c) return c.error();
  sources.push_back(view_source::of_tree(std::move(*c), from, to, dir));
  return view_cursor(merging_cursor<view_source>(std::move(sources), dir));
}

}  // namespace magnetite
