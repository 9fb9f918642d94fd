// manual_clock: a wall clock (nanoseconds since the epoch) that a test moves
// by hand, shared by every copy of the function it hands out.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "engine/shard.h"

namespace magnetite::testing {

struct manual_clock {
  std::shared_ptr<std::uint64_t> now = std::make_shared<std::uint64_t>(1'000'000'000'000);
  wall_clock_ns fn() const {
    auto p = now;
    return [p] { return *p; };
  }
  void advance(std::chrono::nanoseconds d) { *now += static_cast<std::uint64_t>(d.count()); }
};

}  // namespace magnetite::testing
