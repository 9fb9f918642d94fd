// The layers of durable writes a read view holds (engine/read_view.h) and
// the Bloom filter over each one's keys (engine/key_filter.h): a layer's
// find never misses a key it holds, whatever the filter, and the filter
// skips most keys it does not hold.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <random>
#include <string>

#include "core/fault_env.h"
#include "engine/key_filter.h"
#include "engine/read_view.h"
#include "tests/support/must.h"

using namespace magnetite;
using magnetite::testing::must;

namespace {

using staged_map = std::map<std::string, std::optional<std::string>, std::less<>>;

std::string key_of(std::uint64_t n) { return "k" + std::to_string(n); }

}  // namespace

TEST_CASE("key filter: every key added is found; about 1% of the others pass") {
  std::mt19937_64 rng(7);
  for (std::size_t n : {1, 2, 63, 1000, 50'000}) {
    CAPTURE(n);
    key_filter f(n);
    std::vector<std::string> in;
    for (std::size_t i = 0; i < n; ++i) in.push_back(key_of(rng()));
    for (const auto& k : in) f.add(key_filter::hash_of(k));
    for (const auto& k : in) REQUIRE(f.may_contain(key_filter::hash_of(k)));
    // Keys of another shape, so none is in `in`.
    std::size_t passed = 0, tried = 20'000;
    for (std::size_t i = 0; i < tried; ++i) passed += f.may_contain(key_filter::hash_of("x" + std::to_string(i)));
    // 10 bits a key: about 1%; a filter of a few keys has a whole block of
    // bits for them and lets through fewer still.
    CHECK(passed < tried / 50);
  }
}

TEST_CASE("key filter: one built from no keys, or never built, filters nothing") {
  key_filter none, empty(0);
  for (int i = 0; i < 100; ++i) {
    CHECK(none.may_contain(key_filter::hash_of(key_of(i))));
    CHECK(empty.may_contain(key_filter::hash_of(key_of(i))));
  }
  CHECK(none.bytes() == 0);
}

TEST_CASE("layers: find and a view's find return the newest entry of every key, and nothing else") {
  // Layers as the shard builds them: each group a layer, merged into the one
  // below while at least half its size; the model is the map of all writes.
  std::mt19937_64 rng(11);
  staged_map model;
  std::vector<std::shared_ptr<const layer>> layers;  // newest first
  for (int group = 0; group < 200; ++group) {
    staged_map staged;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 20); i < n; ++i) {
      std::string k = key_of(rng() % 3000);
      if (rng() % 5 == 0)
        staged[k] = std::nullopt;
      else
        staged[k] = "v" + std::to_string(group) + "/" + std::to_string(i);
    }
    for (const auto& [k, v] : staged) model[k] = v;
    auto top = std::make_shared<const layer>(layer::of(staged));
    for (const auto& [k, v] : staged) {
      const layer_entry* e = top->find(k);
      REQUIRE(e != nullptr);
      CHECK(e->value.has_value() == v.has_value());
    }
    while (!layers.empty() && top->entries.size() * 2 >= layers.front()->entries.size()) {
      top = std::make_shared<const layer>(layer::merge(*top, *layers.front()));
      layers.erase(layers.begin());
    }
    layers.insert(layers.begin(), std::move(top));
  }
  REQUIRE(layers.size() > 1);
  // Every layer's own keys are found in it (the merged ones' filters too).
  for (const auto& l : layers)
    for (const auto& e : l->entries) REQUIRE(l->find(e.key) == &e);
  fault_env fs;
  std::shared_ptr<tree::node_store> store = must(tree::node_store::open(fs, "nodes", {}, std::nullopt));
  auto root = must(tree::prolly_tree(*store, tree::chunk_policy{}).empty_root());
  read_view v(store, tree::chunk_policy{}, root, layers, 0);
  std::string out;
  for (const auto& [k, value] : model) {
    auto found = v.find(k, out);
    REQUIRE(found.is_ok());
    REQUIRE(*found == value.has_value());
    if (value) CHECK(out == *value);
  }
  // Keys never written: absent from every layer and from the empty tree.
  for (int i = 3000; i < 4000; ++i) {
    auto found = v.find(key_of(i), out);
    REQUIRE(found.is_ok());
    CHECK_FALSE(*found);
  }
}
