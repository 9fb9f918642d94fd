#include "core/limits.h"

namespace magnetite::limits {

namespace {
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
}  // namespace

status check_key(std::string_view key) { return check_key_within(key, max_key_bytes); }
status check_value(std::string_view value) { return check_value_within(value, max_value_bytes); }
status check_user_key(std::string_view key) {
  MAGNETITE_TRY(check_key_within(key, max_user_key_bytes));
  if (key.starts_with(state_prefix))
    return status::invalid_argument("keys starting with FF FF are reserved for state/ (keyed state, records, streams)");
  return status::ok();
}
status check_user_value(std::string_view value) { return check_value_within(value, max_user_value_bytes); }

status check_state_key(std::string_view key) {
  MAGNETITE_TRY(check_key_within(key, max_user_key_bytes));
  if (!key.starts_with(state_prefix)) return status::invalid_argument("a state key must start with FF FF");
  return status::ok();
}
status check_state_value(std::string_view value) { return check_value_within(value, max_state_value_bytes); }

}  // namespace magnetite::limits
