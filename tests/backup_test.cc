// database::backup, restore_backup, verify_backup (<magnetite/backup.h>):
// incremental by Merkle walk within the catch-up bound, every version
// restored as it was, writes going on meanwhile, damage found and named,
// failed syncs and a full disk leaving the previous backup, and SIGKILL of a
// real `magnetite backup` at random moments leaving a complete backup.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/database_core.h"
#include "core/fault_env.h"
#include "engine/backup_store.h"
#include "tests/support/database_fixture.h"
#include "tests/support/magnetite_process.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

using model = std::map<std::string, std::string>;

model read_all(database& db) {
  auto all = db.range("", "", 10'000'000);  // kept: a range-for would not keep the temporary
  REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
  return model(all->begin(), all->end());
}

// A restored database's contents (opened, read, closed).
model restored(const std::string& dir) {
  auto db = must_open(options_for(dir, 2));
  return read_all(*db);
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.good());
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x20));
}

std::vector<std::string> packs_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().extension() == ".pack") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("backup: incremental within changed x depth x node size; every version restores as it was") {
  testing::temp_dir d("backup-incremental");
  const std::string dest = d.path() + "/backup";
  auto options = options_for(d.path() + "/db", 2);
  auto db = must_open(options);
  model v1;
  for (int i = 0; i < 20'000; ++i) {
    auto k = fmt::format("key{:06}", i);
    v1[k] = fmt::format("value {} {}", i, i * 7919 % 10007);
    REQUIRE(db->put(k, v1[k]).is_ok());
  }
  auto first = db->backup(dest);  // commits, then backs that checkpoint up
  REQUIRE_MESSAGE(first.is_ok(), first.error().to_string());
  CHECK(first->version == db->checkpoints().back().combined);
  CHECK(first->versions_held == 1);
  CHECK(first->nodes_shipped > 100);
  CHECK(first->depth >= 3);
  std::vector<std::uint64_t> sequences_then;
  for (std::size_t i = 0; i < 2; ++i) sequences_then.push_back(db->core().view_of(i).value()->sequence());

  // 100 keys changed: the next backup ships only the paths to them.
  model v2 = v1;
  std::mt19937_64 rng(23);
  for (int n = 0; n < 100; ++n) {
    auto k = fmt::format("key{:06}", rng() % 20'000);
    v2[k] = fmt::format("changed {}", n);
    REQUIRE(db->put(k, v2[k]).is_ok());
  }
  REQUIRE(db->tag("second").is_ok());
  auto second = db->backup(dest, "second");
  REQUIRE_MESSAGE(second.is_ok(), second.error().to_string());
  CHECK(second->label == "second");
  CHECK(second->versions_held == 2);
  const std::uint64_t max_node = options.shard.chunking.max + 64;  // a node's bytes: its entries and framing
  CAPTURE(second->bytes_shipped);
  CHECK(second->nodes_shipped > 0);
  CHECK(second->bytes_shipped <= 100 * first->depth * max_node);
  CHECK(second->bytes_shipped * 5 < first->bytes_shipped);
  // The same version again ships nothing and adds no version.
  auto again = db->backup(dest, "second");
  CHECK(again->nodes_shipped == 0);
  CHECK(again->versions_held == 2);

  auto versions = list_backup(dest).value();
  REQUIRE(versions.size() == 2);
  CHECK(versions[0].version == first->version);
  CHECK(versions[0].label.empty());
  CHECK(versions[1].label == "second");
  auto verified = verify_backup(dest).value();
  CHECK(verified.problems.empty());
  CHECK(verified.versions == 2);
  CHECK(verified.nodes >= first->nodes_shipped);
  db.reset();  // a restore needs no open database

  REQUIRE(restore_backup(dest, d.path() + "/r-newest").is_ok());
  REQUIRE(restore_backup(dest, d.path() + "/r-first", first->version.to_hex()).is_ok());
  REQUIRE(restore_backup(dest, d.path() + "/r-second", std::string_view("second")).is_ok());
  CHECK(restored(d.path() + "/r-newest") == v2);
  CHECK(restored(d.path() + "/r-first") == v1);
  CHECK(restored(d.path() + "/r-second") == v2);
  // The restored database holds the version as its retained checkpoint, and
  // numbers its writes after every write the shards had made.
  {
    auto r = must_open(options_for(d.path() + "/r-first", 2));
    REQUIRE(r->checkpoints().size() == 1);
    CHECK(r->checkpoints()[0].combined == first->version);
    CHECK(r->verify().value().problems.empty());
    for (std::size_t i = 0; i < 2; ++i) {
      std::string k = "new";
      while (r->shard_of(k) != i) k += "+";
      REQUIRE(r->put(k, "after the restore").is_ok());
      CHECK(r->core().view_of(i).value()->sequence() > sequences_then[i]);
    }
  }
  // Refused, naming why, writing nothing: a directory that exists, a
  // version the backup does not hold, a directory that holds no backup.
  auto exists = restore_backup(dest, d.path() + "/r-first");
  CHECK(exists.code() == status_code::invalid_argument);
  CHECK(restore_backup(dest, d.path() + "/r-x", std::string_view("no-such-label")).code() == status_code::not_found);
  CHECK_FALSE(std::filesystem::exists(d.path() + "/r-x"));
  CHECK(restore_backup(d.path() + "/nothing", d.path() + "/r-y").code() == status_code::not_found);
  CHECK_FALSE(std::filesystem::exists(d.path() + "/r-y"));
  // A database's directory is no backup directory, as source or destination.
  CHECK(restore_backup(d.path() + "/r-first", d.path() + "/r-z").code() == status_code::invalid_argument);
  CHECK(verify_backup(d.path() + "/r-first").error().code() == status_code::invalid_argument);
  {
    auto r = must_open(options_for(d.path() + "/r-first", 2));
    CHECK(r->backup(d.path() + "/r-first").error().code() == status_code::invalid_argument);
    CHECK(r->verify().value().problems.empty());
  }
}

TEST_CASE("backup: durable writes go on while a backup runs; the backup holds exactly its version") {
  testing::temp_dir d("backup-online");
  auto db = must_open(options_for(d.path() + "/db", 2));
  model v;
  for (int i = 0; i < 30'000; ++i) {
    auto k = fmt::format("key{:06}", i);
    v[k] = std::string(100, static_cast<char>('a' + i % 26));
    REQUIRE(db->put(k, v[k]).is_ok());
  }
  REQUIRE(db->tag("v").is_ok());
  std::atomic<bool> backing_up{true};
  std::atomic<int> during{0};
  std::atomic<bool> write_failed{false};
  std::thread writer([&] {
    for (int i = 0; backing_up.load(); ++i) {
      if (!db->put(fmt::format("w{:06}", i), "written during the backup").is_ok()) write_failed = true;
      ++during;
    }
  });
  while (during.load() == 0) std::this_thread::yield();  // the writer is under way
  const int before = during.load();
  auto r = db->backup(d.path() + "/backup", "v");
  const int after = during.load();
  backing_up = false;
  writer.join();
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  CHECK_FALSE(write_failed.load());
  CHECK(after > before);  // writes were acknowledged while the backup ran
  db.reset();
  REQUIRE(restore_backup(d.path() + "/backup", d.path() + "/restored").is_ok());
  CHECK(restored(d.path() + "/restored") == v);
}

TEST_CASE("backup: with a rate, the copy writes no faster than it; the backup is the same") {
  testing::temp_dir d("backup-paced");
  auto db = must_open(options_for(d.path() + "/db", 2));
  model v;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20'000; ++i) {
    auto k = fmt::format("key{:06}", i);
    std::string value(100, 'a');
    for (auto& c : value) c = static_cast<char>('a' + rng() % 26);  // compresses, but not to nothing
    v[k] = value;
    REQUIRE(db->put(k, v[k]).is_ok());
  }
  backup_options o;
  o.max_bytes_per_second = 2u << 20;
  const std::string dest = d.path() + "/backup";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = db->backup(dest, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  // What the copy wrote: the packs less their headers (40 bytes a pack, 36
  // a record). Paced, that took at least its bytes / rate, less the tenth of
  // a second the pacer may run ahead.
  std::uint64_t written = 0;
  auto packs = packs_in(dest);
  for (const auto& p : packs) written += std::filesystem::file_size(p);
  written -= 40 * packs.size() + 36 * r->nodes_shipped;
  REQUIRE(written > (1u << 20));  // enough to be paced for a while
  const double rate = static_cast<double>(o.max_bytes_per_second);
  MESSAGE(fmt::format("{} bytes written in {:.2f} s", written, took));
  CHECK(took >= (static_cast<double>(written) - rate / 10) / rate);
  db.reset();
  REQUIRE(restore_backup(dest, d.path() + "/restored").is_ok());
  CHECK(restored(d.path() + "/restored") == v);
}

TEST_CASE(
    "backup: a flipped byte is found by verify and refuses the restore, naming the file; nothing usable is left") {
  testing::temp_dir d("backup-damage");
  const std::string dest = d.path() + "/backup";
  {
    auto db = must_open(options_for(d.path() + "/db", 2));
    for (int i = 0; i < 5000; ++i) REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("v{}", i)).is_ok());
    REQUIRE(db->backup(dest).is_ok());
  }
  auto packs = packs_in(dest);
  REQUIRE(packs.size() >= 2);  // a pack a shard at least
  for (const auto& pack : packs) {
    auto size = std::filesystem::file_size(pack);
    flip_byte(pack, size / 2);
    auto v = verify_backup(dest);
    REQUIRE(v.is_ok());
    bool named = false;
    for (const auto& p : v->problems) named = named || p.find(pack) != std::string::npos;
    CHECK_MESSAGE(named, pack);
    const std::string target = d.path() + "/restored";
    auto s = restore_backup(dest, target);
    CHECK(s.code() == status_code::corruption);
    CHECK_MESSAGE(s.message().find(pack) != std::string::npos, s.message());
    CHECK_FALSE(std::filesystem::exists(target));
    CHECK_FALSE(std::filesystem::exists(target + ".restoring"));
    flip_byte(pack, size / 2);
  }
  CHECK(verify_backup(dest).value().problems.empty());
  const std::string manifest = dest + "/BACKUP";
  flip_byte(manifest, std::filesystem::file_size(manifest) / 2);
  auto v = verify_backup(dest);
  REQUIRE_FALSE(v.is_ok());
  CHECK(v.error().code() == status_code::corruption);
  CHECK(v.error().message().find(manifest) != std::string::npos);
  CHECK(restore_backup(dest, d.path() + "/restored").code() == status_code::corruption);
  CHECK_FALSE(std::filesystem::exists(d.path() + "/restored"));
}

TEST_CASE("backup: a failed sync, a failed directory sync or a full disk leaves the previous backup whole") {
  fault_env fe;
  REQUIRE(fe.create_dir("/b").is_ok());
  auto options = options_for("/db", 2);
  options.fs = &fe;
  auto db = must_open(options);
  for (int i = 0; i < 3000; ++i) REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("v{}", i)).is_ok());
  auto first = db->backup("/b/backup");
  REQUIRE_MESSAGE(first.is_ok(), first.error().to_string());
  int refused[3] = {0, 0, 0};  // by kind: a file sync, a directory sync, a short write on a full disk
  for (int fault = 0; fault < 9; ++fault) {
    CAPTURE(fault);
    for (int i = 0; i < 3000; i += 10) REQUIRE(db->put(fmt::format("key{:05}", i), fmt::format("f{}", fault)).is_ok());
    fe.target_paths("/b/backup");
    if (fault % 3 == 0) fe.fail_sync(1 + fault / 3);
    if (fault % 3 == 1) fe.fail_dir_sync(1 + fault / 3);
    if (fault % 3 == 2) fe.fail_write(1 + fault / 3, status_code::no_space, 3);
    auto r = db->backup("/b/backup");
    fe.clear_faults();
    if (r.is_ok()) continue;  // the fault hit nothing the backup did
    ++refused[fault % 3];
    // What the directory holds is a complete backup: the one before, or
    // this one if only the last directory sync failed.
    auto b = backup_store::open(fe, "/b/backup");
    REQUIRE_MESSAGE(b.is_ok(), b.error().to_string());
    CHECK((*b)->check().problems.empty());
    const std::size_t held = (*b)->manifest().versions.size();
    b->reset();
    // The backup goes on from there.
    auto next = db->backup("/b/backup");
    REQUIRE_MESSAGE(next.is_ok(), next.error().to_string());
    CHECK((next->versions_held == held || next->versions_held == held + 1));
    auto reopened = backup_store::open(fe, "/b/backup");
    REQUIRE(reopened.is_ok());
    CHECK((*reopened)->manifest().find(next->version.to_hex()) != nullptr);
  }
  for (int kind = 0; kind < 3; ++kind) CHECK_MESSAGE(refused[kind] >= 1, kind);
  auto b = backup_store::open(fe, "/b/backup");
  REQUIRE(b.is_ok());
  CHECK((*b)->check().problems.empty());
}

TEST_CASE("backup: SIGKILL of `magnetite backup` at random moments leaves the previous backup or the new one") {
  testing::temp_dir d("backup-kill");
  const std::string data = d.path() + "/db", dest = d.path() + "/backup";
  auto tool = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--data", data});
    return testing::run_magnetite(args, d.path() + "/out");
  };
  auto contents = [&] {
    auto db = must_open(options_for(data, 2));
    return read_all(*db);
  };
  const std::string keys = "60000";
  REQUIRE(tool({"--shards", "2", "load", "--keys", keys}).first == 0);
  model newest = contents();  // what the newest complete backup holds
  auto began = std::chrono::steady_clock::now();
  REQUIRE(tool({"backup", dest}).first == 0);
  // A whole backup's time, process start included: the kills land within it.
  const auto whole = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began);
  std::mt19937_64 rng(7);
  std::size_t versions = 1;
  int killed = 0;
  for (int round = 1; round <= 6; ++round) {
    CAPTURE(round);
    // Every value rewritten: the next backup ships a whole new tree.
    REQUIRE(tool({"load", "--keys", keys, "--value-seed", std::to_string(100 + round)}).first == 0);
    model now = contents();
    REQUIRE(now != newest);
    pid_t pid = testing::spawn_magnetite({"--data", data, "backup", dest}, d.path() + "/backup-out");
    // The moment of the kill, not a wait for anything.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<std::uint64_t>(whole.count() + 1)));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    killed += WIFSIGNALED(wstatus) ? 1 : 0;
    auto v = verify_backup(dest);
    REQUIRE_MESSAGE(v.is_ok(), v.error().to_string());
    CHECK(v->problems.empty());
    CHECK((v->versions == versions || v->versions == versions + 1));
    if (v->versions == versions + 1) newest = now;
    versions = v->versions;
    const std::string target = fmt::format("{}/restored-{}", d.path(), round);
    REQUIRE(restore_backup(dest, target).is_ok());
    CHECK(restored(target) == newest);
    std::filesystem::remove_all(target);
  }
  CHECK(killed >= 3);  // most kills landed before the backup ended
  // A whole backup after all that completes and holds the latest values.
  REQUIRE(tool({"backup", dest}).first == 0);
  REQUIRE(restore_backup(dest, d.path() + "/final").is_ok());
  CHECK(restored(d.path() + "/final") == contents());
}
