// file_sum: the XXH3-128 of a file's first bytes, read in bounded chunks, for
// checksums kept beside files too large to hold in memory (a backup's packs);
// sum_stream: the same sum of bytes as they are written, so that a file
// just written need not be read back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/hash128.h"

namespace magnetite {

// The same value as hash128::of over those bytes. corruption, naming the
// file, if it holds fewer than `bytes`.
result<hash128> file_sum(env& e, const std::string& path, std::uint64_t bytes);

// The same sum kept as bytes go by: after add() of a file's first N bytes in
// order, digest() is file_sum of those N bytes.
class sum_stream {
 public:
  sum_stream();
  ~sum_stream();
  sum_stream(sum_stream&&) noexcept;
  sum_stream& operator=(sum_stream&&) noexcept;
  void add(std::string_view bytes);
  hash128 digest() const;
  std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  struct state;
  std::unique_ptr<state> state_;  // XXH3's streaming state
  std::uint64_t bytes_ = 0;
};

}  // namespace magnetite
