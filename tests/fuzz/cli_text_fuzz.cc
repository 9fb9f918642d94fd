// cli_text: the command-line tool's text rules (tools/cli_text.h):
// unescape_field, escape_field, parse_duration, scan_bounds.
//
// Input: the text; for scan_bounds, its pieces split at the first two NUL bytes
// (from, to, prefix).
// Invariants: unescape(escape(x)) == x for every x, and escape's output is
// printable ASCII without tab, newline or a raw backslash escape; what unescape
// accepts round-trips through escape and unescape; a duration that parses is
// positive, a whole number times its unit, and prints back to itself in ns;
// scan_bounds narrows [from, to) to the keys that start with the prefix.
#include <fmt/format.h>

#include "tests/fuzz/fuzz_target.h"
#include "tools/cli_text.h"

using namespace magnetite;
using namespace magnetite::fuzz;

MAGNETITE_FUZZ_TARGET(cli_text) {
  std::string_view in = as_view(data, size);

  std::string escaped = escape_field(in);
  for (unsigned char ch : escaped) FUZZ_CHECK(ch >= 0x20 && ch <= 0x7e);
  auto round = unescape_field(escaped);
  FUZZ_CHECK(round.is_ok() && *round == in);

  if (auto u = unescape_field(in)) {
    FUZZ_CHECK(u->size() <= in.size());
    auto again = unescape_field(escape_field(*u));
    FUZZ_CHECK(again.is_ok() && *again == *u);
  } else {
    FUZZ_CHECK(u.error().code() == status_code::invalid_argument);
  }

  if (auto d = parse_duration(in)) {
    FUZZ_CHECK(d->count() > 0);
    auto ns = parse_duration(fmt::format("{}ns", d->count()));
    FUZZ_CHECK(ns.is_ok() && *ns == *d);
  } else {
    FUZZ_CHECK(d.error().code() == status_code::invalid_argument);
  }

  std::size_t a = in.find('\0');
  std::size_t b = a == std::string_view::npos ? a : in.find('\0', a + 1);
  std::optional<std::string> from, to, prefix;
  if (a == std::string_view::npos) {
    prefix = std::string(in);
  } else {
    from = std::string(in.substr(0, a));
    to = std::string(in.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1));
    if (b != std::string_view::npos) prefix = std::string(in.substr(b + 1));
  }
  auto bounds = scan_bounds(from, to, prefix);
  FUZZ_CHECK(bounds.is_ok());
  const auto& [lo, hi] = *bounds;
  FUZZ_CHECK(lo >= from.value_or(""));
  if (to && !to->empty()) FUZZ_CHECK(!hi.empty() && hi <= *to);
  if (prefix && !prefix->empty()) {
    FUZZ_CHECK(lo >= *prefix);
    // Every key that starts with the prefix sorts before hi (when there is one).
    std::string longest = *prefix + std::string(4, '\xff');
    if (!hi.empty() && (!to || to->empty() || longest < *to)) FUZZ_CHECK(longest < hi);
    // The prefix itself is inside [lo, hi) unless from or to exclude it.
    if (*prefix >= from.value_or("") && (!to || to->empty() || *prefix < *to))
      FUZZ_CHECK(lo == *prefix && (hi.empty() || *prefix < hi));
  }
  return 0;
}
