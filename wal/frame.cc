#include "wal/frame.h"

#include <cstring>

#include "core/coding.h"

namespace magnetite::wal {

namespace {
const std::uint8_t* u8(std::string_view s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }
}  // namespace

void encode_segment_header(std::string& dst, const segment_header& sh) {
  dst.append(encode_file_header(segment_magic, {sh.number, sh.salt, sh.version}));
}

result<segment_header> check_segment_header(std::string_view bytes, std::uint64_t expected_number,
                                            const std::string& where) {
  auto h = parse_file_header(bytes, segment_magic, "WAL segment", where, format_version);
  if (!h) return h.error();
  if (h->a != expected_number)
    return status::corruption(
        fmt::format("WAL segment {}: header names segment {} but the file name says {}", where, h->a, expected_number));
  return segment_header{h->a, h->b, h->version};
}

std::size_t begin_frame(std::string& dst) {
  std::size_t at = dst.size();
  dst.append(frame_header_size, '\0');
  return at;
}

void finish_frame(std::string& dst, std::size_t header_at, std::uint64_t salt, std::uint64_t sequence, record_type type,
                  std::uint8_t flags) {
  auto* h = reinterpret_cast<std::uint8_t*>(dst.data() + header_at);
  std::size_t length = dst.size() - header_at - frame_header_size;
  encode_fixed32_le(h + 4, static_cast<std::uint32_t>(length));
  encode_fixed64_le(h + 8, sequence);
  h[16] = static_cast<std::uint8_t>(type);
  h[17] = flags;
  encode_fixed16_le(h + 18, 0);
  encode_fixed32_le(h + 20, checksum32(std::string_view(dst).substr(header_at + frame_header_size, length), salt));
  encode_fixed32_le(h, checksum32(std::string_view(dst).substr(header_at + 4, frame_header_size - 4), salt));
}

frame_check check_frame_header(std::string_view bytes, std::uint64_t salt, frame_header& out) noexcept {
  if (bytes.size() < frame_header_size) return frame_check::truncated;
  const auto* h = u8(bytes);
  if (decode_fixed32_le(h) != checksum32(bytes.substr(4, frame_header_size - 4), salt)) return frame_check::bad;
  out.length = decode_fixed32_le(h + 4);
  out.sequence = decode_fixed64_le(h + 8);
  out.type = static_cast<record_type>(h[16]);
  out.flags = h[17];
  out.payload_checksum = decode_fixed32_le(h + 20);
  if (out.length > max_frame_payload) return frame_check::bad;
  bool known =
      h[16] >= 1 && h[16] <= max_record_type && (out.flags & ~known_frame_flags) == 0 && decode_fixed16_le(h + 18) == 0;
  return known ? frame_check::ok : frame_check::unsupported;
}

parsed_frame parse_frame(std::string_view bytes, std::uint64_t salt) noexcept {
  parsed_frame f;
  f.check = check_frame_header(bytes, salt, f.header);
  if (f.check != frame_check::ok) return f;
  if (bytes.size() - frame_header_size < f.header.length) {
    f.check = frame_check::truncated;
    return f;
  }
  f.payload = bytes.substr(frame_header_size, f.header.length);
  if (checksum32(f.payload, salt) != f.header.payload_checksum) {
    f.check = frame_check::bad;
    return f;
  }
  f.size = frame_header_size + f.header.length;
  return f;
}

}  // namespace magnetite::wal
