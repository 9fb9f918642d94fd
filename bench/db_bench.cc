// db_bench: the database a host embeds (issue 4), beside RocksDB in the same
// run, on the same disk.
//
//   db_bench [--dir D] [--seconds S] [--keys N] [--shards N] [--spin-polls N]
//            [--wal-preallocate BYTES] [--only writes|gets|restart]
//
// Cases (16-byte keys, 100-byte values):
//   writes   durable writes (acknowledged after fsync) from 1, 8 and 32 host
//            threads, beside RocksDB Put with sync=true from as many threads:
//            writes/s, the ratio, and our fsyncs per acknowledged write.
//            Targets: 1 thread >= 0.9x RocksDB; 32 threads >= 2x RocksDB;
//            fsyncs per write at 32 threads <= 1/8.
//   gets     host-thread gets of warm keys (N = 1 000 000 by default, all
//            checkpointed into the trees), 1 and 2 threads, beside RocksDB with
//            the same cache budget (1 GiB) and the same keys: gets/s and the
//            ratio (target >= 2x); the median latency of one get (target <= 5 us).
//   restart  time to reopen a shard whose log holds 100 000 writes that no
//            checkpoint covers (target < 1 s).
//
// The data lives under --dir (default ./bench-data/db), removed at the end.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include "actors/database.h"
#include "bench/bench_support.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {



std::string value_of(std::uint64_t i) { return std::string(50, static_cast<char>('a' + i % 26)) + fmt::format("{:050}", i); }

std::unique_ptr<rocksdb::DB> open_rocksdb(const std::string& dir, std::size_t cache_bytes) {
  rocksdb::Options o;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(cache_bytes);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.create_if_missing = true;
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
  fmt::print("writes: durable (acknowledged after fsync), 16-byte keys, 100-byte values, {} s a case\n", seconds);
  for (int threads : {1, 8, 32}) {
    std::filesystem::remove_all(base + "/w");
    std::filesystem::create_directories(base + "/w");
    double ours = 0, fsyncs_per_write = 0;
    {
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
    }
    double rocks = 0;
    {
      auto r = open_rocksdb(base + "/w/rocksdb", std::size_t{1} << 30);
      rocksdb::WriteOptions wo;
      wo.sync = true;
      rocks = run_threads(threads, seconds, [&](int t, std::uint64_t n) {
        std::uint64_t i = (static_cast<std::uint64_t>(t) << 40) | n;
        auto st = r->Put(wo, key_of(i), value_of(i));
        if (!st.ok()) std::exit(1);
      });
    }
    double target = threads == 1 ? 0.9 : threads == 32 ? 2.0 : 0.0;
    fmt::print("writes  {:>2} threads: magnetite {:>8.0f}/s, RocksDB sync {:>8.0f}/s: {:.2f}x{}; fsyncs per write {:.3f}{}\n",
               threads, ours, rocks, ours / rocks,
               target > 0 ? fmt::format(" (target >= {}x: {})", target, ours / rocks >= target ? "PASS" : "MISS") : "",
               fsyncs_per_write,
               threads == 32 ? fmt::format(" (target <= 0.125: {})", fsyncs_per_write <= 0.125 ? "PASS" : "MISS") : "");
  }
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
    fmt::print("gets: {} keys loaded and checkpointed in {:.1f} s\n", keys, since(t0));
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
      auto v = db->get(query[i]);
      ns.push_back(std::chrono::duration<double, std::nano>(clock_type::now() - t).count());
      if (!v || !*v) std::exit(2);
    }
    std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
    median_ns = ns[ns.size() / 2];
  }
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
  fmt::print("gets     1 thread : magnetite {:>9.0f}/s, RocksDB {:>9.0f}/s: {:.2f}x (target >= 2x: {})\n", ours1, rocks1,
             ours1 / rocks1, ours1 / rocks1 >= 2 ? "PASS" : "MISS");
  fmt::print("gets     2 threads: magnetite {:>9.0f}/s, RocksDB {:>9.0f}/s: {:.2f}x (target >= 2x: {})\n", ours2, rocks2,
             ours2 / rocks2, ours2 / rocks2 >= 2 ? "PASS" : "MISS");
  fmt::print("get latency, median of 100 000 single gets: {:.2f} us (target <= 5 us: {})\n", median_ns / 1000,
             median_ns <= 5000 ? "PASS" : "MISS");
}

void restart_case(const std::string& base) {
  std::filesystem::remove_all(base + "/r");
  std::filesystem::create_directories(base + "/r");
  std::string dir = base + "/r/shard";
  shard_options o;
  o.checkpoint_bytes = std::size_t{1} << 40;  // never: everything stays in the log
  {
    auto s = must(shard::open(env::posix(), dir, o), "open");
    for (std::uint64_t i = 0; i < 100000; ++i) {
      must(s->put(key_of(i), value_of(i)), "put");
      if (i % 1000 == 999) must(s->commit_group(), "group");
    }
    must(s->commit_group(), "group");
  }
  auto t0 = clock_type::now();
  auto s = must(shard::open(env::posix(), dir, o), "reopen");
  double took = since(t0);
  auto v = must(s->get(key_of(99999)), "get");
  if (!v || *v != value_of(99999)) std::exit(2);
  fmt::print("restart: reopening a shard with 100 000 logged writes (no checkpoint) took {:.3f} s, {} records "
             "replayed (target < 1 s: {})\n",
             took, s->stats().replayed_records, took < 1.0 ? "PASS" : "MISS");
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
    else {
      fmt::print(stderr,
                 "usage: db_bench [--dir D] [--seconds S] [--keys N] [--shards N] [--spin-polls N] "
                 "[--wal-preallocate BYTES] [--only writes|gets|restart]\n");
      return 2;
    }
  }
  std::filesystem::create_directories(base);
  if (only.empty() || only == "writes") writes_case(base, seconds);
  if (only.empty() || only == "gets") gets_case(base, seconds, keys);
  if (only.empty() || only == "restart") restart_case(base);
  std::filesystem::remove_all(base);
  return 0;
}
