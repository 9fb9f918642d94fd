// The owner's side of state/ on a cluster (docs/design/replication.md, 10):
// conditional batches, and reads of state keys that are linearizable.
//
// A conditional batch holds every key it checks or writes, in key order
// (so two batches never wait on each other in a cycle), judges its checks
// against our tree in ONE turn of the actor, and ships its writes, the
// shard's revision mark and its request record in ONE batch: one frame at
// every replica, all or nothing.
//
// Revisions (design, 10): a batch's writes carry
//   max(revision mark, the revision every key it writes holds now) + 1,
// and the mark becomes that. The mark is kept in the shard under
// `FF FF 6D`, written in every batch, so the next owner (which merged every
// committed batch before it serves) starts from a mark at or above every
// committed revision. Taking the keys' own revisions too keeps a key's
// revision growing even over a value merged from a write that only a
// minority of an older owner's term took.
#include <algorithm>

#include "core/coding.h"
#include "core/limits.h"
#include "engine/state_space.h"
#include "engine/transaction_records.h"
#include "replication/replica_internal.h"

namespace magnetite::replication::replica_internal {

namespace {

using apply_reply = caf::typed_response_promise<bool, std::uint64_t, std::uint32_t, std::uint64_t>;

std::string mark_key() { return std::string(state_space::prefix) + '\x6d'; }

std::string revision_bytes(std::uint64_t revision) {
  std::string out(state_space::revision_bytes, '\0');
  encode_fixed64_le(reinterpret_cast<std::uint8_t*>(out.data()), revision);
  return out;
}

status not_serving() { return status::io_error("the shard is not serving", status_category::transient); }

// Keys state/ never writes: the shard's own records. A client's batch that
// names one is refused, so it can neither forge a request record nor move
// the mark.
status check_not_reserved(std::string_view key) {
  static const std::string request_prefix = std::string(state_space::prefix) + '\x69';
  if (key.starts_with(request_prefix) || key == mark_key() || key.starts_with(transaction_records::prepare_prefix) ||
      key.starts_with(transaction_records::decision_prefix))
    return status::invalid_argument("a conditional batch may not name the shard's own records (FF FF 69, 6D, 70, 64)");
  return status::ok();
}

// The revision of key's live value in v; 0 when absent or expired.
result<std::uint64_t> live_revision(const read_view& v, std::uint64_t now, const std::string& key) {
  auto found = v.get(key, now);
  if (!found) return found.error();
  if (!*found) return std::uint64_t{0};
  return state_space::revision_of(key, **found);
}

// Holds keys[next..] in turn (sorted and distinct), then `then(true)`; with
// `then(false)` and none of them held if we stop owning the shard first.
void hold_from(self_ptr self, std::shared_ptr<const std::vector<std::string>> keys, std::size_t next,
               std::function<void(bool)> then) {
  auto release_held = [self, keys](std::size_t held) {
    for (std::size_t i = 0; i < held; ++i) release_key(self, (*keys)[i]);
  };
  for (; next < keys->size(); ++next) {
    auto& st = self->state;
    if (st.now == role::owner && st.absent()) step_down(self);  // an absent replica acknowledges nothing
    if (st.now != role::owner) {
      release_held(next);
      return then(false);
    }
    auto& q = st.keys[(*keys)[next]];
    if (!q.writing) {
      q.writing = true;
      continue;
    }
    q.waiting.push_back([self, keys, next, then, release_held](bool go) {
      if (!go) {
        release_held(next);
        return then(false);
      }
      self->state.keys[(*keys)[next]].writing = true;
      hold_from(self, keys, next + 1, then);
    });
    return;
  }
  then(true);
}

struct batch_request {
  std::vector<state_check> checks;
  std::vector<batch_op> ops;
  std::optional<stamped_op> record;
  std::shared_ptr<const std::vector<std::string>> keys;  // checked or written, sorted, held
  admission_ptr in;                                      // the client write's place in the queue
};

void release_all(self_ptr self, const batch_request& b) {
  for (const auto& k : *b.keys) release_key(self, k);
  drop(self, b.record);
}

// The shard's mark, brought up to date once a term: our own may lag what an
// owner of a term between ours gave.
result<std::uint64_t> current_mark(self_ptr self, const read_view& v) {
  auto& st = self->state;
  if (st.mark_term != st.term) {
    auto stored = live_revision(v, st.config.clock(), mark_key());
    if (!stored) return stored.error();
    st.revision_mark = std::max(st.revision_mark, *stored);
    st.mark_term = st.term;
  }
  return st.revision_mark;
}

// With every key held: the checks, judged against our tree now, then the
// writes shipped, or the first failed check answered once confirmed.
}  // namespace

void hold_keys(self_ptr self, std::shared_ptr<const std::vector<std::string>> keys, std::function<void(bool)> then) {
  hold_from(self, std::move(keys), 0, std::move(then));
}

result<std::optional<std::pair<std::uint32_t, std::uint64_t>>> failed_check(self_ptr self, const read_view& v,
                                                                            const std::vector<state_check>& checks) {
  std::uint64_t now = self->state.config.clock();
  for (std::size_t i = 0; i < checks.size(); ++i) {
    auto found = live_revision(v, now, checks[i].key);
    if (!found) return found.error();
    if (*found != checks[i].revision)
      return std::optional<std::pair<std::uint32_t, std::uint64_t>>({static_cast<std::uint32_t>(i), *found});
  }
  return std::optional<std::pair<std::uint32_t, std::uint64_t>>();
}

result<std::uint64_t> give_revision(self_ptr self, const read_view& v, const std::vector<batch_op>& ops) {
  auto mark = current_mark(self, v);
  if (!mark) return mark.error();
  std::uint64_t now = self->state.config.clock(), revision = *mark;
  for (const auto& op : ops) {
    auto found = live_revision(v, now, op.key);
    if (!found) return found.error();
    revision = std::max(revision, *found);
  }
  self->state.revision_mark = ++revision;
  return revision;
}

std::vector<stamped_op> stamped_state_writes(self_ptr self, std::uint64_t revision, std::vector<batch_op> ops) {
  auto& st = self->state;
  std::uint64_t now = st.config.clock();
  std::string prefix = revision_bytes(revision);
  std::vector<stamped_op> out;
  out.reserve(ops.size() + 1);
  for (auto& op : ops) {
    if (!op.is_put) {
      auto purge = now + static_cast<std::uint64_t>(st.config.tombstone_retention.count());
      out.push_back(stamped_op{std::move(op.key), stamp{}, false, std::string(), true, purge});
      continue;
    }
    stamped_op w{std::move(op.key), stamp{}, true, prefix + op.value, op.ttl_ns > 0, 0};
    if (op.ttl_ns > 0) w.deadline_ns = now + static_cast<std::uint64_t>(op.ttl_ns);
    out.push_back(std::move(w));
  }
  out.push_back(stamped_op{mark_key(), stamp{}, true, prefix, false, 0});
  return out;
}

void ship_holding(self_ptr self, std::vector<stamped_op> out, std::shared_ptr<const std::vector<std::string>> held,
                  std::function<void(const status&)> done, std::optional<stamped_op> record) {
  // Keys held but not written are let go once the writes are queued: a write
  // of one queued after ours is ordered after this batch, which read it before.
  std::vector<std::string> only_held;
  for (const auto& k : *held)
    if (std::none_of(out.begin(), out.end(), [&](const stamped_op& w) { return w.key == k; })) only_held.push_back(k);
  replicate_together(self, std::move(out), std::move(done), std::move(record));
  for (const auto& k : only_held) release_key(self, k);
}

namespace {

void judge(self_ptr self, apply_reply rp, std::shared_ptr<batch_request> b) {
  auto v = view_of(self);
  auto refuse = [&](const status& s) {
    release_all(self, *b);
    rp.deliver(to_error(s));
  };
  if (!v) return refuse(not_serving());
  if (!judge_checks(
          self, rp, *v, b->checks, b->ops, [&] { release_all(self, *b); },
          [](apply_reply& p, std::uint32_t i, std::uint64_t found) { p.deliver(false, std::uint64_t{0}, i, found); }))
    return;
  if (b->ops.empty()) {
    auto mark = current_mark(self, *v);
    if (!mark) return refuse(mark.error());
    // Nothing to write: the checks held at a moment a majority still owned us.
    release_all(self, *b);
    return confirm(self, [self, rp, revision = *mark](bool ok) mutable {
      if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
      rp.deliver(true, revision, std::uint32_t{0}, std::uint64_t{0});
    });
  }
  auto revision = give_revision(self, *v, b->ops);
  if (!revision) return refuse(revision.error());
  auto out = stamped_state_writes(self, *revision, std::move(b->ops));
  if (b->record) b->record->value = request_record_value(*revision);
  ship_holding(
      self, std::move(out), b->keys,
      [rp, revision = *revision](const status& s) mutable {
        answer(rp, s, true, revision, std::uint32_t{0}, std::uint64_t{0});
      },
      std::move(b->record));
}

}  // namespace

status check_batch_request(const std::vector<state_check>& checks, const std::vector<batch_op>& ops) {
  if (ops.size() > limits::max_batch_mutations)
    return status::invalid_argument(
        fmt::format("state batch of {} writes exceeds the limit of {}", ops.size(), limits::max_batch_mutations));
  for (const auto& c : checks) {
    MAGNETITE_TRY(state_space::check_key(c.key));
    MAGNETITE_TRY(check_not_reserved(c.key));
  }
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.ttl_ns < 0) return status::invalid_argument(fmt::format("ttl of {} ns: must be > 0", op.ttl_ns));
    std::optional<std::chrono::nanoseconds> ttl;
    if (op.ttl_ns > 0) ttl = std::chrono::nanoseconds(op.ttl_ns);
    MAGNETITE_TRY(state_space::check_write(i, op.key, op.is_put ? &op.value : nullptr, ttl));
    MAGNETITE_TRY(check_not_reserved(op.key));
    bytes += op.key.size() + op.value.size() + state_space::revision_bytes + ttl::max_stamped_overhead;
  }
  // The frame also carries the mark and the record; a frame past the log's
  // limit would fail the shard at every replica.
  if (bytes > limits::max_batch_bytes / 2)
    return status::invalid_argument(fmt::format("state batch of {} bytes exceeds the limit of {} on a cluster", bytes,
                                                limits::max_batch_bytes / 2));
  return status::ok();
}

caf::result<bool, std::uint64_t, std::uint32_t, std::uint64_t> client_apply(self_ptr self,
                                                                            std::vector<state_check> checks,
                                                                            std::vector<batch_op> ops,
                                                                            const request_id& rid) {
  if (auto s = check_batch_request(checks, ops); !s) return to_error(s);
  auto in = admit_client_write(self);
  if (!in) return to_error(in.error());
  auto rp = self->make_response_promise<bool, std::uint64_t, std::uint32_t, std::uint64_t>();
  auto b = std::make_shared<batch_request>();
  b->in = std::move(*in);
  std::vector<std::string> keys;
  keys.reserve(checks.size() + ops.size());
  for (const auto& c : checks) keys.push_back(c.key);
  for (const auto& op : ops) keys.push_back(op.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  b->keys = std::make_shared<const std::vector<std::string>>(std::move(keys));
  b->checks = std::move(checks);
  b->ops = std::move(ops);
  at_most_once(
      self, rid, refusal(rp),
      [rp](std::uint64_t revision) mutable { rp.deliver(true, revision, std::uint32_t{0}, std::uint64_t{0}); },
      [self, rp, b](std::optional<stamped_op> record) mutable {
        b->record = std::move(record);
        hold_from(self, b->keys, 0, [self, rp, b](bool go) mutable {
          if (!go) {
            drop(self, b->record);
            return (void)rp.deliver(to_error(not_owner(self)));
          }
          judge(self, rp, b);
        });
      });
  return rp;
}

caf::result<bool, std::string> client_state_read(self_ptr self, const std::string& key) {
  if (auto s = state_space::check_key(key); !s) return to_error(s);
  return confirmed_read(self, key);
}

namespace {

// One answer's bytes of values at most (one entry at least): the client
// reads on from where it stopped.
constexpr std::size_t range_reply_bytes = 4 << 20;
constexpr std::uint64_t max_range_limit = 100'000;

using range_reply = caf::typed_response_promise<std::vector<std::string>, std::vector<std::string>, bool, std::string>;

// Reads [from, to) once no write in flight holds a key in it: a value our
// shard applied before a majority took it must not be shown.
void range_when_settled(self_ptr self, range_reply rp, std::string from, std::string to, std::uint64_t limit,
                        bool backward) {
  auto& st = self->state;
  if (st.now == role::owner && st.absent()) step_down(self);
  if (st.now != role::owner) return (void)rp.deliver(to_error(not_owner(self)));
  for (auto it = st.keys.lower_bound(from); it != st.keys.end() && (to.empty() || it->first < to); ++it) {
    if (!it->second.writing) continue;
    it->second.waiting.push_back([self, rp, from, to, limit, backward](bool go) mutable {
      if (!go) return (void)rp.deliver(to_error(not_owner(self)));
      range_when_settled(self, rp, std::move(from), std::move(to), limit, backward);
    });
    return;
  }
  auto v = view_of(self);
  if (!v) return (void)rp.deliver(to_error(not_serving()));
  auto run = v->live_range(from, to, st.config.clock(), limit, backward, range_reply_bytes);
  if (!run) return (void)rp.deliver(to_error(run.error()));
  confirm(self, [self, rp, run = std::move(*run)](bool ok) mutable {
    if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
    std::vector<std::string> keys, values;
    keys.reserve(run.entries.size());
    values.reserve(run.entries.size());
    for (auto& [k, value] : run.entries) {
      keys.push_back(std::move(k));
      values.push_back(std::move(value));
    }
    rp.deliver(std::move(keys), std::move(values), run.resume.has_value(), run.resume.value_or(std::string()));
  });
}

}  // namespace

caf::result<std::vector<std::string>, std::vector<std::string>, bool, std::string> client_state_range(
    self_ptr self, const std::string& from, const std::string& to, std::uint64_t limit, bool backward) {
  if (auto s = state_space::check_key(from); !s) return to_error(s);
  if (!to.empty())
    if (auto s = state_space::check_key(to); !s) return to_error(s);
  if (limit < 1 || limit > max_range_limit)
    return to_error(status::invalid_argument(fmt::format("range limit of {}: must be 1..{}", limit, max_range_limit)));
  auto rp = self->make_response_promise<std::vector<std::string>, std::vector<std::string>, bool, std::string>();
  range_when_settled(self, rp, from, to, limit, backward);
  return rp;
}

}  // namespace magnetite::replication::replica_internal
