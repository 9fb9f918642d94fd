// env: the file layer every byte magnetite stores goes through, in the spirit of
// LevelDB's Env. Production code uses env::posix(); tests substitute fault_env,
// which can fail, tear, flip and "crash" (see core/fault_env.h).
//
// Contract, for every implementation:
// - Data written through a file is visible to reads at once, but survives a crash
//   only after file::sync() returned ok. A file's directory entry (creation,
//   rename, removal) survives a crash only after env::sync_dir() of its directory
//   returned ok.
// - A failed sync() means the data may or may not be on disk, and retrying does
//   not make it so (the kernel may have dropped the dirty pages): callers treat it
//   as fatal for that file.
// - Errors carry a code: no_space for ENOSPC, not_found for a missing path, busy
//   for a lock held elsewhere, io_error otherwise; messages name the path.
// - Paths are plain strings joined with '/'.
// - What the layer creates on a real file system (files, directories, lock
//   files) is private to the owner: 0600 and 0700 whatever the umask.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace magnetite {

// A file's first `size` bytes mapped read-only into memory, unmapped when
// the last reference goes. The bytes are the file's as they are now: a
// write through the file shows here. Touching a byte past the file's end (a
// file truncated after it was mapped) ends the process (SIGBUS): map only
// files that never shrink while mapped.
class file_mapping {
 public:
  virtual ~file_mapping() = default;
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 protected:
  file_mapping(const char* data, std::size_t size) noexcept : data_(data), size_(size) {}

 private:
  const char* data_;
  std::size_t size_;
};

class file {
 public:
  virtual ~file() = default;

  // Writes at the current end of the file.
  virtual status append(std::string_view data) = 0;
  // Writes at `offset`, extending the file as needed (pwrite).
  virtual status write_at(std::uint64_t offset, std::string_view data) = 0;
  // Reads up to n bytes at offset into scratch; returns how many were read
  // (fewer than n only at the end of the file).
  virtual result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) = 0;
  // fdatasync: the file's data and size become durable.
  virtual status sync() = 0;
  virtual status truncate(std::uint64_t size) = 0;
  // Makes the file at least `size` bytes long, reserving the space on disk
  // (fallocate); the new bytes read as zero. Durable like a write: after sync().
  // Writing later into reserved space changes no block map and no size, which
  // makes its fdatasync cheaper. not_supported where the file system cannot
  // reserve; no_space when it is full. Never shrinks the file.
  virtual status preallocate(std::uint64_t size) = 0;
  virtual result<std::uint64_t> size() = 0;
  // A hint: reads of this file will land at random offsets, so reading ahead
  // of them only fills memory with pages nobody asked for. Nothing else changes.
  virtual void advise_random() {}
  // The first `size` bytes (at most the file's size) mapped read-only, to be
  // read at random (no readahead). not_supported where the env cannot map
  // (the fault-injecting and summing envs: they read through read_at).
  virtual result<std::shared_ptr<const file_mapping>> map(std::size_t size) {
    (void)size;
    return status::make(status_code::not_supported, status_category::permanent, "this env does not map files");
  }
};

// Held while a process owns a data directory; released when destroyed.
class file_lock {
 public:
  virtual ~file_lock() = default;
};

enum class open_mode {
  create_new,     // fail if it exists
  open_existing,  // fail with not_found if it does not
  open_or_create,
  create_truncate,  // create, or empty an existing file
};

class env {
 public:
  virtual ~env() = default;

  // The process-wide POSIX implementation.
  static env& posix();

  virtual result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) = 0;
  // Creates one directory; ok if it already exists as a directory.
  virtual status create_dir(const std::string& path) = 0;
  // fsync of a directory: creations, renames and removals in it become durable.
  virtual status sync_dir(const std::string& path) = 0;
  // Atomically replaces `to` if it exists.
  virtual status rename(const std::string& from, const std::string& to) = 0;
  virtual status remove(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual result<std::vector<std::string>> list(const std::string& dir) = 0;
  virtual result<bool> exists(const std::string& path) = 0;
  virtual result<bool> is_directory(const std::string& path) = 0;
  // Takes an exclusive lock on `path` (created if missing). busy if another
  // holder, in this process or another, has it.
  virtual result<std::unique_ptr<file_lock>> lock(const std::string& path) = 0;
  // The permission bits of `path` (07777 of its mode; of a symbolic link's
  // target, which is what guards the data); not_supported where the layer has none (the test envs),
  // which the checks that read them take as "nothing to report".
  virtual result<std::uint32_t> permissions(const std::string& path) {
    return status::make(status_code::not_supported, status_category::permanent,
                        "permissions of " + path + ": not known to this file layer");
  }
};

inline std::string path_join(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(name);
  return out;
}

// Reads a whole file: a convenience over open + read_at.
result<std::string> read_whole_file(env& e, const std::string& path);
// Gives the small file `dir`/`name` new contents whole or not at all: they go
// to `name`.tmp, which is synced and renamed over the file, and then `dir` is
// synced. Durable when it returns ok; a crash or an error at any step leaves
// the old file or the new one (and perhaps a stray .tmp, which the next call
// empties first).
status replace_file(env& e, const std::string& dir, std::string_view name, std::string_view contents);
// The sizes of the files directly in `dir` added up (subdirectories skipped).
result<std::uint64_t> directory_bytes(env& e, const std::string& dir);

}  // namespace magnetite
