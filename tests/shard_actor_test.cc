// Shard actors under CAF's deterministic test coordinator (virtual time): group
// commit, TTL timers and generations, boot failure, the failed-fsync path, the
// `interval` fsync policy's durability timer.
#include <doctest/doctest.h>

#include "actors/caf_headers.h"  // before any other CAF header

#include <limits>
#include <map>
#include <random>

#include "actors/shard_actor.h"
#include "core/fault_env.h"
#include "core/limits.h"
#include "engine/keyspace.h"
#include "engine/state_space.h"
#include "tests/support/manual_clock.h"

using namespace magnetite;
using namespace std::chrono_literals;
using magnetite::testing::manual_clock;

namespace {

// Whether the shard still answers a request (a dead actor's requests fail
// instead of hanging).
template <class Client>
bool answers(Client& client, const shard_engine_actor& shard) {
  bool ok = false;
  client->request(shard, caf::infinite, stats_atom::value)
      .receive([&](const shard_stats&) { ok = true; }, [&](caf::error&) {});
  return ok;
}

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  fault_env fe;
  manual_clock clock;
  std::shared_ptr<shard_slot> slot = std::make_shared<shard_slot>();

  fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }

  shard_actor_config config(std::string dir = "/db/shard-000") {
    shard_actor_config c;
    c.fs = &fe;
    c.dir = std::move(dir);
    c.options.clock = clock.fn();
    c.options.chunking = {256, 64, 1024};
    c.slot = slot;
    return c;
  }

  std::vector<shard_engine_actor> spawned;

  shard_engine_actor spawn(shard_actor_config c) {
    auto h = spawn_shard(*sys, std::move(c));
    spawned.push_back(h);
    sched->run();
    return h;
  }

  // The system waits for every actor: end the shards (and their timers) first.
  ~fixture() {
    for (auto& h : spawned) caf::anon_send_exit(h, caf::exit_reason::kill);
    sched->run();
  }

  // Moves the shard's wall clock and CAF's virtual clock together.
  void advance(std::chrono::nanoseconds d) {
    *clock.now += static_cast<std::uint64_t>(d.count());
    sched->clock().advance_time(std::chrono::duration_cast<caf::timespan>(d));
    sched->run();
  }

  shard_stats stats(caf::scoped_actor& client, const shard_engine_actor& shard) {
    client->send(shard, stats_atom::value);
    sched->run();
    shard_stats s;
    client->receive([&](const shard_stats& x) { s = x; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no stats"); });
    return s;
  }

  shard_usage usage(caf::scoped_actor& client, const shard_engine_actor& shard) {
    client->send(shard, usage_atom::value);
    sched->run();
    shard_usage u;
    client->receive([&](const shard_usage& x) { u = x; }, [](caf::error& e) { FAIL(caf::to_string(e)); });
    return u;
  }

  void put(caf::scoped_actor& client, const shard_engine_actor& shard, std::string key, std::string value) {
    client->send(shard, put_atom::value, std::move(key), std::move(value), std::int64_t{0});
    sched->run();
    client->receive([](ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no ack"); });
  }

  std::optional<std::string> read(const std::string& key) {
    auto v = slot->view.load();
    REQUIRE(v);
    auto r = v->get(key, *clock.now);
    REQUIRE(r.is_ok());
    return *r;
  }
};

}  // namespace

TEST_CASE("shard actor: writes queued together share one fsync, a failing CAS fails alone, replies follow the fsync") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  auto syncs = f.fe.stats().file_syncs;
  for (int i = 0; i < 50; ++i)
    client->send(shard, put_atom::value, fmt::format("k{:02}", i), std::string("v"), std::int64_t{0});
  client->send(shard, cas_atom::value, std::string("k00"), true, std::string("wrong"), true, std::string("x"),
               std::int64_t{0});
  client->send(shard, cas_atom::value, std::string("k01"), true, std::string("v"), true, std::string("swapped"),
               std::int64_t{0});
  // Nothing has run yet: nothing is visible.
  CHECK_FALSE(f.read("k00").has_value());
  f.sched->run();
  CHECK(f.fe.stats().file_syncs == syncs + 1);  // 52 requests, one fsync
  int acks = 0, cas_failed = 0, cas_swapped = 0;
  for (int i = 0; i < 52; ++i)
    client->receive([&](ok_atom) { ++acks; },
                    [&](bool swapped, bool has_current, const std::string& current) {
                      if (swapped)
                        ++cas_swapped;
                      else {
                        ++cas_failed;
                        CHECK(has_current);
                        CHECK(current == "v");
                      }
                    },
                    [&](caf::error& e) { FAIL("unexpected error " << caf::to_string(e)); });
  CHECK(acks == 50);
  CHECK(cas_failed == 1);
  CHECK(cas_swapped == 1);
  CHECK(f.read("k00") == "v");
  CHECK(f.read("k01") == "swapped");
  CHECK(f.read("k49") == "v");
}

TEST_CASE("shard actor: a failed fsync answers every write of the group with the error and ends the actor") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  client->send(shard, put_atom::value, std::string("before"), std::string("1"), std::int64_t{0});
  f.sched->run();
  client->receive([](ok_atom) {});
  f.fe.fail_sync(1);
  for (int i = 0; i < 5; ++i)
    client->send(shard, put_atom::value, fmt::format("doomed{}", i), std::string("x"), std::int64_t{0});
  f.sched->run();
  int errors = 0;
  for (int i = 0; i < 5; ++i)
    client->receive([&](ok_atom) { FAIL("a write of a failed group was acknowledged"); },
                    [&](caf::error& e) {
                      ++errors;
                      CHECK(to_status(e).code() == status_code::io_error);
                    },
                    caf::after(std::chrono::seconds(1)) >> [&] { FAIL("a write of the failed group got no answer"); });
  CHECK(errors == 5);
  CHECK_FALSE(f.read("doomed0").has_value());
  // The actor is gone: a later request fails instead of hanging.
  CHECK_FALSE(answers(client, shard));
}

TEST_CASE("shard actor: a shard that cannot boot answers queued and later requests with the startup error") {
  fixture f;
  // A file where the shard's directory should be.
  REQUIRE(f.fe.create_dir("/db").is_ok());
  REQUIRE(f.fe.open("/db/shard-000", open_mode::create_new).is_ok());
  caf::scoped_actor client{*f.sys};
  auto shard = spawn_shard(*f.sys, f.config("/db/shard-000"));
  f.spawned.push_back(shard);
  client->send(shard, put_atom::value, std::string("k"), std::string("v"), std::int64_t{0});
  client->send(shard, get_atom::value, std::string("k"));
  f.sched->run();
  for (int i = 0; i < 2; ++i)
    client->receive([&](ok_atom) { FAIL("acknowledged by a shard that never opened"); },
                    [&](bool, std::string) { FAIL("answered by a shard that never opened"); },
                    [&](caf::error& e) { CHECK(to_status(e).code() != status_code::ok); });
  REQUIRE(f.slot->error.load());
  CHECK_FALSE(f.slot->view.load());
}

TEST_CASE("shard actor: TTL deletes on time in virtual time, through one armed timer; stale generations are dropped") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  auto put = [&](std::string k, std::chrono::nanoseconds ttl) {
    client->send(shard, put_atom::value, std::move(k), std::string("v"), static_cast<std::int64_t>(ttl.count()));
    f.sched->run();
    client->receive([](ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no ack"); });
  };
  auto stats = [&] {
    client->send(shard, stats_atom::value);
    f.sched->run();
    shard_stats s;
    client->receive([&](const shard_stats& x) { s = x; },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no stats"); });
    return s;
  };
  auto physically_present = [&](const std::string& k) {
    std::string stored;
    auto r = f.slot->view.load()->find(keyspace::data_key(k), stored);
    REQUIRE(r.is_ok());
    return *r;
  };
  put("slow", 10s);
  put("fast", 5s);  // re-arms earlier: the 10 s timer's generation is now stale
  f.advance(4s);
  CHECK(physically_present("fast"));
  f.advance(1s);
  CHECK_FALSE(physically_present("fast"));  // swept at its deadline
  CHECK(physically_present("slow"));
  CHECK(stats().expired == 1);
  f.advance(5s);
  CHECK_FALSE(physically_present("slow"));
  CHECK(stats().expired == 2);
  // Nothing armed is left over: more time changes nothing.
  auto groups = stats().groups;
  f.advance(60s);
  CHECK(stats().groups == groups);
  // An expired value is never read, even before its sweep ran.
  put("edge", 1s);
  *f.clock.now += 1'000'000'000;  // the wall clock passes the deadline; the timer has not fired
  CHECK_FALSE(f.read("edge").has_value());
}

TEST_CASE("shard actor: after a restart the expiry index is rebuilt and armed from the log and the tree") {
  fixture f;
  caf::scoped_actor client{*f.sys};
  {
    auto shard = f.spawn(f.config());
    client->send(shard, put_atom::value, std::string("in-tree"), std::string("v"), std::int64_t{20'000'000'000});
    client->send(shard, commit_atom::value);
    client->send(shard, put_atom::value, std::string("in-log"), std::string("v"), std::int64_t{30'000'000'000});
    f.sched->run();
    for (int i = 0; i < 3; ++i) client->receive([](ok_atom) {}, [](const std::string&) {});
    client->send_exit(shard, caf::exit_reason::kill);
    f.sched->run();
  }
  f.fe.process_crash();
  auto shard = f.spawn(f.config());
  CHECK(f.read("in-tree") == "v");
  f.advance(20s);
  auto present = [&](const std::string& k) {
    std::string stored;
    auto r = f.slot->view.load()->find(keyspace::data_key(k), stored);
    REQUIRE(r.is_ok());
    return *r;
  };
  CHECK_FALSE(present("in-tree"));
  CHECK(present("in-log"));
  f.advance(10s);
  CHECK_FALSE(present("in-log"));
}

TEST_CASE("shard actor: writes are checkpointed within checkpoint_interval even when few") {
  fixture f;
  auto c = f.config();
  c.options.checkpoint_interval = std::chrono::milliseconds(30'000);
  auto shard = f.spawn(c);
  caf::scoped_actor client{*f.sys};
  client->send(shard, put_atom::value, std::string("k"), std::string("v"), std::int64_t{0});
  f.sched->run();
  client->receive([](ok_atom) {});
  auto before = f.slot->view.load();
  CHECK(before->holds_writes());
  f.advance(std::chrono::seconds(29));
  CHECK(f.slot->view.load()->holds_writes());  // not yet
  f.advance(std::chrono::seconds(1));
  auto after = f.slot->view.load();
  CHECK_FALSE(after->holds_writes());  // checkpointed into the tree
  CHECK(after->root() != before->root());
  CHECK(f.read("k") == "v");
  // With nothing new, the timer is not armed again: no more checkpoints.
  client->send(shard, stats_atom::value);
  f.sched->run();
  std::uint64_t checkpoints = 0;
  client->receive([&](const shard_stats& s) { checkpoints = s.checkpoints; });
  CHECK(checkpoints == 1);
  f.advance(std::chrono::seconds(120));
  client->send(shard, stats_atom::value);
  f.sched->run();
  client->receive([&](const shard_stats& s) { CHECK(s.checkpoints == 1); });
}

TEST_CASE("shard actor: replayed writes are checkpointed within checkpoint_interval after a restart") {
  fixture f;
  auto c = f.config();
  c.options.checkpoint_interval = std::chrono::milliseconds(30'000);
  caf::scoped_actor client{*f.sys};
  {
    auto shard = f.spawn(c);
    client->send(shard, put_atom::value, std::string("k"), std::string("v"), std::int64_t{0});
    f.sched->run();
    client->receive([](ok_atom) {});
    client->send_exit(shard, caf::exit_reason::kill);
    f.sched->run();
  }
  f.fe.process_crash();
  f.spawn(c);
  REQUIRE(f.slot->view.load()->holds_writes());  // replayed, not yet in the tree
  f.advance(std::chrono::seconds(30));
  CHECK_FALSE(f.slot->view.load()->holds_writes());
  CHECK(f.read("k") == "v");
}

TEST_CASE("shard actor: a deadline far away is reached in bounded timer steps, never an overflowed one") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  client->send(shard, put_atom::value, std::string("forever"), std::string("v"),
               std::numeric_limits<std::int64_t>::max());
  f.sched->run();
  client->receive([](ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
  // The TTL timer (and the checkpoint timer) lie ahead, at most an hour (a
  // delay added to the clock without a bound would overflow into "due now"
  // and spin).
  const auto& schedule = f.sched->clock().schedule();
  REQUIRE(schedule.size() == 2);
  for (const auto& [when, event] : schedule) {
    CHECK(when <= f.sched->clock().now() + std::chrono::hours(1));
    CHECK(when > f.sched->clock().now());
  }
  // Stepping through a few hours re-arms the TTL timer and deletes nothing;
  // the checkpoint timer fired once and is not armed again.
  for (int i = 0; i < 5; ++i) f.advance(std::chrono::hours(1));
  CHECK(f.sched->clock().schedule().size() == 1);
  CHECK(f.read("forever") == "v");
  client->send(shard, stats_atom::value);
  f.sched->run();
  client->receive([](const shard_stats& s) {
    CHECK(s.expired == 0);
    CHECK(s.groups == 1);
    CHECK(s.checkpoints == 1);
  });
}

TEST_CASE("shard actor: a storage failure while staging ends the actor, so the supervisor can reopen it") {
  fixture f;
  caf::scoped_actor client{*f.sys};
  const int n = 400;
  auto key = [](int i) { return fmt::format("key{:04}", i); };
  {
    auto shard = f.spawn(f.config());
    for (int i = 0; i < n; ++i) client->send(shard, put_atom::value, key(i), std::string(100, 'x'), std::int64_t{0});
    client->send(shard, commit_atom::value);
    f.sched->run();
    for (int i = 0; i <= n; ++i) client->receive([](ok_atom) {}, [](const std::string&) {});
    client->send_exit(shard, caf::exit_reason::kill);
    f.sched->run();
  }
  f.fe.process_crash();
  auto names = f.fe.list("/db/shard-000/nodes");
  REQUIRE(names.is_ok());
  std::string pack_path;
  for (auto& nm : *names)
    if (nm.ends_with(".pack")) pack_path = "/db/shard-000/nodes/" + nm;
  auto pack = f.fe.contents(pack_path);
  REQUIRE(pack);
  // Damage one leaf in the middle of the pack, one that boot does not read.
  bool booted = false;
  shard_engine_actor shard;
  for (std::uint64_t off = pack->size() / 2; !booted && off < pack->size(); off += 997) {
    REQUIRE(f.fe.flip_bit(pack_path, off, 3));
    f.slot->view.store(nullptr);
    shard = f.spawn(f.config());
    booted = f.slot->view.load() != nullptr;
    if (!booted) {
      REQUIRE(f.fe.flip_bit(pack_path, off, 3));
      client->send_exit(shard, caf::exit_reason::kill);
      f.sched->run();
      f.fe.process_crash();
    }
  }
  REQUIRE(booted);
  // A CAS reads the damaged leaf: corruption, and the shard stops for good.
  bool cas_failed = false;
  for (int i = 0; i < n && !cas_failed; ++i) {
    client->send(shard, cas_atom::value, key(i), true, std::string(100, 'x'), true, std::string("y"), std::int64_t{0});
    f.sched->run();
    client->receive([](bool, bool, const std::string&) {},
                    [&](caf::error& e) {
                      CHECK(to_status(e).code() == status_code::corruption);
                      cas_failed = true;
                    });
  }
  REQUIRE(cas_failed);
  CHECK_FALSE(answers(client, shard));
}

namespace {

// The log writer judges `interval` on the real steady clock, which barely moves
// during a test: with this interval no group fsyncs on its own, and only the
// actor's timer (virtual time) can make a write durable.
constexpr auto test_fsync_interval = std::chrono::milliseconds(10'000);

shard_actor_config interval_config(fixture& f) {
  auto c = f.config();
  c.options.fsync = wal::fsync_policy::interval;
  c.options.fsync_interval = test_fsync_interval;
  c.options.checkpoint_interval = std::chrono::milliseconds(600'000);  // out of the way
  return c;
}

}  // namespace

TEST_CASE(
    "shard actor: under the interval policy an acknowledged write is visible at once and durable after one timer") {
  fixture f;
  auto shard = f.spawn(interval_config(f));
  caf::scoped_actor client{*f.sys};
  auto fsyncs = f.stats(client, shard).log_fsyncs;
  f.put(client, shard, "a", "1");
  CHECK(f.read("a") == "1");  // acknowledged and visible, not yet durable
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs);
  // The checkpoint timer and ONE durability timer.
  CHECK(f.sched->clock().schedule().size() == 2);
  f.advance(4s);
  f.put(client, shard, "b", "2");                  // a second group while the timer is armed
  CHECK(f.sched->clock().schedule().size() == 2);  // not armed again
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs);
  f.advance(test_fsync_interval - 4s - 1ms);
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs);  // not yet
  f.advance(1ms);
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);  // both groups, one fdatasync
  CHECK(f.sched->clock().schedule().size() == 1);          // only the checkpoint timer is left
  // Nothing pending: more time brings no fsync and no timer.
  f.advance(3 * test_fsync_interval);
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);
  CHECK(f.sched->clock().schedule().size() == 1);
  // A later write arms it again.
  f.put(client, shard, "c", "3");
  CHECK(f.sched->clock().schedule().size() == 2);
  f.advance(test_fsync_interval);
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 2);
}

TEST_CASE("shard actor: under the interval policy a power cut keeps an acknowledged write only once the timer fired") {
  for (bool fired : {false, true}) {
    CAPTURE(fired);
    fixture f;
    caf::scoped_actor client{*f.sys};
    {
      auto shard = f.spawn(interval_config(f));
      f.put(client, shard, "k", "v");
      REQUIRE(f.read("k") == "v");
      if (fired)
        f.advance(test_fsync_interval);
      else
        f.advance(test_fsync_interval - 1ms);
      client->send_exit(shard, caf::exit_reason::kill);
      f.sched->run();
    }
    f.fe.crash(fault_env::unsynced::lose);
    f.slot->view.store(nullptr);
    f.spawn(interval_config(f));
    REQUIRE(f.slot->view.load());
    // Lost inside the window (the documented price of the policy), kept after it.
    CHECK(f.read("k").has_value() == fired);
  }
}

TEST_CASE("shard actor: under the interval policy a failed fsync of the timer ends the actor with the error") {
  fixture f;
  auto shard = f.spawn(interval_config(f));
  caf::scoped_actor client{*f.sys};
  client->monitor(shard);
  f.put(client, shard, "k", "v");
  f.fe.fail_sync(1);
  f.advance(test_fsync_interval - 1ms);
  f.stats(client, shard);  // still serving: the timer has not fired
  f.advance(1ms);
  caf::error reason;
  client->receive([&](caf::down_msg& d) { reason = d.reason; },
                  caf::after(std::chrono::seconds(1)) >> [] { FAIL("the actor survived a failed fsync"); });
  CHECK(to_status(reason).code() == status_code::io_error);
  CHECK_FALSE(answers(client, shard));
}

TEST_CASE("shard actor: under the always policy a group fsyncs at once and arms no durability timer") {
  fixture f;
  auto c = f.config();
  c.options.fsync_interval = test_fsync_interval;  // ignored under always
  auto shard = f.spawn(c);
  caf::scoped_actor client{*f.sys};
  auto fsyncs = f.stats(client, shard).log_fsyncs;
  f.put(client, shard, "k", "v");
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);
  CHECK(f.sched->clock().schedule().size() == 1);  // the checkpoint timer only
  f.advance(test_fsync_interval);
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);
}

TEST_CASE(
    "shard actor: applies queued together share one group and one fsync; each is checked against the ones "
    "before it; a refused one is answered after that group") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  auto fsyncs = f.stats(client, shard).log_fsyncs;
  std::string k = std::string(state_space::prefix) + "k";
  std::vector<batch_op> write{{k, true, "value", 0}};
  // Two applies in the mailbox before the shard runs, both expecting k
  // absent: the first creates it, so the second is refused.
  client->send(shard, apply_atom::value, std::vector<state_check>{{k, 0}}, write);
  client->send(shard, apply_atom::value, std::vector<state_check>{{k, 0}}, write);
  f.sched->run();
  std::vector<std::tuple<bool, std::uint64_t, std::uint32_t, std::uint64_t>> answers;
  for (int i = 0; i < 2; ++i)
    client->receive([&](bool applied, std::uint64_t revision, std::uint32_t failed,
                        std::uint64_t found) { answers.emplace_back(applied, revision, failed, found); },
                    [](caf::error& e) { FAIL(caf::to_string(e)); },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer"); });
  REQUIRE(answers.size() == 2);
  auto [ok1, rev1, f1, found1] = answers[0];
  auto [ok2, rev2, f2, found2] = answers[1];
  CHECK(ok1);
  CHECK_FALSE(ok2);
  CHECK(f2 == 0);
  CHECK(found2 == rev1);  // it saw the first, not yet durable when it was checked
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);
  CHECK(f.stats(client, shard).groups == 1);
  // By the time the refusal arrived, the write that beat it was published.
  REQUIRE(f.read(k));
  CHECK(f.read(k)->substr(8) == "value");
}

TEST_CASE(
    "shard actor: stamped writes and a promise state queued together share one group and one fsync; each "
    "answer waits for it; the promise survives a restart") {
  fixture f;
  auto shard = f.spawn(f.config());
  caf::scoped_actor client{*f.sys};
  auto fsyncs = f.stats(client, shard).log_fsyncs;
  stamp s1{{2, 1}, 1};
  stamp s0{{1, 3}, 9};
  client->send(shard, promise_atom::value, std::string("promised 2.1"));
  client->send(shard, stamped_atom::value, std::vector<stamped_op>{{"k", s1, true, "new", false, 0}});
  client->send(shard, stamped_atom::value,
               std::vector<stamped_op>{{"k", s0, true, "old", false, 0}, {"gone", s0, false, "", true, 1}});
  f.sched->run();
  bool promised = false;
  client->receive([&](ok_atom) { promised = true; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                  caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer"); });
  CHECK(promised);
  std::vector<std::vector<bool>> taken;
  for (int i = 0; i < 2; ++i)
    client->receive([&](const std::vector<bool>& t) { taken.push_back(t); },
                    [](caf::error& e) { FAIL(caf::to_string(e)); },
                    caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer"); });
  REQUIRE(taken.size() == 2);
  CHECK(taken[0] == std::vector<bool>{true});
  CHECK(taken[1] == std::vector<bool>{false, true});  // the older stamp lost to the write before it
  CHECK(f.stats(client, shard).log_fsyncs == fsyncs + 1);
  CHECK(f.read("k") == "new");
  CHECK_FALSE(f.read("gone").has_value());  // a tombstone reads as absent

  // A bad write is refused with invalid_argument and the shard goes on.
  client->send(shard, stamped_atom::value, std::vector<stamped_op>{{"k", stamp{}, true, "v", false, 0}});
  f.sched->run();
  client->receive([&](const std::vector<bool>&) { FAIL("a zero stamp was taken"); },
                  [](caf::error& e) { CHECK(to_status(e).code() == status_code::invalid_argument); },
                  caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer"); });

  // A power cut, then a restart on the same files: the promise is read back.
  caf::anon_send_exit(shard, caf::exit_reason::kill);
  f.sched->run();
  f.fe.crash(fault_env::unsynced::lose);
  auto again = f.spawn(f.config());
  client->send(again, promise_atom::value);
  f.sched->run();
  client->receive(
      [&](bool has, const std::string& p) {
        CHECK(has);
        CHECK(p == "promised 2.1");
      },
      [](caf::error& e) { FAIL(caf::to_string(e)); }, caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer"); });
}

TEST_CASE(
    "shard actor: space is reclaimed by itself, in steps, keeping retained roots, never while a commit holds it") {
  fixture f;
  auto c = f.config();
  c.options.checkpoint_bytes = 64 << 10;
  c.options.max_space_amplification = 1.5;
  c.options.reclaim_min_bytes = 64 << 10;
  c.options.reclaim_step_bytes = 4 << 10;
  auto shard = f.spawn(c);
  caf::scoped_actor client{*f.sys};
  std::mt19937_64 rng(7);
  std::map<std::string, std::string> latest;
  auto usage = [&] { return f.usage(client, shard); };
  // One round rewrites every key with new values, then checkpoints (commit);
  // run() also runs every reclamation step the checkpoints started.
  auto round = [&]() -> hash128 {
    for (int i = 0; i < 600; ++i) {
      std::string v(120, '\0');
      for (auto& ch : v) ch = static_cast<char>('a' + rng() % 26);
      std::string k = fmt::format("key{:04}", i);
      latest[k] = v;
      client->send(shard, put_atom::value, k, v, std::int64_t{0});
    }
    client->send(shard, commit_atom::value);
    f.sched->run();
    for (int i = 0; i < 600; ++i) client->receive([](ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
    std::string root;
    client->receive([&](const std::string& r) { root = r; }, [](caf::error& e) { FAIL(caf::to_string(e)); });
    return *hash128::parse_hex(root);
  };

  // Held (a database commit under way): the store grows, nothing is reclaimed.
  f.slot->held = 1;
  hash128 first = round();
  for (int i = 0; i < 3; ++i) round();
  shard_usage held = usage();
  CHECK(held.reclaim_cycles == 0);
  CHECK(held.reclaimed_bytes == 0);
  f.slot->held = 0;
  f.slot->retained.store(std::make_shared<const std::vector<hash128>>(std::vector<hash128>{first}));

  for (int i = 0; i < 8; ++i) round();
  shard_usage u = usage();
  CAPTURE(u.node_bytes);
  CAPTURE(u.live_node_bytes);
  CHECK(u.reclaim_cycles > 0);
  CHECK(u.reclaimed_bytes > held.node_bytes / 2);
  REQUIRE(u.live_node_bytes > 0);
  // Within the policy: the rounds since the last cycle add at most what
  // triggers the next one.
  CHECK(static_cast<double>(u.node_bytes) <= 1.5 * static_cast<double>(u.live_node_bytes) + (64 << 10));
  for (const auto& [k, v] : latest) REQUIRE(f.read(k) == v);
  // The retained root is still whole: verify walks it (a root the store no
  // longer held would be skipped, and counted out of `roots`).
  client->send(shard, verify_atom::value, std::vector<hash128>{first});
  f.sched->run();
  client->receive(
      [&](const shard_verify_report& r) {
        CHECK(r.roots == 2);
        CHECK(r.problems.empty());
      },
      [](caf::error& e) { FAIL(caf::to_string(e)); });
}

TEST_CASE("shard actor: deleting most keys is reclaimed too, though the packs do not grow") {
  // The policy compares the packs with the live bytes the last cycle found;
  // deletes shrink the live data while adding little, so the estimate must
  // follow the tree's entry count or the space is never given back.
  fixture f;
  auto c = f.config();
  c.options.max_space_amplification = 1.5;
  c.options.reclaim_min_bytes = 64 << 10;
  auto shard = f.spawn(c);
  caf::scoped_actor client{*f.sys};
  std::mt19937_64 rng(8);
  auto commit = [&] {
    client->send(shard, commit_atom::value);
    f.sched->run();
    client->receive([](const std::string&) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
  };
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i) {
      std::string v(120, '\0');
      for (auto& ch : v) ch = static_cast<char>('a' + rng() % 26);
      f.put(client, shard, fmt::format("key{:04}", i), v);
    }
    commit();
  }
  auto usage = [&] { return f.usage(client, shard); };
  shard_usage full = usage();
  REQUIRE(full.reclaim_cycles > 0);
  for (int i = 0; i < 1000; ++i) {
    if (i % 10 == 0) continue;
    client->send(shard, del_atom::value, fmt::format("key{:04}", i));
  }
  f.sched->run();
  for (int i = 0; i < 900; ++i) client->receive([](ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
  commit();
  shard_usage after = usage();
  CAPTURE(full.node_bytes);
  CAPTURE(after.node_bytes);
  CAPTURE(after.live_node_bytes);
  CHECK(after.live_node_bytes * 5 < full.live_node_bytes);
  CHECK(after.reclaim_cycles > full.reclaim_cycles);
  CHECK(static_cast<double>(after.node_bytes) <= 1.5 * static_cast<double>(after.live_node_bytes) + (64 << 10));
  CHECK(f.read("key0010").has_value());
  CHECK_FALSE(f.read("key0011").has_value());
}
