// The helpers of tests/fuzz/fuzz_target.h, linked into every fuzz target and
// into fuzz_corpus_tests.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/fault_env.h"
#include "tests/fuzz/fuzz_target.h"

namespace magnetite::fuzz {

namespace {
std::vector<target>& registry() {
  static std::vector<target> r;
  return r;
}
}  // namespace

int register_target(const char* name, target_fn fn) {
  registry().push_back({name, fn});
  return 0;
}

std::span<const target> targets() { return registry(); }

void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", what, file, line);
  std::fflush(stderr);
  std::abort();
}

std::vector<std::string_view> split_at_magics(std::string_view in, std::span<const std::string_view> magics,
                                              std::size_t max_pieces) {
  std::vector<std::string_view> pieces;
  if (in.empty() || magics.empty() || max_pieces == 0) return pieces;
  std::size_t len = magics.front().size();
  std::size_t start = 0;
  for (std::size_t at = 1; at + len <= in.size() && pieces.size() + 1 < max_pieces; ++at) {
    bool hit = false;
    for (auto m : magics) hit = hit || in.substr(at, len) == m;
    if (!hit) continue;
    pieces.push_back(in.substr(start, at - start));
    start = at;
  }
  pieces.push_back(in.substr(start));
  return pieces;
}

std::map<std::string, std::string> snapshot(fault_env& e, const std::string& dir) {
  std::map<std::string, std::string> out;
  auto names = e.list(dir);
  if (!names) return out;
  for (const auto& n : *names) {
    std::string path = dir + "/" + n;
    if (auto c = e.contents(path)) out[n] = *c;
  }
  return out;
}

void put_file(fault_env& e, const std::string& path, std::string_view bytes) {
  auto f = e.open(path, open_mode::create_truncate);
  FUZZ_CHECK(f.is_ok());
  FUZZ_CHECK((*f)->append(bytes).is_ok());
  FUZZ_CHECK((*f)->sync().is_ok());
}

}  // namespace magnetite::fuzz
