// bench_command: `magnetite bench [--workload NAME] [--seconds S] [--json]`
// (issue 5). It runs bench/db_bench, which measures our engine beside RocksDB,
// LMDB and raw fdatasync in one run on one disk (docs/benchmarks.md says what
// each case and peer is), and prints db_bench's figures as a table with the
// ratio ours/peer of each row, or with --json db_bench's own JSON object.
//
// Contract:
// - db_bench is looked for in this order: the environment variable
//   MAGNETITE_DB_BENCH (when it is set, there and nowhere else);
//   <directory of the running magnetite>/../bench/db_bench (the build tree's
//   layout: build/tools/magnetite, build/bench/db_bench); db_bench on PATH.
//   When none is an executable file: one line on stderr, "magnetite: db_bench
//   not found: build the bench targets (ninja -C build) or set
//   MAGNETITE_DB_BENCH", and exit 2.
// - workload is writes, gets, restart or all (all runs the three); anything
//   else is one line on stderr naming the valid ones, exit 2. seconds, when
//   given, must be above 0 and at most 3600; it becomes db_bench's --seconds
//   (the length of each measured case; db_bench's default is 3 s).
// - The benchmark's files live in a fresh directory bench-XXXXXX made inside
//   data_dir (the --data directory, created if missing), so the figures are
//   those of that file system. That directory is removed afterwards, whether
//   db_bench succeeded or not, and so is data_dir if this command created it
//   and it is empty again. A database in data_dir is neither opened nor
//   touched.
// - db_bench runs with --json; its stderr (progress lines) is passed through,
//   its stdout must be its JSON. While it runs, this process ignores SIGINT and
//   SIGQUIT (db_bench, in the same process group, gets them and stops), so the
//   clean-up above still happens.
// - Exit 0 once the table (or the JSON) is printed on stdout. Exit 2 with one
//   line on stderr when db_bench cannot be started, exits non-zero, is killed
//   by a signal, or prints something other than its JSON.
#pragma once

#include <optional>
#include <string>

namespace magnetite {

struct bench_command_options {
  std::string data_dir;            // --data
  std::string workload = "all";    // writes | gets | restart | all
  std::optional<double> seconds;   // db_bench --seconds
  bool json = false;               // print db_bench's JSON instead of the table
};

// Runs the command; returns the process's exit code (errors are printed here).
int run_bench_command(const bench_command_options& options);

}  // namespace magnetite
