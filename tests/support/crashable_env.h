// crashable_env: the process of a test that dies in a simulated power cut.
//
// fault_env::crash() invalidates the handles open at the crash, but files
// opened afterwards work: a shard of the dead database (restarted by its
// supervisor, or shutting down) could keep writing "after the power cut". So a
// database under test runs on this wrapper, which refuses everything once
// killed; the reopen gets a fresh wrapper over the same fault_env. It can also
// cut the power at a chosen fsync (or directory fsync), before that fsync
// reaches the fault_env: the writes it was to make durable are then the ones
// torn.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "core/fault_env.h"

namespace magnetite::testing {

class crashable_env final : public env {
 public:
  enum class action { crash, tear_last_write, fail };
  struct trap {
    bool dir_sync = false;        // a directory fsync (else a file fsync)
    std::string match;            // substring of the path (a directory: exact path)
    int nth = 1;                  // the n-th matching fsync from now
    action act = action::crash;
    fault_env::unsynced mode = fault_env::unsynced::lose;
    std::uint64_t seed = 0;
    std::size_t keep = 0;         // tear_last_write: bytes of the last write kept
  };

  explicit crashable_env(fault_env& fe) : fe_(fe) {}

  void arm(trap t) {
    std::lock_guard lk(mu_);
    trap_ = std::move(t);
  }
  void disarm() {
    std::lock_guard lk(mu_);
    trap_.reset();
  }
  // The path a power-cut trap fired on, empty if none did.
  std::string fired() const {
    std::lock_guard lk(mu_);
    return fired_;
  }
  // The power cut: from now on this process can do nothing.
  void kill() { dead_ = true; }
  bool dead() const { return dead_; }

  // A trap that fires here does its action and returns the status the call gets.
  std::optional<status> hit(bool dir_sync, const std::string& path) {
    std::lock_guard lk(mu_);
    if (!trap_ || trap_->dir_sync != dir_sync) return std::nullopt;
    bool matches = dir_sync ? path == trap_->match : path.find(trap_->match) != std::string::npos;
    if (!matches || --trap_->nth > 0) return std::nullopt;
    trap t = *trap_;
    trap_.reset();
    if (t.act == action::fail)
      return status::io_error(fmt::format("fsync {}: Input/output error (injected)", path));
    fired_ = path;
    dead_ = true;
    if (t.act == action::tear_last_write) fe_.crash_tearing_last_write(path, t.keep);
    else fe_.crash(t.mode, t.seed);
    return status::io_error(fmt::format("fsync {}: power cut (simulated)", path));
  }

  status alive(const std::string& path) const {
    if (dead_) return status::io_error(fmt::format("{}: the process died in a simulated power cut", path));
    return status::ok();
  }

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override;
  status create_dir(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    return fe_.create_dir(path);
  }
  status sync_dir(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    if (auto s = hit(true, path)) return *s;
    return fe_.sync_dir(path);
  }
  status rename(const std::string& from, const std::string& to) override {
    MAGNETITE_TRY(alive(from));
    MAGNETITE_TRY(fe_.rename(from, to));
    renamed(from, to);
    return status::ok();
  }
  status remove(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    return fe_.remove(path);
  }
  result<std::vector<std::string>> list(const std::string& dir) override {
    MAGNETITE_TRY(alive(dir));
    return fe_.list(dir);
  }
  result<bool> exists(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    return fe_.exists(path);
  }
  result<bool> is_directory(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    return fe_.is_directory(path);
  }
  result<std::unique_ptr<file_lock>> lock(const std::string& path) override {
    MAGNETITE_TRY(alive(path));
    return fe_.lock(path);
  }

  // Open files are named by their path now, not the one they were opened by:
  // the log writes a segment as .tmp, renames it and keeps the handle, and a
  // torn write must be aimed at the file under its current name.
  void opened(std::string* path) {
    std::lock_guard lk(names_mu_);
    names_.insert(path);
  }
  void closed(std::string* path) {
    std::lock_guard lk(names_mu_);
    names_.erase(path);
  }
  std::string name_of(const std::string* path) const {
    std::lock_guard lk(names_mu_);
    return *path;
  }

 private:
  void renamed(const std::string& from, const std::string& to) {
    std::lock_guard lk(names_mu_);
    for (auto* p : names_)
      if (*p == from) *p = to;
  }

  mutable std::mutex names_mu_;
  std::set<std::string*> names_;
  fault_env& fe_;
  std::atomic<bool> dead_{false};
  mutable std::mutex mu_;
  std::optional<trap> trap_;
  std::string fired_;
};

class crashable_file final : public file {
 public:
  crashable_file(crashable_env& e, std::unique_ptr<file> f, std::string path)
      : e_(e), f_(std::move(f)), path_(std::move(path)) {
    e_.opened(&path_);
  }
  ~crashable_file() override { e_.closed(&path_); }
  status append(std::string_view data) override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->append(data);
  }
  status write_at(std::uint64_t offset, std::string_view data) override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->write_at(offset, data);
  }
  result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->read_at(offset, n, scratch);
  }
  status sync() override {
    MAGNETITE_TRY(e_.alive(path_));
    if (auto s = e_.hit(false, e_.name_of(&path_))) return *s;
    return f_->sync();
  }
  status truncate(std::uint64_t size) override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->truncate(size);
  }
  status preallocate(std::uint64_t size) override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->preallocate(size);
  }
  result<std::uint64_t> size() override {
    MAGNETITE_TRY(e_.alive(path_));
    return f_->size();
  }

 private:
  crashable_env& e_;
  std::unique_ptr<file> f_;
  std::string path_;
};

inline result<std::unique_ptr<file>> crashable_env::open(const std::string& path, open_mode mode) {
  MAGNETITE_TRY(alive(path));
  auto f = fe_.open(path, mode);
  if (!f) return f.error();
  return std::unique_ptr<file>(new crashable_file(*this, std::move(*f), path));
}

}  // namespace magnetite::testing
