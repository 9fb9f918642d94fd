// coding: fixed-width integers, varints and an order-preserving encoding for
// composite keys.
//
// Contract:
// - encode_* write to a caller-provided buffer that has room; put_* append to a
//   std::string; decode_* read from a buffer the caller has bounds-checked.
// - get_* read from a byte_reader and return false (consuming nothing useful) when
//   the input is short or malformed: they never read past the end.
// - key_encoder output compares with memcmp exactly as the component tuples compare
//   component by component (bytes lexicographically, u64 numerically, i64 signed).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace magnetite {

// ---- fixed width, little-endian (the on-disk default) ----------------------
inline void encode_fixed16_le(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
inline void encode_fixed32_le(std::uint8_t* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void encode_fixed64_le(std::uint8_t* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint16_t decode_fixed16_le(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t decode_fixed32_le(const std::uint8_t* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t decode_fixed64_le(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ---- fixed width, big-endian (for hashes and ordered keys) -----------------
inline void encode_fixed32_be(std::uint8_t* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (3 - i)));
}
inline void encode_fixed64_be(std::uint8_t* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * (7 - i)));
}
inline std::uint32_t decode_fixed32_be(const std::uint8_t* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t decode_fixed64_be(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

void put_fixed32_le(std::string& dst, std::uint32_t v);
void put_fixed64_le(std::string& dst, std::uint64_t v);
void put_fixed64_be(std::string& dst, std::uint64_t v);

// ---- varints (LEB128: 7 bits a byte, low bits first) -----------------------
constexpr std::size_t max_varint32_bytes = 5;
constexpr std::size_t max_varint64_bytes = 10;

void put_varint32(std::string& dst, std::uint32_t v);
void put_varint64(std::string& dst, std::uint64_t v);
std::size_t varint_length(std::uint64_t v) noexcept;
// Appends varint(len) then the bytes.
void put_length_prefixed(std::string& dst, std::string_view bytes);

// A cursor over an input buffer. Every get_* is bounds-checked.
class byte_reader {
 public:
  explicit byte_reader(std::string_view in) noexcept : in_(in) {}

  bool get_varint32(std::uint32_t& v) noexcept;
  bool get_varint64(std::uint64_t& v) noexcept;
  bool get_fixed32_le(std::uint32_t& v) noexcept;
  bool get_fixed64_le(std::uint64_t& v) noexcept;
  bool get_bytes(std::size_t n, std::string_view& out) noexcept;
  bool get_length_prefixed(std::string_view& out) noexcept;

  std::string_view rest() const noexcept { return in_; }
  bool empty() const noexcept { return in_.empty(); }

 private:
  std::string_view in_;
};

// ---- order-preserving composite keys ---------------------------------------
// Component encodings (no type tags: the schema fixes each position's type):
//   bytes: each 0x00 becomes 0x00 0xFF, then the terminator 0x00 0x01. Prefix-free,
//          and a shorter string sorts before its extensions whatever follows it.
//   u64:   8 bytes big-endian.
//   i64:   8 bytes big-endian with the sign bit flipped.
class key_encoder {
 public:
  key_encoder& bytes(std::string_view b);
  key_encoder& u64(std::uint64_t v);
  key_encoder& i64(std::int64_t v);

  const std::string& str() const& noexcept { return out_; }
  std::string str() && noexcept { return std::move(out_); }

 private:
  std::string out_;
};

// Reads components back in the order they were encoded; nullopt when the input
// does not hold a well-formed component of the asked type.
class key_decoder {
 public:
  explicit key_decoder(std::string_view in) noexcept : in_(in) {}

  std::optional<std::string> bytes();
  std::optional<std::uint64_t> u64() noexcept;
  std::optional<std::int64_t> i64() noexcept;
  bool done() const noexcept { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace magnetite
