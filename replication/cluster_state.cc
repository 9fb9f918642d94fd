// state/ on a cluster: state_storage (actors/state_storage.h) through the
// cluster client, so state::records(cluster_client&) reads and commits at
// each shard's owner (docs/design/replication.md, 10).
//
// - read and read_range go to the owner, which confirms with a majority that
//   it still owns the shard before it answers (linearizable).
// - apply sends the conditional batch with a request id that every retry
//   keeps: a batch that took place is answered with its revision and not
//   applied again, whichever owner the retry reaches.
// - commit_across: not yet on a cluster (not_supported, nothing written).
#include "actors/caf_headers.h"  // before any other CAF header

#include "core/shard_routing.h"
#include "engine/state_space.h"
#include "replication/cluster_client_impl.h"

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
      self->request(r, t, replication::srange_atom::value, f, e, static_cast<std::uint64_t>(limit), backward)
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
    std::vector<batch_op> ops;
    ops.reserve(writes.size());
    for (auto& w : writes)
      ops.push_back({std::move(w.key), w.value.has_value(), std::move(w.value).value_or(std::string()),
                     w.ttl ? w.ttl->count() : 0});
    auto rid = c_.next_request();
    cas_outcome out;
    status s = c_.call(
        shard, true,
        [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
          status got;
          self->request(r, t, apply_atom::value, checks, ops, rid)
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
        },
        d);
    if (!s) return s;
    return out;
  }

  result<transaction_outcome> commit_across(std::vector<transaction_part>, std::optional<deadline>) override {
    return status::make(
        status_code::not_supported, status_category::permanent,
        "a transaction across shards is not supported on a replicated cluster yet (docs/design/replication.md, 10): "
        "nothing was written");
  }

 private:
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
