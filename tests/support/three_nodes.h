// three_nodes: a cluster of three nodes over loopback in the test's own
// process (node_process.h), with its cluster file on disk, shards 2, no
// heartbeats: a shard has an owner only once the test elects one.
#pragma once

#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/caf_headers.h"  // before any other CAF header

#include "magnetite/cluster_client.h"
#include "replication/node.h"
#include "tests/support/must.h"
#include "tests/support/node_process.h"
#include "tests/support/temp_dir.h"

namespace magnetite::testing {

struct three_nodes {
  // Ports for one test process: a block of 48 a process id, and `first`
  // (0..45, three a cluster) within it; all below 32768, where Linux's
  // ephemeral ports begin (a port an outgoing connection holds cannot be
  // listened on: the suite failed now and then on that).
  static std::uint16_t base_port(std::uint16_t first) {
    return static_cast<std::uint16_t>(29000 + (::getpid() % 78) * 48 + first);
  }

  temp_dir dir;
  std::string file = dir / "cluster";
  replication::cluster_file cluster;
  std::vector<std::unique_ptr<node_process>> nodes;

  three_nodes(std::uint16_t base, const std::string& name) : dir(name) {
    std::string text = fmt::format(
        "cluster client\nshards 2\ntls off\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\n"
        "node 3 127.0.0.1 {}\n",
        base, base + 1, base + 2);
    std::ofstream(file) << text;
    cluster = must(replication::cluster_file::parse(text));
    for (std::uint32_t id = 1; id <= 3; ++id)
      nodes.push_back(std::make_unique<node_process>(dir / fmt::format("node{}", id), cluster, id));
    for (auto& p : nodes) REQUIRE(p->n->connect_peers().empty());
  }

  // Node id campaigns for shard s (and wins: every node is up).
  bool elect(std::uint32_t id, std::size_t s) {
    caf::scoped_actor self{*nodes[id - 1]->sys};
    bool owns = false;
    self->request(nodes[id - 1]->n->replica(s), std::chrono::seconds(10), replication::elect_atom::value)
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

  // What node id's shard `shard` holds for k, stale or not.
  std::optional<std::string> local_in(std::uint32_t id, std::size_t shard, const std::string& k) {
    return nodes[id - 1]->db->core().slot_of(shard)->view.load()->get(k, system_now_ns()).value();
  }

  // What node id's own shard holds for k, stale or not.
  std::optional<std::string> local(std::uint32_t id, const std::string& k) {
    auto& db = *nodes[id - 1]->db;
    return db.core().slot_of(db.shard_of(k))->view.load()->get(k, system_now_ns()).value();
  }
};

}  // namespace magnetite::testing
