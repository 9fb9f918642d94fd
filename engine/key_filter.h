// key_filter: a Bloom filter over the keys of one sorted run (sorted_run.h),
// so that a point read skips the runs that cannot hold its key instead of
// searching each of them (a search of a run whose leaf is not cached is a
// read of the disk).
//
// Contract: may_contain(hash_of(k)) is true for every key k the filter was
// built from; for other keys it is false but for about 1% of them (10 bits
// a key, 7 probes). A filter built from no keys, or default-constructed,
// holds no bits and answers true: "not filtered", never a wrong "absent".
// hash_of is one XXH3-64 of the key: a reader hashes its key once and probes
// every run's filter with the same hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace magnetite {

class key_filter {
 public:
  key_filter() = default;

  static std::uint64_t hash_of(std::string_view key) noexcept;

  // A filter sized for `keys` keys; add() them all before it is read.
  explicit key_filter(std::size_t keys);
  void add(std::uint64_t hash) noexcept;

  bool may_contain(std::uint64_t hash) const noexcept;

 private:
  std::vector<std::uint64_t> bits_;  // empty: not filtered
};

}  // namespace magnetite
