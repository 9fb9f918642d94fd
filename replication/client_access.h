// client_access: which keys a named client of a cluster may read and write,
// from the `client` lines of its cluster file (cluster_file.h):
//
//   client reports read orders/          reads of keys starting "orders/"
//   client ingest readwrite orders/      reads and writes there
//   client admin readwrite *             every key, the state space included
//   client billing readwrite records invoices    one namespace of records
//   client audit read stream payments            one stream
//   client worker readwrite state sessions       one namespace of keyed state
//
// A prefix is one word: its bytes as written, except `%XX` (two hex digits)
// for any byte, which is how a space, `#`, `%` or a byte above 7F is
// written (`%FF%FF` is the whole state space, where records, streams and
// keyed state live: engine/state_space.h). `*` alone is the empty prefix.
// The named forms stand for the prefix every key of that namespace or
// stream starts with (docs/formats/state.md), so a grant on namespace
// `invoices` covers none of `invoices2`.
//
// Invariants: a client may do only what one of its grants allows (no grant:
// nothing); `readwrite` includes `read`; a range is readable only when one
// readable prefix covers all of it, so no key outside a grant is ever
// returned, even as the end of a page.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace magnetite::replication {

struct client_grant {
  std::string prefix;
  bool write = false;  // readwrite; else read only

  friend auto operator<=>(const client_grant&, const client_grant&) = default;
};

class client_access {
 public:
  client_access() = default;  // no grant: nothing
  explicit client_access(std::vector<client_grant> grants);

  bool may_read(std::string_view key) const noexcept;
  bool may_write(std::string_view key) const noexcept;
  // Every key k with from <= k < to (to empty: no upper bound).
  bool may_read_range(std::string_view from, std::string_view to) const noexcept;
  // Whether any grant writes (transactions' decisions carry no key).
  bool writes_anything() const noexcept;

  const std::vector<client_grant>& grants() const noexcept { return grants_; }

 private:
  std::vector<client_grant> grants_;  // sorted, no two alike
};

// A prefix as the cluster file writes it, and back: parse_prefix refuses a
// `%` not followed by two hex digits and an empty word; format_prefix
// escapes exactly the bytes a word cannot hold as they are.
result<std::string> parse_prefix(std::string_view word);
std::string format_prefix(std::string_view prefix);
// The prefix of a namespace of records, a stream or a namespace of keyed
// state (`kind`: records, stream, state), as docs/formats/state.md lays
// their keys out; an unknown kind or an empty name is refused.
result<std::string> state_prefix(std::string_view kind, std::string_view name);

}  // namespace magnetite::replication
