// merging_cursor: the one k-way merge of sorted sources, in either direction.
//
// Every scan that reads several sorted sources as one goes through it: a
// view's layers over its tree (view_cursor, behind read_view::scan and
// scan_reverse), the layers of a checkpoint (layer::merge_all), the shards of
// database::scan (merged_cursor), and a keyed-state handle's buffered writes
// over its pinned view (state/merged_range).
//
// Contract:
// - A source (the merge_source concept below) yields entries in the scan's
//   direction: strictly increasing keys forward, strictly decreasing
//   backward. It is on its first entry (or exhausted) when handed over, and
//   it bounds itself: the cursor knows no range, only when every source is
//   exhausted.
// - Sources come newest first. With equal_keys::newest_wins the first source
//   holding a key decides it and the others' entries of that key are stepped
//   past with it, hidden; with equal_keys::all each of them is an entry, in
//   source order.
// - A deciding entry that is a deletion is skipped with deletions::skip (it
//   still hides that key in the older sources) and is an entry with
//   deletions::keep.
// - A new cursor is before its first entry; next() moves to the next one, and
//   valid() is false past the last. The entry is read in place in the source
//   that decides it (top()); no key or value is copied. It stays put until
//   the next next(): the sources at its key are stepped only then, so a
//   caller may read it, or move from it, in between.
// - A step that fails ends next() with its status and the cursor on no entry.
//   The sources not yet stepped past the old key stay due, the failed one
//   first: next() again retries that step (a source that can be retried
//   makes step() safe to repeat after a failure).
//
// Invariants: heads_[i] is source i's key while valid; tied_[0, tied_count_)
// holds the sources still to step past the current key (the deciding one
// first) and nothing else. Cost: one pass over the k sources per entry, no
// allocation after construction; k is small (O(log n) layers and a tree, a
// few shards). The engine's hot read path runs through here: keep next()
// lean: the key cache and the fixed array of ties are there for speed
// (measured with callgrind against the loops they replaced).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace magnetite {

enum class scan_direction : std::uint8_t { forward, backward };

// What the cursor makes of entries of one key in several sources.
enum class equal_keys : std::uint8_t {
  newest_wins,  // the first source's entry only
  all,          // each of them, in source order
};

// What the cursor makes of a deciding deletion.
enum class deletions : std::uint8_t { skip, keep };

template <class S>
concept merge_source = std::movable<S> && requires(S& s, const S& cs) {
  { cs.valid() } -> std::convertible_to<bool>;            // on an entry (not exhausted)
  { cs.key() } -> std::convertible_to<std::string_view>;  // valid until this source steps
  { cs.deletion() } -> std::convertible_to<bool>;         // the entry deletes its key
  { s.step() } -> std::same_as<status>;                   // to the next entry in the direction
};

template <merge_source Source>
class merging_cursor {
 public:
  merging_cursor(std::vector<Source> newest_first, scan_direction dir, equal_keys eq = equal_keys::newest_wins,
                 deletions del = deletions::skip)
      : sources_(std::move(newest_first)),
        heads_(sources_.size()),
        tied_(sources_.size()),
        forward_(dir == scan_direction::forward),
        newest_wins_(eq == equal_keys::newest_wins),
        skip_deletions_(del == deletions::skip) {
    for (std::size_t i = 0; i < sources_.size(); ++i) load(i);
  }

  status next() {
    top_ = none;
    for (;;) {
      for (; tied_count_ > 0; --tied_count_) {
        std::size_t i = tied_[tied_count_ - 1];
        MAGNETITE_TRY(sources_[i].step());
        load(i);
      }
      std::size_t top = none;
      std::string_view top_key;
      for (std::size_t i = 0; i < heads_.size(); ++i) {
        const head& h = heads_[i];
        if (!h.valid) continue;
        if (top != none) {
          int c = h.key.compare(top_key);
          if (c == 0) {
            if (newest_wins_) tied_[tied_count_++] = i;
            continue;
          }
          if (forward_ ? c > 0 : c < 0) continue;
        }
        top = i;
        top_key = h.key;
        tied_[0] = i;
        tied_count_ = 1;
      }
      if (top == none) return status::ok();
      if (!skip_deletions_ || !sources_[top].deletion()) {
        top_ = top;
        return status::ok();
      }
    }
  }

  bool valid() const noexcept { return top_ != none; }
  // The current entry's key, as its source gives it.
  decltype(auto) key() const { return sources_[top_].key(); }
  // The source that decides the current entry, on it.
  const Source& top() const noexcept { return sources_[top_]; }
  Source& top() noexcept { return sources_[top_]; }

  // A merging cursor is itself a source (one that never yields a deletion
  // under deletions::skip), so merges nest.
  bool deletion() const { return sources_[top_].deletion(); }
  status step() { return next(); }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  struct head {
    std::string_view key;
    bool valid = false;
  };

  void load(std::size_t i) {
    heads_[i].valid = sources_[i].valid();
    if (heads_[i].valid) heads_[i].key = sources_[i].key();
  }

  std::vector<Source> sources_;
  std::vector<head> heads_;
  std::vector<std::size_t> tied_;  // [0, tied_count_): a fixed array, no growth in next()
  std::size_t tied_count_ = 0;
  std::size_t top_ = none;
  bool forward_;
  bool newest_wins_;
  bool skip_deletions_;
};

}  // namespace magnetite
