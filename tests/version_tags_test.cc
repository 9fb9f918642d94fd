// version_tags: the named versions of a database (TAGS), on fault_env: the
// names survive a crash whole or not at all, every damaged byte refuses the
// file, bad names are refused and change nothing. Then database::tag on a
// whole database: a named version outlives retention, gc, reclamation and a
// reopen, and goes with untag.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "core/fault_env.h"
#include "engine/checkpoint_log.h"
#include "engine/version_tags.h"
#include "tests/support/database_fixture.h"
#include "tests/support/made_checkpoint.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;

namespace {

const std::string dir = "/db";
const std::string path = "/db/TAGS";

checkpoint make(int i, std::size_t shards = 3) { return testing::made_checkpoint(i, shards); }

version_tags must_open(env& e, std::size_t shards = 3) {
  auto t = version_tags::open(e, dir, shards);
  REQUIRE_MESSAGE(t.is_ok(), t.error().to_string());
  return std::move(*t);
}

// name -> combined root
std::map<std::string, hash128> names_of(const version_tags& t) {
  std::map<std::string, hash128> out;
  for (const auto& [name, c] : t.entries()) out[name] = c.combined;
  return out;
}

}  // namespace

TEST_CASE("version_tags: names survive a reopen, by name and by version; a name is set once") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  auto tags = must_open(fe);
  CHECK(tags.entries().empty());
  REQUIRE(tags.set("v1.0", make(1)).is_ok());
  REQUIRE(tags.set("nightly_2026-12-03", make(2)).is_ok());
  REQUIRE(tags.set("also-v1", make(1)).is_ok());
  CHECK(tags.set("v1.0", make(1)).is_ok());  // the same again: nothing to do
  auto taken = tags.set("v1.0", make(3));
  CHECK(taken.code() == status_code::invalid_argument);
  CHECK(taken.message().find("already names") != std::string::npos);
  checkpoint wrong = make(4);
  wrong.combined = make(5).combined;
  CHECK(tags.set("wrong", wrong).code() == status_code::invalid_argument);
  CHECK(tags.set("two-shards", make(6, 2)).code() == status_code::invalid_argument);
  fe.crash();  // only what was synced remains
  auto again = must_open(fe);
  CHECK(names_of(again) == std::map<std::string, hash128>{{"also-v1", make(1).combined},
                                                          {"nightly_2026-12-03", make(2).combined},
                                                          {"v1.0", make(1).combined}});
  CHECK(again.find("v1.0")->roots == make(1).roots);
  CHECK(again.find(make(2).combined) != nullptr);
  CHECK(again.find(make(3).combined) == nullptr);
  CHECK(again.find("v2") == nullptr);
  CHECK(again.roots_of(1) == std::vector<hash128>{make(1).roots[1], make(2).roots[1], make(1).roots[1]});
  CHECK(again.check_file().empty());

  auto removed = again.remove("v1.0");
  REQUIRE(removed.is_ok());
  CHECK(removed->combined == make(1).combined);
  CHECK(again.remove("v1.0").error().code() == status_code::not_found);
  fe.crash();
  CHECK(names_of(must_open(fe)).size() == 2);
}

TEST_CASE("version_tags: a bad name is refused, saying why, and nothing is written") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  auto tags = must_open(fe);
  REQUIRE(tags.set("kept", make(1)).is_ok());
  auto before = fe.contents(path);
  for (std::string bad :
       {std::string(), std::string(65, 'a'), std::string("has space"), std::string("a/b"), std::string("-flag"),
        std::string(".hidden"), std::string("caf\xc3\xa9"), std::string("nul\0in", 6), make(1).combined.to_hex()}) {
    auto s = tags.set(bad, make(2));
    CHECK_MESSAGE(s.code() == status_code::invalid_argument, bad);
    CHECK(tags.remove(bad).error().code() == status_code::invalid_argument);
  }
  CHECK(version_tags::check_name(std::string(64, 'a')).is_ok());
  CHECK(fe.contents(path) == before);
  CHECK(names_of(tags).size() == 1);
}

TEST_CASE("version_tags: the most names there may be, and one more is refused") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  auto tags = must_open(fe, 1);
  for (std::size_t i = 0; i < version_tags::max_tags; ++i)
    REQUIRE(tags.set(fmt::format("t{}", i), make(static_cast<int>(i), 1)).is_ok());
  CHECK(tags.set("one-more", make(-1, 1)).code() == status_code::invalid_argument);
  CHECK(must_open(fe, 1).entries().size() == version_tags::max_tags);
}

TEST_CASE("version_tags: every flipped byte refuses the file, naming it; a newer format is not_supported") {
  fault_env fe;
  REQUIRE(fe.create_dir(dir).is_ok());
  {
    auto tags = must_open(fe);
    REQUIRE(tags.set("a", make(1)).is_ok());
    REQUIRE(tags.set("b", make(2)).is_ok());
  }
  const std::string good = *fe.contents(path);
  for (std::uint64_t at = 0; at < good.size(); ++at) {
    REQUIRE(fe.flip_bit(path, at, static_cast<int>(at % 7)));
    auto t = version_tags::open(fe, dir, 3);
    CHECK_MESSAGE(!t.is_ok(), "byte ", at);
    if (!t.is_ok()) {
      CHECK(t.error().message().find(path) != std::string::npos);
      CHECK((t.error().code() == status_code::corruption || t.error().code() == status_code::not_supported));
    }
    REQUIRE(fe.flip_bit(path, at, static_cast<int>(at % 7)));
  }
  // Shorter: every cut but the whole file is refused too.
  for (std::size_t keep = 0; keep < good.size(); ++keep) {
    auto f = fe.open(path, open_mode::create_truncate);
    REQUIRE(f.is_ok());
    REQUIRE((*f)->append(good.substr(0, keep)).is_ok());
    f->reset();
    CHECK_MESSAGE(version_tags::open(fe, dir, 3).error().code() == status_code::corruption, "kept ", keep);
  }
  auto f = fe.open(path, open_mode::create_truncate);
  REQUIRE((*f)->append("magnetite-tags 2\nwhatever comes next\n").is_ok());
  f->reset();
  auto newer = version_tags::open(fe, dir, 3);
  CHECK(newer.error().code() == status_code::not_supported);
  // Another shard count: the roots do not fit.
  REQUIRE((*fe.open(path, open_mode::create_truncate))->append(good).is_ok());
  CHECK(version_tags::open(fe, dir, 4).error().code() == status_code::corruption);
  CHECK(version_tags::open(fe, dir, 3).is_ok());
}

TEST_CASE("version_tags: a crash at any step of a change leaves the names before it or after it") {
  for (int step = 1; step <= 3; ++step) {
    for (auto mode : {fault_env::unsynced::lose, fault_env::unsynced::keep, fault_env::unsynced::random,
                      fault_env::unsynced::reorder}) {
      CAPTURE(step);
      fault_env fe;
      REQUIRE(fe.create_dir(dir).is_ok());
      {
        auto tags = must_open(fe);
        REQUIRE(tags.set("old", make(1)).is_ok());
      }
      const auto before = names_of(must_open(fe));
      auto tags = must_open(fe);
      // Step 1: the temporary file's sync fails; 2: the directory's; 3: none.
      if (step == 1) fe.fail_sync(1);
      if (step == 2) fe.fail_dir_sync(1);
      status s = tags.set("new", make(2));
      CHECK(s.is_ok() == (step == 3));
      auto expected_after = before;
      expected_after["new"] = make(2).combined;
      // What the caller sees matches what it was told.
      CHECK(names_of(tags) == (s.is_ok() ? expected_after : before));
      fe.crash(mode, static_cast<std::uint64_t>(step) * 7);
      auto reopened = names_of(must_open(fe));
      CHECK((reopened == before || reopened == expected_after));
      if (s.is_ok()) CHECK(reopened == expected_after);  // acknowledged: never lost
    }
  }
}

// ---- on a whole database ----

namespace {

using model = std::map<std::string, std::string>;

model read_all(const snapshot& s) {
  auto all = s.range("", "", 1'000'000);  // kept: a range-for would not keep the temporary
  REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
  return model(all->begin(), all->end());
}

std::uint64_t bytes_reclaimed(const database_gc_report& g) {
  std::uint64_t n = 0;
  for (const auto& s : g.shards) n += s.bytes_reclaimed;
  return n;
}

}  // namespace

TEST_CASE("database: a tagged version outlives retention, gc, reclamation and a reopen; untag lets it go") {
  testing::temp_dir d("db-tags");
  auto options = testing::options_for(d.path(), 2);
  options.shard.cache_bytes = 16 << 10;  // reads come from the node files, not a cache
  options.shard.reclaim_min_bytes = 64 << 10;
  model v1;
  hash128 tagged;
  {
    auto db = testing::must_open(options);
    for (int i = 0; i < 2000; ++i) {
      auto k = fmt::format("key{:05}", i);
      v1[k] = fmt::format("{:0>90}", i);
      REQUIRE(db->put(k, v1[k]).is_ok());
    }
    // Without a version, tag commits first: every acknowledged write is in it.
    auto named = db->tag("release-1");
    REQUIRE_MESSAGE(named.is_ok(), named.error().to_string());
    tagged = named->combined;
    CHECK(db->checkpoints().back().combined == tagged);
    CHECK(db->tag("same-again", tagged).is_ok());
    CHECK(db->tag("release-1", tagged).is_ok());
    CHECK(db->tag("release-1").is_ok());  // nothing written since: its commit makes the same version
    REQUIRE(db->put("key00000", "changed").is_ok());
    CHECK(db->tag("release-1").error().code() == status_code::invalid_argument);  // the commit made another
    // Rewrites push it out of the retained checkpoints; gc and automatic
    // reclamation then run without it in CHECKPOINTS.
    for (int round = 0; round < 6; ++round) {
      for (int i = 0; i < 2000; i += 2)
        REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("{:0>90}-{}", i, round)).is_ok());
      REQUIRE(db->commit().is_ok());
    }
    for (const auto& c : db->checkpoints()) REQUIRE(c.combined != tagged);
    CHECK(bytes_reclaimed(db->gc().value()) > 0);
    REQUIRE(db->reclaim().is_ok());
    auto at_name = db->at("release-1");
    REQUIRE_MESSAGE(at_name.is_ok(), at_name.error().to_string());
    CHECK(at_name->version() == tagged);
    CHECK(read_all(*at_name) == v1);
    auto changes = db->diff(tagged, db->checkpoints().back().combined).value();
    CHECK(changes.size() == 1000);  // key00000 too: rewritten by every round
    auto stats = db->stats().value();
    REQUIRE(stats.tags.size() == 2);
    CHECK(stats.tags[0].name == "release-1");
    CHECK(stats.tags[1].name == "same-again");
    auto report = db->verify().value();
    CHECK(report.problems.empty());
    CHECK(report.tags == 2);
  }
  auto db = testing::must_open(options);
  REQUIRE(db->tags().size() == 2);
  CHECK(db->tags()[0].version.combined == tagged);
  CHECK(db->resolve("release-1").value() == tagged);
  CHECK(db->resolve(tagged.to_hex()).value() == tagged);
  CHECK(read_all(db->at(tagged).value()) == v1);

  auto live = [&] { return testing::usage_total(*db, &shard_usage::live_node_bytes); };
  const std::uint64_t live_tagged = live();
  // One name gone: the other still keeps the version.
  REQUIRE(db->untag("release-1").is_ok());
  CHECK(db->untag("release-1").code() == status_code::not_found);
  CHECK(db->at("release-1").error().code() == status_code::not_found);
  REQUIRE(db->gc().is_ok());
  CHECK(live() == live_tagged);
  CHECK(read_all(db->at("same-again").value()) == v1);
  // The last: the next gc takes its nodes.
  REQUIRE(db->untag("same-again").is_ok());
  CHECK(live() < live_tagged);
  CHECK(bytes_reclaimed(db->gc().value()) > 0);
  CHECK(db->at(tagged).error().code() == status_code::not_found);
  CHECK(db->tags().empty());
}

TEST_CASE("database: naming a version that is neither retained nor named, or a bad name, changes nothing") {
  testing::temp_dir d("db-tags-refused");
  auto db = testing::must_open(testing::options_for(d.path(), 2));
  REQUIRE(db->put("a", "1").is_ok());
  auto c = db->commit().value();
  auto unknown = db->tag("x", hash128::of(std::string_view("no such version")));
  CHECK(unknown.error().code() == status_code::not_found);
  CHECK(db->tag("x", c.roots[0]).error().code() == status_code::not_found);  // a shard's root is no version
  CHECK(db->tag("bad name").error().code() == status_code::invalid_argument);
  CHECK(db->checkpoints().size() == 1);  // the bad name was refused before any commit
  CHECK(db->tag(c.combined.to_hex(), c.combined).error().code() == status_code::invalid_argument);
  CHECK(db->resolve("nothing-named-so").error().code() == status_code::not_found);
  CHECK(db->resolve("not a name").error().code() == status_code::invalid_argument);
  CHECK(db->tags().empty());
  CHECK_FALSE(std::filesystem::exists(d.path() + "/TAGS"));
}

TEST_CASE("database: a damaged TAGS refuses the open, naming the file; nothing is dropped") {
  testing::temp_dir d("db-tags-damaged");
  auto options = testing::options_for(d.path(), 2);
  {
    auto db = testing::must_open(options);
    REQUIRE(db->put("a", "1").is_ok());
    REQUIRE(db->tag("kept").is_ok());
  }
  const std::string tags_path = d.path() + "/TAGS";
  std::string text;
  {
    std::ifstream in(tags_path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(text.size() > 40);
  std::string damaged = text;
  damaged[30] ^= 0x04;
  std::ofstream(tags_path, std::ios::binary | std::ios::trunc) << damaged;
  auto refused = open_database(options);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.error().code() == status_code::corruption);
  CHECK(refused.error().message().find(tags_path) != std::string::npos);
  std::ofstream(tags_path, std::ios::binary | std::ios::trunc) << text;
  auto db = testing::must_open(options);
  CHECK(db->at("kept").value().get("a").value() == std::optional<std::string>("1"));
}
