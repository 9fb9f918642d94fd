// fuzz_corpus_tests: every fuzz target of tests/fuzz/ run once on each file of
// its seed corpus (tests/fuzz/corpus/<target>/), and on a few fixed inputs, in
// an ordinary build (g++ too): the fuzzers' regression suite (docs/fuzzing.md).
//
// MAGNETITE_FUZZ_INPUTS=file1:file2 replaces the corpus by those files (to
// replay a crash the fuzzer found in a debugger-friendly build):
//   MAGNETITE_FUZZ_INPUTS=crash-1234 build/tests/fuzz_corpus_tests -tc='*wal_recovery*'
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;
using namespace magnetite::fuzz;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const target* find_target(std::string_view name) {
  for (const auto& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

std::vector<fs::path> inputs_of(const std::string& name) {
  std::vector<fs::path> files;
  if (const char* env = std::getenv("MAGNETITE_FUZZ_INPUTS"); env && *env) {
    std::string list = env;
    for (std::size_t at = 0; at <= list.size();) {
      std::size_t colon = std::min(list.find(':', at), list.size());
      if (colon > at) files.emplace_back(list.substr(at, colon - at));
      at = colon + 1;
    }
    return files;
  }
  fs::path dir = fs::path(MAGNETITE_FUZZ_CORPUS) / name;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

int feed(const target& t, std::string_view bytes) {
  return t.fn(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// The targets, in the order docs/fuzzing.md lists them.
const char* const all_targets[] = {"wal_frame",           "wal_record",  "wal_recovery", "tree_node", "node_store",
                                   "db_manifest",         "checkpoints", "ttl_envelope", "cli_text",  "state_value",
                                   "replication_message", "frame_guard", "basp_payload"};

void run_corpus(const char* name) {
  const target* t = find_target(name);
  REQUIRE_MESSAGE(t != nullptr, "fuzz target not linked: ", name);
  auto files = inputs_of(name);
  // Every target keeps a seed corpus in the tree.
  bool replaced = std::getenv("MAGNETITE_FUZZ_INPUTS") && *std::getenv("MAGNETITE_FUZZ_INPUTS");
  if (!replaced) CHECK_MESSAGE(files.size() >= 3, "tests/fuzz/corpus/", name, " has ", files.size(), " inputs");
  for (const auto& f : files) {
    INFO("input: ", f.string());
    std::string bytes = read_file(f);
    if (!replaced) CHECK(bytes.size() <= 8192);  // seeds stay small
    CHECK(feed(*t, bytes) == 0);
  }
  // Fixed inputs every target must survive.
  CHECK(feed(*t, "") == 0);
  CHECK(feed(*t, std::string(1, '\0')) == 0);
  CHECK(feed(*t, std::string(300, '\xff')) == 0);
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  CHECK(feed(*t, all) == 0);
}

}  // namespace

TEST_CASE("fuzz corpus: every target is registered and listed") {
  CHECK(targets().size() == std::size(all_targets));
  for (const char* name : all_targets) CHECK_MESSAGE(find_target(name) != nullptr, name);
}

TEST_CASE("fuzz corpus: wal_frame") { run_corpus("wal_frame"); }
TEST_CASE("fuzz corpus: wal_record") { run_corpus("wal_record"); }
TEST_CASE("fuzz corpus: wal_recovery") { run_corpus("wal_recovery"); }
TEST_CASE("fuzz corpus: tree_node") { run_corpus("tree_node"); }
TEST_CASE("fuzz corpus: node_store") { run_corpus("node_store"); }
TEST_CASE("fuzz corpus: db_manifest") { run_corpus("db_manifest"); }
TEST_CASE("fuzz corpus: checkpoints") { run_corpus("checkpoints"); }
TEST_CASE("fuzz corpus: ttl_envelope") { run_corpus("ttl_envelope"); }
TEST_CASE("fuzz corpus: cli_text") { run_corpus("cli_text"); }
TEST_CASE("fuzz corpus: state_value") { run_corpus("state_value"); }
TEST_CASE("fuzz corpus: replication_message") { run_corpus("replication_message"); }
TEST_CASE("fuzz corpus: frame_guard") { run_corpus("frame_guard"); }
TEST_CASE("fuzz corpus: basp_payload") { run_corpus("basp_payload"); }
