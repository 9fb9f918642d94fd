// merged_cursor: the live entries of a user-key range [from, to) across shard
// views, merged in key order (a merging_cursor over the shards) and pulled a
// chunk at a time, on the calling thread (no message to any actor).
//
// Contract: each shard's view is pinned when the cursor is made, so the cursor
// reads one snapshot per shard however long it lives; views of different
// shards are not one snapshot (as for get). An entry is what a get at `now_ns`
// would return: expired values are skipped. At most `chunk` entries per shard
// are held at a time. `to` empty: no upper bound.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/merging_cursor.h"
#include "engine/read_view.h"

namespace magnetite {

struct range_chunk {
  std::vector<std::pair<std::string, std::string>> entries;  // user key, value
  bool more = false;                                         // entries of the range remain after these
};

// Up to `limit` live entries of [from, to) in one view, in key order.
result<range_chunk> read_range_chunk(const read_view& view, std::string_view from, std::string_view to,
                                     std::size_t limit, std::uint64_t now_ns);

// One shard's entries of the range for merged_cursor's merging_cursor: its
// view read a chunk at a time, the current entry at the front.
class shard_chunks {
 public:
  shard_chunks(std::shared_ptr<const read_view> view, std::string from, std::string to, std::uint64_t now_ns,
               std::size_t chunk)
      : view_(std::move(view)), resume_(std::move(from)), to_(std::move(to)), now_ns_(now_ns), chunk_(chunk) {}

  bool valid() const noexcept { return !buffered_.empty(); }
  const std::string& key() const noexcept { return buffered_.front().first; }
  bool deletion() const noexcept { return false; }  // a chunk holds live entries only
  std::pair<std::string, std::string>& front() noexcept { return buffered_.front(); }
  // Past the front entry, reading the next chunk when none is left. After a
  // failed read nothing is buffered, so a repeat only reads again.
  status step() {
    if (!buffered_.empty()) buffered_.pop_front();
    return fill();
  }
  // Reads the next chunk if none is buffered and the range goes on.
  status fill() { return buffered_.empty() && !exhausted_ ? read_chunk() : status::ok(); }

 private:
  status read_chunk();

  std::shared_ptr<const read_view> view_;
  std::deque<std::pair<std::string, std::string>> buffered_;
  std::string resume_;  // the next chunk starts here
  std::string to_;
  std::uint64_t now_ns_;
  std::size_t chunk_;
  bool exhausted_ = false;
};

class merged_cursor {
 public:
  merged_cursor(std::vector<std::shared_ptr<const read_view>> views, std::string from, std::string to,
                std::uint64_t now_ns, std::size_t chunk = 256);

  // Moves to the next entry: true (key() and value() set), or false at the end.
  result<bool> next();
  const std::string& key() const noexcept { return current_.first; }
  const std::string& value() const noexcept { return current_.second; }

 private:
  // Until the first next(), which reads the first chunk of each, the
  // shards; from then on, their merge. A key routed to two shards is in
  // both: each entry is one (equal_keys::all), the lower shard's first.
  std::vector<shard_chunks> shards_;
  std::optional<merging_cursor<shard_chunks>> merge_;
  std::pair<std::string, std::string> current_;
};

}  // namespace magnetite
