// `magnetite bench` (tools/bench_command.h): the built tool runs the built
// bench/db_bench (both found beside this test's directory) on its cheapest
// workload, restart, a few seconds a run, on gets, load, overwrite and reclaim
// with few keys and a small cache, and its errors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/env.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;

namespace {

struct bench_run {
  int exit_code = -1;
  std::string out, err;
};

std::filesystem::path build_root() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
}
std::string tool() { return (build_root() / "tools" / "magnetite").string(); }
std::string db_bench() { return (build_root() / "bench" / "db_bench").string(); }

// Runs `env_prefix magnetite args` through the shell, capturing stdout and stderr.
bench_run run(const std::string& env_prefix, const std::string& args) {
  testing::temp_dir scratch("cli-bench-out");
  std::string out = scratch / "out", err = scratch / "err";
  int rc = std::system(fmt::format("{} {} {} >{} 2>{}", env_prefix, tool(), args, out, err).c_str());
  bench_run r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_whole_file(env::posix(), out).value();
  r.err = read_whole_file(env::posix(), err).value();
  return r;
}

// The text after "name": in one row object, up to the next ',' or '}'.
std::string field(const std::string& row, const std::string& name) {
  auto at = row.find("\"" + name + "\":");
  if (at == std::string::npos) return "<missing " + name + ">";
  at += name.size() + 3;
  return row.substr(at, row.find_first_of(",}", at) - at);
}

double number(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  return end && *end == '\0' && !text.empty() ? v : -1;
}

// The row objects of db_bench's JSON: each starts with {"workload".
std::vector<std::string> rows_of(const std::string& json) {
  std::vector<std::string> rows;
  for (auto at = json.find("{\"workload\""); at != std::string::npos; at = json.find("{\"workload\"", at + 1))
    rows.push_back(json.substr(at, json.find('}', at) - at + 1));
  return rows;
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("cli bench: the restart workload as JSON, db_bench from MAGNETITE_DB_BENCH, nothing left behind") {
  REQUIRE_MESSAGE(std::filesystem::exists(db_bench()), "build bench/db_bench first (ninja -C build)");
  testing::temp_dir d("cli-bench");
  std::string data = d / "made/by/bench";  // missing: created for the run, removed after it
  auto r = run("MAGNETITE_DB_BENCH=" + db_bench(), "--data " + data + " bench --workload restart --json --seconds 0.2");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("{\"program\":\"db_bench\"", 0) == 0);
  auto rows = rows_of(r.out);
  REQUIRE_FALSE(rows.empty());
  for (const auto& row : rows) {
    CAPTURE(row);
    CHECK(field(row, "workload") == "\"restart\"");
    CHECK(field(row, "peer") == "\"rocksdb\"");
    CHECK(number(field(row, "ours")) > 0);
    CHECK(number(field(row, "peer_value")) > 0);
    double ratio = number(field(row, "ratio"));
    CHECK(ratio > 0);
    // ratio = ours / peer_value, as printed (4 significant digits).
    CHECK(ratio == doctest::Approx(number(field(row, "ours")) / number(field(row, "peer_value"))).epsilon(0.01));
  }
  CHECK_FALSE(std::filesystem::exists(d / "made"));  // created by bench, empty again, so removed
}

TEST_CASE("cli bench: the text table, db_bench found in the build tree, the data directory left as it was") {
  REQUIRE(std::filesystem::exists(db_bench()));
  testing::temp_dir d("cli-bench");
  std::filesystem::create_directories(d / "data");
  std::ofstream(d / "data/keep") << "mine";
  auto r = run("env -u MAGNETITE_DB_BENCH", "--data " + d / "data" + " bench --workload restart --seconds 0.2");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  auto header = r.out.find("\nworkload ");
  REQUIRE(header != std::string::npos);
  std::string header_line = r.out.substr(header + 1, r.out.find('\n', header + 1) - header - 1);
  CHECK(header_line.find("magnetite") != std::string::npos);
  CHECK(header_line.find("peer value") != std::string::npos);
  CHECK(header_line.find("ours/peer") != std::string::npos);
  auto row = r.out.find("\nrestart ");
  REQUIRE(row != std::string::npos);
  std::string row_line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  CHECK(row_line.find("rocksdb") != std::string::npos);
  // The ratio column sits under its header and ends in 'x'.
  auto column = header_line.find("ours/peer") + std::string("ours/peer").size();
  REQUIRE(row_line.size() > column);
  CHECK(row_line[column - 1] == 'x');
  CHECK(number(row_line.substr(header_line.find("ours/peer"), column - 1 - header_line.find("ours/peer"))) > 0);
  // Only the user's file is left in the data directory.
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(d / "data")) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"keep"});
}

TEST_CASE("cli bench: an unknown workload, a bad --seconds and a missing db_bench are one line and exit 2") {
  testing::temp_dir d("cli-bench");
  std::string data = "--data " + d / "data";
  auto unknown = run("MAGNETITE_DB_BENCH=" + db_bench(), data + " bench --workload everything");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.out.empty());
  CHECK(lines(unknown.err) == 1);
  CHECK(unknown.err.find("'everything'") != std::string::npos);
  CHECK(unknown.err.find("writes, gets, restart, load, overwrite, reclaim or all") != std::string::npos);

  auto zero = run("MAGNETITE_DB_BENCH=" + db_bench(), data + " bench --seconds 0");
  CHECK(zero.exit_code == 2);
  CHECK(lines(zero.err) == 1);
  CHECK(zero.err.find("--seconds") != std::string::npos);

  auto missing = run("MAGNETITE_DB_BENCH=/nonexistent", data + " bench --workload restart");
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.empty());
  CHECK(lines(missing.err) == 1);
  CHECK(missing.err.rfind("magnetite: db_bench not found: build the bench targets (ninja -C build) or set "
                          "MAGNETITE_DB_BENCH",
                          0) == 0);
  CHECK_FALSE(std::filesystem::exists(d / "data"));  // nothing was run, nothing created
}

TEST_CASE("cli bench: what db_bench is given, and a db_bench that fails or prints no JSON") {
  testing::temp_dir d("cli-bench");
  std::string fake = d / "fake_db_bench";
  // Records its arguments and whether its --dir exists, then does what $FAKE_MODE says.
  std::ofstream(fake) << "#!/bin/sh\n"
                         "echo \"$@\" > "
                      << d / "args"
                      << "\n"
                         "[ -d \"$2\" ] && echo yes > "
                      << d / "dir_existed"
                      << "\n"
                         "case \"$FAKE_MODE\" in\n"
                         "  fail) echo 'db_bench: open: no space' >&2; exit 1;;\n"
                         "  text) echo 'not json';;\n"
                         "esac\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  std::string data = d / "data";
  std::filesystem::create_directories(data);

  auto failed =
      run("FAKE_MODE=fail MAGNETITE_DB_BENCH=" + fake, "--data " + data + " bench --workload gets --seconds 0.5");
  CHECK(failed.exit_code == 2);
  CHECK(failed.err.find("db_bench: open: no space\n") == 0);  // its own message passes through
  CHECK(failed.err.find("magnetite: db_bench failed (exit status 1)") != std::string::npos);
  auto args = read_whole_file(env::posix(), d / "args").value();
  CHECK(args.rfind("--dir " + data + "/bench-", 0) == 0);
  CHECK(args.find(" --json --only gets --seconds 0.5\n") != std::string::npos);
  CHECK(std::filesystem::exists(d / "dir_existed"));
  CHECK(std::filesystem::is_empty(data));  // its directory removed even though it failed

  auto text = run("FAKE_MODE=text MAGNETITE_DB_BENCH=" + fake, "--data " + data + " bench");
  CHECK(text.exit_code == 2);
  CHECK(lines(text.err) == 1);
  CHECK(text.err.find("other than its JSON") != std::string::npos);
  CHECK(read_whole_file(env::posix(), d / "args").value().find("--only") == std::string::npos);  // all: no --only
}

namespace {

// The value of "name" in a row as a number; -1 when it is missing or not one.
double number_field(const std::string& row, const std::string& name) { return number(field(row, name)); }

// The document's header: the text before its rows.
std::string header_of(const std::string& json) { return json.substr(0, json.find("\"rows\"")); }

}  // namespace

TEST_CASE("cli bench: gets with --cache-mib and --keys, as JSON: both engines' rates, latencies and peak RSS") {
  REQUIRE(std::filesystem::exists(db_bench()));
  testing::temp_dir d("cli-bench");
  // The command of issue 19, with few keys and a small cache.
  auto r = run("env -u MAGNETITE_DB_BENCH",
               "--data " + d / "data" + " --cache-mib 8 bench --workload gets --keys 2000 --json");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(field(header_of(r.out), "keys") == "2000");
  CHECK(field(header_of(r.out), "cache_mib") == "8");
  CHECK(field(header_of(r.out), "order") == "\"random\"");  // db_bench's defaults, as RocksDB's db_bench loads
  CHECK(field(header_of(r.out), "values") == "0.5");
  auto rows = rows_of(r.out);
  // 2 thread counts x 2 peers x (gets/s, median, p99).
  REQUIRE(rows.size() == 12);
  std::map<std::string, double> figure;  // "case/threads/peer" -> ours
  for (const auto& row : rows) {
    CAPTURE(row);
    CHECK(field(row, "workload") == "\"gets\"");
    std::string peer = field(row, "peer"), what = field(row, "case"), threads = field(row, "threads");
    CHECK((peer == "\"rocksdb\"" || peer == "\"lmdb\""));
    CHECK((threads == "1" || threads == "2"));
    double ours = number_field(row, "ours"), peer_value = number_field(row, "peer_value");
    CHECK(ours > 0);
    CHECK(peer_value > 0);
    CHECK(number_field(row, "ratio") == doctest::Approx(ours / peer_value).epsilon(0.01));
    CHECK(number_field(row, "ours_rss_mib") > 0);
    CHECK(number_field(row, "peer_rss_mib") > 0);
    if (what == "\"get after reopen\"") {
      CHECK(field(row, "unit") == "\"gets/s\"");
      CHECK(field(row, "better") == "\"higher\"");
    } else {
      CHECK((what == "\"get latency median\"" || what == "\"get latency p99\""));
      CHECK(field(row, "unit") == "\"us\"");
      CHECK(field(row, "better") == "\"lower\"");
    }
    figure[what + "/" + threads + "/" + peer] = ours;
  }
  REQUIRE(figure.size() == 12);
  for (std::string threads : {"1", "2"}) {
    CHECK(figure["\"get latency p99\"/" + threads + "/\"rocksdb\""] >=
          figure["\"get latency median\"/" + threads + "/\"rocksdb\""]);
    // Ours is measured once and stands beside each peer.
    CHECK(figure["\"get after reopen\"/" + threads + "/\"rocksdb\""] ==
          figure["\"get after reopen\"/" + threads + "/\"lmdb\""]);
  }
  CHECK_FALSE(std::filesystem::exists(d / "data"));  // created for the run, removed after it
}

// Past RAM: the reading children run in a memory cgroup, which needs root and
// cgroup version 1 here. Where one can be made, the rows say how many disk
// reads a get took; where not, the case says why and gives no rows.
TEST_CASE("cli bench: gets in a memory cgroup report disk reads per get, or say why they cannot run") {
  REQUIRE(std::filesystem::exists(db_bench()));
  testing::temp_dir d("cli-bench");
  auto r = run("env -u MAGNETITE_DB_BENCH", "--data " + d / "data" +
                                                " --cache-mib 8 bench --workload gets --keys 2000 --seconds 0.3 "
                                                "--memory-limit-mib 128 --leaf-form searchable --json");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  bool can = ::geteuid() == 0 && std::filesystem::exists("/sys/fs/cgroup/memory/cgroup.procs");
  if (!can) {
    CHECK(r.exit_code == 2);  // no rows: nothing to show
    CHECK(r.err.find("gets: skipped:") != std::string::npos);
    return;
  }
  REQUIRE(r.exit_code == 0);
  CHECK(field(header_of(r.out), "memory_limit_mib") == "128");
  CHECK(field(header_of(r.out), "leaves") == "\"searchable\"");
  int reads_rows = 0;
  for (const auto& row : rows_of(r.out)) {
    CAPTURE(row);
    CHECK(field(row, "case").find(" in 128 MiB") != std::string::npos);
    if (field(row, "case").find("disk reads per get") == std::string::npos) continue;
    ++reads_rows;
    CHECK(number_field(row, "ours") >= 0);
    CHECK(field(row, "unit") == "\"reads\"");
  }
  CHECK(reads_rows == 4);  // 2 thread counts x 2 peers
  // The cgroups were removed with their children.
  for (const auto& e : std::filesystem::directory_iterator("/sys/fs/cgroup/memory"))
    CHECK(e.path().filename().string().find("magnetite-db-bench-") == std::string::npos);
}

TEST_CASE("cli bench: load and overwrite with few keys: rates, space amplification each round, peak RSS") {
  REQUIRE(std::filesystem::exists(db_bench()));
  testing::temp_dir d("cli-bench");
  auto load = run("MAGNETITE_DB_BENCH=" + db_bench(),
                  "--data " + d / "data" + " --cache-mib 8 bench --workload load --keys 3000 --json");
  INFO("stdout: " << load.out << "\nstderr: " << load.err);
  REQUIRE(load.exit_code == 0);
  auto rows = rows_of(load.out);
  REQUIRE(rows.size() == 3);
  CHECK(field(rows[0], "unit") == "\"keys/s\"");
  CHECK(field(rows[1], "unit") == "\"x\"");
  CHECK(field(rows[2], "unit") == "\"keys/s\"");
  CHECK(field(rows[2], "case") == "\"sorted ingest until durable\"");
  for (const auto& row : rows) {
    CHECK(field(row, "peer") == (&row == &rows[2] ? "\"rocksdb_sst\"" : "\"rocksdb\""));
    CHECK(number_field(row, "ours") > 0);
    CHECK(number_field(row, "ours_rss_mib") > 0);
    CHECK(number_field(row, "ratio") ==
          doctest::Approx(number_field(row, "ours") / number_field(row, "peer_value")).epsilon(0.01));
  }

  auto over = run("MAGNETITE_DB_BENCH=" + db_bench(),
                  "--data " + d / "data" + " --cache-mib 8 bench --workload overwrite --keys 3000 --rounds 3 --json");
  INFO("stdout: " << over.out << "\nstderr: " << over.err);
  REQUIRE(over.exit_code == 0);
  CHECK(field(header_of(over.out), "rounds") == "3");
  rows = rows_of(over.out);
  REQUIRE(rows.size() == 5);  // after the load, after each of 3 rounds, the rewrite rate
  CHECK(field(rows[0], "case") == "\"space amplification after the load\"");
  for (int round = 1; round <= 3; ++round)
    CHECK(field(rows[static_cast<std::size_t>(round)], "case") ==
          fmt::format("\"space amplification after round {}\"", round));
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(rows[i]);
    CHECK(field(rows[i], "unit") == "\"x\"");
    CHECK(field(rows[i], "better") == "\"lower\"");
    // Every key is on disk at least once (compressed values may take less than 100 bytes).
    CHECK(number_field(rows[i], "ours") > 0.1);
    CHECK(number_field(rows[i], "peer_value") > 0.1);
  }
  CHECK(field(rows[4], "unit") == "\"writes/s\"");
  CHECK(number_field(rows[4], "ours") > 0);
}

TEST_CASE("cli bench: --keys, --rounds, --cache-mib, --order, --values and the rest are passed on, and checked") {
  testing::temp_dir d("cli-bench");
  std::string fake = d / "fake_db_bench";
  std::ofstream(fake) << "#!/bin/sh\necho \"$@\" > " << d / "args"
                      << "\nexit 1\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  std::string data = "--data " + d / "data";
  auto r = run("MAGNETITE_DB_BENCH=" + fake, data + " --cache-mib 8 bench --workload overwrite --keys 2000 --rounds 3");
  CHECK(r.exit_code == 2);  // the fake fails
  auto args = read_whole_file(env::posix(), d / "args").value();
  CHECK(args.find(" --json --only overwrite --keys 2000 --rounds 3 --cache-mib 8\n") != std::string::npos);
  std::filesystem::remove(d / "args");
  r = run("MAGNETITE_DB_BENCH=" + fake, data + " bench --workload reclaim");
  CHECK(r.exit_code == 2);
  args = read_whole_file(env::posix(), d / "args").value();
  CHECK(args.find(" --json --only reclaim\n") != std::string::npos);  // db_bench's own default keys (200 000)
  std::filesystem::remove(d / "args");
  r = run("MAGNETITE_DB_BENCH=" + fake, data + " bench --workload load --order sequential --values 0.25");
  CHECK(r.exit_code == 2);
  args = read_whole_file(env::posix(), d / "args").value();
  CHECK(args.find(" --json --only load --order sequential --values 0.25\n") != std::string::npos);
  std::filesystem::remove(d / "args");
  r = run("MAGNETITE_DB_BENCH=" + fake, data + " bench --workload gets --memory-limit-mib 512 --leaf-form zstd");
  CHECK(r.exit_code == 2);
  args = read_whole_file(env::posix(), d / "args").value();
  CHECK(args.find(" --json --only gets --memory-limit-mib 512 --leaf-form zstd\n") != std::string::npos);
  std::filesystem::remove(d / "args");
  for (const char* bad : {" --cache-mib 1 bench", " bench --keys 0", " bench --rounds 0", " bench --rounds 1001",
                          " bench --order shuffled", " bench --values 0", " bench --values 1.5",
                          " bench --memory-limit-mib 63", " bench --leaf-form snappy"}) {
    CAPTURE(bad);
    auto e = run("MAGNETITE_DB_BENCH=" + fake, data + bad);
    CHECK(e.exit_code == 2);
    CHECK(e.out.empty());
    CHECK(lines(e.err) == 1);
  }
  CHECK_FALSE(std::filesystem::exists(d / "args"));  // none of them ran db_bench
}

TEST_CASE("cli bench: reclaim with few keys: on beside reclaim_off and RocksDB, ratios as on / off, cycles") {
  REQUIRE(std::filesystem::exists(db_bench()));
  testing::temp_dir d("cli-bench");
  auto r = run("env -u MAGNETITE_DB_BENCH",
               "--data " + d / "data" + " --cache-mib 8 bench --workload reclaim --keys 3000 --json");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(field(header_of(r.out), "keys") == "3000");
  CHECK(field(header_of(r.out), "ops") == "600");  // keys / 5
  CHECK(field(header_of(r.out), "checkpoint_bytes") == "65536");
  auto rows = rows_of(r.out);
  REQUIRE(rows.size() == 16);        // 8 a thread count, 1 and 32 threads
  std::map<std::string, double> on;  // "case/threads" -> ours, the same beside every peer
  std::size_t off_rows = 0, rocksdb_rows = 0, lone_rows = 0;
  for (const auto& row : rows) {
    CAPTURE(row);
    CHECK(field(row, "workload") == "\"reclaim\"");
    std::string threads = field(row, "threads"), what = field(row, "case"), peer = field(row, "peer");
    CHECK((threads == "1" || threads == "32"));
    double ours = number_field(row, "ours");
    CHECK(ours >= 0);
    CHECK(number_field(row, "ours_rss_mib") > 0);
    auto [at, fresh] = on.emplace(what + "/" + threads, ours);
    if (!fresh) CHECK(at->second == ours);
    if (peer == "null") {
      // Cycles and MiB reclaimed: ours alone.
      ++lone_rows;
      CHECK((field(row, "unit") == "\"cycles\"" || field(row, "unit") == "\"MiB\""));
      CHECK(field(row, "ratio") == "null");
      CHECK(field(row, "peer_value") == "null");
      continue;
    }
    CHECK((peer == "\"reclaim_off\"" || peer == "\"rocksdb\""));
    (peer == "\"reclaim_off\"" ? off_rows : rocksdb_rows)++;
    double peer_value = number_field(row, "peer_value");
    CHECK(ours > 0);
    CHECK(peer_value > 0);
    CHECK(number_field(row, "peer_rss_mib") > 0);
    double ratio = number_field(row, "ratio");
    CHECK(ratio == doctest::Approx(ours / peer_value).epsilon(0.01));
    if (what == "\"durable overwrite latency p99\"" && peer == "\"reclaim_off\"") {
      CHECK(field(row, "target") == "\"ratio <= 2\"");
      CHECK(field(row, "met") == (ratio <= 2 ? "true" : "false"));
    } else {
      CHECK(field(row, "target") == "null");
    }
    if (field(row, "unit") == "\"writes/s\"")
      CHECK(field(row, "better") == "\"higher\"");
    else
      CHECK(field(row, "better") == "\"lower\"");
  }
  CHECK(off_rows == 8);
  CHECK(rocksdb_rows == 4);
  CHECK(lone_rows == 4);
  for (std::string threads : {"1", "32"}) {
    CHECK(on["\"durable overwrite latency p99\"/" + threads] >= on["\"durable overwrite latency median\"/" + threads]);
    // Every key is live: our files hold at least the compressed data.
    CHECK(on["\"space amplification at the end\"/" + threads] > 0);
  }
  CHECK(r.err.find("reclaim  1 thread : p99 on / off") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d / "data"));
}
