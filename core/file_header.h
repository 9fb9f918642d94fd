// file_header: the checksum every file format uses, and the 40-byte header
// that starts every WAL segment, node store pack, index and manifest
// (docs/formats/wal.md, docs/formats/node_store.md):
//
//   0 8 magic | 8 4 version | 12 4 flags (0) | 16 8 a | 24 8 b
//   | 32 4 reserved (0) | 36 4 checksum32 of bytes 0..35
//
// What (a, b) hold is the format's own: (segment number, salt) for a WAL
// segment, (pack number, salt) for a pack or index, (first pack, gc
// position) for a manifest.
//
// Contract: parse_file_header checks every byte it reads; a header it
// accepts was written whole, with this magic, by a build whose version this
// one reads. A version it does not read, or flags it does not know, are
// not_supported (written by a newer magnetite); anything else wrong is
// corruption. Either way the error names the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace magnetite {

// The low 32 bits of XXH3-64 with the given seed.
std::uint32_t checksum32(std::string_view bytes, std::uint64_t seed = 0) noexcept;

inline constexpr std::size_t file_header_size = 40;

struct file_header {
  std::uint64_t a = 0, b = 0;
  std::uint32_t version = 1;
};

std::string encode_file_header(const char (&magic)[8], const file_header& h);

// `what` names the kind of file ("WAL segment", "node store pack"), `path`
// the file; versions 1 to max_version are read.
result<file_header> parse_file_header(std::string_view bytes, const char (&magic)[8], std::string_view what,
                                      std::string_view path, std::uint32_t max_version);

}  // namespace magnetite
