#include <doctest/doctest.h>

#include <random>
#include <tuple>

#include "core/coding.h"

using namespace magnetite;

TEST_CASE("varint: round trips at every width boundary and at random") {
  std::vector<std::uint64_t> values = {0, 1, 127, 128, 255, 256, 16383, 16384, (1ULL << 32) - 1,
                                       1ULL << 32, ~0ULL, ~0ULL - 1};
  for (int shift = 0; shift < 64; ++shift) values.push_back(1ULL << shift);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 1000; ++i) values.push_back(rng() >> (rng() % 64));
  std::string buf;
  for (auto v : values) put_varint64(buf, v);
  byte_reader in(buf);
  for (auto v : values) {
    std::uint64_t got = 0;
    REQUIRE(in.get_varint64(got));
    CHECK(got == v);
    CHECK(varint_length(v) <= max_varint64_bytes);
  }
  CHECK(in.empty());
}

TEST_CASE("varint: truncated, overlong and 32-bit-overflowing input is refused") {
  std::string buf;
  put_varint64(buf, ~0ULL);
  for (std::size_t n = 0; n < buf.size(); ++n) {
    byte_reader in(std::string_view(buf).substr(0, n));
    std::uint64_t v;
    CHECK_FALSE(in.get_varint64(v));
  }
  std::string overlong(10, '\xFF');
  overlong.push_back('\x01');
  byte_reader o(overlong);
  std::uint64_t v;
  CHECK_FALSE(o.get_varint64(v));
  std::string tenth(9, '\xFF');
  tenth.push_back('\x02');  // would need bit 64
  byte_reader t(tenth);
  CHECK_FALSE(t.get_varint64(v));

  // Non-canonical (overlong) encodings of small values are refused too.
  byte_reader zero(std::string_view("\x80\x00", 2));
  CHECK_FALSE(zero.get_varint64(v));
  byte_reader one(std::string_view("\x81\x80\x00", 3));
  CHECK_FALSE(one.get_varint64(v));

  std::string big;
  put_varint64(big, 1ULL << 32);
  byte_reader b(big);
  std::uint32_t v32;
  CHECK_FALSE(b.get_varint32(v32));
  CHECK(b.rest().size() == big.size());  // nothing consumed
}

TEST_CASE("fixed width: little and big endian round trip, byte order as documented") {
  std::uint8_t b[8];
  encode_fixed32_le(b, 0x01020304);
  CHECK(b[0] == 0x04);
  CHECK(decode_fixed32_le(b) == 0x01020304u);
  encode_fixed32_be(b, 0x01020304);
  CHECK(b[0] == 0x01);
  CHECK(decode_fixed32_be(b) == 0x01020304u);
  encode_fixed64_le(b, 0x0102030405060708ULL);
  CHECK(b[7] == 0x01);
  CHECK(decode_fixed64_le(b) == 0x0102030405060708ULL);
  encode_fixed64_be(b, 0x0102030405060708ULL);
  CHECK(b[7] == 0x08);
  CHECK(decode_fixed64_be(b) == 0x0102030405060708ULL);
  std::string s;
  put_fixed32_le(s, 7);
  put_fixed64_le(s, 9);
  byte_reader in(s);
  std::uint32_t a;
  std::uint64_t c;
  REQUIRE(in.get_fixed32_le(a));
  REQUIRE(in.get_fixed64_le(c));
  CHECK(a == 7);
  CHECK(c == 9);
  CHECK_FALSE(in.get_fixed32_le(a));
}

TEST_CASE("length-prefixed strings refuse lengths beyond the input") {
  std::string s;
  put_length_prefixed(s, "hello");
  byte_reader ok(s);
  std::string_view out;
  REQUIRE(ok.get_length_prefixed(out));
  CHECK(out == "hello");
  byte_reader shortened(std::string_view(s).substr(0, s.size() - 1));
  CHECK_FALSE(shortened.get_length_prefixed(out));
  CHECK(shortened.rest().size() == s.size() - 1);
}

namespace {
std::string random_bytes(std::mt19937_64& rng) {
  // Small alphabet with NUL and 0xFF so escapes and terminators meet often.
  static const char alphabet[] = {'\0', '\x01', '\xFF', 'a', 'b'};
  std::string s(rng() % 5, '\0');
  for (auto& c : s) c = alphabet[rng() % 5];
  return s;
}
}  // namespace

TEST_CASE("key_encoder: memcmp order of encodings equals tuple order (property)") {
  std::mt19937_64 rng(7);
  using tuple = std::tuple<std::string, std::int64_t, std::string, std::uint64_t>;
  std::vector<tuple> tuples;
  for (int i = 0; i < 400; ++i) {
    std::int64_t signed_values[] = {INT64_MIN, -1, 0, 1, INT64_MAX, static_cast<std::int64_t>(rng())};
    std::uint64_t unsigned_values[] = {0, 1, ~0ULL, rng()};
    tuples.emplace_back(random_bytes(rng), signed_values[rng() % 6], random_bytes(rng),
                        unsigned_values[rng() % 4]);
  }
  auto encode = [](const tuple& t) {
    key_encoder e;
    e.bytes(std::get<0>(t)).i64(std::get<1>(t)).bytes(std::get<2>(t)).u64(std::get<3>(t));
    return std::move(e).str();
  };
  for (const auto& a : tuples) {
    std::string ea = encode(a);
    key_decoder d(ea);
    CHECK(d.bytes() == std::get<0>(a));
    CHECK(d.i64() == std::get<1>(a));
    CHECK(d.bytes() == std::get<2>(a));
    CHECK(d.u64() == std::get<3>(a));
    CHECK(d.done());
    for (int j = 0; j < 40; ++j) {
      const auto& b = tuples[rng() % tuples.size()];
      std::string eb = encode(b);
      int by_tuple = a < b ? -1 : (b < a ? 1 : 0);
      int by_bytes = ea < eb ? -1 : (eb < ea ? 1 : 0);
      CHECK(by_tuple == by_bytes);
    }
  }
}

TEST_CASE("key_decoder: malformed components are refused") {
  CHECK_FALSE(key_decoder("abc").bytes());             // no terminator
  CHECK_FALSE(key_decoder(std::string_view("a\0", 2)).bytes());  // cut terminator
  CHECK_FALSE(key_decoder(std::string_view("a\0\x05", 3)).bytes());  // bad escape
  CHECK_FALSE(key_decoder("1234567").u64());           // short integer
}
