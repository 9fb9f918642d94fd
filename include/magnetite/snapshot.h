// snapshot: a retained checkpoint (or a named version) read as its commit() left it
// (database::at), whatever was written since.
//
// Contract: get, range and scan read each shard as it stood at its
// checkpoint in that commit() (commit() checkpoints the shards one after
// another while writes go on, so a write made during it may be in one
// shard's checkpoint and not another's). Plain keys only: keys that begin
// with FF FF are refused, and scans end before them. TTLs are judged by the
// database's clock at the time of the read, as every read is: a value that
// has expired since is not shown. The shards' roots never move under a
// snapshot, unlike the per-shard views of ordinary reads.
//
// Pinning: while a snapshot lives, gc() and space reclamation (the automatic
// one too) keep every node it can read, even after newer commits push its
// checkpoint out of the retained ones. Destroy it to give that space back.
// A shard that restarts under a snapshot (after a crash of its actor) does
// not know its pins; the snapshot reads on through the node files it holds
// open, which the restarted shard's gc or reclamation may remove from the
// directory: their space then comes back when the snapshot is destroyed.
// A snapshot only reads immutable trees: any thread may use it, several at
// once. Destroy it before its database.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "magnetite/config.h"
#include "magnetite/hash128.h"
#include "magnetite/range_cursor.h"
#include "magnetite/status.h"

namespace magnetite {

class MAGNETITE_API snapshot {
 public:
  struct impl;  // the engine's side
  explicit snapshot(std::unique_ptr<impl> p) noexcept;
  snapshot(snapshot&&) noexcept;
  snapshot& operator=(snapshot&&) noexcept;
  ~snapshot();

  // The checkpoint's combined root: the version this snapshot reads.
  const hash128& version() const noexcept;
  // As database::get, at this version.
  result<std::optional<std::string>> get(std::string_view key, std::optional<std::string_view> routing = {}) const;
  // As database::range and database::scan, at this version.
  result<std::vector<std::pair<std::string, std::string>>> range(std::string_view from, std::string_view to,
                                                                 std::size_t limit) const;
  result<range_cursor> scan(std::string_view from, std::string_view to, std::size_t chunk = 256) const;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace magnetite
