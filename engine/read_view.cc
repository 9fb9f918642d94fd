#include "engine/read_view.h"

#include <algorithm>

#include "engine/keyspace.h"
#include "engine/view_cursor.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"

namespace magnetite {

const layer_entry* layer::find(std::string_view key, std::uint64_t hash) const noexcept {
  if (!filter.may_contain(hash)) return nullptr;
  std::size_t i = lower_bound(key);
  return i != entries.size() && entries[i].key == key ? &entries[i] : nullptr;
}

std::size_t layer::lower_bound(std::string_view key) const noexcept {
  auto it = std::lower_bound(entries.begin(), entries.end(), key,
                             [](const layer_entry& e, std::string_view k) { return e.key < k; });
  return static_cast<std::size_t>(it - entries.begin());
}

namespace {
// Every one of the layer's keys, hashed again: a layer merges into the one
// below only while it is at least half that one's size (shard::commit_group),
// so a key is hashed O(log(writes since the checkpoint)) times.
void build_filter(layer& l) {
  l.filter = key_filter(l.entries.size());
  for (const auto& e : l.entries) l.filter.add(key_filter::hash_of(e.key));
}

}  // namespace

layer layer::of(const std::map<std::string, std::optional<std::string>, std::less<>>& staged) {
  std::size_t size = 0;
  for (const auto& [k, v] : staged) size += k.size() + (v ? v->size() : 0);
  auto block = std::make_shared<std::string>();
  block->reserve(size);
  for (const auto& [k, v] : staged) {
    block->append(k);
    if (v) block->append(*v);
  }
  layer out;
  out.entries.reserve(staged.size());
  const char* at = block->data();
  for (const auto& [k, v] : staged) {
    std::string_view key(at, k.size());
    at += k.size();
    std::optional<std::string_view> value;
    if (v) {
      value = std::string_view(at, v->size());
      at += v->size();
    }
    out.entries.push_back({key, value});
  }
  build_filter(out);
  out.bytes = block->capacity() + out.entries.capacity() * sizeof(layer_entry) + out.filter.bytes();
  out.blocks.push_back(std::move(block));
  return out;
}

namespace {
// `out` shares the blocks of `in` (after those it has) and counts its bytes.
void share_blocks(layer& out, const layer& in) {
  out.blocks.insert(out.blocks.end(), in.blocks.begin(), in.blocks.end());
  for (const auto& b : in.blocks) out.bytes += b->capacity();
}
}  // namespace

layer layer::merge(const layer& newer, const layer& older) {
  // Not a merging_cursor: this runs on the write path (a group's new layer
  // is merged into the newest while it is at least half its size), and with
  // exactly two sorted vectors a two-pointer loop does per entry only the one
  // key comparison; the cursor, made for any number of sources, also keeps
  // its sources ordered and reaches each entry through a source. merge_all,
  // which meets every layer at once, uses the cursor: one pass instead of one
  // per layer.
  layer out;
  out.entries.reserve(newer.entries.size() + older.entries.size());
  auto a = newer.entries.begin(), b = older.entries.begin();
  while (a != newer.entries.end() || b != older.entries.end()) {
    if (b == older.entries.end() || (a != newer.entries.end() && a->key <= b->key)) {
      if (b != older.entries.end() && b->key == a->key) ++b;
      out.entries.push_back(*a++);
    } else {
      out.entries.push_back(*b++);
    }
  }
  out.blocks.reserve(newer.blocks.size() + older.blocks.size());
  build_filter(out);
  out.bytes = out.entries.capacity() * sizeof(layer_entry) + out.filter.bytes();
  share_blocks(out, newer);
  share_blocks(out, older);
  return out;
}

std::shared_ptr<const layer> layer::merge_all(const std::vector<std::shared_ptr<const layer>>& newest_first) {
  if (newest_first.empty()) return std::make_shared<const layer>();
  if (newest_first.size() == 1) return newest_first.front();
  // One pass over all of them; the result is a layer, so it keeps the
  // deletions that decide a key (they hide the tree's entry).
  std::vector<view_source> sources;
  std::size_t entries = 0, blocks = 0;
  for (const auto& l : newest_first) {
    sources.push_back(view_source::of_layer(*l, 0, l->entries.size(), scan_direction::forward));
    entries += l->entries.size();
    blocks += l->blocks.size();
  }
  merging_cursor<view_source> m(std::move(sources), scan_direction::forward, equal_keys::newest_wins, deletions::keep);
  layer all;
  all.entries.reserve(entries);
  // A layer's steps never fail: next() is always ok here.
  while (m.next().is_ok() && m.valid()) {
    const view_source& s = m.top();
    all.entries.push_back({s.key(), s.deletion() ? std::nullopt : std::optional<std::string_view>(s.value())});
  }
  all.blocks.reserve(blocks);
  all.bytes = all.entries.capacity() * sizeof(layer_entry);
  for (const auto& l : newest_first) share_blocks(all, *l);
  return std::make_shared<const layer>(std::move(all));
}

read_view::read_view(std::shared_ptr<tree::node_store> store, tree::chunk_policy policy, hash128 root,
                     std::vector<std::shared_ptr<const layer>> layers, std::uint64_t sequence,
                     std::shared_ptr<const hash128> root_pin)
    : store_(std::move(store)),
      policy_(policy),
      root_(root),
      layers_(std::move(layers)),
      sequence_(sequence),
      root_pin_(std::move(root_pin)) {}

std::size_t read_view::layer_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& l : layers_) total += l->bytes;
  return total;
}

result<bool> read_view::find(std::string_view tree_key, std::string& out) const {
  std::uint64_t hash = key_filter::hash_of(tree_key);
  for (const auto& l : layers_) {
    if (const layer_entry* e = l->find(tree_key, hash)) {
      if (!e->value) return false;
      out = *e->value;
      return true;
    }
  }
  return tree::prolly_tree(*store_, policy_).get(root_, tree_key, out);
}

result<std::optional<std::string>> read_view::get(std::string_view user_key, std::uint64_t now_ns) const {
  std::string stored;
  auto found = find(keyspace::data_key(user_key), stored);
  if (!found) return found.error();
  if (!*found) return std::optional<std::string>();
  return ttl::live_value(stored, now_ns);
}

result<live_run> read_view::live_range(std::string_view from, std::string_view to, std::uint64_t now_ns,
                                       std::size_t limit, bool backward, std::size_t max_bytes) const {
  live_run out;
  std::size_t bytes = 0;
  status failure;
  auto take = [&](std::string_view tree_key, std::string_view stored) {
    std::string_view key = keyspace::user_key_of(tree_key);
    if (out.entries.size() == limit || (!out.entries.empty() && bytes >= max_bytes)) {
      // Backward, the rest lies below the key just past this one.
      out.resume = backward ? std::string(key) + '\0' : std::string(key);
      return false;
    }
    auto live = ttl::live_value(stored, now_ns);
    if (!live) {
      failure = live.error();
      return false;
    }
    if (!*live) return true;
    bytes += key.size() + (*live)->size();
    out.entries.emplace_back(std::string(key), std::move(**live));
    return true;
  };
  std::string lo = keyspace::data_key(from), hi = to.empty() ? keyspace::data_end() : keyspace::data_key(to);
  status s = backward ? scan_reverse(lo, hi, take) : scan(lo, hi, take);
  if (!s) return s;
  if (!failure) return failure;
  return out;
}

namespace {
status visit(result<view_cursor> c, const std::function<bool(std::string_view, std::string_view)>& fn) {
  if (!c) return c.error();
  for (;;) {
    MAGNETITE_TRY(c->next());
    if (!c->valid() || !fn(c->key(), c->value())) return status::ok();
  }
}
}  // namespace

status read_view::scan(std::string_view from, std::string_view to,
                       const std::function<bool(std::string_view, std::string_view)>& fn) const {
  return visit(view_cursor::open(*this, from, to, scan_direction::forward), fn);
}

status read_view::scan_reverse(std::string_view from, std::string_view to,
                               const std::function<bool(std::string_view, std::string_view)>& fn) const {
  return visit(view_cursor::open(*this, from, to, scan_direction::backward), fn);
}

}  // namespace magnetite
