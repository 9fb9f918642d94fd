#include "engine/sorted_run.h"

#include <vector>

#include "engine/view_cursor.h"
#include "tree/prolly_tree.h"

namespace magnetite {

namespace {

// Entries go to the tree in chunks of about this many bytes of keys and
// values: a fold of runs as large as the tree holds one chunk in memory,
// not the runs, and each chunk rewrites only the leaves of its own key
// range (and the path above them), so the chunks together rewrite each
// leaf about once.
constexpr std::size_t chunk_bytes = std::size_t{1} << 20;

// Applies the merge's entries (deletions kept) to `root` chunk by chunk:
// as a run's tagged values (`as_run`; every key also goes into `filter`)
// or as the tree's stored bytes and deletes.
result<hash128> apply_merge(tree::prolly_tree& t, hash128 root, merging_cursor<view_source>& merge, bool as_run,
                            key_filter* filter) {
  struct span_at {
    std::size_t key_at, key_size, value_at, value_size;
    bool deletion;
  };
  std::string bytes;
  std::vector<span_at> spans;
  std::vector<tree::edit_view> edits;
  for (;;) {
    MAGNETITE_TRY(merge.next());
    bool end = !merge.valid();
    if (!end) {
      std::string_view key = merge.key();
      const view_source& top = merge.top();
      if (filter) filter->add(key_filter::hash_of(key));
      span_at s{bytes.size(), key.size(), 0, 0, top.deletion()};
      bytes.append(key);
      s.value_at = bytes.size();
      if (as_run && !s.deletion) bytes.push_back(sorted_run::value_tag);
      if (!s.deletion) bytes.append(top.value());
      s.value_size = bytes.size() - s.value_at;
      spans.push_back(s);
    }
    if (spans.empty()) return root;
    if (end || bytes.size() >= chunk_bytes) {
      // `bytes` no longer grows: the edits may view it now.
      edits.clear();
      std::string_view all(bytes);
      for (const auto& s : spans) {
        tree::edit_view e{all.substr(s.key_at, s.key_size), all.substr(s.value_at, s.value_size)};
        if (s.deletion && !as_run) e.value.reset();
        edits.push_back(e);
      }
      auto next = t.apply(root, edits);
      if (!next) return next.error();
      root = *next;
      bytes.clear();
      spans.clear();
    }
    if (end) return root;
  }
}

}  // namespace

result<sorted_run::lookup> sorted_run::find(tree::node_sink& store, const tree::chunk_policy& policy,
                                            std::string_view tree_key, std::uint64_t key_hash, std::string& out) const {
  if (!filter_.may_contain(key_hash)) return lookup::absent;
  auto found = tree::prolly_tree(store, policy).get(root_, tree_key, out);
  if (!found) return found.error();
  if (!*found) return lookup::absent;
  if (deletion(out)) return lookup::deleted;
  out.erase(0, 1);
  return lookup::found;
}

result<run_ptr> write_run(tree::node_sink& store, const tree::chunk_policy& policy, const memtable& table) {
  tree::prolly_tree t(store, policy);
  auto empty = t.empty_root();
  if (!empty) return empty.error();
  std::vector<view_source> sources;
  sources.push_back(view_source::of_memtable(table, table.latest(), {}, {}, scan_direction::forward));
  merging_cursor<view_source> merge(std::move(sources), scan_direction::forward, equal_keys::newest_wins,
                                    deletions::keep);
  key_filter filter(static_cast<std::size_t>(table.entries()));
  auto root = apply_merge(t, *empty, merge, /*as_run=*/true, &filter);
  if (!root) return root.error();
  auto entries = t.count(*root);
  if (!entries) return entries.error();
  memtable::cursor last(table, table.latest());
  last.seek_to_last();
  std::string last_key = last.valid() ? std::string(last.key()) : std::string();
  return std::make_shared<const sorted_run>(*root, *entries, std::move(last_key), std::move(filter));
}

result<run_ptr> read_run(tree::node_sink& store, const tree::chunk_policy& policy, const hash128& root) {
  tree::prolly_tree t(store, policy);
  auto entries = t.count(root);
  if (!entries) return entries.error();
  key_filter filter(static_cast<std::size_t>(*entries));
  std::string last;
  MAGNETITE_TRY(t.scan(root, {}, {}, false, [&](const tree::entry_view& e) {
    filter.add(key_filter::hash_of(e.key));
    last = e.key;
    return true;
  }));
  return std::make_shared<const sorted_run>(root, *entries, std::move(last), std::move(filter));
}

result<hash128> fold_runs(tree::node_sink& store, const tree::chunk_policy& policy, const hash128& base,
                          const memtable* table, std::span<const run_ptr> runs) {
  tree::prolly_tree t(store, policy);
  std::vector<view_source> sources;
  if (table) sources.push_back(view_source::of_memtable(*table, table->latest(), {}, {}, scan_direction::forward));
  for (const auto& r : runs) {
    auto c = t.first(r->root());
    if (!c) return c.error();
    sources.push_back(view_source::of_tree(std::move(*c), {}, {}, scan_direction::forward, /*run=*/true));
  }
  merging_cursor<view_source> merge(std::move(sources), scan_direction::forward, equal_keys::newest_wins,
                                    deletions::keep);
  return apply_merge(t, base, merge, /*as_run=*/false, nullptr);
}

}  // namespace magnetite
