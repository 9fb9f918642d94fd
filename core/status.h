// The engine's status header: <magnetite/status.h> (status, result), which a
// host includes as is, plus fmt formatting of a status. The public header
// leaves fmt out so that a host needs none of the engine's dependencies.
#pragma once

#include <fmt/format.h>

#include "magnetite/status.h"

template <>
struct fmt::formatter<magnetite::status> : fmt::formatter<std::string_view> {
  auto format(const magnetite::status& s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(s.to_string(), ctx);
  }
};

// Propagate a non-ok status from the enclosing function.
#define MAGNETITE_TRY(expr)                          \
  do {                                               \
    ::magnetite::status magnetite_try_s_ = (expr);   \
    if (!magnetite_try_s_.is_ok()) return magnetite_try_s_; \
  } while (0)
