#include "tools/cli_text.h"

#include <fmt/format.h>

#include <charconv>

namespace magnetite {

std::string escape_field(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c <= 0x7e && c != '\\') out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

result<std::string> unescape_field(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out.push_back(text[i]);
      continue;
    }
    unsigned v = 0;
    if (i + 3 >= text.size() || text[i + 1] != 'x' ||
        std::from_chars(text.data() + i + 2, text.data() + i + 4, v, 16).ptr != text.data() + i + 4)
      return status::invalid_argument(fmt::format("bad escape at offset {} of \"{}\"", i, text));
    out.push_back(static_cast<char>(v));
    i += 3;
  }
  return out;
}

result<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::uint64_t scale = unit == "ns" ? 1 : unit == "us" ? 1'000 : unit == "ms" ? 1'000'000 : unit == "s" ? 1'000'000'000
                        : unit == "m" ? 60'000'000'000ull : unit == "h" ? 3'600'000'000'000ull : 0;
  if (ec != std::errc() || end == text.data() || n == 0 || scale == 0)
    return status::invalid_argument(
        fmt::format("duration \"{}\": expected a positive whole number and ns, us, ms, s, m or h", text));
  if (n > static_cast<std::uint64_t>(INT64_MAX) / scale)
    return status::invalid_argument(fmt::format("duration \"{}\" is too long", text));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(n * scale));
}

result<std::pair<std::string, std::string>> scan_bounds(const std::optional<std::string>& from,
                                                        const std::optional<std::string>& to,
                                                        const std::optional<std::string>& prefix) {
  std::string lo = from.value_or("");
  std::string hi = to.value_or("");
  if (prefix && !prefix->empty()) {
    if (*prefix > lo) lo = *prefix;
    // The first key past every key with this prefix: drop trailing 0xff bytes,
    // then increment the last byte; none left means no upper bound.
    std::string past = *prefix;
    while (!past.empty() && static_cast<unsigned char>(past.back()) == 0xff) past.pop_back();
    if (!past.empty()) {
      past.back() = static_cast<char>(static_cast<unsigned char>(past.back()) + 1);
      if (hi.empty() || past < hi) hi = past;
    }
  }
  return std::pair{lo, hi};
}

}  // namespace magnetite
