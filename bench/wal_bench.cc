// wal_bench: what one durable WAL group commit costs, next to what the disk can do.
//
// In ONE run, on the same disk (a fresh temporary directory under --dir):
//   raw       the physical limit: a loop of 4 KiB write(2) appended to a file,
//             each followed by fdatasync (plain POSIX, not magnetite's env)
//   group N   magnetite::wal::log_writer, N puts (16-byte key, 100-byte value)
//             appended, then one sync() (one write(2) + one fdatasync under the
//             default fsync_policy::always), for N = 1, 8, 64, 512
//
// Every case runs for --seconds after a short warm-up, in a fresh file or log.
// The whole set of cases is run --rounds times, each round in a rotated order, so
// that a slow phase of a noisy machine hits all cases alike; the median per case
// is reported. Only ratios measured within one run mean anything: absolute
// numbers move a lot between runs on a shared disk.
//
// Targets (printed with PASS/MISS, they do not change the exit status):
//   group 1 syncs/s >= 0.9 x raw fdatasyncs/s
//   group 64 frames/s >= 50 x group 1 frames/s
//
// --diag adds raw cases that separate the disk from the WAL: appends of exactly
// one frame's and 64 frames' bytes (the same bytes per sync as group 1 and 64),
// and 4 KiB overwrites of a preallocated file (fdatasync without a size change).
// They are reported but are not part of the targets.
//
// When one case's rounds differ by more than 2x the table says so: the disk
// changed speed during the run and the ratios deserve a rerun.
//
// Exit status: 0 when the measurements were taken (targets met or not), 1 on an
// I/O error or bad usage, 130 when interrupted. The temporary directory is
// removed in every case.
//
//   wal_bench [--dir D] [--seconds S] [--rounds R] [--warmup S] [--diag] [--json]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_support.h"
#include "core/env.h"
#include "wal/log_writer.h"
#include "wal/recovery.h"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace magnetite;
using bench::median;

constexpr std::size_t raw_write_bytes = 4096;
constexpr std::size_t key_bytes = 16;
constexpr std::size_t value_bytes = 100;
constexpr double group1_target = 0.9;  // group 1 syncs/s vs raw ops/s
constexpr double group64_target = 50;  // group 64 frames/s vs group 1 frames/s

// ---------------------------------------------------------------------------
// Errors and clean-up

std::string g_tmp_dir;                    // removed on every exit path
std::vector<std::string> g_created_dirs;  // --dir components we created, deepest last
volatile std::sig_atomic_t g_interrupted = 0;

void on_signal(int) { g_interrupted = 1; }

void cleanup() {
  std::error_code ec;
  if (!g_tmp_dir.empty()) {
    std::filesystem::remove_all(g_tmp_dir, ec);
    if (ec) fmt::print(stderr, "wal_bench: could not remove {}: {}\n", g_tmp_dir, ec.message());
    g_tmp_dir.clear();
  }
  // Directories this run created for --dir go too, if nothing else is in them.
  for (auto it = g_created_dirs.rbegin(); it != g_created_dirs.rend(); ++it)
    if (!std::filesystem::remove(*it, ec)) break;
  g_created_dirs.clear();
}

[[noreturn]] void die(std::string_view what) {
  fmt::print(stderr, "wal_bench: error: {}\n", what);
  cleanup();
  std::exit(1);
}

[[noreturn]] void die_errno(std::string_view op, const std::string& path) {
  die(fmt::format("{} {}: {}", op, path, std::strerror(errno)));
}

void check(const status& s, std::string_view what) {
  if (!s.is_ok()) die(fmt::format("{}: {}", what, s.to_string()));
}

template <class T>
T& check(result<T>& r, std::string_view what) {
  if (!r.is_ok()) die(fmt::format("{}: {}", what, r.error().to_string()));
  return r.value();
}

// ---------------------------------------------------------------------------
// Options

struct options {
  std::string dir = "./bench-data/wal";
  double seconds = 2.0;
  double warmup = 0.25;
  int rounds = 3;
  bool json = false;
  bool diag = false;
};

[[noreturn]] void usage(int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: wal_bench [--dir D] [--seconds S] [--rounds R] [--warmup S] [--diag] [--json]\n"
             "  --dir D       parent of the temporary directory (default ./bench-data/wal)\n"
             "  --seconds S   measured duration of each case in each round (default 2)\n"
             "  --rounds R    rounds over all cases; the median is reported (default 3)\n"
             "  --warmup S    untimed run before each measurement (default 0.25)\n"
             "  --diag        also run raw cases that help explain a gap (not part of the targets)\n"
             "  --json        print the figures as one JSON object instead of the table\n");
  std::exit(code);
}

double parse_seconds(const char* flag, const char* text, bool allow_zero) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(allow_zero ? v >= 0 : v > 0) || v > 3600) {
    fmt::print(stderr, "wal_bench: {} wants a number of seconds{}, got '{}'\n", flag, allow_zero ? "" : " above 0",
               text);
    usage(1);
  }
  return v;
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        fmt::print(stderr, "wal_bench: {} needs a value\n", a);
        usage(1);
      }
      return argv[++i];
    };
    if (a == "--dir") {
      o.dir = next();
      if (o.dir.empty()) usage(1);
    } else if (a == "--seconds") {
      o.seconds = parse_seconds("--seconds", next(), false);
    } else if (a == "--warmup") {
      o.warmup = parse_seconds("--warmup", next(), true);
    } else if (a == "--rounds") {
      const char* t = next();
      char* end = nullptr;
      long r = std::strtol(t, &end, 10);
      if (end == t || *end != '\0' || r < 1 || r > 100) {
        fmt::print(stderr, "wal_bench: --rounds wants 1..100, got '{}'\n", t);
        usage(1);
      }
      o.rounds = static_cast<int>(r);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--diag") {
      o.diag = true;
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      fmt::print(stderr, "wal_bench: unknown argument '{}'\n", a);
      usage(1);
    }
  }
  return o;
}

// ---------------------------------------------------------------------------
// Directories

// Creates `dir` and any missing parents through env::create_dir, remembering the
// ones that did not exist so cleanup() can remove them again if they stay empty.
void make_dirs(env& e, const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  std::filesystem::path so_far;
  for (const auto& part : p) {
    so_far /= part;
    std::string s = so_far.string();
    if (s.empty() || s == "/" || s == "." || s == "..") continue;
    auto ex = e.exists(s);
    bool existed = check(ex, "stat");
    check(e.create_dir(s), "create_dir");
    if (!existed) g_created_dirs.push_back(s);
  }
}

std::string make_tmp_dir(const std::string& parent) {
  std::string tmpl = path_join(parent, "run-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) die_errno("mkdtemp", tmpl);
  return tmpl;
}

// ---------------------------------------------------------------------------
// Cases

enum class case_kind {
  raw_append,     // write(2) at the end of the file + fdatasync: the file grows each time
  raw_overwrite,  // write(2) into a preallocated, synced file + fdatasync: size never changes
  wal,            // log_writer: `group` append_put, then sync()
};

struct case_def {
  std::string name;      // for the table
  std::string json_key;  // for --json
  case_kind kind;
  std::size_t bytes = 0;  // raw: bytes per write(2)
  int group = 0;          // wal: frames per sync
  bool diag = false;      // only with --diag; not part of the targets
};

struct sample {
  std::uint64_t syncs = 0;
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;  // handed to write(2)
  double seconds = 0;
  double syncs_per_s() const { return static_cast<double>(syncs) / seconds; }
  double frames_per_s() const { return static_cast<double>(frames) / seconds; }
};

double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      die_errno("write", path);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void fdatasync_or_die(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) die_errno("fdatasync", path);
}

sample run_raw(const case_def& c, const std::string& path, double warmup, double seconds) {
  std::vector<char> buf(c.bytes);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>('a' + i % 26);

  // raw_overwrite: a file large enough for the whole run, written and synced
  // before timing, so each timed fdatasync flushes data only (no size change, no
  // block allocation): bench::preallocated_file, which db_bench's raw case uses
  // too. Writes wrap around when they reach its end.
  std::unique_ptr<bench::preallocated_file> pre;
  int fd = -1;
  if (c.kind == case_kind::raw_overwrite) {
    auto made = bench::preallocated_file::create(path, 64ull << 20);
    pre = std::move(check(made, "preallocate"));
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die_errno("open", path);
  }
  auto one = [&] {
    if (pre) {
      check(pre->write_and_sync(std::string_view(buf.data(), buf.size())), "raw overwrite");
      return;
    }
    write_all(fd, buf.data(), buf.size(), path);
    fdatasync_or_die(fd, path);
  };

  auto t0 = clock_type::now();
  while (!g_interrupted && since(t0) < warmup) one();
  sample s;
  t0 = clock_type::now();
  do {
    one();
    ++s.syncs;
  } while (!g_interrupted && since(t0) < seconds);
  s.seconds = since(t0);
  s.frames = s.syncs;
  s.bytes = s.syncs * c.bytes;
  if (pre)
    pre.reset();
  else if (::close(fd) != 0)
    die_errno("close", path);
  if (::unlink(path.c_str()) != 0) die_errno("unlink", path);
  return s;
}

sample run_wal(env& e, const case_def& c, const std::string& dir, double warmup, double seconds) {
  check(e.create_dir(dir), "create_dir");
  auto rec = wal::recover(e, dir);
  auto& recovered = check(rec, "recover " + dir);
  auto opened = wal::log_writer::open(e, dir, wal::writer_options{}, recovered);
  std::unique_ptr<wal::log_writer> w = std::move(check(opened, "open WAL in " + dir));

  std::string value(value_bytes, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>('A' + (i * 7) % 26);
  char key[key_bytes + 1];
  std::uint64_t key_no = 0;
  auto one = [&] {
    for (int i = 0; i < c.group; ++i) {
      // 16 bytes: 'k' and 15 digits.
      fmt::format_to_n(key, sizeof key, "k{:015}", key_no++ % 1000000000000000ull);
      auto r = w->append_put(std::string_view(key, key_bytes), value);
      check(r, "append_put");
    }
    check(w->sync(), "sync");
  };

  auto t0 = clock_type::now();
  while (!g_interrupted && since(t0) < warmup) one();
  const wal::writer_stats before = w->stats();
  sample s;
  t0 = clock_type::now();
  do {
    one();
    ++s.syncs;
  } while (!g_interrupted && since(t0) < seconds);
  s.seconds = since(t0);
  const wal::writer_stats& after = w->stats();
  s.frames = after.frames - before.frames;
  s.bytes = after.bytes - before.bytes;
  // The writer's own counters must agree: one write and one fdatasync per sync().
  if (after.syncs - before.syncs != s.syncs || after.fsyncs - before.fsyncs != s.syncs ||
      s.frames != s.syncs * static_cast<std::uint64_t>(c.group))
    die(fmt::format("{}: writer stats disagree: {} syncs, {} fsyncs, {} frames for {} sync() calls of {}", c.name,
                    after.syncs - before.syncs, after.fsyncs - before.fsyncs, s.frames, s.syncs, c.group));
  if (w->durable_sequence() != w->last_sequence())
    die(fmt::format("{}: durable sequence {} behind last {}", c.name, w->durable_sequence(), w->last_sequence()));
  w.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) die(fmt::format("remove {}: {}", dir, ec.message()));
  return s;
}

// ---------------------------------------------------------------------------
// Reporting

struct case_result {
  const case_def* def;
  std::vector<sample> rounds;
  double syncs_per_s = 0;   // median over rounds
  double frames_per_s = 0;  // median over rounds
  double bytes_per_sync = 0;
  double min_syncs = 0, max_syncs = 0;
};

std::string json_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
        else
          out += ch;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  options opt = parse_args(argc, argv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  env& e = env::posix();

  std::vector<case_def> cases = {
      {"raw 4KiB write+fdatasync", "raw_4k", case_kind::raw_append, raw_write_bytes, 0, false},
      {"wal group 1", "wal_group_1", case_kind::wal, 0, 1, false},
      {"wal group 8", "wal_group_8", case_kind::wal, 0, 8, false},
      {"wal group 64", "wal_group_64", case_kind::wal, 0, 64, false},
      {"wal group 512", "wal_group_512", case_kind::wal, 0, 512, false},
  };
  if (opt.diag) {
    // The same bytes per sync as group 1 (one 137-byte frame), appended raw.
    std::size_t frame = wal::frame_header_size + 1 + key_bytes + value_bytes;
    cases.push_back({fmt::format("diag raw {}B append", frame), "diag_raw_group_1_bytes_append", case_kind::raw_append,
                     frame, 0, true});
    // The same bytes per sync as group 64, appended raw.
    cases.push_back({fmt::format("diag raw {}B append", 64 * frame), "diag_raw_group_64_bytes_append",
                     case_kind::raw_append, 64 * frame, 0, true});
    cases.push_back(
        {"diag raw 4KiB overwrite", "diag_raw_4k_overwrite", case_kind::raw_overwrite, raw_write_bytes, 0, true});
  }

  make_dirs(e, opt.dir);
  g_tmp_dir = make_tmp_dir(opt.dir);
  const std::string date = bench::utc_now();
  const unsigned cpus = std::thread::hardware_concurrency();
  const double est = (opt.seconds + opt.warmup) * static_cast<double>(cases.size()) * opt.rounds;
  fmt::print(stderr, "wal_bench: {} cases x {} rounds x ({}s + {}s warm-up) ~ {:.0f}s in {}\n", cases.size(),
             opt.rounds, opt.seconds, opt.warmup, est, g_tmp_dir);

  std::vector<case_result> results(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) results[i].def = &cases[i];

  for (int round = 0; round < opt.rounds && !g_interrupted; ++round) {
    // Rotate the order each round so no case always runs first or last.
    for (std::size_t k = 0; k < cases.size() && !g_interrupted; ++k) {
      std::size_t i = (k + static_cast<std::size_t>(round)) % cases.size();
      const case_def& c = cases[i];
      std::string where = path_join(g_tmp_dir, fmt::format("r{}-{}", round, c.json_key));
      sample s = c.kind == case_kind::wal ? run_wal(e, c, where, opt.warmup, opt.seconds)
                                          : run_raw(c, where, opt.warmup, opt.seconds);
      if (g_interrupted) break;
      results[i].rounds.push_back(s);
      fmt::print(stderr, "  round {} {:<26} {:>10.1f} syncs/s {:>12.1f} frames/s\n", round + 1, c.name, s.syncs_per_s(),
                 s.frames_per_s());
    }
  }
  if (g_interrupted) {
    fmt::print(stderr, "wal_bench: interrupted\n");
    cleanup();
    return 130;
  }

  for (auto& r : results) {
    std::vector<double> syncs, frames, bps;
    for (const auto& s : r.rounds) {
      syncs.push_back(s.syncs_per_s());
      frames.push_back(s.frames_per_s());
      bps.push_back(static_cast<double>(s.bytes) / static_cast<double>(s.syncs));
    }
    r.syncs_per_s = median(syncs);
    r.frames_per_s = median(frames);
    r.bytes_per_sync = median(bps);
    r.min_syncs = *std::min_element(syncs.begin(), syncs.end());
    r.max_syncs = *std::max_element(syncs.begin(), syncs.end());
  }
  // A shared disk can change speed by an order of magnitude within a run (burst
  // credits running out, a neighbour's flushes); say so rather than let a median
  // over two regimes pass for a measurement.
  constexpr double unstable_spread = 2.0;
  bool unstable = false;
  for (const auto& r : results)
    if (r.max_syncs > unstable_spread * r.min_syncs) unstable = true;
  auto find = [&](std::string_view key) -> const case_result& {
    for (const auto& r : results)
      if (r.def->json_key == key) return r;
    die(fmt::format("no case {}", key));
  };
  const case_result& raw = find("raw_4k");
  const case_result& g1 = find("wal_group_1");
  const case_result& g64 = find("wal_group_64");
  const double g1_vs_raw = g1.syncs_per_s / raw.syncs_per_s;
  const double g64_vs_g1 = g64.frames_per_s / g1.frames_per_s;
  const bool g1_ok = g1_vs_raw >= group1_target;
  const bool g64_ok = g64_vs_g1 >= group64_target;
  // --diag: what the disk allows for the same bytes per sync, without the WAL.
  // group 1 vs raw appends of one frame, and the group-64 ratio that raw appends
  // of 64 frames' bytes vs one frame's bytes would reach.
  std::optional<double> g1_vs_raw_frame, raw_g64_bound;
  if (opt.diag) {
    const case_result& raw1 = find("diag_raw_group_1_bytes_append");
    const case_result& raw64 = find("diag_raw_group_64_bytes_append");
    g1_vs_raw_frame = g1.syncs_per_s / raw1.syncs_per_s;
    raw_g64_bound = 64 * raw64.syncs_per_s / raw1.syncs_per_s;
  }
  // Per-round ratio of group 1 to raw (both measured in the same round).
  std::vector<double> paired;
  for (std::size_t k = 0; k < g1.rounds.size() && k < raw.rounds.size(); ++k)
    paired.push_back(g1.rounds[k].syncs_per_s() / raw.rounds[k].syncs_per_s());

  if (opt.json) {
    std::string out = "{";
    out += fmt::format("\"date\":\"{}\",\"cpus\":{},\"dir\":\"{}\",\"seconds\":{},\"warmup\":{},\"rounds\":{},", date,
                       cpus, json_escape(opt.dir), opt.seconds, opt.warmup, opt.rounds);
    out += fmt::format("\"unstable\":{},", unstable);
    out += fmt::format("\"key_bytes\":{},\"value_bytes\":{},\"raw_write_bytes\":{},\"cases\":{{", key_bytes,
                       value_bytes, raw_write_bytes);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      std::string per_round;
      for (std::size_t k = 0; k < r.rounds.size(); ++k)
        per_round += fmt::format("{}{:.1f}", k ? "," : "", r.rounds[k].syncs_per_s());
      out += fmt::format(
          "{}\"{}\":{{\"diag\":{},\"group\":{},\"syncs_per_s\":{:.1f},\"frames_per_s\":{:.1f},\"bytes_per_sync\":{:.0f}"
          ","
          "\"syncs_per_s_rounds\":[{}]",
          i ? "," : "", r.def->json_key, r.def->diag, r.def->kind == case_kind::wal ? r.def->group : 0, r.syncs_per_s,
          r.frames_per_s, r.bytes_per_sync, per_round);
      if (r.def->kind == case_kind::wal)
        out += fmt::format(",\"frames_vs_group_1\":{:.2f}", r.frames_per_s / g1.frames_per_s);
      else
        out += fmt::format(",\"ops_vs_raw_4k\":{:.3f}", r.syncs_per_s / raw.syncs_per_s);
      out += "}";
    }
    std::string paired_s;
    for (std::size_t k = 0; k < paired.size(); ++k) paired_s += fmt::format("{}{:.3f}", k ? "," : "", paired[k]);
    out += fmt::format(
        "}},\"targets\":{{\"group_1_syncs_vs_raw\":{{\"value\":{:.3f},\"target\":{},\"met\":{},"
        "\"per_round\":[{}]}},\"group_64_frames_vs_group_1\":{{\"value\":{:.2f},\"target\":{},\"met\":{}}}}}}}\n",
        g1_vs_raw, group1_target, g1_ok, paired_s, g64_vs_g1, group64_target, g64_ok);
    if (opt.diag) {
      out.pop_back();  // the newline
      out.pop_back();  // the closing brace
      out += fmt::format(",\"diag\":{{\"group_1_vs_raw_same_bytes\":{:.3f},\"raw_group_64_ratio_bound\":{:.1f}}}}}\n",
                         *g1_vs_raw_frame, *raw_g64_bound);
    }
    fmt::print("{}", out);
  } else {
    fmt::print("wal_bench {}  ({} CPUs, dir {}, {} rounds x {}s per case, median shown)\n", date, cpus, opt.dir,
               opt.rounds, opt.seconds);
    fmt::print("{:<26} {:>10} {:>19} {:>12} {:>8}  {}\n", "case", "syncs/s", "(min..max)", "frames/s", "B/sync",
               "ratio");
    for (const auto& r : results) {
      std::string ratio;
      if (r.def->kind == case_kind::wal) {
        if (r.def->group == 1)
          ratio =
              fmt::format("{:.3f}x raw syncs/s   target >= {}  {}", g1_vs_raw, group1_target, g1_ok ? "PASS" : "MISS");
        else
          ratio = fmt::format("{:.1f}x group-1 frames/s", r.frames_per_s / g1.frames_per_s);
        if (r.def->group == 64) ratio += fmt::format("   target >= {}  {}", group64_target, g64_ok ? "PASS" : "MISS");
      } else if (&r != &raw) {
        ratio = fmt::format("{:.3f}x raw syncs/s", r.syncs_per_s / raw.syncs_per_s);
      }
      std::string spread = fmt::format("({:.0f}..{:.0f})", r.min_syncs, r.max_syncs);
      std::string frames = r.def->kind == case_kind::wal ? fmt::format("{:.0f}", r.frames_per_s) : "-";
      fmt::print("{:<26} {:>10.1f} {:>19} {:>12} {:>8.0f}  {}\n", r.def->name, r.syncs_per_s, spread, frames,
                 r.bytes_per_sync, ratio);
    }
    std::string paired_s;
    for (std::size_t k = 0; k < paired.size(); ++k) paired_s += fmt::format("{}{:.3f}", k ? " " : "", paired[k]);
    fmt::print("group 1 / raw per round (same round): {}\n", paired_s);
    if (unstable)
      fmt::print(
          "warning: the rounds of a case disagree by more than {}x (see min..max): the disk changed "
          "speed during the run, so the ratios are less trustworthy; rerun, or raise --rounds\n",
          unstable_spread);
    if (opt.diag)
      fmt::print(
          "diag: group 1 / raw append of the same {} bytes: {:.3f}x; raw appends of 64 vs 1 frame's "
          "bytes would give the group-64 ratio {:.1f}x (the WAL got {:.1f}x)\n",
          static_cast<std::size_t>(g1.bytes_per_sync), *g1_vs_raw_frame, *raw_g64_bound, g64_vs_g1);
  }

  cleanup();
  return 0;
}
