#include "engine/transaction_records.h"

#include <fmt/format.h>

#include "core/coding.h"
#include "engine/keyspace.h"
#include "engine/state_space.h"

namespace magnetite::transaction_records {

namespace {
std::string key_of(std::string_view prefix, const hash128& id) {
  std::string key(prefix);
  auto bytes = id.to_bytes();
  key.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return key;
}

// The body after the revision, whose first byte must be `type`.
result<std::string_view> body_of(std::string_view value, std::uint8_t type, std::string_view what) {
  if (value.size() < state_space::revision_bytes + 1 ||
      static_cast<std::uint8_t>(value[state_space::revision_bytes]) != type)
    return status::corruption(
        fmt::format("{} of {} bytes does not start with a revision and type {:02x}", what, value.size(), type));
  return value.substr(state_space::revision_bytes + 1);
}

status damaged(std::string_view what, std::string_view field) {
  return status::corruption(fmt::format("{} is damaged: its {} runs past its end or is malformed", what, field));
}
}  // namespace

std::string prepare_key(const hash128& id) { return key_of(prepare_prefix, id); }
std::string decision_key(const hash128& id) { return key_of(decision_prefix, id); }

std::optional<hash128> id_of(std::string_view key, std::string_view prefix) {
  if (key.size() != prefix.size() + hash128::byte_size || !key.starts_with(prefix)) return std::nullopt;
  return hash128::from_bytes(reinterpret_cast<const std::uint8_t*>(key.data() + prefix.size()));
}

result<std::vector<hash128>> ids_in(const read_view& view, std::string_view prefix) {
  std::vector<hash128> out;
  std::string end(prefix);
  ++end.back();  // the prefixes end below FF
  status failure;
  status s =
      view.scan(keyspace::data_key(prefix), keyspace::data_key(end), [&](std::string_view tree_key, std::string_view) {
        auto id = id_of(keyspace::user_key_of(tree_key), prefix);
        if (!id) {
          failure = status::corruption("a key under a transaction record prefix is not a transaction record");
          return false;
        }
        out.push_back(*id);
        return true;
      });
  if (!s) return s;
  if (!failure) return failure;
  return out;
}

std::string encode_prepare(const prepare& p) {
  std::string out(1, static_cast<char>(prepare_type));
  put_varint32(out, p.coordinator);
  put_varint32(out, static_cast<std::uint32_t>(p.reads.size()));
  for (const auto& k : p.reads) put_length_prefixed(out, k);
  put_varint32(out, static_cast<std::uint32_t>(p.writes.size()));
  for (const auto& w : p.writes) {
    out.push_back(w.value ? '\1' : '\0');
    put_length_prefixed(out, w.key);
    if (w.value) put_length_prefixed(out, *w.value);
  }
  return out;
}

std::string encode_decision(const decision& d) {
  std::string out(1, static_cast<char>(decision_type));
  out.push_back(d.commit ? '\1' : '\0');
  put_varint32(out, static_cast<std::uint32_t>(d.participants.size()));
  for (auto s : d.participants) put_varint32(out, s);
  return out;
}

result<prepare> decode_prepare(const hash128& id, std::string_view value) {
  std::string what = fmt::format("prepare record of transaction {}", id.to_hex());
  auto body = body_of(value, prepare_type, what);
  if (!body) return body.error();
  byte_reader in(*body);
  prepare p;
  p.id = id;
  std::uint32_t n = 0;
  if (!in.get_varint32(p.coordinator)) return damaged(what, "coordinator");
  if (!in.get_varint32(n)) return damaged(what, "read count");
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string_view k;
    if (!in.get_length_prefixed(k)) return damaged(what, "read keys");
    p.reads.emplace_back(k);
  }
  if (!in.get_varint32(n)) return damaged(what, "write count");
  for (std::uint32_t i = 0; i < n; ++i) {
    std::string_view kind, k, v;
    if (!in.get_bytes(1, kind) || static_cast<std::uint8_t>(kind[0]) > 1 || !in.get_length_prefixed(k))
      return damaged(what, "writes");
    batch_write w{std::string(k), std::nullopt, std::nullopt};
    if (kind[0] == 1) {
      if (!in.get_length_prefixed(v)) return damaged(what, "writes");
      w.value = std::string(v);
    }
    p.writes.push_back(std::move(w));
  }
  if (!in.empty()) return damaged(what, "end");
  return p;
}

result<decision> decode_decision(std::string_view value) {
  constexpr std::string_view what = "decision record";
  auto body = body_of(value, decision_type, what);
  if (!body) return body.error();
  byte_reader in(*body);
  decision d;
  std::string_view outcome;
  std::uint32_t n = 0;
  if (!in.get_bytes(1, outcome) || static_cast<std::uint8_t>(outcome[0]) > 1) return damaged(what, "outcome");
  d.commit = outcome[0] == 1;
  if (!in.get_varint32(n)) return damaged(what, "participant count");
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t s = 0;
    if (!in.get_varint32(s)) return damaged(what, "participants");
    d.participants.push_back(s);
  }
  if (!in.empty()) return damaged(what, "end");
  return d;
}

}  // namespace magnetite::transaction_records
