// frame: encoding and checking of segment headers and frames (layout in
// wal/format.h and docs/formats/wal.md).
//
// parse_frame never reads outside the bytes it is given and classifies what it
// finds; deciding whether damage is a torn tail or corruption is recovery's job.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "wal/format.h"

namespace magnetite::wal {

struct segment_header {
  std::uint64_t number = 0;
  std::uint64_t salt = 0;
  std::uint32_t version = format_version;  // as read; new segments are written at this build's
};

void encode_segment_header(std::string& dst, const segment_header& h);
// The header, or corruption (bad magic or checksum, wrong number) or
// not_supported (a newer format version or unknown flags).
result<segment_header> check_segment_header(std::string_view bytes, std::uint64_t expected_number,
                                            const std::string& where);

// Appends a zeroed frame header and returns its offset; the payload is appended
// next, then finish_frame fills the header in.
std::size_t begin_frame(std::string& dst);
void finish_frame(std::string& dst, std::size_t header_at, std::uint64_t salt, std::uint64_t sequence, record_type type,
                  std::uint8_t flags);

enum class frame_check {
  ok,
  truncated,    // header intact, payload cut short (or fewer bytes than a header)
  bad,          // a checksum fails or the length is impossible
  unsupported,  // checksums fine, but flags/type/reserved from a newer format
};

struct frame_header {
  std::uint32_t length = 0;
  std::uint64_t sequence = 0;
  record_type type = record_type::put;
  std::uint8_t flags = 0;
  std::uint32_t payload_checksum = 0;
};

// Checks the 24 header bytes at `bytes[0]` (constant time).
frame_check check_frame_header(std::string_view bytes, std::uint64_t salt, frame_header& out) noexcept;

struct parsed_frame {
  frame_check check = frame_check::bad;
  frame_header header;
  std::string_view payload;
  std::size_t size = 0;  // header + payload, valid when check == ok
};

// Parses the frame that starts at bytes[0]; `bytes` ends where the file ends (or
// where the caller's buffer ends, in which case `truncated` means "read more").
parsed_frame parse_frame(std::string_view bytes, std::uint64_t salt) noexcept;

}  // namespace magnetite::wal
