// database_options (<magnetite/options.h>): the defaults and checks of a
// database's options, which open applies before it touches the directory.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "engine/database_options.h"

namespace magnetite {

std::size_t database_options::default_shards() noexcept {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16);
}

status check_memory_budget(const std::optional<std::size_t>& memory_budget, std::size_t shards) {
  if (memory_budget && *memory_budget < shards * (std::size_t{1} << 20))
    return status::invalid_argument(
        fmt::format("database option memory_budget = {} bytes: must be at least 1 MiB a shard ({} bytes for {} shards)",
                    *memory_budget, shards * (std::size_t{1} << 20), shards));
  return status::ok();
}

status database_options::validate() const {
  if (dir.empty()) return status::invalid_argument("database option dir is empty");
  if (shards && (*shards == 0 || *shards > 4096))
    return status::invalid_argument(fmt::format("database option shards = {}: must be 1..4096", *shards));
  if (shards) MAGNETITE_TRY(check_memory_budget(memory_budget, *shards));
  if (retained_checkpoints == 0 || retained_checkpoints > 1024)
    return status::invalid_argument(
        fmt::format("database option retained_checkpoints = {}: must be 1..1024", retained_checkpoints));
  if (admission_bytes < (std::size_t{1} << 20))
    return status::invalid_argument(
        fmt::format("database option admission_bytes = {}: must be at least 1 MiB", admission_bytes));
  if (admission_requests < 16)
    return status::invalid_argument(
        fmt::format("database option admission_requests = {}: must be at least 16", admission_requests));
  if (writer_spin.count() < 0 || writer_spin > std::chrono::milliseconds(100))
    return status::invalid_argument(
        fmt::format("database option writer_spin = {} us: must be 0..100000", writer_spin.count()));
  if (restart_backoff.count() <= 0) return status::invalid_argument("database option restart_backoff must be > 0");
  if (restart_window.count() <= 0) return status::invalid_argument("database option restart_window must be > 0");
  return shard.validate();
}

}  // namespace magnetite
