// memtable: a shard's writes since its last checkpoint, each inserted once
// into one ordered structure that readers on any thread search in place.
//
// Shape (LevelDB's and RocksDB's): a skiplist whose nodes live in an arena of
// blocks. A node is a tree key (keyspace.h), a sequence number and the stored
// bytes or a deletion, copied once into the arena; nodes are ordered by key
// ascending, then by sequence DESCENDING, so a key's newest version comes
// first and a rewrite adds a node in front of the older ones.
//
// Contract:
// - One writer (the shard's owner) calls insert(); any number of readers on
//   any threads read meanwhile, with no lock. A node is written in full before
//   it is linked, and linked bottom up with release stores that readers load
//   with acquire, so a reader sees a node whole or not at all. Nothing is ever
//   unlinked or changed in place.
// - Snapshots by sequence: insert() numbers the inserts 1, 2, 3, ...; a reader
//   at sequence S sees exactly the inserts numbered <= S, and of a key the
//   newest of those. The shard publishes views at the sequence of its last
//   durable group, so a view never sees a staged write, while the owner,
//   reading at latest(), does.
// - A deletion is an entry like any other (it hides the key in older
//   memtables and in the tree); readers are handed it, not skipped past it.
// - Memory: the arena grows by blocks and is freed whole with the memtable,
//   when the last holder (the shard, a view, a cursor's view) lets go.
//   bytes() counts every block, so every version of every key written since
//   the memtable began, as the checkpoint threshold and the memory budget
//   want.
// - Inserts in key order cost less: an insert after the previous one starts
//   its search from where that one was linked (the finger), not from the head.
// - Not copyable. Keys are 1 .. 2^32 - 1 bytes, values below 2^32 - 1 (the
//   limits in core/limits.h are far below; the shard checks them first).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

namespace magnetite {

class memtable {
  struct node;

 public:
  memtable();
  ~memtable();
  memtable(const memtable&) = delete;
  memtable& operator=(const memtable&) = delete;

  // Inserts the entry (prefix + key) -> value (nullopt: a deletion) as the
  // newest version of that key; its sequence number, latest() + 1. The key
  // is given in two parts so a tag byte needs no string of its own.
  std::uint64_t insert(std::string_view prefix, std::string_view key, std::optional<std::string_view> value);
  std::uint64_t insert(std::string_view key, std::optional<std::string_view> value) { return insert({}, key, value); }

  // The newest version of `key` among the inserts numbered <= at: found,
  // and its bytes (nullopt: a deletion), viewing the arena; or not found.
  struct lookup {
    bool found = false;
    std::optional<std::string_view> value;
  };
  lookup find(std::string_view key, std::uint64_t at) const noexcept;

  // The sequence of the last insert (0 for none). Owner's thread only: a
  // reader takes its sequence from the view it was handed.
  std::uint64_t latest() const noexcept { return latest_; }
  // Bytes of the arena's blocks (what the memtable holds in memory).
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  // Inserts made, every version counted (owner's thread).
  std::uint64_t entries() const noexcept { return latest_; }
  bool empty() const noexcept { return latest_ == 0; }
  // Every level of the skiplist in order (tests: a node linked out of place
  // above level 0 would only slow the searches, which still find it).
  bool levels_in_order() const noexcept;

  // The entries visible at sequence `at`, one a key (its newest version <=
  // at, deletions included), in key order either way. Valid only while the
  // memtable lives; key() and value() view the arena.
  class cursor {
   public:
    cursor(const memtable& m, std::uint64_t at) noexcept : m_(&m), at_(at) {}
    bool valid() const noexcept { return n_ != nullptr; }
    // The first visible entry with key >= k (none: invalid).
    void seek(std::string_view k) noexcept;
    // The last visible entry with key < k (none: invalid).
    void seek_before(std::string_view k) noexcept;
    void seek_to_first() noexcept;
    void seek_to_last() noexcept;
    void next() noexcept;
    void prev() noexcept;
    std::string_view key() const noexcept;
    bool deletion() const noexcept;
    std::string_view value() const noexcept;  // not for a deletion

   private:
    // From n_ on, forward: the first node whose sequence is visible (the
    // newest visible version of its key, since versions come newest first).
    void settle_forward() noexcept;
    // n_ is some version of a key: moves to that key's newest visible
    // version, or, when it has none, to the last visible entry before it.
    void settle_backward() noexcept;
    const memtable* m_;
    std::uint64_t at_;
    const node* n_ = nullptr;
  };

 private:
  static constexpr int max_height = 12;
  // The first node ordered at or after (key, seq); `before`, when given, gets
  // the last node before it at each level.
  const node* find_greater_or_equal(std::string_view key, std::uint64_t seq, const node** before) const noexcept;
  // find_greater_or_equal's `before` for an entry that comes after last_,
  // searched from the finger; `height` is the list's height.
  void find_from_finger(std::string_view key, std::uint64_t seq, int height, const node** before) const noexcept;
  // The last node whose key is below `key` (nullptr: none).
  const node* find_less_than(std::string_view key) const noexcept;
  const node* find_last() const noexcept;
  char* allocate(std::size_t bytes);
  int random_height() noexcept;

  node* head_;
  std::atomic<int> height_{1};
  // The insert finger (owner only): the last node inserted, and at each level
  // the last node linked at that level at or before it (head_ for none). An
  // insert that comes after last_ (keys given in order, as a sorted batch's
  // are) searches from here: RocksDB's splice.
  const node* last_ = nullptr;
  const node* finger_[max_height];
  std::uint64_t latest_ = 0;
  std::uint32_t rng_ = 0x2545f491;
  // The arena: blocks (the next one next_block_bytes_), a larger allocation
  // in a block of its own; the current block's unused end.
  struct block {
    explicit block(std::size_t bytes);
    ~block();
    block(block&& o) noexcept : data(std::exchange(o.data, nullptr)), size(o.size) {}
    block& operator=(block&&) = delete;
    char* data = nullptr;
    std::size_t size = 0;
  };
  std::deque<block> blocks_;
  char* free_ = nullptr;
  std::size_t free_bytes_ = 0;
  std::size_t next_block_bytes_;
  std::atomic<std::size_t> bytes_{0};
};

}  // namespace magnetite
