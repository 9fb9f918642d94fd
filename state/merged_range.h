// merged_range: the keys of [lo, hi) of a keyed-state collection as a scan
// sees them: the handle's buffered writes (an overlay) merged over the
// shard's live entries (a state_view), in either direction, pulled chunk by
// chunk. One merging_cursor does the merge: the overlay first, so a buffered
// write or delete hides the shard's entry of its key; with `hide_view` (a
// buffered clear) every entry of the shard counts as deleted.
//
// Contract: the state_view and a copy of the overlay are taken when the
// range is made; later writes to the handle do not show. On a data directory
// the state_view is one pinned view, so the whole range reads one state; on
// a cluster each read of the shard (view_chunk entries at a time) is
// linearizable on its own. The shard is read lazily: the first chunk opens
// it. Expired entries are never seen; a corrupt one fails the chunk.
// Exhausted stays exhausted (the cursor<T> that wraps a range closes it on
// an error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/state_storage.h"
#include "engine/merging_cursor.h"
#include "magnetite/state/keyed_state.h"

namespace magnetite::state::detail {

// Pending writes by encoded state key: an item, or nullopt for a delete.
using overlay = std::map<std::string, std::optional<item>>;

// One side of a merged_range for merging_cursor: the overlay's keys of the
// range in scan order, or the shard's live entries, read view_chunk at a
// time (a failed read changes nothing, so a step may be retried).
class range_side {
 public:
  static constexpr std::size_t view_chunk = 256;

  range_side(const overlay& ov, const std::string& lo, const std::string& hi, bool forward);
  range_side(std::shared_ptr<const state_view> view, std::string lo, std::string hi, bool forward, bool hidden)
      : view_(std::move(view)), lo_(std::move(lo)), hi_(std::move(hi)), forward_(forward), hidden_(hidden) {}

  // The shard side's first chunk.
  status open() { return fetch(); }
  bool valid() const { return view_ ? at_ < run_.entries.size() : at_ < pending_.size(); }
  std::string_view key() const { return view_ ? std::string_view(run_.entries[at_].first) : pending_[at_]->first; }
  bool deletion() const { return view_ ? hidden_ : !pending_[at_]->second; }
  status step() {
    if (view_ && at_ + 1 == run_.entries.size() && run_.resume) return fetch();
    ++at_;
    return status::ok();
  }

  bool is_view() const noexcept { return view_ != nullptr; }
  const item& buffered() const { return *pending_[at_]->second; }     // the overlay's item
  std::string_view live() const { return run_.entries[at_].second; }  // the shard's live value

 private:
  status fetch();

  std::vector<const overlay::value_type*> pending_;
  std::size_t at_ = 0;
  std::shared_ptr<const state_view> view_;
  std::string lo_, hi_;
  bool forward_ = true;
  bool hidden_ = false;
  state_range run_;
};

class merged_range {
 public:
  merged_range(std::shared_ptr<const state_view> view, overlay ov, bool hide_view, std::string lo, std::string hi,
               direction dir, std::optional<std::size_t> limit, std::string what)
      : view_(std::move(view)),
        ov_(std::move(ov)),
        hide_view_(hide_view),
        lo_(std::move(lo)),
        hi_(std::move(hi)),
        dir_(dir),
        left_(limit),
        what_(std::move(what)) {}

  // The merge's sources point into ov_: the range stays put.
  merged_range(const merged_range&) = delete;
  merged_range& operator=(const merged_range&) = delete;

  // Up to `max` more entries (fewer only at the end, or at the limit).
  result<std::vector<std::pair<std::string, item>>> next(std::size_t max);

 private:
  status open();

  std::shared_ptr<const state_view> view_;
  overlay ov_;
  bool hide_view_;
  std::string lo_, hi_;
  direction dir_;
  std::optional<std::size_t> left_;
  std::string what_;
  std::optional<merging_cursor<range_side>> merge_;  // from the first chunk
};

}  // namespace magnetite::state::detail
