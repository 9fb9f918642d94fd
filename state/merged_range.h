// merged_range: the keys of [lo, hi) of a keyed-state collection as a scan
// sees them: the handle's buffered writes (an overlay) merged over a pinned
// view, in either direction, pulled chunk by chunk. One merging_cursor does
// the merge: the overlay first, so a buffered write or delete hides the
// view's entry of its key; with `hide_view` (a buffered clear) every entry of
// the view counts as deleted.
//
// Contract: the view and a copy of the overlay are taken when the range is
// made; later writes to the handle do not show. The view is read lazily: the
// first chunk opens it, and a chunk reads no entry past its last. An expired
// entry of the view is skipped; a corrupt one fails the chunk. Exhausted
// stays exhausted (the cursor<T> that wraps a range closes it on an error).
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

#include "engine/keyspace.h"
#include "engine/merging_cursor.h"
#include "engine/read_view.h"
#include "engine/view_cursor.h"
#include "magnetite/state/keyed_state.h"

namespace magnetite::state::detail {

// Pending writes by encoded state key: an item, or nullopt for a delete.
using overlay = std::map<std::string, std::optional<item>>;

// One side of a merged_range for merging_cursor: the overlay's keys of the
// range in scan order, or the view's entries (keys as state keys, without
// the data tag).
class range_side {
 public:
  range_side(const overlay& ov, const std::string& lo, const std::string& hi, bool forward);
  range_side(view_cursor view, bool hidden) : view_(std::move(view)), hidden_(hidden) {}

  bool valid() const { return view_ ? view_->valid() : at_ < pending_.size(); }
  std::string_view key() const { return view_ ? keyspace::user_key_of(view_->key()) : pending_[at_]->first; }
  bool deletion() const { return view_ ? hidden_ : !pending_[at_]->second; }
  status step() {
    if (view_) return view_->next();
    ++at_;
    return status::ok();
  }

  bool is_view() const noexcept { return view_.has_value(); }
  const item& buffered() const { return *pending_[at_]->second; }  // the overlay's item
  std::string_view stored() const { return view_->value(); }       // the view's stored bytes

 private:
  std::vector<const overlay::value_type*> pending_;
  std::size_t at_ = 0;
  std::optional<view_cursor> view_;
  bool hidden_ = false;
};

class merged_range {
 public:
  merged_range(std::shared_ptr<const read_view> view, std::uint64_t now, overlay ov, bool hide_view, std::string lo,
               std::string hi, direction dir, std::optional<std::size_t> limit, std::string what)
      : view_(std::move(view)),
        now_(now),
        ov_(std::move(ov)),
        hide_view_(hide_view),
        lo_(std::move(lo)),
        hi_(std::move(hi)),
        dir_(dir),
        left_(limit),
        what_(std::move(what)) {}

  // The view's cursor views view_from_ and view_to_: the range stays put.
  merged_range(const merged_range&) = delete;
  merged_range& operator=(const merged_range&) = delete;

  // Up to `max` more entries (fewer only at the end, or at the limit).
  result<std::vector<std::pair<std::string, item>>> next(std::size_t max);

 private:
  status open();

  std::shared_ptr<const read_view> view_;
  std::uint64_t now_;
  overlay ov_;
  bool hide_view_;
  std::string lo_, hi_;
  direction dir_;
  std::optional<std::size_t> left_;
  std::string what_;
  std::string view_from_, view_to_;                  // lo_ and hi_ as tree keys
  std::optional<merging_cursor<range_side>> merge_;  // from the first chunk
};

}  // namespace magnetite::state::detail
