// bench_support: what every benchmark here needs: a steady clock, the keys all
// of them use, and `must`, which ends the run on an error (a benchmark that
// carries on past a failed write measures nothing).
#pragma once

#include <errno.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/status.h"

namespace magnetite::bench {

using clock_type = std::chrono::steady_clock;

inline double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// 16-byte keys, spread over the key space in a fixed order.
inline std::string key_of(std::uint64_t i) { return fmt::format("{:016}", i * 7919 % 10000000000000000ULL); }

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

}  // namespace magnetite::bench
