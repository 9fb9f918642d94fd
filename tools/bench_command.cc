// `magnetite bench`: finds and runs db_bench, reads its JSON, prints the table.
// The contract is in bench_command.h.
#include "tools/bench_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tools/progress_bar.h"

extern char** environ;

namespace magnetite {
namespace {

namespace fs = std::filesystem;

// Thrown to run_bench_command, which prints "magnetite: <what>" and exits 2.
struct bench_error {
  std::string what;
};

// ---------------------------------------------------------------------------
// A small JSON reader: enough for db_bench's output (objects, arrays, strings,
// numbers, true, false, null), strict about what it accepts.

struct json_value {
  enum class kind { null, boolean, number, string, array, object };
  kind k = kind::null;
  bool b = false;
  double n = 0;
  std::string s;
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> fields;

  const json_value* field(std::string_view name) const {
    for (const auto& [key, value] : fields)
      if (key == name) return &value;
    return nullptr;
  }
};

class json_reader {
 public:
  explicit json_reader(std::string_view text) : t_(text) {}

  // The one value the text holds, or nullopt when it is not exactly that.
  std::optional<json_value> read() {
    json_value v;
    if (!value(v, 0)) return std::nullopt;
    space();
    if (at_ != t_.size()) return std::nullopt;
    return v;
  }

 private:
  void space() {
    while (at_ < t_.size() && (t_[at_] == ' ' || t_[at_] == '\n' || t_[at_] == '\r' || t_[at_] == '\t')) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < t_.size() && t_[at_] == c) return ++at_, true;
    return false;
  }
  bool word(std::string_view w) {
    if (t_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }

  bool value(json_value& v, int depth) {
    if (depth > 32) return false;
    space();
    if (at_ >= t_.size()) return false;
    char c = t_[at_];
    if (c == '{') {
      ++at_;
      v.k = json_value::kind::object;
      if (eat('}')) return true;
      do {
        std::string key;
        space();
        if (!string(key) || !eat(':')) return false;
        json_value item;
        if (!value(item, depth + 1)) return false;
        v.fields.emplace_back(std::move(key), std::move(item));
      } while (eat(','));
      return eat('}');
    }
    if (c == '[') {
      ++at_;
      v.k = json_value::kind::array;
      if (eat(']')) return true;
      do {
        json_value item;
        if (!value(item, depth + 1)) return false;
        v.items.push_back(std::move(item));
      } while (eat(','));
      return eat(']');
    }
    if (c == '"') return v.k = json_value::kind::string, string(v.s);
    if (word("true")) return v.k = json_value::kind::boolean, v.b = true, true;
    if (word("false")) return v.k = json_value::kind::boolean, v.b = false, true;
    if (word("null")) return v.k = json_value::kind::null, true;
    return number(v);
  }

  bool number(json_value& v) {
    std::size_t start = at_;
    auto digits = [&] {
      std::size_t from = at_;
      while (at_ < t_.size() && t_[at_] >= '0' && t_[at_] <= '9') ++at_;
      return at_ > from;
    };
    if (at_ < t_.size() && t_[at_] == '-') ++at_;
    if (!digits()) return false;
    if (at_ < t_.size() && t_[at_] == '.' && (++at_, !digits())) return false;
    if (at_ < t_.size() && (t_[at_] == 'e' || t_[at_] == 'E')) {
      ++at_;
      if (at_ < t_.size() && (t_[at_] == '+' || t_[at_] == '-')) ++at_;
      if (!digits()) return false;
    }
    std::string text(t_.substr(start, at_ - start));
    v.k = json_value::kind::number;
    v.n = std::strtod(text.c_str(), nullptr);
    return std::isfinite(v.n);
  }

  // At a '"': the string, escapes decoded (\uXXXX as UTF-8; no surrogate pairs needed here).
  bool string(std::string& out) {
    if (at_ >= t_.size() || t_[at_] != '"') return false;
    ++at_;
    while (at_ < t_.size()) {
      char c = t_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= t_.size()) return false;
      char e = t_[at_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (at_ + 4 > t_.size()) return false;
          unsigned cp = 0;
          for (int i = 0; i < 4; ++i) {
            char h = t_[at_++];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<unsigned>(h - 'A' + 10);
            else
              return false;
          }
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          }
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  std::string_view t_;
  std::size_t at_ = 0;
};

// ---------------------------------------------------------------------------
// db_bench's rows (the shape is documented at the top of bench/db_bench.cc).

struct bench_row {
  std::string workload, what, unit, better;
  int threads = 1;
  double ours = 0;
  std::optional<std::string> peer, target;
  std::optional<double> peer_value, ratio;
  std::optional<bool> met;
  std::optional<double> ours_rss_mib, peer_rss_mib;
};

struct bench_report {
  std::string date, rocksdb, lmdb;
  double seconds = 0;
  double shards = 0;
  std::optional<double> keys, cache_mib, values, memory_limit_mib;
  std::optional<std::string> order, leaves;
  std::vector<bench_row> rows;
};

[[noreturn]] void not_its_json(std::string_view why) {
  throw bench_error{fmt::format("db_bench printed something other than its JSON ({})", why)};
}

const json_value& need(const json_value& obj, std::string_view name, json_value::kind k) {
  const json_value* v = obj.field(name);
  if (!v || v->k != k)
    not_its_json(fmt::format("no {} \"{}\"", k == json_value::kind::number ? "number" : "field", name));
  return *v;
}

template <class T, class Get>
std::optional<T> maybe(const json_value& obj, std::string_view name, json_value::kind k, Get get) {
  const json_value* v = obj.field(name);
  if (!v || v->k == json_value::kind::null) return std::nullopt;
  if (v->k != k) not_its_json(fmt::format("\"{}\" has the wrong type", name));
  return get(*v);
}

bench_report parse_report(const std::string& text) {
  auto doc = json_reader(text).read();
  if (!doc || doc->k != json_value::kind::object) not_its_json("not one JSON object");
  using K = json_value::kind;
  bench_report r;
  auto text_of = [](const json_value& v) { return v.s; };
  auto number_of = [](const json_value& v) { return v.n; };
  r.date = maybe<std::string>(*doc, "date", K::string, text_of).value_or("");
  r.rocksdb = maybe<std::string>(*doc, "rocksdb", K::string, text_of).value_or("?");
  r.lmdb = maybe<std::string>(*doc, "lmdb", K::string, text_of).value_or("?");
  r.seconds = maybe<double>(*doc, "seconds", K::number, number_of).value_or(0);
  r.shards = maybe<double>(*doc, "shards", K::number, number_of).value_or(0);
  r.keys = maybe<double>(*doc, "keys", K::number, number_of);
  r.cache_mib = maybe<double>(*doc, "cache_mib", K::number, number_of);
  r.order = maybe<std::string>(*doc, "order", K::string, text_of);
  r.values = maybe<double>(*doc, "values", K::number, number_of);
  r.memory_limit_mib = maybe<double>(*doc, "memory_limit_mib", K::number, number_of);
  r.leaves = maybe<std::string>(*doc, "leaves", K::string, text_of);
  for (const auto& item : need(*doc, "rows", K::array).items) {
    if (item.k != K::object) not_its_json("a row that is not an object");
    bench_row row;
    row.workload = need(item, "workload", K::string).s;
    row.what = need(item, "case", K::string).s;
    row.unit = need(item, "unit", K::string).s;
    row.better = need(item, "better", K::string).s;
    row.threads = static_cast<int>(need(item, "threads", K::number).n);
    row.ours = need(item, "ours", K::number).n;
    row.peer = maybe<std::string>(item, "peer", K::string, text_of);
    row.target = maybe<std::string>(item, "target", K::string, text_of);
    row.peer_value = maybe<double>(item, "peer_value", K::number, number_of);
    row.ratio = maybe<double>(item, "ratio", K::number, number_of);
    row.met = maybe<bool>(item, "met", K::boolean, [](const json_value& v) { return v.b; });
    row.ours_rss_mib = maybe<double>(item, "ours_rss_mib", K::number, number_of);
    row.peer_rss_mib = maybe<double>(item, "peer_rss_mib", K::number, number_of);
    r.rows.push_back(std::move(row));
  }
  if (r.rows.empty()) not_its_json("no rows");
  return r;
}

// ---------------------------------------------------------------------------
// The table

std::string figure(double v) {
  double a = std::fabs(v);
  if (a >= 1000) return with_commas(static_cast<std::uint64_t>(std::llround(a)));
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3f}", v);
}

void print_table(const bench_report& r, const std::string& data_dir) {
  fmt::print(
      "magnetite bench: db_bench run of {}, {} s a case, {} shards, {}{}{}{}{}{}RocksDB {}, LMDB {}, files under {}\n",
      r.date.empty() ? "?" : r.date, r.seconds, r.shards,
      r.keys ? fmt::format("{} keys, ", with_commas(static_cast<std::uint64_t>(*r.keys))) : "",
      r.order ? fmt::format("{} order, ", *r.order) : "",
      r.values ? fmt::format("values compressing to {}, ", *r.values) : "",
      r.cache_mib ? fmt::format("{} MiB cache, ", *r.cache_mib) : "",
      r.leaves ? fmt::format("{} leaves, ", *r.leaves) : "",
      r.memory_limit_mib ? fmt::format("gets in {} MiB of memory, ", *r.memory_limit_mib) : "", r.rocksdb, r.lmdb,
      data_dir);
  bool rss =
      std::any_of(r.rows.begin(), r.rows.end(), [](const bench_row& row) { return row.ours_rss_mib.has_value(); });
  const char* head = "{:<9}  {:<40}  {:>7}  {:>10}  {:<13}  {:>10}  {:>9}  {:<12}  {}{}\n";
  fmt::print(fmt::runtime(head), "workload", "case", "threads", "magnetite", "peer", "peer value", "ours/peer", "unit",
             rss ? fmt::format("{:>8}  {:>8}  ", "ours MiB", "peer MiB") : "", "target");
  std::string last;
  bool lower_rows = false, raw_rows = false, lmdb_rows = false, off_rows = false;
  for (const auto& row : r.rows) {
    if (!last.empty() && row.workload != last) fmt::print("\n");
    last = row.workload;
    if (row.peer && row.better == "lower") lower_rows = true;
    if (row.peer == "raw_fdatasync") raw_rows = true;
    if (row.peer == "lmdb") lmdb_rows = true;
    if (row.peer == "reclaim_off") off_rows = true;
    std::string target = row.target ? *row.target : "";
    if (row.target && row.met) target += *row.met ? ": PASS" : ": MISS";
    auto mib = [](const std::optional<double>& v) { return v ? fmt::format("{:.0f}", *v) : std::string("-"); };
    std::string line = fmt::format(
        fmt::runtime(head), row.workload, row.what, row.threads, figure(row.ours), row.peer.value_or("-"),
        row.peer_value ? figure(*row.peer_value) : "-", row.ratio ? fmt::format("{:.2f}x", *row.ratio) : "-", row.unit,
        rss ? fmt::format("{:>8}  {:>8}  ", mib(row.ours_rss_mib), mib(row.peer_rss_mib)) : "", target);
    line.erase(line.find_last_not_of(" \n") + 1);  // no trailing blanks when there is no target
    fmt::print("{}\n", line);
  }
  fmt::print("\nours/peer = magnetite / peer, measured in the same run: above 1 means magnetite is ahead{}.\n",
             lower_rows ? " for rates, below 1 for times and space (unit s, us or x)" : "");
  if (lmdb_rows)
    fmt::print(
        "lmdb: a write is one write transaction with LMDB's default durable commit (its writers queue for "
        "one lock); a get is one read-only transaction, its handle reused per thread.\n");
  if (raw_rows)
    fmt::print(
        "raw_fdatasync: one thread writing 116-byte records into a preallocated file, fdatasync after each "
        "(the disk's limit for one sync per write), beside every thread count.\n");
  if (off_rows)
    fmt::print(
        "reclaim_off: magnetite itself with automatic space reclamation off (max_space_amplification 0), the "
        "same load and writes; magnetite: reclamation on (the default, 1.5).\n");
  if (rss)
    fmt::print(
        "ours MiB, peer MiB: peak resident memory of the process that ran the engine's part of the case "
        "(each engine in its own child process).\n");
  fmt::print(
      "Compare ratios, not absolute figures: a shared disk changes speed from one minute to the next "
      "(docs/benchmarks.md).\n");
}

// ---------------------------------------------------------------------------
// Finding and running db_bench

bool executable_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_db_bench() {
  const std::string not_found =
      "db_bench not found: build the bench targets (ninja -C build) or set MAGNETITE_DB_BENCH";
  if (const char* env = std::getenv("MAGNETITE_DB_BENCH")) {
    if (executable_file(env)) return env;
    throw bench_error{fmt::format("{} (it is '{}', not an executable file)", not_found, env)};
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::string beside = (self.parent_path().parent_path() / "bench" / "db_bench").string();
    if (executable_file(beside)) return beside;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string_view p = path;
    while (true) {
      auto colon = p.find(':');
      std::string dir(p.substr(0, colon));
      std::string candidate = (dir.empty() ? std::string(".") : dir) + "/db_bench";
      if (executable_file(candidate)) return candidate;
      if (colon == std::string_view::npos) break;
      p.remove_prefix(colon + 1);
    }
  }
  throw bench_error{not_found};
}

// Creates `dir` and its missing parents; returns the ones it created, outermost first.
std::vector<fs::path> make_dirs(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::vector<fs::path> created(missing.rbegin(), missing.rend());
  if (!fs::create_directories(dir, ec) && ec)
    throw bench_error{fmt::format("cannot create {}: {}", dir.string(), ec.message())};
  return created;
}

// What a db_bench run left: its stdout, and how it ended.
struct child_outcome {
  std::string out;
  int status = 0;  // as from waitpid
};

child_outcome run_child(const std::string& program, const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw bench_error{fmt::format("pipe: {}", std::strerror(errno))};
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // Ignore interrupts here while the child runs; the child gets the defaults back.
  struct sigaction ignore {
  }, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  auto restore = [&] {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
  };

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    restore();
    throw bench_error{fmt::format("cannot start {}: {}", program, std::strerror(rc))};
  }
  child_outcome outcome;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0)
      outcome.out.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  while (::waitpid(pid, &outcome.status, 0) < 0 && errno == EINTR) {
  }
  restore();
  return outcome;
}

int run(const bench_command_options& o) {
  const std::vector<std::string> workloads = {"writes", "gets", "restart", "load", "overwrite", "reclaim", "all"};
  if (std::find(workloads.begin(), workloads.end(), o.workload) == workloads.end())
    throw bench_error{fmt::format(
        "unknown workload '{}': choose writes, gets, restart, load, overwrite, reclaim or all", o.workload)};
  if (o.seconds && !(*o.seconds > 0 && *o.seconds <= 3600))
    throw bench_error{fmt::format("--seconds wants a number above 0 and at most 3600, got {}", *o.seconds)};
  if (o.keys && !(*o.keys >= 1 && *o.keys <= 10'000'000'000ULL))
    throw bench_error{fmt::format("--keys wants 1 to 10000000000, got {}", *o.keys)};
  if (o.rounds && !(*o.rounds >= 1 && *o.rounds <= 1000))
    throw bench_error{fmt::format("--rounds wants 1 to 1000, got {}", *o.rounds)};
  // db_bench runs 2 shards, and the database wants at least 1 MiB a shard.
  if (o.cache_mib && !(*o.cache_mib >= 2 && *o.cache_mib <= (std::size_t{1} << 20)))
    throw bench_error{fmt::format("bench wants --cache-mib from 2 to 1048576, got {}", *o.cache_mib)};
  if (o.order && *o.order != "random" && *o.order != "sequential")
    throw bench_error{fmt::format("unknown --order '{}': choose random or sequential", *o.order)};
  if (o.values && !(*o.values > 0 && *o.values <= 1))
    throw bench_error{fmt::format("--values wants a compression ratio above 0 and at most 1, got {}", *o.values)};
  if (o.memory_limit_mib && (*o.memory_limit_mib < 64 || *o.memory_limit_mib > (std::size_t{1} << 20)))
    throw bench_error{fmt::format("--memory-limit-mib wants 64 to 1048576, got {}", *o.memory_limit_mib)};
  if (o.leaf_form && *o.leaf_form != "lz4" && *o.leaf_form != "zstd" && *o.leaf_form != "searchable")
    throw bench_error{fmt::format("unknown --leaf-form '{}': choose lz4, zstd or searchable", *o.leaf_form)};
  std::string program = find_db_bench();

  fs::path data = o.data_dir.empty() ? fs::path(".") : fs::path(o.data_dir);
  std::vector<fs::path> created = make_dirs(data);
  std::string scratch = (data / "bench-XXXXXX").string();
  if (!::mkdtemp(scratch.data())) {
    int e = errno;
    std::error_code ec;
    for (auto it = created.rbegin(); it != created.rend() && fs::remove(*it, ec); ++it) {
    }
    throw bench_error{fmt::format("cannot create a directory in {}: {}", data.string(), std::strerror(e))};
  }
  std::vector<std::string> args = {"--dir", scratch, "--json"};
  if (o.workload != "all") args.insert(args.end(), {"--only", o.workload});
  if (o.seconds) args.insert(args.end(), {"--seconds", fmt::format("{}", *o.seconds)});
  if (o.keys) args.insert(args.end(), {"--keys", fmt::format("{}", *o.keys)});
  if (o.rounds) args.insert(args.end(), {"--rounds", fmt::format("{}", *o.rounds)});
  if (o.cache_mib) args.insert(args.end(), {"--cache-mib", fmt::format("{}", *o.cache_mib)});
  if (o.order) args.insert(args.end(), {"--order", *o.order});
  if (o.values) args.insert(args.end(), {"--values", fmt::format("{}", *o.values)});
  if (o.memory_limit_mib) args.insert(args.end(), {"--memory-limit-mib", fmt::format("{}", *o.memory_limit_mib)});
  if (o.leaf_form) args.insert(args.end(), {"--leaf-form", *o.leaf_form});

  child_outcome child;
  try {
    child = run_child(program, args);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
    for (auto it = created.rbegin(); it != created.rend() && fs::remove(*it, ec); ++it) {
    }
    throw;
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  for (auto it = created.rbegin(); it != created.rend() && fs::remove(*it, ec); ++it) {
  }

  if (WIFSIGNALED(child.status))
    throw bench_error{fmt::format("db_bench was stopped by signal {} ({})", WTERMSIG(child.status),
                                  strsignal(WTERMSIG(child.status)))};
  if (!WIFEXITED(child.status) || WEXITSTATUS(child.status) != 0)
    throw bench_error{fmt::format("db_bench failed (exit status {}); its messages are above",
                                  WIFEXITED(child.status) ? WEXITSTATUS(child.status) : -1)};
  bench_report report = parse_report(child.out);
  if (o.json) {
    fmt::print("{}", child.out);
    if (child.out.empty() || child.out.back() != '\n') fmt::print("\n");
  } else {
    print_table(report, data.string());
  }
  return 0;
}

}  // namespace

int run_bench_command(const bench_command_options& options) {
  try {
    return run(options);
  } catch (const bench_error& e) {
    fmt::print(stderr, "magnetite: {}\n", e.what);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "magnetite: bench: {}\n", e.what());
    return 2;
  }
}

}  // namespace magnetite
