// state_value: a state/ value as a shard stores it after the TTL envelope
// (docs/formats/state.md): revision, type byte, body; and the key decoders.
//
// Input: the value bytes; the same bytes are also tried as a user key.
// Invariants: every decoder fails only with corruption; an accepted item
// re-encodes to a value that decodes to the same item; an accepted deque or
// stream meta re-encodes to exactly the input body; a deque meta never has
// head past tail; key decoders either refuse or give back a component whose
// encoding rebuilds the key.
#include "state/item_codec.h"
#include "state/layout.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;

MAGNETITE_FUZZ_TARGET(state_value) {
  std::string_view in = as_view(data, size);
  auto v = state::split_state_value(in, "fuzz");
  if (!v) {
    FUZZ_CHECK(v.error().code() == status_code::corruption);
  } else {
    FUZZ_CHECK(v->revision != 0);
    FUZZ_CHECK(v->body.size() + 8 == in.size());
    auto x = state::decode_item(v->body, "fuzz");
    if (!x) {
      FUZZ_CHECK(x.error().code() == status_code::corruption);
    } else {
      auto again = state::encode_item(*x, "fuzz");
      FUZZ_CHECK(again.is_ok());
      auto back = state::decode_item(*again, "fuzz");
      FUZZ_CHECK(back.is_ok() && *back == *x);
    }
    auto d = state::decode_deque_meta(v->body, "fuzz");
    if (d) {
      FUZZ_CHECK(d->head <= d->tail);
      FUZZ_CHECK(state::encode_deque_meta(*d) == v->body);
    } else {
      FUZZ_CHECK(d.error().code() == status_code::corruption);
    }
    auto s = state::decode_stream_meta(v->body, "fuzz");
    if (s)
      FUZZ_CHECK(state::encode_stream_meta(*s) == v->body);
    else
      FUZZ_CHECK(s.error().code() == status_code::corruption);
  }
  // The input as a key under a record namespace and a stream's entries.
  std::string ns_prefix = state::record_prefix("ns");
  std::string key = ns_prefix + std::string(in);
  if (auto k = state::bytes_after(ns_prefix, key)) FUZZ_CHECK(state::record_key("ns", *k) == key);
  std::string entries = state::stream_entries_prefix("s");
  if (auto seq = state::stream_seq_of(entries, entries + std::string(in)))
    FUZZ_CHECK(state::stream_entry_key("s", *seq) == entries + std::string(in));
  return 0;
}
