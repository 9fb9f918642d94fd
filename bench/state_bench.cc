// state_bench: keyed-state maps and transactional records (state/, issue 7) beside
// RocksDB's transactions and LMDB's write transactions, in the same run, on
// the same disk.
//
//   state_bench [--dir D] [--seconds S] [--only W[,W...]] [--threads T[,T...]]
//               [--ours-only] [--json]
//
// --only runs the named workloads (map, blind, rmw, rmw-hot, rmw-across) and
// no others, in one run: `--only rmw,rmw-across` puts transactions across
// shards beside single-shard ones and beside the peers' in one table.
// --threads replaces the thread counts (1 and 32); --ours-only leaves the
// peers out (bench/ruby_state_bench.rb runs `--only map --threads 1,8
// --ours-only` as the C++ side of the Ruby binding's figures).
//
// Every commit is durable for every engine: ours with the database's default
// options (fsync policy `always`, 4 shards, worker_spin_polls as db_bench
// runs it), RocksDB 7.8.3 with WriteOptions::sync = true (other options
// default), LMDB with its default durable commit (no MDB_NOSYNC or
// MDB_NOMETASYNC). Values are JSON objects {"pad": 84 x's, "v": counter},
// about 100 bytes, parsed and re-encoded with nlohmann::json by every engine.
//
// Cases, each from 1 and 32 host threads (--threads), each engine for S seconds (default
// 5), the engines of one thread count in a rotated order:
//   map      a stream processor's state: each thread is one owner (message
//            key) with a map; one set of a new entry, then commit.
//              ours      state::owner_state, map_handle::set, commit();
//              peers     as blind below (one put and a durable commit).
//   blind    one put of a new key, then commit; each thread its own keys.
//              ours      a records transaction with one put, commit();
//              rocksdb_optimistic   OptimisticTransactionDB: Put, Commit;
//              lmdb      one write transaction: mdb_put, mdb_txn_commit.
//   rmw      100 000 keys preloaded with counter 0. A transaction loads 2
//            distinct random keys, puts each back with its counter + 1, and
//            commits; on a conflict it is retried (same keys) and counted.
//              ours      a records transaction (load x2, put x2, commit);
//              rocksdb_optimistic   GetForUpdate x2, Put x2, Commit (Busy or
//                        TryAgain from Commit is a conflict);
//              rocksdb_pessimistic  TransactionDB, deadlock detection on:
//                        GetForUpdate (which locks) x2, Put x2, Commit (a
//                        deadlock or lock timeout is a conflict);
//              lmdb      one write transaction: mdb_get x2, mdb_put x2,
//                        commit (LMDB lets one writer in at a time, so it
//                        never conflicts; its threads queue instead).
//   rmw-hot  the same over 100 keys: contended.
//   rmw-across  rmw with the second key on another shard: ours commits it
//            two-phase (docs/design/transactions.md); the peers do the same
//            work on one node.
// A namespace lives on one shard, so blind and rmw use 4 namespaces that land
// on the 4 distinct shards (thread t uses namespace t % 4; the keys of rmw are
// split over the 4 namespaces and a transaction takes 2 keys of its thread's
// namespace, rmw-across its second from namespace (t + 1) % 4); rmw-hot uses
// one namespace, so all its contention is on one shard. The peers get the
// same key choices (namespace index as a key prefix).
//
// Figures per engine: commits/s, conflicts/s, the p50 and p99 latency of a
// committed transaction (from its first begin to the return of the commit
// that succeeded, retries included: LMDB's queueing happens in
// mdb_txn_begin and the pessimistic peer's in GetForUpdate, so timing the
// commit call alone would hide them), and for ours the shards' log fsyncs per
// commit (database::stats, log_fsyncs delta / commits).
//
// Verification after every case, for every engine (exit 2 on a mismatch):
// map: the threads' maps hold as many entries as commits were acknowledged;
// blind: the store holds exactly as many records as commits were
// acknowledged, each a JSON object with a counter; rmw, rmw-hot: every
// preloaded key holds a JSON object {"v": counter}, and the counters sum to
// twice the number of acknowledged commits (each adds 1 to two keys): a lost
// update or a conflict that wrote anyway breaks it.
//
// Output: text lines by default. With --json, one JSON object on stdout
// (the text lines go to stderr as progress):
//   {"program":"state_bench","date":"2026-...Z","dir":D,"seconds":S,
//    "shards":4,"rocksdb":"7.8.3","lmdb":"0.9.24","rows":[ROW, ...]}
//   ROW as in db_bench = {"workload":"map"|"blind"|"rmw"|"rmw-hot"|"rmw-across", "case":TEXT,
//          "threads":N, "unit":"commits/s"|"conflicts/s"|"us"|"fsyncs/commit",
//          "ours":X, "peer":"rocksdb_optimistic"|"rocksdb_pessimistic"|
//          "lmdb"|null, "peer_value":X|null, "ratio":ours/peer_value|null,
//          "better":"higher"|"lower", "target":null, "met":null}
//   A ratio with a peer value of 0 (conflicts) is null. The fsyncs-per-commit
//   row has no peer.
//
// The data lives under --dir (default ./bench-data/state), removed at the
// end. Exit status 0 when the figures were taken, 1 on an error, 2 on bad
// usage or a failed verification.
#include <lmdb.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "actors/database_core.h"
#include "bench/bench_support.h"
#include "bench/lmdb_store.h"
#include "bench/rocksdb_transactions.h"
#include "magnetite/state/keyed_state.h"
#include "magnetite/state/records.h"

using namespace magnetite;
using namespace magnetite::bench;
using magnetite::state::json;

namespace {

constexpr std::size_t shard_count = 4;

enum class engine { ours, rocksdb_optimistic, rocksdb_pessimistic, lmdb };

const char* name_of(engine e) {
  switch (e) {
    case engine::ours:
      return "magnetite";
    case engine::rocksdb_optimistic:
      return "rocksdb_optimistic";
    case engine::rocksdb_pessimistic:
      return "rocksdb_pessimistic";
    case engine::lmdb:
      return "lmdb";
  }
  return "?";
}

struct workload {
  std::string name;
  std::uint64_t keys = 0;      // preloaded; 0: blind writes of new keys
  std::size_t namespaces = 1;  // each on its own shard
  std::vector<engine> engines;
  bool map = false;     // ours: a keyed-state map per thread instead of records
  bool across = false;  // rmw: the second key from the next namespace (another shard)
};

// ---------------------------------------------------------------------------
// Results: one row per figure, printed as JSON at the end with --json.

std::vector<report_row> rows;

[[noreturn]] void verification_failed(const std::string& what) {
  fmt::print(stderr, "state_bench: verification failed: {}\n", what);
  std::exit(2);
}

[[noreturn]] void engine_error(const char* engine_name, const char* what, const std::string& detail) {
  fmt::print(stderr, "state_bench: {} {}: {}\n", engine_name, what, detail);
  std::exit(1);
}

// ---------------------------------------------------------------------------
// Values

// {"pad":"<84 x>","v":0} is 100 bytes; a larger counter adds a digit or so.
const std::string pad(84, 'x');

json value_with(std::uint64_t counter) { return json{{"pad", pad}, {"v", counter}}; }

// The counter of a stored value; anything else is a verification failure.
std::uint64_t counter_of(const json& j, std::string_view where) {
  if (!j.is_object() || !j.contains("v") || !j["v"].is_number_unsigned())
    verification_failed(fmt::format("{}: value {:.60} is not an object with a counter", where, j.dump()));
  return j["v"].get<std::uint64_t>();
}

std::uint64_t counter_of(std::string_view stored, std::string_view where) {
  json j = json::parse(stored, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) verification_failed(fmt::format("{}: stored value does not parse as JSON", where));
  return counter_of(j, where);
}

std::string bumped(std::string_view stored, std::string_view where) {
  return value_with(counter_of(stored, where) + 1).dump();
}

// Two distinct indexes below n (n >= 2).
std::pair<std::uint64_t, std::uint64_t> two_of(std::mt19937_64& rng, std::uint64_t n) {
  std::uint64_t a = rng() % n, b = rng() % (n - 1);
  if (b >= a) ++b;
  return {a, b};
}

// Key i of a preloaded workload belongs to namespace i % namespaces; a thread
// draws from its own namespace's share (across: the second key from the next
// namespace's, so the transaction spans two shards).
std::pair<std::uint64_t, std::uint64_t> rmw_keys(std::mt19937_64& rng, const workload& w, std::size_t ns) {
  auto [a, b] = two_of(rng, w.keys / w.namespaces);
  return {a * w.namespaces + ns, b * w.namespaces + (w.across ? (ns + 1) % w.namespaces : ns)};
}

std::string blind_key(int thread, std::uint64_t n) { return key_of((static_cast<std::uint64_t>(thread) << 40) | n); }

// The peers have no namespaces; the namespace's index prefixes the key.
std::string peer_key(std::size_t ns, const std::string& key) { return fmt::format("{}/{}", ns, key); }

// ---------------------------------------------------------------------------
// The measuring loop

struct figures {
  double commits_per_s = 0, conflicts_per_s = 0, p50_us = 0, p99_us = 0;
  std::uint64_t commits = 0, conflicts = 0;
  double fsyncs_per_commit = NAN;  // ours only
};

struct thread_tally {
  std::uint64_t commits = 0, conflicts = 0;
  std::vector<float> latency_us;
};

// Runs `txn(thread, n, rng, conflicts)` from `threads` threads for `seconds`.
// Each call carries one transaction to its commit, retrying it on conflicts
// (and adding them to `conflicts`); a call that returns has committed.
template <class Txn>
figures run_threads(int threads, double seconds, Txn txn) {
  std::atomic<bool> stop{false};
  std::vector<thread_tally> tallies(static_cast<std::size_t>(threads));
  std::vector<std::thread> ts;
  auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      // Seeded by thread, so every engine draws the same keys in the same order.
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
      thread_tally& my = tallies[static_cast<std::size_t>(t)];
      my.latency_us.reserve(std::size_t{1} << 16);
      for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        auto start = clock_type::now();
        txn(t, n, rng, my.conflicts);
        my.latency_us.push_back(std::chrono::duration<float, std::micro>(clock_type::now() - start).count());
        ++my.commits;
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  double elapsed = since(t0);
  figures f;
  std::vector<float> all;
  for (auto& my : tallies) {
    f.commits += my.commits;
    f.conflicts += my.conflicts;
    all.insert(all.end(), my.latency_us.begin(), my.latency_us.end());
  }
  f.commits_per_s = static_cast<double>(f.commits) / elapsed;
  f.conflicts_per_s = static_cast<double>(f.conflicts) / elapsed;
  auto percentile = [&](double p) -> double {
    if (all.empty()) return NAN;
    auto at = all.begin() + static_cast<std::ptrdiff_t>(p * static_cast<double>(all.size() - 1));
    std::nth_element(all.begin(), at, all.end());
    return *at;
  };
  f.p50_us = percentile(0.50);
  f.p99_us = percentile(0.99);
  return f;
}

// ---------------------------------------------------------------------------
// Ours

std::vector<std::string> namespaces_on_distinct_shards(const state::records& recs, std::size_t count) {
  std::vector<std::string> out;
  std::vector<bool> taken(shard_count, false);
  for (int k = 0; out.size() < count; ++k) {
    std::string ns = fmt::format("accounts-{}", k);
    std::size_t s = recs.shard_of(ns);
    if (taken[s]) continue;
    taken[s] = true;
    out.push_back(std::move(ns));
  }
  return out;
}

std::uint64_t log_fsyncs(database& db) {
  auto st = must(db.stats(), "stats");
  std::uint64_t n = 0;
  for (const auto& s : st.shards) n += s.log_fsyncs;
  return n;
}

figures run_ours(const std::string& dir, const workload& w, int threads, double seconds) {
  database_options o;
  o.dir = dir;
  o.shards = shard_count;
  // Everything else as db_bench runs it: the defaults (fsync `always`,
  // worker_spin_polls 20 000).
  auto db = must(database::open(o), "open");
  state::records recs(*db);
  auto ns = namespaces_on_distinct_shards(recs, w.namespaces);

  // Preload in transactions of 1 000 puts (one namespace each: one shard).
  for (std::size_t n = 0; n < w.namespaces; ++n)
    for (std::uint64_t first = n; first < w.keys; first += 1000 * w.namespaces) {
      auto t = recs.begin();
      for (std::uint64_t i = first; i < std::min(w.keys, first + 1000 * w.namespaces); i += w.namespaces)
        must(t.put(ns[n], key_of(i), value_with(0)), "preload put");
      must(t.commit(), "preload commit");
    }

  std::uint64_t fsyncs_before = log_fsyncs(*db);
  figures f;
  if (w.map) {
    // One owner per thread (a stream processor's message key), its map's set
    // and commit: one conditional batch per commit, no checks.
    std::vector<state::owner_state> owners;
    std::vector<state::map_handle> maps;
    for (int t = 0; t < threads; ++t) {
      owners.emplace_back(*db, "bench", fmt::format("owner-{}", t));
      maps.push_back(owners.back().map("m"));
    }
    f = run_threads(threads, seconds, [&](int t, std::uint64_t n, std::mt19937_64&, std::uint64_t&) {
      auto& m = maps[static_cast<std::size_t>(t)];
      must(m.set(blind_key(t, n), value_with(n)), "map set");
      must(m.commit(), "map commit");
    });
    f.fsyncs_per_commit = static_cast<double>(log_fsyncs(*db) - fsyncs_before) / static_cast<double>(f.commits);
    std::uint64_t entries = 0;
    for (int t = 0; t < threads; ++t) entries += must(maps[static_cast<std::size_t>(t)].size(), "map size");
    if (entries != f.commits)
      verification_failed(fmt::format("magnetite map: {} entries after {} acknowledged commits", entries, f.commits));
    return f;
  }
  if (w.keys == 0) {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t n, std::mt19937_64&, std::uint64_t&) {
      auto txn = recs.begin();
      must(txn.put(ns[static_cast<std::size_t>(t) % w.namespaces], blind_key(t, n), value_with(n)), "put");
      must(txn.commit(), "commit");
    });
  } else {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t, std::mt19937_64& rng, std::uint64_t& conflicts) {
      auto [a, b] = rmw_keys(rng, w, static_cast<std::size_t>(t) % w.namespaces);
      for (;;) {
        auto txn = recs.begin();
        for (std::uint64_t i : {a, b}) {
          const std::string& space = ns[i % w.namespaces];
          std::string k = key_of(i);
          auto r = must(txn.load(space, k), "load");
          if (!r) verification_failed(fmt::format("magnetite: preloaded record ({}, {}) is missing", space, k));
          const json* j = std::get_if<json>(&r->value);
          if (!j) verification_failed(fmt::format("magnetite: record ({}, {}) is not JSON", space, k));
          must(txn.put(space, k, value_with(counter_of(*j, "magnetite") + 1)), "put");
        }
        auto c = txn.commit();
        if (c) return;
        if (c.error().code() != status_code::conflict) fail("commit", c.error());
        ++conflicts;
      }
    });
  }
  f.fsyncs_per_commit = static_cast<double>(log_fsyncs(*db) - fsyncs_before) / static_cast<double>(f.commits);

  // Every record, by pages, from the published views: every acknowledged
  // commit is in them.
  std::uint64_t records = 0, sum = 0;
  for (const auto& name : ns) {
    std::optional<std::string> after;
    do {
      auto page = must(
          recs.list(name, "", after ? std::optional<std::string_view>(*after) : std::nullopt, state::max_list_limit),
          "list");
      for (const auto& [key, rec] : page.records) {
        const json* j = std::get_if<json>(&rec.value);
        if (!j) verification_failed(fmt::format("magnetite: record ({}, {}) is not JSON", name, key));
        sum += counter_of(*j, "magnetite");
        ++records;
      }
      after = std::move(page.next);
    } while (after);
  }
  if (w.keys == 0 && records != f.commits)
    verification_failed(
        fmt::format("magnetite {}: {} records after {} acknowledged commits", w.name, records, f.commits));
  if (w.keys != 0 && (records != w.keys || sum != 2 * f.commits))
    verification_failed(fmt::format("magnetite {}: {} records (preloaded {}), counters sum to {}, {} commits x 2 = {}",
                                    w.name, records, w.keys, sum, f.commits, 2 * f.commits));
  return f;
}

// ---------------------------------------------------------------------------
// RocksDB

void rocks_check(const rocksdb::Status& st, const char* what) {
  if (!st.ok()) engine_error("rocksdb", what, st.ToString());
}

rocks_transactions open_rocks(const std::string& dir, engine e) {
  rocks_transactions r;
  rocks_check(open_rocks_transactions(dir, e == engine::rocksdb_optimistic, r), "open");
  return r;
}

figures run_rocks(const std::string& dir, const workload& w, int threads, double seconds, engine e) {
  const char* who = name_of(e);
  auto r = open_rocks(dir, e);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  for (std::uint64_t first = 0; first < w.keys; first += 10000) {
    rocksdb::WriteBatch b;
    for (std::uint64_t i = first; i < std::min(w.keys, first + 10000); ++i)
      rocks_check(b.Put(peer_key(i % w.namespaces, key_of(i)), value_with(0).dump()), "preload");
    rocks_check(r.db->Write(wo, &b), "preload write");
  }

  std::vector<std::unique_ptr<rocksdb::Transaction>> handles(static_cast<std::size_t>(threads));
  auto begin = [&](int t) {
    auto& h = handles[static_cast<std::size_t>(t)];
    rocksdb::Transaction* txn = r.begin(wo, h.get());
    if (txn != h.get()) h.reset(txn);
    return txn;
  };
  figures f;
  if (w.keys == 0) {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t n, std::mt19937_64&, std::uint64_t&) {
      auto* txn = begin(t);
      rocks_check(txn->Put(peer_key(static_cast<std::size_t>(t) % w.namespaces, blind_key(t, n)), value_with(n).dump()),
                  "put");
      rocks_check(txn->Commit(), "commit");
    });
  } else {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t, std::mt19937_64& rng, std::uint64_t& conflicts) {
      auto [a, b] = rmw_keys(rng, w, static_cast<std::size_t>(t) % w.namespaces);
      std::string keys[2] = {peer_key(a % w.namespaces, key_of(a)), peer_key(b % w.namespaces, key_of(b))};
      auto bump = [who](const std::string& k, const std::optional<std::string>& v) {
        if (!v) verification_failed(fmt::format("{}: preloaded key {} is missing", who, k));
        return bumped(*v, who);
      };
      rocks_check(locked_update(r, wo, handles[static_cast<std::size_t>(t)], keys, bump, conflicts), "transaction");
    });
  }
  handles.clear();  // before the DB they belong to

  std::uint64_t records = 0, sum = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(r.db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      sum += counter_of(it->value().ToStringView(), who);
      ++records;
    }
    rocks_check(it->status(), "iterate");
  }
  if (w.keys == 0 && records != f.commits)
    verification_failed(fmt::format("{} {}: {} keys after {} acknowledged commits", who, w.name, records, f.commits));
  if (w.keys != 0 && (records != w.keys || sum != 2 * f.commits))
    verification_failed(fmt::format("{} {}: {} keys (preloaded {}), counters sum to {}, {} commits x 2 = {}", who,
                                    w.name, records, w.keys, sum, f.commits, 2 * f.commits));
  return f;
}

// ---------------------------------------------------------------------------
// LMDB

figures run_lmdb(const std::string& dir, const workload& w, int threads, double seconds) {
  lmdb_store l(dir, 0, std::size_t{4} << 30);
  for (std::uint64_t first = 0; first < w.keys; first += 10000) {
    MDB_txn* txn = nullptr;
    lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
    for (std::uint64_t i = first; i < std::min(w.keys, first + 10000); ++i) {
      std::string k = peer_key(i % w.namespaces, key_of(i)), v = value_with(0).dump();
      MDB_val key = lmdb_val(k), val = lmdb_val(v);
      lmdb_check(mdb_put(txn, l.dbi, &key, &val, 0), "preload put");
    }
    lmdb_check(mdb_txn_commit(txn), "preload commit");
  }

  figures f;
  if (w.keys == 0) {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t n, std::mt19937_64&, std::uint64_t&) {
      std::string k = peer_key(static_cast<std::size_t>(t) % w.namespaces, blind_key(t, n)), v = value_with(n).dump();
      MDB_val key = lmdb_val(k), val = lmdb_val(v);
      MDB_txn* txn = nullptr;
      lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
      lmdb_check(mdb_put(txn, l.dbi, &key, &val, 0), "put");
      lmdb_check(mdb_txn_commit(txn), "txn_commit");
    });
  } else {
    f = run_threads(threads, seconds, [&](int t, std::uint64_t, std::mt19937_64& rng, std::uint64_t&) {
      auto [a, b] = rmw_keys(rng, w, static_cast<std::size_t>(t) % w.namespaces);
      MDB_txn* txn = nullptr;
      lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
      for (std::uint64_t i : {a, b}) {
        std::string k = peer_key(i % w.namespaces, key_of(i));
        MDB_val key = lmdb_val(k), val{};
        int rc = mdb_get(txn, l.dbi, &key, &val);
        if (rc == MDB_NOTFOUND) verification_failed(fmt::format("lmdb: preloaded key {} is missing", k));
        lmdb_check(rc, "get");
        // Encoded before the put: val points into pages the put may touch.
        std::string v = bumped(view_of(val), "lmdb");
        MDB_val nv = lmdb_val(v);
        lmdb_check(mdb_put(txn, l.dbi, &key, &nv, 0), "put");
      }
      lmdb_check(mdb_txn_commit(txn), "txn_commit");
    });
  }

  std::uint64_t records = 0, sum = 0;
  MDB_txn* txn = nullptr;
  lmdb_check(mdb_txn_begin(l.env, nullptr, MDB_RDONLY, &txn), "txn_begin");
  MDB_cursor* cur = nullptr;
  lmdb_check(mdb_cursor_open(txn, l.dbi, &cur), "cursor_open");
  MDB_val key{}, val{};
  for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc != MDB_NOTFOUND;
       rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
    lmdb_check(rc, "cursor_get");
    sum += counter_of(view_of(val), "lmdb");
    ++records;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (w.keys == 0 && records != f.commits)
    verification_failed(fmt::format("lmdb {}: {} keys after {} acknowledged commits", w.name, records, f.commits));
  if (w.keys != 0 && (records != w.keys || sum != 2 * f.commits))
    verification_failed(fmt::format("lmdb {}: {} keys (preloaded {}), counters sum to {}, {} commits x 2 = {}", w.name,
                                    records, w.keys, sum, f.commits, 2 * f.commits));
  return f;
}

// ---------------------------------------------------------------------------
// Cases

struct result_line {
  std::string workload;
  int threads;
  engine e;
  figures f;
};

std::vector<result_line> lines;

std::vector<int> thread_counts = {1, 32};  // --threads
bool ours_only = false;                    // --ours-only

void run_workload(const std::string& base, workload w, double seconds) {
  if (ours_only) w.engines = {engine::ours};
  say("{}: {} s per engine and thread count{}\n", w.name, seconds,
      w.keys ? fmt::format(", {} preloaded keys over {} namespace{}", w.keys, w.namespaces, w.namespaces > 1 ? "s" : "")
             : "");
  std::size_t round = 0;
  for (int threads : thread_counts) {
    std::string dir = fmt::format("{}/{}-{}", base, w.name, threads);
    std::filesystem::remove_all(dir);
    std::vector<figures> got(w.engines.size());
    for (std::size_t k = 0; k < w.engines.size(); ++k) {
      std::size_t i = (k + round) % w.engines.size();
      engine e = w.engines[i];
      std::string edir = fmt::format("{}/{}", dir, name_of(e));
      std::filesystem::create_directories(edir);
      switch (e) {
        case engine::ours:
          got[i] = run_ours(edir, w, threads, seconds);
          break;
        case engine::rocksdb_optimistic:
        case engine::rocksdb_pessimistic:
          got[i] = run_rocks(edir, w, threads, seconds, e);
          break;
        case engine::lmdb:
          got[i] = run_lmdb(edir, w, threads, seconds);
          break;
      }
      std::filesystem::remove_all(edir);
      const figures& f = got[i];
      say("  {:<7} {:>2} thread{} {:<20} {:>8.0f} commits/s {:>8.1f} conflicts/s  p50 {:>7.0f} us  p99 {:>7.0f} us{}"
          " (verified)\n",
          w.name, threads, threads == 1 ? " " : "s", name_of(e), f.commits_per_s, f.conflicts_per_s, f.p50_us, f.p99_us,
          e == engine::ours ? fmt::format("  {:.3f} fsyncs/commit", f.fsyncs_per_commit) : "");
    }
    ++round;
    std::filesystem::remove_all(dir);

    const figures& ours = got[0];  // engines list ours first
    for (std::size_t i = 0; i < w.engines.size(); ++i) lines.push_back({w.name, threads, w.engines[i], got[i]});
    for (std::size_t i = 1; i < w.engines.size(); ++i) {
      const figures& p = got[i];
      std::string peer = name_of(w.engines[i]);
      rows.push_back({w.name, "commit rate", threads, "commits/s", ours.commits_per_s, peer, p.commits_per_s, false, "",
                      std::nullopt});
      rows.push_back({w.name, "conflict rate", threads, "conflicts/s", ours.conflicts_per_s, peer, p.conflicts_per_s,
                      true, "", std::nullopt});
      rows.push_back(
          {w.name, "p50 commit latency", threads, "us", ours.p50_us, peer, p.p50_us, true, "", std::nullopt});
      rows.push_back(
          {w.name, "p99 commit latency", threads, "us", ours.p99_us, peer, p.p99_us, true, "", std::nullopt});
    }
    rows.push_back({w.name, "log fsyncs per commit", threads, "fsyncs/commit", ours.fsyncs_per_commit, "", 0, true, "",
                    std::nullopt});
  }
}

std::string ratio_text(double ours, double peer) {
  double r = ours / peer;
  return std::isfinite(r) ? fmt::format("{:.2f}x", r) : "-";
}

void print_table(double seconds) {
  say("\nstate_bench run of {}, {} s a case, {} shards, RocksDB {}.{}.{}, LMDB {}.{}.{}\n", utc_now(), seconds,
      shard_count, ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH, MDB_VERSION_MAJOR, MDB_VERSION_MINOR,
      MDB_VERSION_PATCH);
  say("{:<8} {:>7}  {:<20} {:>10} {:>11} {:>8} {:>8} {:>13}   {:>9} {:>9} {:>9}\n", "workload", "threads", "engine",
      "commits/s", "conflicts/s", "p50 us", "p99 us", "fsyncs/commit", "ours/peer", "p50 ratio", "p99 ratio");
  const figures* ours = nullptr;
  for (const auto& l : lines) {
    const figures& f = l.f;
    if (l.e == engine::ours) ours = &f;
    bool peer = l.e != engine::ours;
    say("{:<8} {:>7}  {:<20} {:>10.0f} {:>11.1f} {:>8.0f} {:>8.0f} {:>13}   {:>9} {:>9} {:>9}\n", l.workload, l.threads,
        name_of(l.e), f.commits_per_s, f.conflicts_per_s, f.p50_us, f.p99_us,
        peer ? "-" : fmt::format("{:.3f}", f.fsyncs_per_commit),
        peer ? ratio_text(ours->commits_per_s, f.commits_per_s) : "", peer ? ratio_text(ours->p50_us, f.p50_us) : "",
        peer ? ratio_text(ours->p99_us, f.p99_us) : "");
  }
  say("ours/peer = magnetite commits/s / peer commits/s (above 1: ours ahead); the latency ratios are ours / peer "
      "(below 1: ours ahead). Latency: first begin to the commit that succeeded, retries included.\n");
  // Ours across shards against ours on one shard, where both ran.
  for (const auto& across : lines) {
    if (across.workload != "rmw-across" || across.e != engine::ours) continue;
    for (const auto& one : lines)
      if (one.workload == "rmw" && one.e == engine::ours && one.threads == across.threads)
        say("rmw-across / rmw, magnetite, {} thread{}: commits/s {}, p50 {}\n", across.threads,
            across.threads > 1 ? "s" : "", ratio_text(across.f.commits_per_s, one.f.commits_per_s),
            ratio_text(across.f.p50_us, one.f.p50_us));
  }
}

void print_json(const std::string& base, double seconds) {
  std::string out = fmt::format(
      "{{\"program\":\"state_bench\",\"date\":\"{}\",\"dir\":{},\"seconds\":{},\"shards\":{},"
      "\"rocksdb\":\"{}.{}.{}\",\"lmdb\":\"{}.{}.{}\",\"rows\":[",
      utc_now(), json_string(base), json_number(seconds), shard_count, ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH,
      MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH);
  out += json_rows(rows);
  fmt::print("{}\n]}}\n", out);
}

[[noreturn]] void usage() {
  fmt::print(stderr,
             "usage: state_bench [--dir D] [--seconds S] [--only W[,W...]] [--threads T[,T...]] [--ours-only] "
             "[--json]\n"
             "  W: map, blind, rmw, rmw-hot, rmw-across\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "bench-data/state", only;
  double seconds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      base = argv[++i];
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--json")
      json_output = true;
    else if (a == "--ours-only")
      ours_only = true;
    else if (a == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        auto comma = std::min(list.find(',', at), list.size());
        int n = std::atoi(list.substr(at, comma - at).c_str());
        if (n < 1 || n > 1024) usage();
        thread_counts.push_back(n);
        at = comma + 1;
      }
    } else
      usage();
  }
  if (!(seconds > 0)) usage();

  using enum engine;
  const std::vector<workload> workloads = {
      {"map", 0, shard_count, {ours, rocksdb_optimistic, lmdb}, true},
      {"blind", 0, shard_count, {ours, rocksdb_optimistic, lmdb}},
      {"rmw", 100'000, shard_count, {ours, rocksdb_optimistic, rocksdb_pessimistic, lmdb}},
      {"rmw-hot", 100, 1, {ours, rocksdb_optimistic, rocksdb_pessimistic, lmdb}},
      {"rmw-across", 100'000, shard_count, {ours, rocksdb_optimistic, rocksdb_pessimistic, lmdb}, false, true},
  };
  std::set<std::string> chosen;
  for (std::size_t at = 0; !only.empty() && at <= only.size();) {
    auto comma = std::min(only.find(',', at), only.size());
    auto name = only.substr(at, comma - at);
    if (std::none_of(workloads.begin(), workloads.end(), [&](const workload& w) { return w.name == name; })) usage();
    chosen.insert(name);
    at = comma + 1;
  }
  std::filesystem::create_directories(base);
  for (const auto& w : workloads)
    if (chosen.empty() || chosen.count(w.name)) run_workload(base, w, seconds);
  std::filesystem::remove_all(base);
  print_table(seconds);
  if (json_output) print_json(base, seconds);
  return 0;
}
