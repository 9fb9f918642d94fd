// state_reader: reads of state keys from a shard's published view, on the
// calling thread, with no message to the shard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/read_view.h"
#include "magnetite/state/item.h"

namespace magnetite::state {

struct found_value {
  std::uint64_t revision = 0;
  std::string body;  // an item or a meta, with its type byte
};

struct found_item {
  std::uint64_t revision = 0;
  item value;
};

// A live state value (revision, type, body; no TTL envelope), as
// state_storage reads it; `what` names the key for a corruption message.
result<found_value> state_value_of(std::string_view live, std::string_view what);
result<found_item> item_of(std::string_view live, std::string_view what);

// What a state key's stored bytes (TTL envelope and all) hold at now_ns:
// nullopt when expired. `what` names the key for a corruption message.
result<std::optional<found_value>> live_state(std::string_view stored, std::uint64_t now_ns, std::string_view what);
// The same, for a key that holds an item.
result<std::optional<found_item>> live_item(std::string_view stored, std::uint64_t now_ns, std::string_view what);

// The live value of a state key in a view: nullopt when absent or expired.
result<std::optional<found_value>> read_state(const read_view& view, std::string_view key, std::uint64_t now_ns,
                                              std::string_view what);
result<std::optional<found_item>> read_item(const read_view& view, std::string_view key, std::uint64_t now_ns,
                                            std::string_view what);

}  // namespace magnetite::state
