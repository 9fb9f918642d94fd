// admission_budget: bounds the work a shard has accepted and not yet answered
// (docs/embedding.md, "Bounded admission"), in bytes and in requests, so
// that a host writing faster than the disk takes its writes meets a limit
// instead of growing the process until the kernel's OOM killer ends it.
//
// Contract: a request is admitted while both what is in (bytes, requests)
// plus it stay within the limits, or when nothing at all is in (a request
// larger than the whole byte limit would otherwise never go). Every admitted
// request is released exactly once, with the bytes it was admitted with,
// when its answer is known (durable or failed). try_admit never waits;
// admit waits until the request fits or the deadline passes (nullopt: no
// deadline). Thread-safe. Waiters are woken on every release that may let
// one in; which one goes first is not promised.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

namespace magnetite {

class admission_budget {
 public:
  admission_budget(std::size_t max_bytes, std::size_t max_requests) noexcept;

  bool try_admit(std::size_t bytes);
  bool admit(std::size_t bytes, std::optional<std::chrono::steady_clock::time_point> deadline);
  void release(std::size_t bytes);
  // The shard's writes waited `waited` for memory (a checkpoint): counted
  // beside the admission counts.
  void stalled(std::chrono::nanoseconds waited);

  struct counts {
    std::uint64_t admitted = 0;  // since open
    std::uint64_t refused = 0;   // since open: try_admit that failed, admit that timed out
    std::uint64_t waited = 0;    // since open: admits that had to wait
    std::uint64_t waiting = 0;   // callers blocked in admit now
    std::uint64_t stalls = 0;    // since open: stalled() calls
    std::uint64_t stall_ns = 0;  // since open: what they waited
    std::size_t bytes = 0;       // in now
    std::size_t requests = 0;    // in now
  };
  counts now() const;
  std::size_t max_bytes() const noexcept { return max_bytes_; }
  std::size_t max_requests() const noexcept { return max_requests_; }

 private:
  bool fits(std::size_t bytes) const noexcept;  // mu_ held
  void take(std::size_t bytes) noexcept;        // mu_ held, fits

  const std::size_t max_bytes_;
  const std::size_t max_requests_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  counts c_;
};

}  // namespace magnetite
