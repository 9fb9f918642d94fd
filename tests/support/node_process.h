// node_process: what one `magnetite serve` process holds, in a test's own
// process: an actor system with the io middleman (and CAF's OpenSSL module
// when TLS files are given), a database on disk and a replication node
// published on its cluster-file port. Several of these in one test process
// talk over real loopback sockets.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <doctest/doctest.h>

#include "actors/caf_headers.h"  // before any other CAF header

#include "replication/node.h"
#include "tests/support/tree_model.h"

namespace magnetite::testing {

struct node_process_options {
  // Zero: elections only when the test asks for one (no heartbeats).
  std::chrono::milliseconds heartbeat{0};
  std::chrono::milliseconds request_timeout{3000};
  std::optional<replication::tls_files> tls;
  replication::connection_limits network;
};

struct node_process {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<database> db;
  std::unique_ptr<replication::node> n;

  node_process(const std::string& dir, const replication::cluster_file& cluster, std::uint32_t id,
               const node_process_options& o = {}) {
    replication::configure_system(cfg);
    if (o.tls) REQUIRE(replication::configure_tls(cfg, *o.tls).is_ok());
    sys = std::make_unique<caf::actor_system>(cfg);
    db = must(open_database(replication::core_options_for(cluster, dir, *sys)));
    replication::node_options no;
    no.id = id;
    no.cluster = cluster;
    no.db = db.get();
    no.request_timeout = o.request_timeout;
    no.heartbeat = o.heartbeat;
    no.network = o.network;
    // The tests' plaintext clusters (`tls off`) run on loopback on purpose.
    no.insecure = true;
    n = must(replication::node::start(no));
  }
  ~node_process() {
    n.reset();
    db.reset();
  }
};

}  // namespace magnetite::testing
