// sealed_text: the frame of the small text files the engine only ever
// replaces whole (TAGS, docs/formats/tags.md; BACKUP, docs/formats/backup.md):
//
//   <kind> <version>\n           the header: version 1 is the one read here
//   <body: whole lines>
//   end <lines> <sum>\n          <lines> in the body; <sum> the XXH3-128 (32
//                                lowercase hex digits) of every byte before
//                                this line
//
// The end line makes the file check itself: a lost line, a cut or a changed
// byte anywhere is found, and no line of a damaged file is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace magnetite {

// The whole file for `body` (empty, or lines each ending in '\n').
std::string seal(std::string_view kind, std::string_view body);

struct sealed_body {
  std::string_view text;   // the body's lines, each ending in '\n'
  std::size_t offset = 0;  // where the body starts in the file
};

// The body of a sealed file of `kind`, version 1. corruption ("offset N:
// why"; the caller names the file), or not_supported for a header of a
// newer version.
result<sealed_body> unseal(std::string_view text, std::string_view kind);

// A decimal without sign or leading zeros (0 itself allowed), whole.
bool parse_decimal(std::string_view text, std::uint64_t& out);

// "offset N: why": the corruption a reader of a sealed file reports.
status damaged_at(std::size_t offset, std::string_view why);

}  // namespace magnetite
