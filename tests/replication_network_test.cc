// Nodes linked over CAF's network layer (caf::io, TCP on loopback): three
// actor systems in one process, each with its own database on disk, its node
// published on its cluster-file port. Election, quorum writes and reads cross
// real sockets; a node with another cluster file is refused by name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include "replication/node.h"
#include "tests/support/node_process.h"
#include "tests/support/poll.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

// Ports from the process id, so parallel test processes rarely collide.
// Below 24000 (three_nodes.h takes 29000 up), and below 32768, where Linux's
// ephemeral ports begin: a port an outgoing connection holds cannot be
// listened on.
std::uint16_t base_port() { return static_cast<std::uint16_t>(20000 + (::getpid() % 390) * 10); }

std::string cluster_text(std::string_view name, std::uint16_t base) {
  return fmt::format("cluster {}\nshards 2\ntls off\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n",
                     name, base, base + 1, base + 2);
}

}  // namespace

TEST_CASE("network: three nodes over loopback elect an owner, replicate writes and read them back") {
  testing::temp_dir dir("net");
  auto base = base_port();
  auto cluster = must(cluster_file::parse(cluster_text("net", base)));
  std::vector<std::unique_ptr<testing::node_process>> nodes;
  for (std::uint32_t id = 1; id <= 3; ++id)
    nodes.push_back(std::make_unique<testing::node_process>(dir / fmt::format("node{}", id), cluster, id));
  for (auto& p : nodes) {
    auto missing = p->n->connect_peers();
    CHECK(missing.empty());
    for (const auto& e : p->n->last_errors()) MESSAGE(e);
  }
  caf::scoped_actor client{*nodes[0]->sys};
  // Shard 0 owned by node 1, shard 1 by node 2: elections cross the network.
  bool owns = false;
  client->request(nodes[0]->n->replica(0), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(owns);
  caf::scoped_actor client2{*nodes[1]->sys};
  owns = false;
  client2->request(nodes[1]->n->replica(1), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(owns);

  for (int i = 0; i < 20; ++i) {
    bool ok = false;
    client
        ->request(nodes[0]->n->replica(0), std::chrono::seconds(10), put_atom::value, fmt::format("k{}", i),
                  fmt::format("v{}", i), std::int64_t{0})
        .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    CHECK(ok);
  }
  bool found = false;
  std::string value;
  client->request(nodes[0]->n->replica(0), std::chrono::seconds(10), get_atom::value, std::string("k7"))
      .receive([&](bool f, const std::string& v) { found = f, value = v; },
               [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(found);
  CHECK(value == "v7");
  // Every node's own shard 0 gets the writes (all were up): read it locally.
  // An acknowledgement needs a majority only, so the third replica's copy of
  // the last write may still be on its way: wait for it, bounded.
  for (auto& p : nodes) {
    bool holds = testing::poll_until(
        [&] {
          auto v = p->db->core().slot_of(0)->view.load()->get("k19", system_now_ns());
          return v.is_ok() && *v == std::optional<std::string>("v19");
        },
        std::chrono::seconds(10));
    CHECK(holds);
  }
  // Node 2 owns shard 1, not shard 0.
  status refused;
  client2
      ->request(nodes[1]->n->replica(0), std::chrono::seconds(10), put_atom::value, std::string("x"), std::string("y"),
                std::int64_t{0})
      .receive([&](ok_atom) {}, [&](caf::error& e) { refused = to_status(e); });
  CHECK(refused.code() == status_code::busy);
}

TEST_CASE("network: a node with another cluster file, or a node id missing from it, is refused by name") {
  testing::temp_dir dir("net2");
  auto base = static_cast<std::uint16_t>(base_port() + 5);
  auto cluster = must(cluster_file::parse(cluster_text("net", base)));
  testing::node_process one(dir / "node1", cluster, 1);
  // Node 2 was given a cluster file with another name: same addresses.
  auto other = must(cluster_file::parse(cluster_text("other", base)));
  testing::node_process two(dir / "node2", other, 2);
  auto missing = two.n->connect_peers();
  REQUIRE(std::find(missing.begin(), missing.end(), 1u) != missing.end());
  bool named = false;
  for (const auto& e : two.n->last_errors())
    if (e.find("node 1 refused the link") != std::string::npos &&
        e.find(cluster.fingerprint().to_hex()) != std::string::npos &&
        e.find(other.fingerprint().to_hex()) != std::string::npos)
      named = true;
  CHECK(named);
  // A node id the cluster file does not have cannot start.
  caf::actor_system_config cfg;
  configure_system(cfg);
  caf::actor_system sys{cfg};
  auto db = must(open_database(core_options_for(cluster, dir / "node9", sys)));
  node_options no;
  no.id = 9;
  no.cluster = cluster;
  no.db = db.get();
  auto n = node::start(no);
  REQUIRE_FALSE(n.is_ok());
  CHECK(n.error().message().find("node 9 is not in cluster file net") != std::string::npos);
  // Nor without TLS, loopback included, unless insecure is set: the
  // refusal says who could join, and how to have TLS instead.
  no.id = 1;
  for (auto [second, who] : {std::pair{"127.0.0.1", "every user and process of this machine"},
                             std::pair{"10.255.255.1", "node 2 is at 10.255.255.1, beyond loopback"}}) {
    CAPTURE(second);
    no.cluster = must(cluster_file::parse(fmt::format(
        "cluster net\nshards 2\ntls off\nnode 1 127.0.0.1 {}\nnode 2 {} {}\n", base + 7, second, base + 8)));
    no.insecure = false;
    auto open = node::start(no);
    REQUIRE_FALSE(open.is_ok());
    CHECK(open.error().code() == status_code::invalid_argument);
    CHECK(open.error().message().find(who) != std::string::npos);
    CHECK(open.error().message().find("can join as any node or client") != std::string::npos);
    CHECK(open.error().message() == plaintext_warning(no.cluster));
    no.insecure = true;
    auto started = node::start(no);
    CHECK_MESSAGE(started.is_ok(), started.error().to_string());
  }
  // With no `tls` line a cluster is over TLS: a node without a certificate
  // does not start, insecure or not.
  no.cluster = must(cluster_file::parse(fmt::format("cluster net\nshards 2\nnode 1 127.0.0.1 {}\n", base + 7)));
  CHECK(no.cluster.tls);
  auto bare = node::start(no);
  REQUIRE_FALSE(bare.is_ok());
  CHECK(bare.error().message().find("needs its certificate, its key and the cluster's CA") != std::string::npos);
  // Nor with another shard count.
  no.id = 3;
  auto four = must(cluster_file::parse(
      fmt::format("cluster net\nshards 4\ntls off\nnode 1 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n", base, base + 2)));
  no.cluster = four;
  auto m = node::start(no);
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.error().message().find("the database has 2 shards, cluster net has 4") != std::string::npos);
  // Nor with a tombstone retention anti-entropy cannot keep its replicas
  // present in: 3 nodes, a push a second, a sync within 4 s; half of 7 s is not.
  for (auto [seconds, ok] : {std::pair{7, false}, std::pair{8, true}}) {
    no.cluster =
        must(cluster_file::parse(cluster_text("net", base) + fmt::format("tombstone_retention_s {}\n", seconds)));
    no.heartbeat = std::chrono::milliseconds(100);
    no.anti_entropy_ticks = 10;
    auto r = node::start(no);
    INFO(seconds, " s");
    CHECK(r.is_ok() == ok);
    if (!ok)
      CHECK(r.error().message().find("tombstone_retention_s 7 is too short for anti-entropy every 1000 ms on 3 "
                                     "nodes (a healthy replica would count as absent and stop acknowledging "
                                     "writes): at least 8 s") != std::string::npos);
  }
}

namespace {

// Each node's view of shard i, through its own replica (a checkpoint is taken
// for the root).
std::optional<replica_info> info_of(testing::node_process& p, std::size_t shard) {
  caf::scoped_actor asker{*p.sys};
  std::optional<replica_info> out;
  asker->request(p.n->replica(shard), std::chrono::seconds(10), info_atom::value)
      .receive([&](const replica_info& i) { out = i; }, [](caf::error&) {});
  return out;
}

std::optional<std::size_t> owner_of(std::vector<std::unique_ptr<testing::node_process>>& nodes, std::size_t shard) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i]) continue;
    auto info = info_of(*nodes[i], shard);
    if (info && info->role == 2) {
      if (found) return std::nullopt;  // two claim it: not settled yet
      found = i;
    }
  }
  return found;
}

}  // namespace

TEST_CASE(
    "network: with heartbeats an owner emerges unasked; when its node dies another takes over with every "
    "acknowledged write, and the dead node, back, is linked again and catches up by anti-entropy") {
  testing::temp_dir dir("failover");
  auto base = static_cast<std::uint16_t>(base_port() + 8);
  auto cluster = must(cluster_file::parse(cluster_text("failover", base)));
  testing::node_process_options heartbeats;
  heartbeats.heartbeat = std::chrono::milliseconds(50);
  std::vector<std::unique_ptr<testing::node_process>> nodes;
  auto start = [&](std::uint32_t id) {
    nodes.at(id - 1) =
        std::make_unique<testing::node_process>(dir / fmt::format("node{}", id), cluster, id, heartbeats);
  };
  nodes.resize(3);
  for (std::uint32_t id = 1; id <= 3; ++id) start(id);
  auto link_all = [&] {
    return testing::poll_until(
        [&] {
          bool all = true;
          for (auto& p : nodes)
            if (p) all &= p->n->connect_peers().empty();
          return all;
        },
        std::chrono::seconds(30));
  };
  REQUIRE(link_all());
  // Nobody was asked to campaign: the followers' patience runs out.
  std::optional<std::size_t> owner;
  auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  REQUIRE(testing::poll_until([&] { return (owner = owner_of(nodes, 0)).has_value(); }, std::chrono::seconds(30)));
  MESSAGE("owner " << *owner + 1 << " at " << since());

  std::map<std::string, std::string> acked;
  {
    caf::scoped_actor client{*nodes[*owner]->sys};
    for (int i = 0; i < 30; ++i) {
      std::string k = fmt::format("k{:03}", i), v = fmt::format("v{}", i);
      client->request(nodes[*owner]->n->replica(0), std::chrono::seconds(10), put_atom::value, k, v, std::int64_t{0})
          .receive([&](ok_atom) { acked[k] = v; }, [&](caf::error& e) { MESSAGE(to_status(e).to_string()); });
    }
  }
  CHECK(acked.size() >= 25);  // a write refused while an election settles is not acknowledged
  std::size_t dead = *owner;
  nodes[dead].reset();  // its actor system goes: every connection to it breaks

  std::optional<std::size_t> next;
  REQUIRE(testing::poll_until([&] { return (next = owner_of(nodes, 0)).has_value(); }, std::chrono::seconds(30)));
  CHECK(*next != dead);
  MESSAGE("next " << *next + 1 << " at " << since());
  {
    caf::scoped_actor client{*nodes[*next]->sys};
    std::size_t missing = 0;
    for (const auto& [k, v] : acked) {
      std::optional<std::string> got;
      client->request(nodes[*next]->n->replica(0), std::chrono::seconds(10), get_atom::value, k)
          .receive(
              [&](bool found, const std::string& value) {
                if (found) got = value;
              },
              [&](caf::error& e) { MESSAGE(to_status(e).to_string()); });
      if (got != v) ++missing;
    }
    CHECK(missing == 0);
    // A write the dead node never saw, for it to catch up on.
    bool ok = false;
    client
        ->request(nodes[*next]->n->replica(0), std::chrono::seconds(10), put_atom::value, std::string("late"),
                  std::string("x"), std::int64_t{0})
        .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { MESSAGE(to_status(e).to_string()); });
    CHECK(ok);
  }

  // Back on the same disk and port: linked again by every node, and it
  // catches up in the background until every replica holds the same tree.
  start(static_cast<std::uint32_t>(dead + 1));
  REQUIRE(link_all());
  bool converged = testing::poll_until(
      [&] {
        for (auto& p : nodes) p->n->connect_peers();  // as serve does: a loss reported late is linked again
        std::optional<hash128> root;
        for (auto& p : nodes) {
          auto i = info_of(*p, 0);
          if (!i) return false;
          if (root && *root != i->root) return false;
          root = i->root;
        }
        return true;
      },
      std::chrono::seconds(60));
  CHECK(converged);
  MESSAGE("converged at " << since());
  auto late = nodes[dead]->db->core().slot_of(0)->view.load()->get("late", system_now_ns());
  REQUIRE(late.is_ok());
  CHECK(*late == std::optional<std::string>("x"));
}

namespace {

// A node of the cluster file that links and then never answers: it hands
// out, for every shard, one actor that swallows every message and
// remembers the id of the last request it took.
struct silent_node {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<std::atomic<std::uint64_t>> last_request = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::shared_ptr<std::atomic<int>> hellos = std::make_shared<std::atomic<int>>(0);
  caf::actor sink;
  node_actor published;

  silent_node(std::uint16_t port, std::size_t shards) {
    configure_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    sink = sys->spawn([seen = last_request](caf::event_based_actor* self) -> caf::behavior {
      self->set_default_handler([self, seen](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
        if (self->current_message_id().is_request()) seen->store(self->current_message_id().integer_value());
        return caf::delegated<caf::message>{};  // never answered
      });
      return {[](caf::unit_t) {}};
    });
    published =
        sys->spawn([replicas = std::vector<caf::actor>(shards, sink), hellos = hellos]() -> node_actor::behavior_type {
          return {
              [replicas, hellos](hello_atom, std::uint32_t, const hash128&, std::uint32_t) {
                ++*hellos;
                return replicas;
              },
              [](offer_atom, std::uint32_t, const caf::actor&) { return false; },
          };
        });
    REQUIRE(sys->middleman().publish(published, port, "127.0.0.1", true));
  }
  ~silent_node() {
    (void)sys->middleman().unpublish(published, 0);
    caf::anon_send_exit(sink, caf::exit_reason::kill);
    caf::anon_send_exit(published, caf::exit_reason::kill);
  }
};

}  // namespace

TEST_CASE("network: a reply counts only from the node of the peer asked; another's, with the right id, does not") {
  testing::temp_dir dir("net-forged-reply");
  auto base = base_port();  // the first case's: its nodes are gone, and nodes listen with SO_REUSEADDR
  auto cluster = must(cluster_file::parse(cluster_text("forged", base)));
  testing::node_process_options o;
  o.request_timeout = std::chrono::milliseconds(1500);
  testing::node_process one(dir / "node1", cluster, 1, o);
  {
    // A real cluster first: node 2 takes shard 0 over, and node 1 pulls
    // from it, so node 1 is not absent (design 6) when it campaigns below.
    testing::node_process two(dir / "node2", cluster, 2, o), three(dir / "node3", cluster, 3, o);
    for (auto* p : {&one, &two, &three}) REQUIRE(p->n->connect_peers().empty());
    caf::scoped_actor c2{*two.sys};
    bool owns = false;
    c2->request(two.n->replica(0), std::chrono::seconds(10), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
    REQUIRE(owns);
    // Not absent: else its campaign below would begin with a recovery, and
    // its first request to node 2 would not be the prepare.
    caf::scoped_actor c1{*one.sys};
    REQUIRE(testing::poll_until(
        [&] {
          bool absent = true;
          c1->request(one.n->replica(0), std::chrono::seconds(5), info_atom::value)
              .receive([&](const replica_info& i) { absent = i.absent; }, [](caf::error&) {});
          return !absent;
        },
        std::chrono::seconds(10)));
  }
  // Nodes 2 and 3 are gone; at their addresses now, nodes that link and
  // never answer.
  silent_node two(static_cast<std::uint16_t>(base + 1), cluster.shards),
      three(static_cast<std::uint16_t>(base + 2), cluster.shards);
  // Linked once node 1 saw the old links go and said hello to both.
  REQUIRE(testing::poll_until([&] { return one.n->connect_peers().empty() && *two.hellos > 0 && *three.hellos > 0; },
                              std::chrono::seconds(10)));
  // A client of the cluster (node id 0): any holder of the cluster's CA
  // certificate can be one. It reaches node 1's replica through hello.
  caf::actor_system_config client_cfg;
  configure_system(client_cfg);
  caf::actor_system client_sys{client_cfg};
  auto node1 = must(connect_to(client_sys, "127.0.0.1", base, false, std::chrono::seconds(5)));
  caf::scoped_actor client{client_sys};
  std::vector<caf::actor> replicas;
  client
      ->request(node1, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                protocol_version)
      .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
               [&](caf::error& e) { FAIL(to_status(e).message()); });
  REQUIRE(replicas.size() == cluster.shards);
  hash128 root;
  client->request(replicas[0], std::chrono::seconds(5), info_atom::value)
      .receive([&](const replica_info& i) { root = i.root; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
  // Node 1 campaigns for shard 0; nodes 2 and 3 never answer its requests.
  caf::scoped_actor asker{*one.sys};
  auto asked_before = two.last_request->load();
  asker->send(one.n->replica(0), elect_atom::value);
  // The client answers each request node 1 makes of node 2 in node 2's
  // place, with its id (a guess that happens to be right): yes to the
  // prepare, holding node 1's own tree; merged to the sync that follows.
  // Taken, they would make node 1 the owner with no other node's word.
  std::uint64_t answered = asked_before;
  int forged = 0;
  for (; forged < 2; ++forged) {
    bool asked = testing::poll_until([&] { return two.last_request->load() != answered || !asker->mailbox().empty(); },
                                     std::chrono::seconds(5));
    if (!asked || !asker->mailbox().empty()) break;
    answered = two.last_request->load();
    auto reply = forged == 0 ? caf::make_message(promise_reply{true, ballot{}, ballot{}, root})
                             : caf::make_message(merge_report{});
    caf::actor_cast<caf::abstract_actor*>(replicas[0])
        ->enqueue(caf::make_mailbox_element(client->ctrl(), caf::make_message_id(answered).response_id(), {},
                                            std::move(reply)),
                  nullptr);
  }
  CHECK(forged >= 1);
  bool owns = true;
  asker->receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).message()); },
                 caf::after(std::chrono::seconds(10)) >> [] { FAIL("no answer to elect"); });
  CHECK_FALSE(owns);
}

TEST_CASE("network: what only replicas send each other is refused from a client; a 2^64-1 ballot changes nothing") {
  testing::temp_dir dir("net-roles");
  auto port = static_cast<std::uint16_t>(base_port() + 3);
  auto cluster =
      must(cluster_file::parse(fmt::format("cluster roles\nshards 1\ntls off\nnode 1 127.0.0.1 {}\n", port)));
  testing::node_process one(dir / "node1", cluster, 1);
  caf::scoped_actor member{*one.sys};
  auto elect_here = [&] {
    bool owns = false;
    member->request(one.n->replica(0), std::chrono::seconds(10), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
    return owns;
  };
  REQUIRE(elect_here());
  // A client of the cluster: it reaches the replica through hello.
  caf::actor_system_config client_cfg;
  configure_system(client_cfg);
  caf::actor_system client_sys{client_cfg};
  auto node1 = must(connect_to(client_sys, "127.0.0.1", port, false, std::chrono::seconds(5)));
  caf::scoped_actor client{client_sys};
  replica_actor replica;
  client
      ->request(node1, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                protocol_version)
      .receive([&](const std::vector<caf::actor>& r) { replica = caf::actor_cast<replica_actor>(r.at(0)); },
               [&](caf::error& e) { FAIL(to_status(e).message()); });
  auto info = [&] {
    replica_info out;
    client->request(replica, std::chrono::seconds(5), info_atom::value)
        .receive([&](const replica_info& i) { out = i; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
    return out;
  };
  const replica_info before = info();
  REQUIRE(before.role == 2);
  // Each refused with a reason, none answered as a member would be.
  auto refused = [&]<class Reply>(std::type_identity<Reply>, auto... xs) {
    std::string why;
    client->request(replica, std::chrono::seconds(5), xs...)
        .receive([&](const Reply&) { why = "answered"; }, [&](caf::error& e) { why = to_status(e).message(); });
    return why;
  };
  const ballot top{UINT64_MAX, 1};
  CHECK(refused(std::type_identity<promise_reply>(), prepare_atom::value, top)
            .find("`prepare` is for the cluster's replicas") != std::string::npos);
  CHECK(refused(std::type_identity<promise_reply>(), prepare_atom::value, ballot{before.promised.counter + 1, 7})
            .find("`prepare`") != std::string::npos);
  CHECK(refused(std::type_identity<vote>(), confirm_atom::value, before.epoch).find("`confirm`") != std::string::npos);
  CHECK(refused(std::type_identity<std::vector<std::string>>(), fetch_atom::value, std::vector<hash128>{before.root})
            .find("`fetch`") != std::string::npos);
  CHECK(refused(std::type_identity<merge_report>(), sync_atom::value, before.root, std::uint32_t{1}).find("`sync`") !=
        std::string::npos);
  CHECK(refused(std::type_identity<bool>(), elect_atom::value).find("`elect`") != std::string::npos);
  bool yes = true;
  client->request(replica, std::chrono::seconds(5), probe_atom::value)
      .receive([&](bool b) { yes = b; }, [&](caf::error&) {});
  CHECK_FALSE(yes);
  // A write under a ballot above the promise, stamped higher still: taken,
  // it deposed the owner and its stamp beat every later write.
  ballot higher{before.promised.counter + 1, 1};
  client->send(replica, rwrite_atom::value, higher, std::uint64_t{1},
               std::vector<stamped_op>{stamped_op{"forged", stamp{top, 1}, true, "x", false, 0}});
  // Messages of one sender arrive in order: this answer comes after the
  // rwrite was handled.
  auto after = info();
  CHECK(after.promised == before.promised);
  CHECK(after.epoch == before.epoch);
  CHECK(after.role == 2);
  bool found = true;
  client->request(replica, std::chrono::seconds(5), get_atom::value, std::string("forged"))
      .receive([&](bool f, const std::string&) { found = f; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
  CHECK_FALSE(found);
  // The node still elects (its promise is not poisoned), and the client's
  // own writes work.
  CHECK(elect_here());
  bool put = false;
  client
      ->request(replica, std::chrono::seconds(5), put_atom::value, std::string("k"), std::string("v"), std::int64_t{0})
      .receive([&](ok_atom) { put = true; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
  CHECK(put);
}

TEST_CASE("network: an offer is taken only of the sender's own actor, and a node offers one id") {
  testing::temp_dir dir("net-offer");
  auto base = static_cast<std::uint16_t>(base_port() + 4);
  auto cluster = must(cluster_file::parse(
      fmt::format("cluster offers\nshards 1\ntls off\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n",
                  base - 2, base - 1, base)));
  testing::node_process three(dir / "node3", cluster, 3);
  caf::actor_system_config other_cfg;
  configure_system(other_cfg);
  caf::actor_system other{other_cfg};
  auto node3 = must(connect_to(other, "127.0.0.1", base, false, std::chrono::seconds(5)));
  caf::scoped_actor stranger{other};
  auto offer = [&](std::uint32_t id, const caf::actor& a) {
    std::optional<bool> taken;
    stranger->request(node3, std::chrono::seconds(5), offer_atom::value, id, a)
        .receive([&](bool b) { taken = b; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
    REQUIRE(taken.has_value());
    return *taken;
  };
  // An actor of node 3's own process (its replica, as any client learns it
  // through hello) offered as node 1: votes node 3 sent "node 1" would come
  // from node 3 itself.
  std::vector<caf::actor> replicas;
  stranger
      ->request(node3, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                protocol_version)
      .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
               [&](caf::error& e) { FAIL(to_status(e).message()); });
  REQUIRE(replicas.size() == 1);
  CHECK_FALSE(offer(1, replicas[0]));
  // Its own actor, once; the same node as a second id is refused.
  auto own = other.spawn([]() -> caf::behavior { return {[](hello_atom) {}}; });
  CHECK(offer(1, own));
  CHECK_FALSE(offer(2, own));
  CHECK(offer(1, own));        // the same id again (a node that linked anew) is taken
  CHECK_FALSE(offer(3, own));  // not below the receiver's id
  caf::anon_send_exit(own, caf::exit_reason::kill);
}
