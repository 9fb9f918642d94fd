// Nothing acknowledged is lost, proved with a real process: a child opens the
// database, writes from several threads and reports each acknowledgement on a
// pipe; the parent kills it with SIGKILL at a random moment, reopens the data
// directory and checks that every acknowledged write is there and intact.
//
// The same for transactions across shards: transfers between accounts on two
// shards, killed at any step of their two-phase commit, never create or
// destroy money, and every acknowledged transfer is in.
//
// And under a flood of asynchronous writes past the admission budget: every
// write answered ok is there, every one answered `busy` is not.
//
// Iterations: 100 by default (what `make test` runs); MAGNETITE_CRASH_ITERATIONS
// sets more (`make crash-torture`).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "actors/database_core.h"
#include "magnetite/state/records.h"
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
  dprintf(ack_fd, "R\n");
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

// Forks a child that runs `body(ack_fd)` (and never returns), kills it with
// SIGKILL after `kill_after`, and returns the complete lines it wrote on the
// pipe (a line cut by the kill was never acknowledged to anyone) and its
// wait status. With `after_ready`, `kill_after` counts from the child's line
// "R" (its database is open) instead of from the fork: how long an open takes
// varies tenfold between a release and a sanitizer build, and a kill timed
// from the fork alone could land in every iteration before the first write.
struct killed_child {
  std::vector<std::string> lines;
  int wstatus = 0;
};

killed_child run_and_kill(const std::function<void(int)>& body, std::chrono::microseconds kill_after,
                          bool after_ready = false) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    _exit(0);
  }
  ::close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + kill_after;
  std::string buffer;
  auto drain = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char chunk[4096];
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<std::size_t>(n));
    return true;
  };
  if (after_ready) {
    // The open, whatever it replays, is bounded; a child that never gets
    // there is killed at this cap and its missing acknowledgements show.
    auto cap = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (buffer.find("R\n") == std::string::npos && std::chrono::steady_clock::now() < cap) drain(100);
    deadline = std::chrono::steady_clock::now() + kill_after;
  }
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    drain(static_cast<int>(std::max<long>(left.count(), 0)));
  }
  ::kill(pid, SIGKILL);
  killed_child out;
  ::waitpid(pid, &out.wstatus, 0);
  while (drain(0)) {
  }
  ::close(fds[0]);
  std::size_t at = 0;
  for (std::size_t nl; (nl = buffer.find('\n', at)) != std::string::npos; at = nl + 1)
    out.lines.push_back(buffer.substr(at, nl - at));
  return out;
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
    std::uint64_t first_seq = static_cast<std::uint64_t>(iter + 1) << 32;
    // Kill at a random moment: every other time counted from the fork, so
    // sometimes while it boots or replays; otherwise from the open, while
    // writes are in flight.
    auto killed = run_and_kill([&](int fd) { child(dir, fd, first_seq); }, std::chrono::microseconds(rng() % 60'000),
                               iter % 2 == 1);
    int wstatus = killed.wstatus;
    std::string child_error;
    for (const auto& line : killed.lines) {
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

// ---- transactions across shards ------------------------------------------------

namespace {

constexpr int transfer_threads = 3;
constexpr int accounts_per_side = 4;
constexpr int opening_balance = 100;

// Two namespaces, one on each shard: every transfer spans both.
std::array<std::string, 2> bank_namespaces(database& db) {
  state::records recs(db);
  std::array<std::string, 2> ns;
  for (int i = 0, found = 0; found < 2; ++i) {
    std::string n = fmt::format("bank-{}", i);
    if (recs.shard_of(n) == static_cast<std::size_t>(found)) ns[found++] = n;
  }
  return ns;
}

int balance_of(const std::optional<state::record>& r) { return r ? std::get<state::json>(r->value).get<int>() : 0; }

// Each thread moves money from one side to the other and counts its own
// transfers in a record of the first namespace, in the same transaction; it
// reports the count once the commit is acknowledged.
[[noreturn]] void transfer_child(const std::string& dir, int ack_fd) {
  auto db = database::open(crash_options(dir));
  if (!db) {
    dprintf(ack_fd, "E %s\n", db.error().to_string().c_str());
    _exit(3);
  }
  auto ns = bank_namespaces(**db);
  state::records recs(**db);
  dprintf(ack_fd, "R\n");
  std::vector<std::thread> threads;
  for (int t = 0; t < transfer_threads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()) * 31 + static_cast<std::uint64_t>(t));
      for (;;) {
        auto x = recs.begin();
        std::string from = fmt::format("acct{}", rng() % accounts_per_side);
        std::string to = fmt::format("acct{}", rng() % accounts_per_side);
        int side = static_cast<int>(rng() % 2);
        std::string counter = fmt::format("count-t{}", t);
        auto a = x.load(ns[side], from), b = x.load(ns[1 - side], to), n = x.load(ns[0], counter);
        if (!a || !b || !n) {
          dprintf(ack_fd, "E load failed\n");
          _exit(4);
        }
        int amount = static_cast<int>(rng() % 7);
        int count = balance_of(*n) + 1;
        (void)x.put(ns[side], from, state::json(balance_of(*a) - amount));
        (void)x.put(ns[1 - side], to, state::json(balance_of(*b) + amount));
        (void)x.put(ns[0], counter, state::json(count));
        auto r = x.commit();
        if (!r) {
          if (r.error().code() == status_code::conflict) continue;
          dprintf(ack_fd, "E %s\n", r.error().to_string().c_str());
          _exit(4);
        }
        std::string line = fmt::format("A {} {}\n", t, count);
        if (::write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(5);
      }
    });
  for (auto& th : threads) th.join();
  _exit(0);
}

}  // namespace

TEST_CASE("crash: SIGKILL at any step of transfers across shards neither makes nor loses money") {
  int iterations = 40;
  if (const char* n = std::getenv("MAGNETITE_CRASH_ITERATIONS")) iterations = std::max(1, std::atoi(n));
  testing::temp_dir d("crash-txn");
  std::string dir = d / "db";
  std::array<std::string, 2> ns;
  {
    auto db = database::open(crash_options(dir));
    REQUIRE(db.is_ok());
    ns = bank_namespaces(**db);
    state::records recs(**db);
    auto x = recs.begin();
    for (const auto& n : ns)
      for (int a = 0; a < accounts_per_side; ++a)
        REQUIRE(x.put(n, fmt::format("acct{}", a), state::json(opening_balance)).is_ok());
    REQUIRE(x.commit().is_ok());
  }
  std::mt19937_64 rng(20261202);
  std::map<int, int> acked;  // thread -> its highest acknowledged transfer count
  std::uint64_t total_acks = 0;
  for (int iter = 0; iter < iterations; ++iter) {
    CAPTURE(iter);
    auto killed = run_and_kill([&](int fd) { transfer_child(dir, fd); }, std::chrono::microseconds(rng() % 80'000),
                               iter % 2 == 1);
    int wstatus = killed.wstatus;
    for (const auto& line : killed.lines) {
      REQUIRE_MESSAGE(!line.starts_with("E "), line);
      if (!line.starts_with("A ")) continue;
      int t = 0, count = 0;
      REQUIRE(std::sscanf(line.c_str(), "A %d %d", &t, &count) == 2);
      acked[t] = std::max(acked[t], count);
      ++total_acks;
    }
    REQUIRE(WIFSIGNALED(wstatus));
    // Reopening resolves whatever the kill left prepared or decided.
    auto db = database::open(crash_options(dir));
    REQUIRE_MESSAGE(db.is_ok(), db.error().to_string());
    state::records recs(**db);
    int sum = 0;
    for (const auto& n : ns)
      for (int a = 0; a < accounts_per_side; ++a) {
        auto r = recs.load(n, fmt::format("acct{}", a));
        REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
        sum += balance_of(*r);
      }
    REQUIRE_MESSAGE(sum == 2 * accounts_per_side * opening_balance, "money made or lost: the sum is ", sum);
    for (const auto& [t, count] : acked) {
      auto r = recs.load(ns[0], fmt::format("count-t{}", t));
      REQUIRE(r.is_ok());
      REQUIRE_MESSAGE(balance_of(*r) >= count, "thread ", t, " had ", count, " transfers acknowledged, ",
                      balance_of(*r), " are in");
    }
    // Nothing stays held: a transfer touching every account commits.
    auto x = recs.begin();
    for (const auto& n : ns)
      for (int a = 0; a < accounts_per_side; ++a) {
        std::string key = fmt::format("acct{}", a);
        auto r = x.load(n, key);
        REQUIRE(r.is_ok());
        REQUIRE(x.put(n, key, state::json(balance_of(*r))).is_ok());
      }
    auto r = x.commit(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  }
  MESSAGE(fmt::format("{} iterations, {} acknowledged transfers checked", iterations, total_acks));
  CHECK(total_acks > 0);
}

// ---- a flood of asynchronous writes past the admission budget ------------------

namespace {

constexpr int flood_threads = 3;

// Each thread sends put_async as fast as it can, every key new; an answer
// ok is reported "A key", a `busy` refusal "B key". The budget is small, so
// most are refused while the shards' queues stay full.
[[noreturn]] void flood_child(const std::string& dir, int ack_fd, int iter) {
  database_options o = crash_options(dir);
  o.admission_bytes = 1 << 20;
  o.admission_requests = 64;
  auto db = database::open(o);
  if (!db) {
    dprintf(ack_fd, "E %s\n", db.error().to_string().c_str());
    _exit(3);
  }
  dprintf(ack_fd, "R\n");
  std::vector<std::thread> threads;
  for (int t = 0; t < flood_threads; ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t j = 0;; ++j) {
        std::string key = fmt::format("f{}-{}-{}", iter, t, j);
        (*db)->put_async(key, value_of(key, j), std::nullopt, [ack_fd, key](status s) {
          std::string line = s.is_ok()                       ? "A " + key + "\n"
                             : s.code() == status_code::busy ? "B " + key + "\n"
                                                             : "E " + s.to_string() + "\n";
          if (::write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(5);
        });
      }
    });
  for (auto& th : threads) th.join();
  _exit(0);
}

}  // namespace

TEST_CASE("crash: under a flood every answered write is durable, or refused busy and never written") {
  testing::temp_dir d("crash-flood");
  std::string dir = d / "db";
  std::mt19937_64 rng(20261204);
  std::uint64_t accepted = 0, refused = 0;
  for (int iter = 0; iter < 8; ++iter) {
    CAPTURE(iter);
    auto killed = run_and_kill([&](int fd) { flood_child(dir, fd, iter); },
                               std::chrono::microseconds(20'000 + rng() % 100'000), true);
    REQUIRE(WIFSIGNALED(killed.wstatus));
    std::vector<std::string> ok, busy;
    for (const auto& line : killed.lines) {
      REQUIRE_MESSAGE(!line.starts_with("E "), line);
      if (line.starts_with("A ")) ok.push_back(line.substr(2));
      if (line.starts_with("B ")) busy.push_back(line.substr(2));
    }
    accepted += ok.size();
    refused += busy.size();
    auto db = database::open(crash_options(dir));
    REQUIRE_MESSAGE(db.is_ok(), db.error().to_string());
    for (const auto& key : ok) {
      auto v = (*db)->get(key);
      REQUIRE(v.is_ok());
      REQUIRE_MESSAGE(v->has_value(), "acknowledged key " << key << " is missing");
      std::uint64_t seq = 0;
      CHECK_MESSAGE(parse_value(key, **v, seq), "value of " << key << " is damaged");
    }
    for (const auto& key : busy) {
      auto v = (*db)->get(key);
      REQUIRE(v.is_ok());
      REQUIRE_MESSAGE(!v->has_value(), "key " << key << " was refused busy, yet it was written");
    }
  }
  MESSAGE(fmt::format("{} writes acknowledged and {} refused busy, all checked", accepted, refused));
  CHECK(accepted > 0);
  CHECK(refused > 0);
}
