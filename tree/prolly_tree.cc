#include "tree/prolly_tree.h"

#include <algorithm>
#include <array>
#include <map>

#include "core/limits.h"

namespace magnetite::tree {

namespace {

// How one entry of the parent level changes: the reference to the old node of
// that last key (if there was one) and to the new node (if there is one).
struct parent_change {
  std::optional<std::string> old_value;
  std::optional<std::string> new_value;
};
using parent_changes = std::map<std::string, parent_change>;

// Feeds entries of one level through the chunker, writing each node it closes
// and recording it as a new parent entry. It keeps views, not copies: an entry
// pushed must stay valid until its node is emitted. The caller's edits are;
// an old node's entries are while the node is held, and push() holds it.
class rechunker {
 public:
  rechunker(node_sink& store, const chunk_policy& policy, std::uint8_t level, parent_changes& out)
      : store_(store), chunker_(policy, level), level_(level), out_(out) {}

  status push(entry_view e, const node_ptr* from = nullptr) {
    std::size_t bytes = encoded_size(e);
    if (chunker_.closes_before(bytes)) MAGNETITE_TRY(emit());
    if (from && (held_.empty() || held_.back() != *from)) held_.push_back(*from);
    chunk_.push_back(e);
    if (chunker_.add(e.key, bytes)) MAGNETITE_TRY(emit());
    return status::ok();
  }

  status emit() {
    if (chunk_.empty()) return status::ok();
    node n{level_, std::span<const entry_view>(chunk_)};
    chunk_.clear();
    held_.clear();
    chunker_.reset();
    auto h = store_.write(n);
    if (!h) return h.error();
    out_[std::string(n.last_key())].new_value = child_ref{*h, n.count()}.encode();
    return status::ok();
  }

  bool empty() const noexcept { return chunk_.empty(); }
  bool closes_before(std::size_t bytes) const noexcept { return chunker_.closes_before(bytes); }

 private:
  node_sink& store_;
  chunker chunker_;
  std::uint8_t level_;
  parent_changes& out_;
  std::vector<entry_view> chunk_;
  std::vector<node_ptr> held_;  // the old nodes chunk_ views entries of
};

// Applies sorted edits to the entries of `level` and records, in `out`, how the
// parent level's entries change. For each run of edits it starts at the node
// before the first affected one (whose end may depend on the next node's first
// entry), and stops at the start of an old node where the new chunking has just
// closed a node too and no edit remains inside that old node: from there on the
// old nodes are unchanged.
status apply_level(node_sink& store, const chunk_policy& policy, const node_ptr& root, std::uint8_t level,
                   std::span<const edit_view> edits, parent_changes& out) {
  rechunker rc(store, policy, level, out);
  std::size_t i = 0;
  while (i < edits.size()) {
    auto c = cursor::seek(store, root, level, edits[i].key);
    if (!c) return c.error();
    if (auto moved = c->prev_node(); !moved) return moved.error();
    for (bool first = true;; first = false) {
      const node& x = c->node();
      // Edits belong to the node that covers their key; past the last key of the
      // level, to the last node.
      bool last_node = c->at_last_node();
      auto edit_here = [&] { return i < edits.size() && (last_node || edits[i].key <= x.last_key()); };
      if (!first && !edit_here()) {
        if (rc.empty()) break;
        if (rc.closes_before(encoded_size(x.entries().front()))) {
          MAGNETITE_TRY(rc.emit());
          break;
        }
      }
      if (!x.entries().empty()) {
        auto ref = c->parent_ref();
        out[std::string(x.last_key())].old_value = ref ? std::optional<std::string>(*ref) : std::optional<std::string>("");
      }
      std::size_t j = 0;
      while (j < x.entries().size() || edit_here()) {
        if (edit_here() && (j == x.entries().size() || edits[i].key <= x.entries()[j].key)) {
          if (j < x.entries().size() && edits[i].key == x.entries()[j].key) ++j;
          if (edits[i].value) MAGNETITE_TRY(rc.push({edits[i].key, *edits[i].value}));
          ++i;
        } else {
          MAGNETITE_TRY(rc.push(x.entries()[j++], &c->shared_node()));
        }
      }
      auto moved = c->next_node();
      if (!moved) return moved.error();
      if (!*moved) break;
    }
    MAGNETITE_TRY(rc.emit());  // the end of the level closes the last node
  }
  return status::ok();
}

std::optional<std::string_view> value_of(const entry& e) { return e.value; }
std::optional<std::string_view> value_of(const edit_view& e) { return e.value; }

// Keys and values within the limits, keys strictly increasing.
template <class T>
status check_sorted(std::span<const T> items, std::string_view what) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    MAGNETITE_TRY(limits::check_key(items[i].key));
    if (auto v = value_of(items[i])) MAGNETITE_TRY(limits::check_value(*v));
    if (i > 0 && !(items[i - 1].key < items[i].key))
      return status::invalid_argument(fmt::format("{} are not strictly sorted at index {}", what, i));
  }
  return status::ok();
}

}  // namespace

// Upper levels are few and read by every lookup: each thread keeps the last
// internal nodes it read in a small direct-mapped table, so a point read asks
// the store (and its shared, locked cache) only for the leaf. Entries are keyed
// by the store's identity and epoch as well as the hash, so the table never
// answers for a store that does not hold the node (another store, or one whose
// gc dropped it). It holds at most `upper_slots` nodes per thread, each at most
// a node's maximum size; they are released as they are replaced.
namespace {
constexpr std::size_t upper_slots = 1024;

struct upper_slot {
  std::uint64_t source = 0;
  std::uint64_t epoch = 0;
  hash128 hash;
  node_ptr n;
  node_index ix;  // n's: a lookup reads the index without the node object
};

std::array<upper_slot, upper_slots>& thread_upper_cache() {
  thread_local std::array<upper_slot, upper_slots> c;
  return c;
}


// h's slot in this thread's table, and whether it holds h for this store now.
std::pair<upper_slot*, bool> upper_lookup(const node_source& store, const hash128& h) {
  upper_slot& u = thread_upper_cache()[static_cast<std::size_t>(h.low) & (upper_slots - 1)];
  return {&u, u.n && u.hash == h && u.source == store.source_id() && u.epoch == store.epoch()};
}
}  // namespace

result<node_ptr> prolly_tree::load(const hash128& h) {
  auto [u, hit] = upper_lookup(store_, h);
  if (hit) return u->n;
  auto n = store_.read(h);
  if (n && !(*n)->is_leaf()) *u = {store_.source_id(), store_.epoch(), h, *n, (*n)->search_index()};
  return n;
}

// The index of node h, taken from this thread's table of upper nodes when it is
// there (no reference count touched). The view stays valid until the next call
// on this thread: `hold` keeps a node that the table does not (a leaf).
result<node_index> prolly_tree::load_index(const hash128& h, node_ptr& hold) {
  if (auto [u, hit] = upper_lookup(store_, h); hit) return u->ix;
  auto n = load(h);
  if (!n) return n.error();
  hold = std::move(*n);
  return hold->search_index();
}

result<hash128> prolly_tree::empty_root() { return store_.write(node{}); }

result<std::vector<entry>> prolly_tree::build_level(std::uint8_t level, std::span<const entry> entries) {
  parent_changes made;
  rechunker rc(store_, policy_, level, made);
  for (const auto& e : entries) MAGNETITE_TRY(rc.push({e.key, e.value}));
  MAGNETITE_TRY(rc.emit());
  std::vector<entry> refs;
  refs.reserve(made.size());
  for (auto& [key, change] : made) refs.push_back({key, std::move(*change.new_value)});
  return refs;
}

result<hash128> prolly_tree::build_up(std::uint8_t level, std::vector<entry> entries) {
  for (;; ++level) {
    auto refs = build_level(level, entries);
    if (!refs) return refs.error();
    if (refs->size() == 1) {
      auto ref = child_ref::decode(refs->front().value);
      if (!ref) return ref.error();
      return ref->hash;
    }
    entries = std::move(*refs);
  }
}

result<hash128> prolly_tree::build(std::span<const entry> sorted) {
  MAGNETITE_TRY(policy_.validate());
  MAGNETITE_TRY(check_sorted(sorted, "entries"));
  if (sorted.empty()) return empty_root();
  return build_up(0, std::vector<entry>(sorted.begin(), sorted.end()));
}

result<hash128> prolly_tree::apply(const hash128& root_hash, std::span<const edit> sorted_edits) {
  std::vector<edit_view> views;
  views.reserve(sorted_edits.size());
  for (const auto& e : sorted_edits) views.push_back({e.key, e.value});
  return apply(root_hash, views);
}

result<hash128> prolly_tree::apply(const hash128& root_hash, std::span<const edit_view> sorted_edits) {
  MAGNETITE_TRY(policy_.validate());
  MAGNETITE_TRY(check_sorted(sorted_edits, "edits"));
  if (sorted_edits.empty()) return root_hash;
  auto root = load(root_hash);
  if (!root) return root.error();
  // Above the leaves, a level's edits view the entries of the changes made
  // below it, kept in `below` until that level is written.
  std::span<const edit_view> level_edits = sorted_edits;
  parent_changes below;
  std::vector<edit_view> upper;
  for (std::uint8_t level = 0;; ++level) {
    parent_changes changes;
    MAGNETITE_TRY(apply_level(store_, policy_, *root, level, level_edits, changes));
    if (level == (*root)->level()) {
      // The root's level had one node; it now has these.
      std::vector<entry> tops;
      for (auto& [key, change] : changes)
        if (change.new_value) tops.push_back({key, std::move(*change.new_value)});
      if (tops.empty()) return empty_root();
      if (tops.size() > 1) return build_up(static_cast<std::uint8_t>(level + 1), std::move(tops));
      auto ref = child_ref::decode(tops.front().value);
      if (!ref) return ref.error();
      // A root with a single child is that child: a bulk build stops at the
      // first level with one node.
      hash128 h = ref->hash;
      for (;;) {
        auto n = load(h);
        if (!n) return n.error();
        if ((*n)->is_leaf() || (*n)->entries().size() != 1) return h;
        auto only = child_ref::decode((*n)->entries().front().value);
        if (!only) return only.error();
        h = only->hash;
      }
    }
    upper.clear();
    for (const auto& [key, change] : changes)
      if (change.new_value != change.old_value) upper.push_back({key, change.new_value});
    below = std::move(changes);  // map nodes keep their place: the views stay valid
    if (upper.empty()) return root_hash;  // every node came out as it was
    level_edits = upper;
  }
}

result<bool> prolly_tree::get(const hash128& root, std::string_view key, std::string& value) {
  node_ptr hold;
  auto ix = load_index(root, hold);
  if (!ix) return ix.error();
  if (ix->level() == 0) return search_leaf(*ix, root, key, value);
  for (;;) {
    std::size_t i = ix->lower_bound(key);
    if (i == ix->size()) return false;
    // Only the hash is needed: decode() validated the reference when the node
    // was read.
    hash128 child = hash128::from_bytes(reinterpret_cast<const std::uint8_t*>(ix->entry(i).value.data()));
    std::uint8_t level = ix->level();
    if (level == 1) return store_.leaf_get(child, key, value);
    ix = load_index(child, hold);
    if (!ix) return ix.error();
    if (ix->level() != level - 1)
      return status::corruption(
          fmt::format("tree node {} is at level {} below a node at level {}", child, ix->level(), level));
  }
}

result<std::optional<std::string>> prolly_tree::get(const hash128& root, std::string_view key) {
  std::string value;
  auto found = get(root, key, value);
  if (!found) return found.error();
  if (!*found) return std::optional<std::string>{};
  return std::optional<std::string>(std::move(value));
}

result<std::uint64_t> prolly_tree::count(const hash128& root) {
  auto n = load(root);
  if (!n) return n.error();
  return (*n)->count();
}

result<std::uint64_t> prolly_tree::rank(const hash128& root, std::string_view key) {
  auto n = load(root);
  if (!n) return n.error();
  node_ptr cur = std::move(*n);
  std::uint64_t below = 0;
  while (!cur->is_leaf()) {
    std::size_t i = cur->lower_bound(key);
    for (std::size_t j = 0; j < i; ++j) {
      auto ref = child_ref::decode(cur->entries()[j].value);
      if (!ref) return ref.error();
      below += ref->count;
    }
    if (i == cur->entries().size()) return below;
    auto ref = child_ref::decode(cur->entries()[i].value);
    if (!ref) return ref.error();
    auto child = load(ref->hash);
    if (!child) return child.error();
    cur = std::move(*child);
  }
  return below + cur->lower_bound(key);
}

result<std::uint64_t> prolly_tree::count_range(const hash128& root, std::string_view lo, std::string_view hi) {
  auto a = rank(root, lo);
  if (!a) return a;
  auto b = rank(root, hi);
  if (!b) return b;
  return *b > *a ? *b - *a : 0;
}

result<int> prolly_tree::depth(const hash128& root) {
  auto n = load(root);
  if (!n) return n.error();
  return (*n)->level() + 1;
}

result<cursor> prolly_tree::seek(const hash128& root, std::string_view key) {
  auto n = load(root);
  if (!n) return n.error();
  return cursor::seek(store_, *n, 0, key);
}

result<cursor> prolly_tree::first(const hash128& root) {
  auto n = load(root);
  if (!n) return n.error();
  return cursor::first(store_, *n);
}

result<cursor> prolly_tree::last(const hash128& root) {
  auto n = load(root);
  if (!n) return n.error();
  return cursor::last(store_, *n);
}

status prolly_tree::scan(const hash128& root, std::string_view lo, std::string_view hi, bool reverse,
                         const std::function<bool(const entry_view&)>& fn) {
  if (!reverse) {
    auto c = seek(root, lo);
    if (!c) return c.error();
    while (c->valid() && (hi.empty() || c->current().key < hi)) {
      if (!fn(c->current())) return status::ok();
      MAGNETITE_TRY(c->next());
    }
    return status::ok();
  }
  auto c = hi.empty() ? last(root) : seek(root, hi);
  if (!c) return c.error();
  if (!hi.empty()) MAGNETITE_TRY(c->prev());  // the last entry below hi
  while (c->valid() && c->current().key >= lo) {
    if (!fn(c->current())) return status::ok();
    MAGNETITE_TRY(c->prev());
  }
  return status::ok();
}

}  // namespace magnetite::tree
