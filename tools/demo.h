// demo: `magnetite demo`, the guided tour `make demo` runs. On the database in
// `dir` (created with `shards` shards if new, by default
// database_options::default_shards()) it shows, through the library's
// own calls and never a simulation of them: group commit under concurrent
// durable writers, a shard actor killed mid-load and restarted by its
// supervisor with no acknowledged write lost, TTL expiry by the shards' timers,
// checkpoints and their roots, a diff between two checkpoints, verify and gc;
// then a summary table. Its keys carry a per-run prefix, so it can run again on
// the same directory. Returns a failure as its status; exit code 0 or 1 (a
// check of the tour itself failed, e.g. a write was lost).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/status.h"

namespace magnetite {

result<int> run_demo(const std::string& dir, std::optional<std::size_t> shards);

}  // namespace magnetite
