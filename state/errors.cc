#include "state/errors.h"

namespace magnetite::state {

status mistake(std::string msg) {
  return status::invalid_argument(std::move(msg)).with_category(status_category::transient);
}

status after_handoff(status e) {
  switch (e.code()) {
    case status_code::invalid_argument:
    case status_code::corruption:
    case status_code::not_supported:
    case status_code::failed:
    case status_code::conflict:
    case status_code::busy:
    case status_code::permission_denied:
      return e;
    case status_code::timeout:
      return e.category() == status_category::transient ? e : e.with_category(status_category::ambiguous);
    default:
      return e.with_category(status_category::ambiguous);
  }
}

}  // namespace magnetite::state
