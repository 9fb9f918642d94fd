#include "replication/promise_state.h"

#include <algorithm>

#include "core/coding.h"

namespace magnetite::replication {

namespace {

constexpr std::string_view magic{"MGPS", 4};
constexpr std::uint8_t version = 2;

void put_ballot(std::string& out, const ballot& b) {
  put_fixed64_le(out, b.counter);
  put_fixed32_le(out, b.node);
}

ballot get_ballot(const std::uint8_t* p) { return {decode_fixed64_le(p), decode_fixed32_le(p + 8)}; }

}  // namespace

std::string promise_state::encode() const {
  std::string out(magic);
  out.reserve(encoded_bytes);
  out.push_back(static_cast<char>(version));
  put_ballot(out, promised);
  put_ballot(out, epoch);
  put_fixed64_le(out, minted);
  put_fixed64_le(out, synced_ns);
  put_fixed64_le(out, settled_ns);
  return out;
}

result<promise_state> promise_state::decode(std::string_view bytes) {
  if (bytes.size() < magic.size() + 1 || bytes.substr(0, magic.size()) != magic)
    return status::corruption(fmt::format("promise state of {} bytes does not start with MGPS", bytes.size()));
  auto v = static_cast<std::uint8_t>(bytes[magic.size()]);
  if (v < 1 || v > version)
    return status::make(status_code::not_supported, status_category::permanent,
                        fmt::format("promise state version {}: this magnetite reads versions 1 to {}", v, version));
  std::size_t want = v == 1 ? encoded_bytes_v1 : encoded_bytes;
  if (bytes.size() != want)
    return status::corruption(fmt::format("promise state of {} bytes: version {} has {}", bytes.size(), v, want));
  auto p = reinterpret_cast<const std::uint8_t*>(bytes.data()) + magic.size() + 1;
  promise_state s;
  s.promised = get_ballot(p);
  s.epoch = get_ballot(p + 12);
  s.minted = decode_fixed64_le(p + 24);
  if (v >= 2) {
    s.synced_ns = decode_fixed64_le(p + 32);
    s.settled_ns = decode_fixed64_le(p + 40);
  }
  if (s.epoch > s.promised)
    return status::corruption(
        fmt::format("promise state has epoch {} above its promise {}", to_string(s.epoch), to_string(s.promised)));
  return s;
}

bool promise_state::reachable(const ballot& b) const noexcept {
  std::uint64_t seen = std::max(promised.counter, minted);
  return b.counter <= max_ballot_counter && b.counter - std::min(b.counter, seen) <= max_ballot_jump;
}

decision on_prepare(const promise_state& s, const ballot& b) {
  if (b <= s.promised || !s.reachable(b)) return {false, s.promised, std::nullopt};
  promise_state next = s;
  next.promised = b;
  return {true, b, next};
}

decision on_write(const promise_state& s, const ballot& e) {
  if (e < s.promised || !s.reachable(e)) return {false, s.promised, std::nullopt};
  if (e == s.promised && e == s.epoch) return {true, e, std::nullopt};
  promise_state next = s;
  next.promised = e;
  next.epoch = e;
  return {true, e, next};
}

std::optional<minted_ballot> mint(const promise_state& s, std::uint32_t node) {
  std::uint64_t seen = std::max(s.minted, s.promised.counter);
  if (seen >= max_ballot_counter) return std::nullopt;
  minted_ballot out;
  out.b = {seen + 1, node};
  out.store = s;
  out.store.minted = out.b.counter;
  return out;
}

result<promise_state> from_log(const std::optional<std::string>& payload) {
  if (!payload) return promise_state{};
  return promise_state::decode(*payload);
}

}  // namespace magnetite::replication
