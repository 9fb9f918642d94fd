// backup: incremental online backups of a database, and restoring one
// (docs/formats/backup.md for the directory, docs/embedding.md for the calls).
//
// database::backup(dest) copies one version of the database into the backup
// directory `dest`: only the tree nodes `dest` does not hold yet (a walk
// that descends only where the trees differ), while the database keeps
// serving reads and durable writes. Several versions share one directory.
// A backup is complete once the call returns ok; a crash or an error before
// that leaves `dest` holding the previous complete backup.
//
// restore_backup() makes a new database directory that opens with exactly a
// backed-up version; verify_backup() reads a backup back and reports damage;
// list_backup() says which versions it holds. All three take the backup
// directory's lock: one of them (or a backup) at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "magnetite/config.h"
#include "magnetite/hash128.h"
#include "magnetite/status.h"

namespace magnetite {

// What database::backup did.
struct backup_report {
  hash128 version;                  // the combined root backed up
  std::string label;                // the tag's name it was chosen by, if any
  std::uint64_t nodes_shipped = 0;  // tree nodes the backup lacked and now holds
  std::uint64_t bytes_shipped = 0;  // their encodings, uncompressed
  std::uint64_t depth = 0;          // levels of the deepest walk (the tree's height on a full backup)
  std::size_t versions_held = 0;    // versions in the backup directory now
};

// How database::backup runs.
struct backup_options {
  // A retained checkpoint's combined root (32 hex digits) or a tag's name
  // (which becomes the version's label in the backup); none: commit first
  // and back up that checkpoint.
  std::optional<std::string> version;
  // At most this many bytes of the backup's packs written a second; 0: as
  // fast as the copy goes. The copy takes a core while it runs: on a machine
  // whose cores the writers need, a rate leaves them their share (on 2
  // cores, 32 MiB/s kept durable writes at 0.8x or more, where a full-speed
  // copy kept 0.7x: docs/benchmarks.md, "Backups and restores").
  std::uint64_t max_bytes_per_second = 0;
};

struct backup_version {
  hash128 version;
  std::string label;          // empty: none
  std::uint64_t made_ns = 0;  // when it was backed up (the database's clock)
};

struct backup_verify_report {
  std::size_t versions = 0;
  std::uint64_t nodes = 0;            // distinct nodes read back from the packs and checked
  std::uint64_t bytes = 0;            // pack bytes read back against their sums
  std::vector<std::string> problems;  // each names the file
};

// Oldest first.
MAGNETITE_API result<std::vector<backup_version>> list_backup(const std::string& backup_dir);
// `version`: a backed-up combined root (32 hex digits) or a label; none: the
// newest. `dir` must not exist. The new database holds that version as its
// current state and as its one retained checkpoint, with the backed-up
// shard count; it is built under `dir`.restoring and renamed to `dir` only
// once complete and durable, so a failure (a damaged backup: corruption,
// naming the file) leaves no `dir`.
MAGNETITE_API status restore_backup(const std::string& backup_dir, const std::string& dir,
                                    std::optional<std::string_view> version = {});
// Reads every pack back against its checksum and every node of every version
// from its pack. Damage is in the report; an error only when the backup
// cannot be read at all (no backup, a damaged BACKUP file).
MAGNETITE_API result<backup_verify_report> verify_backup(const std::string& backup_dir);

}  // namespace magnetite
