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

// A node holds its canonical encoding in one buffer and views of its entries
// into it: one allocation for the bytes, one for the views, and a binary search
// that stays within the node's own memory.
class node {
 public:
  node() : node(0, {}) {}  // the empty leaf
  node(std::uint8_t level, std::span<const entry> entries);
  node(const node& other);
  node& operator=(const node& other);
  node(node&& other) noexcept;
  node& operator=(node&& other) noexcept;

  static result<node> decode(std::string_view bytes);
  // The same, taking the buffer over instead of copying it (a cache miss path).
  static result<node> decode(std::string&& bytes);

  std::uint8_t level() const noexcept { return level_; }
  bool is_leaf() const noexcept { return level_ == 0; }
  const std::vector<entry_view>& entries() const noexcept { return entries_; }
  // Index of the first entry whose key is >= key (entries().size() if none).
  std::size_t lower_bound(std::string_view key) const noexcept;
  std::string_view last_key() const { return entries_.back().key; }
  // Leaf entries in this subtree (decodes the child refs of an internal node).
  std::uint64_t count() const;
  // The canonical bytes; their XXH3-128 hash is the node's identity.
  const std::string& encode() const noexcept { return bytes_; }
  // Memory this node holds (for byte-bounded caches).
  std::size_t memory_bytes() const noexcept {
    return sizeof(node) + bytes_.capacity() + entries_.capacity() * sizeof(entry_view) +
           prefixes_.capacity() * sizeof(std::uint64_t);
  }

 private:
  // Rebuilds the views after the bytes moved (bytes_ must be well-formed).
  void index();

  std::uint8_t level_ = 0;
  std::string bytes_;
  std::vector<entry_view> entries_;
  // Search aids: the bytes every key of the node starts with, and for each key
  // the next 8 bytes as a big-endian number (zero-padded). Comparing numbers in
  // one small array resolves most of a binary search without touching the keys.
  std::size_t shared_ = 0;
  std::vector<std::uint64_t> prefixes_;
};

// Bytes an entry takes in its node's encoding: what the chunker weighs.
std::size_t encoded_size(std::string_view key, std::string_view value) noexcept;
inline std::size_t encoded_size(const entry& e) noexcept { return encoded_size(e.key, e.value); }
inline std::size_t encoded_size(const entry_view& e) noexcept { return encoded_size(e.key, e.value); }

using node_ptr = std::shared_ptr<const node>;

}  // namespace magnetite::tree
