#include "core/hash128.h"

#include <xxhash.h>

#include <bit>
#include <cstring>
#include <random>

#include "core/coding.h"

namespace magnetite {

hash128 random_hash128() {
  std::random_device rd;
  std::uint64_t words[4];
  for (auto& w : words) w = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return hash128{words[0] ^ words[2], words[1] ^ words[3]};
}

hash128 hash128::of(std::span<const std::byte> bytes) noexcept {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.high64, h.low64};
}

hash128 hash128::of(std::string_view bytes) noexcept {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.high64, h.low64};
}

std::array<std::uint8_t, hash128::byte_size> hash128::to_bytes() const noexcept {
  std::array<std::uint8_t, byte_size> out{};
  encode_fixed64_be(out.data(), high);
  encode_fixed64_be(out.data() + 8, low);
  return out;
}

hash128 hash128::from_bytes(const std::uint8_t* p) noexcept {
  // On the read path of every tree lookup: two loads and two byte swaps.
  std::uint64_t hi, lo;
  std::memcpy(&hi, p, 8);
  std::memcpy(&lo, p + 8, 8);
  if constexpr (std::endian::native == std::endian::little) {
    hi = __builtin_bswap64(hi);
    lo = __builtin_bswap64(lo);
  }
  return {hi, lo};
}

std::string hash128::to_hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<hash128> hash128::parse_hex(std::string_view hex) noexcept {
  if (hex.size() != 32) return std::nullopt;
  std::uint64_t parts[2] = {0, 0};
  for (std::size_t i = 0; i < 32; ++i) {
    char c = hex[i];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      return std::nullopt;
    parts[i / 16] = (parts[i / 16] << 4) | d;
  }
  return hash128{parts[0], parts[1]};
}

}  // namespace magnetite
