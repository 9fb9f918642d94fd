// A value: one item under one key.
#include "magnetite/state/keyed_state.h"

#include "state/collection.h"

namespace magnetite::state {

namespace detail {

result<std::optional<item>> collection::value_get() const {
  MAGNETITE_TRY(usable());
  if (auto it = pending_.find(key_); it != pending_.end()) return it->second;
  auto v = view();
  if (!v) return v.error();
  return read(**v, key_);
}

status collection::value_put(std::optional<item> v) {
  MAGNETITE_TRY(usable());
  if (v) MAGNETITE_TRY(check_item(*v, "clear()"));
  pending_[key_] = std::move(v);
  keep_buffer();
  return status::ok();
}

}  // namespace detail

result<std::optional<item>> value_handle::get() const { return c_->value_get(); }
status value_handle::set(item v) { return c_->value_put(std::move(v)); }
status value_handle::clear() { return c_->value_put(std::nullopt); }
status value_handle::commit(std::optional<deadline> d) { return detail::commit_one(c_, d); }
void value_handle::rollback() noexcept { c_->reset(); }
void value_handle::close() noexcept { c_->close(); }

}  // namespace magnetite::state
