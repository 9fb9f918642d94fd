#include "tree/node.h"

#include <algorithm>

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

node::node(std::uint8_t level, std::span<const entry> entries) : level_(level) {
  std::size_t bytes = 1 + max_varint64_bytes;
  for (const auto& e : entries) bytes += encoded_size(e);
  bytes_.reserve(bytes);
  bytes_.push_back(static_cast<char>(level));
  put_varint64(bytes_, entries.size());
  for (const auto& e : entries) {
    put_length_prefixed(bytes_, e.key);
    put_length_prefixed(bytes_, e.value);
  }
  index();
}

node::node(const node& other) : level_(other.level_), bytes_(other.bytes_) { index(); }

node& node::operator=(const node& other) {
  if (this != &other) {
    level_ = other.level_;
    bytes_ = other.bytes_;
    index();
  }
  return *this;
}

// A short string lives inside the object (small-string optimisation) and
// moves by copy: then the views must be rebuilt.
node::node(node&& other) noexcept : level_(other.level_) {
  const char* old = other.bytes_.data();
  bytes_ = std::move(other.bytes_);
  entries_ = std::move(other.entries_);
  shared_ = other.shared_;
  prefixes_ = std::move(other.prefixes_);
  if (bytes_.data() != old) index();
}

node& node::operator=(node&& other) noexcept {
  if (this != &other) {
    const char* old = other.bytes_.data();
    level_ = other.level_;
    bytes_ = std::move(other.bytes_);
    entries_ = std::move(other.entries_);
    shared_ = other.shared_;
    prefixes_ = std::move(other.prefixes_);
    if (bytes_.data() != old) index();
  }
  return *this;
}

namespace {
std::uint64_t prefix_of(std::string_view key, std::size_t skip) noexcept {
  std::uint64_t p = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    p <<= 8;
    if (skip + i < key.size()) p |= static_cast<std::uint8_t>(key[skip + i]);
  }
  return p;
}
}  // namespace

std::size_t node::lower_bound(std::string_view key) const noexcept {
  std::size_t n = entries_.size();
  if (n == 0) return 0;
  // Against the shared bytes first: outside them the answer is an end.
  std::string_view shared = entries_.front().key.substr(0, shared_);
  int c = key.substr(0, shared_).compare(shared);
  if (c < 0) return 0;
  if (c > 0) return n;
  std::uint64_t p = prefix_of(key, shared_);
  std::size_t lo = static_cast<std::size_t>(std::lower_bound(prefixes_.begin(), prefixes_.end(), p) - prefixes_.begin());
  // Equal prefixes need the full keys.
  while (lo < n && prefixes_[lo] == p && entries_[lo].key < key) ++lo;
  return lo;
}

void node::index() {
  entries_.clear();
  prefixes_.clear();
  byte_reader in(std::string_view(bytes_).substr(1));
  std::uint64_t count = 0;
  (void)in.get_varint64(count);
  entries_.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    entry_view e;
    (void)in.get_length_prefixed(e.key);
    (void)in.get_length_prefixed(e.value);
    entries_.push_back(e);
  }
  shared_ = 0;
  if (!entries_.empty()) {
    std::string_view a = entries_.front().key, b = entries_.back().key;
    while (shared_ < a.size() && shared_ < b.size() && a[shared_] == b[shared_]) ++shared_;
  }
  prefixes_.reserve(entries_.size());
  for (const auto& e : entries_) prefixes_.push_back(prefix_of(e.key, shared_));
}

std::uint64_t node::count() const {
  if (is_leaf()) return entries_.size();
  std::uint64_t total = 0;
  for (const auto& e : entries_)
    if (auto r = child_ref::decode(e.value)) total += r->count;
  return total;
}

result<node> node::decode(std::string_view bytes) { return decode(std::string(bytes)); }

result<node> node::decode(std::string&& owned) {
  std::string_view bytes(owned);
  if (bytes.empty()) return status::corruption("tree node is empty");
  auto level = static_cast<std::uint8_t>(bytes[0]);
  if (level >= max_levels) return status::corruption(fmt::format("tree node has level {}", level));
  byte_reader in(bytes.substr(1));
  std::uint64_t count = 0;
  // Each entry takes at least 2 bytes: refuse counts the input cannot hold.
  if (!in.get_varint64(count) || count > in.rest().size() / 2)
    return status::corruption("tree node has a bad entry count");
  std::string_view prev;
  for (std::uint64_t i = 0; i < count; ++i) {
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
  node n;
  n.level_ = level;
  n.bytes_ = std::move(owned);
  n.index();
  return n;
}

}  // namespace magnetite::tree
