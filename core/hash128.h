// The engine's hash128 header: <magnetite/hash128.h>, plus fmt formatting of
// a hash (its hex form), which the public header leaves out (no fmt for hosts).
#pragma once

#include <fmt/format.h>

#include "magnetite/hash128.h"

namespace magnetite {
// 128 random bits from the operating system: a name no other process or
// session picks (a client session, a transaction).
hash128 random_hash128();
}  // namespace magnetite

template <>
struct fmt::formatter<magnetite::hash128> : fmt::formatter<std::string_view> {
  auto format(const magnetite::hash128& h, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(h.to_hex(), ctx);
  }
};
