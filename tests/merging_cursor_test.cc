// merging_cursor on its own: sorted vectors as sources, against a std::map
// model, in both directions, with each of its rules and a failing step.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/merging_cursor.h"

using namespace magnetite;

namespace {

// Entries in scan order; nullopt: a deletion. `fail_at`: the step that moves
// to that index fails once, then works.
struct vector_source {
  std::vector<std::pair<std::string, std::optional<std::string>>> entries;
  std::size_t at = 0;
  std::optional<std::size_t> fail_at;

  bool valid() const { return at < entries.size(); }
  std::string_view key() const { return entries[at].first; }
  bool deletion() const { return !entries[at].second; }
  status step() {
    if (fail_at && *fail_at == at + 1) {
      fail_at.reset();
      return status::io_error("injected");
    }
    ++at;
    return status::ok();
  }
};

using entries = std::vector<std::pair<std::string, std::optional<std::string>>>;

vector_source source(entries e, scan_direction dir) {
  if (dir == scan_direction::backward) std::reverse(e.begin(), e.end());
  vector_source s;
  s.entries = std::move(e);
  return s;
}

// Every entry the cursor yields: key, value (or "-" for a deletion).
std::vector<std::pair<std::string, std::string>> drain(merging_cursor<vector_source>& m) {
  std::vector<std::pair<std::string, std::string>> out;
  for (;;) {
    REQUIRE(m.next().is_ok());
    if (!m.valid()) return out;
    const vector_source& s = m.top();
    out.emplace_back(std::string(m.key()), s.entries[s.at].second.value_or("-"));
  }
}

}  // namespace

TEST_CASE("merging_cursor: the newest source decides a key, deletions hide and are skipped") {
  entries newer = {{"b", "b1"}, {"c", std::nullopt}, {"e", "e1"}};
  entries older = {{"a", "a0"}, {"b", "b0"}, {"c", "c0"}, {"d", std::nullopt}, {"f", "f0"}};
  for (auto dir : {scan_direction::forward, scan_direction::backward}) {
    std::vector<vector_source> sources = {source(newer, dir), source(older, dir)};
    merging_cursor<vector_source> m(std::move(sources), dir);
    std::vector<std::pair<std::string, std::string>> want = {{"a", "a0"}, {"b", "b1"}, {"e", "e1"}, {"f", "f0"}};
    if (dir == scan_direction::backward) std::reverse(want.begin(), want.end());
    CHECK(drain(m) == want);
    REQUIRE(m.next().is_ok());  // exhausted stays exhausted
    CHECK_FALSE(m.valid());
  }
}

TEST_CASE("merging_cursor: deletions::keep yields the deciding deletion, equal_keys::all every entry") {
  entries newer = {{"b", std::nullopt}, {"c", "c1"}};
  entries older = {{"b", "b0"}, {"c", "c0"}};
  std::vector<vector_source> kept = {source(newer, scan_direction::forward), source(older, scan_direction::forward)};
  merging_cursor<vector_source> k(std::move(kept), scan_direction::forward, equal_keys::newest_wins, deletions::keep);
  CHECK(drain(k) == std::vector<std::pair<std::string, std::string>>{{"b", "-"}, {"c", "c1"}});

  entries first = {{"a", "a0"}, {"c", "c0"}};
  entries second = {{"b", "b1"}, {"c", "c1"}};
  std::vector<vector_source> all = {source(first, scan_direction::forward), source(second, scan_direction::forward)};
  merging_cursor<vector_source> m(std::move(all), scan_direction::forward, equal_keys::all);
  std::vector<std::pair<std::string, std::string>> want = {{"a", "a0"}, {"b", "b1"}, {"c", "c0"}, {"c", "c1"}};
  CHECK(drain(m) == want);
}

TEST_CASE("merging_cursor: a failed step leaves no entry and is retried by the next next()") {
  entries newer = {{"a", "a1"}, {"b", "b1"}};
  entries older = {{"a", "a0"}, {"c", "c0"}};
  std::vector<vector_source> sources = {source(newer, scan_direction::forward), source(older, scan_direction::forward)};
  sources[1].fail_at = 1;  // stepping past "a" in the older source fails once
  merging_cursor<vector_source> m(std::move(sources), scan_direction::forward);
  REQUIRE(m.next().is_ok());
  CHECK(m.key() == "a");
  CHECK_FALSE(m.next().is_ok());
  CHECK_FALSE(m.valid());
  std::vector<std::pair<std::string, std::string>> rest = {{"b", "b1"}, {"c", "c0"}};
  CHECK(drain(m) == rest);
}

TEST_CASE("merging_cursor: random sources against a map, newest first, both directions") {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::size_t count = rng() % 5;
    std::vector<std::map<std::string, std::optional<std::string>>> layers(count);
    std::map<std::string, std::string> model;
    for (std::size_t l = 0; l < count; ++l)
      for (int i = 0, n = static_cast<int>(rng() % 30); i < n; ++i) {
        std::string k = std::to_string(rng() % 40);
        if (rng() % 3 == 0)
          layers[l][k] = std::nullopt;
        else
          layers[l][k] = std::to_string(l);
      }
    for (std::size_t l = count; l-- > 0;)  // oldest first, so newer ones overwrite
      for (const auto& [k, v] : layers[l]) {
        if (v)
          model[k] = *v;
        else
          model.erase(k);
      }
    for (auto dir : {scan_direction::forward, scan_direction::backward}) {
      std::vector<vector_source> sources;
      for (const auto& l : layers) sources.push_back(source(entries(l.begin(), l.end()), dir));
      merging_cursor<vector_source> m(std::move(sources), dir);
      std::vector<std::pair<std::string, std::string>> want(model.begin(), model.end());
      if (dir == scan_direction::backward) std::reverse(want.begin(), want.end());
      CHECK(drain(m) == want);
    }
  }
}
