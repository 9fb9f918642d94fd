// layout: the keys and values state/ keeps in a shard (docs/formats/state.md).
//
// Every state key is a user key in the state space (state_space::prefix,
// FF FF), so the log, replay, TTL, verify, diff and gc treat it as any key;
// only shard::apply writes it. Components are encoded with core's key_encoder:
// B(x) is prefix-free and keeps the order of x, so distinct tuples never give
// one key, whatever bytes they hold, and keys sort as their tuples do.
//
//   record         FF FF 72 B(ns) B(key)            routing key FF FF 72 B(ns)
//   stream meta    FF FF 73 B(stream) 00            routing key FF FF 73 B(stream)
//   stream entry   FF FF 73 B(stream) 01 U64(seq)
//   value          FF FF 63 B(ns) B(owner) 76 B(name)   routing key FF FF 63 B(ns) B(owner)
//   map entry      FF FF 63 B(ns) B(owner) 6D B(name) 01 B(map key)
//   deque meta     FF FF 63 B(ns) B(owner) 71 B(name) 00
//   deque slot     FF FF 63 B(ns) B(owner) 71 B(name) 01 U64(index)
//
// A stored state value (after the TTL envelope is taken off) is the revision
// (u64 LE, never 0: the log sequence number of the batch that wrote it), then
// an item (item.h) or a meta:
//   11 | u64 LE head, u64 LE tail   deque meta (slots [head, tail))
//   12 | u64 LE next_seq      stream meta
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/state_space.h"

namespace magnetite::state {

std::string record_key(std::string_view ns, std::string_view key);
// Every record of a namespace starts with this; it is also the routing key,
// so one namespace lives on one shard.
std::string record_prefix(std::string_view ns);
// The one B(x) component after `prefix` in `user_key`, decoded (nullopt: not
// prefix + B(x)). A record's key under record_prefix(ns), a map key under
// map_entries_prefix.
std::optional<std::string> bytes_after(std::string_view prefix, std::string_view user_key);

std::string stream_routing(std::string_view stream);
std::string stream_meta_key(std::string_view stream);
std::string stream_entry_key(std::string_view stream, std::uint64_t seq);
// The sequence number of a key under stream_entry_key(stream, 0)'s prefix.
std::optional<std::uint64_t> stream_seq_of(std::string_view stream_entries_prefix, std::string_view user_key);
std::string stream_entries_prefix(std::string_view stream);

// Keyed-state collections of one owner: every key starts with (and is
// routed by) owner_prefix, so one owner's collections share a shard.
std::string owner_prefix(std::string_view ns, std::string_view owner);
std::string value_key(std::string_view owner_prefix, std::string_view name);
std::string map_entries_prefix(std::string_view owner_prefix, std::string_view name);
std::string deque_meta_key(std::string_view owner_prefix, std::string_view name);
std::string deque_slots_prefix(std::string_view owner_prefix, std::string_view name);
std::string deque_slot_key(std::string_view slots_prefix, std::uint64_t index);
// The first index a new deque uses: pushes go both ways from the middle.
inline constexpr std::uint64_t deque_origin = std::uint64_t{1} << 63;

// B(p) without its terminator: a prefix of B(k) for every k that starts with p.
std::string open_component(std::string_view p);
// The first key past every key that starts with `prefix` ("" if none: all FF).
std::string prefix_successor(std::string_view prefix);

inline constexpr std::uint8_t deque_meta_type = 0x11;
inline constexpr std::uint8_t stream_meta_type = 0x12;

// A stored state value split into its revision and the rest.
struct state_value {
  std::uint64_t revision = 0;
  std::string_view body;  // an item, or a meta with its type byte
};
// `what` names the key for a corruption message.
result<state_value> split_state_value(std::string_view value, std::string_view what);

struct deque_meta {
  std::uint64_t head = deque_origin;
  std::uint64_t tail = deque_origin;
};
std::string encode_deque_meta(const deque_meta& m);
result<deque_meta> decode_deque_meta(std::string_view body, std::string_view what);

std::string encode_stream_meta(std::uint64_t next_seq);
result<std::uint64_t> decode_stream_meta(std::string_view body, std::string_view what);

}  // namespace magnetite::state
