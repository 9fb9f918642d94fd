// item: what keyed state, records and streams store for the host: a JSON
// document or raw bytes. A JSON null is not storable: absence means "no
// value", and deleting is its own verb; a write of one is refused, as is a
// NaN or infinite number anywhere in a document (JSON has no form for it)
// and text that is not UTF-8 (docs/formats/state.md has the stored form).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "magnetite/status.h"

namespace magnetite::state {

using json = nlohmann::json;

// Raw bytes: stored as given, never parsed (a JSON string is a json item).
struct bytes {
  std::string data;
  friend bool operator==(const bytes&, const bytes&) = default;
};

using item = std::variant<json, bytes>;

}  // namespace magnetite::state
