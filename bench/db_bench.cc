// db_bench: the database a host embeds (issue 4), beside RocksDB, LMDB and
// raw fdatasync (issue 5) in the same run, on the same disk.
//
//   db_bench [--dir D] [--seconds S] [--keys N] [--shards N] [--spin-polls N]
//            [--wal-preallocate BYTES] [--only writes|gets|restart] [--json]
//
// Cases (16-byte keys, 100-byte values):
//   writes   durable writes (acknowledged after fsync) from 1, 8 and 32 host
//            threads, and beside them, from as many threads:
//              RocksDB        Put with sync=true (default options);
//              LMDB           one write transaction per put, committed with
//                             LMDB's default durable commit (no MDB_NOSYNC or
//                             MDB_NOMETASYNC). LMDB lets one writer in at a
//                             time, so its threads queue for the write lock:
//                             that is the point of the comparison;
//              raw fdatasync  the physical limit of one sync per write: ONE
//                             thread writing 116-byte records (a key's and a
//                             value's bytes) one after the other into a
//                             preallocated file, fdatasync after each
//                             (bench_support.h: preallocated_file), whatever
//                             the thread count of the row.
//            Each thread count runs the four in a rotated order. writes/s, the
//            ratios ours/peer, and our fsyncs per acknowledged write.
//            Targets: 1 thread >= 0.9x RocksDB; 32 threads >= 2x RocksDB;
//            fsyncs per write at 32 threads <= 1/8.
//   gets     host-thread gets of warm keys (N = 1 000 000 by default, all
//            checkpointed into the trees), 1 and 2 threads, beside RocksDB with
//            the same cache budget (1 GiB) and the same keys (target >= 2x),
//            and LMDB with the same keys (loaded, synced, every key read once;
//            its pages are in the OS page cache), read with one read-only
//            transaction per get whose handle each thread reuses
//            (mdb_txn_renew, mdb_get, mdb_txn_reset), so that every get sees
//            the latest commit, as ours does; gets/s and the ratios; the median
//            latency of one get of ours (target <= 5 us).
//   restart  time to reopen a shard whose log holds 100 000 writes that no
//            checkpoint covers (target < 1 s), beside RocksDB reopening with
//            100 000 Puts in its WAL and no SST (written with sync=false, the
//            WAL synced once, closed with avoid_flush_during_shutdown); RocksDB
//            opens with default options, so it replays the WAL and flushes the
//            result to a level-0 file. LMDB keeps no log to replay: no peer.
//
// Output: the text lines below by default. With --json, one JSON object on
// stdout (progress goes to stderr):
//   {"program":"db_bench","date":"2026-...Z","dir":D,"seconds":S,"keys":N,
//    "shards":N,"rocksdb":"7.8.3","lmdb":"0.9.24","rows":[ROW, ...]}
//   ROW = {"workload":"writes"|"gets"|"restart", "case":TEXT, "threads":N,
//          "unit":"writes/s"|"gets/s"|"s"|"us"|"fsyncs/write",
//          "ours":X, "peer":"rocksdb"|"lmdb"|"raw_fdatasync"|null,
//          "peer_value":X|null, "ratio":ours/peer_value|null,
//          "better":"higher"|"lower", "target":TEXT|null, "met":BOOL|null}
//   "better" says which way is good for both figures: for "lower" (seconds,
//   microseconds) a ratio under 1 means ours is ahead. "target" names what it
//   applies to ("ratio >= 2", "ours <= 5 us"). Rows without a peer (our
//   fsyncs per write, the get latency) have null peer, peer_value and ratio.
//   For the raw_fdatasync peer, "threads" is ours; the raw loop is 1 thread.
//
// The data lives under --dir (default ./bench-data/db), removed at the end.
// Exit status 0 when the figures were taken (targets met or not), 1 on an
// error, 2 on bad usage or when a read misses a key the case wrote.
#include <lmdb.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "actors/database.h"
#include "bench/bench_support.h"
#include "bench/lmdb_store.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

std::string value_of(std::uint64_t i) { return std::string(50, static_cast<char>('a' + i % 26)) + fmt::format("{:050}", i); }

// ---------------------------------------------------------------------------
// Results: one row per figure, printed as JSON at the end with --json.

std::vector<report_row> rows;

// "PASS" or "MISS" for the text lines, and the row's verdict.
const char* verdict(bool met) { return met ? "PASS" : "MISS"; }

// ---------------------------------------------------------------------------
// Peers

std::unique_ptr<rocksdb::DB> open_rocksdb(const std::string& dir, std::size_t cache_bytes,
                                          bool avoid_flush_during_shutdown = false) {
  rocksdb::Options o;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(cache_bytes);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.create_if_missing = true;
  o.avoid_flush_during_shutdown = avoid_flush_during_shutdown;
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(o, dir, &raw);
  if (!st.ok()) {
    fmt::print(stderr, "db_bench: rocksdb open: {}\n", st.ToString());
    std::exit(1);
  }
  return std::unique_ptr<rocksdb::DB>(raw);
}


// Runs `op(thread, i)` from `threads` threads for `seconds`; operations/s.
template <class Op>
double run_threads(int threads, double seconds, Op op) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0};
  std::vector<std::thread> ts;
  auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) op(t, n++);
      done += n;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  return static_cast<double>(done.load()) / since(t0);
}

// One thread: 116-byte records (key and value bytes) into a preallocated file,
// fdatasync after each, for `seconds`; syncs/s.
double raw_fdatasync(const std::string& path, double seconds) {
  // 4 MiB, as far ahead as our log reserves; at 116 bytes a sync that is 36 000
  // syncs before the writes wrap around.
  auto file = must(preallocated_file::create(path, std::uint64_t{4} << 20), "preallocate");
  std::uint64_t n = 0;
  auto t0 = clock_type::now();
  do {
    must(file->write_and_sync(key_of(n) + value_of(n)), "raw write");
    ++n;
  } while (since(t0) < seconds);
  double rate = static_cast<double>(n) / since(t0);
  file.reset();
  std::filesystem::remove(path);
  return rate;
}

// ---------------------------------------------------------------------------
// Cases

std::size_t shard_count = 2;
std::size_t spin_polls = database_options{}.worker_spin_polls;
std::uint64_t wal_preallocate = shard_options{}.wal_preallocate;

database_options db_options(const std::string& dir) {
  database_options o;
  o.dir = dir;
  o.shards = shard_count;
  o.worker_spin_polls = spin_polls;
  o.shard.wal_preallocate = wal_preallocate;
  o.shard.cache_bytes = (std::size_t{1} << 30) / shard_count;  // 1 GiB in all, like RocksDB's block cache below
  return o;
}

void writes_case(const std::string& base, double seconds) {
  say("writes: durable (acknowledged after fsync), 16-byte keys, 100-byte values, {} s a case\n", seconds);
  std::size_t round = 0;
  for (int threads : {1, 8, 32}) {
    std::filesystem::remove_all(base + "/w");
    std::filesystem::create_directories(base + "/w");
    double ours = 0, fsyncs_per_write = 0, rocks = 0, lmdb = 0, raw = 0;
    std::vector<std::function<void()>> cases = {
        [&] {
          auto db = must(database::open(db_options(base + "/w/magnetite")), "open");
          auto before = must(db->stats(), "stats");
          std::atomic<std::uint64_t> writes{0};
          ours = run_threads(threads, seconds, [&](int t, std::uint64_t n) {
            std::uint64_t i = (static_cast<std::uint64_t>(t) << 40) | n;
            must(db->put(key_of(i), value_of(i)), "put");
            ++writes;
          });
          auto after = must(db->stats(), "stats");
          std::uint64_t fs = 0;
          for (std::size_t s = 0; s < after.shards.size(); ++s) fs += after.shards[s].log_fsyncs - before.shards[s].log_fsyncs;
          fsyncs_per_write = static_cast<double>(fs) / static_cast<double>(writes.load());
        },
        [&] {
          auto r = open_rocksdb(base + "/w/rocksdb", std::size_t{1} << 30);
          rocksdb::WriteOptions wo;
          wo.sync = true;
          rocks = run_threads(threads, seconds, [&](int t, std::uint64_t n) {
            std::uint64_t i = (static_cast<std::uint64_t>(t) << 40) | n;
            auto st = r->Put(wo, key_of(i), value_of(i));
            if (!st.ok()) std::exit(1);
          });
        },
        [&] {
          lmdb_store l(base + "/w/lmdb", 0, std::size_t{4} << 30);
          lmdb = run_threads(threads, seconds, [&](int t, std::uint64_t n) {
            std::uint64_t i = (static_cast<std::uint64_t>(t) << 40) | n;
            std::string k = key_of(i), v = value_of(i);
            MDB_val key = lmdb_val(k), val = lmdb_val(v);
            MDB_txn* txn = nullptr;
            lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
            lmdb_check(mdb_put(txn, l.dbi, &key, &val, 0), "put");
            lmdb_check(mdb_txn_commit(txn), "txn_commit");
          });
        },
        [&] { raw = raw_fdatasync(base + "/w/raw", seconds); },
    };
    for (std::size_t k = 0; k < cases.size(); ++k) cases[(k + round) % cases.size()]();
    ++round;

    std::string rocks_target = threads == 1 ? "ratio >= 0.9" : threads == 32 ? "ratio >= 2" : "";
    double rocks_min = threads == 1 ? 0.9 : 2.0;
    auto add = [&](std::string peer, double value, std::string target, std::optional<bool> met) {
      rows.push_back({"writes", "durable put", threads, "writes/s", ours, std::move(peer), value, false,
                      std::move(target), met});
    };
    add("rocksdb", rocks, rocks_target, rocks_target.empty() ? std::nullopt : std::optional<bool>(ours / rocks >= rocks_min));
    add("lmdb", lmdb, "", std::nullopt);
    add("raw_fdatasync", raw, "", std::nullopt);
    std::optional<bool> fs_met;
    if (threads == 32) fs_met = fsyncs_per_write <= 0.125;
    rows.push_back({"writes", "log fsyncs per acknowledged write", threads, "fsyncs/write", fsyncs_per_write, "", 0,
                    true, threads == 32 ? "ours <= 0.125" : "", fs_met});

    say("writes {:>2} thread{}: magnetite {:>8.0f}/s; fsyncs per write {:.3f}{}\n", threads, threads == 1 ? " " : "s",
        ours, fsyncs_per_write, fs_met ? fmt::format(" (target <= 0.125: {})", verdict(*fs_met)) : "");
    say("                    RocksDB sync  {:>8.0f}/s: ours {:.2f}x{}\n", rocks, ours / rocks,
        rocks_target.empty() ? "" : fmt::format(" (target >= {}x: {})", rocks_min, verdict(ours / rocks >= rocks_min)));
    say("                    LMDB durable  {:>8.0f}/s: ours {:.2f}x\n", lmdb, ours / lmdb);
    say("                    raw fdatasync {:>8.0f}/s: ours {:.2f}x (1 thread, 116-byte records, preallocated file)\n",
        raw, ours / raw);
  }
  std::filesystem::remove_all(base + "/w");
}

void gets_case(const std::string& base, double seconds, std::uint64_t keys) {
  std::filesystem::remove_all(base + "/g");
  std::filesystem::create_directories(base + "/g");
  std::vector<std::string> query(1 << 20);
  std::mt19937_64 rng(1);
  for (auto& q : query) q = key_of(rng() % keys);
  double ours1 = 0, ours2 = 0, median_ns = 0;
  {
    auto db = must(database::open(db_options(base + "/g/magnetite")), "open");
    // Load: one atomic batch per shard at a time (keys grouped by shard).
    std::vector<std::vector<batch_write>> per_shard(db->shard_count());
    auto flush = [&](std::size_t s) {
      if (per_shard[s].empty()) return;
      must(db->batch(per_shard[s], std::string_view(per_shard[s].front().key)), "batch");
      per_shard[s].clear();
    };
    auto t0 = clock_type::now();
    for (std::uint64_t i = 0; i < keys; ++i) {
      std::string k = key_of(i);
      std::size_t s = db->shard_of(k);
      per_shard[s].push_back({std::move(k), value_of(i), {}});
      if (per_shard[s].size() == 2000) flush(s);
    }
    for (std::size_t s = 0; s < per_shard.size(); ++s) flush(s);
    must(db->commit(), "commit");
    say("gets: {} keys loaded and checkpointed in {:.1f} s\n", keys, since(t0));
    for (std::uint64_t i = 0; i < keys; ++i) must(db->get(key_of(i)), "warm-up get");
    auto get_op = [&](int t, std::uint64_t n) {
      auto v = db->get(query[(n * 2 + static_cast<std::uint64_t>(t)) % query.size()]);
      if (!v || !*v) std::exit(2);
    };
    ours1 = run_threads(1, seconds, get_op);
    ours2 = run_threads(2, seconds, get_op);
    // Latency of one get, timed alone.
    std::vector<double> ns;
    for (int i = 0; i < 100000; ++i) {
      auto t = clock_type::now();
      auto v = db->get(query[static_cast<std::size_t>(i)]);
      ns.push_back(std::chrono::duration<double, std::nano>(clock_type::now() - t).count());
      if (!v || !*v) std::exit(2);
    }
    std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(ns.size() / 2), ns.end());
    median_ns = ns[ns.size() / 2];
  }
  std::filesystem::remove_all(base + "/g/magnetite");
  double rocks1 = 0, rocks2 = 0;
  {
    auto r = open_rocksdb(base + "/g/rocksdb", std::size_t{1} << 30);
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    for (std::uint64_t i = 0; i < keys; i += 1000) {
      rocksdb::WriteBatch b;
      for (std::uint64_t j = i; j < std::min(keys, i + 1000); ++j) b.Put(key_of(j), value_of(j));
      if (!r->Write(wo, &b).ok()) std::exit(1);
    }
    r->Flush(rocksdb::FlushOptions());
    r->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
    std::string v;
    for (std::uint64_t i = 0; i < keys; ++i) r->Get(rocksdb::ReadOptions(), key_of(i), &v);
    auto get_op = [&](int t, std::uint64_t n) {
      std::string out;
      if (!r->Get(rocksdb::ReadOptions(), query[(n * 2 + static_cast<std::uint64_t>(t)) % query.size()], &out).ok())
        std::exit(2);
    };
    rocks1 = run_threads(1, seconds, get_op);
    rocks2 = run_threads(2, seconds, get_op);
  }
  std::filesystem::remove_all(base + "/g/rocksdb");
  double lmdb1 = 0, lmdb2 = 0;
  {
    // Loaded without a sync per transaction, then synced once; reads do not sync.
    lmdb_store l(base + "/g/lmdb", MDB_NOTLS | MDB_NOSYNC, std::max<std::size_t>(std::size_t{1} << 30, keys * 1024));
    for (std::uint64_t i = 0; i < keys; i += 10000) {
      MDB_txn* txn = nullptr;
      lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
      for (std::uint64_t j = i; j < std::min(keys, i + 10000); ++j) {
        std::string k = key_of(j), v = value_of(j);
        MDB_val key = lmdb_val(k), val = lmdb_val(v);
        lmdb_check(mdb_put(txn, l.dbi, &key, &val, 0), "put");
      }
      lmdb_check(mdb_txn_commit(txn), "txn_commit");
    }
    lmdb_check(mdb_env_sync(l.env, 1), "env_sync");
    // One read-only transaction handle per thread, renewed for each get.
    std::vector<MDB_txn*> readers(2, nullptr);
    for (auto& r : readers) {
      lmdb_check(mdb_txn_begin(l.env, nullptr, MDB_RDONLY, &r), "txn_begin");
      mdb_txn_reset(r);
    }
    auto get_one = [&](MDB_txn* r, const std::string& k) {
      lmdb_check(mdb_txn_renew(r), "txn_renew");
      MDB_val key = lmdb_val(k), val{};
      if (mdb_get(r, l.dbi, &key, &val) != 0 || val.mv_size != 100) std::exit(2);
      mdb_txn_reset(r);
    };
    for (std::uint64_t i = 0; i < keys; ++i) get_one(readers[0], key_of(i));
    auto get_op = [&](int t, std::uint64_t n) {
      get_one(readers[static_cast<std::size_t>(t)], query[(n * 2 + static_cast<std::uint64_t>(t)) % query.size()]);
    };
    lmdb1 = run_threads(1, seconds, get_op);
    lmdb2 = run_threads(2, seconds, get_op);
    for (auto* r : readers) mdb_txn_abort(r);
  }
  std::filesystem::remove_all(base + "/g");
  for (int threads : {1, 2}) {
    double ours = threads == 1 ? ours1 : ours2, rocks = threads == 1 ? rocks1 : rocks2,
           lmdb = threads == 1 ? lmdb1 : lmdb2;
    bool met = ours / rocks >= 2;
    rows.push_back({"gets", "warm get", threads, "gets/s", ours, "rocksdb", rocks, false, "ratio >= 2", met});
    rows.push_back({"gets", "warm get", threads, "gets/s", ours, "lmdb", lmdb, false, "", std::nullopt});
    say("gets     {} thread{}: magnetite {:>9.0f}/s, RocksDB {:>9.0f}/s: {:.2f}x (target >= 2x: {}); LMDB {:>9.0f}/s: "
        "{:.2f}x\n",
        threads, threads == 1 ? " " : "s", ours, rocks, ours / rocks, verdict(met), lmdb, ours / lmdb);
  }
  bool latency_met = median_ns <= 5000;
  rows.push_back({"gets", "latency of one get (median of 100 000)", 1, "us", median_ns / 1000, "", 0, true,
                  "ours <= 5 us", latency_met});
  say("get latency, median of 100 000 single gets: {:.2f} us (target <= 5 us: {})\n", median_ns / 1000,
      verdict(latency_met));
  say("(LMDB: one read-only transaction per get, its handle reused per thread: mdb_txn_renew, mdb_get, "
      "mdb_txn_reset)\n");
}

void restart_case(const std::string& base) {
  constexpr std::uint64_t writes = 100000;
  std::filesystem::remove_all(base + "/r");
  std::filesystem::create_directories(base + "/r");
  std::string dir = base + "/r/shard";
  shard_options o;
  o.checkpoint_bytes = std::size_t{1} << 40;  // never: everything stays in the log
  {
    auto s = must(shard::open(env::posix(), dir, o), "open");
    for (std::uint64_t i = 0; i < writes; ++i) {
      must(s->put(key_of(i), value_of(i)), "put");
      if (i % 1000 == 999) must(s->commit_group(), "group");
    }
    must(s->commit_group(), "group");
  }
  auto t0 = clock_type::now();
  auto s = must(shard::open(env::posix(), dir, o), "reopen");
  double took = since(t0);
  auto v = must(s->get(key_of(writes - 1)), "get");
  if (!v || *v != value_of(writes - 1)) std::exit(2);
  std::uint64_t replayed = s->stats().replayed_records;
  s.reset();

  // RocksDB: the same writes, one WAL record each, left in the WAL only.
  std::string rdir = base + "/r/rocksdb";
  {
    auto r = open_rocksdb(rdir, std::size_t{1} << 30, /*avoid_flush_during_shutdown=*/true);
    rocksdb::WriteOptions wo;
    for (std::uint64_t i = 0; i < writes; ++i)
      if (!r->Put(wo, key_of(i), value_of(i)).ok()) std::exit(1);
    if (!r->FlushWAL(/*sync=*/true).ok()) std::exit(1);
  }
  for (const auto& f : std::filesystem::directory_iterator(rdir))
    if (f.path().extension() == ".sst") {
      fmt::print(stderr, "db_bench: rocksdb flushed {} before the restart: the case would not measure a replay\n",
                 f.path().string());
      std::exit(1);
    }
  t0 = clock_type::now();
  auto r = open_rocksdb(rdir, std::size_t{1} << 30);
  double rocks = since(t0);
  std::string rv;
  if (!r->Get(rocksdb::ReadOptions(), key_of(writes - 1), &rv).ok() || rv != value_of(writes - 1)) std::exit(2);
  r.reset();
  std::filesystem::remove_all(base + "/r");

  bool met = took < 1.0;
  rows.push_back({"restart", "reopen replaying 100 000 logged writes", 1, "s", took, "rocksdb", rocks, true,
                  "ours < 1 s", met});
  say("restart: reopening a shard with 100 000 logged writes (no checkpoint) took {:.3f} s, {} records "
      "replayed (target < 1 s: {}); RocksDB reopening with them in its WAL {:.3f} s: {:.2f}x (lower is better)\n",
      took, replayed, verdict(met), rocks, took / rocks);
}

void print_json(const std::string& base, double seconds, std::uint64_t keys) {
  std::string out = fmt::format(
      "{{\"program\":\"db_bench\",\"date\":\"{}\",\"dir\":{},\"seconds\":{},\"keys\":{},\"shards\":{},"
      "\"rocksdb\":\"{}.{}.{}\",\"lmdb\":\"{}.{}.{}\",\"rows\":[",
      utc_now(), json_string(base), json_number(seconds), keys, shard_count, ROCKSDB_MAJOR, ROCKSDB_MINOR,
      ROCKSDB_PATCH, MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH);
  out += json_rows(rows);
  fmt::print("{}\n]}}\n", out);
}

[[noreturn]] void usage() {
  fmt::print(stderr,
             "usage: db_bench [--dir D] [--seconds S] [--keys N] [--shards N] [--spin-polls N] "
             "[--wal-preallocate BYTES] [--only writes|gets|restart] [--json]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "bench-data/db", only;
  double seconds = 3;
  std::uint64_t keys = 1'000'000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) base = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--keys" && i + 1 < argc) keys = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--shards" && i + 1 < argc) shard_count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--spin-polls" && i + 1 < argc) spin_polls = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--wal-preallocate" && i + 1 < argc) wal_preallocate = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--json") json_output = true;
    else usage();
  }
  if (!(seconds > 0) || keys == 0 || shard_count == 0 ||
      !(only.empty() || only == "writes" || only == "gets" || only == "restart"))
    usage();
  std::filesystem::create_directories(base);
  if (only.empty() || only == "writes") writes_case(base, seconds);
  if (only.empty() || only == "gets") gets_case(base, seconds, keys);
  if (only.empty() || only == "restart") restart_case(base);
  std::filesystem::remove_all(base);
  if (json_output) print_json(base, seconds, keys);
  return 0;
}
