#include "core/file_sum.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <memory>
#include <new>
#include <vector>

namespace magnetite {

struct sum_stream::state {
  state() : xxh(XXH3_createState()) {
    if (!xxh) throw std::bad_alloc();
    XXH3_128bits_reset(xxh);
  }
  ~state() { XXH3_freeState(xxh); }
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  XXH3_state_t* xxh;
};

sum_stream::sum_stream() : state_(std::make_unique<state>()) {}
sum_stream::~sum_stream() = default;
sum_stream::sum_stream(sum_stream&&) noexcept = default;
sum_stream& sum_stream::operator=(sum_stream&&) noexcept = default;

void sum_stream::add(std::string_view bytes) {
  XXH3_128bits_update(state_->xxh, bytes.data(), bytes.size());
  bytes_ += bytes.size();
}

hash128 sum_stream::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(state_->xxh);
  return hash128{h.high64, h.low64};
}

result<hash128> file_sum(env& e, const std::string& path, std::uint64_t bytes) {
  auto f = e.open(path, open_mode::open_existing);
  if (!f) return f.error();
  sum_stream sum;
  std::vector<char> chunk(std::size_t{1} << 20);
  for (std::uint64_t at = 0; at < bytes;) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), bytes - at));
    auto n = (*f)->read_at(at, want, chunk.data());
    if (!n) return n.error();
    if (*n < want) return status::corruption(fmt::format("{} holds {} bytes; {} were recorded", path, at + *n, bytes));
    sum.add(std::string_view(chunk.data(), *n));
    at += *n;
  }
  return sum.digest();
}

}  // namespace magnetite
