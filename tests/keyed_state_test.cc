// state/keyed_state: value, map and deque handles of one owner: their calls,
// the overlay, commit and rollback, TTL, cursors; and a seeded walk against
// in-memory models with reopens and power cuts in between.
#include <doctest/doctest.h>

#include <deque>
#include <limits>
#include <map>
#include <random>

#include "core/coding.h"
#include "magnetite/state/keyed_state.h"
#include "state/layout.h"
#include "tests/support/database_fixture.h"
#include "tests/support/json_cases.h"
#include "tests/support/keyed_state_walk.h"
#include "tests/support/must.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace magnetite::state;
using namespace std::chrono_literals;
using magnetite::testing::must;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

void ok(const status& s) { REQUIRE_MESSAGE(s.is_ok(), s.to_string()); }

template <class T>
std::vector<T> drain(cursor<T> c, std::size_t chunk) {
  return testing::drain_cursor(std::move(c), chunk);
}

item j(int n) { return json(n); }

collection_options with_ttl(std::chrono::nanoseconds t) {
  collection_options o;
  o.ttl = t;
  return o;
}

collection_options with_capacity(std::uint64_t n) {
  collection_options o;
  o.capacity = n;
  return o;
}

scan_options in(direction dir) {
  scan_options o;
  o.dir = dir;
  return o;
}

struct manual_clock {
  std::shared_ptr<std::atomic<std::uint64_t>> now = std::make_shared<std::atomic<std::uint64_t>>(1'000'000'000'000);
  void advance(std::chrono::nanoseconds d) { *now += static_cast<std::uint64_t>(d.count()); }
};

core_options clocked(const std::string& dir, const manual_clock& c, std::size_t shards = 2) {
  auto o = options_for(dir, shards);
  o.shard.clock = [n = c.now] { return n->load(); };
  return o;
}

}  // namespace

TEST_CASE("keyed state: a value reads its own writes; commit makes them durable, rollback drops them") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path()));
  owner_state o(*db, "orders", "42");
  auto v = o.value("total");
  CHECK_FALSE(must(v.get()));
  ok(v.set(json{{"sum", 10}}));
  CHECK(must(v.get()) == std::optional<item>(json{{"sum", 10}}));
  // Another handle on the same value sees only what is committed.
  owner_state other(*db, "orders", "42");
  CHECK_FALSE(must(other.value("total").get()));
  ok(v.commit());
  CHECK(must(other.value("total").get()) == std::optional<item>(json{{"sum", 10}}));
  ok(v.set(j(11)));
  v.rollback();
  CHECK(must(v.get()) == std::optional<item>(json{{"sum", 10}}));
  ok(v.clear());
  CHECK_FALSE(must(v.get()));
  ok(v.commit());
  CHECK_FALSE(must(other.value("total").get()));
  auto null = v.set(json(nullptr));
  CHECK(null.code() == status_code::invalid_argument);
  CHECK(null.category() == status_category::transient);
  CHECK(null.message().find("clear()") != std::string::npos);
  v.close();
  auto closed = v.get();
  REQUIRE_FALSE(closed.is_ok());
  CHECK(closed.error().message().find("value \"total\" of owner (\"orders\", \"42\") is closed") != std::string::npos);
  CHECK(v.set(j(1)).code() == status_code::invalid_argument);
  v.close();  // idempotent
  // Owners, names and kinds never share keys.
  owner_state a(*db, "n", std::string("a\0", 2)), b(*db, std::string("n\0", 2), "a");
  auto av = a.value("x"), bv = b.value("x");
  ok(av.set(j(1)));
  ok(av.commit());
  ok(bv.set(j(2)));
  ok(bv.commit());
  CHECK(must(a.value("x").get()) == std::optional<item>(j(1)));
  CHECK(must(b.value("x").get()) == std::optional<item>(j(2)));
  CHECK_FALSE(must(a.map("x").get("")));
}

TEST_CASE("keyed state: a value with no JSON form is refused at the call; nothing is buffered or written") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path(), 1));
  owner_state seed(*db, "n", "o");
  auto sv = seed.value("v");
  auto sm = seed.map("m");
  auto sq = seed.deque("q");
  ok(sv.set(j(1)));
  ok(sm.set("k", j(1)));
  ok(sq.push_back(j(1)));
  ok(seed.commit());
  for (const auto& [x, what] : testing::no_json_form()) {
    CAPTURE(what);
    auto refused = [&](const status& s) {
      CHECK(s.code() == status_code::invalid_argument);
      CHECK(s.category() == status_category::transient);
      CHECK_MESSAGE(s.message().find(what) != std::string::npos, s.message());
    };
    owner_state o(*db, "n", "o");
    auto v = o.value("v");
    auto m = o.map("m");
    auto q = o.deque("q");
    refused(v.set(x));
    refused(m.set("k", x));
    refused(m.set("new", x));
    refused(q.push_back(x));
    refused(q.push_front(x));
    // Nothing was buffered: the handles read the stored state, and the
    // commit writes nothing.
    CHECK(must(v.get()) == std::optional<item>(j(1)));
    CHECK(must(m.get("k")) == std::optional<item>(j(1)));
    CHECK_FALSE(must(m.contains("new")));
    CHECK(must(q.len()) == 1);
    auto before = must(db->stats()).shards[o.shard()].groups;
    ok(o.commit());
    CHECK(must(db->stats()).shards[o.shard()].groups == before);
    owner_state reader(*db, "n", "o");
    CHECK(must(reader.value("v").get()) == std::optional<item>(j(1)));
    CHECK(drain(must(reader.map("m").keys()), 10) == std::vector<std::string>{"k"});
    CHECK(drain(must(reader.deque("q").scan()), 10) == std::vector<item>{j(1)});
  }
}

TEST_CASE("keyed state: writes through handles the caller did not keep belong to the owner's commit or rollback") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path(), 1));
  auto groups = [&] { return must(db->stats()).shards[0].groups; };
  {
    owner_state s(*db, "n", "o");
    ok(s.value("v").set(j(1)));
    ok(s.map("m").set("k", j(2)));
    ok(s.deque("q").push_back(j(3)));
    // A new handle of a name shares the buffer: it reads the write back.
    CHECK(must(s.value("v").get()) == std::optional<item>(j(1)));
    CHECK(must(s.deque("q").len()) == 1);
    auto before = groups();
    ok(s.commit());
    CHECK(groups() == before + 1);  // one frame for all three
  }
  owner_state reader(*db, "n", "o");
  auto stored = [&] {
    CHECK(must(reader.value("v").get()) == std::optional<item>(j(1)));
    CHECK(must(reader.map("m").get("k")) == std::optional<item>(j(2)));
    CHECK(drain(must(reader.deque("q").scan()), 10) == std::vector<item>{j(3)});
  };
  stored();

  // A rollback discards them, and the next commit sends nothing.
  {
    owner_state s(*db, "n", "o");
    ok(s.value("v").set(j(10)));
    ok(s.map("m").remove("k"));
    ok(s.deque("q").push_front(j(30)));
    CHECK(must(s.deque("q").pop_back()) == std::optional<item>(j(3)));
    s.rollback();
    CHECK(must(s.value("v").get()) == std::optional<item>(j(1)));
    CHECK(must(s.deque("q").len()) == 1);
    auto before = groups();
    ok(s.commit());
    CHECK(groups() == before);
  }
  stored();

  // An owner_state that goes without a commit writes nothing; a handle kept
  // past it still commits its own buffer, and only that.
  std::optional<value_handle> kept;
  {
    owner_state s(*db, "n", "o");
    kept = s.value("v");
    ok(kept->set(j(5)));
    ok(s.map("m").set("k", j(50)));
  }
  stored();
  ok(kept->commit());
  CHECK(must(reader.value("v").get()) == std::optional<item>(j(5)));
  CHECK(must(reader.map("m").get("k")) == std::optional<item>(j(2)));
  ok(kept->set(j(6)));
  ok(kept->commit());
  CHECK(must(reader.value("v").get()) == std::optional<item>(j(6)));

  // Moved, the owner_state keeps what was buffered through it.
  owner_state first(*db, "n", "o");
  ok(first.map("m").set("moved", j(7)));
  owner_state second = std::move(first);
  ok(second.commit());
  CHECK(must(reader.map("m").get("moved")) == std::optional<item>(j(7)));
}

TEST_CASE("keyed state: map calls, get_many aligned, scans and keys in both directions with bounds and pages") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path()));
  owner_state o(*db, "carts", "u1");
  auto m = o.map("cart");
  CHECK(must(m.is_empty()));
  CHECK(must(m.size()) == 0);
  std::map<std::string, int> model;
  for (int i = 0; i < 40; ++i) {
    std::string k = fmt::format("{}{:02}", i % 2 ? "b" : "a", i);
    ok(m.set(k, j(i)));
    model[k] = i;
  }
  ok(m.commit());
  ok(m.set("a00", j(100)));  // buffered: read through the overlay
  model["a00"] = 100;
  ok(m.remove("b01"));
  model.erase("b01");
  ok(m.set(std::string("\0x", 2), j(-1)));  // binary keys too
  model[std::string("\0x", 2)] = -1;
  CHECK(must(m.get("a00")) == std::optional<item>(j(100)));
  CHECK_FALSE(must(m.get("b01")));
  CHECK(must(m.contains("a02")));
  CHECK_FALSE(must(m.contains("b01")));
  CHECK(must(m.size()) == model.size());
  std::vector<std::string> asked{"a02", "zz", "a00", "b01"};
  auto many = must(m.get_many(asked));
  REQUIRE(many.size() == 4);
  CHECK(many[0] == std::optional<item>(j(2)));
  CHECK_FALSE(many[1]);
  CHECK(many[2] == std::optional<item>(j(100)));
  CHECK_FALSE(many[3]);
  CHECK(m.set("x", json(nullptr)).message().find("remove(key)") != std::string::npos);

  auto expect = [&](scan_options so) {
    std::vector<std::string> want;
    for (const auto& [k, v] : model) {
      if (so.prefix && !k.starts_with(*so.prefix)) continue;
      bool fw = so.dir == direction::forward;
      if (so.from && (fw ? k < *so.from : k > *so.from)) continue;
      if (so.after && (fw ? k <= *so.after : k >= *so.after)) continue;
      if (so.to && (fw ? k >= *so.to : k <= *so.to)) continue;
      want.push_back(k);
    }
    if (so.dir == direction::backward) std::reverse(want.begin(), want.end());
    if (so.limit && want.size() > *so.limit) want.resize(*so.limit);
    return want;
  };
  std::mt19937_64 rng(3);
  for (int q = 0; q < 200; ++q) {
    scan_options so;
    so.dir = rng() % 2 ? direction::forward : direction::backward;
    auto key = [&] { return fmt::format("{}{:02}", rng() % 2 ? "a" : "b", rng() % 44); };
    if (rng() % 3 == 0)
      so.from = key();
    else if (rng() % 2 == 0)
      so.after = key();
    if (rng() % 3 == 0) so.to = key();
    if (rng() % 4 == 0) so.prefix = rng() % 2 ? "a" : "b1";
    if (rng() % 3 == 0) so.limit = rng() % 10;
    auto want = expect(so);
    auto entries = drain(must(m.scan(so)), 1 + rng() % 7);
    auto keys = drain(must(m.keys(so)), 1 + rng() % 7);
    REQUIRE(entries.size() == want.size());
    CHECK(keys == want);
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(entries[i].key == want[i]);
      CHECK(entries[i].value == item(json(model[want[i]])));
    }
  }
  // Paging with `after` = the last key seen covers everything once, both ways.
  for (auto dir : {direction::forward, direction::backward}) {
    std::vector<std::string> seen;
    std::optional<std::string> after;
    for (;;) {
      scan_options so = in(dir);
      so.after = after;
      so.limit = 7;
      auto page = drain(must(m.keys(so)), 3);
      if (page.empty()) break;
      seen.insert(seen.end(), page.begin(), page.end());
      after = page.back();
    }
    CHECK(seen == expect(in(dir)));
  }
  scan_options both = in(direction::forward);
  both.from.emplace(1, 'a');
  both.after.emplace(1, 'b');
  CHECK(m.scan(both).error().code() == status_code::invalid_argument);

  // A buffered clear hides everything committed; the map is empty after commit.
  ok(m.clear());
  CHECK(must(m.is_empty()));
  ok(m.set("only", j(1)));
  CHECK(must(m.size()) == 1);
  ok(m.commit());
  owner_state fresh(*db, "carts", "u1");
  CHECK(drain(must(fresh.map("cart").keys()), 10) == std::vector<std::string>{"only"});
}

TEST_CASE("keyed state: a map and a deque of several scan chunks scan both ways, bounded, against models") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path()));
  owner_state o(*db, "big", "u1");
  testing::walk_large_collections(o, 700, 60, 11);
}

TEST_CASE("keyed state: deque ends, get(i), capacity eviction, clear, scans both ways") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path()));
  owner_state o(*db, "jobs", "w1");
  auto q = o.deque("queue");
  CHECK(must(q.is_empty()));
  CHECK_FALSE(must(q.pop_front()));
  CHECK_FALSE(must(q.peek_back()));
  std::deque<int> model;
  for (int i = 0; i < 10; ++i) {
    if (i % 3 == 0) {
      ok(q.push_front(j(i)));
      model.push_front(i);
    } else {
      ok(q.push_back(j(i)));
      model.push_back(i);
    }
  }
  ok(q.commit());
  CHECK(must(q.len()) == model.size());
  CHECK(must(q.peek_front()) == std::optional<item>(j(model.front())));
  CHECK(must(q.peek_back()) == std::optional<item>(j(model.back())));
  for (std::size_t i = 0; i < model.size(); ++i) CHECK(must(q.get(i)) == std::optional<item>(j(model[i])));
  CHECK_FALSE(must(q.get(model.size())));
  CHECK(must(q.pop_front()) == std::optional<item>(j(model.front())));
  model.pop_front();
  CHECK(must(q.pop_back()) == std::optional<item>(j(model.back())));
  model.pop_back();
  auto fw = drain(must(q.scan(direction::forward)), 3);
  auto bw = drain(must(q.scan(direction::backward)), 4);
  REQUIRE(fw.size() == model.size());
  REQUIRE(bw.size() == model.size());
  for (std::size_t i = 0; i < model.size(); ++i) {
    CHECK(fw[i] == j(model[i]));
    CHECK(bw[i] == j(model[model.size() - 1 - i]));
  }
  ok(q.commit());
  owner_state again(*db, "jobs", "w1");
  CHECK(must(again.deque("queue").len()) == model.size());
  ok(q.clear());
  CHECK(must(q.len()) == 0);
  ok(q.commit());
  CHECK(must(again.deque("queue").is_empty()));

  // Capacity: a push at capacity evicts from the other end.
  auto bounded = o.deque("last3", with_capacity(3));
  for (int i = 0; i < 5; ++i) ok(bounded.push_back(j(i)));
  ok(bounded.push_front(j(-1)));  // evicts the back (4)
  ok(bounded.commit());
  auto all = drain(must(bounded.scan()), 10);
  CHECK(all == std::vector<item>{j(-1), j(2), j(3)});
}

TEST_CASE(
    "keyed state: owner commit writes every handle in one frame; a deque changed by another writer conflicts "
    "and writes nothing") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path()));
  owner_state o(*db, "acct", "7");
  auto v = o.value("v");
  auto m = o.map("m");
  auto q = o.deque("q");
  ok(v.set(j(1)));
  ok(m.set("k", j(2)));
  ok(q.push_back(j(3)));
  auto before = must(db->stats()).shards[o.shard()].groups;
  ok(o.commit());
  CHECK(must(db->stats()).shards[o.shard()].groups == before + 1);
  owner_state reader(*db, "acct", "7");
  CHECK(must(reader.value("v").get()) == std::optional<item>(j(1)));
  CHECK(must(reader.map("m").get("k")) == std::optional<item>(j(2)));
  CHECK(must(reader.deque("q").len()) == 1);

  // Two writers on one deque: the second commit finds the meta moved.
  owner_state w2(*db, "acct", "7");
  auto q2 = w2.deque("q");
  ok(q.push_back(j(4)));
  ok(q2.push_back(j(5)));
  ok(m.set("k", j(20)));
  ok(q2.commit());
  auto lost = o.commit();
  REQUIRE_FALSE(lost.is_ok());
  CHECK(lost.code() == status_code::conflict);
  CHECK(lost.message().find("deque \"q\"") != std::string::npos);
  CHECK(must(reader.map("m").get("k")) == std::optional<item>(j(2)));  // nothing of the loser
  o.rollback();
  ok(q.push_back(j(4)));
  ok(o.commit());
  CHECK(drain(must(reader.deque("q").scan()), 10) == std::vector<item>{j(3), j(5), j(4)});
  o.close();
  CHECK(m.set("k", j(1)).code() == status_code::invalid_argument);
  CHECK(o.commit().code() == status_code::invalid_argument);
}

TEST_CASE(
    "keyed state: TTL per item from its last write; deque len an upper bound, expired ends peek as nothing, "
    "pop consumes them") {
  testing::temp_dir d("keyed");
  manual_clock clock;
  auto db = must_open(clocked(d.path(), clock));
  owner_state o(*db, "sess", "s1");
  auto m = o.map("m", with_ttl(10s));
  auto q = o.deque("q", with_ttl(10s));
  ok(m.set("old", j(1)));
  ok(q.push_back(j(1)));
  ok(q.push_back(j(2)));
  ok(o.commit());
  clock.advance(6s);
  ok(m.set("new", j(2)));
  ok(q.push_back(j(3)));  // rewrites the meta: it lives 10 s from now
  ok(o.commit());
  clock.advance(5s);  // "old", slots 1 and 2 expired
  CHECK_FALSE(must(m.get("old")));
  CHECK(must(m.get("new")) == std::optional<item>(j(2)));
  CHECK(must(m.size()) == 1);
  CHECK(drain(must(m.keys()), 5) == std::vector<std::string>{"new"});
  CHECK(must(q.len()) == 3);  // an upper bound
  CHECK_FALSE(must(q.peek_front()));
  CHECK(must(q.peek_back()) == std::optional<item>(j(3)));
  CHECK(must(q.get(0)) == std::optional<item>(j(3)));
  CHECK(drain(must(q.scan()), 5) == std::vector<item>{j(3)});
  CHECK_FALSE(must(q.pop_front()));  // consumed an expired slot
  CHECK(must(q.len()) == 2);
  ok(q.commit());
  clock.advance(11s);  // everything, the meta too
  CHECK(must(q.len()) == 0);
  CHECK(must(m.is_empty()));
  ok(q.push_back(j(9)));
  ok(q.commit());
  CHECK(drain(must(q.scan()), 5) == std::vector<item>{j(9)});
}

TEST_CASE("keyed state: a cursor's first error closes it and stays; close is idempotent") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path(), 1));
  owner_state o(*db, "n", "o");
  auto m = o.map("m");
  for (int i = 0; i < 5; ++i) ok(m.set(fmt::format("k{}", i), j(i)));
  ok(m.commit());
  // Damage one entry as only a host bypassing state/ could: a type byte of 7.
  std::string bad = map_entries_prefix(owner_prefix("n", "o"), "m") + key_encoder().bytes("k3").str();
  auto out = must(db->core().apply(0, {}, std::vector<batch_write>{{bad, std::string("\x07junk"), std::nullopt}}));
  REQUIRE(out.swapped);
  auto c = must(m.scan());
  CHECK(must(c.next_chunk(2)).size() == 2);
  auto e = c.next_chunk(10);
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.error().code() == status_code::corruption);
  CHECK(c.next_chunk(10).error().code() == status_code::corruption);
  c.close();
  c.close();
  auto c2 = must(m.keys());
  c2.close();
  c2.close();
  CHECK(must(c2.next_chunk(5)).empty());
  // get of the damaged key names it too.
  CHECK(m.get("k3").error().code() == status_code::corruption);
}

// ---- the walk against models ------------------------------------------------------

namespace {

class keyed_walk {
 public:
  explicit keyed_walk(std::uint64_t seed) : rng_(seed), seed_(seed) {}

  void run(int steps) {
    open();
    for (step_ = 0; step_ < steps; ++step_) {
      std::uint64_t dice = rng_() % 100;
      int h = static_cast<int>(rng_() % 3);
      if (dice < 20)
        value_step(h);
      else if (dice < 50)
        map_step(h);
      else if (dice < 75)
        deque_step(h);
      else if (dice < 85)
        commit(h);
      else if (dice < 88)
        rollback(h);
      else if (dice < 90)
        owner_commit(h);
      else if (dice < 92)
        reopen();
      else if (dice < 94)
        power_cut();
      else
        check_all();
    }
    check_all();
    handles_.clear();
  }

  int commits = 0, cuts = 0, ops = 0;

 private:
  // What a handle sees: the committed state with its buffer applied.
  struct model {
    std::optional<int> value;
    std::map<std::string, int> map;
    std::deque<int> deque;
    bool operator==(const model&) const = default;
  };
  struct handles {
    std::unique_ptr<owner_state> owner;
    value_handle v;
    map_handle m;
    deque_handle q;
    model view;  // committed + buffered
  };

  std::string where() const { return fmt::format("seed {} step {}", seed_, step_); }

  void open() {
    handles_.clear();
    db_ = &host_.open();
    // Three writers of one owner, each with its own owner_state (handles of
    // one owner_state share their buffers).
    for (int i = 0; i < 3; ++i) {
      auto o = std::make_unique<owner_state>(*db_, "ns", "owner");
      auto v = o->value("v");
      auto m = o->map("m");
      auto q = o->deque("q", with_capacity(6));
      handles_.push_back({std::move(o), std::move(v), std::move(m), std::move(q), committed_});
    }
  }

  void reopen() {
    open();
    check_all();
  }

  void power_cut() {
    ++cuts;
    handles_.clear();
    host_.power_cut(rng_(), rng_());
    open();
    check_all();
  }

  void value_step(int h) {
    auto& x = handles_[h];
    ++ops;
    switch (rng_() % 3) {
      case 0:
        ok(x.v.set(j(next_++))), x.view.value = next_ - 1;
        break;
      case 1:
        ok(x.v.clear()), x.view.value.reset();
        break;
      default: {
        auto got = must(x.v.get());
        CHECK_MESSAGE(got == (x.view.value ? std::optional<item>(j(*x.view.value)) : std::nullopt), where());
      }
    }
  }

  void map_step(int h) {
    auto& x = handles_[h];
    std::string k = fmt::format("k{}", rng_() % 8);
    ++ops;
    switch (rng_() % 6) {
      case 0:
      case 1:
        ok(x.m.set(k, j(next_++))), x.view.map[k] = next_ - 1;
        break;
      case 2:
        ok(x.m.remove(k)), x.view.map.erase(k);
        break;
      case 3:
        if (rng_() % 4 == 0) ok(x.m.clear()), x.view.map.clear();
        break;
      default: {
        auto got = must(x.m.get(k));
        auto it = x.view.map.find(k);
        CHECK_MESSAGE(got == (it == x.view.map.end() ? std::nullopt : std::optional<item>(j(it->second))), where());
        CHECK_MESSAGE(must(x.m.contains(k)) == (it != x.view.map.end()), where());
        CHECK_MESSAGE(must(x.m.size()) == x.view.map.size(), where());
      }
    }
  }

  void deque_step(int h) {
    auto& x = handles_[h];
    auto& d = x.view.deque;
    ++ops;
    switch (rng_() % 6) {
      case 0:
        ok(x.q.push_back(j(next_++)));
        if (d.size() == 6) d.pop_front();
        d.push_back(next_ - 1);
        break;
      case 1:
        ok(x.q.push_front(j(next_++)));
        if (d.size() == 6) d.pop_back();
        d.push_front(next_ - 1);
        break;
      case 2: {
        auto got = must(x.q.pop_front());
        CHECK_MESSAGE(got == (d.empty() ? std::nullopt : std::optional<item>(j(d.front()))), where());
        if (!d.empty()) d.pop_front();
        break;
      }
      case 3: {
        auto got = must(x.q.pop_back());
        CHECK_MESSAGE(got == (d.empty() ? std::nullopt : std::optional<item>(j(d.back()))), where());
        if (!d.empty()) d.pop_back();
        break;
      }
      case 4:
        if (rng_() % 4 == 0) ok(x.q.clear()), d.clear();
        break;
      default: {
        CHECK_MESSAGE(must(x.q.len()) == d.size(), where());
        std::uint64_t i = rng_() % (d.size() + 1);
        CHECK_MESSAGE(must(x.q.get(i)) == (i < d.size() ? std::optional<item>(j(d[i])) : std::nullopt), where());
      }
    }
  }

  // Handles share the collections: a commit by one makes its view the
  // committed state. The others are then rolled back to it, which keeps the
  // model simple (their buffers would merge last-writer-wins per key, and a
  // deque read before the commit would conflict: tested on its own above).
  void commit(int h) {
    auto& x = handles_[h];
    ok(commit_handles(x));
    ++commits;
    committed_ = x.view;
    for (auto& y : handles_) {
      y.v.rollback(), y.m.rollback(), y.q.rollback();
      y.view = committed_;
    }
  }

  // The three handles of one slot, each its own frame.
  status commit_handles(handles& x) {
    MAGNETITE_TRY(x.v.commit());
    MAGNETITE_TRY(x.m.commit());
    return x.q.commit();
  }

  void rollback(int h) {
    auto& x = handles_[h];
    x.v.rollback(), x.m.rollback(), x.q.rollback();
    x.view = committed_;
  }

  // A slot's owner_state commits its three handles in one frame.
  void owner_commit(int h) {
    ok(handles_[h].owner->commit());
    committed_ = handles_[h].view;
    for (auto& y : handles_) {
      y.v.rollback(), y.m.rollback(), y.q.rollback();
      y.view = committed_;
    }
    ++commits;
  }

  void check_all() {
    owner_state reader(*db_, "ns", "owner");
    auto v = must(reader.value("v").get());
    CHECK_MESSAGE(v == (committed_.value ? std::optional<item>(j(*committed_.value)) : std::nullopt), where());
    auto entries = drain(must(reader.map("m").scan()), 3);
    REQUIRE_MESSAGE(entries.size() == committed_.map.size(), where());
    std::size_t i = 0;
    for (const auto& [k, val] : committed_.map) {
      CHECK(entries[i].key == k);
      CHECK(entries[i].value == j(val));
      ++i;
    }
    auto q = drain(must(reader.deque("q").scan(direction::backward)), 2);
    REQUIRE_MESSAGE(q.size() == committed_.deque.size(), where());
    for (std::size_t k = 0; k < q.size(); ++k) CHECK(q[k] == j(committed_.deque[q.size() - 1 - k]));
  }

  std::mt19937_64 rng_;
  std::uint64_t seed_;
  int step_ = 0;
  testing::power_cut_database host_{"/db", 2};
  database* db_ = nullptr;
  std::vector<handles> handles_;
  model committed_;
  int next_ = 0;
};

}  // namespace

TEST_CASE(
    "keyed state model: value, map and deque handles against models, with commits, rollbacks, reopens and "
    "power cuts") {
  int commits = 0, cuts = 0, ops = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    keyed_walk w(seed);
    w.run(600);
    commits += w.commits;
    cuts += w.cuts;
    ops += w.ops;
  }
  CHECK(commits > 200);
  CHECK(cuts > 20);
  MESSAGE(ops, " operations, ", commits, " commits, ", cuts, " power cuts");
}

TEST_CASE(
    "keyed state: handles of one name share one buffer; an idle deque handle sees other writers' commits; "
    "names and options that cannot work are refused as caller mistakes") {
  testing::temp_dir d("keyed");
  auto db = must_open(options_for(d.path(), 1));
  owner_state o(*db, "n", "o");
  auto q1 = o.deque("q"), q2 = o.deque("q");
  ok(q1.push_back(j(1)));
  ok(q2.push_back(j(2)));  // the same deque: after 1, not on top of it
  CHECK(must(q1.len()) == 2);
  ok(o.commit());
  owner_state other(*db, "n", "o");
  CHECK(drain(must(other.deque("q").scan()), 5) == std::vector<item>{j(1), j(2)});
  // q1 is idle: another owner_state's commit shows in its reads.
  auto oq = other.deque("q");
  ok(oq.push_front(j(0)));
  ok(oq.commit());
  CHECK(must(q1.len()) == 3);
  CHECK(must(q1.peek_front()) == std::optional<item>(j(0)));
  CHECK(must(q1.get(2)) == std::optional<item>(j(2)));

  auto bad = [](const status& s) {
    CHECK(s.code() == status_code::invalid_argument);
    CHECK(s.category() == status_category::transient);
  };
  owner_state huge(*db, "n", std::string(limits::max_user_key_bytes, 'o'));
  bad(huge.value("v").set(j(1)));
  bad(huge.deque("q").push_back(j(1)));
  bad(huge.map("m").set("k", j(1)));
  bad(o.deque("zero", with_capacity(0)).push_back(j(1)));
  bad(o.map("m", with_capacity(3)).set("k", j(1)));
  bad(o.value("neg", with_ttl(-1s)).set(j(1)));
  ok(o.commit());  // the refused handles buffered nothing
}
