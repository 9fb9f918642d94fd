// history: the versions a database keeps. Every commit() checkpoints each
// shard into a Merkle root and records one root over them (a checkpoint);
// diff() compares two roots key by key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "magnetite/config.h"
#include "magnetite/hash128.h"

namespace magnetite {

struct checkpoint {
  hash128 combined;
  std::vector<hash128> roots;  // one a shard, in shard order
};

// A version kept under a name (database::tag) until it is untagged, however
// many commits follow.
struct version_tag {
  std::string name;
  checkpoint version;
};

// A key that differs between two roots: the user's key and values (the TTL
// envelope removed; a change of deadline alone shows as `changed` with equal
// values).
struct key_change {
  enum class kind { added, removed, changed };
  kind what = kind::added;
  std::string key;
  std::optional<std::string> old_value;  // removed, changed
  std::optional<std::string> new_value;  // added, changed
};

// What commit() made: each shard's root, in shard order, and one root over
// them (the checkpoint's `combined`).
struct commit_result {
  std::vector<hash128> roots;
  hash128 combined;
};

}  // namespace magnetite
