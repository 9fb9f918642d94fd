// chunker: where one node ends and the next begins (docs/formats/tree.md, "Chunk
// boundaries").
//
// Entries are fed in key order; each is weighed by its encoded size. With S the
// bytes of the node being built and b the new entry's bytes:
//   - before the entry, the node is closed if it is not empty and either
//     b > max (the entry is oversized and will stand alone) or S + b > max;
//   - after the entry, the node is closed if b > max (oversized: alone), or if
//     S >= min and draw(key, level) < b / (target - min) as a fraction of 2^64,
//     where draw is XXH3-64 of the key seeded with the level.
// Above the leaves neither rule closes a node of fewer than two entries, so each
// level has at most half the nodes of the one below and a tree always reaches
// its root, whatever the key sizes.
// So a node never exceeds max unless it is a single oversized entry or an
// internal node of two entries, is at least
// min unless it ends a level or precedes an oversized/overflowing entry, and
// averages about `target` bytes. The decision depends only on the keys and sizes
// of the entries since the node began: never on the order or batching of the
// writes that produced them, and never on a value's bytes (only its length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "magnetite/options.h"

namespace magnetite::tree {

using magnetite::chunk_policy;  // <magnetite/options.h>

class chunker {
 public:
  chunker(const chunk_policy& policy, std::uint8_t level) noexcept : p_(policy), level_(level) {}

  // True if the node being built must be closed before an entry of `bytes`.
  bool closes_before(std::size_t bytes) const noexcept {
    return size_ > 0 && (bytes > p_.max || size_ + bytes > p_.max) && !needs_second();
  }
  // Adds the entry; true if the node must be closed after it.
  bool add(std::string_view key, std::size_t bytes) noexcept;
  void reset() noexcept { size_ = 0; count_ = 0; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  chunk_policy p_;
  std::uint8_t level_;
  std::size_t size_ = 0;
  std::size_t count_ = 0;
  // An internal node may not close before its second entry.
  bool needs_second() const noexcept { return level_ > 0 && count_ < 2; }
};

}  // namespace magnetite::tree
