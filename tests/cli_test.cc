// The magnetite tool: escaping, durations and scan bounds, then the built
// binary (build/tools/magnetite, found beside this test's directory) run in a
// fresh data directory as a user would run it.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "actors/database.h"
#include "tests/support/temp_dir.h"
#include "tools/cli_text.h"

using namespace magnetite;

namespace {

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string tool_path() {
  auto exe = std::filesystem::read_symlink("/proc/self/exe");
  return (exe.parent_path().parent_path() / "tools" / "magnetite").string();
}

// Runs the tool with `args` (shell-quoted by the caller), capturing stdout and stderr.
run_result run(const std::string& args) {
  testing::temp_dir scratch("cli-out");
  std::string out = scratch.path() + "/out", err = scratch.path() + "/err";
  int rc = std::system(fmt::format("{} {} >{} 2>{}", tool_path(), args, out, err).c_str());
  run_result r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto o = read_whole_file(env::posix(), out);
  auto e = read_whole_file(env::posix(), err);
  r.out = o ? *o : std::string();
  r.err = e ? *e : std::string();
  return r;
}

}  // namespace

TEST_CASE("cli text: escaping is reversible for every byte and leaves no tab or newline") {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  std::string e = escape_field(all);
  CHECK(e.find('\t') == std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK(unescape_field(e).value() == all);
  CHECK(escape_field("a\\b\tc\n~") == "a\\x5cb\\x09c\\x0a~");
  CHECK_FALSE(unescape_field("\\x4").is_ok());
  CHECK_FALSE(unescape_field("\\q41").is_ok());
}

TEST_CASE("cli text: durations and scan bounds") {
  CHECK(parse_duration("250ms").value() == std::chrono::milliseconds(250));
  CHECK(parse_duration("2h").value() == std::chrono::hours(2));
  CHECK(parse_duration("7ns").value() == std::chrono::nanoseconds(7));
  for (const char* bad : {"", "10", "0s", "-1s", "1.5s", "5 s", "3d", "99999999999999999999h"})
    CHECK_MESSAGE(parse_duration(bad).error().code() == status_code::invalid_argument, bad);
  using bounds = std::pair<std::string, std::string>;
  CHECK(scan_bounds(std::nullopt, std::nullopt, std::string("ab")).value() == bounds{"ab", "ac"});
  CHECK(scan_bounds(std::string("abc"), std::nullopt, std::string("ab")).value() == bounds{"abc", "ac"});
  CHECK(scan_bounds(std::nullopt, std::string("aa"), std::string("ab")).value() == bounds{"ab", "aa"});
  CHECK(scan_bounds(std::nullopt, std::nullopt, std::string("a\xff\xff")).value() == bounds{"a\xff\xff", "b"});
  CHECK(scan_bounds(std::nullopt, std::nullopt, std::string("\xff")).value() == bounds{"\xff", ""});
}

TEST_CASE("cli: put, get, del, scan and commit on a data directory, with clear errors") {
  REQUIRE(std::filesystem::exists(tool_path()));
  testing::temp_dir d("cli");
  std::string data = "--data " + d.path() + "/db";
  REQUIRE(run(data + " --shards 3 put alpha 1").exit_code == 0);
  REQUIRE(run(data + " put beta 2").exit_code == 0);
  REQUIRE(run(data + " put 'tab\tkey' 'line\nvalue'").exit_code == 0);
  REQUIRE(run(data + " put gamma 3").exit_code == 0);
  REQUIRE(run(data + " put leased yes --ttl 1h").exit_code == 0);
  CHECK(run(data + " get leased").out == "yes\n");
  REQUIRE(run(data + " del leased").exit_code == 0);
  CHECK(database::recorded_shards(d.path() + "/db").value() == std::optional<std::size_t>(3));
  // An existing database keeps its count, whatever --shards says.
  auto g = run(data + " --shards 5 get beta");
  CHECK(g.exit_code == 0);
  CHECK(g.out == "2\n");
  REQUIRE(run(data + " del beta").exit_code == 0);
  auto missing = run(data + " get beta");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "not found\n");

  auto all = run(data + " scan");
  CHECK(all.exit_code == 0);
  CHECK(all.out == "alpha\t1\ngamma\t3\ntab\\x09key\tline\\x0avalue\n");
  CHECK(run(data + " scan --from b --limit 1").out == "gamma\t3\n");
  CHECK(run(data + " scan --prefix al").out == "alpha\t1\n");
  CHECK(run(data + " scan --reverse --limit 2").out == "tab\\x09key\tline\\x0avalue\ngamma\t3\n");

  auto c = run(data + " commit --json");
  CHECK(c.exit_code == 0);
  CHECK(c.out.find("\"combined\":\"") != std::string::npos);
  CHECK(std::count(c.out.begin(), c.out.end(), ',') == 3);  // 3 roots, then the combined one

  // Errors: one line on stderr, a non-zero exit, nothing changed.
  for (const char* bad : {" frobnicate", " put onlykey", " put k v --ttl 10", " --shards 0 get x", ""}) {
    auto r = run(data + bad);
    CAPTURE(bad);
    CHECK(r.exit_code != 0);
    CHECK_FALSE(r.err.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(run(data + " get k").exit_code == 1);
  // A directory another process holds.
  {
    database_options o;
    o.dir = d.path() + "/db";
    o.shards = 3;
    auto held = database::open(o);
    REQUIRE(held.is_ok());
    auto busy = run(data + " get alpha");
    CHECK(busy.exit_code == 2);
    CHECK(busy.err.find("in use") != std::string::npos);
  }
}
