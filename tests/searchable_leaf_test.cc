// Tests of the searchable form of a leaf (tree/searchable_leaf.h): it finds
// what the decoded node finds, check() refuses malformed forms, and no form
// check() accepts makes a search read outside it (run under ASan by `make
// sanitize`).
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/coding.h"
#include "tree/node.h"
#include "tree/searchable_leaf.h"

using namespace magnetite;
using namespace magnetite::tree;

namespace {

node random_leaf(std::mt19937_64& rng, std::size_t entries, std::size_t max_value) {
  std::map<std::string, std::string> m;
  while (m.size() < entries) {
    std::string k(1 + rng() % 24, '\0');
    for (auto& c : k) c = static_cast<char>('a' + rng() % 4);  // shared prefixes, neighbours close
    std::string v(rng() % (max_value + 1), '\0');
    for (auto& c : v) c = static_cast<char>(rng());
    m[k] = v;
  }
  std::vector<entry> es;
  for (auto& [k, v] : m) es.push_back({k, v});
  return node(0, es);
}

// Keys that are not in the leaf but sort around its keys: before the first,
// between neighbours, after the last, and prefixes of keys.
std::vector<std::string> absent_keys(const node& n) {
  std::vector<std::string> out = {"", std::string(1, '\0'), "zzzz"};
  for (const auto& e : n.entries()) {
    out.push_back(std::string(e.key) + '\0');
    if (e.key.size() > 1) out.push_back(std::string(e.key.substr(0, e.key.size() - 1)));
  }
  std::erase_if(out, [&](const std::string& k) {
    std::size_t i = n.lower_bound(k);
    return k.empty() || (i < n.entries().size() && n.entries()[i].key == k);
  });
  return out;
}

hash128 some_hash() { return hash128::of(std::string_view("leaf")); }

using searchable_leaf::sums;

// The form of a version-3 pack (offsets, no sums): make()'s form without its
// sums, which follow the offsets.
std::string without_sums(const std::string& stored, std::uint32_t raw, std::size_t entries) {
  std::size_t width = raw <= 0xffff ? 2 : 4;
  return stored.substr(0, raw + width * entries);
}

}  // namespace

TEST_CASE("searchable_leaf: every key is found with its value, and no other key is") {
  std::mt19937_64 rng(11);
  // Small and large leaves; values past 64 KiB make 4-byte offsets.
  for (auto [entries, max_value] : std::vector<std::pair<std::size_t, std::size_t>>{
           {0, 0}, {1, 10}, {2, 0}, {40, 100}, {300, 20}, {3, 40'000}, {5, 30'000}}) {
    CAPTURE(entries);
    CAPTURE(max_value);
    node n = random_leaf(rng, entries, max_value);
    std::string summed = searchable_leaf::make(n);
    auto raw = static_cast<std::uint32_t>(n.encode().size());
    REQUIRE(summed.substr(0, raw) == n.encode());  // the encoding first, whole: the hash is over it
    std::size_t width = raw <= 0xffff ? 2 : 4;
    CHECK(summed.size() == raw + (width + 4) * entries);
    for (sums s : {sums::per_entry, sums::none}) {
      CAPTURE(static_cast<int>(s));
      std::string stored = s == sums::none ? without_sums(summed, raw, entries) : summed;
      REQUIRE(searchable_leaf::check(stored, raw, s).empty());
      // Each form has its own length: read as the other, it is refused.
      if (entries > 0)
        CHECK_FALSE(searchable_leaf::check(stored, raw, s == sums::none ? sums::per_entry : sums::none).empty());
      std::string value;
      for (const auto& e : n.entries()) {
        auto found = searchable_leaf::search(stored, raw, s, some_hash(), e.key, value);
        REQUIRE(found.is_ok());
        CHECK(*found);
        CHECK(value == e.value);
      }
      for (const auto& k : absent_keys(n)) {
        auto found = searchable_leaf::search(stored, raw, s, some_hash(), k, value);
        REQUIRE(found.is_ok());
        CHECK_FALSE(*found);
      }
    }
  }
}

TEST_CASE("searchable_leaf: check refuses what is not a leaf's form, naming what is wrong") {
  std::mt19937_64 rng(12);
  node n = random_leaf(rng, 30, 50);
  auto raw = static_cast<std::uint32_t>(n.encode().size());
  for (sums s : {sums::per_entry, sums::none}) {
    CAPTURE(static_cast<int>(s));
    std::string good = s == sums::none ? without_sums(searchable_leaf::make(n), raw, 30) : searchable_leaf::make(n);
    auto check = [&](const std::string& stored, std::uint32_t raw_length) {
      return searchable_leaf::check(stored, raw_length, s);
    };
    auto offset = [&](std::size_t i) {
      return decode_fixed16_le(reinterpret_cast<const std::uint8_t*>(good.data() + raw + 2 * i));
    };
    auto with_offset = [&](std::size_t i, std::uint16_t v) {
      std::string s = good;
      encode_fixed16_le(reinterpret_cast<std::uint8_t*>(s.data() + raw + 2 * i), v);
      return s;
    };
    REQUIRE(check(good, raw).empty());
    CHECK_FALSE(check(good.substr(0, good.size() - 2), raw).empty());  // an offset short
    CHECK_FALSE(check(good + "xx", raw).empty());                      // one too many
    CHECK_FALSE(check(good.substr(0, good.size() - 1), raw).empty());  // half an offset
    CHECK_FALSE(check(good, raw + 1).empty());                         // a raw length that lies
    CHECK_FALSE(check(good, static_cast<std::uint32_t>(good.size() + 1)).empty());
    CHECK_FALSE(check(with_offset(0, static_cast<std::uint16_t>(offset(0) + 1)), raw).empty());
    CHECK_FALSE(check(with_offset(5, offset(4)), raw).empty());                             // not increasing
    CHECK_FALSE(check(with_offset(29, static_cast<std::uint16_t>(raw - 1)), raw).empty());  // past the end
    std::string internal = good;
    internal[0] = 1;
    CHECK(check(internal, raw).find("not a leaf") != std::string::npos);
  }
}

// A form whose offsets were damaged in a way check() does not see (they still
// increase and stay inside the encoding) must never make search read outside
// the form: an answer, a miss or corruption, nothing else.
TEST_CASE("searchable_leaf: damaged offsets that pass check never make a search read outside the form") {
  std::mt19937_64 rng(13);
  int accepted = 0, errors = 0;
  for (int round = 0; round < 300; ++round) {
    node n = random_leaf(rng, 2 + rng() % 60, 60);
    auto raw = static_cast<std::uint32_t>(n.encode().size());
    sums s = round % 2 ? sums::none : sums::per_entry;
    std::string stored = searchable_leaf::make(n);
    if (s == sums::none) stored = without_sums(stored, raw, n.entries().size());
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      std::size_t at = raw + rng() % (stored.size() - raw);
      stored[at] = static_cast<char>(stored[at] ^ (1 << (rng() % 8)));
    }
    if (!searchable_leaf::check(stored, raw, s).empty()) continue;
    ++accepted;
    // Exactly sized: ASan sees any read past the end.
    std::vector<char> exact(stored.begin(), stored.end());
    std::string_view view(exact.data(), exact.size());
    std::string value;
    for (const auto& e : n.entries()) {
      auto found = searchable_leaf::search(view, raw, s, some_hash(), e.key, value);
      if (!found.is_ok()) {
        CHECK(found.error().code() == status_code::corruption);
        ++errors;
      }
    }
  }
  CHECK(accepted > 50);  // the property was exercised
  MESSAGE(accepted << " damaged forms passed check; " << errors << " searches reported corruption");
}

// With sums, a search needs no hash of the whole leaf: damage to any entry
// it reads is corruption, and no search returns a value the leaf did not
// hold. The key searched for is always in the entry the search ends on, so
// damage to that entry is always found.
TEST_CASE("searchable_leaf: with sums, a damaged entry is found by any search that reads it") {
  std::mt19937_64 rng(14);
  int found_damage = 0;
  for (int round = 0; round < 300; ++round) {
    node n = random_leaf(rng, 2 + rng() % 60, 60);
    auto raw = static_cast<std::uint32_t>(n.encode().size());
    std::string stored = searchable_leaf::make(n);
    auto entries = n.entries();
    std::size_t j = rng() % entries.size();
    // A bit of entry j's bytes, from its key length to its value's end.
    std::size_t start = entries[j].key.data() - n.encode().data() - varint_length(entries[j].key.size());
    std::size_t end = entries[j].value.data() + entries[j].value.size() - n.encode().data();
    std::size_t at = start + rng() % (end - start);
    stored[at] = static_cast<char>(stored[at] ^ (1 << (rng() % 8)));
    REQUIRE(searchable_leaf::check(stored, raw, sums::per_entry).empty());  // the offsets are whole
    std::string value;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      auto got = searchable_leaf::search(stored, raw, sums::per_entry, some_hash(), entries[i].key, value);
      if (i == j) {
        REQUIRE_FALSE(got.is_ok());
        CHECK(got.error().code() == status_code::corruption);
        CHECK(got.error().message().find("does not match its sum") != std::string::npos);
        ++found_damage;
      } else if (got.is_ok()) {
        CHECK(*got);
        CHECK(value == entries[i].value);
      } else {
        CHECK(got.error().code() == status_code::corruption);  // the search passed through entry j
      }
    }
  }
  CHECK(found_damage == 300);
}
