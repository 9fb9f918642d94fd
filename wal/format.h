// format: the byte layout of write-ahead log segments. docs/formats/wal.md is the
// normative description; these constants must agree with it.
//
// A log is a directory of segment files named by a 20-digit decimal number
// (`00000000000000000007.wal`). Each starts with a 40-byte header followed by
// frames:
//
//   segment header (40 bytes, little-endian)
//     0  8  magic "MGNTWAL1"
//     8  4  format version (4; 1 to 3 are read too: their commit frames
//           name no sorted runs, 1 and 2's carry no covered sequence, and
//           version 1's no stamp bound)
//    12  4  flags (0)
//    16  8  segment number, equal to the one in the file name
//    24  8  salt: random, chosen when the segment is created
//    32  4  reserved (0)
//    36  4  checksum: low 32 bits of XXH3-64 over bytes 0..35
//
//   frame header (24 bytes, little-endian), then `length` bytes of payload
//     0  4  header checksum: low 32 bits of XXH3-64, seeded with the salt, over
//           bytes 4..23
//     4  4  length of the payload
//     8  8  sequence number: the previous frame's plus one, across segments
//    16  1  record type (record_type)
//    17  1  flags: bit 0 = follows_sync (see below); other bits 0
//    18  2  reserved (0)
//    20  4  payload checksum: low 32 bits of XXH3-64, seeded with the salt, over
//           the payload
//
// The salt makes a frame valid in one segment only: bytes of another segment
// (or a WAL copied into a value) never pass as frames here. The header checksum
// lets recovery test any offset for a frame in constant time.
//
// follows_sync is set on the first frame appended after everything before it was
// made durable by a successful fdatasync (and on the first frames of a segment,
// which is created only after its predecessor is durable). A valid follows_sync
// frame found after damage therefore proves the damage is in durable data:
// corruption, not a torn tail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_header.h"
#include "core/limits.h"

namespace magnetite::wal {

inline constexpr char segment_magic[8] = {'M', 'G', 'N', 'T', 'W', 'A', 'L', '1'};
inline constexpr std::uint32_t format_version = 4;
inline constexpr std::size_t segment_header_size = file_header_size;  // core/file_header.h
inline constexpr std::size_t frame_header_size = 24;
inline constexpr std::uint8_t flag_follows_sync = 0x01;
inline constexpr std::uint8_t known_frame_flags = flag_follows_sync;

enum class record_type : std::uint8_t {
  put = 1,
  del = 2,
  batch = 3,
  commit = 4,
  replication_state = 5,
  commit_runs = 6,  // a commit marker that names sorted runs too (format version 4)
};
inline constexpr std::uint8_t max_record_type = 6;

// Both kinds of commit marker.
inline constexpr bool is_commit(record_type t) noexcept {
  return t == record_type::commit || t == record_type::commit_runs;
}

// No payload is larger than a maximal batch plus its encoding overhead.
inline constexpr std::size_t max_frame_payload = limits::max_batch_bytes + (8u << 20);

inline constexpr std::string_view segment_suffix = ".wal";

std::string segment_file_name(std::uint64_t number);
// The segment number of a file name, or nullopt for any other file.
std::optional<std::uint64_t> parse_segment_file_name(std::string_view name);

// Temporary name a segment is written under before it is renamed into place.
std::string segment_temp_file_name(std::uint64_t number);
inline constexpr std::string_view temp_suffix = ".tmp";

}  // namespace magnetite::wal
