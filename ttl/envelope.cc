#include "ttl/envelope.h"

#include "core/coding.h"

namespace magnetite::ttl {

namespace {
constexpr char plain = 0x00;
constexpr char expiring = 0x01;
}  // namespace

std::string wrap(std::string_view value, std::optional<std::uint64_t> expires_at_ns) {
  std::string out;
  out.reserve(value.size() + max_envelope_overhead);
  if (expires_at_ns) {
    out.push_back(expiring);
    put_fixed64_le(out, *expires_at_ns);
  } else {
    out.push_back(plain);
  }
  out.append(value);
  return out;
}

result<unwrapped> unwrap(std::string_view stored) {
  if (stored.empty()) return status::corruption("stored value has no envelope byte");
  switch (stored[0]) {
    case plain: return unwrapped{stored.substr(1), std::nullopt};
    case expiring: {
      if (stored.size() < max_envelope_overhead)
        return status::corruption(fmt::format("stored value's expiry is truncated ({} bytes)", stored.size()));
      std::uint64_t at = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(stored.data() + 1));
      return unwrapped{stored.substr(max_envelope_overhead), at};
    }
    default:
      return status::make(status_code::not_supported, status_category::permanent,
                          fmt::format("stored value has envelope format {}: written by a newer magnetite?",
                                      static_cast<int>(static_cast<unsigned char>(stored[0]))));
  }
}

result<std::optional<std::string>> live_value(std::string_view stored, std::uint64_t now_ns) {
  auto u = unwrap(stored);
  if (!u) return u.error();
  if (u->expired(now_ns)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(u->value));
}

}  // namespace magnetite::ttl
