// Nothing acknowledged is lost, proved with a real process: a child opens the
// database, writes from several threads and reports each acknowledgement on a
// pipe; the parent kills it with SIGKILL at a random moment, reopens the data
// directory and checks that every acknowledged write is there and intact.
//
// Iterations: 100 by default (what `make test` runs); MAGNETITE_CRASH_ITERATIONS
// sets more (`make crash-torture`).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "actors/database_core.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;

namespace {

constexpr int writer_threads = 4;
constexpr int keys_per_thread = 40;

database_options crash_options(const std::string& dir) {
  database_options o;
  o.dir = dir;
  o.shards = 2;
  o.shard.checkpoint_bytes = 32 << 10;  // checkpoints happen while the child is killed
  return o;
}

// The value a write of (key, seq) stores: the parent can tell it apart from any
// other write and from damaged bytes.
std::string value_of(const std::string& key, std::uint64_t seq) {
  return fmt::format("{}|{}|{}", key, seq, std::string(seq % 200, static_cast<char>('a' + seq % 26)));
}

bool parse_value(const std::string& key, const std::string& v, std::uint64_t& seq) {
  auto bar1 = v.find('|');
  if (bar1 == std::string::npos || v.substr(0, bar1) != key) return false;
  auto bar2 = v.find('|', bar1 + 1);
  if (bar2 == std::string::npos) return false;
  seq = std::strtoull(v.c_str() + bar1 + 1, nullptr, 10);
  return v == value_of(key, seq);
}

[[noreturn]] void child(const std::string& dir, int ack_fd, std::uint64_t first_seq) {
  auto db = database::open(crash_options(dir));
  if (!db) {
    dprintf(ack_fd, "E %s\n", db.error().to_string().c_str());
    _exit(3);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < writer_threads; ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t j = 0;; ++j) {
        std::string key = fmt::format("t{}-k{:02}", t, j % keys_per_thread);
        std::uint64_t seq = first_seq + j * writer_threads + static_cast<std::uint64_t>(t);
        status s = (*db)->put(key, value_of(key, seq));
        if (!s) {
          dprintf(ack_fd, "E %s\n", s.to_string().c_str());
          _exit(4);
        }
        // One write(2) of a short line: atomic on a pipe.
        std::string line = fmt::format("A {} {}\n", key, seq);
        if (::write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(5);
      }
    });
  for (auto& th : threads) th.join();
  _exit(0);
}

}  // namespace

TEST_CASE("crash: SIGKILL at random moments never loses an acknowledged write") {
  int iterations = 100;
  if (const char* n = std::getenv("MAGNETITE_CRASH_ITERATIONS")) iterations = std::max(1, std::atoi(n));
  testing::temp_dir d("crash");
  std::string dir = d / "db";
  std::mt19937_64 rng(20261129);
  std::map<std::string, std::uint64_t> acked;  // key -> the latest acknowledged seq
  std::uint64_t total_acks = 0;
  for (int iter = 0; iter < iterations; ++iter) {
    CAPTURE(iter);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::uint64_t first_seq = static_cast<std::uint64_t>(iter + 1) << 32;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child(dir, fds[1], first_seq);
    }
    ::close(fds[1]);
    // Kill at a random moment: sometimes while it boots or replays, mostly
    // while writes are in flight.
    auto kill_after = std::chrono::microseconds(rng() % 60'000);
    auto deadline = std::chrono::steady_clock::now() + kill_after;
    std::string buffer;
    std::string child_error;
    auto drain = [&](int timeout_ms) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      char chunk[4096];
      ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(n));
      return true;
    };
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      drain(static_cast<int>(std::max<long>(left.count(), 0)));
    }
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    while (drain(0)) {
    }
    ::close(fds[0]);
    // Only complete lines count: a line cut by the kill was never acknowledged
    // to anyone.
    std::size_t at = 0;
    for (std::size_t nl; (nl = buffer.find('\n', at)) != std::string::npos; at = nl + 1) {
      std::string line = buffer.substr(at, nl - at);
      if (line.starts_with("E ")) child_error = line;
      if (!line.starts_with("A ")) continue;
      auto sp = line.find(' ', 2);
      std::string key = line.substr(2, sp - 2);
      std::uint64_t seq = std::strtoull(line.c_str() + sp + 1, nullptr, 10);
      acked[key] = std::max(acked[key], seq);
      ++total_acks;
    }
    REQUIRE_MESSAGE(child_error.empty(), child_error);
    REQUIRE(WIFSIGNALED(wstatus));
    // Reopen in this process and check every acknowledged write.
    auto db = database::open(crash_options(dir));
    REQUIRE_MESSAGE(db.is_ok(), db.error().to_string());
    for (const auto& [key, seq] : acked) {
      auto v = (*db)->get(key);
      REQUIRE_MESSAGE(v.is_ok(), v.error().to_string());
      REQUIRE_MESSAGE(v->has_value(), "acknowledged key " << key << " (seq " << seq << ") is missing");
      std::uint64_t found = 0;
      REQUIRE_MESSAGE(parse_value(key, **v, found), "value of " << key << " is damaged");
      // A later write may have landed without its acknowledgement; an older one
      // would mean an acknowledged write was lost.
      CHECK_MESSAGE(found >= seq, key << ": found seq " << found << " older than acknowledged " << seq);
    }
  }
  MESSAGE(fmt::format("{} iterations, {} acknowledged writes checked", iterations, total_acks));
  CHECK(total_acks > 0);
}
