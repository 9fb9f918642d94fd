#include "state/item_codec.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "state/errors.h"

namespace magnetite::state {

namespace {

// An object key as a JSON pointer token (RFC 6901): '~' and '/' escaped.
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// Why `j` has no JSON form, if it does not: the first number in it (depth
// first) that is NaN or infinite, and where. dump() would write such a
// number as null, which reads back as corruption; JSON has no other form for
// it. `at` is the JSON pointer of `j`.
std::optional<std::string> non_finite_number(const json& j, std::string& at) {
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d)) return std::nullopt;
    std::string_view name = std::isnan(d) ? "NaN" : d > 0 ? "infinity" : "-infinity";
    return fmt::format("JSON value {}is {}: a number must be finite, JSON has no form for NaN or infinity",
                       at.empty() ? "" : fmt::format("at {} ", at), name);
  }
  if (!j.is_structured()) return std::nullopt;
  std::size_t outer = at.size();
  std::size_t index = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++index) {
    at += '/';
    at += j.is_object() ? pointer_token(it.key()) : std::to_string(index);
    if (auto why = non_finite_number(*it, at)) return why;
    at.resize(outer);
  }
  return std::nullopt;
}

}  // namespace

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
  std::string at;
  if (auto why = non_finite_number(j, at)) return mistake(std::move(*why));
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
