// summing_env: an env that forwards every call to another and keeps, for each
// file it created afresh (create_new or create_truncate) whose name ends in
// `suffix`, the sum of the bytes appended to it so far (sum_stream: what
// file_sum would compute over the file's first bytes). A backup's packs are
// summed this way as they are written instead of being read back.
//
// Invariants: a sum is only ever of bytes handed to append(), in order, from
// the file's first byte; a write_at, truncate or preallocate on the file, or
// a second open of its path, forgets its sum, and sum_of() then answers none
// (the caller reads the file back). A file's sum outlives the file object
// and is kept until forget() or the env goes. Thread-safe; the wrapped env
// must outlive this one.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/env.h"
#include "core/file_sum.h"

namespace magnetite {

class summing_env final : public env {
 public:
  summing_env(env& base, std::string suffix);
  ~summing_env() override;

  // The sum of the first `bytes` bytes of `path`, if it is summed and that
  // is exactly how many were appended.
  std::optional<hash128> sum_of(const std::string& path, std::uint64_t bytes) const;
  void forget(const std::string& path);

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override;
  status create_dir(const std::string& path) override { return base_->create_dir(path); }
  status sync_dir(const std::string& path) override { return base_->sync_dir(path); }
  status rename(const std::string& from, const std::string& to) override;
  status remove(const std::string& path) override;
  result<std::vector<std::string>> list(const std::string& dir) override { return base_->list(dir); }
  result<bool> exists(const std::string& path) override { return base_->exists(path); }
  result<bool> is_directory(const std::string& path) override { return base_->is_directory(path); }
  result<std::unique_ptr<file_lock>> lock(const std::string& path) override { return base_->lock(path); }
  result<std::uint32_t> permissions(const std::string& path) override { return base_->permissions(path); }

 private:
  class summed_file;
  struct entry {
    sum_stream sum;
    bool valid = true;
  };

  env* base_;
  std::string suffix_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<entry>> sums_;
};

}  // namespace magnetite
