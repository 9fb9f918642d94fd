// Tests of the node store's location index (tree/location_index.h) against
// std::unordered_map as the model: every record inserted is found where it
// was put, every erased one is gone, and nothing else moves, through growth,
// runs that wrap around the table's end, and erases in the middle of runs.
#include <doctest/doctest.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "tree/location_index.h"

using namespace magnetite;
using namespace magnetite::tree;

namespace {

node_location location(std::mt19937_64& rng) {
  return node_location{.offset = rng() >> 20,
                       .pack = static_cast<std::uint32_t>(1 + rng() % 1000),
                       .length = static_cast<std::uint32_t>(37 + rng() % 70000)};
}

void check_same(const location_index& ix, const std::unordered_map<hash128, node_location, hash128_hasher>& model) {
  REQUIRE(ix.size() == model.size());
  for (const auto& [h, loc] : model) {
    const node_location* at = ix.find(h);
    REQUIRE(at != nullptr);
    CHECK(at->offset == loc.offset);
    CHECK(at->pack == loc.pack);
    CHECK(at->length == loc.length);
  }
  std::size_t seen = 0;
  ix.for_each([&](const hash128& h, const node_location& loc) {
    ++seen;
    auto it = model.find(h);
    REQUIRE(it != model.end());
    CHECK(it->second.offset == loc.offset);
  });
  CHECK(seen == model.size());
}

}  // namespace

TEST_CASE("location index: random inserts, replacements and erases agree with a map") {
  std::mt19937_64 rng(44);
  location_index ix;
  std::unordered_map<hash128, node_location, hash128_hasher> model;
  std::vector<hash128> keys;
  for (int step = 0; step < 200000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5 || keys.empty()) {
      hash128 h{rng(), rng()};
      node_location loc = location(rng);
      ix.insert(h, loc);
      if (model.emplace(h, loc).second) keys.push_back(h);
    } else if (op < 7) {
      const hash128& h = keys[rng() % keys.size()];
      node_location loc = location(rng);
      ix.insert(h, location(rng));  // present: keeps what it had
      ix.insert_or_assign(h, loc);
      model[h] = loc;
    } else {
      std::size_t i = rng() % keys.size();
      hash128 h = keys[i];
      ix.erase(h);
      ix.erase(h);  // a second erase finds nothing and changes nothing
      model.erase(h);
      keys[i] = keys.back();
      keys.pop_back();
    }
    CHECK(ix.find(hash128{rng(), rng()}) == nullptr);
    if (step % 20000 == 0) check_same(ix, model);
  }
  check_same(ix, model);
  // Erase everything: the table is left empty and finds nothing.
  for (const auto& h : keys) ix.erase(h);
  CHECK(ix.size() == 0);
  for (const auto& h : keys) CHECK(ix.find(h) == nullptr);
}

TEST_CASE("location index: a small table kept three-quarters full keeps every run whole") {
  // 48 of 64 slots: long runs, many of them wrapping past the last slot;
  // erasing from anywhere in a run must leave every other entry findable.
  std::mt19937_64 rng(7);
  location_index ix;
  std::unordered_map<hash128, node_location, hash128_hasher> model;
  std::vector<hash128> keys;
  while (keys.size() < 47) {
    hash128 h{rng(), rng()};
    node_location loc = location(rng);
    ix.insert(h, loc);
    model[h] = loc;
    keys.push_back(h);
  }
  REQUIRE(ix.memory_bytes() == 64 * sizeof(location_index::slot));
  for (int round = 0; round < 5000; ++round) {
    std::size_t i = rng() % keys.size();
    ix.erase(keys[i]);
    model.erase(keys[i]);
    hash128 h{rng(), rng()};
    node_location loc = location(rng);
    ix.insert(h, loc);
    model[h] = loc;
    keys[i] = h;
    check_same(ix, model);
  }
  CHECK(ix.memory_bytes() == 64 * sizeof(location_index::slot));  // never grew: erases leave no tombstones
}

TEST_CASE("location index: hashes that agree in their low bits are all kept apart") {
  // The home of a slot mixes the hash with the table's seed, so nodes made
  // to agree in their low bits still land anywhere; whatever their homes,
  // each is found and erased.
  location_index ix;
  std::vector<hash128> keys;
  for (std::uint64_t i = 0; i < 5000; ++i) keys.push_back(hash128{i + 1, 0x1234});
  for (std::size_t i = 0; i < keys.size(); ++i)
    ix.insert(keys[i], node_location{.offset = i, .pack = 1, .length = 100});
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const node_location* at = ix.find(keys[i]);
    REQUIRE(at != nullptr);
    CHECK(at->offset == i);
  }
  for (std::size_t i = 0; i < keys.size(); i += 2) ix.erase(keys[i]);
  for (std::size_t i = 0; i < keys.size(); ++i) CHECK((ix.find(keys[i]) != nullptr) == (i % 2 == 1));
}
