#include "tools/load_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <xxhash.h>

#include "tools/cli_text.h"

namespace magnetite {

std::string load_key(const std::string& prefix, std::uint64_t seed, std::uint64_t i) {
  return fmt::format("{}{}-{}", prefix, seed, i);
}

// Printable bytes drawn from XXH3 of (seed, i, block): a value compresses like
// text, not like a run of one byte.
std::string load_value(std::uint64_t seed, std::uint64_t i, std::size_t size) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string out;
  out.reserve(size);
  for (std::uint64_t block = 0; out.size() < size; ++block) {
    std::uint64_t in[3] = {seed, i, block};
    std::uint64_t h = XXH3_64bits(in, sizeof in);
    for (int k = 0; k < 8 && out.size() < size; ++k, h >>= 8) out.push_back(alphabet[(h & 0xff) % 62]);
  }
  return out;
}

namespace {

// Writers append one at a time: a failed or short write(2) is cut back to the
// line's start before anyone appends again, so a failure leaves no fragment
// that a later line would complete into a line nobody acknowledged.
class ack_log {
 public:
  static result<std::unique_ptr<ack_log>> open(const std::string& path) {
    if (path.empty()) return std::unique_ptr<ack_log>(new ack_log(-1, path));
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return status::io_error(fmt::format("--ack-log {}: {}", path, std::strerror(errno)));
    return std::unique_ptr<ack_log>(new ack_log(fd, path));
  }
  ~ack_log() {
    if (fd_ >= 0) ::close(fd_);
  }
  // One write(2) a line: killed mid-call, the file ends in a torn last line at
  // worst, never a torn line inside it.
  status record(std::string_view key, std::string_view value) {
    if (fd_ < 0) return status::ok();
    std::string line = escape_field(key) + '\t' + escape_field(value) + '\n';
    std::lock_guard lk(mu_);
    if (!broken_.is_ok()) return broken_;
    off_t start = ::lseek(fd_, 0, SEEK_END);
    ssize_t n;
    do n = ::write(fd_, line.data(), line.size());
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(line.size())) return status::ok();
    broken_ = status::io_error(
        fmt::format("writing the ack log {}: {}", path_, n < 0 ? std::strerror(errno) : "short write"));
    if (start >= 0 && ::ftruncate(fd_, start) != 0)
      broken_ = status::io_error(
          fmt::format("{}; and cutting the torn line failed: {}", broken_.message(), std::strerror(errno)));
    return broken_;
  }

 private:
  ack_log(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
  std::mutex mu_;
  status broken_;
};

bool worth_retrying(const status& s) {
  return s.category() == status_category::transient || s.category() == status_category::ambiguous;
}

}  // namespace

result<load_result> run_load(database& db, const load_options& o) {
  return run_load([&db](const std::string& key, const std::string& value) { return db.put(key, value); }, o);
}

result<load_result> run_load(const load_put& put, const load_options& o) {
  if (o.writers == 0) return status::invalid_argument("load: --writers must be at least 1");
  auto log = ack_log::open(o.ack_log);
  if (!log) return log.error();
  std::atomic<std::uint64_t> next{0}, done{0}, retries{0};
  std::atomic<bool> stop{false};
  std::mutex error_mu;
  status error;
  auto start = std::chrono::steady_clock::now();

  auto writer = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      std::uint64_t i = next.fetch_add(1);
      if (i >= o.keys) return;
      std::string key = load_key(o.prefix, o.seed, i);
      std::string value = load_value(o.value_seed.value_or(o.seed), i, o.value_size);
      auto first = std::chrono::steady_clock::now();
      status s;
      for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(100))) {
        s = put(key, value);
        if (s || !worth_retrying(s) || std::chrono::steady_clock::now() - first > o.retry_for) break;
        retries.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(pause);  // the shard is restarting: give it time
      }
      if (s) s = (*log)->record(key, value);
      if (!s) {
        std::lock_guard lk(error_mu);
        if (error.is_ok()) error = s;
        stop = true;
        return;
      }
      if (done.fetch_add(1) + 1 == o.event_at && o.event) o.event();
    }
  };

  std::vector<std::thread> threads;
  for (std::size_t w = 0; w < o.writers; ++w) threads.emplace_back(writer);
  std::atomic<bool> finished{false};
  std::thread watcher;
  if (o.progress) {
    watcher = std::thread([&] {
      while (!finished.load()) {
        o.progress(done.load());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  for (auto& t : threads) t.join();
  finished = true;
  if (watcher.joinable()) watcher.join();
  if (o.progress) o.progress(done.load());
  if (!error.is_ok()) return error;
  load_result out;
  out.written = done.load();
  out.retries = retries.load();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace magnetite
