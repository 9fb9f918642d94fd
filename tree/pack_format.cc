#include "tree/pack_format.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "core/coding.h"

namespace magnetite::tree {

namespace {

const std::uint8_t* u8(const char* p) noexcept { return reinterpret_cast<const std::uint8_t*>(p); }
std::uint8_t* u8(char* p) noexcept { return reinterpret_cast<std::uint8_t*>(p); }

}  // namespace

std::string_view checksummed_payload(std::uint8_t flags, std::string_view payload, std::uint32_t raw) noexcept {
  return (flags & searchable_flags) && raw <= payload.size() ? payload.substr(raw) : payload;
}

void encode_record(std::string& out, std::uint64_t salt, const hash128& h, std::uint8_t flags, std::string_view payload,
                   std::uint32_t raw) {
  std::size_t at = out.size();
  out.resize(at + record_header_size, '\0');
  std::uint8_t* p = u8(out.data() + at);
  p[4] = flags;
  encode_fixed32_le(p + 8, static_cast<std::uint32_t>(payload.size()));
  encode_fixed32_le(p + 12, raw);
  encode_fixed32_le(p + 16, checksum32(checksummed_payload(flags, payload, raw), salt));
  auto hb = h.to_bytes();
  std::copy(hb.begin(), hb.end(), p + 20);
  encode_fixed32_le(p, checksum32(std::string_view(out).substr(at + 4, record_header_size - 4), salt));
  out.append(payload);
}

std::string parse_record_header(const char* p, std::uint64_t salt, record_header& out) {
  std::string_view v(p, record_header_size);
  if (decode_fixed32_le(u8(p)) != checksum32(v.substr(4), salt)) return "record header checksum mismatch";
  out.flags = u8(p)[4];
  if (out.flags & ~known_record_flags) return fmt::format("record has unknown flags {:#x}", out.flags);
  if (std::popcount(out.flags) > 1) return fmt::format("record claims two codecs or forms (flags {:#x})", out.flags);
  if (p[5] != 0 || p[6] != 0 || p[7] != 0) return "record header reserved bytes are not zero";
  out.stored = decode_fixed32_le(u8(p + 8));
  out.raw = decode_fixed32_le(u8(p + 12));
  out.payload_checksum = decode_fixed32_le(u8(p + 16));
  out.hash = hash128::from_bytes(u8(p + 20));
  if (out.raw < min_node_bytes || out.raw > max_node_bytes)
    return fmt::format("record claims a node of {} bytes", out.raw);
  // The writer compresses only when that makes the record smaller; a
  // searchable leaf is its encoding and the offsets after it.
  if ((out.flags & compressed_flags)   ? out.stored >= out.raw || out.stored == 0
      : (out.flags & searchable_flags) ? out.stored < out.raw
                                       : out.stored != out.raw)
    return fmt::format("record has stored length {} for a node of {} bytes", out.stored, out.raw);
  return {};
}

void encode_index_entry(std::string& out, std::uint64_t salt, const hash128& h, std::uint64_t offset,
                        std::uint32_t length) {
  std::size_t at = out.size();
  out.resize(at + index_entry_size, '\0');
  std::uint8_t* p = u8(out.data() + at);
  auto hb = h.to_bytes();
  std::copy(hb.begin(), hb.end(), p);
  encode_fixed64_le(p + 16, offset);
  encode_fixed32_le(p + 24, length);
  encode_fixed32_le(p + 28, checksum32(std::string_view(out).substr(at, 28), salt));
}

std::optional<index_file_entry> parse_index_entry(std::string_view bytes, std::uint64_t salt) {
  const char* e = bytes.data();
  if (decode_fixed32_le(u8(e + 28)) != checksum32(bytes.substr(0, 28), salt)) return std::nullopt;
  return index_file_entry{hash128::from_bytes(u8(e)), decode_fixed64_le(u8(e + 16)), decode_fixed32_le(u8(e + 24))};
}

std::string pack_file_name(std::uint32_t number) { return fmt::format("{:08}.pack", number); }
std::string pack_index_file_name(std::uint32_t number) { return fmt::format("{:08}.idx", number); }

std::optional<std::uint32_t> parse_numbered(std::string_view name, std::string_view suffix) {
  if (name.size() != 8 + suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint32_t>(name[i] - '0');
  }
  if (n == 0 || n > max_pack_number) return std::nullopt;
  return n;
}

std::string encode_store_manifest(std::uint32_t first, std::uint64_t position, const std::set<std::uint32_t>& dropped) {
  if (dropped.empty()) return encode_file_header(manifest_magic, {first, position});
  std::string out = encode_file_header(manifest_magic, {first, position, manifest_dropped_version});
  std::string body(4 + 4 * dropped.size(), '\0');
  encode_fixed32_le(u8(body.data()), static_cast<std::uint32_t>(dropped.size()));
  std::size_t at = 4;
  for (std::uint32_t d : dropped) encode_fixed32_le(u8(body.data() + std::exchange(at, at + 4)), d);
  out += body;
  char sum[4];
  encode_fixed32_le(u8(sum), checksum32(body));
  out.append(sum, 4);
  return out;
}

result<std::optional<store_manifest>> read_store_manifest(env& e, const std::string& dir) {
  std::string path = path_join(dir, manifest_file_name);
  auto exists = e.exists(path);
  if (!exists) return exists.error();
  if (!*exists) return std::optional<store_manifest>();
  auto bytes = read_whole_file(e, path);
  if (!bytes) return bytes.error();
  auto h = parse_file_header(*bytes, manifest_magic, "node store manifest", path, manifest_dropped_version);
  if (!h) return h.error();
  std::uint64_t first = h->a, floor = h->b;
  auto bad = [&](std::string why) {
    return status::corruption(fmt::format("node store manifest {}: {} (first pack {}, gc position {:#x}, {} bytes)",
                                          path, why, first, floor, bytes->size()));
  };
  if (first == 0 || first > max_pack_number || position_pack(floor) < first ||
      position_offset(floor) < file_header_size)
    return bad("inconsistent contents");
  store_manifest m{static_cast<std::uint32_t>(first), floor, {}};
  std::string_view rest = std::string_view(*bytes).substr(file_header_size);
  if (h->version == 1) {
    if (!rest.empty()) return bad("bytes after the header");
  } else {
    if (rest.size() < 8) return bad("dropped-pack list is truncated");
    std::uint32_t count = decode_fixed32_le(u8(rest.data()));
    if (count == 0 || rest.size() != 8 + std::uint64_t{4} * count) return bad("dropped-pack list has the wrong size");
    std::string_view body = rest.substr(0, 4 + 4 * std::size_t{count});
    if (decode_fixed32_le(u8(rest.data() + body.size())) != checksum32(body))
      return bad("dropped-pack list checksum mismatch");
    for (std::uint32_t i = 0; i < count; ++i) {
      std::uint32_t d = decode_fixed32_le(u8(body.data() + 4 + 4 * i));
      if (d <= first || d >= position_pack(floor) || (!m.dropped.empty() && d <= *m.dropped.rbegin()))
        return bad(fmt::format("dropped pack {} is not between the first pack and the gc position's, ascending", d));
      m.dropped.insert(d);
    }
  }
  return std::optional<store_manifest>(std::move(m));
}

}  // namespace magnetite::tree
