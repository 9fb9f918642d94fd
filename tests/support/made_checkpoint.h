// made_checkpoint: a checkpoint of made-up roots, for the tests of the files
// that name checkpoints (CHECKPOINTS, TAGS): the i-th of a database of
// `shards` shards, its combined root matching its roots.
#pragma once

#include <fmt/format.h>

#include <cstddef>

#include "engine/checkpoint_log.h"

namespace magnetite::testing {

inline checkpoint made_checkpoint(int i, std::size_t shards = 3) {
  checkpoint c;
  for (std::size_t s = 0; s < shards; ++s) c.roots.push_back(hash128::of(fmt::format("root {} of shard {}", i, s)));
  c.combined = checkpoint_log::combine(c.roots);
  return c;
}

}  // namespace magnetite::testing
