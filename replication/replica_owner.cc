// The owner's side of a replica: keys serialised, writes stamped and
// replicated to a majority, reads confirmed by a majority, and stepping down.
// See replica_actor.h for the rules these carry out.

#include "replication/replica_internal.h"

namespace magnetite::replication::replica_internal {

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

// A confirm round for a read: `done(true)` once a majority (ourselves
// included) still promises our epoch, in a round that began after this call.
void confirm(self_ptr self, std::function<void(bool)> done) {
  auto& st = self->state;
  st.reads.push_back({st.epoch, std::move(done)});
  confirm_queued(self);
}

}  // namespace magnetite::replication::replica_internal
