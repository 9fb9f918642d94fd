// The memtable (engine/memtable.h) and the views that read it
// (engine/read_view.h): at every sequence a reader sees exactly the writes
// numbered up to it, newest version of each key, forward and backward, while
// the one writer goes on inserting.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/fault_env.h"
#include "engine/memtable.h"
#include "engine/read_view.h"
#include "engine/view_cursor.h"
#include "tests/support/must.h"

using namespace magnetite;
using magnetite::testing::must;

namespace {

using state = std::map<std::string, std::optional<std::string>>;  // nullopt: a deletion

std::string key_of(std::uint64_t n) { return "k" + std::to_string(n); }

// What a cursor at `at` yields, from `from` on (or back from before `to`).
state forward(const memtable& m, std::uint64_t at, const std::string& from) {
  state out;
  memtable::cursor c(m, at);
  for (c.seek(from); c.valid(); c.next()) {
    auto [it, fresh] = out.emplace(std::string(c.key()), std::nullopt);
    REQUIRE(fresh);  // one entry a key
    if (!c.deletion()) it->second = std::string(c.value());
  }
  return out;
}

std::vector<std::string> backward_keys(const memtable& m, std::uint64_t at, const std::string& to) {
  std::vector<std::string> out;
  memtable::cursor c(m, at);
  for (to.empty() ? c.seek_to_last() : c.seek_before(to); c.valid(); c.prev()) out.emplace_back(c.key());
  return out;
}

}  // namespace

TEST_CASE("memtable: at every sequence, find and both cursors see the newest writes up to it, and no later one") {
  std::mt19937_64 rng(11);
  memtable m;
  // The model after each insert: models[s] is the state at sequence s.
  std::vector<state> models(1);
  for (int i = 0; i < 3000; ++i) {
    state next = models.back();
    // Few keys, so most are rewritten many times (past the cursor's eight
    // linear steps over older versions too).
    std::string k = key_of(rng() % (i < 1500 ? 300 : 20));
    std::optional<std::string> v;
    if (rng() % 5 != 0) v = "v" + std::to_string(i) + std::string(rng() % 40, 'x');
    std::uint64_t seq = v ? m.insert(k, std::string_view(*v)) : m.insert(k, std::nullopt);
    REQUIRE(seq == static_cast<std::uint64_t>(i + 1));
    next[k] = v;
    models.push_back(std::move(next));
  }
  CHECK(m.latest() == 3000);
  for (std::uint64_t at : {0ULL, 1ULL, 2ULL, 17ULL, 500ULL, 1499ULL, 1500ULL, 1501ULL, 2222ULL, 3000ULL, 9999ULL}) {
    CAPTURE(at);
    const state& want = models[std::min<std::uint64_t>(at, 3000)];
    for (int k = 0; k < 310; ++k) {
      auto e = m.find(key_of(k), at);
      auto it = want.find(key_of(k));
      REQUIRE(e.found == (it != want.end()));
      if (e.found) {
        REQUIRE(e.value.has_value() == it->second.has_value());
        if (e.value) CHECK(*e.value == *it->second);
      }
    }
    CHECK(forward(m, at, "") == want);
    state tail;
    for (auto it = want.lower_bound("k150"); it != want.end(); ++it) tail.insert(*it);
    CHECK(forward(m, at, "k150") == tail);
    std::vector<std::string> keys;
    for (auto it = want.rbegin(); it != want.rend(); ++it) keys.push_back(it->first);
    CHECK(backward_keys(m, at, "") == keys);
    std::vector<std::string> below;
    for (auto it = want.rbegin(); it != want.rend(); ++it)
      if (it->first < "k150") below.push_back(it->first);
    CHECK(backward_keys(m, at, "k150") == below);
  }
}

// Inserts in ascending runs (a sorted batch each), the next run starting
// anywhere, a key sometimes written twice in a row: the searches from the
// insert finger must link every level where a search from the head would.
// A node linked in the wrong place at any level shows as a find that misses
// or a cursor out of order, over enough keys for seven levels.
TEST_CASE("memtable: inserts in sorted runs land where searches from the head find them") {
  std::mt19937_64 rng(42);
  memtable m;
  state model;
  std::uint64_t inserts = 0;
  while (inserts < 40'000) {
    std::vector<std::uint64_t> run(1 + rng() % 600);
    for (auto& k : run) k = rng() % 30'000;
    std::sort(run.begin(), run.end());
    for (std::uint64_t k : run) {
      int times = rng() % 10 == 0 ? 2 : 1;
      for (int t = 0; t < times; ++t) {
        std::string key = key_of(k);
        std::optional<std::string> v;
        if (rng() % 7 != 0) v = "v" + std::to_string(inserts);
        v ? m.insert(key, std::string_view(*v)) : m.insert(key, std::nullopt);
        model[key] = v;
        ++inserts;
      }
    }
  }
  for (std::uint64_t k = 0; k < 30'000; ++k) {
    auto e = m.find(key_of(k), m.latest());
    auto it = model.find(key_of(k));
    REQUIRE(e.found == (it != model.end()));
    if (e.found) {
      REQUIRE(e.value.has_value() == it->second.has_value());
      if (e.value) REQUIRE(*e.value == *it->second);
    }
  }
  CHECK(m.levels_in_order());
  CHECK(forward(m, m.latest(), "") == model);
  std::vector<std::string> keys;
  for (auto it = model.rbegin(); it != model.rend(); ++it) keys.push_back(it->first);
  CHECK(backward_keys(m, m.latest(), "") == keys);
}

TEST_CASE("memtable: it counts its arena, and a large value gets a block of its own") {
  memtable m;
  std::size_t empty = m.bytes();
  CHECK(empty > 0);  // the head node's block
  for (int i = 0; i < 1000; ++i) m.insert(key_of(i), std::string(100, 'v'));
  CHECK(m.bytes() > empty);
  CHECK(m.bytes() >= 1000 * 100);
  CHECK(m.bytes() < 1000 * 300);  // a node's overhead is tens of bytes, not hundreds
  std::size_t before = m.bytes();
  std::string big(1 << 20, 'b');
  m.insert("big", std::string_view(big));
  CHECK(m.bytes() >= before + big.size());
  CHECK(m.bytes() < before + big.size() + 4096);
  auto e = m.find("big", m.latest());
  REQUIRE(e.found);
  CHECK(*e.value == big);
  CHECK(m.find(key_of(7), m.latest()).value == std::string(100, 'v'));
}

// Readers on other threads while the writer inserts: each reads at the
// sequence the writer published last and must see exactly that state. Insert
// i (sequence i) writes key i % 1000 with value "v<i>". (The thread
// sanitizer runs this suite.)
TEST_CASE("memtable: readers on other threads see whole nodes and exactly their sequence's state") {
  memtable m;
  std::atomic<std::uint64_t> published{0};
  std::atomic<bool> stop{false};
  constexpr std::uint64_t inserts = 20'000, keys = 1000;
  auto expect_at = [&](std::uint64_t at, std::uint64_t key) -> std::optional<std::string> {
    if (at < key + 1) return std::nullopt;  // key's first write is insert key + 1
    std::uint64_t last = key + 1 + (at - key - 1) / keys * keys;
    return "v" + std::to_string(last);
  };
  std::atomic<std::uint64_t> checked{0};
  std::atomic<bool> wrong{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(r);
      while (!stop.load()) {
        std::uint64_t at = published.load(std::memory_order_acquire);
        std::uint64_t key = rng() % keys;
        auto e = m.find("k" + std::to_string(key + 1'000'000), at);
        auto want = expect_at(at, key);
        if (e.found != want.has_value() || (want && *e.value != *want)) wrong = true;
        if (rng() % 64 == 0) {
          std::uint64_t n = 0;
          memtable::cursor c(m, at);
          for (c.seek_to_first(); c.valid(); c.next()) {
            ++n;
            auto k = std::stoull(std::string(c.key().substr(1))) - 1'000'000;
            if (c.value() != *expect_at(at, k)) wrong = true;
          }
          if (n != std::min(at, keys)) wrong = true;
        }
        ++checked;
      }
    });
  for (std::uint64_t i = 1; i <= inserts; ++i) {
    std::string v = "v" + std::to_string(i);
    m.insert("k" + std::to_string((i - 1) % keys + 1'000'000), std::string_view(v));
    if (i % 7 == 0 || i == inserts) published.store(i, std::memory_order_release);
  }
  while (checked.load() < 1000) std::this_thread::yield();
  stop = true;
  for (auto& t : readers) t.join();
  CHECK_FALSE(wrong.load());
}

TEST_CASE("read view: a newer memtable hides older ones and the tree, deletions included, at its sequence") {
  fault_env fs;
  std::shared_ptr<tree::node_store> store = must(tree::node_store::open(fs, "nodes", {}, std::nullopt));
  tree::prolly_tree t(*store, tree::chunk_policy{});
  std::vector<tree::entry> base;
  for (int i = 0; i < 10; ++i) base.push_back({key_of(i), "tree"});
  std::sort(base.begin(), base.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  auto root = must(t.build(base));
  auto older = std::make_shared<memtable>(), newer = std::make_shared<memtable>();
  older->insert(key_of(1), std::string_view("older"));
  older->insert(key_of(2), std::nullopt);
  older->insert(key_of(3), std::string_view("older"));
  newer->insert(key_of(3), std::nullopt);
  newer->insert(key_of(2), std::string_view("newer"));
  newer->insert(key_of(4), std::string_view("unseen"));  // past the view's sequence
  read_view v(store, tree::chunk_policy{}, root, {{newer, 2}, {older, older->latest()}}, 0);
  std::map<std::string, std::string> want;
  for (const auto& e : base) want[e.key] = e.value;
  want[key_of(1)] = "older";
  want[key_of(2)] = "newer";
  want.erase(key_of(3));
  std::map<std::string, std::string> got;
  REQUIRE(v.scan("", "", [&](std::string_view k, std::string_view s) { return got.emplace(k, s).second; }).is_ok());
  CHECK(got == want);
  std::vector<std::string> back;
  REQUIRE(
      v.scan_reverse("", "", [&](std::string_view k, std::string_view) { return back.emplace_back(k), true; }).is_ok());
  std::vector<std::string> want_back;
  for (auto it = want.rbegin(); it != want.rend(); ++it) want_back.push_back(it->first);
  CHECK(back == want_back);
  std::string out;
  for (int i = 0; i < 12; ++i) {
    auto found = must(v.find(key_of(i), out));
    auto it = want.find(key_of(i));
    REQUIRE(found == (it != want.end()));
    if (found) CHECK(out == it->second);
  }
  CHECK(v.holds_writes());
  CHECK_FALSE(read_view(store, tree::chunk_policy{}, root, {}, 0).holds_writes());
}
