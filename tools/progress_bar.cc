#include "tools/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace magnetite {

progress_bar::progress_bar(std::uint64_t total, std::string unit)
    : total_(total), unit_(std::move(unit)), enabled_(::isatty(STDERR_FILENO) == 1) {}

void progress_bar::update(std::uint64_t done) {
  if (!enabled_) return;
  constexpr int width = 30;
  double fraction = total_ ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total_)) : 1.0;
  int filled = static_cast<int>(fraction * width);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  fmt::print(stderr, "\r  [{}{}] {:3.0f}%  {:>11}/{}  {:>9} {}/s ", std::string(filled, '#'),
             std::string(width - filled, '.'), fraction * 100, with_commas(done), with_commas(total_),
             with_commas(static_cast<std::uint64_t>(rate)), unit_);
  std::fflush(stderr);
  drawn_ = true;
}

void progress_bar::finish() {
  if (drawn_) fmt::print(stderr, "\n");
  drawn_ = false;
}

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string human_bytes(std::uint64_t n) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace magnetite
