#include "tree/merge.h"

#include <vector>

#include "tree/diff.h"

namespace magnetite::tree {

namespace {
result<std::vector<diff_entry>> changes(node_source& src, const hash128& from, const hash128& to) {
  std::vector<diff_entry> out;
  MAGNETITE_TRY(diff(src, from, to, [&](const diff_entry& d) {
    out.push_back(d);
    return true;
  }));
  return out;
}
}  // namespace

result<hash128> merge(prolly_tree& tree, const hash128& base, const hash128& ours, const hash128& theirs,
                      const merge_resolver& resolve) {
  if (ours == theirs || theirs == base) return ours;
  if (ours == base) return theirs;
  auto mine = changes(tree.store(), base, ours);
  if (!mine) return mine.error();
  auto other = changes(tree.store(), base, theirs);
  if (!other) return other.error();

  std::vector<edit> edits;  // applied to ours
  std::size_t i = 0, j = 0;
  while (j < other->size()) {
    const diff_entry& t = (*other)[j];
    while (i < mine->size() && (*mine)[i].key < t.key) ++i;  // ours-only: already in ours
    if (i < mine->size() && (*mine)[i].key == t.key) {
      const diff_entry& o = (*mine)[i];
      if (o.new_value != t.new_value) {
        auto v = resolve(t.key, t.old_value, o.new_value, t.new_value);
        if (!v) return v.error();
        if (*v != o.new_value) edits.push_back({t.key, *v});
      }
      ++i;
    } else {
      edits.push_back({t.key, t.new_value});  // theirs-only
    }
    ++j;
  }
  return tree.apply(ours, edits);
}

}  // namespace magnetite::tree
