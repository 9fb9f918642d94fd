// magnetite: the command-line tool (issue 5). Every command opens the database
// in --data (default ./magnetite-data) through the same library a host embeds.
//
//   magnetite put KEY VALUE [--ttl DURATION]    DURATION: 250ms, 10s, 5m, 1h, ...
//   magnetite get KEY                           exit 1 with "not found" when absent
//   magnetite del KEY
//   magnetite scan [--from K] [--to K] [--prefix P] [--limit N] [--reverse]
//   magnetite commit [--json]
//
// Global: --data DIR, --shards N (used when the directory is created; an
// existing database keeps its own count). Every error is one line on stderr and
// a non-zero exit.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>

#include "actors/database.h"
#include "tools/cli_text.h"

using namespace magnetite;

namespace {

// Thrown to main, which prints it and exits 2 after the database closed.
struct failure {
  status why;
};

[[noreturn]] void die(const status& s) { throw failure{s}; }

template <class T>
T must(result<T> r) {
  if (!r) die(r.error());
  return std::move(*r);
}

std::unique_ptr<database> open_db(const std::string& dir, std::size_t shards) {
  if (auto made = env::posix().create_dir(dir); !made) die(made);
  auto recorded = must(database::recorded_shards(dir));
  database_options o;
  o.dir = dir;
  o.shards = recorded ? *recorded : shards;
  return must(database::open(std::move(o)));
}

// What the command line asked for, filled in by CLI11.
struct command_line {
  std::string dir = "./magnetite-data";
  std::size_t shards = 4;
  std::string key, value, ttl;
  std::optional<std::string> from, to, prefix;
  std::optional<std::size_t> limit;
  bool reverse = false;
  bool json = false;
  CLI::App* put = nullptr;
  CLI::App* get = nullptr;
  CLI::App* del = nullptr;
  CLI::App* scan = nullptr;
  CLI::App* commit = nullptr;
};

void declare(CLI::App& app, command_line& c) {
  app.require_subcommand(1);
  app.add_option("--data", c.dir, "data directory")->capture_default_str();
  app.add_option("--shards", c.shards, "shard count for a new database")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c.put = app.add_subcommand("put", "write KEY = VALUE, durably");
  c.put->add_option("KEY", c.key)->required();
  c.put->add_option("VALUE", c.value)->required();
  c.put->add_option("--ttl", c.ttl, "time to live: a number and ns, us, ms, s, m or h");
  c.get = app.add_subcommand("get", "print the value of KEY");
  c.get->add_option("KEY", c.key)->required();
  c.del = app.add_subcommand("del", "delete KEY, durably");
  c.del->add_option("KEY", c.key)->required();
  c.scan = app.add_subcommand("scan", "print live entries as key<TAB>value in key order, escaped");
  c.scan->add_option("--from", c.from, "first key (inclusive)");
  c.scan->add_option("--to", c.to, "end key (exclusive)");
  c.scan->add_option("--prefix", c.prefix, "only keys starting with P");
  c.scan->add_option("--limit", c.limit, "at most N entries");
  c.scan->add_flag("--reverse", c.reverse, "descending key order (reads the whole range first)");
  c.commit = app.add_subcommand("commit", "checkpoint every shard; print the roots");
  c.commit->add_flag("--json", c.json, "one JSON object");
}

void scan(database& db, const command_line& c) {
  auto bounds = must(scan_bounds(c.from, c.to, c.prefix));
  auto cursor = must(db.scan(bounds.first, bounds.second));
  std::vector<std::string> lines;  // --reverse: collected, then printed backwards
  std::size_t printed = 0;
  while (c.reverse || !c.limit || printed < *c.limit) {
    if (!must(cursor.next())) break;
    std::string line = escape_field(cursor.key()) + '\t' + escape_field(cursor.value()) + '\n';
    if (c.reverse) {
      lines.push_back(std::move(line));
      continue;
    }
    std::fputs(line.c_str(), stdout);
    ++printed;
  }
  for (auto it = lines.rbegin(); it != lines.rend() && (!c.limit || printed < *c.limit); ++it, ++printed)
    std::fputs(it->c_str(), stdout);
}

void commit(database& db, const command_line& c) {
  auto r = must(db.commit());
  if (c.json) {
    std::string roots;
    for (std::size_t i = 0; i < r.roots.size(); ++i) roots += fmt::format("{}\"{}\"", i ? "," : "", r.roots[i].to_hex());
    fmt::print("{{\"roots\":[{}],\"combined\":\"{}\"}}\n", roots, r.combined.to_hex());
    return;
  }
  for (std::size_t i = 0; i < r.roots.size(); ++i) fmt::print("shard {:3}  {}\n", i, r.roots[i].to_hex());
  fmt::print("combined   {}\n", r.combined.to_hex());
}

// The command's exit code; failures are thrown.
int execute(const command_line& c) {
  auto db = open_db(c.dir, c.shards);
  if (*c.put) {
    std::optional<std::chrono::nanoseconds> ttl;
    if (!c.ttl.empty()) ttl = must(parse_duration(c.ttl));
    if (auto s = db->put(c.key, c.value, ttl); !s) die(s);
  } else if (*c.get) {
    auto v = must(db->get(c.key));
    if (!v) {
      fmt::print(stderr, "not found\n");
      return 1;
    }
    fmt::print("{}\n", *v);
  } else if (*c.del) {
    if (auto s = db->del(c.key); !s) die(s);
  } else if (*c.scan) {
    scan(*db, c);
  } else if (*c.commit) {
    commit(*db, c);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"magnetite: an embeddable storage engine on CAF; this tool inspects and edits a database"};
  command_line c;
  declare(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "magnetite: {}\n", e.what());
    return 2;
  }
  try {
    return execute(c);
  } catch (const failure& f) {
    fmt::print(stderr, "magnetite: {}\n", f.why.to_string());
    return 2;
  }
}
