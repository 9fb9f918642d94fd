// shard_routing: which shard a routing key lives on. A database routes its
// calls with it and a cluster client picks the owner to ask with it, so both
// must agree forever: changing it moves every key (the MANIFEST's shard
// count is frozen for the same reason).
#pragma once

#include <cstddef>
#include <string_view>

#include <xxhash.h>

namespace magnetite {

// XXH3-64 of the key, modulo the shard count (> 0).
inline std::size_t shard_for(std::string_view routing_key, std::size_t shards) noexcept {
  return static_cast<std::size_t>(XXH3_64bits(routing_key.data(), routing_key.size()) % shards);
}

}  // namespace magnetite
