// cluster_client_impl: what the cluster client's files share (cluster_client.cc
// the calls of <magnetite/cluster_client.h>, cluster_state.cc state/'s way
// in): the connections, each shard's owner as last found, and `call`, which
// routes one request to the owner and retries it. Not an interface: only
// those files include it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/caf_headers.h"  // before any other CAF header

#include "actors/state_storage.h"
#include "core/admission_budget.h"
#include "core/hash128.h"
#include "magnetite/cluster_client.h"
#include "replication/node.h"
#include "replication/request_within.h"

namespace magnetite {

using clock_type = std::chrono::steady_clock;

namespace cluster_calls {

// Whether another attempt (the same request id, perhaps another node) could
// succeed. Bad input, a refused feature, a key the cluster file grants this
// client no access to, or a cluster file the nodes do not share will not
// change by asking again; a conflict (a key held by a transaction across
// shards) is the owner's answer, with nothing written, for the caller to
// act on.
inline bool worth_retrying(const status& s) {
  return s.code() != status_code::invalid_argument && s.code() != status_code::not_supported &&
         s.code() != status_code::conflict && s.code() != status_code::permission_denied;
}

// Whether a failed attempt proves the write was not applied: a node that is
// not the owner refuses it before queuing it (busy), and a write still in an
// owner's batch when it steps down went nowhere (busy too). Anything else -
// no answer, a broken link, an owner deposed while it waited - may have.
inline bool surely_not_applied(const status& s) { return s.code() == status_code::busy; }

}  // namespace cluster_calls

struct cluster_client::impl {
  cluster_client_options options;
  replication::cluster_file cluster;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  // Over TLS: links through a guarded network of the client's own, with
  // sessions from one context (tls_context.h). CAF's own sessions left a
  // broken link's errors behind, which then dropped the links to the
  // living nodes: a client waited out its attempts after any node died.
  // After sys, so it goes first.
  std::shared_ptr<replication::guarded_network> network;
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

  // max_calls_in_flight (a call takes a request, no bytes).
  std::unique_ptr<admission_budget> calls;

  hash128 session = random_hash128();
  std::atomic<std::uint64_t> next_seq{1};
  std::atomic<std::uint64_t> retried{0};
  std::unique_ptr<std::atomic<std::uint32_t>[]> owners;  // per shard; 0: unknown
  // state/'s way in (cluster_state.cc), made with the client.
  std::unique_ptr<state_storage> state;

  // The replicas of the nodes we reached, by node id (until they fail us).
  std::mutex links_mu;
  std::map<std::uint32_t, std::vector<replication::replica_actor>> links;

  replication::request_id next_request() { return replication::request_id{session, next_seq.fetch_add(1)}; }

  // Shard `shard`'s replica on node `id`: a hello as node 0 the first time.
  result<replication::replica_actor> replica_on(std::uint32_t id, std::size_t shard,
                                                std::chrono::milliseconds timeout) {
    {
      std::lock_guard lock(links_mu);
      if (auto it = links.find(id); it != links.end()) return it->second.at(shard);
    }
    const replication::cluster_node* line = cluster.node(id);
    auto node = network ? replication::connect_via(*sys, network->actor(), line->host, line->port, true, timeout)
                        : replication::connect_to(*sys, line->host, line->port, false, timeout);
    if (!node) return node.error();
    caf::scoped_actor self{*sys};
    result<std::vector<replication::replica_actor>> replicas = status::failed("no answer");
    replication::request_within(self, *node, timeout, replication::hello_atom::value, std::uint32_t{0},
                                cluster.fingerprint(), replication::protocol_version)
        .receive(
            [&](const std::vector<caf::actor>& r) {
              if (r.size() != cluster.shards) {
                replicas = status::invalid_argument(
                    fmt::format("node {} has {} shards; the cluster file says {}", id, r.size(), cluster.shards));
                return;
              }
              std::vector<replication::replica_actor> typed;
              for (const auto& a : r) typed.push_back(caf::actor_cast<replication::replica_actor>(a));
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
        if (!cluster_calls::worth_retrying(r.error())) return r.error();
        continue;
      }
      bool answered = false;
      replication::request_within(self, *r, timeout, replication::info_atom::value)
          .receive(
              [&](const replication::replica_info& i) {
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

  // A read at shard's owner that answers (found, value): get of a plain key,
  // sread of a state key.
  template <class Atom>
  result<std::optional<std::string>> read_at_owner(std::size_t shard, Atom atom, const std::string& key) {
    std::optional<std::string> out;
    status s =
        call(shard, false, [&](caf::scoped_actor& self, replication::replica_actor& r, std::chrono::milliseconds t) {
          status got;
          replication::request_within(self, r, t, atom, key)
              .receive([&](bool found,
                           std::string& v) { out = found ? std::optional<std::string>(std::move(v)) : std::nullopt; },
                       [&](caf::error& e) { got = to_status(e); });
          return got;
        });
    if (!s) return s;
    return out;
  }

  // One call: `attempt(self, replica, timeout)` sends the request and waits
  // for its answer, retried at the owner until it answers or the deadline
  // (call_timeout from now, or `until` when that is sooner).
  template <class Attempt>
  status call(std::size_t shard, bool write, Attempt attempt, std::optional<clock_type::time_point> until = {}) {
    auto deadline = clock_type::now() + options.call_timeout;
    if (until && *until < deadline) deadline = *until;
    if (!calls->admit(0, deadline))
      return status::busy(
          fmt::format("the client has {} calls in flight, its max_calls_in_flight, and none ended "
                      "before this one's deadline: nothing was sent",
                      calls->max_requests()));
    struct release_on_return {
      admission_budget& b;
      ~release_on_return() { b.release(0); }
    } released{*calls};
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
        if (!cluster_calls::worth_retrying(last)) return last;
        continue;
      }
      status s = attempt(self, *r, timeout);
      if (s.is_ok()) {
        owners[shard].store(id);
        lent.keep = first && quiet;
        return s;
      }
      if (!cluster_calls::worth_retrying(s)) return s;
      if (!cluster_calls::surely_not_applied(s)) {
        maybe_applied = true;
        forget(id);
      }
      last = s;
      std::uint32_t expected = id;
      owners[shard].compare_exchange_strong(expected, 0);
    }
    return status::make(
        status_code::timeout, write && maybe_applied ? status_category::ambiguous : status_category::transient,
        fmt::format("shard {}: no owner answered in time ({} ms at most; {}); last: {}", shard,
                    options.call_timeout.count(),
                    write && maybe_applied ? "the write may or may not have taken place" : "nothing was written",
                    last.message()));
  }
};

// state/'s way in to the client's cluster (cluster_state.cc).
std::unique_ptr<state_storage> make_cluster_state(cluster_client::impl& c);

}  // namespace magnetite
