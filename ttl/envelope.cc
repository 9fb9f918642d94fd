#include "ttl/envelope.h"

#include "core/coding.h"

namespace magnetite::ttl {

namespace {
constexpr char plain = 0x00;
constexpr char expiring = 0x01;
constexpr char stamped = 0x02;
constexpr char stamped_expiring = 0x03;
constexpr char stamped_tombstone = 0x04;
constexpr std::size_t stamp_at = 1;
constexpr std::size_t stamped_deadline_at = stamp_at + stamp::encoded_bytes;
}  // namespace

void wrap_into(std::string& out, std::string_view value, std::optional<std::uint64_t> expires_at_ns) {
  if (expires_at_ns) {
    out.push_back(expiring);
    put_fixed64_le(out, *expires_at_ns);
  } else {
    out.push_back(plain);
  }
  out.append(value);
}

std::string wrap(std::string_view value, std::optional<std::uint64_t> expires_at_ns) {
  std::string out;
  out.reserve(value.size() + max_envelope_overhead);
  wrap_into(out, value, expires_at_ns);
  return out;
}

std::string wrap_stamped(const stamp& st, std::optional<std::string_view> value,
                         std::optional<std::uint64_t> expires_at_ns) {
  std::string out(stamped_deadline_at, '\0');
  out.reserve(max_stamped_overhead + (value ? value->size() : 0));
  out[0] = !value ? stamped_tombstone : expires_at_ns ? stamped_expiring : stamped;
  st.encode_to(reinterpret_cast<std::uint8_t*>(out.data() + stamp_at));
  if (expires_at_ns) put_fixed64_le(out, *expires_at_ns);
  if (value) out.append(*value);
  return out;
}

result<unwrapped> unwrap(std::string_view stored) {
  if (stored.empty()) return status::corruption("stored value has no envelope byte");
  switch (stored[0]) {
    case plain: return unwrapped{stored.substr(1), std::nullopt, std::nullopt, false};
    case expiring: {
      if (stored.size() < max_envelope_overhead)
        return status::corruption(fmt::format("stored value's expiry is truncated ({} bytes)", stored.size()));
      std::uint64_t at = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(stored.data() + 1));
      return unwrapped{stored.substr(max_envelope_overhead), at, std::nullopt, false};
    }
    case stamped:
    case stamped_expiring:
    case stamped_tombstone: {
      bool has_deadline = stored[0] != stamped;
      std::size_t head = stamped_deadline_at + (has_deadline ? 8 : 0);
      if (stored.size() < head)
        return status::corruption(fmt::format("stored stamped value is truncated ({} bytes)", stored.size()));
      auto p = reinterpret_cast<const std::uint8_t*>(stored.data());
      unwrapped u{stored.substr(head), std::nullopt, stamp::decode(p + stamp_at), stored[0] == stamped_tombstone};
      if (has_deadline) u.expires_at_ns = decode_fixed64_le(p + stamped_deadline_at);
      if (u.tombstone && !u.value.empty())
        return status::corruption(fmt::format("stored tombstone carries {} value bytes", u.value.size()));
      return u;
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
  if (!u->live(now_ns)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(u->value));
}

}  // namespace magnetite::ttl
