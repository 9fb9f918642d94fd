// The owner's side of a replica: keys serialised, writes stamped and
// replicated to a majority, reads confirmed by a majority, and stepping down.
// See replica_actor.h for the rules these carry out.

#include "replication/replica_internal.h"

#include "engine/state_space.h"

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

result<admission_ptr> admit_client_write(self_ptr self) {
  auto& st = self->state;
  if (*st.client_writes >= st.config.max_client_writes) {
    return status::make(status_code::busy, status_category::transient,
                        fmt::format("node {} holds {} client writes not yet on a majority, its limit: nothing was "
                                    "written",
                                    st.config.node, *st.client_writes));
  }
  return std::make_shared<const client_admission>(st.client_writes);
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

// Steps down: every request waiting on a key is refused, and so is every
// write still in the batch (sent nowhere, so nothing of it was written);
// batches in flight finish on their own (a majority may still take them).
void step_down(self_ptr self) {
  auto& st = self->state;
  if (st.now == role::follower) return;
  st.now = role::follower;
  ++st.term;
  auto batch = std::move(st.batch);
  st.batch.clear();
  st.batch_bytes = 0;
  auto keys = std::move(st.keys);
  st.keys.clear();
  for (auto& [k, q] : keys)
    for (auto& f : q.waiting) f(false);
  for (auto& w : batch) w.done(not_owner(self));
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

// A vote that says no because of a higher promise deposes us.
bool counted(self_ptr self, const vote& v, const ballot& epoch) {
  if (!v.accepted && v.promised > epoch) step_down(self);
  return v.accepted;
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

// Lets a request record's key go when the write it guards was not shipped.
void drop(self_ptr self, const std::optional<stamped_op>& record) {
  if (record) release_key(self, record->key);
}

void at_most_once(self_ptr self, const std::optional<request_id>& rid, std::function<void(const status&)> refuse,
                  std::function<void(std::uint64_t)> applied, std::function<void(std::optional<stamped_op>)> write) {
  if (!rid) return write(std::nullopt);
  auto key = request_record_key(*rid);
  with_key(self, key,
           [self, key, refuse = std::move(refuse), applied = std::move(applied), write = std::move(write)](bool go) {
             if (!go) return refuse(not_owner(self));
             auto v = view_of(self);
             if (!v) return refuse(status::io_error("the shard is not serving", status_category::transient));
             auto& st = self->state;
             // A record we can see is of a decided batch of this term (a batch in
             // flight holds its key), which a majority holds: we still own the shard.
             auto found = v->get(key, st.config.clock());
             if (!found) return refuse(found.error());
             if (found->has_value()) {
               auto revision = state_space::revision_of(key, **found);
               if (!revision) return refuse(revision.error());
               return applied(*revision);
             }
             st.keys[key].writing = true;
             auto expires = st.config.clock() + static_cast<std::uint64_t>(st.config.request_memory.count());
             write(stamped_op{key, stamp{}, true, std::string(), true, expires});
           });
}

namespace {

void ship_soon(self_ptr self);

using write_round = replica_state::write_round;

void arm_round_timer(self_ptr self) {
  auto& st = self->state;
  if (st.round_timer_armed || st.write_rounds.empty()) return;
  st.round_timer_armed = true;
  auto wait = st.write_rounds.begin()->second.deadline - self->clock().now();
  self->delayed_send(self, std::max(wait, caf::actor_clock::duration_type::zero()), rexpire_atom::value);
}

// Decides round `it` once a majority said yes, or once every peer asked
// answered short of it (or its deadline passed: `expired`).
void decide_round(self_ptr self, std::map<std::uint64_t, write_round>::iterator it, bool expired = false) {
  auto& st = self->state;
  write_round& r = it->second;
  bool reached = r.yes >= st.majority();
  if (!reached && !expired && r.answered < r.expected) return;
  auto done = std::move(r.done);
  st.write_rounds.erase(it);
  done(reached);
}

// Hands `m` to `to` as sent by us. Every peer gets the same rwrite (the
// round is masked alike for all), so ONE message is made and shared: CAF
// serializes it for each connection, and nothing copies the batch's keys
// and values again (a typed send builds a message of its own per peer, and
// a typed actor may not send() a caf::message). What the typed send would
// have checked at compile time is checked here instead.
static_assert(
    caf::response_type<replica_actor::signatures, rwrite_atom, ballot, std::uint64_t, std::vector<stamped_op>>::valid,
    "a replica takes (rwrite, ballot, round, ops)");
static_assert(
    std::is_same_v<caf::response_type_t<shard_engine_actor::signatures, stamped_atom, std::vector<stamped_op>>,
                   caf::detail::type_list<std::vector<bool>>>,
    "a shard answers (stamped, ops) with one flag a write (ship_batch's untyped request)");
void send_shared(self_ptr self, const caf::strong_actor_ptr& to, const caf::message& m) {
  if (to) to->enqueue(caf::make_mailbox_element(self->ctrl(), caf::make_message_id(), {}, m), self->context());
}

// ONE rwrite of ops to every peer; done(true) once a majority (ourselves
// included) made them durable, done(false) once that cannot come: every
// peer answered, or request_timeout passed. Runs exactly once.
void write_round_to_peers(self_ptr self, const std::vector<stamped_op>& ops, std::function<void(bool)> done) {
  auto& st = self->state;
  std::uint64_t round = st.next_round++;
  auto [it, _] = st.write_rounds.emplace(
      round,
      write_round{
          self->clock().now() + st.config.request_timeout, st.epoch, st.peers.size(), 1, 0, std::move(done), {}});
  if (!st.peers.empty()) {
    auto m = caf::make_message(rwrite_atom::value, st.epoch, round ^ st.round_mask, ops);
    for (auto& [id, peer] : st.peers) send_shared(self, caf::actor_cast<caf::strong_actor_ptr>(peer), m);
  }
  decide_round(self, it);  // a cluster of one, or no peer linked
  arm_round_timer(self);
}

// Ships the writes waiting in the batch: ONE stamped apply to our shard and
// ONE rwrite round to the peers, for all of them; each write's `done` hears
// ok once our shard and majority - 1 peers made the batch durable. Up to
// config.batches_in_flight batches may be undecided at once (and more when
// full batches go out): the stamps, not the arrival order, decide at every
// replica, and a key's next write waits for its last one (with_key).
void ship_batch(self_ptr self) {
  auto& st = self->state;
  if (st.batch.empty()) return;
  ++st.in_flight;
  ++st.batches_shipped;
  st.writes_shipped += st.batch.size();
  std::vector<stamped_op> gathered;
  auto dones = std::make_shared<std::vector<std::function<void(const status&)>>>();
  gathered.reserve(st.batch.size());
  dones->reserve(st.batch.size());
  for (auto& w : st.batch) {
    gathered.push_back(std::move(w.op));
    for (auto& more : w.more) gathered.push_back(std::move(more));
    if (w.record) gathered.push_back(std::move(*w.record));
    dones->push_back(std::move(w.done));
  }
  // The stamped apply to our shard owns the batch; everything after reads it
  // there (CAF hands a shared message to a const handler without a copy).
  auto apply = caf::make_message(stamped_atom::value, std::move(gathered));
  auto ops_of = [](const caf::message& m) -> const std::vector<stamped_op>& {
    return m.get_as<std::vector<stamped_op>>(1);
  };
  st.batch.clear();
  st.batch_bytes = 0;
  // Decided once our own shard and the round have both answered, or either failed.
  struct outcome {
    std::optional<status> local;
    std::optional<bool> peers;
    bool finished = false;
  };
  auto o = std::make_shared<outcome>();
  // A batch that outlives our term (we stepped down, perhaps won again) holds
  // no key of the new term and deposes nothing: a new term's handoff began
  // after its local apply was queued, so its spread carried it if it landed.
  auto check = [self, o, apply, ops_of, dones, my_term = st.term]() {
    if (o->finished) return;
    bool local_failed = o->local && !o->local->is_ok();
    if (!local_failed && !(o->local && o->peers)) return;
    o->finished = true;
    --self->state.in_flight;
    bool current = self->state.term == my_term;
    if (current)
      for (const auto& op : ops_of(apply)) release_key(self, op.key);
    bool durable = !local_failed && *o->peers;
    // No majority holds them, yet our own shard may: we cannot serve reads
    // that would show them, nor prove them lost.
    if (!durable && current) step_down(self);
    status s = durable        ? status::ok()
               : local_failed ? o->local->with_category(status_category::ambiguous)
                              : deposed("no majority made the write durable in time");
    for (const auto& done : *dones) done(s);
    // The writes that gathered while this batch flew (of this term: stepping
    // down emptied the batch) go next.
    if (!self->state.batch.empty()) ship_soon(self);
  };
  self->request(caf::actor_cast<caf::actor>(st.config.shard()), caf::infinite, apply)
      .then(
          [o, check](const std::vector<bool>&) {
            o->local = status::ok();
            check();
          },
          [o, check](caf::error& e) {
            o->local = to_status(e);
            check();
          });
  write_round_to_peers(self, ops_of(apply), [o, check](bool reached) {
    o->peers = reached;
    check();
  });
}

}  // namespace

// A vote no with a promise above our epoch deposes us, whichever round it
// answers (one decided or expired already, even one of an earlier term);
// a vote for a round we never sent counts for nothing (round_mask).
void on_write_vote(self_ptr self, std::uint64_t sent_round, const vote& v) {
  auto& st = self->state;
  // A vote is a peer replica's, once a round: repeated, or from anyone
  // else, it could make a majority of one voice.
  auto from = voter_of(self);
  if (!from) return;
  std::uint64_t round = sent_round ^ st.round_mask;
  if (round == 0 || round >= st.next_round) return;
  if (!v.accepted && v.promised > st.epoch) step_down(self);
  auto it = st.write_rounds.find(round);
  if (it == st.write_rounds.end()) return;
  auto& voted = it->second.voted;
  if (std::find(voted.begin(), voted.end(), *from) != voted.end()) return;
  voted.push_back(*from);
  ++it->second.answered;
  if (v.accepted && v.promised == it->second.epoch) ++it->second.yes;
  decide_round(self, it);
}

void expire_write_rounds(self_ptr self) {
  auto& st = self->state;
  st.round_timer_armed = false;
  auto now = self->clock().now();
  while (!st.write_rounds.empty() && st.write_rounds.begin()->second.deadline <= now)
    decide_round(self, st.write_rounds.begin(), true);
  arm_round_timer(self);
}

namespace {

// Stamps a record (after the writes it guards) and gives it the revision
// it answers a retry with: a plain write's is its record's stamp seq.
void stamp_record(self_ptr self, std::optional<stamped_op>& record) {
  auto& st = self->state;
  if (!record) return;
  st.keys[record->key].writing = true;
  record->stamp = stamp{st.epoch, st.next_seq++};
  if (record->value.empty()) record->value = request_record_value(record->stamp.seq);
  st.batch_bytes += record->key.size() + record->value.size();
}

// Queues the flush that ships the batch once the mailbox is drained, or
// ships it now when it is full. With batches_in_flight undecided, nothing is
// queued: the batch gathers until one is decided.
void ship_soon(self_ptr self) {
  auto& st = self->state;
  if (st.batch.size() >= max_batch_writes || st.batch_bytes >= max_batch_bytes) return ship_batch(self);
  if (st.flush_queued || st.in_flight >= st.config.batches_in_flight) return;
  st.flush_queued = true;
  self->send(self, rflush_atom::value);
}

}  // namespace

// One write at the owner: stamped and added to the batch. The batch goes
// out when the actor has taken every message already in its mailbox (the
// flush we send ourselves queues behind them), so the writes of clients
// waiting together share one message to each peer and one log frame at each
// replica; or at once when it is full.
void replicate(self_ptr self, stamped_op op, std::function<void(const status&)> done,
               std::optional<stamped_op> record) {
  auto& st = self->state;
  st.keys[op.key].writing = true;
  op.stamp = stamp{st.epoch, st.next_seq++};
  st.batch_bytes += op.key.size() + op.value.size();
  stamp_record(self, record);
  st.batch.push_back({std::move(op), {}, std::move(record), std::move(done)});
  ship_soon(self);
}

void replicate_together(self_ptr self, std::vector<stamped_op> ops, std::function<void(const status&)> done,
                        std::optional<stamped_op> record) {
  auto& st = self->state;
  std::size_t bytes = 0;
  for (const auto& op : ops) bytes += op.key.size() + op.value.size();
  // Never split: whatever is waiting goes first if these would overfill it.
  if (!st.batch.empty() &&
      (st.batch.size() + ops.size() > max_batch_writes || st.batch_bytes + bytes > max_batch_bytes))
    ship_batch(self);
  for (auto& op : ops) op.stamp = stamp{st.epoch, st.next_seq++};
  st.batch_bytes += bytes;
  stamp_record(self, record);
  stamped_op first = std::move(ops.front());
  ops.erase(ops.begin());
  st.batch.push_back({std::move(first), std::move(ops), std::move(record), std::move(done)});
  ship_soon(self);
}

// Stepping down empties the batch, so whatever is in it is this term's.
void flush_batch(self_ptr self) {
  self->state.flush_queued = false;
  if (self->state.in_flight < self->state.config.batches_in_flight) ship_batch(self);
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

caf::result<bool, std::string> confirmed_read(self_ptr self, const std::string& key) {
  auto rp = self->make_response_promise<bool, std::string>();
  with_key(self, key, [self, rp, key](bool go) mutable {
    if (!go) return (void)rp.deliver(to_error(not_owner(self)));
    auto v = view_of(self);
    if (!v) return (void)rp.deliver(to_error(status::io_error("the shard is not serving", status_category::transient)));
    auto value = v->get(key, self->state.config.clock());
    if (!value) return (void)rp.deliver(to_error(value.error()));
    confirm(self, [self, rp, value = *value](bool ok) mutable {
      if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
      rp.deliver(value.has_value(), value.value_or(std::string()));
    });
  });
  return rp;
}

// A confirm round for a read: `done(true)` once a majority (ourselves
// included) still promises our epoch, in a round that began after this call.
void confirm(self_ptr self, std::function<void(bool)> done) {
  auto& st = self->state;
  st.reads.push_back({st.epoch, std::move(done)});
  confirm_queued(self);
}

}  // namespace magnetite::replication::replica_internal
