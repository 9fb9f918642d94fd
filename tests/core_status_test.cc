#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <type_traits>

#include "core/hash128.h"
#include "core/limits.h"
#include "core/status.h"
#include "magnetite/version.h"

using namespace magnetite;

TEST_CASE("status: ok has no category, errors keep code, category and message") {
  status ok;
  CHECK(ok.is_ok());
  CHECK(ok.category() == status_category::none);
  CHECK(ok.to_string() == "ok");

  status s = status::io_error("disk on fire", status_category::ambiguous);
  CHECK_FALSE(s.is_ok());
  CHECK(s.code() == status_code::io_error);
  CHECK(s.category() == status_category::ambiguous);
  CHECK(s.message() == "disk on fire");
  CHECK(s.to_string().find("ambiguous") != std::string::npos);
  CHECK(s.to_string().find("disk on fire") != std::string::npos);

  status t = s.with_category(status_category::permanent);
  CHECK(t.code() == status_code::io_error);
  CHECK(t.category() == status_category::permanent);
  CHECK(t.message() == s.message());
  CHECK(status::busy("x").category() == status_category::transient);
  // An ok status cannot be given a category.
  CHECK(status::make(status_code::ok, status_category::permanent, "").category() == status_category::none);
}

TEST_CASE("result: holds a value or an error, never an ok error") {
  result<int> v = 7;
  REQUIRE(v.is_ok());
  CHECK(*v == 7);
  CHECK(v.error().is_ok());

  result<int> e = status::not_found("nope");
  CHECK_FALSE(e.is_ok());
  CHECK(e.error().code() == status_code::not_found);

  result<int> bad = status::ok();
  CHECK_FALSE(bad.is_ok());
  CHECK(bad.error().code() == status_code::failed);
}

TEST_CASE("result: a temporary gives its value away; a const result gives const access") {
  auto text = [](std::string s) -> result<std::string> { return s; };
  CHECK(*text("temporary") == "temporary");
  CHECK(text("arrow")->size() == 5);
  static_assert(std::is_same_v<decltype(*text("")), std::string&&>);
  // A move-only value can be taken out of the temporary with * alone.
  auto owned = [] { return result<std::unique_ptr<int>>(std::make_unique<int>(7)); };
  std::unique_ptr<int> p = *owned();
  REQUIRE(p);
  CHECK(*p == 7);

  const result<std::string> fixed = std::string("const");
  static_assert(std::is_same_v<decltype(*fixed), const std::string&>);
  CHECK(*fixed == "const");
  CHECK(fixed.value() == "const");
  CHECK(fixed->size() == 5);
  // A const temporary cannot give its value away: it is copied.
  auto frozen = []() -> const result<std::string> { return std::string("frozen"); };
  std::string copy = *frozen();
  CHECK(copy == "frozen");

  result<std::string> held = std::string("held");
  std::string moved = *std::move(held);
  CHECK(moved == "held");
}

TEST_CASE("hash128: hex and byte round trips, parse rejects malformed input") {
  std::set<hash128> seen;
  for (int i = 0; i < 1000; ++i) {
    hash128 h = hash128::of(fmt::format("input-{}", i));
    CHECK(seen.insert(h).second);
    std::string hex = h.to_hex();
    REQUIRE(hex.size() == 32);
    auto back = hash128::parse_hex(hex);
    REQUIRE(back);
    CHECK(*back == h);
    auto bytes = h.to_bytes();
    CHECK(hash128::from_bytes(bytes.data()) == h);
    CHECK(fmt::format("{}", h) == hex);
  }
  // The byte (and hex) order is the numeric order.
  hash128 a{1, 0}, b{0, ~0ULL};
  CHECK(b < a);
  CHECK(b.to_hex() < a.to_hex());
  auto ab = a.to_bytes(), bb = b.to_bytes();
  CHECK(std::lexicographical_compare(bb.begin(), bb.end(), ab.begin(), ab.end()));

  CHECK(hash128::parse_hex("ABCDEF0123456789abcdef0123456789"));
  CHECK_FALSE(hash128::parse_hex(""));
  CHECK_FALSE(hash128::parse_hex("abc"));
  CHECK_FALSE(hash128::parse_hex("g0000000000000000000000000000000"));
  CHECK_FALSE(hash128::parse_hex("000000000000000000000000000000000"));
  // Deterministic: the same bytes give the same hash through both overloads.
  std::string s = "magnetite";
  CHECK(hash128::of(s) == hash128::of(std::as_bytes(std::span(s.data(), s.size()))));
}

TEST_CASE("limits: keys and values at the limit pass, one byte more is refused") {
  CHECK(limits::check_key(std::string(limits::max_key_bytes, 'k')).is_ok());
  CHECK(limits::check_key(std::string(limits::max_key_bytes + 1, 'k')).code() == status_code::invalid_argument);
  CHECK(limits::check_key("").code() == status_code::invalid_argument);
  CHECK(limits::check_value("").is_ok());
  CHECK(limits::check_value(std::string(limits::max_value_bytes, 'v')).is_ok());
  status s = limits::check_value(std::string(limits::max_value_bytes + 1, 'v'));
  CHECK(s.code() == status_code::invalid_argument);
  CHECK(s.category() == status_category::permanent);
  CHECK(s.message().find("exceeds") != std::string::npos);
}

TEST_CASE("version: the library's version() is the version of the headers it was built with") {
  std::string expected = fmt::format("{}.{}.{}", MAGNETITE_VERSION_MAJOR, MAGNETITE_VERSION_MINOR, MAGNETITE_VERSION_PATCH);
  CHECK(std::string(magnetite::version()) == expected);
}
