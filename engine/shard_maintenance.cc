// The shard's operator checks and space upkeep (shard.h): usage, verify,
// gc and the stepwise reclamation that rewrites live nodes into new packs.
#include "engine/shard.h"

#include <algorithm>

#include "core/limits.h"
#include "engine/keyspace.h"
#include "engine/view_cursor.h"
#include "tree/diff.h"
#include "ttl/envelope.h"

namespace magnetite {

result<shard_usage> shard::usage(std::span<const hash128> retained) const {
  shard_usage out;
  const auto& v = *view_;
  tree::prolly_tree t(*store_, options_.chunking);
  const std::string data_begin(1, keyspace::data_tag);
  auto in_tree = t.count_range(v.root(), data_begin, keyspace::data_end());
  if (!in_tree) return in_tree.error();
  out.keys = *in_tree;
  // The memtables and runs: each data key they hold adds a key the tree
  // lacks, or removes one it has.
  if (v.holds_writes() || !v.runs().empty()) {
    std::string scratch, data_end = keyspace::data_end();
    std::vector<view_source> sources;
    for (const auto& m : v.memtables())
      sources.push_back(view_source::of_memtable(*m.table, m.sequence, data_begin, data_end, scan_direction::forward));
    for (const auto& r : v.runs()) {
      auto c = t.seek(r->root(), data_begin);
      if (!c) return c.error();
      sources.push_back(view_source::of_tree(std::move(*c), data_begin, data_end, scan_direction::forward, true));
    }
    merging_cursor<view_source> all(std::move(sources), scan_direction::forward, equal_keys::newest_wins,
                                    deletions::keep);
    for (;;) {
      MAGNETITE_TRY(all.next());
      if (!all.valid()) break;
      auto had = t.get(v.root(), all.key(), scratch);
      if (!had) return had.error();
      bool deletion = all.top().deletion();
      if (!deletion && !*had) ++out.keys;
      if (deletion && *had) --out.keys;
    }
  }
  auto wal = directory_bytes(env_, dir_ + "/wal");
  if (!wal) return wal.error();
  out.wal_bytes = *wal;
  auto packs = store_->pack_bytes();
  if (!packs) return packs.error();
  out.node_bytes = *packs;
  auto ns = store_->stats();
  out.cache_hits = ns.cache_hits;
  out.cache_misses = ns.cache_misses;
  out.record_cache_hits = ns.record_cache_hits;
  out.node_reads = ns.record_reads;
  out.leaf_lookups = ns.leaf_lookups;
  auto live = store_->reachable_bytes(kept_roots(retained));
  if (!live) return live.error();
  out.live_node_bytes = *live;
  auto rs = store_->reclamation();
  out.reclaimed_bytes = rs.bytes_reclaimed;
  out.reclaim_cycles = rs.cycles;
  out.node_syncs = ns.pack_syncs;
  out.root = v.root().to_hex();
  return out;
}

std::vector<hash128> shard::kept_roots(std::span<const hash128> retained) const {
  std::vector<hash128> roots{view_->root()};
  auto add = [&](const hash128& r) {
    if (std::find(roots.begin(), roots.end(), r) == roots.end() && store_->contains(r)) roots.push_back(r);
  };
  for (const auto& r : retained) add(r);
  // Roots of views still held elsewhere (a host's scan cursor, say), and
  // the runs of every view: the current one's among them (publish lists
  // every run it hands out).
  for (const auto& w : pinned_roots_)
    if (auto pin = w.lock()) add(*pin);
  for (const auto& w : published_runs_)
    if (auto run = w.lock()) add(run->root());
  return roots;
}

result<std::vector<std::string>> shard::check_expiry(std::uint64_t& expiring) const {
  std::vector<std::string> problems;
  auto key_text = [](std::string_view k) { return fmt::format("{:?}", k); };
  std::map<std::string, std::uint64_t, std::less<>> entries;  // user key -> deadline, from the 'x' range
  MAGNETITE_TRY(view_->scan(
      std::string(1, keyspace::expiry_tag), keyspace::expiry_end(), [&](std::string_view k, std::string_view) {
        std::uint64_t deadline = 0;
        std::string_view user;
        if (!keyspace::parse_expiry_key(k, deadline, user))
          problems.push_back(fmt::format("shard {}: a malformed expiry entry of {} bytes", dir_, k.size()));
        else if (!entries.emplace(std::string(user), deadline).second)
          problems.push_back(fmt::format("shard {}: key {} has two expiry entries", dir_, key_text(user)));
        return true;
      }));
  MAGNETITE_TRY(view_->scan(
      std::string(1, keyspace::data_tag), keyspace::data_end(), [&](std::string_view k, std::string_view stored) {
        std::string_view user = keyspace::user_key_of(k);
        auto u = ttl::unwrap(stored);
        if (!u) {
          problems.push_back(
              fmt::format("shard {}: the value of key {}: {}", dir_, key_text(user), u.error().message()));
          return true;
        }
        if (!u->expires_at_ns) return true;
        ++expiring;
        auto it = entries.find(user);
        if (it == entries.end() || it->second != *u->expires_at_ns)
          problems.push_back(
              fmt::format("shard {}: key {} expires at {} but has no expiry entry "
                          "for it",
                          dir_, key_text(user), *u->expires_at_ns));
        else
          entries.erase(it);
        if (expiry_.deadline(user) != u->expires_at_ns)
          problems.push_back(
              fmt::format("shard {}: key {} expires at {} but the expiry index "
                          "does not say so",
                          dir_, key_text(user), *u->expires_at_ns));
        return true;
      }));
  for (const auto& [user, deadline] : entries)
    problems.push_back(fmt::format("shard {}: an expiry entry at {} for key {}, whose value has no such deadline", dir_,
                                   deadline, key_text(user)));
  if (expiry_.size() != expiring)
    problems.push_back(
        fmt::format("shard {}: the expiry index holds {} keys, the data {}", dir_, expiry_.size(), expiring));
  return problems;
}

result<shard_verify_report> shard::verify(std::span<const hash128> retained) {
  MAGNETITE_TRY(commit_group());
  shard_verify_report out;
  auto roots = kept_roots(retained);
  out.roots = roots.size();
  auto nodes = store_->check(roots);
  out.nodes = nodes.nodes;
  out.node_bytes = nodes.bytes;
  out.problems = std::move(nodes.problems);
  // Read only: the writer appends to this log, but only between messages,
  // and this runs in one.
  wal::recovery_options ro;
  ro.repair = false;
  auto log = wal::recover(env_, dir_ + "/wal", ro);
  if (!log) {
    out.problems.push_back(log.error().message());
  } else {
    out.log_frames = log->frames;
    if (log->discarded_bytes) out.problems.push_back(log->discarded_detail);
  }
  auto expiry = check_expiry(out.expiring_keys);
  if (!expiry)
    out.problems.push_back(fmt::format("the expiry check stopped: {}", expiry.error().message()));
  else
    out.problems.insert(out.problems.end(), expiry->begin(), expiry->end());
  return out;
}

bool shard::reclaim_due() const {
  if (options_.max_space_amplification == 0 || !failure_.is_ok() || store_->reclaiming()) return false;
  if (import_waiting_ && std::chrono::steady_clock::now() - *import_waiting_ < std::chrono::minutes(1)) return false;
  // Deletes shrink the live data without growing the packs: the estimate
  // follows the tree's entry count (one read of the root, usually cached).
  double scale = 1.0;
  if (entries_at_reclaim_ && *entries_at_reclaim_ > 0) {
    auto now = tree::prolly_tree(*store_, options_.chunking).count(view_->root());
    if (now) scale = static_cast<double>(*now) / static_cast<double>(*entries_at_reclaim_);
  }
  return store_->reclaim_due(options_.max_space_amplification, options_.reclaim_min_bytes, scale);
}

status shard::begin_reclaim(std::span<const hash128> retained, std::optional<double> max_amplification) {
  MAGNETITE_TRY(check_usable());
  auto roots = kept_roots(retained);
  auto entries = tree::prolly_tree(*store_, options_.chunking).count(view_->root());
  if (!entries) return entries.error();
  // The cycle keeps what the roots reach; the tree a running checkpoint has
  // written so far is reached by none of them yet (its root is not written):
  // its new nodes lie in packs from first_pack on, which are no candidates,
  // and the old ones it reused are in the node store's reuse journal.
  std::optional<std::uint32_t> below;
  if (running_) below = running_->first_pack;
  status s = store_->begin_reclaim(roots, max_amplification.value_or(options_.max_space_amplification), below);
  if (s) entries_at_reclaim_ = *entries;
  if (!s && !store_->failure().is_ok()) return fail(s);
  return s;
}

result<bool> shard::reclaim_step() {
  MAGNETITE_TRY(check_usable());
  auto r = store_->reclaim_step(options_.reclaim_step_bytes);
  if (!r && !store_->failure().is_ok()) return fail(r.error());
  return r;
}

result<tree::gc_result> shard::gc(std::span<const hash128> retained) {
  MAGNETITE_TRY(commit_group());
  // gc keeps what the roots reach: a tree a running checkpoint is writing
  // is reached by none of them yet.
  if (running_) {
    auto root = finish_checkpoint();
    if (!root) return root.error();
  }
  auto roots = kept_roots(retained);
  auto r = store_->gc(roots);
  if (!r && !store_->failure().is_ok()) return fail(r.error());
  return r;
}

}  // namespace magnetite
