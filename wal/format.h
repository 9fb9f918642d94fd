// format: the byte layout of write-ahead log segments. docs/formats/wal.md is the
// normative description; these constants must agree with it.
//
// A log is a directory of segment files named by a 20-digit decimal number
// (`00000000000000000007.wal`). Each starts with a 32-byte header followed by
// frames:
//
//   segment header (32 bytes, little-endian)
//     0  8  magic "MGNTWAL1"
//     8  4  format version (1)
//    12  4  flags (0)
//    16  8  segment number, equal to the one in the file name
//    24  4  reserved (0)
//    28  4  checksum: low 32 bits of XXH3-64 over bytes 0..27
//
//   frame header (20 bytes, little-endian), then `length` bytes of payload
//     0  4  checksum: low 32 bits of XXH3-64 over bytes 4..(20+length-1)
//     4  4  length of the payload
//     8  8  sequence number: the previous frame's plus one, across segments
//    16  1  record type (record_type)
//    17  1  flags: bit 0 = follows_sync (see below); other bits 0
//    18  2  reserved (0)
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

#include "core/limits.h"

namespace magnetite::wal {

inline constexpr char segment_magic[8] = {'M', 'G', 'N', 'T', 'W', 'A', 'L', '1'};
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::size_t segment_header_size = 32;
inline constexpr std::size_t frame_header_size = 20;
inline constexpr std::uint8_t flag_follows_sync = 0x01;
inline constexpr std::uint8_t known_frame_flags = flag_follows_sync;

enum class record_type : std::uint8_t {
  put = 1,
  del = 2,
  batch = 3,
  commit = 4,
  replication_state = 5,
};
inline constexpr std::uint8_t max_record_type = 5;

// No payload is larger than a maximal batch plus its encoding overhead.
inline constexpr std::size_t max_frame_payload = limits::max_batch_bytes + (8u << 20);

inline constexpr std::string_view segment_suffix = ".wal";

std::string segment_file_name(std::uint64_t number);
// The segment number of a file name, or nullopt for any other file.
std::optional<std::uint64_t> parse_segment_file_name(std::string_view name);

std::uint32_t checksum32(std::string_view bytes) noexcept;

}  // namespace magnetite::wal
