// keyed_state_walk: one check of keyed state that runs the same on a data
// directory and on a cluster (the storage under owner_state differs): a map
// and a deque larger than several chunks of a scan, changed through buffers,
// committed, and scanned both ways with random bounds and limits against
// in-memory models.
#pragma once

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "magnetite/state/keyed_state.h"
#include "tests/support/must.h"

namespace magnetite::testing {

template <class T>
std::vector<T> drain_cursor(state::cursor<T> c, std::size_t chunk) {
  std::vector<T> out;
  for (;;) {
    auto got = must(c.next_chunk(chunk));
    if (got.empty()) break;
    CHECK(got.size() <= chunk);
    for (auto& x : got) out.push_back(std::move(x));
  }
  CHECK(must(c.next_chunk(chunk)).empty());  // exhausted stays exhausted
  return out;
}

// `entries` map entries and deque slots (more than two scan chunks of the
// shard: merged_range reads 256 at a time); `scans` random scans of each.
inline void walk_large_collections(state::owner_state& o, int entries, int scans, std::uint64_t seed) {
  using state::direction;
  using state::json;
  std::mt19937_64 rng(seed);
  auto m = o.map("big");
  auto q = o.deque("line");
  std::map<std::string, int> model;
  std::deque<int> line;
  for (int i = 0; i < entries; ++i) {
    std::string k = fmt::format("k{:05}", i * 3);
    REQUIRE(m.set(k, json(i)).is_ok());
    model[k] = i;
    REQUIRE(q.push_back(json(i)).is_ok());
    line.push_back(i);
  }
  REQUIRE(o.commit().is_ok());
  // Buffered changes read through the overlay: some removed, some added.
  for (int i = 0; i < entries / 10; ++i) {
    std::string gone = fmt::format("k{:05}", static_cast<int>(rng() % static_cast<std::uint64_t>(entries)) * 3);
    REQUIRE(m.remove(gone).is_ok());
    model.erase(gone);
    std::string added = fmt::format("k{:05}", static_cast<int>(rng() % static_cast<std::uint64_t>(entries)) * 3 + 1);
    REQUIRE(m.set(added, json(-i)).is_ok());
    model[added] = -i;
  }
  REQUIRE(q.push_front(json(-1)).is_ok());
  line.push_front(-1);
  REQUIRE(must(q.pop_back()) == std::optional<state::item>(json(entries - 1)));
  line.pop_back();
  CHECK(must(m.size()) == model.size());
  CHECK(must(q.len()) == line.size());
  auto key_at = [&] { return fmt::format("k{:05}", rng() % static_cast<std::uint64_t>(entries * 3 + 3)); };
  for (int s = 0; s < scans; ++s) {
    state::scan_options so;
    so.dir = rng() % 2 ? direction::forward : direction::backward;
    bool fw = so.dir == direction::forward;
    if (rng() % 2) so.from = key_at();
    if (rng() % 2) so.to = key_at();
    if (rng() % 3 == 0) so.limit = 1 + rng() % 600;
    std::vector<std::string> want;
    for (const auto& [k, v] : model) {
      if (so.from && (fw ? k < *so.from : k > *so.from)) continue;
      if (so.to && (fw ? k >= *so.to : k <= *so.to)) continue;
      want.push_back(k);
    }
    if (!fw) std::reverse(want.begin(), want.end());
    if (so.limit && want.size() > *so.limit) want.resize(*so.limit);
    auto got = drain_cursor(must(m.scan(so)), 1 + rng() % 300);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].key == want[i]);
      CHECK(got[i].value == state::item(json(model[want[i]])));
    }
  }
  for (auto dir : {direction::forward, direction::backward}) {
    auto got = drain_cursor(must(q.scan(dir)), 1 + rng() % 300);
    std::vector<int> want(line.begin(), line.end());
    if (dir == direction::backward) std::reverse(want.begin(), want.end());
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == state::item(json(want[i])));
  }
  REQUIRE(o.commit().is_ok());
  CHECK(must(m.size()) == model.size());
}

}  // namespace magnetite::testing
