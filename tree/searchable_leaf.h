// searchable_leaf: how the node store keeps a leaf so that a get finds its
// key where the record lies, decoding nothing but the entry it returns
// (docs/formats/node_store.md, "Searchable leaves").
//
// The stored form is the leaf's canonical encoding (docs/formats/tree.md),
// unchanged, followed by the offset of each entry in it: u16 little-endian
// when the encoding is at most 65 535 bytes, u32 otherwise, and (the form
// written since pack version 4) one u32 sum of each entry's bytes. The encoding
// comes first and whole, so the node's hash is taken over the stored bytes
// as they lie (a prefix), and roots, diff and replication see the same node
// whatever form it is kept in.
//
// Contract:
// - make(leaf) returns the stored form, with sums; check() accepts every
//   form make() returns and refuses what is not one in the cheap ways (the
//   encoding's level and count, the offsets' number, order and bounds); what
//   it returns is what is wrong, or empty. It does not parse the entries: the
//   offsets and sums are the writer's, covered by the record's checksum, and
//   the encoding by its hash.
// - search() reads only the offsets and the entries its binary search lands
//   on, each read bounded by the encoding: a form check() accepted never
//   makes it read outside `stored`, whatever its bytes say. With sums, it
//   checks each entry it lands on against its sum before it reads it, so it
//   needs no hash of the whole encoding to trust what it returns: an entry
//   that does not match its sum is corruption.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/hash128.h"
#include "core/status.h"
#include "tree/node.h"

namespace magnetite::tree::searchable_leaf {

// Whether a stored form carries a sum of each entry (record flag bit 3) or
// only the offsets (bit 2, pack version 3).
enum class sums : bool { none, per_entry };

// The stored form of a leaf (n.is_leaf()), with sums.
std::string make(const node& n);

// What is wrong with `stored` as the form of a leaf whose encoding is its
// first `raw_length` bytes; empty when nothing is.
std::string check(std::string_view stored, std::uint32_t raw_length, sums s);

// Looks key up in a form check() accepted (the leaf h, named in errors): true
// with the value copied out when the leaf holds it.
result<bool> search(std::string_view stored, std::uint32_t raw_length, sums s, const hash128& h, std::string_view key,
                    std::string& value);

}  // namespace magnetite::tree::searchable_leaf
