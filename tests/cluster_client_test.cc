// The cluster client (include/magnetite/cluster_client.h) against three nodes
// over loopback in this process: routing to each shard's owner, following an
// owner that moved or died, at-most-once retries, and bad input refused
// before anything is sent.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>

#include "actors/caf_headers.h"  // before any other CAF header

#include "magnetite/cluster_client.h"
#include "replication/node.h"
#include "tests/support/node_process.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

std::uint16_t base_port() { return static_cast<std::uint16_t>(24000 + (::getpid() % 1500) * 10); }

struct three_nodes {
  testing::temp_dir dir{"client"};
  std::string file = dir / "cluster";
  cluster_file cluster;
  std::vector<std::unique_ptr<testing::node_process>> nodes;

  explicit three_nodes(std::uint16_t base) {
    std::string text = fmt::format(
        "cluster client\nshards 2\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\n"
        "node 3 127.0.0.1 {}\n",
        base, base + 1, base + 2);
    std::ofstream(file) << text;
    cluster = must(cluster_file::parse(text));
    for (std::uint32_t id = 1; id <= 3; ++id)
      nodes.push_back(std::make_unique<testing::node_process>(dir / fmt::format("node{}", id), cluster, id));
    for (auto& p : nodes) REQUIRE(p->n->connect_peers().empty());
  }

  // Node id campaigns for shard s (and wins: every node is up).
  bool elect(std::uint32_t id, std::size_t s) {
    caf::scoped_actor self{*nodes[id - 1]->sys};
    bool owns = false;
    self->request(nodes[id - 1]->n->replica(s), std::chrono::seconds(10), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [](caf::error&) {});
    return owns;
  }

  std::unique_ptr<cluster_client> client(std::chrono::milliseconds call = std::chrono::seconds(10)) {
    cluster_client_options o;
    o.cluster_file = file;
    o.call_timeout = call;
    o.attempt_timeout = std::chrono::milliseconds(1000);
    return must(cluster_client::connect(o));
  }

  // What node id's own shard holds for k, stale or not.
  std::optional<std::string> local(std::uint32_t id, const std::string& k) {
    auto& db = *nodes[id - 1]->db;
    return db.core().slot_of(db.shard_of(k))->view.load()->get(k, system_now_ns()).value();
  }
};

}  // namespace

TEST_CASE("cluster client: each call goes to its shard's owner, and follows the owner when it moves") {
  three_nodes c(base_port());
  REQUIRE(c.elect(1, 0));
  REQUIRE(c.elect(2, 1));
  auto client = c.client();
  CHECK(client->shards() == 2);
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back(fmt::format("k{}", i));
  std::set<std::size_t> shards;
  for (const auto& k : keys) {
    CHECK(client->put(k, "v-" + k).is_ok());
    shards.insert(client->shard_of(k));
    CHECK(client->shard_of(k) == c.nodes[0]->db->shard_of(k));  // the database's routing
  }
  CHECK(shards.size() == 2);
  CHECK(client->owner_of(0) == 1);
  CHECK(client->owner_of(1) == 2);
  for (const auto& k : keys) CHECK(client->get(k).value() == std::optional<std::string>("v-" + k));
  CHECK(client->retries() == 0);

  // Node 3 takes shard 0: the client hears busy from node 1, finds node 3.
  REQUIRE(c.elect(3, 0));
  std::string on0;
  for (const auto& k : keys)
    if (client->shard_of(k) == 0) on0 = k;
  CHECK(client->put(on0, "moved").is_ok());
  CHECK(client->owner_of(0) == 3);
  CHECK(client->retries() >= 1);
  CHECK(client->get(on0).value() == std::optional<std::string>("moved"));
  CHECK(c.local(3, on0) == "moved");
  // Deletes and CAS take the same road.
  CHECK(client->del(on0).is_ok());
  CHECK_FALSE(client->get(on0).value().has_value());
  auto swapped = client->cas(on0, std::nullopt, std::string_view("1")).value();
  CHECK(swapped.swapped);
  auto refused = client->cas(on0, std::nullopt, std::string_view("2")).value();
  CHECK_FALSE(refused.swapped);
  CHECK(refused.current == std::optional<std::string>("1"));
}

TEST_CASE("cluster client: when the owner's node dies the client finds the next owner and retries there") {
  three_nodes c(static_cast<std::uint16_t>(base_port() + 3));
  REQUIRE(c.elect(1, 0));
  REQUIRE(c.elect(1, 1));
  auto client = c.client();
  CHECK(client->put("a", "1").is_ok());
  CHECK(client->owner_of(client->shard_of("a")) == 1);
  c.nodes[0].reset();  // node 1's process is gone: its sockets close
  for (auto& p : c.nodes)
    if (p) p->n->connect_peers();
  REQUIRE(c.elect(2, client->shard_of("a")));
  CHECK(client->put("a", "2").is_ok());
  CHECK(client->owner_of(client->shard_of("a")) == 2);
  CHECK(client->get("a").value() == std::optional<std::string>("2"));
}

TEST_CASE("cluster client: with no owner a call ends at its deadline, saying nothing was written") {
  three_nodes c(static_cast<std::uint16_t>(base_port() + 6));  // no election, no heartbeats: nobody owns
  auto client = c.client(std::chrono::milliseconds(600));
  auto t0 = std::chrono::steady_clock::now();
  auto s = client->put("k", "v");
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s.code() == status_code::timeout);
  CHECK(s.category() == status_category::transient);
  CHECK(s.message().find("nothing was written") != std::string::npos);
  CHECK(took < std::chrono::seconds(5));
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK_FALSE(c.local(id, "k").has_value());
  auto g = client->get("k");
  REQUIRE_FALSE(g.is_ok());
  CHECK(g.error().code() == status_code::timeout);
}

TEST_CASE("cluster client: bad input and a bad cluster file are refused before anything is sent") {
  three_nodes c(static_cast<std::uint16_t>(base_port() + 9));
  REQUIRE(c.elect(1, 0));
  REQUIRE(c.elect(1, 1));
  auto client = c.client();
  CHECK(client->put("", "v").code() == status_code::invalid_argument);
  CHECK(client->put(std::string("\xff\xff", 2) + "x", "v").code() == status_code::invalid_argument);
  CHECK(client->put("k", std::string(limits::max_user_value_bytes + 1, 'v')).code() == status_code::invalid_argument);
  CHECK(client->put("k", "v", std::chrono::nanoseconds(-1)).code() == status_code::invalid_argument);
  CHECK(client->get("").error().code() == status_code::invalid_argument);
  CHECK(client->cas("", std::nullopt, std::string_view("v")).error().code() == status_code::invalid_argument);
  CHECK(client->retries() == 0);
  CHECK_FALSE(c.local(1, "k").has_value());

  cluster_client_options o;
  o.cluster_file = c.dir / "missing";
  auto missing = cluster_client::connect(o);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.error().code() == status_code::invalid_argument);
  CHECK(missing.error().message().find(o.cluster_file) != std::string::npos);
  std::ofstream(c.dir / "tls") << "cluster t\nshards 1\ntls on\nnode 1 127.0.0.1 1\n";
  o.cluster_file = c.dir / "tls";
  auto no_certificate = cluster_client::connect(o);
  REQUIRE_FALSE(no_certificate.is_ok());
  CHECK(no_certificate.error().message().find("certificate") != std::string::npos);
  // A cluster file the nodes do not share: their hello refuses us by name.
  std::ofstream(c.dir / "other") << fmt::format("cluster other\nshards 2\nnode 1 127.0.0.1 {}\n",
                                                c.cluster.nodes[0].port);
  o.cluster_file = c.dir / "other";
  o.call_timeout = std::chrono::milliseconds(2000);
  auto stranger = must(cluster_client::connect(o));
  auto s = stranger->put("k", "v");
  CHECK(s.code() == status_code::invalid_argument);
  CHECK_FALSE(c.local(1, "k").has_value());
}
