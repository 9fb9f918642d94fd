// progress_bar: one line on stderr, redrawn in place, for a terminal only.
//
//   [##########..........]  50%   50,000/100,000  41,230 writes/s
//
// Disabled (draws nothing) when stderr is not a terminal, so a script or a
// test that reads the tool's output never sees carriage returns. update() may
// be called from any one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace magnetite {

class progress_bar {
 public:
  progress_bar(std::uint64_t total, std::string unit);
  void update(std::uint64_t done);
  // Ends the line (if one was drawn).
  void finish();
  bool enabled() const noexcept { return enabled_; }

 private:
  std::uint64_t total_;
  std::string unit_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// 1234567 -> "1,234,567"
std::string with_commas(std::uint64_t n);
// 1536 -> "1.5 KiB"
std::string human_bytes(std::uint64_t n);

}  // namespace magnetite
