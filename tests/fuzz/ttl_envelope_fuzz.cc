// ttl_envelope: the TTL value envelope (ttl::unwrap, ttl::live_value), plain
// and stamped.
//
// Input: the stored bytes.
// Invariants: unwrap stays inside the bytes and fails only with corruption or
// not_supported; what it accepts re-wraps to the same bytes; live_value agrees
// with unwrap, tombstones and expiry at every clock reading around the
// deadline; and any bytes wrapped with any expiry (and any stamp) unwrap to
// themselves.
#include "core/coding.h"
#include "tests/fuzz/fuzz_target.h"
#include "ttl/envelope.h"

using namespace magnetite;
using namespace magnetite::fuzz;

MAGNETITE_FUZZ_TARGET(ttl_envelope) {
  std::string_view in = as_view(data, size);
  auto u = ttl::unwrap(in);
  if (!u) {
    auto code = u.error().code();
    FUZZ_CHECK(code == status_code::corruption || code == status_code::not_supported);
    FUZZ_CHECK(!ttl::live_value(in, 0).is_ok());
  } else {
    FUZZ_CHECK(u->value.data() >= in.data() && u->value.data() + u->value.size() == in.data() + in.size());
    if (u->stamp) {
      FUZZ_CHECK(!u->tombstone || u->expires_at_ns);
      std::optional<std::string_view> v;
      if (!u->tombstone) v = u->value;
      FUZZ_CHECK(ttl::wrap_stamped(*u->stamp, v, u->expires_at_ns) == in);
    } else {
      FUZZ_CHECK(!u->tombstone);
      FUZZ_CHECK(ttl::wrap(u->value, u->expires_at_ns) == in);
    }
    for (std::uint64_t now :
         {std::uint64_t{0}, u->expires_at_ns.value_or(1) - 1, u->expires_at_ns.value_or(1), ~std::uint64_t{0}}) {
      auto live = ttl::live_value(in, now);
      FUZZ_CHECK(live.is_ok());
      FUZZ_CHECK(live->has_value() == (!u->tombstone && !u->expired(now)));
      if (live->has_value()) FUZZ_CHECK(**live == u->value);
    }
  }
  // Round trip of the input as a value, with an expiry taken from its first bytes.
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < 8 && i < in.size(); ++i) at |= std::uint64_t{static_cast<std::uint8_t>(in[i])} << (8 * i);
  for (std::optional<std::uint64_t> exp : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{at}}) {
    std::string w = ttl::wrap(in, exp);
    FUZZ_CHECK(w.size() <= in.size() + ttl::max_envelope_overhead);
    auto back = ttl::unwrap(w);
    FUZZ_CHECK(back.is_ok() && back->value == in && back->expires_at_ns == exp && !back->stamp);
    stamp st{{at, static_cast<std::uint32_t>(at >> 7)}, ~at};
    std::string ws = ttl::wrap_stamped(st, in, exp);
    FUZZ_CHECK(ws.size() <= in.size() + ttl::max_stamped_overhead);
    auto sb = ttl::unwrap(ws);
    FUZZ_CHECK(sb.is_ok() && sb->value == in && sb->expires_at_ns == exp && sb->stamp == st && !sb->tombstone);
  }
  auto tomb = ttl::unwrap(ttl::wrap_stamped(stamp{{1, 2}, 3}, std::nullopt, at));
  FUZZ_CHECK(tomb.is_ok() && tomb->tombstone && tomb->value.empty() && tomb->expires_at_ns == at);
  return 0;
}
