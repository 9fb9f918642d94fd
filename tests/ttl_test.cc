// The expiry index against a brute-force model, and the value envelope.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/limits.h"
#include "ttl/envelope.h"
#include "ttl/expiry_index.h"

using namespace magnetite;
using namespace magnetite::ttl;

TEST_CASE("expiry_index: agrees with a model under random sets, erases and sweeps") {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    expiry_index idx;
    std::map<std::string, std::uint64_t> model;  // key -> deadline
    std::uint64_t now = 0;
    for (int op = 0; op < 2000; ++op) {
      std::string k = fmt::format("k{}", rng() % 200);
      switch (rng() % 5) {
        case 0:
        case 1: {
          std::uint64_t d = now + rng() % 1000;
          idx.set(k, d);
          model[k] = d;
          break;
        }
        case 2:
          idx.erase(k);
          model.erase(k);
          break;
        case 3: {
          now += rng() % 200;
          std::size_t limit = 1 + rng() % 10;
          // The model's answer: expired keys by (deadline, key), at most limit.
          std::vector<std::pair<std::uint64_t, std::string>> due;
          for (auto& [mk, d] : model)
            if (d <= now) due.emplace_back(d, mk);
          std::sort(due.begin(), due.end());
          if (due.size() > limit) due.resize(limit);
          auto got = idx.take_expired(now, limit);
          REQUIRE(got.size() == due.size());
          for (std::size_t i = 0; i < got.size(); ++i) {
            CHECK(got[i].key == due[i].second);
            CHECK(got[i].deadline_ns == due[i].first);
            model.erase(due[i].second);
          }
          break;
        }
        default: {
          auto d = idx.deadline(k);
          auto it = model.find(k);
          CHECK(d.has_value() == (it != model.end()));
          if (d && it != model.end()) CHECK(*d == it->second);
        }
      }
      CHECK(idx.size() == model.size());
      std::optional<std::uint64_t> earliest;
      for (auto& [mk, d] : model)
        if (!earliest || d < *earliest) earliest = d;
      CHECK(idx.earliest() == earliest);
    }
  }
}

TEST_CASE("envelope: round trips with and without an expiry, at the limits") {
  std::string big(limits::max_value_bytes, 'v');
  for (std::string_view v : {std::string_view(""), std::string_view("x"), std::string_view("\0\1", 2),
                             std::string_view(big)}) {
    for (std::optional<std::uint64_t> at : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{0},
                                            std::optional<std::uint64_t>{1'700'000'000'000'000'000ULL},
                                            std::optional<std::uint64_t>{~0ULL}}) {
      std::string w = wrap(v, at);
      CHECK(w.size() <= v.size() + max_envelope_overhead);
      auto u = unwrap(w);
      REQUIRE(u.is_ok());
      CHECK(u->value == v);
      CHECK(u->expires_at_ns == at);
    }
  }
}

TEST_CASE("envelope: expiry is absolute and inclusive") {
  auto u = unwrap(wrap("v", 1000));
  REQUIRE(u.is_ok());
  CHECK_FALSE(u->expired(999));
  CHECK(u->expired(1000));
  CHECK(u->expired(5000));
  CHECK_FALSE(unwrap(wrap("v", std::nullopt))->expired(~0ULL));
}

TEST_CASE("envelope: malformed input is an error, never a guess") {
  CHECK(unwrap("").error().code() == status_code::corruption);
  std::string w = wrap("value", 42);
  for (std::size_t n = 1; n < max_envelope_overhead; ++n)
    CHECK(unwrap(std::string_view(w).substr(0, n)).error().code() == status_code::corruption);
  CHECK(unwrap("\x07rest").error().code() == status_code::not_supported);
}

TEST_CASE("envelope: live_value is the value before the deadline, absent from it on, and refuses damage") {
  std::string stored = ttl::wrap("v", 1000);
  CHECK(ttl::live_value(stored, 999).value() == std::optional<std::string>("v"));
  CHECK_FALSE(ttl::live_value(stored, 1000).value().has_value());
  CHECK(ttl::live_value(ttl::wrap("plain", std::nullopt), ~std::uint64_t{0}).value() ==
        std::optional<std::string>("plain"));
  CHECK(ttl::live_value(stored.substr(0, 4), 0).error().code() == status_code::corruption);
  CHECK(ttl::live_value(std::string("\x07junk"), 0).error().code() == status_code::not_supported);
}
