// searchable_leaf: how the node store keeps a leaf so that a get finds its
// key where the record lies, decoding nothing but the entry it returns
// (docs/formats/node_store.md, "Searchable leaves").
//
// The stored form is the leaf's canonical encoding (docs/formats/tree.md),
// unchanged, followed by the offset of each entry in it: u16 little-endian
// when the encoding is at most 65 535 bytes, u32 otherwise. The encoding
// comes first and whole, so the node's hash is taken over the stored bytes
// as they lie (a prefix), and roots, diff and replication see the same node
// whatever form it is kept in.
//
// Contract:
// - make(leaf) returns the stored form; check() accepts every form make()
//   returns and refuses what is not one in the cheap ways (the encoding's
//   level and count, the offsets' number, order and bounds); what it returns
//   is what is wrong, or empty. It does not parse the entries: the offsets
//   are the writer's, covered by the record's checksum, and the encoding by
//   its hash.
// - search() reads only the offsets and the entries its binary search lands
//   on, each read bounded by the encoding: a form check() accepted never
//   makes it read outside `stored`, whatever its bytes say.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/hash128.h"
#include "core/status.h"
#include "tree/node.h"

namespace magnetite::tree::searchable_leaf {

// The stored form of a leaf (n.is_leaf()).
std::string make(const node& n);

// What is wrong with `stored` as the form of a leaf whose encoding is its
// first `raw_length` bytes; empty when nothing is.
std::string check(std::string_view stored, std::uint32_t raw_length);

// Looks key up in a form check() accepted (the leaf h, named in errors): true
// with the value copied out when the leaf holds it.
result<bool> search(std::string_view stored, std::uint32_t raw_length, const hash128& h, std::string_view key,
                    std::string& value);

}  // namespace magnetite::tree::searchable_leaf
