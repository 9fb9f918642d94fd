// byte_pacer on a clock that only the test moves: work takes no time unless
// the test says so, and every sleep moves the clock by what was asked.
#include <doctest/doctest.h>

#include <cstdint>

#include "core/byte_pacer.h"

using namespace magnetite;

namespace {

constexpr std::uint64_t mb = 1'000'000;
constexpr std::uint64_t second = 1'000'000'000;

struct virtual_time {
  std::uint64_t now = 5 * second;
  std::uint64_t sleeps = 0;
  byte_pacer pacer(std::uint64_t rate) {
    return byte_pacer(
        rate, [this] { return now; },
        [this](std::uint64_t ns) {
          now += ns;
          ++sleeps;
        });
  }
};

}  // namespace

TEST_CASE("byte_pacer: a rate of 0 never sleeps") {
  virtual_time t;
  auto p = t.pacer(0);
  for (int i = 0; i < 1000; ++i) p.spent(64 * mb);
  CHECK(t.sleeps == 0);
  CHECK(t.now == 5 * second);
}

TEST_CASE("byte_pacer: a stream faster than the rate takes bytes / rate, less one burst") {
  virtual_time t;
  auto p = t.pacer(mb);  // burst: 100 000 bytes
  const std::uint64_t start = t.now;
  for (int i = 0; i < 1000; ++i) p.spent(10'000);  // 10 MB, each piece free of time
  const std::uint64_t took = t.now - start;
  // 10 MB at 1 MB/s, the first 100 000 bytes free: 9.9 s, give or take a
  // nanosecond a sleep for rounding.
  CHECK(took >= 9'900'000'000 - 1000);
  CHECK(took <= 9'900'000'000 + 1000 + t.sleeps);
  CHECK(p.slept_ns() == took);
}

TEST_CASE("byte_pacer: work slower than the rate is never slept on") {
  virtual_time t;
  auto p = t.pacer(mb);
  for (int i = 0; i < 100; ++i) {
    t.now += 20 * 1'000'000;  // 20 ms of work for 10 000 bytes: 0.5 MB/s
    p.spent(10'000);
  }
  CHECK(t.sleeps == 0);
}

TEST_CASE("byte_pacer: time spent behind is not made up with a burst") {
  virtual_time t;
  auto p = t.pacer(mb);
  p.spent(10'000);
  t.now += 60 * second;  // blocked elsewhere for a minute
  const std::uint64_t start = t.now;
  for (int i = 0; i < 200; ++i) p.spent(10'000);  // 2 MB
  // At most one burst (100 000 bytes) goes by free, whatever the minute
  // would have earned: the rest takes 1.9 s at least.
  CHECK(t.now - start >= 1'900'000'000 - 1000);
}

TEST_CASE("byte_pacer: one piece larger than the burst is paced whole") {
  virtual_time t;
  auto p = t.pacer(mb);
  const std::uint64_t start = t.now;
  p.spent(64 * mb);
  CHECK(t.sleeps == 1);
  // 64 MB less the 100 000-byte burst, at 1 MB/s.
  CHECK(t.now - start >= 63'900'000'000 - 1000);
  CHECK(t.now - start <= 63'900'000'000 + 1000);
}

TEST_CASE("byte_pacer: a sleep that runs long is counted at the next piece") {
  virtual_time t;
  auto p = byte_pacer(
      mb, [&t] { return t.now; },
      [&t](std::uint64_t ns) {
        t.now += 2 * ns;  // the kernel woke us late: twice what was asked
        ++t.sleeps;
      });
  const std::uint64_t start = t.now;
  for (int i = 0; i < 1000; ++i) p.spent(10'000);
  // Oversleeping leaves the pacer ahead of nothing: it owes less next time,
  // so 10 MB still takes no more than twice the paced time and far less
  // than a rate that ignored the overshoot would (each sleep doubled: 19.8 s).
  const std::uint64_t took = t.now - start;
  CHECK(took >= 9'900'000'000 - 1000);
  CHECK(took <= 10'100'000'000);
}
