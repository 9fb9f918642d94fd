#include "core/file_sum.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <memory>
#include <vector>

namespace magnetite {

result<hash128> file_sum(env& e, const std::string& path, std::uint64_t bytes) {
  auto f = e.open(path, open_mode::open_existing);
  if (!f) return f.error();
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) return status::io_error("xxhash: no state");
  std::vector<char> chunk(std::size_t{1} << 20);
  for (std::uint64_t at = 0; at < bytes;) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), bytes - at));
    auto n = (*f)->read_at(at, want, chunk.data());
    if (!n) return n.error();
    if (*n < want) return status::corruption(fmt::format("{} holds {} bytes; {} were recorded", path, at + *n, bytes));
    XXH3_128bits_update(state.get(), chunk.data(), *n);
    at += *n;
  }
  XXH128_hash_t h = XXH3_128bits_digest(state.get());
  return hash128{h.high64, h.low64};
}

}  // namespace magnetite
