// Everything a read_view holds, read back through its scans: for the tests
// of shards, their views and their checkpoints.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <string>

#include "engine/keyspace.h"
#include "engine/read_view.h"

namespace magnetite::testing {

using kv_map = std::map<std::string, std::string>;

// Every live user key a view holds with its value (plain envelopes), read by
// scan or (backward) by scan_reverse; corruption if the keys do not come in
// order. No doctest macro: reader threads call it.
inline status read_all(const read_view& v, bool backward, kv_map& out) {
  std::string last;
  bool in_order = true;
  auto fn = [&](std::string_view k, std::string_view stored) {
    std::string uk(keyspace::user_key_of(k));
    if (!out.empty() && (backward ? !(uk < last) : !(last < uk))) in_order = false;
    last = uk;
    out[uk] = std::string(stored.substr(1));
    return true;
  };
  std::string from(1, keyspace::data_tag);
  status st = backward ? v.scan_reverse(from, keyspace::data_end(), fn) : v.scan(from, keyspace::data_end(), fn);
  if (!st) return st;
  if (!in_order) return status::corruption(fmt::format("{} scan out of order", backward ? "reverse" : "forward"));
  return status::ok();
}

inline kv_map read_all(const read_view& v, bool backward = false) {
  kv_map out;
  status st = read_all(v, backward, out);
  REQUIRE_MESSAGE(st.is_ok(), st.to_string());
  return out;
}

}  // namespace magnetite::testing
