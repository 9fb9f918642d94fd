// A deque: items in slots [head, tail) under a meta that both ends move; a
// commit checks that the meta is still the one its operations started from.
#include "magnetite/state/keyed_state.h"

#include <fmt/format.h>

#include "core/limits.h"
#include "state/collection.h"
#include "state/errors.h"
#include "state/state_reader.h"

namespace magnetite::state {

namespace detail {

// The meta as the view holds it now, unless buffered operations were made
// against an earlier read (then the commit checks that one).
status collection::load_meta() const {
  if (meta_ && dirty_) return status::ok();
  auto v = view();
  if (!v) return v.error();
  auto live = (*v)->read(meta_key_);
  if (!live) return live.error();
  deque_read r;
  if (*live) {
    auto found = state_value_of(**live, describe());
    if (!found) return found.error();
    auto m = decode_deque_meta(found->body, describe());
    if (!m) return m.error();
    r = {found->revision, *m};
  }
  meta_ = r;
  now_meta_ = r.meta;
  return status::ok();
}

result<std::optional<item>> collection::slot(std::uint64_t i) const {
  if (auto it = pending_.find(slot_key(i)); it != pending_.end()) return it->second;
  auto v = view();
  if (!v) return v.error();
  return read(**v, slot_key(i));
}

result<deque_meta> collection::deque_state() const {
  MAGNETITE_TRY(usable());
  MAGNETITE_TRY(load_meta());
  return now_meta_;
}

status collection::push(bool back, item v) {
  MAGNETITE_TRY(usable());
  MAGNETITE_TRY(check_item(v, "pop_front()/pop_back() or clear()"));
  MAGNETITE_TRY(load_meta());
  if (opts_.capacity && now_meta_.tail - now_meta_.head >= *opts_.capacity) {
    auto evicted = pop(!back);
    if (!evicted) return evicted.error();
  }
  if (back ? now_meta_.tail == UINT64_MAX : now_meta_.head == 0)
    return mistake(fmt::format("{}: no index left at the {} end", describe(), back ? "back" : "front"));
  std::uint64_t at = back ? now_meta_.tail++ : --now_meta_.head;
  pending_[slot_key(at)] = std::move(v);
  dirty_ = true;
  keep_buffer();
  return status::ok();
}

result<std::optional<item>> collection::pop(bool back) {
  MAGNETITE_TRY(usable());
  MAGNETITE_TRY(load_meta());
  if (now_meta_.head == now_meta_.tail) return std::optional<item>();
  std::uint64_t at = back ? now_meta_.tail - 1 : now_meta_.head;
  auto v = slot(at);
  if (!v) return v.error();
  pending_[slot_key(at)] = std::nullopt;
  back ? --now_meta_.tail : ++now_meta_.head;
  dirty_ = true;
  keep_buffer();
  return v;
}

status collection::deque_clear() {
  MAGNETITE_TRY(usable());
  MAGNETITE_TRY(load_meta());
  if (now_meta_.tail - now_meta_.head > limits::max_batch_mutations)
    return mistake(fmt::format("{}: {} slots are more than one commit can delete ({})", describe(),
                               now_meta_.tail - now_meta_.head, limits::max_batch_mutations));
  for (std::uint64_t i = now_meta_.head; i < now_meta_.tail; ++i) pending_[slot_key(i)] = std::nullopt;
  now_meta_.head = now_meta_.tail;
  dirty_ = true;
  keep_buffer();
  return status::ok();
}

result<std::unique_ptr<merged_range>> collection::deque_range(direction dir, std::optional<std::size_t> limit) const {
  MAGNETITE_TRY(usable());
  MAGNETITE_TRY(load_meta());
  auto v = view();
  if (!v) return v.error();
  return std::make_unique<merged_range>(*v, pending_, false, slot_key(now_meta_.head), slot_key(now_meta_.tail), dir,
                                        limit, describe());
}

void collection::collect_meta(std::vector<state_check>& checks, std::vector<batch_write>& writes,
                              std::vector<const collection*>& owners) const {
  checks.push_back({meta_key_, meta_->revision});
  owners.push_back(this);
  // An empty deque keeps no meta: the next push starts at the origin again.
  if (now_meta_.head == now_meta_.tail)
    writes.push_back({meta_key_, std::nullopt, std::nullopt});
  else
    writes.push_back({meta_key_, encode_deque_meta(now_meta_), opts_.ttl});
}

}  // namespace detail

result<std::uint64_t> deque_handle::len() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  return m->tail - m->head;
}

result<bool> deque_handle::is_empty() const {
  auto n = len();
  if (!n) return n.error();
  return *n == 0;
}

result<std::optional<item>> deque_handle::get(std::uint64_t i) const {
  if (!c_->has_ttl()) {
    // Without expiry the slots of [head, tail) are dense: one point read.
    auto m = c_->deque_state();
    if (!m) return m.error();
    if (i >= m->tail - m->head) return std::optional<item>();
    return c_->slot(m->head + i);
  }
  auto r = c_->deque_range(direction::forward, std::nullopt);
  if (!r) return r.error();
  // The i-th live slot: expired ones do not count.
  for (;;) {
    auto chunk = (*r)->next(256);
    if (!chunk) return chunk.error();
    if (chunk->empty()) return std::optional<item>();
    if (i < chunk->size()) return std::optional<item>(std::move((*chunk)[i].second));
    i -= chunk->size();
  }
}

result<std::optional<item>> deque_handle::peek_front() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  if (m->head == m->tail) return std::optional<item>();
  return c_->slot(m->head);
}

result<std::optional<item>> deque_handle::peek_back() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  if (m->head == m->tail) return std::optional<item>();
  return c_->slot(m->tail - 1);
}

status deque_handle::push_front(item v) { return c_->push(false, std::move(v)); }
status deque_handle::push_back(item v) { return c_->push(true, std::move(v)); }
result<std::optional<item>> deque_handle::pop_front() { return c_->pop(false); }
result<std::optional<item>> deque_handle::pop_back() { return c_->pop(true); }
status deque_handle::clear() { return c_->deque_clear(); }

result<cursor<item>> deque_handle::scan(direction dir) const {
  auto r = c_->deque_range(dir, std::nullopt);
  if (!r) return r.error();
  return detail::make_cursor<item>(std::move(*r), [](const std::string&, item v) { return v; });
}

status deque_handle::commit(std::optional<deadline> d) { return detail::commit_one(c_, d); }
void deque_handle::rollback() noexcept { c_->reset(); }
void deque_handle::close() noexcept { c_->close(); }

}  // namespace magnetite::state
