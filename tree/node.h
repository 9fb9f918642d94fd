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
#include <string>
#include <string_view>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"

namespace magnetite::tree {

struct entry {
  std::string key;
  std::string value;  // leaf: the user's value; internal: an encoded child_ref
  friend bool operator==(const entry&, const entry&) = default;
};

struct child_ref {
  hash128 hash;
  std::uint64_t count = 0;  // leaf entries in the subtree

  std::string encode() const;
  static result<child_ref> decode(std::string_view bytes);
};

struct node {
  std::uint8_t level = 0;
  std::vector<entry> entries;

  bool is_leaf() const noexcept { return level == 0; }
  const std::string& last_key() const { return entries.back().key; }
  // Leaf entries in this subtree (decodes the child refs of an internal node).
  std::uint64_t count() const;

  std::string encode() const;
  static result<node> decode(std::string_view bytes);
};

// Bytes an entry takes in its node's encoding: what the chunker weighs.
std::size_t encoded_size(const entry& e) noexcept;

using node_ptr = std::shared_ptr<const node>;

}  // namespace magnetite::tree
