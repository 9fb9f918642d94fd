#include "engine/state_space.h"

#include <fmt/format.h>

#include "core/coding.h"

namespace magnetite::state_space {

status check_user_key(std::string_view key) {
  MAGNETITE_TRY(limits::check_key_within(key, limits::max_user_key_bytes));
  if (key.starts_with(prefix))
    return status::invalid_argument("keys starting with FF FF are reserved for state/ (keyed state, records, streams)");
  return status::ok();
}

status check_user_value(std::string_view value) {
  return limits::check_value_within(value, limits::max_user_value_bytes);
}

status check_key(std::string_view key) {
  MAGNETITE_TRY(limits::check_key_within(key, limits::max_user_key_bytes));
  if (!key.starts_with(prefix)) return status::invalid_argument("a state key must start with FF FF");
  return status::ok();
}

status check_value(std::string_view value) { return limits::check_value_within(value, max_value_bytes); }

result<std::uint64_t> revision_of(std::string_view key, std::string_view value) {
  std::uint64_t r =
      value.size() >= revision_bytes ? decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(value.data())) : 0;
  if (r == 0)
    return status::corruption(fmt::format("state key of {} bytes holds a value of {} bytes with no valid revision",
                                          key.size(), value.size()));
  return r;
}

status check_write(std::size_t i, std::string_view key, const std::string* value,
                   std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(check_key(key));
  if (value)
    MAGNETITE_TRY(check_value(*value));
  else if (ttl)
    return status::invalid_argument(fmt::format("state write {}: a delete takes no ttl", i));
  if (ttl && ttl->count() <= 0) return status::invalid_argument(fmt::format("ttl of {} ns: must be > 0", ttl->count()));
  return status::ok();
}

status check_batch(std::span<const state_check> checks, std::span<const batch_write> writes) {
  if (writes.size() > limits::max_batch_mutations)
    return status::invalid_argument(
        fmt::format("state batch of {} writes exceeds the limit of {}", writes.size(), limits::max_batch_mutations));
  for (const auto& c : checks) MAGNETITE_TRY(check_key(c.key));
  for (std::size_t i = 0; i < writes.size(); ++i)
    MAGNETITE_TRY(check_write(i, writes[i].key, writes[i].value ? &*writes[i].value : nullptr, writes[i].ttl));
  return status::ok();
}

}  // namespace magnetite::state_space
