#include "engine/key_filter.h"

#include <xxhash.h>

namespace magnetite {

namespace {

// Blocked: every probe of one key falls in one 512-bit block (one cache
// line), chosen by the hash's high half; the 7 bits inside it come from 7
// 9-bit pieces of the hash mixed once more. A little more false positives
// than 7 independent probes (about 1% at 10 bits a key instead of 0.8%), one
// cache miss instead of 7.
constexpr std::size_t words_a_block = 8;
constexpr int probes = 7;
constexpr std::size_t bits_a_key = 10;

std::size_t block_of(std::uint64_t hash, std::size_t blocks) noexcept {
  return static_cast<std::size_t>(((hash >> 32) * static_cast<std::uint64_t>(blocks)) >> 32);
}

std::uint64_t bit_pieces(std::uint64_t hash) noexcept { return hash * 0x9E3779B97F4A7C15ULL; }

}  // namespace

std::uint64_t key_filter::hash_of(std::string_view key) noexcept { return XXH3_64bits(key.data(), key.size()); }

key_filter::key_filter(std::size_t keys) {
  if (keys == 0) return;
  std::size_t blocks = (keys * bits_a_key + 511) / 512;
  bits_.assign(blocks * words_a_block, 0);
}

void key_filter::add(std::uint64_t hash) noexcept {
  if (bits_.empty()) return;
  std::uint64_t* block = bits_.data() + block_of(hash, bits_.size() / words_a_block) * words_a_block;
  std::uint64_t pieces = bit_pieces(hash);
  for (int i = 0; i < probes; ++i, pieces >>= 9) block[(pieces & 511) >> 6] |= std::uint64_t{1} << (pieces & 63);
}

bool key_filter::may_contain(std::uint64_t hash) const noexcept {
  if (bits_.empty()) return true;
  const std::uint64_t* block = bits_.data() + block_of(hash, bits_.size() / words_a_block) * words_a_block;
  std::uint64_t pieces = bit_pieces(hash);
  for (int i = 0; i < probes; ++i, pieces >>= 9)
    if (!(block[(pieces & 511) >> 6] & (std::uint64_t{1} << (pieces & 63)))) return false;
  return true;
}

}  // namespace magnetite
