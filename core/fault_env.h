// fault_env: an in-memory env for tests that breaks on request.
//
// It models a strict POSIX file system after a power cut: each file has the bytes
// readers see now and the bytes made durable by its last successful sync(); each
// directory has the entries it has now and the ones made durable by its last
// sync_dir(). Writes and directory changes since then are kept, in order, as
// "pending" operations. crash() throws away what was not durable, or keeps a
// prefix of the pending operations with the last one torn, as a real disk may.
//
// Faults it injects:
//   fail_sync(n)          the n-th file sync from now fails with EIO (1 = next);
//                         as Linux does, the unsynced writes are then dropped
//                         from the write-back queue (they never reach the disk)
//                         while reads still see them.
//   fail_dir_sync(n)      the same for sync_dir().
//   fail_write(n, code, keep)  the n-th write from now stores only its first
//                         `keep` bytes and fails with `code` (no_space, io_error).
//   set_space_limit(b)    writes beyond b bytes of total file data store what fits
//                         and fail with no_space.
//   fail_remove(n)        the n-th remove from now fails with EIO.
//   target_paths(s)       aims the four "n-th from now" faults above at one kind
//                         of file: from now on their counters count only
//                         operations on paths that contain the substring s
//                         ("/wal/", ".pack", "CHECKPOINTS"); operations on other
//                         paths neither fail nor move the counters. A directory
//                         sync is matched by the directory's path plus '/', so
//                         "/wal/" also aims at the log's directory. "" (the
//                         default) counts every path; clear_faults() resets it.
//   flip_bit(path, byte, bit)  media corruption: flips a bit now and durably.
//   crash(...)            the process and the machine died: every handle and lock
//                         taken before becomes invalid (operations on it fail).
//   process_crash()       only the process died: handles and locks are gone, but
//                         the page cache (and what it will or will not write
//                         back) stays as it was.
//
// Directories are created durable (their own entry is never lost); the files in
// them are not. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"

namespace magnetite {

class fault_env final : public env {
 public:
  struct counters {
    std::uint64_t file_syncs = 0;  // successful file syncs
    std::uint64_t dir_syncs = 0;   // successful directory syncs
    std::uint64_t writes = 0;      // append / write_at calls that stored bytes
    std::uint64_t bytes_written = 0;
  };

  enum class unsynced {
    lose,    // every pending write and directory change is lost
    keep,    // every pending write and directory change survives
    random,  // a random prefix survives, the last surviving write possibly torn
    reorder, // each 512-byte sector of each write survives or not on its own
             // (truncations apply in order); directories keep a random prefix
  };

  fault_env();
  ~fault_env() override;

  // ---- env ----
  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override;
  status create_dir(const std::string& path) override;
  status sync_dir(const std::string& path) override;
  status rename(const std::string& from, const std::string& to) override;
  status remove(const std::string& path) override;
  result<std::vector<std::string>> list(const std::string& dir) override;
  result<bool> exists(const std::string& path) override;
  result<bool> is_directory(const std::string& path) override;
  result<std::unique_ptr<file_lock>> lock(const std::string& path) override;

  // ---- faults ----
  void fail_sync(std::uint64_t nth);
  void fail_dir_sync(std::uint64_t nth);
  void fail_write(std::uint64_t nth, status_code code, std::size_t keep_bytes = 0);
  void fail_remove(std::uint64_t nth);
  void set_space_limit(std::optional<std::uint64_t> bytes);
  void target_paths(std::string substring);
  // Flips bit `bit` (0-7) of byte `offset` of the file, in its current and its
  // durable contents. Returns false if the file or the byte does not exist.
  bool flip_bit(const std::string& path, std::uint64_t offset, int bit);
  void clear_faults();

  // ---- crashes ----
  void crash(unsynced mode = unsynced::lose, std::uint64_t seed = 0);
  void process_crash();
  // A crash in which `path` keeps all its pending writes except that only the
  // first `keep_bytes` of the last one reach the disk; every other file and every
  // directory loses what was pending.
  void crash_tearing_last_write(const std::string& path, std::size_t keep_bytes);

  // ---- observation ----
  counters stats() const;
  // Current (not necessarily durable) contents; nullopt if there is no such file.
  std::optional<std::string> contents(const std::string& path) const;
  std::optional<std::string> durable_contents(const std::string& path) const;

  struct inode;
  struct directory;
  struct state;

 private:
  std::shared_ptr<state> s_;
};

}  // namespace magnetite
