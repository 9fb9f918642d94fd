// cli_text: how the command-line tool reads and writes text: durations,
// scan bounds, and the escaping of keys and values in its output.
//
// Escaping (scan, load --ack-log): bytes outside printable ASCII (0x20..0x7e),
// and backslash, tab and newline, are written as \xNN (two lowercase hex
// digits); every other byte stands for itself. So a line never holds a raw tab
// or newline, and unescape(escape(s)) == s for every byte string.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace magnetite {

std::string escape_field(std::string_view bytes);
result<std::string> unescape_field(std::string_view text);

// "250ms", "10s", "5m", "1h", "100us", "7ns": a positive whole number and a unit.
result<std::chrono::nanoseconds> parse_duration(std::string_view text);

// [from, to) for a scan: --prefix P narrows it to the keys that start with P
// (intersected with --from/--to). "" as `to`: no upper bound.
result<std::pair<std::string, std::string>> scan_bounds(const std::optional<std::string>& from,
                                                        const std::optional<std::string>& to,
                                                        const std::optional<std::string>& prefix);

}  // namespace magnetite
