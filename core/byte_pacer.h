// byte_pacer: holds a stream of work to at most `bytes_per_second`, so that a
// bulk copy (an online backup) leaves the cores and the disk to the writes it
// runs beside (docs/benchmarks.md, "Backups and restores").
//
// Contract: the caller reports each piece of work after doing it with
// spent(bytes); spent() sleeps for as long as the pieces so far are ahead of
// the rate. A token bucket: the pacer may run ahead of the rate by at most
// `burst` bytes (a tenth of a second's worth, at least one piece), and time
// it spent behind (blocked elsewhere) is not made up by running faster
// later: at most `burst` bytes go by without a sleep. A rate of 0 never
// sleeps. The clock and the sleep are the caller's (tests drive both);
// not thread-safe: one pacer a stream.
#pragma once

#include <cstdint>
#include <functional>

namespace magnetite {

class byte_pacer {
 public:
  using now_fn = std::function<std::uint64_t()>;           // monotonic, ns
  using sleep_fn = std::function<void(std::uint64_t ns)>;  // at least ns

  // The steady clock and std::this_thread::sleep_for.
  explicit byte_pacer(std::uint64_t bytes_per_second);
  byte_pacer(std::uint64_t bytes_per_second, now_fn now, sleep_fn sleep);

  void spent(std::uint64_t bytes);

  std::uint64_t rate() const noexcept { return rate_; }
  std::uint64_t slept_ns() const noexcept { return slept_ns_; }  // in total

 private:
  std::uint64_t rate_;
  now_fn now_;
  sleep_fn sleep_;
  std::uint64_t burst_;
  // Bytes that may go by without a sleep, as of last_ns_; below zero: owed.
  double tokens_;
  std::uint64_t last_ns_ = 0;
  bool started_ = false;
  std::uint64_t slept_ns_ = 0;
};

}  // namespace magnetite
