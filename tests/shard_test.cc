// The shard without its actor: staging, group commit, visibility, CAS, batches,
// checkpoints, TTL and recovery, on fault_env (crashes, failed fsyncs) against
// a std::map model.
#include <doctest/doctest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/fault_env.h"
#include "engine/keyspace.h"
#include "engine/shard.h"
#include "tests/support/crashable_env.h"
#include "tests/support/manual_clock.h"
#include "tests/support/tree_model.h"
#include "tests/support/view_contents.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"
#include "wal/recovery.h"

using namespace magnetite;
using magnetite::testing::kv_map;
using magnetite::testing::manual_clock;
using magnetite::testing::must;
using magnetite::testing::read_all;
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

// ---- background checkpoints (begin_checkpoint / finish_checkpoint / relieve_memory) ----

namespace {

// What one log frame changes, in order: a key and its new value (nullopt: deleted).
using frame = std::vector<std::pair<std::string, std::optional<std::string>>>;

void apply_frame(kv_map& m, const frame& f) {
  for (const auto& [k, v] : f) {
    if (v)
      m[k] = *v;
    else
      m.erase(k);
  }
}

// A random workload of puts, deletes, batches and CASes against a model: the
// writes commit_group acknowledged, and the frames staged since, in log order.
struct workload {
  explicit workload(std::uint64_t seed, int keys = 300) : rng(seed), keys(keys) {}
  std::mt19937_64 rng;
  int keys;
  std::uint64_t made = 0;
  kv_map acked;
  std::vector<frame> unacked;
  kv_map latest;  // acked with unacked applied: what the next write sees

  std::string key() { return fmt::format("k{:04}", rng() % keys); }
  std::string value() {
    ++made;
    return fmt::format("v{}-", made) + std::string(rng() % 160, static_cast<char>('a' + made % 26));
  }
  std::optional<std::string> latest_of(const std::string& k) const {
    auto it = latest.find(k);
    return it == latest.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void staged(frame f) {
    apply_frame(latest, f);
    unacked.push_back(std::move(f));
  }
  // Stages one random write; false if the shard refused it (it stopped).
  bool stage_one(shard& s) {
    int op = static_cast<int>(rng() % 10);
    std::string k = key();
    if (op < 5) {
      std::string v = value();
      if (!s.put(k, v).is_ok()) return false;
      staged({{k, v}});
    } else if (op < 7) {
      if (!s.del(k).is_ok()) return false;
      staged({{k, std::nullopt}});
    } else if (op < 9) {
      std::vector<batch_write> ws;
      frame f;
      for (int i = 0, n = 1 + static_cast<int>(rng() % 6); i < n; ++i) {
        std::string bk = i == 0 ? k : key();
        std::optional<std::string> v;
        if (rng() % 4 != 0) v = value();
        ws.push_back({bk, v, std::nullopt});
        f.emplace_back(bk, v);
      }
      if (!s.batch(ws).is_ok()) return false;
      staged(std::move(f));
    } else {
      auto current = latest_of(k);
      std::optional<std::string> expected;
      switch (rng() % 4) {
        case 0:
        case 1:
          expected = current;
          break;
        case 2:
          expected = std::string("not-this");
          break;
        default:
          break;  // absent
      }
      std::optional<std::string> desired;
      if (rng() % 5 != 0) desired = value();
      auto r = s.cas(k, expected ? std::optional<std::string_view>(*expected) : std::nullopt,
                     desired ? std::optional<std::string_view>(*desired) : std::nullopt);
      if (!r) return false;
      bool should = expected == current;
      CHECK(r->swapped == should);
      if (!r->swapped) CHECK(r->current == current);
      if (r->swapped) staged({{k, desired}});
    }
    return true;
  }
  bool stage(shard& s, int n) {
    for (int i = 0; i < n; ++i)
      if (!stage_one(s)) return false;
    return true;
  }
  // commit_group() returned ok: the staged frames are acknowledged.
  void acknowledge() {
    for (const auto& f : unacked) apply_frame(acked, f);
    unacked.clear();
    latest = acked;
  }
  // A reopened shard holds `got`: what it now has staged is nothing.
  void reset_to(const kv_map& got) {
    acked = got;
    latest = got;
    unacked.clear();
  }
};

// How many of the unacknowledged frames (a prefix, in log order) a reopened
// shard holding `got` kept on top of every acknowledged write; nullopt: it is
// no such state (an acknowledged write lost, a frame torn or out of order).
std::optional<std::size_t> acked_prefix(const kv_map& got, kv_map m, const std::vector<frame>& unacked) {
  if (got == m) return 0;
  for (std::size_t i = 0; i < unacked.size(); ++i) {
    apply_frame(m, unacked[i]);
    if (got == m) return i + 1;
  }
  return std::nullopt;
}

// Where `got` and `want` differ, a few keys of it, for a failure message.
std::string difference(const kv_map& got, const kv_map& want) {
  std::string out;
  int shown = 0;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end())
      out += fmt::format(" lost {}", k);
    else if (it->second.substr(0, 12) != v.substr(0, 12))
      out += fmt::format(" {}={}.. not {}..", k, it->second.substr(0, 12), v.substr(0, 12));
    else if (it->second != v)
      out += fmt::format(" {} differs", k);
    else
      continue;
    if (++shown == 8) return out + " ...";
  }
  for (const auto& [k, v] : got)
    if (!want.count(k)) {
      out += fmt::format(" extra {}={}..", k, v.substr(0, 12));
      if (++shown == 8) return out + " ...";
    }
  return out;
}

void check_holds_acked(const kv_map& got, const workload& w) {
  auto kept = acked_prefix(got, w.acked, w.unacked);
  CHECK_MESSAGE(kept.has_value(), "reopened shard vs acknowledged:", difference(got, w.acked), " (", w.unacked.size(),
                " unacknowledged frames)");
}

// Set by a checkpoint's `done` (on its thread); waited for without sleeping.
struct done_flag {
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(false);
  std::function<void()> fn(std::function<void()> also = {}) const {
    return [f = flag, also = std::move(also)] {
      f->store(true);
      f->notify_all();
      if (also) also();
    };
  }
  bool is_set() const { return flag->load(); }
  void wait() const { flag->wait(false); }
};

// An env over another that can hold a background checkpoint's thread: once
// armed, the nth append, write_at or sync of a file whose path contains
// `match` waits at a gate until open_gate(). So a test knows for certain that
// the checkpoint's work has not ended.
class gated_env final : public env {
  struct gate {
    std::mutex mu;
    std::condition_variable cv;
    std::string match;
    int countdown = 0;
    bool armed = false, held = false, open = false, finished = false;
    void pass(const std::string& path) {
      std::unique_lock lk(mu);
      if (!armed || path.find(match) == std::string::npos || --countdown > 0) return;
      armed = false;
      held = true;
      cv.notify_all();
      cv.wait(lk, [&] { return open; });
    }
  };
  class gated_file final : public file {
   public:
    gated_file(std::unique_ptr<file> f, std::string path, std::shared_ptr<gate> g)
        : f_(std::move(f)), path_(std::move(path)), g_(std::move(g)) {}
    status append(std::string_view data) override {
      g_->pass(path_);
      return f_->append(data);
    }
    status write_at(std::uint64_t offset, std::string_view data) override {
      g_->pass(path_);
      return f_->write_at(offset, data);
    }
    result<std::size_t> read_at(std::uint64_t offset, std::size_t n, char* scratch) override {
      return f_->read_at(offset, n, scratch);
    }
    status sync() override {
      g_->pass(path_);
      return f_->sync();
    }
    status truncate(std::uint64_t size) override { return f_->truncate(size); }
    status preallocate(std::uint64_t size) override { return f_->preallocate(size); }
    result<std::uint64_t> size() override { return f_->size(); }

   private:
    std::unique_ptr<file> f_;
    std::string path_;
    std::shared_ptr<gate> g_;
  };

 public:
  explicit gated_env(env& base) : base_(base) {}
  void arm(std::string match, int nth) {
    std::lock_guard lk(g_->mu);
    g_->match = std::move(match);
    g_->countdown = nth;
    g_->armed = true;
    g_->held = g_->open = g_->finished = false;
  }
  // Until an operation waits at the gate (true) or finished() is called (false).
  bool wait_held() {
    std::unique_lock lk(g_->mu);
    g_->cv.wait(lk, [&] { return g_->held || g_->finished; });
    return g_->held;
  }
  // The checkpoint it was armed for ended (its `done`) without reaching the gate.
  void finished() {
    std::lock_guard lk(g_->mu);
    g_->finished = true;
    g_->cv.notify_all();
  }
  void open_gate() {
    std::lock_guard lk(g_->mu);
    g_->open = true;
    g_->armed = false;
    g_->cv.notify_all();
  }

  result<std::unique_ptr<file>> open(const std::string& path, open_mode mode) override {
    auto f = base_.open(path, mode);
    if (!f) return f.error();
    return std::unique_ptr<file>(new gated_file(std::move(*f), path, g_));
  }
  status create_dir(const std::string& path) override { return base_.create_dir(path); }
  status sync_dir(const std::string& path) override { return base_.sync_dir(path); }
  status rename(const std::string& from, const std::string& to) override { return base_.rename(from, to); }
  status remove(const std::string& path) override { return base_.remove(path); }
  result<std::vector<std::string>> list(const std::string& d) override { return base_.list(d); }
  result<bool> exists(const std::string& path) override { return base_.exists(path); }
  result<bool> is_directory(const std::string& path) override { return base_.is_directory(path); }
  result<std::unique_ptr<file_lock>> lock(const std::string& path) override { return base_.lock(path); }

 private:
  env& base_;
  std::shared_ptr<gate> g_ = std::make_shared<gate>();
};

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Linux: thread `tid` of this process sleeps in the kernel (state S), as a
// thread blocked joining another does.
bool thread_sleeps(pid_t tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/stat", tid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = stat.rfind(')');
  return at != std::string::npos && at + 2 < stat.size() && stat[at + 2] == 'S';
}

// Opens the gate once the calling thread has called go() and then fallen
// asleep (waiting for the checkpoint the gate holds): so the call it makes
// after go() certainly found the checkpoint's work not over.
class gate_opener {
 public:
  explicit gate_opener(gated_env& ge)
      : owner_(this_thread_id()), t_([this, &ge] {
          go_.wait(false);
          while (!thread_sleeps(owner_)) std::this_thread::yield();
          ge.open_gate();
        }) {}
  ~gate_opener() { join(); }
  void go() {
    go_.store(true);
    go_.notify_all();
  }
  void join() {
    if (t_.joinable()) {
      go();
      t_.join();
    }
  }

 private:
  pid_t owner_;
  std::atomic<bool> go_{false};
  std::thread t_;
};

// Groups of random writes, each acknowledged, until the active memtable is due.
void fill_until_due(shard& s, workload& w) {
  for (int g = 0; !s.checkpoint_due(); ++g) {
    REQUIRE(g < 10000);
    REQUIRE(w.stage(s, 1 + static_cast<int>(w.rng() % 8)));
    REQUIRE(s.commit_group().is_ok());
    w.acknowledge();
  }
}

}  // namespace

// Random writes with a small memtable, a background checkpoint begun whenever
// one is due: after every group the shard reads as the model of acknowledged
// writes, and a view taken while a checkpoint runs (reading the frozen
// memtable beside the active one) reads the same before and after that
// checkpoint ends, gc included. The tree it leaves is the tree of the content.
TEST_CASE("shard: background checkpoints under random writes read as the model; held views keep their snapshot") {
  for (std::uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    CAPTURE(seed);
    fault_env fe;
    manual_clock clock;
    auto o = small_options(clock);
    o.checkpoint_bytes = std::size_t{16} << (10 + seed % 3);  // 32, 64, 16 KiB
    auto s = must_open(fe, o);
    workload w(seed);
    struct held_view {
      std::shared_ptr<const read_view> view;
      kv_map snapshot;
    };
    std::vector<held_view> held;
    auto check_held = [&] {
      for (const auto& h : held) {
        CHECK(read_all(*h.view) == h.snapshot);
        CHECK(read_all(*h.view, /*backward=*/true) == h.snapshot);
      }
    };
    std::vector<done_flag> dones;
    std::uint64_t begun = 0, finished = 0;
    for (int round = 0; round < 400; ++round) {
      CAPTURE(round);
      REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 12)));
      REQUIRE(s->commit_group().is_ok());
      w.acknowledge();
      REQUIRE(contents(*s) == w.acked);
      for (int i = 0; i < 3; ++i) {
        std::string k = w.key();
        CHECK(get(*s, k) == w.latest_of(k));
      }
      if (s->checkpointing() && w.rng() % 3 == 0) held.push_back({s->view(), w.acked});
      if (s->checkpoint_due()) {
        bool was_running = s->checkpointing();
        auto before = s->stats().checkpoints;
        dones.emplace_back();
        auto r = must(s->relieve_memory(/*background=*/w.rng() % 8 != 0, dones.back().fn()));
        ++begun;
        CHECK(r.has_value() == was_running);
        if (was_running) ++finished;
        CHECK(s->stats().checkpoints == before + (was_running ? 1 : 0));
        REQUIRE(s->checkpointing());
        CHECK_FALSE(s->checkpoint_due());
        // The new view reads the frozen memtable whole over the old root.
        REQUIRE(s->view()->memtables().size() == 1);
        CHECK(s->memtable_bytes() >= o.checkpoint_bytes);
        CHECK(contents(*s) == w.acked);
        held.push_back({s->view(), w.acked});
      } else {
        switch (w.rng() % 12) {
          case 0:
          case 1:
            if (s->checkpointing()) {
              auto root = must(s->finish_checkpoint());
              ++finished;
              CHECK(root == s->view()->root());
              CHECK_FALSE(s->checkpointing());
            }
            break;
          case 2: {
            bool was_running = s->checkpointing();
            auto root = must(s->checkpoint());
            if (was_running) ++finished;
            CHECK(root == s->view()->root());
            CHECK_FALSE(s->checkpointing());
            CHECK_FALSE(s->view()->holds_writes());
            break;
          }
          case 3:
            if (!s->checkpointing()) {
              dones.emplace_back();
              REQUIRE(s->begin_checkpoint(true, dones.back().fn()).is_ok());
              if (s->checkpointing()) {
                ++begun;
                held.push_back({s->view(), w.acked});
              }
            }
            break;
          case 4:
            if (w.rng() % 3 == 0) {  // finishes a running checkpoint first; keeps held views' roots
              bool was_running = s->checkpointing();
              auto gcr = s->gc({});
              REQUIRE_MESSAGE(gcr.is_ok(), gcr.error().to_string(), " reclaiming ", s->reclaiming());
              if (was_running) ++finished;
              CHECK_FALSE(s->checkpointing());
            }
            break;
          case 5:
            if (w.rng() % 2 == 0) {  // checkpoints first, a running checkpoint ended before
              bool was_running = s->checkpointing();
              std::vector<std::string> keys, values;
              for (int i = 0; i < 10; ++i) keys.push_back(w.key());
              std::sort(keys.begin(), keys.end());
              keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
              for (std::size_t i = 0; i < keys.size(); ++i) values.push_back(w.value());
              auto root = must(ingest(*s, keys, values));
              if (was_running) ++finished;
              for (std::size_t i = 0; i < keys.size(); ++i) w.acked[keys[i]] = values[i];
              w.latest = w.acked;
              CHECK(root == s->view()->root());
              CHECK_FALSE(s->checkpointing());
            }
            break;
          case 6:
            // Space reclamation beside a running checkpoint: the tree it has
            // written so far, new nodes and reused old ones, is reached by no
            // root yet, and must survive a cycle run to its end.
            if (!s->reclaiming()) REQUIRE(s->begin_reclaim({}, 1.01).is_ok());
            break;
          case 7:
          case 8:
            for (int steps = 1 + static_cast<int>(w.rng() % 20); steps > 0 && s->reclaiming(); --steps)
              REQUIRE(s->reclaim_step().is_ok());
            break;
          default:
            break;
        }
      }
      REQUIRE(contents(*s) == w.acked);
      if (!s->checkpointing()) {
        check_held();
        if (held.size() > 4 || w.rng() % 2) held.clear();
      }
    }
    CHECK(begun >= 10);
    CHECK(s->stats().runs_written > 0);  // checkpoints wrote sorted runs, and folds took them in
    hash128 root = must(s->checkpoint());
    check_held();
    held.clear();
    CHECK(s->stats().checkpoints >= finished);
    // Every checkpoint begun ended, its `done` called.
    for (const auto& d : dones) d.wait();
    // The same content built in one go has the same root.
    tree::memory_nodes mem;
    std::vector<tree::entry> es;
    for (const auto& [k, v] : w.acked) es.push_back({keyspace::data_key(k), std::string(1, '\0') + v});
    CHECK(must(tree::prolly_tree(mem, o.chunking).build(es)) == root);
    s.reset();
    fe.crash(fault_env::unsynced::lose);
    s = must_open(fe, o);
    CHECK(s->stats().replayed_records == 0);
    CHECK(contents(*s) == w.acked);
    CHECK(must(s->verify({})).problems.empty());
  }
}

namespace {

constexpr fault_env::unsynced every_unsynced_mode[] = {fault_env::unsynced::lose, fault_env::unsynced::keep,
                                                       fault_env::unsynced::random, fault_env::unsynced::reorder};

// After a reopen: a background checkpoint of what was replayed ends well,
// and a power cut after it loses nothing.
void check_checkpoints_after_reopen(fault_env& fe, std::unique_ptr<shard>& s, const shard_options& o) {
  auto got = contents(*s);
  done_flag d;
  REQUIRE(s->begin_checkpoint(true, d.fn()).is_ok());
  bool began = s->checkpointing();
  auto root = must(s->finish_checkpoint());
  CHECK(root == s->view()->root());
  if (began) CHECK(d.is_set());  // its work ended before the marker
  CHECK_FALSE(s->view()->holds_writes());
  CHECK(contents(*s) == got);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, o);
  CHECK(contents(*s) == got);
  CHECK(s->stats().replayed_records == 0);
}

}  // namespace

// A power cut at a random point of a background checkpoint: at the fsync of
// its pack or of the node directory (its thread), at a group's, the new
// segment's or the marker's log fsync (its last write torn or not) or a log
// directory sync (the owner, writing on meanwhile), or at a chosen moment
// before or after finish_checkpoint() with the work running or over. Each
// fault_env unsynced mode, and a process crash. A reopened shard holds every
// write whose group was acknowledged, and of the others a prefix in log order.
TEST_CASE("shard: a power cut anywhere in a background checkpoint loses no acknowledged write") {
  const std::string nodes_dir = dir + "/nodes", wal_dir = dir + "/wal";
  int fired = 0, trials = 0, reopened_with_runs = 0;
  for (int mode_index = 0; mode_index < 5; ++mode_index) {
    bool process_crash = mode_index == 4;
    auto mode = process_crash ? fault_env::unsynced::lose : every_unsynced_mode[mode_index];
    for (int trial = 0; trial < 40; ++trial) {
      CAPTURE(mode_index);
      CAPTURE(trial);
      std::uint64_t seed = 1000 * static_cast<std::uint64_t>(mode_index) + static_cast<std::uint64_t>(trial);
      fault_env fe;
      manual_clock clock;
      auto o = small_options(clock);
      o.checkpoint_bytes = 32 << 10;
      workload w(seed);
      // 0, 1: no trap (a crash before / after finish_checkpoint); 2..: a trap.
      int kind = process_crash ? trial % 2 : trial % 8;
      bool finish_during = kind == 1 || w.rng() % 2;
      {
        testing::crashable_env ce(fe);
        auto s = must(shard::open(ce, dir, o));
        for (int g = 0, n = 10 + static_cast<int>(w.rng() % 20); g < n; ++g) {
          REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 8)));
          REQUIRE(s->commit_group().is_ok());
          w.acknowledge();
        }
        if (trial % 3 != 0) {
          must(s->checkpoint());  // a tree under the memtable
          for (int g = 0, n = 5 + static_cast<int>(w.rng() % 10); g < n; ++g) {
            REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 8)));
            REQUIRE(s->commit_group().is_ok());
            w.acknowledge();
          }
        }
        REQUIRE(w.stage(*s, static_cast<int>(w.rng() % 3)));  // begin_checkpoint commits them
        testing::crashable_env::trap t;
        t.mode = mode;
        t.seed = seed;
        switch (kind) {
          case 2:
            t.match = ".pack";
            break;
          case 3:
            t.dir_sync = true;
            t.match = nodes_dir;
            break;
          case 4:
          case 5:
            t.match = "/wal/";
            t.nth = 1 + static_cast<int>(w.rng() % 8);
            break;
          case 6:
            t.dir_sync = true;
            t.match = wal_dir;
            t.nth = 1 + static_cast<int>(w.rng() % 3);
            break;
          case 7:  // a log write torn at the power cut: a group's, or the marker's
            t.match = "/wal/";
            t.nth = 1 + static_cast<int>(w.rng() % 8);
            t.act = testing::crashable_env::action::tear_last_write;
            t.keep = w.rng() % 64;
            break;
          default:
            break;
        }
        if (kind >= 2) ce.arm(t);
        done_flag d;
        bool alive = s->begin_checkpoint(true, d.fn()).is_ok();
        bool began = alive && s->checkpointing();
        if (alive) w.acknowledge();
        int groups = 2 + static_cast<int>(w.rng() % 6);
        int finish_at = finish_during ? static_cast<int>(w.rng() % groups) : -1;
        for (int g = 0; g < groups && alive; ++g) {
          if (!w.stage(*s, 1 + static_cast<int>(w.rng() % 6))) break;
          alive = s->commit_group().is_ok();
          if (!alive) break;
          w.acknowledge();
          if (g == finish_at) alive = s->finish_checkpoint().is_ok();
          if (alive && s->checkpoint_due()) alive = s->relieve_memory(true).is_ok();
        }
        if (alive) (void)w.stage(*s, static_cast<int>(w.rng() % 3));  // never committed
        // No trap: half the time the first checkpoint's work is over at the
        // power cut (kind 0: its tree durable, its marker not written). A
        // trap: that checkpoint's fsyncs come before the power cut below.
        if (began && (kind >= 2 || w.rng() % 2)) d.wait();
        if (ce.fired().empty()) {
          ce.kill();
          if (process_crash)
            fe.process_crash();
          else
            fe.crash(mode, seed);
        } else {
          ++fired;
        }
        s.reset();  // waits for the checkpoint's thread, whose writes now fail
      }
      ++trials;
      fe.clear_faults();
      auto s = must_open(fe, o);
      reopened_with_runs += s->stats().sorted_runs > 0;  // the marker the cut left named runs
      auto got = contents(*s);
      check_holds_acked(got, w);
      CHECK(must(s->verify({})).problems.empty());
      check_checkpoints_after_reopen(fe, s, o);
    }
  }
  MESSAGE(fmt::format("{} of {} power cuts fired at a trap; {} reopened with sorted runs", fired, trials,
                      reopened_with_runs));
  CHECK(fired >= trials / 3);
  CHECK(reopened_with_runs > 0);  // the cuts fell around checkpoints that wrote runs too
}

// The node store's flush in a background checkpoint fails (its pack's fsync,
// or a pack write), or the commit marker's fsync does: finish_checkpoint()
// (or relieve_memory()) reports it and the shard stops (fail-stop, no retry); its last view still
// reads every acknowledged write; a reopen after a power cut, in each
// unsynced mode, holds them all.
TEST_CASE("shard: a failed flush or marker of a background checkpoint stops the shard and loses nothing acknowledged") {
  enum failing { pack_sync, pack_write, marker_sync };
  for (auto mode : every_unsynced_mode) {
    for (failing what : {pack_sync, pack_write, marker_sync}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(static_cast<int>(what));
      std::uint64_t seed = 7 + 10 * static_cast<std::uint64_t>(mode) + static_cast<std::uint64_t>(what);
      fault_env fe;
      manual_clock clock;
      auto o = small_options(clock);
      o.checkpoint_bytes = 32 << 10;
      workload w(seed);
      auto s = must_open(fe, o);
      for (int g = 0; g < 15; ++g) {
        REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 8)));
        REQUIRE(s->commit_group().is_ok());
        w.acknowledge();
      }
      must(s->checkpoint());
      fill_until_due(*s, w);
      if (what == pack_sync) {
        fe.target_paths(".pack");
        fe.fail_sync(1);
      } else if (what == pack_write) {
        fe.target_paths(".pack");
        fe.fail_write(1, status_code::io_error, 10);
      }
      done_flag d;
      REQUIRE(s->relieve_memory(true, d.fn()).is_ok());
      REQUIRE(s->checkpointing());
      // The log is not touched by the fault: groups go on meanwhile.
      for (int g = 0; g < 4; ++g) {
        REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 6)));
        REQUIRE(s->commit_group().is_ok());
        w.acknowledge();
      }
      d.wait();
      CHECK(s->checkpoint_ready());
      if (what == marker_sync) {
        fe.target_paths("/wal/");
        fe.fail_sync(1);
      }
      REQUIRE(w.stage(*s, 2));  // staged, never acknowledged
      // Ended by finish_checkpoint(), or by relieve_memory() (which would
      // begin the next one after it).
      bool by_relieve = (static_cast<int>(mode) + static_cast<int>(what)) % 2 == 1;
      CAPTURE(by_relieve);
      bool ended_ok = by_relieve ? s->relieve_memory(true).is_ok() : s->finish_checkpoint().is_ok();
      CHECK_FALSE(ended_ok);
      CHECK_FALSE(s->failure().is_ok());
      CHECK_FALSE(s->checkpointing());
      CHECK(s->put("after", "x").code() == status_code::failed);
      CHECK(s->commit_group().code() == status_code::failed);
      CHECK(s->begin_checkpoint(true).code() == status_code::failed);
      CHECK(s->finish_checkpoint().error().code() == status_code::failed);
      CHECK(s->checkpoint().error().code() == status_code::failed);
      // The last published view: every acknowledged write, nothing staged.
      CHECK(contents(*s) == w.acked);
      s.reset();
      fe.clear_faults();
      fe.crash(mode, seed);
      s = must_open(fe, o);
      check_holds_acked(contents(*s), w);
      CHECK_FALSE(get(*s, "after").has_value());
      CHECK(must(s->verify({})).problems.empty());
      check_checkpoints_after_reopen(fe, s, o);
    }
  }
}

// relieve_memory() counts a stall exactly when its writes had to wait: the
// running checkpoint's work not over when it was called. Deterministic both
// ways: the no-stall case waits for `done` first; the stall case holds the
// checkpoint's thread at its first node-store write until the owner sleeps
// inside relieve_memory().
TEST_CASE("shard: relieve_memory counts a write stall only when it waited for the running checkpoint") {
  fault_env fe;
  gated_env ge(fe);
  manual_clock clock;
  auto o = small_options(clock);
  o.checkpoint_bytes = 16 << 10;
  workload w(99);
  auto s = must(shard::open(ge, dir, o));

  // None running: it begins one, and nothing waited.
  fill_until_due(*s, w);
  auto st0 = s->stats();
  done_flag d1;
  auto r1 = must(s->relieve_memory(true, d1.fn()));
  CHECK_FALSE(r1.has_value());
  REQUIRE(s->checkpointing());
  CHECK(s->stats().write_stalls == st0.write_stalls);
  CHECK(s->stats().write_stall_ns == st0.write_stall_ns);

  // Its work is over (done was called) before the memtable fills again: no stall.
  d1.wait();
  CHECK(s->checkpoint_ready());
  fill_until_due(*s, w);
  REQUIRE(s->checkpointing());
  // The next checkpoint's thread waits at its first node-store write.
  ge.arm("/nodes/", 1);
  done_flag d2;
  auto st1 = s->stats();
  auto r2 = must(s->relieve_memory(true, d2.fn([&ge] { ge.finished(); })));
  REQUIRE(r2.has_value());
  CHECK(s->stats().checkpoints == st1.checkpoints + 1);
  CHECK(s->stats().write_stalls == st1.write_stalls);
  CHECK(s->stats().write_stall_ns == st1.write_stall_ns);
  REQUIRE(s->checkpointing());
  REQUIRE(ge.wait_held());
  CHECK(contents(*s) == w.acked);

  // The memtable fills while that work is held: relieve_memory waits for it.
  fill_until_due(*s, w);
  CHECK_FALSE(s->checkpoint_ready());
  CHECK_FALSE(d2.is_set());
  CHECK(s->memtable_bytes() >= 2 * o.checkpoint_bytes);  // two memtables, each full
  auto st2 = s->stats();
  done_flag d3;
  {
    gate_opener opener(ge);
    opener.go();
    auto r3 = must(s->relieve_memory(true, d3.fn()));
    CHECK(r3.has_value());
  }
  CHECK(d2.is_set());
  auto st3 = s->stats();
  CHECK(st3.write_stalls == st2.write_stalls + 1);
  CHECK(st3.write_stall_ns > st2.write_stall_ns);
  CHECK(st3.checkpoints == st2.checkpoints + 1);
  REQUIRE(s->checkpointing());
  CHECK(contents(*s) == w.acked);

  // finish_checkpoint() and checkpoint() wait too, but count no stall.
  must(s->checkpoint());
  CHECK(s->stats().write_stalls == st3.write_stalls);
  CHECK(contents(*s) == w.acked);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must_open(fe, o);
  CHECK(contents(*s) == w.acked);
}

// The shard is destroyed while its background checkpoint's thread is held in
// the middle of its work (at its first or second node-store write or sync):
// the destructor waits for it (its `done` has run when the destructor
// returns), a view taken before still reads its snapshot, and a reopen -
// after a clean close, each unsynced mode's power cut, or a process crash -
// holds every acknowledged write.
TEST_CASE("shard: destroying a shard while a background checkpoint runs waits for it and loses nothing") {
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    fault_env fe;
    gated_env ge(fe);
    manual_clock clock;
    auto o = small_options(clock);
    o.checkpoint_bytes = 32 << 10;
    workload w(500 + static_cast<std::uint64_t>(variant));
    auto s = must(shard::open(ge, dir, o));
    for (int g = 0; g < 10; ++g) {
      REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 8)));
      REQUIRE(s->commit_group().is_ok());
      w.acknowledge();
    }
    must(s->checkpoint());
    fill_until_due(*s, w);
    ge.arm("/nodes/", 1 + variant % 2);
    done_flag d;
    REQUIRE(must(s->relieve_memory(true, d.fn([&ge] { ge.finished(); }))) == std::nullopt);
    REQUIRE(s->checkpointing());
    for (int g = 0; g < 3; ++g) {
      REQUIRE(w.stage(*s, 1 + static_cast<int>(w.rng() % 6)));
      REQUIRE(s->commit_group().is_ok());
      w.acknowledge();
    }
    auto view = s->view();
    const kv_map snapshot = w.acked;
    CHECK(read_all(*view) == snapshot);
    REQUIRE(w.stage(*s, 2));  // never acknowledged
    REQUIRE(ge.wait_held());  // a flush writes its pack, then syncs it
    CHECK_FALSE(d.is_set());
    {
      gate_opener opener(ge);
      opener.go();
      s.reset();
      CHECK(d.is_set());  // the destructor waited for the work
    }
    CHECK(read_all(*view) == snapshot);  // a view outlives its shard
    CHECK(read_all(*view, true) == snapshot);
    if (variant == 5)
      fe.process_crash();
    else if (variant > 0)
      fe.crash(every_unsynced_mode[variant - 1], static_cast<std::uint64_t>(variant));
    s = must_open(fe, o);
    check_holds_acked(contents(*s), w);
    if (variant == 0) {
      CHECK(contents(*s) == w.acked);      // a clean close keeps exactly the acknowledged
      CHECK(read_all(*view) == snapshot);  // and the old view reads on beside the reopened shard
    }
    CHECK(must(s->verify({})).problems.empty());
    check_checkpoints_after_reopen(fe, s, o);
  }
}

// Readers on other threads while the owner writes and checkpoints run in the
// background. Group g puts ctr = g and n<g> = g, deletes n<g - window>, and
// writes filler that fills the memtable; the owner hands out each new view
// (as the shard actor does, through an atomic slot) and only then raises the
// acknowledged count. A reader that saw count a and then took a view must find
// ctr = m >= a (and never below what it saw before), exactly the keys n<m -
// window + 1> .. n<m> in that view, by get, scan and scan_reverse, and a view
// it holds on reads the same later. Also run under the thread sanitizer.
TEST_CASE("shard: readers on other threads see acknowledged writes in order while background checkpoints run") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  o.checkpoint_bytes = 16 << 10;
  auto s = must_open(fe, o);
  constexpr std::uint64_t groups = 600, window = 40;
  const std::uint64_t now = clock.fn()();
  auto counter = [](std::uint64_t g) { return fmt::format("{:08}", g); };
  auto numbered = [](std::uint64_t g) { return fmt::format("n{:08}", g); };
  // A view slot under a mutex: libstdc++'s atomic<shared_ptr> guards itself
  // with a lock bit the thread sanitizer cannot see (this test runs under it).
  struct {
    std::mutex mu;
    std::shared_ptr<const read_view> v;
    std::shared_ptr<const read_view> load() {
      std::lock_guard lk(mu);
      return v;
    }
    void store(std::shared_ptr<const read_view> n) {
      std::lock_guard lk(mu);
      v = std::move(n);
    }
  } slot;
  slot.store(s->view());
  std::atomic<std::uint64_t> acked{0};
  std::atomic<bool> stop{false};
  std::mutex errors_mu;
  std::vector<std::string> errors;
  std::atomic<std::uint64_t> reads{0};

  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto fail = [&](std::string what) {
      std::lock_guard lk(errors_mu);
      if (errors.size() < 20) errors.push_back(std::move(what));
    };
    std::uint64_t seen = 0;
    std::shared_ptr<const read_view> kept;
    std::uint64_t kept_m = 0;
    kv_map kept_all;
    while (!stop.load()) {
      std::uint64_t a = acked.load(std::memory_order_acquire);
      auto v = slot.load();
      auto ctr = v->get("ctr", now);
      if (!ctr) return fail(ctr.error().to_string());
      std::uint64_t m = *ctr ? std::stoull(**ctr) : 0;
      if (m < a) fail(fmt::format("view holds ctr {} after {} was acknowledged", m, a));
      if (m < seen) fail(fmt::format("ctr went back from {} to {}", seen, m));
      seen = m;
      // The window of numbered keys, whole and alone, both ways.
      for (bool backward : {false, true}) {
        kv_map all;
        if (status st = read_all(*v, backward, all); !st) return fail(st.to_string());
        std::uint64_t from = m > window ? m - window + 1 : 1, count = 0;
        for (auto it = all.lower_bound("n"); it != all.end() && it->first < "o"; ++it, ++count) {
          std::uint64_t want = from + count;
          if (it->first != numbered(want) || it->second != counter(want)) {
            fail(fmt::format("ctr {}: found {} = {} where n{:08} was due", m, it->first, it->second, want));
            break;
          }
        }
        if (count != (m == 0 ? 0 : m - from + 1))
          fail(fmt::format("ctr {}: {} numbered keys in a {} scan", m, count, backward ? "reverse" : "forward"));
        if (kept && !backward && rng() % 8 == 0) {
          kept_all = std::move(all);
          kept = v;
          kept_m = m;
        }
      }
      if (a > 0 && a + window > m) {
        auto got = v->get(numbered(a), now);
        if (!got || *got != std::optional<std::string>(counter(a)))
          fail(fmt::format("view of ctr {} lacks n{:08}, acknowledged before it was taken", m, a));
      }
      if (!kept) {
        kept = v;
        kept_m = m;
        kept_all.clear();
        if (status st = read_all(*v, false, kept_all); !st) return fail(st.to_string());
      } else if (rng() % 4 == 0) {
        // A view held across checkpoints reads what it read.
        kv_map again;
        if (status st = read_all(*kept, rng() % 2 == 1, again); !st) return fail(st.to_string());
        if (again != kept_all) fail(fmt::format("a held view of ctr {} changed", kept_m));
        if (rng() % 4 == 0) kept.reset();
      }
      reads.fetch_add(1);
    }
  };
  struct readers {
    std::atomic<bool>& stop;
    std::vector<std::thread> threads;
    void join() {
      stop.store(true);
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
    ~readers() { join(); }  // also when a REQUIRE below throws
  } running{stop, {}};
  running.threads.emplace_back(reader, 1);
  running.threads.emplace_back(reader, 2);
  std::mt19937_64 rng(3);
  std::uint64_t begun = 0;
  for (std::uint64_t g = 1; g <= groups; ++g) {
    REQUIRE(s->put("ctr", counter(g)).is_ok());
    REQUIRE(s->put(numbered(g), counter(g)).is_ok());
    if (g > window) REQUIRE(s->del(numbered(g - window)).is_ok());
    for (int i = 0; i < 3; ++i)
      REQUIRE(s->put(fmt::format("f{:03}", rng() % 500), std::string(40 + rng() % 100, 'f')).is_ok());
    REQUIRE(s->commit_group().is_ok());
    if (s->checkpoint_due()) {
      REQUIRE(s->relieve_memory(true).is_ok());
      ++begun;
    } else if (s->checkpoint_ready() && rng() % 2) {
      REQUIRE(s->finish_checkpoint().is_ok());
    }
    slot.store(s->view());
    acked.store(g, std::memory_order_release);
  }
  REQUIRE(s->finish_checkpoint().is_ok());
  slot.store(s->view());
  running.join();
  for (const auto& e : errors) FAIL_CHECK(e);
  CHECK(errors.empty());
  CHECK(begun >= 10);
  CHECK(reads.load() > 0);
  MESSAGE(fmt::format("{} checkpoints begun, {} reader rounds", begun, reads.load()));
  CHECK(get(*s, "ctr") == counter(groups));
}

// A reclamation cycle begun while a background checkpoint's work is over but
// its marker not yet written (the owner finishes it at its next turn). The
// checkpoint's tree may be made of nodes that were garbage: a prolly tree is
// the tree of its content, so writes that bring keys back to an earlier state
// give the earlier tree, whose nodes the store still holds (superseded, not
// yet reclaimed) and deduplicates against, in packs older than the one the
// checkpoint began in. No root the cycle keeps reaches them, and the write
// barrier saw nothing (the cycle did not run yet); they must not be dropped.
TEST_CASE("shard: reclamation beside a finished background checkpoint keeps the nodes its tree deduplicated") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must_open(fe, o);
  auto write_all = [&](std::string_view tag) {
    for (int i = 0; i < 400; ++i) REQUIRE(s->put(fmt::format("k{:04}", i), fmt::format("{}-{}", tag, i)).is_ok());
    REQUIRE(s->commit_group().is_ok());
  };
  auto run_cycle = [&] {
    REQUIRE(s->begin_reclaim({}, 1.2).is_ok());
    for (int step = 0;; ++step) {
      REQUIRE(step < 100000);
      if (must(s->reclaim_step())) break;
    }
  };
  write_all("A");
  must(s->checkpoint());  // tree A
  run_cycle();            // nothing to drop; it seals tree A's pack
  write_all("B");
  must(s->checkpoint());  // tree B in a newer pack: tree A's pack is garbage
  const kv_map a_again = [&] {
    write_all("A");  // the content of tree A again
    return contents(*s);
  }();
  done_flag d;
  REQUIRE(s->begin_checkpoint(true, d.fn()).is_ok());
  d.wait();  // its tree (tree A, every node deduplicated) is written and flushed
  run_cycle();
  auto reclaimed = s->reclaimed_bytes();
  auto root = s->finish_checkpoint();
  REQUIRE(root.is_ok());
  MESSAGE(fmt::format("the cycle reclaimed {} bytes", reclaimed));
  kv_map got;
  status st = read_all(*s->view(), false, got);
  CHECK_MESSAGE(st.is_ok(), st.to_string());
  CHECK(got == a_again);
  auto report = must(s->verify({}));
  for (const auto& p : report.problems) FAIL_CHECK(p);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  auto reopened = shard::open(fe, dir, o);
  REQUIRE_MESSAGE(reopened.is_ok(), reopened.error().to_string());
  kv_map after;
  st = read_all(*(*reopened)->view(), false, after);
  CHECK_MESSAGE(st.is_ok(), st.to_string());
  CHECK(after == a_again);
}

// TTLs across background checkpoints: a value's expiry entry goes into the
// memtable with it, so a checkpoint's frozen memtable carries some while the
// active one moves or deletes them (overwrites, the TTL timer's sweeps). At
// every step reads follow the model (a value is gone at its deadline); after a
// power cut in the middle of a checkpoint the index rebuilt from the tree and
// the replay gives the same next deadline and verify finds nothing amiss.
TEST_CASE("shard: TTLs and sweeps across background checkpoints and power cuts keep reads and the expiry index right") {
  int cuts = 0;
  for (auto mode : every_unsynced_mode) {
    CAPTURE(static_cast<int>(mode));
    fault_env fe;
    manual_clock clock;
    auto o = small_options(clock);
    o.checkpoint_bytes = 16 << 10;
    auto s = must_open(fe, o);
    std::mt19937_64 rng(41 + static_cast<int>(mode));
    struct entry {
      std::string value;
      std::optional<std::uint64_t> deadline;
    };
    std::map<std::string, entry> model;  // acknowledged; swept keys removed
    std::uint64_t begun = 0;
    auto live = [&](const std::string& k) -> std::optional<std::string> {
      auto it = model.find(k);
      if (it == model.end() || (it->second.deadline && *it->second.deadline <= clock.fn()())) return std::nullopt;
      return it->second.value;
    };
    auto earliest = [&] {
      std::optional<std::uint64_t> out;
      for (const auto& [k, e] : model)
        if (e.deadline && (!out || *e.deadline < *out)) out = e.deadline;
      return out;
    };
    auto check_reads = [&] {
      for (int i = 0; i < 60; ++i) {
        std::string k = fmt::format("t{:02}", i);
        CHECK(get(*s, k) == live(k));
      }
      CHECK(s->next_deadline() == earliest());
    };
    for (int round = 0; round < 200; ++round) {
      CAPTURE(round);
      for (int i = 0, n = 1 + static_cast<int>(rng() % 6); i < n; ++i) {
        std::string k = fmt::format("t{:02}", rng() % 60);
        int op = static_cast<int>(rng() % 6);
        if (op < 4) {
          std::string v = fmt::format("{}-", round) + std::string(100 + rng() % 100, 'x');
          std::optional<std::chrono::nanoseconds> ttl;
          if (op < 2) ttl = std::chrono::seconds(1 + rng() % 20);
          REQUIRE(s->put(k, v, ttl).is_ok());
          model[k] = {v, ttl ? std::optional<std::uint64_t>(clock.fn()() + static_cast<std::uint64_t>(ttl->count()))
                             : std::nullopt};
        } else {
          REQUIRE(s->del(k).is_ok());
          model.erase(k);
        }
      }
      if (rng() % 3 == 0) {
        std::size_t due = 0;
        for (const auto& [k, e] : model)
          if (e.deadline && *e.deadline <= clock.fn()()) ++due;
        CHECK(must(s->stage_expired(1000)) == due);
        std::erase_if(model, [&](const auto& kv) { return kv.second.deadline && *kv.second.deadline <= clock.fn()(); });
      }
      REQUIRE(s->commit_group().is_ok());
      clock.advance(std::chrono::milliseconds(rng() % 1500));
      if (s->checkpoint_due()) {
        REQUIRE(s->relieve_memory(true).is_ok());
        ++begun;
      } else if (rng() % 10 == 0 && s->checkpointing()) {
        REQUIRE(s->finish_checkpoint().is_ok());
      }
      check_reads();
      if (round % 50 == 49) {
        bool running = s->checkpointing();
        CHECK(must(s->verify({})).problems.empty());
        if (running) {
          // A power cut with the checkpoint's work perhaps under way.
          ++cuts;
          s.reset();
          fe.crash(mode, static_cast<std::uint64_t>(round));
          s = must_open(fe, o);
          check_reads();
          CHECK(must(s->verify({})).problems.empty());
        }
      }
    }
    CHECK(begun >= 3);
    must(s->checkpoint());
    check_reads();
    CHECK(must(s->verify({})).problems.empty());
    s.reset();
    fe.crash(mode, 1);
    s = must_open(fe, o);
    check_reads();
    CHECK(must(s->verify({})).problems.empty());
  }
  CHECK(cuts >= 4);
}
