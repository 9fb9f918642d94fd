// Replica actors of one shard on 3 and 5 simulated nodes, in one process under
// CAF's deterministic test coordinator: election, quorum writes, linearizable
// reads, fencing of a deposed owner, and a handoff that must recover writes
// the new owner never saw. A "down" node is one whose replica actor was
// killed (its requests fail at once); it comes back with its shard's durable
// promise state, as after a restart. A partitioned node is one whose links
// (relay actors between every pair of replicas) drop its traffic both ways.
#include <doctest/doctest.h>

#include "actors/caf_headers.h"  // before any other CAF header

#include <random>

#include "core/fault_env.h"
#include "core/limits.h"
#include "engine/keyspace.h"
#include "replication/replica_actor.h"
#include "tests/support/register_checker.h"
#include "tests/support/relay_actor.h"
#include "ttl/envelope.h"

using namespace magnetite;
using namespace magnetite::replication;
using namespace std::chrono_literals;

namespace {

struct node_under_test {
  std::uint32_t id = 0;
  std::unique_ptr<fault_env> fs = std::make_unique<fault_env>();
  std::shared_ptr<shard_slot> slot = std::make_shared<shard_slot>();
  shard_engine_actor shard;
  replica_actor replica;
  bool up = false;
};

struct cluster {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<std::uint64_t> now = std::make_shared<std::uint64_t>(1'000'000'000'000);
  std::vector<node_under_test> nodes;
  std::unique_ptr<caf::scoped_actor> client;
  // links[i][j]: traffic from node i+1 to node j+1; relays spawned by connect().
  std::vector<std::vector<std::shared_ptr<testing::relay_link>>> links;
  std::vector<caf::actor> relays;

  // Failure detection, failover and anti-entropy run on heartbeats when beat
  // is not zero; time then moves only by advance() (the coordinator's clock).
  std::chrono::milliseconds beat{0};
  std::chrono::nanoseconds retention{1h};  // of tombstones (the long-absence rule's scale)
  std::size_t batches_in_flight = 1;       // replica_config's, for every replica
  std::size_t max_client_writes = 4096;    // likewise

  explicit cluster(std::size_t n, std::chrono::milliseconds heartbeat = 0ms, std::chrono::nanoseconds keep = 1h,
                   std::size_t in_flight = 1, std::size_t client_writes = 4096)
      : beat(heartbeat), retention(keep), batches_in_flight(in_flight), max_client_writes(client_writes) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    client = std::make_unique<caf::scoped_actor>(*sys);
    nodes.resize(n);
    links.resize(n);
    for (auto& row : links)
      for (std::size_t j = 0; j < n; ++j) row.push_back(std::make_shared<testing::relay_link>());
    for (std::size_t i = 0; i < n; ++i) {
      nodes[i].id = static_cast<std::uint32_t>(i + 1);
      start_shard(nodes[i]);
      start_replica(nodes[i]);
    }
    connect();
  }

  ~cluster() {
    for (auto& r : relays) caf::anon_send_exit(r, caf::exit_reason::kill);
    for (auto& n : nodes) {
      if (n.replica) caf::anon_send_exit(n.replica, caf::exit_reason::kill);
      if (n.shard) caf::anon_send_exit(n.shard, caf::exit_reason::kill);
    }
    sched->run();
    client.reset();
  }

  wall_clock_ns clock() const {
    auto p = now;
    return [p] { return *p; };
  }

  void start_shard(node_under_test& n) {
    shard_actor_config c;
    c.fs = n.fs.get();
    c.dir = "/node/shard-000";
    c.options.clock = clock();
    c.options.chunking = {256, 64, 1024};
    c.options.tombstone_retention = retention;
    c.slot = n.slot;
    n.shard = spawn_shard(*sys, c);
    sched->run();
  }

  // Reads the shard's durable promise state, as a restarted node does.
  void start_replica(node_under_test& n) {
    std::optional<std::string> payload;
    (*client)->send(n.shard, promise_atom::value);
    sched->run();
    (*client)->receive(
        [&](bool has, const std::string& p) {
          if (has) payload = p;
        },
        [](caf::error& e) { FAIL(caf::to_string(e)); },
        caf::after(std::chrono::seconds(1)) >> [] { FAIL("no promise state"); });
    replica_config c;
    c.node = n.id;
    c.cluster_size = nodes.size();
    auto* np = &n;
    c.shard = [np] { return np->shard; };
    c.slot = n.slot;
    c.initial = from_log(payload).value();
    c.request_timeout = 100ms;
    c.batches_in_flight = batches_in_flight;
    c.max_client_writes = max_client_writes;
    c.pull_batch = 4;
    c.clock = clock();
    c.tombstone_retention = retention;
    c.heartbeat = beat;
    c.anti_entropy_ticks = beat.count() > 0 ? 10 : 0;
    n.replica = spawn_replica(*sys, c);
    n.up = true;
    sched->run();
  }

  // Every replica learns the others' current actors, each behind the relay
  // of its link.
  void connect() {
    for (auto& r : relays) caf::anon_send_exit(r, caf::exit_reason::kill);
    relays.clear();
    std::vector<std::uint32_t> ids;
    for (auto& n : nodes) ids.push_back(n.id);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::vector<caf::actor> actors;
      for (std::size_t j = 0; j < nodes.size(); ++j) {
        auto r = sys->spawn(testing::relay_behavior, caf::actor_cast<caf::actor>(nodes[j].replica), links[i][j]);
        relays.push_back(r);
        actors.push_back(r);
      }
      // From an actor of this system, as the node sends it: a replica ignores
      // `peers` from anywhere else.
      if (nodes[i].up) caf::send_as(actors[i], nodes[i].replica, peers_atom::value, ids, actors);
    }
    sched->run();
  }

  void partition(std::uint32_t id, bool cut = true) {
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      links[id - 1][j]->cut = cut;
      links[j][id - 1]->cut = cut;
    }
  }
  void heal() {
    for (auto& row : links)
      for (auto& l : row) l->cut = false;
  }

  node_under_test& node(std::uint32_t id) { return nodes.at(id - 1); }

  void down(std::uint32_t id) {
    caf::anon_send_exit(node(id).replica, caf::exit_reason::kill);
    node(id).up = false;
    sched->run();
  }

  void restart(std::uint32_t id) {
    start_replica(node(id));
    connect();
  }

  // Runs the system until the reply arrives, firing timers if it must.
  // Moves the clock by d, a millisecond at a time, running what it fires.
  void advance(std::chrono::milliseconds d) {
    sched->run();
    for (auto t = 0ms; t < d; t += 1ms) {
      sched->advance_time(1ms);
      sched->run();
    }
  }

  // Moves the coordinator's clock and the wall clock together by d, a
  // millisecond at a time (deadlines, purges and the long-absence rule run
  // on the wall clock).
  void pass(std::chrono::milliseconds d) {
    sched->run();
    for (auto t = 0ms; t < d; t += 1ms) {
      *now += 1'000'000;
      sched->advance_time(1ms);
      sched->run();
    }
  }

  void drain() {
    sched->run();
    if (beat.count() > 0) {  // timers never stop: move time until the answer is in
      for (int i = 0; i < 3000 && (*client)->mailbox().empty(); ++i) {
        sched->advance_time(1ms);
        sched->run();
      }
      return;
    }
    for (int i = 0; i < 50 && sched->has_pending_timeout(); ++i) {
      sched->trigger_timeouts();
      sched->run();
    }
  }

  bool elect(std::uint32_t id) {
    (*client)->send(node(id).replica, elect_atom::value);
    drain();
    bool owns = false;
    (*client)->receive([&](bool b) { owns = b; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                       caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer to elect"); });
    return owns;
  }

  // With a request id, as the cluster client sends them (at most once).
  status put(std::uint32_t id, const std::string& k, const std::string& v, std::optional<request_id> rid = {}) {
    if (rid)
      (*client)->send(node(id).replica, put_atom::value, k, v, std::int64_t{0}, *rid);
    else
      (*client)->send(node(id).replica, put_atom::value, k, v, std::int64_t{0});
    drain();
    status out = status::io_error("no answer");
    (*client)->receive([&](ok_atom) { out = status::ok(); }, [&](caf::error& e) { out = to_status(e); },
                       caf::after(std::chrono::seconds(1)) >> [] {});
    return out;
  }

  status del(std::uint32_t id, const std::string& k, std::optional<request_id> rid = {}) {
    if (rid)
      (*client)->send(node(id).replica, del_atom::value, k, *rid);
    else
      (*client)->send(node(id).replica, del_atom::value, k);
    drain();
    status out = status::io_error("no answer");
    (*client)->receive([&](ok_atom) { out = status::ok(); }, [&](caf::error& e) { out = to_status(e); },
                       caf::after(std::chrono::seconds(1)) >> [] {});
    return out;
  }

  result<std::optional<std::string>> get(std::uint32_t id, const std::string& k) {
    (*client)->send(node(id).replica, get_atom::value, k);
    drain();
    result<std::optional<std::string>> out = status::io_error("no answer");
    (*client)->receive(
        [&](bool found, const std::string& v) {
          out = found ? std::optional<std::string>(v) : std::optional<std::string>();
        },
        [&](caf::error& e) { out = to_status(e); }, caf::after(std::chrono::seconds(1)) >> [] {});
    return out;
  }

  // (swapped, current) or the error.
  result<std::pair<bool, std::optional<std::string>>> cas(std::uint32_t id, const std::string& k,
                                                          std::optional<std::string> expected,
                                                          std::optional<std::string> desired,
                                                          std::optional<request_id> rid = {}) {
    if (rid)
      (*client)->send(node(id).replica, cas_atom::value, k, expected.has_value(), expected.value_or(""),
                      desired.has_value(), desired.value_or(""), std::int64_t{0}, *rid);
    else
      (*client)->send(node(id).replica, cas_atom::value, k, expected.has_value(), expected.value_or(""),
                      desired.has_value(), desired.value_or(""), std::int64_t{0});
    drain();
    result<std::pair<bool, std::optional<std::string>>> out = status::io_error("no answer");
    (*client)->receive(
        [&](bool swapped, bool has, const std::string& cur) {
          out = std::make_pair(swapped, has ? std::optional<std::string>(cur) : std::nullopt);
        },
        [&](caf::error& e) { out = to_status(e); }, caf::after(std::chrono::seconds(1)) >> [] {});
    return out;
  }

  // Receives n answers to puts sent earlier (each within a second); how
  // many were ok. An error fails the test.
  int puts_answered_ok(int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i)
      (*client)->receive([&](ok_atom) { ++ok; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                         caf::after(std::chrono::seconds(1)) >> [] { FAIL("a put was not answered"); });
    return ok;
  }

  replica_info info(std::uint32_t id) {
    (*client)->send(node(id).replica, info_atom::value);
    drain();
    replica_info out;
    (*client)->receive([&](const replica_info& i) { out = i; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                       caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer to info"); });
    return out;
  }

  // Lets heartbeats elect an owner unasked (a second of them); its id.
  std::uint32_t owner_elected_unasked() {
    pass(1000ms);
    auto found = owners();
    REQUIRE(found.size() == 1);
    return found[0];
  }

  // The nodes among `ids` whose replicas say they own the shard.
  std::vector<std::uint32_t> owners(std::vector<std::uint32_t> ids = {}) {
    if (ids.empty())
      for (auto& n : nodes) ids.push_back(n.id);
    std::vector<std::uint32_t> out;
    for (auto id : ids)
      if (node(id).up && info(id).role == 2) out.push_back(id);
    return out;
  }

  // What node id's own shard holds for k (its published view), stale or not.
  std::optional<std::string> local(std::uint32_t id, const std::string& k) {
    auto v = node(id).slot->view.load();
    REQUIRE(v);
    return v->get(k, *now).value();
  }
};

}  // namespace

TEST_CASE("replica actors: one owner is elected; its writes are on a majority's disks before they are acknowledged") {
  cluster c(3);
  CHECK(c.elect(1));
  CHECK(c.put(1, "k", "v1").is_ok());
  CHECK(c.get(1, "k").value() == std::optional<std::string>("v1"));
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK(c.local(id, "k") == "v1");  // every replica was up
  // Replicas store identical bytes: the stamp and the owner's deadline.
  std::string a, b;
  REQUIRE(c.node(1).slot->view.load()->find(keyspace::data_key("k"), a).value());
  REQUIRE(c.node(2).slot->view.load()->find(keyspace::data_key("k"), b).value());
  CHECK(a == b);
  CHECK(ttl::unwrap(a)->stamp->epoch.node == 1);
  // Another replica refuses clients and names itself.
  auto refused = c.put(2, "k", "x");
  CHECK(refused.code() == status_code::busy);
  CHECK(refused.message().find("node 2 does not own") != std::string::npos);
  CHECK(c.get(3, "k").error().code() == status_code::busy);
  // Deletes and CAS go through the same quorum.
  CHECK(c.del(1, "k").is_ok());
  CHECK_FALSE(c.get(1, "k").value().has_value());
  CHECK_FALSE(c.local(2, "k").has_value());
  auto swapped = c.cas(1, "k", std::nullopt, std::string("v2")).value();
  CHECK(swapped.first);
  auto lost = c.cas(1, "k", std::nullopt, std::string("v3")).value();
  CHECK_FALSE(lost.first);
  CHECK(lost.second == "v2");
  CHECK(c.get(1, "k").value() == std::optional<std::string>("v2"));
}

TEST_CASE("replica actors: writes waiting together reach each peer as one rwrite, and a key's next write waits") {
  cluster c(3);
  REQUIRE(c.elect(1));
  auto before = c.links[0][1]->passed;  // node 1 -> node 2: rwrite rounds (no heartbeats here)
  auto counted = c.info(1);
  // All sent before the owner takes any: 20 keys, then k0 again, which must
  // wait for its first write and so goes in a batch of its own.
  for (int i = 0; i < 20; ++i)
    (*c.client)->send(c.node(1).replica, put_atom::value, fmt::format("k{}", i), std::string("v"), std::int64_t{0});
  (*c.client)->send(c.node(1).replica, put_atom::value, std::string("k0"), std::string("again"), std::int64_t{0});
  c.drain();
  CHECK(c.puts_answered_ok(21) == 21);
  CHECK(c.links[0][1]->passed - before == 2);
  // What info counts is what went out: two batches, 21 writes in them.
  auto after = c.info(1);
  CHECK(after.batches - counted.batches == 2);
  CHECK(after.batched_writes - counted.batched_writes == 21);
  for (std::uint32_t id = 1; id <= 3; ++id) {
    CHECK(c.local(id, "k0") == "again");
    CHECK(c.local(id, "k19") == "v");
  }
}

// Runs only node id's replica until its mailbox is empty (the flush it sends
// itself included), while every other actor waits.
void run_replica_alone(cluster& c, std::uint32_t id) {
  int runs = 0;
  while (c.sched->prioritize(c.node(id).replica)) {
    c.sched->run_once();
    ++runs;
  }
  REQUIRE(runs > 0);
}

TEST_CASE("replica actors: writes that come while a batch is undecided gather into one batch, shipped after it") {
  // batches_in_flight 1 (the default) against 2: the same arrivals, one
  // batch fewer. Nothing but the owner runs until the last writes are sent,
  // so the first batch is undecided throughout.
  for (std::size_t in_flight : {1, 2}) {
    CAPTURE(in_flight);
    cluster c(3, 0ms, 1h, in_flight);
    REQUIRE(c.elect(1));
    auto before = c.links[0][1]->passed;
    auto counted = c.info(1);
    auto put = [&](int i) {
      (*c.client)->send(c.node(1).replica, put_atom::value, fmt::format("k{}", i), std::string("v"), std::int64_t{0});
    };
    put(0);
    run_replica_alone(c, 1);  // batch {k0} goes out
    for (int i = 1; i < 5; ++i) put(i);
    run_replica_alone(c, 1);  // in flight 1: they wait; in flight 2: batch {k1..k4} goes out
    for (int i = 5; i < 10; ++i) put(i);
    c.drain();
    CHECK(c.puts_answered_ok(10) == 10);
    std::uint64_t batches = in_flight == 1 ? 2 : 3;
    CHECK(c.links[0][1]->passed - before == batches);
    auto after = c.info(1);
    CHECK(after.batches - counted.batches == batches);
    CHECK(after.batched_writes - counted.batched_writes == 10);
    for (std::uint32_t id = 1; id <= 3; ++id)
      for (int i = 0; i < 10; ++i) CHECK(c.local(id, fmt::format("k{}", i)) == "v");
  }
}

TEST_CASE("replica actors: a write retried with its request id is applied once, and answered as it was") {
  cluster c(3);
  REQUIRE(c.elect(1));
  request_id first{hash128{7, 7}, 1}, second{hash128{7, 7}, 2}, gone{hash128{7, 7}, 3};
  CHECK(c.put(1, "k", "a", first).is_ok());
  CHECK(c.put(1, "k", "b").is_ok());
  // The retry of a put that took place: ok, and the later write stays.
  CHECK(c.put(1, "k", "a", first).is_ok());
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK(c.local(id, "k") == "b");
  // A CAS that took place answers swapped on its retry, not "found 1".
  auto swapped = c.cas(1, "n", std::nullopt, std::string("1"), second).value();
  CHECK(swapped.first);
  auto retried = c.cas(1, "n", std::nullopt, std::string("1"), second).value();
  CHECK(retried.first);
  CHECK(c.get(1, "n").value() == std::optional<std::string>("1"));
  // A refused CAS leaves no record: its retry is a new attempt, and may swap.
  auto refused = c.cas(1, "m", std::string("x"), std::string("y"), gone).value();
  CHECK_FALSE(refused.first);
  CHECK(c.put(1, "m", "x").is_ok());
  CHECK(c.cas(1, "m", std::string("x"), std::string("y"), gone).value().first);
  CHECK(c.get(1, "m").value() == std::optional<std::string>("y"));
  // A delete's retry does not delete what came after it.
  request_id third{hash128{7, 7}, 4};
  CHECK(c.del(1, "k", third).is_ok());
  CHECK(c.put(1, "k", "c").is_ok());
  CHECK(c.del(1, "k", third).is_ok());
  CHECK(c.get(1, "k").value() == std::optional<std::string>("c"));
}

TEST_CASE("replica actors: a retry that arrives while its first attempt is in flight waits for it, writes nothing") {
  cluster c(3);
  REQUIRE(c.elect(1));
  request_id rid{hash128{1, 2}, 9};
  auto counted = c.info(1);
  // All queued before the owner takes any. The first attempt waits for the
  // key behind "z" (so its record is not yet being written when the retry
  // comes); the retry comes after another client's write of the same key,
  // which it must not undo.
  (*c.client)->send(c.node(1).replica, put_atom::value, std::string("k"), std::string("z"), std::int64_t{0});
  (*c.client)->send(c.node(1).replica, put_atom::value, std::string("k"), std::string("a"), std::int64_t{0}, rid);
  (*c.client)->send(c.node(1).replica, put_atom::value, std::string("k"), std::string("b"), std::int64_t{0});
  (*c.client)->send(c.node(1).replica, put_atom::value, std::string("k"), std::string("a"), std::int64_t{0}, rid);
  c.drain();
  CHECK(c.puts_answered_ok(4) == 4);
  CHECK(c.info(1).batched_writes - counted.batched_writes == 3);
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK(c.local(id, "k") == "b");
}

TEST_CASE("replica actors: after a failover the new owner knows the writes that took place by their request ids") {
  cluster c(3);
  REQUIRE(c.elect(1));
  request_id rid{hash128{3, 4}, 1};
  CHECK(c.put(1, "k", "a", rid).is_ok());
  CHECK(c.put(1, "k", "b").is_ok());
  c.down(1);
  REQUIRE(c.elect(2));
  CHECK(c.put(2, "k", "a", rid).is_ok());
  CHECK(c.get(2, "k").value() == std::optional<std::string>("b"));
  // The record expires after the request memory (10 minutes by default);
  // until then it is a state-space key, which plain reads cannot see.
  CHECK(c.get(2, std::string("\xff\xff", 2) + "i").error().code() == status_code::invalid_argument);
}

TEST_CASE("replica actors: bad keys and values are refused before anything is queued") {
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "", "v").code() == status_code::invalid_argument);
  CHECK(c.put(1, std::string("\xff\xff", 2) + "x", "v").code() == status_code::invalid_argument);
  CHECK(c.put(1, std::string(limits::max_user_key_bytes + 1, 'k'), "v").code() == status_code::invalid_argument);
  CHECK(c.put(1, "k", std::string(limits::max_user_value_bytes + 1, 'v')).code() == status_code::invalid_argument);
  CHECK(c.del(1, "").code() == status_code::invalid_argument);
  CHECK(c.cas(1, "", std::nullopt, std::string("v")).error().code() == status_code::invalid_argument);
  CHECK(c.info(1).batched_writes == 0);
}

TEST_CASE("replica actors: a `peers` message from outside the node's process is ignored") {
  cluster c(3);
  REQUIRE(c.elect(1));
  // No sender of this system (what a message off the network looks like to
  // the check): were it taken, the owner would have no peers, and no majority.
  caf::anon_send(c.node(1).replica, peers_atom::value, std::vector<std::uint32_t>{1},
                 std::vector<caf::actor>{caf::actor_cast<caf::actor>(c.node(1).replica)});
  c.drain();
  CHECK(c.put(1, "k", "after").is_ok());
  CHECK(c.local(2, "k").has_value());
  // The same from an actor of this system is taken: now it cannot reach a majority.
  caf::send_as(caf::actor_cast<caf::actor>(c.node(1).replica), c.node(1).replica, peers_atom::value,
               std::vector<std::uint32_t>{1}, std::vector<caf::actor>{caf::actor_cast<caf::actor>(c.node(1).replica)});
  c.drain();
  CHECK_FALSE(c.put(1, "k2", "alone").is_ok());
}

TEST_CASE("replica actors: writes still in the owner's batch when it steps down are refused busy and written nowhere") {
  cluster c(3);
  REQUIRE(c.elect(1));
  auto before = c.links[0][1]->passed;
  for (int i = 0; i < 5; ++i)
    (*c.client)->send(c.node(1).replica, put_atom::value, fmt::format("b{}", i), std::string("v"), std::int64_t{0});
  // A higher ballot's prepare, taken before the owner's flush: it steps down.
  (*c.client)->send(c.node(1).replica, prepare_atom::value, ballot{1000, 2});
  c.drain();
  int busy = 0, promised = 0;
  for (int i = 0; i < 6; ++i)
    (*c.client)->receive([&](const promise_reply& r) { promised += r.accepted ? 1 : 0; },
                         [&](caf::error& e) { busy += to_status(e).code() == status_code::busy ? 1 : 0; },
                         caf::after(std::chrono::seconds(1)) >> [] { FAIL("a request was not answered"); });
  CHECK(promised == 1);
  CHECK(busy == 5);
  CHECK(c.links[0][1]->passed == before);  // no rwrite went out
  for (std::uint32_t id = 1; id <= 3; ++id)
    for (int i = 0; i < 5; ++i) CHECK_FALSE(c.local(id, fmt::format("b{}", i)).has_value());
}

TEST_CASE("replica actors: past max_client_writes a client write is refused busy, written nowhere; room comes back") {
  cluster c(3, 0ms, 1h, 1, 6);
  REQUIRE(c.elect(1));
  c.drain();
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    // Only the owner runs: its rounds go out and stay open, so the 6 it
    // admits are all still in when the other 4 arrive.
    for (int i = 0; i < 10; ++i)
      (*c.client)->send(c.node(1).replica, put_atom::value, fmt::format("r{}-{}", round, i), std::string("v"),
                        std::int64_t{0});
    run_replica_alone(c, 1);
    int busy = 0;
    for (int i = 0; i < 4; ++i)
      (*c.client)->receive([&](ok_atom) { FAIL("a write was acknowledged before a majority had it"); },
                           [&](caf::error& e) {
                             auto st = to_status(e);
                             CHECK(st.category() == status_category::transient);
                             CHECK(st.message().find("client writes not yet on a majority") != std::string::npos);
                             busy += st.code() == status_code::busy ? 1 : 0;
                           },
                           caf::after(std::chrono::seconds(1)) >> [] { FAIL("a refusal did not come at once"); });
    CHECK(busy == 4);
    // The peers answer: the 6 land, and their places are free again.
    c.drain();
    CHECK(c.puts_answered_ok(6) == 6);
    for (int i = 0; i < 10; ++i) CHECK(c.local(2, fmt::format("r{}-{}", round, i)).has_value() == (i < 6));
  }
}

TEST_CASE("replica actors: with one of three down writes still commit; with two down the owner steps down, ambiguous") {
  cluster c(3);
  REQUIRE(c.elect(1));
  c.down(3);
  CHECK(c.put(1, "a", "1").is_ok());
  CHECK(c.get(1, "a").value() == std::optional<std::string>("1"));
  c.down(2);
  auto s = c.put(1, "b", "2");
  CHECK(s.code() == status_code::failed);
  CHECK(s.category() == status_category::ambiguous);
  // Deposed: it serves nothing until it wins again, which needs a majority.
  CHECK(c.get(1, "a").error().code() == status_code::busy);
  CHECK_FALSE(c.elect(1));
  c.restart(2);
  CHECK(c.elect(1));
  CHECK(c.get(1, "a").value() == std::optional<std::string>("1"));
}

TEST_CASE("replica actors: a new owner recovers every acknowledged write through the promisers, by delta") {
  // Owner 1 writes while node 2 is down: the writes live on 1 and 3 only.
  // Then node 1 is lost for good and node 2 comes back: node 2 wins with
  // node 3's promise and must pull node 3's tree to serve those writes.
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "before", "b").is_ok());
  c.down(2);
  for (int i = 0; i < 40; ++i) CHECK(c.put(1, fmt::format("k{}", i), fmt::format("v{}", i)).is_ok());
  CHECK(c.del(1, "before").is_ok());
  CHECK_FALSE(c.local(2, "k7").has_value());  // node 2 never saw them
  c.down(1);
  c.restart(2);
  REQUIRE(c.elect(2));
  for (int i = 0; i < 40; ++i)
    CHECK(c.get(2, fmt::format("k{}", i)).value() == std::optional<std::string>(fmt::format("v{}", i)));
  CHECK_FALSE(c.get(2, "before").value().has_value());  // the delete too: a tombstone won
  // Its writes are stamped above every write of the old owner.
  CHECK(c.put(2, "k7", "new").is_ok());
  std::string bytes;
  REQUIRE(c.node(3).slot->view.load()->find(keyspace::data_key("k7"), bytes).value());
  CHECK(ttl::unwrap(bytes)->stamp->epoch.node == 2);
  CHECK(c.local(3, "k7") == "new");
}

TEST_CASE("replica actors: a replica that stops in the middle of a pull keeps nothing of the pull alive") {
  cluster c(3);
  REQUIRE(c.elect(1));
  c.partition(2);
  for (int i = 0; i < 40; ++i) CHECK(c.put(1, fmt::format("k{}", i), fmt::format("v{}", i)).is_ok());
  auto root = c.info(1).root;
  c.heal();
  // Node 2 pulls node 1's tree, but its first fetch gets no answer: the
  // link from node 2 to node 1 drops it, and time stands still.
  c.links[1][0]->cut = true;
  auto slot = c.node(2).slot;
  long idle = slot.use_count();
  auto dropped = c.links[1][0]->dropped;
  // As node 1 sends it: a sync from anyone but a member is refused.
  caf::send_as(caf::actor_cast<caf::actor>(c.node(1).replica), c.node(2).replica, sync_atom::value, root,
               std::uint32_t{1});
  c.sched->run();
  CHECK(c.links[1][0]->dropped == dropped + 1);
  // The replica stops (its node went away) before the answer: its state, and
  // with it its hold on the shard's slot and node store, goes.
  c.down(2);
  CHECK(slot.use_count() == idle - 1);
}

TEST_CASE("replica actors: a deposed owner's writes are fenced; the ballot that won later takes the shard") {
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "k", "from-1").is_ok());
  REQUIRE(c.elect(2));  // node 1 promised node 2's higher ballot and stepped down
  auto s = c.put(1, "k", "stale");
  CHECK(s.code() == status_code::busy);  // it knows it is no longer the owner
  CHECK(c.get(2, "k").value() == std::optional<std::string>("from-1"));
  CHECK(c.put(2, "k", "from-2").is_ok());
  // Node 1 campaigns again: its new ballot is above node 2's, so it wins, and
  // has what node 2 acknowledged.
  REQUIRE(c.elect(1));
  CHECK(c.get(1, "k").value() == std::optional<std::string>("from-2"));
  CHECK(c.put(2, "k", "late").code() == status_code::busy);
}

TEST_CASE("replica actors: a peer's refusal with a higher promise deposes the owner, whatever its round became") {
  cluster c(3);
  REQUIRE(c.elect(1));
  // Node 3 promises a higher ballot that nobody will campaign with: it now
  // refuses node 1's rwrites, which node 2 still takes.
  (*c.client)->send(c.node(3).replica, prepare_atom::value, ballot{1000, 3});
  c.drain();
  bool promised = false;
  (*c.client)->receive([&](const promise_reply& r) { promised = r.accepted; },
                       [](caf::error& e) { FAIL(caf::to_string(e)); },
                       caf::after(std::chrono::seconds(1)) >> [] { FAIL("no promise reply"); });
  REQUIRE(promised);
  // Node 2's yes makes a majority; node 3's no, before or after it, tells
  // node 1 that a higher ballot is about: it steps down.
  auto s = c.put(1, "k", "v");
  CHECK((s.is_ok() || s.category() == status_category::ambiguous));
  CHECK(c.info(1).role == 0);
  CHECK(c.put(1, "k", "w").code() == status_code::busy);
}

TEST_CASE("replica actors: votes for rounds the owner never sent count for nothing, yes or no") {
  cluster c(3);
  REQUIRE(c.elect(1));
  REQUIRE(c.put(1, "k", "v").is_ok());  // a round or more went out
  ballot epoch = c.info(1).epoch;
  // Round numbers are small and counted up: a forger's first guesses. Sent
  // from an actor of the owner's own system, as a message off the network
  // arrives (through a proxy): only what the vote says can tell it apart.
  auto forge = [&](const vote& v) {
    for (std::uint64_t round = 0; round < 256; ++round)
      (*c.client)->send(c.node(1).replica, rvote_atom::value, round, v);
  };
  SUBCASE("a no with a higher promise would depose the owner: it still owns") {
    forge(vote{false, ballot{epoch.counter + 1000, 3}});
    c.drain();
    CHECK(c.info(1).role == 2);
    CHECK(c.put(1, "k", "w").is_ok());
  }
  SUBCASE("a yes would make a majority of one disk: the write is not acknowledged") {
    c.partition(1);  // its own round cannot reach a majority
    (*c.client)->send(c.node(1).replica, put_atom::value, std::string("lone"), std::string("v"), std::int64_t{0});
    c.sched->run();  // the round is out; its deadline not yet passed
    forge(vote{true, epoch});
    c.drain();
    bool acknowledged = false;
    (*c.client)->receive([&](ok_atom) { acknowledged = true; }, [](caf::error&) {},
                         caf::after(std::chrono::seconds(1)) >> [] { FAIL("the put was not answered"); });
    CHECK_FALSE(acknowledged);
    CHECK_FALSE(c.local(2, "lone").has_value());
    CHECK_FALSE(c.local(3, "lone").has_value());
  }
}

TEST_CASE("replica actors: a yes repeated, or one replica under two ids, is one voice") {
  // Five nodes: a write needs three yes, the owner's own and two peers'.
  cluster c(5);
  REQUIRE(c.elect(1));
  REQUIRE(c.put(1, "k", "v").is_ok());
  // What stands for peers of node 1: an actor that answers every rwrite
  // with `yes_votes` yes votes, and silent ones.
  auto voter = [&](int yes_votes) {
    return c.sys->spawn([yes_votes](caf::event_based_actor* self) -> caf::behavior {
      self->set_default_handler(caf::drop);
      return {[self, yes_votes](rwrite_atom, const ballot& e, std::uint64_t round, const std::vector<stamped_op>&) {
        auto writer = caf::actor_cast<caf::actor>(self->current_sender());
        for (int i = 0; i < yes_votes; ++i) self->send(writer, rvote_atom::value, round, vote{true, e});
      }};
    });
  };
  auto silent = [&] { return voter(0); };
  std::vector<caf::actor> actors;
  SUBCASE("one peer says yes twice") {
    auto twice = voter(2);
    actors = {caf::actor_cast<caf::actor>(c.node(1).replica), twice, silent(), silent(), silent()};
  }
  SUBCASE("one peer is given under two ids") {
    auto once = voter(1);
    actors = {caf::actor_cast<caf::actor>(c.node(1).replica), once, once, silent(), silent()};
  }
  // As the node sends it (an actor of its process).
  caf::send_as(actors[0], c.node(1).replica, peers_atom::value, std::vector<std::uint32_t>{1, 2, 3, 4, 5}, actors);
  c.sched->run();
  // Counted as two voices it would be acknowledged on two disks of five.
  CHECK_FALSE(c.put(1, "lone", "v").is_ok());
  CHECK_FALSE(c.local(2, "lone").has_value());  // nothing reached a real peer
  for (auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::kill);
}

TEST_CASE("replica actors: write rounds to a peer that never answers leave nothing waiting in CAF's clock") {
  cluster c(3);
  REQUIRE(c.elect(1));
  c.drain();
  c.links[0][2]->cut = true;  // node 1's rwrites to node 3 are dropped, never answered
  // One write at a time, each its own round, answered through node 2 alone;
  // no timeout is triggered meanwhile (run, not drain). What waits in the
  // clock after the first (the owner's round timer, the shards' checkpoint
  // timers) is all that waits after the fiftieth: CAF request timeouts on
  // the rwrites were one a round and peer, kept until they fired.
  std::size_t timers_after_first = 0;
  for (int i = 0; i < 50; ++i) {
    (*c.client)->send(c.node(1).replica, put_atom::value, fmt::format("k{}", i), std::string("v"), std::int64_t{0});
    c.sched->run();
    REQUIRE(c.puts_answered_ok(1) == 1);
    if (i == 0) timers_after_first = c.sched->clock().schedule().size();
  }
  CHECK(c.links[0][2]->dropped == 50);
  CHECK(c.sched->clock().schedule().size() == timers_after_first);
  // Past the deadline the 50 rounds node 3 never answered are over; node 1
  // still owns the shard, and a write still goes through node 2.
  c.sched->advance_time(200ms);
  c.sched->run();
  CHECK(c.info(1).role == 2);
  CHECK(c.put(1, "after", "v").is_ok());
  c.links[0][2]->cut = false;
}

TEST_CASE("replica actors: five nodes tolerate two down; a restarted replica keeps its promise across the restart") {
  cluster c(5);
  REQUIRE(c.elect(3));
  c.down(4);
  c.down(5);
  CHECK(c.put(3, "k", "v").is_ok());
  // Node 1 restarts: the durable promise it made to node 3 is read back, so
  // a prepare below node 3's ballot is refused by it.
  c.down(1);
  c.restart(1);
  std::optional<std::string> payload;
  (*c.client)->send(c.node(1).shard, promise_atom::value);
  c.sched->run();
  (*c.client)->receive(
      [&](bool has, const std::string& p) {
        if (has) payload = p;
      },
      [](caf::error& e) { FAIL(caf::to_string(e)); },
      caf::after(std::chrono::seconds(1)) >> [] { FAIL("no promise state"); });
  auto promised = from_log(payload).value();
  CHECK(promised.promised.node == 3);  // node 1's durable promise, read back after its restart
  CHECK(promised.epoch == promised.promised);
  CHECK(c.get(3, "k").value() == std::optional<std::string>("v"));
  c.restart(4);
  c.restart(5);
  CHECK(c.put(3, "k2", "v2").is_ok());
  for (std::uint32_t id = 1; id <= 5; ++id) CHECK(c.local(id, "k2") == "v2");
}

TEST_CASE("replica actors: an owner cut off by a partition is fenced once it heals, and its write is not seen") {
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "k", "from-1").is_ok());
  c.partition(1);
  REQUIRE(c.elect(2));                        // with node 3's promise; node 1 never heard of it
  auto cut_off = c.put(1, "k", "while-cut");  // its rwrites are dropped: no majority
  CHECK(cut_off.category() == status_category::ambiguous);
  c.heal();
  CHECK(c.get(1, "k").error().code() == status_code::busy);  // it stepped down
  CHECK(c.get(2, "k").value() == std::optional<std::string>("from-1"));
  CHECK(c.node(3).slot->view.load()->get("k", *c.now).value() == "from-1");
  CHECK(c.put(2, "k", "from-2").is_ok());
  CHECK(c.get(2, "k").value() == std::optional<std::string>("from-2"));
  std::uint64_t dropped = 0;
  for (auto& row : c.links)
    for (auto& l : row) dropped += l->dropped;
  CHECK(dropped > 0);  // the partition did drop traffic
}

TEST_CASE("register checker: it accepts linearizable histories and finds the ones that are not") {
  using testing::register_op;
  using K = register_op::kind;
  auto op = [](K k, std::optional<std::string> arg, std::uint64_t call, std::uint64_t ret,
               std::optional<std::string> result = std::nullopt) {
    register_op o;
    o.what = k;
    o.arg = std::move(arg);
    o.call = call;
    o.ret = ret;
    o.result = std::move(result);
    return o;
  };
  const std::uint64_t pending = std::numeric_limits<std::uint64_t>::max();
  auto check = [](std::vector<register_op> h) { return testing::register_checker(std::move(h)).linearizable(); };
  CHECK(check({op(K::write, "a", 1, 2), op(K::read, {}, 3, 4, "a")}));
  CHECK_FALSE(check({op(K::write, "a", 1, 2), op(K::read, {}, 3, 4, std::nullopt)}));  // lost acknowledged write
  CHECK(check({op(K::write, "a", 1, 4), op(K::read, {}, 2, 3, std::nullopt)}));        // concurrent: either
  CHECK(check({op(K::write, "a", 1, 4), op(K::read, {}, 2, 3, "a")}));
  CHECK(check({op(K::write, "a", 1, pending), op(K::read, {}, 5, 6, "a")}));           // ambiguous, took effect
  CHECK(check({op(K::write, "a", 1, pending), op(K::read, {}, 5, 6, std::nullopt)}));  // or not
  CHECK_FALSE(check({op(K::write, "a", 1, pending), op(K::read, {}, 5, 6, "a"),
                     op(K::read, {}, 7, 8, std::nullopt)}));  // seen, then vanished
  CHECK_FALSE(check({op(K::write, "a", 1, 2), op(K::write, "b", 3, 4), op(K::read, {}, 5, 6, "a")}));  // stale read
  auto cas = op(K::cas, "b", 3, 4);
  cas.expected = "a";
  cas.swapped = true;
  CHECK(check({op(K::write, "a", 1, 2), cas, op(K::read, {}, 5, 6, "b")}));
  auto failed = op(K::cas, "b", 3, 4, "a");
  failed.expected = "z";
  CHECK(check({op(K::write, "a", 1, 2), failed, op(K::read, {}, 5, 6, "a")}));
  failed.result = "q";  // a refusal must report the value there
  CHECK_FALSE(check({op(K::write, "a", 1, 2), failed, op(K::read, {}, 5, 6, "a")}));
  CHECK(check({op(K::write, "a", 1, 2), op(K::del, {}, 3, 4), op(K::read, {}, 5, 6, std::nullopt)}));
}

namespace {

// Concurrent clients under random faults, recording each key's history with
// the coordinator's order of events as time.
struct random_run {
  cluster& c;
  std::mt19937_64 rng;
  std::uint64_t clock = 0;
  std::map<std::string, std::vector<testing::register_op>> history;
  std::uint32_t owner_guess = 1;
  std::uint64_t acknowledged_writes = 0;
  bool need_owner = false;  // a request was refused: the clients look for an owner

  random_run(cluster& cl, std::uint64_t seed) : c(cl), rng(seed) {}

  // Classifies a failed request: a refusal by a non-owner did nothing (left
  // out); a failed read says nothing (left out); anything else may or may not
  // have happened (pending).
  static bool did_nothing(const status& s) { return s.code() == status_code::busy; }

  void issue(std::uint32_t node, const std::string& key) {
    using K = testing::register_op::kind;
    testing::register_op op;
    std::uint64_t roll = rng() % 10;
    op.what = roll < 4 ? K::write : roll < 7 ? K::read : roll < 8 ? K::del : K::cas;
    op.call = ++clock;
    std::string value = fmt::format("v{}", clock);
    if (op.what == K::write) op.arg = value;
    if (op.what == K::cas) {
      auto& h = history[key];
      // Expect a value written before (often the current one), or absence.
      if (!h.empty() && rng() % 4 != 0) op.expected = h[rng() % h.size()].arg;
      op.arg = value;
    }
    auto& vec = history[key];
    vec.push_back(op);
    std::size_t index = vec.size() - 1;
    auto target = c.node(node).replica;
    auto done = [this, key, index](std::function<void(testing::register_op&)> fill) {
      auto& o = history[key][index];
      o.ret = ++clock;
      fill(o);
    };
    auto fail = [this, key, index](const status& st) {
      auto& o = history[key][index];
      if (did_nothing(st) || o.what == testing::register_op::kind::read) o.call = 0;  // 0: left out
      if (did_nothing(st)) need_owner = true;
    };
    c.sys->spawn([=, this](caf::event_based_actor* self) {
      auto on_error = [fail](caf::error& e) { fail(to_status(e)); };
      switch (history[key][index].what) {
        case K::write:
          self->request(target, std::chrono::seconds(30), put_atom::value, key, value, std::int64_t{0})
              .then(
                  [this, done](ok_atom) {
                    ++acknowledged_writes;
                    done([](auto&) {});
                  },
                  on_error);
          break;
        case K::del:
          self->request(target, std::chrono::seconds(30), del_atom::value, key)
              .then([done](ok_atom) { done([](auto&) {}); }, on_error);
          break;
        case K::read:
          self->request(target, std::chrono::seconds(30), get_atom::value, key)
              .then(
                  [done](bool found, const std::string& v) {
                    done([&](auto& o) {
                      if (found) o.result = v;
                    });
                  },
                  on_error);
          break;
        case K::cas: {
          auto exp = history[key][index].expected;
          self->request(target, std::chrono::seconds(30), cas_atom::value, key, exp.has_value(), exp.value_or(""), true,
                        value, std::int64_t{0})
              .then(
                  [done](bool swapped, bool has, const std::string& cur) {
                    done([&](auto& o) {
                      o.swapped = swapped;
                      if (!swapped && has) o.result = cur;
                    });
                  },
                  on_error);
          break;
        }
      }
    });
  }

  void elect_async(std::uint32_t node) {
    auto target = c.node(node).replica;
    c.sys->spawn([=, this](caf::event_based_actor* self) {
      self->request(target, std::chrono::seconds(30), elect_atom::value)
          .then(
              [this, node](bool owns) {
                if (owns) owner_guess = node;
              },
              [](caf::error&) {});
    });
  }

  void crash(std::uint32_t id) {
    auto& n = c.node(id);
    caf::anon_send_exit(n.replica, caf::exit_reason::kill);
    caf::anon_send_exit(n.shard, caf::exit_reason::kill);
    c.sched->run();
    n.fs->crash(fault_env::unsynced::lose);
    c.start_shard(n);
    c.start_replica(n);
    c.connect();
  }

  void step() {
    auto n = static_cast<std::uint32_t>(c.nodes.size());
    std::uint64_t r = rng() % 100;
    std::uint32_t any = static_cast<std::uint32_t>(1 + rng() % n);
    if (need_owner && r % 3 == 0) {
      need_owner = false;
      elect_async(rng() % 2 ? owner_guess : any);
    } else if (r < 45) {
      issue(rng() % 8 == 0 ? any : owner_guess, rng() % 2 ? "x" : "y");
    } else if (r < 75) {
      for (std::uint64_t i = rng() % 40; i > 0 && c.sched->try_run_once();) --i;
    } else if (r < 77) {
      c.partition(any, rng() % 2 == 0);
    } else if (r < 79) {
      // One direction of one link: asymmetric partitions, where an owner can
      // still reach replicas that promised a newer ballot it never heard of.
      auto to = static_cast<std::uint32_t>(1 + rng() % n);
      c.links[any - 1][to - 1]->cut = rng() % 3 != 0;
    } else if (r < 80) {
      c.heal();
    } else if (r < 81) {
      if (c.node(any).up)
        c.down(any);
      else
        c.restart(any);
    } else if (r < 82) {
      crash(any);
    } else if (r < 83) {
      elect_async(any);
    } else {
      c.sched->run();
      c.sched->clock().advance_time(std::chrono::milliseconds(20 + rng() % 100));
    }
  }

  // Heals everything, lets every request finish, and reads each key through
  // an owner: a lost acknowledged write shows up as a non-linearizable read.
  void settle() {
    c.heal();
    for (auto& node : c.nodes)
      if (!node.up) c.restart(node.id);
    for (int i = 0; i < 200 && (c.sched->has_job() || c.sched->has_pending_timeout()); ++i) {
      c.sched->run();
      c.sched->clock().advance_time(std::chrono::milliseconds(200));
    }
    c.sched->run();
    // Elections still running may depose the first winner: retry until a
    // read goes through (the cluster is whole again, so one must).
    for (const char* key : {"x", "y"}) {
      bool read_done = false;
      for (int attempt = 0; attempt < 20 && !read_done; ++attempt) {
        std::uint32_t id = static_cast<std::uint32_t>(1 + attempt % c.nodes.size());
        if (!c.elect(id)) continue;
        testing::register_op read;
        read.what = testing::register_op::kind::read;
        read.call = ++clock;
        auto v = c.get(id, key);
        if (!v) continue;
        read.ret = ++clock;
        read.result = *v;
        history[key].push_back(read);
        read_done = true;
      }
      REQUIRE_MESSAGE(read_done, "no owner could read " << key << " once the cluster was whole");
    }
  }

  bool check(std::string& why) {
    for (auto& [key, ops] : history) {
      std::vector<testing::register_op> kept;
      for (auto& o : ops)
        if (o.call != 0) kept.push_back(o);
      if (!testing::register_checker(kept).linearizable()) {
        why = fmt::format("key {}: {} operations, not linearizable", key, kept.size());
        return false;
      }
    }
    return true;
  }
};

}  // namespace

TEST_CASE(
    "replica actors: 100 random runs of concurrent clients under partitions, kills and power cuts are "
    "linearizable, and no acknowledged write is lost") {
  std::uint64_t base = doctest::getContextOptions()->rand_seed;
  std::uint64_t acknowledged = 0, ops = 0;
  for (std::uint64_t run = 0; run < 100; ++run) {
    cluster c(run % 4 == 3 ? 5 : 3);
    random_run r(c, base * 1000 + run);
    REQUIRE(c.elect(1));
    for (int i = 0; i < 150; ++i) r.step();
    r.settle();
    std::string why;
    INFO("run " << run << " (seed " << base * 1000 + run << ")");
    CHECK_MESSAGE(r.check(why), why);
    acknowledged += r.acknowledged_writes;
    for (auto& [k, v] : r.history) ops += v.size();
  }
  MESSAGE(ops << " operations recorded, " << acknowledged << " writes acknowledged");
  CHECK(acknowledged > 100);  // the runs did get writes through, not only faults
}

TEST_CASE(
    "replica actors: reads arriving together share confirm rounds; each round begins after the reads it "
    "vouches for") {
  cluster c(3);
  REQUIRE(c.elect(1));
  for (int i = 0; i < 20; ++i) REQUIRE(c.put(1, fmt::format("k{}", i), fmt::format("v{}", i)).is_ok());
  auto sent_by_owner = [&] { return c.links[0][1]->passed + c.links[0][2]->passed; };
  auto before = sent_by_owner();
  for (int i = 0; i < 20; ++i) (*c.client)->send(c.node(1).replica, get_atom::value, fmt::format("k{}", i));
  c.drain();
  std::map<std::string, int> answers;
  for (int i = 0; i < 20; ++i)
    (*c.client)->receive(
        [&](bool found, const std::string& v) {
          if (found) ++answers[v];
        },
        [](caf::error& e) { FAIL(caf::to_string(e)); },
        caf::after(std::chrono::seconds(1)) >> [] { FAIL("a read was not answered"); });
  CHECK(answers.size() == 20);
  // The first read's round goes out alone; the 19 that arrived during it
  // share the next: two rounds to two peers, where one round a read takes 40.
  CHECK(sent_by_owner() - before == 4);
}

TEST_CASE("replica actors: an owner that missed an election never serves a stale read, cut off or healed") {
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "k", "old").is_ok());
  c.partition(1);
  REQUIRE(c.elect(2));
  CHECK(c.put(2, "k", "new").is_ok());
  // Still cut off: its confirm round cannot reach a majority.
  auto cut_off = c.get(1, "k");
  REQUIRE_FALSE(cut_off.is_ok());
  CHECK(cut_off.error().code() == status_code::busy);
  // Healed, but it never heard of node 2's ballot: the round says so.
  c.heal();
  auto healed = c.get(1, "k");
  REQUIRE_FALSE(healed.is_ok());
  CHECK(healed.error().code() == status_code::busy);
  CHECK(c.get(2, "k").value() == std::optional<std::string>("new"));
}

TEST_CASE(
    "replica actors: writes of an owner that missed an election are refused even where it can still reach "
    "every replica") {
  cluster c(3);
  REQUIRE(c.elect(1));
  CHECK(c.put(1, "k", "old").is_ok());
  // Node 2's messages to node 1 are lost: node 1 never hears the prepare, yet
  // it reaches nodes 2 and 3, which promised node 2's higher ballot.
  c.links[1][0]->cut = true;
  REQUIRE(c.elect(2));
  CHECK(c.put(2, "k", "new").is_ok());
  auto stale = c.put(1, "k", "stale");
  REQUIRE_FALSE(stale.is_ok());
  CHECK(stale.category() == status_category::ambiguous);
  c.heal();
  CHECK(c.get(2, "k").value() == std::optional<std::string>("new"));
  CHECK(c.local(3, "k") == "new");
}

TEST_CASE(
    "replica actors: candidates competing for one shard never both own it; the winner takes writes, the "
    "others refuse them") {
  cluster c(5);
  // Three campaigns start before any of them is answered.
  for (std::uint32_t id : {1u, 2u, 3u}) (*c.client)->send(c.node(id).replica, elect_atom::value);
  c.drain();
  int won = 0;
  for (int i = 0; i < 3; ++i)
    (*c.client)->receive([&](bool b) { won += b ? 1 : 0; }, [&](caf::error&) {},
                         caf::after(std::chrono::seconds(1)) >> [] { FAIL("an elect went unanswered"); });
  CHECK(won <= 1);
  auto owners = c.owners();
  CHECK(owners.size() == static_cast<std::size_t>(won));
  if (owners.empty()) {  // all lost to each other: one more campaign settles it
    REQUIRE(c.elect(4));
    owners = c.owners();
  }
  REQUIRE(owners.size() == 1);
  std::uint32_t o = owners[0];
  CHECK(c.put(o, "k", "v").is_ok());
  for (std::uint32_t id = 1; id <= 5; ++id)
    if (id != o) CHECK(c.put(id, "k", "x").code() == status_code::busy);
  CHECK(c.get(o, "k").value() == std::optional<std::string>("v"));
}

TEST_CASE(
    "replica actors with heartbeats: an owner emerges unasked; a partitioned owner steps down and another is "
    "elected with every acknowledged write; healed, all replicas converge by anti-entropy") {
  cluster c(3, 10ms);
  c.advance(1000ms);  // 100 heartbeats: patience is 5 to 9
  auto first = c.owners();
  REQUIRE(first.size() == 1);
  std::uint32_t o = first[0];
  std::map<std::string, std::string> acked;
  for (int i = 0; i < 20; ++i) {
    auto k = fmt::format("k{}", i), v = fmt::format("v{}", i);
    if (c.put(o, k, v).is_ok()) acked[k] = v;
  }
  CHECK(acked.size() == 20);

  c.partition(o);
  c.advance(1000ms);
  auto others = c.owners();
  REQUIRE(others.size() == 1);  // the old owner stepped down: its heartbeat found no majority
  std::uint32_t o2 = others[0];
  CHECK(o2 != o);
  for (int i = 20; i < 30; ++i) {
    auto k = fmt::format("k{}", i), v = fmt::format("v{}", i);
    if (c.put(o2, k, v).is_ok()) acked[k] = v;
  }
  CHECK(acked.size() == 30);
  for (const auto& [k, v] : acked) CHECK(c.get(o2, k).value() == std::optional<std::string>(v));
  CHECK_FALSE(c.local(o, "k25").has_value());  // cut off when it was written

  c.heal();
  // Pushes sent into the partition time out first (30 request timeouts).
  c.advance(5000ms);
  auto root = c.info(1).root;
  CHECK(c.info(2).root == root);
  CHECK(c.info(3).root == root);
  CHECK(c.local(o, "k25") == "v25");
  // The healed replica did not depose the owner: its pre-votes found no
  // majority missing an owner, so its ballot never outgrew the owner's.
  CHECK(c.owners() == std::vector<std::uint32_t>{o2});
}

TEST_CASE(
    "replica actors with heartbeats: a replica restarted while pushes to it are still out is caught up by "
    "anti-entropy at once, not once those pushes time out") {
  cluster c(3, 10ms);
  std::uint32_t o = c.owner_elected_unasked();
  std::uint32_t f = o == 1 ? 2 : 1;
  REQUIRE(c.put(o, "k", "v").is_ok());
  // Cut off, f answers nothing: every push sent to it now is out until its
  // deadline (30 request timeouts: 3 s), as a push to a node whose process
  // died. Each replica pushes every 100 ms, to its two peers in turn.
  c.partition(f);
  REQUIRE(c.put(o, "late", "x").is_ok());  // the third replica makes the majority
  c.pass(500ms);
  CHECK(c.local(f, "late") == std::nullopt);
  // f's process is back: a new replica actor, which the others link again.
  c.down(f);
  c.heal();
  c.restart(f);
  // The owner's confirm rounds keep f from campaigning, so only a push
  // brings it "late"; the pushes into the cut are out for 2.5 s more.
  c.pass(1000ms);
  CHECK(c.local(f, "late") == "x");
  auto root = c.info(o).root;
  for (auto& n : c.nodes) CHECK(c.info(n.id).root == root);
  CHECK(c.owners() == std::vector<std::uint32_t>{o});
}

TEST_CASE(
    "replica actors with heartbeats: a replica running its own pre-vote says yes to another's, so two that "
    "lost their owner at once do not refuse each other until a request times out") {
  cluster c(3, 10ms);
  std::uint32_t o = c.owner_elected_unasked();
  std::uint32_t f = o == 1 ? 2 : 1;
  // Cut off, f hears no owner: past its patience (50 to 90 ms) it pre-votes,
  // and with no answers its pre-vote runs a whole request timeout (100 ms).
  // Cut off, it can only be a candidate by pre-voting: a campaign needs the
  // pre-vote's majority first.
  c.partition(f);
  bool pre_voting = false;
  for (int i = 0; i < 500 && !pre_voting; ++i) {
    c.advance(1ms);
    pre_voting = c.info(f).role == 1;
  }
  REQUIRE(pre_voting);
  // Another replica that lost the owner asks it, as over a link still up.
  bool yes = false;
  (*c.client)->send(c.node(f).replica, probe_atom::value);
  c.drain();
  (*c.client)->receive([&](bool b) { yes = b; }, [](caf::error& e) { FAIL(caf::to_string(e)); },
                       caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer to probe"); });
  CHECK(yes);
  // Nobody could hear f's pre-votes: the owner stays.
  c.heal();
  c.pass(500ms);
  CHECK(c.owners() == std::vector<std::uint32_t>{o});
}

TEST_CASE(
    "replica actors: a replica away longer than the tombstone retention does not bring back a delete purged "
    "meanwhile; it adopts a peer's tree and loses nothing acknowledged") {
  // Retention 2 s: a replica is absent once its last sync is 1 s old. Every
  // replica starts absent (it never synced) and settles with the others.
  cluster c(3, 10ms, 2s);
  std::uint32_t o = c.owner_elected_unasked();
  std::uint32_t f = o == 1 ? 2 : 1;  // the follower that goes away
  REQUIRE(c.put(o, "gone", "old").is_ok());
  REQUIRE(c.put(o, "kept", "1").is_ok());
  c.pass(200ms);
  CHECK(c.local(f, "gone") == "old");

  c.down(f);
  REQUIRE(c.del(o, "gone").is_ok());
  REQUIRE(c.put(o, "new", "2").is_ok());
  // The tombstone's purge deadline (2 s) passes on the two that stayed; they
  // keep syncing with each other, so neither is absent.
  c.pass(3000ms);
  CHECK(c.owners({o}) == std::vector<std::uint32_t>{o});
  CHECK(c.local(f, "gone") == "old");  // what the away replica still holds

  c.restart(f);
  CHECK(c.info(f).absent);
  c.pass(1000ms);
  auto back = c.info(f);
  CHECK_FALSE(back.absent);
  CHECK(back.synced_ns + 1'000'000'000 >= *c.now);
  for (auto& n : c.nodes) {
    INFO("node ", n.id);
    CHECK_FALSE(c.local(n.id, "gone").has_value());
    CHECK(c.local(n.id, "kept") == "1");
    CHECK(c.local(n.id, "new") == "2");
  }
  CHECK(c.get(o, "gone").value() == std::nullopt);
  CHECK(c.info(1).root == c.info(2).root);
  CHECK(c.info(1).root == c.info(3).root);
  CHECK(c.owners() == std::vector<std::uint32_t>{o});
}

TEST_CASE("replica actors: an absent replica cut off from the others neither campaigns nor catches up; it says why") {
  cluster c(3, 10ms, 2s);
  std::uint32_t o = c.owner_elected_unasked();
  std::uint32_t f = o == 3 ? 2 : 3;
  REQUIRE(c.put(o, "k", "v").is_ok());
  c.down(f);
  c.pass(3000ms);
  c.partition(f);
  c.restart(f);
  (*c.client)->send(c.node(f).replica, elect_atom::value);
  c.drain();
  std::string refusal;
  (*c.client)->receive([](bool) { FAIL("an absent replica campaigned"); },
                       [&](caf::error& e) { refusal = to_status(e).message(); },
                       caf::after(std::chrono::seconds(1)) >> [] { FAIL("no answer to elect"); });
  CHECK(refusal.find("away longer than half the tombstone retention") != std::string::npos);
  c.pass(2000ms);
  CHECK(c.info(f).absent);  // no answer from a majority: it neither adopted nor settled
  CHECK(c.owners() == std::vector<std::uint32_t>{o});
  c.heal();
  c.pass(1000ms);
  CHECK_FALSE(c.info(f).absent);
  CHECK(c.local(f, "k") == "v");
}

TEST_CASE(
    "replica actors: a whole cluster down longer than the tombstone retention settles and keeps every "
    "acknowledged write") {
  cluster c(3, 10ms, 2s);
  std::uint32_t o = c.owner_elected_unasked();
  std::map<std::string, std::string> acked;
  for (int i = 0; i < 10; ++i) {
    auto k = fmt::format("k{}", i), v = fmt::format("v{}", i);
    if (c.put(o, k, v).is_ok()) acked[k] = v;
  }
  CHECK(acked.size() == 10);
  for (auto& n : c.nodes) c.down(n.id);
  c.pass(5000ms);
  for (auto& n : c.nodes) c.start_replica(n);
  c.connect();
  for (auto& n : c.nodes) CHECK(c.info(n.id).absent);
  c.pass(2000ms);
  auto owners = c.owners();
  REQUIRE(owners.size() == 1);
  for (auto& n : c.nodes) {
    INFO("node ", n.id);
    auto i = c.info(n.id);
    CHECK_FALSE(i.absent);
    CHECK(i.settled_ns > 0);
  }
  for (const auto& [k, v] : acked) CHECK(c.get(owners[0], k).value() == std::optional<std::string>(v));
}
