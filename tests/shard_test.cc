// The shard without its actor: staging, group commit, visibility, CAS, batches,
// checkpoints, TTL and recovery, on fault_env (crashes, failed fsyncs) against
// a std::map model.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "core/fault_env.h"
#include "engine/keyspace.h"
#include "engine/shard.h"
#include "tests/support/manual_clock.h"
#include "tests/support/tree_model.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"
#include "wal/recovery.h"

using namespace magnetite;
using magnetite::testing::manual_clock;
using magnetite::testing::must;
using namespace std::chrono_literals;

namespace {

const std::string dir = "/db/shard-0";

shard_options small_options(const manual_clock& c) {
  shard_options o;
  o.clock = c.fn();
  o.chunking = {256, 64, 1024};
  o.cache_bytes = 1 << 20;
  return o;
}

std::unique_ptr<shard> must_open(env& e, const shard_options& o) { return must(shard::open(e, dir, o)); }

std::optional<std::string> get(shard& s, std::string_view k) { return must(s.get(k)); }

std::map<std::string, std::string> contents(const shard& s) {
  std::map<std::string, std::string> out;
  std::string bad;
  auto st = s.view()->scan(std::string(1, keyspace::data_tag), keyspace::data_end(),
                           [&](std::string_view k, std::string_view v) {
                             out[std::string(keyspace::user_key_of(k))] = std::string(v.substr(1));  // plain envelope
                             return true;
                           });
  REQUIRE(st.is_ok());
  return out;
}

}  // namespace

TEST_CASE("shard: staged writes are invisible until their group is durable; then they survive a power cut") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  REQUIRE(s->put("a", "1").is_ok());
  REQUIRE(s->put("b", "2").is_ok());
  CHECK(s->staged() == 2);
  CHECK_FALSE(get(*s, "a").has_value());  // not durable: not visible
  auto syncs = fe.stats().file_syncs;
  REQUIRE(s->commit_group().is_ok());
  CHECK(fe.stats().file_syncs == syncs + 1);  // one fsync for the group
  CHECK(get(*s, "a") == "1");
  CHECK(get(*s, "b") == "2");
  // Staged but never committed: may be lost, must not be half-applied.
  REQUIRE(s->put("c", "3").is_ok());
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, small_options(clock));
  CHECK(get(*s, "a") == "1");
  CHECK(get(*s, "b") == "2");
  CHECK_FALSE(get(*s, "c").has_value());
  CHECK(s->stats().replayed_records == 2);
}

TEST_CASE("shard: a group of many writes costs one fsync, and a CAS inside it fails alone") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  REQUIRE(s->put("k", "v0").is_ok());
  REQUIRE(s->commit_group().is_ok());
  auto syncs = fe.stats().file_syncs;
  for (int i = 0; i < 100; ++i) REQUIRE(s->put(fmt::format("w{:03}", i), "x").is_ok());
  REQUIRE(s->put("k", "v1").is_ok());
  // The CAS sees the staged v1, not the published v0.
  auto bad = must(s->cas("k", std::string_view("v0"), std::string_view("v2")));
  CHECK_FALSE(bad.swapped);
  CHECK(bad.current == "v1");
  auto good = must(s->cas("k", std::string_view("v1"), std::string_view("v3")));
  CHECK(good.swapped);
  auto create = must(s->cas("new", std::nullopt, std::string_view("n")));
  CHECK(create.swapped);
  auto no_delete = must(s->cas("absent", std::string_view("x"), std::nullopt));
  CHECK_FALSE(no_delete.swapped);
  CHECK_FALSE(no_delete.current.has_value());
  REQUIRE(s->commit_group().is_ok());
  CHECK(fe.stats().file_syncs == syncs + 1);
  CHECK(get(*s, "k") == "v3");
  CHECK(get(*s, "new") == "n");
  CHECK(get(*s, "w099") == "x");
}

TEST_CASE("shard: bad input is invalid_argument and stages nothing") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  CHECK(s->put("", "v").code() == status_code::invalid_argument);
  CHECK(s->put(std::string(limits::max_user_key_bytes + 1, 'k'), "v").code() == status_code::invalid_argument);
  CHECK(s->put("k", std::string(limits::max_user_value_bytes + 1, 'v')).code() == status_code::invalid_argument);
  CHECK(s->put("k", "v", 0ns).code() == status_code::invalid_argument);
  CHECK(s->put("k", "v", -5s).code() == status_code::invalid_argument);
  CHECK(s->batch({}).code() == status_code::invalid_argument);
  std::vector<batch_write> half_bad = {{"ok", std::string("v"), {}}, {"", std::string("v"), {}}};
  CHECK(s->batch(half_bad).code() == status_code::invalid_argument);
  CHECK(s->cas("", std::nullopt, std::string_view("v")).error().code() == status_code::invalid_argument);
  CHECK(s->cas("k", std::nullopt, std::nullopt, 5s).error().code() == status_code::invalid_argument);
  std::vector<batch_write> del_with_ttl = {{"k", std::nullopt, 5s}};
  CHECK(s->batch(del_with_ttl).code() == status_code::invalid_argument);
  CHECK(s->staged() == 0);
  CHECK(s->failure().is_ok());
  // The largest legal key and value go through, TTL envelope and keyspace byte included.
  std::string big_key(limits::max_user_key_bytes, 'k');
  REQUIRE(s->put(big_key, std::string(limits::max_user_value_bytes, 'v'), 1h).is_ok());
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->checkpoint().is_ok());
  CHECK(get(*s, big_key)->size() == limits::max_user_value_bytes);
}

TEST_CASE("shard: a failed fsync fails the group and stops the shard; reopening replays what was durable") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  REQUIRE(s->put("durable", "1").is_ok());
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->put("doomed", "2").is_ok());
  fe.fail_sync(1);
  status st = s->commit_group();
  CHECK_FALSE(st.is_ok());
  CHECK_FALSE(get(*s, "doomed").has_value());  // never published
  // Fail-stop: no retry, no more writes.
  CHECK(s->commit_group().code() == status_code::failed);
  CHECK(s->put("after", "3").code() == status_code::failed);
  CHECK(s->checkpoint().error().code() == status_code::failed);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, small_options(clock));
  CHECK(get(*s, "durable") == "1");
  CHECK_FALSE(get(*s, "after").has_value());
  REQUIRE(s->put("again", "4").is_ok());
  REQUIRE(s->commit_group().is_ok());
  CHECK(get(*s, "again") == "4");
}

TEST_CASE("shard: a checkpoint's root is the tree of the content, whatever the history") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must_open(fe, o);
  std::mt19937_64 rng(11);
  std::map<std::string, std::string> model;
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 40; ++i) {
      std::string k = fmt::format("key{:04}", rng() % 500);
      if (rng() % 4 == 0) {
        REQUIRE(s->del(k).is_ok());
        model.erase(k);
      } else {
        std::string v = fmt::format("v{}", rng());
        REQUIRE(s->put(k, v).is_ok());
        model[k] = v;
      }
    }
    REQUIRE(s->commit_group().is_ok());
    if (rng() % 5 == 0) REQUIRE(s->checkpoint().is_ok());
    CHECK(contents(*s) == model);
  }
  hash128 root = must(s->checkpoint());
  // The same content built in one go, in a fresh store, has the same root.
  tree::memory_nodes mem;
  std::vector<tree::entry> es;
  for (auto& [k, v] : model) es.push_back({keyspace::data_key(k), std::string(1, '\0') + v});
  CHECK(must(tree::prolly_tree(mem, o.chunking).build(es)) == root);
  CHECK_FALSE(s->view()->holds_writes());
}

TEST_CASE("shard: random writes, groups, checkpoints and crashes never lose an acknowledged write") {
  for (auto mode : {fault_env::unsynced::lose, fault_env::unsynced::random, fault_env::unsynced::reorder}) {
    CAPTURE(static_cast<int>(mode));
    fault_env fe;
    manual_clock clock;
    auto o = small_options(clock);
    auto s = must_open(fe, o);
    std::mt19937_64 rng(17 + static_cast<int>(mode));
    std::map<std::string, std::optional<std::string>> acked;  // what commit_group acknowledged
    std::map<std::string, std::optional<std::string>> staged;
    for (int step = 0; step < 600; ++step) {
      int op = static_cast<int>(rng() % 20);
      std::string k = fmt::format("k{:03}", rng() % 150);
      if (op < 10) {
        std::string v(rng() % 300, static_cast<char>('a' + rng() % 26));
        REQUIRE(s->put(k, v).is_ok());
        staged[k] = v;
      } else if (op < 13) {
        REQUIRE(s->del(k).is_ok());
        staged[k] = std::nullopt;
      } else if (op < 17) {
        REQUIRE(s->commit_group().is_ok());
        for (auto& [sk, sv] : staged) acked[sk] = sv;
        staged.clear();
      } else if (op < 19) {
        REQUIRE(s->checkpoint().is_ok());  // commits what is staged first
        for (auto& [sk, sv] : staged) acked[sk] = sv;
        staged.clear();
      } else {
        s.reset();
        fe.crash(mode, rng());
        s = must_open(fe, o);
        staged.clear();
        for (auto& [ak, av] : acked) REQUIRE(get(*s, ak) == av);
      }
    }
  }
}

TEST_CASE("shard: TTL values vanish at their deadline, are swept through the log, and the index survives reopening") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must_open(fe, o);
  REQUIRE(s->put("short", "s", 10s).is_ok());
  REQUIRE(s->put("long", "l", 100s).is_ok());
  REQUIRE(s->put("forever", "f").is_ok());
  REQUIRE(s->commit_group().is_ok());
  std::uint64_t t0 = clock.fn()();
  CHECK(s->next_deadline() == t0 + 10'000'000'000ull);
  // The absolute deadline is in the stored bytes.
  std::string stored;
  REQUIRE(must(s->view()->find(keyspace::data_key("short"), stored)));
  CHECK(must(ttl::unwrap(stored)).expires_at_ns == t0 + 10'000'000'000ull);
  clock.advance(10s);
  CHECK_FALSE(get(*s, "short").has_value());  // expired: never read, swept or not
  CHECK(get(*s, "long") == "l");
  // CAS treats an expired value as absent.
  CHECK_FALSE(must(s->cas("short", std::string_view("s"), std::string_view("x"))).swapped);
  CHECK(must(s->stage_expired(100)) == 1);
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->next_deadline() == t0 + 100'000'000'000ull);
  // Overwriting without TTL drops the deadline; with a new TTL moves it.
  REQUIRE(s->put("long", "l2", 50s).is_ok());
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->next_deadline() == t0 + 10'000'000'000ull + 50'000'000'000ull);
  REQUIRE(s->checkpoint().is_ok());
  REQUIRE(s->put("late", "x", 500s).is_ok());
  REQUIRE(s->commit_group().is_ok());
  // Reopen: the index comes back from the tree's expiry entries plus the replay.
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, o);
  CHECK(s->next_deadline() == t0 + 60'000'000'000ull);
  clock.advance(50s);
  CHECK(must(s->stage_expired(100)) == 1);
  REQUIRE(s->commit_group().is_ok());
  CHECK_FALSE(get(*s, "long").has_value());
  CHECK(get(*s, "forever") == "f");
  CHECK(s->next_deadline() == t0 + 10'000'000'000ull + 500'000'000'000ull);
  // After a checkpoint no expiry entry is left for swept or overwritten keys.
  REQUIRE(s->checkpoint().is_ok());
  std::vector<std::string> expiry_keys;
  REQUIRE(s->view()
              ->scan(std::string(1, keyspace::expiry_tag), keyspace::expiry_end(),
                     [&](std::string_view k, std::string_view) {
                       std::uint64_t d;
                       std::string_view uk;
                       REQUIRE(keyspace::parse_expiry_key(k, d, uk));
                       expiry_keys.emplace_back(uk);
                       return true;
                     })
              .is_ok());
  CHECK(expiry_keys == std::vector<std::string>{"late"});
}

TEST_CASE("shard: scans merge the layers over the tree, newest first, deletions hidden") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    std::string k = fmt::format("s{:03}", i);
    REQUIRE(s->put(k, "tree").is_ok());
    model[k] = "tree";
  }
  REQUIRE(s->checkpoint().is_ok());
  // Several groups of different sizes, each published at its own sequence.
  for (int g = 0; g < 12; ++g) {
    for (int i = 0; i < 1 + g * 3; ++i) {
      std::string k = fmt::format("s{:03}", rng() % 400);
      if (rng() % 3 == 0) {
        REQUIRE(s->del(k).is_ok());
        model.erase(k);
      } else {
        REQUIRE(s->put(k, fmt::format("g{}", g)).is_ok());
        model[k] = fmt::format("g{}", g);
      }
    }
    REQUIRE(s->commit_group().is_ok());
  }
  REQUIRE(s->view()->memtables().size() == 1);  // one memtable, inserted into by every group
  CHECK(s->view()->memtables().front().sequence == s->view()->memtables().front().table->latest());
  CHECK(contents(*s) == model);
  // A bounded scan from the middle, stopped early.
  std::vector<std::string> got;
  REQUIRE(s->view()
              ->scan(keyspace::data_key("s150"), keyspace::data_key("s250"),
                     [&](std::string_view k, std::string_view) {
                       got.emplace_back(keyspace::user_key_of(k));
                       return got.size() < 20;
                     })
              .is_ok());
  std::vector<std::string> want;
  for (auto it = model.lower_bound("s150"); it != model.end() && it->first < "s250" && want.size() < 20; ++it)
    want.push_back(it->first);
  CHECK(got == want);
}

// A rewrite adds a node before the older versions of its key, so what makes
// a checkpoint due is every byte written since the last one: one key
// rewritten over and over fills the memtable as surely as new keys do, and
// its memory stays near checkpoint_bytes.
TEST_CASE("shard: the memtable counts every byte written since the checkpoint, rewrites of one key included") {
  fault_env fe;
  manual_clock clock;
  shard_options o = small_options(clock);
  o.checkpoint_bytes = 64 << 10;
  auto s = must_open(fe, o);
  const std::string value(1000, 'v');
  int writes = 0;
  while (!s->checkpoint_due()) {
    REQUIRE(s->put("hot", value + std::to_string(writes++)).is_ok());
    REQUIRE(s->commit_group().is_ok());
    REQUIRE(writes < 1000);
  }
  // Due after about checkpoint_bytes / 1 006 bytes (key and envelope) writes,
  // not never.
  CHECK(writes >= 55);
  CHECK(writes <= 70);
  REQUIRE(s->view()->memtables().size() == 1);
  CHECK(s->view()->memtables().front().table->entries() == static_cast<std::uint64_t>(writes));  // every version
  CHECK(get(*s, "hot") == value + std::to_string(writes - 1));
  must(s->checkpoint());
  CHECK_FALSE(s->checkpoint_due());
  CHECK_FALSE(s->view()->holds_writes());
  CHECK(get(*s, "hot") == value + std::to_string(writes - 1));
}

namespace {
struct sorted_writes {
  std::vector<std::string> keys, values;
};
// shard::ingest's flat form of the writes.
struct flat_writes {
  std::string bytes;
  std::vector<std::uint32_t> sizes;
};
flat_writes flatten(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  flat_writes f;
  for (std::size_t i = 0; i < std::max(keys.size(), values.size()); ++i) {
    if (i < keys.size()) {
      f.bytes += keys[i];
      f.sizes.push_back(static_cast<std::uint32_t>(keys[i].size()));
    }
    if (i < values.size()) {
      f.bytes += values[i];
      f.sizes.push_back(static_cast<std::uint32_t>(values[i].size()));
    }
  }
  return f;
}
result<hash128> ingest(shard& s, const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  auto f = flatten(keys, values);
  return s.ingest(f.bytes, f.sizes);
}
sorted_writes ingest_run(int from, int to, std::string_view tag) {
  sorted_writes w;
  for (int i = from; i < to; ++i) {
    w.keys.push_back(fmt::format("k{:05}", i));
    w.values.push_back(fmt::format("{}-{}", tag, i));
  }
  return w;
}
}  // namespace

TEST_CASE("shard: ingest writes sorted keys over the layers, drops their TTLs, and survives a power cut") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  std::map<std::string, std::string> m;
  // Older writes: some in the tree, some in the layers, one staged, one with a TTL.
  for (int i = 0; i < 3000; i += 3) REQUIRE(s->put(fmt::format("k{:05}", i), "tree").is_ok());
  must(s->checkpoint());
  for (int i = 1; i < 3000; i += 7) REQUIRE(s->put(fmt::format("k{:05}", i), "layer").is_ok());
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->put("k00002", "staged").is_ok());
  REQUIRE(s->put("k00005", "expiring", 10s).is_ok());
  REQUIRE(s->put("z", "untouched").is_ok());
  REQUIRE(s->commit_group().is_ok());
  m = contents(*s);
  auto w = ingest_run(0, 3000, "ingested");
  for (std::size_t i = 0; i < w.keys.size(); ++i) m[w.keys[i]] = w.values[i];
  auto fsyncs = fe.stats().file_syncs;
  auto root = must(ingest(*s, w.keys, w.values));
  // Two checkpoints' syncs, whatever the number of writes: the memtable's, then
  // the ingest's (each: the pack, the old log segment, the new one).
  CHECK(fe.stats().file_syncs - fsyncs <= 6);
  CHECK(s->view()->root() == root);
  CHECK_FALSE(s->view()->holds_writes());
  CHECK(s->stats().ingested == 3000);
  CHECK(contents(*s) == m);
  // The TTL went with the value it was on.
  clock.advance(20s);
  CHECK(must(s->stage_expired(100)) == 0);
  CHECK(s->next_deadline() == std::nullopt);
  CHECK(get(*s, "k00005") == "ingested-5");
  // A second ingest after the first, then a power cut: both are there.
  auto w2 = ingest_run(3000, 4000, "second");
  fsyncs = fe.stats().file_syncs;
  must(ingest(*s, w2.keys, w2.values));
  CHECK(fe.stats().file_syncs - fsyncs <= 3);  // no layers: one checkpoint's
  for (std::size_t i = 0; i < w2.keys.size(); ++i) m[w2.keys[i]] = w2.values[i];
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, small_options(clock));
  CHECK(contents(*s) == m);
  CHECK(s->stats().replayed_records == 0);
  auto report = must(s->verify({}));
  CHECK(report.problems.empty());
}

TEST_CASE("shard: ingest refuses bad input before anything changes") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  REQUIRE(s->put("a", "1").is_ok());
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->put("b", "staged").is_ok());
  auto root = s->view()->root();
  auto before = contents(*s);
  const std::string big(limits::max_user_value_bytes + 1, 'v');
  struct bad_case {
    const char* what;
    std::vector<std::string> keys, values;
  };
  std::vector<bad_case> cases = {
      {"unsorted", {"b", "a"}, {"1", "2"}},
      {"duplicate", {"a", "a"}, {"1", "2"}},
      {"empty key", {"", "a"}, {"1", "2"}},
      {"oversized key", {std::string(limits::max_user_key_bytes + 1, 'k')}, {"1"}},
      {"oversized value", {"a"}, {big}},
      {"a key without its value", {"a", "b"}, {"1"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    auto r = ingest(*s, c.keys, c.values);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::invalid_argument);
    CHECK(s->failure().is_ok());
    CHECK(s->view()->root() == root);
    CHECK(s->staged() == 1);  // not even the staged write was committed
    CHECK(contents(*s) == before);
  }
  auto r = s->ingest("abc", std::vector<std::uint32_t>{1, 1});  // sizes short of the bytes
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::invalid_argument);
  CHECK(s->view()->root() == root);
}

// The commit marker is the ingest's commit point: whichever sync fails, and
// whatever of the unsynced bytes a crash then keeps, a reopened shard holds
// the whole ingest or none of it, and everything acknowledged before it.
TEST_CASE("shard: a failed fsync or a crash during ingest leaves all of it or none") {
  const auto w = ingest_run(0, 2000, "ingested");
  for (std::uint64_t nth = 1; nth <= 6; ++nth) {
    for (auto mode : {fault_env::unsynced::lose, fault_env::unsynced::random, fault_env::unsynced::reorder}) {
      CAPTURE(nth);
      CAPTURE(static_cast<int>(mode));
      fault_env fe;
      manual_clock clock;
      auto s = must_open(fe, small_options(clock));
      for (int i = 0; i < 2000; i += 2) REQUIRE(s->put(fmt::format("k{:05}", i), "old").is_ok());
      REQUIRE(s->commit_group().is_ok());
      const auto old = contents(*s);
      auto fresh = old;
      for (std::size_t i = 0; i < w.keys.size(); ++i) fresh[w.keys[i]] = w.values[i];
      fe.fail_sync(nth);
      auto r = ingest(*s, w.keys, w.values);
      if (r.is_ok())
        CHECK(contents(*s) == fresh);
      else
        CHECK_FALSE(s->failure().is_ok());  // fail-stop: no retrying a failed fsync
      s.reset();
      fe.clear_faults();
      fe.crash(mode, nth);
      s = must_open(fe, small_options(clock));
      auto got = contents(*s);
      if (r.is_ok())
        CHECK(got == fresh);
      else
        CHECK((got == old || got == fresh));
    }
  }
}

TEST_CASE("shard: usage counts keys through layers and checkpoints; stats count groups by size") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  std::mt19937_64 rng(5);
  std::map<std::string, std::string> m;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 300; ++i) {
      std::string k = fmt::format("k{:04}", rng() % 800);
      if (rng() % 4 == 0) {
        REQUIRE(s->del(k).is_ok());
        m.erase(k);
      } else {
        REQUIRE(s->put(k, "v").is_ok());
        m[k] = std::string("v");  // not = "v": GCC 12 warns falsely (-Wrestrict, its bug 105329)
      }
      if (rng() % 16 == 0) REQUIRE(s->commit_group().is_ok());
    }
    REQUIRE(s->commit_group().is_ok());
    if (round % 2) must(s->checkpoint());
    auto u = must(s->usage());
    CHECK(u.keys == m.size());
    CHECK(u.root == s->view()->root().to_hex());
    CHECK(u.wal_bytes > 0);
    if (round >= 1) CHECK(u.node_bytes > 0);
  }

  auto before = s->stats();
  for (int size : {1, 3, 8, 2048, 5000}) {
    for (int i = 0; i < size; ++i) REQUIRE(s->put(fmt::format("g{}-{}", size, i), "x").is_ok());
    REQUIRE(s->commit_group().is_ok());
  }
  auto after = s->stats();
  CHECK(after.acknowledged - before.acknowledged == 1 + 3 + 8 + 2048 + 5000);
  CHECK(after.group_sizes[0] - before.group_sizes[0] == 1);
  CHECK(after.group_sizes[1] - before.group_sizes[1] == 1);
  CHECK(after.group_sizes[3] - before.group_sizes[3] == 1);
  CHECK(after.group_sizes[group_size_buckets - 1] - before.group_sizes[group_size_buckets - 1] == 2);  // 2048, 5000
  std::uint64_t groups = 0;
  for (auto g : after.group_sizes) groups += g;
  CHECK(groups == after.groups);
}

TEST_CASE("shard: verify passes a sound shard and finds an expiry entry the tree lost") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  {
    auto s = must_open(fe, o);
    for (int i = 0; i < 200; ++i)
      REQUIRE(s->put(fmt::format("k{:03}", i), "v", i % 3 ? std::nullopt : std::optional(std::chrono::nanoseconds(1h)))
                  .is_ok());
    REQUIRE(s->commit_group().is_ok());
    auto ok = must(s->verify({}));
    CHECK(ok.problems.empty());
    CHECK(ok.expiring_keys == 67);
    CHECK(ok.log_frames > 0);
    CHECK(ok.roots == 1);
    must(s->checkpoint());
    REQUIRE(s->put("later", "v").is_ok());  // staged: verify commits it first
    auto ok2 = must(s->verify({}));
    CHECK(ok2.problems.empty());
    CHECK(ok2.nodes > 1);
    CHECK(must(s->get("later")) == std::optional<std::string>("v"));
    must(s->checkpoint());
  }
  // Take the expiry entry of k000 out of the committed tree behind the shard's back.
  auto log = must(wal::recover(fe, dir + "/wal"));
  REQUIRE(log.last_commit);
  {
    auto store = must(tree::node_store::open(fe, dir + "/nodes", {}, log.last_commit->node_store_length));
    tree::prolly_tree t(*store, o.chunking);
    std::string stored;
    REQUIRE(must(t.get(log.last_commit->root, keyspace::data_key("k000"), stored)));
    auto deadline = must(ttl::unwrap(stored)).expires_at_ns;
    REQUIRE(deadline);
    std::vector<tree::edit> edits{{keyspace::expiry_key(*deadline, "k000"), std::nullopt}};
    hash128 root = must(t.apply(log.last_commit->root, edits));
    std::uint64_t position = must(store->flush());
    auto w = must(wal::log_writer::open(fe, dir + "/wal", {}, log));
    REQUIRE(w->commit({root, position}).is_ok());
  }
  auto s = must_open(fe, o);
  auto bad = must(s->verify({}));
  // No entry for its deadline, so (rebuilt from the entries) no index entry
  // either, and the index counts one key fewer than the data.
  REQUIRE(bad.problems.size() == 3);
  CHECK(bad.problems[0].find("key \"k000\" expires at") != std::string::npos);
  CHECK(bad.problems[0].find("no expiry entry") != std::string::npos);
  CHECK(bad.problems[1].find("the expiry index does not say so") != std::string::npos);
  CHECK(bad.problems[2].find("the expiry index holds 66 keys, the data 67") != std::string::npos);
}

TEST_CASE("shard: gc keeps the current and the retained roots and drops other checkpoints' nodes") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  std::vector<hash128> roots;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 300; ++i) REQUIRE(s->put(fmt::format("k{:04}", i), fmt::format("round {}", round)).is_ok());
    roots.push_back(must(s->checkpoint()));
  }
  auto before = must(s->usage()).node_bytes;
  std::vector<hash128> retained{roots[1]};
  auto r = must(s->gc(retained));
  CHECK(r.bytes_reclaimed > 0);
  CHECK(must(s->usage()).node_bytes < before);
  tree::node_store& store = *s->view()->store();
  CHECK(store.contains(roots[3]));
  CHECK(store.contains(roots[1]));
  CHECK_FALSE(store.contains(roots[0]));
  CHECK_FALSE(store.contains(roots[2]));
  auto v = must(s->verify(retained));
  CHECK(v.problems.empty());
  CHECK(v.roots == 2);
  CHECK(must(s->get("k0007")) == std::optional<std::string>("round 3"));
  // A retained root the store does not hold (dropped before) is skipped, not an error.
  std::vector<hash128> gone{roots[0]};
  CHECK(s->gc(gone).is_ok());
  CHECK(must(s->verify(gone)).roots == 1);
}

TEST_CASE("shard: deletions by the TTL timer are not counted as acknowledged writes") {
  fault_env fe;
  manual_clock clock;
  auto s = must_open(fe, small_options(clock));
  for (int i = 0; i < 5; ++i) REQUIRE(s->put(fmt::format("t{}", i), "v", std::chrono::nanoseconds(1s)).is_ok());
  REQUIRE(s->commit_group().is_ok());
  auto before = s->stats();
  CHECK(before.acknowledged == 5);
  clock.advance(2s);
  CHECK(must(s->stage_expired(100)) == 5);
  REQUIRE(s->put("mixed-in", "v").is_ok());  // one user write in the timer's group
  REQUIRE(s->commit_group().is_ok());
  auto after = s->stats();
  CHECK(after.expired - before.expired == 5);
  CHECK(after.acknowledged - before.acknowledged == 1);
  CHECK(after.group_sizes[0] - before.group_sizes[0] == 1);  // a group of one acknowledged write
  CHECK(must(s->stage_expired(100)) == 0);
}

TEST_CASE("read view: scan_reverse gives scan's keys in descending order over tree and layers, for any bounds") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must_open(fe, o);
  std::mt19937_64 rng(5);
  std::map<std::string, std::string> model;
  auto key = [&] { return fmt::format("k{:03}", rng() % 300); };
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 120; ++i) {
      std::string k = key();
      if (rng() % 4 == 0) {
        REQUIRE(s->del(k).is_ok());
        model.erase(k);
      } else {
        std::string v = fmt::format("{}-{}", k, round);
        REQUIRE(s->put(k, v).is_ok());
        model[k] = v;
      }
      if (rng() % 30 == 0) REQUIRE(s->commit_group().is_ok());  // several layers
    }
    REQUIRE(s->commit_group().is_ok());
    if (round % 2 == 1) REQUIRE(s->checkpoint().is_ok());  // and a tree under them
    for (int q = 0; q < 40; ++q) {
      std::string from = q % 5 == 0 ? std::string(1, keyspace::data_tag) : keyspace::data_key(key());
      std::string to = q % 7 == 0 ? std::string() : keyspace::data_key(key());
      std::vector<std::string> forward, backward;
      REQUIRE(s->view()
                  ->scan(from, to,
                         [&](std::string_view k, std::string_view) {
                           forward.emplace_back(k);
                           return true;
                         })
                  .is_ok());
      std::size_t stop_after = q % 3 == 0 ? 5 : SIZE_MAX;
      REQUIRE(s->view()
                  ->scan_reverse(from, to,
                                 [&](std::string_view k, std::string_view v) {
                                   CHECK(std::string(v.substr(1)) == model.at(std::string(keyspace::user_key_of(k))));
                                   backward.emplace_back(k);
                                   return backward.size() < stop_after;
                                 })
                  .is_ok());
      std::vector<std::string> want;
      for (auto it = model.rbegin(); it != model.rend(); ++it) {
        std::string tk = keyspace::data_key(it->first);
        if (tk >= from && (to.empty() || tk < to)) want.push_back(tk);
      }
      std::vector<std::string> reversed(forward.rbegin(), forward.rend());
      if (to.empty() || from < to) CHECK(reversed == want);
      if (want.size() > stop_after) want.resize(stop_after);
      CHECK(backward == want);
    }
  }
}
