// state/ on a cluster: state_storage (actors/state_storage.h) through the
// cluster client, so state::records(cluster_client&) reads and commits at
// each shard's owner (docs/design/replication.md, 10).
//
// - read and read_range go to the owner, which confirms with a majority that
//   it still owns the shard before it answers (linearizable).
// - apply sends the conditional batch with a request id that every retry
//   keeps: a batch that took place is answered with its revision and not
//   applied again, whichever owner the retry reaches.
// - commit_across drives a transaction across shards (design, 10): every
//   participant but the lowest shard prepares; the lowest (the coordinator)
//   checks, writes and decides `commit` in one batch; the others finish;
//   the coordinator forgets. Each message is idempotent at the owner, so
//   every retry is safe.
// - A conflict an owner answers as an error is a key held by a transaction
//   across shards: the call then resolves the transactions prepared on that
//   shard longer than resolve_after ago (presumed abort) before it answers
//   the conflict, so the caller's next attempt finds the key free.
#include <algorithm>

#include "actors/caf_headers.h"  // before any other CAF header

#include "core/shard_routing.h"
#include "engine/state_space.h"
#include "replication/cluster_client_impl.h"
#include "replication/request_within.h"

namespace magnetite {

namespace {

using replication::replica_actor;

// Reads of one shard at its owner, each confirmed on its own.
class owner_reads final : public state_view {
 public:
  owner_reads(cluster_client::impl& c, std::size_t shard) : c_(c), shard_(shard) {}

  result<std::optional<std::string>> read(std::string_view key) const override {
    MAGNETITE_TRY(state_space::check_key(key));
    return c_.read_at_owner(shard_, replication::sread_atom::value, std::string(key));
  }

  result<state_range> read_range(std::string_view from, std::string_view to, std::size_t limit,
                                 bool backward) const override {
    state_range out;
    std::string f(from), e(to);
    status s = c_.call(shard_, false, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
      status got;
      replication::request_within(self, r, t, replication::srange_atom::value, f, e, static_cast<std::uint64_t>(limit),
                                  backward)
          .receive(
              [&](std::vector<std::string>& keys, std::vector<std::string>& values, bool more, std::string& resume) {
                out.entries.clear();
                for (std::size_t i = 0; i < keys.size() && i < values.size(); ++i)
                  out.entries.emplace_back(std::move(keys[i]), std::move(values[i]));
                out.resume = more ? std::optional<std::string>(std::move(resume)) : std::nullopt;
              },
              [&](caf::error& err) { got = to_status(err); });
      return got;
    });
    if (!s) return s;
    return out;
  }

 private:
  cluster_client::impl& c_;
  std::size_t shard_;
};

class cluster_state final : public state_storage {
 public:
  explicit cluster_state(cluster_client::impl& c) : c_(c) {}

  std::size_t shard_of(std::string_view routing_key) const override {
    return shard_for(routing_key, c_.cluster.shards);
  }

  result<std::shared_ptr<const state_view>> pin(std::size_t shard) override {
    MAGNETITE_TRY(check_shard(shard));
    return std::shared_ptr<const state_view>(std::make_shared<owner_reads>(c_, shard));
  }

  result<cas_outcome> apply(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                            std::optional<deadline> d) override {
    MAGNETITE_TRY(check_shard(shard));
    MAGNETITE_TRY(state_space::check_batch(checks, writes));
    if (d && clock_type::now() >= *d)
      return status::make(status_code::timeout, status_category::transient,
                          "deadline passed before the request was sent");
    auto ops = ops_of(std::move(writes));
    auto rid = c_.next_request();
    cas_outcome out;
    status s = call_or_resolve(shard, d, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
      status got;
      replication::request_within(self, r, t, apply_atom::value, checks, ops, rid)
          .receive(
              [&](bool applied, std::uint64_t revision, std::uint32_t failed_check, std::uint64_t found) {
                out = cas_outcome();
                out.swapped = applied;
                out.revision = revision;
                if (!applied) {
                  out.failed_check = failed_check;
                  out.found = found;
                }
              },
              [&](caf::error& e) { got = to_status(e); });
      return got;
    });
    if (!s) return s;
    return out;
  }

  result<transaction_outcome> commit_across(std::vector<transaction_part> parts, std::optional<deadline> d) override {
    for (const auto& p : parts) {
      MAGNETITE_TRY(check_shard(p.shard));
      MAGNETITE_TRY(state_space::check_batch(p.checks, p.writes));
      for (const auto& w : p.writes)
        if (w.ttl) return status::invalid_argument("a write of a transaction across shards takes no ttl");
    }
    if (d && clock_type::now() >= *d)
      return status::make(status_code::timeout, status_category::transient,
                          "deadline passed before the transaction was sent");
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.shard < b.shard; });
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (i > 0 && parts[i].shard == parts[i - 1].shard)
        return status::invalid_argument(fmt::format("two parts of one transaction on shard {}", parts[i].shard));
    if (parts.empty()) return status::invalid_argument("a transaction across shards needs one part at least");
    hash128 id = random_hash128();
    auto coordinator = static_cast<std::uint32_t>(parts[0].shard);
    std::vector<std::uint32_t> participants;
    std::vector<std::vector<batch_op>> ops;
    for (auto& p : parts) {
      participants.push_back(static_cast<std::uint32_t>(p.shard));
      ops.push_back(ops_of(std::move(p.writes)));
    }
    // Nothing was decided `commit` (no txcommit went out): every prepare is
    // dropped, now if we can, else by whoever meets its hold later.
    std::vector<std::size_t> prepared;
    auto abort_prepared = [&] {
      bool commit = true;
      if (decide(coordinator, id, false, participants, commit).is_ok() && !commit)
        for (auto i : prepared) (void)finish(parts[i].shard, id, false);
    };
    transaction_outcome out;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      bool ok = false;
      std::uint32_t failed = 0;
      std::uint64_t found = 0;
      status s = call_or_resolve(parts[i].shard, d, [&](caf::scoped_actor& self, replica_actor& r, auto t) {
        status got;
        replication::request_within(self, r, t, tx_prepare_atom::value, id, coordinator, parts[i].checks, ops[i])
            .receive(
                [&](bool p, std::uint32_t f, std::uint64_t x) {
                  ok = p;
                  failed = f;
                  found = x;
                },
                [&](caf::error& e) { got = to_status(e); });
        return got;
      });
      if (!s || !ok) {
        abort_prepared();
        if (!s) return nothing_written(s);
        out.failed_part = i;
        out.failed_check = failed;
        out.found = found;
        return out;
      }
      prepared.push_back(i);
    }
    bool committed = false;
    std::uint32_t failed = 0;
    std::uint64_t found = 0, revision = 0;
    status s = call_or_resolve(parts[0].shard, d, [&](caf::scoped_actor& self, replica_actor& r, auto t) {
      status got;
      replication::request_within(self, r, t, tx_commit_atom::value, id, parts[0].checks, ops[0], participants)
          .receive(
              [&](bool c, std::uint32_t f, std::uint64_t x, std::uint64_t rev) {
                committed = c;
                failed = f;
                found = x;
                revision = rev;
              },
              [&](caf::error& e) { got = to_status(e); });
      return got;
    });
    if (!s) {
      if (s.category() == status_category::transient) {
        abort_prepared();
        return nothing_written(s);
      }
      return status::make(s.code(), status_category::ambiguous,
                          fmt::format("the coordinator's decision is unknown ({}): the transaction may or may not "
                                      "commit; a later call that meets its keys settles it",
                                      s.message()));
    }
    if (!committed) {
      if (failed == UINT32_MAX) {  // a resolver decided abort first
        for (auto i : prepared) (void)finish(parts[i].shard, id, false);
        return status::make(status_code::conflict, status_category::transient,
                            "conflict: the transaction was aborted by a resolver while it committed; nothing was "
                            "written");
      }
      abort_prepared();
      out.failed_part = 0;
      out.failed_check = failed;
      out.found = found;
      return out;
    }
    out.committed = true;
    out.revision = revision;
    bool all_finished = true;
    for (auto i : prepared) {
      auto r = finish(parts[i].shard, id, true);
      if (r)
        out.revision = std::max(out.revision, *r);
      else
        all_finished = false;  // committed all the same: its hold is settled by the next call that meets it
    }
    if (all_finished)
      (void)c_.call(coordinator, true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
        status got;
        replication::request_within(self, r, t, tx_forget_atom::value, id)
            .receive([](ok_atom) {}, [&](caf::error& e) { got = to_status(e); });
        return got;
      });
    return out;
  }

 private:
  static std::vector<batch_op> ops_of(std::vector<batch_write> writes) {
    std::vector<batch_op> out;
    out.reserve(writes.size());
    for (auto& w : writes)
      out.push_back({std::move(w.key), w.value.has_value(), std::move(w.value).value_or(std::string()),
                     w.ttl ? w.ttl->count() : 0});
    return out;
  }

  // A failure before any decision `commit` could exist: nothing was written.
  static status nothing_written(const status& s) {
    if (s.category() == status_category::transient) return s;
    return status::make(s.code(), status_category::transient,
                        fmt::format("{}; the transaction was aborted: nothing was written", s.message()));
  }

  // c_.call, and on a conflict (a key held by a transaction across shards)
  // the stale transactions of that shard resolved before it is answered.
  template <class Attempt>
  status call_or_resolve(std::size_t shard, std::optional<deadline> d, Attempt attempt) {
    status s = c_.call(shard, true, attempt, d);
    if (s.code() == status_code::conflict) resolve_stale(shard);
    return s;
  }

  // Every transaction prepared on `shard` longer than resolve_after ago:
  // the decision that stands at its coordinator (abort, written first, if
  // there is none), then its finish here. Best effort: a failure leaves it
  // for the next call that meets it.
  void resolve_stale(std::size_t shard) {
    std::vector<hash128> ids;
    std::vector<std::uint32_t> coordinators;
    auto older = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(c_.options.resolve_after).count());
    status s = c_.call(shard, false, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
      status got;
      replication::request_within(self, r, t, replication::tx_stale_atom::value, older)
          .receive(
              [&](std::vector<hash128>& i, std::vector<std::uint32_t>& c) {
                ids = std::move(i);
                coordinators = std::move(c);
              },
              [&](caf::error& e) { got = to_status(e); });
      return got;
    });
    if (!s) return;
    for (std::size_t k = 0; k < ids.size() && k < coordinators.size(); ++k) {
      bool commit = false;
      if (coordinators[k] >= c_.cluster.shards || !decide(coordinators[k], ids[k], false, {}, commit)) continue;
      (void)finish(shard, ids[k], commit);
    }
  }

  // The decision that stands at `coordinator`'s owner, in `standing`.
  status decide(std::size_t coordinator, const hash128& id, bool commit, const std::vector<std::uint32_t>& participants,
                bool& standing) {
    return c_.call(coordinator, true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
      status got;
      replication::request_within(self, r, t, tx_decide_atom::value, id, commit, participants)
          .receive([&](bool c) { standing = c; }, [&](caf::error& e) { got = to_status(e); });
      return got;
    });
  }

  result<std::uint64_t> finish(std::size_t shard, const hash128& id, bool commit) {
    std::uint64_t revision = 0;
    status s = c_.call(shard, true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
      status got;
      replication::request_within(self, r, t, tx_finish_atom::value, id, commit)
          .receive([&](std::uint64_t rev) { revision = rev; }, [&](caf::error& e) { got = to_status(e); });
      return got;
    });
    if (!s) return s;
    return revision;
  }

  status check_shard(std::size_t shard) const {
    if (shard >= c_.cluster.shards)
      return status::invalid_argument(fmt::format("no shard {}: the cluster has {}", shard, c_.cluster.shards));
    return status::ok();
  }

  cluster_client::impl& c_;
};

}  // namespace

std::unique_ptr<state_storage> make_cluster_state(cluster_client::impl& c) {
  return std::make_unique<cluster_state>(c);
}

}  // namespace magnetite
