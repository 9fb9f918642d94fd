#include "tree/node.h"

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

std::uint64_t node::count() const {
  if (is_leaf()) return entries.size();
  std::uint64_t total = 0;
  for (const auto& e : entries)
    if (auto r = child_ref::decode(e.value)) total += r->count;
  return total;
}

std::size_t encoded_size(const entry& e) noexcept {
  return varint_length(e.key.size()) + e.key.size() + varint_length(e.value.size()) + e.value.size();
}

std::string node::encode() const {
  std::size_t bytes = 1 + max_varint64_bytes;
  for (const auto& e : entries) bytes += encoded_size(e);
  std::string out;
  out.reserve(bytes);
  out.push_back(static_cast<char>(level));
  put_varint64(out, entries.size());
  for (const auto& e : entries) {
    put_length_prefixed(out, e.key);
    put_length_prefixed(out, e.value);
  }
  return out;
}

result<node> node::decode(std::string_view bytes) {
  if (bytes.empty()) return status::corruption("tree node is empty");
  node n;
  n.level = static_cast<std::uint8_t>(bytes[0]);
  if (n.level >= max_levels) return status::corruption(fmt::format("tree node has level {}", n.level));
  byte_reader in(bytes.substr(1));
  std::uint64_t count = 0;
  // Each entry takes at least 2 bytes: refuse counts the input cannot hold.
  if (!in.get_varint64(count) || count > in.rest().size() / 2)
    return status::corruption("tree node has a bad entry count");
  n.entries.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string_view k, v;
    if (!in.get_length_prefixed(k) || !in.get_length_prefixed(v))
      return status::corruption(fmt::format("tree node entry {} is truncated", i));
    if (k.empty() || k.size() > limits::max_key_bytes)
      return status::corruption(fmt::format("tree node entry {} has a key of {} bytes", i, k.size()));
    if (!n.entries.empty() && !(n.entries.back().key < k))
      return status::corruption(fmt::format("tree node entry {} is out of order", i));
    if (n.level > 0 && !child_ref::decode(v))
      return status::corruption(fmt::format("tree node entry {} has a bad child reference", i));
    n.entries.push_back({std::string(k), std::string(v)});
  }
  if (!in.empty()) return status::corruption("tree node has trailing bytes");
  return n;
}

}  // namespace magnetite::tree
