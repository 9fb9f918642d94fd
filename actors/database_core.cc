#include "actors/database_core.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "core/byte_pacer.h"
#include "core/limits.h"
#include "core/shard_routing.h"
#include "engine/data_directory.h"
#include "engine/database_options.h"
#include "engine/keyspace.h"
#include "engine/prepared_transactions.h"
#include "engine/state_space.h"
#include "ttl/envelope.h"

namespace magnetite {

database_core::database_core(core_options options) : options_(std::move(options)) {}

result<std::unique_ptr<database_core>> database_core::open(core_options options) {
  MAGNETITE_TRY(options.validate());
  std::unique_ptr<database_core> db(new database_core(std::move(options)));
  MAGNETITE_TRY(db->start());
  return db;
}

status database_core::start() {
  fs_ = options_.fs ? options_.fs : &env::posix();
  MAGNETITE_TRY(check_data_directory(*fs_, options_.dir));
  MAGNETITE_TRY(fs_->create_dir(options_.dir));
  auto lock = lock_data_directory(*fs_, options_.dir);
  if (!lock) return lock.error();
  lock_ = std::move(*lock);
  for (const auto& w : exposure_warnings(*fs_, options_.dir)) {
    if (options_.warn)
      options_.warn(w);
    else
      fmt::print(stderr, "magnetite: warning: {}\n", w);
  }
  // Read under the lock: without a count, an existing database keeps its own.
  if (!options_.shards) {
    auto recorded = read_manifest(*fs_, options_.dir);
    if (!recorded) return recorded.error();
    options_.shards = recorded->value_or(database_options::default_shards());
    MAGNETITE_TRY(check_memory_budget(options_.memory_budget, *options_.shards));
  }
  MAGNETITE_TRY(check_manifest(*fs_, options_.dir, *options_.shards));
  auto checkpoints = checkpoint_log::open(*fs_, options_.dir, *options_.shards, options_.retained_checkpoints);
  if (!checkpoints) return checkpoints.error();
  checkpoints_.emplace(std::move(*checkpoints));
  auto tags = version_tags::open(*fs_, options_.dir, *options_.shards);
  if (!tags) return tags.error();
  tags_.emplace(std::move(*tags));

  if (options_.system) {
    system_ = options_.system;
  } else {
    own_config_ = std::make_unique<caf::actor_system_config>();
    own_config_->set("scheduler.max-threads", std::max(2u, std::thread::hardware_concurrency()));
    own_config_->set("work-stealing.aggressive-poll-attempts", options_.worker_spin_polls);
    own_system_ = std::make_unique<caf::actor_system>(*own_config_);
    system_ = own_system_.get();
  }
  supervision_ = std::make_shared<shard_supervision>();
  supervision_->handles.resize(*options_.shards);
  supervision_->restarts.assign(*options_.shards, 0);
  std::vector<shard_actor_config> configs;
  for (std::size_t i = 0; i < *options_.shards; ++i) {
    slots_.push_back(std::make_shared<shard_slot>());
    slots_.back()->admission = std::make_unique<admission_budget>(options_.admission_bytes / *options_.shards,
                                                                  options_.admission_requests / *options_.shards);
    shard_actor_config c;
    c.fs = fs_;
    c.dir = shard_dir(options_.dir, i);
    c.options = options_.shard;
    if (options_.memory_budget) {
      // A shard's share: three quarters for its node caches, an eighth for
      // each of its two memtables (the active one and the one a checkpoint
      // is writing). Small memtables cost little since a checkpoint writes
      // a sorted run rather than rewriting the tree (docs/benchmarks.md,
      // "Sorted runs").
      std::size_t share = *options_.memory_budget / *options_.shards;
      c.options.cache_bytes = share / 4 * 3;
      c.options.checkpoint_bytes = share / 8;
    }
    // The database's own actor system runs CAF's real scheduler: a
    // checkpoint's thread may tell the actor when it is done.
    c.background_checkpoints = true;
    c.slot = slots_.back();
    c.index = i;
    c.before_write = options_.before_write;
    if (options_.reclaim_began) c.reclaim_began = [hook = options_.reclaim_began, i] { hook(i); };
    configs.push_back(std::move(c));
  }
  {
    std::lock_guard lk(checkpoints_mu_);
    publish_retained();
  }
  supervisor_ = spawn_shard_supervisor(*system_, supervision_, std::move(configs), options_.max_restarts,
                                       options_.restart_window, options_.restart_backoff);
  {
    caf::scoped_actor self{*system_};
    bool ready = false;
    self->request(supervisor_, caf::infinite, get_atom::value)
        .receive([&](ok_atom) { ready = true; }, [&](caf::error&) {});
    if (!ready) return status::failed("the shard supervisor did not start");
  }
  // Open is done when every shard has booted (or failed to): a get right after
  // open must not see an empty slot.
  for (std::size_t i = 0; i < *options_.shards; ++i) {
    auto r = ask<shard_stats>(i, stats_atom::value);
    if (!r) return r.error();
  }
  transactions_ = std::make_unique<transaction_coordinator>(*system_, supervision_);
  if (options_.replicated) return status::ok();
  return resolve_transactions();
}

// A process that died inside a transaction across shards left prepares (and
// perhaps a decision) in the logs: they are finished before anyone reads.
status database_core::resolve_transactions() {
  std::vector<std::vector<std::pair<hash128, std::uint32_t>>> prepared(slots_.size());
  std::vector<std::vector<hash128>> decided(slots_.size());
  bool every_shard_up = true;
  bool any = false;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto view = serving_view(i);
    if (!view) {
      every_shard_up = false;
      continue;
    }
    auto held = prepared_transactions::load(**view);
    if (!held) return held.error();
    prepared[i] = held->in_doubt();
    auto ids = transaction_records::ids_in(**view, transaction_records::decision_prefix);
    if (!ids) return ids.error();
    decided[i] = std::move(*ids);
    any = any || !prepared[i].empty() || !decided[i].empty();
  }
  if (!any) return status::ok();
  return transactions_->resolve_at_open(prepared, decided, every_shard_up);
}

database_core::~database_core() {
  transactions_.reset();  // its background resolution asks the shards
  if (supervisor_) {
    caf::scoped_actor self{*system_};
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      self->request(shard_handle(i), caf::infinite, shutdown_atom::value).receive([](ok_atom) {}, [](caf::error&) {});
    }
    self->send_exit(supervisor_, caf::exit_reason::user_shutdown);
    self->wait_for(supervisor_);
  }
  slots_.clear();
  if (own_system_) own_system_.reset();
}

std::size_t database_core::shard_of(std::string_view routing_key) const noexcept {
  return shard_for(routing_key, slots_.size());
}

result<std::optional<std::size_t>> database_core::recorded_shards(const std::string& dir, env* fs) {
  env& e = fs ? *fs : env::posix();
  MAGNETITE_TRY(check_data_directory(e, dir));
  return read_manifest(e, dir);
}

shard_engine_actor database_core::shard_handle(std::size_t i) const {
  std::lock_guard lk(supervision_->mu);
  return supervision_->handles.at(i);
}

template <class... R, class... Ts>
result<std::tuple<R...>> database_core::ask(std::size_t shard, Ts&&... xs) {
  caf::scoped_actor self{*system_};
  result<std::tuple<R...>> out = status::io_error("no reply", status_category::transient);
  self->request(shard_handle(shard), caf::infinite, std::forward<Ts>(xs)...)
      .receive([&](R&... r) { out = std::tuple<R...>(std::move(r)...); }, [&](caf::error& e) { out = to_status(e); });
  return out;
}

status check_routing(std::optional<std::string_view> routing) {
  if (!routing) return status::ok();
  if (routing->empty()) return status::invalid_argument("routing key is empty");
  if (routing->size() > limits::max_user_key_bytes)
    return status::invalid_argument(fmt::format("routing key of {} bytes exceeds the limit of {} bytes",
                                                routing->size(), limits::max_user_key_bytes));
  return status::ok();
}

result<std::optional<std::string>> database_core::get(std::string_view key, std::optional<std::string_view> routing) {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(check_routing(routing));
  auto view = serving_view(shard_of(routing ? *routing : key));
  if (!view) return view.error();
  return (*view)->get(key, options_.shard.clock());
}

result<std::shared_ptr<const read_view>> database_core::serving_view(std::size_t shard) const {
  const shard_slot& slot = *slots_[shard];
  auto view = slot.view.load();
  if (view) return view;
  if (auto e = slot.error.load()) return *e;
  return status::io_error("shard is not serving yet", status_category::transient);
}

namespace {
// What a request counts against its shard's admission budget.
std::size_t admission_cost(const host_request& r) {
  std::size_t bytes = admission_request_overhead + r.key.size() + r.value.size() + r.expected.size();
  for (const auto& op : r.ops) bytes += op.key.size() + op.value.size();
  for (const auto& c : r.checks) bytes += c.key.size() + sizeof c.revision;
  return bytes;
}

status refused_busy(std::size_t shard, const admission_budget& b) {
  return status::busy(
      fmt::format("shard {} is full: its admission limit of {} requests and {} bytes not yet "
                  "durable is reached; nothing was written",
                  shard, b.max_requests(), b.max_bytes()));
}
}  // namespace

result<cas_outcome> database_core::submit(prepared p) {
  auto& budget = *slots_[p.shard]->admission;
  std::size_t cost = admission_cost(*p.request);
  budget.admit(cost, std::nullopt);
  auto w = std::make_shared<host_wait>();
  auto& r = p.request;
  r->waiter = w;
  auto handle = shard_handle(p.shard);
  // A send to no actor would keep `r` (and its answer) in this frame: never wait on it.
  if (!handle) {
    budget.release(cost);
    return status::io_error("shard unavailable: it has no actor", status_category::transient);
  }
  caf::anon_send(handle, host_atom::value, std::move(r));
  bool alone = blocked_writers_.fetch_add(1, std::memory_order_relaxed) == 0;
  w->wait(alone ? options_.writer_spin : std::chrono::microseconds(0));
  blocked_writers_.fetch_sub(1, std::memory_order_relaxed);
  budget.release(cost);
  if (!w->result()) return w->result();
  return w->outcome();
}

namespace {
host_request_ptr make_request(host_request::kind op, std::string_view key,
                              std::optional<std::chrono::nanoseconds> ttl) {
  auto r = std::make_shared<host_request>();
  r->op = op;
  r->key = std::string(key);
  r->ttl_ns = ttl ? static_cast<std::int64_t>(ttl->count()) : 0;
  return r;
}

// The answer of a write whose caller wants the outcome (cas, apply).
std::function<void(const status&, const cas_outcome&)> with_outcome(std::function<void(result<cas_outcome>)> done) {
  return [done = std::move(done)](const status& s, const cas_outcome& o) {
    if (s)
      done(o);
    else
      done(s);
  };
}

// The shard checks these too; checked here, bad input is answered on the
// calling thread and never reaches a shard (docs/embedding.md).
status check_ttl(std::optional<std::chrono::nanoseconds> ttl) {
  if (ttl && ttl->count() <= 0) return status::invalid_argument(fmt::format("ttl of {} ns: must be > 0", ttl->count()));
  return status::ok();
}
}  // namespace

result<database_core::prepared> database_core::prepare_put(std::string_view key, std::string_view value,
                                                           std::optional<std::chrono::nanoseconds> ttl,
                                                           std::optional<std::string_view> routing) const {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(state_space::check_user_value(value));
  MAGNETITE_TRY(check_ttl(ttl));
  MAGNETITE_TRY(check_routing(routing));
  auto r = make_request(host_request::kind::put, key, ttl);
  r->value = std::string(value);
  return prepared{shard_of(routing ? *routing : key), std::move(r)};
}

result<database_core::prepared> database_core::prepare_del(std::string_view key,
                                                           std::optional<std::string_view> routing) const {
  MAGNETITE_TRY(state_space::check_user_key(key));
  MAGNETITE_TRY(check_routing(routing));
  return prepared{shard_of(routing ? *routing : key), make_request(host_request::kind::del, key, std::nullopt)};
}

result<database_core::prepared> database_core::prepare_cas(std::string_view key,
                                                           std::optional<std::string_view> expected,
                                                           std::optional<std::string_view> desired,
                                                           std::optional<std::chrono::nanoseconds> ttl,
                                                           std::optional<std::string_view> routing) const {
  MAGNETITE_TRY(state_space::check_user_key(key));
  if (desired) MAGNETITE_TRY(state_space::check_user_value(*desired));
  if (!desired && ttl) return status::invalid_argument("a delete takes no ttl");
  MAGNETITE_TRY(check_ttl(ttl));
  MAGNETITE_TRY(check_routing(routing));
  auto r = make_request(host_request::kind::cas, key, ttl);
  r->has_expected = expected.has_value();
  r->expected = std::string(expected.value_or(""));
  r->has_desired = desired.has_value();
  r->value = std::string(desired.value_or(""));
  return prepared{shard_of(routing ? *routing : key), std::move(r)};
}

result<database_core::prepared> database_core::prepare_batch(std::span<const batch_write> writes,
                                                             std::optional<std::string_view> routing) const {
  if (writes.empty()) return status::invalid_argument("batch is empty");
  if (writes.size() > limits::max_batch_mutations)
    return status::invalid_argument(
        fmt::format("batch of {} mutations exceeds the limit of {}", writes.size(), limits::max_batch_mutations));
  MAGNETITE_TRY(check_routing(routing));
  std::size_t target = shard_of(routing ? *routing : writes.front().key);
  auto r = make_request(host_request::kind::batch, writes.front().key, std::nullopt);
  for (const auto& w : writes) {
    MAGNETITE_TRY(state_space::check_user_key(w.key));
    if (w.value)
      MAGNETITE_TRY(state_space::check_user_value(*w.value));
    else if (w.ttl)
      return status::invalid_argument(fmt::format("batch write {}: a delete takes no ttl", r->ops.size()));
    MAGNETITE_TRY(check_ttl(w.ttl));
    if (!routing && shard_of(w.key) != target)
      return status::invalid_argument(
          fmt::format("batch keys route to different shards ({} and {}): pass a routing key to keep them together",
                      target, shard_of(w.key)));
    r->ops.push_back({w.key, w.value.has_value(), w.value.value_or(std::string()), w.ttl ? w.ttl->count() : 0});
  }
  return prepared{target, std::move(r)};
}

status database_core::check_state_batch(std::size_t shard, std::span<const state_check> checks,
                                        std::span<const batch_write> writes) const {
  if (shard >= slots_.size())
    return status::invalid_argument(fmt::format("no shard {}: the database has {}", shard, slots_.size()));
  return state_space::check_batch(checks, writes);
}

result<database_core::prepared> database_core::prepare_apply(std::size_t shard, std::vector<state_check> checks,
                                                             std::span<const batch_write> writes) const {
  MAGNETITE_TRY(check_state_batch(shard, checks, writes));
  auto r = make_request(host_request::kind::apply, {}, std::nullopt);
  r->checks = std::move(checks);
  r->ops.reserve(writes.size());
  for (const auto& w : writes)
    r->ops.push_back({w.key, w.value.has_value(), w.value.value_or(std::string()), w.ttl ? w.ttl->count() : 0});
  return prepared{shard, std::move(r)};
}

namespace {
// A published view as state/ reads it: live values by the shard's clock.
class published_state final : public state_view {
 public:
  published_state(std::shared_ptr<const read_view> v, std::function<std::uint64_t()> clock)
      : v_(std::move(v)), clock_(std::move(clock)) {}
  result<std::optional<std::string>> read(std::string_view key) const override { return v_->get(key, clock_()); }
  result<state_range> read_range(std::string_view from, std::string_view to, std::size_t limit,
                                 bool backward) const override {
    return v_->live_range(from, to, clock_(), limit, backward);
  }

 private:
  std::shared_ptr<const read_view> v_;
  std::function<std::uint64_t()> clock_;
};
}  // namespace

result<std::shared_ptr<const state_view>> database_core::pin(std::size_t shard) {
  if (shard >= slots_.size())
    return status::invalid_argument(fmt::format("no shard {}: the database has {}", shard, slots_.size()));
  auto view = serving_view(shard);
  if (!view) return view.error();
  return std::shared_ptr<const state_view>(std::make_shared<published_state>(std::move(*view), options_.shard.clock));
}

result<cas_outcome> database_core::apply(std::size_t shard, std::vector<state_check> checks,
                                         std::vector<batch_write> writes, std::optional<deadline> d) {
  if (d && std::chrono::steady_clock::now() >= *d)
    return status::make(status_code::timeout, status_category::transient,
                        "deadline passed before the request was sent");
  auto p = prepare_apply(shard, std::move(checks), writes);
  if (!p) return p.error();
  if (!d) return submit(std::move(*p));
  // A waiter that may leave cannot sit in a group's relay tree (its children
  // would never be woken): a timed request is answered alone, through `done`,
  // into a state that outlives the caller's wait.
  struct answer {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    status st;
    cas_outcome outcome;
  };
  auto a = std::make_shared<answer>();
  submit_async(std::move(*p), d, [a](const status& s, const cas_outcome& o) {
    std::lock_guard lk(a->mu);
    a->st = s;
    a->outcome = o;
    a->ready = true;
    a->cv.notify_one();
  });
  std::unique_lock lk(a->mu);
  if (!a->cv.wait_until(lk, *d, [&] { return a->ready; }))
    return status::make(status_code::timeout, status_category::ambiguous,
                        "deadline passed while waiting: the request may still be applied");
  if (!a->st) return a->st;
  return a->outcome;
}

void database_core::apply_async(std::size_t shard, std::vector<state_check> checks, std::vector<batch_write> writes,
                                std::function<void(result<cas_outcome>)> done) {
  submit_async(prepare_apply(shard, std::move(checks), writes), std::nullopt, with_outcome(std::move(done)));
}

result<transaction_outcome> database_core::commit_across(std::vector<transaction_part> parts,
                                                         std::optional<deadline> d) {
  if (d && std::chrono::steady_clock::now() >= *d)
    return status::make(status_code::timeout, status_category::transient,
                        "deadline passed before the transaction was sent");
  for (const auto& p : parts) {
    MAGNETITE_TRY(check_state_batch(p.shard, p.checks, p.writes));
    for (const auto& w : p.writes)
      if (w.ttl) return status::invalid_argument("a write of a transaction across shards takes no ttl");
  }
  return transactions_->commit(std::move(parts), d);
}

namespace {
status without_outcome(const result<cas_outcome>& r) { return r ? status::ok() : r.error(); }
}  // namespace

status database_core::put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                          std::optional<std::string_view> routing) {
  auto p = prepare_put(key, value, ttl, routing);
  return p ? without_outcome(submit(std::move(*p))) : p.error();
}

status database_core::del(std::string_view key, std::optional<std::string_view> routing) {
  auto p = prepare_del(key, routing);
  return p ? without_outcome(submit(std::move(*p))) : p.error();
}

result<cas_outcome> database_core::cas(std::string_view key, std::optional<std::string_view> expected,
                                       std::optional<std::string_view> desired,
                                       std::optional<std::chrono::nanoseconds> ttl,
                                       std::optional<std::string_view> routing) {
  auto p = prepare_cas(key, expected, desired, ttl, routing);
  if (!p) return p.error();
  return submit(std::move(*p));
}

status database_core::batch(std::span<const batch_write> writes, std::optional<std::string_view> routing) {
  auto p = prepare_batch(writes, routing);
  return p ? without_outcome(submit(std::move(*p))) : p.error();
}

status database_core::ingest(std::span<const std::pair<std::string_view, std::string_view>> sorted) {
  MAGNETITE_TRY(shard::check_ingest(sorted));
  // Each shard's part goes flat (shard::ingest): its keys and values back to
  // back in one string, and their sizes. Both are reserved at their full size
  // first: growing them by doubling (fresh pages and copies) cost more than
  // the shards' own work.
  std::vector<std::string> bytes(slots_.size());
  std::vector<std::vector<std::uint32_t>> sizes(slots_.size());
  std::vector<std::uint32_t> shard_at(sorted.size());
  std::vector<std::size_t> total(slots_.size()), count(slots_.size());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    std::size_t s = shard_at[i] = static_cast<std::uint32_t>(shard_of(sorted[i].first));
    total[s] += sorted[i].first.size() + sorted[i].second.size();
    ++count[s];
  }
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    bytes[s].reserve(total[s]);
    sizes[s].reserve(2 * count[s]);
  }
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& [k, v] = sorted[i];
    std::size_t s = shard_at[i];
    bytes[s].append(k);
    bytes[s].append(v);
    sizes[s].push_back(static_cast<std::uint32_t>(k.size()));
    sizes[s].push_back(static_cast<std::uint32_t>(v.size()));
  }
  // Every request is sent before any answer is awaited: the shards work at once.
  caf::scoped_actor self{*system_};
  using answer = caf::response_handle<caf::blocking_actor, caf::detail::type_list<hash128>, true>;
  std::vector<answer> asked;
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (!sizes[s].empty())
      asked.push_back(
          self->request(shard_handle(s), caf::infinite, ingest_atom::value, std::move(bytes[s]), std::move(sizes[s])));
  status out;
  for (auto& a : asked)
    a.receive([&](hash128&) {},
              [&](caf::error& e) {
                if (out.is_ok()) out = to_status(e);
              });
  return out;
}

std::size_t range_chunk_size(std::size_t limit) { return std::min<std::size_t>(std::max<std::size_t>(limit, 1), 256); }

result<std::vector<std::pair<std::string, std::string>>> first_entries(result<range_cursor> c, std::size_t limit) {
  if (!c) return c.error();
  std::vector<std::pair<std::string, std::string>> out;
  while (out.size() < limit) {
    auto more = c->next();
    if (!more) return more.error();
    if (!*more) break;
    out.emplace_back(c->key(), c->value());
  }
  return out;
}

range_cursor scan_views(std::vector<std::shared_ptr<const read_view>> views, std::string_view from, std::string_view to,
                        std::uint64_t now_ns, std::size_t chunk) {
  // Plain scans end where the state space begins (state_space::prefix).
  if (to.empty() || to > state_space::prefix) to = state_space::prefix;
  if (!to.empty() && to <= from) views.clear();
  return range_cursor(
      std::make_unique<merged_cursor>(std::move(views), std::string(from), std::string(to), now_ns, chunk));
}

result<std::vector<std::pair<std::string, std::string>>> database_core::range(std::string_view from,
                                                                              std::string_view to, std::size_t limit) {
  return first_entries(scan(from, to, range_chunk_size(limit)), limit);
}

result<range_cursor> database_core::scan(std::string_view from, std::string_view to, std::size_t chunk) {
  std::vector<std::shared_ptr<const read_view>> views;
  // An empty range reads no shard, so a shard that is down does not fail it.
  bool empty = !to.empty() && to <= from;
  for (std::size_t i = 0; i < slots_.size() && !empty; ++i) {
    auto v = serving_view(i);
    if (!v) return v.error();
    views.push_back(std::move(*v));
  }
  return scan_views(std::move(views), from, to, options_.shard.clock(), chunk);
}

namespace {
// Shard i's roots of the given checkpoints.
std::vector<hash128> roots_of_shard(const std::vector<checkpoint>& kept, std::size_t i) {
  std::vector<hash128> out;
  for (const auto& c : kept) out.push_back(c.roots.at(i));
  return out;
}
}  // namespace

result<database_core::commit_result> database_core::commit() {
  std::lock_guard ops(operations_mu_);
  return commit_holding_operations();
}

result<database_core::commit_result> database_core::commit_holding_operations() {
  // No reclamation cycle starts from a shard's checkpoint here until the line
  // naming its root is written and the root is in the shard's retained list.
  for (auto& slot : slots_) ++slot->held;
  struct release {
    database_core& db;
    ~release() {
      // Checkpoints during the hold started no cycle: the shards look again.
      for (std::size_t i = 0; i < db.slots_.size(); ++i) {
        --db.slots_[i]->held;
        caf::anon_send(db.shard_handle(i), rcheck_atom::value);
      }
    }
  } release_holds{*this};
  commit_result out;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto r = ask<hash128>(i, checkpoint_atom::value);
    if (!r) return r.error();
    out.roots.push_back(std::get<0>(*r));
  }
  out.combined = checkpoint_log::combine(out.roots);
  std::lock_guard lk(checkpoints_mu_);
  status appended = checkpoints_->append({out.combined, out.roots});
  publish_retained();
  MAGNETITE_TRY(appended);
  return out;
}

void database_core::publish_retained() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto roots = std::make_shared<std::vector<hash128>>(checkpoints_->roots_of(i));
    for (const auto& r : tags_->roots_of(i)) roots->push_back(r);
    slots_[i]->retained.store(std::move(roots));
  }
}

std::vector<checkpoint> database_core::checkpoints() const {
  std::lock_guard lk(checkpoints_mu_);
  return {checkpoints_->entries().begin(), checkpoints_->entries().end()};
}

std::vector<checkpoint> database_core::kept_versions() const {
  std::lock_guard lk(checkpoints_mu_);
  std::vector<checkpoint> out(checkpoints_->entries().begin(), checkpoints_->entries().end());
  for (const auto& [name, c] : tags_->entries()) out.push_back(c);
  return out;
}

std::optional<checkpoint> database_core::find_version(const hash128& combined) const {
  if (const checkpoint* c = checkpoints_->find(combined)) return *c;
  if (const checkpoint* c = tags_->find(combined)) return *c;
  return std::nullopt;
}

status database_core::unknown_version(const hash128& version) {
  return status::not_found(
      fmt::format("version {} is not the combined root of a retained checkpoint or a named version "
                  "(database::checkpoints and database::tags list them)",
                  version));
}

std::vector<version_tag> database_core::tags() const {
  std::lock_guard lk(checkpoints_mu_);
  std::vector<version_tag> out;
  for (const auto& [name, c] : tags_->entries()) out.push_back({name, c});
  return out;
}

result<hash128> database_core::resolve(std::string_view version) const {
  if (auto h = hash128::parse_hex(version)) return *h;
  MAGNETITE_TRY(version_tags::check_name(version));
  std::lock_guard lk(checkpoints_mu_);
  if (const checkpoint* c = tags_->find(version)) return c->combined;
  return status::not_found(fmt::format(
      "{:?} is neither a combined root (32 hex digits, as commit prints it) nor a tag's name (tags lists them)",
      version));
}

result<checkpoint> database_core::tag(std::string_view name, std::optional<hash128> version) {
  MAGNETITE_TRY(version_tags::check_name(name));
  // Held from finding the version to publishing its roots as retained: no
  // commit pushes it out of retention and no gc drops it in between.
  std::lock_guard ops(operations_mu_);
  if (!version) {
    auto made = commit_holding_operations();
    if (!made) return made.error();
    version = made->combined;
  }
  std::lock_guard lk(checkpoints_mu_);
  std::optional<checkpoint> c = find_version(*version);
  if (!c) return unknown_version(*version);
  MAGNETITE_TRY(tags_->set(name, *c));
  publish_retained();
  return *c;
}

status database_core::untag(std::string_view name) {
  MAGNETITE_TRY(version_tags::check_name(name));
  std::lock_guard ops(operations_mu_);
  std::lock_guard lk(checkpoints_mu_);
  auto removed = tags_->remove(name);
  if (!removed) return removed.error();
  publish_retained();
  return status::ok();
}

namespace {

// The changes of user keys from a to b in one store, appended to out.
status diff_in(tree::node_store& store, const hash128& a, const hash128& b, std::vector<key_change>& out) {
  status inner;
  auto user_value = [&](const std::optional<std::string>& stored) -> std::optional<std::string> {
    if (!stored) return std::nullopt;
    auto u = ttl::unwrap(*stored);
    if (!u) {
      inner = u.error();
      return std::nullopt;
    }
    if (u->tombstone) return std::nullopt;  // a replicated delete: absent to a reader
    return std::string(u->value);
  };
  MAGNETITE_TRY(tree::diff(store, a, b, [&](const tree::diff_entry& e) {
    if (e.key.empty() || e.key[0] != keyspace::data_tag) return true;  // expiry entries follow the values
    key_change c;
    c.what = e.what;
    c.key = std::string(keyspace::user_key_of(e.key));
    c.old_value = user_value(e.old_value);
    c.new_value = user_value(e.new_value);
    if (!c.old_value && !c.new_value) return inner.is_ok();  // tombstone to tombstone, or corrupt
    if (!c.old_value)
      c.what = tree::diff_entry::kind::added;
    else if (!c.new_value)
      c.what = tree::diff_entry::kind::removed;
    out.push_back(std::move(c));
    return inner.is_ok();
  }));
  return inner;
}

}  // namespace

result<std::vector<key_change>> database_core::diff(const hash128& a, const hash128& b) {
  std::vector<key_change> out;
  std::optional<checkpoint> ca, cb;
  {
    std::lock_guard lk(checkpoints_mu_);
    ca = find_version(a);
    cb = find_version(b);
  }
  if (ca && cb) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (ca->roots[i] == cb->roots[i]) continue;
      auto v = serving_view(i);
      if (!v) return v.error();
      MAGNETITE_TRY(diff_in(*(*v)->store(), ca->roots[i], cb->roots[i], out));
    }
    std::sort(out.begin(), out.end(), [](const key_change& x, const key_change& y) { return x.key < y.key; });
    return out;
  }
  if (ca || cb)
    return status::invalid_argument(
        fmt::format("{} is a combined checkpoint root and {} is not: diff compares two of "
                    "one kind",
                    ca ? a : b, ca ? b : a));
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto v = serving_view(i);
    if (!v) return v.error();
    auto& store = *(*v)->store();
    if (!store.contains(a) || !store.contains(b)) continue;
    MAGNETITE_TRY(diff_in(store, a, b, out));
    return out;
  }
  return status::not_found(
      fmt::format("no shard holds both {} and {}, and they are not both retained combined "
                  "checkpoints",
                  a, b));
}

result<snapshot> database_core::at(const hash128& version) {
  // Held across the pinning, so no commit pushes the checkpoint out of
  // retention, and no gc drops its nodes, before every shard pinned it.
  std::lock_guard ops(operations_mu_);
  auto p = pin_holding_operations(version);
  if (!p) return p.error();
  return snapshot(std::make_unique<snapshot::impl>(std::move(*p)));
}

result<snapshot::impl> database_core::pin_holding_operations(const hash128& version) {
  std::optional<checkpoint> c;
  {
    std::lock_guard lk(checkpoints_mu_);
    c = find_version(version);
  }
  if (!c) return unknown_version(version);
  snapshot::impl p;
  p.version = version;
  p.roots = c->roots;
  p.clock = options_.shard.clock;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto v = ask<read_view_ptr>(i, view_at_atom::value, c->roots.at(i));
    if (!v) return v.error();
    p.views.push_back(std::move(std::get<0>(*v)));
  }
  return p;
}

result<backup_report> database_core::backup(const std::string& dest, const backup_options& options) {
  const std::optional<std::string_view> version = options.version;
  backup_report out;
  snapshot::impl pinned;
  {
    // Held from choosing the version until every shard pinned it; the
    // nodes are then copied with nothing held but the pins.
    std::lock_guard ops(operations_mu_);
    hash128 combined;
    if (!version) {
      auto made = commit_holding_operations();
      if (!made) return made.error();
      combined = made->combined;
    } else {
      auto r = resolve(*version);
      if (!r) return r.error();
      combined = *r;
      if (!hash128::parse_hex(*version)) out.label = std::string(*version);
    }
    auto p = pin_holding_operations(combined);
    if (!p) return p.error();
    pinned = std::move(*p);
  }
  out.version = pinned.version;
  backed_up_version v;
  v.label = out.label;
  v.made_ns = options_.shard.clock();
  v.version = {pinned.version, pinned.roots};
  // Every write the version holds was logged at or before the shards'
  // latest views: a restored shard numbers its writes after these.
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto view = serving_view(i);
    if (!view) return view.error();
    v.sequences.push_back((*view)->sequence());
  }
  auto store = backup_store::open(*fs_, dest, slots_.size());
  if (!store) return store.error();
  byte_pacer pace(options.max_bytes_per_second);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto shipped = (*store)->ship(i, pinned.roots[i], *pinned.views[i]->store(), &pace);
    if (!shipped) return shipped.error();
    out.nodes_shipped += shipped->nodes;
    out.bytes_shipped += shipped->bytes;
    if (shipped->nodes) out.depth = std::max<std::uint64_t>(out.depth, shipped->levels + 1);
  }
  MAGNETITE_TRY((*store)->record(std::move(v)));
  out.versions_held = (*store)->manifest().versions.size();
  return out;
}

result<snapshot> database_core::at(std::string_view version) {
  auto combined = resolve(version);
  if (!combined) return combined.error();
  return at(*combined);
}

result<database_verify_report> database_core::verify() {
  std::lock_guard ops(operations_mu_);
  database_verify_report out;
  out.warnings = exposure_warnings(*fs_, options_.dir);
  std::vector<checkpoint> kept = kept_versions();
  {
    std::lock_guard lk(checkpoints_mu_);
    out.checkpoints = checkpoints_->entries().size();
    out.tags = tags_->entries().size();
    out.problems = checkpoints_->check_file();
    for (auto& p : tags_->check_file()) out.problems.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    std::vector<hash128> retained = roots_of_shard(kept, i);
    auto r = ask<shard_verify_report>(i, verify_atom::value, std::move(retained));
    if (!r) return r.error();
    auto& rep = std::get<0>(*r);
    for (const auto& p : rep.problems) out.problems.push_back(fmt::format("shard {}: {}", i, p));
    out.shards.push_back(std::move(rep));
    // A retained checkpoint whose tree the shard no longer holds cannot be diffed.
    auto v = serving_view(i);
    if (!v) return v.error();
    for (const auto& c : kept)
      if (!(*v)->store()->contains(c.roots[i]))
        out.problems.push_back(
            fmt::format("shard {}: root {} of version {} is not in its node store", i, c.roots[i], c.combined));
  }
  return out;
}

result<database_gc_report> database_core::gc() {
  std::lock_guard ops(operations_mu_);
  database_gc_report out;
  std::vector<checkpoint> kept = kept_versions();
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    std::vector<hash128> retained = roots_of_shard(kept, i);
    auto r = ask<tree::gc_result>(i, gc_atom::value, std::move(retained));
    if (!r) return r.error();
    out.shards.push_back(std::get<0>(*r));
  }
  std::lock_guard lk(checkpoints_mu_);
  if (std::size_t damaged = checkpoints_->damage().size()) {
    MAGNETITE_TRY(checkpoints_->repair());
    publish_retained();
    out.damaged_checkpoints_dropped = damaged;
  }
  return out;
}

result<std::vector<std::uint64_t>> database_core::reclaim() {
  std::lock_guard ops(operations_mu_);
  std::vector<checkpoint> kept = kept_versions();
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    std::vector<hash128> retained = roots_of_shard(kept, i);
    auto r = ask<std::uint64_t>(i, reclaim_atom::value, std::move(retained));
    if (!r) return r.error();
    out.push_back(std::get<0>(*r));
  }
  return out;
}

result<database_stats> database_core::stats() {
  database_stats out;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto r = ask<shard_stats>(i, stats_atom::value);
    if (!r) return r.error();
    out.shards.push_back(std::get<0>(*r));
    auto u = ask<shard_usage>(i, usage_atom::value);
    if (!u) return u.error();
    out.usage.push_back(std::get<0>(*u));
    const admission_budget& b = *slots_[i]->admission;
    auto n = b.now();
    out.admission.push_back({n.admitted, n.waited, n.refused, n.waiting, n.requests, n.bytes, b.max_requests(),
                             b.max_bytes(), n.stalls, n.stall_ns});
  }
  out.tags = tags();
  std::lock_guard lk(supervision_->mu);
  out.restarts = supervision_->restarts;
  return out;
}

void database_core::submit_async(result<prepared> p, std::optional<deadline> admit_by,
                                 std::function<void(const status&, const cas_outcome&)> done) {
  if (!p) return done(p.error(), cas_outcome{});
  std::shared_ptr<shard_slot> slot = slots_[p->shard];
  std::size_t cost = admission_cost(*p->request);
  bool in = admit_by ? slot->admission->admit(cost, *admit_by) : slot->admission->try_admit(cost);
  if (!in) return done(refused_busy(p->shard, *slot->admission), cas_outcome{});
  // host_request answers exactly once (finish, or its destructor): the
  // budget is released there, whoever answers.
  p->request->done = [slot = std::move(slot), cost, done = std::move(done)](const status& s, const cas_outcome& o) {
    slot->admission->release(cost);
    done(s, o);
  };
  auto handle = shard_handle(p->shard);
  // A request that reaches no actor answers itself when it is destroyed.
  caf::anon_send(handle, host_atom::value, std::move(p->request));
}

void database_core::put_async(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl,
                              std::function<void(status)> done, std::optional<std::string_view> routing) {
  submit_async(prepare_put(key, value, ttl, routing), std::nullopt,
               [done = std::move(done)](const status& s, const cas_outcome&) { done(s); });
}

void database_core::del_async(std::string_view key, std::function<void(status)> done,
                              std::optional<std::string_view> routing) {
  submit_async(prepare_del(key, routing), std::nullopt,
               [done = std::move(done)](const status& s, const cas_outcome&) { done(s); });
}

void database_core::cas_async(std::string_view key, std::optional<std::string_view> expected,
                              std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl,
                              std::function<void(result<cas_outcome>)> done, std::optional<std::string_view> routing) {
  submit_async(prepare_cas(key, expected, desired, ttl, routing), std::nullopt, with_outcome(std::move(done)));
}

void database_core::batch_async(std::span<const batch_write> writes, std::function<void(status)> done,
                                std::optional<std::string_view> routing) {
  submit_async(prepare_batch(writes, routing), std::nullopt,
               [done = std::move(done)](const status& s, const cas_outcome&) { done(s); });
}

}  // namespace magnetite
