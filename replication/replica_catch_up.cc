// Catching up: pulling a peer's tree and merging it, anti-entropy pushes of
// our root, and the long-absence rule's recovery (docs/design/replication.md,
// 6). See replica_actor.h for the rules these carry out.

#include <algorithm>

#include "replication/replica_internal.h"
#include "tree/tree_puller.h"

namespace magnetite::replication::replica_internal {

namespace {

// Writes our promise state (synced_ns or settled_ns moved) when `force`, or
// when synced_ns moved far enough since it was last written: a crash that
// loses the rest only makes us look absent sooner.
void persist_progress(self_ptr self, bool force) {
  auto& st = self->state;
  auto step = static_cast<std::uint64_t>(st.config.tombstone_retention.count()) / 16;
  if (!force && st.ps.synced_ns < st.durable_synced + step) return;
  auto synced = st.ps.synced_ns;
  persist_then(
      self, [self, synced] { self->state.durable_synced = std::max(self->state.durable_synced, synced); },
      [](caf::error&) {});  // a failed fsync stops the shard; its restart replays the last one written
}

// A pull from `from` that began at `began` completed: once pulls from enough
// distinct peers began after a moment, we hold every write committed before it.
void note_pull(self_ptr self, std::uint32_t from, std::uint64_t began) {
  auto& st = self->state;
  auto& at = st.pulled_at[from];
  at = std::max(at, began);
  std::size_t need = st.pulls_for_sync();
  if (need == 0 || st.pulled_at.size() < need) return;
  std::vector<std::uint64_t> times;
  for (const auto& [id, t] : st.pulled_at) times.push_back(t);
  std::sort(times.begin(), times.end(), std::greater<>());
  if (times[need - 1] <= st.ps.synced_ns) return;
  bool was_absent = st.absent();
  st.ps.synced_ns = times[need - 1];
  persist_progress(self, was_absent);
}

}  // namespace

// Pulls `root` from peer `from` into our shard and merges it (adopt: and
// drops what only we hold).
void pull_and_merge(self_ptr self, hash128 root, std::uint32_t from,
                    std::function<void(const status&, const merge_report&)> done, bool adopt) {
  auto& st = self->state;
  std::uint64_t began = st.config.clock();
  auto peer = st.peers.find(from);
  if (peer == st.peers.end())
    return done(status::invalid_argument(fmt::format("sync from node {}: not a peer of node {}", from, st.config.node)),
                {});
  auto slot = st.config.slot;
  auto puller = std::make_shared<tree::tree_puller>(root, [slot](const hash128& h) {
    auto v = slot->view.load();
    return v && v->store()->contains(h);
  });
  auto import_failed = std::make_shared<status>();
  auto shard = st.config.shard();
  auto send_imports = [self, shard, import_failed](std::vector<hash128> hs, std::vector<std::string> bs) {
    if (hs.empty()) return;
    self->request(shard, caf::infinite, import_atom::value, std::move(hs), std::move(bs))
        .then([](ok_atom) {},
              [import_failed](caf::error& e) {
                if (import_failed->is_ok()) *import_failed = to_status(e);
              });
  };
  // Each round of the walk is `step`. Only the fetch out holds it (and the
  // caller during the first round): the step itself refers to itself weakly.
  // Holding itself, a pull whose answer never comes (the replica stopped:
  // CAF drops its pending handlers) kept its puller, and with it the shard's
  // slot and node store, open for good; a node restarted in the same process
  // then found its data directory locked.
  auto step = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_step = step;
  *step = [self, root, from, began, adopt, puller, import_failed, shard, send_imports, weak_step, target = peer->second,
           done]() {
    auto collect = [](std::vector<hash128>& hs, std::vector<std::string>& bs) {
      return [&hs, &bs](const hash128& h, std::string_view bytes) {
        hs.push_back(h);
        bs.emplace_back(bytes);
        return status::ok();
      };
    };
    if (puller->done()) {
      std::vector<hash128> hs;
      std::vector<std::string> bs;
      if (status s = puller->finish(collect(hs, bs)); !s) return done(s, {});
      send_imports(std::move(hs), std::move(bs));
      auto merged = adopt ? self->request(shard, caf::infinite, adopt_atom::value, root)
                          : self->request(shard, caf::infinite, merge_atom::value, root);
      merged.then(
          [self, from, began, puller, import_failed, done](const merge_report& r) {
            if (!import_failed->is_ok()) return done(*import_failed, {});
            auto& st = self->state;
            st.pulled_nodes += puller->stats().nodes;
            st.pulled_bytes += puller->stats().bytes;
            st.merged_entries += r.taken;
            note_pull(self, from, began);
            done(status::ok(), r);
          },
          [done](caf::error& e) { done(to_status(e), {}); });
      return;
    }
    auto want = puller->next_request(self->state.config.pull_batch);
    self->request(target, self->state.config.request_timeout, fetch_atom::value, want)
        .then(
            [want, puller, collect, send_imports, step = weak_step.lock(), done](const std::vector<std::string>& got) {
              std::vector<hash128> hs;
              std::vector<std::string> bs;
              if (status s = puller->take(want, got, collect(hs, bs)); !s) return done(s, {});
              send_imports(std::move(hs), std::move(bs));
              (*step)();
            },
            [done](caf::error& e) { done(to_status(e), {}); });
  };
  (*step)();
}

namespace {

void end_recovery(self_ptr self) {
  auto& st = self->state;
  st.recovering = false;
  auto waiting = std::move(st.after_recovery);
  st.after_recovery.clear();
  for (auto& f : waiting) f();
}

}  // namespace

// The long-absence rule (design, 6). We are absent: our last sync is older
// than half the tombstone retention, so we may hold values whose delete was
// purged elsewhere meanwhile, and we acknowledged nothing since our horizon.
// Every peer tells where it stands. One that held every committed write at a
// moment past our horizon holds all we ever acknowledged: we adopt its tree
// (what only we hold goes). A peer that knows recent writes but not yet past
// our horizon soon will: we wait. If no answer knows recent writes and a
// majority (ourselves included) answered, the cluster was down or cut off as a
// whole for that long: we settle, keeping our data, since dropping it could
// lose acknowledged writes and nobody knows better. `then` runs once decided.
void recover(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.absent()) return then();
  st.after_recovery.push_back(std::move(then));
  if (st.recovering) return;
  st.recovering = true;
  ask_every_peer<replica_info>(
      self, self->state.config.request_timeout,
      [self](std::vector<std::pair<std::uint32_t, std::optional<replica_info>>> answers) {
        auto& st = self->state;
        if (!st.absent()) return end_recovery(self);
        const replica_info* best = nullptr;
        bool someone_knows = false;
        std::size_t answered = 1;
        for (const auto& [id, a] : answers) {
          if (!a) continue;
          ++answered;
          if (a->synced_ns >= st.horizon() && (!best || a->synced_ns > best->synced_ns)) best = &*a;
          if (st.knows_recent(*a)) someone_knows = true;
        }
        if (best) {
          auto synced = best->synced_ns;
          return pull_and_merge(
              self, best->root, best->node,
              [self, synced](const status& s, const merge_report&) {
                if (s) {
                  auto& st2 = self->state;
                  st2.ps.synced_ns = std::max(st2.ps.synced_ns, synced);
                  persist_progress(self, true);
                }
                end_recovery(self);
              },
              true);
        }
        if (!someone_knows && answered >= st.majority()) {
          st.ps.settled_ns = std::max(st.ps.settled_ns, st.config.clock());
          persist_progress(self, true);
        }
        end_recovery(self);
      },
      info_atom::value);
}

// Anti-entropy: our checkpointed root to the next peer in turn, which pulls
// the nodes it lacks from us and merges them by highest stamp. Idle trees
// cost a root comparison; a replica that missed writes catches up by delta.
void push_root(self_ptr self) {
  auto& st = self->state;
  if (st.absent()) return;  // what only we hold may be deletes purged elsewhere
  auto next = st.peers.end();
  for (std::size_t i = 0; i < st.peers.size(); ++i) {
    next = st.peers.upper_bound(st.pushed_last);
    if (next == st.peers.end()) next = st.peers.begin();
    st.pushed_last = next->first;
    auto to = next->second.address();
    auto out = st.pushing.find(next->first);
    bool busy = out != st.pushing.end() && out->second.to == to;
    if (!busy && st.monitored.count(to)) break;
    next = st.peers.end();
  }
  if (next == st.peers.end()) return;
  std::uint32_t id = next->first;
  auto peer = next->second;
  std::uint64_t number = ++st.pushes;
  st.pushing[id] = {peer.address(), number};
  auto over = [self, id, number](auto&&...) {
    auto& p = self->state.pushing;
    if (auto it = p.find(id); it != p.end() && it->second.number == number) p.erase(it);
  };
  self->request(st.config.shard(), caf::infinite, checkpoint_atom::value)
      .then(
          [self, peer, over](const hash128& root) {
            // A pull can take many round trips: its deadline is longer.
            self->request(peer, self->state.config.request_timeout * 30, sync_atom::value, root,
                          self->state.config.node)
                .then([over](const merge_report&) { over(); }, [over](caf::error&) { over(); });
          },
          [over](caf::error&) { over(); });
}

}  // namespace magnetite::replication::replica_internal
