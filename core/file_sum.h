// file_sum: the XXH3-128 of a file's first bytes, read in bounded chunks, for
// checksums kept beside files too large to hold in memory (a backup's packs).
#pragma once

#include <cstdint>
#include <string>

#include "core/env.h"
#include "core/hash128.h"

namespace magnetite {

// The same value as hash128::of over those bytes. corruption, naming the
// file, if it holds fewer than `bytes`.
result<hash128> file_sum(env& e, const std::string& path, std::uint64_t bytes);

}  // namespace magnetite
