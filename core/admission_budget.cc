#include "core/admission_budget.h"

#include <algorithm>

namespace magnetite {

admission_budget::admission_budget(std::size_t max_bytes, std::size_t max_requests) noexcept
    : max_bytes_(std::max<std::size_t>(max_bytes, 1)), max_requests_(std::max<std::size_t>(max_requests, 1)) {}

bool admission_budget::fits(std::size_t bytes) const noexcept {
  if (c_.requests == 0) return true;
  return c_.requests < max_requests_ && c_.bytes + bytes <= max_bytes_;
}

void admission_budget::take(std::size_t bytes) noexcept {
  ++c_.admitted;
  ++c_.requests;
  c_.bytes += bytes;
}

bool admission_budget::try_admit(std::size_t bytes) {
  std::lock_guard lk(mu_);
  // Waiters were here first: a caller that never waits does not pass them.
  if (c_.waiting > 0 || !fits(bytes)) {
    ++c_.refused;
    return false;
  }
  take(bytes);
  return true;
}

bool admission_budget::admit(std::size_t bytes, std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock lk(mu_);
  if (c_.waiting > 0 || !fits(bytes)) {
    ++c_.waited;
    ++c_.waiting;
    auto ready = [&] { return fits(bytes); };
    bool in = true;
    if (deadline)
      in = freed_.wait_until(lk, *deadline, ready);
    else
      freed_.wait(lk, ready);
    --c_.waiting;
    if (!in) {
      ++c_.refused;
      return false;
    }
  }
  take(bytes);
  return true;
}

void admission_budget::release(std::size_t bytes) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    --c_.requests;
    c_.bytes -= std::min(bytes, c_.bytes);
    wake = c_.waiting > 0;
  }
  if (wake) freed_.notify_all();
}

admission_budget::counts admission_budget::now() const {
  std::lock_guard lk(mu_);
  return c_;
}

void admission_budget::stalled(std::chrono::nanoseconds waited) {
  std::lock_guard lk(mu_);
  ++c_.stalls;
  c_.stall_ns += static_cast<std::uint64_t>(std::max<std::int64_t>(0, waited.count()));
}

}  // namespace magnetite
