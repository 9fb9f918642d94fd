// hash128: a 128-bit content hash (XXH3-128), the name of a tree node or a root.
//
// Invariants: the hash of a byte string never changes between builds or machines
// (XXH3-128 with seed 0, stored big-endian as 16 bytes: `high` then `low`), and its
// hex form is 32 lowercase digits that parse back to the same value.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "magnetite/config.h"

namespace magnetite {

struct MAGNETITE_API hash128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;

  static constexpr std::size_t byte_size = 16;

  static hash128 of(std::span<const std::byte> bytes) noexcept;
  static hash128 of(std::string_view bytes) noexcept;

  // 16 bytes, big-endian: the byte order is the hex order.
  std::array<std::uint8_t, byte_size> to_bytes() const noexcept;
  static hash128 from_bytes(const std::uint8_t* p) noexcept;

  std::string to_hex() const;
  // Exactly 32 hex digits (either case); anything else is nullopt.
  static std::optional<hash128> parse_hex(std::string_view hex) noexcept;

  bool is_zero() const noexcept { return high == 0 && low == 0; }

  friend auto operator<=>(const hash128&, const hash128&) = default;
};

struct hash128_hasher {
  std::size_t operator()(const hash128& h) const noexcept {
    return static_cast<std::size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ULL));
  }
};

}  // namespace magnetite
