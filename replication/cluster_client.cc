// The cluster client (include/magnetite/cluster_client.h): routing to the
// owner, following it when it moves, and retries that keep their request id.
#include "magnetite/cluster_client.h"

#include <limits>

#include "actors/caf_headers.h"  // before any other CAF header

#include "core/env.h"
#include "core/shard_routing.h"
#include "engine/state_space.h"
#include "replication/cluster_client_impl.h"
#include "replication/request_within.h"

namespace magnetite {

using namespace replication;
using clock_type = std::chrono::steady_clock;

cluster_client::cluster_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
cluster_client::~cluster_client() = default;

result<std::unique_ptr<cluster_client>> cluster_client::connect(cluster_client_options options) {
  if (options.call_timeout.count() <= 0 || options.attempt_timeout.count() <= 0 || options.resolve_after.count() <= 0)
    return status::invalid_argument("cluster client: call_timeout, attempt_timeout and resolve_after must be positive");
  if (options.max_calls_in_flight == 0)
    return status::invalid_argument("cluster client: max_calls_in_flight must be at least 1");
  auto text = read_whole_file(env::posix(), options.cluster_file);
  if (!text)
    return status::invalid_argument(fmt::format("cluster file {}: {}", options.cluster_file, text.error().message()));
  auto cluster = cluster_file::parse(*text);
  if (!cluster)
    return status::invalid_argument(
        fmt::format("cluster file {}: {}", options.cluster_file, cluster.error().message()));
  auto p = std::make_unique<impl>();
  p->cluster = std::move(*cluster);
  configure_system(p->cfg);
  std::shared_ptr<const tls_context> tls;
  if (p->cluster.tls) {
    if (options.tls_certificate.empty() || options.tls_key.empty() || options.tls_ca.empty())
      return status::invalid_argument(fmt::format(
          "cluster file {} is over TLS (no `tls off` line): the client needs a certificate, its key and the "
          "cluster's CA",
          options.cluster_file));
    auto ctx = tls_context::load(tls_files{options.tls_certificate, options.tls_key, options.tls_ca});
    if (!ctx) return ctx.error();
    tls = std::move(*ctx);
  }
  p->calls = std::make_unique<admission_budget>(std::numeric_limits<std::size_t>::max(), options.max_calls_in_flight);
  p->options = std::move(options);
  p->sys = std::make_unique<caf::actor_system>(p->cfg);
  if (tls) {
    auto net = guarded_network::start(*p->sys, std::move(tls), connection_limits{});
    if (!net) return net.error();
    p->network = std::move(*net);
  }
  p->owners = std::make_unique<std::atomic<std::uint32_t>[]>(p->cluster.shards);
  for (std::size_t s = 0; s < p->cluster.shards; ++s) p->owners[s].store(0);
  p->state = make_cluster_state(*p);
  return std::unique_ptr<cluster_client>(new cluster_client(std::move(p)));
}

std::size_t cluster_client::shards() const noexcept { return impl_->cluster.shards; }
std::size_t cluster_client::shard_of(std::string_view key) const noexcept {
  return shard_for(key, impl_->cluster.shards);
}
std::uint32_t cluster_client::owner_of(std::size_t shard) const noexcept {
  return shard < impl_->cluster.shards ? impl_->owners[shard].load() : 0;
}
std::uint64_t cluster_client::retries() const noexcept { return impl_->retried.load(); }
admission_stats cluster_client::calls() const {
  auto n = impl_->calls->now();
  return {n.admitted, n.waited, n.refused, n.waiting, n.requests, n.bytes, impl_->calls->max_requests(), 0};
}
state_storage& cluster_client::state_store() noexcept { return *impl_->state; }

namespace {

std::int64_t ttl_ns(std::optional<std::chrono::nanoseconds> ttl) { return ttl ? ttl->count() : 0; }

status check_ttl(std::optional<std::chrono::nanoseconds> ttl) {
  if (ttl && ttl->count() <= 0) return status::invalid_argument("a TTL must be positive");
  return status::ok();
}

}  // namespace

status cluster_client::put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(state_space::check_user_value(value));
  MAGNETITE_TRY(check_ttl(ttl));
  auto rid = impl_->next_request();
  std::string k(key), v(value);
  return impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
    status s;
    request_within(self, r, t, put_atom::value, k, v, ttl_ns(ttl), rid)
        .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
    return s;
  });
}

status cluster_client::del(std::string_view key) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  auto rid = impl_->next_request();
  std::string k(key);
  return impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
    status s;
    request_within(self, r, t, del_atom::value, k, rid)
        .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
    return s;
  });
}

result<std::optional<std::string>> cluster_client::get(std::string_view key) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  return impl_->read_at_owner(shard_of(key), get_atom::value, std::string(key));
}

result<cas_outcome> cluster_client::cas(std::string_view key, std::optional<std::string_view> expected,
                                        std::optional<std::string_view> desired,
                                        std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  for (const auto& v : {expected, desired}) {
    if (v) {
      MAGNETITE_TRY(state_space::check_user_value(*v));
    }
  }
  MAGNETITE_TRY(check_ttl(ttl));
  auto rid = impl_->next_request();
  std::string k(key), e(expected.value_or("")), d(desired.value_or(""));
  cas_outcome out;
  status s =
      impl_->call(shard_of(key), true, [&](caf::scoped_actor& self, replica_actor& r, std::chrono::milliseconds t) {
        status got;
        request_within(self, r, t, cas_atom::value, k, expected.has_value(), e, desired.has_value(), d, ttl_ns(ttl),
                       rid)
            .receive(
                [&](bool swapped, bool has_current, std::string& current) {
                  out = swapped ? cas_outcome::applied()
                                : cas_outcome::refused(has_current ? std::optional<std::string>(std::move(current))
                                                                   : std::nullopt);
                },
                [&](caf::error& err) { got = to_status(err); });
        return got;
      });
  if (!s) return s;
  return out;
}

}  // namespace magnetite
