#include "state/item_codec.h"

#include <fmt/format.h>

#include "state/errors.h"

namespace magnetite::state {

result<std::string> encode_item(const item& x, std::string_view delete_verb) {
  std::string out;
  if (const auto* b = std::get_if<bytes>(&x)) {
    out.reserve(1 + b->data.size());
    out.push_back(static_cast<char>(raw_type));
    out.append(b->data);
    return out;
  }
  const json& j = std::get<json>(x);
  if (j.is_null())
    return mistake(fmt::format("a JSON null cannot be stored; use {}", delete_verb));
  out.push_back(static_cast<char>(json_type));
  try {
    out.append(j.dump());
  } catch (const json::exception& e) {
    return mistake(fmt::format("JSON value cannot be stored: {}", e.what()));
  }
  return out;
}

result<item> decode_item(std::string_view stored, std::string_view what) {
  if (stored.empty()) return status::corruption(fmt::format("{}: stored value has no type byte", what));
  auto type = static_cast<std::uint8_t>(stored.front());
  std::string_view body = stored.substr(1);
  if (type == raw_type) return item(bytes{std::string(body)});
  if (type != json_type)
    return status::corruption(fmt::format("{}: stored value has type {:#04x}, not raw or json", what, type));
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || j.is_null())
    return status::corruption(fmt::format("{}: stored JSON of {} bytes does not parse", what, body.size()));
  return item(std::move(j));
}

}  // namespace magnetite::state
