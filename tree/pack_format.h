// pack_format: the byte formats of the node store, as docs/formats/node_store.md
// describes them (that document is normative; these constants and codecs must
// agree with it): the header that starts every pack, index and manifest file,
// records, index entries, the manifest, and the names of the numbered files.
//
// Contract:
// - Encoders append to (or return) bytes and never fail.
// - Parsers check every byte they read and every length against its bound
//   before anything is allocated; what is wrong is returned, never guessed
//   around. A version newer than this build reads is not_supported, damage is
//   corruption (or, for a record header, a message the caller puts in its own
//   error).
// - Nothing here does I/O but read_store_manifest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/file_header.h"
#include "core/hash128.h"
#include "tree/node_store.h"

namespace magnetite::tree {

inline constexpr char pack_magic[8] = {'M', 'G', 'N', 'T', 'P', 'A', 'C', 'K'};
inline constexpr char index_magic[8] = {'M', 'G', 'N', 'T', 'P', 'I', 'D', 'X'};
inline constexpr char manifest_magic[8] = {'M', 'G', 'N', 'T', 'P', 'M', 'A', 'N'};
// Index files and manifests are of version 1 (a manifest that names
// dropped packs, 2); packs of version 4, whose records may be LZ4 blocks
// (version 2), searchable leaves (version 3) and searchable leaves with
// entry sums (version 4). Every older pack reads.
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::uint32_t pack_format_version = 4;

// Pack, index and manifest files all start with the 40-byte header of
// core/file_header.h, where (a, b) is (pack number, salt) for packs and
// indexes and (first pack, gc position) for the manifest.

// Record header, then `stored` payload bytes:
//   0 4 checksum, seeded with the pack's salt, of bytes 4..35
//   4 1 flags (bit 0: payload is a zstd frame, bit 1: an LZ4 block, pack
//     version 2; bit 2: a searchable leaf, pack version 3; bit 3: one with
//     entry sums, pack version 4; at most one)
//   5 3 reserved (0)
//   8 4 stored length | 12 4 raw length (of the node encoding)
//  16 4 payload checksum, seeded with the pack's salt, of the stored bytes
//     (of a searchable leaf: of the bytes past the encoding)
//  20 16 node hash
// The payload checksum is not redundant with the hash: a zstd frame has bits
// the decoder ignores, so damage there would decode to the right node and go
// unnoticed; and it keeps damaged bytes away from the decompressor. A
// searchable leaf's encoding lies raw in its payload, where the hash covers
// it: summing it twice would read it twice on every miss.
inline constexpr std::size_t record_header_size = 36;
inline constexpr std::uint8_t flag_zstd = 0x01;
inline constexpr std::uint8_t flag_lz4 = 0x02;
inline constexpr std::uint8_t flag_searchable_leaf = 0x04;
inline constexpr std::uint8_t flag_searchable_summed = 0x08;
inline constexpr std::uint8_t searchable_flags = flag_searchable_leaf | flag_searchable_summed;
inline constexpr std::uint8_t known_record_flags = flag_zstd | flag_lz4 | searchable_flags;
inline constexpr std::uint8_t compressed_flags = flag_zstd | flag_lz4;

// The bytes a record's payload checksum covers.
std::string_view checksummed_payload(std::uint8_t flags, std::string_view payload, std::uint32_t raw) noexcept;
// The smallest node encoding: a level byte and an entry count of 0.
inline constexpr std::uint32_t min_node_bytes = 2;

// Index entry: 0 16 node hash | 16 8 record offset | 24 4 record length
//   | 28 4 checksum, seeded with the pack's salt, of bytes 0..27
inline constexpr std::size_t index_entry_size = 32;

// A manifest that names dropped packs (made by reclamation) is version 2: the
// header, then u32 count, count ascending u32 pack numbers, and a checksum of
// those bytes. Without dropped packs it is the version-1 header alone, so a
// store that never reclaimed stays readable by version-1 builds.
inline constexpr std::uint32_t manifest_dropped_version = 2;

// ---- records -----------------------------------------------------------------------
// Appends a record: header and payload.
void encode_record(std::string& out, std::uint64_t salt, const hash128& h, std::uint8_t flags, std::string_view payload,
                   std::uint32_t raw);

struct record_header {
  std::uint8_t flags = 0;
  std::uint32_t stored = 0;
  std::uint32_t raw = 0;
  std::uint32_t payload_checksum = 0;
  hash128 hash;
  std::uint64_t length() const noexcept { return record_header_size + std::uint64_t{stored}; }
};

// Checks the record_header_size header bytes at p; an empty string when they
// are sound.
std::string parse_record_header(const char* p, std::uint64_t salt, record_header& out);

// ---- index entries -----------------------------------------------------------------
void encode_index_entry(std::string& out, std::uint64_t salt, const hash128& h, std::uint64_t offset,
                        std::uint32_t length);

struct index_file_entry {
  hash128 hash;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

// The entry in the first index_entry_size bytes of `bytes`; nullopt when its
// checksum does not hold. Whether it fits its pack is the reader's to check.
std::optional<index_file_entry> parse_index_entry(std::string_view bytes, std::uint64_t salt);

// ---- file names --------------------------------------------------------------------
// The number of a file named "<8 decimal digits><suffix>" (1 to
// max_pack_number), or nullopt for any other name.
std::optional<std::uint32_t> parse_numbered(std::string_view name, std::string_view suffix);

// ---- the manifest ------------------------------------------------------------------
// What a node store's MANIFEST says (written by gc and reclamation).
struct store_manifest {
  std::uint32_t first_pack;
  std::uint64_t gc_position;
  std::set<std::uint32_t> dropped;  // packs above first_pack that are garbage
};

std::string encode_store_manifest(std::uint32_t first, std::uint64_t position, const std::set<std::uint32_t>& dropped);
// The MANIFEST of the store in `dir`: nullopt if there is none.
result<std::optional<store_manifest>> read_store_manifest(env& e, const std::string& dir);

}  // namespace magnetite::tree
