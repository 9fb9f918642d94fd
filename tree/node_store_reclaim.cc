// node_store: incremental reclamation (node_store.h, begin_reclaim and
// reclaim_step): gc in bounded steps, of the packs that are mostly garbage.
#include "tree/node_store.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "tree/node_store_internal.h"
#include "tree/pack_format.h"

namespace magnetite::tree {

bool node_store::reclaim_due(double max_amplification, std::uint64_t min_bytes, double live_scale) const {
  std::uint64_t total = 0;
  {
    std::shared_lock sl(state_mu_);
    for (const auto& [num, p] : packs_) total += p == active_ ? written_size_ : p->sealed_size;
  }
  if (total < min_bytes) return false;
  std::lock_guard lk(reclaim_mu_);
  return !reclaim_.live_bytes ||
         static_cast<double>(total) > max_amplification * live_scale * static_cast<double>(*reclaim_.live_bytes);
}

result<std::uint64_t> node_store::reachable_bytes(std::span<const hash128> roots) {
  struct item {
    hash128 h;
    int level;
  };
  std::vector<item> stack;
  for (const auto& r : roots) stack.push_back({r, -1});
  std::unordered_set<hash128, hash128_hasher> seen;
  std::uint64_t total = 0;
  while (!stack.empty()) {
    item it = stack.back();
    stack.pop_back();
    if (!seen.insert(it.h).second) continue;
    if (auto loc = locate(it.h)) total += loc->length;
    if (it.level == 0) continue;
    // A walk of whole trees, old ones too: read past the cache, which it
    // would otherwise fill with nodes no reader asks for.
    auto n = read_passing(it.h);
    if (!n) return n.error();
    if ((*n)->is_leaf()) continue;
    for (const auto& e : (*n)->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return status::corruption(fmt::format("node {} has a bad child reference", it.h));
      stack.push_back({ref->hash, (*n)->level() - 1});
    }
  }
  return total;
}

reclaim_stats node_store::reclamation() const {
  std::lock_guard lk(reclaim_mu_);
  return reclaim_;
}

void node_store::journal_reuse(bool on) {
  std::lock_guard wl(write_mu_);
  journaling_ = on;
  if (!on) reused_.clear();
}

std::uint32_t node_store::active_pack() const {
  std::shared_lock sl(state_mu_);
  return active_->number;
}

status node_store::begin_reclaim(std::span<const hash128> roots, double max_amplification,
                                 std::optional<std::uint32_t> below) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  if (!(max_amplification > 1.0))
    return status::invalid_argument(
        fmt::format("reclamation: space amplification {} must be above 1", max_amplification));
  // Sealing makes the records written so far candidates. Nothing pending is
  // handed over: pending nodes land in the new pack, outside the candidates.
  if (written_size_ > file_header_size) MAGNETITE_TRY(seal_active());
  auto c = std::make_unique<reclaim_cycle>();
  c->max_amplification = max_amplification;
  c->boundary = below ? std::min(*below, active_->number) : active_->number;
  for (const auto& r : roots) c->stack.push_back({r, -1});
  for (const auto& r : reused_) c->stack.push_back({r, -1});
  // A pending node may be the top of a tree not yet committed (an import):
  // what it refers to is kept.
  for (const auto& r : pending_) c->stack.push_back({r.hash, -1});
  cycle_ = std::move(c);
  return status::ok();
}

void node_store::reclaim_note_write(const node& n, const hash128& h) {
  auto& c = *cycle_;
  if (const node_location* loc = index_.find(h); loc && loc->pack < c.boundary)
    c.stack.push_back({h, n.level()});  // deduplicated against a candidate: alive again
  if (n.is_leaf()) return;
  for (const auto& e : n.entries())
    if (auto ref = child_ref::decode(e.value)) c.stack.push_back({ref->hash, n.level() - 1});
}

result<bool> node_store::reclaim_mark(std::size_t& budget) {
  auto& c = *cycle_;
  while (!c.stack.empty()) {
    if (budget == 0) return false;
    auto it = c.stack.back();
    c.stack.pop_back();
    budget -= std::min<std::size_t>(budget, 64);
    const node_location* loc = index_.find(it.h);
    if (!loc && !pending_at_.count(it.h))
      return status::corruption(
          fmt::format("reclamation: tree node {} reachable from a kept root is not stored in {}", it.h, dir_));
    if (loc && loc->pack < c.boundary && (!c.chosen || c.victims.count(loc->pack)))
      c.live[loc->pack].push_back({it.h, loc->offset, loc->length});
    if (it.level == 0 || !c.internal_seen.insert(it.h).second) continue;
    auto n = read_passing(it.h);  // as reachable_bytes
    if (!n) return n.error();
    if ((*n)->is_leaf()) continue;
    budget -= std::min<std::size_t>(budget, (*n)->encode().size());
    for (const auto& e : (*n)->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return status::corruption(fmt::format("reclamation: node {} has a bad child reference", it.h));
      c.stack.push_back({ref->hash, (*n)->level() - 1});
    }
  }
  return true;
}

// Victims: every candidate without a live record; every small candidate
// once four or more have piled up (each costs an open file, and they only
// appear when cycles seal small active packs); then the candidates with the
// least live data first, until the projected total is within 1 + (max - 1) / 2
// of the live bytes (halfway, so the next cycle is not due at once).
void node_store::reclaim_choose_victims() {
  auto& c = *cycle_;
  struct candidate {
    std::uint32_t num;
    std::uint64_t size, live;
  };
  std::vector<candidate> cands;
  std::uint64_t total = 0, live = 0;
  for (const auto& [num, p] : packs_) {
    std::uint64_t size = p == active_ ? written_size_ : p->sealed_size;
    total += size;
    if (num >= c.boundary) {
      live += size;  // written during the cycle: taken as live
      continue;
    }
    auto& v = c.live[num];
    std::sort(v.begin(), v.end(), [](const index_entry& a, const index_entry& b) { return a.offset < b.offset; });
    auto same_record = [](const index_entry& a, const index_entry& b) { return a.offset == b.offset; };
    v.erase(std::unique(v.begin(), v.end(), same_record), v.end());
    std::uint64_t l = file_header_size;
    for (const auto& e : v) l += e.length;
    live += l;
    cands.push_back({num, size, std::min(l, size)});
  }
  c.live_bytes = live;
  std::uint64_t projected = total;
  auto take = [&](const candidate& k) {
    if (c.victims.emplace(k.num, 0).second) {
      projected -= k.size - k.live;
      c.victim_bytes += k.size;
    }
  };
  std::size_t small = 0;
  for (const auto& k : cands) {
    if (k.live <= file_header_size) take(k);
    if (k.size < options_.target_pack_bytes / 4) ++small;
  }
  if (small >= 4)
    for (const auto& k : cands)
      if (k.size < options_.target_pack_bytes / 4) take(k);
  std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
    return static_cast<double>(a.live) / static_cast<double>(a.size) <
           static_cast<double>(b.live) / static_cast<double>(b.size);
  });
  const double target = static_cast<double>(live) * (1.0 + (c.max_amplification - 1.0) / 2.0);
  for (const auto& k : cands) {
    if (static_cast<double>(projected) <= target || k.live >= k.size) break;
    take(k);
  }
  for (auto it = c.live.begin(); it != c.live.end();) {
    if (c.victims.count(it->first))
      ++it;
    else
      it = c.live.erase(it);
  }
  c.chosen = true;
}

// Copies the live records of the victims, about `budget` bytes of them, to
// the active pack and makes them durable (one fdatasync a step: the copies
// never pile up into one long sync that would hold the owner's writes).
result<bool> node_store::reclaim_copy(std::size_t& budget) {
  auto& c = *cycle_;
  std::vector<pending_record> batch;
  bool done = true;
  for (auto& [num, at] : c.victims) {
    auto& list = c.live[num];
    auto p = packs_.at(num);
    for (; at < list.size(); ++at) {
      if (budget == 0) {
        done = false;
        break;
      }
      const index_entry& e = list[at];
      const node_location* loc = index_.find(e.hash);
      if (!loc || loc->pack != num) continue;  // copied already
      auto rec = read_record(e.hash, *p, *loc);
      if (!rec) return rec.error();
      budget -= std::min<std::size_t>(budget, loc->length);
      c.copied += loc->length;
      pending_record r;
      r.hash = e.hash;
      r.flags = rec->flags;
      r.raw_length = static_cast<std::uint32_t>(rec->raw.size());
      r.payload = std::move(rec->payload);
      batch.push_back(std::move(r));
    }
    if (!done) break;
  }
  if (!batch.empty()) {
    if (written_size_ >= options_.target_pack_bytes) MAGNETITE_TRY(seal_active());
    MAGNETITE_TRY(append_records(batch));
    MAGNETITE_TRY(sync_active());
  }
  return done;
}

// The switch: every live record of the victims is copied and durable; the
// manifest names the victims dropped, with the position covering the copies
// as its floor (so open keeps them whatever the owner recorded); then the
// victims are removed.
status node_store::reclaim_finish() {
  auto& c = *cycle_;
  std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  auto marked = reclaim_mark(unlimited);  // what writes since the last step marked
  if (!marked) return marked.error();
  unlimited = std::numeric_limits<std::size_t>::max();
  auto copied = reclaim_copy(unlimited);
  if (!copied) return copied.error();
  if (c.victims.empty()) return status::ok();
  MAGNETITE_TRY(sync_active());
  std::set<std::uint32_t> dropped = dropped_;
  for (const auto& [num, at] : c.victims) dropped.insert(num);
  std::uint32_t first = first_pack_;
  while (dropped.count(first)) dropped.erase(first++);
  const std::uint64_t position = make_position(active_->number, synced_size_);
  MAGNETITE_TRY(write_manifest(first, position, dropped));

  // The records left in the victims are garbage. index_ changes only under
  // write_mu_ (held), so it is read here without state_mu_; readers are held
  // off only while the entries are erased.
  std::vector<hash128> dead;
  index_.for_each([&](const hash128& h, const node_location& loc) {
    if (c.victims.count(loc.pack)) dead.push_back(h);
  });
  std::vector<std::shared_ptr<pack>> gone;
  {
    std::unique_lock sl(state_mu_);
    for (const auto& h : dead) index_.erase(h);
    for (const auto& [num, at] : c.victims) {
      gone.push_back(packs_.at(num));
      packs_.erase(num);
    }
  }
  epoch_.fetch_add(1, std::memory_order_release);  // nodes were dropped
  first_pack_ = first;
  gc_floor_ = position;
  dropped_ = std::move(dropped);
  // A failed removal leaves garbage that open removes; the store goes on.
  for (const auto& p : gone) {
    (void)env_.remove(p->path);
    (void)env_.remove(path_join(dir_, pack_index_file_name(p->number)));
  }
  (void)env_.sync_dir(dir_);
  std::lock_guard lk(reclaim_mu_);
  reclaim_.packs_dropped += gone.size();
  reclaim_.bytes_copied += c.copied;
  reclaim_.bytes_reclaimed += c.victim_bytes > c.copied ? c.victim_bytes - c.copied : 0;
  return status::ok();
}

result<bool> node_store::reclaim_step(std::size_t budget) {
  std::lock_guard wl(write_mu_);
  MAGNETITE_TRY(check_usable());
  if (!cycle_) return true;
  auto end_with = [&](status s) -> status {
    cycle_.reset();
    return s;
  };
  auto marked = reclaim_mark(budget);
  if (!marked) return end_with(marked.error());
  if (!*marked) return false;
  if (!cycle_->chosen) {
    reclaim_choose_victims();
    if (budget == 0) return false;
  }
  auto copied = reclaim_copy(budget);
  if (!copied) return end_with(copied.error());
  if (!*copied) return false;
  std::uint64_t live = cycle_->live_bytes;
  if (status s = reclaim_finish(); !s) return end_with(std::move(s));
  MAGNETITE_TRY(end_with(status::ok()));
  std::lock_guard lk(reclaim_mu_);
  ++reclaim_.cycles;
  reclaim_.live_bytes = live;
  return true;
}

}  // namespace magnetite::tree
