// bench_command: `magnetite [--cache-mib M] bench [--workload NAME] [--seconds S]
// [--keys N] [--rounds R] [--order random|sequential] [--values R]
// [--memory-limit-mib M] [--leaf-form lz4|zstd|searchable] [--json]`
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
// - workload is writes, gets, restart, load, overwrite, reclaim or all (all
//   runs every one but reclaim, which is long: durable writes from 1 thread);
//   anything else is one line on stderr naming the valid ones, exit 2.
//   seconds, when given, must be above 0 and at most 3600; it becomes
//   db_bench's --seconds (the length of each measured case; db_bench's default
//   is 3 s). keys (1 to 10^10), rounds (1 to 1000) and cache_mib (2 to
//   2^20), when given, become db_bench's --keys, --rounds and --cache-mib (its
//   defaults: 1 000 000 keys, 200 000 for reclaim, 10 and 1024); order
//   (random or sequential: how the loads visit the keys; db_bench's default
//   random) and values (above 0 to 1: how well values compress, RocksDB's
//   --compression_ratio; db_bench's default 0.5) become db_bench's --order
//   and --values; memory_limit_mib (64 to 2^20: gets read in a memory
//   cgroup of that size after the page cache is dropped, which needs root)
//   and leaf_form (lz4, zstd or searchable: how our loads write leaves)
//   become db_bench's --memory-limit-mib and --leaf-form; out of range: one
//   line, exit 2.
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
// - The table shows each row's peak RSS of ours and of the peer (MiB, from
//   db_bench's ours_rss_mib and peer_rss_mib) when some row has them.
// - Exit 0 once the table (or the JSON) is printed on stdout. Exit 2 with one
//   line on stderr when db_bench cannot be started, exits non-zero, is killed
//   by a signal, or prints something other than its JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace magnetite {

struct bench_command_options {
  std::string data_dir;                         // --data
  std::string workload = "all";                 // writes | gets | restart | load | overwrite | reclaim | all
  std::optional<double> seconds;                // db_bench --seconds
  std::optional<std::uint64_t> keys;            // db_bench --keys
  std::optional<std::uint64_t> rounds;          // db_bench --rounds
  std::optional<std::size_t> cache_mib;         // the global --cache-mib: db_bench --cache-mib
  std::optional<std::string> order;             // db_bench --order: random | sequential
  std::optional<double> values;                 // db_bench --values: the values' compression ratio
  std::optional<std::size_t> memory_limit_mib;  // db_bench --memory-limit-mib: gets past RAM
  std::optional<std::string> leaf_form;         // db_bench --leaf-form: lz4 | zstd | searchable
  bool json = false;                            // print db_bench's JSON instead of the table
};

// Runs the command; returns the process's exit code (errors are printed here).
int run_bench_command(const bench_command_options& options);

}  // namespace magnetite
