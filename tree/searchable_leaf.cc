#include "tree/searchable_leaf.h"

#include "core/coding.h"
#include "core/file_header.h"

#include <optional>

namespace magnetite::tree::searchable_leaf {

namespace {

// Offsets are 2 bytes wide while every one of them fits.
std::size_t offset_width(std::size_t raw_length) noexcept { return raw_length <= 0xffff ? 2 : 4; }
constexpr std::size_t sum_width = 4;
// The bytes stored past the encoding for each entry.
std::size_t per_entry(std::size_t raw_length, sums s) noexcept {
  return offset_width(raw_length) + (s == sums::per_entry ? sum_width : 0);
}

const std::uint8_t* u8(const char* p) noexcept { return reinterpret_cast<const std::uint8_t*>(p); }

std::uint32_t offset_at(std::string_view stored, std::size_t raw_length, std::size_t width, std::size_t i) noexcept {
  const char* p = stored.data() + raw_length + width * i;
  return width == 2 ? decode_fixed16_le(u8(p)) : decode_fixed32_le(u8(p));
}

// The leaf's entry count, and where its first entry starts; false when the
// encoding does not begin as a leaf's does.
bool leaf_head(std::string_view encoding, std::uint64_t& count, std::size_t& first) noexcept {
  if (encoding.empty() || encoding[0] != 0) return false;
  byte_reader in(encoding.substr(1));
  if (!in.get_varint64(count)) return false;
  first = encoding.size() - in.rest().size();
  return true;
}

}  // namespace

std::string make(const node& n) {
  std::string_view enc = n.encode();
  std::size_t width = offset_width(enc.size());
  auto entries = n.entries();
  std::string out;
  out.reserve(enc.size() + per_entry(enc.size(), sums::per_entry) * entries.size());
  out.append(enc);
  // An entry starts with its key's length, just before the key, and ends
  // with its value (where the next one starts).
  auto start = [&](const entry_view& e) {
    return static_cast<std::size_t>(e.key.data() - enc.data()) - varint_length(e.key.size());
  };
  for (const entry_view& e : entries) {
    std::uint8_t b[4];
    if (width == 2) {
      encode_fixed16_le(b, static_cast<std::uint16_t>(start(e)));
    } else {
      encode_fixed32_le(b, static_cast<std::uint32_t>(start(e)));
    }
    out.append(reinterpret_cast<const char*>(b), width);
  }
  for (const entry_view& e : entries) {
    std::size_t end = static_cast<std::size_t>(e.value.data() - enc.data()) + e.value.size();
    std::uint8_t b[sum_width];
    encode_fixed32_le(b, checksum32(enc.substr(start(e), end - start(e))));
    out.append(reinterpret_cast<const char*>(b), sum_width);
  }
  return out;
}

std::string check(std::string_view stored, std::uint32_t raw_length, sums s) {
  if (raw_length > stored.size()) return fmt::format("a leaf of {} bytes stored in {}", raw_length, stored.size());
  std::uint64_t count = 0;
  std::size_t first = 0;
  if (!leaf_head(stored.substr(0, raw_length), count, first)) return "a searchable record that is not a leaf";
  std::size_t width = offset_width(raw_length);
  std::size_t each = per_entry(raw_length, s);
  if ((stored.size() - raw_length) % each != 0 || (stored.size() - raw_length) / each != count)
    return fmt::format("a leaf of {} entries with {} bytes of offsets{}", count, stored.size() - raw_length,
                       s == sums::per_entry ? " and sums" : "");
  // Each entry takes at least 3 bytes (two lengths and a key byte): offsets
  // that increase by less would not be entries, and the first follows the count.
  std::size_t prev = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t at = offset_at(stored, raw_length, width, i);
    if (i == 0 ? at != first : at < prev + 3) return fmt::format("leaf entry {} at offset {} is out of order", i, at);
    if (at + 3 > raw_length) return fmt::format("leaf entry {} at offset {} is past the encoding", i, at);
    prev = at;
  }
  return {};
}

result<bool> search(std::string_view stored, std::uint32_t raw_length, sums s, const hash128& h, std::string_view key,
                    std::string& value) {
  std::string_view enc = stored.substr(0, raw_length);
  std::size_t width = offset_width(raw_length);
  std::size_t count = (stored.size() - raw_length) / per_entry(raw_length, s);
  const char* sum_at = stored.data() + raw_length + width * count;
  auto bad = [&](std::size_t i) {
    return status::corruption(fmt::format("tree node {}: the entry its offset {} names is malformed", h, i));
  };
  // Entry i's bytes, checked against its sum when the form has sums (check()
  // made sure offsets increase and lie inside the encoding).
  auto entry_at = [&](std::size_t i) -> std::optional<std::string_view> {
    std::size_t at = offset_at(stored, raw_length, width, i);
    if (s == sums::none) return enc.substr(at);
    std::size_t end = i + 1 < count ? offset_at(stored, raw_length, width, i + 1) : raw_length;
    std::string_view bytes = enc.substr(at, end - at);
    if (checksum32(bytes) != decode_fixed32_le(u8(sum_at + sum_width * i))) return std::nullopt;
    return bytes;
  };
  // The first entry whose key is >= key.
  std::size_t lo = 0, len = count;
  std::string_view found_key, found_rest;
  while (len > 0) {
    std::size_t half = len / 2;
    std::size_t mid = lo + half;
    auto bytes = entry_at(mid);
    if (!bytes)
      return status::corruption(
          fmt::format("tree node {}: entry {} does not match its sum (the stored leaf is damaged)", h, mid));
    byte_reader in(*bytes);
    std::string_view k;
    if (!in.get_length_prefixed(k)) return bad(mid);
    if (k < key) {
      lo = mid + 1;
      len -= half + 1;
    } else {
      found_key = k;
      found_rest = in.rest();
      len = half;
    }
  }
  // The last probe that went left was at lo, when there was one.
  if (lo == count || found_key != key) return false;
  byte_reader in(found_rest);
  std::string_view v;
  if (!in.get_length_prefixed(v)) return bad(lo);
  value.assign(v);
  return true;
}

}  // namespace magnetite::tree::searchable_leaf
