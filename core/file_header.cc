#include "core/file_header.h"

#include <xxhash.h>

#include <algorithm>

#include "core/coding.h"

namespace magnetite {

namespace {

const std::uint8_t* u8(const char* p) noexcept { return reinterpret_cast<const std::uint8_t*>(p); }
std::uint8_t* u8(char* p) noexcept { return reinterpret_cast<std::uint8_t*>(p); }

}  // namespace

std::uint32_t checksum32(std::string_view bytes, std::uint64_t seed) noexcept {
  return static_cast<std::uint32_t>(XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed));
}

std::string encode_file_header(const char (&magic)[8], const file_header& h) {
  std::string out(file_header_size, '\0');
  std::copy_n(magic, 8, out.data());
  encode_fixed32_le(u8(out.data() + 8), h.version);
  encode_fixed64_le(u8(out.data() + 16), h.a);
  encode_fixed64_le(u8(out.data() + 24), h.b);
  encode_fixed32_le(u8(out.data() + 36), checksum32(std::string_view(out).substr(0, 36)));
  return out;
}

result<file_header> parse_file_header(std::string_view bytes, const char (&magic)[8], std::string_view what,
                                      std::string_view path, std::uint32_t max_version) {
  auto bad = [&](std::string_view why) { return status::corruption(fmt::format("{} {}: {}", what, path, why)); };
  auto newer = [&](std::string_view why) {
    return status::make(status_code::not_supported, status_category::permanent,
                        fmt::format("{} {}: {}: written by a newer magnetite", what, path, why));
  };
  if (bytes.size() < file_header_size)
    return bad(fmt::format("header is truncated ({} of {} bytes)", bytes.size(), file_header_size));
  if (!std::equal(magic, magic + 8, bytes.data())) return bad(fmt::format("not a {} (bad magic)", what));
  if (decode_fixed32_le(u8(bytes.data() + 36)) != checksum32(bytes.substr(0, 36)))
    return bad("header checksum mismatch");
  std::uint32_t version = decode_fixed32_le(u8(bytes.data() + 8));
  if (version < 1 || version > max_version)
    return newer(fmt::format("format version {} (this build reads version {})", version,
                             max_version == 1 ? std::string("1") : fmt::format("1 to {}", max_version)));
  if (decode_fixed32_le(u8(bytes.data() + 12)) != 0 || decode_fixed32_le(u8(bytes.data() + 32)) != 0)
    return newer("unknown header flags");
  return file_header{decode_fixed64_le(u8(bytes.data() + 16)), decode_fixed64_le(u8(bytes.data() + 24)), version};
}

}  // namespace magnetite
