// backup_manifest: the file BACKUP at the top of a backup directory
// (docs/formats/backup.md): what the backup holds and how to check it.
//
//   magnetite-backup 1\n
//   shards <N>\n
//   store <shard> <position>\n                      one a shard: its node store's committed position
//   pack <shard> <number> <bytes> <XXH3-128>\n       every pack file of those stores, up to the position
//   version <label|-> <made ns> <combined> <root 0> ... <root N-1> <sequence 0> ... <sequence N-1>\n
//   end <lines between the header and this one> <XXH3-128 of every byte before this line>\n
//
// Invariants:
// - A version's roots are complete subtrees in the stores up to their
//   positions: the manifest naming a version is written only after the
//   nodes it needs are durable.
// - `sequence i` is the last log sequence shard i had written when its
//   version was backed up: a restored shard numbers its writes after it, so
//   revisions (docs/formats/state.md) keep growing across a restore.
// - The header and the end line are engine/sealed_text.h's frame.
// - parse() refuses any text that fails a check, saying where and why; a
//   newer format version is not_supported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"
#include "magnetite/history.h"

namespace magnetite {

struct backed_up_version {
  std::string label;  // a tag's name it was backed up by; empty: none
  std::uint64_t made_ns = 0;
  checkpoint version;
  std::vector<std::uint64_t> sequences;  // one a shard
};

struct backed_up_pack {
  std::size_t shard = 0;
  std::uint32_t number = 0;
  std::uint64_t bytes = 0;  // the bytes the sum covers, from the start of the file
  hash128 sum;
};

struct backup_manifest {
  static constexpr std::string_view file_name = "BACKUP";

  std::size_t shards = 0;
  std::vector<std::uint64_t> positions;  // one a shard
  std::vector<backed_up_pack> packs;
  std::vector<backed_up_version> versions;  // oldest first

  std::string text() const;
  // corruption ("offset N: why") or not_supported; the caller names the file.
  static result<backup_manifest> parse(std::string_view text);

  // The newest version whose combined root is `version` (32 hex digits) or
  // whose label is `version`; the newest of all for an empty `version`.
  const backed_up_version* find(std::string_view version) const;
};

}  // namespace magnetite
