// data_directory: the files a database keeps at the top of its directory
// (docs/formats/data_directory.md): the LOCK that keeps a second process out, the
// MANIFEST that records the shard count, and a directory shard-NNN a shard.
//
// Contract: nothing here trusts a MANIFEST that is not durable, and a
// directory whose files disagree (shard directories the MANIFEST does not
// account for, another shard count) is refused with the reason named, never
// repaired: opening it would route keys away from the shards that hold them.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace magnetite {

// The directory of shard i.
std::string shard_dir(const std::string& dir, std::size_t i);

// A data directory is a directory, or does not exist yet: a regular file
// there (or in place of one of its parents) is refused by name.
status check_data_directory(env& fs, const std::string& dir);

// Takes the directory's LOCK: busy, naming the directory, while another
// process (or another open in this one) holds it.
result<std::unique_ptr<file_lock>> lock_data_directory(env& fs, const std::string& dir);

// What in `dir` others than its owner may read, write or enter (any of the
// group and other permission bits), as warnings to show: one for the
// directory itself, one for what lies under it (a count and the first).
// Empty when all is private, or when the file layer knows no permissions.
std::vector<std::string> exposure_warnings(env& fs, const std::string& dir);

// The shard count an existing MANIFEST records; nullopt if there is none.
// The caller has checked that `dir` is a directory (check_data_directory).
result<std::optional<std::size_t>> read_manifest(env& fs, const std::string& dir);

// Writes the MANIFEST of a new database (whole and durable), or checks an
// existing one against `shards` and the shard directories present, and makes
// it durable before it is trusted.
status check_manifest(env& fs, const std::string& dir, std::size_t shards);

}  // namespace magnetite
