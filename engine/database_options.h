// The checks of database_options (<magnetite/options.h>, which declares
// validate() and default_shards()) that need more than the options: the
// memory budget is judged against the shard count, which an open without one
// learns only from the MANIFEST.
#pragma once

#include <cstddef>
#include <optional>

#include "core/status.h"
#include "magnetite/options.h"

namespace magnetite {

// At least 1 MiB a shard.
status check_memory_budget(const std::optional<std::size_t>& memory_budget, std::size_t shards);

}  // namespace magnetite
