#include "tree/chunker.h"

#include <xxhash.h>

namespace magnetite {

status chunk_policy::validate() const {
  if (min == 0 || min >= target || target > max)
    return status::invalid_argument(
        fmt::format("chunk policy needs 0 < min < target <= max (min {}, target {}, max {})", min, target, max));
  return status::ok();
}

}  // namespace magnetite

namespace magnetite::tree {

bool chunker::add(std::string_view key, std::size_t bytes) noexcept {
  size_ += bytes;
  ++count_;
  if (needs_second()) return false;
  if (bytes > p_.max || size_ >= p_.max) return true;
  if (size_ < p_.min) return false;
  // Boundary with probability bytes / (target - min): byte-weighted, so the mean
  // node size does not depend on how big entries are.
  // The comparison needs 128 bits; __int128 is a GCC and clang extension,
  // which -Wpedantic would flag without __extension__.
  __extension__ using u128 = unsigned __int128;
  std::uint64_t draw = XXH3_64bits_withSeed(key.data(), key.size(), level_);
  u128 lhs = static_cast<u128>(draw) * (p_.target - p_.min);
  u128 rhs = static_cast<u128>(bytes) << 64;
  return lhs < rhs;
}

}  // namespace magnetite::tree
