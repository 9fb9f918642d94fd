// item_codec: the stored form of an item (docs/formats/state.md): a type
// byte, then the body.
//
//   00 | bytes        raw: the host's bytes as given
//   01 | UTF-8 text   json: nlohmann::json::dump() (no indentation; object
//                     keys sorted, so one document has one stored form)
//
// Encoding refuses a JSON null, a number that is NaN or infinite anywhere in
// a document (JSON has no form for it: dump() writes null), and text that is
// not UTF-8, with invalid_argument; decoding refuses any other type byte or
// text that does not parse with corruption. decode(encode(x)) == x for every
// storable x.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "magnetite/state/item.h"

namespace magnetite::state {

inline constexpr std::uint8_t raw_type = 0x00;
inline constexpr std::uint8_t json_type = 0x01;

// The stored form. `delete_verb` names the call that removes a value, for
// the error a null gets ("use del(key)").
result<std::string> encode_item(const item& x, std::string_view delete_verb);
// `what` names the key for a corruption message.
result<item> decode_item(std::string_view stored, std::string_view what);

}  // namespace magnetite::state
