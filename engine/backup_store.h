// backup_store: a backup directory (docs/formats/backup.md), opened to back
// up into, to check, or to restore from:
//
//   DEST/LOCK        held while one of those runs (busy for a second one)
//   DEST/BACKUP      the manifest (backup_manifest.h)
//   DEST/shard-NNN/  a node store a shard: every node of every version
//
// Contract:
// - open() takes the LOCK and opens each shard's store at the position
//   BACKUP records, which cuts whatever an interrupted backup wrote past it.
//   Without BACKUP the directory is a new backup of `create_shards` shards
//   (refused when none is given); with it, another count is refused.
// - ship() copies into a shard's store the nodes of `root` it lacks, read
//   from `source`, leaves first and every internal node after its children
//   (tree::pull_local), so a node the store holds is a subtree it holds: a
//   later backup descends only where something changed. With a pacer, at
//   most at its rate (bytes written to the store).
// - record() flushes every store (one fdatasync each), sums the pack bytes
//   new since the last record (older packs keep their sums; packs begun by
//   this backup were summed as they were written), and replaces BACKUP
//   whole. Until it returns ok, BACKUP names the previous complete
//   backup and the stores are cut back to it at the next open: a crash at any
//   moment leaves the previous backup or the new one.
// - check() reads every pack back against its sum and every node of every
//   version from its pack; what it finds is reported, naming the file.
// - restore() writes a database directory holding exactly one version:
//   built under `dir`.restoring, synced, and only then renamed to `dir`.
//   A failure leaves no `dir`.
// Not thread-safe: one caller at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/summing_env.h"
#include "engine/backup_manifest.h"
#include "tree/node_store.h"
#include "tree/tree_puller.h"

namespace magnetite {

struct backup_check {
  std::size_t versions = 0;
  std::uint64_t nodes = 0;
  std::uint64_t bytes = 0;  // pack bytes read back against their sums
  std::vector<std::string> problems;
};

class backup_store {
 public:
  static result<std::unique_ptr<backup_store>> open(env& fs, std::string dir,
                                                    std::optional<std::size_t> create_shards = {});
  ~backup_store();
  backup_store(const backup_store&) = delete;
  backup_store& operator=(const backup_store&) = delete;

  const backup_manifest& manifest() const noexcept { return manifest_; }
  const std::string& dir() const noexcept { return dir_; }

  result<tree::pull_stats> ship(std::size_t shard, const hash128& root, tree::node_store& source,
                                byte_pacer* pace = nullptr);
  // `v` names roots every store holds now (shipped); invalid_argument if not.
  // A version the backup holds already is not added twice.
  status record(backed_up_version v);
  backup_check check();
  // `dir` must not exist (invalid_argument); a `dir`.restoring left by an
  // interrupted restore must be removed by the caller first.
  status restore(const backed_up_version& v, const std::string& dir);

 private:
  backup_store(env& fs, std::string dir)
      : fs_(&fs), dir_(std::move(dir)), summed_(std::make_unique<summing_env>(fs, ".pack")) {}
  std::string store_dir(std::size_t shard) const;
  // The manifest's pack lines for every store as it is now, reusing the sums
  // of packs that did not change.
  result<std::vector<backed_up_pack>> sum_packs(const std::vector<std::uint64_t>& positions) const;

  env* fs_;
  std::string dir_;
  // The stores write through it: the packs they start are summed as they
  // are written, and record() reads back only the pack a backup went on
  // with (declared before the stores, which it must outlive).
  std::unique_ptr<summing_env> summed_;
  std::unique_ptr<file_lock> lock_;
  backup_manifest manifest_;
  std::vector<std::unique_ptr<tree::node_store>> stores_;
};

}  // namespace magnetite
