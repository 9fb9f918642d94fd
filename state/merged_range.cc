#include "state/merged_range.h"

#include <algorithm>

#include "state/state_reader.h"

namespace magnetite::state::detail {

range_side::range_side(const overlay& ov, const std::string& lo, const std::string& hi, bool forward) {
  for (auto it = ov.lower_bound(lo); it != ov.end() && it->first < hi; ++it) pending_.push_back(&*it);
  if (!forward) std::reverse(pending_.begin(), pending_.end());
}

status range_side::fetch() {
  // Forward the rest starts at the resume key; backward it ends there.
  std::string_view from = lo_, to = hi_;
  if (run_.resume) (forward_ ? from : to) = *run_.resume;
  auto next = view_->read_range(from, to, view_chunk, !forward_);
  if (!next) return next.error();
  run_ = std::move(*next);
  at_ = 0;
  return status::ok();
}

status merged_range::open() {
  bool forward = dir_ == direction::forward;
  range_side shard(view_, lo_, hi_, forward, hide_view_);
  MAGNETITE_TRY(shard.open());
  std::vector<range_side> sides;
  sides.emplace_back(ov_, lo_, hi_, forward);
  sides.push_back(std::move(shard));
  merge_.emplace(std::move(sides), forward ? scan_direction::forward : scan_direction::backward);
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
    auto found = item_of(side.live(), what_);
    if (!found) return found.error();
    out.emplace_back(std::string(merge_->key()), std::move(found->value));
  }
  if (left_) *left_ -= out.size();
  return out;
}

}  // namespace magnetite::state::detail
