// shard_actor: one shard as a CAF actor (interface in shard_interface.h).
//
// Behaviour, as a table of message -> effect:
//   put / del / cas / batch  check, append to the log, stage; the reply waits
//                            for the group. The first write of a group sends
//                            (group) to the actor itself: every write already
//                            in the mailbox is handled before it, so they all
//                            share its ONE fsync (group commit). A CAS whose
//                            precondition fails changes nothing, but its answer
//                            also waits for the group it was judged against.
//   (group)                  one fsync for everything staged; publish the new
//                            view to the host's slot; THEN answer every write
//                            of the group; when the active memtable reached
//                            checkpoint_bytes, begin a checkpoint of it (on a
//                            thread of its own: writes go on into a new one),
//                            after waiting for the one before if it still
//                            runs (a stall); re-arm the TTL timer. If the
//                            fsync fails, every write of the group gets the
//                            error and the actor quits with it (fail-stop: the
//                            supervisor restarts it, which replays the log).
//   (expire, generation)     a stale generation is dropped; otherwise due keys
//                            are deleted through the log as one group and the
//                            timer is armed for the next deadline. ONE timer is
//                            armed at a time, through the actor's clock
//                            (delayed_send), so virtual time drives it in tests.
//   get / range              answered from the published view (committed
//                            writes: durable ones, except under `interval`).
//   (aged)                   the checkpoint_interval timer, armed by the first
//                            group after a checkpoint: begin a checkpoint if
//                            the memtable still holds writes.
//   (ckptdone)               a background checkpoint's work is over: its
//                            commit marker, the view of the new root, and a
//                            reclamation cycle if one is due.
//   (durable)                the fsync_interval timer, only under the `interval`
//                            policy: armed (once; not again while armed) by a
//                            group that leaves acknowledged writes non-durable,
//                            it fdatasyncs the log. So when writes stop, an
//                            acknowledged write is lost only by a crash within
//                            about fsync_interval; it is visible to readers
//                            before it is durable. If that fsync fails the
//                            actor quits with the error (fail-stop).
//   stamped                  a replicated shard's writes (shard::apply_stamped):
//                            staged like a batch, answered after the group
//                            with which were taken.
//   (promise, payload)       the replication layer's promise state: appended
//                            to the log, answered once durable (the group's
//                            fsync, whatever the policy).
//   (promise)                the latest promise state, read after the group.
//   import / merge / adopt   delta transfer from a peer replica: nodes stored
//                            bottom up; then the group, a checkpoint, and the
//                            foreign root's winners staged (adopt: and our
//                            stamped entries it lacks deleted), answered
//                            after their group.
//   commit                   the group, then a checkpoint: the new root.
//   shutdown                 commit, then quit normally.
//
// Boot failure: if the shard cannot be opened, the actor stays up as a
// sentinel that answers every request (queued or later) with the startup
// error at once, and tells the supervisor, which decides about restarting.
// Nothing waits on a dead shard: writes staged when the actor dies are
// answered with an ambiguous `failed` error.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "actors/shard_interface.h"
#include "core/admission_budget.h"

namespace magnetite {

// What the host reads without messaging the actor: the shard's latest view.
// Null view: the shard is not serving (booting, restarting or failed); then
// `error` says why, if anything is known.
struct shard_slot {
  std::atomic<std::shared_ptr<const read_view>> view;
  std::atomic<std::shared_ptr<const status>> error;
  // What space reclamation must keep besides the shard's own roots: this
  // shard's roots in the database's retained checkpoints (set before the
  // shard starts and after each commit). While `held` is above 0 (a commit or
  // gc of the database is under way) no reclamation cycle starts: a root a
  // commit got from the shard is retained only once its line is written.
  std::atomic<std::shared_ptr<const std::vector<hash128>>> retained;
  std::atomic<int> held{0};
  // The shard's share of the database's bounded admission: every host write
  // is admitted here before it is sent, and released once answered. Lives
  // with the slot, so a restart keeps what is in.
  std::unique_ptr<admission_budget> admission;
};

using boot_failed_atom = caf::atom_constant<caf::atom("bootfail")>;

struct shard_actor_config {
  env* fs = nullptr;
  std::string dir;
  shard_options options;
  std::shared_ptr<shard_slot> slot;
  std::size_t index = 0;
  // Told (boot_failed_atom, index, error) when the shard cannot open.
  caf::actor supervisor;
  std::size_t expire_batch = 10'000;
  // Set: the actor opens nothing and answers everything with this error (what
  // the supervisor leaves in place of a shard that failed too often).
  std::optional<status> fail_with;
  // Test hook: runs before each write is staged; an exception it throws ends
  // the actor the way a bug in a handler would.
  std::function<void(const std::string& key)> before_write;
  // Test hook: runs when the shard begins a space reclamation cycle.
  std::function<void()> reclaim_began;
  // Checkpoints begun after a group (or by the aged timer) apply their
  // memtable to the tree on a thread of their own while the actor goes on
  // (the database's shards). Off, they run in the actor's handler: under
  // CAF's test coordinator, whose queue only the test's thread may touch.
  bool background_checkpoints = false;
};

shard_engine_actor spawn_shard(caf::actor_system& sys, shard_actor_config config);

}  // namespace magnetite
