#include "actors/shard_actor.h"

#include <tuple>

#include "actors/shard_supervisor.h"
#include "engine/keyspace.h"
#include "engine/merged_cursor.h"
#include "engine/prepared_transactions.h"
#include "ttl/envelope.h"

namespace magnetite {

caf::error to_error(const status& s) {
  return caf::error(static_cast<std::uint8_t>(s.code()), caf::atom("magnetite"),
                    caf::make_message(static_cast<std::uint8_t>(s.category()), s.message()));
}

status to_status(const caf::error& e) {
  if (!e) return status::ok();
  if (e.category() == caf::atom("magnetite") && e.context().match_elements<std::uint8_t, std::string>())
    return status::make(static_cast<status_code>(e.code()),
                        static_cast<status_category>(e.context().get_as<std::uint8_t>(0)),
                        e.context().get_as<std::string>(1));
  return status::io_error(fmt::format("shard unavailable: {}", caf::to_string(e)), status_category::transient);
}

namespace {

struct shard_state {
  std::unique_ptr<shard> engine;  // the shard itself (engine/shard.h); null until it boots
  status boot_error;
  shard_actor_config config;
  // Answers owed to the writes of the group being gathered.
  std::vector<std::function<void(const status&)>> waiting;
  answer_relay blocked;  // host threads blocked on writes of this group
  bool group_scheduled = false;
  bool aging = false;              // the checkpoint_interval timer is armed
  bool syncing = false;            // the fsync_interval timer is armed
  bool reclaim_scheduled = false;  // a (reclaim) step is in the mailbox
  bool reclaim_yielded = false;    // that step already let a group go first
  // The expiry timer: the deadline it is armed for, and a count that makes
  // an (expire) message from an earlier arming stale.
  std::uint64_t expiry_generation = 0;
  std::optional<std::uint64_t> expiry_armed;
  // Transactions across shards prepared here and not yet finished, and the
  // conditional batches that wait for a key one of them holds: re-run, in
  // order, whenever a transaction finishes (called with null), or answered
  // with the error when the actor ends first.
  prepared_transactions prepared;
  std::vector<std::function<void(const status*)>> parked;

  ~shard_state() {
    // The actor is going away with writes whose group never synced: they may
    // or may not be in the log, and the caller must hear so, never wait.
    status gone = status::make(status_code::failed, status_category::ambiguous,
                               "the shard stopped before the write's group was durable");
    for (auto& w : waiting) w(gone);
    blocked.release(gone);
    status never = status::make(status_code::failed, status_category::transient,
                                "the shard stopped while the request waited for a transaction to finish; "
                                "nothing was written");
    for (auto& p : parked) p(&never);
  }

  static inline const char* name = "magnetite.shard";
};

using self_ptr = shard_engine_actor::stateful_pointer<shard_state>;

void publish(self_ptr self) {
  auto& st = self->state;
  if (!st.config.slot) return;
  st.config.slot->view.store(st.engine->view());
  st.config.slot->error.store(nullptr);
}

void arm_expiry_timer(self_ptr self) {
  auto& st = self->state;
  auto next = st.engine->next_deadline();
  if (!next) {
    st.expiry_armed.reset();
    return;
  }
  if (st.expiry_armed && *st.expiry_armed == *next) return;
  st.expiry_armed = next;
  ++st.expiry_generation;
  std::uint64_t now = st.engine->now_ns();
  // A far deadline is reached in steps: CAF adds the delay to its clock, and a
  // delay near the type's maximum would overflow into "due now" and spin. A
  // step that finds nothing due just arms the next one.
  constexpr std::uint64_t max_step_ns = 3'600'000'000'000;  // one hour
  std::uint64_t wait = *next > now ? *next - now : 0;
  auto delay = std::chrono::nanoseconds(std::min(wait, max_step_ns));
  self->delayed_send(self, delay, expire_atom::value, st.expiry_generation);
}

// Writes never wait in the memtable (and the log) longer than about
// checkpoint_interval: the first group after a checkpoint arms one timer.
void arm_checkpoint_timer(self_ptr self) {
  auto& st = self->state;
  if (st.aging || !st.engine->view()->holds_writes()) return;
  st.aging = true;
  self->delayed_send(self, st.config.options.checkpoint_interval, aged_atom::value);
}

// Under `interval` a group may be acknowledged before its fsync, and only a
// later group's sync would bring one: when writes stop, this timer is what
// bounds the window in which a crash loses acknowledged writes.
void arm_durable_timer(self_ptr self) {
  auto& st = self->state;
  if (st.syncing || st.config.options.fsync != wal::fsync_policy::interval || !st.engine->log_pending_durability())
    return;
  st.syncing = true;
  self->delayed_send(self, st.config.options.fsync_interval, durable_atom::value);
}

void stop_if_failed(self_ptr self);

// Space reclamation runs in steps, each a message the actor sends itself, so
// writes that arrive meanwhile are served between two steps. A cycle starts
// after a checkpoint (the only time the node store grows) when the policy
// says it is due, and never while the database is committing or collecting.
void maybe_reclaim(self_ptr self) {
  auto& st = self->state;
  if (!st.engine || st.reclaim_scheduled || !st.engine->reclaim_due()) return;
  std::vector<hash128> retained;
  if (st.config.slot) {
    if (st.config.slot->held.load() > 0) return;
    if (auto r = st.config.slot->retained.load()) retained = *r;
  }
  if (!st.engine->begin_reclaim(retained)) {
    stop_if_failed(self);
    return;
  }
  st.reclaim_scheduled = true;
  self->send(self, reclaim_atom::value);
  if (st.config.reclaim_began) st.config.reclaim_began();
}

// A checkpoint's end: its marker, the view of the new root, and the
// reclamation it may call for. False when it failed (the actor is quitting).
bool end_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto root = st.engine->finish_checkpoint();
  if (!root) {
    self->quit(to_error(root.error()));
    return false;
  }
  publish(self);
  maybe_reclaim(self);
  return true;
}

// Begins a checkpoint of the active memtable: on its own thread, which tells
// the actor when the tree is written, or at once (then it ends here too).
// With `make_room` (the memtable is full), a checkpoint still running is
// waited for and ended first: the writes behind this one wait meanwhile.
bool begin_checkpoint(self_ptr self, bool make_room) {
  auto& st = self->state;
  bool background = st.config.background_checkpoints;
  std::function<void()> done;
  if (background)
    done = [weak = caf::actor_cast<caf::weak_actor_ptr>(self)] {
      if (auto strong = weak.lock()) caf::anon_send(caf::actor_cast<caf::actor>(strong), checkpointed_atom::value);
    };
  auto stalls = st.engine->stats();
  status s;
  if (make_room) {
    auto ended = st.engine->relieve_memory(background, std::move(done));
    if (!ended) s = ended.error();
  } else if (!st.engine->checkpointing()) {
    s = st.engine->begin_checkpoint(background, std::move(done));
  }
  if (!s) {
    self->quit(to_error(s));
    return false;
  }
  auto now = st.engine->stats();
  if (now.write_stalls > stalls.write_stalls && st.config.slot && st.config.slot->admission)
    st.config.slot->admission->stalled(std::chrono::nanoseconds(now.write_stall_ns - stalls.write_stall_ns));
  publish(self);
  if (now.checkpoints > stalls.checkpoints) maybe_reclaim(self);  // one ended while making room
  return background || !st.engine->checkpointing() || end_checkpoint(self);
}

void schedule_group(self_ptr self) {
  if (self->state.group_scheduled) return;
  self->state.group_scheduled = true;
  self->send(self, group_atom::value);
}

// Commits what is staged, answers its writes, and keeps the shard healthy:
// false when the shard failed (the actor is quitting).
bool finish_group(self_ptr self) {
  auto& st = self->state;
  st.group_scheduled = false;
  status s = st.engine->commit_group();
  if (s) publish(self);  // before any answer: an acknowledged write is visible
  st.blocked.release(s);
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  for (auto& w : waiting) w(s);
  if (!s) {
    self->quit(to_error(s));
    return false;
  }
  if (st.engine->checkpoint_due() && !begin_checkpoint(self, /*make_room=*/true)) return false;
  arm_expiry_timer(self);
  arm_checkpoint_timer(self);
  arm_durable_timer(self);
  return true;
}

// Answers the gathered group, then checkpoints and publishes; a failure of
// either ends the actor (fail-stop) and is returned.
result<hash128> checkpoint_now(self_ptr self) {
  auto& st = self->state;
  if (!finish_group(self)) return st.engine->failure();
  auto root = st.engine->checkpoint();
  if (!root) {
    self->quit(to_error(root.error()));
    return root.error();
  }
  publish(self);
  maybe_reclaim(self);
  return *root;
}

template <class... Ts>
auto wait_for_group(self_ptr self, caf::typed_response_promise<Ts...> rp, std::function<void(decltype(rp)&)> on_ok) {
  self->state.waiting.push_back([rp, on_ok = std::move(on_ok)](const status& s) mutable {
    if (s)
      on_ok(rp);
    else
      rp.deliver(to_error(s));
  });
  schedule_group(self);
  return rp;
}

// Fail-stop: once the shard refused work for good (an I/O or corruption error
// while staging), the actor ends so that the supervisor reopens and replays it.
// Input errors leave the shard usable and the actor running.
void stop_if_failed(self_ptr self) {
  auto& engine = self->state.engine;
  if (engine && !engine->failure().is_ok()) self->quit(to_error(engine->failure()));
}

caf::typed_response_promise<ok_atom> ack_after_group(self_ptr self, status staged) {
  auto rp = self->make_response_promise<ok_atom>();
  if (!staged) {
    rp.deliver(to_error(staged));
    stop_if_failed(self);
    return rp;
  }
  return wait_for_group<ok_atom>(self, rp, [](auto& p) { p.deliver(ok_atom::value); });
}

// A foreign tree merged into ours (or adopted), answered after the group.
caf::result<merge_report> merge_then_reply(self_ptr self, const hash128& root, bool adopt) {
  if (!finish_group(self)) return to_error(self->state.engine->failure());
  auto out = adopt ? self->state.engine->adopt_stamped(root) : self->state.engine->merge_stamped(root);
  if (!out) {
    stop_if_failed(self);
    return to_error(out.error());
  }
  publish(self);  // the merge checkpointed
  auto rp = self->make_response_promise<merge_report>();
  return wait_for_group<merge_report>(self, rp, [report = *out](auto& p) { p.deliver(report); });
}

std::optional<std::chrono::nanoseconds> ttl_of(std::int64_t ttl_ns) {
  if (ttl_ns == 0) return std::nullopt;
  return std::chrono::nanoseconds(ttl_ns);
}

template <class Hook>
std::vector<batch_write> writes_of(const std::vector<batch_op>& ops, Hook& hook) {
  std::vector<batch_write> writes;
  writes.reserve(ops.size());
  for (const auto& op : ops) {
    hook(op.key);
    writes.push_back({op.key, op.is_put ? std::optional<std::string>(op.value) : std::nullopt, ttl_of(op.ttl_ns)});
  }
  return writes;
}

template <class Hook>
std::vector<stamped_write> writes_of(const std::vector<stamped_op>& ops, Hook& hook) {
  std::vector<stamped_write> writes;
  writes.reserve(ops.size());
  for (const auto& op : ops) {
    hook(op.key);
    writes.push_back({op.key, op.stamp, op.is_put ? std::optional<std::string>(op.value) : std::nullopt,
                      op.has_deadline ? std::optional<std::uint64_t>(op.deadline_ns) : std::nullopt});
  }
  return writes;
}

shard_engine_actor::behavior_type shard_behavior_after_boot(self_ptr self);

shard_engine_actor::behavior_type shard_behavior(self_ptr self, shard_actor_config config) {
  auto& st = self->state;
  st.config = std::move(config);
  if (st.config.fail_with) {
    st.boot_error = *st.config.fail_with;
    if (st.config.slot) st.config.slot->error.store(std::make_shared<const status>(st.boot_error));
    return shard_behavior_after_boot(self);
  }
  auto opened = shard::open(*st.config.fs, st.config.dir, st.config.options);
  if (opened) {
    // Replay brought back the prepare records of transactions not yet
    // finished: their keys are held again before any request is served.
    auto prepared = prepared_transactions::load(*(*opened)->view());
    if (prepared)
      st.prepared = std::move(*prepared);
    else
      opened = prepared.error();
  }
  if (opened) {
    st.engine = std::move(*opened);
    publish(self);
    arm_expiry_timer(self);
    arm_checkpoint_timer(self);  // replayed writes sit in the memtable too
    maybe_reclaim(self);         // a store reopened with garbage in it
    if (st.config.supervisor) caf::anon_send(st.config.supervisor, ok_atom::value, st.config.index);
  } else {
    // Damaged files are answered in the words the supervisor's sentinel will
    // use once it replaces us, so a caller hears one error whichever it meets.
    st.boot_error =
        boot_is_hopeless(opened.error()) ? files_cannot_be_opened(st.config.index, opened.error()) : opened.error();
    if (st.config.slot) st.config.slot->error.store(std::make_shared<const status>(st.boot_error));
    if (st.config.supervisor)
      caf::anon_send(st.config.supervisor, boot_failed_atom::value, st.config.index, to_error(opened.error()));
  }
  return shard_behavior_after_boot(self);
}

// Every handler of a booted (or sentinel) shard starts with `down`: a
// sentinel answers with the startup error. `hook` is the test hook each write
// passes through before it is staged.
struct handler_context {
  self_ptr self;
  std::optional<caf::error> down() const {
    if (self->state.engine) return std::nullopt;
    return to_error(self->state.boot_error);
  }
  void hook(const std::string& key) const {
    if (self->state.config.before_write) self->state.config.before_write(key);
  }
  // The hook as a callable, for writes_of().
  auto write_hook() const {
    return [c = *this](const std::string& key) { c.hook(key); };
  }
};

// A host thread's write: staged now, answered through the relay (a blocked
// thread) or its callback once the group is durable; refused at once if the
// shard will not stage it.
void on_host_request(const handler_context& c, const host_request_ptr& r) {
  auto self = c.self;
  if (auto e = c.down()) return r->finish(to_status(*e));
  auto& engine = *self->state.engine;
  auto hook = c.write_hook();
  auto refuse = [self, r](const status& st) {
    r->finish(st);
    stop_if_failed(self);
  };
  auto after_group = [self, r](cas_outcome o) {
    if (r->waiter)
      self->state.blocked.add(std::move(r->waiter), std::move(o));
    else
      self->state.waiting.push_back([r, o = std::move(o)](const status& s) { r->finish(s, o); });
    schedule_group(self);
  };
  switch (r->op) {
    case host_request::kind::put:
    case host_request::kind::del: {
      hook(r->key);
      status st =
          r->op == host_request::kind::put ? engine.put(r->key, r->value, ttl_of(r->ttl_ns)) : engine.del(r->key);
      if (!st) return refuse(st);
      return after_group(cas_outcome::applied());
    }
    case host_request::kind::cas: {
      hook(r->key);
      auto out =
          engine.cas(r->key, r->has_expected ? std::optional<std::string_view>(r->expected) : std::nullopt,
                     r->has_desired ? std::optional<std::string_view>(r->value) : std::nullopt, ttl_of(r->ttl_ns));
      if (!out) return refuse(out.error());
      return after_group(std::move(*out));
    }
    case host_request::kind::batch: {
      status st = engine.batch(writes_of(r->ops, hook));
      if (!st) return refuse(st);
      return after_group(cas_outcome::applied());
    }
    case host_request::kind::apply: {
      auto writes = writes_of(r->ops, hook);
      if (self->state.prepared.blocking(r->checks, writes)) {
        self->state.parked.push_back([c, r](const status* gone) {
          if (gone)
            r->finish(*gone);
          else
            on_host_request(c, r);
        });
        return;
      }
      auto out = engine.apply(r->checks, writes);
      if (!out) return refuse(out.error());
      return after_group(std::move(*out));
    }
  }
}

// Writes from actors: each answered after its group is durable.
auto write_handlers(handler_context c) {
  auto self = c.self;
  return std::make_tuple(
      [=](put_atom, const std::string& key, const std::string& value, std::int64_t ttl_ns) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        c.hook(key);
        return ack_after_group(self, self->state.engine->put(key, value, ttl_of(ttl_ns)));
      },
      [=](del_atom, const std::string& key) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        c.hook(key);
        return ack_after_group(self, self->state.engine->del(key));
      },
      [=](cas_atom, const std::string& key, bool has_expected, const std::string& expected, bool has_desired,
          const std::string& desired, std::int64_t ttl_ns) -> caf::result<bool, bool, std::string> {
        if (auto e = c.down()) return *e;
        c.hook(key);
        auto out = self->state.engine->cas(key, has_expected ? std::optional<std::string_view>(expected) : std::nullopt,
                                           has_desired ? std::optional<std::string_view>(desired) : std::nullopt,
                                           ttl_of(ttl_ns));
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        auto rp = self->make_response_promise<bool, bool, std::string>();
        cas_outcome o = std::move(*out);
        return wait_for_group<bool, bool, std::string>(
            self, rp, [o](auto& p) { p.deliver(o.swapped, o.current.has_value(), o.current.value_or(std::string())); });
      },
      [=](batch_atom, const std::vector<batch_op>& ops) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        auto hook = c.write_hook();
        return ack_after_group(self, self->state.engine->batch(writes_of(ops, hook)));
      },
      [=](apply_atom, const std::vector<state_check>& checks,
          const std::vector<batch_op>& ops) -> caf::result<bool, std::uint64_t, std::uint32_t, std::uint64_t> {
        if (auto e = c.down()) return *e;
        auto hook = c.write_hook();
        auto writes = writes_of(ops, hook);
        if (self->state.prepared.blocking(checks, writes)) {
          auto rp = self->make_response_promise<bool, std::uint64_t, std::uint32_t, std::uint64_t>();
          // Asked again once a transaction finishes, as if it came only then.
          self->state.parked.push_back([self, rp, checks, ops](const status* gone) mutable {
            if (gone)
              rp.deliver(to_error(*gone));
            else
              rp.delegate(caf::actor_cast<shard_engine_actor>(self), apply_atom::value, checks, ops);
          });
          return rp;
        }
        auto out = self->state.engine->apply(checks, writes);
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        // A refused apply is answered after the group it was judged against,
        // as a failed cas is: a caller that reloads then sees what beat it.
        auto rp = self->make_response_promise<bool, std::uint64_t, std::uint32_t, std::uint64_t>();
        cas_outcome o = std::move(*out);
        return wait_for_group<bool, std::uint64_t, std::uint32_t, std::uint64_t>(
            self, rp, [o](auto& p) { p.deliver(o.swapped, o.revision, o.failed_check.value_or(0), o.found); });
      },
      [=](host_atom, const host_request_ptr& r) { on_host_request(c, r); });
}

// What a transaction across shards may write: state keys and values, no ttl.
status check_transaction_writes(const std::vector<batch_write>& writes) {
  for (const auto& w : writes) {
    MAGNETITE_TRY(state_space::check_key(w.key));
    if (w.value) MAGNETITE_TRY(state_space::check_value(*w.value));
    if (w.ttl) return status::invalid_argument("a write of a transaction across shards takes no ttl");
  }
  return status::ok();
}

status held_by_another(const std::string& key) {
  return status::make(
      status_code::conflict, status_category::transient,
      fmt::format("conflict: a key ({} bytes) is held by another transaction being committed", key.size()));
}

// The decision recorded under `key`, from the published view: asked after
// the group in which a check found it.
result<transaction_records::decision> standing_decision(self_ptr self, const std::string& key) {
  auto stored = self->state.engine->view()->get(key, self->state.engine->now_ns());
  if (!stored) return stored.error();
  if (!*stored) return status::corruption("decision record vanished after its check");
  return transaction_records::decode_decision(**stored);
}

// Transactions across shards (docs/design/transactions.md): a participant's
// prepare and finish, a coordinator's decision and its removal. Each answer
// waits for the group that made its record durable.
auto transaction_handlers(handler_context c) {
  namespace tr = transaction_records;
  auto self = c.self;
  return std::make_tuple(
      [=](tx_prepare_atom, const hash128& id, std::uint32_t coordinator, const std::vector<state_check>& checks,
          const std::vector<batch_op>& ops) -> caf::result<bool, std::uint32_t, std::uint64_t> {
        if (auto e = c.down()) return *e;
        auto& st = self->state;
        // A promise takes over the answer: made only on the paths that use it.
        using promise = caf::typed_response_promise<bool, std::uint32_t, std::uint64_t>;
        if (st.prepared.holds(id))  // sent again: the first one stands
          return wait_for_group<bool, std::uint32_t, std::uint64_t>(
              self, self->make_response_promise<bool, std::uint32_t, std::uint64_t>(),
              [](promise& p) { p.deliver(true, std::uint32_t{0}, std::uint64_t{0}); });
        auto hook = c.write_hook();
        tr::prepare p{id, coordinator, {}, writes_of(ops, hook)};
        if (status valid = check_transaction_writes(p.writes); !valid) return to_error(valid);
        if (auto key = st.prepared.blocking(checks, p.writes)) return to_error(held_by_another(*key));
        for (const auto& check : checks) p.reads.push_back(check.key);
        std::string body = tr::encode_prepare(p);
        if (body.size() > state_space::max_value_bytes)
          return to_error(status::invalid_argument(
              fmt::format("transaction's part on one shard takes {} bytes encoded, over the limit of {}", body.size(),
                          state_space::max_value_bytes)));
        std::vector<batch_write> record{{tr::prepare_key(id), std::move(body), std::nullopt}};
        auto out = st.engine->apply(checks, record);
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        if (out->swapped) st.prepared.add(std::move(p));
        cas_outcome o = std::move(*out);
        return wait_for_group<bool, std::uint32_t, std::uint64_t>(
            self, self->make_response_promise<bool, std::uint32_t, std::uint64_t>(),
            [o](promise& p) { p.deliver(o.swapped, o.failed_check.value_or(0), o.found); });
      },
      [=](tx_commit_atom, const hash128& id, const std::vector<state_check>& checks, const std::vector<batch_op>& ops,
          const std::vector<std::uint32_t>& participants)
          -> caf::result<bool, std::uint32_t, std::uint64_t, std::uint64_t> {
        if (auto e = c.down()) return *e;
        auto hook = c.write_hook();
        auto writes = writes_of(ops, hook);
        if (status valid = check_transaction_writes(writes); !valid) return to_error(valid);
        // Never waits: the other participants hold their keys meanwhile.
        if (auto key = self->state.prepared.blocking(checks, writes)) return to_error(held_by_another(*key));
        std::string key = tr::decision_key(id);
        std::vector<state_check> all{{key, 0}};
        all.insert(all.end(), checks.begin(), checks.end());
        writes.push_back({key, tr::encode_decision({true, participants}), std::nullopt});
        auto out = self->state.engine->apply(all, writes);
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        cas_outcome o = std::move(*out);
        using promise = caf::typed_response_promise<bool, std::uint32_t, std::uint64_t, std::uint64_t>;
        return wait_for_group<bool, std::uint32_t, std::uint64_t, std::uint64_t>(
            self, self->make_response_promise<bool, std::uint32_t, std::uint64_t, std::uint64_t>(),
            [self, key, o, own_writes = !ops.empty()](promise& p) {
              if (o.swapped) {
                p.deliver(true, std::uint32_t{0}, std::uint64_t{0}, own_writes ? o.revision : std::uint64_t{0});
              } else if (*o.failed_check > 0) {  // a check of its own: aborted, nothing written
                p.deliver(false, *o.failed_check - 1, o.found, std::uint64_t{0});
              } else if (auto d = standing_decision(self, key); !d) {  // sent again: decided before
                p.deliver(to_error(d.error()));
              } else {
                // A decision of abort is told as a failed check nowhere: the
                // caller learns it from failed_check = UINT32_MAX.
                p.deliver(d->commit, d->commit ? std::uint32_t{0} : UINT32_MAX, std::uint64_t{0}, std::uint64_t{0});
              }
            });
      },
      [=](tx_decide_atom, const hash128& id, bool commit,
          const std::vector<std::uint32_t>& participants) -> caf::result<bool> {
        if (auto e = c.down()) return *e;
        std::string key = tr::decision_key(id);
        std::vector<state_check> absent{{key, 0}};
        std::vector<batch_write> record{{key, tr::encode_decision({commit, participants}), std::nullopt}};
        auto out = self->state.engine->apply(absent, record);
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        auto rp = self->make_response_promise<bool>();
        return wait_for_group<bool>(self, rp, [self, key, commit, written = out->swapped](auto& p) {
          if (written) {
            p.deliver(commit);
            return;
          }
          // Decided before: that decision stands, whatever this one asked.
          auto d = standing_decision(self, key);
          if (d)
            p.deliver(d->commit);
          else
            p.deliver(to_error(d.error()));
        });
      },
      [=](tx_finish_atom, const hash128& id, bool commit) -> caf::result<std::uint64_t> {
        if (auto e = c.down()) return *e;
        auto& st = self->state;
        auto held = st.prepared.take(id);
        if (!held)  // finished before (or never prepared): nothing to do
          return wait_for_group<std::uint64_t>(self, self->make_response_promise<std::uint64_t>(),
                                               [](auto& p) { p.deliver(std::uint64_t{0}); });
        // The writes move out of the table into the frame; a refusal of the
        // frame puts them back, so the holds stay until a finish lands.
        bool writes_any = commit && !held->writes.empty();
        std::vector<batch_write> writes;
        if (commit) writes = std::move(held->writes);
        writes.push_back({tr::prepare_key(id), std::nullopt, std::nullopt});
        auto out = st.engine->apply({}, writes);
        if (!out) {
          if (commit) {
            writes.pop_back();
            held->writes = std::move(writes);
          }
          st.prepared.add(std::move(*held));
          stop_if_failed(self);
          return to_error(out.error());
        }
        auto parked = std::move(st.parked);
        st.parked.clear();
        for (auto& p : parked) p(nullptr);
        std::uint64_t revision = writes_any ? out->revision : 0;  // a part that only read has none
        return wait_for_group<std::uint64_t>(self, self->make_response_promise<std::uint64_t>(),
                                             [revision](auto& p) { p.deliver(revision); });
      },
      [=](tx_forget_atom, const hash128& id) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        std::vector<batch_write> drop{{tr::decision_key(id), std::nullopt, std::nullopt}};
        auto out = self->state.engine->apply({}, drop);
        return ack_after_group(self, out ? status::ok() : out.error());
      });
}

// Reads: from the shard's current view, at once.
auto read_handlers(handler_context c) {
  auto self = c.self;
  return std::make_tuple(
      [=](get_atom, const std::string& key) -> caf::result<bool, std::string> {
        if (auto e = c.down()) return *e;
        auto v = self->state.engine->get(key);
        if (!v) return to_error(v.error());
        if (!*v) return {false, std::string()};
        return {true, std::move(**v)};
      },
      [=](range_atom, const std::string& from, const std::string& to,
          std::uint32_t limit) -> caf::result<std::vector<std::string>, std::vector<std::string>, bool> {
        if (auto e = c.down()) return *e;
        auto chunk = read_range_chunk(*self->state.engine->view(), from, to, limit, self->state.engine->now_ns());
        if (!chunk) return to_error(chunk.error());
        std::vector<std::string> keys, values;
        keys.reserve(chunk->entries.size());
        values.reserve(chunk->entries.size());
        for (auto& [k, v] : chunk->entries) {
          keys.push_back(std::move(k));
          values.push_back(std::move(v));
        }
        return {std::move(keys), std::move(values), chunk->more};
      },
      [=](stats_atom) -> caf::result<shard_stats> {
        if (auto e = c.down()) return *e;
        return self->state.engine->stats();
      });
}

status import_nodes(self_ptr self, const std::vector<hash128>& hashes, const std::vector<std::string>& encodings) {
  if (hashes.size() != encodings.size())
    return status::invalid_argument(
        fmt::format("import of {} hashes with {} encodings", hashes.size(), encodings.size()));
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    status st = self->state.engine->import_node(hashes[i], encodings[i]);
    if (!st) {
      stop_if_failed(self);
      return st;
    }
  }
  return status::ok();
}

// What a replica actor asks of its shard (replication/): stamped writes, its
// promise state, tree nodes, and merges of a peer's tree.
auto replica_handlers(handler_context c) {
  auto self = c.self;
  return std::make_tuple(
      [=](stamped_atom, const std::vector<stamped_op>& ops) -> caf::result<std::vector<bool>> {
        if (auto e = c.down()) return *e;
        auto hook = c.write_hook();
        auto out = self->state.engine->apply_stamped(writes_of(ops, hook));
        if (!out) {
          stop_if_failed(self);
          return to_error(out.error());
        }
        // Taken or not, the answer waits for the group: a write not taken lost
        // to one that may still be in it.
        auto rp = self->make_response_promise<std::vector<bool>>();
        return wait_for_group<std::vector<bool>>(self, rp, [taken = std::move(*out)](auto& p) { p.deliver(taken); });
      },
      [=](promise_atom, const std::string& payload) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        return ack_after_group(self, self->state.engine->record_replication_state(payload));
      },
      [=](promise_atom) -> caf::result<bool, std::string> {
        if (auto e = c.down()) return *e;
        // After the group: a promise state recorded but not yet durable is
        // never read back as if it were.
        auto rp = self->make_response_promise<bool, std::string>();
        return wait_for_group<bool, std::string>(self, rp, [self](auto& p) {
          const auto& state = self->state.engine->replication_state();
          p.deliver(state.has_value(), state.value_or(std::string()));
        });
      },
      [=](import_atom, const std::vector<hash128>& hashes,
          const std::vector<std::string>& encodings) -> caf::result<ok_atom> {
        if (auto e = c.down()) return *e;
        if (status st = import_nodes(self, hashes, encodings); !st) return to_error(st);
        return ok_atom::value;
      },
      [=](merge_atom, const hash128& root) -> caf::result<merge_report> {
        if (auto e = c.down()) return *e;
        return merge_then_reply(self, root, false);
      },
      [=](adopt_atom, const hash128& root) -> caf::result<merge_report> {
        if (auto e = c.down()) return *e;
        return merge_then_reply(self, root, true);
      });
}

// Asked for: gives back what can be given, whatever the policy (or with the
// policy off), in one go; how many bytes.
caf::result<std::uint64_t> reclaim_now(self_ptr self, const std::vector<hash128>& roots) {
  auto& engine = self->state.engine;
  if (!finish_group(self)) return to_error(engine->failure());
  std::uint64_t before = engine->reclaimed_bytes();
  auto run = [&]() -> status {
    MAGNETITE_TRY(engine->begin_reclaim(roots, 1.01));
    for (;;) {
      auto done = engine->reclaim_step();
      if (!done) return done.error();
      if (*done) return status::ok();
    }
  };
  if (status s = run(); !s) {
    stop_if_failed(self);
    return to_error(s);
  }
  return engine->reclaimed_bytes() - before;
}

// The database's operations: checkpoints, bulk ingest, usage, checks, space.
auto operator_handlers(handler_context c) {
  auto self = c.self;
  return std::make_tuple(
      [=](checkpoint_atom) -> caf::result<hash128> {
        if (auto e = c.down()) return *e;
        auto root = checkpoint_now(self);
        if (!root) return to_error(root.error());
        return *root;
      },
      [=](commit_atom) -> caf::result<std::string> {
        // A host's commit: the root as text (<magnetite/caf.h>).
        if (auto e = c.down()) return *e;
        auto root = checkpoint_now(self);
        if (!root) return to_error(root.error());
        return root->to_hex();
      },
      [=](ingest_atom, const std::string& bytes, const std::vector<std::uint32_t>& sizes) -> caf::result<hash128> {
        if (auto e = c.down()) return *e;
        if (!finish_group(self)) return to_error(self->state.engine->failure());
        auto root = self->state.engine->ingest(bytes, sizes);
        stop_if_failed(self);
        if (!root) return to_error(root.error());
        publish(self);
        maybe_reclaim(self);
        return *root;
      },
      [=](usage_atom) -> caf::result<shard_usage> {
        if (auto e = c.down()) return *e;
        std::vector<hash128> retained;
        if (auto& slot = self->state.config.slot)
          if (auto r = slot->retained.load()) retained = *r;
        auto u = self->state.engine->usage(retained);
        if (!u) return to_error(u.error());
        return std::move(*u);
      },
      [=](verify_atom, const std::vector<hash128>& roots) -> caf::result<shard_verify_report> {
        if (auto e = c.down()) return *e;
        if (!finish_group(self)) return to_error(self->state.engine->failure());
        auto r = self->state.engine->verify(roots);
        if (!r) return to_error(r.error());
        return std::move(*r);
      },
      [=](view_at_atom, const hash128& root) -> caf::result<read_view_ptr> {
        if (auto e = c.down()) return *e;
        auto v = self->state.engine->view_at(root);
        if (!v) return to_error(v.error());
        return std::move(*v);
      },
      [=](gc_atom, const std::vector<hash128>& roots) -> caf::result<tree::gc_result> {
        if (auto e = c.down()) return *e;
        if (!finish_group(self)) return to_error(self->state.engine->failure());
        auto r = self->state.engine->gc(roots);
        if (!r) {
          stop_if_failed(self);
          return to_error(r.error());
        }
        publish(self);  // a checkpoint it finished first
        return *r;
      },
      [=](reclaim_atom, const std::vector<hash128>& roots) -> caf::result<std::uint64_t> {
        if (auto e = c.down()) return *e;
        return reclaim_now(self, roots);
      },
      [=](shutdown_atom) -> caf::result<ok_atom> {
        if (self->state.engine) {
          auto root = checkpoint_now(self);
          if (!root) return to_error(root.error());
        }
        self->quit();
        return ok_atom::value;
      });
}

// One step of a reclamation cycle, and the next step sent to itself.
void reclaim_step(self_ptr self) {
  auto& s = self->state;
  s.reclaim_scheduled = false;
  if (!s.engine) return;
  // Writes staged while the previous step ran wait for their group, which is
  // queued behind this step: let it go first, once, so a write waits for at
  // most the step that was running when it arrived.
  if (s.group_scheduled && !s.reclaim_yielded) {
    s.reclaim_yielded = true;
    s.reclaim_scheduled = true;
    self->send(self, reclaim_atom::value);
    return;
  }
  s.reclaim_yielded = false;
  auto done = s.engine->reclaim_step();
  if (!done) {
    // Damage the cycle met is left to verify to report; a failed write or
    // sync ends the actor (fail-stop) like any other.
    stop_if_failed(self);
    return;
  }
  if (*done) return;
  s.reclaim_scheduled = true;
  self->send(self, reclaim_atom::value);
}

// The expiry timer fired: stage the deletes of what is due, or re-arm.
void expire_due(self_ptr self, std::uint64_t generation) {
  auto& s = self->state;
  if (!s.engine || generation != s.expiry_generation) return;  // stale: a later arm replaced it
  s.expiry_armed.reset();
  auto n = s.engine->stage_expired(s.config.expire_batch);
  if (!n) {
    self->quit(to_error(n.error()));
    return;
  }
  if (*n > 0)
    schedule_group(self);
  else
    arm_expiry_timer(self);
}

// What the shard sends itself: the group to commit, and its timers.
auto self_handlers(self_ptr self) {
  return std::make_tuple(
      [=](group_atom) {
        if (self->state.engine) finish_group(self);
      },
      [=](aged_atom) {
        auto& s = self->state;
        s.aging = false;
        if (!s.engine || !finish_group(self) || !s.engine->view()->holds_writes()) return;
        (void)begin_checkpoint(self, /*make_room=*/false);  // a failure ends the actor
      },
      [=](checkpointed_atom) {
        // Sent by the checkpoint's thread; one that ended meanwhile (a
        // commit, a stall) left a later one running, or none.
        auto& s = self->state;
        if (s.engine && s.engine->checkpoint_ready()) (void)end_checkpoint(self);
      },
      [=](rcheck_atom) { maybe_reclaim(self); }, [=](reclaim_atom) { reclaim_step(self); },
      [=](durable_atom) {
        auto& s = self->state;
        s.syncing = false;
        if (!s.engine) return;
        // Everything written is durable afterwards: nothing to re-arm until a
        // later group leaves writes pending again.
        status st = s.engine->sync_durable();
        if (!st) self->quit(to_error(st));
      },
      [=](expire_atom, std::uint64_t generation) { expire_due(self, generation); });
}

// The behaviour: the tables above, one per kind of message.
shard_engine_actor::behavior_type shard_behavior_after_boot(self_ptr self) {
  handler_context c{self};
  return std::apply([](auto&&... handlers) { return shard_engine_actor::behavior_type{std::move(handlers)...}; },
                    std::tuple_cat(write_handlers(c), transaction_handlers(c), read_handlers(c), replica_handlers(c),
                                   operator_handlers(c), self_handlers(self)));
}

}  // namespace

shard_engine_actor spawn_shard(caf::actor_system& sys, shard_actor_config config) {
  return sys.spawn(shard_behavior, std::move(config));
}

}  // namespace magnetite
