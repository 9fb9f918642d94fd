#include "replication/node.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <caf/openssl/all.hpp>

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
  cfg.add_message_type<request_id>("magnetite::replication::request_id");
  cfg.add_message_type<state_check>("magnetite::state_check");
  cfg.add_message_type<std::vector<state_check>>("std::vector<magnetite::state_check>");
  cfg.add_message_type<batch_op>("magnetite::batch_op");
  cfg.add_message_type<std::vector<batch_op>>("std::vector<magnetite::batch_op>");
}

void configure_system(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  add_message_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("scheduler.max-threads", std::max<std::size_t>(2, std::thread::hardware_concurrency()));
  // Traffic on every healthy link, so that guarded_network's idle timeout
  // cuts only a peer that sends nothing at all.
  cfg.set("middleman.heartbeat-interval", caf::timespan{heartbeat_interval});
}

core_options core_options_for(const cluster_file& cluster, std::string dir, caf::actor_system& sys) {
  core_options o;
  o.dir = std::move(dir);
  o.shards = cluster.shards;
  o.system = &sys;
  o.replicated = true;
  o.shard.tombstone_retention = std::chrono::seconds(cluster.tombstone_retention_s);
  return o;
}

namespace {

// CAF 0.17.6's OpenSSL sessions (a client's links: connect_to; a node's own
// links use guarded_network's sessions, which empty the queue themselves)
// all run on the middleman's network thread and, without CAF's logging,
// leave the errors of a failed handshake in that thread's OpenSSL error
// queue. SSL_get_error() reads that queue, so the next read of an
// established link that ends in "want read" is taken as an error and the
// link is dropped. Emptying the queue on that thread after a failed
// handshake we know of (and at every connect_peers) narrows the window;
// links dropped anyway are linked again, as any lost link.
void clear_network_thread_errors(caf::actor_system& sys) {
  sys.middleman().backend().post([] { ERR_clear_error(); });
}

}  // namespace

std::string who_can_join(const cluster_file& cluster) {
  const cluster_node* open = cluster.beyond_loopback();
  if (!open)
    return "every user and process of this machine can join as any node or client (its nodes listen on loopback), "
           "and read and write all of its data";
  return fmt::format(
      "anyone who can reach its ports can join as any node or client (node {} is at {}, beyond loopback), and read "
      "and write all of its data",
      open->id, open->host);
}

std::string plaintext_warning(const cluster_file& cluster) {
  return fmt::format(
      "cluster file {} says `tls off`: without TLS, {}. Remove the line (TLS is the default; `magnetite cert` makes "
      "the certificates), or start every node with --insecure (node_options::insecure) where that is accepted",
      cluster.name, who_can_join(cluster));
}

status check_tls_files(const tls_files& files) {
  auto ctx = tls_context::load(files);
  return ctx ? status::ok() : ctx.error();
}

status configure_tls(caf::actor_system_config& cfg, const tls_files& files) {
  MAGNETITE_TRY(check_tls_files(files));
  // CAF 0.17's OpenSSL module turns on peer authentication when any of these
  // is set: both ends then require a certificate the CA file verifies
  // (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT). With none set it
  // would use anonymous ciphers, which authenticate nobody: never do that.
  cfg.openssl_certificate = files.certificate;
  cfg.openssl_key = files.key;
  cfg.openssl_cafile = files.ca;
  cfg.load<caf::openssl::manager>();
  return status::ok();
}

result<node_actor> connect_to(caf::actor_system& sys, const std::string& host, std::uint16_t port, bool tls,
                              std::chrono::milliseconds timeout) {
  if (tls && !sys.has_openssl_manager())
    return status::invalid_argument(
        fmt::format("{}:{}: a TLS link needs an actor system with configure_tls", host, port));
  return connect_via(sys, tls ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle(), host, port, tls,
                     timeout);
}

result<node_actor> connect_via(caf::actor_system& sys, const caf::io::middleman_actor& mm, const std::string& host,
                               std::uint16_t port, bool tls, std::chrono::milliseconds timeout) {
  // caf::io::remote_actor and caf::openssl::remote_actor wait for the
  // middleman's answer without a limit; asking its actor ourselves bounds it.
  caf::scoped_actor asker{sys};
  result<node_actor> out = status::failed("no answer");
  asker->request(mm, timeout, caf::connect_atom::value, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& remote, const std::set<std::string>& ifs) {
            if (!remote)
              out = status::not_found(fmt::format("{}:{}: no actor is published there", host, port));
            else if (!sys.assignable(ifs, sys.message_types(caf::detail::type_list<node_actor>{})))
              out = status::invalid_argument(fmt::format("{}:{}: the actor published there is not a node", host, port));
            else
              out = caf::actor_cast<node_actor>(std::move(remote));
          },
          [&](caf::error& e) {
            if (tls) clear_network_thread_errors(sys);
            out = e == caf::sec::request_timeout
                      ? status::io_error(fmt::format("no answer from {}:{} in {} ms{}", host, port, timeout.count(),
                                                     tls ? " (is it a node without TLS?)" : " (is it a TLS node?)"),
                                         status_category::transient)
                      : status::io_error(sys.render(e), status_category::transient);
          });
  return out;
}

// A linked node's actor reported down: which node, and which of its actors
// (a node linked again meanwhile has another, which stays linked).
struct node::lost_nodes {
  std::mutex m;
  std::vector<std::pair<std::uint32_t, caf::actor_addr>> gone;
};

struct node::offered_nodes {
  std::mutex m;
  std::map<std::uint32_t, caf::actor> by_id;
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
    gone->gone.emplace_back(it->second, m.source);
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
                                        hash128 fingerprint, std::vector<caf::actor> replicas,
                                        std::shared_ptr<node::offered_nodes> offered, node::identify_fn identify) {
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
          return to_error(
              status::invalid_argument(fmt::format("a node calling itself node {} connected to node {}", from, st.id)));
        // With identities, a node is who its certificate says (a client,
        // from 0, may be anyone the CA signed).
        if (from != 0 && identify) {
          auto who = identify(self->current_sender() ? self->current_sender()->node() : caf::node_id());
          if (!who || !who->is_node(from))
            return to_error(status::invalid_argument(fmt::format(
                "a link whose certificate names {} calls itself node {}", who ? who->to_string() : "nobody", from)));
        }
        // from 0: a client (tools, tests) that talks to the replicas itself.
        return st.replicas;
      },
      // Kept for connect_peers, which sends its own hello through it (the
      // hello checks the cluster file). The actor offered must live on the
      // sender's own node, and a node offers one id: a sender cannot hand
      // us another's actor, nor stand as two nodes whose votes would count
      // twice. Which id the sender may claim at all is not known here
      // (design 7.2: nothing ties a node id to a certificate yet).
      [=](offer_atom, std::uint32_t from, const caf::actor& theirs) {
        auto& st = self->state;
        const auto& sender = self->current_sender();
        if (from == 0 || from >= st.id || !theirs || !sender || sender->node() != theirs.node()) return false;
        if (identify) {
          auto who = identify(sender->node());
          if (!who || !who->is_node(from)) return false;
        }
        std::lock_guard<std::mutex> lock(offered->m);
        for (const auto& [id, a] : offered->by_id)
          if (id != from && a && a.node() == theirs.node()) return false;
        offered->by_id[from] = theirs;
        return true;
      },
  };
}

}  // namespace

node::node(node_options options) : options_(std::move(options)) {}

node::identify_fn node::identify() const {
  if (!network_ || !network_->identities()) return {};
  return [net = network_](const caf::node_id& n) { return net->identity_of(n); };
}

replica_config::access_fn node::client_access_fn() const {
  const auto& clients = options_.cluster.clients;
  if (clients.empty()) return {};
  auto by_name = std::make_shared<std::map<std::string, std::shared_ptr<const client_access>>>();
  for (const auto& [name, access] : clients) (*by_name)[name] = std::make_shared<const client_access>(access);
  auto nothing = std::make_shared<const client_access>();
  // Asked only for senders that are not members (the replica's peers and
  // this process are never judged by grants): a link that names a node but
  // is no peer of the replica, or names nobody, may do nothing.
  return [net = network_, by_name, nothing](const caf::node_id& n) -> std::shared_ptr<const client_access> {
    auto who = net->identity_of(n);
    if (!who || who->as != peer_identity::role::client) return nothing;
    auto it = by_name->find(who->client);
    return it == by_name->end() ? nothing : it->second;
  };
}

node::~node() {
  auto& sys = options_.db->core().system();
  // Published through the guarded middleman actor: every middleman actor
  // hands unpublish to the one BASP broker that owns every listening port
  // (caf::openssl::unpublish of CAF 0.17.6 does not compile: it sends the
  // port without the actor).
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
  if (!options.cluster.tls && !options.insecure) return status::invalid_argument(plaintext_warning(options.cluster));
  MAGNETITE_TRY(check_limits(options.network));
  if (options.db->shard_count() != options.cluster.shards)
    return status::invalid_argument(fmt::format("the database has {} shards, cluster {} has {}",
                                                options.db->shard_count(), options.cluster.name,
                                                options.cluster.shards));
  // The long-absence rule (design, 6) counts a replica absent once it has not
  // synced for half the retention; anti-entropy must sync it well within
  // that, or healthy replicas would stop acknowledging writes. About one
  // push a period reaches each replica, and a sync needs pulls from up to
  // n - 1 peers: half the retention must cover twice that.
  if (options.heartbeat.count() > 0 && options.anti_entropy_ticks > 0 && options.cluster.nodes.size() > 2) {
    auto period = options.heartbeat * options.anti_entropy_ticks;
    auto need = 2 * period * static_cast<std::int64_t>(options.cluster.nodes.size() - 1);
    if (std::chrono::seconds(options.cluster.tombstone_retention_s) / 2 < need)
      return status::invalid_argument(
          fmt::format("cluster file {}: tombstone_retention_s {} is too short for anti-entropy every {} ms on {} nodes "
                      "(a healthy replica would count as absent and stop acknowledging writes): at least {} s",
                      options.cluster.name, options.cluster.tombstone_retention_s, period.count(),
                      options.cluster.nodes.size(), (std::chrono::ceil<std::chrono::seconds>(2 * need)).count()));
  }
  auto& sys = options.db->core().system();
  if (options.cluster.tls && !(sys.has_openssl_manager() && !sys.config().openssl_certificate.empty() &&
                               !sys.config().openssl_key.empty() && !sys.config().openssl_cafile.empty()))
    return status::invalid_argument(
        fmt::format("cluster file {} is over TLS (no `tls off` line): node {} needs its certificate, its key and the "
                    "cluster's CA "
                    "(replication::configure_tls)",
                    options.cluster.name, options.id));
  // The credentials configure_tls gave the system, read once, here.
  std::shared_ptr<const tls_context> tls;
  std::string identities;  // the cluster whose identities bind the links, when our certificate names one
  if (options.cluster.tls) {
    auto ctx =
        tls_context::load({sys.config().openssl_certificate, sys.config().openssl_key, sys.config().openssl_cafile});
    if (!ctx) return ctx.error();
    tls = std::move(*ctx);
    // A certificate naming identities binds every link to one (design
    // 7.3); ours must then name this very node. One naming none (made
    // before names) leaves links unbound, as before.
    auto names = certificate_names(tls->certificate());
    if (!names.empty()) {
      auto own = identity_of(tls->certificate(), options.cluster.name);
      if (!own || !own->is_node(options.id))
        return status::invalid_argument(fmt::format("node {} of cluster {}: its certificate {} names {}, not this node",
                                                    options.id, options.cluster.name, sys.config().openssl_certificate,
                                                    own ? own->to_string() : names.front()));
      identities = options.cluster.name;
    }
  }
  // Grants by client name mean nothing where a link names nobody: refused
  // rather than run open (a client the file limits would write anything).
  if (!options.cluster.clients.empty() && identities.empty())
    return status::invalid_argument(fmt::format(
        "cluster file {} grants clients by key prefix (`client` lines): node {} needs TLS and a certificate that names "
        "it, as `magnetite cert` makes, so that each link names its client",
        options.cluster.name, options.id));
  std::unique_ptr<node> n(new node(std::move(options)));
  auto network = guarded_network::start(sys, std::move(tls), n->options_.network, std::move(identities));
  if (!network) return network.error();
  n->network_ = std::move(*network);
  caf::scoped_actor asker{sys};
  std::vector<caf::actor> handles;
  for (std::size_t i = 0; i < n->options_.cluster.shards; ++i) {
    database* db = n->options_.db;
    std::optional<std::string> payload;
    status failure;
    asker->request(db->core().shard_handle(i), n->options_.request_timeout, promise_atom::value)
        .receive(
            [&](bool has, const std::string& p) {
              if (has) payload = p;
            },
            [&](caf::error& e) { failure = to_status(e); });
    MAGNETITE_TRY(failure);
    auto initial = from_log(payload);
    if (!initial) return initial.error();
    replica_config c;
    c.node = n->options_.id;
    c.cluster_size = n->options_.cluster.nodes.size();
    c.shard = [db, i] { return db->core().shard_handle(i); };
    c.slot = db->core().slot_of(i);
    c.initial = *initial;
    c.request_timeout = n->options_.request_timeout;
    c.batches_in_flight = std::max<std::size_t>(1, n->options_.batches_in_flight);
    c.tombstone_retention = std::chrono::seconds(n->options_.cluster.tombstone_retention_s);
    c.heartbeat = n->options_.heartbeat;
    c.election_ticks = n->options_.election_ticks;
    c.anti_entropy_ticks = n->options_.anti_entropy_ticks;
    c.access = n->client_access_fn();
    auto r = spawn_replica(sys, std::move(c));
    n->replicas_.push_back(r);
    handles.push_back(caf::actor_cast<caf::actor>(r));
  }
  n->gone_ = std::make_shared<lost_nodes>();
  n->watch_ = sys.spawn(link_watch, n->gone_);
  n->offered_ = std::make_shared<offered_nodes>();
  n->published_ =
      sys.spawn(node_behavior, n->options_.id, n->options_.cluster.fingerprint(), handles, n->offered_, n->identify());
  // As caf::io::publish does, through the guarded middleman actor.
  std::optional<std::uint16_t> port;
  std::string listen_error = "no answer";
  asker
      ->request(n->network_->actor(), caf::infinite, caf::publish_atom::value, self_line->port,
                caf::actor_cast<caf::strong_actor_ptr>(n->published_), sys.message_types(n->published_),
                self_line->host, true)
      .receive([&](std::uint16_t p) { port = p; }, [&](caf::error& e) { listen_error = sys.render(e); });
  if (!port)
    return status::io_error(fmt::format("node {} cannot listen on {}:{}: {}", n->options_.id, self_line->host,
                                        self_line->port, listen_error));
  n->port_ = *port;
  return n;
}

// Drops the links whose node actor was reported down (not one linked again
// meanwhile); whether any went.
bool node::forget_lost_links() {
  std::vector<std::pair<std::uint32_t, caf::actor_addr>> gone;
  {
    std::lock_guard<std::mutex> lock(gone_->m);
    gone.swap(gone_->gone);
  }
  lost_.clear();
  for (const auto& [id, addr] : gone) {
    auto it = linked_.find(id);
    if (it == linked_.end() || it->second.node != addr) continue;  // linked again already
    linked_.erase(it);
    lost_.push_back(id);
  }
  return !lost_.empty();
}

// Links one peer: its node actor (offered to us over TLS when its id is
// lower, else connected to), a hello that checks the cluster file, and over
// TLS our offer to link back. Whether it is linked now; errors_ says why not.
bool node::link(const cluster_node& peer) {
  auto& sys = options_.db->core().system();
  const bool tls = options_.cluster.tls;
  caf::actor offer;
  if (tls && peer.id < options_.id) {
    std::lock_guard<std::mutex> lock(offered_->m);
    if (auto it = offered_->by_id.find(peer.id); it != offered_->by_id.end()) offer = it->second;
    if (!offer) {
      errors_.push_back(fmt::format("node {} has not connected to node {} yet (over TLS the lower id connects)",
                                    peer.id, options_.id));
      return false;
    }
  }
  auto remote = offer ? result<node_actor>(caf::actor_cast<node_actor>(offer))
                      : connect_via(sys, network_->actor(), peer.host, peer.port, tls, options_.request_timeout);
  if (!remote) {
    errors_.push_back(fmt::format("node {} at {}:{}: {}", peer.id, peer.host, peer.port, remote.error().message()));
    return false;
  }
  if (network_->identities()) {
    auto who = network_->identity_of(remote->node());
    if (!who || !who->is_node(peer.id)) {
      errors_.push_back(fmt::format("node {} at {}:{}: its certificate names {}, not node {}", peer.id, peer.host,
                                    peer.port, who ? who->to_string() : "nobody", peer.id));
      return false;
    }
  }
  caf::scoped_actor asker{sys};
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
      errors_.push_back(
          fmt::format("node {} offered {} replicas for {} shards", peer.id, replicas->size(), options_.cluster.shards));
    if (offer) {  // gone with its connection, most likely: wait for its next offer
      std::lock_guard<std::mutex> lock(offered_->m);
      if (auto it = offered_->by_id.find(peer.id); it != offered_->by_id.end() && it->second == offer)
        offered_->by_id.erase(it);
    }
    return false;
  }
  if (tls && !offer) {
    // Asked, not sent: once connect_peers returns, the peer can link back.
    bool taken = false;
    asker
        ->request(*remote, options_.request_timeout, offer_atom::value, options_.id,
                  caf::actor_cast<caf::actor>(published_))
        .receive([&](bool t) { taken = t; }, [](caf::error&) {});
    if (!taken) errors_.push_back(fmt::format("node {} did not take our offer to link back", peer.id));
  }
  caf::anon_send(watch_, watch_atom::value, peer.id, caf::actor_cast<caf::actor>(*remote));
  linked_[peer.id] = linked_node{caf::actor_cast<caf::actor_addr>(*remote), std::move(*replicas)};
  return true;
}

// Every local replica learns the replicas of its shard on the linked nodes.
void node::tell_replicas_their_peers() {
  // From an actor of this system: a replica ignores `peers` from elsewhere.
  caf::scoped_actor teller{options_.db->core().system()};
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    std::vector<std::uint32_t> ids{options_.id};
    std::vector<caf::actor> actors{caf::actor_cast<caf::actor>(replicas_[i])};
    for (auto& [id, remote] : linked_) {
      ids.push_back(id);
      actors.push_back(remote.replicas[i]);
    }
    teller->send(replicas_[i], peers_atom::value, ids, actors);
  }
}

std::vector<std::uint32_t> node::connect_peers() {
  if (options_.cluster.tls) clear_network_thread_errors(options_.db->core().system());
  errors_.clear();
  bool changed = linked_.empty();
  if (forget_lost_links()) changed = true;
  std::vector<std::uint32_t> missing;
  for (const auto& peer : options_.cluster.nodes) {
    if (peer.id == options_.id || linked_.count(peer.id)) continue;
    if (link(peer))
      changed = true;
    else
      missing.push_back(peer.id);
  }
  if (changed) tell_replicas_their_peers();
  return missing;
}

}  // namespace magnetite::replication
