#include "core/limits.h"

namespace magnetite::limits {

status check_key(std::string_view key) {
  if (key.empty()) return status::invalid_argument("key is empty");
  if (key.size() > max_key_bytes)
    return status::invalid_argument(
        fmt::format("key of {} bytes exceeds the limit of {} bytes", key.size(), max_key_bytes));
  return status::ok();
}

status check_value(std::string_view value) {
  if (value.size() > max_value_bytes)
    return status::invalid_argument(fmt::format("value of {} bytes exceeds the limit of {} bytes",
                                                value.size(), max_value_bytes));
  return status::ok();
}

}  // namespace magnetite::limits
