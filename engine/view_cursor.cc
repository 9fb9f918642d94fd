#include "engine/view_cursor.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tree/prolly_tree.h"

namespace magnetite {

result<view_cursor> view_cursor::open(const read_view& view, std::string_view from, std::string_view to,
                                      scan_direction dir) {
  std::vector<view_source> sources;
  sources.reserve(view.memtables().size() + 1);
  for (const auto& m : view.memtables())
    sources.push_back(view_source::of_memtable(*m.table, m.sequence, from, to, dir));
  tree::prolly_tree t(*view.store(), view.policy());
  bool forward = dir == scan_direction::forward;
  auto c = forward ? t.seek(view.root(), from) : to.empty() ? t.last(view.root()) : t.seek(view.root(), to);
  if (!c) return c.error();
  // Backward: seek() lands on the first entry >= to, or past the end of the
  // last node; last() may land past the end of an empty tree. The entry
  // before is where to start.
  if (!forward && (!to.empty() || !c->valid())) MAGNETITE_TRY(c->prev());
  sources.push_back(view_source::of_tree(std::move(*c), from, to, dir));
  return view_cursor(merging_cursor<view_source>(std::move(sources), dir));
}

}  // namespace magnetite
