#include "engine/state_space.h"

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

}  // namespace magnetite::state_space
