#include "wal/frame.h"

#include <cstring>

#include "core/coding.h"

namespace magnetite::wal {

namespace {
const std::uint8_t* u8(std::string_view s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }
}  // namespace

void encode_segment_header(std::string& dst, std::uint64_t segment_number) {
  std::uint8_t h[segment_header_size] = {};
  std::memcpy(h, segment_magic, sizeof segment_magic);
  encode_fixed32_le(h + 8, format_version);
  encode_fixed32_le(h + 12, 0);
  encode_fixed64_le(h + 16, segment_number);
  encode_fixed32_le(h + 24, 0);
  encode_fixed32_le(h + 28, checksum32({reinterpret_cast<const char*>(h), 28}));
  dst.append(reinterpret_cast<const char*>(h), sizeof h);
}

status check_segment_header(std::string_view bytes, std::uint64_t expected_number,
                            const std::string& where) {
  if (bytes.size() < segment_header_size)
    return status::corruption(fmt::format("{}: segment header is truncated ({} of {} bytes)", where,
                                          bytes.size(), segment_header_size));
  const auto* h = u8(bytes);
  if (std::memcmp(h, segment_magic, sizeof segment_magic) != 0)
    return status::corruption(fmt::format("{}: not a magnetite WAL segment (bad magic)", where));
  if (decode_fixed32_le(h + 28) != checksum32(bytes.substr(0, 28)))
    return status::corruption(fmt::format("{}: segment header checksum mismatch", where));
  std::uint32_t version = decode_fixed32_le(h + 8);
  if (version != format_version || decode_fixed32_le(h + 12) != 0 || decode_fixed32_le(h + 24) != 0)
    return status::make(status_code::not_supported, status_category::permanent,
                        fmt::format("{}: WAL format version {} (this build reads version {}): "
                                    "written by a newer magnetite",
                                    where, version, format_version));
  std::uint64_t number = decode_fixed64_le(h + 16);
  if (number != expected_number)
    return status::corruption(
        fmt::format("{}: header names segment {} but the file name says {}", where, number, expected_number));
  return status::ok();
}

std::size_t begin_frame(std::string& dst) {
  std::size_t at = dst.size();
  dst.append(frame_header_size, '\0');
  return at;
}

void finish_frame(std::string& dst, std::size_t header_at, std::uint64_t sequence, record_type type,
                  std::uint8_t flags) {
  auto* h = reinterpret_cast<std::uint8_t*>(dst.data() + header_at);
  std::size_t length = dst.size() - header_at - frame_header_size;
  encode_fixed32_le(h + 4, static_cast<std::uint32_t>(length));
  encode_fixed64_le(h + 8, sequence);
  h[16] = static_cast<std::uint8_t>(type);
  h[17] = flags;
  encode_fixed16_le(h + 18, 0);
  std::string_view covered(dst.data() + header_at + 4, frame_header_size - 4 + length);
  encode_fixed32_le(h, checksum32(covered));
}

parsed_frame parse_frame(std::string_view bytes) noexcept {
  parsed_frame f;
  if (bytes.size() < frame_header_size) {
    f.check = frame_check::truncated;
    return f;
  }
  const auto* h = u8(bytes);
  std::uint32_t length = decode_fixed32_le(h + 4);
  if (length > max_frame_payload) {
    f.check = frame_check::bad;
    return f;
  }
  if (bytes.size() - frame_header_size < length) {
    f.check = frame_check::truncated;
    return f;
  }
  if (decode_fixed32_le(h) != checksum32(bytes.substr(4, frame_header_size - 4 + length))) {
    f.check = frame_check::bad;
    return f;
  }
  f.sequence = decode_fixed64_le(h + 8);
  f.type = static_cast<record_type>(h[16]);
  f.flags = h[17];
  f.payload = bytes.substr(frame_header_size, length);
  f.size = frame_header_size + length;
  bool known = h[16] >= 1 && h[16] <= max_record_type && (f.flags & ~known_frame_flags) == 0 &&
               decode_fixed16_le(h + 18) == 0;
  f.check = known ? frame_check::ok : frame_check::unsupported;
  return f;
}

}  // namespace magnetite::wal
