#include "core/byte_pacer.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace magnetite {

namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

byte_pacer::byte_pacer(std::uint64_t bytes_per_second)
    : byte_pacer(bytes_per_second, steady_ns,
                 [](std::uint64_t ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }) {}

byte_pacer::byte_pacer(std::uint64_t bytes_per_second, now_fn now, sleep_fn sleep)
    : rate_(bytes_per_second),
      now_(std::move(now)),
      sleep_(std::move(sleep)),
      burst_(std::max<std::uint64_t>(bytes_per_second / 10, 1)),
      tokens_(static_cast<double>(burst_)) {}

void byte_pacer::spent(std::uint64_t bytes) {
  if (rate_ == 0) return;
  const std::uint64_t now = now_();
  if (!started_) {
    started_ = true;
    last_ns_ = now;
  }
  const double refill = static_cast<double>(now - std::min(now, last_ns_)) * static_cast<double>(rate_) / 1e9;
  tokens_ = std::min(tokens_ + refill, static_cast<double>(burst_)) - static_cast<double>(bytes);
  last_ns_ = std::max(now, last_ns_);
  if (tokens_ >= 0) return;
  // Owed: sleep until the rate has paid it back. The sleep may run long;
  // the next call's refill counts the time it really took.
  const auto owed_ns = static_cast<std::uint64_t>(-tokens_ * 1e9 / static_cast<double>(rate_)) + 1;
  sleep_(owed_ns);
  slept_ns_ += owed_ns;
}

}  // namespace magnetite
