// node: one node of the prolly tree, and its byte encoding (docs/formats/tree.md).
//
// A node is a level and a sorted run of entries. At level 0 (a leaf) an entry is
// a user key and its value. Above, an entry is the LAST key of a child subtree
// and a child reference (the child's hash and the number of leaf entries below
// it), so a search descends into the first child whose last key is >= the key.
//
// Invariants: keys strictly increase within a node; a node's identity is the
// XXH3-128 hash of its encoding, and the encoding is canonical (one node, one
// byte string), so equal content means equal hashes.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"

namespace magnetite::tree {

// An entry owned by its writer (what build and apply feed the chunker).
struct entry {
  std::string key;
  std::string value;  // leaf: the user's value; internal: an encoded child_ref
  friend bool operator==(const entry&, const entry&) = default;
};

// An entry of a stored node: views into the node's encoded bytes.
struct entry_view {
  std::string_view key;
  std::string_view value;
  entry owned() const { return {std::string(key), std::string(value)}; }
};

struct child_ref {
  hash128 hash;
  std::uint64_t count = 0;  // leaf entries in the subtree

  std::string encode() const;
  static result<child_ref> decode(std::string_view bytes);
};

// A read-only view of a node's search index, valid while its node lives. The
// index sits at the start of the node's buffer, before the encoding (so that a
// lookup's index and entry often share a page): a header, then for
// each key the 8 bytes after the prefix all keys share, as a big-endian number
// (zero-padded), then each entry's offset in the encoding, then the shared
// prefix. A binary search compares numbers in that one small array and touches
// the encoding only for the entry it lands on, so a lookup in a cold node costs
// about two memory misses. Caches keep this view beside the node (see
// node_store) so a hit reads the index without the node object.
class node_index {
 public:
  node_index() = default;
  explicit node_index(const char* index) noexcept : p_(index) {}

  std::uint8_t level() const noexcept;
  std::size_t size() const noexcept;
  // Index of the first entry whose key is >= key (size() if none).
  std::size_t lower_bound(std::string_view key) const noexcept;
  entry_view entry(std::size_t i) const noexcept;

 private:
  const char* p_ = nullptr;
};

// Looks key up in the leaf whose index is ix and whose hash is h (named in the
// error when the node is not a leaf): true with the value copied out if found.
result<bool> search_leaf(node_index ix, const hash128& h, std::string_view key, std::string& value);
// The same from a leaf's encoding (whose hash is h), read in order and only as
// far as the key would be, without indexing it: for a leaf read once and not
// kept decoded. Damage it walks over is corruption, never a crash.
result<bool> search_encoding(std::string_view encoding, const hash128& h, std::string_view key, std::string& value);

// The entries of a node, read through its search index: entry i is decoded
// from the encoding when asked for (two varints), so a node keeps no array of
// views beside its bytes. Valid while its node lives.
class entry_range {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = entry_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = entry_view;

    iterator() = default;
    iterator(node_index ix, std::size_t i) noexcept : ix_(ix), i_(i) {}
    entry_view operator*() const noexcept { return ix_.entry(i_); }
    entry_view operator[](difference_type d) const noexcept { return ix_.entry(i_ + d); }
    iterator& operator++() noexcept { ++i_; return *this; }
    iterator operator++(int) noexcept { auto t = *this; ++i_; return t; }
    iterator& operator--() noexcept { --i_; return *this; }
    iterator operator--(int) noexcept { auto t = *this; --i_; return t; }
    iterator& operator+=(difference_type d) noexcept { i_ += d; return *this; }
    iterator& operator-=(difference_type d) noexcept { i_ -= d; return *this; }
    friend iterator operator+(iterator a, difference_type d) noexcept { return a += d; }
    friend iterator operator+(difference_type d, iterator a) noexcept { return a += d; }
    friend iterator operator-(iterator a, difference_type d) noexcept { return a -= d; }
    friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.i_ == b.i_; }
    friend auto operator<=>(const iterator& a, const iterator& b) noexcept { return a.i_ <=> b.i_; }

   private:
    node_index ix_;
    std::size_t i_ = 0;
  };

  explicit entry_range(node_index ix) noexcept : ix_(ix), n_(ix.size()) {}
  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  entry_view operator[](std::size_t i) const noexcept { return ix_.entry(i); }
  entry_view front() const noexcept { return ix_.entry(0); }
  entry_view back() const noexcept { return ix_.entry(n_ - 1); }
  iterator begin() const noexcept { return {ix_, 0}; }
  iterator end() const noexcept { return {ix_, n_}; }

 private:
  node_index ix_;
  std::size_t n_;
};

// A node holds its canonical encoding and its search index in one buffer.
class node {
 public:
  node() : node(0, std::span<const entry>()) {}  // the empty leaf
  node(std::uint8_t level, std::span<const entry> entries);
  node(std::uint8_t level, std::span<const entry_view> entries);

  // Checks `bytes` (a node's encoding: every length bounded, keys in order,
  // child references well-formed) and indexes it, in one pass and one
  // allocation.
  static result<node> decode(std::string_view bytes);

  std::uint8_t level() const noexcept { return static_cast<std::uint8_t>(bytes_[index_level_at]); }
  bool is_leaf() const noexcept { return level() == 0; }
  entry_range entries() const noexcept { return entry_range(search_index()); }
  node_index search_index() const noexcept { return node_index(bytes_.data()); }
  // Index of the first entry whose key is >= key (entries().size() if none).
  std::size_t lower_bound(std::string_view key) const noexcept { return search_index().lower_bound(key); }
  std::string_view last_key() const noexcept { return entries().back().key; }
  // Leaf entries in this subtree (decodes the child refs of an internal node).
  std::uint64_t count() const;
  // The canonical bytes; their XXH3-128 hash is the node's identity.
  std::string_view encode() const noexcept;
  // Memory this node holds (for byte-bounded caches).
  std::size_t memory_bytes() const noexcept { return sizeof(node) + bytes_.capacity(); }

 private:
  static constexpr std::size_t index_level_at = 12;
  struct built {};
  node(built, std::string bytes) noexcept : bytes_(std::move(bytes)) {}
  template <class Entry>
  static std::string encode_entries(std::uint8_t level, std::span<const Entry> entries);
  // The search index followed by `encoding` (well-formed), given where each
  // entry starts in it.
  static std::string build_index(std::string_view encoding, std::span<const std::uint32_t> offsets);

  std::string bytes_;  // the search index, then the encoding
};

// Bytes an entry takes in its node's encoding: what the chunker weighs.
std::size_t encoded_size(std::string_view key, std::string_view value) noexcept;
inline std::size_t encoded_size(const entry& e) noexcept { return encoded_size(e.key, e.value); }
inline std::size_t encoded_size(const entry_view& e) noexcept { return encoded_size(e.key, e.value); }

using node_ptr = std::shared_ptr<const node>;

}  // namespace magnetite::tree
