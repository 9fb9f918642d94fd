#include "engine/read_view.h"

#include <algorithm>

#include "engine/keyspace.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"

namespace magnetite {

const layer_entry* layer::find(std::string_view key) const noexcept {
  auto it = std::lower_bound(entries.begin(), entries.end(), key,
                             [](const layer_entry& e, std::string_view k) { return e.key < k; });
  return it != entries.end() && it->key == key ? &*it : nullptr;
}

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
  out.bytes = block->capacity() + out.entries.capacity() * sizeof(layer_entry);
  out.blocks.push_back(std::move(block));
  return out;
}

layer layer::merge(const layer& newer, const layer& older) {
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
  out.blocks.insert(out.blocks.end(), newer.blocks.begin(), newer.blocks.end());
  out.blocks.insert(out.blocks.end(), older.blocks.begin(), older.blocks.end());
  out.bytes = out.entries.capacity() * sizeof(layer_entry);
  for (const auto& b : out.blocks) out.bytes += b->capacity();
  return out;
}

std::shared_ptr<const layer> layer::merge_all(const std::vector<std::shared_ptr<const layer>>& newest_first) {
  if (newest_first.empty()) return std::make_shared<const layer>();
  if (newest_first.size() == 1) return newest_first.front();
  layer all = merge(*newest_first[0], *newest_first[1]);
  for (std::size_t i = 2; i < newest_first.size(); ++i) all = merge(all, *newest_first[i]);
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
  for (const auto& l : layers_) {
    if (const layer_entry* e = l->find(tree_key)) {
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

status read_view::scan(std::string_view from, std::string_view to,
                       const std::function<bool(std::string_view, std::string_view)>& fn) const {
  // A k-way merge: one position in each layer and a cursor in the tree; at each
  // step the smallest key wins, and among equal keys the newest source.
  struct position {
    const layer* l;
    std::size_t i;
  };
  std::vector<position> pos;
  for (const auto& l : layers_) {
    auto it = std::lower_bound(l->entries.begin(), l->entries.end(), from,
                               [](const layer_entry& e, std::string_view k) { return e.key < k; });
    pos.push_back({l.get(), static_cast<std::size_t>(it - l->entries.begin())});
  }
  tree::prolly_tree t(*store_, policy_);
  auto c = t.seek(root_, from);
  if (!c) return c.error();
  auto in_range = [&](std::string_view k) { return to.empty() || k < to; };
  for (;;) {
    std::optional<std::string_view> key;
    for (const auto& p : pos)
      if (p.i < p.l->entries.size()) {
        std::string_view k = p.l->entries[p.i].key;
        if (!key || k < *key) key = k;
      }
    if (c->valid() && (!key || c->current().key < *key)) key = c->current().key;
    if (!key || !in_range(*key)) return status::ok();
    // The newest source holding the key decides; every source steps past it.
    std::optional<std::optional<std::string_view>> decided;
    for (auto& p : pos)
      if (p.i < p.l->entries.size() && p.l->entries[p.i].key == *key) {
        if (!decided) {
          const auto& v = p.l->entries[p.i].value;
          decided = v ? std::optional<std::string_view>(*v) : std::nullopt;
        }
      }
    if (!decided && c->valid() && c->current().key == *key) decided = c->current().value;
    // Copy the key: stepping the sources below may move what it views.
    std::string k(*key);
    bool go_on = true;
    if (decided && *decided) go_on = fn(k, **decided);
    if (!go_on) return status::ok();
    for (auto& p : pos)
      if (p.i < p.l->entries.size() && p.l->entries[p.i].key == k) ++p.i;
    if (c->valid() && c->current().key == k) MAGNETITE_TRY(c->next());
  }
}

status read_view::scan_reverse(std::string_view from, std::string_view to,
                               const std::function<bool(std::string_view, std::string_view)>& fn) const {
  // scan()'s merge run backward: each layer's position is one past the entry
  // it offers next (0: exhausted); the tree cursor sits on the last entry < to.
  struct position {
    const layer* l;
    std::size_t i;
  };
  std::vector<position> pos;
  for (const auto& l : layers_) {
    auto it = to.empty() ? l->entries.end()
                         : std::lower_bound(l->entries.begin(), l->entries.end(), to,
                                            [](const layer_entry& e, std::string_view k) { return e.key < k; });
    pos.push_back({l.get(), static_cast<std::size_t>(it - l->entries.begin())});
  }
  tree::prolly_tree t(*store_, policy_);
  auto c = to.empty() ? t.last(root_) : t.seek(root_, to);
  if (!c) return c.error();
  if (!to.empty() || !c->valid()) MAGNETITE_TRY(c->prev());
  // seek() may land past the end of an empty tree or before `to`'s node: only
  // an entry below `to` counts.
  auto tree_ok = [&] { return c->valid() && (to.empty() || c->current().key < to); };
  for (;;) {
    std::optional<std::string_view> key;
    for (const auto& p : pos)
      if (p.i > 0) {
        std::string_view k = p.l->entries[p.i - 1].key;
        if (!key || k > *key) key = k;
      }
    if (tree_ok() && (!key || c->current().key > *key)) key = c->current().key;
    if (!key || *key < from) return status::ok();
    std::optional<std::optional<std::string_view>> decided;
    for (auto& p : pos)
      if (p.i > 0 && p.l->entries[p.i - 1].key == *key && !decided) {
        const auto& v = p.l->entries[p.i - 1].value;
        decided = v ? std::optional<std::string_view>(*v) : std::nullopt;
      }
    if (!decided && tree_ok() && c->current().key == *key) decided = c->current().value;
    std::string k(*key);
    if (decided && *decided && !fn(k, **decided)) return status::ok();
    for (auto& p : pos)
      if (p.i > 0 && p.l->entries[p.i - 1].key == k) --p.i;
    if (tree_ok() && c->current().key == k) {
      MAGNETITE_TRY(c->prev());
      // prev() from the first entry stays "before the beginning": not valid.
    }
  }
}

}  // namespace magnetite
