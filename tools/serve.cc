#include "tools/serve.h"

#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include "actors/caf_headers.h"  // before any other CAF header

#include "core/env.h"
#include "replication/node.h"

namespace magnetite {

int run_serve(std::uint32_t node_id, const std::string& cluster_path, const std::string& data_dir,
              const replication::tls_files& tls, bool insecure, const replication::connection_limits& network) {
  auto text = read_whole_file(env::posix(), cluster_path);
  if (!text) {
    fmt::print(stderr, "magnetite serve: cluster file {}: {}\n", cluster_path, text.error().message());
    return 2;
  }
  auto cluster = replication::cluster_file::parse(*text);
  if (!cluster) {
    fmt::print(stderr, "magnetite serve: {}: {}\n", cluster_path, cluster.error().message());
    return 2;
  }
  // TLS is a fact of the cluster file (on unless it says `tls off`), so
  // every node agrees on it; the files are this node's. Flags with `tls off`
  // would be a node that believes it is protected while it is not: refused
  // too.
  bool tls_given = !tls.certificate.empty() || !tls.key.empty() || !tls.ca.empty();
  if (cluster->tls && (tls.certificate.empty() || tls.key.empty() || tls.ca.empty())) {
    fmt::print(stderr,
               "magnetite serve: {} runs over TLS (no `tls off` line): give --tls-cert, --tls-key and --tls-ca "
               "(`magnetite cert --cluster {}` makes them)\n",
               cluster_path, cluster_path);
    return 2;
  }
  if (!cluster->tls && tls_given) {
    fmt::print(stderr, "magnetite serve: {} says `tls off`: --tls-cert, --tls-key and --tls-ca would not be used\n",
               cluster_path);
    return 2;
  }
  if (auto s = replication::check_limits(network); !s.is_ok()) {
    fmt::print(stderr, "magnetite serve: {}\n", s.message());
    return 2;
  }
  if (!cluster->tls) {
    if (!insecure) {
      fmt::print(stderr, "magnetite serve: {}\n", replication::plaintext_warning(*cluster));
      return 2;
    }
    fmt::print(stderr, "magnetite serve: INSECURE (--insecure): cluster {} runs without TLS: {}\n", cluster->name,
               replication::who_can_join(*cluster));
  }
  // Signals are taken by sigwait below, not by a handler.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  caf::actor_system_config cfg;
  replication::configure_system(cfg);
  if (cluster->tls) {
    if (auto s = replication::configure_tls(cfg, tls); !s.is_ok()) {
      fmt::print(stderr, "magnetite serve: {}\n", s.message());
      return 2;
    }
  }
  caf::actor_system sys{cfg};
  auto db = open_database(replication::core_options_for(*cluster, data_dir, sys));
  if (!db) {
    fmt::print(stderr, "magnetite serve: {}\n", db.error().to_string());
    return 2;
  }
  replication::node_options no;
  no.id = node_id;
  no.cluster = *cluster;
  no.db = db->get();
  no.insecure = insecure;
  no.network = network;
  auto n = replication::node::start(no);
  if (!n) {
    fmt::print(stderr, "magnetite serve: {}\n", n.error().to_string());
    return 2;
  }
  const auto* self = cluster->node(node_id);
  fmt::print("node {} of cluster {} listening on {}:{}{} (cluster file {})\n", node_id, cluster->name, self->host,
             (*n)->port(), cluster->tls ? " over TLS" : "", cluster->fingerprint().to_hex());
  std::fflush(stdout);

  std::set<std::uint32_t> reported;
  for (;;) {
    auto missing = (*n)->connect_peers();
    for (auto id : (*n)->last_lost()) {
      fmt::print("lost node {}\n", id);
      reported.erase(id);
    }
    for (const auto& peer : cluster->nodes) {
      if (peer.id == node_id || reported.count(peer.id)) continue;
      if (std::find(missing.begin(), missing.end(), peer.id) == missing.end()) {
        fmt::print("linked node {}\n", peer.id);
        reported.insert(peer.id);
      }
    }
    std::fflush(stdout);
    // A refusal by name (another cluster file) is worth a line; an absent peer is not.
    for (const auto& e : (*n)->last_errors())
      if (e.find("refused") != std::string::npos) fmt::print(stderr, "magnetite serve: {}\n", e);
    // Linked nodes are watched; a lost one is linked again once it is back.
    timespec wait{0, 200'000'000};
    if (sigtimedwait(&stop, nullptr, &wait) > 0) break;
  }
  fmt::print("node {} stopping\n", node_id);
  n->reset();
  db->reset();
  return 0;
}

}  // namespace magnetite
