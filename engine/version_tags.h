// version_tags: the versions a database keeps by name (database::tag), in the
// file TAGS of its data directory (docs/formats/tags.md):
//
//   magnetite-tags 1\n
//   <name> <combined> <root of shard 0> ... <root of shard N-1>\n   (one a tag, by name)
//   end <tags> <XXH3-128 of every byte before this line>\n
//
// The header and the end line are engine/sealed_text.h's frame. Invariants:
// - The file is only ever replaced whole (replace_file): a crash leaves the
//   names before the call or the names after it, never a mix.
// - A tag's checkpoint was retained (or tagged) when it was named, so its
//   roots are in the shards' stores; the database keeps them there (gc,
//   reclamation) until the name is removed.
// - A file that fails any check is refused whole by open() with the offset
//   and the reason: dropping a name silently would let gc take its version.
// - Names are 1 to max_name_bytes of [A-Za-z0-9._-], not beginning with '-'
//   or '.', and not 32 hex digits (those read as a combined root); at most
//   max_tags of them.
// Not thread-safe: the database serialises its calls.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/hash128.h"
#include "magnetite/history.h"

namespace magnetite {

class version_tags {
 public:
  static constexpr std::string_view file_name = "TAGS";
  static constexpr std::size_t max_name_bytes = 64;
  static constexpr std::size_t max_tags = 1000;

  // Reads `dir`/TAGS (none: no names) of a database of `shards` shards.
  static result<version_tags> open(env& fs, std::string dir, std::size_t shards);
  // invalid_argument saying which rule `name` breaks.
  static status check_name(std::string_view name);

  // By name.
  const std::map<std::string, checkpoint, std::less<>>& entries() const noexcept { return entries_; }
  const checkpoint* find(std::string_view name) const noexcept;
  // A checkpoint some name keeps, by its combined root.
  const checkpoint* find(const hash128& combined) const noexcept;
  // The roots of shard i the names keep.
  std::vector<hash128> roots_of(std::size_t shard) const;

  // Names `c`, durably when it returns ok. A name that already names `c`:
  // ok, nothing written. A name in use for another version, a bad name, or
  // one too many: invalid_argument, nothing changes.
  status set(std::string_view name, const checkpoint& c);
  // Removes a name, durably when it returns ok; not_found if there is none,
  // invalid_argument for a name no tag could have.
  // Returns the version it named.
  result<checkpoint> remove(std::string_view name);
  // Reads the file again and reports how it differs from the names held
  // (damage, or another set of names). Changes nothing.
  std::vector<std::string> check_file() const;

 private:
  version_tags(env& fs, std::string dir, std::size_t shards) : fs_(&fs), dir_(std::move(dir)), shards_(shards) {}
  std::string path() const { return path_join(dir_, file_name); }
  // The entries change only once the file holding `next` is in place.
  status replace(std::map<std::string, checkpoint, std::less<>> next);

  env* fs_;
  std::string dir_;
  std::size_t shards_;
  std::map<std::string, checkpoint, std::less<>> entries_;
};

}  // namespace magnetite
