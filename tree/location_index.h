// location_index: where each stored record lies, by node hash (the node
// store's index of every record in its packs).
//
// An open-addressed table with linear probing: one 32-byte slot per record
// (the hash and its node_location), in one array. A get that misses the
// caches looks its leaf up here, and with a table of node-based buckets that
// took two cache misses of a reading thread (bucket, then node), about 12% of
// a read served from the page cache; here it takes one.
//
// Contract and invariants:
// - A slot is empty exactly when its length is 0; a stored record is never
//   0 bytes long (its header alone is 36), so insert() refuses nothing it is
//   given in practice, and a location of length 0 is a caller's bug.
// - At most 3/4 of the slots are full; capacity is a power of two.
// - Erase shifts the following run back (no tombstones), so lookups never
//   slow down as records come and go (reclamation erases many).
// - A slot's home is taken from the hash mixed with a seed of this table's
//   own: a writer who makes many nodes agree in their low bits (cheap with a
//   non-cryptographic hash) does not make long runs.
// - Not thread-safe: the node store guards it with its readers' lock.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/hash128.h"

namespace magnetite::tree {

// 16 bytes, the offset first: with the two 32-bit fields around it, padding
// made it 24, and the location index holds one for every record in the packs.
struct node_location {
  std::uint64_t offset = 0;  // of the record header
  std::uint32_t pack = 0;
  std::uint32_t length = 0;  // header and payload
};
static_assert(sizeof(node_location) == 16);

class location_index {
 public:
  struct slot {
    hash128 hash;
    node_location loc;
  };

  std::size_t size() const noexcept { return size_; }

  // The location of h; null when it is not here. Valid until the next change.
  const node_location* find(const hash128& h) const noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.loc.length == 0) return nullptr;
      if (s.hash == h) return &s.loc;
    }
  }
  bool contains(const hash128& h) const noexcept { return find(h) != nullptr; }

  // Sets h's location, replacing one it had (a record relocated by a rewrite).
  void insert_or_assign(const hash128& h, const node_location& loc) { *place(h, loc) = loc; }
  // Sets h's location unless it has one (the first stored copy wins).
  void insert(const hash128& h, const node_location& loc) { place(h, loc); }

  void erase(const hash128& h) noexcept {
    if (size_ == 0) return;
    std::size_t i = home(h);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].loc.length == 0) return;
      if (slots_[i].hash == h) break;
    }
    // Move back each later slot of the run whose home does not lie in
    // (i, j]: it would no longer be found past the hole.
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].loc.length == 0) break;
      std::size_t k = home(slots_[j].hash);
      bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = slot{};
    --size_;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : slots_)
      if (s.loc.length != 0) f(s.hash, s.loc);
  }

  void swap(location_index& o) noexcept {
    slots_.swap(o.slots_);
    std::swap(mask_, o.mask_);
    std::swap(size_, o.size_);
    std::swap(seed_, o.seed_);
  }

  // The memory the table holds.
  std::size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(slot); }

 private:
  std::size_t home(const hash128& h) const noexcept {
    return static_cast<std::size_t>(((h.low ^ seed_) * 0x9E3779B97F4A7C15ULL) >> 32) & mask_;
  }

  // h's slot, made (with loc) when there was none.
  node_location* place(const hash128& h, const node_location& loc) {
    assert(loc.length != 0);
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    std::size_t i = home(h);
    for (; slots_[i].loc.length != 0; i = (i + 1) & mask_)
      if (slots_[i].hash == h) return &slots_[i].loc;
    slots_[i] = slot{h, loc};
    ++size_;
    return &slots_[i].loc;
  }

  void grow() {
    std::vector<slot> old(slots_.empty() ? 64 : slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const slot& s : old) {
      if (s.loc.length == 0) continue;
      std::size_t i = home(s.hash);
      while (slots_[i].loc.length != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::uint64_t seed_ = random_hash128().low;
};

}  // namespace magnetite::tree
