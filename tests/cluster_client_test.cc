// The cluster client (include/magnetite/cluster_client.h) against three nodes
// over loopback in this process: routing to each shard's owner, following an
// owner that moved or died, at-most-once retries, and bad input refused
// before anything is sent.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include "magnetite/cluster_client.h"
#include "replication/node.h"
#include "tests/support/poll.h"
#include "tests/support/three_nodes.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {
std::uint16_t base_port() { return testing::three_nodes::base_port(0); }
}  // namespace

TEST_CASE("cluster client: each call goes to its shard's owner, and follows the owner when it moves") {
  testing::three_nodes c(base_port(), "client");
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
  testing::three_nodes c(static_cast<std::uint16_t>(base_port() + 3), "client");
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
  testing::three_nodes c(static_cast<std::uint16_t>(base_port() + 6),
                         "client");  // no election, no heartbeats: nobody owns
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

TEST_CASE("cluster client: past max_calls_in_flight a call waits for room, and answers busy at its deadline") {
  // No owner: every call lasts to its deadline, holding its place.
  testing::three_nodes c(testing::three_nodes::base_port(42), "client");
  cluster_client_options o;
  o.cluster_file = c.file;
  o.call_timeout = std::chrono::milliseconds(3000);
  o.attempt_timeout = std::chrono::milliseconds(500);
  o.max_calls_in_flight = 2;
  auto client = must(cluster_client::connect(o));
  std::vector<std::thread> callers;
  std::vector<status> answers(4);
  for (int i = 0; i < 4; ++i) callers.emplace_back([&, i] { answers[i] = client->put(fmt::format("k{}", i), "v"); });
  // Two in, two waiting for room: the limit holds calls back, it does not
  // let them through.
  CHECK(testing::poll_until(
      [&] {
        auto n = client->calls();
        return n.requests == 2 && n.waiting == 2;
      },
      std::chrono::seconds(10)));
  for (auto& t : callers) t.join();
  auto n = client->calls();
  CHECK(n.max_requests == 2);
  CHECK(n.requests == 0);
  CHECK(n.waited == 2);
  CHECK(n.admitted + n.refused == 4);
  // Each call ended transient with nothing written: no owner, or no room.
  int busy = 0;
  for (const auto& a : answers) {
    CHECK_FALSE(a.is_ok());
    CHECK(a.category() == status_category::transient);
    busy += a.code() == status_code::busy ? 1 : 0;
  }
  CHECK(busy == static_cast<int>(n.refused));
  for (std::uint32_t id = 1; id <= 3; ++id)
    for (int i = 0; i < 4; ++i) CHECK_FALSE(c.local(id, fmt::format("k{}", i)).has_value());
  o.max_calls_in_flight = 0;
  CHECK(cluster_client::connect(o).error().code() == status_code::invalid_argument);
}

TEST_CASE("cluster client: bad input and a bad cluster file are refused before anything is sent") {
  testing::three_nodes c(static_cast<std::uint16_t>(base_port() + 9), "client");
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
  std::ofstream(c.dir / "other") << fmt::format("cluster other\nshards 2\ntls off\nnode 1 127.0.0.1 {}\n",
                                                c.cluster.nodes[0].port);
  o.cluster_file = c.dir / "other";
  o.call_timeout = std::chrono::milliseconds(2000);
  auto stranger = must(cluster_client::connect(o));
  auto s = stranger->put("k", "v");
  CHECK(s.code() == status_code::invalid_argument);
  CHECK_FALSE(c.local(1, "k").has_value());
}
