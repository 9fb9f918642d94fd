// range_cursor: the live entries of a key range across every shard, in key
// order, pulled a chunk at a time on the calling thread (database::scan).
//
// Contract: each shard's view is pinned when the cursor is made, so the cursor
// reads one snapshot per shard however long it lives (views of different
// shards are not one snapshot, as for get); a view it holds keeps that
// version's tree nodes from gc. An entry is what a get would return when the
// cursor was made: expired values are skipped.
#pragma once

#include <memory>
#include <string>

#include "magnetite/config.h"
#include "magnetite/status.h"

namespace magnetite {

class merged_cursor;  // the engine's side

class MAGNETITE_API range_cursor {
 public:
  explicit range_cursor(std::unique_ptr<merged_cursor> engine) noexcept;
  range_cursor(range_cursor&&) noexcept;
  range_cursor& operator=(range_cursor&&) noexcept;
  ~range_cursor();

  // Moves to the next entry: true (key() and value() set), or false at the end.
  result<bool> next();
  const std::string& key() const noexcept;
  const std::string& value() const noexcept;

 private:
  std::unique_ptr<merged_cursor> engine_;
};

}  // namespace magnetite
