// fault_env must model a power cut faithfully, or the crash tests built on it
// prove nothing. These tests pin down each fault it injects.
#include <doctest/doctest.h>

#include "core/fault_env.h"

using namespace magnetite;

namespace {
std::unique_ptr<file> must_open(fault_env& e, const std::string& p, open_mode m = open_mode::open_or_create) {
  auto f = e.open(p, m);
  REQUIRE(f.is_ok());
  return std::move(*f);
}
}  // namespace

TEST_CASE("fault_env: a crash keeps exactly what sync and sync_dir made durable") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  REQUIRE(f->append("durable").is_ok());
  REQUIRE(f->sync().is_ok());
  REQUIRE(e.sync_dir("/d").is_ok());
  REQUIRE(f->append("+lost").is_ok());
  auto g = must_open(e, "/d/unlinked");  // entry never made durable
  REQUIRE(g->append("data").is_ok());
  REQUIRE(g->sync().is_ok());
  CHECK(e.contents("/d/a") == "durable+lost");

  e.crash();
  CHECK(e.contents("/d/a") == "durable");
  CHECK_FALSE(e.exists("/d/unlinked").value());
  // Handles from before the crash are dead.
  CHECK_FALSE(f->append("x").is_ok());
  CHECK_FALSE(f->size().is_ok());
}

TEST_CASE("fault_env: unsynced renames and removals are undone by a crash") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/old");
  REQUIRE(f->append("x").is_ok());
  REQUIRE(f->sync().is_ok());
  auto k = must_open(e, "/d/keep");
  REQUIRE(e.sync_dir("/d").is_ok());
  REQUIRE(e.rename("/d/old", "/d/new").is_ok());
  REQUIRE(e.remove("/d/keep").is_ok());
  CHECK(e.list("/d").value() == std::vector<std::string>{"new"});
  e.crash();
  CHECK(e.list("/d").value() == std::vector<std::string>{"keep", "old"});
  CHECK(e.contents("/d/old") == "x");

  // After sync_dir the rename is durable.
  REQUIRE(e.rename("/d/old", "/d/new").is_ok());
  REQUIRE(e.sync_dir("/d").is_ok());
  e.crash(fault_env::unsynced::lose);
  CHECK(e.list("/d").value() == std::vector<std::string>{"keep", "new"});
}

TEST_CASE("fault_env: the n-th sync fails, and its data never becomes durable") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  REQUIRE(e.sync_dir("/d").is_ok());
  e.fail_sync(2);
  REQUIRE(f->append("one").is_ok());
  REQUIRE(f->sync().is_ok());
  REQUIRE(f->append("two").is_ok());
  status s = f->sync();
  CHECK(s.code() == status_code::io_error);
  CHECK(e.contents("/d/a") == "onetwo");  // the page cache still shows it
  // A later successful sync does not resurrect the dropped pages (as on Linux).
  REQUIRE(f->append("three").is_ok());
  REQUIRE(f->sync().is_ok());
  e.crash();
  CHECK(e.contents("/d/a") == std::string("one\0\0\0three", 11));
  CHECK(e.stats().file_syncs == 2);
}

TEST_CASE("fault_env: preallocated size is durable only after a sync, and counts against the space limit") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  REQUIRE(f->append("abc").is_ok());
  REQUIRE(f->sync().is_ok());
  REQUIRE(e.sync_dir("/d").is_ok());
  REQUIRE(f->preallocate(64).is_ok());
  CHECK(e.contents("/d/a")->size() == 64);
  CHECK(e.durable_contents("/d/a")->size() == 3);
  REQUIRE(f->sync().is_ok());
  CHECK(e.durable_contents("/d/a")->size() == 64);
  REQUIRE(f->write_at(3, "de").is_ok());
  e.crash();  // the write inside the reservation was not synced
  REQUIRE(e.durable_contents("/d/a"));
  CHECK(*e.durable_contents("/d/a") == std::string("abc") + std::string(61, '\0'));

  auto g = must_open(e, "/d/b");
  e.set_space_limit(64 + 10);
  CHECK(g->preallocate(11).code() == status_code::no_space);
  CHECK(e.contents("/d/b")->empty());  // a refused reservation changes nothing
  CHECK(g->preallocate(10).is_ok());
  CHECK(g->write_at(0, std::string(10, 'x')).is_ok());  // reserved space takes writes on a full disk
  CHECK(g->append("y").code() == status_code::no_space);
}

TEST_CASE("fault_env: injected write failures keep a prefix, the space limit gives no_space") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  e.fail_write(1, status_code::io_error, 3);
  CHECK(f->append("abcdef").code() == status_code::io_error);
  CHECK(e.contents("/d/a") == "abc");
  CHECK(f->append("gh").is_ok());

  e.set_space_limit(10);
  status s = f->append("0123456789");
  CHECK(s.code() == status_code::no_space);
  CHECK(e.contents("/d/a")->size() == 10);
  CHECK(f->append("z").code() == status_code::no_space);
  e.clear_faults();
  CHECK(f->append("z").is_ok());

  e.fail_dir_sync(1);
  CHECK(e.sync_dir("/d").code() == status_code::io_error);
  CHECK(e.sync_dir("/d").is_ok());
}

TEST_CASE("fault_env: target_paths aims the n-th-from-now faults at matching paths only") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  REQUIRE(e.create_dir("/d/wal").is_ok());
  auto log = must_open(e, "/d/wal/1.log");
  auto pack = must_open(e, "/d/1.pack");
  e.target_paths("/wal/");

  // Syncs of other files neither fail nor move the counter: the 2nd sync of a
  // log file fails, however many pack syncs come between.
  e.fail_sync(2);
  REQUIRE(log->append("a").is_ok());
  CHECK(log->sync().is_ok());
  REQUIRE(pack->append("p").is_ok());
  CHECK(pack->sync().is_ok());
  CHECK(pack->sync().is_ok());
  CHECK(log->sync().code() == status_code::io_error);

  e.fail_write(1, status_code::no_space);
  CHECK(pack->append("q").is_ok());
  CHECK(log->append("b").code() == status_code::no_space);

  e.fail_dir_sync(1);
  CHECK(e.sync_dir("/d").is_ok());
  CHECK(e.sync_dir("/d/wal").code() == status_code::io_error);

  e.fail_remove(1);
  CHECK(e.remove("/d/1.pack").is_ok());
  CHECK(e.remove("/d/wal/1.log").code() == status_code::io_error);
  CHECK(e.remove("/d/wal/1.log").is_ok());

  // clear_faults() drops the target: every path counts again.
  e.clear_faults();
  auto other = must_open(e, "/d/other");
  e.fail_sync(1);
  CHECK(other->sync().code() == status_code::io_error);
}

TEST_CASE("fault_env: flip_bit corrupts current and durable bytes") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  REQUIRE(f->append("A").is_ok());
  REQUIRE(f->sync().is_ok());
  REQUIRE(e.sync_dir("/d").is_ok());
  REQUIRE(e.flip_bit("/d/a", 0, 1));
  CHECK(e.contents("/d/a") == "C");
  CHECK(e.durable_contents("/d/a") == "C");
  CHECK_FALSE(e.flip_bit("/d/a", 1, 0));
  CHECK_FALSE(e.flip_bit("/d/none", 0, 0));
}

TEST_CASE("fault_env: crash_tearing_last_write keeps a chosen prefix of the last write") {
  for (std::size_t keep = 0; keep <= 4; ++keep) {
    fault_env e;
    REQUIRE(e.create_dir("/d").is_ok());
    auto f = must_open(e, "/d/a");
    REQUIRE(e.sync_dir("/d").is_ok());
    REQUIRE(f->append("base").is_ok());
    REQUIRE(f->sync().is_ok());
    REQUIRE(f->append("xx").is_ok());
    REQUIRE(f->append("WXYZ").is_ok());
    e.crash_tearing_last_write("/d/a", keep);
    CHECK(e.contents("/d/a") == "basexx" + std::string("WXYZ").substr(0, keep));
  }
}

TEST_CASE("fault_env: a random crash keeps a prefix of the pending writes") {
  int saw_none = 0, saw_all = 0, saw_torn = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    fault_env e;
    REQUIRE(e.create_dir("/d").is_ok());
    auto f = must_open(e, "/d/a");
    REQUIRE(e.sync_dir("/d").is_ok());
    std::string all;
    for (int i = 0; i < 5; ++i) {
      std::string chunk(4, static_cast<char>('a' + i));
      REQUIRE(f->append(chunk).is_ok());
      all += chunk;
    }
    e.crash(fault_env::unsynced::random, seed);
    std::string got = *e.contents("/d/a");
    CHECK(all.compare(0, got.size(), got) == 0);  // a prefix of what was written
    if (got.empty()) ++saw_none;
    else if (got == all) ++saw_all;
    else if (got.size() % 4 != 0) ++saw_torn;
  }
  // The random mode really explores: nothing, everything, and torn writes.
  CHECK(saw_none > 0);
  CHECK(saw_all > 0);
  CHECK(saw_torn > 0);
}

TEST_CASE("fault_env: locks are dropped by a crash") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto l = e.lock("/d/LOCK");
  REQUIRE(l.is_ok());
  CHECK(e.lock("/d/LOCK").error().code() == status_code::busy);
  e.crash();
  auto again = e.lock("/d/LOCK");
  CHECK(again.is_ok());
}

TEST_CASE("fault_env: a process crash keeps the page cache, including pages a failed fsync dropped") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  auto f = must_open(e, "/d/a");
  REQUIRE(e.sync_dir("/d").is_ok());
  REQUIRE(f->append("one").is_ok());
  REQUIRE(f->sync().is_ok());
  REQUIRE(f->append("two").is_ok());
  e.fail_sync(1);
  CHECK_FALSE(f->sync().is_ok());
  REQUIRE(f->append("three").is_ok());  // still pending write-back
  e.process_crash();
  CHECK_FALSE(f->append("x").is_ok());  // the process's handles are gone
  CHECK(e.contents("/d/a") == "onetwothree");  // a new process reads the cache
  e.crash(fault_env::unsynced::keep);
  // "two" was dropped by the failed fsync; "three" was still queued.
  CHECK(e.contents("/d/a") == std::string("one\0\0\0three", 11));
}

TEST_CASE("fault_env: a reordering crash keeps sectors of unsynced writes independently") {
  int later_without_earlier = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    fault_env e;
    REQUIRE(e.create_dir("/d").is_ok());
    auto f = must_open(e, "/d/a");
    REQUIRE(e.sync_dir("/d").is_ok());
    REQUIRE(f->append(std::string(2048, 'x')).is_ok());  // four sectors, one write
    e.crash(fault_env::unsynced::reorder, seed);
    std::string got = *e.contents("/d/a");
    CHECK(got.size() <= 2048);
    for (char c : got) CHECK((c == 'x' || c == '\0'));  // holes read as zeros
    if (got.size() > 512 && got[0] == '\0') ++later_without_earlier;
  }
  CHECK(later_without_earlier > 0);  // a later sector landed while the first did not
}

TEST_CASE("fault_env: the n-th remove fails and changes nothing") {
  fault_env e;
  REQUIRE(e.create_dir("/d").is_ok());
  must_open(e, "/d/a");
  must_open(e, "/d/b");
  e.fail_remove(2);
  REQUIRE(e.remove("/d/a").is_ok());
  CHECK(e.remove("/d/b").code() == status_code::io_error);
  CHECK(e.exists("/d/b").value());
  CHECK(e.remove("/d/b").is_ok());
}
