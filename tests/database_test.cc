// The database on the POSIX env with a real actor system: host calls from
// plain threads, reopen, the data-directory lock, the manifest, supervision.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "actors/database_core.h"
#include "tests/support/database_fixture.h"
#include "tests/support/poll.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace std::chrono_literals;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

TEST_CASE("database: writes from host threads are durable when acknowledged and visible to get at once") {
  testing::temp_dir d("db");
  std::map<std::string, std::string> model;
  {
    auto db = must_open(options_for(d.path()));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          std::string k = fmt::format("t{}-{:03}", t, i);
          REQUIRE(db->put(k, k + "!").is_ok());
          // Read-your-writes on the same thread, without messaging the shard.
          REQUIRE(db->get(k).value() == std::optional<std::string>(k + "!"));
        }
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < 50; ++i) model[fmt::format("t{}-{:03}", t, i)] = fmt::format("t{}-{:03}!", t, i);
    REQUIRE(db->del("t0-000").is_ok());
    model.erase("t0-000");
    auto c = db->cas("t1-000", std::string_view("t1-000!"), std::string_view("swapped"));
    REQUIRE(c.is_ok());
    CHECK(c->swapped);
    model["t1-000"] = "swapped";
    auto all = db->range("t", "u", 1000);
    REQUIRE(all.is_ok());
    CHECK(std::map<std::string, std::string>(all->begin(), all->end()) == model);
    auto first3 = db->range("t", "", 3);
    REQUIRE(first3.is_ok());
    REQUIRE(first3->size() == 3);
    CHECK(first3->front().first == model.begin()->first);
  }
  // Reopened (the destructor checkpointed): everything is there.
  auto db = must_open(options_for(d.path()));
  for (auto& [k, v] : model) CHECK(db->get(k).value() == std::optional<std::string>(v));
  CHECK_FALSE(db->get("t0-000").value().has_value());
}

TEST_CASE("database: a held data directory is busy; another shard count or a bad manifest is refused") {
  testing::temp_dir d("db");
  {
    auto db = must_open(options_for(d.path(), 4));
    auto second = open_database(options_for(d.path(), 4));
    REQUIRE_FALSE(second.is_ok());
    CHECK(second.error().code() == status_code::busy);
    CHECK(second.error().message().find("in use") != std::string::npos);
  }
  auto other = open_database(options_for(d.path(), 8));
  REQUIRE_FALSE(other.is_ok());
  CHECK(other.error().code() == status_code::invalid_argument);
  CHECK(other.error().message().find("4 shards") != std::string::npos);
  database_options bad;
  bad.dir = d.path();
  bad.shards = 0;
  CHECK(database::open(bad).error().code() == status_code::invalid_argument);
}

TEST_CASE("database: without a shard count a new database gets one a core, an existing one keeps its count") {
  // One a core, at least one, at most 16 (database_options::default_shards).
  std::size_t cores = std::thread::hardware_concurrency();
  std::size_t expected = cores == 0 ? 1 : std::min<std::size_t>(cores, 16);
  CHECK(database_options::default_shards() == expected);
  auto manifest = [](const std::string& dir) {
    std::ifstream in(dir + "/MANIFEST", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  testing::temp_dir d("db");
  std::string fresh = d.path() + "/fresh";
  database_options o;
  o.dir = fresh;
  REQUIRE_FALSE(o.shards);
  {
    auto db = must_open(o);
    CHECK(db->shard_count() == expected);
  }
  CHECK(manifest(fresh) == fmt::format("magnetite-manifest 1\nshards {}\n", expected));
  CHECK(database::recorded_shards(fresh).value() == std::optional<std::size_t>(expected));

  // A count other than the default, recorded; reopened without a count, kept.
  std::size_t other = expected + 3;
  std::string given = d.path() + "/given";
  must_open(options_for(given, other)).reset();
  database_options reopen;
  reopen.dir = given;
  {
    auto db = must_open(reopen);
    CHECK(db->shard_count() == other);
    REQUIRE(db->put("k", "v").is_ok());
  }
  CHECK(manifest(given) == fmt::format("magnetite-manifest 1\nshards {}\n", other));
  CHECK(must_open(options_for(given, other))->get("k").value() == std::optional<std::string>("v"));

  // The memory budget is checked against the count the MANIFEST gave.
  reopen.memory_budget = (other - 1) << 20;
  auto tight = database::open(reopen);
  REQUIRE_FALSE(tight.is_ok());
  CHECK(tight.error().code() == status_code::invalid_argument);
  CHECK(tight.error().message().find(fmt::format("for {} shards", other)) != std::string::npos);
}

TEST_CASE("database: bad input is a clear error and changes nothing") {
  testing::temp_dir d("db");
  auto db = must_open(options_for(d.path()));
  CHECK(db->put("", "v").code() == status_code::invalid_argument);
  CHECK(db->put(std::string(limits::max_user_key_bytes + 1, 'k'), "v").code() == status_code::invalid_argument);
  CHECK(db->put("k", "v", 0ns).code() == status_code::invalid_argument);
  CHECK(db->get("").error().code() == status_code::invalid_argument);
  std::vector<batch_write> spread;
  for (int i = 0; i < 20; ++i) spread.push_back({fmt::format("b{}", i), std::string("v"), {}});
  CHECK(db->batch(spread).code() == status_code::invalid_argument);  // keys on different shards
  CHECK(db->batch(spread, std::string_view("one-shard")).is_ok());   // a routing key keeps them together
  CHECK(db->get("b7", std::string_view("one-shard")).value() == std::optional<std::string>("v"));
  CHECK_FALSE(db->get("k").value().has_value());
}

TEST_CASE("database: ingest spreads sorted writes over every shard, durable at once; bad input sends nothing") {
  testing::temp_dir d("db");
  std::map<std::string, std::string> model;
  auto run = [](int from, int to, std::string_view tag) {
    std::vector<std::pair<std::string, std::string>> w;
    for (int i = from; i < to; ++i) w.emplace_back(fmt::format("i{:06}", i), fmt::format("{}{}", tag, i));
    return w;
  };
  auto views = [](const std::vector<std::pair<std::string, std::string>>& w) {
    return std::vector<std::pair<std::string_view, std::string_view>>(w.begin(), w.end());
  };
  {
    auto db = must_open(options_for(d.path()));
    REQUIRE(db->put("i000003", "before", 1h).is_ok());
    REQUIRE(db->put("j", "after the ingest's keys").is_ok());
    model["j"] = "after the ingest's keys";
    for (auto [from, to] : {std::pair{0, 5000}, std::pair{5000, 12000}}) {
      auto w = run(from, to, "v");
      for (const auto& [k, v] : w) model[k] = v;
      REQUIRE(db->ingest(views(w)).is_ok());
    }
    auto unsorted = run(20000, 20010, "late");
    std::swap(unsorted[3], unsorted[7]);
    auto bad = db->ingest(views(unsorted));
    CHECK(bad.code() == status_code::invalid_argument);
    CHECK(bad.message().find("index 4") != std::string::npos);
    CHECK(db->ingest(views({{"", "v"}})).code() == status_code::invalid_argument);
    CHECK_FALSE(db->get("i020000").value().has_value());  // nothing of the refused ingest landed
    auto st = testing::must(db->stats());
    std::uint64_t ingested = 0;
    std::size_t shards_used = 0;
    for (const auto& s : st.shards) {
      ingested += s.ingested;
      shards_used += s.ingested > 0;
    }
    CHECK(ingested == 12000);
    CHECK(shards_used == st.shards.size());
    auto all = testing::must(db->range("", "", 100000));
    CHECK(std::map<std::string, std::string>(all.begin(), all.end()) == model);
  }
  // Reopened, nothing is replayed for the ingest: it is in the trees.
  auto db = must_open(options_for(d.path()));
  auto all = testing::must(db->range("", "", 100000));
  CHECK(std::map<std::string, std::string>(all.begin(), all.end()) == model);
  CHECK(db->get("i000003").value() == std::optional<std::string>("v3"));
}

TEST_CASE("database: an exception in a handler restarts only that shard, which replays; too many make it fail") {
  testing::temp_dir d("db");
  auto o = options_for(d.path(), 2);
  o.max_restarts = 2;
  o.restart_backoff = 1ms;
  o.before_write = [](const std::string& key) {
    if (key.starts_with("boom")) throw std::runtime_error("injected");
  };
  auto db = must_open(o);
  // Keys on each shard, acknowledged before the crash.
  std::string a, b;
  for (int i = 0; a.empty() || b.empty(); ++i) {
    std::string k = fmt::format("key{}", i);
    (db->shard_of(k) == 0 ? a : b) = k;
  }
  REQUIRE(db->put(a, "A").is_ok());
  REQUIRE(db->put(b, "B").is_ok());
  std::string boom;
  for (int i = 0; boom.empty(); ++i)
    if (db->shard_of(fmt::format("boom{}", i)) == 0) boom = fmt::format("boom{}", i);
  CHECK_FALSE(db->put(boom, "x").is_ok());
  // The other shard never stopped.
  CHECK(db->get(b).value() == std::optional<std::string>("B"));
  REQUIRE(db->put(b, "B2").is_ok());
  // Shard 0 comes back with its acknowledged write.
  status st = status::io_error("not yet");
  for (int i = 0; i < 2000 && !st; ++i) {
    auto v = db->get(a);
    st = v.is_ok() ? (v.value() == std::optional<std::string>("A") ? status::ok() : status::corruption("lost"))
                   : v.error();
    if (!st) std::this_thread::sleep_for(1ms);  // waiting on a real restart, with a bound
  }
  REQUIRE(st.is_ok());
  auto stats = db->stats();
  REQUIRE(stats.is_ok());
  CHECK(stats->restarts[0] == 1);
  CHECK(stats->restarts[1] == 0);
  // Two more crashes within the window: the shard is marked failed for good.
  for (int i = 0; i < 2; ++i) {
    status s = status::ok();
    for (int j = 0; j < 2000; ++j) {
      s = db->put(boom, "x");
      if (s.code() != status_code::io_error || s.category() != status_category::transient) break;
      std::this_thread::sleep_for(1ms);
    }
  }
  status final_state = status::ok();
  for (int j = 0; j < 2000; ++j) {
    final_state = db->put(a, "after");
    if (final_state.code() == status_code::failed) break;
    std::this_thread::sleep_for(1ms);
  }
  CHECK(final_state.code() == status_code::failed);
  CHECK(final_state.category() == status_category::permanent);
  CHECK(db->get(a).error().code() == status_code::failed);
  CHECK(db->get(b).value() == std::optional<std::string>("B2"));
}

TEST_CASE("database: a scan merges every shard in key order, chunk by chunk, over views pinned when it starts") {
  testing::temp_dir d("db");
  std::atomic<std::uint64_t> now{1'000'000'000};
  auto o = options_for(d.path(), 3);
  o.shard.clock = [&] { return now.load(); };
  auto db = must_open(o);
  std::map<std::string, std::string> model;
  std::mt19937 rng(11);
  for (int i = 0; i < 600; ++i) {
    std::string k = fmt::format("k{:05}", rng() % 1000);
    std::string v = fmt::format("v{}", i);
    if (rng() % 5 == 0) {
      REQUIRE(db->del(k).is_ok());
      model.erase(k);
    } else {
      REQUIRE(db->put(k, v).is_ok());
      model[k] = v;
    }
  }
  // Keys on every shard, and some that expire before the scan.
  std::set<std::size_t> shards_used;
  for (auto& [k, v] : model) shards_used.insert(db->shard_of(k));
  CHECK(shards_used.size() == 3);
  REQUIRE(db->put("k00500x", "short-lived", 10ns).is_ok());
  now += 20;

  auto expect = [&](std::string_view from, std::string_view to) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = model.lower_bound(std::string(from)); it != model.end() && (to.empty() || it->first < to); ++it)
      out.push_back(*it);
    return out;
  };
  for (std::size_t chunk : {1, 7, 256}) {
    for (auto [from, to] : {std::pair<std::string, std::string>{"", ""}, {"k00100", "k00700"}, {"k00700", "k00100"}}) {
      CAPTURE(chunk);
      CAPTURE(from);
      auto c = db->scan(from, to, chunk);
      REQUIRE(c.is_ok());
      std::vector<std::pair<std::string, std::string>> got;
      for (;;) {
        auto more = c->next();
        REQUIRE(more.is_ok());
        if (!*more) break;
        got.emplace_back(c->key(), c->value());
      }
      CHECK(got == expect(from, to));
    }
  }
  auto limited = db->range("k00100", "", 17);
  REQUIRE(limited.is_ok());
  auto all_from = expect("k00100", "");
  CHECK(*limited == std::vector<std::pair<std::string, std::string>>(all_from.begin(), all_from.begin() + 17));

  // A cursor reads the views it pinned: later writes do not show, deleted keys still do.
  auto pinned = db->scan("", "", 4);
  REQUIRE(pinned.is_ok());
  std::string first = model.begin()->first;
  REQUIRE(db->del(first).is_ok());
  REQUIRE(db->put("a-new-first-key", "x").is_ok());
  REQUIRE(pinned->next().value());
  CHECK(pinned->key() == first);
  auto fresh = db->scan("", "", 4);
  REQUIRE(fresh.is_ok());
  REQUIRE(fresh->next().value());
  CHECK(fresh->key() == "a-new-first-key");
}

TEST_CASE("database: asynchronous put, del, cas and batch answer once, when durable, and change what gets read") {
  testing::temp_dir d("db");
  auto db = must_open(options_for(d.path(), 2));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<status> answers;
  std::optional<result<cas_outcome>> cas_answer;
  auto record = [&](status s) {
    std::lock_guard lk(mu);
    answers.push_back(std::move(s));
    cv.notify_all();
  };
  auto wait_for = [&](std::size_t n) {
    std::unique_lock lk(mu);
    REQUIRE(cv.wait_for(lk, 30s, [&] { return answers.size() >= n; }));
  };

  db->put_async("a", "1", std::nullopt, record);
  db->put_async("b", "2", std::nullopt, record);
  wait_for(2);
  CHECK(db->get("a").value() == std::optional<std::string>("1"));
  db->del_async("b", record);
  wait_for(3);
  CHECK(db->get("b").value() == std::nullopt);
  db->cas_async("a", std::string_view("1"), std::string_view("one"), std::nullopt, [&](result<cas_outcome> r) {
    std::lock_guard lk(mu);
    cas_answer = std::move(r);
    answers.push_back(status::ok());
    cv.notify_all();
  });
  wait_for(4);
  REQUIRE(cas_answer);
  REQUIRE(cas_answer->is_ok());
  CHECK((*cas_answer)->swapped);
  CHECK(db->get("a").value() == std::optional<std::string>("one"));
  std::vector<batch_write> together{{"x1", std::string("v"), std::nullopt}, {"x2", std::string("w"), std::nullopt}};
  db->batch_async(together, record, std::string_view("x"));
  wait_for(5);
  CHECK(db->get("x2", std::string_view("x")).value() == std::optional<std::string>("w"));
  // Bad input is answered at once, on the calling thread, and changes nothing.
  db->put_async("c", "3", 0ns, record);
  {
    std::lock_guard lk(mu);
    REQUIRE(answers.size() == 6);
  }
  CHECK(db->get("c").value() == std::nullopt);
  std::lock_guard lk(mu);
  for (std::size_t i = 0; i < 5; ++i) CHECK_MESSAGE(answers[i].is_ok(), answers[i].to_string());
  CHECK(answers[5].code() == status_code::invalid_argument);
}

TEST_CASE("database: commit keeps its checkpoints; diff, verify and gc use them, across a reopen") {
  testing::temp_dir d("db-ops");
  database::commit_result a, b;
  {
    auto db = must_open(options_for(d.path(), 3));
    for (int i = 0; i < 500; ++i) REQUIRE(db->put(fmt::format("k{:03}", i), "one").is_ok());
    a = db->commit().value();
    REQUIRE(db->del("k001").is_ok());
    REQUIRE(db->put("k002", "two", 1h).is_ok());
    REQUIRE(db->put("new", "three").is_ok());
    b = db->commit().value();
    auto st = db->stats().value();
    std::uint64_t keys = 0, acked = 0;
    for (const auto& u : st.usage) keys += u.keys;
    for (const auto& s : st.shards) acked += s.acknowledged;
    CHECK(keys == 500);
    CHECK(acked == 503);
    for (std::size_t i = 0; i < 3; ++i) CHECK(st.usage[i].root == b.roots[i].to_hex());
  }
  auto db = must_open(options_for(d.path(), 3));
  auto kept = db->checkpoints();
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].combined == a.combined);
  CHECK(kept[1].roots == b.roots);
  auto changes = db->diff(a.combined, b.combined).value();
  REQUIRE(changes.size() == 3);
  CHECK(changes[0].key == "k001");
  CHECK(changes[0].what == key_change::kind::removed);
  CHECK(changes[0].old_value == std::optional<std::string>("one"));
  CHECK(changes[1].key == "k002");
  CHECK(changes[1].what == key_change::kind::changed);
  CHECK(changes[1].new_value == std::optional<std::string>("two"));  // the user's value, not its envelope
  CHECK(changes[2].key == "new");
  CHECK(changes[2].what == key_change::kind::added);
  CHECK(db->diff(b.combined, b.combined).value().empty());
  CHECK(db->diff(a.combined, b.roots[0]).error().code() == status_code::invalid_argument);

  auto v = db->verify().value();
  CHECK(v.problems.empty());
  CHECK(v.checkpoints == 2);
  std::uint64_t expiring = 0;
  for (const auto& s : v.shards) expiring += s.expiring_keys;
  CHECK(expiring == 1);
  auto g = db->gc().value();
  CHECK(g.shards.size() == 3);
  CHECK(g.damaged_checkpoints_dropped == 0);
  CHECK(db->diff(a.combined, b.combined).value().size() == 3);  // both checkpoints kept through gc
  CHECK(db->verify().value().problems.empty());
}

TEST_CASE("database: gc keeps the snapshot an open scan cursor reads, whatever was checkpointed since") {
  testing::temp_dir d("db-gc-cursor");
  auto db = must_open(options_for(d.path(), 2));
  for (int i = 0; i < 400; ++i) REQUIRE(db->put(fmt::format("k{:03}", i), "before").is_ok());
  REQUIRE(db->commit().is_ok());
  auto cursor = db->scan("", "", 16).value();
  // More commits than CHECKPOINTS retains, each rewriting every key: the
  // cursor's root is neither current nor retained.
  for (int round = 0; round < static_cast<int>(database_options{}.retained_checkpoints) + 2; ++round) {
    for (int i = 0; i < 400; i += 7) REQUIRE(db->put(fmt::format("k{:03}", i), fmt::format("after {}", round)).is_ok());
    REQUIRE(db->commit().is_ok());
  }
  auto g = db->gc().value();
  std::uint64_t reclaimed = 0;
  for (const auto& s : g.shards) reclaimed += s.bytes_reclaimed;
  CHECK(reclaimed > 0);
  int n = 0;
  for (auto more = cursor.next();; more = cursor.next()) {
    REQUIRE_MESSAGE(more.is_ok(), more.error().to_string());
    if (!*more) break;
    CHECK(cursor.key() == fmt::format("k{:03}", n));
    CHECK(cursor.value() == "before");
    ++n;
  }
  CHECK(n == 400);
}

TEST_CASE("database: commits racing gc never record a checkpoint whose tree gc dropped") {
  testing::temp_dir d("db-gc-race");
  auto options = options_for(d.path(), 4);
  options.retained_checkpoints = checkpoint_log::default_retained;
  auto db = must_open(options);
  std::atomic<int> writers_done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 40; ++round) {
        for (int i = 0; i < 20; ++i) CHECK(db->put(fmt::format("t{}-{}-{}", t, round, i), "v").is_ok());
        CHECK(db->commit().is_ok());
      }
      ++writers_done;
    });
  // A damaged checkpoint would leave the retained window after 16 more
  // commits: look after every gc.
  int gcs = 0;
  std::vector<std::string> problems;
  while (writers_done.load() < 2) {
    CHECK(db->gc().is_ok());
    ++gcs;
    auto v = db->verify().value();
    problems.insert(problems.end(), v.problems.begin(), v.problems.end());
  }
  for (auto& t : threads) t.join();
  CHECK(gcs > 0);
  CHECK_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems[0]));
  auto kept = db->checkpoints();
  REQUIRE(kept.size() == checkpoint_log::default_retained);
  CHECK(db->diff(kept.front().combined, kept.back().combined).is_ok());
}

TEST_CASE("database: every key rewritten ten times with a commit after each: the disk stays bounded without gc") {
  // The case of a service that keeps updating its data and never calls gc:
  // each shard reclaims by itself. The live data is the current version and
  // the one more commit retained by default.
  testing::temp_dir d("db-reclaim");
  auto o = options_for(d.path(), 2);
  o.shard.reclaim_min_bytes = 256 << 10;
  auto db = must_open(o);
  std::mt19937_64 rng(19);
  std::map<std::string, std::string> latest;
  auto totals = [&] {
    auto st = db->stats().value();
    std::pair<std::uint64_t, std::uint64_t> nodes_live{0, 0};
    for (const auto& u : st.usage) {
      nodes_live.first += u.node_bytes;
      nodes_live.second += u.live_node_bytes;
    }
    return nodes_live;
  };
  std::uint64_t one_round = 0;
  std::vector<database::commit_result> commits;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 8000; ++i) {
      std::string v(100, '\0');
      for (auto& c : v) c = static_cast<char>('a' + rng() % 26);
      std::string k = fmt::format("key{:05}", i);
      REQUIRE(db->put(k, v).is_ok());
      latest[k] = v;
    }
    commits.push_back(db->commit().value());
    if (round == 0) one_round = totals().first;
  }
  std::uint64_t reclaimed = 0;
  bool bounded = testing::poll_until(
      [&] {
        auto [nodes, live] = totals();
        return static_cast<double>(nodes) <= 1.5 * static_cast<double>(live) + 2 * 40;  // two pack headers
      },
      std::chrono::seconds(60));
  auto st = db->stats().value();
  auto [nodes, live] = totals();
  for (const auto& u : st.usage) reclaimed += u.reclaimed_bytes;
  CAPTURE(one_round);
  CAPTURE(nodes);
  CAPTURE(live);
  CHECK(bounded);
  CHECK(reclaimed > 0);
  // Two versions are live (the last commit and the one before it), not ten.
  CHECK(live < 3 * one_round);
  CHECK(nodes < 4 * one_round);
  for (const auto& [k, v] : latest) REQUIRE(db->get(k).value() == v);
  // The retained commits still diff: every key changed between the last two.
  auto changes = db->diff(commits[8].combined, commits[9].combined).value();
  CHECK(changes.size() == latest.size());
  // An older commit is no longer retained, and says so.
  CHECK_FALSE(db->diff(commits[0].combined, commits[9].combined).is_ok());
}

TEST_CASE("database: reclaim() gives back the garbage now, with automatic reclamation off") {
  testing::temp_dir d("db-reclaim-now");
  auto o = options_for(d.path(), 2);
  o.shard.max_space_amplification = 0;  // never by itself
  auto db = must_open(o);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3000; ++i)
      REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("{:0>90}-{}", i * 7919 + round, round)).is_ok());
    REQUIRE(db->commit().is_ok());
  }
  auto before = db->stats().value();
  std::uint64_t nodes = 0, live = 0;
  for (const auto& u : before.usage) {
    CHECK(u.reclaim_cycles == 0);
    nodes += u.node_bytes;
    live += u.live_node_bytes;
  }
  REQUIRE(nodes > live * 3 / 2);  // rounds 1 and 2 are garbage
  auto given = db->reclaim().value();
  REQUIRE(given.size() == 2);
  std::uint64_t total = 0;
  for (auto g : given) total += g;
  auto after = db->stats().value();
  std::uint64_t nodes_after = 0, live_after = 0;
  for (const auto& u : after.usage) {
    nodes_after += u.node_bytes;
    live_after += u.live_node_bytes;
  }
  CAPTURE(nodes);
  CAPTURE(nodes_after);
  CAPTURE(live_after);
  CHECK(total > 0);
  CHECK(nodes_after + total <= nodes + 4 * 40);  // what was given back is off the disk
  CHECK(static_cast<double>(nodes_after) <= 1.02 * static_cast<double>(live_after) + 4 * 40);
  CHECK(db->get("key00017").value() == fmt::format("{:0>90}-{}", 17 * 7919 + 3, 3));
}

TEST_CASE("database: stats count the misses the record cache answers; with share 0 there are none") {
  for (double share : {0.5, 0.0}) {
    CAPTURE(share);
    testing::temp_dir d("db-record-cache");
    auto o = options_for(d.path(), 2);
    o.memory_budget = std::size_t{2} << 20;  // far less than the leaves decoded
    o.shard.record_cache_share = share;
    {
      auto db = must_open(o);
      // Values of one repeated letter: leaves compress far more than 4x.
      for (int i = 0; i < 20000; ++i)
        REQUIRE(db->put(fmt::format("key{:06}", i), std::string(200, static_cast<char>('a' + i % 5))).is_ok());
      REQUIRE(db->commit().is_ok());
    }
    auto db = must_open(o);
    for (int pass = 0; pass < 2; ++pass)
      for (int i = 0; i < 20000; i += 7)
        REQUIRE(db->get(fmt::format("key{:06}", i)).value() == std::string(200, static_cast<char>('a' + i % 5)));
    std::uint64_t record_hits = 0, misses = 0;
    auto st = db->stats().value();
    for (const auto& u : st.usage) {
      record_hits += u.record_cache_hits;
      misses += u.cache_misses;
    }
    CHECK(misses > 0);
    if (share > 0)
      CHECK(record_hits > 0);
    else
      CHECK(record_hits == 0);
    CHECK(record_hits <= misses);
  }
}

// database_options::writer_spin: a lone blocked writer spins for its answer
// before it sleeps. Held inside its write (the before_write hook) it has no
// answer; released, it returns with it, whether its spin ran out first (0,
// 1 us) or most likely not (100 ms). Then writes one after the other, and
// two writers at once, all get theirs. A spin below 0 or above 100 ms is
// refused at open, naming the option. (Which of spinning and sleeping
// answered is the relay's test, answer_relay_test.cc.)
TEST_CASE("database: a lone writer's spin, run out or not, ends with its answer; bad spins are refused") {
  testing::temp_dir d("db");
  for (auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(1), std::chrono::microseconds(100'000)}) {
    std::latch released{1};
    std::atomic<bool> inside{false};
    auto o = options_for(d.path() + fmt::format("/spin-{}", spin.count()), 1);
    o.writer_spin = spin;
    o.before_write = [&](const std::string& key) {
      if (key != "hold") return;
      inside = true;
      released.wait();
    };
    auto db = must_open(o);
    std::atomic<bool> answered{false};
    std::thread writer([&] {
      CHECK(db->put("hold", "v").is_ok());
      answered = true;
    });
    REQUIRE(testing::poll_until([&] { return inside.load(); }, 30s));
    CHECK_FALSE(answered.load());  // the shard holds it: no answer yet
    released.count_down();
    writer.join();
    CHECK(answered.load());
    for (int i = 0; i < 200; ++i) REQUIRE(db->put(fmt::format("k{}", i), "x").is_ok());
    std::thread second([&] { CHECK(db->put("other", "y").is_ok()); });
    CHECK(db->put("one", "z").is_ok());
    second.join();
    CHECK(db->get("hold").value() == std::optional<std::string>("v"));
    CHECK(db->get("k199").value() == std::optional<std::string>("x"));
    CHECK(db->get("other").value() == std::optional<std::string>("y"));
  }
  for (auto bad : {std::chrono::microseconds(-1), std::chrono::microseconds(100'001)}) {
    auto o = options_for(d.path() + "/bad", 1);
    o.writer_spin = bad;
    auto db = open_database(o);
    REQUIRE_FALSE(db.is_ok());
    CHECK(db.error().code() == status_code::invalid_argument);
    CHECK(db.error().message().find("writer_spin") != std::string::npos);
  }
}
