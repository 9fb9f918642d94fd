// A fixed-seed slice of the kill -9 torture run (tests/torture/torture.cc) in
// `make test`; `make torture` runs it at length.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/env.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;

namespace {

std::string torture_path() {
  auto exe = std::filesystem::read_symlink("/proc/self/exe");
  return (exe.parent_path() / "torture").string();
}

struct outcome {
  int exit_code = -1;
  std::string out, err;
};

outcome run_torture(const std::string& args) {
  testing::temp_dir scratch("torture-out");
  std::string out = scratch / "out", err = scratch / "err";
  int rc = std::system(fmt::format("{} {} >{} 2>{}", torture_path(), args, out, err).c_str());
  outcome o;
  o.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto read = [](const std::string& path) {
    auto r = read_whole_file(env::posix(), path);
    return r ? *r : std::string();
  };
  o.out = read(out);
  o.err = read(err);
  return o;
}

}  // namespace

TEST_CASE("torture: a fixed-seed slice of kill -9 runs finds no violation") {
  testing::temp_dir d("torture");
  auto o = run_torture(fmt::format("--seed 20261130 --iterations 12 --verify-every 4 --dir {}", d / "db"));
  MESSAGE(o.out);
  CHECK_MESSAGE(o.exit_code == 0, o.err);
  CHECK(o.out.find("torture: 0 violations") != std::string::npos);
  CHECK(o.out.find("12 iterations") != std::string::npos);
  CHECK(o.out.find(" 0 acknowledged operations") == std::string::npos);  // it did work
}

TEST_CASE("torture: bad arguments are refused") {
  CHECK(run_torture("--shards 0").exit_code == 2);
  CHECK(run_torture("--mix put,frob").exit_code == 2);
  CHECK(run_torture("--iterations").exit_code == 2);
}
