#include "core/summing_env.h"

namespace magnetite {

class summing_env::summed_file final : public file {
 public:
  summed_file(std::unique_ptr<file> f, std::shared_ptr<entry> e, std::mutex& mu)
      : f_(std::move(f)), e_(std::move(e)), mu_(&mu) {}

  status append(std::string_view data) override {
    status s = f_->append(data);
    std::lock_guard lk(*mu_);
    // A failed append may have written part of the data: the sum no longer
    // says what the file holds.
    if (s)
      e_->sum.add(data);
    else
      e_->valid = false;
    return s;
  }
  status write_at(std::uint64_t offset, std::string_view data) override {
    forget_sum();
    return f_->write_at(offset, data);
  }
  result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
    return f_->read_at(offset, n, scratch);
  }
  status sync() override { return f_->sync(); }
  status truncate(std::uint64_t size) override {
    forget_sum();
    return f_->truncate(size);
  }
  status preallocate(std::uint64_t size) override {
    forget_sum();
    return f_->preallocate(size);
  }
  result<std::uint64_t> size() override { return f_->size(); }
  void advise_random() override { f_->advise_random(); }

 private:
  void forget_sum() {
    std::lock_guard lk(*mu_);
    e_->valid = false;
  }

  std::unique_ptr<file> f_;
  std::shared_ptr<entry> e_;
  std::mutex* mu_;
};

summing_env::summing_env(env& base, std::string suffix) : base_(&base), suffix_(std::move(suffix)) {}

summing_env::~summing_env() = default;

std::optional<hash128> summing_env::sum_of(const std::string& path, std::uint64_t bytes) const {
  std::lock_guard lk(mu_);
  auto it = sums_.find(path);
  if (it == sums_.end() || !it->second->valid || it->second->sum.bytes() != bytes) return std::nullopt;
  return it->second->sum.digest();
}

void summing_env::forget(const std::string& path) {
  std::lock_guard lk(mu_);
  sums_.erase(path);
}

result<std::unique_ptr<file>> summing_env::open(const std::string& path, open_mode mode) {
  auto f = base_->open(path, mode);
  const bool fresh = mode == open_mode::create_new || mode == open_mode::create_truncate;
  const bool summed =
      path.size() >= suffix_.size() && path.compare(path.size() - suffix_.size(), suffix_.size(), suffix_) == 0;
  std::lock_guard lk(mu_);
  if (!summed) return f;
  // Whatever this open does to the file, an earlier sum no longer holds.
  if (auto it = sums_.find(path); it != sums_.end()) it->second->valid = false;
  if (!f || !fresh) return f;
  auto e = std::make_shared<entry>();
  sums_[path] = e;
  return std::unique_ptr<file>(std::make_unique<summed_file>(std::move(*f), std::move(e), mu_));
}

status summing_env::rename(const std::string& from, const std::string& to) {
  status s = base_->rename(from, to);
  forget(from);
  forget(to);
  return s;
}

status summing_env::remove(const std::string& path) {
  status s = base_->remove(path);
  forget(path);
  return s;
}

}  // namespace magnetite
