// key_filter: a Bloom filter over the keys of one layer of durable writes
// (read_view.h), so that a point read skips the layers that cannot hold its
// key instead of searching each of them.
//
// A read probes every layer newest first; the layers grow like a binary
// counter between checkpoints (about log2 of the groups since the last one),
// and each search is a binary search of string compares that mostly miss
// the cache. A stamped write (replication) reads its key's latest stamp
// before it is taken, so on a replica this was a search of every layer per
// write.
//
// Contract: may_contain(hash_of(k)) is true for every key k the filter was
// built from; for other keys it is false but for about 1% of them (10 bits
// a key, 7 probes). A filter built from no keys, or default-constructed,
// holds no bits and answers true: "not filtered", never a wrong "absent".
// hash_of is one XXH3-64 of the key: a reader hashes its key once and probes
// every layer's filter with the same hash.
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
  // Memory it holds, for a layer's byte count.
  std::size_t bytes() const noexcept { return bits_.capacity() * sizeof(std::uint64_t); }

 private:
  std::vector<std::uint64_t> bits_;  // empty: not filtered
};

}  // namespace magnetite
