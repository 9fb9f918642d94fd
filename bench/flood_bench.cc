// flood_bench: asynchronous writes faster than the disk takes them, with the
// database's bounded admission (docs/embedding.md, "Bounded admission") and
// without it, in one run.
//
//   flood_bench [--seconds S] [--threads T] [--value-bytes B] [--shards N]
//               [--unbounded-writes W] [--keys K] [--dir DIR]
//
// Three cases, each in a child process of its own (the peak RSS reported is
// that child's, from wait4), each on a new data directory:
//   closed     T threads each keep at most 256 put_async in flight: the
//              disk is kept busy and the budget never fills. The throughput
//              without a flood.
//   flood      T threads call put_async as fast as they can for S seconds;
//              `busy` answers are counted and the thread goes on; a further
//              thread makes blocking puts meanwhile and times them (the
//              latency of a blocking write while the budget is full). A
//              thread whose write was refused yields its core once before
//              its next: what any host should do with `busy`.
//   unbounded  the flood with the budget lifted (admission_bytes and
//              _requests of 2^40): T threads submit W writes in all as fast
//              as they can, then wait for every answer. What a flood cost
//              before admission was bounded.
// Throughput counts writes answered ok (durable) a second. The targets
// (issue 25): flood >= 0.9x closed; flood's peak RSS within the budget plus
// a fixed overhead (closed's peak RSS is that overhead's measure).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_support.h"
#include "magnetite/database.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

struct config {
  double seconds = 20;
  int threads = 4;
  std::size_t value_bytes = 1024;
  std::size_t shards = 2;
  std::uint64_t unbounded_writes = 1'000'000;
  // Keys a thread writes, over and over (0: a new key every write). With a
  // bound the data stops growing, so what memory still grows is the flood's.
  std::uint64_t keys = 0;
  std::string dir = "bench-data/flood";
};

// What a child reports: fixed slots, sent back as doubles.
enum slot {
  acked_per_s,
  refused,
  blocking_p50_us,
  blocking_p99_us,
  blocking_max_us,
  blocking_n,
  submit_s,
  drain_s,
  rss_first_quarter_mib,
  rss_rest_mib,
  slots
};

// This process's resident set now (VmRSS), in MiB.
double rss_now_mib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtod(line + 6, nullptr);
  std::fclose(f);
  return kib / 1024;
}

std::unique_ptr<database> open_fresh(const config& c, const std::string& name, bool unbounded) {
  std::string dir = c.dir + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(c.dir);
  database_options o;
  o.dir = dir;
  o.shards = c.shards;
  if (unbounded) {
    o.admission_bytes = std::size_t{1} << 40;
    o.admission_requests = std::size_t{1} << 40;
  }
  auto db = database::open(o);
  if (!db) fail("open", db.error());
  return std::move(*db);
}

std::uint64_t key_space = 0;  // config::keys, for key_for
std::string key_for(int thread, std::uint64_t i) {
  return fmt::format("t{}-{:012}", thread, key_space ? i % key_space : i);
}

// The resident set four times a second until `stop`: its peak over the
// first quarter of the run beside its peak over the rest says whether it
// still grows.
struct rss_quarters {
  double first = 0, rest = 0;
};
std::thread sample_rss(const std::atomic<bool>& stop, clock_type::time_point start, double seconds, rss_quarters& out) {
  return std::thread([&stop, start, seconds, &out] {
    while (!stop) {
      double r = rss_now_mib();
      double& peak = since(start) < seconds / 4 ? out.first : out.rest;
      peak = std::max(peak, r);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
}

// T threads, each with at most `window` writes unanswered.
std::vector<double> run_closed(const config& c) {
  auto db = open_fresh(c, "closed", false);
  std::string value(c.value_bytes, 'v');
  std::atomic<std::uint64_t> acked{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  constexpr std::int64_t window = 256;
  auto start = clock_type::now();
  for (int t = 0; t < c.threads; ++t)
    ts.emplace_back([&, t] {
      std::atomic<std::int64_t> out{0};
      for (std::uint64_t i = 0; !stop; ++i) {
        while (out.load(std::memory_order_acquire) >= window) std::this_thread::yield();
        ++out;
        db->put_async(key_for(t, i), value, std::nullopt, [&](status s) {
          must(s, "put_async");
          ++acked;
          --out;
        });
        if ((i & 1023) == 0 && since(start) >= c.seconds) stop = true;
      }
      while (out.load() > 0) std::this_thread::yield();
    });
  rss_quarters rss;
  std::thread sampler = sample_rss(stop, start, c.seconds, rss);
  for (auto& t : ts) t.join();
  sampler.join();
  std::vector<double> r(slots);
  r[acked_per_s] = static_cast<double>(acked) / since(start);
  r[rss_first_quarter_mib] = rss.first;
  r[rss_rest_mib] = rss.rest;
  return r;
}

std::vector<double> run_flood(const config& c) {
  auto db = open_fresh(c, "flood", false);
  std::string value(c.value_bytes, 'v');
  std::atomic<std::uint64_t> acked{0}, refused_n{0}, unanswered{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  auto start = clock_type::now();
  for (int t = 0; t < c.threads; ++t)
    ts.emplace_back([&, t] {
      for (std::uint64_t i = 0; !stop; ++i) {
        ++unanswered;
        bool busy = false;
        db->put_async(key_for(t, i), value, std::nullopt, [&](status s) {
          if (s.is_ok())
            ++acked;
          else if (s.code() == status_code::busy)
            ++refused_n, busy = true;  // refused on this thread, before put_async returns
          else
            must(s, "put_async");
          --unanswered;
        });
        if (busy) std::this_thread::yield();
        if ((i & 1023) == 0 && since(start) >= c.seconds) stop = true;
      }
    });
  rss_quarters rss;
  std::thread sampler = sample_rss(stop, start, c.seconds, rss);
  std::vector<double> latencies;
  std::thread blocking([&] {
    for (std::uint64_t i = 0; !stop; ++i) {
      auto t0 = clock_type::now();
      must(db->put(key_for(999, i), value), "put");
      latencies.push_back(since(t0) * 1e6);
    }
  });
  for (auto& t : ts) t.join();
  blocking.join();
  sampler.join();
  double elapsed = since(start);
  while (unanswered > 0) std::this_thread::yield();
  std::vector<double> r(slots);
  r[acked_per_s] = static_cast<double>(acked) / elapsed;
  r[refused] = static_cast<double>(refused_n);
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    r[blocking_p50_us] = latencies[latencies.size() / 2];
    r[blocking_p99_us] = latencies[latencies.size() * 99 / 100];
    r[blocking_max_us] = latencies.back();
  }
  r[blocking_n] = static_cast<double>(latencies.size());
  r[rss_first_quarter_mib] = rss.first;
  r[rss_rest_mib] = rss.rest;
  return r;
}

std::vector<double> run_unbounded(const config& c) {
  auto db = open_fresh(c, "unbounded", true);
  std::string value(c.value_bytes, 'v');
  std::atomic<std::uint64_t> acked{0};
  std::vector<std::thread> ts;
  auto start = clock_type::now();
  std::uint64_t each = c.unbounded_writes / static_cast<std::uint64_t>(c.threads);
  for (int t = 0; t < c.threads; ++t)
    ts.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < each; ++i)
        db->put_async(key_for(t, i), value, std::nullopt, [&](status s) {
          must(s, "put_async");
          ++acked;
        });
    });
  for (auto& t : ts) t.join();
  double submitted = since(start);
  while (acked < each * static_cast<std::uint64_t>(c.threads)) std::this_thread::yield();
  std::vector<double> r(slots);
  r[acked_per_s] = static_cast<double>(acked) / since(start);
  r[submit_s] = submitted;
  r[drain_s] = since(start) - submitted;
  return r;
}

struct child_out {
  std::vector<double> r;
  double rss_mib = 0;
};

child_out in_child(std::vector<double> (*run)(const config&), const config& c) {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(1);
  std::fflush(stdout);  // or the child prints what this process buffered
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto r = run(c);
    std::size_t n = r.size() * sizeof(double);
    const char* p = reinterpret_cast<const char*>(r.data());
    for (std::size_t at = 0; at < n;) {
      ssize_t w = ::write(fds[1], p + at, n - at);
      if (w <= 0) ::_exit(1);
      at += static_cast<std::size_t>(w);
    }
    std::fflush(stdout);
    ::_exit(0);
  }
  ::close(fds[1]);
  child_out out;
  out.r.resize(slots);
  std::size_t n = slots * sizeof(double), at = 0;
  char* p = reinterpret_cast<char*>(out.r.data());
  while (at < n) {
    ssize_t got = ::read(fds[0], p + at, n - at);
    if (got <= 0) break;
    at += static_cast<std::size_t>(got);
  }
  ::close(fds[0]);
  int st = 0;
  struct rusage ru {};
  while (::wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {
  }
  if (at != n || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fmt::print(stderr, "flood_bench: a child process failed\n");
    std::exit(1);
  }
  out.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "flood_bench: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds")
      c.seconds = std::stod(next());
    else if (a == "--threads")
      c.threads = std::stoi(next());
    else if (a == "--value-bytes")
      c.value_bytes = std::stoul(next());
    else if (a == "--shards")
      c.shards = std::stoul(next());
    else if (a == "--unbounded-writes")
      c.unbounded_writes = std::stoull(next());
    else if (a == "--keys")
      c.keys = std::stoull(next());
    else if (a == "--dir")
      c.dir = next();
    else {
      fmt::print(stderr, "flood_bench: unknown argument {}\n", a);
      return 2;
    }
  }
  key_space = c.keys;
  database_options defaults;
  fmt::print(
      "flood_bench {}: {} threads, {}-byte values, {} shards, {} s a case; admission budget {} MiB and {} "
      "requests in all\n",
      utc_now(), c.threads, c.value_bytes, c.shards, c.seconds, defaults.admission_bytes >> 20,
      defaults.admission_requests);
  auto closed = in_child(run_closed, c);
  fmt::print("closed     {:>9.0f} writes/s  peak RSS {:>7.1f} MiB\n", closed.r[acked_per_s], closed.rss_mib);
  fmt::print("           resident set: at most {:.1f} MiB in the first quarter, {:.1f} MiB after\n",
             closed.r[rss_first_quarter_mib], closed.r[rss_rest_mib]);
  auto flood = in_child(run_flood, c);
  fmt::print("flood      {:>9.0f} writes/s  peak RSS {:>7.1f} MiB  {:.0f} refused busy\n", flood.r[acked_per_s],
             flood.rss_mib, flood.r[refused]);
  fmt::print("           resident set: at most {:.1f} MiB in the first quarter of the flood, {:.1f} MiB after\n",
             flood.r[rss_first_quarter_mib], flood.r[rss_rest_mib]);
  fmt::print("           a blocking put meanwhile ({:.0f} of them): p50 {:.0f} us, p99 {:.0f} us, max {:.0f} us\n",
             flood.r[blocking_n], flood.r[blocking_p50_us], flood.r[blocking_p99_us], flood.r[blocking_max_us]);
  auto unbounded = in_child(run_unbounded, c);
  fmt::print(
      "unbounded  {:>9.0f} writes/s  peak RSS {:>7.1f} MiB  {} writes submitted in {:.1f} s, drained {:.1f} s "
      "later\n",
      unbounded.r[acked_per_s], unbounded.rss_mib, c.unbounded_writes, unbounded.r[submit_s], unbounded.r[drain_s]);
  double ratio = flood.r[acked_per_s] / closed.r[acked_per_s];
  double over = flood.rss_mib - closed.rss_mib;
  double growth = flood.r[rss_rest_mib] - flood.r[rss_first_quarter_mib];
  // What the database's caches and layers grow by anyway, at the same time
  // into the run, is the closed run's growth: the flood may add its budget.
  double closed_growth = closed.r[rss_rest_mib] - closed.r[rss_first_quarter_mib];
  fmt::print(
      "flood / closed throughput {:.2f}x (target >= 0.9x: {}); flood's peak RSS {:.1f} MiB above closed's, "
      "budget {} MiB; after the first quarter the flood grew {:.1f} MiB, closed {:.1f} MiB (bounded: {})\n",
      ratio, ratio >= 0.9 ? "met" : "NOT met", over, defaults.admission_bytes >> 20, growth, closed_growth,
      growth <= closed_growth + static_cast<double>(defaults.admission_bytes >> 20) ? "yes" : "NO");
  std::filesystem::remove_all(c.dir);
  return 0;
}
