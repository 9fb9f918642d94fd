// stamp: the order replicated writes are judged by (docs/formats/replication.md).
//
// A ballot (counter, node) names one attempt by one node to own a shard;
// ballots compare by counter, then node, so two nodes never mint equal ones.
// The ballot that won is the shard's epoch. The owner numbers its writes
// within its epoch, and a write's stamp (epoch, seq) orders it against every
// other write of that shard: a later owner's writes are stamped above every
// earlier owner's, whatever their seq.
//
// Invariants:
// - encode() is 20 bytes, big-endian, so memcmp order of the bytes is the
//   stamp order; decode(encode(s)) == s for every stamp.
// - The zero stamp (bottom) is below every stamp a real owner mints (counter
//   >= 1), and stands for "no stamp": a plain, unreplicated value.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/coding.h"

namespace magnetite {

struct ballot {
  std::uint64_t counter = 0;
  std::uint32_t node = 0;

  friend auto operator<=>(const ballot&, const ballot&) = default;
  bool is_zero() const noexcept { return counter == 0 && node == 0; }
};

struct stamp {
  ballot epoch;
  std::uint64_t seq = 0;

  friend auto operator<=>(const stamp&, const stamp&) = default;
  bool is_zero() const noexcept { return epoch.is_zero() && seq == 0; }

  static constexpr std::size_t encoded_bytes = 20;
  void encode_to(std::uint8_t* p) const noexcept {
    encode_fixed64_be(p, epoch.counter);
    encode_fixed32_be(p + 8, epoch.node);
    encode_fixed64_be(p + 12, seq);
  }
  // `p` has encoded_bytes readable bytes.
  static stamp decode(const std::uint8_t* p) noexcept {
    stamp s;
    s.epoch.counter = decode_fixed64_be(p);
    s.epoch.node = decode_fixed32_be(p + 8);
    s.seq = decode_fixed64_be(p + 12);
    return s;
  }
};

// "counter.node" and "counter.node:seq": how errors and logs name them.
std::string to_string(const ballot& b);
std::string to_string(const stamp& s);

}  // namespace magnetite
