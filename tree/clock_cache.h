// clock_cache: a sharded CLOCK cache from node hashes to values, bounded in
// bytes. The node store keeps two of them: decoded nodes, and the stored
// (compressed) records of leaves that a miss of the first can decode without
// reading the pack.
//
// Contract:
// - Each shard has a byte budget; the budgets add up to the capacity exactly,
//   and a shard's values (their charges) plus its slot table never exceed its
//   budget, whatever mix of sizes went through it. A value charged more than
//   its shard's budget is not cached.
// - A hit takes its shard's lock in SHARED mode and only sets the slot's
//   reference bit, so concurrent readers do not serialise and a hit writes no
//   shared list. Inserts and evictions take the lock exclusively and sweep the
//   clock hand, sparing each referenced slot once.
// - with_hit(h, fn) runs fn on the slot's value under the shared lock: the
//   value outlives fn, and fn must not call back into the cache.
// - A value put as resident (the node store's internal nodes) is passed over
//   by the clock hand while the shard's resident values are charged at most
//   half its budget: a flood of values read once (leaves, past the cache)
//   cannot push out the few that every lookup needs. Past half, or when a
//   whole sweep found nothing else to evict, residents go as any value.
//
// Value: default-constructible, movable, and false when converted to bool
// exactly when it holds nothing (a free slot).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/hash128.h"

namespace magnetite::tree {

template <class Value>
class clock_cache {
 public:
  explicit clock_cache(std::size_t capacity) : capacity_(capacity) {
    std::size_t n = std::clamp<std::size_t>(capacity / (1u << 20), 1, 16);
    for (std::size_t i = 0; i < n; ++i) {
      shards_.push_back(std::make_unique<shard>(charged_));
      shards_.back()->capacity = capacity / n + (i == 0 ? capacity % n : 0);
    }
  }

  // A new bound (the shard count stays): shards over their new budget evict
  // at once.
  void set_capacity(std::size_t capacity) {
    capacity_.store(capacity, std::memory_order_relaxed);
    std::size_t n = shards_.size();
    for (std::size_t i = 0; i < n; ++i) {
      shard& s = *shards_[i];
      std::unique_lock lk(s.mu);
      s.capacity = capacity / n + (i == 0 ? capacity % n : 0);
      s.make_room(0, 0);
    }
  }

  // What the bound covers (values and slot tables), without locking.
  std::uint64_t charged() const noexcept { return charged_.load(std::memory_order_relaxed); }
  // Whether a value charged `charge` would fit beside what is held with a
  // sixteenth of the bound to spare, so that keeping it evicts nothing
  // (shards fill unevenly: the spare covers that). No lock.
  bool has_room(std::size_t charge) const noexcept {
    std::size_t cap = capacity_.load(std::memory_order_relaxed);
    return charged() + charge + cap / 16 <= cap;
  }

  // Runs fn(const Value&) on h's value under its shard's shared lock and
  // counts a hit; on a miss counts it and returns false.
  template <class Fn>
  bool with_hit(const hash128& h, Fn&& fn) {
    return with_hit_seen(h, [&](const Value& v, bool) { fn(v); });
  }
  // The same, telling fn(const Value&, bool again) whether the value was hit
  // since the clock hand last passed it (a value in demand).
  template <class Fn>
  bool with_hit_seen(const hash128& h, Fn&& fn) {
    shard& s = shard_of(h);
    std::shared_lock lk(s.mu);
    std::size_t i = s.find(h);
    if (i == npos) {
      s.misses.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    bool again = s.slots[i].referenced.load(std::memory_order_relaxed);
    s.slots[i].mark_referenced();
    s.hits.fetch_add(1, std::memory_order_relaxed);
    fn(static_cast<const Value&>(s.slots[i].v), again);
    return true;
  }

  // Keeps v under h (a no-op if h is cached), evicting until it fits.
  void put(const hash128& h, Value v, std::size_t charge, bool resident = false) {
    shard& s = shard_of(h);
    std::unique_lock lk(s.mu);
    if (s.find(h) != npos) return;
    if (!s.make_room(charge, 1)) return;  // does not fit even alone
    s.insert(h, std::move(v), charge, resident);
    s.shrink_if_sparse();
  }

  void clear() {
    for (auto& s : shards_) {
      std::unique_lock lk(s->mu);
      s->reset(0);
    }
  }

  // bytes: values and slot tables together (what the bound covers).
  // resident: the part of bytes charged for resident values.
  void usage(std::uint64_t& bytes, std::uint64_t& entries, std::uint64_t& table_bytes,
             std::uint64_t* resident = nullptr) const {
    bytes = entries = table_bytes = 0;
    if (resident) *resident = 0;
    for (auto& s : shards_) {
      std::shared_lock lk(s->mu);
      std::uint64_t table = s->table_bytes();
      bytes += s->bytes + table;
      table_bytes += table;
      entries += s->count;
      if (resident) *resident += s->resident_bytes;
    }
  }

  std::uint64_t hits() const noexcept { return sum(&shard::hits); }
  std::uint64_t misses() const noexcept { return sum(&shard::misses); }

 private:
  static constexpr std::size_t npos = ~std::size_t{0};
  static constexpr std::size_t min_table = 64;

  struct slot {
    hash128 hash;
    Value v;  // empty: the slot is free
    std::size_t charge = 0;
    bool resident = false;
    std::atomic<bool> referenced{false};
    // A hit leaves the line clean when the bit is already set: concurrent
    // readers of a hot value do not bounce its slot between cores.
    void mark_referenced() noexcept {
      if (!referenced.load(std::memory_order_relaxed)) referenced.store(true, std::memory_order_relaxed);
    }
  };

  struct shard {
    explicit shard(std::atomic<std::uint64_t>& total) noexcept : charged(total) {}
    std::atomic<std::uint64_t>& charged;  // the cache's, summed over its shards
    mutable std::shared_mutex mu;
    std::unique_ptr<slot[]> slots;
    std::size_t mask = 0;  // table size - 1 (a power of two), or 0 with no table
    std::size_t count = 0;
    std::size_t hand = 0;
    std::size_t bytes = 0;
    std::size_t resident_bytes = 0;  // of bytes, charged for resident values
    std::size_t capacity = 0;
    std::atomic<std::uint64_t> hits{0}, misses{0};

    std::size_t home(const hash128& h) const noexcept { return static_cast<std::size_t>(h.low) & mask; }

    // Table bytes once `entries` are held: the table doubles when it would pass
    // half full, and halves when it falls under a quarter (see shrink_if_sparse).
    std::size_t table_bytes_for(std::size_t entries) const noexcept {
      std::size_t size = slots ? mask + 1 : 0;
      if (size == 0 || entries * 2 > size) size = size ? size * 2 : min_table;
      return size * sizeof(slot);
    }

    // Evicts until `adding` more values charged `charge` in all fit beside
    // what stays, the slot table included: what the shard holds never exceeds
    // its budget, whatever mix of sizes went through it. False if they do not
    // fit even in an empty shard.
    bool make_room(std::size_t charge, std::size_t adding) {
      for (;;) {
        if (count + adding == 0) {  // nothing to hold: no table either
          if (slots) reset(0);
          return true;
        }
        if (bytes + charge + table_bytes_for(count + adding) <= capacity) return true;
        if (count == 0) {
          reset(0);
          return charge + (adding ? table_bytes_for(adding) : 0) <= capacity;
        }
        evict_one();
        shrink_if_sparse();
      }
    }

    void shrink_if_sparse() {
      std::size_t size = slots ? mask + 1 : 0;
      if (size <= min_table || count * 4 >= size) return;
      std::size_t target = size;
      while (target > min_table && count * 4 < target) target /= 2;
      rehash(target);
    }

    void rehash(std::size_t size) {
      std::size_t old_size = slots ? mask + 1 : 0;
      charged.fetch_sub(table_bytes(), std::memory_order_relaxed);
      std::unique_ptr<slot[]> old = std::move(slots);
      std::size_t old_bytes = bytes, old_resident = resident_bytes;
      reset(size);
      for (std::size_t i = 0; i < old_size; ++i)
        if (old[i].v) insert(old[i].hash, std::move(old[i].v), old[i].charge, old[i].resident);
      bytes = old_bytes;
      resident_bytes = old_resident;
    }

    std::size_t find(const hash128& h) const noexcept {
      if (!slots) return npos;
      for (std::size_t i = home(h);; i = (i + 1) & mask) {
        if (!slots[i].v) return npos;
        if (slots[i].hash == h) return i;
      }
    }

    std::size_t table_bytes() const noexcept { return slots ? (mask + 1) * sizeof(slot) : 0; }

    void reset(std::size_t size) {
      charged.fetch_sub(bytes + table_bytes(), std::memory_order_relaxed);
      slots = size ? std::make_unique<slot[]>(size) : nullptr;
      mask = size ? size - 1 : 0;
      count = hand = bytes = resident_bytes = 0;
      charged.fetch_add(table_bytes(), std::memory_order_relaxed);
    }

    void insert(const hash128& h, Value v, std::size_t charge, bool resident) {
      if (!slots || (count + 1) * 2 > mask + 1) grow();
      std::size_t i = home(h);
      while (slots[i].v) i = (i + 1) & mask;
      slots[i].hash = h;
      slots[i].v = std::move(v);
      slots[i].charge = charge;
      slots[i].resident = resident;
      slots[i].referenced.store(false, std::memory_order_relaxed);
      ++count;
      bytes += charge;
      if (resident) resident_bytes += charge;
      charged.fetch_add(charge, std::memory_order_relaxed);
    }

    // Keeps the load at most one half: probes stay short.
    void grow() { rehash(slots ? (mask + 1) * 2 : min_table); }

    void evict_one() {
      // Two sweeps clear every reference bit: past them, residents go too.
      std::size_t spare_for = 2 * (mask + 1);
      for (;;) {
        hand &= mask;
        slot& v = slots[hand];
        bool spared = v.resident && resident_bytes * 2 <= capacity && spare_for > 0;
        if (v.v && !spared && !v.referenced.exchange(false, std::memory_order_relaxed)) {
          bytes -= v.charge;
          if (v.resident) resident_bytes -= v.charge;
          charged.fetch_sub(v.charge, std::memory_order_relaxed);
          erase(hand);  // a later slot may move into `hand`: look at it next
          return;
        }
        if (spare_for > 0) --spare_for;
        ++hand;
      }
    }

    // Backward-shift deletion: the probe sequences of the slots after i stay
    // unbroken without tombstones.
    void erase(std::size_t i) {
      for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (!slots[j].v) break;
        std::size_t k = home(slots[j].hash);
        bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
          slots[i].hash = slots[j].hash;
          slots[i].v = std::move(slots[j].v);
          slots[i].charge = slots[j].charge;
          slots[i].resident = slots[j].resident;
          slots[i].referenced.store(slots[j].referenced.load(std::memory_order_relaxed), std::memory_order_relaxed);
          i = j;
        }
      }
      slots[i].v = Value();
      slots[i].charge = 0;
      slots[i].resident = false;
      --count;
    }
  };

  shard& shard_of(const hash128& h) { return *shards_[static_cast<std::size_t>(h.high) % shards_.size()]; }

  std::uint64_t sum(std::atomic<std::uint64_t> shard::*counter) const noexcept {
    std::uint64_t total = 0;
    for (auto& s : shards_) total += ((*s).*counter).load(std::memory_order_relaxed);
    return total;
  }

  std::atomic<std::uint64_t> charged_{0};
  std::atomic<std::size_t> capacity_;
  std::vector<std::unique_ptr<shard>> shards_;
};

}  // namespace magnetite::tree
