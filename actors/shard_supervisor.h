// shard_supervisor: the actor that spawns a database's shard actors and
// restarts the ones that fail.
//
// Message -> effect:
//   down (a shard died, not on purpose)  -> restart it after a backoff that
//                                           doubles with each restart in a row
//   boot_failed(i, reason)               -> the same, for a shard that failed
//                                           to boot (its sentinel answers
//                                           meanwhile)
//   ok(i)                                -> shard i booted well: its backoff
//                                           starts over
//   get                                  -> ok, once every shard is spawned
//
// Contract: a shard that fails more than max_restarts times within `window`,
// or whose files cannot be opened (corruption, a newer format: restarting
// would find them again), is stopped: a sentinel takes its place and answers
// every request with the reason, which the shard's slot also shows. Before a
// shard is reopened, its slot lets go of the dead shard's view, so readers
// let go of its node store. Shards are not linked to the supervisor (a
// shard's death must not end it); when the supervisor ends, it ends them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/shard_actor.h"

namespace magnetite {

// What the supervisor and the database share: the current handle of each
// shard (it changes with each restart) and how often each was restarted.
struct shard_supervision {
  std::mutex mu;
  std::vector<shard_engine_actor> handles;
  std::vector<std::uint64_t> restarts;
};

// Whether a shard that failed with `why` would only fail again on a restart:
// its files are damaged or of a newer format.
bool boot_is_hopeless(const status& why);
// What a shard stopped for that reason answers from then on.
status files_cannot_be_opened(std::size_t shard, const status& why);

// `shared` must hold a handle slot and a restart count for each config.
caf::actor spawn_shard_supervisor(caf::actor_system& sys, std::shared_ptr<shard_supervision> shared,
                                  std::vector<shard_actor_config> configs, std::size_t max_restarts,
                                  std::chrono::milliseconds window, std::chrono::milliseconds backoff);

}  // namespace magnetite
