// frame_guard: the judge of every byte a node's connection delivers, before
// CAF's BASP reads it (replication/frame_guard.h).
//
// Input: a control byte (bit 0: the side, accepted or connected; bits 1-2:
// which limits), a seed byte for the piece sizes, then the stream.
// Invariants: fed in pieces of any size, the verdict, the refusal and the
// frames counted are those of the stream fed whole; once refused, every
// later byte is refused; the payload check sees each payload whole, never
// empty and never over the limit of its moment (before or after the
// handshake), and its refusal (of payloads that begin with 0xee) stops the
// stream at that frame; the guard never has shaken hands on a refusal of a
// frame before the handshake.
#include <string>
#include <vector>

#include "replication/frame_guard.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;
using magnetite::replication::frame_guard;

namespace {

struct run {
  bool ok = true;
  std::string refusal;
  std::uint64_t frames = 0;
  bool shook = false;
  std::vector<std::size_t> payloads;
};

run feed(std::span<const std::uint8_t> stream, frame_guard::side side, std::uint32_t before, std::uint32_t after,
         std::uint8_t seed) {
  run r;
  frame_guard* self = nullptr;
  frame_guard g(side, before, after, [&](std::uint8_t, std::span<const std::uint8_t> payload) -> std::string {
    FUZZ_CHECK(!payload.empty());
    FUZZ_CHECK(payload.size() <= (self->shook() ? after : before));
    r.payloads.push_back(payload.size());
    return payload[0] == 0xee ? "refused by the check" : "";
  });
  self = &g;
  std::size_t at = 0;
  std::uint32_t x = seed;
  while (at < stream.size()) {
    std::size_t n = seed == 0 ? stream.size() - at : 1 + (x % 97);
    x = x * 1103515245u + 12345u;
    n = std::min(n, stream.size() - at);
    bool was_refused = g.refused();
    bool ok = g.take(stream.subspan(at, n));
    if (was_refused) FUZZ_CHECK(!ok);
    FUZZ_CHECK(ok == !g.refused());
    at += n;
  }
  r.ok = !g.refused();
  r.refusal = g.refusal();
  r.frames = g.frames();
  r.shook = g.shook();
  return r;
}

}  // namespace

MAGNETITE_FUZZ_TARGET(frame_guard) {
  control c(as_view(data, size));
  std::uint8_t mode = c.u8();
  std::uint8_t seed = c.u8();
  auto side = (mode & 1) ? frame_guard::side::connected : frame_guard::side::accepted;
  static constexpr std::uint32_t limits[4][2] = {{16 << 10, 96 << 20}, {64, 1024}, {32, 32}, {1024, 1 << 20}};
  auto [before, after] = limits[(mode >> 1) & 3];
  auto rest = c.rest();
  std::span<const std::uint8_t> stream(reinterpret_cast<const std::uint8_t*>(rest.data()), rest.size());
  run whole = feed(stream, side, before, after, 0);
  run pieces = feed(stream, side, before, after, seed | 1);
  FUZZ_CHECK(whole.ok == pieces.ok);
  FUZZ_CHECK(whole.refusal == pieces.refusal);
  FUZZ_CHECK(whole.frames == pieces.frames);
  FUZZ_CHECK(whole.shook == pieces.shook);
  FUZZ_CHECK(whole.payloads == pieces.payloads);
  if (!whole.ok && whole.refusal.find("before") != std::string::npos &&
      whole.refusal.find("after the handshake") == std::string::npos)
    FUZZ_CHECK(!whole.shook);
  return 0;
}
