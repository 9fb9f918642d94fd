#include "engine/shard.h"

#include "engine/keyspace.h"

#include <algorithm>
#include <bit>

#include "core/coding.h"
#include "core/limits.h"
#include "engine/state_space.h"
#include "tree/diff.h"
#include "tree/prolly_tree.h"
#include "ttl/envelope.h"
#include "wal/recovery.h"

namespace magnetite {

std::uint64_t system_now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

status shard_options::validate() const {
  if (cache_bytes == 0) return status::invalid_argument("shard option cache_bytes must be > 0");
  if (!(record_cache_share >= 0 && record_cache_share <= 0.9))
    return status::invalid_argument(
        fmt::format("shard option record_cache_share = {}: must be between 0 and 0.9", record_cache_share));
  if (checkpoint_bytes == 0) return status::invalid_argument("shard option checkpoint_bytes must be > 0");
  if (checkpoint_interval.count() <= 0) return status::invalid_argument("shard option checkpoint_interval must be > 0");
  if (max_sorted_runs > limits::max_sorted_runs)
    return status::invalid_argument(
        fmt::format("shard option max_sorted_runs = {}: must be at most {}", max_sorted_runs, limits::max_sorted_runs));
  if (fsync == wal::fsync_policy::interval && fsync_interval.count() <= 0)
    return status::invalid_argument("shard option fsync_interval must be > 0 with the interval policy");
  if (!clock) return status::invalid_argument("shard option clock is empty");
  if (tombstone_retention.count() <= 0) return status::invalid_argument("shard option tombstone_retention must be > 0");
  if (max_space_amplification != 0 && !(max_space_amplification > 1.0 && max_space_amplification < 1e6))
    return status::invalid_argument(
        fmt::format("shard option max_space_amplification = {}: must be above 1 (or 0: no automatic reclamation)",
                    max_space_amplification));
  if (reclaim_step_bytes == 0) return status::invalid_argument("shard option reclaim_step_bytes must be > 0");
  return chunking.validate();
}

shard::shard(env& e, std::string dir, shard_options options)
    : env_(e), dir_(std::move(dir)), options_(std::move(options)) {}

// Views this shard published may outlive it (a host's scan cursor, a
// snapshot): the store they read must not keep its directory locked against
// the shard that reopens it. A checkpoint's thread writes to the store: it
// ends first (what it wrote is not committed, and open() cuts it).
shard::~shard() {
  abandon_checkpoint();
  if (store_) store_->retire();
}

result<std::unique_ptr<shard>> shard::open(env& e, std::string dir, shard_options options) {
  MAGNETITE_TRY(options.validate());
  std::unique_ptr<shard> s(new shard(e, std::move(dir), std::move(options)));
  MAGNETITE_TRY(e.create_dir(s->dir_));
  MAGNETITE_TRY(e.create_dir(s->dir_ + "/wal"));
  MAGNETITE_TRY(e.create_dir(s->dir_ + "/nodes"));
  MAGNETITE_TRY(e.sync_dir(s->dir_));

  auto recovered = wal::recover(e, s->dir_ + "/wal");
  if (!recovered) return recovered.error();
  std::optional<std::uint64_t> committed;
  if (recovered->last_commit) committed = recovered->last_commit->node_store_length;
  tree::node_store_options so;
  so.cache_bytes = s->options_.cache_bytes;
  so.record_cache_share = s->options_.record_cache_share;
  so.searchable_leaves = s->options_.leaves == leaf_form::searchable;
  if (s->options_.leaves == leaf_form::zstd) so.codec = tree::node_codec::zstd;
  so.map_packs = s->options_.mapped_reads;
  auto store = tree::node_store::open(e, s->dir_ + "/nodes", so, committed);
  if (!store) return store.error();
  s->store_ = std::shared_ptr<tree::node_store>(std::move(*store));

  tree::prolly_tree t(*s->store_, s->options_.chunking);
  hash128 root;
  if (recovered->last_commit) {
    root = recovered->last_commit->root;
    s->stamp_bound_ = recovered->last_commit->stamp_bound;
    tree::rewrite_reads reads(*s->store_);
    for (const auto& r : recovered->last_commit->runs) {
      auto run = read_run(reads, s->options_.chunking, r);
      if (!run) return run.error();
      s->runs_.push_back(std::move(*run));
    }
  } else {
    s->stamp_bound_ = stamp{};  // nothing was ever stored
    auto empty = t.empty_root();
    if (!empty) return empty.error();
    root = *empty;
  }

  wal::writer_options wo;
  wo.policy = s->options_.fsync;
  wo.interval = s->options_.fsync_interval;
  wo.preallocate = s->options_.wal_preallocate;
  auto log = wal::log_writer::open(e, s->dir_ + "/wal", wo, *recovered);
  if (!log) return log.error();
  s->log_ = std::move(*log);
  s->replication_state_ = recovered->replication_state;

  // The expiry index: the durable entries of the committed tree and runs
  // first, then the replayed writes move them as they did the first time.
  std::string corrupt;
  read_view committed_view(s->store_, s->options_.chunking, root, {}, 0, nullptr, s->runs_);
  MAGNETITE_TRY(committed_view.scan(
      std::string(1, keyspace::expiry_tag), keyspace::expiry_end(), [&](std::string_view k, std::string_view) {
        std::uint64_t deadline = 0;
        std::string_view key;
        if (!keyspace::parse_expiry_key(k, deadline, key)) {
          corrupt = fmt::format("shard {}: malformed expiry entry of {} bytes", s->dir_, k.size());
          return false;
        }
        s->expiry_.set(key, deadline);
        return true;
      }));
  if (!corrupt.empty()) return status::corruption(corrupt);
  for (const auto& r : recovered->tail) {
    for (const auto& m : r.mutations) {
      std::optional<std::string_view> stored;
      if (m.kind == wal::mutation_kind::put) stored = m.value;
      MAGNETITE_TRY(s->stage(m.key, stored));
    }
    ++s->stats_.replayed_records;
  }
  // What was replayed is durable already (recovery repaired the log).
  s->staged_writes_ = 0;
  s->published_ = s->active_->latest();
  s->publish(root);
  return s;
}

status shard::check_usable() const {
  if (failure_.is_ok()) return status::ok();
  return status::failed(
      fmt::format("shard {} stopped after an earlier error ({}); it must be reopened", dir_, failure_.message()));
}

status shard::fail(status s) {
  if (failure_.is_ok()) failure_ = s;
  return s;
}

std::shared_ptr<const hash128> shard::pin_for(const hash128& root) {
  for (const auto& w : pinned_roots_)
    if (auto pin = w.lock(); pin && *pin == root) return pin;
  auto pin = std::make_shared<const hash128>(root);
  std::erase_if(pinned_roots_, [](const auto& w) { return w.expired(); });
  pinned_roots_.push_back(pin);
  return pin;
}

void shard::publish(hash128 root) {
  if (!root_pin_ || *root_pin_ != root) root_pin_ = pin_for(root);
  std::vector<memtable_ref> tables;
  if (published_ > 0) tables.push_back({active_, published_});
  if (running_) tables.push_back({running_->table, running_->table->latest()});
  if (!view_ || view_->runs() != runs_) {
    std::erase_if(published_runs_, [](const auto& w) { return w.expired(); });
    for (const auto& r : runs_)
      if (std::none_of(published_runs_.begin(), published_runs_.end(), [&](const auto& w) { return w.lock() == r; }))
        published_runs_.push_back(r);
  }
  view_ = std::make_shared<const read_view>(store_, options_.chunking, root, std::move(tables),
                                            log_ ? log_->last_sequence() : 0, root_pin_, runs_);
}

result<std::shared_ptr<const read_view>> shard::view_at(const hash128& root) {
  MAGNETITE_TRY(check_usable());
  if (!store_->contains(root)) return status::not_found(fmt::format("shard {} holds no root {}", dir_, root));
  return std::make_shared<const read_view>(store_, options_.chunking, root, std::vector<memtable_ref>{}, 0,
                                           pin_for(root));
}

result<std::string> shard::envelope_for(std::string_view value, std::optional<std::chrono::nanoseconds> ttl) const {
  MAGNETITE_TRY(state_space::check_user_value(value));
  if (!ttl) return ttl::wrap(value, std::nullopt);
  if (ttl->count() <= 0) return status::invalid_argument(fmt::format("ttl of {} ns: must be > 0", ttl->count()));
  std::uint64_t now = options_.clock();
  auto add = static_cast<std::uint64_t>(ttl->count());
  if (add > UINT64_MAX - now) return status::invalid_argument("ttl reaches past the clock's range");
  return ttl::wrap(value, now + add);
}

result<bool> shard::find_latest(std::string_view tree_key, std::string& out) const {
  // The active memtable at its latest (staged writes included), then the
  // immutable one, then the tree: the view's, which is the current root.
  auto e = active_->find(tree_key, active_->latest());
  if (!e.found && running_) e = running_->table->find(tree_key, running_->table->latest());
  if (e.found) {
    if (!e.value) return false;
    out = *e.value;
    return true;
  }
  // The current view's runs and root are the shard's.
  return view_->find_below_memtables(tree_key, out);
}

result<std::optional<ttl::unwrapped>> shard::latest_envelope(std::string_view key, std::string& bytes) {
  auto found = find_latest(keyspace::data_key(key), bytes);
  if (!found) return fail(found.error());
  if (!*found) return std::optional<ttl::unwrapped>();
  auto u = ttl::unwrap(bytes);
  if (!u) return u.error();
  return std::optional<ttl::unwrapped>(*u);
}

result<std::optional<std::string>> shard::latest_value(std::string_view key) const {
  std::string stored;
  auto found = find_latest(keyspace::data_key(key), stored);
  if (!found) return found.error();
  if (!*found) return std::optional<std::string>();
  return ttl::live_value(stored, options_.clock());
}

status shard::stage(std::string_view key, std::optional<std::string_view> stored) {
  std::optional<std::uint64_t> deadline;
  if (stored) {
    auto u = ttl::unwrap(*stored);
    if (!u) return u.error();
    deadline = u->expires_at_ns;
    if (u->stamp && stamp_bound_ && *u->stamp > *stamp_bound_) stamp_bound_ = *u->stamp;
  }
  if (auto old = expiry_.deadline(key)) {
    active_->insert(keyspace::expiry_key(*old, key), std::nullopt);
    expiry_.erase(key);
  }
  if (deadline) {
    active_->insert(keyspace::expiry_key(*deadline, key), std::string_view());
    expiry_.set(key, *deadline);
  }
  active_->insert(std::string_view(&keyspace::data_tag, 1), key, stored);
  ++staged_writes_;
  ++stats_.writes;
  return status::ok();
}

status shard::put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(state_space::check_user_key(key));
  auto stored = envelope_for(value, ttl);
  if (!stored) return stored.error();
  auto seq = log_->append_put(key, *stored);
  if (!seq) return fail(seq.error());
  return stage(key, *stored);
}

status shard::del(std::string_view key) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(state_space::check_user_key(key));
  auto seq = log_->append_delete(key);
  if (!seq) return fail(seq.error());
  return stage(key, std::nullopt);
}

result<cas_outcome> shard::cas(std::string_view key, std::optional<std::string_view> expected,
                               std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(state_space::check_user_key(key));
  if (!desired && ttl) return status::invalid_argument("a delete takes no ttl");
  std::optional<std::string> stored;
  if (desired) {
    auto s = envelope_for(*desired, ttl);
    if (!s) return s.error();
    stored = std::move(*s);
  }
  auto current = latest_value(key);
  if (!current) return fail(current.error());
  if (current->has_value() != expected.has_value() || (expected && **current != *expected))
    return cas_outcome::refused(std::move(*current));
  auto seq = stored ? log_->append_put(key, *stored) : log_->append_delete(key);
  if (!seq) return fail(seq.error());
  MAGNETITE_TRY(stage(key, stored));
  return cas_outcome::applied();
}

result<std::vector<std::optional<std::string>>> shard::prepare_writes(std::span<const batch_write> writes,
                                                                      status (*check_key)(std::string_view),
                                                                      std::string_view prefix) const {
  std::vector<std::optional<std::string>> stored(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i) {
    MAGNETITE_TRY(check_key(writes[i].key));
    if (writes[i].value) {
      std::string value;
      if (!prefix.empty()) {
        MAGNETITE_TRY(state_space::check_value(*writes[i].value));
        value.reserve(prefix.size() + writes[i].value->size());
        value.append(prefix);
      }
      value.append(*writes[i].value);
      auto s = envelope_for(value, writes[i].ttl);
      if (!s) return s.error();
      stored[i] = std::move(*s);
    } else if (writes[i].ttl) {
      return status::invalid_argument(fmt::format("batch write {}: a delete takes no ttl", i));
    }
  }
  return stored;
}

status shard::batch(std::span<const batch_write> writes) {
  MAGNETITE_TRY(check_usable());
  if (writes.empty()) return status::invalid_argument("batch is empty");
  auto stored = prepare_writes(writes, state_space::check_user_key, {});
  if (!stored) return stored.error();
  auto seq = log_and_stage(writes, *stored);
  return seq ? status::ok() : seq.error();
}

result<std::uint64_t> shard::log_and_stage(std::span<const batch_write> writes,
                                           const std::vector<std::optional<std::string>>& stored) {
  std::vector<wal::mutation_view> views(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i)
    views[i] = stored[i] ? wal::mutation_view{wal::mutation_kind::put, writes[i].key, *stored[i]}
                         : wal::mutation_view{wal::mutation_kind::del, writes[i].key, {}};
  // The log checks the batch's own limits (count, bytes) before taking it.
  auto seq = log_->append_batch(views);
  if (!seq) return seq.error().code() == status_code::invalid_argument ? seq.error() : fail(seq.error());
  // Staged in key order (a key's writes in batch order, so the last still
  // wins): the memtable's inserts then each start from the one before.
  std::vector<std::uint32_t> order(writes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  auto by_key = [&](std::uint32_t a, std::uint32_t b) { return writes[a].key < writes[b].key; };
  if (!std::is_sorted(order.begin(), order.end(), by_key)) std::stable_sort(order.begin(), order.end(), by_key);
  for (std::uint32_t i : order) MAGNETITE_TRY(stage(writes[i].key, stored[i]));
  return *seq;
}

result<std::uint64_t> shard::latest_revision(std::string_view key) const {
  auto v = latest_value(key);
  if (!v) return v.error();
  if (!*v) return std::uint64_t{0};
  return state_space::revision_of(key, **v);
}

result<cas_outcome> shard::apply(std::span<const state_check> checks, std::span<const batch_write> writes) {
  MAGNETITE_TRY(check_usable());
  for (const auto& c : checks) MAGNETITE_TRY(state_space::check_key(c.key));
  // The revision every write will carry: the sequence number the log gives
  // the frame appended below (checked after the append).
  std::uint64_t revision = log_->last_sequence() + 1;
  std::string prefix(state_space::revision_bytes, '\0');
  encode_fixed64_le(reinterpret_cast<std::uint8_t*>(prefix.data()), revision);
  auto stored = prepare_writes(writes, state_space::check_key, prefix);
  if (!stored) return stored.error();
  for (std::size_t i = 0; i < checks.size(); ++i) {
    auto found = latest_revision(checks[i].key);
    if (!found) return found.error().code() == status_code::corruption ? found.error() : fail(found.error());
    if (*found != checks[i].revision) {
      cas_outcome o;
      o.failed_check = static_cast<std::uint32_t>(i);
      o.found = *found;
      return o;
    }
  }
  cas_outcome o;
  o.swapped = true;
  if (writes.empty()) {
    o.revision = log_->last_sequence();
    return o;
  }
  auto seq = log_and_stage(writes, *stored);
  if (!seq) return seq.error();
  // A frame numbered otherwise would carry revisions that name another frame.
  if (*seq != revision)
    return fail(status::failed(fmt::format("log numbered a state batch {} where {} was stamped", *seq, revision)));
  o.revision = revision;
  return o;
}

result<std::size_t> shard::stage_expired(std::size_t limit) {
  MAGNETITE_TRY(check_usable());
  auto due = expiry_.take_expired(options_.clock(), limit);
  for (const auto& d : due) {
    // take_expired dropped the index entry: retire its durable twin here, then
    // delete the value like any delete, or leave a stamped value's tombstone.
    active_->insert(keyspace::expiry_key(d.deadline_ns, d.key), std::nullopt);
    std::string bytes;
    auto latest = latest_envelope(d.key, bytes);
    if (!latest) return latest.error();
    std::optional<std::string> tombstone;
    if (*latest && (*latest)->stamp && !(*latest)->tombstone) {
      auto keep = static_cast<std::uint64_t>(options_.tombstone_retention.count());
      tombstone = ttl::wrap_stamped(*(*latest)->stamp, std::nullopt,
                                    d.deadline_ns > UINT64_MAX - keep ? UINT64_MAX : d.deadline_ns + keep);
    }
    auto seq = tombstone ? log_->append_put(d.key, *tombstone) : log_->append_delete(d.key);
    if (!seq) return fail(seq.error());
    MAGNETITE_TRY(stage(d.key, tombstone));
    ++staged_expiries_;
    ++stats_.expired;
  }
  return due.size();
}

status shard::commit_group() {
  MAGNETITE_TRY(check_usable());
  if (replication_state_pending_) {
    // Promise state is never left to an fsync policy: whatever the policy, it
    // is durable before anything that depends on it is answered.
    if (status s = log_->sync_durable(); !s) return fail(s);
    replication_state_pending_ = false;
  }
  if (active_->latest() == published_) return status::ok();
  if (status s = log_->sync(); !s) return fail(s);
  // Deletions by the TTL timer are nobody's acknowledged writes.
  if (std::size_t user = staged_writes_ - staged_expiries_) {
    stats_.acknowledged += user;
    ++stats_.group_sizes[std::min<std::size_t>(std::bit_width(user) - 1, group_size_buckets - 1)];
  }
  staged_writes_ = 0;
  staged_expiries_ = 0;
  ++stats_.groups;
  published_ = active_->latest();
  publish(view_->root());
  return status::ok();
}

shard_stats shard::stats() const noexcept {
  shard_stats out = stats_;
  out.sorted_runs = runs_.size();
  for (const auto& r : runs_) out.run_entries += r->entries();
  out.log_fsyncs = log_->stats().fsyncs;  // every fsync of the log, opening's included
  return out;
}

status shard::sync_durable() {
  MAGNETITE_TRY(check_usable());
  if (status s = log_->sync_durable(); !s) return fail(s);
  return status::ok();
}

result<std::optional<std::string>> shard::get(std::string_view key) const {
  MAGNETITE_TRY(state_space::check_user_key(key));
  return view_->get(key, options_.clock());
}

}  // namespace magnetite
