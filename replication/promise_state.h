// promise_state: what one replica of one shard has promised, and the rules a
// replica follows for prepares and writes (docs/design/replication.md, 2).
//
//   promised  the highest ballot promised; prepares and writes below it are refused
//   epoch     the ballot of the owner whose writes were last accepted
//   minted    the highest ballot counter this node minted for the shard
//   synced_ns when this replica last knew it held every write committed
//             before it (wall clock; 0: never), the base of the long-absence
//             rule (docs/design/replication.md, 6)
//   settled_ns when it last agreed with a majority as absent as itself to
//             serve again without such knowledge (a whole-cluster restart)
//
// The rules are pure: each returns the decision and, when the state changed,
// the new state. The caller must make a changed state durable (the shard's
// `(promise, payload)`, answered after its fsync) BEFORE it sends any reply
// that depends on it, and must not act on a decision whose state it could not
// make durable.
//
// Invariants: promised never decreases; epoch <= promised; minted, synced_ns
// and settled_ns only grow, and a minted ballot is above every ballot the
// node had seen when it minted.
//
// Ballots a replica takes are bounded (docs/design/replication.md, 7.2): a
// counter above max_ballot_counter, or more than max_ballot_jump above the
// highest counter this replica has promised or minted, is refused as a
// prepare or a write and changes nothing. An honest counter grows by one a
// campaign from the highest the candidate has seen, so no honest ballot is
// ever refused by either bound (2^32 elections missed, or 2^62 in all, at
// one a millisecond take 49 days and 146 million years). Without them one
// message carrying counter 2^64-1 became a promise no candidate could ever
// mint above (mint wrapped to 0), durable, and the shard never elected an
// owner again.
// The encoding (docs/formats/replication.md) is fixed-size and versioned;
// decode refuses anything else as corruption.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/stamp.h"
#include "core/status.h"

namespace magnetite::replication {

inline constexpr std::uint64_t max_ballot_counter = std::uint64_t{1} << 62;
inline constexpr std::uint64_t max_ballot_jump = std::uint64_t{1} << 32;

struct promise_state {
  ballot promised;
  ballot epoch;
  std::uint64_t minted = 0;
  std::uint64_t synced_ns = 0;
  std::uint64_t settled_ns = 0;

  friend bool operator==(const promise_state&, const promise_state&) = default;

  static constexpr std::size_t encoded_bytes_v1 = 4 + 1 + 12 + 12 + 8;
  static constexpr std::size_t encoded_bytes = encoded_bytes_v1 + 8 + 8;  // version 2, written now
  // Decodes version 1 (synced_ns and settled_ns 0) and version 2.
  std::string encode() const;
  static result<promise_state> decode(std::string_view bytes);

  // Whether `b` is within the bounds above, as seen from this state.
  bool reachable(const ballot& b) const noexcept;
};

// What a replica answers a prepare or a write with.
struct decision {
  bool accepted = false;
  ballot promised;                     // the replica's promise after the rule (the refusal's reason)
  std::optional<promise_state> store;  // set: make this durable before replying
};

// prepare(b): promise b if it is above every ballot promised so far (and
// reachable).
decision on_prepare(const promise_state& s, const ballot& b);
// A write of epoch e: refused below the promise (a deposed owner) or when not
// reachable; accepted at it; above it the replica missed the election e
// won, and adopts e.
decision on_write(const promise_state& s, const ballot& e);

// A new ballot for this node as a candidate: above everything it has seen.
// The returned state (minted moved) must be durable before the prepare goes out.
// None once the counter would pass max_ballot_counter (never wraps).
struct minted_ballot {
  ballot b;
  promise_state store;
};
std::optional<minted_ballot> mint(const promise_state& s, std::uint32_t node);

// The promise state a shard's log holds: decoded, or the initial state when it
// holds none.
result<promise_state> from_log(const std::optional<std::string>& payload);

}  // namespace magnetite::replication
