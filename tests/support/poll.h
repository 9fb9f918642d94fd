// poll: waiting on real processes and real actor systems, whose progress a
// test cannot drive: ready() is asked every 20 ms until it holds or `limit`
// passes. Only for time the test does not own; where CAF's test coordinator
// can move time, tests move it instead.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace magnetite::testing {

inline bool poll_until(const std::function<bool()>& ready, std::chrono::seconds limit) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace magnetite::testing
