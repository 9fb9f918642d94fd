// A data directory is its owner's alone: what the database creates is 0700
// and 0600 whatever the umask, and a directory that others may read or
// write is reported at open (database_options::warn) and by verify().
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "actors/database_core.h"
#include "tests/support/database_fixture.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using magnetite::testing::must_open;
using magnetite::testing::options_for;
namespace fs = std::filesystem;

namespace {
// Every path under `dir` whose mode lets anyone but the owner in.
std::vector<std::string> open_to_others(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    REQUIRE(::stat(e.path().c_str(), &st) == 0);
    if (st.st_mode & 0077) out.push_back(e.path().string());
  }
  return out;
}
}  // namespace

TEST_CASE("private data: under umask 0 every file and directory the database makes is the owner's alone") {
  testing::temp_dir d("private");
  std::string dir = d / "db";
  mode_t old = ::umask(0);
  std::vector<std::string> warnings;
  {
    auto o = options_for(dir, 2);
    o.warn = [&](const std::string& w) { warnings.push_back(w); };
    auto db = must_open(o);
    for (int i = 0; i < 200; ++i) REQUIRE(db->put(fmt::format("k{}", i), "v").is_ok());
    REQUIRE(db->commit().is_ok());
    REQUIRE(db->tag("first").is_ok());
    REQUIRE(db->backup(d / "backup").is_ok());
  }
  ::umask(old);
  CHECK(warnings.empty());
  struct stat st;
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(open_to_others(dir) == std::vector<std::string>{});
  CHECK(open_to_others(d / "backup") == std::vector<std::string>{});
}

TEST_CASE("private data: a directory others may read warns at open and in verify, and not once private") {
  testing::temp_dir d("private");
  std::string dir = d / "db";
  { must_open(options_for(dir, 1)); }
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  REQUIRE(::chmod((dir + "/MANIFEST").c_str(), 0666) == 0);
  std::vector<std::string> warnings;
  auto o = options_for(dir, 1);
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  {
    auto db = must_open(o);
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[0].find("data directory " + dir + " is open to others (mode 0755)") != std::string::npos);
    CHECK(warnings[0].find("may read it") != std::string::npos);
    CHECK(warnings[1].find("1 files and directories under " + dir) != std::string::npos);
    CHECK(warnings[1].find("MANIFEST, mode 0666") != std::string::npos);
    auto v = db->verify();
    REQUIRE(v.is_ok());
    CHECK(v->problems.empty());
    CHECK(v->warnings == warnings);
  }
  REQUIRE(::chmod(dir.c_str(), 0700) == 0);
  REQUIRE(::chmod((dir + "/MANIFEST").c_str(), 0600) == 0);
  warnings.clear();
  auto db = must_open(o);
  CHECK(warnings.empty());
  CHECK(db->verify().value().warnings.empty());
}
