// replication_message: the messages replicas exchange over the network, as
// CAF's binary deserializer reads them off a socket (replication/replica_interface.h).
//
// Input: one selector byte (which message), then the serialized bytes.
// Invariants: decoding returns (an error or a value; never a crash, a hang or
// an allocation the input did not pay for); a decoded value serializes to
// bytes that decode to a value serializing to the same bytes again.
// Not covered: actor handles (the hello reply), whose decoding needs a
// middleman; they are CAF's own type.
#include "actors/caf_headers.h"

#include <iterator>

#include "replication/replica_interface.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;
using namespace magnetite::replication;

namespace {

template <class... Ts>
void round_trip(const std::uint8_t* data, std::size_t size) {
  std::tuple<Ts...> x;
  caf::binary_deserializer source{nullptr, reinterpret_cast<const char*>(data), size};
  auto err = std::apply([&](auto&... xs) { return source(xs...); }, x);
  if (err) return;
  std::vector<char> once;
  caf::binary_serializer sink{nullptr, once};
  FUZZ_CHECK(!std::apply([&](auto&... xs) { return sink(xs...); }, x));
  std::tuple<Ts...> y;
  caf::binary_deserializer again{nullptr, once.data(), once.size()};
  FUZZ_CHECK(!std::apply([&](auto&... xs) { return again(xs...); }, y));
  std::vector<char> twice;
  caf::binary_serializer sink2{nullptr, twice};
  FUZZ_CHECK(!std::apply([&](auto&... xs) { return sink2(xs...); }, y));
  FUZZ_CHECK(once == twice);
}

// By the selector byte, modulo their count.
using decoder = void (*)(const std::uint8_t*, std::size_t);
constexpr decoder decoders[] = {
    round_trip<ballot, std::uint64_t, std::vector<stamped_op>>,  // rwrite
    round_trip<promise_reply>,
    round_trip<vote>,  // confirm reply
    round_trip<merge_report>,
    round_trip<std::vector<hash128>>,                   // fetch
    round_trip<std::vector<std::string>>,               // fetch reply
    round_trip<std::uint32_t, hash128, std::uint32_t>,  // hello
    round_trip<hash128, std::uint32_t>,                 // sync
    round_trip<replica_info>,                           // info reply
    round_trip<std::uint64_t>,                          // beat
    round_trip<std::uint64_t, vote>,                    // rvote
};

}  // namespace

MAGNETITE_FUZZ_TARGET(replication_message) {
  if (size == 0) return 0;
  decoders[data[0] % std::size(decoders)](data + 1, size - 1);
  return 0;
}
