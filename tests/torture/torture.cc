// torture: kill -9 at random moments, restart, and check the whole database
// against what was acknowledged (issue 6). One binary, two roles:
//
//   torture [--seed S] [--iterations N] [--shards N] [--threads N] [--keys N]
//           [--mix put,del,cas,batch,ttl,txn,xtxn,stream,keyed] [--dir D] [--verify-every N]
//   torture --worker DIR SHARDS THREADS KEYS FIRST_SEQ SEED MIX   (started by the driver)
//
// The worker opens the database and runs a mixed workload from THREADS writer
// threads. Each key belongs to one thread, so at most one operation per key
// is in flight: before an operation the thread reports "B ..." on stdout and
// after its acknowledgement "A ..." (one write(2) a line, atomic on a pipe).
// The same holds for state/: thread t alone writes the records of namespace
// "t<t>" (txn: a transaction loads 1-3 of its txn_keys keys, puts 1-3 and
// sometimes deletes one, commits; "A" carries the commit's revision) and alone
// appends to stream "s<t>" (stream: 1-4 entries at the seq the thread tracks)
// and alone owns the keyed state of owner "t<t>" in namespace "keyed"
// (state/keyed_state.h; keyed: 1-5 buffered calls on its value "v", map "m"
// and deque "q" of capacity 8, then ONE owner_state::commit(), so the
// unacknowledged operation spans several collections in one frame; "B"
// carries the owner's whole state after it, and before buffering the thread
// checks its handles read back what it last committed).
// Thread t alone also moves record "n" of its two transfer namespaces, on two
// shards ("x<t>a" and the first "x<t>b<i>" on another shard; xtxn: load both,
// put both with one new seq, commit two-phase: "B t xtxn seq").
// With one writer neither can conflict, so any error but the kill is a
// violation, and so is a load that does not return what the thread last
// committed. Two more threads commit (checkpoint every shard) and run gc now
// and then, reporting "B commit"/"B gc". Checkpoints also happen on their own
// (the worker's checkpoint threshold is small).
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
// every record (records::load):
//   - holds what the thread's last acknowledged transaction left, or what its
//     one unacknowledged transaction would leave, never a damaged value; an
//     unacknowledged transaction is applied on all its keys or on none;
//   - carries the revision of the commit that wrote it: the one its "A" line
//     printed, or for an unacknowledged transaction found applied one revision
//     shared by all its keys; a thread's commits have increasing revisions;
// the two transfer records of every thread:
//   - hold the same seq (or are both absent): the last acknowledged transfer's
//     or the unacknowledged one's, whatever step of its two-phase commit the
//     kill hit;
// every stream:
//   - next_seq is the number of acknowledged entries, or that plus the size
//     of the one unacknowledged append (all or nothing); no entry lies past it;
//   - every entry 0..next_seq-1 is present (a raw scan of the state space) and
//     holds what was appended there (streams::read in pages of 1000: the
//     entries appended since the previous check, and all of them every
//     --verify-every iterations);
// every owner's keyed state (fresh handles: value get, map scan, deque scan
// and len):
//   - is what the thread's last acknowledged commit left, or what its one
//     unacknowledged commit would leave: value, map and deque all from the
//     same side (a frame lands whole), never damaged;
// no state key (record, stream meta or entry, keyed value, map entry or deque
// slot) exists that the workload never wrote; and every --verify-every
// iterations, database::verify() finds no damage. It prints its figures and
// exits 1 on any violation.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actors/database_core.h"
#include "core/limits.h"
#include "engine/keyspace.h"
#include "engine/state_space.h"
#include "magnetite/state/keyed_state.h"
#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
#include "state/layout.h"

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
  // Reclamation cycles often, in small steps, so that kills land in them.
  o.shard.reclaim_min_bytes = 64 << 10;
  o.shard.reclaim_step_bytes = 4 << 10;
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

// ---- state/: records and streams -----------------------------------------------

// Thread t's records live in namespace "t<t>" under txn_keys keys; few keys,
// so transactions overlap on them and a check reads them all cheaply.
constexpr int txn_keys = 8;

std::string txn_ns(int thread) { return fmt::format("t{}", thread); }
std::string record_name(int k) { return fmt::format("r{:02}", k); }
std::string stream_name(int thread) { return fmt::format("s{}", thread); }

// Thread t's two transfer namespaces, on two shards when there are two.
std::array<std::string, 2> xtxn_namespaces(const state::records& recs, int thread) {
  std::array<std::string, 2> ns{fmt::format("x{}a", thread), fmt::format("x{}b0", thread)};
  for (int i = 1; i < 64 && recs.shard_of(ns[1]) == recs.shard_of(ns[0]); ++i) ns[1] = fmt::format("x{}b{}", thread, i);
  return ns;
}
constexpr const char* xtxn_key = "n";

// A record's value names its namespace, key and the transaction's sequence
// number, then pads (as value_of): the driver tells every write apart and
// recognises damage.
state::json record_value(const std::string& ns, const std::string& key, std::uint64_t seq) {
  return state::json{
      {"ns", ns}, {"key", key}, {"seq", seq}, {"pad", std::string(seq % 41, static_cast<char>('a' + seq % 26))}};
}

std::optional<std::uint64_t> record_seq_of(const std::string& ns, const std::string& key, const state::item& v) {
  const auto* j = std::get_if<state::json>(&v);
  if (!j || !j->is_object() || !j->contains("seq") || !j->at("seq").is_number_unsigned()) return std::nullopt;
  std::uint64_t seq = j->at("seq").get<std::uint64_t>();
  if (*j != record_value(ns, key, seq)) return std::nullopt;
  return seq;
}

// A stream entry names its stream, its own seq and the append's sequence
// number: what sits at every seq is known exactly.
state::json entry_value(const std::string& stream, std::uint64_t at, std::uint64_t op_seq) {
  return state::json{{"stream", stream},
                     {"at", at},
                     {"op", op_seq},
                     {"pad", std::string(op_seq % 23, static_cast<char>('a' + at % 26))}};
}

// Thread t alone owns the keyed state of owner "t<t>" in namespace "keyed": a
// value "v", a map "m" over keyed_map_keys keys and a deque "q" of capacity
// keyed_capacity (a push at capacity evicts from the other end).
constexpr int keyed_map_keys = 5;
constexpr std::uint64_t keyed_capacity = 8;
const std::string keyed_ns = "keyed";
std::string keyed_owner(int thread) { return fmt::format("t{}", thread); }

// An item of keyed state names its owner, its place ("v", "m/<key>" or "q")
// and the operation's sequence number and call within it ("<op>.<n>", its
// token): every write is recognisable, damage and misplacement too.
state::json keyed_item(const std::string& owner, const std::string& place, std::uint64_t op, std::uint64_t n) {
  return state::json{{"owner", owner},
                     {"at", place},
                     {"op", op},
                     {"n", n},
                     {"pad", std::string(op % 29, static_cast<char>('a' + n % 26))}};
}

std::optional<std::string> keyed_token(const std::string& owner, const std::string& place, const state::item& v) {
  const auto* j = std::get_if<state::json>(&v);
  if (!j || !j->is_object() || !j->contains("op") || !j->at("op").is_number_unsigned() || !j->contains("n") ||
      !j->at("n").is_number_unsigned())
    return std::nullopt;
  std::uint64_t op = j->at("op").get<std::uint64_t>(), n = j->at("n").get<std::uint64_t>();
  if (*j != keyed_item(owner, place, op, n)) return std::nullopt;
  return fmt::format("{}.{}", op, n);
}

// One owner's three collections, by token: what a commit leaves, compared
// whole (the three are one frame: all of them from the same side).
struct keyed_model {
  std::optional<std::string> value;
  std::map<std::string, std::string> map;  // key -> token
  std::vector<std::string> deque;          // front first
  friend bool operator==(const keyed_model&, const keyed_model&) = default;
};

// "v=<token|-> m=<key:token,...|-> q=<token,...|->": the B line's payload.
std::string show_keyed(const keyed_model& k) {
  std::vector<std::string> entries;
  for (const auto& [key, tok] : k.map) entries.push_back(key + ":" + tok);
  return fmt::format("v={} m={} q={}", k.value.value_or("-"),
                     entries.empty() ? "-" : fmt::format("{}", fmt::join(entries, ",")),
                     k.deque.empty() ? "-" : fmt::format("{}", fmt::join(k.deque, ",")));
}

std::optional<keyed_model> parse_keyed(std::istream& in) {
  std::string v, m, q;
  if (!(in >> v >> m >> q) || !v.starts_with("v=") || !m.starts_with("m=") || !q.starts_with("q=")) return std::nullopt;
  keyed_model k;
  if (v != "v=-") k.value = v.substr(2);
  auto split = [](const std::string& text) {
    std::vector<std::string> parts;
    if (text == "-") return parts;
    std::stringstream s(text);
    for (std::string part; std::getline(s, part, ',');) parts.push_back(part);
    return parts;
  };
  for (const auto& e : split(m.substr(2))) {
    auto colon = e.find(':');
    if (colon == std::string::npos) return std::nullopt;
    k.map[e.substr(0, colon)] = e.substr(colon + 1);
  }
  k.deque = split(q.substr(2));
  return k;
}

// The owner's state read through the handles: value get, map scan, deque
// scan and len (which must agree: no TTL). An error or damage is a message.
struct keyed_read {
  keyed_model state;
  std::string error;  // empty: read and recognised
};

keyed_read read_keyed(const state::value_handle& v, const state::map_handle& m, const state::deque_handle& q,
                      const std::string& owner) {
  keyed_read r;
  auto show_item = [](const state::item& x) {
    return std::holds_alternative<state::json>(x) ? std::get<state::json>(x).dump().substr(0, 200) : "raw bytes";
  };
  auto got = v.get();
  if (!got) return {{}, "value get: " + got.error().to_string()};
  if (*got) {
    r.state.value = keyed_token(owner, "v", **got);
    if (!r.state.value) return {{}, "the value holds a damaged item: " + show_item(**got)};
  }
  auto entries = m.scan();
  if (!entries) return {{}, "map scan: " + entries.error().to_string()};
  for (;;) {
    auto chunk = entries->next_chunk(64);
    if (!chunk) return {{}, "map scan: " + chunk.error().to_string()};
    if (chunk->empty()) break;
    for (const auto& e : *chunk) {
      auto tok = keyed_token(owner, "m/" + e.key, e.value);
      if (!tok) return {{}, fmt::format("map key {} holds a damaged item: {}", e.key, show_item(e.value))};
      if (!r.state.map.emplace(e.key, *tok).second) return {{}, "map scan gave key " + e.key + " twice"};
    }
  }
  auto items = q.scan();
  if (!items) return {{}, "deque scan: " + items.error().to_string()};
  for (;;) {
    auto chunk = items->next_chunk(64);
    if (!chunk) return {{}, "deque scan: " + chunk.error().to_string()};
    if (chunk->empty()) break;
    for (const auto& x : *chunk) {
      auto tok = keyed_token(owner, "q", x);
      if (!tok) return {{}, "the deque holds a damaged item: " + show_item(x)};
      r.state.deque.push_back(*tok);
    }
  }
  auto len = q.len();
  if (!len) return {{}, "deque len: " + len.error().to_string()};
  if (*len != r.state.deque.size())
    return {{}, fmt::format("deque len is {} but its scan gave {} items", *len, r.state.deque.size())};
  return r;
}

// ---- options ---------------------------------------------------------------------

struct mix {
  bool put = true, del = true, cas = true, batch = true, ttl = true, txn = true, stream = true, keyed = true;
  bool xtxn = true;
};

mix parse_mix(const std::string& text) {
  mix m{false, false, false, false, false, false, false, false, false};
  std::stringstream in(text);
  for (std::string op; std::getline(in, op, ',');) {
    if (op == "put")
      m.put = true;
    else if (op == "del")
      m.del = true;
    else if (op == "cas")
      m.cas = true;
    else if (op == "batch")
      m.batch = true;
    else if (op == "ttl")
      m.ttl = true;
    else if (op == "txn")
      m.txn = true;
    else if (op == "xtxn")
      m.xtxn = true;
    else if (op == "stream")
      m.stream = true;
    else if (op == "keyed")
      m.keyed = true;
    else {
      fmt::print(stderr, "torture: unknown operation in --mix: {}\n", op);
      std::exit(2);
    }
  }
  if (!m.put && !m.del && !m.cas && !m.batch && !m.ttl && !m.txn && !m.xtxn && !m.stream && !m.keyed) m.put = true;
  return m;
}

// The --mix text that parse_mix reads back as m (passed to the worker).
std::string mix_text(const mix& m) {
  std::vector<std::string> ops;
  for (auto [on, name] : {std::pair{m.put, "put"},
                          {m.del, "del"},
                          {m.cas, "cas"},
                          {m.batch, "batch"},
                          {m.ttl, "ttl"},
                          {m.txn, "txn"},
                          {m.xtxn, "xtxn"},
                          {m.stream, "stream"},
                          {m.keyed, "keyed"}})
    if (on) ops.push_back(name);
  return fmt::format("{}", fmt::join(ops, ","));
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

// What a txn thread knows of one of its records: the seq of its value
// (nullopt: absent) and the revision of the commit that wrote it.
struct record_memory {
  std::optional<std::uint64_t> seq;
  std::uint64_t revision = 0;
};

// Thread t's records as the database holds them at start-up.
std::map<std::string, record_memory> load_records(const state::records& recs, int t) {
  std::map<std::string, record_memory> known;
  std::string ns = txn_ns(t);
  for (int k = 0; k < txn_keys; ++k) {
    std::string key = record_name(k);
    auto got = recs.load(ns, key);
    if (!got) fail("load " + ns + "/" + key, got.error());
    record_memory mem;
    if (*got) {
      mem.seq = record_seq_of(ns, key, (*got)->value);
      if (!mem.seq) {
        report(fmt::format("E record {}/{} holds a damaged value", ns, key));
        _exit(6);
      }
      mem.revision = (*got)->revision;
    }
    known[key] = mem;
  }
  return known;
}

// One transaction over thread t's namespace: load 1-3 keys (each must read as
// this thread last committed it: nobody else writes there), put 1-3 keys
// (reads and writes overlap: read-modify-write), sometimes delete another,
// commit. The B line lists the writes (seq 0: delete); the A line the revision.
void run_txn(const state::records& recs, int t, std::mt19937_64& rng, std::atomic<std::uint64_t>& next_seq,
             std::map<std::string, record_memory>& known) {
  std::string ns = txn_ns(t);
  std::vector<int> order(txn_keys);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  auto txn = recs.begin();
  std::size_t loads = 1 + rng() % 3;
  for (std::size_t i = 0; i < loads; ++i) {
    std::string key = record_name(order[i]);
    auto got = txn.load(ns, key);
    if (!got) fail("txn load " + ns + "/" + key, got.error());
    record_memory seen;
    if (*got) {
      seen.seq = record_seq_of(ns, key, (*got)->value);
      seen.revision = (*got)->revision;
    }
    const record_memory& mem = known[key];
    if (seen.seq != mem.seq || seen.revision != mem.revision || (*got && !seen.seq)) {
      report(fmt::format("E txn load of {}/{}: seq {} revision {}, but this thread committed seq {} revision {}", ns,
                         key, seen.seq ? std::to_string(*seen.seq) : "none", seen.revision,
                         mem.seq ? std::to_string(*mem.seq) : "none", mem.revision));
      _exit(6);
    }
  }
  std::shuffle(order.begin(), order.end(), rng);
  std::uint64_t seq = next_seq.fetch_add(1);
  std::size_t puts = 1 + rng() % 3;
  bool with_del = rng() % 3 == 0;  // order has txn_keys > 3 keys: one is left to delete
  std::string line = fmt::format("B {} txn", t);
  for (std::size_t i = 0; i < puts + (with_del ? 1 : 0); ++i) {
    std::string key = record_name(order[i]);
    bool del = i == puts;
    if (auto s = del ? txn.del(ns, key) : txn.put(ns, key, record_value(ns, key, seq)); !s) fail("txn write", s);
    line += fmt::format(" {} {}", key, del ? 0 : seq);
  }
  report(line);
  auto rev = txn.commit();
  if (!rev) fail("txn commit", rev.error());
  for (std::size_t i = 0; i < puts + (with_del ? 1 : 0); ++i)
    known[record_name(order[i])] = i == puts ? record_memory{} : record_memory{seq, *rev};
  report(fmt::format("A {} {}", t, *rev));
}

// What a thread's transfer records hold: one seq, the same on both (0: absent).
std::uint64_t load_transfer(const state::records& recs, int t) {
  auto ns = xtxn_namespaces(recs, t);
  std::optional<std::uint64_t> seqs[2];
  for (int side = 0; side < 2; ++side) {
    auto got = recs.load(ns[side], xtxn_key);
    if (!got) fail("load " + ns[side], got.error());
    if (*got) {
      seqs[side] = record_seq_of(ns[side], xtxn_key, (*got)->value);
      if (!seqs[side]) {
        report(fmt::format("E transfer record of {} holds a damaged value", ns[side]));
        _exit(6);
      }
    }
  }
  if (seqs[0] != seqs[1]) {
    report(fmt::format("E transfer records of thread {} disagree: {} against {}", t, seqs[0].value_or(0),
                       seqs[1].value_or(0)));
    _exit(6);
  }
  return seqs[0].value_or(0);
}

// One transfer: both records of thread t read as it last committed them,
// then both rewritten with one new seq in a transaction across two shards.
void run_xtxn(const state::records& recs, int t, std::atomic<std::uint64_t>& next_seq, std::uint64_t& last) {
  auto ns = xtxn_namespaces(recs, t);
  auto txn = recs.begin();
  for (const auto& space : ns) {
    auto got = txn.load(space, xtxn_key);
    if (!got) fail("xtxn load " + space, got.error());
    std::uint64_t seen = *got ? record_seq_of(space, xtxn_key, (*got)->value).value_or(1) : 0;
    if (seen != last) {
      report(fmt::format("E xtxn load of {}: seq {}, but this thread committed seq {}", space, seen, last));
      _exit(6);
    }
  }
  std::uint64_t seq = next_seq.fetch_add(1);
  for (const auto& space : ns)
    if (auto s = txn.put(space, xtxn_key, record_value(space, xtxn_key, seq)); !s) fail("xtxn put", s);
  report(fmt::format("B {} xtxn {}", t, seq));
  auto rev = txn.commit();
  if (!rev) fail("xtxn commit", rev.error());
  last = seq;
  report(fmt::format("A {}", t));
}

// One append of 1-4 entries to thread t's stream at `expected`, the seq this
// thread tracks (nobody else appends there). The B line gives the first seq,
// the count and the op's sequence number; the A line the first seq answered.
void run_append(state::streams& evs, int t, std::mt19937_64& rng, std::atomic<std::uint64_t>& next_seq,
                std::uint64_t& expected) {
  std::string name = stream_name(t);
  std::uint64_t seq = next_seq.fetch_add(1);
  std::size_t n = 1 + rng() % 4;
  std::vector<state::item> entries;
  for (std::size_t i = 0; i < n; ++i) entries.emplace_back(entry_value(name, expected + i, seq));
  report(fmt::format("B {} stream {} {} {}", t, expected, n, seq));
  auto first = evs.append(name, entries, expected);
  if (!first) fail("append to " + name, first.error());
  if (*first != expected) {
    report(fmt::format("E append to {} at {} answered seq {}", name, expected, *first));
    _exit(6);
  }
  expected += n;
  report(fmt::format("A {} {}", t, *first));
}

// A thread's owner and its three handles, open for the worker's life.
struct keyed_handles {
  state::owner_state owner;
  state::value_handle v;
  state::map_handle m;
  state::deque_handle q;
  explicit keyed_handles(database& db, int t)
      : owner(db, keyed_ns, keyed_owner(t)),
        v(owner.value("v")),
        m(owner.map("m")),
        q(owner.deque("q", state::collection_options{std::nullopt, keyed_capacity})) {}
};

// One keyed operation: check that the handles read back what this thread
// last committed (nobody else writes there), buffer 1-5 calls on one or more
// of the three collections (the first a write of a new item, so the commit
// always changes something), then ONE owner_state::commit(). The B line
// carries the whole state the commit leaves.
void run_keyed(keyed_handles& h, int t, std::mt19937_64& rng, std::atomic<std::uint64_t>& next_seq,
               keyed_model& model) {
  std::string owner = keyed_owner(t);
  keyed_read seen = read_keyed(h.v, h.m, h.q, owner);
  if (!seen.error.empty()) fail("keyed read of " + owner, status::corruption(seen.error));
  if (seen.state != model) {
    report(fmt::format("E keyed state of {} reads {}, but this thread committed {}", owner, show_keyed(seen.state),
                       show_keyed(model)));
    _exit(6);
  }
  std::uint64_t seq = next_seq.fetch_add(1);
  keyed_model after = model;
  std::size_t calls = 1 + rng() % 5;
  for (std::uint64_t n = 0; n < calls; ++n) {
    // 0 value set, 1 value clear, 2 map set, 3 map remove, 4 push_back,
    // 5 push_front, 6 pop_front, 7 pop_back.
    int call = n == 0 ? std::array{0, 2, 4, 5}[rng() % 4] : static_cast<int>(rng() % 8);
    std::string key = fmt::format("k{}", rng() % keyed_map_keys);
    status s;
    switch (call) {
      case 0:
        s = h.v.set(keyed_item(owner, "v", seq, n));
        after.value = fmt::format("{}.{}", seq, n);
        break;
      case 1:
        s = h.v.clear();
        after.value.reset();
        break;
      case 2:
        s = h.m.set(key, keyed_item(owner, "m/" + key, seq, n));
        after.map[key] = fmt::format("{}.{}", seq, n);
        break;
      case 3:
        s = h.m.remove(key);
        after.map.erase(key);
        break;
      case 4:
      case 5: {
        s = call == 4 ? h.q.push_back(keyed_item(owner, "q", seq, n)) : h.q.push_front(keyed_item(owner, "q", seq, n));
        std::string tok = fmt::format("{}.{}", seq, n);
        if (call == 4) {
          if (after.deque.size() == keyed_capacity) after.deque.erase(after.deque.begin());
          after.deque.push_back(tok);
        } else {
          if (after.deque.size() == keyed_capacity) after.deque.pop_back();
          after.deque.insert(after.deque.begin(), tok);
        }
        break;
      }
      default: {
        // A pop answers through the overlay: this operation's own pushes too.
        auto popped = call == 6 ? h.q.pop_front() : h.q.pop_back();
        if (!popped) fail("keyed pop of " + owner, popped.error());
        std::optional<std::string> want;
        if (!after.deque.empty()) {
          want = call == 6 ? after.deque.front() : after.deque.back();
          if (call == 6)
            after.deque.erase(after.deque.begin());
          else
            after.deque.pop_back();
        }
        std::optional<std::string> got;
        if (*popped) got = keyed_token(owner, "q", **popped);
        if (got != want || (*popped && !got)) {
          report(fmt::format("E keyed pop of {} gave {}, expected {}", owner, got.value_or("nothing"),
                             want.value_or("nothing")));
          _exit(6);
        }
        break;
      }
    }
    if (!s) fail("keyed write of " + owner, s);
  }
  report(fmt::format("B {} keyed {}", t, show_keyed(after)));
  if (auto s = h.owner.commit(); !s) fail("keyed commit of " + owner, s);
  model = std::move(after);
  report(fmt::format("A {}", t));
}

[[noreturn]] void run_worker(const std::string& dir, std::size_t shards, int threads, int keys, std::uint64_t first_seq,
                             std::uint64_t seed, mix m) {
  core_options o = torture_options(dir, shards);
  o.reclaim_began = [](std::size_t) { report("B reclaim"); };
  auto opened = open_database(o);
  if (!opened) fail("open", opened.error());
  database& db = **opened;
  report("R");
  state::records recs(db);
  state::streams evs(db);
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
      // Its records and where its stream ends, as the database holds them.
      std::map<std::string, record_memory> records = load_records(recs, t);
      auto stream_end = evs.next_seq(stream_name(t));
      if (!stream_end) fail("next_seq " + stream_name(t), stream_end.error());
      std::uint64_t expected = *stream_end;
      // Its keyed state, as the database holds it.
      keyed_handles keyed(db, t);
      keyed_read start = read_keyed(keyed.v, keyed.m, keyed.q, keyed_owner(t));
      if (!start.error.empty()) fail("keyed read of " + keyed_owner(t), status::corruption(start.error));
      keyed_model keyed_state = start.state;
      std::vector<int> ops;
      // Three pushes, not insert({0, 0, 0}): GCC 12 warns of a false overflow
      // there (-Wstringop-overflow) in the thread sanitizer build.
      if (m.put)
        for (int i = 0; i < 3; ++i) ops.push_back(0);
      if (m.del) ops.push_back(1);
      if (m.cas) ops.push_back(2);
      if (m.batch) ops.push_back(3);
      if (m.ttl) ops.push_back(4);
      if (m.txn) ops.push_back(5);
      if (m.stream) ops.push_back(6);
      if (m.keyed) ops.push_back(7);
      if (m.xtxn) ops.push_back(8);
      std::uint64_t transfer = load_transfer(recs, t);
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
          case 5:
            run_txn(recs, t, rng, next_seq, records);
            break;
          case 6:
            run_append(evs, t, rng, next_seq, expected);
            break;
          case 7:
            run_keyed(keyed, t, rng, next_seq, keyed_state);
            break;
          case 8:
            run_xtxn(recs, t, next_seq, transfer);
            break;
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

// What the driver knows of one record of a txn thread.
struct record_state {
  // The seq of the value the last transaction known to have landed left on
  // it; nullopt: absent.
  std::optional<std::uint64_t> acked;
  std::uint64_t revision = 0;  // that transaction's revision (0 while absent)
  bool ever_written = false;
};

// What the driver knows of a txn thread's namespace.
struct txn_state {
  std::map<std::string, record_state> records;  // by key
  // The revision of the thread's latest commit known to have landed: every
  // later commit of the thread must carry a greater one.
  std::uint64_t last_revision = 0;
};

// An operation begun and not yet acknowledged.
struct pending_op {
  std::string kind;                                           // put del cas batch ttl txn stream keyed
  std::vector<std::pair<std::string, std::uint64_t>> writes;  // key (txn: record key), seq (0: delete)
  std::uint64_t ttl_ms = 0, began_ms = 0;
  std::uint64_t first_seq = 0, count = 0, op_seq = 0;  // stream: entries first_seq.. first_seq+count-1
  keyed_model keyed_after;                             // keyed: the owner's whole state once the commit lands
};

// The kinds that write plain keys (checked by check_keys).
bool is_plain(const std::string& kind) {
  return kind != "txn" && kind != "xtxn" && kind != "stream" && kind != "keyed";
}

struct figures {
  std::uint64_t iterations = 0, acks = 0, keys_checked = 0, pending_applied = 0, pending_absent = 0;
  std::uint64_t killed_in_gc = 0, killed_in_commit = 0, killed_in_reclaim = 0, verifies = 0, violations = 0;
  std::map<std::string, std::uint64_t> acked;  // by kind
  std::uint64_t killed_in_flight = 0;          // kills with a writer's operation unacknowledged
  std::uint64_t records_checked = 0, txn_applied = 0, txn_absent = 0;
  std::uint64_t entries_checked = 0, append_applied = 0, append_absent = 0;
  std::uint64_t owners_checked = 0, keyed_applied = 0, keyed_absent = 0;
  std::uint64_t xtxn_checked = 0, xtxn_applied = 0, xtxn_absent = 0;
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
      std::string mixs = mix_text(mix_);
      ::execl(self.c_str(), self.c_str(), "--worker", dir_.c_str(), std::to_string(shards_).c_str(),
              std::to_string(threads_).c_str(), std::to_string(keys_).c_str(), std::to_string(first_seq).c_str(),
              std::to_string(rng()).c_str(), mixs.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(out[1]);
    // When to kill: a random time after the worker is ready, or as soon as it
    // begins a gc or a commit.
    int mode = static_cast<int>(rng() % 5);  // 0, 1: delay; 2: in gc; 3: in commit; 4: in reclamation
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
          // A worker that begins no reclamation cycle is killed all the same.
          if (mode == 4) kill_at = std::chrono::steady_clock::now() + 2s;
        }
        if (line.starts_with("E ")) error = line;
        if (!killed && ((mode == 2 && line == "B gc") || (mode == 3 && line == "B commit"))) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
          ::kill(pid, SIGKILL);
          killed = true;
          (mode == 2 ? fig.killed_in_gc : fig.killed_in_commit)++;
        }
        if (!killed && mode == 4 && line == "B reclaim") {
          // A cycle has begun: somewhere in its marking, copying or switch.
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20'000));
          ::kill(pid, SIGKILL);
          killed = true;
          fig.killed_in_reclaim++;
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
    bool replayed = replay(buffer, fig);
    if (!pending_.empty()) ++fig.killed_in_flight;
    return check(fig, verify) && replayed;
  }

  bool violation(const std::string& what) {
    fmt::print(stderr, "torture: VIOLATION: {}\n", what);
    ++violations_;
    return false;
  }
  std::uint64_t violations() const { return violations_; }

 private:
  // Applies the reported lines to the model: complete lines only (a line cut
  // by the kill was never acknowledged to anyone). False on a violation.
  bool replay(const std::string& buffer, figures& fig) {
    bool ok = true;
    std::size_t at = 0;
    for (std::size_t nl; (nl = buffer.find('\n', at)) != std::string::npos; at = nl + 1) {
      std::istringstream in(buffer.substr(at, nl - at));
      std::string tag, who;
      in >> tag >> who;
      if ((tag != "B" && tag != "A") || who == "gc" || who == "commit" || who == "reclaim" || who.empty()) continue;
      int t = std::stoi(who);
      if (tag == "B") {
        pending_op op;
        in >> op.kind;
        if (op.kind == "batch" || op.kind == "txn") {
          std::string k;
          std::uint64_t s;
          while (in >> k >> s) op.writes.emplace_back(k, s);
        } else if (op.kind == "stream") {
          in >> op.first_seq >> op.count >> op.op_seq;
        } else if (op.kind == "xtxn") {
          in >> op.op_seq;
        } else if (op.kind == "keyed") {
          auto k = parse_keyed(in);
          if (!k) {
            ok = violation(
                fmt::format("thread {}: a keyed B line that does not parse: {}", t, buffer.substr(at, nl - at)));
            continue;
          }
          op.keyed_after = std::move(*k);
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
      ++fig.acked[op.kind];
      std::string result;
      in >> result;
      if (op.kind == "txn") {
        ok = ack_txn(t, op, std::strtoull(result.c_str(), nullptr, 10)) && ok;
        continue;
      }
      if (op.kind == "stream") {
        ok = ack_append(t, op, std::strtoull(result.c_str(), nullptr, 10)) && ok;
        continue;
      }
      if (op.kind == "keyed") {
        keyed_[t] = op.keyed_after;
        continue;
      }
      if (op.kind == "xtxn") {
        transfers_[t] = op.op_seq;
        continue;
      }
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
    return ok;
  }

  // Thread t's transaction acknowledged at revision `rev`: its writes are now
  // the records' state, and rev must be past every earlier commit of t.
  bool ack_txn(int t, const pending_op& op, std::uint64_t rev) {
    txn_state& th = txns_[t];
    bool ok = true;
    if (rev <= th.last_revision)
      ok =
          violation(fmt::format("{}: a commit acknowledged at revision {}, not past the thread's previous commit at {}",
                                txn_ns(t), rev, th.last_revision));
    th.last_revision = rev;
    for (const auto& [k, s] : op.writes) {
      record_state& st = th.records[k];
      st.ever_written = true;
      st.acked = s ? std::optional<std::uint64_t>(s) : std::nullopt;
      st.revision = s ? rev : 0;
    }
    return ok;
  }

  // Thread t's append acknowledged at seq `first`: its entries follow the
  // acknowledged ones, with no gap (the worker tracks the same count).
  bool ack_append(int t, const pending_op& op, std::uint64_t first) {
    std::vector<std::uint64_t>& entries = streams_[t];
    bool ok = true;
    if (first != op.first_seq || first != entries.size())
      ok = violation(fmt::format("{}: an append begun at seq {} was acknowledged at {} after {} acknowledged entries",
                                 stream_name(t), op.first_seq, first, entries.size()));
    entries.insert(entries.end(), op.count, op.op_seq);
    return ok;
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

  // Reopens the database (recovery) and checks it all against the model,
  // which then takes in what the unacknowledged operations turned out to do.
  bool check(figures& fig, bool verify) {
    auto opened = database::open(torture_options(dir_, shards_));
    if (!opened) return violation("reopen: " + opened.error().to_string());
    database& db = **opened;
    bool ok = check_keys(db, fig);
    ok = check_records(db, fig) && ok;
    ok = check_streams(db, fig, verify) && ok;
    ok = check_keyed(db, fig) && ok;
    ok = check_transfers(db, fig) && ok;
    pending_.clear();
    ok = check_unwritten_keys(db) && ok;
    ok = check_state_space(db) && ok;
    if (verify) {
      ++fig.verifies;
      auto r = db.verify();
      if (!r) return violation("verify: " + r.error().to_string());
      for (const auto& p : r->problems) ok = violation("verify: " + p);
    }
    return ok;
  }

  // Every plain key of every thread.
  bool check_keys(database& db, figures& fig) {
    bool ok = true;
    // Keys of an unacknowledged operation: either outcome, but a batch all one way.
    std::map<std::string, const pending_op*> pending_key;
    for (const auto& [t, op] : pending_) {
      (void)t;
      if (!is_plain(op.kind)) continue;
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
    return ok;
  }

  // Both transfer records of every thread: one seq on both, the last
  // acknowledged transfer's or the one in flight's.
  bool check_transfers(database& db, figures& fig) {
    state::records recs(db);
    bool ok = true;
    for (int t = 0; t < threads_; ++t) {
      auto ns = xtxn_namespaces(recs, t);
      std::optional<std::uint64_t> found[2];
      for (int side = 0; side < 2; ++side) {
        auto got = recs.load(ns[side], xtxn_key);
        if (!got) return violation(fmt::format("load {}: {}", ns[side], got.error().to_string()));
        if (*got) {
          found[side] = record_seq_of(ns[side], xtxn_key, (*got)->value);
          if (!found[side]) ok = violation(fmt::format("transfer record of {} holds a damaged value", ns[side]));
        }
      }
      ++fig.xtxn_checked;
      std::uint64_t seen = found[0].value_or(0);
      if (found[0] != found[1]) {
        ok = violation(fmt::format("thread {}: a transfer is half applied: {} holds seq {}, {} holds seq {}", t, ns[0],
                                   found[0].value_or(0), ns[1], found[1].value_or(0)));
        continue;
      }
      auto p = pending_.find(t);
      std::uint64_t in_flight = p != pending_.end() && p->second.kind == "xtxn" ? p->second.op_seq : 0;
      if (in_flight && seen == in_flight) {
        transfers_[t] = seen;
        ++fig.xtxn_applied;
      } else if (seen != transfers_[t]) {
        ok = violation(fmt::format("thread {}: transfer records hold seq {}; the last acknowledged is {}{}", t, seen,
                                   transfers_[t], in_flight ? fmt::format(", the one in flight {}", in_flight) : ""));
      } else if (in_flight) {
        ++fig.xtxn_absent;
      }
    }
    return ok;
  }

  // Every record of every txn thread (all txn_keys keys, written or not).
  bool check_records(database& db, figures& fig) {
    state::records recs(db);
    bool ok = true;
    for (int t = 0; t < threads_; ++t) {
      auto p = pending_.find(t);
      const pending_op* op = p != pending_.end() && p->second.kind == "txn" ? &p->second : nullptr;
      ok = check_namespace(recs, t, op, fig) && ok;
    }
    return ok;
  }

  // Thread t's records against what its commits left; `op` is its
  // unacknowledged transaction, if any, which must have landed whole or not at
  // all, at one revision past the thread's last.
  bool check_namespace(const state::records& recs, int t, const pending_op* op, figures& fig) {
    std::string ns = txn_ns(t);
    txn_state& th = txns_[t];
    bool ok = true;
    int applied = 0, not_applied = 0;
    std::set<std::uint64_t> applied_revisions;
    for (int k = 0; k < txn_keys; ++k) {
      std::string key = record_name(k);
      auto got = recs.load(ns, key);
      if (!got) return violation(fmt::format("load {}/{}: {}", ns, key, got.error().to_string()));
      std::optional<std::uint64_t> found;
      std::uint64_t revision = 0;
      if (*got) {
        found = record_seq_of(ns, key, (*got)->value);
        revision = (*got)->revision;
        if (!found) {
          ok = violation(fmt::format("record {}/{} holds a damaged value: {}", ns, key,
                                     std::holds_alternative<state::json>((*got)->value)
                                         ? std::get<state::json>((*got)->value).dump().substr(0, 200)
                                         : "raw bytes"));
          continue;
        }
      }
      ++fig.records_checked;
      const record_state& st = th.records[key];
      std::optional<std::optional<std::uint64_t>> would;  // set when op writes the key
      if (op)
        for (const auto& [k2, s] : op->writes)
          if (k2 == key) would = s ? std::optional<std::uint64_t>(s) : std::nullopt;
      bool as_acked = found == st.acked;
      bool as_applied = would && found == *would;
      auto show = [](const std::optional<std::uint64_t>& s) { return s ? std::to_string(*s) : "nothing"; };
      if (!as_acked && !as_applied) {
        ok = violation(fmt::format("record {}/{}: found {} but the last acknowledged transaction left {}{}", ns, key,
                                   show(found), show(st.acked),
                                   would ? " and the unacknowledged one would leave " + show(*would) : ""));
        continue;
      }
      if (as_acked && !as_applied) {
        if (would) ++not_applied;
        if (found && revision != st.revision)
          ok =
              violation(fmt::format("record {}/{}: seq {} at revision {}, but the commit that wrote it had revision {}",
                                    ns, key, *found, revision, st.revision));
      }
      if (as_applied && !as_acked) {
        ++applied;
        if (found) applied_revisions.insert(revision);
      }
    }
    if (!op) return ok;
    if (applied && not_applied)
      return violation(fmt::format("{}: a transaction of {} writes is half applied ({} keys applied, {} not)", ns,
                                   op->writes.size(), applied, not_applied));
    if (!applied) {
      ++fig.txn_absent;
      return ok;
    }
    // Applied: every put of it is there (a txn puts at least one key), all at
    // the one revision of its commit, past the thread's previous commit.
    if (applied_revisions.size() != 1)
      return violation(fmt::format("{}: an unacknowledged transaction found applied at {} distinct revisions", ns,
                                   applied_revisions.size()));
    std::uint64_t rev = *applied_revisions.begin();
    if (rev <= th.last_revision)
      ok =
          violation(fmt::format("{}: an unacknowledged transaction landed at revision {}, not past the thread's "
                                "previous commit at {}",
                                ns, rev, th.last_revision));
    ++fig.txn_applied;
    th.last_revision = rev;
    for (const auto& [k, s] : op->writes) {
      record_state& st = th.records[k];
      st.ever_written = true;
      st.acked = s ? std::optional<std::uint64_t>(s) : std::nullopt;
      st.revision = s ? rev : 0;
    }
    return ok;
  }

  // Every stream of every thread; `whole`: read back every entry, else only
  // those appended since the previous check.
  bool check_streams(database& db, figures& fig, bool whole) {
    state::streams evs(db);
    bool ok = true;
    for (int t = 0; t < threads_; ++t) {
      auto p = pending_.find(t);
      const pending_op* op = p != pending_.end() && p->second.kind == "stream" ? &p->second : nullptr;
      ok = check_stream(evs, t, op, fig, whole) && ok;
    }
    return ok;
  }

  // Thread t's stream: it ends after the acknowledged entries, or after those
  // of the unacknowledged append `op` too (all of them or none), nothing lies
  // past the end, and the entries read back (all of them when `whole`, else
  // those from read_back_[t] on) hold exactly what was appended there. Reading
  // every entry at every iteration would grow with the square of the run (about
  // 6 us an entry through streams::read: some 400 s more over 1 000
  // iterations); check_state_space proves at every iteration that every entry
  // below next_seq exists.
  bool check_stream(const state::streams& evs, int t, const pending_op* op, figures& fig, bool whole) {
    std::string name = stream_name(t);
    std::vector<std::uint64_t>& entries = streams_[t];
    auto next = evs.next_seq(name);
    if (!next) return violation(fmt::format("next_seq {}: {}", name, next.error().to_string()));
    std::uint64_t acked = entries.size();
    if (op && op->first_seq != acked)
      return violation(
          fmt::format("{}: an append began at seq {} after {} acknowledged entries", name, op->first_seq, acked));
    if (*next != acked && !(op && *next == acked + op->count))
      return violation(fmt::format("{}: next_seq is {}, but {} entries were acknowledged{}", name, *next, acked,
                                   op ? fmt::format(" and {} more were in flight", op->count) : ""));
    if (op && *next == acked) ++fig.append_absent;
    if (op && *next != acked) {
      ++fig.append_applied;
      entries.insert(entries.end(), op->count, op->op_seq);
    }
    for (std::uint64_t from = whole ? 0 : read_back_[t]; from < *next;) {
      auto page = evs.read(name, from, state::max_read_limit);
      if (!page) return violation(fmt::format("read {} from {}: {}", name, from, page.error().to_string()));
      if (page->empty())
        return violation(fmt::format("{}: next_seq is {} but no entry is found from seq {} on", name, *next, from));
      for (const auto& e : *page) {
        if (e.seq != from)
          return violation(fmt::format("{}: entry {} is missing (the next one found is {})", name, from, e.seq));
        if (e.seq >= *next) return violation(fmt::format("{}: entry {} lies past next_seq {}", name, e.seq, *next));
        if (e.value != state::item(entry_value(name, e.seq, entries[e.seq])))
          return violation(fmt::format("{}: entry {} holds {}, not what append {} put there", name, e.seq,
                                       std::holds_alternative<state::json>(e.value)
                                           ? std::get<state::json>(e.value).dump().substr(0, 200)
                                           : "raw bytes",
                                       entries[e.seq]));
        ++fig.entries_checked;
        ++from;
      }
    }
    // A half-applied append would leave entries past next_seq.
    auto past = evs.read(name, *next, 1);
    if (!past) return violation(fmt::format("read {} from {}: {}", name, *next, past.error().to_string()));
    if (!past->empty())
      return violation(fmt::format("{}: entry {} exists past next_seq {}", name, past->front().seq, *next));
    read_back_[t] = *next;
    return true;
  }

  // Every owner's keyed state, read with fresh handles: it is what the
  // thread's last acknowledged commit left, or what its one unacknowledged
  // commit would leave, the three collections compared as one (a frame lands
  // whole: never the map from one side and the deque from the other).
  bool check_keyed(database& db, figures& fig) {
    bool ok = true;
    for (int t = 0; t < threads_; ++t) {
      std::string owner = keyed_owner(t);
      state::owner_state os(db, keyed_ns, owner);
      auto v = os.value("v");
      auto m = os.map("m");
      auto q = os.deque("q", state::collection_options{std::nullopt, keyed_capacity});
      keyed_read found = read_keyed(v, m, q, owner);
      os.close();
      if (!found.error.empty()) {
        ok = violation(fmt::format("keyed state of {}: {}", owner, found.error));
        continue;
      }
      ++fig.owners_checked;
      const keyed_model& acked = keyed_[t];
      auto p = pending_.find(t);
      const pending_op* op = p != pending_.end() && p->second.kind == "keyed" ? &p->second : nullptr;
      if (found.state == acked) {
        if (op) ++fig.keyed_absent;
        continue;
      }
      if (op && found.state == op->keyed_after) {
        ++fig.keyed_applied;
        keyed_[t] = op->keyed_after;
        continue;
      }
      // Say which collections match which side: a half-applied commit shows
      // as some from before and some from after.
      auto side = [&](bool before, bool after) {
        return before && after ? "either" : before ? "before" : after ? "after" : "neither";
      };
      std::string sides;
      if (op) {
        sides = fmt::format("value: {}, map: {}, deque: {}",
                            side(found.state.value == acked.value, found.state.value == op->keyed_after.value),
                            side(found.state.map == acked.map, found.state.map == op->keyed_after.map),
                            side(found.state.deque == acked.deque, found.state.deque == op->keyed_after.deque));
        sides = fmt::format(" and the unacknowledged one would leave {}: {}({})", show_keyed(op->keyed_after),
                            sides.find("neither") == std::string::npos ? "a commit half applied " : "", sides);
      }
      ok = violation(fmt::format("keyed state of {}: found {}, but the last acknowledged commit left {}{}", owner,
                                 show_keyed(found.state), show_keyed(acked), sides));
      // Go on from what is there, so one violation is not repeated forever.
      keyed_[t] = found.state;
    }
    return ok;
  }

  // No plain key the workload never wrote.
  bool check_unwritten_keys(database& db) {
    bool ok = true;
    auto scan = db.scan("", "");
    if (!scan) return violation("scan: " + scan.error().to_string());
    for (auto more = scan->next();; more = scan->next()) {
      if (!more) return violation("scan: " + more.error().to_string());
      if (!*more) break;
      auto it = model_.find(scan->key());
      if (it == model_.end() || !it->second.ever_written) ok = violation("a key nobody wrote: " + scan->key());
    }
    return ok;
  }

  // The state space (past FF FF, which database::scan leaves out) of every
  // shard, read raw from its published view, holds exactly what the workload
  // wrote: records the txn threads wrote (ever: deleted ones are gone), the
  // meta of every non-empty stream and its entries 0..n-1, every one of them.
  // Runs after check_records and check_streams, whose findings it relies on.
  bool check_state_space(database& db) {
    std::set<std::string> written;                                        // records and stream metas
    std::map<std::string, std::pair<int, std::uint64_t>> entry_prefixes;  // prefix -> thread, entries
    std::map<int, std::uint64_t> entries_found;                           // by thread
    // Keyed state: the value key, the map's entries, the deque's meta (present
    // or not: an emptied deque may keep it) and slots; counted against the
    // model (after check_keyed) below.
    struct keyed_space {
      std::string value, map_prefix, deque_meta, slots_prefix;
      std::uint64_t map_found = 0, slots_found = 0;
      bool value_found = false;
    };
    std::map<int, keyed_space> keyed_spaces;
    for (int t = 0; t < threads_; ++t) {
      std::string prefix = state::owner_prefix(keyed_ns, keyed_owner(t));
      keyed_spaces[t] = {state::value_key(prefix, "v"), state::map_entries_prefix(prefix, "m"),
                         state::deque_meta_key(prefix, "q"), state::deque_slots_prefix(prefix, "q")};
    }
    for (int t = 0; t < threads_; ++t) {
      for (const auto& [key, st] : txns_[t].records)
        if (st.ever_written) written.insert(state::record_key(txn_ns(t), key));
      if (transfers_[t])
        for (const auto& space : xtxn_namespaces(state::records(db), t))
          written.insert(state::record_key(space, xtxn_key));
      if (!streams_[t].empty()) written.insert(state::stream_meta_key(stream_name(t)));
      entry_prefixes[state::stream_entries_prefix(stream_name(t))] = {t, streams_[t].size()};
    }
    bool ok = true;
    for (std::size_t shard = 0; shard < shards_; ++shard) {
      auto view = db.core().view_of(shard);
      if (!view) return violation(fmt::format("view of shard {}: {}", shard, view.error().to_string()));
      status s =
          (*view)->scan(keyspace::data_key(state_space::prefix), keyspace::data_end(),
                        [&](std::string_view tree_key, std::string_view) {
                          std::string user_key(keyspace::user_key_of(tree_key));
                          if (written.count(user_key)) return true;
                          for (auto& [t, k] : keyed_spaces) {
                            if (user_key == k.value)
                              k.value_found = true;
                            else if (user_key.starts_with(k.map_prefix))
                              ++k.map_found;
                            else if (user_key.starts_with(k.slots_prefix))
                              ++k.slots_found;
                            else if (user_key != k.deque_meta)
                              continue;
                            return true;
                          }
                          for (const auto& [prefix, stream] : entry_prefixes) {
                            auto seq = state::stream_seq_of(prefix, user_key);
                            if (seq && *seq < stream.second) {
                              ++entries_found[stream.first];
                              return true;
                            }
                          }
                          ok = violation(fmt::format("shard {}: a state key nobody wrote: {:?}", shard, user_key));
                          return true;
                        });
      if (!s) return violation(fmt::format("scan of shard {}'s state space: {}", shard, s.to_string()));
    }
    for (int t = 0; t < threads_; ++t)
      if (entries_found[t] != streams_[t].size())
        ok = violation(fmt::format("{}: {} of its {} entries are in the state space", stream_name(t), entries_found[t],
                                   streams_[t].size()));
    for (const auto& [t, k] : keyed_spaces) {
      const keyed_model& model = keyed_[t];
      if (k.value_found != model.value.has_value() || k.map_found != model.map.size() ||
          k.slots_found != model.deque.size())
        ok =
            violation(fmt::format("keyed state of {}: the state space holds {} value keys, {} map entries and {} "
                                  "deque slots, not {}, {} and {}",
                                  keyed_owner(t), k.value_found ? 1 : 0, k.map_found, k.slots_found,
                                  model.value ? 1 : 0, model.map.size(), model.deque.size()));
    }
    return ok;
  }

  std::string dir_;
  std::size_t shards_;
  int threads_, keys_;
  mix mix_;
  std::map<std::string, key_state> model_;
  std::map<int, txn_state> txns_;                      // by thread
  std::map<int, std::uint64_t> transfers_;             // by thread: the seq both transfer records hold (0: none)
  std::map<int, std::vector<std::uint64_t>> streams_;  // by thread: the append (op seq) of each entry
  std::map<int, std::uint64_t> read_back_;             // by thread: entries below were read back and matched
  std::map<int, keyed_model> keyed_;                   // by thread: its owner's state after its last known commit
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
  std::string dir, mix_arg = "put,del,cas,batch,ttl,txn,xtxn,stream,keyed";
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        fmt::print(stderr, "torture: {} needs a value\n", args[i]);
        std::exit(2);
      }
      return args[++i];
    };
    if (args[i] == "--seed")
      seed = std::stoull(value());
    else if (args[i] == "--iterations")
      iterations = std::stoull(value());
    else if (args[i] == "--shards")
      shards = std::stoul(value());
    else if (args[i] == "--threads")
      threads = std::stoi(value());
    else if (args[i] == "--keys")
      keys = std::stoi(value());
    else if (args[i] == "--mix")
      mix_arg = value();
    else if (args[i] == "--dir")
      dir = value();
    else if (args[i] == "--verify-every")
      verify_every = std::max<std::uint64_t>(1, std::stoull(value()));
    else {
      fmt::print(stderr, "torture: unknown argument {}\n", args[i]);
      return 2;
    }
  }
  if (shards < 1 || threads < 1 || keys < 1) {
    fmt::print(stderr, "torture: --shards, --threads and --keys must be at least 1\n");
    return 2;
  }
  // Before the scratch directory: a bad --mix exits, and would leave it behind.
  mix m = parse_mix(mix_arg);
  bool own_dir = dir.empty();
  if (own_dir) {
    std::string pattern = (std::filesystem::temp_directory_path() / "magnetite-torture-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return 2;
    dir = pattern + "/db";
  }
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
             fig.iterations, seconds, shards, threads, keys, mix_text(m));
  fmt::print(
      "torture: {} acknowledged operations, {} key checks, unacknowledged operations found applied {} / absent "
      "{}, killed in gc {}, in commit {}, in reclamation {}, verify runs {}\n",
      fig.acks, fig.keys_checked, fig.pending_applied, fig.pending_absent, fig.killed_in_gc, fig.killed_in_commit,
      fig.killed_in_reclaim, fig.verifies);
  std::vector<std::string> by_kind;
  for (const char* kind : {"put", "del", "cas", "batch", "ttl", "txn", "xtxn", "stream", "keyed"})
    by_kind.push_back(fmt::format("{} {}", kind, fig.acked[kind]));
  fmt::print("torture: acknowledged by kind: {}\n", fmt::join(by_kind, ", "));
  fmt::print(
      "torture: kills with an operation in flight {}; txn: record checks {}, txns in flight applied {} / absent "
      "{}; stream: entries checked {}, appends in flight applied {} / absent {}\n",
      fig.killed_in_flight, fig.records_checked, fig.txn_applied, fig.txn_absent, fig.entries_checked,
      fig.append_applied, fig.append_absent);
  fmt::print("torture: keyed: owner checks {}, commits in flight applied {} / absent {}\n", fig.owners_checked,
             fig.keyed_applied, fig.keyed_absent);
  fmt::print("torture: xtxn: transfer checks {}, transfers in flight applied {} / absent {}\n", fig.xtxn_checked,
             fig.xtxn_applied, fig.xtxn_absent);
  fmt::print("torture: {} violations\n", fig.violations);
  if (own_dir) std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  return fig.violations ? 1 : 0;
}
