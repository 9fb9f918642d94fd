// The magnetite tool: escaping, durations and scan bounds, then the built
// binary (build/tools/magnetite, found beside this test's directory) run in a
// fresh data directory as a user would run it.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/database_core.h"
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

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(text.substr(at, nl - at));
  return out;
}

// The value of "name": in a flat JSON object the tool printed (numbers and strings).
std::string json_field(const std::string& json, const std::string& name) {
  auto at = json.find("\"" + name + "\":");
  if (at == std::string::npos) return "<missing " + name + ">";
  at += name.size() + 3;
  auto end = json.find_first_of(",}", at);
  std::string v = json.substr(at, end - at);
  if (!v.empty() && v.front() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

// The roots `commit --json` printed: the shards', then the combined one last.
std::vector<std::string> roots_of(const std::string& commit_json) {
  std::vector<std::string> out;
  for (std::size_t at = 0; (at = commit_json.find('"', at)) != std::string::npos;) {
    auto end = commit_json.find('"', at + 1);
    std::string s = commit_json.substr(at + 1, end - at - 1);
    if (s.size() == 32) out.push_back(s);
    at = end + 1;
  }
  return out;
}

// The largest pack file under a shard's node store.
std::string largest_pack(const std::string& shard_dir) {
  std::string best;
  std::uintmax_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(shard_dir + "/nodes"))
    if (e.path().extension() == ".pack" && e.file_size() > size) {
      size = e.file_size();
      best = e.path().string();
    }
  return best;
}

}  // namespace

TEST_CASE("cli: load, commit, diff, stats, gc and verify, with damage found and named") {
  testing::temp_dir d("cli-ops");
  std::string data = "--data " + d.path() + "/db --shards 3";
  auto l = run(data + " load --keys 2000 --writers 8 --value-size 40 --json");
  REQUIRE(l.exit_code == 0);
  CHECK(json_field(l.out, "keys") == "2000");
  CHECK(json_field(l.out, "durable") == "true");
  auto fsyncs = std::stoull(json_field(l.out, "log_fsyncs"));
  CHECK(fsyncs > 0);
  CHECK(fsyncs <= 2000);  // every acknowledged write was fsynced, some shared one
  auto scanned = lines_of(run(data + " scan").out);
  REQUIRE(scanned.size() == 2000);
  std::string old_value_of_1_1;
  for (const auto& line : scanned)
    if (line.starts_with("1-1\t")) old_value_of_1_1 = line.substr(4);
  CHECK(old_value_of_1_1.size() == 40);

  auto a = run(data + " commit --json");
  REQUIRE(a.exit_code == 0);
  auto roots_a = roots_of(a.out);
  REQUIRE(roots_a.size() == 4);
  REQUIRE(run(data + " put x 1").exit_code == 0);
  REQUIRE(run(data + " del 1-0").exit_code == 0);
  REQUIRE(run(data + " put 1-1 changed").exit_code == 0);
  auto b = run(data + " commit --json");
  REQUIRE(b.exit_code == 0);
  auto roots_b = roots_of(b.out);
  REQUIRE(roots_b.size() == 4);

  std::string expected_diff = "- 1-0\t" + scanned[0].substr(4) + "\n~ 1-1\t" + old_value_of_1_1 +
                              "\tchanged\n+ x\t1\n1 added, 1 removed, 1 changed\n";
  REQUIRE(scanned[0].starts_with("1-0\t"));
  auto diff = run(data + " diff " + roots_a[3] + " " + roots_b[3]);
  CHECK(diff.exit_code == 0);
  CHECK(diff.out == expected_diff);
  CHECK(run(data + " diff " + roots_b[3] + " " + roots_a[3]).out.ends_with("1 added, 1 removed, 1 changed\n"));
  // Within one shard: the shard that holds x sees it added.
  bool seen_in_a_shard = false;
  for (int i = 0; i < 3; ++i) {
    auto one = run(data + " diff " + roots_a[i] + " " + roots_b[i]);
    CHECK(one.exit_code == 0);
    seen_in_a_shard |= one.out.find("+ x\t1\n") != std::string::npos;
  }
  CHECK(seen_in_a_shard);
  auto bad_root = run(data + " diff nothex " + roots_b[3]);
  CHECK(bad_root.exit_code == 2);
  CHECK(bad_root.err.find("neither a combined root") != std::string::npos);
  auto unknown = run(data + " diff " + std::string(32, '0') + " " + std::string(32, '1'));
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("no shard holds") != std::string::npos);
  auto mixed = run(data + " diff " + roots_a[0] + " " + roots_b[3]);
  CHECK(mixed.exit_code == 2);

  auto st = run(data + " stats --json");
  REQUIRE(st.exit_code == 0);
  auto total = st.out.substr(st.out.find("\"total\":"));
  CHECK(json_field(total, "keys") == "2000");  // 2000 + x - 1-0
  CHECK(json_field(st.out, "last_commit") == roots_b[3]);
  for (int i = 0; i < 3; ++i) CHECK(st.out.find("\"root\":\"" + roots_b[i] + "\"") != std::string::npos);
  // Each of the 3 shards has an even share of the admission budget.
  auto admission = total.substr(total.find("\"admission\":"));
  CHECK(json_field(admission, "max_bytes") == std::to_string(3 * (database_options{}.admission_bytes / 3)));
  CHECK(json_field(admission, "max_requests") == std::to_string(3 * (database_options{}.admission_requests / 3)));
  CHECK(json_field(admission, "requests") == "0");
  auto text = run(data + " stats");
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("total") != std::string::npos);
  CHECK(text.out.find("writes per group") != std::string::npos);
  CHECK(text.out.find("admission: 0 writes admitted") != std::string::npos);

  // Each process that wrote checkpointed at its close: those roots are no
  // checkpoint of `commit`'s, so their nodes are garbage.
  auto g = run(data + " gc --json");
  REQUIRE(g.exit_code == 0);
  CHECK(std::stoull(json_field(g.out, "bytes_reclaimed")) > 0);
  CHECK(json_field(run(data + " gc --json").out, "bytes_reclaimed") == "0");
  CHECK(run(data + " diff " + roots_a[3] + " " + roots_b[3]).out == expected_diff);  // retained through gc
  CHECK(lines_of(run(data + " scan").out).size() == 2000);

  auto ok = run(data + " verify");
  CHECK(ok.exit_code == 0);
  CHECK(lines_of(ok.out).back().starts_with("ok: 3 shards, 2 retained checkpoints and 0 named versions"));

  // One flipped bit in a node's record: verify names the shard, the pack and the offset.
  std::string pack = largest_pack(d.path() + "/db/shard-001");
  REQUIRE_FALSE(pack.empty());
  {
    std::FILE* f = std::fopen(pack.c_str(), "r+b");
    REQUIRE(f);
    long middle = static_cast<long>(std::filesystem::file_size(pack) / 2);
    std::fseek(f, middle, SEEK_SET);
    int byte = std::fgetc(f);
    std::fseek(f, middle, SEEK_SET);
    std::fputc(byte ^ 0x10, f);
    std::fclose(f);
  }
  auto damaged = run(data + " verify");
  CHECK(damaged.exit_code == 1);
  CHECK(damaged.out.find("damage: shard 1: node ") != std::string::npos);
  CHECK(damaged.out.find(pack + ", offset ") != std::string::npos);
}

TEST_CASE("cli: load --ack-log under SIGKILL: every acknowledged line is in the database with its value") {
  testing::temp_dir d("cli-kill");
  std::string dir = d.path() + "/db";
  std::mt19937_64 rng(20261130);
  std::map<std::string, std::string> acked;
  for (int iter = 0; iter < 3; ++iter) {
    CAPTURE(iter);
    std::string ack_log = d.path() + fmt::format("/acks-{}", iter);
    std::string seed = std::to_string(iter + 1);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::string tool = tool_path();
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execl(tool.c_str(), tool.c_str(), "--data", dir.c_str(), "--shards", "3", "load", "--keys", "1000000",
              "--writers", "16", "--seed", seed.c_str(), "--ack-log", ack_log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Kill once writes are being acknowledged, at a random moment after that.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::error_code ec;
    auto acknowledged = [&] {
      auto n = std::filesystem::file_size(ack_log, ec);
      return !ec && n > 0;
    };
    while (!acknowledged() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    REQUIRE(WIFSIGNALED(wstatus));  // it was still loading: the kill is what ended it
    auto text = read_whole_file(env::posix(), ack_log);
    REQUIRE(text.is_ok());
    auto lines = lines_of(*text);  // a line cut by the kill has no newline and is not counted
    REQUIRE_FALSE(lines.empty());
    for (const auto& line : lines) {
      auto tab = line.find('\t');
      REQUIRE(tab != std::string::npos);
      acked[line.substr(0, tab)] = line.substr(tab + 1);
    }
  }
  // Every key ever acknowledged, with the value acknowledged (keys are unique
  // per seed, so the last value is the only one).
  auto scanned = lines_of(run("--data " + dir + " scan").out);
  std::map<std::string, std::string> stored;
  for (const auto& line : scanned) {
    auto tab = line.find('\t');
    stored[line.substr(0, tab)] = line.substr(tab + 1);
  }
  std::size_t missing = 0;
  for (const auto& [key, value] : acked) {
    auto it = stored.find(key);
    if (it == stored.end() || it->second != value) ++missing;
  }
  CHECK(acked.size() > 0);
  CHECK(missing == 0);
  CHECK(run("--data " + dir + " verify").exit_code == 0);
}

TEST_CASE("cli: get and scan --at read a retained version; one that is not retained is refused by name") {
  testing::temp_dir d("cli-at");
  std::string data = "--data " + d.path() + "/db --shards 2";
  REQUIRE(run(data + " put a 1").exit_code == 0);
  REQUIRE(run(data + " put b 1").exit_code == 0);
  auto first = roots_of(run(data + " commit --json").out);
  REQUIRE(first.size() == 3);  // two shards' roots, then the combined one
  REQUIRE(run(data + " put a 2").exit_code == 0);
  REQUIRE(run(data + " del b").exit_code == 0);
  REQUIRE(run(data + " put c 2").exit_code == 0);
  auto second = roots_of(run(data + " commit --json").out);
  REQUIRE(second.size() == 3);
  REQUIRE(run(data + " put a 3").exit_code == 0);  // in no version
  const std::string v1 = first.back(), v2 = second.back();

  CHECK(run(data + " get a --at " + v1).out == "1\n");
  CHECK(run(data + " get a --at " + v2).out == "2\n");
  CHECK(run(data + " get a").out == "3\n");
  auto gone = run(data + " get b --at " + v2);
  CHECK(gone.exit_code == 1);
  CHECK(gone.err == "not found\n");
  CHECK(run(data + " scan --at " + v1).out == "a\t1\nb\t1\n");
  CHECK(run(data + " scan --at " + v2).out == "a\t2\nc\t2\n");
  CHECK(run(data + " scan --at " + v2 + " --reverse --limit 1").out == "c\t2\n");

  auto unknown = run(data + " get a --at " + std::string(32, '0'));
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("not the combined root of a retained checkpoint") != std::string::npos);
  auto shard_root = run(data + " get a --at " + first[0]);  // a shard's root is not a version
  CHECK(shard_root.exit_code == 2);
  auto bad = run(data + " scan --at nothex");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("neither a combined root") != std::string::npos);
  auto cluster = run(data + " get a --at " + v1 + " --cluster " + d.path() + "/no-such-file");
  CHECK(cluster.exit_code == 2);
  CHECK(cluster.err.find("--at reads a data directory") != std::string::npos);
  CHECK(run(data + " get a").out == "3\n");  // nothing changed
}

TEST_CASE("cli: tag names a version that outlives retention and gc; tags, stats and verify show it; untag") {
  testing::temp_dir d("cli-tag");
  std::string data = "--data " + d.path() + "/db --shards 2";
  REQUIRE(run(data + " put a 1").exit_code == 0);
  REQUIRE(run(data + " put b 1").exit_code == 0);
  auto tagged = run(data + " tag release-1");  // commits, then names that checkpoint
  REQUIRE(tagged.exit_code == 0);
  REQUIRE(tagged.out.starts_with("tagged release-1 = "));
  const std::string v1 = tagged.out.substr(std::string("tagged release-1 = ").size(), 32);
  CHECK(tagged.out == "tagged release-1 = " + v1 + "\n");
  for (int round = 2; round <= 4; ++round) {  // more commits than are retained
    REQUIRE(run(data + " put a " + std::to_string(round)).exit_code == 0);
    REQUIRE(run(data + " commit").exit_code == 0);
  }
  REQUIRE(run(data + " gc").exit_code == 0);
  CHECK(run(data + " get a --at release-1").out == "1\n");
  CHECK(run(data + " get a --at " + v1).out == "1\n");
  CHECK(run(data + " scan --at release-1").out == "a\t1\nb\t1\n");
  CHECK(run(data + " get a").out == "4\n");
  auto last = roots_of(run(data + " commit --json").out).back();
  CHECK(run(data + " diff release-1 " + last).out == "~ a\t1\t4\n0 added, 0 removed, 1 changed\n");
  CHECK(run(data + " tag also-1 --at release-1").out == "tagged also-1 = " + v1 + "\n");
  CHECK(run(data + " tags").out == "also-1\t" + v1 + "\nrelease-1\t" + v1 + "\n");
  CHECK(run(data + " tags --json").out == "{\"tags\":[{\"name\":\"also-1\",\"version\":\"" + v1 +
                                              "\"},{\"name\":\"release-1\",\"version\":\"" + v1 + "\"}]}\n");
  CHECK(run(data + " stats --json").out.find("\"tags\":[{\"name\":\"also-1\"") != std::string::npos);
  CHECK(run(data + " stats").out.find("  release-1  " + v1 + "\n") != std::string::npos);
  auto verified = run(data + " verify");
  CHECK(verified.exit_code == 0);
  CHECK(verified.out.find("and 2 named versions, no damage") != std::string::npos);

  auto taken = run(data + " tag release-1 --at " + last);
  CHECK(taken.exit_code == 2);
  CHECK(taken.err.find("already names version " + v1) != std::string::npos);
  auto bad = run(data + " tag a/b");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("only letters, digits") != std::string::npos);
  CHECK(run(data + " untag release-1").out == "untagged release-1\n");
  CHECK(run(data + " get a --at " + v1).out == "1\n");  // also-1 still keeps it
  auto again = run(data + " untag release-1");
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("no tag is named") != std::string::npos);
  REQUIRE(run(data + " untag also-1").exit_code == 0);
  CHECK(run(data + " tags").out.empty());
  auto gone = run(data + " get a --at " + v1);
  CHECK(gone.exit_code == 2);
  CHECK(gone.err.find("not the combined root of a retained checkpoint") != std::string::npos);
}

TEST_CASE("cli: backup ships only what changed, backups lists, verify checks a backup, restore makes a database") {
  testing::temp_dir d("cli-backup");
  std::string data = "--data " + d.path() + "/db --shards 2";
  const std::string dest = d.path() + "/backup";
  REQUIRE(run(data + " load --keys 5000").exit_code == 0);
  auto first = run(data + " backup " + dest);
  REQUIRE(first.exit_code == 0);
  CHECK(first.out.find("it holds 1 versions") != std::string::npos);
  REQUIRE(run(data + " put one-more key").exit_code == 0);
  REQUIRE(run(data + " tag release-1").exit_code == 0);
  auto second = run(data + " backup " + dest + " --at release-1 --rate 64");
  REQUIRE(second.exit_code == 0);
  CHECK(second.out.find("(release-1)") != std::string::npos);
  CHECK(second.out.find("it holds 2 versions") != std::string::npos);
  for (const char* bad : {"-1", "fast", "2000000"}) {
    auto refused = run(data + " backup " + d.path() + "/other --rate " + bad);
    CHECK(refused.exit_code == 2);
    CHECK_MESSAGE(refused.err.find("--rate") != std::string::npos, refused.err);
    CHECK_FALSE(std::filesystem::exists(d.path() + "/other"));
  }
  auto listed = lines_of(run("backups " + dest).out);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].find("\t-\t") == 32);
  CHECK(listed[1].find("\trelease-1\t") == 32);
  auto verified = run("--data " + dest + " verify");
  CHECK(verified.exit_code == 0);
  CHECK(verified.out.find("a backup of 2 versions") != std::string::npos);

  REQUIRE(run("restore " + dest + " " + d.path() + "/newest").exit_code == 0);
  CHECK(run("--data " + d.path() + "/newest get one-more").out == "key\n");
  REQUIRE(run("restore " + dest + " " + d.path() + "/oldest --at " + listed[0].substr(0, 32)).exit_code == 0);
  CHECK(run("--data " + d.path() + "/oldest get one-more").exit_code == 1);
  CHECK(run("--data " + d.path() + "/oldest scan").out == run(data + " scan --at " + listed[0].substr(0, 32)).out);
  auto exists = run("restore " + dest + " " + d.path() + "/newest");
  CHECK(exists.exit_code == 2);
  CHECK(exists.err.find("exists") != std::string::npos);

  // A flipped byte in a pack: verify names the file and exits 1.
  std::string pack;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dest))
    if (e.path().extension() == ".pack") pack = e.path().string();
  REQUIRE_FALSE(pack.empty());
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(pack) / 2);
    f.seekg(middle);
    char c = 0;
    f.get(c);
    f.seekp(middle);
    f.put(static_cast<char>(c ^ 0x10));
  }
  auto damaged = run("--data " + dest + " verify");
  CHECK(damaged.exit_code == 1);
  CHECK(damaged.out.find("damage: " + pack) != std::string::npos);
}

TEST_CASE("cli: the demo runs its whole tour, and its own checks pass") {
  testing::temp_dir d("cli-demo");
  auto r = run("--data " + d.path() + "/db demo");
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("Read back all 60,000 acknowledged keys: 0 lost.") != std::string::npos);
  CHECK(r.out.find("TTL keys deleted by timer                    200 of 200") != std::string::npos);
  CHECK(r.out.find("Its supervisor restarted it 1 time(s)") != std::string::npos);
  CHECK(r.out.find("5 keys added, 3 deleted and 2 changed") != std::string::npos);
  CHECK(r.out.find("no damage") != std::string::npos);
  // A second run on the same directory works (its keys have their own
  // prefix), with --data after the command this time.
  auto again = run("demo --data " + d.path() + "/db");
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("shards in " + d.path() + "/db,") != std::string::npos);
}

TEST_CASE("cli: the new commands' errors are one line and a non-zero exit") {
  testing::temp_dir d("cli-errors");
  std::string data = "--data " + d.path() + "/db";
  for (const char* bad : {" load", " load --keys 0", " load --keys 10 --durable --no-sync",
                          " load --keys 10 --writers 0", " diff onlyone", " stats --frob", " verify extra"}) {
    auto r = run(data + bad);
    CAPTURE(bad);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  auto unwritable = run(data + " load --keys 10 --ack-log /nonexistent-dir/acks");
  CHECK(unwritable.exit_code == 2);
  CHECK(unwritable.err.find("/nonexistent-dir/acks") != std::string::npos);
  database_options o;
  o.dir = d.path() + "/db";
  auto held = database::open(o);
  REQUIRE(held.is_ok());
  for (const char* cmd : {" verify", " gc", " stats", " load --keys 5", " demo"}) {
    auto busy = run(data + cmd);
    CAPTURE(cmd);
    CHECK(busy.exit_code == 2);
    CHECK(busy.err.find("in use") != std::string::npos);
  }
}

TEST_CASE("cli: a corrupt log is one error naming the segment and offset; verify reports it as damage") {
  testing::temp_dir d("cli-corrupt");
  std::string dir = d.path() + "/db";
  // A child writes and exits without its closing checkpoint, as a crash would:
  // the writes are only in the logs.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    database_options o;
    o.dir = dir;
    o.shards = 1;
    auto db = database::open(o);
    if (!db) ::_exit(3);
    for (int i = 0; i < 200; ++i)
      if (!(*db)->put(fmt::format("k{:03}", i), std::string(100, 'v'))) ::_exit(4);
    ::_exit(0);
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  REQUIRE(WEXITSTATUS(wstatus) == 0);
  std::string segment;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/shard-000/wal"))
    if (e.path().extension() == ".wal") segment = e.path().string();
  REQUIRE_FALSE(segment.empty());
  {
    std::FILE* f = std::fopen(segment.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, 2000, SEEK_SET);  // inside an early frame, many intact frames after it
    int byte = std::fgetc(f);
    std::fseek(f, 2000, SEEK_SET);
    std::fputc(byte ^ 0x01, f);
    std::fclose(f);
  }
  auto get = run("--data " + dir + " get k001");
  CHECK(get.exit_code == 2);
  CHECK(std::count(get.err.begin(), get.err.end(), '\n') == 1);
  CHECK(get.err.find("corruption") != std::string::npos);
  CHECK(get.err.find(segment + ", offset ") != std::string::npos);
  auto v = run("--data " + dir + " verify");
  INFO("verify printed:\n" << v.out << v.err);
  CHECK(v.exit_code == 1);
  // One wording, whichever answer the open heard first: the failing shard's
  // own or the sentinel's that replaced it.
  CHECK(v.out.find("damage: shard 0 was stopped: its files cannot be opened: WAL segment " + segment + ", offset ") !=
        std::string::npos);
  // Nothing was modified: the damage is still there to be examined.
  CHECK(run("--data " + dir + " get k001").exit_code == 2);
}

TEST_CASE("cli: an ack log that cannot take a whole line is cut back to its last whole line, and load stops") {
  testing::temp_dir d("cli-ackfull");
  std::string dir = d.path() + "/db", acks = d.path() + "/acks";
  // RLIMIT_FSIZE stands in for a full disk: the ack log, which grows fastest,
  // meets it first, with a write(2) that stores only part of its line.
  int rc =
      std::system(fmt::format("bash -c 'ulimit -f 8; trap \"\" XFSZ; exec {} --data {} --shards 4 load --keys 100000 "
                              "--writers 8 --ack-log {}' >/dev/null 2>{}/err",
                              tool_path(), dir, acks, d.path())
                      .c_str());
  REQUIRE(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 2);
  auto err = read_whole_file(env::posix(), d.path() + "/err").value();
  CHECK(err.find("writing the ack log") != std::string::npos);
  auto text = read_whole_file(env::posix(), acks).value();
  REQUIRE_FALSE(text.empty());
  CHECK(text.size() <= 8192);
  CHECK(text.back() == '\n');  // no fragment left for anyone to complete
  std::map<std::string, std::string> stored;
  for (const auto& line : lines_of(run("--data " + dir + " scan").out)) {
    auto tab = line.find('\t');
    stored[line.substr(0, tab)] = line.substr(tab + 1);
  }
  std::size_t missing = 0, lines = 0;
  for (const auto& line : lines_of(text)) {
    ++lines;
    auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    auto it = stored.find(line.substr(0, tab));
    if (it == stored.end() || it->second != line.substr(tab + 1)) ++missing;
  }
  CHECK(lines > 10);
  CHECK(missing == 0);
}

TEST_CASE("cli: commands that read never create a database where there is none") {
  testing::temp_dir d("cli-typo");
  std::string dir = d.path() + "/typo";
  for (const char* cmd : {" get x", " scan", " stats", " verify", " gc", " commit",
                          " diff 00000000000000000000000000000000 11111111111111111111111111111111"}) {
    auto r = run("--data " + dir + cmd);
    CAPTURE(cmd);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("no database in " + dir) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir));
  }
}

TEST_CASE("cli: load draws a progress bar on a terminal and none on a pipe") {
  testing::temp_dir d("cli-tty");
  // script(1) (util-linux, essential on Debian) runs the tool on a pseudo-terminal.
  std::string typescript = d.path() + "/typescript";
  int rc = std::system(fmt::format("script -qec '{} --data {}/db load --keys 2000 --writers 4' {} >/dev/null 2>&1",
                                   tool_path(), d.path(), typescript)
                           .c_str());
  REQUIRE(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 0);
  auto tty = read_whole_file(env::posix(), typescript).value();
  CHECK(tty.find("\r  [") != std::string::npos);
  CHECK(tty.find("] 100%") != std::string::npos);
  CHECK(tty.find("2,000/2,000") != std::string::npos);
  auto piped = run("--data " + d.path() + "/db load --keys 100 --writers 4 --seed 2");
  CHECK(piped.exit_code == 0);
  CHECK(piped.err.empty());
  CHECK(piped.out.find('\r') == std::string::npos);
  CHECK(piped.out.starts_with("100 keys from 4 writers"));
}

TEST_CASE("cli: load --value-seed rewrites the keys of --seed with new values") {
  testing::temp_dir d("cli-value-seed");
  std::string data = "--data " + d.path() + "/db --shards 2";
  REQUIRE(run(data + " load --keys 300 --seed 7 --no-sync").exit_code == 0);
  auto first = lines_of(run(data + " scan").out);
  REQUIRE(first.size() == 300);

  REQUIRE(run(data + " load --keys 300 --seed 7 --value-seed 8 --no-sync").exit_code == 0);
  auto second = lines_of(run(data + " scan").out);
  REQUIRE(second.size() == 300);  // the same keys rewritten, none added
  auto stats = run(data + " stats --json").out;
  CHECK(json_field(stats.substr(stats.find("\"total\"")), "keys") == "300");
  for (std::size_t i = 0; i < first.size(); ++i) {
    auto tab = first[i].find('\t');
    CAPTURE(first[i]);
    CAPTURE(second[i]);
    REQUIRE(tab != std::string::npos);
    CHECK(second[i].substr(0, tab + 1) == first[i].substr(0, tab + 1));  // the same key, in the same place
    CHECK(second[i].substr(tab + 1) != first[i].substr(tab + 1));        // a new value
    CHECK(second[i].size() == first[i].size());
  }
  // Without --value-seed the values come from --seed: the first load's again.
  REQUIRE(run(data + " load --keys 300 --seed 7 --no-sync").exit_code == 0);
  CHECK(lines_of(run(data + " scan").out) == first);

  auto negative = run(data + " load --keys 3 --value-seed -1");
  CHECK(negative.exit_code == 2);
  CHECK(std::count(negative.err.begin(), negative.err.end(), '\n') == 1);
}

TEST_CASE("cli: the global options go before or after the command; an unknown command is named; --version") {
  testing::temp_dir d("cli-order");
  std::string dir = d.path() + "/db";
  REQUIRE(run("put --data " + dir + " --shards 3 k v").exit_code == 0);
  CHECK(database::recorded_shards(dir).value() == std::optional<std::size_t>(3));
  auto after = run("get --data " + dir + " k");
  CHECK(after.exit_code == 0);
  CHECK(after.out == "v\n");
  CHECK(run("get k --data=" + dir).out == "v\n");  // after the key, and in the = form
  CHECK(run("--data " + dir + " get k").out == "v\n");
  CHECK(run("--data " + dir + " put k2 w --shards 5").exit_code == 0);  // an existing database keeps 3
  CHECK(database::recorded_shards(dir).value() == std::optional<std::size_t>(3));
  CHECK(run("scan --prefix k --data " + dir).out == "k\tv\nk2\tw\n");
  // --cache-mib after the command reaches the database: 1 MiB is too little for 3 shards.
  auto small = run("get k --data " + dir + " --cache-mib 1");
  CHECK(small.exit_code == 2);
  CHECK(small.err.find("memory_budget") != std::string::npos);
  // A command's own option is still its own.
  CHECK(run("--data " + dir + " --prefix k scan").exit_code == 2);

  for (const std::string& args : {"--data " + dir + " frob", "frob --data " + dir + " k", std::string("frob")}) {
    auto unknown = run(args);
    CAPTURE(args);
    CHECK(unknown.exit_code == 2);
    CHECK(unknown.out.empty());
    CHECK(unknown.err == "magnetite: unknown command 'frob' (magnetite --help lists them)\n");
  }
  auto none = run("--data " + dir);
  CHECK(none.exit_code == 2);
  CHECK(none.err == "magnetite: a command is required (magnetite --help lists them)\n");

  for (const std::string& args :
       {std::string("--version"), "--data " + dir + " --version", std::string("get --version")}) {
    auto version = run(args);
    CAPTURE(args);
    CHECK(version.exit_code == 0);
    CHECK(version.out == "magnetite " MAGNETITE_VERSION "\n");
    CHECK(version.err.empty());
  }
}

TEST_CASE("cli: a database made without --shards gets database_options::default_shards(), one a core") {
  testing::temp_dir d("cli-shards");
  std::string dir = d.path() + "/db";
  REQUIRE(run("--data " + dir + " put k v").exit_code == 0);
  CHECK(database::recorded_shards(dir).value() == std::optional<std::size_t>(database_options::default_shards()));
  auto commit = run("--data " + dir + " commit --json");
  REQUIRE(commit.exit_code == 0);
  // One root a shard, then the combined one.
  CHECK(static_cast<std::size_t>(std::count(commit.out.begin(), commit.out.end(), ',')) ==
        database_options::default_shards());
}

TEST_CASE("cli: --cache-mib opens the database with that memory budget, and refuses too little") {
  testing::temp_dir d("cli-cache-mib");
  std::string data = "--data " + d.path() + "/db --shards 2";
  REQUIRE(run(data + " --cache-mib 8 put k v").exit_code == 0);
  CHECK(run(data + " --cache-mib 8 get k").out == "v\n");
  // 1 MiB for 2 shards: under the database's 1 MiB a shard.
  auto small = run(data + " --cache-mib 1 get k");
  CHECK(small.exit_code == 2);
  CHECK(std::count(small.err.begin(), small.err.end(), '\n') == 1);
  CHECK(small.err.find("memory_budget") != std::string::npos);
  auto zero = run(data + " --cache-mib 0 get k");
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--cache-mib") != std::string::npos);
}

TEST_CASE("cli: cert writes a CA and a certificate for each node and client once, and names what it refuses") {
  testing::temp_dir dir("cli-cert");
  std::string cluster = dir / "c.cluster";
  std::ofstream(cluster) << "cluster certs\nshards 1\ntls on\nnode 1 127.0.0.1 7401\n";
  std::string out = dir / "certs";
  auto made = run(fmt::format("cert --cluster {} --out {} --client ops", cluster, out));
  CHECK(made.exit_code == 0);
  CHECK(made.out == fmt::format("{0}/ca.pem\n{0}/ca.key\n{0}/node1.pem\n{0}/node1.key\n{0}/client-ops.pem\n"
                                "{0}/client-ops.key\n",
                                out));
  CHECK(made.err.find(fmt::format("--tls-cert {}/node1.pem", out)) != std::string::npos);
  auto again = run(fmt::format("cert --cluster {} --out {}", cluster, out));
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("ca.pem exists") != std::string::npos);
  auto bad = run(fmt::format("cert --cluster {} --out {} --client 'a b'", cluster, dir / "other"));
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("client name 'a b'") != std::string::npos);
  auto missing = run(fmt::format("cert --cluster {} --out {}", dir / "none.cluster", dir / "third"));
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("none.cluster") != std::string::npos);
}
