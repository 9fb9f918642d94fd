#include "engine/sealed_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/hash128.h"

namespace magnetite {

std::string seal(std::string_view kind, std::string_view body) {
  std::string out = fmt::format("{} 1\n", kind);
  out += body;
  out += fmt::format("end {} {}\n", std::count(body.begin(), body.end(), '\n'), hash128::of(out).to_hex());
  return out;
}

bool parse_decimal(std::string_view text, std::uint64_t& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

status damaged_at(std::size_t offset, std::string_view why) {
  return status::corruption(fmt::format("offset {}: {}", offset, why));
}

result<sealed_body> unseal(std::string_view text, std::string_view kind) {
  const std::string header = fmt::format("{} 1\n", kind);
  if (!text.starts_with(header)) {
    std::size_t nl = text.find('\n');
    std::string_view first = text.substr(0, nl);
    std::uint64_t version = 0;
    if (first.starts_with(kind) && first.size() > kind.size() && first[kind.size()] == ' ' &&
        parse_decimal(first.substr(kind.size() + 1), version) && version > 1 && nl != std::string_view::npos)
      return status::make(status_code::not_supported, status_category::permanent,
                          fmt::format("format version {}; this build reads version 1", version));
    return damaged_at(0, fmt::format("no \"{} 1\" header", kind));
  }
  if (!text.ends_with('\n')) return damaged_at(text.size(), "the file does not end with a line's end");
  const std::size_t last = text.rfind('\n', text.size() - 2) + 1;  // the header's newline at least
  std::string_view trailer = text.substr(last, text.size() - 1 - last);
  if (last < header.size() || !trailer.starts_with("end "))
    return damaged_at(last, "the last line is not the \"end\" line");
  trailer.remove_prefix(4);
  const std::size_t sp = trailer.find(' ');
  if (sp == std::string_view::npos || trailer.substr(sp + 1) != hash128::of(text.substr(0, last)).to_hex())
    return damaged_at(last, "the checksum of the \"end\" line does not match the bytes before it");
  std::uint64_t lines = 0;
  if (!parse_decimal(trailer.substr(0, sp), lines)) return damaged_at(last, "the \"end\" line's count is not a number");
  sealed_body body{text.substr(header.size(), last - header.size()), header.size()};
  const auto held = static_cast<std::uint64_t>(std::count(body.text.begin(), body.text.end(), '\n'));
  if (held != lines)
    return damaged_at(last, fmt::format("the \"end\" line counts {} lines, the file holds {}", lines, held));
  return body;
}

}  // namespace magnetite
