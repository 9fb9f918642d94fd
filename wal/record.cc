#include "wal/record.h"

#include "core/coding.h"
#include "core/limits.h"

namespace magnetite::wal {

status check_batch(std::span<const mutation_view> batch) {
  if (batch.empty()) return status::invalid_argument("batch is empty");
  if (batch.size() > limits::max_batch_mutations)
    return status::invalid_argument(
        fmt::format("batch of {} mutations exceeds the limit of {}", batch.size(), limits::max_batch_mutations));
  std::size_t bytes = 0;
  for (const auto& m : batch) {
    MAGNETITE_TRY(limits::check_key(m.key));
    if (m.kind == mutation_kind::put) {
      MAGNETITE_TRY(limits::check_value(m.value));
    } else if (m.kind != mutation_kind::del) {
      return status::invalid_argument("batch mutation has an unknown kind");
    }
    bytes += m.key.size() + m.value.size();
  }
  if (bytes > limits::max_batch_bytes)
    return status::invalid_argument(
        fmt::format("batch of {} bytes exceeds the limit of {} bytes", bytes, limits::max_batch_bytes));
  return status::ok();
}

void encode_put(std::string& dst, std::string_view key, std::string_view value) {
  put_length_prefixed(dst, key);
  dst.append(value);
}

void encode_del(std::string& dst, std::string_view key) { dst.append(key); }

void encode_batch(std::string& dst, std::span<const mutation_view> batch) {
  put_varint64(dst, batch.size());
  for (const auto& m : batch) {
    dst.push_back(static_cast<char>(m.kind));
    put_length_prefixed(dst, m.key);
    if (m.kind == mutation_kind::put) put_length_prefixed(dst, m.value);
  }
}

void encode_commit(std::string& dst, const commit_record& c) {
  if (!c.runs.empty()) {
    dst.push_back(static_cast<char>(c.runs.size()));
    for (const auto& r : c.runs) {
      auto b = r.to_bytes();
      dst.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
  }
  auto h = c.root.to_bytes();
  dst.append(reinterpret_cast<const char*>(h.data()), h.size());
  put_fixed64_le(dst, c.node_store_length);
  if (c.covered_sequence) put_fixed64_le(dst, *c.covered_sequence);
  if (c.stamp_bound) {
    std::uint8_t b[stamp::encoded_bytes];
    c.stamp_bound->encode_to(b);
    dst.append(reinterpret_cast<const char*>(b), sizeof b);
  }
}

namespace {

status bad_payload(record_type type, std::uint64_t seq, std::string_view why) {
  return status::corruption(
      fmt::format("WAL frame {} (type {}) has a malformed payload: {}", seq, static_cast<int>(type), why));
}

bool valid_key(std::string_view k) { return !k.empty() && k.size() <= limits::max_key_bytes; }

// A commit payload without runs (format versions 1 to 3).
result<commit_record> decode_commit(record_type type, std::uint64_t sequence, std::string_view payload) {
  // The sizes tell the versions apart: 24 and 44 bytes (versions 1 and
  // 2: no covered sequence), 32 and 52 (version 3); the larger of each
  // pair carries a stamp bound.
  constexpr std::size_t v2 = hash128::byte_size + 8, v3 = v2 + 8;
  std::size_t n = payload.size();
  if (n != v2 && n != v2 + stamp::encoded_bytes && n != v3 && n != v3 + stamp::encoded_bytes)
    return bad_payload(type, sequence, "size");
  const auto* p = reinterpret_cast<const std::uint8_t*>(payload.data());
  commit_record c;
  c.root = hash128::from_bytes(p);
  c.node_store_length = decode_fixed64_le(p + hash128::byte_size);
  std::size_t at = v2;
  if (n == v3 || n == v3 + stamp::encoded_bytes) {
    c.covered_sequence = decode_fixed64_le(p + v2);
    // A marker covers frames before its own: one that claims its own
    // number or a later one was not written by a writer.
    if (*c.covered_sequence >= sequence) return bad_payload(type, sequence, "covered sequence");
    at = v3;
  }
  if (n > at) c.stamp_bound = stamp::decode(p + at);
  return c;
}

}  // namespace

result<record> decode_record(record_type type, std::uint64_t sequence, std::string_view payload) {
  record r;
  r.type = type;
  r.sequence = sequence;
  byte_reader in(payload);
  switch (type) {
    case record_type::put: {
      std::string_view key;
      if (!in.get_length_prefixed(key) || !valid_key(key)) return bad_payload(type, sequence, "key");
      if (in.rest().size() > limits::max_value_bytes) return bad_payload(type, sequence, "value size");
      r.mutations.push_back({mutation_kind::put, std::string(key), std::string(in.rest())});
      return r;
    }
    case record_type::del:
      if (!valid_key(payload)) return bad_payload(type, sequence, "key");
      r.mutations.push_back({mutation_kind::del, std::string(payload), {}});
      return r;
    case record_type::batch: {
      std::uint64_t count = 0;
      if (!in.get_varint64(count) || count == 0 || count > limits::max_batch_mutations)
        return bad_payload(type, sequence, "mutation count");
      // Every mutation takes at least 3 bytes; refuse counts the payload cannot hold
      // before reserving memory for them.
      if (count > payload.size() / 3) return bad_payload(type, sequence, "mutation count");
      r.mutations.reserve(static_cast<std::size_t>(count));
      std::size_t bytes = 0;
      for (std::uint64_t i = 0; i < count; ++i) {
        std::string_view kind_byte, key, value;
        if (!in.get_bytes(1, kind_byte)) return bad_payload(type, sequence, "truncated mutation");
        auto kind = static_cast<mutation_kind>(static_cast<std::uint8_t>(kind_byte[0]));
        if (kind != mutation_kind::put && kind != mutation_kind::del)
          return bad_payload(type, sequence, "mutation kind");
        if (!in.get_length_prefixed(key) || !valid_key(key)) return bad_payload(type, sequence, "key");
        if (kind == mutation_kind::put && (!in.get_length_prefixed(value) || value.size() > limits::max_value_bytes))
          return bad_payload(type, sequence, "value");
        bytes += key.size() + value.size();
        if (bytes > limits::max_batch_bytes) return bad_payload(type, sequence, "batch size");
        r.mutations.push_back({kind, std::string(key), std::string(value)});
      }
      if (!in.empty()) return bad_payload(type, sequence, "trailing bytes");
      return r;
    }
    case record_type::commit_runs: {
      // The runs, then a commit payload of version 3 that must say what it covers.
      std::string_view count_byte;
      if (!in.get_bytes(1, count_byte)) return bad_payload(type, sequence, "run count");
      std::size_t count = static_cast<std::uint8_t>(count_byte[0]);
      if (count == 0 || count > limits::max_sorted_runs) return bad_payload(type, sequence, "run count");
      std::string_view roots;
      if (!in.get_bytes(count * hash128::byte_size, roots)) return bad_payload(type, sequence, "run roots");
      auto marker = decode_commit(type, sequence, in.rest());
      if (!marker) return marker.error();
      if (!marker->covered_sequence) return bad_payload(type, sequence, "size");
      r.commit = std::move(*marker);
      for (std::size_t i = 0; i < count; ++i)
        r.commit.runs.push_back(
            hash128::from_bytes(reinterpret_cast<const std::uint8_t*>(roots.data()) + i * hash128::byte_size));
      return r;
    }
    case record_type::commit: {
      auto marker = decode_commit(type, sequence, payload);
      if (!marker) return marker.error();
      r.commit = std::move(*marker);
      return r;
    }
    case record_type::replication_state:
      if (payload.size() > limits::max_replication_state_bytes) return bad_payload(type, sequence, "size");
      r.payload = std::string(payload);
      return r;
  }
  return status::make(status_code::not_supported, status_category::permanent,
                      fmt::format("WAL frame {} has unknown record type {}: written by a newer magnetite?", sequence,
                                  static_cast<int>(type)));
}

}  // namespace magnetite::wal
