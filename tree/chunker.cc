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
  std::uint64_t draw = XXH3_64bits_withSeed(key.data(), key.size(), level_);
  unsigned __int128 lhs = static_cast<unsigned __int128>(draw) * (p_.target - p_.min);
  unsigned __int128 rhs = static_cast<unsigned __int128>(bytes) << 64;
  return lhs < rhs;
}

}  // namespace magnetite::tree
