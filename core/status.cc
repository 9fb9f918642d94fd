#include "core/status.h"

namespace magnetite {

std::string_view to_string(status_code c) noexcept {
  switch (c) {
    case status_code::ok:
      return "ok";
    case status_code::not_found:
      return "not found";
    case status_code::invalid_argument:
      return "invalid argument";
    case status_code::corruption:
      return "corruption";
    case status_code::io_error:
      return "I/O error";
    case status_code::no_space:
      return "no space";
    case status_code::busy:
      return "busy";
    case status_code::failed:
      return "failed";
    case status_code::conflict:
      return "conflict";
    case status_code::timeout:
      return "timeout";
    case status_code::not_supported:
      return "not supported";
    case status_code::permission_denied:
      return "permission denied";
  }
  return "unknown";
}

std::string_view to_string(status_category c) noexcept {
  switch (c) {
    case status_category::none:
      return "none";
    case status_category::transient:
      return "transient";
    case status_category::permanent:
      return "permanent";
    case status_category::ambiguous:
      return "ambiguous";
  }
  return "unknown";
}

std::string status::to_string() const {
  if (is_ok()) return "ok";
  return fmt::format("{} ({}): {}", magnetite::to_string(code_), magnetite::to_string(category_), message_);
}

}  // namespace magnetite
