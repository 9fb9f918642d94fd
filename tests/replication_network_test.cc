// Nodes linked over CAF's network layer (caf::io, TCP on loopback): three
// actor systems in one process, each with its own database on disk, its node
// published on its cluster-file port. Election, quorum writes and reads cross
// real sockets; a node with another cluster file is refused by name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "replication/node.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

// Ports from the process id, so parallel test processes rarely collide.
std::uint16_t base_port() { return static_cast<std::uint16_t>(20000 + (::getpid() % 2000) * 10); }

std::string cluster_text(std::string_view name, std::uint16_t base) {
  return fmt::format("cluster {}\nshards 2\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n", name,
                     base, base + 1, base + 2);
}

struct process_like {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<database> db;
  std::unique_ptr<node> n;

  process_like(const std::string& dir, const cluster_file& cluster, std::uint32_t id) {
    cfg.load<caf::io::middleman>();
    cfg.set("scheduler.max-threads", 2);
    add_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    database_options o;
    o.dir = dir;
    o.shards = cluster.shards;
    o.system = sys.get();
    o.shard.tombstone_retention = std::chrono::seconds(cluster.tombstone_retention_s);
    db = must(database::open(o));
    node_options no;
    no.id = id;
    no.cluster = cluster;
    no.db = db.get();
    no.request_timeout = std::chrono::milliseconds(3000);
    n = must(node::start(no));
  }
  ~process_like() {
    n.reset();
    db.reset();
  }
};

}  // namespace

TEST_CASE("network: three nodes over loopback elect an owner, replicate writes and read them back") {
  testing::temp_dir dir("net");
  auto base = base_port();
  auto cluster = must(cluster_file::parse(cluster_text("net", base)));
  std::vector<std::unique_ptr<process_like>> nodes;
  for (std::uint32_t id = 1; id <= 3; ++id)
    nodes.push_back(std::make_unique<process_like>(dir / fmt::format("node{}", id), cluster, id));
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
    client->request(nodes[0]->n->replica(0), std::chrono::seconds(10), put_atom::value, fmt::format("k{}", i),
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
  // Every node's own shard 0 holds the writes (all were up): read it locally.
  for (auto& p : nodes) {
    auto v = p->db->slot_of(0)->view.load()->get("k19", system_now_ns());
    REQUIRE(v.is_ok());
    CHECK(*v == std::optional<std::string>("v19"));
  }
  // Node 2 owns shard 1, not shard 0.
  status refused;
  client2->request(nodes[1]->n->replica(0), std::chrono::seconds(10), put_atom::value, std::string("x"),
                   std::string("y"), std::int64_t{0})
      .receive([&](ok_atom) {}, [&](caf::error& e) { refused = to_status(e); });
  CHECK(refused.code() == status_code::busy);
}

TEST_CASE("network: a node with another cluster file, or a node id missing from it, is refused by name") {
  testing::temp_dir dir("net2");
  auto base = static_cast<std::uint16_t>(base_port() + 5);
  auto cluster = must(cluster_file::parse(cluster_text("net", base)));
  process_like one(dir / "node1", cluster, 1);
  // Node 2 was given a cluster file with another name: same addresses.
  auto other = must(cluster_file::parse(cluster_text("other", base)));
  process_like two(dir / "node2", other, 2);
  auto missing = two.n->connect_peers();
  REQUIRE(std::find(missing.begin(), missing.end(), 1u) != missing.end());
  bool named = false;
  for (const auto& e : two.n->last_errors())
    if (e.find("node 1 refused the link") != std::string::npos && e.find(cluster.fingerprint().to_hex()) != std::string::npos &&
        e.find(other.fingerprint().to_hex()) != std::string::npos)
      named = true;
  CHECK(named);
  // A node id the cluster file does not have cannot start.
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  database_options o;
  o.dir = dir / "node9";
  o.shards = 2;
  o.system = &sys;
  auto db = must(database::open(o));
  node_options no;
  no.id = 9;
  no.cluster = cluster;
  no.db = db.get();
  auto n = node::start(no);
  REQUIRE_FALSE(n.is_ok());
  CHECK(n.error().message().find("node 9 is not in cluster file net") != std::string::npos);
  // Nor with another shard count.
  no.id = 3;
  auto four = must(cluster_file::parse(fmt::format(
      "cluster net\nshards 4\nnode 1 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n", base, base + 2)));
  no.cluster = four;
  auto m = node::start(no);
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.error().message().find("the database has 2 shards, cluster net has 4") != std::string::npos);
}
