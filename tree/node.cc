#include "tree/node.h"

#include <algorithm>
#include <cstring>

#include "core/coding.h"
#include "core/limits.h"

namespace magnetite::tree {

namespace {
constexpr std::size_t max_levels = 64;
}

std::string child_ref::encode() const {
  std::string out;
  auto h = hash.to_bytes();
  out.append(reinterpret_cast<const char*>(h.data()), h.size());
  put_varint64(out, count);
  return out;
}

result<child_ref> child_ref::decode(std::string_view bytes) {
  if (bytes.size() < hash128::byte_size) return status::corruption("child reference is truncated");
  child_ref r;
  r.hash = hash128::from_bytes(reinterpret_cast<const std::uint8_t*>(bytes.data()));
  byte_reader in(bytes.substr(hash128::byte_size));
  if (!in.get_varint64(r.count) || !in.empty()) return status::corruption("child reference has a bad count");
  return r;
}

std::size_t encoded_size(std::string_view key, std::string_view value) noexcept {
  return varint_length(key.size()) + key.size() + varint_length(value.size()) + value.size();
}

template <class Entry>
std::string node::encode_entries(std::uint8_t level, std::span<const Entry> entries) {
  std::size_t bytes = 1 + max_varint64_bytes;
  for (const auto& e : entries) bytes += encoded_size(e);
  std::string encoding;
  encoding.reserve(bytes);
  encoding.push_back(static_cast<char>(level));
  put_varint64(encoding, entries.size());
  std::vector<std::uint32_t> offsets;
  offsets.reserve(entries.size());
  for (const auto& e : entries) {
    offsets.push_back(static_cast<std::uint32_t>(encoding.size()));
    put_length_prefixed(encoding, e.key);
    put_length_prefixed(encoding, e.value);
  }
  return build_index(encoding, offsets);
}

node::node(std::uint8_t level, std::span<const entry> entries) : bytes_(encode_entries(level, entries)) {}
node::node(std::uint8_t level, std::span<const entry_view> entries) : bytes_(encode_entries(level, entries)) {}

// ---- the search index ----------------------------------------------------------------
//
// Layout (little-endian, at the start of the node's buffer):
//   u32 count | u32 shared | u32 encoding_at | u8 level | 3 zero bytes
//   u64 prefix[count]        the 8 key bytes after the shared prefix, read as a
//                            big-endian number (zero-padded), in native order
//   u32 offset[count]        where the entry (its key length) starts in the encoding
//   shared bytes             the prefix every key of the node starts with
//   zero bytes up to encoding_at (a multiple of 8), then the encoding
// In memory only: it is rebuilt whenever a node is decoded, never stored.

namespace {
constexpr std::size_t index_header = 16;

std::uint64_t prefix_of(std::string_view key, std::size_t skip) noexcept {
  std::uint64_t p = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    p <<= 8;
    if (skip + i < key.size()) p |= static_cast<std::uint8_t>(key[skip + i]);
  }
  return p;
}

std::uint32_t index_u32(const char* p, std::size_t at) noexcept {
  return decode_fixed32_le(reinterpret_cast<const std::uint8_t*>(p + at));
}

// A varint of an encoding that was checked when the node was decoded or built.
std::uint64_t trusted_varint(const char*& p) noexcept {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    auto b = static_cast<std::uint8_t>(*p++);
    v |= std::uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) return v;
  }
}
}  // namespace

std::uint8_t node_index::level() const noexcept { return static_cast<std::uint8_t>(p_[12]); }

std::size_t node_index::size() const noexcept { return index_u32(p_, 0); }

entry_view node_index::entry(std::size_t i) const noexcept {
  std::size_t n = size();
  const char* base = p_ + index_u32(p_, 8);
  const char* at = base + index_u32(p_, index_header + 8 * n + 4 * i);
  entry_view e;
  std::size_t klen = trusted_varint(at);
  e.key = std::string_view(at, klen);
  at += klen;
  std::size_t vlen = trusted_varint(at);
  e.value = std::string_view(at, vlen);
  return e;
}

std::size_t node_index::lower_bound(std::string_view key) const noexcept {
  std::size_t n = size();
  if (n == 0) return 0;
  std::size_t shared_len = index_u32(p_, 4);
  // Every probe below lands in the index: ask for all of it (up to 16 lines) at
  // once, so its misses overlap instead of following one another.
  std::size_t index_bytes = index_header + 12 * n + shared_len;
  for (std::size_t off = 64; off < std::min<std::size_t>(index_bytes, 16 * 64); off += 64)
    __builtin_prefetch(p_ + off);
  // Against the shared bytes first: outside them the answer is an end.
  std::string_view shared(p_ + index_header + 12 * n, shared_len);
  int c = key.substr(0, shared_len).compare(shared);
  if (c < 0) return 0;
  if (c > 0) return n;
  const char* prefixes = p_ + index_header;
  auto prefix_at = [&](std::size_t i) {
    std::uint64_t v;
    std::memcpy(&v, prefixes + 8 * i, 8);
    return v;
  };
  std::uint64_t p = prefix_of(key, shared_len);
  std::size_t lo = 0, len = n;
  while (len > 0) {
    std::size_t half = len / 2;
    if (prefix_at(lo + half) < p) {
      lo += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  // Equal prefixes need the full keys.
  while (lo < n && prefix_at(lo) == p && entry(lo).key < key) ++lo;
  return lo;
}

result<bool> search_leaf(node_index ix, const hash128& h, std::string_view key, std::string& value) {
  if (ix.level() != 0)
    return status::corruption(fmt::format("tree node {} is at level {} where a leaf was expected", h, ix.level()));
  std::size_t i = ix.lower_bound(key);
  if (i == ix.size()) return false;
  entry_view e = ix.entry(i);
  if (e.key != key) return false;
  value.assign(e.value);
  return true;
}

result<bool> search_encoding(std::string_view encoding, const hash128& h, std::string_view key,
                             std::string& value) {
  auto bad = [&](std::string_view why) { return status::corruption(fmt::format("tree node {}: {}", h, why)); };
  if (encoding.empty()) return bad("is empty");
  if (encoding[0] != 0)
    return status::corruption(fmt::format("tree node {} is at level {} where a leaf was expected", h,
                                          static_cast<int>(static_cast<std::uint8_t>(encoding[0]))));
  byte_reader in(encoding.substr(1));
  std::uint64_t count = 0;
  if (!in.get_varint64(count)) return bad("has a bad entry count");
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string_view k, v;
    if (!in.get_length_prefixed(k) || !in.get_length_prefixed(v)) return bad("has a truncated entry");
    int c = k.compare(key);
    if (c < 0) continue;
    if (c > 0) return false;  // keys increase: it is not here
    value.assign(v);
    return true;
  }
  return false;
}

std::string node::build_index(std::string_view encoding, std::span<const std::uint32_t> offsets) {
  std::size_t n = offsets.size();
  auto key_at = [&](std::uint32_t at) {
    const char* p = encoding.data() + at;
    std::size_t klen = trusted_varint(p);
    return std::string_view(p, klen);
  };
  std::string_view first = n ? key_at(offsets.front()) : std::string_view();
  std::string_view last = n ? key_at(offsets.back()) : std::string_view();
  std::size_t shared = 0;
  while (shared < first.size() && shared < last.size() && first[shared] == last[shared]) ++shared;

  std::size_t encoding_at = (index_header + 12 * n + shared + 7) & ~std::size_t{7};
  std::string buf(encoding_at + encoding.size(), '\0');
  auto* u = reinterpret_cast<std::uint8_t*>(buf.data());
  encode_fixed32_le(u, static_cast<std::uint32_t>(n));
  encode_fixed32_le(u + 4, static_cast<std::uint32_t>(shared));
  encode_fixed32_le(u + 8, static_cast<std::uint32_t>(encoding_at));
  u[index_level_at] = static_cast<std::uint8_t>(encoding[0]);
  if (shared > 0) std::memcpy(buf.data() + index_header + 12 * n, first.data(), shared);
  std::memcpy(buf.data() + encoding_at, encoding.data(), encoding.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t p = prefix_of(key_at(offsets[i]), shared);
    std::memcpy(buf.data() + index_header + 8 * i, &p, 8);
    encode_fixed32_le(u + index_header + 8 * n + 4 * i, offsets[i]);
  }
  return buf;
}

std::string_view node::encode() const noexcept {
  std::size_t at = index_u32(bytes_.data(), 8);
  return std::string_view(bytes_).substr(at);
}

std::uint64_t node::count() const {
  if (is_leaf()) return entries().size();
  std::uint64_t total = 0;
  for (const auto& e : entries())
    if (auto r = child_ref::decode(e.value)) total += r->count;
  return total;
}

result<node> node::decode(std::string_view bytes) {
  if (bytes.empty()) return status::corruption("tree node is empty");
  auto level = static_cast<std::uint8_t>(bytes[0]);
  if (level >= max_levels) return status::corruption(fmt::format("tree node has level {}", level));
  byte_reader in(bytes.substr(1));
  std::uint64_t count = 0;
  // Each entry takes at least 2 bytes: refuse counts the input cannot hold.
  if (!in.get_varint64(count) || count > in.rest().size() / 2)
    return status::corruption("tree node has a bad entry count");
  // The offsets are kept for build_index: a node is read on every cache miss,
  // so its entries are parsed once, here, and never again.
  thread_local std::vector<std::uint32_t> offsets;
  offsets.clear();
  std::string_view prev;
  for (std::uint64_t i = 0; i < count; ++i) {
    offsets.push_back(static_cast<std::uint32_t>(bytes.size() - in.rest().size()));
    std::string_view k, v;
    if (!in.get_length_prefixed(k) || !in.get_length_prefixed(v))
      return status::corruption(fmt::format("tree node entry {} is truncated", i));
    if (k.empty() || k.size() > limits::max_key_bytes)
      return status::corruption(fmt::format("tree node entry {} has a key of {} bytes", i, k.size()));
    if (i > 0 && !(prev < k)) return status::corruption(fmt::format("tree node entry {} is out of order", i));
    if (level > 0 && !child_ref::decode(v))
      return status::corruption(fmt::format("tree node entry {} has a bad child reference", i));
    prev = k;
  }
  if (!in.empty()) return status::corruption("tree node has trailing bytes");
  return node(built{}, build_index(bytes, offsets));
}

}  // namespace magnetite::tree
