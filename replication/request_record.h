// request_record: how an owner remembers that a client's write took place,
// so that a retry of it (after a timeout, a lost connection, a failover) is
// answered as the write was and writes nothing again.
//
// A write that carries a request_id is shipped in ONE batch with its record:
// a stamped put of request_record_key(id), in the state space, that expires
// after the cluster's request memory. Both are in the same log frame at every
// replica, so a replica holds the record exactly when it holds the write; a
// new owner merged every write a majority made durable before it serves
// (docs/design/replication.md, 3), so it finds the record of every write that
// was acknowledged, and of no write that was lost. Only writes that changed
// something leave a record: a CAS that was refused wrote nothing, and its
// retry is simply a new attempt.
//
// The layout (docs/formats/state.md, "Request records"):
//   key    FF FF 69 | session (16 bytes, hash128 big-endian) | seq (u64 BE)
//   value  the write's revision (u64 LE, never 0), as every state value
//          starts with one: a plain write's is the seq of the record's own
//          stamp; a conditional batch's the revision its values carry, which
//          a retry is answered with
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "actors/caf_headers.h"  // before any other CAF header

#include "magnetite/hash128.h"

namespace magnetite::replication {

// A client's name for one write, the same on every retry of it: its session
// (random, one per cluster client) and a number the session never reuses.
struct request_id {
  hash128 session;
  std::uint64_t seq = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_id& x) {
  return f(caf::meta::type_name("request_id"), x.session, x.seq);
}

// How long a record is kept: a retry later than this may apply a write twice.
// Clients give up retrying long before (cluster_options::call_timeout).
inline constexpr std::chrono::minutes default_request_memory{10};

std::string request_record_key(const request_id& id);
std::string request_record_value(std::uint64_t revision);

}  // namespace magnetite::replication
