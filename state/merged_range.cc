#include "state/merged_range.h"

#include <algorithm>

#include "state/state_reader.h"

namespace magnetite::state::detail {

range_side::range_side(const overlay& ov, const std::string& lo, const std::string& hi, bool forward) {
  for (auto it = ov.lower_bound(lo); it != ov.end() && it->first < hi; ++it) pending_.push_back(&*it);
  if (!forward) std::reverse(pending_.begin(), pending_.end());
}

status merged_range::open() {
  bool forward = dir_ == direction::forward;
  scan_direction dir = forward ? scan_direction::forward : scan_direction::backward;
  view_from_ = keyspace::data_key(lo_);
  view_to_ = keyspace::data_key(hi_);
  auto view = view_cursor::open(*view_, view_from_, view_to_, dir);
  if (!view) return view.error();
  MAGNETITE_TRY(view->next());
  std::vector<range_side> sides;
  sides.emplace_back(ov_, lo_, hi_, forward);
  sides.emplace_back(std::move(*view), hide_view_);
  merge_.emplace(std::move(sides), dir);
  return status::ok();
}

result<std::vector<std::pair<std::string, item>>> merged_range::next(std::size_t max) {
  std::size_t want = left_ ? std::min(max, *left_) : max;
  std::vector<std::pair<std::string, item>> out;
  if (want == 0 || lo_ >= hi_) return out;
  if (!merge_) MAGNETITE_TRY(open());
  // Steps past the last entry taken only when another is wanted: a chunk
  // reads nothing past its last entry.
  while (out.size() < want) {
    MAGNETITE_TRY(merge_->next());
    if (!merge_->valid()) break;
    const range_side& side = merge_->top();
    if (!side.is_view()) {
      out.emplace_back(std::string(merge_->key()), side.buffered());
      continue;
    }
    auto found = live_item(side.stored(), now_, what_);
    if (!found) return found.error();
    if (*found) out.emplace_back(std::string(merge_->key()), std::move((*found)->value));
  }
  if (left_) *left_ -= out.size();
  return out;
}

}  // namespace magnetite::state::detail
