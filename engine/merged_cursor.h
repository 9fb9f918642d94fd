// merged_cursor: the live entries of a user-key range [from, to) across shard
// views, merged in key order and pulled a chunk at a time, on the calling
// thread (no message to any actor).
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
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/read_view.h"
#include "core/status.h"

namespace magnetite {

struct range_chunk {
  std::vector<std::pair<std::string, std::string>> entries;  // user key, value
  bool more = false;  // entries of the range remain after these
};

// Up to `limit` live entries of [from, to) in one view, in key order.
result<range_chunk> read_range_chunk(const read_view& view, std::string_view from, std::string_view to,
                                     std::size_t limit, std::uint64_t now_ns);

class merged_cursor {
 public:
  merged_cursor(std::vector<std::shared_ptr<const read_view>> views, std::string from, std::string to,
               std::uint64_t now_ns, std::size_t chunk = 256);

  // Moves to the next entry: true (key() and value() set), or false at the end.
  result<bool> next();
  const std::string& key() const noexcept { return current_.first; }
  const std::string& value() const noexcept { return current_.second; }

 private:
  struct source {
    std::shared_ptr<const read_view> view;
    std::deque<std::pair<std::string, std::string>> buffered;
    std::string resume;  // the next chunk starts here
    bool exhausted = false;
  };
  status refill(source& s);

  std::vector<source> sources_;
  std::string to_;
  std::uint64_t now_ns_;
  std::size_t chunk_;
  std::pair<std::string, std::string> current_;
};

}  // namespace magnetite
