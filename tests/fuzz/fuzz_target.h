// fuzz_target: what every fuzz target in tests/fuzz/ is built on (docs/fuzzing.md).
//
// A target is one function of the input bytes, written once with
//
//   MAGNETITE_FUZZ_TARGET(wal_record) { ... data, size ... return 0; }
//
// and built two ways:
// - with MAGNETITE_LIBFUZZER defined (the clang build, -Dfuzz=true), it is the
//   binary's LLVMFuzzerTestOneInput: tests/fuzz/<name>_fuzz, run by `make fuzz`;
// - otherwise it registers itself under its name, and fuzz_corpus_tests (every
//   build, g++ included) feeds it each file of tests/fuzz/corpus/<name>/.
//
// A target must return (never throw, never crash, never read out of bounds:
// the sanitizers watch) for every input. FUZZ_CHECK states an invariant: when it
// fails the process aborts with the condition and its place, which libFuzzer
// records as a crash and keeps the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace magnetite {
class fault_env;
}

namespace magnetite::fuzz {

using target_fn = int (*)(const std::uint8_t* data, std::size_t size);

struct target {
  const char* name;
  target_fn fn;
};

// The plain build's registry (each target adds itself at static initialisation).
int register_target(const char* name, target_fn fn);
std::span<const target> targets();

[[noreturn]] void invariant_failed(const char* what, const char* file, int line);

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Reads control bytes off the front of an input: past its end every read is 0,
// so any input is a valid control block.
class control {
 public:
  explicit control(std::string_view in) : in_(in) {}
  std::uint8_t u8() {
    if (in_.empty()) return 0;
    auto v = static_cast<std::uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{u8()} << (8 * i);
    return v;
  }
  std::string_view rest() const { return in_; }

 private:
  std::string_view in_;
};

// Splits `in` before each occurrence of one of `magics` (all the same length):
// the pieces, in order, the first possibly not starting with a magic. At most
// `max_pieces`; later occurrences stay inside the last piece.
std::vector<std::string_view> split_at_magics(std::string_view in, std::span<const std::string_view> magics,
                                              std::size_t max_pieces);

// Every file directly in `dir` of `e` and its current bytes.
std::map<std::string, std::string> snapshot(fault_env& e, const std::string& dir);
// Creates (or replaces) a file holding `bytes`, synced.
void put_file(fault_env& e, const std::string& path, std::string_view bytes);

}  // namespace magnetite::fuzz

#define FUZZ_CHECK(cond)                                                           \
  do {                                                                             \
    if (!(cond)) ::magnetite::fuzz::invariant_failed(#cond, __FILE__, __LINE__); \
  } while (0)

#ifdef MAGNETITE_LIBFUZZER
#define MAGNETITE_FUZZ_TARGET(name)                                                       \
  static int name##_one_input(const std::uint8_t* data, std::size_t size);               \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {    \
    return name##_one_input(data, size);                                                  \
  }                                                                                       \
  static int name##_one_input(const std::uint8_t* data, std::size_t size)
#else
#define MAGNETITE_FUZZ_TARGET(name)                                                       \
  static int name##_one_input(const std::uint8_t* data, std::size_t size);               \
  [[maybe_unused]] static const int name##_registered =                                  \
      ::magnetite::fuzz::register_target(#name, name##_one_input);                        \
  static int name##_one_input(const std::uint8_t* data, std::size_t size)
#endif
