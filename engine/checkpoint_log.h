// checkpoint_log: the checkpoints database::commit made, kept so that an
// operator can name one later (`diff`), and `gc` and `verify` keep and check
// their trees. The file is CHECKPOINTS in the data directory
// (docs/formats/checkpoints.md), one line a commit:
//
//   <combined> <root of shard 0> ... <root of shard N-1>\n     (32 hex digits each)
//
// combined = XXH3-128 of the shard roots' 16-byte forms in shard order, so a
// line checks itself. Invariants:
// - A line is appended (and fdatasynced) only after every shard's checkpoint
//   it names is durable, so every root of a line is in its shard's store
//   unless gc dropped it (gc keeps the roots of the lines kept here).
// - A crash mid-append leaves a last line without its newline: open() cuts it
//   (it names a checkpoint that was never acknowledged). A complete line that
//   fails its check is damage: it is skipped and reported by damage().
// - At most `retained` lines are kept (given to open, at least 1; the newest
//   are kept when a file holds more): once the file holds twice that, it is
//   rewritten with the newest `retained` (temporary file, fsync, rename,
//   directory fsync), so a crash leaves the old file or the new one.
// - A failed append changes no entry and may leave a fragment at the end of
//   the file; the next append (or repair) therefore rewrites the whole file.
// Not thread-safe: the database serialises its calls.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/hash128.h"
#include "magnetite/history.h"

namespace magnetite {

class checkpoint_log {
 public:
  static constexpr std::size_t default_retained = 16;
  static constexpr std::string_view file_name = "CHECKPOINTS";

  // Reads `dir`/CHECKPOINTS (none: empty) of a database of `shards` shards,
  // cutting a torn last line; keeps the newest `retained` (at least 1).
  static result<checkpoint_log> open(env& fs, std::string dir, std::size_t shards,
                                     std::size_t retained = default_retained);
  std::size_t retained() const noexcept { return retained_; }

  static hash128 combine(std::span<const hash128> roots);
  // A line's fields, "<combined> <root 0> ... <root N-1>" without its
  // newline; and back, or corruption saying why (a field that is not 32 hex
  // digits, another root count, a combined root that does not match).
  static std::string format(const checkpoint& c);
  static result<checkpoint> parse(std::string_view fields, std::size_t shards);

  // Oldest first.
  const std::deque<checkpoint>& entries() const noexcept { return entries_; }
  const checkpoint* find(const hash128& combined) const noexcept;
  // Complete lines that failed their check at open, each with its offset.
  const std::vector<std::string>& damage() const noexcept { return damage_; }
  // Reads the file again and reports what differs from what open() read and
  // append() wrote since: damaged lines, a fragment at its end, checkpoints
  // missing or changed. Changes nothing.
  std::vector<std::string> check_file() const;
  // The roots of shard i that the kept checkpoints name, oldest first.
  std::vector<hash128> roots_of(std::size_t shard) const;

  // Appends a checkpoint: durable and retained when it returns ok; on an
  // error, not retained.
  status append(const checkpoint& c);
  // Rewrites the file with the retained checkpoints only, dropping damaged
  // lines (damage() is empty after it).
  status repair();

 private:
  checkpoint_log(env& fs, std::string dir, std::size_t shards, std::size_t retained)
      : fs_(&fs), dir_(std::move(dir)), shards_(shards), retained_(retained) {}
  std::string path() const { return path_join(dir_, file_name); }
  status append_line(const checkpoint& c);
  status rewrite(std::deque<checkpoint> next);

  env* fs_;
  std::string dir_;
  std::size_t shards_;
  std::size_t retained_;
  std::deque<checkpoint> entries_;
  std::size_t lines_in_file_ = 0;
  std::vector<std::string> damage_;
  bool needs_rewrite_ = false;
};

}  // namespace magnetite
