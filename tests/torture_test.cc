// A fixed-seed slice of the kill -9 torture run (tests/torture/torture.cc) in
// `make test`; `make torture` runs it at length.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
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

// The number the driver printed right after `label` (-1 when the label is
// missing, so a changed output fails the checks below instead of passing).
long long figure(const std::string& out, const std::string& label) {
  auto at = out.find(label);
  if (at == std::string::npos) return -1;
  return std::strtoll(out.c_str() + at + label.size(), nullptr, 10);
}

// Unacknowledged operations of one kind found at the kills, applied or absent
// ("<label>applied A / absent B"); -1 when the line is missing.
long long in_flight(const std::string& out, const std::string& label) {
  auto at = out.find(label);
  unsigned long long applied = 0, absent = 0;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at + label.size(), "applied %llu / absent %llu", &applied, &absent) != 2)
    return -1;
  return static_cast<long long>(applied + absent);
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
  // The default mix includes the state/ kinds, and kills landed mid-operation
  // (exit 0 already says each worker died by the kill, not by itself).
  CHECK(figure(o.out, ", txn ") > 0);
  CHECK(figure(o.out, ", xtxn ") > 0);
  CHECK(figure(o.out, ", stream ") > 0);
  CHECK(figure(o.out, ", keyed ") > 0);
  CHECK(figure(o.out, "kills with an operation in flight ") > 0);
}

TEST_CASE("torture: transactions, stream appends and keyed commits killed mid-run are all there or not at all") {
  // Only the state/ kinds, so that most kills find a commit, an append or a
  // keyed commit in flight and its outcome is checked, not just the
  // acknowledged ones. 16 iterations: where a kill lands depends on the
  // machine's timing, and with 8 no kill met a transaction in flight in
  // about 1 run of 15.
  testing::temp_dir d("torture-state");
  auto o = run_torture(
      fmt::format("--seed 20261201 --iterations 16 --verify-every 4 --mix txn,xtxn,stream,keyed --dir {}", d / "db"));
  MESSAGE(o.out);
  CHECK_MESSAGE(o.exit_code == 0, o.err);
  CHECK(o.out.find("torture: 0 violations") != std::string::npos);
  CHECK(o.out.find("16 iterations") != std::string::npos);
  CHECK(o.out.find("mix txn,xtxn,stream,keyed") != std::string::npos);
  CHECK(figure(o.out, ", txn ") > 0);
  CHECK(figure(o.out, ", xtxn ") > 0);
  CHECK(figure(o.out, ", stream ") > 0);
  CHECK(figure(o.out, ", keyed ") > 0);
  CHECK(figure(o.out, "by kind: put ") == 0);  // only the kinds asked for
  CHECK(figure(o.out, "kills with an operation in flight ") > 0);
  CHECK(figure(o.out, "record checks ") > 0);
  CHECK(figure(o.out, "entries checked ") > 0);
  CHECK(in_flight(o.out, "txns in flight ") > 0);
  CHECK(in_flight(o.out, "appends in flight ") > 0);
  CHECK(figure(o.out, "owner checks ") > 0);
  CHECK(in_flight(o.out, "commits in flight ") > 0);
}

TEST_CASE("torture: bad arguments are refused") {
  CHECK(run_torture("--shards 0").exit_code == 2);
  CHECK(run_torture("--mix put,frob").exit_code == 2);
  CHECK(run_torture("--iterations").exit_code == 2);
}
