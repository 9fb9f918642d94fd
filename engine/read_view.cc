#include "engine/read_view.h"

#include <algorithm>

#include "engine/keyspace.h"
#include "engine/view_cursor.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"

namespace magnetite {

read_view::read_view(std::shared_ptr<tree::node_store> store, tree::chunk_policy policy, hash128 root,
                     std::vector<memtable_ref> memtables, std::uint64_t sequence,
                     std::shared_ptr<const hash128> root_pin, std::vector<run_ptr> runs)
    : store_(std::move(store)),
      policy_(policy),
      root_(root),
      memtables_(std::move(memtables)),
      sequence_(sequence),
      root_pin_(std::move(root_pin)),
      runs_(std::move(runs)) {}

bool read_view::holds_writes() const noexcept {
  for (const auto& m : memtables_)
    if (m.sequence > 0) return true;
  return false;
}

result<bool> read_view::find(std::string_view tree_key, std::string& out) const {
  for (const auto& m : memtables_) {
    auto e = m.table->find(tree_key, m.sequence);
    if (!e.found) continue;
    if (!e.value) return false;
    out = *e.value;
    return true;
  }
  return find_below_memtables(tree_key, out);
}

result<bool> read_view::find_below_memtables(std::string_view tree_key, std::string& out) const {
  if (!runs_.empty()) {
    std::uint64_t h = key_filter::hash_of(tree_key);
    for (const auto& r : runs_) {
      auto found = r->find(*store_, policy_, tree_key, h, out);
      if (!found) return found.error();
      if (*found != sorted_run::lookup::absent) return *found == sorted_run::lookup::found;
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
