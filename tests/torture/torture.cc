// torture: kill -9 at random moments, restart, and check the whole database
// against what was acknowledged (issue 6). One binary, two roles:
//
//   torture [--seed S] [--iterations N] [--shards N] [--threads N] [--keys N]
//           [--mix put,del,cas,batch,ttl] [--dir D] [--verify-every N]
//   torture --worker DIR SHARDS THREADS KEYS FIRST_SEQ SEED MIX   (started by the driver)
//
// The worker opens the database and runs a mixed workload from THREADS writer
// threads. Each key belongs to one thread, so at most one operation per key
// is in flight: before an operation the thread reports "B ..." on stdout and
// after its acknowledgement "A ..." (one write(2) a line, atomic on a pipe).
// Two more threads commit (checkpoint every shard) and run gc now and then,
// reporting "B commit"/"B gc". Checkpoints also happen on their own (the
// worker's checkpoint threshold is small).
//
// The driver starts a worker, kills it with SIGKILL at a random moment (after
// a random delay, or just as a commit or a gc begins), opens the database
// itself and checks every key:
//   - a key's value is what its last acknowledged operation left, or what its
//     one unacknowledged operation would leave (nothing else, never damaged);
//   - an unacknowledged batch is all there or not at all;
//   - a key written with a TTL whose deadline has surely passed is absent, one
//     whose deadline surely has not is present;
//   - no key the workload never wrote exists;
// and every --verify-every iterations, database::verify() finds no damage.
// It prints its figures and exits 1 on any violation.
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "actors/database.h"

using namespace magnetite;
using namespace std::chrono_literals;

namespace {

std::uint64_t wall_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

database_options torture_options(const std::string& dir, std::size_t shards) {
  database_options o;
  o.dir = dir;
  o.shards = shards;
  o.shard.checkpoint_bytes = 16 << 10;  // checkpoints of their own, often
  o.shard.chunking = {512, 128, 2048};  // small nodes: deeper trees
  return o;
}

std::string key_name(int thread, int k) { return fmt::format("t{}-k{:03}", thread, k); }

// A value names its key and the operation's sequence number, then pads; the
// driver tells every write apart and recognises damage.
std::string value_of(const std::string& key, std::uint64_t seq) {
  return fmt::format("{}|{}|{}", key, seq, std::string(seq % 97, static_cast<char>('a' + seq % 26)));
}

std::optional<std::uint64_t> seq_of(const std::string& key, const std::string& v) {
  auto bar1 = v.find('|');
  if (bar1 == std::string::npos || v.substr(0, bar1) != key) return std::nullopt;
  std::uint64_t seq = std::strtoull(v.c_str() + bar1 + 1, nullptr, 10);
  if (v != value_of(key, seq)) return std::nullopt;
  return seq;
}

struct mix {
  bool put = true, del = true, cas = true, batch = true, ttl = true;
};

mix parse_mix(const std::string& text) {
  mix m{false, false, false, false, false};
  std::stringstream in(text);
  for (std::string op; std::getline(in, op, ',');) {
    if (op == "put") m.put = true;
    else if (op == "del") m.del = true;
    else if (op == "cas") m.cas = true;
    else if (op == "batch") m.batch = true;
    else if (op == "ttl") m.ttl = true;
    else {
      fmt::print(stderr, "torture: unknown operation in --mix: {}\n", op);
      std::exit(2);
    }
  }
  if (!m.put && !m.del && !m.cas && !m.batch && !m.ttl) m.put = true;
  return m;
}

void report(const std::string& line) {
  std::string l = line + '\n';
  if (::write(1, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(5);
}

[[noreturn]] void fail(const std::string& what, const status& s) {
  report(fmt::format("E {}: {}", what, s.to_string()));
  _exit(4);
}

// ---- worker ------------------------------------------------------------------

[[noreturn]] void run_worker(const std::string& dir, std::size_t shards, int threads, int keys, std::uint64_t first_seq,
                             std::uint64_t seed, mix m) {
  auto opened = database::open(torture_options(dir, shards));
  if (!opened) fail("open", opened.error());
  database& db = **opened;
  report("R");
  std::atomic<std::uint64_t> next_seq{first_seq};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(t));
      // This thread's keys, what it last saw of them (for CAS), by shard (for batches).
      std::map<std::string, std::optional<std::string>> seen;
      // Keys whose value may have expired since (a TTL write, or unknown since
      // the restart): a CAS on them may fail without anything being wrong.
      std::set<std::string> may_expire;
      std::map<std::size_t, std::vector<std::string>> by_shard;
      for (int k = 0; k < keys; ++k) {
        std::string key = key_name(t, k);
        auto v = db.get(key);
        if (!v) fail("get " + key, v.error());
        seen[key] = *v;
        may_expire.insert(key);
        by_shard[db.shard_of(key)].push_back(key);
      }
      std::vector<int> ops;
      if (m.put) ops.insert(ops.end(), {0, 0, 0});
      if (m.del) ops.push_back(1);
      if (m.cas) ops.push_back(2);
      if (m.batch) ops.push_back(3);
      if (m.ttl) ops.push_back(4);
      for (;;) {
        std::string key = key_name(t, static_cast<int>(rng() % static_cast<std::uint64_t>(keys)));
        std::uint64_t seq = next_seq.fetch_add(1);
        switch (ops[rng() % ops.size()]) {
          case 0: {
            report(fmt::format("B {} put {} {}", t, key, seq));
            if (auto s = db.put(key, value_of(key, seq)); !s) fail("put", s);
            seen[key] = value_of(key, seq);
            may_expire.erase(key);
            report(fmt::format("A {}", t));
            break;
          }
          case 1: {
            report(fmt::format("B {} del {} {}", t, key, seq));
            if (auto s = db.del(key); !s) fail("del", s);
            seen[key] = std::nullopt;
            may_expire.erase(key);
            report(fmt::format("A {}", t));
            break;
          }
          case 2: {
            // Mostly a CAS that should swap (expecting what this thread last
            // saw), sometimes one that must fail (expecting a value never written).
            bool wrong = rng() % 4 == 0;
            std::optional<std::string> expected = wrong ? std::optional<std::string>("never") : seen[key];
            report(fmt::format("B {} cas {} {}", t, key, seq));
            auto r = db.cas(key, expected, value_of(key, seq));
            if (!r) fail("cas", r.error());
            if (r->swapped && wrong) {
              report(fmt::format("E cas on {} {} but the thread expected otherwise", key,
                                 r->swapped ? "swapped" : "failed"));
              _exit(6);
            }
            if (!r->swapped && !wrong && !may_expire.count(key)) {
              report(fmt::format("E cas on {} failed though nothing else writes it", key));
              _exit(6);
            }
            if (r->swapped) {
              seen[key] = value_of(key, seq);
              may_expire.erase(key);
            } else {
              seen[key] = r->current;
            }
            report(fmt::format("A {} {}", t, r->swapped ? "swapped" : "failed"));
            break;
          }
          case 3: {
            // An atomic batch over keys of one shard: puts and deletes.
            auto& group = by_shard[db.shard_of(key)];
            std::vector<batch_write> writes;
            std::string line = fmt::format("B {} batch", t);
            std::set<std::string> taken;
            std::size_t n = 1 + rng() % std::min<std::size_t>(group.size(), 6);
            for (std::size_t i = 0; i < n; ++i) {
              const std::string& k = group[rng() % group.size()];
              if (!taken.insert(k).second) continue;
              std::uint64_t s = next_seq.fetch_add(1);
              bool del = rng() % 4 == 0;
              writes.push_back({k, del ? std::nullopt : std::optional<std::string>(value_of(k, s)), std::nullopt});
              line += fmt::format(" {} {}", k, del ? 0 : s);
            }
            report(line);
            if (auto s = db.batch(writes, writes.front().key); !s) fail("batch", s);
            for (const auto& w : writes) {
              seen[w.key] = w.value;
              may_expire.erase(w.key);
            }
            report(fmt::format("A {}", t));
            break;
          }
          case 4: {
            std::uint64_t ttl_ms = 50 + rng() % 2000;
            report(fmt::format("B {} ttl {} {} {} {}", t, key, seq, ttl_ms, wall_ms()));
            if (auto s = db.put(key, value_of(key, seq), std::chrono::milliseconds(ttl_ms)); !s) fail("ttl put", s);
            seen[key] = value_of(key, seq);
            may_expire.insert(key);
            report(fmt::format("A {} {}", t, wall_ms()));
            break;
          }
        }
      }
    });
  // Commits and gcs, so that kills land in them too.
  std::thread maintenance([&] {
    std::mt19937_64 rng(seed);
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
      if (rng() % 3 == 0) {
        report("B gc");
        if (auto r = db.gc(); !r) fail("gc", r.error());
        report("A gc");
      } else {
        report("B commit");
        if (auto r = db.commit(); !r) fail("commit", r.error());
        report("A commit");
      }
    }
  });
  for (auto& th : ts) th.join();
  _exit(0);
}

// ---- driver ------------------------------------------------------------------

// What the driver knows of one key.
struct key_state {
  // The last acknowledged outcome: nullopt absent, else the write's seq.
  std::optional<std::uint64_t> acked;
  // For a TTL write: the deadline lies in [earliest, latest] (wall ms).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> deadline;
  bool ever_written = false;
};

// An operation begun and not yet acknowledged.
struct pending_op {
  std::string kind;  // put del cas batch ttl
  std::vector<std::pair<std::string, std::uint64_t>> writes;  // key, seq (0: delete)
  std::uint64_t ttl_ms = 0, began_ms = 0;
};

struct figures {
  std::uint64_t iterations = 0, acks = 0, keys_checked = 0, pending_applied = 0, pending_absent = 0;
  std::uint64_t killed_in_gc = 0, killed_in_commit = 0, verifies = 0, violations = 0;
};

class driver {
 public:
  driver(std::string dir, std::size_t shards, int threads, int keys, mix m)
      : dir_(std::move(dir)), shards_(shards), threads_(threads), keys_(keys), mix_(m) {}

  // One worker run: start, kill, check. False on a violation.
  bool iteration(std::uint64_t iter, std::mt19937_64& rng, figures& fig, bool verify) {
    int out[2];
    if (::pipe(out) != 0) return violation("pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) return violation("fork failed");
    std::uint64_t first_seq = (iter + 1) << 32;
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
      std::string mixs = fmt::format("{}{}{}{}{}", mix_.put ? "put," : "", mix_.del ? "del," : "",
                                     mix_.cas ? "cas," : "", mix_.batch ? "batch," : "", mix_.ttl ? "ttl" : "");
      ::execl(self.c_str(), self.c_str(), "--worker", dir_.c_str(), std::to_string(shards_).c_str(),
              std::to_string(threads_).c_str(), std::to_string(keys_).c_str(), std::to_string(first_seq).c_str(),
              std::to_string(rng()).c_str(), mixs.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(out[1]);
    // When to kill: a random time after the worker is ready, or as soon as it
    // begins a gc or a commit.
    int mode = static_cast<int>(rng() % 4);  // 0, 1: delay; 2: in gc; 3: in commit
    auto delay = std::chrono::microseconds(rng() % 400'000);
    std::string buffer;
    bool ready = false, killed = false;
    std::optional<std::chrono::steady_clock::time_point> kill_at;
    auto give_up = std::chrono::steady_clock::now() + 60s;
    std::size_t parsed = 0;
    std::string error;
    while (!killed) {
      pollfd p{out[0], POLLIN, 0};
      int wait_ms = 10;
      if (::poll(&p, 1, wait_ms) > 0) {
        char chunk[8192];
        ssize_t n = ::read(out[0], chunk, sizeof chunk);
        if (n <= 0) break;  // the worker died by itself
        buffer.append(chunk, static_cast<std::size_t>(n));
      }
      for (std::size_t nl; (nl = buffer.find('\n', parsed)) != std::string::npos; parsed = nl + 1) {
        std::string line = buffer.substr(parsed, nl - parsed);
        if (line == "R" && !ready) {
          ready = true;
          if (mode <= 1) kill_at = std::chrono::steady_clock::now() + delay;
        }
        if (line.starts_with("E ")) error = line;
        if (!killed && ((mode == 2 && line == "B gc") || (mode == 3 && line == "B commit"))) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
          ::kill(pid, SIGKILL);
          killed = true;
          (mode == 2 ? fig.killed_in_gc : fig.killed_in_commit)++;
        }
      }
      auto now = std::chrono::steady_clock::now();
      if (!killed && ((kill_at && now >= *kill_at) || now >= give_up)) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    if (!killed) ::kill(pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    char chunk[8192];
    for (ssize_t n; (n = ::read(out[0], chunk, sizeof chunk)) > 0;) buffer.append(chunk, static_cast<std::size_t>(n));
    ::close(out[0]);
    if (!error.empty()) return violation("the worker reported: " + error);
    if (!WIFSIGNALED(wstatus)) return violation(fmt::format("the worker exited by itself (status {})", wstatus));
    replay(buffer, fig);
    return check(fig, verify);
  }

  bool violation(const std::string& what) {
    fmt::print(stderr, "torture: VIOLATION: {}\n", what);
    ++violations_;
    return false;
  }
  std::uint64_t violations() const { return violations_; }

 private:
  // Applies the reported lines to the model: complete lines only (a line cut
  // by the kill was never acknowledged to anyone).
  void replay(const std::string& buffer, figures& fig) {
    std::size_t at = 0;
    for (std::size_t nl; (nl = buffer.find('\n', at)) != std::string::npos; at = nl + 1) {
      std::istringstream in(buffer.substr(at, nl - at));
      std::string tag, who;
      in >> tag >> who;
      if ((tag != "B" && tag != "A") || who == "gc" || who == "commit" || who.empty()) continue;
      int t = std::stoi(who);
      if (tag == "B") {
        pending_op op;
        in >> op.kind;
        if (op.kind == "batch") {
          std::string k;
          std::uint64_t s;
          while (in >> k >> s) op.writes.emplace_back(k, s);
        } else {
          std::string k;
          std::uint64_t s;
          in >> k >> s;
          op.writes.emplace_back(k, op.kind == "del" ? 0 : s);
          if (op.kind == "ttl") in >> op.ttl_ms >> op.began_ms;
        }
        pending_[t] = op;
        continue;
      }
      // An acknowledgement of thread t's pending operation.
      auto it = pending_.find(t);
      if (it == pending_.end()) continue;
      pending_op op = std::move(it->second);
      pending_.erase(it);
      ++fig.acks;
      std::string result;
      in >> result;
      if (op.kind == "cas" && result == "failed") continue;
      for (const auto& [k, s] : op.writes) {
        auto& st = model_[k];
        st.ever_written = true;
        st.acked = s ? std::optional<std::uint64_t>(s) : std::nullopt;
        st.deadline.reset();
        if (op.kind == "ttl") {
          std::uint64_t acked_ms = std::strtoull(result.c_str(), nullptr, 10);
          st.deadline = std::make_pair(op.began_ms + op.ttl_ms, acked_ms + op.ttl_ms);
        }
      }
    }
  }

  // What a key may read as, given one outcome: the seq present, or absent.
  // `now` decides TTL outcomes that are certain. Returns whether `found` fits.
  static bool fits(const std::optional<std::uint64_t>& outcome,
                   const std::optional<std::pair<std::uint64_t, std::uint64_t>>& deadline,
                   const std::optional<std::uint64_t>& found, std::uint64_t before_ms, std::uint64_t after_ms) {
    if (!outcome) return !found;
    if (deadline) {
      // Surely expired: the read began after the latest possible deadline
      // (margin for clock steps: none needed, one machine, one clock).
      if (before_ms > deadline->second) return !found;
      if (after_ms < deadline->first) return found == outcome;
      return !found || found == outcome;
    }
    return found == outcome;
  }

  bool check(figures& fig, bool verify) {
    auto opened = database::open(torture_options(dir_, shards_));
    if (!opened) return violation("reopen: " + opened.error().to_string());
    database& db = **opened;
    bool ok = true;
    // Keys of an unacknowledged operation: either outcome, but a batch all one way.
    std::map<std::string, const pending_op*> pending_key;
    for (const auto& [t, op] : pending_) {
      (void)t;
      for (const auto& [k, s] : op.writes) pending_key[k] = &op;
    }
    std::map<const pending_op*, std::pair<int, int>> batch_votes;  // applied, not applied (unambiguous keys)
    for (int t = 0; t < threads_; ++t)
      for (int k = 0; k < keys_; ++k) {
        std::string key = key_name(t, k);
        std::uint64_t before = wall_ms();
        auto v = db.get(key);
        std::uint64_t after = wall_ms();
        if (!v) return violation("get " + key + ": " + v.error().to_string());
        std::optional<std::uint64_t> found;
        if (*v) {
          found = seq_of(key, **v);
          if (!found) {
            ok = violation(fmt::format("{} holds a damaged value ({} bytes)", key, (*v)->size()));
            continue;
          }
        }
        ++fig.keys_checked;
        auto& st = model_[key];
        bool as_acked = fits(st.acked, st.deadline, found, before, after);
        auto p = pending_key.find(key);
        if (p == pending_key.end()) {
          if (!as_acked)
            ok = violation(fmt::format("{}: found {} but the last acknowledged write left {}", key,
                                       found ? std::to_string(*found) : "nothing",
                                       st.acked ? std::to_string(*st.acked) : "nothing"));
          continue;
        }
        const pending_op& op = *p->second;
        std::optional<std::uint64_t> would;
        for (const auto& [k2, s] : op.writes)
          if (k2 == key) would = s ? std::optional<std::uint64_t>(s) : std::nullopt;
        std::optional<std::pair<std::uint64_t, std::uint64_t>> would_deadline;
        if (op.kind == "ttl") would_deadline = std::make_pair(op.began_ms + op.ttl_ms, after + op.ttl_ms);
        bool as_applied = fits(would, would_deadline, found, before, after);
        if (!as_acked && !as_applied) {
          ok = violation(fmt::format("{}: found {}, neither the acknowledged state nor its pending {}", key,
                                     found ? std::to_string(*found) : "nothing", op.kind));
          continue;
        }
        if (as_applied && !as_acked) batch_votes[&op].first++;
        if (as_acked && !as_applied) batch_votes[&op].second++;
        // The pending operation's outcome becomes the known state.
        if (as_applied && !as_acked) {
          st.acked = would;
          st.deadline = would_deadline;
          st.ever_written = true;
          ++fig.pending_applied;
        } else if (!as_applied) {
          ++fig.pending_absent;
        }
      }
    for (const auto& [op, votes] : batch_votes)
      if (votes.first && votes.second)
        ok = violation(fmt::format("a {} of {} keys is half applied ({} applied, {} not)", op->kind, op->writes.size(),
                                   votes.first, votes.second));
    pending_.clear();
    // Nothing the workload never wrote.
    auto scan = db.scan("", "");
    if (!scan) return violation("scan: " + scan.error().to_string());
    for (auto more = scan->next();; more = scan->next()) {
      if (!more) return violation("scan: " + more.error().to_string());
      if (!*more) break;
      auto it = model_.find(scan->key());
      if (it == model_.end() || !it->second.ever_written) ok = violation("a key nobody wrote: " + scan->key());
    }
    if (verify) {
      ++fig.verifies;
      auto r = db.verify();
      if (!r) return violation("verify: " + r.error().to_string());
      for (const auto& p : r->problems) ok = violation("verify: " + p);
    }
    return ok;
  }

  std::string dir_;
  std::size_t shards_;
  int threads_, keys_;
  mix mix_;
  std::map<std::string, key_state> model_;
  std::map<int, pending_op> pending_;
  std::uint64_t violations_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--worker") {
    if (args.size() != 8) return 2;
    run_worker(args[1], std::stoul(args[2]), std::stoi(args[3]), std::stoi(args[4]), std::stoull(args[5]),
               std::stoull(args[6]), parse_mix(args[7]));
  }
  std::uint64_t seed = 1, iterations = 100, verify_every = 10;
  std::size_t shards = 3;
  int threads = 4, keys = 40;
  std::string dir, mix_text = "put,del,cas,batch,ttl";
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "torture: {} needs a value\n", args[i]);
        std::exit(2);
      }
      return args[++i];
    };
    if (args[i] == "--seed") seed = std::stoull(value());
    else if (args[i] == "--iterations") iterations = std::stoull(value());
    else if (args[i] == "--shards") shards = std::stoul(value());
    else if (args[i] == "--threads") threads = std::stoi(value());
    else if (args[i] == "--keys") keys = std::stoi(value());
    else if (args[i] == "--mix") mix_text = value();
    else if (args[i] == "--dir") dir = value();
    else if (args[i] == "--verify-every") verify_every = std::max<std::uint64_t>(1, std::stoull(value()));
    else {
      fmt::print(stderr, "torture: unknown argument {}\n", args[i]);
      return 2;
    }
  }
  if (shards < 1 || threads < 1 || keys < 1) {
    fmt::print(stderr, "torture: --shards, --threads and --keys must be at least 1\n");
    return 2;
  }
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string pattern = (std::filesystem::temp_directory_path() / "magnetite-torture-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return 2;
    dir = pattern + "/db";
  }
  mix m = parse_mix(mix_text);
  driver d(dir, shards, threads, keys, m);
  std::mt19937_64 rng(seed);
  figures fig;
  auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < iterations; ++i) {
    bool verify = (i + 1) % verify_every == 0 || i + 1 == iterations;
    if (!d.iteration(i, rng, fig, verify)) fmt::print(stderr, "torture: iteration {} (seed {}) failed\n", i, seed);
    ++fig.iterations;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fig.violations = d.violations();
  fmt::print("torture: seed {}, {} iterations in {:.1f} s, {} shards, {} threads x {} keys, mix {}\n", seed,
             fig.iterations, seconds, shards, threads, keys, mix_text);
  fmt::print("torture: {} acknowledged operations, {} key checks, unacknowledged operations found applied {} / absent "
             "{}, killed in gc {}, in commit {}, verify runs {}\n",
             fig.acks, fig.keys_checked, fig.pending_applied, fig.pending_absent, fig.killed_in_gc,
             fig.killed_in_commit, fig.verifies);
  fmt::print("torture: {} violations\n", fig.violations);
  if (own_dir) std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  return fig.violations ? 1 : 0;
}
