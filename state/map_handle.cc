// A map: items under string keys, in key order; a buffered clear hides every
// entry the view holds.
#include "magnetite/state/keyed_state.h"

#include <algorithm>

#include <fmt/format.h>

#include "state/collection.h"
#include "state/errors.h"
#include "state/state_reader.h"

namespace magnetite::state {

namespace detail {

result<std::optional<item>> collection::map_get(const state_view* pinned, std::string_view k) const {
  MAGNETITE_TRY(usable());
  std::string key = entry_key(k);
  MAGNETITE_TRY(check_key_size(key.size()));
  if (auto it = pending_.find(key); it != pending_.end()) return it->second;
  if (cleared_) return std::optional<item>();
  if (pinned) return read(*pinned, key);
  auto v = view();
  if (!v) return v.error();
  return read(**v, key);
}

result<bool> collection::map_contains(std::string_view k) const {
  MAGNETITE_TRY(usable());
  std::string key = entry_key(k);
  MAGNETITE_TRY(check_key_size(key.size()));
  if (auto it = pending_.find(key); it != pending_.end()) return it->second.has_value();
  if (cleared_) return false;
  auto v = view();
  if (!v) return v.error();
  auto live = (*v)->read(key);
  if (!live) return live.error();
  if (!*live) return false;
  auto found = state_value_of(**live, describe());
  if (!found) return found.error();
  return true;
}

status collection::map_put(std::string_view k, std::optional<item> v) {
  MAGNETITE_TRY(usable());
  std::string key = entry_key(k);
  MAGNETITE_TRY(check_key_size(key.size()));
  if (v) MAGNETITE_TRY(check_item(*v, "remove(key)"));
  pending_[std::move(key)] = std::move(v);
  keep_buffer();
  return status::ok();
}

status collection::map_clear() {
  MAGNETITE_TRY(usable());
  pending_.clear();
  cleared_ = true;
  keep_buffer();
  return status::ok();
}

result<std::unique_ptr<merged_range>> collection::map_range(const scan_options& o) const {
  MAGNETITE_TRY(usable());
  if (o.from && o.after) return mistake(fmt::format("{}: a scan takes `from` or `after`, not both", describe()));
  std::string lo = key_, hi = prefix_successor(key_);
  auto raise = [&](std::string k) { lo = std::max(lo, std::move(k)); };
  auto lower = [&](std::string k) { hi = std::min(hi, std::move(k)); };
  if (o.prefix) {
    std::string p = key_ + open_component(*o.prefix);
    lower(prefix_successor(p));
    raise(std::move(p));
  }
  bool forward = o.dir == direction::forward;
  if (o.from) forward ? raise(entry_key(*o.from)) : lower(entry_key(*o.from) + '\0');
  if (o.after) forward ? raise(entry_key(*o.after) + '\0') : lower(entry_key(*o.after));
  if (o.to) forward ? lower(entry_key(*o.to)) : raise(entry_key(*o.to) + '\0');
  auto v = view();
  if (!v) return v.error();
  return std::make_unique<merged_range>(*v, pending_, cleared_, std::move(lo), std::move(hi), o.dir, o.limit,
                                        describe());
}

status collection::collect_clear(std::vector<batch_write>& writes) const {
  // Every live entry the shard holds now; an expired one stays expired.
  auto v = view();
  if (!v) return v.error();
  std::string from = key_, to = prefix_successor(key_);
  for (;;) {
    auto run = (*v)->read_range(from, to, 1024);
    if (!run) return run.error();
    for (auto& [k, live] : run->entries)
      if (!pending_.count(k)) writes.push_back({std::move(k), std::nullopt, std::nullopt});
    if (!run->resume) return status::ok();
    from = std::move(*run->resume);
  }
}

}  // namespace detail

result<std::optional<item>> map_handle::get(std::string_view key) const { return c_->map_get(nullptr, key); }

result<std::vector<std::optional<item>>> map_handle::get_many(std::span<const std::string> keys) const {
  MAGNETITE_TRY(c_->usable());
  auto v = c_->view();
  if (!v) return v.error();
  std::vector<std::optional<item>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    auto x = c_->map_get(v->get(), k);
    if (!x) return x.error();
    out.push_back(std::move(*x));
  }
  return out;
}

result<bool> map_handle::contains(std::string_view key) const { return c_->map_contains(key); }
status map_handle::set(std::string_view key, item v) { return c_->map_put(key, std::move(v)); }
status map_handle::remove(std::string_view key) { return c_->map_put(key, std::nullopt); }
status map_handle::clear() { return c_->map_clear(); }

result<bool> map_handle::is_empty() const {
  auto r = c_->map_range({});
  if (!r) return r.error();
  auto first = (*r)->next(1);
  if (!first) return first.error();
  return first->empty();
}

result<std::uint64_t> map_handle::size() const {
  auto r = c_->map_range({});
  if (!r) return r.error();
  std::uint64_t n = 0;
  for (;;) {
    auto chunk = (*r)->next(1024);
    if (!chunk) return chunk.error();
    if (chunk->empty()) return n;
    n += chunk->size();
  }
}

result<cursor<map_entry>> map_handle::scan(scan_options o) const {
  auto r = c_->map_range(o);
  if (!r) return r.error();
  return detail::make_cursor<map_entry>(std::move(*r), [c = c_](const std::string& k, item v) {
    return map_entry{c->map_key_of(k), std::move(v)};
  });
}

result<cursor<std::string>> map_handle::keys(scan_options o) const {
  auto r = c_->map_range(o);
  if (!r) return r.error();
  return detail::make_cursor<std::string>(std::move(*r),
                                          [c = c_](const std::string& k, item) { return c->map_key_of(k); });
}

status map_handle::commit(std::optional<deadline> d) { return detail::commit_one(c_, d); }
void map_handle::rollback() noexcept { c_->reset(); }
void map_handle::close() noexcept { c_->close(); }

}  // namespace magnetite::state
