// Bad input (issue 6): keys and values at and just past their limits, empty
// and binary keys, batches past their limits, bad TTLs, invalid options, and
// data directories that are a file, read-only, of a newer format version or of
// another shard count. Through the library and through the `magnetite` tool run
// as a real process. For each: (a) the error's code and category, and a message
// that names what is wrong; (b) nothing changed: every file under the data
// directory is byte-identical before and after, and reads return what they did;
// (c) no hang: every test case runs under a watchdog, every tool run under a
// deadline.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "actors/database_core.h"
#include "core/hash128.h"
#include "core/limits.h"
#include "tests/support/database_fixture.h"
#include "tests/support/temp_dir.h"
#include "tree/pack_format.h"
#include "wal/format.h"

using namespace magnetite;
using namespace std::chrono_literals;
using magnetite::testing::must_open;
using magnetite::testing::options_for;
namespace fs = std::filesystem;

namespace {

// ---- (c) no hang --------------------------------------------------------------------

// Ends the process with a message if the test case it guards runs longer than
// `limit`: a hang fails the suite instead of stalling it.
class watchdog {
 public:
  explicit watchdog(std::string what, std::chrono::seconds limit = 300s)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock lk(mu_);
          if (!cv_.wait_for(lk, limit, [this] { return done_; })) {
            std::fprintf(stderr, "bad_input_tests: \"%s\" ran longer than %lld s: a hang\n", what_.c_str(),
                         static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// ---- (b) nothing changed ---------------------------------------------------------------

// Every entry under a directory: a directory as "dir", a regular file as its
// size and content hash, anything else as "other".
using tree_state = std::map<std::string, std::string>;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

tree_state files_in(const std::string& dir) {
  tree_state out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    out["."] = "absent";
    return out;
  }
  if (fs::is_regular_file(dir)) {
    std::string b = read_bytes(dir);
    out["."] = fmt::format("file {} {}", b.size(), hash128::of(b).to_hex());
    return out;
  }
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_directory()) {
      out[rel] = "dir";
    } else if (e.is_regular_file()) {
      std::string b = read_bytes(e.path().string());
      out[rel] = fmt::format("file {} {}", b.size(), hash128::of(b).to_hex());
    } else {
      out[rel] = "other";
    }
  }
  return out;
}

// What differs between two snapshots, or "" when they are equal.
std::string changes(const tree_state& before, const tree_state& after) {
  std::string out;
  for (const auto& [k, v] : before) {
    auto it = after.find(k);
    if (it == after.end())
      out += fmt::format("removed {}; ", k);
    else if (it->second != v)
      out += fmt::format("changed {} ({} -> {}); ", k, v, it->second);
  }
  for (const auto& [k, v] : after)
    if (!before.count(k)) out += fmt::format("added {} ({}); ", k, v);
  return out;
}

#define CHECK_UNCHANGED(before, dir)                              \
  do {                                                            \
    std::string what_changed_ = changes((before), files_in(dir)); \
    CHECK_MESSAGE(what_changed_.empty(), what_changed_);          \
  } while (0)

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// ---- the library ---------------------------------------------------------------------

using entries = std::vector<std::pair<std::string, std::string>>;

entries everything(database& db) {
  auto all = db.range("", "", 1'000'000);
  REQUIRE_MESSAGE(all.is_ok(), all.error().to_string());
  return *all;
}

// Keys k0, k1, ... until every shard holds at least `per_shard` of them, and
// a commit: every shard has a commit marker and no write waits for a timer.
std::map<std::string, std::string> fill_every_shard(database& db, std::size_t per_shard = 2) {
  std::map<std::string, std::string> model;
  std::vector<std::size_t> count(db.shard_count());
  for (int i = 0; std::any_of(count.begin(), count.end(), [&](std::size_t c) { return c < per_shard; }); ++i) {
    std::string k = fmt::format("k{}", i);
    std::string v = fmt::format("value of {}", i);
    REQUIRE(db.put(k, v).is_ok());
    model[k] = v;
    ++count[db.shard_of(k)];
  }
  REQUIRE(db.commit().is_ok());
  return model;
}

entries as_entries(const std::map<std::string, std::string>& m) { return entries(m.begin(), m.end()); }

// A database with data on every shard, written, closed, then opened and closed
// once more: the first open after a writing process cuts the log's reserved
// tail (docs/formats/wal.md), so only from then on is a clean open a no-op on
// disk. That is checked here; it is the baseline every case compares against.
std::map<std::string, std::string> make_settled_database(const std::string& dir, std::size_t shards = 3) {
  std::map<std::string, std::string> model;
  {
    auto db = must_open(options_for(dir, shards));
    model = fill_every_shard(*db);
  }
  { auto db = must_open(options_for(dir, shards)); }
  auto settled = files_in(dir);
  {
    auto db = must_open(options_for(dir, shards));
    CHECK(everything(*db) == as_entries(model));
  }
  std::string moved = changes(settled, files_in(dir));
  REQUIRE_MESSAGE(moved.empty(), fmt::format("a clean open and close changed files: {}", moved));
  return model;
}

void check_error(const status& s, status_code code, std::initializer_list<std::string_view> parts) {
  CHECK_MESSAGE(s.code() == code, s.to_string());
  CHECK_MESSAGE(s.category() == status_category::permanent, s.to_string());
  for (auto p : parts)
    CHECK_MESSAGE(contains(s.message(), p), fmt::format("\"{}\" does not name \"{}\"", s.message(), p));
}

// The first file under `dir` whose name ends in `suffix` (sorted: the oldest).
std::string find_file(const std::string& dir, std::string_view suffix, bool newest = false) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  REQUIRE_MESSAGE(!found.empty(), fmt::format("no *{} in {}", suffix, dir));
  return newest ? found.back() : found.front();
}

void put_u32le(std::string& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t get_u64le(const std::string& b, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// A 40-byte file header (WAL segment, pack, index, node-store manifest: the
// same layout) rewritten to claim format `version`, with its checksum made to
// match, as a newer magnetite would write it.
void make_header_newer(const std::string& path, std::uint32_t version = 2) {
  std::string b = read_bytes(path);
  REQUIRE(b.size() >= 40);
  put_u32le(b, 8, version);
  put_u32le(b, 36, magnetite::checksum32(std::string_view(b).substr(0, 36)));
  write_bytes(path, b);
}

// ---- the tool, as a real process -----------------------------------------------------

struct run_result {
  int exit_code = -1;  // -1: killed by a signal (the deadline)
  bool timed_out = false;
  std::string out, err;
};

std::string tool_path() {
  auto exe = fs::read_symlink("/proc/self/exe");
  return (exe.parent_path().parent_path() / "tools" / "magnetite").string();
}

// Runs argv (exact bytes, no shell) with a deadline; stdout and stderr captured.
run_result run_argv(const std::vector<std::string>& argv, std::chrono::seconds deadline = 60s) {
  testing::temp_dir scratch("bad-input-out");
  std::string out = scratch.path() + "/out", err = scratch.path() + "/err";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  run_result r;
  auto give_up = std::chrono::steady_clock::now() + deadline;
  int wstatus = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  r.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

// magnetite --data DIR ARGS...
run_result tool(const std::string& dir, std::vector<std::string> args, std::vector<std::string> wrapper = {}) {
  std::vector<std::string> argv = std::move(wrapper);
  argv.push_back(tool_path());
  argv.push_back("--data");
  argv.push_back(dir);
  argv.insert(argv.end(), args.begin(), args.end());
  return run_argv(argv);
}

// A refusal: exit code 2, one line on stderr naming every part, no output.
void check_refused(const run_result& r, std::initializer_list<std::string_view> parts) {
  CHECK_FALSE(r.timed_out);
  CHECK_MESSAGE(r.exit_code == 2, r.err);
  CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  CHECK_MESSAGE(r.out.empty(), r.out);
  for (auto p : parts) CHECK_MESSAGE(contains(r.err, p), fmt::format("\"{}\" does not name \"{}\"", r.err, p));
}

// The commands the brief names, each with arguments that would work on a sound
// database: all of them must refuse a bad directory the same way.
const std::vector<std::vector<std::string>>& every_command() {
  static const std::vector<std::vector<std::string>> cmds = {
      {"put", "k0", "new"}, {"get", "k0"}, {"del", "k0"}, {"scan"}, {"load", "--keys", "5"},
      {"commit"},           {"verify"},    {"stats"},     {"gc"},
  };
  return cmds;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The tool's escaping undone, as docs/cli.md describes it: \xNN (two hex
// digits) for a byte, every other character for itself.
std::string unescape(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out.push_back(text[i]);
      continue;
    }
    REQUIRE_MESSAGE(i + 3 < text.size(), text);
    REQUIRE(text[i + 1] == 'x');
    out.push_back(static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16)));
    i += 3;
  }
  return out;
}

// The tool's scan, parsed back through its escaping.
std::map<std::string, std::string> scanned_by_tool(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"scan"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = tool(dir, args);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::map<std::string, std::string> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1) {
    std::string line = r.out.substr(at, nl - at);
    auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    REQUIRE(line.find('\t', tab + 1) == std::string::npos);  // escaped: one raw tab a line
    out[unescape(line.substr(0, tab))] = unescape(line.substr(tab + 1));
  }
  CHECK(at == r.out.size());
  return out;
}

const std::string max_key(limits::max_user_key_bytes, 'k');
const std::string long_key(limits::max_user_key_bytes + 1, 'k');

}  // namespace

// =======================================================================================
// Keys
// =======================================================================================

TEST_CASE(
    "bad input: a key of the maximum length works in every call; one byte more and empty keys are refused by "
    "every call and change nothing") {
  watchdog w("keys at the limit");
  testing::temp_dir d("bad-keys");
  auto db = must_open(options_for(d.path()));
  auto model = fill_every_shard(*db);

  // At the limit: 4080 bytes, through put, get, cas, batch, del.
  REQUIRE(max_key.size() == 4080);
  REQUIRE(db->put(max_key, "max").is_ok());
  CHECK(db->get(max_key).value() == std::optional<std::string>("max"));
  auto swapped = db->cas(max_key, std::string_view("max"), std::string_view("max2"));
  REQUIRE(swapped.is_ok());
  CHECK(swapped->swapped);
  std::string max_key2 = std::string(limits::max_user_key_bytes - 1, 'k') + "2";
  std::vector<batch_write> at_limit{{max_key, std::string("max3"), {}}, {max_key2, std::string("b"), {}}};
  REQUIRE(db->batch(at_limit, std::string_view("route")).is_ok());
  CHECK(db->get(max_key2, std::string_view("route")).value() == std::optional<std::string>("b"));
  // The routed copy of max_key lives on route's shard (docs/embedding.md: a key
  // written under two routing keys lives on two shards): remove both.
  REQUIRE(db->del(max_key2, std::string_view("route")).is_ok());
  REQUIRE(db->del(max_key, std::string_view("route")).is_ok());
  REQUIRE(db->put(max_key, "kept at the limit").is_ok());
  model[max_key] = "kept at the limit";
  // The longest routing key works too.
  REQUIRE(db->put("routed", "r", std::nullopt, std::string_view(max_key)).is_ok());
  CHECK(db->get("routed", std::string_view(max_key)).value() == std::optional<std::string>("r"));
  REQUIRE(db->del("routed", std::string_view(max_key)).is_ok());
  REQUIRE(db->commit().is_ok());
  CHECK(everything(*db) == as_entries(model));

  auto before = files_in(d.path());
  struct bad_key {
    std::string key;
    std::vector<std::string_view> named;
  };
  std::vector<bad_key> bad{{long_key, {"key of 4081 bytes", "limit of 4080 bytes"}}, {"", {"key is empty"}}};
  for (const auto& [key, named] : bad) {
    CAPTURE(key.size());
    auto expect = [&](const status& s, std::string_view call) {
      CAPTURE(call);
      CHECK_MESSAGE(s.code() == status_code::invalid_argument, s.to_string());
      CHECK(s.category() == status_category::permanent);
      for (auto p : named) CHECK_MESSAGE(contains(s.message(), p), s.message());
    };
    expect(db->put(key, "v"), "put");
    expect(db->get(key).error(), "get");
    expect(db->del(key), "del");
    expect(db->cas(key, std::nullopt, std::string_view("v")).error(), "cas");
    expect(db->cas(key, std::string_view("v"), std::nullopt).error(), "cas delete");
    // One bad key makes the whole batch fail: the good writes beside it are not made.
    std::vector<batch_write> mixed{
        {"k0", std::string("changed by a bad batch"), {}}, {key, std::string("v"), {}}, {"k1", std::nullopt, {}}};
    expect(db->batch(mixed, std::string_view("one-shard")), "batch");
    std::vector<batch_write> bad_delete{{"k0", std::nullopt, {}}, {key, std::nullopt, {}}};
    expect(db->batch(bad_delete, std::string_view("one-shard")), "batch delete");
    // The same key as a routing key.
    expect(db->put("k0", "changed by a bad routing key", std::nullopt, std::string_view(key)), "put routed");
    expect(db->get("k0", std::string_view(key)).error(), "get routed");
    expect(db->del("k0", std::string_view(key)), "del routed");
    expect(db->cas("k0", std::nullopt, std::string_view("v"), std::nullopt, std::string_view(key)).error(),
           "cas routed");
    std::vector<batch_write> good{{"k0", std::string("changed by a bad routing key"), {}}};
    expect(db->batch(good, std::string_view(key)), "batch routed");

    // Asynchronous forms: answered once, at once, on the calling thread (the
    // request never reaches a shard).
    std::vector<status> answers;
    std::vector<std::thread::id> threads;
    auto record = [&](status s) {
      answers.push_back(std::move(s));
      threads.push_back(std::this_thread::get_id());
    };
    db->put_async(key, "v", std::nullopt, record);
    db->del_async(key, record);
    db->cas_async(key, std::nullopt, std::string_view("v"), std::nullopt,
                  [&](result<cas_outcome> r) { record(r.is_ok() ? status::ok() : r.error()); });
    db->batch_async(mixed, record, std::string_view("one-shard"));
    db->put_async("k0", "v", std::nullopt, record, std::string_view(key));
    REQUIRE(answers.size() == 5);
    for (std::size_t i = 0; i < answers.size(); ++i) {
      expect(answers[i], fmt::format("async {}", i));
      CHECK(threads[i] == std::this_thread::get_id());
    }
  }
  // Nothing reached a log or a tree: every file is as it was, every read as it was.
  CHECK_UNCHANGED(before, d.path());
  CHECK(everything(*db) == as_entries(model));
  db.reset();
  auto again = must_open(options_for(d.path()));
  CHECK(everything(*again) == as_entries(model));
}

TEST_CASE(
    "bad input: binary keys and values (NUL, 0xff, every byte) round-trip through put, batch, cas, get, scan "
    "and a reopen, in byte order") {
  watchdog w("binary keys");
  testing::temp_dir d("bad-binary");
  std::map<std::string, std::string> model;
  auto bin = [](std::initializer_list<int> bytes) {
    std::string s;
    for (int b : bytes) s.push_back(static_cast<char>(b));
    return s;
  };
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  // Keys starting with FF FF belong to state/: the largest plain key is FF FE FF FF ...
  std::string largest_plain = bin({0xff, 0xfe}) + std::string(limits::max_user_key_bytes - 2, '\xff');
  {
    auto db = must_open(options_for(d.path()));
    for (const std::string& k :
         {bin({0xff, 0xff}), bin({0xff, 0xff, 0}), std::string(limits::max_user_key_bytes, '\xff')}) {
      auto refused = db->put(k, "v");
      CHECK(refused.code() == status_code::invalid_argument);
      CHECK(refused.message().find("reserved for state/") != std::string::npos);
    }
    std::vector<std::string> keys{bin({0}),          bin({0, 0}),
                                  bin({0, 0xff}),    bin({'a', 0, 'b'}),
                                  bin({'a'}),        bin({0x7f}),
                                  bin({0x80}),       bin({0xff}),
                                  bin({0xff, 0xfe}), bin({0xff, 0}),
                                  bin({'\t', '\n'}), bin({'\\', 'x', '0', '0'}),
                                  every_byte,        std::string(limits::max_user_key_bytes, '\0'),
                                  largest_plain};
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::string v = bin({0, static_cast<int>(i), 0xff}) + every_byte;
      REQUIRE_MESSAGE(db->put(keys[i], v).is_ok(), i);
      model[keys[i]] = v;
    }
    std::string empty_value_key = bin({'e', 0});
    REQUIRE(db->put(empty_value_key, "").is_ok());  // an empty value is a value, not an absence
    model[empty_value_key] = "";
    CHECK(db->get(empty_value_key).value() == std::optional<std::string>(""));
    std::vector<batch_write> b{{bin({0xfe, 0}), bin({0}), {}}, {bin({0xfe, 0xff}), bin({0xff}), {}}};
    REQUIRE(db->batch(b, std::string_view(bin({0}))).is_ok());
    auto c = db->cas(bin({0xff}), std::string_view(model[bin({0xff})]), std::string_view(bin({0, 0, 0})));
    REQUIRE(c.is_ok());
    CHECK(c->swapped);
    model[bin({0xff})] = bin({0, 0, 0});
    REQUIRE(db->del(bin({'a', 0, 'b'})).is_ok());
    model.erase(bin({'a', 0, 'b'}));
    for (const auto& [k, v] : model) CHECK(db->get(k).value() == std::optional<std::string>(v));
    CHECK(db->get(bin({0xfe, 0}), std::string_view(bin({0}))).value() == std::optional<std::string>(bin({0})));
    CHECK(db->get(bin({'a', 0})).value() == std::nullopt);  // a prefix of a key is another key
    // A scan returns them in unsigned byte order: 0x00 first, 0xff last.
    auto all = everything(*db);
    std::vector<std::string> got;
    for (const auto& [k, v] : all) got.push_back(k);
    CHECK(std::is_sorted(got.begin(), got.end()));
    std::map<std::string, std::string> scanned(all.begin(), all.end());
    for (const auto& [k, v] : model) CHECK(scanned.count(k) == 1);
    CHECK(got.front() == bin({0}));
    CHECK(got.back() == largest_plain);
    // Bounds with NUL and 0xff bytes.
    auto between = db->range(bin({0, 0}), bin({0, 0xff}), 100).value();
    REQUIRE(between.size() == 3);
    CHECK(between[0].first == bin({0, 0}));
    CHECK(between[1].first == std::string(limits::max_user_key_bytes, '\0'));
    CHECK(between[2].first == every_byte);
    auto tail = db->range(bin({0xff}), "", 100).value();
    CHECK(tail.size() == 4);  // 0xff, 0xff 00, 0xff 0xfe, 0xff 0xfe 0xff...
  }
  auto db = must_open(options_for(d.path()));
  for (const auto& [k, v] : model) CHECK(db->get(k).value() == std::optional<std::string>(v));
}

// =======================================================================================
// Values, batches, TTLs
// =======================================================================================

TEST_CASE(
    "bad input: a value of the maximum size works; one byte more is refused by put, cas and batch and changes "
    "nothing") {
  watchdog w("values at the limit");
  testing::temp_dir d("bad-values");
  auto db = must_open(options_for(d.path(), 2));
  auto model = fill_every_shard(*db);
  std::string biggest(limits::max_user_value_bytes, 'v');
  biggest.front() = '\0';
  biggest.back() = '\xff';
  REQUIRE(biggest.size() == 16 * 1024 * 1024 - 16);
  REQUIRE(db->put("big", biggest).is_ok());
  CHECK(db->get("big").value() == std::optional<std::string>(biggest));
  auto c = db->cas("big", std::string_view(biggest), std::string_view(biggest + ""));
  REQUIRE(c.is_ok());
  CHECK(c->swapped);
  model["big"] = biggest;
  REQUIRE(db->commit().is_ok());

  auto before = files_in(d.path());
  std::string too_big(limits::max_user_value_bytes + 1, 'x');
  auto expect = [](const status& s) {
    check_error(s, status_code::invalid_argument, {"value of 16777201 bytes", "limit of 16777200 bytes"});
  };
  expect(db->put("k0", too_big));
  expect(db->put("k0", too_big, 1h));
  expect(db->cas("k0", std::string_view(model["k0"]), std::string_view(too_big)).error());
  std::vector<batch_write> b{{"k0", std::string("small"), {}}, {"k1", too_big, {}}};
  expect(db->batch(b, std::string_view("r")));
  std::optional<status> async_answer;
  db->put_async("k0", too_big, std::nullopt, [&](status s) { async_answer = std::move(s); });
  REQUIRE(async_answer.has_value());
  expect(*async_answer);
  CHECK_UNCHANGED(before, d.path());
  CHECK(db->get("k0").value() == std::optional<std::string>(model["k0"]));
  CHECK(db->get("big").value() == std::optional<std::string>(biggest));
}

TEST_CASE(
    "bad input: batches: empty, past max_batch_mutations and past max_batch_bytes are refused whole; at the "
    "byte limit one is written") {
  watchdog w("batch limits", 600s);
  testing::temp_dir d("bad-batch");
  auto db = must_open(options_for(d.path(), 2));
  auto model = fill_every_shard(*db);
  auto before = files_in(d.path());

  check_error(db->batch({}), status_code::invalid_argument, {"batch is empty"});
  {
    // 2^20 + 1 deletions of one-byte keys: refused before anything is staged.
    std::vector<batch_write> many(limits::max_batch_mutations + 1);
    for (std::size_t i = 0; i < many.size(); ++i) many[i].key = "k0";
    check_error(db->batch(many, std::string_view("r")), status_code::invalid_argument,
                {"batch of 1048577 mutations", "limit of 1048576"});
  }
  // Bytes: the log counts keys and STORED values (the value's envelope adds 1
  // byte without a TTL, 9 with one). Four values of the largest size and keys
  // of 15 bytes make exactly 64 MiB; one key byte more is past the limit.
  std::string biggest(limits::max_user_value_bytes, 'v');
  auto four = [&](std::size_t first_key_bytes) {
    std::vector<batch_write> b;
    for (int i = 0; i < 4; ++i) b.push_back({fmt::format("{:0>{}}", i, i == 0 ? first_key_bytes : 15), biggest, {}});
    return b;
  };
  std::size_t stored = 0;
  for (const auto& x : four(16)) stored += x.key.size() + x.value->size() + 1;
  REQUIRE(stored == limits::max_batch_bytes + 1);
  check_error(db->batch(four(16), std::string_view("r")), status_code::invalid_argument,
              {"batch of 67108865 bytes", "limit of 67108864 bytes"});
  CHECK_UNCHANGED(before, d.path());
  CHECK(everything(*db) == as_entries(model));

  REQUIRE(db->batch(four(15), std::string_view("r")).is_ok());
  for (const auto& x : four(15)) CHECK(db->get(x.key, std::string_view("r")).value() == x.value);
}

TEST_CASE(
    "bad input: a TTL of 0 or below is refused everywhere; an enormous one works unless it runs past the "
    "clock's range") {
  watchdog w("ttl");
  testing::temp_dir d("bad-ttl");
  std::atomic<std::uint64_t> now{1'000'000'000};
  auto o = options_for(d.path(), 2);
  o.shard.clock = [&] { return now.load(); };
  auto db = must_open(o);
  auto model = fill_every_shard(*db);
  auto before = files_in(d.path());
  for (auto ttl : {0ns, -1ns, std::chrono::nanoseconds(-std::chrono::hours(1)), std::chrono::nanoseconds::min()}) {
    CAPTURE(ttl.count());
    std::string n = fmt::format("ttl of {} ns", ttl.count());
    check_error(db->put("k0", "v", ttl), status_code::invalid_argument, {n, "must be > 0"});
    check_error(db->cas("k0", std::nullopt, std::string_view("v"), ttl).error(), status_code::invalid_argument, {n});
    std::vector<batch_write> b{{"k0", std::string("v"), ttl}};
    check_error(db->batch(b), status_code::invalid_argument, {n});
    std::optional<status> answer;
    db->put_async("k0", "v", ttl, [&](status s) { answer = std::move(s); });
    REQUIRE(answer.has_value());
    check_error(*answer, status_code::invalid_argument, {n});
  }
  // A deletion takes no TTL.
  check_error(db->cas("k0", std::string_view(model["k0"]), std::nullopt, 1s).error(), status_code::invalid_argument,
              {"a delete takes no ttl"});
  std::vector<batch_write> del_ttl{{"k0", std::nullopt, 1s}};
  check_error(db->batch(del_ttl), status_code::invalid_argument, {"batch write 0: a delete takes no ttl"});
  CHECK_UNCHANGED(before, d.path());
  CHECK(everything(*db) == as_entries(model));

  // The largest TTL there is: about 292 years, still inside the clock's range.
  REQUIRE(db->put("forever", "v", std::chrono::nanoseconds::max()).is_ok());
  now += 1'000'000'000'000'000'000ull;  // 31 years later
  CHECK(db->get("forever").value() == std::optional<std::string>("v"));
  // A clock near the end of its range: the deadline would wrap around.
  now = UINT64_MAX - 1000;
  check_error(db->put("k0", "v", 1001ns), status_code::invalid_argument, {"ttl reaches past the clock's range"});
  CHECK(db->put("k0", "until the end", 999ns).is_ok());
}

// =======================================================================================
// Options
// =======================================================================================

TEST_CASE(
    "bad input: invalid options are refused by open, naming the option, before anything is created or "
    "changed") {
  watchdog w("options");
  testing::temp_dir d("bad-options");
  std::string fresh = d.path() + "/never-created";
  std::string existing = d.path() + "/existing";
  auto model = make_settled_database(existing);
  auto before = files_in(existing);
  struct bad_option {
    std::string_view named;
    std::function<void(database_options&)> set;
  };
  std::vector<bad_option> cases{
      {"option dir is empty", [](database_options& o) { o.dir.clear(); }},
      {"shards = 0: must be 1..4096", [](database_options& o) { o.shards = 0; }},
      {"shards = 4097: must be 1..4096", [](database_options& o) { o.shards = 4097; }},
      {"option restart_backoff", [](database_options& o) { o.restart_backoff = 0ms; }},
      {"option restart_backoff", [](database_options& o) { o.restart_backoff = -5ms; }},
      {"option restart_window", [](database_options& o) { o.restart_window = 0ms; }},
      {"option cache_bytes", [](database_options& o) { o.shard.cache_bytes = 0; }},
      {"option checkpoint_bytes", [](database_options& o) { o.shard.checkpoint_bytes = 0; }},
      {"option checkpoint_interval", [](database_options& o) { o.shard.checkpoint_interval = 0ms; }},
      {"option checkpoint_interval", [](database_options& o) { o.shard.checkpoint_interval = -1ms; }},
      {"option fsync_interval",
       [](database_options& o) {
         o.shard.fsync = wal::fsync_policy::interval;
         o.shard.fsync_interval = 0ms;
       }},
      {"option fsync_interval",
       [](database_options& o) {
         o.shard.fsync = wal::fsync_policy::interval;
         o.shard.fsync_interval = -100ms;
       }},
      {"option clock is empty", [](database_options& o) { o.shard.clock = nullptr; }},
      {"chunk policy needs 0 < min < target <= max",
       [](database_options& o) {
         o.shard.chunking = {0, 0, 0};
       }},
      {"chunk policy needs 0 < min < target <= max",
       [](database_options& o) {
         o.shard.chunking = {512, 1024, 256};
       }},
  };
  for (const auto& dir : {fresh, existing}) {
    for (const auto& c : cases) {
      CAPTURE(dir);
      CAPTURE(c.named);
      database_options o;  // what a host passes, through the public open
      o.dir = dir;
      o.shards = 3;
      c.set(o);
      check_error(o.validate(), status_code::invalid_argument, {c.named});
      auto opened = database::open(o);
      REQUIRE_FALSE(opened.is_ok());
      check_error(opened.error(), status_code::invalid_argument, {c.named});
    }
  }
  CHECK_FALSE(fs::exists(fresh));
  CHECK_UNCHANGED(before, existing);
  // The edges that are valid.
  auto edge = options_for(fresh, 4096);
  CHECK(edge.validate().is_ok());
  edge.shards = 1;
  edge.shard.cache_bytes = 1;
  edge.shard.checkpoint_bytes = 1;
  edge.shard.fsync_interval = 0ms;  // ignored under the `always` policy
  edge.shard.wal_preallocate = 0;
  CHECK(edge.validate().is_ok());
  {
    auto db = must_open(edge);
    REQUIRE(db->put("a", "1").is_ok());
    CHECK(db->get("a").value() == std::optional<std::string>("1"));
  }
  {
    // A reservation the file system cannot make is best effort (wal/log_writer.cc):
    // the log grows by its writes instead.
    auto o = options_for(d.path() + "/huge-reservation", 1);
    o.shard.wal_preallocate = UINT64_MAX;
    auto db = must_open(o);
    REQUIRE(db->put("a", "1").is_ok());
    CHECK(db->get("a").value() == std::optional<std::string>("1"));
  }
  auto db = must_open(options_for(existing, 3));
  CHECK(everything(*db) == as_entries(model));
}

// =======================================================================================
// Data directories
// =======================================================================================

TEST_CASE("bad input: a data directory that is a regular file, or inside one, is refused naming the path") {
  watchdog w("directory is a file");
  testing::temp_dir d("bad-dir-file");
  std::string file = d.path() + "/plain-file";
  write_bytes(file, "not a database\n");
  auto before = files_in(file);
  for (const auto& dir : {file, file + "/db"}) {
    CAPTURE(dir);
    auto opened = open_database(options_for(dir, 3));
    REQUIRE_FALSE(opened.is_ok());
    check_error(opened.error(), status_code::invalid_argument, {file, "not a directory"});
    auto recorded = database::recorded_shards(dir);
    REQUIRE_FALSE(recorded.is_ok());
    check_error(recorded.error(), status_code::invalid_argument, {file, "not a directory"});
  }
  CHECK_UNCHANGED(before, file);
  CHECK(read_bytes(file) == "not a database\n");

  // A shard's directory that is a file: that shard cannot boot; open says which.
  std::string db_dir = d.path() + "/db";
  auto model = make_settled_database(db_dir);
  std::string shard1 = db_dir + "/shard-001";
  fs::rename(shard1, d.path() + "/shard-001.moved");
  write_bytes(shard1, "in the way\n");
  auto db_before = files_in(db_dir);
  auto opened = open_database(options_for(db_dir, 3));
  REQUIRE_FALSE(opened.is_ok());
  check_error(opened.error(), status_code::invalid_argument, {shard1, "not a directory"});
  CHECK_UNCHANGED(db_before, db_dir);
  fs::remove(shard1);
  fs::rename(d.path() + "/shard-001.moved", shard1);
  auto db = must_open(options_for(db_dir, 3));
  CHECK(everything(*db) == as_entries(model));
}

TEST_CASE(
    "bad input: a MANIFEST of a newer format version is not_supported; another shard count is refused; "
    "nothing is modified") {
  watchdog w("manifest");
  testing::temp_dir d("bad-manifest");
  std::string dir = d.path() + "/db";
  auto model = make_settled_database(dir, 3);
  std::string manifest = dir + "/MANIFEST";
  std::string original = read_bytes(manifest);
  REQUIRE(original == "magnetite-manifest 1\nshards 3\n");

  SUBCASE("newer version") {
    write_bytes(manifest, "magnetite-manifest 2\nshards 3\n");
    auto before = files_in(dir);
    auto opened = open_database(options_for(dir, 3));
    REQUIRE_FALSE(opened.is_ok());
    check_error(opened.error(), status_code::not_supported, {manifest, "format version 2", "reads version 1"});
    auto recorded = database::recorded_shards(dir);
    REQUIRE_FALSE(recorded.is_ok());
    check_error(recorded.error(), status_code::not_supported, {manifest, "format version 2"});
    CHECK_UNCHANGED(before, dir);
  }
  SUBCASE("garbage") {
    write_bytes(manifest, "magnetite-manifest one\nshards 3\n");
    auto before = files_in(dir);
    check_error(open_database(options_for(dir, 3)).error(), status_code::corruption,
                {manifest, "not a magnetite manifest"});
    CHECK_UNCHANGED(before, dir);
  }
  SUBCASE("opened with another shard count") {
    auto before = files_in(dir);
    for (std::size_t n : {1, 2, 4, 8}) {
      CAPTURE(n);
      check_error(open_database(options_for(dir, n)).error(), status_code::invalid_argument,
                  {dir, "created with 3 shards", fmt::format("opening it with {}", n)});
    }
    CHECK_UNCHANGED(before, dir);
  }
  SUBCASE("a MANIFEST that records fewer shards than the directory holds") {
    write_bytes(manifest, "magnetite-manifest 1\nshards 2\n");
    auto before = files_in(dir);
    check_error(open_database(options_for(dir, 2)).error(), status_code::corruption,
                {manifest, "records 2 shards", dir + "/shard-002"});
    CHECK_UNCHANGED(before, dir);
  }
  SUBCASE("shard directories without a MANIFEST") {
    fs::remove(manifest);
    auto before = files_in(dir);
    check_error(open_database(options_for(dir, 3)).error(), status_code::corruption,
                {dir + "/shard-000", "no MANIFEST"});
    CHECK(database::recorded_shards(dir).value() == std::nullopt);  // no database: the tool's read commands say so
    CHECK_UNCHANGED(before, dir);
  }
  write_bytes(manifest, original);
  auto db = must_open(options_for(dir, 3));
  CHECK(everything(*db) == as_entries(model));
}

TEST_CASE(
    "bad input: a WAL segment, a frame, a pack, an index or a node-store manifest of a newer format version "
    "is not_supported naming the file; nothing is modified") {
  watchdog w("newer formats");
  testing::temp_dir d("bad-format");
  std::string dir = d.path() + "/db";
  auto model = make_settled_database(dir, 3);
  std::string shard = dir + "/shard-001";
  std::string victim;
  std::vector<std::string> named;

  SUBCASE("WAL segment header") {
    victim = find_file(shard + "/wal", ".wal", true);
    make_header_newer(victim, wal::format_version + 1);
    named = {"WAL segment", fmt::format("format version {}", wal::format_version + 1),
             fmt::format("this build reads version 1 to {}", wal::format_version)};
  }
  SUBCASE("WAL frame of an unknown record type") {
    victim = find_file(shard + "/wal", ".wal", true);
    std::string b = read_bytes(victim);
    REQUIRE(b.size() >= 40 + 24);
    std::uint64_t salt = get_u64le(b, 24);
    b[40 + 16] = static_cast<char>(wal::max_record_type + 1);
    put_u32le(b, 40, magnetite::checksum32(std::string_view(b).substr(44, 20), salt));
    write_bytes(victim, b);
    named = {};  // the message is the log reader's; the path is checked below
  }
  SUBCASE("pack header") {
    victim = find_file(shard + "/nodes", ".pack", true);
    make_header_newer(victim, tree::pack_format_version + 1);
    named = {"node store pack", fmt::format("format version {}", tree::pack_format_version + 1),
             fmt::format("this build reads version 1 to {}", tree::pack_format_version)};
  }
  SUBCASE("index header") {
    victim = find_file(shard + "/nodes", ".idx", true);
    make_header_newer(victim);
    named = {"format version 2"};
  }
  SUBCASE("node-store manifest (written by gc)") {
    {
      auto db = must_open(options_for(dir, 3));
      REQUIRE(db->gc().is_ok());
    }
    { auto db = must_open(options_for(dir, 3)); }  // settle again
    victim = shard + "/nodes/MANIFEST";
    REQUIRE(fs::exists(victim));
    make_header_newer(victim, 3);  // version 2 manifests name dropped packs
    named = {"format version 3"};
  }
  std::string original_bytes = read_bytes(victim);
  auto before = files_in(dir);
  auto opened = open_database(options_for(dir, 3));
  REQUIRE_FALSE(opened.is_ok());
  const status s = opened.error();
  CHECK_MESSAGE(s.code() == status_code::not_supported, s.to_string());
  CHECK(s.category() == status_category::permanent);
  CHECK_MESSAGE(contains(s.message(), victim), s.message());
  for (auto p : named) CHECK_MESSAGE(contains(s.message(), p), s.message());
  CHECK_UNCHANGED(before, dir);
  // A second attempt finds the same and still changes nothing.
  CHECK(open_database(options_for(dir, 3)).error().code() == status_code::not_supported);
  CHECK_UNCHANGED(before, dir);
  (void)original_bytes;
}

namespace {

// Runs `body` in a child process that cannot write to `dir`: as root (where
// permission bits do not stop writes) the child drops to nobody; otherwise the
// permission bits alone do it. The child reports a line through a pipe.
std::string as_unprivileged_child(const std::function<std::string()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
                             ::setresuid(65534, 65534, 65534) != 0))
      ::_exit(4);
    std::string line = body();
    if (::write(fds[1], line.data(), line.size()) < 0) ::_exit(5);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  REQUIRE_MESSAGE(WIFEXITED(wstatus), "child died");
  REQUIRE_MESSAGE(WEXITSTATUS(wstatus) == 0, fmt::format("child exit {}", WEXITSTATUS(wstatus)));
  return out;
}

void set_writable(const std::string& dir, bool writable) {
  auto mode = [&](const fs::path& p) {
    bool is_dir = fs::is_directory(p);
    fs::permissions(
        p, writable ? (is_dir ? fs::perms(0755) : fs::perms(0644)) : (is_dir ? fs::perms(0555) : fs::perms(0444)));
  };
  for (const auto& e : fs::recursive_directory_iterator(dir)) mode(e.path());
  mode(dir);
}

}  // namespace

TEST_CASE("bad input: a read-only data directory is refused with the path and the reason; nothing is modified") {
  watchdog w("read-only");
  testing::temp_dir d("bad-readonly");
  fs::permissions(d.path(), fs::perms(0755));  // nobody must be able to reach it
  std::string dir = d.path() + "/db";
  auto model = make_settled_database(dir, 3);
  set_writable(dir, false);
  auto before = files_in(dir);
  MESSAGE(
      fmt::format("read-only directory: chmod 0555/0444{}",
                  ::geteuid() == 0 ? ", opened by a child that dropped to nobody (root ignores permission bits)" : ""));
  std::string answer = as_unprivileged_child([&] {
    auto opened = open_database(options_for(dir, 3));
    if (opened) return std::string("opened");
    return opened.error().to_string();
  });
  CHECK_MESSAGE(contains(answer, "I/O error (permanent)"), answer);
  CHECK_MESSAGE(contains(answer, dir + "/"), answer);
  CHECK_MESSAGE(contains(answer, "Permission denied"), answer);
  std::string recorded = as_unprivileged_child([&] {
    auto r = database::recorded_shards(dir);
    return r ? fmt::format("{}", r->value_or(0)) : r.error().to_string();
  });
  CHECK_MESSAGE(contains(recorded, dir + "/MANIFEST"), recorded);
  CHECK_UNCHANGED(before, dir);
  set_writable(dir, true);
  auto db = must_open(options_for(dir, 3));
  CHECK(everything(*db) == as_entries(model));
}

// =======================================================================================
// The tool, as a real process
// =======================================================================================

TEST_CASE("bad input, tool: keys at and past the limit, empty keys and bad TTLs; a refused write opens nothing") {
  watchdog w("tool keys");
  REQUIRE(fs::exists(tool_path()));
  testing::temp_dir d("bad-tool-keys");
  std::string dir = d.path() + "/db";
  auto model = make_settled_database(dir, 3);
  // At the limit: works, and reads back.
  REQUIRE(tool(dir, {"put", max_key, "at the limit"}).exit_code == 0);
  auto got = tool(dir, {"get", max_key});
  CHECK(got.exit_code == 0);
  CHECK(got.out == "at the limit\n");
  REQUIRE(tool(dir, {"del", max_key}).exit_code == 0);
  CHECK(tool(dir, {"get", max_key}).exit_code == 1);
  // The largest value, through load (an argument cannot be 16 MiB long).
  auto big = tool(dir, {"load", "--keys", "1", "--writers", "1", "--prefix", "big-", "--value-size",
                        std::to_string(limits::max_user_value_bytes)});
  REQUIRE_MESSAGE(big.exit_code == 0, big.err);
  auto big_value = tool(dir, {"get", "big-1-0"});
  CHECK(big_value.exit_code == 0);
  CHECK(big_value.out.size() == limits::max_user_value_bytes + 1);  // and a newline
  REQUIRE(tool(dir, {"del", "big-1-0"}).exit_code == 0);
  { auto db = must_open(options_for(dir, 3)); }  // settle the log tails the writes left
  auto before = files_in(dir);
  for (const auto& key : {long_key, std::string()}) {
    std::vector<std::string_view> named;
    if (key.empty())
      named = {"invalid argument (permanent)", "key is empty"};
    else
      named = {"invalid argument (permanent)", "key of 4081 bytes", "limit of 4080 bytes"};
    for (const auto& args : std::vector<std::vector<std::string>>{{"put", key, "v"}, {"get", key}, {"del", key}}) {
      CAPTURE(args[0]);
      CAPTURE(key.size());
      auto r = tool(dir, args);
      CHECK_FALSE(r.timed_out);
      CHECK_MESSAGE(r.exit_code == 2, r.err);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      for (auto p : named) CHECK_MESSAGE(contains(r.err, p), r.err);
    }
  }
  for (const char* ttl : {"0s", "-5s", "0", "99999999999h", "1.5s", "10"}) {
    CAPTURE(ttl);
    auto r = tool(dir, {"put", "k0", "changed", "--ttl", ttl});
    check_refused(r, {"invalid argument", fmt::format("duration \"{}\"", ttl)});
  }
  // A load whose keys would be too long: refused, nothing written.
  auto long_load = tool(dir, {"load", "--keys", "3", "--prefix", std::string(limits::max_user_key_bytes, 'p')});
  check_refused(long_load, {"invalid argument", "limit of 4080 bytes"});
  for (const char* size : {"16777201", "-1", "x"}) {
    CAPTURE(size);
    auto r = tool(dir, {"load", "--keys", "3", "--value-size", size});
    check_refused(r, {"--value-size"});
  }
  for (const char* shards : {"0", "4097", "-1"}) {
    CAPTURE(shards);
    auto r = tool(dir, {"--shards", shards, "get", "k0"});
    check_refused(r, {"--shards"});
  }
  CHECK_UNCHANGED(before, dir);
  CHECK(scanned_by_tool(dir) == model);
  // The largest TTL the tool takes works (2562047h: about 292 years).
  REQUIRE(tool(dir, {"put", "forever", "v", "--ttl", "2562047h"}).exit_code == 0);
  CHECK(tool(dir, {"get", "forever"}).out == "v\n");
  // A refused put or del where there is no database creates none.
  std::string nowhere = d.path() + "/nowhere";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"put", long_key, "v"}, {"put", "", "v"}, {"del", ""}, {"put", "k", "v", "--ttl", "0s"}}) {
    CAPTURE(joined(args).size());
    auto r = tool(nowhere, args);
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(nowhere));
  }
}

TEST_CASE("bad input, tool: binary keys and values round-trip through put, get, scan and the \\xNN escaping") {
  watchdog w("tool binary");
  testing::temp_dir d("bad-tool-binary");
  std::string dir = d.path() + "/db";
  std::map<std::string, std::string> model;
  {
    // Keys with NUL bytes cannot be a command-line argument: the library writes them.
    auto db = must_open(options_for(dir, 3));
    model = fill_every_shard(*db);
    std::string every_byte;
    for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
    for (const auto& k : {std::string("\0", 1), std::string("a\0b", 3), std::string("\xff\0", 2), every_byte}) {
      REQUIRE(db->put(k, every_byte).is_ok());
      model[k] = every_byte;
    }
  }
  // Keys with 0xff and other high bytes, tabs and backslashes can be arguments.
  for (const auto& k :
       {std::string("\xff"), std::string("\xff\xfe\x80"), std::string("tab\there"), std::string("back\\x00slash")}) {
    std::string v = "v" + k;
    REQUIRE(tool(dir, {"put", k, v}).exit_code == 0);
    auto g = tool(dir, {"get", k});
    CHECK(g.exit_code == 0);
    CHECK(g.out == v + "\n");  // get prints the value's bytes as they are
    model[k] = v;
  }
  CHECK(scanned_by_tool(dir) == model);
  auto raw = tool(dir, {"scan", "--limit", "1"});
  CHECK(raw.out.starts_with("\\x00\t"));  // NUL sorts first, escaped
  auto high = scanned_by_tool(dir, {"--prefix", "\xff"});
  CHECK(high.size() == 3);
  CHECK(high.count(std::string("\xff\0", 2)) == 1);
  auto reversed = tool(dir, {"scan", "--reverse", "--limit", "1"});
  CHECK(reversed.out.starts_with("\\xff\\xfe\\x80\t"));
}

TEST_CASE(
    "bad input, tool: a data directory that is a file, a newer MANIFEST, a newer log segment or pack, or a "
    "read-only directory: every command refuses, names the path, and changes nothing") {
  watchdog w("tool directories", 600s);
  testing::temp_dir d("bad-tool-dirs");
  fs::permissions(d.path(), fs::perms(0755));
  std::string dir = d.path() + "/db";
  auto model = make_settled_database(dir, 3);

  // `verify` reports a store that does not open for corruption as damage
  // (exit 1, on stdout): an answer, not an error (docs/cli.md).
  auto every_command_refuses = [&](const std::string& data, std::initializer_list<std::string_view> parts,
                                   std::vector<std::string> wrapper = {}, bool verify_says_damage = false) {
    auto before = files_in(data);
    for (const auto& cmd : every_command()) {
      CAPTURE(joined(cmd));
      auto r = tool(data, cmd, wrapper);
      if (verify_says_damage && cmd[0] == "verify") {
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 1);
        CHECK(r.out.starts_with("damage: "));
        for (auto p : parts) CHECK_MESSAGE(contains(r.out, p), r.out);
      } else {
        check_refused(r, parts);
      }
      CHECK_UNCHANGED(before, data);
    }
  };

  SUBCASE("a regular file") {
    std::string file = d.path() + "/plain-file";
    write_bytes(file, "hello\n");
    every_command_refuses(file, {"invalid argument", file, "not a directory"});
    every_command_refuses(file + "/sub", {"invalid argument", file, "not a directory"});
    CHECK(read_bytes(file) == "hello\n");
  }
  SUBCASE("a MANIFEST of a newer version") {
    write_bytes(dir + "/MANIFEST", "magnetite-manifest 2\nshards 3\n");
    every_command_refuses(dir, {"not supported", dir + "/MANIFEST", "format version 2"});
    write_bytes(dir + "/MANIFEST", "magnetite-manifest 1\nshards 3\n");
  }
  SUBCASE("a MANIFEST that records fewer shards than the directory holds") {
    write_bytes(dir + "/MANIFEST", "magnetite-manifest 1\nshards 2\n");
    every_command_refuses(dir, {dir + "/MANIFEST", "records 2 shards", dir + "/shard-002"}, {}, true);
    write_bytes(dir + "/MANIFEST", "magnetite-manifest 1\nshards 3\n");
  }
  SUBCASE("a log segment of a newer version") {
    std::string segment = find_file(dir + "/shard-002/wal", ".wal", true);
    std::string original = read_bytes(segment);
    make_header_newer(segment, wal::format_version + 1);
    every_command_refuses(
        dir, {"not supported", segment, "WAL segment", fmt::format("format version {}", wal::format_version + 1)});
    write_bytes(segment, original);
  }
  SUBCASE("a pack of a newer version") {
    std::string pack = find_file(dir + "/shard-000/nodes", ".pack", true);
    std::string original = read_bytes(pack);
    make_header_newer(pack, tree::pack_format_version + 1);
    every_command_refuses(dir,
                          {"not supported", pack, fmt::format("format version {}", tree::pack_format_version + 1)});
    write_bytes(pack, original);
  }
  SUBCASE("read-only: permission bits") {
    set_writable(dir, false);
    std::vector<std::string> wrapper;
    if (::geteuid() == 0) {
      // Root ignores permission bits: run the tool as nobody.
      wrapper = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
      MESSAGE("running as root: the tool runs as nobody (setpriv) against a chmod 0555/0444 directory");
    }
    every_command_refuses(dir, {"I/O error", dir + "/", "Permission denied"}, wrapper);
    set_writable(dir, true);
  }
  SUBCASE("read-only: a read-only bind mount (unprivileged user namespace), which binds root too") {
    auto probe =
        run_argv({"unshare", "-rm", "sh", "-c", "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\"", dir});
    if (probe.exit_code != 0) {
      MESSAGE(fmt::format("no unprivileged user namespaces with mounts here ({}): case skipped", probe.err));
    } else {
      std::vector<std::string> wrapper{
          "unshare", "-rm", "sh", "-c", "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && exec \"$@\"",
          dir};
      every_command_refuses(dir, {"I/O error", dir + "/", "Read-only file system"}, wrapper);
    }
  }
  // Whatever was done, the database reads as before.
  CHECK(scanned_by_tool(dir) == model);
  CHECK(tool(dir, {"verify"}).exit_code == 0);
}
