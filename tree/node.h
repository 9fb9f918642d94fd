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

#include <cstdint>
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

// A node holds its canonical encoding and its search index in one buffer, and
// views of its entries into it.
class node {
 public:
  node() : node(0, {}) {}  // the empty leaf
  node(std::uint8_t level, std::span<const entry> entries);
  node(const node& other);
  node& operator=(const node& other);
  node(node&& other) noexcept;
  node& operator=(node&& other) noexcept;

  static result<node> decode(std::string_view bytes);

  std::uint8_t level() const noexcept { return level_; }
  bool is_leaf() const noexcept { return level_ == 0; }
  const std::vector<entry_view>& entries() const noexcept { return entries_; }
  node_index search_index() const noexcept { return node_index(bytes_.data()); }
  // Index of the first entry whose key is >= key (entries().size() if none).
  std::size_t lower_bound(std::string_view key) const noexcept { return search_index().lower_bound(key); }
  std::string_view last_key() const { return entries_.back().key; }
  // Leaf entries in this subtree (decodes the child refs of an internal node).
  std::uint64_t count() const;
  // The canonical bytes; their XXH3-128 hash is the node's identity.
  std::string_view encode() const noexcept { return std::string_view(bytes_.data() + encoding_at_, encoded_size_); }
  // Memory this node holds (for byte-bounded caches).
  std::size_t memory_bytes() const noexcept {
    return sizeof(node) + bytes_.capacity() + entries_.capacity() * sizeof(entry_view);
  }

 private:
  struct unindexed {};
  explicit node(unindexed) noexcept {}  // for decode, which indexes it at once

  // Lays out bytes_ as the search index then `encoding` (well-formed), and
  // builds the entry views.
  void index(std::string_view encoding);
  // Rebuilds the views after the bytes moved.
  void reindex_views();

  std::uint8_t level_ = 0;
  std::string bytes_;  // the search index, then (at encoding_at_) the encoding
  std::size_t encoding_at_ = 0;
  std::size_t encoded_size_ = 0;
  std::vector<entry_view> entries_;
};

// Bytes an entry takes in its node's encoding: what the chunker weighs.
std::size_t encoded_size(std::string_view key, std::string_view value) noexcept;
inline std::size_t encoded_size(const entry& e) noexcept { return encoded_size(e.key, e.value); }
inline std::size_t encoded_size(const entry_view& e) noexcept { return encoded_size(e.key, e.value); }

using node_ptr = std::shared_ptr<const node>;

}  // namespace magnetite::tree
