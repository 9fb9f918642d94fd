#include "core/coding.h"

namespace magnetite {

void put_fixed32_le(std::string& dst, std::uint32_t v) {
  std::uint8_t b[4];
  encode_fixed32_le(b, v);
  dst.append(reinterpret_cast<const char*>(b), 4);
}

void put_fixed64_le(std::string& dst, std::uint64_t v) {
  std::uint8_t b[8];
  encode_fixed64_le(b, v);
  dst.append(reinterpret_cast<const char*>(b), 8);
}

void put_fixed64_be(std::string& dst, std::uint64_t v) {
  std::uint8_t b[8];
  encode_fixed64_be(b, v);
  dst.append(reinterpret_cast<const char*>(b), 8);
}

void put_varint64(std::string& dst, std::uint64_t v) {
  char buf[max_varint64_bytes];
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  dst.append(buf, n);
}

void put_varint32(std::string& dst, std::uint32_t v) { put_varint64(dst, v); }

std::size_t varint_length(std::uint64_t v) noexcept {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void put_length_prefixed(std::string& dst, std::string_view bytes) {
  put_varint64(dst, bytes.size());
  dst.append(bytes);
}

bool byte_reader::get_varint64(std::uint64_t& v) noexcept {
  std::uint64_t result = 0;
  for (std::size_t i = 0; i < max_varint64_bytes && i < in_.size(); ++i) {
    auto byte = static_cast<std::uint8_t>(in_[i]);
    // The tenth byte may only carry the top bit of a 64-bit value.
    if (i == max_varint64_bytes - 1 && byte > 1) return false;
    result |= static_cast<std::uint64_t>(byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (i > 0 && byte == 0) return false;  // overlong: one encoding per value
      v = result;
      in_.remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

bool byte_reader::get_varint32(std::uint32_t& v) noexcept {
  std::string_view saved = in_;
  std::uint64_t wide = 0;
  if (!get_varint64(wide) || wide > 0xFFFFFFFFULL) {
    in_ = saved;
    return false;
  }
  v = static_cast<std::uint32_t>(wide);
  return true;
}

bool byte_reader::get_fixed32_le(std::uint32_t& v) noexcept {
  if (in_.size() < 4) return false;
  v = decode_fixed32_le(reinterpret_cast<const std::uint8_t*>(in_.data()));
  in_.remove_prefix(4);
  return true;
}

bool byte_reader::get_fixed64_le(std::uint64_t& v) noexcept {
  if (in_.size() < 8) return false;
  v = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(in_.data()));
  in_.remove_prefix(8);
  return true;
}

bool byte_reader::get_bytes(std::size_t n, std::string_view& out) noexcept {
  if (in_.size() < n) return false;
  out = in_.substr(0, n);
  in_.remove_prefix(n);
  return true;
}

bool byte_reader::get_length_prefixed(std::string_view& out) noexcept {
  std::string_view saved = in_;
  std::uint64_t n = 0;
  if (!get_varint64(n) || n > in_.size()) {
    in_ = saved;
    return false;
  }
  return get_bytes(static_cast<std::size_t>(n), out);
}

key_encoder& key_encoder::bytes(std::string_view b) {
  for (char c : b) {
    out_.push_back(c);
    if (c == '\0') out_.push_back('\xFF');
  }
  out_.push_back('\0');
  out_.push_back('\x01');
  return *this;
}

key_encoder& key_encoder::u64(std::uint64_t v) {
  put_fixed64_be(out_, v);
  return *this;
}

key_encoder& key_encoder::i64(std::int64_t v) {
  put_fixed64_be(out_, static_cast<std::uint64_t>(v) ^ (1ULL << 63));
  return *this;
}

std::optional<std::string> key_decoder::bytes() {
  std::string out;
  for (std::size_t i = 0; i < in_.size(); ++i) {
    if (in_[i] != '\0') {
      out.push_back(in_[i]);
      continue;
    }
    if (i + 1 >= in_.size()) return std::nullopt;
    if (in_[i + 1] == '\x01') {
      in_.remove_prefix(i + 2);
      return out;
    }
    if (in_[i + 1] != '\xFF') return std::nullopt;
    out.push_back('\0');
    ++i;
  }
  return std::nullopt;  // no terminator
}

std::optional<std::uint64_t> key_decoder::u64() noexcept {
  if (in_.size() < 8) return std::nullopt;
  std::uint64_t v = decode_fixed64_be(reinterpret_cast<const std::uint8_t*>(in_.data()));
  in_.remove_prefix(8);
  return v;
}

std::optional<std::int64_t> key_decoder::i64() noexcept {
  auto u = u64();
  if (!u) return std::nullopt;
  return static_cast<std::int64_t>(*u ^ (1ULL << 63));
}

}  // namespace magnetite
