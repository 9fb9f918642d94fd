#include "state/layout.h"

#include <fmt/format.h>

#include "core/coding.h"
#include "core/limits.h"
#include "engine/state_space.h"

namespace magnetite::state {

namespace {
constexpr char record_tag = 0x72;      // 'r'
constexpr char stream_tag = 0x73;      // 's'
constexpr char collection_tag = 0x63;  // 'c'
constexpr char value_kind = 0x76;      // 'v'
constexpr char map_kind = 0x6D;        // 'm'
constexpr char deque_kind = 0x71;      // 'q'

std::string tagged(char tag) {
  std::string k(state_space::prefix);
  k.push_back(tag);
  return k;
}
}  // namespace

std::string record_prefix(std::string_view ns) { return tagged(record_tag) + key_encoder().bytes(ns).str(); }

std::string record_key(std::string_view ns, std::string_view key) {
  return record_prefix(ns) + key_encoder().bytes(key).str();
}

std::optional<std::string> bytes_after(std::string_view ns_prefix, std::string_view user_key) {
  if (!user_key.starts_with(ns_prefix)) return std::nullopt;
  key_decoder d(user_key.substr(ns_prefix.size()));
  auto k = d.bytes();
  if (!k || !d.done()) return std::nullopt;
  return k;
}

std::string stream_routing(std::string_view stream) { return tagged(stream_tag) + key_encoder().bytes(stream).str(); }

std::string stream_meta_key(std::string_view stream) { return stream_routing(stream) + '\0'; }

std::string stream_entries_prefix(std::string_view stream) { return stream_routing(stream) + '\1'; }

std::string stream_entry_key(std::string_view stream, std::uint64_t seq) {
  return stream_entries_prefix(stream) + key_encoder().u64(seq).str();
}

std::optional<std::uint64_t> stream_seq_of(std::string_view prefix, std::string_view user_key) {
  if (!user_key.starts_with(prefix)) return std::nullopt;
  key_decoder d(user_key.substr(prefix.size()));
  auto seq = d.u64();
  if (!seq || !d.done()) return std::nullopt;
  return seq;
}

std::string owner_prefix(std::string_view ns, std::string_view owner) {
  return tagged(collection_tag) + key_encoder().bytes(ns).bytes(owner).str();
}

std::string value_key(std::string_view owner_prefix, std::string_view name) {
  return std::string(owner_prefix) + value_kind + key_encoder().bytes(name).str();
}

std::string map_entries_prefix(std::string_view owner_prefix, std::string_view name) {
  return std::string(owner_prefix) + map_kind + key_encoder().bytes(name).str() + '\1';
}

std::string deque_meta_key(std::string_view owner_prefix, std::string_view name) {
  return std::string(owner_prefix) + deque_kind + key_encoder().bytes(name).str() + '\0';
}

std::string deque_slots_prefix(std::string_view owner_prefix, std::string_view name) {
  return std::string(owner_prefix) + deque_kind + key_encoder().bytes(name).str() + '\1';
}

std::string deque_slot_key(std::string_view slots_prefix, std::uint64_t index) {
  return std::string(slots_prefix) + key_encoder().u64(index).str();
}

std::string encode_deque_meta(const deque_meta& m) {
  std::string b(1, static_cast<char>(deque_meta_type));
  put_fixed64_le(b, m.head);
  put_fixed64_le(b, m.tail);
  return b;
}

result<deque_meta> decode_deque_meta(std::string_view body, std::string_view what) {
  if (body.size() != 17 || static_cast<std::uint8_t>(body.front()) != deque_meta_type)
    return status::corruption(fmt::format("{}: not a deque meta ({} bytes)", what, body.size()));
  const auto* p = reinterpret_cast<const std::uint8_t*>(body.data() + 1);
  deque_meta m{decode_fixed64_le(p), decode_fixed64_le(p + 8)};
  if (m.head > m.tail)
    return status::corruption(fmt::format("{}: deque meta with head {} past tail {}", what, m.head, m.tail));
  return m;
}

std::string open_component(std::string_view p) {
  std::string b = key_encoder().bytes(p).str();
  b.resize(b.size() - 2);  // the 00 01 terminator
  return b;
}

std::string prefix_successor(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xff) s.pop_back();
  if (!s.empty()) s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

result<state_value> split_state_value(std::string_view value, std::string_view what) {
  if (value.size() < state_space::revision_bytes + 1)
    return status::corruption(fmt::format("{}: state value of {} bytes is too short", what, value.size()));
  state_value v;
  v.revision = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(value.data()));
  if (v.revision == 0) return status::corruption(fmt::format("{}: state value has revision 0", what));
  v.body = value.substr(state_space::revision_bytes);
  return v;
}

std::string encode_stream_meta(std::uint64_t next_seq) {
  std::string b(1, static_cast<char>(stream_meta_type));
  put_fixed64_le(b, next_seq);
  return b;
}

result<std::uint64_t> decode_stream_meta(std::string_view body, std::string_view what) {
  if (body.size() != 9 || static_cast<std::uint8_t>(body.front()) != stream_meta_type)
    return status::corruption(fmt::format("{}: not a stream meta ({} bytes)", what, body.size()));
  return decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(body.data() + 1));
}

}  // namespace magnetite::state
