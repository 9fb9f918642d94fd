// envelope: how a value and its expiry are stored together.
//
//   byte 0      format: 0x00 = no expiry, 0x01 = expires
//   bytes 1..8  (format 0x01 only) absolute expiry, u64 little-endian, in
//               nanoseconds since the Unix epoch
//   the rest    the user's value
//
// A replicated shard's writes carry their stamp (core/stamp.h), and a delete
// leaves a stamped tombstone, so replicas can merge by "highest stamp wins"
// (docs/formats/replication.md):
//   0x02 | stamp (20 bytes) | value                     stamped, no expiry
//   0x03 | stamp | expiry u64 LE | value                stamped, expires
//   0x04 | stamp | purge deadline u64 LE                tombstone (no value bytes)
// A tombstone reads as absent; its deadline is when the TTL timer may drop it
// for good (the cluster's tombstone retention after the delete).
//
// The ABSOLUTE expiry is fixed when a write is accepted and stored with the
// value, so every replica stores the same bytes for one write (the reference
// engine's replicas each computed now + ttl themselves and diverged). A reader
// treats a value whose expiry is <= its clock's now as absent.
//
// Invariant: unwrap(wrap(v, e)) == {v, e} for every value and expiry; any other
// input is corruption, never a guess.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/stamp.h"
#include "core/status.h"

namespace magnetite::ttl {

inline constexpr std::size_t max_envelope_overhead = 9;
inline constexpr std::size_t max_stamped_overhead = 1 + stamp::encoded_bytes + 8;

std::string wrap(std::string_view value, std::optional<std::uint64_t> expires_at_ns);
// The same, appended to `out`.
void wrap_into(std::string& out, std::string_view value, std::optional<std::uint64_t> expires_at_ns);
// value nullopt: a tombstone, whose deadline (required) is its purge deadline.
std::string wrap_stamped(const stamp& st, std::optional<std::string_view> value,
                         std::optional<std::uint64_t> expires_at_ns);

struct unwrapped {
  std::string_view value;
  std::optional<std::uint64_t> expires_at_ns;  // a tombstone's: its purge deadline
  std::optional<magnetite::stamp> stamp;        // only the stamped forms
  bool tombstone = false;

  bool expired(std::uint64_t now_ns) const noexcept { return expires_at_ns && *expires_at_ns <= now_ns; }
  // What a reader sees: a value that is neither a tombstone nor expired.
  bool live(std::uint64_t now_ns) const noexcept { return !tombstone && !expired(now_ns); }
};

// Views into `stored`.
result<unwrapped> unwrap(std::string_view stored);

// What a reader at now_ns sees of stored bytes: the value, or nullopt once it
// has expired (a tombstone: always nullopt).
result<std::optional<std::string>> live_value(std::string_view stored, std::uint64_t now_ns);

}  // namespace magnetite::ttl
