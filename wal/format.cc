#include "wal/format.h"

namespace magnetite::wal {

std::string segment_file_name(std::uint64_t number) { return fmt::format("{:020}{}", number, segment_suffix); }

std::optional<std::uint64_t> parse_segment_file_name(std::string_view name) {
  if (name.size() != 20 + segment_suffix.size() || !name.ends_with(segment_suffix)) return std::nullopt;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (~0ULL - digit) / 10) return std::nullopt;  // overflow
    n = n * 10 + digit;
  }
  return n;
}

std::string segment_temp_file_name(std::uint64_t number) {
  return segment_file_name(number) + std::string(temp_suffix);
}

}  // namespace magnetite::wal
