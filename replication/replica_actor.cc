#include "replication/replica_actor.h"

#include "engine/state_space.h"
#include "replication/replica_internal.h"

namespace magnetite::replication {

namespace {

using namespace replica_internal;

// The starting state: the promise state as the shard's log holds it, a
// random patience, and the heartbeat chain (when failure detection is on).
void start(self_ptr self, replica_config config) {
  auto& st = self->state;
  st.config = std::move(config);
  st.ps = st.config.initial;
  st.durable_synced = st.ps.synced_ns;
  st.rng.seed(st.config.seed != 0 ? st.config.seed : 0x9e3779b97f4a7c15ULL * (st.config.node + 1));
  st.draw_patience();
  std::random_device secret;
  st.round_mask = (std::uint64_t{secret()} << 32) ^ secret();
  if (st.config.heartbeat.count() > 0) {
    st.chain = st.rng() | 1;
    self->delayed_send(self, st.config.heartbeat, beat_atom::value, st.chain);
  }
}

// The replica we last promised is gone (its process died, or the link to
// it broke): campaign within a few heartbeats rather than a full patience.
void on_down(self_ptr self, const caf::down_msg& m) {
  auto& st = self->state;
  auto it = st.monitored.find(m.source);
  if (it == st.monitored.end()) return;
  std::uint32_t id = it->second;
  st.monitored.erase(it);
  // No answer can come from it now: its push, if one is out, is over.
  if (auto p = st.pushing.find(id); p != st.pushing.end() && p->second.to == m.source) st.pushing.erase(p);
  if (st.now != role::follower || id != st.ps.promised.node || st.config.heartbeat.count() == 0) return;
  auto soon = 1 + static_cast<std::uint32_t>(st.rng() % std::max<std::uint32_t>(1, st.config.election_ticks / 2));
  if (st.patience > soon) st.silent = std::max(st.silent, st.patience - soon);
}

}  // namespace

namespace replica_internal {

bool sent_by_member(self_ptr self) {
  const auto& s = self->current_sender();
  if (!s) return false;
  if (s->node() == self->node()) return true;
  for (const auto& [id, peer] : self->state.peers)
    if (peer && peer.node() == s->node()) return true;
  return false;
}

bool sent_by_node(self_ptr self, std::uint32_t id) {
  const auto& s = self->current_sender();
  if (!s) return false;
  if (id == self->state.config.node) return s->node() == self->node();
  auto it = self->state.peers.find(id);
  return it != self->state.peers.end() && it->second && it->second.node() == s->node();
}

std::optional<voter> voter_of(self_ptr self) {
  if (!sent_by_member(self)) return std::nullopt;
  const auto& s = self->current_sender();
  return voter{s->node(), s->node() == self->node() ? s->id() : caf::actor_id{0}};
}

}  // namespace replica_internal

namespace {

// Messages only this process may send: membership from an actor of this
// actor system, our timers from ourselves. Anyone who can reach the node's
// port can send a replica any message of its interface (over TLS: anyone
// with a certificate of the cluster's CA, clients included); a `peers` or a
// `beat` from them would re-point replication or hurry elections. Ignored.
// (What only replicas send each other is taken from members: sent_by_member.)
bool sent_here(self_ptr self) {
  const auto& s = self->current_sender();
  return s && s->node() == self->node();
}
bool sent_by_self(self_ptr self) { return self->current_sender() == self->ctrl(); }

caf::error not_from_member(const char* what) {
  return to_error(status::invalid_argument(
      fmt::format("`{}` is for the cluster's replicas, each speaking for itself: refused from this sender", what)));
}

// Membership: the node tells us our peers' replicas (again after a peer
// restarted under a new handle).
auto membership_handlers(self_ptr self) {
  return std::make_tuple([=](peers_atom, const std::vector<std::uint32_t>& ids, const std::vector<caf::actor>& actors) {
    if (!sent_here(self)) return;
    auto& st = self->state;
    st.peers.clear();
    for (std::size_t i = 0; i < ids.size() && i < actors.size(); ++i) {
      if (ids[i] == st.config.node || !actors[i]) continue;
      // One replica is one peer: under a second id its votes would count twice.
      auto same = [&](const auto& p) { return p.second == caf::actor_cast<replica_actor>(actors[i]); };
      if (std::any_of(st.peers.begin(), st.peers.end(), same)) continue;
      st.peers[ids[i]] = caf::actor_cast<replica_actor>(actors[i]);
      if (st.monitored.emplace(actors[i].address(), ids[i]).second) self->monitor(actors[i]);
    }
  });
}

// As an acceptor: what a candidate or an owner asks of every replica.
auto acceptor_handlers(self_ptr self) {
  return std::make_tuple(
      [=](prepare_atom, const ballot& b) -> caf::result<promise_reply> {
        if (!sent_by_node(self, b.node)) return not_from_member("prepare");
        auto rp = self->make_response_promise<promise_reply>();
        // Absent, our tree could bring back purged deletes into the
        // candidate's: no promise until we caught up or settled.
        recover(self, [self, rp, b]() mutable {
          auto& st = self->state;
          if (st.absent()) return (void)rp.deliver(promise_reply{false, st.ps.promised, st.ps.epoch, hash128{}});
          decision d = on_prepare(st.ps, b);
          if (!d.accepted) return (void)rp.deliver(promise_reply{false, d.promised, st.ps.epoch, hash128{}});
          if (st.now != role::follower && b > st.epoch) step_down(self);
          st.ps = *d.store;
          ballot epoch = st.ps.epoch;
          st.silent = 0;  // a campaign is under way: give it time
          persist_then(
              self,
              [self, rp, b, epoch]() mutable {
                self->request(self->state.config.shard(), caf::infinite, checkpoint_atom::value)
                    .then(
                        [rp, b, epoch](const hash128& root) mutable {
                          rp.deliver(promise_reply{true, b, epoch, root});
                        },
                        [rp](caf::error& e) mutable { rp.deliver(e); });
              },
              [rp](caf::error& e) mutable { rp.deliver(e); });
        });
        return rp;
      },
      // ops by reference: a batch from the network is this message's alone,
      // so it moves on into the stamped apply without a copy. A message
      // shared with another receiver (replicas of one actor system, in
      // tests) is copied by CAF before a handler may change it, and nothing
      // below reads ops after the move.
      [=](rwrite_atom, const ballot& e, std::uint64_t round, std::vector<stamped_op>& ops) {
        auto& st = self->state;
        // The vote goes to the writer as a message of its own (no reply: see
        // replica_interface.h); a write nobody signed gets none.
        auto writer = caf::actor_cast<replica_actor>(self->current_sender());
        auto answer = [self, writer, round](const vote& v) {
          if (writer) self->send(writer, rvote_atom::value, round, v);
        };
        // Only the epoch's own node writes under it, and every op of its
        // batch carries that epoch: a stamp above it would win over every
        // later write, here and wherever anti-entropy takes it.
        if (!sent_by_node(self, e.node)) return;
        auto other_epoch = [&e](const stamped_op& op) { return op.stamp.epoch != e; };
        if (std::any_of(ops.begin(), ops.end(), other_epoch)) return answer(vote{false, st.ps.promised});
        // Past our horizon we acknowledge nothing: a peer we adopt a tree
        // from later need only know what we acknowledged before it. (Our
        // heartbeat, a prepare or an elect starts the recovery: not every
        // write, since each attempt has every peer checkpoint.)
        if (st.absent()) return answer(vote{false, st.ps.promised});
        decision d = on_write(st.ps, e);
        if (!d.accepted) return answer(vote{false, d.promised});
        if (st.now != role::follower && e != st.epoch) step_down(self);
        if (d.store) {
          st.ps = *d.store;
          // The stamped apply below is answered after the group that makes
          // this durable (one mailbox, one group); a failed fsync stops the
          // shard, so the apply fails too.
          self->request(st.config.shard(), caf::infinite, promise_atom::value, st.ps.encode())
              .then([](ok_atom) {}, [](caf::error&) {});
        }
        st.silent = 0;  // the owner is alive
        // A failed apply is a no that deposes nobody (unless we promised
        // higher meanwhile): the writer's round goes on with the others.
        self->request(st.config.shard(), caf::infinite, stamped_atom::value, std::move(ops))
            .then(
                [answer, e](const std::vector<bool>&) {
                  answer(vote{true, e});
                },
                [self, answer](caf::error&) {
                  answer(vote{false, self->state.ps.promised});
                });
      },
      [=](confirm_atom, const ballot& e) -> caf::result<vote> {
        if (!sent_by_node(self, e.node)) return not_from_member("confirm");
        auto& st = self->state;
        // An owner at or above our promise is alive: no campaign of ours is
        // needed (one would only depose it). A replica that missed its
        // election learns its writes by anti-entropy instead.
        if (!(e < st.ps.promised)) st.silent = 0;
        return vote{st.ps.promised == e, st.ps.promised};
      },
      [=](probe_atom) -> bool {
        if (!sent_by_member(self)) return false;
        auto& st = self->state;
        // A replica running its own pre-vote has heard no live owner for as
        // long (it began past a patience of at least election_ticks, and an
        // owner heard since sets its silence back to 0), so it says yes too.
        // Saying no, two followers that lost the same owner at once (its
        // monitor reaches both within a heartbeat) refused each other, and
        // each waited for the dead owner's answer, a whole request timeout,
        // before trying again. Both may then campaign: ballots decide, as
        // between any two candidates. A campaign already running says no.
        bool pre_voting = st.now == role::candidate && st.pre_vote_term == st.term;
        return (st.now == role::follower || pre_voting) &&
               st.silent >= std::max<std::uint32_t>(1, st.config.election_ticks);
      });
}

// Transfers: a peer pulling our nodes, pushing its root, or asking where we stand.
auto transfer_handlers(self_ptr self) {
  return std::make_tuple(
      [=](fetch_atom, const std::vector<hash128>& hashes) -> caf::result<std::vector<std::string>> {
        if (!sent_by_member(self)) return not_from_member("fetch");
        auto v = view_of(self);
        if (!v) return to_error(status::io_error("the shard is not serving", status_category::transient));
        // A prefix of what was asked, within fetch_reply_bytes but at least
        // one node: the answer must pass the asker's max_message_bytes.
        std::vector<std::string> out;
        std::size_t bytes = 0;
        for (const auto& h : hashes) {
          if (bytes >= fetch_reply_bytes) break;
          auto n = v->store()->read(h);
          if (!n) return to_error(n.error());
          out.emplace_back((*n)->encode());
          bytes += out.back().size();
        }
        return out;
      },
      [=](sync_atom, const hash128& root, std::uint32_t from) -> caf::result<merge_report> {
        if (!sent_by_node(self, from)) return not_from_member("sync");
        // Absent, we catch up by adopting a tree that knows more (recover), not by merging.
        if (self->state.absent()) return to_error(away(self));
        auto rp = self->make_response_promise<merge_report>();
        pull_and_merge(self, root, from, [rp](const status& s, const merge_report& r) mutable { answer(rp, s, r); });
        return rp;
      },
      [=](info_atom) -> caf::result<replica_info> {
        auto rp = self->make_response_promise<replica_info>();
        self->request(self->state.config.shard(), caf::infinite, checkpoint_atom::value)
            .then(
                [self, rp](const hash128& root) mutable {
                  auto& st = self->state;
                  rp.deliver(replica_info{st.config.node, static_cast<std::uint8_t>(st.now), st.ps.promised,
                                          st.ps.epoch, root, st.pulled_nodes, st.pulled_bytes, st.merged_entries,
                                          st.ps.synced_ns, st.ps.settled_ns, st.absent(), st.batches_shipped,
                                          st.writes_shipped});
                },
                [rp](caf::error& e) mutable { rp.deliver(e); });
        return rp;
      });
}

// Our own elections: asked for, or started by our heartbeat.
auto election_handlers(self_ptr self) {
  return std::make_tuple(
      [=](elect_atom) -> caf::result<bool> {
        if (!sent_by_member(self)) return not_from_member("elect");
        auto& st = self->state;
        if (st.now == role::owner) return true;
        if (st.now == role::candidate) return to_error(not_owner(self));
        auto rp = self->make_response_promise<bool>();
        recover(self, [self, rp]() mutable {
          if (self->state.now == role::owner) return (void)rp.deliver(true);
          if (self->state.now == role::candidate) return (void)rp.deliver(to_error(not_owner(self)));
          campaign(self, [rp](const status& s, bool owns) mutable { answer(rp, s, owns); });
        });
        return rp;
      },
      [=](beat_atom, std::uint64_t chain) {
        auto& st = self->state;
        if (chain != st.chain || !sent_by_self(self)) return;
        self->delayed_send(self, st.config.heartbeat, beat_atom::value, chain);
        ++st.ticks;
        if (st.absent()) {
          if (st.now == role::owner) step_down(self);
          if (st.ticks % std::max<std::uint32_t>(1, st.config.election_ticks) == 0) recover(self, [] {});
        } else if (st.now == role::owner) {
          heartbeat(self);
        } else if (st.now == role::follower && ++st.silent >= st.patience) {
          pre_vote_then_campaign(self);
        }
        if (st.config.anti_entropy_ticks > 0 && st.ticks % st.config.anti_entropy_ticks == 0) push_root(self);
      });
}

caf::result<ok_atom> client_put(self_ptr self, const std::string& key, const std::string& value, std::int64_t ttl_ns,
                                std::optional<request_id> rid) {
  if (auto s = state_space::check_user_key(key); !s) return to_error(s);
  if (auto s = state_space::check_user_value(value); !s) return to_error(s);
  auto in = admit_client_write(self);
  if (!in) return to_error(in.error());
  auto rp = self->make_response_promise<ok_atom>();
  at_most_once(
      self, rid, refusal(rp), [rp](std::uint64_t) mutable { rp.deliver(ok_atom::value); },
      [self, rp, key, value, ttl_ns, in = *in](std::optional<stamped_op> record) mutable {
        // `key` stays: with_key reads it after this lambda is made.
        with_key(self, key, [self, rp, key, value = std::move(value), ttl_ns, record, in](bool go) mutable {
          if (!go) {
            drop(self, record);
            return (void)rp.deliver(to_error(not_owner(self)));
          }
          stamped_op op{key, stamp{}, true, std::move(value), ttl_ns > 0, 0};
          if (ttl_ns > 0) op.deadline_ns = self->state.config.clock() + static_cast<std::uint64_t>(ttl_ns);
          replicate(
              self, std::move(op), [rp, in](const status& s) mutable { answer(rp, s, ok_atom::value); },
              std::move(record));
        });
      });
  return rp;
}

caf::result<ok_atom> client_del(self_ptr self, const std::string& key, std::optional<request_id> rid) {
  if (auto s = state_space::check_user_key(key); !s) return to_error(s);
  auto in = admit_client_write(self);
  if (!in) return to_error(in.error());
  auto rp = self->make_response_promise<ok_atom>();
  at_most_once(
      self, rid, refusal(rp), [rp](std::uint64_t) mutable { rp.deliver(ok_atom::value); },
      [self, rp, key, in = *in](std::optional<stamped_op> record) mutable {
        with_key(self, key, [self, rp, key, record, in](bool go) mutable {
          if (!go) {
            drop(self, record);
            return (void)rp.deliver(to_error(not_owner(self)));
          }
          auto& st = self->state;
          auto purge = st.config.clock() + static_cast<std::uint64_t>(st.config.tombstone_retention.count());
          replicate(
              self, stamped_op{key, stamp{}, false, std::string(), true, purge},
              [rp, in](const status& s) mutable { answer(rp, s, ok_atom::value); }, std::move(record));
        });
      });
  return rp;
}

// The CAS itself, with the key held: a refusal is a read (confirmed, and it
// writes no record: its retry is a new attempt); a swap is a write.
void cas_held(self_ptr self, caf::typed_response_promise<bool, bool, std::string> rp, const std::string& key,
              bool has_expected, const std::string& expected, bool has_desired, const std::string& desired,
              std::int64_t ttl_ns, std::optional<stamped_op> record, admission_ptr in) {
  auto v = view_of(self);
  if (!v) {
    drop(self, record);
    return (void)rp.deliver(to_error(status::io_error("the shard is not serving", status_category::transient)));
  }
  auto current = v->get(key, self->state.config.clock());
  if (!current) {
    drop(self, record);
    return (void)rp.deliver(to_error(current.error()));
  }
  bool matches = current->has_value() == has_expected && (!has_expected || **current == expected);
  if (!matches) {
    drop(self, record);
    // A refusal is a read: it must hold at a moment we still owned the shard.
    return confirm(self, [self, rp, current = *current, in](bool ok) mutable {
      if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
      rp.deliver(false, current.has_value(), current.value_or(std::string()));
    });
  }
  auto& st = self->state;
  stamped_op op{key, stamp{}, has_desired, has_desired ? desired : std::string(), false, 0};
  if (!has_desired) {
    op.has_deadline = true;
    op.deadline_ns = st.config.clock() + static_cast<std::uint64_t>(st.config.tombstone_retention.count());
  } else if (ttl_ns > 0) {
    op.has_deadline = true;
    op.deadline_ns = st.config.clock() + static_cast<std::uint64_t>(ttl_ns);
  }
  replicate(
      self, std::move(op), [rp, in](const status& s) mutable { answer(rp, s, true, false, std::string()); },
      std::move(record));
}

caf::result<bool, bool, std::string> client_cas(self_ptr self, const std::string& key, bool has_expected,
                                                const std::string& expected, bool has_desired,
                                                const std::string& desired, std::int64_t ttl_ns,
                                                std::optional<request_id> rid) {
  if (auto s = state_space::check_user_key(key); !s) return to_error(s);
  for (const auto* v : {has_expected ? &expected : nullptr, has_desired ? &desired : nullptr})
    if (v)
      if (auto s = state_space::check_user_value(*v); !s) return to_error(s);
  auto admitted = admit_client_write(self);
  if (!admitted) return to_error(admitted.error());
  admission_ptr in = *admitted;
  auto rp = self->make_response_promise<bool, bool, std::string>();
  at_most_once(
      self, rid, refusal(rp), [rp](std::uint64_t) mutable { rp.deliver(true, false, std::string()); },
      [=](std::optional<stamped_op> record) mutable {
        with_key(self, key, [=](bool go) mutable {
          if (!go) {
            drop(self, record);
            return (void)rp.deliver(to_error(not_owner(self)));
          }
          cas_held(self, rp, key, has_expected, expected, has_desired, desired, ttl_ns, std::move(record), in);
        });
      });
  return rp;
}

// Clients: the owner only; writes of one key one at a time, shipped in
// batches (rflush: every client message queued before it was taken).
auto client_handlers(self_ptr self) {
  return std::make_tuple(
      [=](rflush_atom) {
        if (sent_by_self(self)) flush_batch(self);
      },
      [=](rvote_atom, std::uint64_t round, const vote& v) { on_write_vote(self, round, v); },
      [=](rexpire_atom) {
        if (sent_by_self(self)) expire_write_rounds(self);
      },
      [=](put_atom, const std::string& key, const std::string& value, std::int64_t ttl_ns) -> caf::result<ok_atom> {
        if (auto no = refused_keys(self, "put", {}, {key})) return no;
        return client_put(self, key, value, ttl_ns, std::nullopt);
      },
      [=](put_atom, const std::string& key, const std::string& value, std::int64_t ttl_ns,
          const request_id& rid) -> caf::result<ok_atom> {
        if (auto no = refused_keys(self, "put", {}, {key})) return no;
        return client_put(self, key, value, ttl_ns, rid);
      },
      [=](del_atom, const std::string& key) -> caf::result<ok_atom> {
        if (auto no = refused_keys(self, "del", {}, {key})) return no;
        return client_del(self, key, std::nullopt);
      },
      [=](del_atom, const std::string& key, const request_id& rid) -> caf::result<ok_atom> {
        if (auto no = refused_keys(self, "del", {}, {key})) return no;
        return client_del(self, key, rid);
      },
      [=](cas_atom, const std::string& key, bool has_expected, const std::string& expected, bool has_desired,
          const std::string& desired, std::int64_t ttl_ns) -> caf::result<bool, bool, std::string> {
        if (auto no = refused_keys(self, "cas", {key}, {key})) return no;
        return client_cas(self, key, has_expected, expected, has_desired, desired, ttl_ns, std::nullopt);
      },
      [=](cas_atom, const std::string& key, bool has_expected, const std::string& expected, bool has_desired,
          const std::string& desired, std::int64_t ttl_ns,
          const request_id& rid) -> caf::result<bool, bool, std::string> {
        if (auto no = refused_keys(self, "cas", {key}, {key})) return no;
        return client_cas(self, key, has_expected, expected, has_desired, desired, ttl_ns, rid);
      },
      [=](apply_atom, std::vector<state_check>& checks, std::vector<batch_op>& ops,
          const request_id& rid) -> caf::result<bool, std::uint64_t, std::uint32_t, std::uint64_t> {
        if (auto no = refused_batch(self, "apply", checks, ops)) return no;
        return client_apply(self, std::move(checks), std::move(ops), rid);
      },
      [=](sread_atom, const std::string& key) -> caf::result<bool, std::string> {
        if (auto no = refused_keys(self, "sread", {key}, {})) return no;
        return client_state_read(self, key);
      },
      [=](tx_prepare_atom, const hash128& id, std::uint32_t coordinator, std::vector<state_check>& checks,
          std::vector<batch_op>& ops) -> caf::result<bool, std::uint32_t, std::uint64_t> {
        if (auto no = refused_batch(self, "txprepare", checks, ops)) return no;
        return client_tx_prepare(self, id, coordinator, std::move(checks), std::move(ops));
      },
      [=](tx_commit_atom, const hash128& id, std::vector<state_check>& checks, std::vector<batch_op>& ops,
          std::vector<std::uint32_t>& participants) -> caf::result<bool, std::uint32_t, std::uint64_t, std::uint64_t> {
        if (auto no = refused_batch(self, "txcommit", checks, ops)) return no;
        return client_tx_commit(self, id, std::move(checks), std::move(ops), std::move(participants));
      },
      [=](tx_decide_atom, const hash128& id, bool commit,
          std::vector<std::uint32_t>& participants) -> caf::result<bool> {
        if (auto no = refused_unless_writer(self, "txdecide")) return no;
        return client_tx_decide(self, id, commit, std::move(participants));
      },
      [=](tx_finish_atom, const hash128& id, bool commit) -> caf::result<std::uint64_t> {
        if (auto no = refused_unless_writer(self, "txfinish")) return no;
        return client_tx_finish(self, id, commit);
      },
      [=](tx_forget_atom, const hash128& id) -> caf::result<ok_atom> {
        if (auto no = refused_unless_writer(self, "txforget")) return no;
        return client_tx_forget(self, id);
      },
      [=](tx_stale_atom, std::uint64_t older_than_ns) -> caf::result<std::vector<hash128>, std::vector<std::uint32_t>> {
        if (auto no = refused_unless_writer(self, "txstale")) return no;
        return client_tx_stale(self, older_than_ns);
      },
      [=](srange_atom, const std::string& from, const std::string& to, std::uint64_t limit,
          bool backward) -> caf::result<std::vector<std::string>, std::vector<std::string>, bool, std::string> {
        if (auto no = refused_range(self, from, to)) return no;
        return client_state_range(self, from, to, limit, backward);
      },
      [=](get_atom, const std::string& key) -> caf::result<bool, std::string> {
        if (auto s = state_space::check_user_key(key); !s) return to_error(s);
        if (auto no = refused_keys(self, "get", {key}, {})) return no;
        return confirmed_read(self, key);
      });
}

// The behaviour: the tables above, one per kind of message.
replica_actor::behavior_type replica_behavior(self_ptr self, replica_config config) {
  start(self, std::move(config));
  self->set_down_handler([self](caf::down_msg& m) { on_down(self, m); });
  return std::apply([](auto&&... handlers) { return replica_actor::behavior_type{std::move(handlers)...}; },
                    std::tuple_cat(membership_handlers(self), acceptor_handlers(self), transfer_handlers(self),
                                   election_handlers(self), client_handlers(self)));
}

}  // namespace

replica_actor spawn_replica(caf::actor_system& sys, replica_config config) {
  return sys.spawn(replica_behavior, std::move(config));
}

}  // namespace magnetite::replication
