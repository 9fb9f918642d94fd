// admission_budget: what gets in, what is refused, and that a waiter goes in
// when room is made and not before. Waiters are observed through the
// budget's own `waiting` count, never through sleeps.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/admission_budget.h"

using namespace magnetite;
using namespace std::chrono_literals;

namespace {
// Yields until `n` callers wait in admit: the state the test needs, reached
// by the other thread, not guessed by a sleep.
void until_waiting(const admission_budget& b, std::uint64_t n) {
  while (b.now().waiting < n) std::this_thread::yield();
}
}  // namespace

TEST_CASE("admission_budget: bytes and requests are both limits; a refusal changes nothing") {
  admission_budget b(1000, 3);
  CHECK(b.try_admit(400));
  CHECK(b.try_admit(400));
  CHECK_FALSE(b.try_admit(201));  // 1001 bytes
  CHECK(b.try_admit(200));        // exactly 1000
  CHECK_FALSE(b.try_admit(0));    // a fourth request
  auto n = b.now();
  CHECK(n.requests == 3);
  CHECK(n.bytes == 1000);
  CHECK(n.admitted == 3);
  CHECK(n.refused == 2);
  b.release(400);
  CHECK(b.now().bytes == 600);
  CHECK(b.try_admit(400));
  b.release(400);
  b.release(400);
  b.release(200);
  CHECK(b.now().requests == 0);
  CHECK(b.now().bytes == 0);
}

TEST_CASE("admission_budget: a request larger than the whole limit goes in alone, and only alone") {
  admission_budget b(100, 10);
  CHECK(b.try_admit(5000));
  CHECK_FALSE(b.try_admit(1));
  b.release(5000);
  CHECK(b.try_admit(1));
  CHECK_FALSE(b.try_admit(5000));
}

TEST_CASE("admission_budget: a blocked admit goes in when room is made, not before") {
  admission_budget b(100, 10);
  REQUIRE(b.try_admit(100));
  std::atomic<bool> in{false};
  std::thread t([&] {
    bool ok = b.admit(60, std::nullopt);
    in = ok;
  });
  until_waiting(b, 1);
  CHECK_FALSE(in.load());
  // A caller that never waits does not pass the one that waits.
  CHECK_FALSE(b.try_admit(1));
  b.release(100);
  t.join();
  CHECK(in.load());
  auto n = b.now();
  CHECK(n.waiting == 0);
  CHECK(n.waited == 1);
  CHECK(n.requests == 1);
  CHECK(n.bytes == 60);
}

TEST_CASE("admission_budget: an admit whose deadline passes is refused and leaves nothing in") {
  admission_budget b(100, 10);
  REQUIRE(b.try_admit(100));
  auto deadline = std::chrono::steady_clock::now() + 20ms;
  CHECK_FALSE(b.admit(1, deadline));
  CHECK(std::chrono::steady_clock::now() >= deadline);
  auto n = b.now();
  CHECK(n.refused == 1);
  CHECK(n.waiting == 0);
  CHECK(n.requests == 1);
  CHECK(n.bytes == 100);
}

TEST_CASE("admission_budget: many threads never hold more than the limits") {
  admission_budget b(1000, 8);
  std::atomic<std::size_t> bytes{0}, requests{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        std::size_t cost = 50 + static_cast<std::size_t>((t * 37 + i * 11) % 200);
        bool ok = (i % 2) ? b.admit(cost, std::nullopt) : b.try_admit(cost);
        if (!ok) continue;
        std::size_t r = ++requests, by = bytes += cost;
        if (r > 8 || by > 1000) over = true;
        bytes -= cost;
        --requests;
        b.release(cost);
      }
    });
  for (auto& t : ts) t.join();
  CHECK_FALSE(over.load());
  CHECK(b.now().requests == 0);
  CHECK(b.now().bytes == 0);
  CHECK(b.now().admitted > 0);
}
