// What tests that open a whole database share: options with small tree nodes
// (so that a few hundred keys make a deep tree) and an open that fails the
// test case with the error's text.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "actors/database.h"

namespace magnetite::testing {

inline database_options options_for(const std::string& dir, std::size_t shards = 4) {
  database_options o;
  o.dir = dir;
  o.shards = shards;
  o.shard.chunking = {256, 64, 1024};
  return o;
}

inline std::unique_ptr<database> must_open(database_options o) {
  auto db = database::open(std::move(o));
  REQUIRE_MESSAGE(db.is_ok(), db.error().to_string());
  return std::move(*db);
}

}  // namespace magnetite::testing
