// The shard's side of replication (shard.h, "Replicated shards"): stamped
// writes kept by the highest stamp, the replication state record, node
// import, and the merge of a foreign tree. A shard that is not replicated
// never comes here.
#include "engine/shard.h"

#include <algorithm>
#include <map>

#include "core/limits.h"
#include "engine/keyspace.h"
#include "engine/state_space.h"
#include "tree/diff.h"
#include "ttl/envelope.h"

namespace magnetite {

result<std::vector<bool>> shard::apply_stamped(std::span<const stamped_write> writes) {
  MAGNETITE_TRY(check_usable());
  if (writes.empty()) return status::invalid_argument("stamped apply is empty");
  std::vector<batch_write> taken;
  std::vector<std::optional<std::string>> stored;
  std::vector<bool> out(writes.size());
  // Stamps of keys taken earlier in this call: later writes are judged against them.
  std::map<std::string_view, stamp> pending;
  // Above this, a write is above every stamp stored and taken so far.
  std::optional<stamp> bound = stamp_bound_;
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const stamped_write& w = writes[i];
    // State keys too: the replica stamps its request records there
    // (replication/request_record.h); it refuses them from clients.
    MAGNETITE_TRY(limits::check_key_within(w.key, limits::max_user_key_bytes));
    if (w.stamp.epoch.counter == 0)
      return status::invalid_argument(fmt::format("stamped write {}: stamp {} has no epoch", i, to_string(w.stamp)));
    if (w.value) {
      MAGNETITE_TRY(state_space::check_user_value(*w.value));
    } else if (!w.expires_at_ns) {
      return status::invalid_argument(fmt::format("stamped write {}: a tombstone needs a purge deadline", i));
    }
    if (!bound || w.stamp <= *bound) {
      stamp held;
      if (auto it = pending.find(w.key); it != pending.end()) {
        held = it->second;
      } else {
        std::string bytes;
        auto latest = latest_envelope(w.key, bytes);
        if (!latest) return latest.error();
        if (*latest && (*latest)->stamp) held = *(*latest)->stamp;
      }
      if (w.stamp <= held) continue;
    }
    out[i] = true;
    pending[w.key] = w.stamp;
    if (bound && w.stamp > *bound) bound = w.stamp;
    std::optional<std::string_view> value;
    if (w.value) value = *w.value;
    stored.push_back(ttl::wrap_stamped(w.stamp, value, w.expires_at_ns));
    batch_write b;
    b.key = w.key;
    taken.push_back(std::move(b));
  }
  if (taken.empty()) return out;
  auto seq = log_and_stage(taken, stored);
  if (!seq) return seq.error();
  return out;
}

status shard::record_replication_state(std::string_view payload) {
  MAGNETITE_TRY(check_usable());
  auto seq = log_->append_replication_state(payload);
  if (!seq) return seq.error().code() == status_code::invalid_argument ? seq.error() : fail(seq.error());
  replication_state_ = std::string(payload);
  replication_state_pending_ = true;
  return status::ok();
}

bool shard::holds_node(const hash128& h) const { return store_->contains(h); }

result<std::string> shard::node_encoding(const hash128& h) const {
  auto n = store_->read(h);
  if (!n) return n.error();
  return std::string((*n)->encode());
}

status shard::import_node(const hash128& h, std::string_view encoding) {
  MAGNETITE_TRY(check_usable());
  if (hash128::of(encoding) != h)
    return status::corruption(
        fmt::format("node received as {} hashes to {}", h.to_hex(), hash128::of(encoding).to_hex()));
  auto n = tree::node::decode(encoding);
  if (!n) return n.error();
  if (!n->is_leaf()) {
    for (const auto& e : n->entries()) {
      auto ref = tree::child_ref::decode(e.value);
      if (!ref) return ref.error();
      if (!store_->contains(ref->hash))
        return status::invalid_argument(
            fmt::format("node {} arrived before its child {}: import bottom up", h.to_hex(), ref->hash.to_hex()));
    }
  }
  auto w = store_->write(*n);
  if (!w) return fail(w.error());
  import_waiting_ = std::chrono::steady_clock::now();
  return status::ok();
}

result<merge_report> shard::merge_stamped(const hash128& foreign_root) { return merge_foreign(foreign_root, false); }

result<merge_report> shard::adopt_stamped(const hash128& foreign_root) { return merge_foreign(foreign_root, true); }

result<merge_report> shard::merge_foreign(const hash128& foreign_root, bool drop_ours_only) {
  MAGNETITE_TRY(check_usable());
  if (!store_->contains(foreign_root))
    return status::invalid_argument(
        fmt::format("merge from root {}: this store does not hold it", foreign_root.to_hex()));
  auto ours = checkpoint();
  if (!ours) return ours.error();
  import_waiting_.reset();
  merge_report out;
  std::vector<stamped_write> chunk;
  std::vector<batch_write> drops;
  std::size_t chunk_bytes = 0;
  status inner;
  auto flush = [&] {
    if (!chunk.empty()) {
      auto taken = apply_stamped(chunk);
      if (!taken) {
        inner = taken.error();
        return false;
      }
      out.taken += static_cast<std::uint64_t>(std::count(taken->begin(), taken->end(), true));
    }
    if (!drops.empty()) {
      std::vector<std::optional<std::string>> none(drops.size());
      auto seq = log_and_stage(drops, none);
      if (!seq) {
        inner = seq.error();
        return false;
      }
      out.dropped += drops.size();
    }
    chunk.clear();
    drops.clear();
    chunk_bytes = 0;
    return true;
  };
  auto corrupt = [&](const status& s) {
    inner = status::corruption(fmt::format("merge from root {}: {}", foreign_root.to_hex(), s.message()));
    return false;
  };
  MAGNETITE_TRY(tree::diff(*store_, *ours, foreign_root, [&](const tree::diff_entry& e) {
    // Expiry entries follow the values.
    if (e.key.empty() || e.key[0] != keyspace::data_tag) return true;
    if (!e.new_value) {
      // Only we hold it: news for the foreign side, unless we adopt its tree.
      if (!drop_ours_only || !e.old_value) return true;
      auto u = ttl::unwrap(*e.old_value);
      if (!u) return corrupt(u.error());
      if (!u->stamp) return true;
      batch_write d;
      d.key = std::string(keyspace::user_key_of(e.key));
      chunk_bytes += d.key.size() + 16;
      drops.push_back(std::move(d));
    } else {
      ++out.differing;
      auto u = ttl::unwrap(*e.new_value);
      if (!u) return corrupt(u.error());
      if (!u->stamp) return true;
      stamped_write w;
      w.key = std::string(keyspace::user_key_of(e.key));
      w.stamp = *u->stamp;
      if (!u->tombstone) w.value = std::string(u->value);
      w.expires_at_ns = u->expires_at_ns;
      chunk_bytes += w.key.size() + e.new_value->size();
      chunk.push_back(std::move(w));
    }
    // Well under the log's batch limits, so a frame is never refused for size.
    if (chunk_bytes >= limits::max_batch_bytes / 4 || chunk.size() + drops.size() >= 4096) return flush();
    return true;
  }));
  MAGNETITE_TRY(inner);
  if (!flush()) return inner;
  return out;
}

}  // namespace magnetite
