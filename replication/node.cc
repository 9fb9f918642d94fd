#include "replication/node.h"

#include <mutex>

#include <caf/io/all.hpp>

namespace magnetite::replication {

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<ballot>("magnetite::ballot");
  cfg.add_message_type<stamp>("magnetite::stamp");
  cfg.add_message_type<hash128>("magnetite::hash128");
  cfg.add_message_type<stamped_op>("magnetite::stamped_op");
  cfg.add_message_type<std::vector<stamped_op>>("std::vector<magnetite::stamped_op>");
  cfg.add_message_type<std::vector<hash128>>("std::vector<magnetite::hash128>");
  cfg.add_message_type<std::vector<std::uint32_t>>("std::vector<uint32_t>");
  cfg.add_message_type<std::vector<bool>>("std::vector<bool>");
  cfg.add_message_type<merge_report>("magnetite::merge_report");
  cfg.add_message_type<promise_reply>("magnetite::replication::promise_reply");
  cfg.add_message_type<vote>("magnetite::replication::vote");
  cfg.add_message_type<replica_info>("magnetite::replication::replica_info");
}

database_options database_options_for(const cluster_file& cluster, std::string dir, caf::actor_system& sys) {
  database_options o;
  o.dir = std::move(dir);
  o.shards = cluster.shards;
  o.system = &sys;
  o.shard.tombstone_retention = std::chrono::seconds(cluster.tombstone_retention_s);
  return o;
}

struct node::lost_nodes {
  std::mutex m;
  std::vector<std::uint32_t> ids;
};

namespace {

using watch_atom = caf::atom_constant<caf::atom("watch")>;

// Monitors linked nodes' actors (proxies of remote actors: CAF reports them
// down when their process dies or the connection breaks).
caf::behavior link_watch(caf::event_based_actor* self, std::shared_ptr<node::lost_nodes> gone) {
  auto ids = std::make_shared<std::map<caf::actor_addr, std::uint32_t>>();
  self->set_down_handler([ids, gone](caf::down_msg& m) {
    auto it = ids->find(m.source);
    if (it == ids->end()) return;
    std::lock_guard<std::mutex> lock(gone->m);
    gone->ids.push_back(it->second);
    ids->erase(it);
  });
  return {
      [self, ids](watch_atom, std::uint32_t id, const caf::actor& a) {
        (*ids)[a.address()] = id;
        self->monitor(a);
      },
  };
}

struct node_state {
  std::uint32_t id = 0;
  hash128 fingerprint;
  std::vector<caf::actor> replicas;
};

node_actor::behavior_type node_behavior(node_actor::stateful_pointer<node_state> self, std::uint32_t id,
                                        hash128 fingerprint, std::vector<caf::actor> replicas) {
  self->state.id = id;
  self->state.fingerprint = fingerprint;
  self->state.replicas = std::move(replicas);
  return {
      [=](hello_atom, std::uint32_t from, const hash128& theirs,
          std::uint32_t version) -> caf::result<std::vector<caf::actor>> {
        auto& st = self->state;
        if (version != protocol_version)
          return to_error(status::make(status_code::not_supported, status_category::permanent,
                                       fmt::format("node {} speaks replication protocol {}, node {} speaks {}", from,
                                                   version, st.id, protocol_version)));
        if (theirs != st.fingerprint)
          return to_error(status::invalid_argument(
              fmt::format("node {} has cluster file {}, node {} has {}: every node must read the same cluster file",
                          from, theirs.to_hex(), st.id, st.fingerprint.to_hex())));
        if (from == st.id)
          return to_error(status::invalid_argument(fmt::format("a node calling itself node {} connected to node {}",
                                                               from, st.id)));
        // from 0: a client (tools, tests) that talks to the replicas itself.
        return st.replicas;
      },
  };
}

}  // namespace

node::node(node_options options) : options_(std::move(options)) {}

node::~node() {
  auto& sys = options_.db->system();
  if (port_ != 0) (void)sys.middleman().unpublish(published_, port_);
  caf::anon_send_exit(published_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(watch_, caf::exit_reason::user_shutdown);
  for (auto& r : replicas_) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
}

result<std::unique_ptr<node>> node::start(node_options options) {
  if (!options.db) return status::invalid_argument("node: no database");
  const cluster_node* self_line = options.cluster.node(options.id);
  if (!self_line)
    return status::invalid_argument(fmt::format("node {} is not in cluster file {}", options.id, options.cluster.name));
  if (options.db->shard_count() != options.cluster.shards)
    return status::invalid_argument(fmt::format("the database has {} shards, cluster {} has {}",
                                                options.db->shard_count(), options.cluster.name,
                                                options.cluster.shards));
  std::unique_ptr<node> n(new node(std::move(options)));
  auto& sys = n->options_.db->system();
  caf::scoped_actor asker{sys};
  std::vector<caf::actor> handles;
  for (std::size_t i = 0; i < n->options_.cluster.shards; ++i) {
    database* db = n->options_.db;
    std::optional<std::string> payload;
    status failure;
    asker->request(db->shard_handle(i), n->options_.request_timeout, promise_atom::value)
        .receive([&](bool has, const std::string& p) { if (has) payload = p; },
                 [&](caf::error& e) { failure = to_status(e); });
    MAGNETITE_TRY(failure);
    auto initial = from_log(payload);
    if (!initial) return initial.error();
    replica_config c;
    c.node = n->options_.id;
    c.cluster_size = n->options_.cluster.nodes.size();
    c.shard = [db, i] { return db->shard_handle(i); };
    c.slot = db->slot_of(i);
    c.initial = *initial;
    c.request_timeout = n->options_.request_timeout;
    c.tombstone_retention = std::chrono::seconds(n->options_.cluster.tombstone_retention_s);
    c.heartbeat = n->options_.heartbeat;
    c.election_ticks = n->options_.election_ticks;
    c.anti_entropy_ticks = n->options_.anti_entropy_ticks;
    auto r = spawn_replica(sys, std::move(c));
    n->replicas_.push_back(r);
    handles.push_back(caf::actor_cast<caf::actor>(r));
  }
  n->gone_ = std::make_shared<lost_nodes>();
  n->watch_ = sys.spawn(link_watch, n->gone_);
  n->published_ = sys.spawn(node_behavior, n->options_.id, n->options_.cluster.fingerprint(), handles);
  auto port = sys.middleman().publish(n->published_, self_line->port, self_line->host.c_str(), true);
  if (!port)
    return status::io_error(fmt::format("node {} cannot listen on {}:{}: {}", n->options_.id, self_line->host,
                                        self_line->port, sys.render(port.error())));
  n->port_ = *port;
  return n;
}

std::vector<std::uint32_t> node::connect_peers() {
  auto& sys = options_.db->system();
  errors_.clear();
  {
    std::lock_guard<std::mutex> lock(gone_->m);
    lost_ = std::move(gone_->ids);
    gone_->ids.clear();
  }
  bool changed = linked_.empty();
  for (auto id : lost_) changed |= linked_.erase(id) > 0;
  std::vector<std::uint32_t> missing;
  caf::scoped_actor asker{sys};
  for (const auto& peer : options_.cluster.nodes) {
    if (peer.id == options_.id || linked_.count(peer.id)) continue;
    auto remote = sys.middleman().remote_actor<node_actor>(peer.host, peer.port);
    if (!remote) {
      errors_.push_back(fmt::format("node {} at {}:{}: {}", peer.id, peer.host, peer.port, sys.render(remote.error())));
      missing.push_back(peer.id);
      continue;
    }
    std::optional<std::vector<caf::actor>> replicas;
    asker
        ->request(*remote, options_.request_timeout, hello_atom::value, options_.id, options_.cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
                 [&](caf::error& e) {
                   errors_.push_back(fmt::format("node {} refused the link: {}", peer.id, to_status(e).message()));
                 });
    if (!replicas || replicas->size() != options_.cluster.shards) {
      if (replicas)
        errors_.push_back(fmt::format("node {} offered {} replicas for {} shards", peer.id, replicas->size(),
                                      options_.cluster.shards));
      missing.push_back(peer.id);
      continue;
    }
    caf::anon_send(watch_, watch_atom::value, peer.id, caf::actor_cast<caf::actor>(*remote));
    linked_[peer.id] = std::move(*replicas);
    changed = true;
  }
  if (!changed) return missing;
  // Every local replica learns the replicas of its shard on the linked nodes.
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    std::vector<std::uint32_t> ids{options_.id};
    std::vector<caf::actor> actors{caf::actor_cast<caf::actor>(replicas_[i])};
    for (auto& [id, remote] : linked_) {
      ids.push_back(id);
      actors.push_back(remote[i]);
    }
    caf::anon_send(replicas_[i], peers_atom::value, ids, actors);
  }
  return missing;
}

}  // namespace magnetite::replication
