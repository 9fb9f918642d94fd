#include "engine/backup_store.h"

#include <fmt/format.h>

#include "core/file_sum.h"
#include "engine/checkpoint_log.h"
#include "engine/data_directory.h"
#include "wal/log_writer.h"
#include "wal/recovery.h"

namespace magnetite {

namespace {

// A backup's stores are written once and read back rarely: a small cache.
tree::node_store_options store_options() {
  tree::node_store_options o;
  o.cache_bytes = 8u << 20;
  return o;
}

std::string parent_of(const std::string& path) {
  std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

backup_store::~backup_store() = default;

std::string backup_store::store_dir(std::size_t shard) const { return shard_dir(dir_, shard); }

result<std::unique_ptr<backup_store>> backup_store::open(env& fs, std::string dir,
                                                         std::optional<std::size_t> create_shards) {
  std::unique_ptr<backup_store> b(new backup_store(fs, std::move(dir)));
  const std::string manifest_path = path_join(b->dir_, backup_manifest::file_name);
  auto is_dir = fs.is_directory(b->dir_);
  if (!is_dir) {
    if (is_dir.error().code() != status_code::not_found || !create_shards) {
      if (is_dir.error().code() == status_code::not_found)
        return status::not_found(fmt::format("{} holds no backup", b->dir_));
      return is_dir.error();
    }
    MAGNETITE_TRY(fs.create_dir(b->dir_));
    MAGNETITE_TRY(fs.sync_dir(parent_of(b->dir_)));
  } else if (!*is_dir) {
    return status::invalid_argument(fmt::format("{} is not a directory", b->dir_));
  }
  // A database's directory holds a MANIFEST: its shard directories are no
  // backup's, and must not become one.
  auto database_here = fs.exists(path_join(b->dir_, "MANIFEST"));
  if (!database_here) return database_here.error();
  if (*database_here)
    return status::invalid_argument(fmt::format("{} is a database's directory, not a backup directory", b->dir_));
  auto lock = fs.lock(path_join(b->dir_, "LOCK"));
  if (!lock) {
    if (lock.error().code() == status_code::busy)
      return status::busy(fmt::format("backup directory {} is in use by another backup, restore or verify", b->dir_));
    return lock.error();
  }
  b->lock_ = std::move(*lock);
  auto exists = fs.exists(manifest_path);
  if (!exists) return exists.error();
  if (*exists) {
    auto text = read_whole_file(fs, manifest_path);
    if (!text) return text.error();
    auto m = backup_manifest::parse(*text);
    if (!m) {
      if (m.error().code() == status_code::not_supported)
        return status::make(status_code::not_supported, status_category::permanent,
                            fmt::format("{} is of {}", manifest_path, m.error().message()));
      return status::corruption(fmt::format("{}, {}", manifest_path, m.error().message()));
    }
    if (create_shards && *create_shards != m->shards)
      return status::invalid_argument(
          fmt::format("{} holds a backup of {} shards; this database has {}", b->dir_, m->shards, *create_shards));
    b->manifest_ = std::move(*m);
  } else if (create_shards) {
    b->manifest_.shards = *create_shards;
    b->manifest_.positions.assign(*create_shards, 0);
  } else {
    return status::not_found(fmt::format("{} holds no backup (no {})", b->dir_, backup_manifest::file_name));
  }
  for (std::size_t i = 0; i < b->manifest_.shards; ++i) {
    MAGNETITE_TRY(fs.create_dir(b->store_dir(i)));
    std::uint64_t p = b->manifest_.positions[i];
    auto s = tree::node_store::open(*b->summed_, b->store_dir(i), store_options(),
                                    p ? std::optional<std::uint64_t>(p) : std::nullopt);
    if (!s) return s.error();
    b->stores_.push_back(std::move(*s));
  }
  return b;
}

result<tree::pull_stats> backup_store::ship(std::size_t shard, const hash128& root, tree::node_store& source,
                                            byte_pacer* pace) {
  if (shard >= stores_.size()) return status::invalid_argument(fmt::format("no shard {} in this backup", shard));
  return tree::pull_local(root, source, *stores_[shard], pace);
}

result<std::vector<backed_up_pack>> backup_store::sum_packs(const std::vector<std::uint64_t>& positions) const {
  std::vector<backed_up_pack> out;
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    const std::uint32_t last = tree::position_pack(positions[i]);
    for (std::uint32_t n = 1; n <= last; ++n) {
      std::string path = stores_[i]->pack_path(n);
      std::uint64_t bytes = 0;
      if (n == last) {
        bytes = tree::position_offset(positions[i]);
      } else {
        auto f = fs_->open(path, open_mode::open_existing);
        if (!f) return f.error();
        auto size = (*f)->size();
        if (!size) return size.error();
        bytes = *size;
      }
      backed_up_pack p{i, n, bytes, {}};
      bool known = false;
      for (const auto& old : manifest_.packs)
        if (old.shard == i && old.number == n && old.bytes == bytes) {
          p.sum = old.sum;
          known = true;
        }
      if (!known)
        if (auto streamed = summed_->sum_of(path, bytes)) {
          p.sum = *streamed;
          known = true;
        }
      if (!known) {
        auto sum = file_sum(*fs_, path, bytes);
        if (!sum) return sum.error();
        p.sum = *sum;
      }
      out.push_back(p);
    }
  }
  return out;
}

status backup_store::record(backed_up_version v) {
  if (v.version.roots.size() != stores_.size() || v.sequences.size() != stores_.size())
    return status::invalid_argument("backup: a version of another shard count");
  for (std::size_t i = 0; i < stores_.size(); ++i)
    if (!stores_[i]->contains(v.version.roots[i]))
      return status::invalid_argument(fmt::format("backup: shard {} does not hold root {}", i, v.version.roots[i]));
  backup_manifest next = manifest_;
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    auto p = stores_[i]->flush();
    if (!p) return p.error();
    next.positions[i] = *p;
  }
  auto packs = sum_packs(next.positions);
  if (!packs) return packs.error();
  next.packs = std::move(*packs);
  bool held = false;
  for (auto& old : next.versions)
    if (old.version.combined == v.version.combined) {
      held = true;
      if (old.label.empty()) old.label = v.label;  // now known by a name too
    }
  if (!held) next.versions.push_back(std::move(v));
  MAGNETITE_TRY(replace_file(*fs_, dir_, backup_manifest::file_name, next.text()));
  manifest_ = std::move(next);
  return status::ok();
}

backup_check backup_store::check() {
  backup_check out;
  out.versions = manifest_.versions.size();
  for (const auto& p : manifest_.packs) {
    std::string path = stores_[p.shard]->pack_path(p.number);
    auto sum = file_sum(*fs_, path, p.bytes);
    if (!sum)
      out.problems.push_back(sum.error().message());
    else if (*sum != p.sum)
      out.problems.push_back(fmt::format("{}: its first {} bytes do not match the sum {} records", path, p.bytes,
                                         backup_manifest::file_name));
    out.bytes += p.bytes;
  }
  for (std::size_t i = 0; i < stores_.size(); ++i) {
    std::vector<hash128> roots;
    for (const auto& v : manifest_.versions) roots.push_back(v.version.roots[i]);
    auto c = stores_[i]->check(roots);
    out.nodes += c.nodes;
    for (auto& p : c.problems) out.problems.push_back(fmt::format("shard {}: {}", i, p));
  }
  return out;
}

status backup_store::restore(const backed_up_version& v, const std::string& dir) {
  const std::size_t shards = manifest_.shards;
  auto exists = fs_->exists(dir);
  if (!exists) return exists.error();
  if (*exists) return status::invalid_argument(fmt::format("{} exists: restore makes a new database directory", dir));
  const std::string tmp = dir + ".restoring";
  exists = fs_->exists(tmp);
  if (!exists) return exists.error();
  if (*exists)
    return status::invalid_argument(fmt::format("{} exists (left by an interrupted restore): remove it first", tmp));
  MAGNETITE_TRY(fs_->create_dir(tmp));
  MAGNETITE_TRY(check_manifest(*fs_, tmp, shards));
  for (std::size_t i = 0; i < shards; ++i) {
    const std::string sd = shard_dir(tmp, i);
    MAGNETITE_TRY(fs_->create_dir(sd));
    MAGNETITE_TRY(fs_->create_dir(sd + "/nodes"));
    MAGNETITE_TRY(fs_->create_dir(sd + "/wal"));
    std::uint64_t position = 0;
    {
      auto to = tree::node_store::open(*fs_, sd + "/nodes", store_options(), std::nullopt);
      if (!to) return to.error();
      auto pulled = tree::pull_local(v.version.roots[i], *stores_[i], **to);
      if (!pulled) return pulled.error();
      auto p = (*to)->flush();
      if (!p) return p.error();
      position = *p;
    }
    // A log holding one commit marker, numbered after every write the
    // shard had made: revisions keep growing across the restore.
    wal::recovered_log empty;
    empty.next_sequence = v.sequences[i] + 1;
    empty.repaired = true;
    auto log = wal::log_writer::open(*fs_, sd + "/wal", {}, empty);
    if (!log) return log.error();
    MAGNETITE_TRY((*log)->commit({v.version.roots[i], position}));
    MAGNETITE_TRY(fs_->sync_dir(sd));
  }
  auto checkpoints = checkpoint_log::open(*fs_, tmp, shards);
  if (!checkpoints) return checkpoints.error();
  MAGNETITE_TRY(checkpoints->append(v.version));
  MAGNETITE_TRY(fs_->sync_dir(tmp));
  MAGNETITE_TRY(fs_->rename(tmp, dir));
  return fs_->sync_dir(parent_of(dir));
}

}  // namespace magnetite
