#include "core/limits.h"

namespace magnetite::limits {

status check_key_within(std::string_view key, std::size_t limit) {
  if (key.empty()) return status::invalid_argument("key is empty");
  if (key.size() > limit)
    return status::invalid_argument(fmt::format("key of {} bytes exceeds the limit of {} bytes", key.size(), limit));
  return status::ok();
}

status check_value_within(std::string_view value, std::size_t limit) {
  if (value.size() > limit)
    return status::invalid_argument(
        fmt::format("value of {} bytes exceeds the limit of {} bytes", value.size(), limit));
  return status::ok();
}

status check_key(std::string_view key) { return check_key_within(key, max_key_bytes); }
status check_value(std::string_view value) { return check_value_within(value, max_value_bytes); }
}  // namespace magnetite::limits
