// transaction_records: the two records a transaction across shards leaves in
// the logs (docs/formats/state.md, "Transactions across shards").
//
// - A prepare record, on each participant: the transaction's writes and the
//   keys it read, held until the decision. Written with the participant's
//   checks in ONE frame (shard::apply), so a participant holds a prepare
//   exactly when its checks passed; deleted in the frame that applies (or
//   drops) the writes.
// - A decision record, on the coordinator: commit or abort, and the
//   participants. Written before any participant hears the decision, never
//   overwritten (a second decide answers the first), deleted once every
//   participant has finished.
//
// Both are state values (a revision, then a type byte and a body); the type
// bytes 21 and 22 are theirs alone. Decoding checks every length against the
// bytes: a damaged record is corruption, never a read past the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/read_view.h"
#include "magnetite/hash128.h"
#include "magnetite/write.h"

namespace magnetite::transaction_records {

inline constexpr std::string_view prepare_prefix{"\xff\xff\x70", 3};
inline constexpr std::string_view decision_prefix{"\xff\xff\x64", 3};
inline constexpr std::uint8_t prepare_type = 0x21;
inline constexpr std::uint8_t decision_type = 0x22;

struct prepare {
  hash128 id;
  std::uint32_t coordinator = 0;    // the shard that holds the decision
  std::vector<std::string> reads;   // state keys checked, held against writers
  std::vector<batch_write> writes;  // state keys, values without revision, no ttl
};

struct decision {
  bool commit = false;
  std::vector<std::uint32_t> participants;
};

std::string prepare_key(const hash128& id);
std::string decision_key(const hash128& id);
// The id in a key of either record, or nullopt for a key of another shape.
std::optional<hash128> id_of(std::string_view key, std::string_view prefix);

// The ids of the records under `prefix` (prepare_prefix or decision_prefix)
// a view holds; a key of another shape there is corruption.
result<std::vector<hash128>> ids_in(const read_view& view, std::string_view prefix);

// The body (the bytes after the revision) of each record.
std::string encode_prepare(const prepare& p);
std::string encode_decision(const decision& d);
// From a stored state value (revision first); `id` is the key's.
result<prepare> decode_prepare(const hash128& id, std::string_view value);
result<decision> decode_decision(std::string_view value);

}  // namespace magnetite::transaction_records
