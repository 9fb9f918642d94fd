// bench_support: what every benchmark here needs: a steady clock, the keys all
// of them use, `must`, which ends the run on an error (a benchmark that
// carries on past a failed write measures nothing), and `preallocated_file`,
// the raw-fdatasync baseline that wal_bench and db_bench both measure.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/status.h"

namespace magnetite::bench {

using clock_type = std::chrono::steady_clock;

// The wall clock as 2026-11-30T02:21:19Z, for a run's report.
inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// The middle value (the mean of the two middle ones for an even count); 0
// for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// JSON output of the benchmarks' --json: a number (null when not finite)
// and a quoted string.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return std::fabs(v) >= 100 ? fmt::format("{:.1f}", v) : fmt::format("{:.4g}", v);
}

inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\')
      out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
    else
      out += ch;
  }
  return out + "\"";
}

// One figure of a benchmark's report, and the --json form every benchmark
// here prints: {"workload", "case", "threads", "unit", "ours", "peer",
// "peer_value", "ratio", "better", "target", "met"} (see db_bench.cc), and
// with rss_columns also "ours_rss_mib" and "peer_rss_mib" (null if unset).
struct report_row {
  std::string workload, what;
  int threads = 1;
  std::string unit;
  double ours = 0;
  std::string peer;  // empty: no peer
  double peer_value = 0;
  bool lower_is_better = false;
  std::string target;  // empty: none
  std::optional<bool> met;
  // Peak resident memory of the process that ran each engine's part, MiB.
  std::optional<double> ours_rss_mib{}, peer_rss_mib{};
};

inline std::string json_rows(const std::vector<report_row>& rows, bool rss_columns = false) {
  auto optional_number = [](const std::optional<double>& v) { return v ? json_number(*v) : std::string("null"); };
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const report_row& r = rows[i];
    bool peer = !r.peer.empty();
    out += fmt::format(
        "{}\n{{\"workload\":{},\"case\":{},\"threads\":{},\"unit\":{},\"ours\":{},\"peer\":{},\"peer_value\":{},"
        "\"ratio\":{},\"better\":\"{}\",\"target\":{},\"met\":{}{}}}",
        i ? "," : "", json_string(r.workload), json_string(r.what), r.threads, json_string(r.unit), json_number(r.ours),
        peer ? json_string(r.peer) : "null", peer ? json_number(r.peer_value) : "null",
        peer ? json_number(r.ours / r.peer_value) : "null", r.lower_is_better ? "lower" : "higher",
        r.target.empty() ? "null" : json_string(r.target), r.met ? (*r.met ? "true" : "false") : "null",
        rss_columns ? fmt::format(",\"ours_rss_mib\":{},\"peer_rss_mib\":{}", optional_number(r.ours_rss_mib),
                                  optional_number(r.peer_rss_mib))
                    : "");
  }
  return out;
}

// With --json, stdout carries the JSON and the text lines go to stderr as progress.
inline bool json_output = false;

template <class... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(json_output ? stderr : stdout, f, std::forward<Args>(args)...);
  std::fflush(json_output ? stderr : stdout);
}

// 16-byte keys, spread over the key space in a fixed order.
inline std::string key_of(std::uint64_t i) { return fmt::format("{:016}", i * 7919 % 10000000000000000ULL); }

inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `size` bytes that compress to about `ratio` of their size, as RocksDB's
// db_bench makes its values (--compression_ratio, test::CompressibleString):
// max(1, size * ratio) random printable characters (' ' to '~'), repeated
// until `size` bytes. Drawn from `seed`, so the same seed gives the same
// value in every engine and run.
inline void compressible_into(std::uint64_t seed, double ratio, std::size_t size, std::string& out) {
  auto raw = static_cast<std::size_t>(static_cast<double>(size) * ratio);
  raw = std::clamp<std::size_t>(raw, 1, size);
  out.resize(size);
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL, bits = 0;
  for (std::size_t k = 0; k < raw; ++k, bits >>= 8) {
    if (k % 8 == 0) bits = mix64(state += 0x9e3779b97f4a7c15ULL);
    out[k] = static_cast<char>(' ' + (bits & 0xff) % 95);
  }
  for (std::size_t k = raw; k < size; ++k) out[k] = out[k - raw];
}

// A permutation of [0, n) that looks random and needs no memory, so a load
// of keys in random order costs the loader nothing that grows with n (its
// peak RSS is measured): a four-round Feistel network over the smallest even
// power of two at least n, walked again while it lands at or past n (the
// domain is under 4n, so a few steps at most on average).
class shuffled_order {
 public:
  shuffled_order(std::uint64_t n, std::uint64_t seed) : n_(n), seed_(seed) {
    while ((std::uint64_t{1} << (2 * half_bits_)) < n_) ++half_bits_;
  }
  std::uint64_t operator()(std::uint64_t j) const {
    std::uint64_t x = j;
    do x = feistel(x);
    while (x >= n_);
    return x;
  }

 private:
  std::uint64_t feistel(std::uint64_t x) const {
    std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
    std::uint64_t l = x >> half_bits_, r = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      std::uint64_t f = mix64(r ^ (seed_ + round) * 0xd1b54a32d192ed03ULL) & mask;
      std::uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    return (l << half_bits_) | r;
  }
  std::uint64_t n_, seed_;
  unsigned half_bits_ = 1;
};

[[noreturn]] inline void fail(const char* what, const status& s) {
  fmt::print(stderr, "{}: {}: {}\n", program_invocation_short_name, what, s.to_string());
  std::exit(1);
}

template <class T>
T must(result<T> r, const char* what) {
  if (!r) fail(what, r.error());
  return std::move(r).value();
}

inline void must(const status& s, const char* what) {
  if (!s) fail(what, s);
}

// The physical limit of a durable write, in plain POSIX (not magnetite's env):
// records written one after the other with pwrite(2) into a file that was
// filled with zeros and synced before use, each followed by fdatasync. The
// file neither grows nor gets new blocks, so each fdatasync flushes data only,
// which is what a log that reserves its space ahead (magnetite's WAL does) pays
// a sync. At the end of the file the writes wrap around to its start. The file
// is closed, not removed, when the object goes.
class preallocated_file {
 public:
  static result<std::unique_ptr<preallocated_file>> create(const std::string& path, std::uint64_t capacity) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errno_status("open", path);
    std::unique_ptr<preallocated_file> f(new preallocated_file(fd, path, capacity));
    std::vector<char> zero(std::size_t{1} << 20, 0);
    for (std::uint64_t off = 0; off < capacity; off += zero.size())
      if (auto s = f->write_at(zero.data(),
                               static_cast<std::size_t>(std::min<std::uint64_t>(zero.size(), capacity - off)), off);
          !s)
        return s;
    if (::fsync(fd) != 0) return errno_status("fsync", path);
    return f;
  }

  ~preallocated_file() { ::close(fd_); }
  preallocated_file(const preallocated_file&) = delete;
  preallocated_file& operator=(const preallocated_file&) = delete;

  // Writes `record` at the next offset (back at 0 when it would pass the end),
  // then fdatasync.
  status write_and_sync(std::string_view record) {
    if (offset_ + record.size() > capacity_) offset_ = 0;
    if (auto s = write_at(record.data(), record.size(), offset_); !s) return s;
    offset_ += record.size();
    if (::fdatasync(fd_) != 0) return errno_status("fdatasync", path_);
    return status::ok();
  }

 private:
  preallocated_file(int fd, std::string path, std::uint64_t capacity)
      : fd_(fd), path_(std::move(path)), capacity_(capacity) {}

  static status errno_status(const char* op, const std::string& path) {
    return status::io_error(fmt::format("{} {}: {}", op, path, std::strerror(errno)));
  }

  status write_at(const char* p, std::size_t n, std::uint64_t off) {
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(off));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno_status("pwrite", path_);
      }
      p += w;
      n -= static_cast<std::size_t>(w);
      off += static_cast<std::uint64_t>(w);
    }
    return status::ok();
  }

  int fd_;
  std::string path_;
  std::uint64_t capacity_;
  std::uint64_t offset_ = 0;
};

}  // namespace magnetite::bench
