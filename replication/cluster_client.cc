// The cluster client (include/magnetite/cluster_client.h): routing to the
// owner, following it when it moves, and retries that keep their request id.
#include "magnetite/cluster_client.h"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include "core/env.h"
#include "core/hash128.h"
#include "core/shard_routing.h"
#include "engine/state_space.h"
#include "replication/node.h"

namespace magnetite {

using namespace replication;
using clock_type = std::chrono::steady_clock;

namespace {

// Whether another attempt (the same request id, perhaps another node) could
// succeed. Bad input, a refused feature or a cluster file the nodes do not
// share will not change by asking again.
bool worth_retrying(const status& s) {
  return s.code() != status_code::invalid_argument && s.code() != status_code::not_supported;
}

// Whether a failed attempt proves the write was not applied: a node that is
// not the owner refuses it before queuing it (busy), and a write still in an
// owner's batch when it steps down went nowhere (busy too). Anything else -
// no answer, a broken link, an owner deposed while it waited - may have.
bool surely_not_applied(const status& s) { return s.code() == status_code::busy; }

}  // namespace

struct cluster_client::impl {
  cluster_client_options options;
  cluster_file cluster;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  // Blocking actors that calls borrow, one a call in flight: making one
  // costs a spawn, more than a request on loopback. Only one whose call went
  // through at the first attempt goes back: after a timeout a late answer
  // may still come into its mailbox, where nothing would ever take it.
  // Declared after sys, so they are gone before it.
  std::mutex idle_mu;
  std::vector<std::unique_ptr<caf::scoped_actor>> idle;

  class borrowed {
   public:
    borrowed(impl* owner, std::unique_ptr<caf::scoped_actor> self) : owner_(owner), self_(std::move(self)) {}
    borrowed(const borrowed&) = delete;
    borrowed& operator=(const borrowed&) = delete;
    ~borrowed() {
      if (!keep) return;
      std::lock_guard lock(owner_->idle_mu);
      owner_->idle.push_back(std::move(self_));
    }
    caf::scoped_actor& operator*() { return *self_; }
    bool keep = false;

   private:
    impl* owner_;
    std::unique_ptr<caf::scoped_actor> self_;
  };
  std::unique_ptr<caf::scoped_actor> lend() {
    {
      std::lock_guard lock(idle_mu);
      if (!idle.empty()) {
        auto self = std::move(idle.back());
        idle.pop_back();
        return self;
      }
    }
    return std::make_unique<caf::scoped_actor>(*sys);
  }

  hash128 session = random_hash128();
  std::atomic<std::uint64_t> next_seq{1};
  std::atomic<std::uint64_t> retried{0};
  std::unique_ptr<std::atomic<std::uint32_t>[]> owners;  // per shard; 0: unknown

  // The replicas of the nodes we reached, by node id (until they fail us).
  std::mutex links_mu;
  std::map<std::uint32_t, std::vector<replica_actor>> links;

  request_id next_request() { return request_id{session, next_seq.fetch_add(1)}; }

  // Shard `shard`'s replica on node `id`: a hello as node 0 the first time.
  result<replica_actor> replica_on(std::uint32_t id, std::size_t shard, std::chrono::milliseconds timeout) {
    {
      std::lock_guard lock(links_mu);
      if (auto it = links.find(id); it != links.end()) return it->second.at(shard);
    }
    const cluster_node* line = cluster.node(id);
    auto node = connect_to(*sys, line->host, line->port, cluster.tls, timeout);
    if (!node) return node.error();
    caf::scoped_actor self{*sys};
    result<std::vector<replica_actor>> replicas = status::failed("no answer");
    self->request(*node, timeout, hello_atom::value, std::uint32_t{0}, cluster.fingerprint(), protocol_version)
        .receive(
            [&](const std::vector<caf::actor>& r) {
              if (r.size() != cluster.shards) {
                replicas = status::invalid_argument(
                    fmt::format("node {} has {} shards; the cluster file says {}", id, r.size(), cluster.shards));
                return;
              }
              std::vector<replica_actor> typed;
              for (const auto& a : r) typed.push_back(caf::actor_cast<replica_actor>(a));
              replicas = std::move(typed);
            },
            [&](caf::error& e) { replicas = to_status(e); });
    if (!replicas) return replicas.error();
    std::lock_guard lock(links_mu);
    auto& kept = links[id];
    if (kept.empty()) kept = std::move(*replicas);
    return kept.at(shard);
  }

  // A node that did not answer: its handles may be of a process that died,
  // so the next call says hello again.
  void forget(std::uint32_t id) {
    std::lock_guard lock(links_mu);
    links.erase(id);
  }

  // Asks every node which one owns `shard`; the one with the highest epoch
  // if two think so (a deposed owner may not know yet), 0 if none. A node
  // that refuses us for good (another cluster file, another protocol) ends
  // the call with its reason. `quiet` turns false when a node did not answer
  // (its late answer may still reach self's mailbox).
  result<std::uint32_t> find_owner(std::size_t shard, caf::scoped_actor& self, clock_type::time_point deadline,
                                   bool& quiet) {
    std::uint32_t found = 0;
    ballot best;
    for (const auto& n : cluster.nodes) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) break;
      auto timeout = std::min({left, options.attempt_timeout, std::chrono::milliseconds(1000)});
      auto r = replica_on(n.id, shard, timeout);
      if (!r) {
        if (!worth_retrying(r.error())) return r.error();
        continue;
      }
      bool answered = false;
      self->request(*r, timeout, info_atom::value)
          .receive(
              [&](const replica_info& i) {
                answered = true;
                if (i.role == 2 && (found == 0 || i.epoch > best)) {
                  found = n.id;
                  best = i.epoch;
                }
              },
              [&](caf::error&) {});
      if (!answered) {
        quiet = false;
        forget(n.id);
      }
    }
    if (found != 0) owners[shard].store(found);
    return found;
  }

  // One call: `attempt(self, replica, timeout)` sends the request and waits
  // for its answer, retried at the owner until it answers or the deadline.
  template <class Attempt>
  status call(std::size_t shard, bool write, Attempt attempt) {
    auto deadline = clock_type::now() + options.call_timeout;
    borrowed lent(this, lend());
    caf::scoped_actor& self = *lent;
    bool maybe_applied = false;
    status last = status::busy("no node owns the shard");
    auto backoff = std::chrono::milliseconds(20);
    std::uint32_t id = owners[shard].load();
    status refused;     // by every node, for good
    bool quiet = true;  // every request of this call was answered
    auto look = [&] {
      auto found = find_owner(shard, self, deadline, quiet);
      if (!found) refused = found.error();
      id = found ? *found : 0;
      return found.is_ok();
    };
    for (bool first = true;; first = false) {
      if (!first) {
        retried.fetch_add(1, std::memory_order_relaxed);
        std::uint32_t was = id;
        if (!look()) return refused;
        // Nobody owns it (an election is running), or the owner that just
        // failed us still says it does: give it a moment.
        if (id == 0 || id == was) {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
          std::this_thread::sleep_for(std::min(backoff, std::max(left, std::chrono::milliseconds(0))));
          backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
          if (id == 0 && !look()) return refused;
        }
      } else if (id == 0 && !look()) {
        return refused;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) break;
      if (id == 0) continue;
      auto timeout = std::min(left, options.attempt_timeout);
      auto r = replica_on(id, shard, timeout);
      if (!r) {
        last = r.error();
        if (!worth_retrying(last)) return last;
        continue;
      }
      status s = attempt(self, *r, timeout);
      if (s.is_ok()) {
        owners[shard].store(id);
        lent.keep = first && quiet;
        return s;
      }
      if (!worth_retrying(s)) return s;
      if (!surely_not_applied(s)) {
        maybe_applied = true;
        forget(id);
      }
      last = s;
      std::uint32_t expected = id;
      owners[shard].compare_exchange_strong(expected, 0);
    }
    return status::make(
        status_code::timeout, write && maybe_applied ? status_category::ambiguous : status_category::transient,
        fmt::format("shard {}: no owner answered within {} ms ({}); last: {}", shard, options.call_timeout.count(),
                    write && maybe_applied ? "the write may or may not have taken place" : "nothing was written",
                    last.message()));
  }
};

cluster_client::cluster_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
cluster_client::~cluster_client() = default;

result<std::unique_ptr<cluster_client>> cluster_client::connect(cluster_client_options options) {
  if (options.call_timeout.count() <= 0 || options.attempt_timeout.count() <= 0)
    return status::invalid_argument("cluster client: call_timeout and attempt_timeout must be positive");
  auto text = read_whole_file(env::posix(), options.cluster_file);
  if (!text)
    return status::invalid_argument(fmt::format("cluster file {}: {}", options.cluster_file, text.error().message()));
  auto cluster = cluster_file::parse(*text);
  if (!cluster)
    return status::invalid_argument(
        fmt::format("cluster file {}: {}", options.cluster_file, cluster.error().message()));
  auto p = std::make_unique<impl>();
  p->cluster = std::move(*cluster);
  p->cfg.load<caf::io::middleman>();
  add_message_types(p->cfg);
  if (p->cluster.tls) {
    if (options.tls_certificate.empty() || options.tls_key.empty() || options.tls_ca.empty())
      return status::invalid_argument(
          fmt::format("cluster file {} says `tls on`: the client needs a certificate, its key and the cluster's CA",
                      options.cluster_file));
    MAGNETITE_TRY(configure_tls(p->cfg, tls_files{options.tls_certificate, options.tls_key, options.tls_ca}));
  }
  p->options = std::move(options);
  p->sys = std::make_unique<caf::actor_system>(p->cfg);
  p->owners = std::make_unique<std::atomic<std::uint32_t>[]>(p->cluster.shards);
  for (std::size_t s = 0; s < p->cluster.shards; ++s) p->owners[s].store(0);
  return std::unique_ptr<cluster_client>(new cluster_client(std::move(p)));
}

std::size_t cluster_client::shards() const noexcept { return impl_->cluster.shards; }
std::size_t cluster_client::shard_of(std::string_view key) const noexcept {
  return shard_for(key, impl_->cluster.shards);
}
std::uint32_t cluster_client::owner_of(std::size_t shard) const noexcept {
  return shard < impl_->cluster.shards ? impl_->owners[shard].load() : 0;
}
std::uint64_t cluster_client::retries() const noexcept { return impl_->retried.load(); }

namespace {

std::int64_t ttl_ns(std::optional<std::chrono::nanoseconds> ttl) { return ttl ? ttl->count() : 0; }

status check_ttl(std::optional<std::chrono::nanoseconds> ttl) {
  if (ttl && ttl->count() <= 0) return status::invalid_argument("a TTL must be positive");
  return status::ok();
}

}  // namespace

status cluster_client::put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(state_space::check_user_value(value));
  MAGNETITE_TRY(check_ttl(ttl));
  auto rid = impl_->next_request();
  std::string k(key), v(value);
  return impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
    status s;
    self->request(r, t, put_atom::value, k, v, ttl_ns(ttl), rid)
        .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
    return s;
  });
}

status cluster_client::del(std::string_view key) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  auto rid = impl_->next_request();
  std::string k(key);
  return impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
    status s;
    self->request(r, t, del_atom::value, k, rid).receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
    return s;
  });
}

result<std::optional<std::string>> cluster_client::get(std::string_view key) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  std::string k(key);
  std::optional<std::string> out;
  status s =
      impl_->call(shard_of(key), false, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
        status got;
        self->request(r, t, get_atom::value, k)
            .receive([&](bool found,
                         std::string& v) { out = found ? std::optional<std::string>(std::move(v)) : std::nullopt; },
                     [&](caf::error& e) { got = to_status(e); });
        return got;
      });
  if (!s) return s;
  return out;
}

result<cas_outcome> cluster_client::cas(std::string_view key, std::optional<std::string_view> expected,
                                        std::optional<std::string_view> desired,
                                        std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  for (const auto& v : {expected, desired}) {
    if (v) {
      MAGNETITE_TRY(state_space::check_user_value(*v));
    }
  }
  MAGNETITE_TRY(check_ttl(ttl));
  auto rid = impl_->next_request();
  std::string k(key), e(expected.value_or("")), d(desired.value_or(""));
  cas_outcome out;
  status s =
      impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
        status got;
        self->request(r, t, cas_atom::value, k, expected.has_value(), e, desired.has_value(), d, ttl_ns(ttl), rid)
            .receive(
                [&](bool swapped, bool has_current, std::string& current) {
                  out = swapped ? cas_outcome::applied()
                                : cas_outcome::refused(has_current ? std::optional<std::string>(std::move(current))
                                                                   : std::nullopt);
                },
                [&](caf::error& err) { got = to_status(err); });
        return got;
      });
  if (!s) return s;
  return out;
}

}  // namespace magnetite
