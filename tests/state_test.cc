// state/: the layout of state keys and values, the shard's conditional batch
// (apply), records and transactions, event streams.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <future>
#include <latch>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "actors/database_core.h"
#include "core/coding.h"
#include "core/fault_env.h"
#include "core/limits.h"
#include "engine/shard.h"
#include "engine/state_space.h"
#include "engine/transaction_records.h"
#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
#include "state/item_codec.h"
#include "state/layout.h"
#include "tests/support/crashable_env.h"
#include "tests/support/database_fixture.h"
#include "tests/support/json_cases.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::state;
using namespace std::chrono_literals;
using magnetite::testing::must;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

std::string random_bytes(std::mt19937_64& rng, std::size_t max_len) {
  // Few distinct bytes, the encoding's special ones among them: collisions
  // and prefixes happen often.
  static const char alphabet[] = {'\0', '\1', 'a', '\xff', '\xfe'};
  std::string s(rng() % (max_len + 1), '\0');
  for (auto& c : s) c = alphabet[rng() % sizeof alphabet];
  return s;
}

json doc(int n) { return json{{"n", n}, {"name", fmt::format("item {}", n)}}; }

void check_refused_for_no_json_form(const status& s, const std::string& what) {
  CHECK(s.code() == status_code::invalid_argument);
  CHECK(s.category() == status_category::transient);
  CHECK_MESSAGE(s.message().find(what) != std::string::npos, s.message());
}

}  // namespace

// ---- layout -------------------------------------------------------------------

TEST_CASE("state layout: record keys sort as their (namespace, key) tuples and never collide") {
  std::mt19937_64 rng(7);
  std::map<std::pair<std::string, std::string>, std::string> by_tuple;
  for (int i = 0; i < 3000; ++i) {
    std::pair t{random_bytes(rng, 4), random_bytes(rng, 4)};
    by_tuple[t] = record_key(t.first, t.second);
  }
  std::set<std::string> keys;
  std::string previous;
  for (const auto& [t, k] : by_tuple) {
    CHECK(k.starts_with(state_space::prefix));
    CHECK(k > previous);  // tuple order == key order, so also no two equal
    previous = k;
    keys.insert(k);
    CHECK(bytes_after(record_prefix(t.first), k) == std::optional<std::string>(t.second));
    CHECK(state_space::check_key(k).is_ok());
    CHECK_FALSE(state_space::check_user_key(k).is_ok());
  }
  CHECK(keys.size() == by_tuple.size());
}

TEST_CASE("state layout: a key prefix scan range holds exactly the keys with that prefix") {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string ns = random_bytes(rng, 2), p = random_bytes(rng, 3), k = random_bytes(rng, 5);
    std::string from = record_prefix(ns) + open_component(p);
    std::string to = prefix_successor(from);
    std::string key = record_key(ns, k);
    bool inside = key >= from && key < to;
    CHECK_MESSAGE(inside == k.starts_with(p), fmt::format("p={:?} k={:?}", p, k));
  }
  CHECK(prefix_successor("ab") == "ac");
  CHECK(prefix_successor(std::string("a\xff\xff", 3)) == "b");
  CHECK(prefix_successor(std::string("\xff", 1)).empty());
}

TEST_CASE("state layout: stream keys: entries in seq order, no stream's keys inside another's ranges") {
  std::vector<std::string> names{"",   std::string(1, '\0'),  "a", std::string("a\0", 2), std::string("a\0\1", 3),
                                 "ab", std::string("\xff", 1)};
  for (const auto& a : names) {
    CHECK(stream_entry_key(a, 1) < stream_entry_key(a, 2));
    CHECK(stream_entry_key(a, 255) < stream_entry_key(a, 256));
    CHECK(stream_seq_of(stream_entries_prefix(a), stream_entry_key(a, 77)) == std::optional<std::uint64_t>(77));
    for (const auto& b : names) {
      if (a == b) continue;
      std::string from = stream_entries_prefix(b), to = prefix_successor(from);
      for (std::uint64_t seq : {std::uint64_t{0}, std::uint64_t{1} << 40, UINT64_MAX}) {
        std::string k = stream_entry_key(a, seq);
        CHECK_FALSE((k >= from && k < to));
      }
      CHECK(stream_meta_key(a) != stream_meta_key(b));
      CHECK(stream_routing(a) != stream_routing(b));
    }
  }
}

TEST_CASE("state layout: items round-trip; a JSON null is refused naming the deleting verb; damage is corruption") {
  for (const item& x : {item(json(42)), item(json("text")), item(json::array({1, "two", nullptr})), item(doc(3)),
                        item(bytes{std::string("\0\xff raw", 6)}), item(bytes{}), item(json(false))}) {
    auto e = encode_item(x, "remove(key)");
    REQUIRE(e.is_ok());
    auto d = decode_item(*e, "k");
    REQUIRE(d.is_ok());
    CHECK(*d == x);
  }
  // Key order of an object does not change its stored form.
  CHECK(encode_item(json::parse(R"({"b":1,"a":2})"), "x").value() ==
        encode_item(json::parse(R"({"a":2,"b":1})"), "x").value());
  auto null = encode_item(json(nullptr), "remove(key)");
  REQUIRE_FALSE(null.is_ok());
  CHECK(null.error().code() == status_code::invalid_argument);
  CHECK(null.error().category() == status_category::transient);
  CHECK(null.error().message().find("remove(key)") != std::string::npos);
  // Text that is not UTF-8 cannot be a JSON string.
  CHECK_FALSE(encode_item(json(std::string("\xff\xfe", 2)), "x").is_ok());
  for (std::string bad : {std::string(), std::string("\x02{}", 3), std::string("\x01{", 2), std::string("\x01null")}) {
    auto d = decode_item(bad, "k");
    REQUIRE_FALSE(d.is_ok());
    CHECK(d.error().code() == status_code::corruption);
  }
  CHECK(split_state_value(std::string(8, '\0') + "\x01"
                                                 "1",
                          "k")
            .error()
            .code() == status_code::corruption);
  CHECK(split_state_value("short", "k").error().code() == status_code::corruption);
  CHECK(decode_stream_meta(encode_stream_meta(12345), "s").value() == 12345);
  CHECK_FALSE(decode_stream_meta("\x12"
                                 "1234567",
                                 "s")
                  .is_ok());
}

TEST_CASE("state layout: a number with no JSON form (NaN, +-infinity), nested too, is refused, saying where") {
  for (const auto& [x, what] : testing::no_json_form()) {
    auto e = encode_item(x, "remove(key)");
    REQUIRE_FALSE(e.is_ok());
    check_refused_for_no_json_form(e.error(), what);
  }
  // Large, small and negative finite numbers keep their form.
  for (double finite : {std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(), -0.5}) {
    item x = json::array({finite});
    CHECK(decode_item(encode_item(x, "x").value(), "k").value() == x);
  }
}

// ---- the shard's conditional batch ---------------------------------------------------

namespace {
const std::string shard_dir = "/db/shard-0";

shard_options small_shard_options() {
  shard_options o;
  o.chunking = {256, 64, 1024};
  o.cache_bytes = 1 << 20;
  return o;
}

std::string state_key(std::string_view s) { return std::string(state_space::prefix) + std::string(s); }

// The stored revision and rest of a state key in the shard's published view.
std::optional<std::pair<std::uint64_t, std::string>> stored(shard& s, std::string_view key) {
  auto v = must(s.view()->get(key, s.now_ns()));
  if (!v) return std::nullopt;
  REQUIRE(v->size() >= 8);
  return std::pair{decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(v->data())), v->substr(8)};
}
}  // namespace

TEST_CASE("shard apply: revision is the frame's sequence; checks see staged writes; a failed check stages nothing") {
  fault_env fe;
  auto s = must(shard::open(fe, shard_dir, small_shard_options()));
  REQUIRE(s->put("plain", "p").is_ok());
  std::vector<batch_write> w1{{state_key("a"), std::string("A1"), {}}, {state_key("b"), std::string("B1"), {}}};
  auto r1 = must(s->apply({}, w1));
  REQUIRE(r1.swapped);
  CHECK(r1.revision == 2);  // the put took 1
  // Not yet durable: not visible, but the next apply is checked against it.
  CHECK_FALSE(stored(*s, state_key("a")));
  std::vector<state_check> stale{{state_key("b"), 0}};
  std::size_t staged = s->staged();
  auto r2 = must(s->apply(stale, std::vector<batch_write>{{state_key("c"), std::string("C"), {}}}));
  CHECK_FALSE(r2.swapped);
  CHECK(r2.failed_check == std::optional<std::uint32_t>(0));
  CHECK(r2.found == r1.revision);
  CHECK(s->staged() == staged);
  std::vector<state_check> fresh{{state_key("c"), 0}, {state_key("a"), r1.revision}};
  auto r3 = must(s->apply(
      fresh, std::vector<batch_write>{{state_key("a"), std::string("A2"), {}}, {state_key("b"), std::nullopt, {}}}));
  REQUIRE(r3.swapped);
  CHECK(r3.revision == r1.revision + 1);
  // A check alone writes nothing and names the position it was judged at.
  auto r4 = must(s->apply(std::vector<state_check>{{state_key("a"), r3.revision}}, {}));
  CHECK(r4.swapped);
  CHECK(r4.revision == r3.revision);
  CHECK(s->staged() == staged + 2);
  REQUIRE(s->commit_group().is_ok());
  CHECK(stored(*s, state_key("a")) == std::optional(std::pair<std::uint64_t, std::string>{r3.revision, "A2"}));
  CHECK_FALSE(stored(*s, state_key("b")));
  CHECK_FALSE(stored(*s, state_key("c")));

  // Replay gives back the same bytes, so the same revisions; numbering goes on.
  s.reset();
  s = must(shard::open(fe, shard_dir, small_shard_options()));
  CHECK(stored(*s, state_key("a")) == std::optional(std::pair<std::uint64_t, std::string>{r3.revision, "A2"}));
  auto r5 = must(s->apply({}, std::vector<batch_write>{{state_key("a"), std::string("A3"), {}}}));
  CHECK(r5.revision > r3.revision);
  // Across a checkpoint and a reopen too.
  REQUIRE(s->checkpoint().is_ok());
  s.reset();
  s = must(shard::open(fe, shard_dir, small_shard_options()));
  auto r6 = must(s->apply(std::vector<state_check>{{state_key("a"), r5.revision}},
                          std::vector<batch_write>{{state_key("a"), std::string("A4"), {}}}));
  REQUIRE(r6.swapped);
  CHECK(r6.revision > r5.revision);
}

TEST_CASE("shard apply: the two key spaces are kept apart; bad input changes nothing") {
  fault_env fe;
  auto s = must(shard::open(fe, shard_dir, small_shard_options()));
  auto plain_in_apply = s->apply({}, std::vector<batch_write>{{"plain", std::string("x"), {}}});
  CHECK(plain_in_apply.error().code() == status_code::invalid_argument);
  auto plain_check = s->apply(std::vector<state_check>{{"plain", 0}}, {});
  CHECK(plain_check.error().code() == status_code::invalid_argument);
  for (const std::string& k : {state_key(""), state_key("x"), std::string(limits::max_user_key_bytes, '\xff')}) {
    auto st = s->put(k, "v");
    CHECK(st.code() == status_code::invalid_argument);
    CHECK(st.message().find("reserved") != std::string::npos);
    CHECK(s->del(k).code() == status_code::invalid_argument);
    CHECK(s->batch(std::vector<batch_write>{{k, std::string("v"), {}}}).code() == status_code::invalid_argument);
  }
  // A value that would pass the plain limit but not with its revision.
  std::string big(state_space::max_value_bytes + 1, 'v');
  auto too_big = s->apply({}, std::vector<batch_write>{{state_key("a"), big, {}}});
  CHECK(too_big.error().code() == status_code::invalid_argument);
  CHECK(s->apply({}, std::vector<batch_write>{{state_key("a"), std::string("x"), -1ns}}).error().code() ==
        status_code::invalid_argument);
  CHECK(s->staged() == 0);
  CHECK(s->failure().is_ok());
  // After every refusal the shard takes the next good apply.
  auto fine = must(s->apply({}, std::vector<batch_write>{{state_key("ok"), std::string("x"), {}}}));
  CHECK(fine.swapped);
}

TEST_CASE("shard apply: a power cut in the group's fsync leaves the apply whole or absent, never part of it") {
  std::set<std::size_t> outcomes;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    auto mode = std::array{fault_env::unsynced::lose, fault_env::unsynced::keep, fault_env::unsynced::random,
                           fault_env::unsynced::reorder}[seed % 4];
    fault_env fe;
    {
      testing::crashable_env ce(fe);
      auto s = must(shard::open(ce, shard_dir, small_shard_options()));
      REQUIRE(must(s->apply({}, std::vector<batch_write>{{state_key("a"), std::string("1"), {}}})).swapped);
      REQUIRE(s->commit_group().is_ok());
      std::vector<batch_write> w;
      for (int i = 0; i < 50; ++i) w.push_back({state_key(fmt::format("k{}", i)), std::string(100, 'x'), {}});
      REQUIRE(must(s->apply({}, w)).swapped);
      // The power goes inside the group's fsync: the log keeps none, some or
      // all of the frame's bytes.
      ce.arm({false, "/wal/", 1, testing::crashable_env::action::crash, mode, seed, 0});
      CHECK_FALSE(s->commit_group().is_ok());
    }
    auto s = must(shard::open(fe, shard_dir, small_shard_options()));
    CHECK(stored(*s, state_key("a")));
    std::size_t found = 0;
    for (int i = 0; i < 50; ++i) found += stored(*s, state_key(fmt::format("k{}", i))).has_value();
    CHECK((found == 0 || found == 50));
    outcomes.insert(found);
  }
  CHECK(outcomes == std::set<std::size_t>{0, 50});  // both ends were reached
}

// ---- through the database ----------------------------------------------------------

TEST_CASE("database: state keys are refused by the plain calls and hidden from its scans") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  auto t = recs.begin();
  REQUIRE(t.put("ns", "k", json(1)).is_ok());
  REQUIRE(t.commit().is_ok());
  REQUIRE(db->put("plain", "p").is_ok());
  REQUIRE(db->put(std::string("\xff\xfe", 2), "high").is_ok());
  std::string k = record_key("ns", "k");
  CHECK(db->put(k, "x").code() == status_code::invalid_argument);
  CHECK(db->del(k).code() == status_code::invalid_argument);
  CHECK(db->get(k).error().code() == status_code::invalid_argument);
  CHECK(db->cas(k, std::nullopt, std::string_view("x")).error().code() == status_code::invalid_argument);
  CHECK(db->batch(std::vector<batch_write>{{k, std::string("x"), {}}}).code() == status_code::invalid_argument);
  auto all = db->range("", "", 100).value();
  REQUIRE(all.size() == 2);
  CHECK(all[0].first == "plain");
  CHECK(all[1].first == std::string("\xff\xfe", 2));
  CHECK(db->range(std::string(state_space::prefix), "", 100).value().empty());
  // apply refuses plain keys and bad shard numbers before sending anything.
  CHECK(db->core().apply(0, {}, std::vector<batch_write>{{"plain", std::string("x"), {}}}).error().code() ==
        status_code::invalid_argument);
  CHECK(db->core().apply(9, {}, {}).error().code() == status_code::invalid_argument);
}

TEST_CASE("database: an actor host sends (apply) to a shard and gets the revision") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 1));
  caf::scoped_actor self{db->core().system()};
  std::vector<batch_op> ops{{state_key("x"), true, std::string(1, '\0') + "raw", 0}};
  std::uint64_t first = 0;
  self->request(db->core().shard_handle(0), 10s, apply_atom::value, std::vector<state_check>{}, ops)
      .receive(
          [&](bool applied, std::uint64_t revision, std::uint32_t, std::uint64_t) {
            CHECK(applied);
            first = revision;
          },
          [](caf::error& e) { FAIL(caf::to_string(e)); });
  REQUIRE(first > 0);
  self->request(db->core().shard_handle(0), 10s, apply_atom::value,
                std::vector<state_check>{{state_key("x"), first - 1}}, ops)
      .receive(
          [&](bool applied, std::uint64_t, std::uint32_t failed, std::uint64_t found) {
            CHECK_FALSE(applied);
            CHECK(failed == 0);
            CHECK(found == first);
          },
          [](caf::error& e) { FAIL(caf::to_string(e)); });
}

// ---- records -------------------------------------------------------------------

TEST_CASE("records: load, commit, revisions, list with prefix and pages") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 3));
  records recs(*db);
  CHECK_FALSE(recs.load("users", "ann").value());
  auto t = recs.begin();
  REQUIRE(t.put("users", "ann", doc(1)).is_ok());
  REQUIRE(t.put("users", "bob", bytes{"raw\0"}).is_ok());
  auto rev = t.commit();
  REQUIRE(rev.is_ok());
  CHECK(*rev > 0);
  auto ann = recs.load("users", "ann").value();
  REQUIRE(ann);
  CHECK(ann->value == item(doc(1)));
  CHECK(ann->revision == *rev);
  CHECK(recs.load("users", "bob").value()->revision == *rev);

  // A later commit of one key moves only that key's revision, upward.
  auto t2 = recs.begin();
  REQUIRE(t2.put("users", "ann", doc(2)).is_ok());
  auto rev2 = t2.commit().value();
  CHECK(rev2 > *rev);
  CHECK(recs.load("users", "ann").value()->revision == rev2);
  CHECK(recs.load("users", "bob").value()->revision == *rev);

  // list: keys in order, prefix, paging with next only when more exist.
  auto t3 = recs.begin();
  for (int i = 0; i < 25; ++i) REQUIRE(t3.put("items", fmt::format("i{:02}", i), json(i)).is_ok());
  REQUIRE(t3.put("items", "j", json("other")).is_ok());
  REQUIRE(t3.commit().is_ok());
  auto t4 = recs.begin();  // another namespace, perhaps on another shard
  REQUIRE(t4.put("itemz", "i00", json("other namespace")).is_ok());
  REQUIRE(t4.commit().is_ok());
  std::vector<std::string> seen;
  std::optional<std::string> after;
  int pages = 0;
  do {
    auto p = recs.list("items", "i", after, 10);
    REQUIRE(p.is_ok());
    ++pages;
    for (auto& [k, r] : p->records) {
      seen.push_back(k);
      CHECK(r.value == item(json(std::stoi(k.substr(1)))));
    }
    after = p->next;
  } while (after);
  CHECK(pages == 3);
  REQUIRE(seen.size() == 25);
  for (int i = 0; i < 25; ++i) CHECK(seen[i] == fmt::format("i{:02}", i));
  auto exact = recs.list("items", "", std::nullopt, 26).value();
  CHECK(exact.records.size() == 26);
  CHECK_FALSE(exact.next);
  auto tail = recs.list("items", "", std::string("i23"), 1000).value();
  REQUIRE(tail.records.size() == 2);
  CHECK(tail.records[0].first == "i24");
  CHECK(tail.records[1].first == "j");
  for (std::size_t bad : {std::size_t{0}, std::size_t{1001}}) {
    auto e = recs.list("items", "", std::nullopt, bad);
    CHECK(e.error().code() == status_code::invalid_argument);
    CHECK(e.error().category() == status_category::transient);
  }
}

TEST_CASE("records: a transaction reads its own writes, repeats its reads, and ends with commit or rollback") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 1));
  records recs(*db);
  auto seed = recs.begin();
  REQUIRE(seed.put("n", "a", json(1)).is_ok());
  auto r0 = seed.commit().value();

  auto t = recs.begin();
  CHECK(t.load("n", "a").value()->revision == r0);
  // Another writer moves a; t keeps answering what it first saw.
  auto other = recs.begin();
  REQUIRE(other.put("n", "a", json(2)).is_ok());
  REQUIRE(other.commit().is_ok());
  CHECK(t.load("n", "a").value()->value == item(json(1)));
  REQUIRE(t.put("n", "b", json(3)).is_ok());
  auto own = t.load("n", "b").value();
  REQUIRE(own);
  CHECK(own->value == item(json(3)));
  CHECK(own->revision == 0);  // not committed yet
  REQUIRE(t.del("n", "b").is_ok());
  CHECK_FALSE(t.load("n", "b").value());
  t.rollback();
  CHECK(t.finished());
  auto closed = t.put("n", "c", json(1));
  CHECK(closed.code() == status_code::invalid_argument);
  CHECK(closed.category() == status_category::transient);
  CHECK(t.commit().error().code() == status_code::invalid_argument);
  CHECK_FALSE(recs.load("n", "b").value());
  CHECK_FALSE(recs.load("n", "c").value());

  // Bad input leaves the transaction usable and buffers nothing.
  auto u = recs.begin();
  auto null = u.put("n", "x", json(nullptr));
  CHECK(null.code() == status_code::invalid_argument);
  CHECK(null.category() == status_category::transient);
  CHECK(null.message().find("del(") != std::string::npos);
  auto long_key = u.put("n", std::string(limits::max_user_key_bytes, 'k'), json(1));
  CHECK(long_key.code() == status_code::invalid_argument);
  auto big = u.put("n", "x", bytes{std::string(state_space::max_value_bytes, 'v')});
  CHECK(big.code() == status_code::invalid_argument);
  REQUIRE(u.put("n", "y", json(true)).is_ok());
  REQUIRE(u.commit().is_ok());
  CHECK_FALSE(recs.load("n", "x").value());
  CHECK(recs.load("n", "y").value()->value == item(json(true)));
  // An empty transaction commits nothing.
  CHECK(recs.begin().commit().value() == 0);
}

TEST_CASE("records: a value with no JSON form is refused at put; nothing of it is written; the namespace lists") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  auto seed = recs.begin();
  REQUIRE(seed.put("n", "kept", json(1)).is_ok());
  REQUIRE(seed.commit().is_ok());
  for (const auto& [x, what] : testing::no_json_form()) {
    CAPTURE(what);
    auto t = recs.begin();
    check_refused_for_no_json_form(t.put("n", "kept", x), what);
    check_refused_for_no_json_form(t.put("n", "bad", x), what);
    // The transaction stays usable; its commit writes only what was accepted.
    REQUIRE(t.put("n", "good", json(2)).is_ok());
    REQUIRE(t.commit().is_ok());
    CHECK(recs.load("n", "kept").value()->value == item(json(1)));
    CHECK_FALSE(recs.load("n", "bad").value());
    auto all = recs.list("n", "", std::nullopt, 10);
    REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
    REQUIRE(all->records.size() == 2);
    CHECK(all->records[0].first == "good");
    CHECK(all->records[1].first == "kept");
  }
}

TEST_CASE("records: conflicts: a moved read, a miss that appeared, write skew; nothing of the loser is written") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 1));
  records recs(*db);
  auto seed = recs.begin();
  REQUIRE(seed.put("acct", "x", json(50)).is_ok());
  REQUIRE(seed.put("acct", "y", json(50)).is_ok());
  auto r0 = seed.commit().value();

  SUBCASE("a read key moved") {
    auto t1 = recs.begin(), t2 = recs.begin();
    REQUIRE(t1.load("acct", "x").is_ok());
    REQUIRE(t2.load("acct", "x").is_ok());
    REQUIRE(t2.put("acct", "x", json(40)).is_ok());
    auto won = t2.commit().value();
    REQUIRE(t1.put("acct", "x", json(60)).is_ok());
    REQUIRE(t1.put("acct", "z", json(1)).is_ok());
    auto lost = t1.commit();
    REQUIRE_FALSE(lost.is_ok());
    CHECK(lost.error().code() == status_code::conflict);
    CHECK(lost.error().category() == status_category::transient);
    CHECK(lost.error().message().find(fmt::format("revision {} and is now at {}", r0, won)) != std::string::npos);
    CHECK(recs.load("acct", "x").value()->value == item(json(40)));
    CHECK_FALSE(recs.load("acct", "z").value());
  }
  SUBCASE("a key read as missing appeared") {
    auto t1 = recs.begin();
    CHECK_FALSE(t1.load("acct", "new").value());
    auto t2 = recs.begin();
    REQUIRE(t2.put("acct", "new", json(1)).is_ok());
    REQUIRE(t2.commit().is_ok());
    REQUIRE(t1.put("acct", "other", json(2)).is_ok());
    CHECK(t1.commit().error().code() == status_code::conflict);
    CHECK_FALSE(recs.load("acct", "other").value());
  }
  SUBCASE("write skew: each reads x and y and writes one; never both") {
    auto t1 = recs.begin(), t2 = recs.begin();
    for (auto* t : {&t1, &t2}) {
      REQUIRE(t->load("acct", "x").is_ok());
      REQUIRE(t->load("acct", "y").is_ok());
    }
    REQUIRE(t1.put("acct", "x", json(-50)).is_ok());
    REQUIRE(t2.put("acct", "y", json(-50)).is_ok());
    auto a = t1.commit();
    auto b = t2.commit();
    CHECK(a.is_ok() != b.is_ok());
    int sum = 0;
    for (const char* k : {"x", "y"}) sum += std::get<json>(recs.load("acct", k).value()->value).get<int>();
    CHECK(sum == 0);
  }
  SUBCASE("a read-only transaction is validated too") {
    auto t1 = recs.begin();
    REQUIRE(t1.load("acct", "x").is_ok());
    auto t2 = recs.begin();
    REQUIRE(t2.put("acct", "x", json(1)).is_ok());
    REQUIRE(t2.commit().is_ok());
    CHECK(t1.commit().error().code() == status_code::conflict);
    auto t3 = recs.begin();
    REQUIRE(t3.load("acct", "x").is_ok());
    CHECK(t3.commit().is_ok());
  }
}

TEST_CASE("records: a transaction across shards commits all or nothing; each shard numbers its writes") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 4));
  records recs(*db);
  std::string a = "ns0", same, other;
  for (int i = 1; same.empty() || other.empty(); ++i) {
    std::string ns = fmt::format("ns{}", i);
    (recs.shard_of(ns) == recs.shard_of(a) ? same : other) = ns;
  }
  auto seed = recs.begin();
  REQUIRE(seed.put(a, "x", json(50)).is_ok());
  REQUIRE(seed.put(other, "y", json(50)).is_ok());
  REQUIRE(seed.commit().is_ok());

  SUBCASE("a transfer: both sides or neither") {
    auto t = recs.begin();
    auto x = t.load(a, "x").value();
    auto y = t.load(other, "y").value();
    REQUIRE(t.put(a, "x", json(std::get<json>(x->value).get<int>() - 20)).is_ok());
    REQUIRE(t.put(same, "k", json(2)).is_ok());
    REQUIRE(t.put(other, "y", json(std::get<json>(y->value).get<int>() + 20)).is_ok());
    auto rev = t.commit().value();
    auto x2 = recs.load(a, "x").value(), k2 = recs.load(same, "k").value(), y2 = recs.load(other, "y").value();
    CHECK(x2->value == item(json(30)));
    CHECK(y2->value == item(json(70)));
    // One shard, one revision; the other shard numbered its own, and the
    // commit answers the highest.
    CHECK(x2->revision == k2->revision);
    CHECK(x2->revision > x->revision);
    CHECK(y2->revision > y->revision);
    CHECK(rev == std::max(x2->revision, y2->revision));
  }
  SUBCASE("a read on one shard that moved refuses the writes on the other") {
    auto t = recs.begin();
    REQUIRE(t.load(a, "x").is_ok());
    REQUIRE(t.put(other, "y", json(0)).is_ok());
    auto mover = recs.begin();
    REQUIRE(mover.put(a, "x", json(1)).is_ok());
    auto moved = mover.commit().value();
    auto lost = t.commit();
    REQUIRE_FALSE(lost.is_ok());
    CHECK(lost.error().code() == status_code::conflict);
    CHECK(lost.error().category() == status_category::transient);
    CHECK_MESSAGE(lost.error().message().find(fmt::format("is now at {}", moved)) != std::string::npos,
                  lost.error().message());
    CHECK(recs.load(other, "y").value()->value == item(json(50)));
    // Nothing stays held: both shards take new commits on those keys.
    auto again = recs.begin();
    REQUIRE(again.load(a, "x").is_ok());
    REQUIRE(again.put(other, "y", json(9)).is_ok());
    CHECK(again.commit().is_ok());
  }
  SUBCASE("write skew across shards: each reads both and writes one; never both") {
    auto t1 = recs.begin(), t2 = recs.begin();
    for (auto* t : {&t1, &t2}) {
      REQUIRE(t->load(a, "x").is_ok());
      REQUIRE(t->load(other, "y").is_ok());
    }
    REQUIRE(t1.put(a, "x", json(-50)).is_ok());
    REQUIRE(t2.put(other, "y", json(-50)).is_ok());
    auto r1 = t1.commit();
    auto r2 = t2.commit();
    CHECK(r1.is_ok() != r2.is_ok());
    int sum = std::get<json>(recs.load(a, "x").value()->value).get<int>() +
              std::get<json>(recs.load(other, "y").value()->value).get<int>();
    CHECK(sum == 0);
  }
}

TEST_CASE("records across shards: a prepare left by a dead driver holds its keys; open resolves it by its decision") {
  testing::temp_dir d("state");
  std::array<std::string, 2> ns;
  auto stored = [](int n) { return encode_item(json(n), "del").value(); };
  hash128 decided{1, 1}, undecided{2, 2};
  {
    auto db = must_open(options_for(d.path(), 2));
    records recs(*db);
    for (int i = 0, found = 0; found < 2; ++i)
      if (recs.shard_of(fmt::format("ns{}", i)) == static_cast<std::size_t>(found))
        ns[found++] = fmt::format("ns{}", i);
    auto seed = recs.begin();
    REQUIRE(seed.put(ns[0], "x", json(1)).is_ok());
    REQUIRE(seed.put(ns[1], "y", json(1)).is_ok());
    REQUIRE(seed.commit().is_ok());
    auto x_at = recs.load(ns[0], "x").value()->revision;

    // What a driver that died would leave: `decided` prepared on both shards
    // and decided commit, finished nowhere; `undecided` prepared on shard 1.
    auto& core = db->core();
    caf::scoped_actor self{core.system()};
    auto prepare = [&](std::size_t shard, const hash128& id, const std::string& key, int n) {
      std::vector<batch_op> ops{{key, true, stored(n), 0}};
      bool prepared = false;
      self->request(core.shard_handle(shard), caf::infinite, tx_prepare_atom::value, id, std::uint32_t{0},
                    std::vector<state_check>{}, ops)
          .receive([&](bool p, std::uint32_t, std::uint64_t) { prepared = p; }, [](caf::error&) {});
      REQUIRE(prepared);
    };
    prepare(0, decided, record_key(ns[0], "x"), 2);
    prepare(1, decided, record_key(ns[1], "y"), 2);
    prepare(1, undecided, record_key(ns[1], "z"), 9);
    bool commit = false;
    self->request(core.shard_handle(0), caf::infinite, tx_decide_atom::value, decided, true,
                  std::vector<std::uint32_t>{0, 1})
        .receive([&](bool c) { commit = c; }, [](caf::error&) {});
    REQUIRE(commit);
    // A later decide cannot change it.
    self->request(core.shard_handle(0), caf::infinite, tx_decide_atom::value, decided, false,
                  std::vector<std::uint32_t>{0, 1})
        .receive([&](bool c) { commit = c; }, [](caf::error&) {});
    CHECK(commit);

    // Nothing is visible before the finish, and a transaction on the held key
    // waits: its commit is parked, not refused or applied.
    CHECK(recs.load(ns[0], "x").value()->value == item(json(1)));
    std::promise<result<cas_outcome>> answered;
    auto parked = answered.get_future();
    core.apply_async(0, {{record_key(ns[0], "x"), x_at}}, {{record_key(ns[0], "x"), stored(5), std::nullopt}},
                     [&](result<cas_outcome> r) { answered.set_value(std::move(r)); });
    // A write of shard 0 sent after it is answered by a group that would
    // have answered the commit had it not been parked.
    std::string barrier = "b0";
    for (int i = 1; db->shard_of(barrier) != 0; ++i) barrier = fmt::format("b{}", i);
    REQUIRE(db->put(barrier, "b").is_ok());
    CHECK(parked.wait_for(0s) == std::future_status::timeout);
    // The finish applies the writes and lets the parked commit be judged:
    // x moved, so it is refused.
    std::uint64_t revision = 0;
    self->request(core.shard_handle(0), caf::infinite, tx_finish_atom::value, decided, true)
        .receive([&](std::uint64_t r) { revision = r; }, [](caf::error&) {});
    CHECK(revision > x_at);
    REQUIRE(parked.wait_for(10s) == std::future_status::ready);
    auto judged = parked.get();
    REQUIRE(judged.is_ok());
    CHECK_FALSE(judged->swapped);
    CHECK(judged->found == revision);
    CHECK(recs.load(ns[0], "x").value()->value == item(json(2)));
    CHECK(recs.load(ns[1], "y").value()->value == item(json(1)));  // shard 1 has not finished
  }
  // The process "died" (closed) with shard 1 holding both: open asks shard 0
  // for each decision, finishes them, and forgets the decision.
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  CHECK(recs.load(ns[1], "y").value()->value == item(json(2)));
  CHECK_FALSE(recs.load(ns[1], "z").value());
  for (std::size_t shard = 0; shard < 2; ++shard) {
    auto view = db->core().view_of(shard).value();
    CHECK(transaction_records::ids_in(*view, transaction_records::prepare_prefix).value().empty());
    CHECK(transaction_records::ids_in(*view, transaction_records::decision_prefix).value().empty());
  }
  auto t = recs.begin();
  REQUIRE(t.put(ns[0], "x", json(3)).is_ok());
  REQUIRE(t.put(ns[1], "z", json(3)).is_ok());
  CHECK(t.commit().is_ok());
}

TEST_CASE("records: deadlines: past before sending changes nothing; a commit whose waiter timed out still lands") {
  testing::temp_dir d("state");
  auto o = options_for(d.path(), 1);
  std::latch release(1);
  std::atomic<bool> hold{false};
  // Holds the shard inside the commit until the test lets it go.
  o.before_write = [&](const std::string&) {
    if (hold.exchange(false)) release.wait();
  };
  auto db = must_open(o);
  records recs(*db);
  auto past = recs.begin();
  REQUIRE(past.put("n", "k", json(1)).is_ok());
  auto late = past.commit(std::chrono::steady_clock::now() - 1ms);
  REQUIRE_FALSE(late.is_ok());
  CHECK(late.error().code() == status_code::timeout);
  CHECK(late.error().category() == status_category::transient);
  CHECK_FALSE(recs.load("n", "k").value());

  hold = true;
  auto t = recs.begin();
  REQUIRE(t.put("n", "k", json(2)).is_ok());
  auto r = t.commit(std::chrono::steady_clock::now() + 50ms);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::timeout);
  CHECK(r.error().category() == status_category::ambiguous);
  release.count_down();
  // The admitted commit finishes: a plain write queued behind it is answered
  // after it, so by then it is visible.
  REQUIRE(db->put("after", "x").is_ok());
  auto got = recs.load("n", "k").value();
  REQUIRE(got);
  CHECK(got->value == item(json(2)));
}

TEST_CASE("records: revisions and values survive close and reopen; revisions keep growing") {
  testing::temp_dir d("state");
  std::uint64_t last = 0;
  {
    auto db = must_open(options_for(d.path(), 2));
    records recs(*db);
    for (int i = 0; i < 20; ++i) {
      auto t = recs.begin();
      REQUIRE(t.put("n", fmt::format("k{}", i % 5), json(i)).is_ok());
      last = t.commit().value();
    }
    REQUIRE(db->commit().is_ok());
    auto t = recs.begin();
    REQUIRE(t.put("n", "after-checkpoint", json("x")).is_ok());
    last = t.commit().value();
  }
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  CHECK(recs.load("n", "after-checkpoint").value()->revision == last);
  CHECK(recs.load("n", "k4").value()->value == item(json(19)));
  auto t = recs.begin();
  REQUIRE(t.put("n", "k0", json(100)).is_ok());
  CHECK(t.commit().value() > last);
}

// ---- streams -------------------------------------------------------------------

TEST_CASE("streams: append at next_seq, read from any seq, conflicts name the stream's position") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 2));
  streams st(*db);
  CHECK(st.next_seq("orders").value() == 0);
  CHECK(st.read("orders", 0, 10).value().empty());
  std::vector<item> first{json("created"), json("paid")};
  CHECK(st.append("orders", first, 0).value() == 0);
  CHECK(st.next_seq("orders").value() == 2);
  auto wrong = st.append("orders", std::vector<item>{json("again")}, 0);
  REQUIRE_FALSE(wrong.is_ok());
  CHECK(wrong.error().code() == status_code::conflict);
  CHECK(wrong.error().message().find("at seq 2") != std::string::npos);
  CHECK(st.append("orders", std::vector<item>{json("ahead")}, 5).error().code() == status_code::conflict);
  CHECK(st.append("orders", std::vector<item>{json("shipped"), bytes{"\0raw"}}, 2).value() == 2);
  auto all = st.read("orders", 0, 1000).value();
  REQUIRE(all.size() == 4);
  for (std::uint64_t i = 0; i < 4; ++i) CHECK(all[i].seq == i);
  CHECK(all[2].value == item(json("shipped")));
  auto mid = st.read("orders", 1, 2).value();
  REQUIRE(mid.size() == 2);
  CHECK(mid[0].seq == 1);
  CHECK(mid[1].seq == 2);
  CHECK(st.read("orders", 4, 10).value().empty());
  // Bad input.
  CHECK(st.append("orders", std::vector<item>{}, 4).error().code() == status_code::invalid_argument);
  CHECK(st.append("orders", std::vector<item>{json(nullptr)}, 4).error().code() == status_code::invalid_argument);
  CHECK(st.read("orders", 0, 0).error().code() == status_code::invalid_argument);
  CHECK(st.next_seq("orders").value() == 4);
}

TEST_CASE("streams: an append holding a value with no JSON form is refused whole; the stream does not move") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 2));
  streams st(*db);
  REQUIRE(st.append("s", std::vector<item>{json("first")}, 0).is_ok());
  for (const auto& [x, what] : testing::no_json_form()) {
    CAPTURE(what);
    auto refused = st.append("s", std::vector<item>{json("before"), x}, 1);
    REQUIRE_FALSE(refused.is_ok());
    check_refused_for_no_json_form(refused.error(), what);
    // Refused as bad input even at a seq that is not the stream's next.
    auto wrong_seq = st.append("s", std::vector<item>{x}, 7);
    REQUIRE_FALSE(wrong_seq.is_ok());
    check_refused_for_no_json_form(wrong_seq.error(), what);
    CHECK(st.next_seq("s").value() == 1);
    auto all = st.read("s", 0, 10);
    REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
    REQUIRE(all->size() == 1);
    CHECK((*all)[0].value == item(json("first")));
  }
  CHECK(st.append("s", std::vector<item>{json("second")}, 1).value() == 1);
}

TEST_CASE("streams: names of any bytes, prefixes of each other included, never share entries") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 3));
  streams st(*db);
  std::vector<std::string> names{"",   std::string(1, '\0'),      "a", std::string("a\0", 2), std::string("a\0\1", 3),
                                 "ab", std::string("\xff\xff", 2)};
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::vector<item> entries;
    for (std::size_t j = 0; j <= i; ++j) entries.push_back(json(fmt::format("{}:{}", i, j)));
    REQUIRE(st.append(names[i], entries, 0).is_ok());
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(st.next_seq(names[i]).value() == i + 1);
    auto got = st.read(names[i], 0, 1000).value();
    REQUIRE(got.size() == i + 1);
    for (std::size_t j = 0; j <= i; ++j) CHECK(got[j].value == item(json(fmt::format("{}:{}", i, j))));
  }
}

TEST_CASE("streams: of appenders racing for one seq exactly one wins; the stream has no gaps") {
  testing::temp_dir d("state");
  auto db = must_open(options_for(d.path(), 2));
  streams st(*db);
  constexpr int threads = 6, rounds = 40;
  std::vector<std::vector<std::uint64_t>> won(threads);
  std::atomic<int> conflicts{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        // Each thread appends at the position it reads; retries on conflict.
        for (;;) {
          auto at = st.next_seq("s").value();
          auto r = st.append("s", std::vector<item>{json{{"t", t}, {"i", i}}}, at);
          if (r.is_ok()) {
            won[t].push_back(at);
            break;
          }
          REQUIRE(r.error().code() == status_code::conflict);
          ++conflicts;
        }
      }
    });
  for (auto& p : pool) p.join();
  auto all = st.read("s", 0, 1000).value();
  REQUIRE(all.size() == threads * rounds);
  std::map<std::uint64_t, int> owner;
  for (int t = 0; t < threads; ++t)
    for (auto seq : won[t]) CHECK(owner.emplace(seq, t).second);  // no seq won twice
  for (std::uint64_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq == i);
    CHECK(std::get<json>(all[i].value)["t"] == owner.at(i));
  }
  // Each thread's own entries appear in its order.
  std::vector<int> next(threads, 0);
  for (const auto& e : all) {
    const json& j = std::get<json>(e.value);
    int t = j["t"];
    CHECK(j["i"] == next[t]++);
  }
  MESSAGE(conflicts.load(), " conflicts");
}

TEST_CASE("streams: entries with a ttl expire on their own; next_seq never goes back") {
  testing::temp_dir d("state");
  auto o = options_for(d.path(), 1);
  auto now = std::make_shared<std::atomic<std::uint64_t>>(1'000'000'000'000);
  o.shard.clock = [now] { return now->load(); };
  auto db = must_open(o);
  streams st(*db);
  REQUIRE(st.append("e", std::vector<item>{json(0), json(1)}, 0, 10s).is_ok());
  REQUIRE(st.append("e", std::vector<item>{json(2)}, 2).is_ok());  // no ttl
  *now += std::chrono::nanoseconds(11s).count();
  auto left = st.read("e", 0, 10).value();
  REQUIRE(left.size() == 1);
  CHECK(left[0].seq == 2);
  CHECK(st.next_seq("e").value() == 3);
  CHECK(st.append("e", std::vector<item>{json(3)}, 3).value() == 3);
}
