// Elections: a campaign (mint, promise ourselves, prepare every peer, take
// over by merging every promiser's tree and having a majority merge ours),
// the pre-vote before a campaign of our own accord, and the owner's
// heartbeat. See replica_actor.h for the rules these carry out.

#include "replication/replica_internal.h"

namespace magnetite::replication::replica_internal {

// Makes our promise state durable, then next(); failed(e) if it could not be.
void persist_then(self_ptr self, std::function<void()> next, std::function<void(caf::error&)> failed) {
  self->request(self->state.config.shard(), caf::infinite, promise_atom::value, self->state.ps.encode())
      .then([next](ok_atom) { next(); }, [failed](caf::error& e) { failed(e); });
}

namespace {

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
  self->request(st.config.shard(), caf::infinite, checkpoint_atom::value)
      .then(
          [self, my_term, finish](const hash128& root) {
            auto& s = self->state;
            if (s.term != my_term) return finish(false);
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

}  // namespace

// A campaign: mint a ballot above all seen, promise it to ourselves durably,
// prepare every peer, and with a majority of promises take over. `finish`
// hears whether we own the shard, or why the campaign could not even start
// (then `owns` is false).
void campaign(self_ptr self, std::function<void(const status&, bool owns)> finish) {
  auto& st = self->state;
  if (st.absent()) return finish(away(self), false);  // our data could bring back purged deletes
  auto m = mint(st.ps, st.config.node);
  if (!m) {
    // Only a promise at the counters' bound gets here, which no ballot can
    // reach since the bounds were kept (promise_state.h); a state from
    // before them needs an operator.
    return finish(status::make(status_code::failed, status_category::permanent,
                               fmt::format("ballots exhausted (promise {}): no campaign can mint above it",
                                           to_string(st.ps.promised))),
                  false);
  }
  st.campaign_began = st.config.clock();
  st.ps = m->store;
  st.ps.promised = m->b;  // on_prepare's rule: the minted ballot is above the promise
  st.now = role::candidate;
  st.epoch = m->b;
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
        self->request(self->state.config.shard(), caf::infinite, checkpoint_atom::value)
            .then(
                [self, my_term, done](const hash128& own_root) {
                  auto& s = self->state;
                  if (s.term != my_term) return done(false);
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

}  // namespace magnetite::replication::replica_internal
