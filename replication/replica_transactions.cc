// A transaction across shards on a cluster, at each shard's owner
// (docs/design/replication.md, 10; the protocol of docs/design/
// transactions.md with owners as participants and the client as driver).
//
// Every record is a state write of a batch at the owner, answered once a
// majority holds it: a prepare record in the batch whose checks it passed,
// the decision `commit` in the batch of the coordinator's own writes, a
// participant's writes with the deletion of its prepare record. Each message
// is idempotent by its record: a prepare sent again finds its record, a
// commit or decide finds the decision that stands, a finish finds no prepare
// and answers 0. The record's key is held (hold_keys) with the keys the
// message touches, so a retry waits for an attempt still in flight.
//
// Holds: `prepared` is loaded from our tree's prepare records once a term (a
// new owner merged every prepare a majority took) and changed as prepares
// and finishes are shipped; a batch that fails steps us down, and the next
// term loads the table again from what the tree holds.
#include <algorithm>

#include "engine/state_space.h"
#include "engine/transaction_records.h"
#include "replication/replica_internal.h"

namespace magnetite::replication::replica_internal {

namespace tr = transaction_records;

namespace {

status not_serving() { return status::io_error("the shard is not serving", status_category::transient); }

status held_by_another(const std::string& key) {
  return status::make(
      status_code::conflict, status_category::transient,
      fmt::format("conflict: a key ({} bytes) is held by another transaction being committed", key.size()));
}

// The prepared table as our tree holds it, loaded once a term. A prepare
// we shipped in an earlier term is in the tree by then: its stamped apply
// was queued at our shard before the campaign that began this term, and
// the shard takes its messages in order.
status load_prepared(self_ptr self, const read_view& v) {
  auto& st = self->state;
  if (st.prepared_term == st.term) return status::ok();
  auto loaded = prepared_transactions::load(v);
  if (!loaded) return loaded.error();
  st.prepared = std::move(*loaded);
  st.prepared_since.clear();
  for (const auto& [id, coordinator] : st.prepared.in_doubt()) st.prepared_since[id] = st.config.clock();
  st.prepared_term = st.term;
  return status::ok();
}

std::vector<batch_write> writes_of(const std::vector<batch_op>& ops) {
  std::vector<batch_write> out;
  out.reserve(ops.size());
  for (const auto& op : ops)
    out.push_back({op.key, op.is_put ? std::optional<std::string>(op.value) : std::nullopt, std::nullopt});
  return out;
}

std::vector<batch_op> ops_of(std::vector<batch_write> writes) {
  std::vector<batch_op> out;
  out.reserve(writes.size());
  for (auto& w : writes) out.push_back({std::move(w.key), w.value.has_value(), std::move(w.value).value_or(""), 0});
  return out;
}

// Every key of checks and ops and `record`, sorted and distinct.
std::shared_ptr<const std::vector<std::string>> keys_of(const std::vector<state_check>& checks,
                                                        const std::vector<batch_op>& ops, const std::string& record) {
  std::vector<std::string> keys{record};
  for (const auto& c : checks) keys.push_back(c.key);
  for (const auto& op : ops) keys.push_back(op.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return std::make_shared<const std::vector<std::string>>(std::move(keys));
}

void release(self_ptr self, const std::vector<std::string>& keys) {
  for (const auto& k : keys) release_key(self, k);
}

// A transaction's part takes no TTL and must fit one value.
status check_part(const std::vector<state_check>& checks, const std::vector<batch_op>& ops) {
  MAGNETITE_TRY(check_batch_request(checks, ops));
  for (const auto& op : ops)
    if (op.ttl_ns != 0) return status::invalid_argument("a write of a transaction across shards takes no ttl");
  return status::ok();
}

// The decision under `key` in v, if one stands.
result<std::optional<tr::decision>> decision_in(self_ptr self, const read_view& v, const std::string& key) {
  auto stored = v.get(key, self->state.config.clock());
  if (!stored) return stored.error();
  if (!*stored) return std::optional<tr::decision>();
  auto d = tr::decode_decision(**stored);
  if (!d) return d.error();
  return std::optional<tr::decision>(std::move(*d));
}

// Runs `judge(view)` with every key of `keys` held, or answers rp with why
// it cannot; `judge` lets the keys go (ship_holding or release).
template <class Promise, class Judge>
void with_held(self_ptr self, Promise rp, std::shared_ptr<const std::vector<std::string>> keys, Judge judge) {
  hold_keys(self, keys, [self, rp, keys, judge](bool go) mutable {
    if (!go) return (void)rp.deliver(to_error(not_owner(self)));
    auto v = view_of(self);
    status s = v ? load_prepared(self, *v) : not_serving();
    if (!s) {
      release(self, *keys);
      return (void)rp.deliver(to_error(s));
    }
    judge(*v);
  });
}

}  // namespace

status held_against(self_ptr self, const read_view& v, const std::vector<state_check>& checks,
                    const std::vector<batch_op>& ops) {
  MAGNETITE_TRY(load_prepared(self, v));
  if (self->state.prepared.size() == 0) return status::ok();
  if (auto key = self->state.prepared.blocking(checks, writes_of(ops))) return held_by_another(*key);
  return status::ok();
}

caf::result<bool, std::uint32_t, std::uint64_t> client_tx_prepare(self_ptr self, const hash128& id,
                                                                  std::uint32_t coordinator,
                                                                  std::vector<state_check> checks,
                                                                  std::vector<batch_op> ops) {
  if (auto s = check_part(checks, ops); !s) return to_error(s);
  auto rp = self->make_response_promise<bool, std::uint32_t, std::uint64_t>();
  auto keys = keys_of(checks, ops, tr::prepare_key(id));
  with_held(self, rp, keys, [=, checks = std::move(checks), ops = std::move(ops)](const read_view& v) mutable {
    auto& st = self->state;
    auto refuse = [&](const status& s) {
      release(self, *keys);
      rp.deliver(to_error(s));
    };
    // Sent again: the first one stands (its batch was decided: its key was held).
    if (st.prepared.holds(id)) {
      release(self, *keys);
      return (void)rp.deliver(true, std::uint32_t{0}, std::uint64_t{0});
    }
    if (!judge_checks(
            self, rp, v, checks, ops, [&] { release(self, *keys); },
            [](auto& p, std::uint32_t i, std::uint64_t found) { p.deliver(false, i, found); }))
      return;
    tr::prepare p{id, coordinator, {}, writes_of(ops)};
    for (const auto& c : checks) p.reads.push_back(c.key);
    std::string body = tr::encode_prepare(p);
    if (body.size() > state_space::max_value_bytes)
      return refuse(status::invalid_argument(
          fmt::format("transaction's part on one shard takes {} bytes encoded, over the limit of {}", body.size(),
                      state_space::max_value_bytes)));
    std::vector<batch_op> record{{tr::prepare_key(id), true, std::move(body), 0}};
    auto revision = give_revision(self, v, record);
    if (!revision) return refuse(revision.error());
    // Held from now: a batch judged after this one sees the hold, whatever
    // the majority says (if it says no, we step down and the next term
    // loads the table from the tree).
    st.prepared.add(std::move(p));
    st.prepared_since[id] = st.config.clock();
    ship_holding(self, stamped_state_writes(self, *revision, std::move(record)), keys,
                 [rp](const status& s) mutable { answer(rp, s, true, std::uint32_t{0}, std::uint64_t{0}); });
  });
  return rp;
}

caf::result<bool, std::uint32_t, std::uint64_t, std::uint64_t> client_tx_commit(
    self_ptr self, const hash128& id, std::vector<state_check> checks, std::vector<batch_op> ops,
    std::vector<std::uint32_t> participants) {
  if (auto s = check_part(checks, ops); !s) return to_error(s);
  auto rp = self->make_response_promise<bool, std::uint32_t, std::uint64_t, std::uint64_t>();
  std::string key = tr::decision_key(id);
  auto keys = keys_of(checks, ops, key);
  with_held(
      self, rp, keys,
      [=, checks = std::move(checks), ops = std::move(ops),
       participants = std::move(participants)](const read_view& v) mutable {
        auto refuse = [&](const status& s) {
          release(self, *keys);
          rp.deliver(to_error(s));
        };
        // Decided before (sent again, or a resolver aborted it): that stands.
        auto standing = decision_in(self, v, key);
        if (!standing) return refuse(standing.error());
        if (*standing) {
          release(self, *keys);
          bool commit = (*standing)->commit;
          return (void)rp.deliver(commit, commit ? std::uint32_t{0} : UINT32_MAX, std::uint64_t{0}, std::uint64_t{0});
        }
        if (!judge_checks(
                self, rp, v, checks, ops, [&] { release(self, *keys); },
                [](auto& p, std::uint32_t i, std::uint64_t found) { p.deliver(false, i, found, std::uint64_t{0}); }))
          return;
        bool own_writes = !ops.empty();
        ops.push_back({key, true, tr::encode_decision({true, participants}), 0});
        auto revision = give_revision(self, v, ops);
        if (!revision) return refuse(revision.error());
        ship_holding(self, stamped_state_writes(self, *revision, std::move(ops)), keys,
                     [rp, revision = own_writes ? *revision : 0](const status& s) mutable {
                       answer(rp, s, true, std::uint32_t{0}, std::uint64_t{0}, revision);
                     });
      });
  return rp;
}

caf::result<bool> client_tx_decide(self_ptr self, const hash128& id, bool commit,
                                   std::vector<std::uint32_t> participants) {
  auto rp = self->make_response_promise<bool>();
  std::string key = tr::decision_key(id);
  auto keys = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{key});
  with_held(self, rp, keys, [=, participants = std::move(participants)](const read_view& v) mutable {
    auto standing = decision_in(self, v, key);
    if (!standing || *standing) {
      release(self, *keys);
      if (!standing) return (void)rp.deliver(to_error(standing.error()));
      return (void)rp.deliver((*standing)->commit);
    }
    std::vector<batch_op> record{{key, true, tr::encode_decision({commit, participants}), 0}};
    auto revision = give_revision(self, v, record);
    if (!revision) {
      release(self, *keys);
      return (void)rp.deliver(to_error(revision.error()));
    }
    ship_holding(self, stamped_state_writes(self, *revision, std::move(record)), keys,
                 [rp, commit](const status& s) mutable { answer(rp, s, commit); });
  });
  return rp;
}

caf::result<std::uint64_t> client_tx_finish(self_ptr self, const hash128& id, bool commit) {
  auto& st = self->state;
  if (st.now != role::owner) return to_error(not_owner(self));
  auto v = view_of(self);
  if (!v) return to_error(not_serving());
  if (auto s = load_prepared(self, *v); !s) return to_error(s);
  // Held in one sorted hold with the keys its writes go to (a prepare of the
  // same id sent again holds them in the same order).
  std::vector<std::string> keys{tr::prepare_key(id)};
  if (const auto* p = st.prepared.find(id))
    for (const auto& w : p->writes) keys.push_back(w.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  auto all = std::make_shared<const std::vector<std::string>>(std::move(keys));
  auto rp = self->make_response_promise<std::uint64_t>();
  with_held(self, rp, all, [=](const read_view& view) mutable {
    auto& st = self->state;
    auto held = st.prepared.take(id);
    if (!held) {  // finished before (or never prepared): nothing to do
      release(self, *all);
      return (void)rp.deliver(std::uint64_t{0});
    }
    st.prepared_since.erase(id);
    std::vector<batch_op> ops;
    if (commit) ops = ops_of(std::move(held->writes));
    bool writes_any = !ops.empty();
    ops.push_back({tr::prepare_key(id), false, std::string(), 0});
    auto revision = give_revision(self, view, ops);
    if (!revision) {
      release(self, *all);
      return (void)rp.deliver(to_error(revision.error()));
    }
    ship_holding(self, stamped_state_writes(self, *revision, std::move(ops)), all,
                 [rp, revision = writes_any ? *revision : 0](const status& s) mutable { answer(rp, s, revision); });
  });
  return rp;
}

caf::result<ok_atom> client_tx_forget(self_ptr self, const hash128& id) {
  auto rp = self->make_response_promise<ok_atom>();
  std::string key = tr::decision_key(id);
  auto keys = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{key});
  with_held(self, rp, keys, [=](const read_view& v) mutable {
    std::vector<batch_op> drop{{key, false, std::string(), 0}};
    auto revision = give_revision(self, v, drop);
    if (!revision) {
      release(self, *keys);
      return (void)rp.deliver(to_error(revision.error()));
    }
    ship_holding(self, stamped_state_writes(self, *revision, std::move(drop)), keys,
                 [rp](const status& s) mutable { answer(rp, s, ok_atom::value); });
  });
  return rp;
}

caf::result<std::vector<hash128>, std::vector<std::uint32_t>> client_tx_stale(self_ptr self,
                                                                              std::uint64_t older_than_ns) {
  auto& st = self->state;
  if (st.now == role::owner && st.absent()) step_down(self);
  if (st.now != role::owner) return to_error(not_owner(self));
  auto v = view_of(self);
  if (!v) return to_error(not_serving());
  if (auto s = load_prepared(self, *v); !s) return to_error(s);
  std::vector<hash128> ids;
  std::vector<std::uint32_t> coordinators;
  std::uint64_t now = st.config.clock();
  for (const auto& [id, coordinator] : st.prepared.in_doubt()) {
    auto since = st.prepared_since.find(id);
    if (since != st.prepared_since.end() && now - since->second < older_than_ns) continue;
    ids.push_back(id);
    coordinators.push_back(coordinator);
  }
  return caf::result<std::vector<hash128>, std::vector<std::uint32_t>>(std::move(ids), std::move(coordinators));
}

}  // namespace magnetite::replication::replica_internal
