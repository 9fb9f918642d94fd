#include "engine/data_directory.h"

#include <cstdio>
#include <vector>

#include <fmt/format.h>

namespace magnetite {

std::string shard_dir(const std::string& dir, std::size_t i) { return fmt::format("{}/shard-{:03}", dir, i); }

namespace {

std::string manifest_text(std::size_t shards) { return fmt::format("magnetite-manifest 1\nshards {}\n", shards); }

}  // namespace

status check_data_directory(env& fs, const std::string& dir) {
  for (std::string p = dir; !p.empty();) {
    auto exists = fs.exists(p);
    if (exists && !*exists) return status::ok();  // made by open
    if (exists) {
      auto is_dir = fs.is_directory(p);
      if (!is_dir) return is_dir.error();
      if (*is_dir) return status::ok();
      return status::invalid_argument(p == dir ? fmt::format("data directory {} is not a directory", dir)
                                               : fmt::format("data directory {}: {} is not a directory", dir, p));
    }
    // stat failed (ENOTDIR: a parent is a file): look at the parent.
    auto slash = p.find_last_of('/');
    if (slash == std::string::npos || slash == 0) return exists.error();
    p.resize(slash);
  }
  return status::ok();
}

namespace {
std::string who_may(std::uint32_t mode) {
  bool write = (mode & 0022) != 0;
  bool read = (mode & 0044) != 0;
  return read && write ? "read and write" : write ? "write" : read ? "read" : "enter";
}
}  // namespace

std::vector<std::string> exposure_warnings(env& fs, const std::string& dir) {
  std::vector<std::string> out;
  auto top = fs.permissions(dir);
  if (!top) return out;
  if (*top & 0077)
    out.push_back(
        fmt::format("data directory {} is open to others (mode {:04o}): other users of this machine may {} "
                    "it; `chmod 700 {}` makes it private",
                    dir, *top, who_may(*top), dir));
  std::size_t exposed = 0;
  std::string first;
  std::uint32_t first_mode = 0;
  // A data directory is three levels deep (shard-000/wal/segment); the
  // bound keeps a symbolic link that loops from walking forever.
  std::vector<std::pair<std::string, int>> pending{{dir, 0}};
  while (!pending.empty()) {
    auto [d, depth] = std::move(pending.back());
    pending.pop_back();
    auto names = fs.list(d);
    if (!names) continue;
    for (const auto& n : *names) {
      std::string p = path_join(d, n);
      auto mode = fs.permissions(p);
      if (!mode) continue;
      if (*mode & 0077) {
        if (exposed++ == 0) {
          first = p;
          first_mode = *mode;
        }
      }
      auto is_dir = fs.is_directory(p);
      if (is_dir && *is_dir && depth < 4) pending.emplace_back(std::move(p), depth + 1);
    }
  }
  if (exposed > 0)
    out.push_back(
        fmt::format("{} files and directories under {} are open to others (the first: {}, mode {:04o}); "
                    "`chmod -R go-rwx {}` makes them private",
                    exposed, dir, first, first_mode, dir));
  return out;
}

result<std::unique_ptr<file_lock>> lock_data_directory(env& fs, const std::string& dir) {
  auto lock = fs.lock(dir + "/LOCK");
  if (!lock && lock.error().code() == status_code::busy)
    return status::busy(fmt::format("data directory {} is in use by another process", dir));
  return lock;
}

result<std::optional<std::size_t>> read_manifest(env& fs, const std::string& dir) {
  std::string path = dir + "/MANIFEST";
  auto exists = fs.exists(path);
  if (!exists) return exists.error();
  if (!*exists) return std::optional<std::size_t>();
  auto text = read_whole_file(fs, path);
  if (!text) return text.error();
  std::size_t found = 0;
  if (std::sscanf(text->c_str(), "magnetite-manifest 1\nshards %zu\n", &found) != 1 || *text != manifest_text(found)) {
    // A newer magnetite's manifest is refused as such, never guessed at.
    unsigned version = 0;
    int used = 0;
    if (std::sscanf(text->c_str(), "magnetite-manifest %u%n", &version, &used) == 1 && version > 1 &&
        (static_cast<std::size_t>(used) == text->size() || (*text)[static_cast<std::size_t>(used)] == '\n'))
      return status::make(status_code::not_supported, status_category::permanent,
                          fmt::format("{}: format version {} (this build reads version 1): written by a newer "
                                      "magnetite",
                                      path, version));
    return status::corruption(fmt::format("{}: not a magnetite manifest (format version 1)", path));
  }
  return std::optional<std::size_t>(found);
}

namespace {

// The shard directories (shard-NNN) in `dir`, by number.
result<std::vector<std::size_t>> shard_directories(env& fs, const std::string& dir) {
  auto names = fs.list(dir);
  if (!names) return names.error();
  std::vector<std::size_t> out;
  for (const auto& n : *names) {
    std::size_t i = 0;
    int used = 0;
    if (n.starts_with("shard-") && std::sscanf(n.c_str(), "shard-%zu%n", &i, &used) == 1 &&
        static_cast<std::size_t>(used) == n.size())
      out.push_back(i);
  }
  return out;
}

}  // namespace

status check_manifest(env& fs, const std::string& dir, std::size_t shards) {
  std::string path = dir + "/MANIFEST";
  auto recorded = read_manifest(fs, dir);
  if (!recorded) return recorded.error();
  // Shard directories the manifest does not account for: it was edited, or
  // lost, and opening would route keys away from the shards that hold them.
  auto shard_dirs = shard_directories(fs, dir);
  if (!shard_dirs) return shard_dirs.error();
  for (std::size_t i : *shard_dirs) {
    if (!*recorded)
      return status::corruption(
          fmt::format("{} holds {} but no MANIFEST: not opened, it would be taken for a new "
                      "database",
                      dir, shard_dir(dir, i)));
    if (i >= **recorded)
      return status::corruption(
          fmt::format("{} records {} shards but {} exists: the manifest does not match the "
                      "data directory",
                      path, **recorded, shard_dir(dir, i)));
  }
  if (*recorded) {
    if (**recorded != shards)
      return status::invalid_argument(
          fmt::format("{} was created with {} shards; opening it with {} would move keys "
                      "between shards",
                      dir, **recorded, shards));
    // The MANIFEST may be one a failed open renamed into place just before its
    // directory fsync failed: visible, not durable. Shard directories made on
    // its word would then outlive it in a power cut, and the database could
    // not be opened again. So it is made durable before it is trusted.
    return fs.sync_dir(dir);
  }
  // A new database: the manifest appears whole (temp + rename) and durably.
  return replace_file(fs, dir, "MANIFEST", manifest_text(shards));
}

}  // namespace magnetite
