// stored_entries: every data entry of a shard's published view as stored
// (user key -> envelope bytes): what replicas must agree on byte for byte.
#pragma once

#include <map>
#include <string>

#include <doctest/doctest.h>

#include "engine/keyspace.h"
#include "engine/shard.h"

namespace magnetite::testing {

inline std::map<std::string, std::string> stored_entries(const shard& s) {
  std::map<std::string, std::string> out;
  REQUIRE(s.view()
              ->scan(std::string(1, keyspace::data_tag), keyspace::data_end(),
                     [&](std::string_view k, std::string_view v) {
                       out[std::string(keyspace::user_key_of(k))] = std::string(v);
                       return true;
                     })
              .is_ok());
  return out;
}

}  // namespace magnetite::testing
