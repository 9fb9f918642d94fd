// transaction_coordinator: commits a transaction whose keys live on two or
// more shards of one database, atomically, by two-phase commit with the
// shard actors as participants (docs/design/transactions.md).
//
//   1. prepare: every participant but the coordinator (the lowest shard)
//      checks its part's revisions, logs a prepare record holding the
//      writes, and holds the keys (prepared_transactions.h). Any refusal or
//      failure: abort.
//   2. commit at the coordinator: it checks its own part and, if that holds
//      and no decision exists, applies its writes and the decision record
//      `commit` in ONE frame. Before that, nobody hears a decision; after
//      it, the decision never changes (a later request finds the one that
//      stands). A failed check there writes nothing: abort.
//   3. finish: every other participant applies (or drops) its writes in one
//      frame with the deletion of its prepare record, and lets go of its
//      keys. Then the coordinator forgets the decision.
//
// Presumed abort: a transaction with a prepare and no decision record is
// aborted by whoever resolves it, by writing `abort` as the decision first,
// so a driver that only got slow cannot decide `commit` afterwards.
// Resolution runs (a) at open, before the database serves, for every prepare
// that replay brought back (a process killed at any step), and (b) in the
// background when a commit's driver gave up before every participant
// finished (a deadline, a shard that was restarting): the participant's keys
// stay held until then, so nobody reads around the decision.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "actors/shard_supervisor.h"
#include "actors/state_storage.h"

namespace magnetite {

class transaction_coordinator {
 public:
  using deadline = std::chrono::steady_clock::time_point;

  transaction_coordinator(caf::actor_system& system, std::shared_ptr<shard_supervision> shards);
  // Stops the background resolution; what it had not finished is resolved
  // at the next open.
  ~transaction_coordinator();
  transaction_coordinator(const transaction_coordinator&) = delete;
  transaction_coordinator& operator=(const transaction_coordinator&) = delete;

  // Parts on distinct shards, two or more. Errors: conflict (transient) when
  // a key is held by another transaction being committed; a participant's
  // error with nothing written (transient) when the prepare phase failed;
  // timeout (ambiguous) when the deadline passed after the decision was
  // requested: the transaction is then committed or aborted as a whole, and
  // its keys stay held until it is resolved.
  result<transaction_outcome> commit(std::vector<transaction_part> parts, std::optional<deadline> until = {});

  // What open does before serving: finishes every transaction prepared on
  // any shard (`prepared[i]`: shard i's, with their coordinators), asking (or
  // writing `abort` as) each one's decision, then forgets every decision
  // record (`decided[i]`: those shard i holds). With a shard down, whose
  // prepares nobody saw, no decision is forgotten: that shard asks for it
  // when it is resolved at a later open.
  status resolve_at_open(const std::vector<std::vector<std::pair<hash128, std::uint32_t>>>& prepared,
                         const std::vector<std::vector<hash128>>& decided, bool every_shard_up);

 private:
  struct in_doubt {
    hash128 id;
    std::uint32_t coordinator = 0;
    std::vector<std::uint32_t> participants;
  };
  shard_engine_actor handle(std::size_t shard) const;
  // The decision that stands (writing `abort` if there is none), then every
  // participant finished by it, then (with `forget`) the decision
  // forgotten. Retries a participant that is restarting until `until`.
  status resolve(const in_doubt& t, deadline until, bool forget);
  void resolve_later(in_doubt t);
  void background();

  caf::actor_system& system_;
  std::shared_ptr<shard_supervision> shards_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<in_doubt> queue_;
  bool stopping_ = false;
  std::thread thread_;  // started by the first resolve_later
};

}  // namespace magnetite
