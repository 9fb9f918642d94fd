// database::at (<magnetite/snapshot.h>): a retained checkpoint read as its
// commit left it, against a model of every version; the pin that keeps it
// readable after it leaves retention, through gc and reclamation; roots that
// are no retained checkpoint's refused.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/database_core.h"
#include "tests/support/database_fixture.h"
#include "tests/support/poll.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace std::chrono_literals;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

using model = std::map<std::string, std::string>;

// Everything the snapshot's range and its scan (in small chunks) return.
model read_all(const snapshot& s) {
  model by_range;
  auto all = s.range("", "", 100000);  // kept: a range-for would not keep the temporary
  REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
  for (auto& [k, v] : *all) by_range[k] = v;
  model by_scan;
  auto c = s.scan("", "", 7).value();
  for (auto more = c.next();; more = c.next()) {
    REQUIRE_MESSAGE(more.is_ok(), more.error().to_string());
    if (!*more) break;
    by_scan[c.key()] = c.value();
  }
  CHECK(by_range == by_scan);
  return by_range;
}

// Every key a model ever held reads as the model says (absent included).
void check_gets(const snapshot& s, const model& expected, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    auto got = s.get(k);
    REQUIRE_MESSAGE(got.is_ok(), got.error().to_string());
    auto it = expected.find(k);
    CHECK_MESSAGE(*got == (it == expected.end() ? std::nullopt : std::optional<std::string>(it->second)), k);
  }
}

}  // namespace

TEST_CASE("snapshot: each retained checkpoint reads as its commit left it, whatever was written since") {
  testing::temp_dir d("snapshot-versions");
  auto options = options_for(d.path(), 3);
  options.retained_checkpoints = 8;  // every version below stays retained
  auto db = must_open(options);
  std::mt19937_64 rng(23);
  model current;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(fmt::format("k{:04}", i));
  std::vector<std::pair<hash128, model>> versions;
  for (int round = 0; round < 5; ++round) {
    for (int n = 0; n < 120; ++n) {
      const auto& k = keys[rng() % keys.size()];
      if (rng() % 4 == 0) {
        REQUIRE(db->del(k).is_ok());
        current.erase(k);
      } else {
        auto v = fmt::format("r{}-{}", round, rng() % 1000);
        // Some with a TTL far beyond the test: they read like any value.
        REQUIRE(db->put(k, v, rng() % 5 == 0 ? std::optional(std::chrono::nanoseconds(1h)) : std::nullopt).is_ok());
        current[k] = v;
      }
    }
    versions.emplace_back(db->commit().value().combined, current);
  }
  // Written after the last commit: in no checkpoint.
  REQUIRE(db->put("k0000", "uncommitted").is_ok());
  REQUIRE(db->del("k0001").is_ok());
  for (const auto& [version, expected] : versions) {
    auto s = db->at(version);
    REQUIRE_MESSAGE(s.is_ok(), s.error().to_string());
    CHECK(s->version() == version);
    CHECK(read_all(*s) == expected);
    check_gets(*s, expected, keys);
  }
  // The versions differ, so a snapshot that read the current trees would fail above.
  CHECK(versions.front().second != versions.back().second);
  CHECK(db->get("k0000").value() == std::optional<std::string>("uncommitted"));

  // Bad input: as the database's own reads refuse it.
  auto s = db->at(versions.back().first).value();
  CHECK(s.get(std::string("\xff\xff", 2) + "state").error().code() == status_code::invalid_argument);
  CHECK(s.get("").error().code() == status_code::invalid_argument);
  CHECK(s.get("k0002", std::string_view()).error().code() == status_code::invalid_argument);
  CHECK(s.range("k0100", "k0050", 10).value().empty());
}

TEST_CASE("snapshot: it keeps its checkpoint readable after retention, gc and reclamation drop the rest") {
  testing::temp_dir d("snapshot-pin");
  auto db = must_open(options_for(d.path(), 2));
  model before;
  for (int i = 0; i < 400; ++i) {
    auto k = fmt::format("k{:03}", i);
    REQUIRE(db->put(k, "before").is_ok());
    before[k] = "before";
  }
  auto first = db->commit().value().combined;
  std::optional<snapshot> s = db->at(first).value();
  // More commits than CHECKPOINTS retains, each rewriting keys: the
  // snapshot's checkpoint is neither current nor retained.
  for (int round = 0; round < static_cast<int>(database_options{}.retained_checkpoints) + 2; ++round) {
    for (int i = 0; i < 400; i += 7) REQUIRE(db->put(fmt::format("k{:03}", i), fmt::format("after {}", round)).is_ok());
    REQUIRE(db->commit().is_ok());
  }
  for (const auto& c : db->checkpoints()) CHECK(c.combined != first);
  CHECK(db->at(first).error().code() == status_code::not_found);
  auto g = db->gc().value();
  std::uint64_t reclaimed = 0;
  for (const auto& sh : g.shards) reclaimed += sh.bytes_reclaimed;
  CHECK(reclaimed > 0);  // the versions between went
  REQUIRE(db->reclaim().is_ok());
  CHECK(read_all(*s) == before);

  // Released: its nodes go with the next gc.
  s.reset();
  auto after = db->gc().value();
  std::uint64_t freed = 0;
  for (const auto& sh : after.shards) freed += sh.bytes_reclaimed;
  CHECK(freed > 0);
}

TEST_CASE("snapshot: a root that is no retained checkpoint's is refused by name, and nothing changes") {
  testing::temp_dir d("snapshot-refused");
  auto db = must_open(options_for(d.path(), 2));
  REQUIRE(db->put("a", "1").is_ok());
  // A key whose own shard is not a's, written to a's shard by routing.
  std::string routed = "routed";
  while (db->shard_of(routed) == db->shard_of("a")) routed += "+";
  REQUIRE(db->put(routed, "2", std::nullopt, std::string_view("a")).is_ok());
  auto c = db->commit().value();
  auto unknown = db->at(hash128::of(std::string_view("no such version")));
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.error().code() == status_code::not_found);
  CHECK(unknown.error().message().find("retained checkpoint") != std::string::npos);
  // A shard's own root is not a version of the database.
  CHECK(db->at(c.roots[0]).error().code() == status_code::not_found);
  CHECK(db->get("a").value() == std::optional<std::string>("1"));
  CHECK(db->at(c.combined).value().get("a").value() == std::optional<std::string>("1"));
  CHECK(db->at(c.combined).value().get(routed, std::string_view("a")).value() == std::optional<std::string>("2"));
}

TEST_CASE("snapshot: a value that expires after its commit is absent from the snapshot once its deadline passes") {
  testing::temp_dir d("snapshot-ttl");
  std::atomic<std::uint64_t> now{1'000'000'000};
  auto options = options_for(d.path(), 2);
  options.shard.clock = [&] { return now.load(); };
  auto db = must_open(options);
  REQUIRE(db->put("short", "lives 10 s", std::chrono::nanoseconds(10s)).is_ok());
  REQUIRE(db->put("long", "lives an hour", std::chrono::nanoseconds(1h)).is_ok());
  REQUIRE(db->put("plain", "never expires").is_ok());
  auto s = db->at(db->commit().value().combined).value();
  CHECK(read_all(s) == model{{"long", "lives an hour"}, {"plain", "never expires"}, {"short", "lives 10 s"}});
  now += std::chrono::nanoseconds(11s).count();
  // The checkpoint still holds the value; the read judges it by the clock now.
  CHECK(s.get("short").value() == std::nullopt);
  CHECK(read_all(s) == model{{"long", "lives an hour"}, {"plain", "never expires"}});
}

TEST_CASE("snapshot: automatic reclamation keeps what a snapshot reads while it lives") {
  testing::temp_dir d("snapshot-auto-reclaim");
  auto options = options_for(d.path(), 2);
  options.shard.reclaim_min_bytes = 64 << 10;
  options.shard.cache_bytes = 16 << 10;  // the snapshot reads its nodes from the packs, not a cache
  auto db = must_open(options);
  model before;
  for (int i = 0; i < 3000; ++i) {
    auto k = fmt::format("key{:05}", i);
    before[k] = fmt::format("{:0>90}", i);
    REQUIRE(db->put(k, before[k]).is_ok());
  }
  auto version = db->commit().value().combined;
  auto s = db->at(version).value();
  auto reclaimed = [&] { return testing::usage_total(*db, &shard_usage::reclaimed_bytes); };
  const std::uint64_t reclaimed_before = reclaimed();
  // Every key rewritten, round after round, until the snapshot's checkpoint
  // has left the retained ones and the shards have reclaimed by themselves.
  const int rounds_to_leave = static_cast<int>(database_options{}.retained_checkpoints) + 1;
  int round = 0;
  for (; round < 60 && (round < rounds_to_leave || reclaimed() == reclaimed_before); ++round) {
    for (int i = 0; i < 3000; ++i)
      REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("{:0>90}-{}", i, round)).is_ok());
    REQUIRE(db->commit().is_ok());
  }
  CAPTURE(round);
  for (const auto& c : db->checkpoints()) REQUIRE(c.combined != version);
  REQUIRE(reclaimed() > reclaimed_before);
  CHECK(read_all(s) == before);
}

TEST_CASE("snapshot: it still reads its checkpoint after its shard's actor died and the restarted shard ran gc") {
  testing::temp_dir d("snapshot-restart");
  auto options = options_for(d.path(), 2);
  options.restart_backoff = 1ms;
  options.before_write = [](const std::string& key) {
    if (key.starts_with("boom")) throw std::runtime_error("injected");
  };
  auto db = must_open(options);
  model before;
  for (int i = 0; i < 400; ++i) {
    auto k = fmt::format("k{:03}", i);
    REQUIRE(db->put(k, "before").is_ok());
    before[k] = "before";
  }
  auto s = db->at(db->commit().value().combined).value();
  std::vector<std::filesystem::path> packs_then;
  for (const auto& f : std::filesystem::directory_iterator(d.path() + "/shard-000/nodes"))
    packs_then.push_back(f.path());
  REQUIRE_FALSE(packs_then.empty());

  std::string boom = "boom";
  while (db->shard_of(boom) != 0) boom += "+";
  CHECK_FALSE(db->put(boom, "x").is_ok());
  std::string on_0 = "k000";
  while (db->shard_of(on_0) != 0) on_0 = fmt::format("k{:03}", std::stoi(on_0.substr(1)) + 3);
  status last = status::ok();
  bool back = testing::poll_until(
      [&] {
        last = db->put(on_0, "after the restart");
        return last.is_ok();
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(back, last.to_string());
  auto st = db->stats();
  REQUIRE_MESSAGE(st.is_ok(), st.error().to_string());
  REQUIRE(st->restarts[0] == 1);
  // The restarted shard never saw the snapshot; its checkpoint leaves the
  // retained ones, and gc rewrites every node file shard 0 had.
  const int rounds = static_cast<int>(database_options{}.retained_checkpoints) + 2;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 400; i += 3) REQUIRE(db->put(fmt::format("k{:03}", i), fmt::format("after {}", round)).is_ok());
    REQUIRE(db->commit().is_ok());
  }
  REQUIRE(db->gc().is_ok());
  std::size_t gone = 0;
  for (const auto& p : packs_then) gone += std::filesystem::exists(p) ? 0 : 1;
  CHECK(gone > 0);
  // It reads through the node files it opened, which stay readable after
  // their removal until it is destroyed.
  CHECK(read_all(s) == before);
  CHECK(db->get(on_0).value() == std::optional<std::string>(fmt::format("after {}", rounds - 1)));
}
