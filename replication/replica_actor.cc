#include "replication/replica_actor.h"

#include <deque>
#include <map>
#include <random>

#include "replication/tree_puller.h"

namespace magnetite::replication {

namespace {

enum class role { follower, candidate, owner };

// Requests on one key at the owner: a write in flight holds the key, and
// everything after it waits, in order. A waiting request is told whether it
// may go on (false: the owner stepped down).
struct key_queue {
  bool writing = false;
  std::deque<std::function<void(bool)>> waiting;
};

// A read (or a CAS refusal) waiting for a confirm round.
struct queued_read {
  ballot epoch;  // the owner's when the value was read
  std::function<void(bool)> done;
};

struct replica_state {
  replica_config config;
  std::map<std::uint32_t, replica_actor> peers;
  promise_state ps;  // as decided; a reply that depends on it waits for its fsync
  role now = role::follower;
  ballot epoch;  // the ballot we campaign with or own with
  std::uint64_t next_seq = 1;
  // Changes whenever the role does: a callback of an older term is stale.
  std::uint64_t term = 0;
  std::map<std::string, key_queue, std::less<>> keys;
  // Reads waiting for the next confirm round, and whether one is out.
  std::vector<queued_read> reads;
  bool confirming = false;

  // Failure detection: heartbeats heard from nobody in a row, and how many a
  // follower waits before it campaigns (drawn anew after every campaign).
  std::mt19937_64 rng;
  std::uint64_t chain = 0;  // our timer's; a beat of another chain is ignored
  std::uint64_t ticks = 0;
  std::uint32_t silent = 0;
  std::uint32_t patience = 0;
  bool beating = false;             // a heartbeat round is out
  std::uint64_t pre_vote_term = 0;  // the term of our own pre-vote, while it runs
  // Anti-entropy: to the peer after the last one, skipping a peer whose
  // last push is still out (a dead or cut-off peer stalls nobody else).
  // A push to a replica that died, or over a connection that broke, is never
  // answered: it ends only at its deadline (30 request timeouts). So a push
  // holds back only the handle it went to, and only until that handle is
  // reported down; a handle reported down gets no push (nothing could answer
  // it) until the peer is linked again; a peer linked again under a new
  // handle (a restarted node) is pushed to at once. Held back by peer id
  // instead, a restarted node got no push from anyone until those deadlines
  // passed, and nothing else brings it the writes it missed: a live owner's
  // confirm rounds keep it from campaigning.
  struct push_out {
    caf::actor_addr to;
    std::uint64_t number = 0;  // which push: only its own end clears it
  };
  std::map<std::uint32_t, push_out> pushing;
  std::uint64_t pushes = 0;
  std::uint32_t pushed_last = 0;
  // The peers' replicas we monitor, not yet reported down.
  std::map<caf::actor_addr, std::uint32_t> monitored;
  std::uint64_t pulled_nodes = 0, pulled_bytes = 0, merged_entries = 0;  // for info

  // The long-absence rule (design, 6). When each peer's last completed pull
  // into us began; synced_ns as the shard's log holds it; a recovery running,
  // and what waits for it.
  std::map<std::uint32_t, std::uint64_t> pulled_at;
  std::uint64_t durable_synced = 0;
  std::uint64_t campaign_began = 0;  // a won campaign merged every write committed before it
  bool recovering = false;
  std::vector<std::function<void()>> after_recovery;

  std::size_t majority() const { return config.cluster_size / 2 + 1; }

  // Pulls from this many distinct peers reach every majority we are not in,
  // so they hold every committed write. Zero (one or two nodes): every
  // committed write is on every replica that is up; nothing can be missed.
  std::size_t pulls_for_sync() const { return config.cluster_size - majority(); }
  std::uint64_t half_retention() const { return static_cast<std::uint64_t>(config.tombstone_retention.count()) / 2; }
  // After this moment we acknowledge nothing until we catch up or settle.
  std::uint64_t horizon() const {
    auto base = std::max(ps.synced_ns, ps.settled_ns);
    return base > UINT64_MAX - half_retention() ? UINT64_MAX : base + half_retention();
  }
  bool absent() const { return pulls_for_sync() > 0 && config.clock() > horizon(); }
  // Whether a peer's answer says it held every committed write recently.
  bool knows_recent(const replica_info& i) const {
    return i.synced_ns > UINT64_MAX - half_retention() || i.synced_ns + half_retention() >= config.clock();
  }

  void draw_patience() {
    auto k = std::max<std::uint32_t>(1, config.election_ticks);
    patience = k + static_cast<std::uint32_t>(rng() % k);
    silent = 0;
  }
};

using self_ptr = replica_actor::stateful_pointer<replica_state>;

status not_owner(self_ptr self) {
  auto& st = self->state;
  std::string hint;
  if (st.now == role::candidate)
    hint = " (an election is running)";
  else if (st.ps.promised.node != 0 && st.ps.promised.node != st.config.node)
    hint = fmt::format(" (node {} was promised it last)", st.ps.promised.node);
  return status::busy(fmt::format("node {} does not own this shard{}", st.config.node, hint));
}

status away(self_ptr self) {
  return status::busy(
      fmt::format("node {} was away longer than half the tombstone retention: it is catching up from its peers "
                  "(docs/design/replication.md, 6)",
                  self->state.config.node));
}

status deposed(std::string_view what) {
  return status::make(status_code::failed, status_category::ambiguous,
                      fmt::format("the owner stepped down ({}): the write may or may not survive", what));
}

// Steps down: every request waiting on a key is refused; writes in flight
// finish on their own (a majority may still take them).
void step_down(self_ptr self) {
  auto& st = self->state;
  if (st.now == role::follower) return;
  st.now = role::follower;
  ++st.term;
  auto keys = std::move(st.keys);
  st.keys.clear();
  for (auto& [k, q] : keys)
    for (auto& f : q.waiting) f(false);
}

// Runs fn(true) when no write of key is in flight (now or once it finishes),
// fn(false) if we are not (or stop being) the owner.
void with_key(self_ptr self, const std::string& key, std::function<void(bool)> fn) {
  auto& st = self->state;
  if (st.now == role::owner && st.absent()) step_down(self);  // an absent replica acknowledges nothing
  if (st.now != role::owner) return fn(false);
  auto it = st.keys.find(key);
  if (it == st.keys.end() || !it->second.writing) return fn(true);
  it->second.waiting.push_back(std::move(fn));
}

void release_key(self_ptr self, const std::string& key) {
  auto& st = self->state;
  auto it = st.keys.find(key);
  if (it == st.keys.end()) return;
  it->second.writing = false;
  while (!it->second.writing && !it->second.waiting.empty()) {
    auto f = std::move(it->second.waiting.front());
    it->second.waiting.pop_front();
    f(true);
    it = st.keys.find(key);
    if (it == st.keys.end()) return;
  }
  if (!it->second.writing && it->second.waiting.empty()) st.keys.erase(it);
}

std::shared_ptr<const read_view> view_of(self_ptr self) { return self->state.config.slot->view.load(); }

// One round to every peer, counting ourselves as the first yes: `yes` judges
// each reply (a failed request is a no). `done(true)` as soon as the yes
// count reaches a majority, `done(false)` once every peer answered short of
// it; `done` runs exactly once.
template <class Reply, class... Ts>
void majority_round(self_ptr self, caf::timespan timeout, std::function<bool(std::uint32_t, const Reply&)> yes,
                    std::function<void(bool)> done, const Ts&... xs) {
  struct tally {
    std::size_t yes = 1;
    std::size_t answered = 0;
    bool finished = false;
  };
  auto t = std::make_shared<tally>();
  std::size_t expected = self->state.peers.size();
  auto check = [self, t, expected, done]() {
    if (t->finished) return;
    if (t->yes >= self->state.majority() || t->answered == expected) {
      t->finished = true;
      done(t->yes >= self->state.majority());
    }
  };
  check();  // a cluster of one
  for (auto& [id, peer] : self->state.peers)
    self->request(peer, timeout, xs...)
        .then(
            [t, check, yes, id = id](const Reply& r) {
              if (yes(id, r)) ++t->yes;
              ++t->answered;
              check();
            },
            [t, check](caf::error&) {
              ++t->answered;
              check();
            });
}

// A vote that says no because of a higher promise deposes us.
bool counted(self_ptr self, const vote& v, const ballot& epoch) {
  if (!v.accepted && v.promised > epoch) step_down(self);
  return v.accepted;
}

// One write at the owner: stamped, applied to our shard and sent to every
// peer; `done` hears ok once our shard and majority - 1 peers hold it.
void replicate(self_ptr self, stamped_op op, std::function<void(const status&)> done) {
  auto& st = self->state;
  st.keys[op.key].writing = true;
  op.stamp = stamp{st.epoch, st.next_seq++};
  // Decided once our own shard and the round have both answered, or either failed.
  struct outcome {
    std::optional<status> local;
    std::optional<bool> peers;
    bool finished = false;
  };
  auto o = std::make_shared<outcome>();
  // A write that outlives our term (we stepped down, perhaps won again) holds
  // no key of the new term and deposes nothing: a new term's handoff began
  // after its local apply was queued, so its spread carried it if it landed.
  auto check = [self, o, key = op.key, done, my_term = st.term]() {
    if (o->finished) return;
    bool local_failed = o->local && !o->local->is_ok();
    if (!local_failed && !(o->local && o->peers)) return;
    o->finished = true;
    bool current = self->state.term == my_term;
    if (current) release_key(self, key);
    if (!local_failed && *o->peers) return done(status::ok());
    // No majority holds it, yet our own shard may: we cannot serve reads that
    // would show it, nor prove it lost.
    if (current) step_down(self);
    done(local_failed ? o->local->with_category(status_category::ambiguous)
                      : deposed("no majority made the write durable in time"));
  };
  std::vector<stamped_op> ops{op};
  ballot epoch = st.epoch;
  self->request(st.config.shard(), caf::infinite, stamped_atom::value, ops)
      .then(
          [o, check](const std::vector<bool>&) {
            o->local = status::ok();
            check();
          },
          [o, check](caf::error& e) {
            o->local = to_status(e);
            check();
          });
  majority_round<vote>(
      self, st.config.request_timeout, [self, epoch](std::uint32_t, const vote& v) { return counted(self, v, epoch); },
      [o, check](bool reached) {
        o->peers = reached;
        check();
      },
      rwrite_atom::value, epoch, ops);
}

// Runs one confirm round for every read queued when it starts; reads queued
// meanwhile wait for the next round, since a round must begin after the read
// it vouches for. A read taken under another epoch than the round's is not
// vouched for (we lost and won the shard again in between).
void confirm_queued(self_ptr self) {
  auto& st = self->state;
  if (st.confirming || st.reads.empty()) return;
  st.confirming = true;
  auto batch = std::make_shared<std::vector<queued_read>>(std::move(st.reads));
  st.reads.clear();
  ballot epoch = st.epoch;
  majority_round<vote>(
      self, st.config.request_timeout, [self, epoch](std::uint32_t, const vote& v) { return counted(self, v, epoch); },
      [self, batch, epoch](bool held) {
        self->state.confirming = false;
        for (auto& r : *batch) r.done(held && r.epoch == epoch);
        confirm_queued(self);
      },
      confirm_atom::value, epoch);
}

// A confirm round for a read: `done(true)` once a majority (ourselves
// included) still promises our epoch, in a round that began after this call.
void confirm(self_ptr self, std::function<void(bool)> done) {
  auto& st = self->state;
  st.reads.push_back({st.epoch, std::move(done)});
  confirm_queued(self);
}

// Makes our promise state durable, then next(); failed(e) if it could not be.
void persist_then(self_ptr self, std::function<void()> next, std::function<void(caf::error&)> failed) {
  self->request(self->state.config.shard(), caf::infinite, promise_atom::value, self->state.ps.encode())
      .then([next](ok_atom) { next(); }, [failed](caf::error& e) { failed(e); });
}

// Writes our promise state (synced_ns or settled_ns moved) when `force`, or
// when synced_ns moved far enough since it was last written: a crash that
// loses the rest only makes us look absent sooner.
void persist_progress(self_ptr self, bool force) {
  auto& st = self->state;
  auto step = static_cast<std::uint64_t>(st.config.tombstone_retention.count()) / 16;
  if (!force && st.ps.synced_ns < st.durable_synced + step) return;
  auto synced = st.ps.synced_ns;
  persist_then(
      self, [self, synced] { self->state.durable_synced = std::max(self->state.durable_synced, synced); },
      [](caf::error&) {});  // a failed fsync stops the shard; its restart replays the last one written
}

// A pull from `from` that began at `began` completed: once pulls from enough
// distinct peers began after a moment, we hold every write committed before it.
void note_pull(self_ptr self, std::uint32_t from, std::uint64_t began) {
  auto& st = self->state;
  auto& at = st.pulled_at[from];
  at = std::max(at, began);
  std::size_t need = st.pulls_for_sync();
  if (need == 0 || st.pulled_at.size() < need) return;
  std::vector<std::uint64_t> times;
  for (const auto& [id, t] : st.pulled_at) times.push_back(t);
  std::sort(times.begin(), times.end(), std::greater<>());
  if (times[need - 1] <= st.ps.synced_ns) return;
  bool was_absent = st.absent();
  st.ps.synced_ns = times[need - 1];
  persist_progress(self, was_absent);
}

// Pulls `root` from peer `from` into our shard and merges it (adopt: and
// drops what only we hold).
void pull_and_merge(self_ptr self, hash128 root, std::uint32_t from,
                    std::function<void(const status&, const merge_report&)> done, bool adopt = false) {
  auto& st = self->state;
  std::uint64_t began = st.config.clock();
  auto peer = st.peers.find(from);
  if (peer == st.peers.end())
    return done(status::invalid_argument(fmt::format("sync from node {}: not a peer of node {}", from, st.config.node)),
                {});
  auto slot = st.config.slot;
  auto puller = std::make_shared<tree_puller>(root, [slot](const hash128& h) {
    auto v = slot->view.load();
    return v && v->store()->contains(h);
  });
  auto import_failed = std::make_shared<status>();
  auto shard = st.config.shard();
  auto send_imports = [self, shard, import_failed](std::vector<hash128> hs, std::vector<std::string> bs) {
    if (hs.empty()) return;
    self->request(shard, caf::infinite, import_atom::value, std::move(hs), std::move(bs))
        .then([](ok_atom) {},
              [import_failed](caf::error& e) {
                if (import_failed->is_ok()) *import_failed = to_status(e);
              });
  };
  // Each round of the walk is `step`. Only the fetch out holds it (and the
  // caller during the first round): the step itself refers to itself weakly.
  // Holding itself, a pull whose answer never comes (the replica stopped:
  // CAF drops its pending handlers) kept its puller, and with it the shard's
  // slot and node store, open for good; a node restarted in the same process
  // then found its data directory locked.
  auto step = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_step = step;
  *step = [self, root, from, began, adopt, puller, import_failed, shard, send_imports, weak_step, target = peer->second,
           done]() {
    auto collect = [](std::vector<hash128>& hs, std::vector<std::string>& bs) {
      return [&hs, &bs](const hash128& h, std::string_view bytes) {
        hs.push_back(h);
        bs.emplace_back(bytes);
        return status::ok();
      };
    };
    if (puller->done()) {
      std::vector<hash128> hs;
      std::vector<std::string> bs;
      if (status s = puller->finish(collect(hs, bs)); !s) return done(s, {});
      send_imports(std::move(hs), std::move(bs));
      auto merged = adopt ? self->request(shard, caf::infinite, adopt_atom::value, root)
                          : self->request(shard, caf::infinite, merge_atom::value, root);
      merged.then(
          [self, from, began, puller, import_failed, done](const merge_report& r) {
            if (!import_failed->is_ok()) return done(*import_failed, {});
            auto& st = self->state;
            st.pulled_nodes += puller->stats().nodes;
            st.pulled_bytes += puller->stats().bytes;
            st.merged_entries += r.taken;
            note_pull(self, from, began);
            done(status::ok(), r);
          },
          [done](caf::error& e) { done(to_status(e), {}); });
      return;
    }
    auto want = puller->next_request(self->state.config.pull_batch);
    self->request(target, self->state.config.request_timeout, fetch_atom::value, want)
        .then(
            [want, puller, collect, send_imports, step = weak_step.lock(), done](const std::vector<std::string>& got) {
              std::vector<hash128> hs;
              std::vector<std::string> bs;
              if (status s = puller->take(want, got, collect(hs, bs)); !s) return done(s, {});
              send_imports(std::move(hs), std::move(bs));
              (*step)();
            },
            [done](caf::error& e) { done(to_status(e), {}); });
  };
  (*step)();
}

// Asks every peer the same request; `done` gets each peer's answer (an error
// or a timeout: none) once all are in.
template <class Reply, class... Ts>
void ask_every_peer(self_ptr self, caf::timespan timeout,
                    std::function<void(std::vector<std::pair<std::uint32_t, std::optional<Reply>>>)> done,
                    const Ts&... xs) {
  using answers = std::vector<std::pair<std::uint32_t, std::optional<Reply>>>;
  auto got = std::make_shared<answers>();
  std::size_t expected = self->state.peers.size();
  if (expected == 0) return done({});
  auto add = [got, expected, done](std::uint32_t id, std::optional<Reply> r) {
    got->emplace_back(id, std::move(r));
    if (got->size() == expected) done(std::move(*got));
  };
  for (auto& [id, peer] : self->state.peers)
    self->request(peer, timeout, xs...)
        .then([add, id = id](const Reply& r) { add(id, r); }, [add, id = id](caf::error&) { add(id, std::nullopt); });
}

void end_recovery(self_ptr self) {
  auto& st = self->state;
  st.recovering = false;
  auto waiting = std::move(st.after_recovery);
  st.after_recovery.clear();
  for (auto& f : waiting) f();
}

// The long-absence rule (design, 6). We are absent: our last sync is older
// than half the tombstone retention, so we may hold values whose delete was
// purged elsewhere meanwhile, and we acknowledged nothing since our horizon.
// Every peer tells where it stands. One that held every committed write at a
// moment past our horizon holds all we ever acknowledged: we adopt its tree
// (what only we hold goes). A peer that knows recent writes but not yet past
// our horizon soon will: we wait. If no answer knows recent writes and a
// majority (ourselves included) answered, the cluster was down or cut off as a
// whole for that long: we settle, keeping our data, since dropping it could
// lose acknowledged writes and nobody knows better. `then` runs once decided.
void recover(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.absent()) return then();
  st.after_recovery.push_back(std::move(then));
  if (st.recovering) return;
  st.recovering = true;
  ask_every_peer<replica_info>(
      self, self->state.config.request_timeout,
      [self](std::vector<std::pair<std::uint32_t, std::optional<replica_info>>> answers) {
        auto& st = self->state;
        if (!st.absent()) return end_recovery(self);
        const replica_info* best = nullptr;
        bool someone_knows = false;
        std::size_t answered = 1;
        for (const auto& [id, a] : answers) {
          if (!a) continue;
          ++answered;
          if (a->synced_ns >= st.horizon() && (!best || a->synced_ns > best->synced_ns)) best = &*a;
          if (st.knows_recent(*a)) someone_knows = true;
        }
        if (best) {
          auto synced = best->synced_ns;
          return pull_and_merge(
              self, best->root, best->node,
              [self, synced](const status& s, const merge_report&) {
                if (s) {
                  auto& st2 = self->state;
                  st2.ps.synced_ns = std::max(st2.ps.synced_ns, synced);
                  persist_progress(self, true);
                }
                end_recovery(self);
              },
              true);
        }
        if (!someone_knows && answered >= st.majority()) {
          st.ps.settled_ns = std::max(st.ps.settled_ns, st.config.clock());
          persist_progress(self, true);
        }
        end_recovery(self);
      },
      info_atom::value);
}

// After winning the promises: merge every promiser's differing tree, have a
// majority merge ours, then own. `finish(owns)` once decided.
void take_over(self_ptr self, std::uint64_t my_term, std::vector<std::pair<std::uint32_t, hash128>> roots,
               hash128 own_root, std::function<void(bool)> finish) {
  auto& st = self->state;
  if (st.term != my_term) return finish(false);
  while (!roots.empty() && roots.back().second == own_root) roots.pop_back();
  if (!roots.empty()) {
    auto [from, root] = roots.back();
    roots.pop_back();
    return pull_and_merge(self, root, from,
                          [self, my_term, roots, own_root, finish](const status& s, const merge_report&) {
                            if (!s) {
                              step_down(self);
                              return finish(false);
                            }
                            take_over(self, my_term, roots, own_root, finish);
                          });
  }
  // Every promiser's tree is merged: our root now, then the peers pull it.
  self->request(st.config.shard(), caf::infinite, commit_atom::value)
      .then(
          [self, my_term, finish](const std::string& hex) {
            auto& s = self->state;
            if (s.term != my_term) return finish(false);
            auto root = hash128::parse_hex(hex).value_or(hash128{});
            auto become_owner = [self, my_term, finish]() {
              auto& s2 = self->state;
              if (s2.term != my_term) return finish(false);
              s2.ps.synced_ns = std::max(s2.ps.synced_ns, s2.campaign_began);
              decision d = on_write(s2.ps, s2.epoch);
              if (d.store) s2.ps = *d.store;
              self->request(s2.config.shard(), caf::infinite, promise_atom::value, s2.ps.encode())
                  .then(
                      [self, my_term, finish](ok_atom) {
                        auto& s3 = self->state;
                        if (s3.term != my_term) return finish(false);
                        s3.now = role::owner;
                        s3.next_seq = 1;
                        finish(true);
                      },
                      [self, finish](caf::error&) {
                        step_down(self);
                        finish(false);
                      });
            };
            // A pull can take many round trips: its deadline is longer.
            majority_round<merge_report>(
                self, s.config.request_timeout * 30, [](std::uint32_t, const merge_report&) { return true; },
                [self, become_owner, finish](bool merged) {
                  if (merged) return become_owner();
                  step_down(self);
                  finish(false);
                },
                sync_atom::value, root, s.config.node);
          },
          [self, finish](caf::error&) {
            step_down(self);
            finish(false);
          });
}

// A campaign: mint a ballot above all seen, promise it to ourselves durably,
// prepare every peer, and with a majority of promises take over. `finish`
// hears whether we own the shard, or why the campaign could not even start
// (then `owns` is false).
void campaign(self_ptr self, std::function<void(const status&, bool owns)> finish) {
  auto& st = self->state;
  if (st.absent()) return finish(away(self), false);  // our data could bring back purged deletes
  st.campaign_began = st.config.clock();
  minted_ballot m = mint(st.ps, st.config.node);
  decision d = on_prepare(m.store, m.b);
  st.ps = *d.store;
  st.now = role::candidate;
  st.epoch = m.b;
  std::uint64_t my_term = ++st.term;
  // Whatever the outcome, a follower's patience starts again: a lost
  // campaign is retried only after another random wait.
  auto done = [self, finish](bool owns) {
    self->state.draw_patience();
    finish(status::ok(), owns);
  };
  auto lost = [self, my_term, finish](caf::error& e) {
    if (self->state.term == my_term) step_down(self);
    self->state.draw_patience();
    finish(to_status(e), false);
  };
  persist_then(
      self,
      [self, my_term, done, lost]() {
        self->request(self->state.config.shard(), caf::infinite, commit_atom::value)
            .then(
                [self, my_term, done](const std::string& hex) {
                  auto& s = self->state;
                  if (s.term != my_term) return done(false);
                  auto own_root = hash128::parse_hex(hex).value_or(hash128{});
                  auto roots = std::make_shared<std::vector<std::pair<std::uint32_t, hash128>>>();
                  majority_round<promise_reply>(
                      self, s.config.request_timeout,
                      [roots](std::uint32_t id, const promise_reply& r) {
                        if (r.accepted) roots->emplace_back(id, r.root);
                        return r.accepted;
                      },
                      [self, my_term, own_root, roots, done](bool granted) {
                        if (granted) return take_over(self, my_term, *roots, own_root, done);
                        if (self->state.term == my_term) step_down(self);
                        done(false);
                      },
                      prepare_atom::value, s.epoch);
                },
                lost);
      },
      lost);
}

// A campaign of our own accord asks first whether a majority misses the
// owner too. Without that, a replica cut off from the others would mint
// higher and higher ballots and, once healed, depose a healthy owner.
void pre_vote_then_campaign(self_ptr self) {
  auto& st = self->state;
  st.now = role::candidate;  // no second probe, and clients hear an election runs
  std::uint64_t my_term = ++st.term;
  st.pre_vote_term = my_term;
  majority_round<bool>(
      self, st.config.request_timeout, [](std::uint32_t, bool yes) { return yes; },
      [self, my_term](bool majority) {
        auto& s = self->state;
        if (s.term != my_term) return;
        s.now = role::follower;
        if (!majority) return s.draw_patience();
        campaign(self, [](const status&, bool) {});
      },
      probe_atom::value);
}

// The owner's heartbeat: a confirm round. Short of a majority we may have
// been deposed or cut off; stepping down turns clients away at once rather
// than after their writes time out.
void heartbeat(self_ptr self) {
  auto& st = self->state;
  if (st.beating) return;
  st.beating = true;
  std::uint64_t my_term = st.term;
  ballot epoch = st.epoch;
  majority_round<vote>(
      self, st.config.request_timeout, [self, epoch](std::uint32_t, const vote& v) { return counted(self, v, epoch); },
      [self, my_term](bool held) {
        self->state.beating = false;
        if (!held && self->state.term == my_term) step_down(self);
      },
      confirm_atom::value, epoch);
}

// Anti-entropy: our checkpointed root to the next peer in turn, which pulls
// the nodes it lacks from us and merges them by highest stamp. Idle trees
// cost a root comparison; a replica that missed writes catches up by delta.
void push_root(self_ptr self) {
  auto& st = self->state;
  if (st.absent()) return;  // what only we hold may be deletes purged elsewhere
  auto next = st.peers.end();
  for (std::size_t i = 0; i < st.peers.size(); ++i) {
    next = st.peers.upper_bound(st.pushed_last);
    if (next == st.peers.end()) next = st.peers.begin();
    st.pushed_last = next->first;
    auto to = next->second.address();
    auto out = st.pushing.find(next->first);
    bool busy = out != st.pushing.end() && out->second.to == to;
    if (!busy && st.monitored.count(to)) break;
    next = st.peers.end();
  }
  if (next == st.peers.end()) return;
  std::uint32_t id = next->first;
  auto peer = next->second;
  std::uint64_t number = ++st.pushes;
  st.pushing[id] = {peer.address(), number};
  auto over = [self, id, number](auto&&...) {
    auto& p = self->state.pushing;
    if (auto it = p.find(id); it != p.end() && it->second.number == number) p.erase(it);
  };
  self->request(st.config.shard(), caf::infinite, commit_atom::value)
      .then(
          [self, peer, over](const std::string& hex) {
            auto root = hash128::parse_hex(hex).value_or(hash128{});
            // A pull can take many round trips: its deadline is longer.
            self->request(peer, self->state.config.request_timeout * 30, sync_atom::value, root,
                          self->state.config.node)
                .then([over](const merge_report&) { over(); }, [over](caf::error&) { over(); });
          },
          [over](caf::error&) { over(); });
}

replica_actor::behavior_type replica_behavior(self_ptr self, replica_config config) {
  auto& st0 = self->state;
  st0.config = std::move(config);
  st0.ps = st0.config.initial;
  st0.durable_synced = st0.ps.synced_ns;
  st0.rng.seed(st0.config.seed != 0 ? st0.config.seed : 0x9e3779b97f4a7c15ULL * (st0.config.node + 1));
  st0.draw_patience();
  if (st0.config.heartbeat.count() > 0) {
    st0.chain = st0.rng() | 1;
    self->delayed_send(self, st0.config.heartbeat, beat_atom::value, st0.chain);
  }
  // The replica we last promised is gone (its process died, or the link to
  // it broke): campaign within a few heartbeats rather than a full patience.
  self->set_down_handler([self](caf::down_msg& m) {
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
  });
  return {
      [=](peers_atom, const std::vector<std::uint32_t>& ids, const std::vector<caf::actor>& actors) {
        auto& st = self->state;
        st.peers.clear();
        for (std::size_t i = 0; i < ids.size() && i < actors.size(); ++i) {
          if (ids[i] == st.config.node || !actors[i]) continue;
          st.peers[ids[i]] = caf::actor_cast<replica_actor>(actors[i]);
          if (st.monitored.emplace(actors[i].address(), ids[i]).second) self->monitor(actors[i]);
        }
      },
      [=](prepare_atom, const ballot& b) -> caf::result<promise_reply> {
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
                self->request(self->state.config.shard(), caf::infinite, commit_atom::value)
                    .then(
                        [rp, b, epoch](const std::string& hex) mutable {
                          rp.deliver(promise_reply{true, b, epoch, hash128::parse_hex(hex).value_or(hash128{})});
                        },
                        [rp](caf::error& e) mutable { rp.deliver(e); });
              },
              [rp](caf::error& e) mutable { rp.deliver(e); });
        });
        return rp;
      },
      [=](rwrite_atom, const ballot& e, const std::vector<stamped_op>& ops) -> caf::result<vote> {
        auto& st = self->state;
        // Past our horizon we acknowledge nothing: a peer we adopt a tree
        // from later need only know what we acknowledged before it. (Our
        // heartbeat, a prepare or an elect starts the recovery: not every
        // write, since each attempt has every peer checkpoint.)
        if (st.absent()) return vote{false, st.ps.promised};
        decision d = on_write(st.ps, e);
        if (!d.accepted) return vote{false, d.promised};
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
        auto rp = self->make_response_promise<vote>();
        self->request(st.config.shard(), caf::infinite, stamped_atom::value, ops)
            .then(
                [rp, e](const std::vector<bool>&) mutable {
                  rp.deliver(vote{true, e});
                },
                [rp](caf::error& err) mutable { rp.deliver(err); });
        return rp;
      },
      [=](confirm_atom, const ballot& e) -> caf::result<vote> {
        auto& st = self->state;
        // An owner at or above our promise is alive: no campaign of ours is
        // needed (one would only depose it). A replica that missed its
        // election learns its writes by anti-entropy instead.
        if (!(e < st.ps.promised)) st.silent = 0;
        return vote{st.ps.promised == e, st.ps.promised};
      },
      [=](fetch_atom, const std::vector<hash128>& hashes) -> caf::result<std::vector<std::string>> {
        auto v = view_of(self);
        if (!v) return to_error(status::io_error("the shard is not serving", status_category::transient));
        std::vector<std::string> out;
        out.reserve(hashes.size());
        for (const auto& h : hashes) {
          auto n = v->store()->read(h);
          if (!n) return to_error(n.error());
          out.emplace_back((*n)->encode());
        }
        return out;
      },
      [=](sync_atom, const hash128& root, std::uint32_t from) -> caf::result<merge_report> {
        // Absent, we catch up by adopting a tree that knows more (recover), not by merging.
        if (self->state.absent()) return to_error(away(self));
        auto rp = self->make_response_promise<merge_report>();
        pull_and_merge(self, root, from, [rp](const status& s, const merge_report& r) mutable {
          if (s)
            rp.deliver(r);
          else
            rp.deliver(to_error(s));
        });
        return rp;
      },
      [=](elect_atom) -> caf::result<bool> {
        auto& st = self->state;
        if (st.now == role::owner) return true;
        if (st.now == role::candidate) return to_error(not_owner(self));
        auto rp = self->make_response_promise<bool>();
        recover(self, [self, rp]() mutable {
          if (self->state.now == role::owner) return (void)rp.deliver(true);
          if (self->state.now == role::candidate) return (void)rp.deliver(to_error(not_owner(self)));
          campaign(self, [rp](const status& s, bool owns) mutable {
            if (s)
              rp.deliver(owns);
            else
              rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](probe_atom) -> bool {
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
      },
      [=](beat_atom, std::uint64_t chain) {
        auto& st = self->state;
        if (chain != st.chain) return;
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
      },
      [=](info_atom) -> caf::result<replica_info> {
        auto rp = self->make_response_promise<replica_info>();
        self->request(self->state.config.shard(), caf::infinite, commit_atom::value)
            .then(
                [self, rp](const std::string& hex) mutable {
                  auto& st = self->state;
                  rp.deliver(replica_info{st.config.node, static_cast<std::uint8_t>(st.now), st.ps.promised,
                                          st.ps.epoch, hash128::parse_hex(hex).value_or(hash128{}), st.pulled_nodes,
                                          st.pulled_bytes, st.merged_entries, st.ps.synced_ns, st.ps.settled_ns,
                                          st.absent()});
                },
                [rp](caf::error& e) mutable { rp.deliver(e); });
        return rp;
      },
      [=](put_atom, const std::string& key, const std::string& value, std::int64_t ttl_ns) -> caf::result<ok_atom> {
        auto rp = self->make_response_promise<ok_atom>();
        with_key(self, key, [self, rp, key, value, ttl_ns](bool go) mutable {
          if (!go) return (void)rp.deliver(to_error(not_owner(self)));
          stamped_op op{key, stamp{}, true, value, ttl_ns > 0, 0};
          if (ttl_ns > 0) op.deadline_ns = self->state.config.clock() + static_cast<std::uint64_t>(ttl_ns);
          replicate(self, std::move(op), [rp](const status& s) mutable {
            if (s)
              rp.deliver(ok_atom::value);
            else
              rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](del_atom, const std::string& key) -> caf::result<ok_atom> {
        auto rp = self->make_response_promise<ok_atom>();
        with_key(self, key, [self, rp, key](bool go) mutable {
          if (!go) return (void)rp.deliver(to_error(not_owner(self)));
          auto& st = self->state;
          auto purge = st.config.clock() + static_cast<std::uint64_t>(st.config.tombstone_retention.count());
          replicate(self, stamped_op{key, stamp{}, false, std::string(), true, purge}, [rp](const status& s) mutable {
            if (s)
              rp.deliver(ok_atom::value);
            else
              rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](cas_atom, const std::string& key, bool has_expected, const std::string& expected, bool has_desired,
          const std::string& desired, std::int64_t ttl_ns) -> caf::result<bool, bool, std::string> {
        auto rp = self->make_response_promise<bool, bool, std::string>();
        with_key(self, key, [=](bool go) mutable {
          if (!go) return (void)rp.deliver(to_error(not_owner(self)));
          auto v = view_of(self);
          if (!v)
            return (void)rp.deliver(to_error(status::io_error("the shard is not serving", status_category::transient)));
          auto current = v->get(key, self->state.config.clock());
          if (!current) return (void)rp.deliver(to_error(current.error()));
          bool matches = current->has_value() == has_expected && (!has_expected || **current == expected);
          if (!matches) {
            // A refusal is a read: it must hold at a moment we still owned the shard.
            return confirm(self, [self, rp, current = *current](bool ok) mutable {
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
          replicate(self, std::move(op), [rp](const status& s) mutable {
            if (s)
              rp.deliver(true, false, std::string());
            else
              rp.deliver(to_error(s));
          });
        });
        return rp;
      },
      [=](get_atom, const std::string& key) -> caf::result<bool, std::string> {
        auto rp = self->make_response_promise<bool, std::string>();
        with_key(self, key, [self, rp, key](bool go) mutable {
          if (!go) return (void)rp.deliver(to_error(not_owner(self)));
          auto v = view_of(self);
          if (!v)
            return (void)rp.deliver(to_error(status::io_error("the shard is not serving", status_category::transient)));
          auto value = v->get(key, self->state.config.clock());
          if (!value) return (void)rp.deliver(to_error(value.error()));
          confirm(self, [self, rp, value = *value](bool ok) mutable {
            if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
            rp.deliver(value.has_value(), value.value_or(std::string()));
          });
        });
        return rp;
      },
  };
}

}  // namespace

replica_actor spawn_replica(caf::actor_system& sys, replica_config config) {
  return sys.spawn(replica_behavior, std::move(config));
}

}  // namespace magnetite::replication
