// db_bench: the database a host embeds (issue 4), beside RocksDB, LMDB and
// raw fdatasync (issue 5) in the same run, on the same disk; with a memory
// budget shared by both engines, cold reads, bulk loads and space
// amplification under overwrites (issue 19).
//
//   db_bench [--dir D] [--seconds S] [--keys N] [--cache-mib M] [--rounds R]
//            [--shards N] [--spin-polls N] [--writer-spin US] [--wal-preallocate BYTES]
//            [--record-cache-share F] [--max-space-amplification F]
//            [--max-sorted-runs N] [--no-peers] [--in-process] [--ops N] [--checkpoint-bytes B] [--reclaim-threads
//            1|32]
//            [--reclaim-turn K] [--order random|sequential] [--values R]
//            [--keep-loaded] [--memory-limit-mib M] [--leaf-form lz4|zstd|searchable] [--mapped-reads]
//            [--only writes|gets|restart|load|overwrite|reclaim|scans] [--json]
//   db_bench --rocksdb-readrandom DIR [--keys N] [--cache-mib M] [--seconds S]
//
// Both engines get the same memory for cached data: RocksDB's block cache is
// M MiB (default 1024) and ours database_options::memory_budget is M MiB (the
// node caches of all shards share it; --record-cache-share F sets the part of
// it that may hold compressed leaf records, shard_options::record_cache_share,
// 0 for decoded nodes only; --max-space-amplification F sets
// shard_options::max_space_amplification, 0 for no reclamation, in the cases
// that do not set it themselves; --max-sorted-runs N sets
// shard_options::max_sorted_runs, 0 for every checkpoint into the tree as
// before sorted runs; --no-peers makes `load` measure ours alone, no row
// reported, for A/Bs of those options; --in-process runs each engine in
// this process rather than a child, so heaptrack sees it, and reports no
// peak RSS). RocksDB is otherwise opened as RocksDB's
// own db_bench opens it by default (4 KiB blocks, no bloom filter, index and
// filter blocks outside the cache, level compaction, snappy; open_rocksdb):
// docs/benchmarks.md has the check against it. --writer-spin US sets
// database_options::writer_spin (0: a lone writer sleeps for its answer).
//
// Cases (16-byte keys, 100-byte values). Values compress to about half their
// size, as RocksDB's db_bench makes them by default (--compression_ratio
// 0.5): 50 random printable characters written twice (--values R: R x 100
// random characters, repeated). The bulk loads of `gets`, `load`,
// `overwrite`, `reclaim` and `scans` write every key once in random order
// (--order sequential: in key order); a sorted ingest is in key order
// whatever the order.
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
//   gets     each engine loads N keys (default 1 000 000; the bulk load below)
//            in one child process; another child reopens it (its own cache
//            empty; the OS page cache is not dropped) and reads random keys
//            that exist, from 1 thread for S seconds, then from 2 threads for
//            S seconds, timing every get. Per engine: gets/s, the median and
//            the 99th percentile of one get's latency, and the reading
//            child's peak RSS. Peers: RocksDB (same cache budget, automatic
//            compactions waited for before the close), and LMDB (loaded
//            without syncs, synced once; one read-only transaction per get
//            whose handle each thread reuses: mdb_txn_renew, mdb_get,
//            mdb_txn_reset, so every get sees the latest commit, as ours
//            does; its pages are in the OS page cache). Before each reading
//            child the parent reads the engine's files once, so they are in
//            the page cache whatever ran before. Targets: gets/s >= 2x
//            RocksDB; median latency at 1 thread <= 5 us. Rows also give the
//            disk's read requests per get (from /sys/dev/block: the whole
//            disk's) and the KiB the child read from storage per get.
//            --memory-limit-mib M: each reading child runs in a memory
//            cgroup of M MiB (version 1; its anonymous memory and its page
//            cache together), after the page cache was dropped, so what does
//            not fit is read from the disk; LMDB then opens with
//            MDB_NORDAHEAD, as its documentation advises for a map larger
//            than memory. Targets then: gets/s >= 1.5x RocksDB, disk reads
//            per get <= 1.2. Without root (or cgroup v1) it says so and skips.
//            --keep-loaded keeps each engine's loaded directory (with a
//            stamp of the load) and reads it again in later runs without
//            loading; --leaf-form sets shard_options::leaves for ours,
//            --mapped-reads shard_options::mapped_reads.
//   restart  time to reopen a shard whose log holds 100 000 writes that no
//            checkpoint covers (target < 1 s), beside RocksDB reopening with
//            100 000 Puts in its WAL and no SST (written with sync=false, the
//            WAL synced once, closed with avoid_flush_during_shutdown); RocksDB
//            opens with default options, so it replays the WAL and flushes the
//            result to a level-0 file. LMDB keeps no log to replay: no peer.
//   load     bulk load of N keys (random order), no sync per write, each engine
//            in its own child process: ours in atomic batches of 1 000 keys of
//            one shard (at most 2 a shard in flight) under the `interval`
//            fsync policy, then commit(); RocksDB in WriteBatches of 1 000
//            with sync=false (WAL on), then Flush. Keys/s until the data is
//            durable in the engine's tree or SSTs, bytes on disk / live bytes
//            (N x 116) after it, and peak RSS. Then the same keys and values
//            ingested in sorted runs of 100 000, each durable before the next
//            (ingest_engine): ours database::ingest, RocksDB SstFileWriter and
//            IngestExternalFile; keys/s and peak RSS (peer "rocksdb_sst").
//   overwrite each engine in its own child: the load, then R rounds (default
//            10) that rewrite every key once, in a permuted order, with new
//            random values (100 letters and digits); ours commit()s after each
//            round, RocksDB runs its default automatic compactions and
//            nothing else. Bytes of the files of the engine's directory
//            (their lengths: see disk_bytes) / live bytes after the load and
//            after each round: space amplification; and rewrites/s over all
//            rounds (ours with its commits).
//   reclaim  (only with --only reclaim: not part of a run of every case) does
//            automatic space reclamation stall writers? Each configuration in
//            its own child: N keys (default 200 000 for this case) loaded as
//            `load` does (reclamation off, default checkpoint_bytes, then
//            commit()), the database closed and reopened with the `always`
//            fsync policy and checkpoint_bytes B (--checkpoint-bytes, default
//            64 KiB, the shard default being 32 MiB: so that checkpoints,
//            after which reclamation starts, happen during the run and the
//            node store passes reclaim_min_bytes, 8 MiB a shard, within N / 10
//            writes at N = 200 000), then --ops writes (default N / 5) of
//            durable random overwrites of those keys (uniform random key,
//            new random value of 100 letters and digits; thread t's sequence
//            drawn from seed t, the same in every configuration) from 1 and
//            from 32 threads (a fresh load for each; --reclaim-threads T:
//            only T), timing every put, the three configurations one after
//            the other in the order on, off, RocksDB rotated by K + the
//            thread count's index (--reclaim-turn K, default 0):
//              on           max_space_amplification 1.5 (the default);
//              reclaim_off  max_space_amplification 0 (no reclamation);
//              RocksDB      the same load (WriteBatches, Flush, automatic
//                           compactions waited for), then Put with sync=true;
//                           its write buffer is 2 x B (the same unflushed
//                           bytes as our 2 shards' checkpoint_bytes) so that
//                           its flushes and automatic compactions, the
//                           comparable of our checkpoints and reclamation,
//                           run during the run (counted by a listener).
//            Rows per thread count: p50 and p99 of one put (us), writes/s
//            and the space amplification at the end (the node_bytes and
//            wal_bytes of all shards, database::stats(), over N x 116) for
//            on beside reclaim_off; the reclamation cycles that completed
//            during the run and the MiB they reclaimed (reclaim_cycles and
//            reclaimed_bytes summed over shards, after less before; no
//            peer); p99 and writes/s of on beside RocksDB. Target: p99 on <=
//            2x p99 reclaim_off. The figure means nothing if no cycle ran:
//            the text line says so.
//   scans    (only with --only scans: not part of a run of every case) the
//            read path's merge of a shard's memtables over its tree, ours only
//            (no peer: it is there to compare a change of ours with what came
//            before). In one child: N keys loaded as `load` does and
//            committed, the database reopened under the `interval` fsync
//            policy, then every 10th key rewritten and every 100th (i % 100
//            == 5) deleted, in batches of 1 000 keys of one shard, left in the
//            shards' memtables (no checkpoint). Then, each for S seconds, 1
//            thread: full scans through database::scan (entries/s), full
//            scans of each shard's view forward and backward
//            (read_view::scan, scan_reverse: entries/s), and range reads of
//            100 entries from random keys (database::range: ranges/s). The
//            same again after commit(), the tree alone. Every scan must see
//            N - N / 100 entries (exit 2 otherwise).
//
// --rocksdb-readrandom DIR reads a RocksDB directory that RocksDB's own
// db_bench filled (`db_bench --benchmarks=fillseq --num=N`: its keys, 8
// big-endian bytes of i then eight '0's) with the peer's options and read
// loop, 1 thread, S seconds, uniform random keys below N, and prints gets/s,
// median and p99: the check of the peer against `db_bench readrandom`.
//
// Each engine's part of gets, load and overwrite, and each whole writes and
// restart case, runs in a child process (fork): the peak RSS reported is that
// child's own (wait4's ru_maxrss), and this process never holds an engine,
// so it never forks with an engine's threads alive (RocksDB's background
// threads would not exist in the child).
//
// Output: the text lines below by default. With --json, one JSON object on
// stdout (progress goes to stderr):
//   {"program":"db_bench","date":"2026-...Z","dir":D,"seconds":S,"keys":N,
//    "cache_mib":M,"rounds":R,"shards":N,"rocksdb":"7.8.3","lmdb":"0.9.24",
//    "rows":[ROW, ...]}
//   ROW = {"workload":"writes"|"gets"|"restart"|"load"|"overwrite"|"reclaim"|"scans",
//          "case":TEXT, "threads":N,
//          "unit":"writes/s"|"gets/s"|"keys/s"|"s"|"us"|"fsyncs/write"|"x"|
//                 "cycles"|"MiB"|"entries/s"|"ranges/s",
//          "ours":X, "peer":"rocksdb"|"lmdb"|"raw_fdatasync"|"reclaim_off"|null,
//          "peer_value":X|null, "ratio":ours/peer_value|null,
//          "better":"higher"|"lower", "target":TEXT|null, "met":BOOL|null,
//          "ours_rss_mib":X|null, "peer_rss_mib":X|null}
//   "better" says which way is good for both figures: for "lower" (seconds,
//   microseconds, space amplification) a ratio under 1 means ours is ahead.
//   "target" names what it applies to ("ratio >= 2", "ours <= 5 us"). Rows
//   without a peer (our fsyncs per write, reclamation cycles) have null
//   peer, peer_value and ratio. For the raw_fdatasync peer, "threads" is
//   ours; the raw loop is 1 thread. For the reclaim_off peer, "ours" is our
//   engine with reclamation on and "peer_value" the same engine with it off. ours_rss_mib and peer_rss_mib: the peak
//   RSS in MiB of the child that ran each engine's part (null where not measured).
//
// The data lives under --dir (default ./bench-data/db), removed at the end.
// Exit status 0 when the figures were taken (targets met or not), 1 on an
// error, 2 on bad usage or when a read misses a key the case wrote.
#include <lmdb.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "actors/database_core.h"
#include "bench/bench_support.h"
#include "bench/lmdb_store.h"
#include "engine/keyspace.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

// How a load visits the keys (--order): in random order (the default), or in
// key order. And how well values compress (--values R, RocksDB's
// --compression_ratio meaning: 0.5 the default, about half).
bool random_order = true;
double value_ratio = 0.5;

// The value of key i in the load: 100 bytes that compress to about
// value_ratio of their size (compressible_into).
std::string value_of(std::uint64_t i) {
  std::string v;
  compressible_into(i, value_ratio, 100, v);
  return v;
}

// key_of(i) written into `out`, without an allocation: a timed get pays for
// its key's digits, not for fmt.
void key_into(std::uint64_t i, char (&out)[16]) {
  std::uint64_t v = i * 7919 % 10000000000000000ULL;
  for (int d = 15; d >= 0; --d) {
    out[d] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------------------
// Results: one row per figure, printed as JSON at the end with --json.

std::vector<report_row> rows;

const char* leaf_form_name(leaf_form f) {
  return f == leaf_form::lz4 ? "lz4" : f == leaf_form::zstd ? "zstd" : "searchable";
}

// "PASS" or "MISS" for the text lines, and the row's verdict.
const char* verdict(bool met) { return met ? "PASS" : "MISS"; }

// ---------------------------------------------------------------------------
// Settings shared by every case (set from the command line).

std::size_t shard_count = 2;
std::size_t spin_polls = database_options{}.worker_spin_polls;
std::chrono::microseconds writer_spin = database_options{}.writer_spin;
std::uint64_t wal_preallocate = shard_options{}.wal_preallocate;
double record_cache_share = shard_options{}.record_cache_share;            // 0: decoded nodes only
leaf_form leaves = shard_options{}.leaves;                                 // --leaf-form
bool mapped_reads = shard_options{}.mapped_reads;                          // --mapped-reads
double max_space_amplification = shard_options{}.max_space_amplification;  // 0: no reclamation
// load: ours alone (A/Bs of our own options).
bool no_peers = false;
// No child processes: for heaptrack and perf; no peak RSS then.
bool in_process = false;
// 0: every checkpoint into the tree, as before sorted runs.
std::size_t max_sorted_runs = shard_options{}.max_sorted_runs;
std::size_t cache_mib = 1024;
std::size_t cache_bytes() { return cache_mib << 20; }
// gets: keep each engine's loaded directory, and read one that a load of
// the same keys, order and values left, without loading it again.
bool keep_loaded = false;

// ---------------------------------------------------------------------------
// Peers

// RocksDB as its own db_bench opens it by default (7.8.3): the library's
// defaults, but for the two that db_bench sets otherwise: the block cache
// reserves no high-priority pool (--cache_high_pri_pool_ratio 0; the
// library's LRU cache reserves half) and the table cache has 16 shards
// (--table_cache_numshardbits 4; the library's default is 64).
// `tune`, when given, changes the options last (the reclaim case's write
// buffer and listener).
std::unique_ptr<rocksdb::DB> open_rocksdb(const std::string& dir, bool avoid_flush_during_shutdown = false,
                                          const std::function<void(rocksdb::Options&)>& tune = {}) {
  rocksdb::Options o;
  rocksdb::BlockBasedTableOptions table;
  rocksdb::LRUCacheOptions cache(cache_bytes(), /*num_shard_bits=*/-1, /*strict_capacity_limit=*/false,
                                 /*high_pri_pool_ratio=*/0.0);
  table.block_cache = rocksdb::NewLRUCache(cache);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.table_cache_numshardbits = 4;
  o.create_if_missing = true;
  o.avoid_flush_during_shutdown = avoid_flush_during_shutdown;
  if (tune) tune(o);
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(o, dir, &raw);
  if (!st.ok()) {
    fmt::print(stderr, "db_bench: rocksdb open: {}\n", st.ToString());
    std::exit(1);
  }
  return std::unique_ptr<rocksdb::DB>(raw);
}

void rocksdb_must(const rocksdb::Status& st, const char* what) {
  if (st.ok()) return;
  fmt::print(stderr, "db_bench: rocksdb {}: {}\n", what, st.ToString());
  std::exit(1);
}

// Waits until RocksDB has no flush or compaction running or pending: the
// shape its automatic compactions give the data, without a manual one.
void settle(rocksdb::DB& r) {
  for (;;) {
    std::uint64_t pending = 0, compactions = 0, flushes = 0;
    r.GetIntProperty("rocksdb.compaction-pending", &pending);
    r.GetIntProperty("rocksdb.num-running-compactions", &compactions);
    r.GetIntProperty("rocksdb.num-running-flushes", &flushes);
    if (pending == 0 && compactions == 0 && flushes == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
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

// A small file's text (empty when it cannot be read: a missing stamp, a
// cgroup file this kernel lacks); and writing one. Not read_whole_file: it
// reads as many bytes as the file's size says, and the kernel's files under
// /sys and /proc say 0 or 4096 whatever they hold.
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) {
    fmt::print(stderr, "db_bench: cannot write {}\n", path);
    std::exit(1);
  }
}

// ---------------------------------------------------------------------------
// Child processes: an engine's part of a case runs in a fork of this process,
// which holds no engine (see the top comment). The child sends its figures
// and rows back through a pipe; its peak RSS comes from wait4.

struct child_result {
  std::vector<double> figures;
  double rss_mib = 0;
};

class wire {
 public:
  void f64(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) {
    f64(static_cast<double>(s.size()));
    out_ += s;
  }
  const std::string& bytes() const { return out_; }

  explicit wire(std::string in = {}) : out_(std::move(in)) {}
  double f64() {
    double v = 0;
    if (at_ + sizeof v > out_.size()) bad();
    std::memcpy(&v, out_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str() {
    auto n = static_cast<std::size_t>(f64());
    if (at_ + n > out_.size()) bad();
    std::string s = out_.substr(at_, n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ == out_.size(); }

 private:
  [[noreturn]] static void bad() {
    fmt::print(stderr, "db_bench: a child process sent back a truncated report\n");
    std::exit(1);
  }
  std::string out_;
  std::size_t at_ = 0;
};

void put_optional(wire& w, std::optional<double> v) {
  w.f64(v ? 1 : 0);
  w.f64(v.value_or(0));
}
std::optional<double> get_optional(wire& w) {
  bool has = w.f64() != 0;
  double v = w.f64();
  return has ? std::optional<double>(v) : std::nullopt;
}

// Runs `body` in a child process; returns the figures it filled in, after
// appending the rows it added to `rows`. A child that fails ends this process
// with the child's exit status (1, or 2 for a missed key).
child_result in_child(const std::function<void(std::vector<double>&)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    fmt::print(stderr, "db_bench: pipe: {}\n", std::strerror(errno));
    std::exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  if (in_process) {
    child_result r;
    body(r.figures);
    return r;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    fmt::print(stderr, "db_bench: fork: {}\n", std::strerror(errno));
    std::exit(1);
  }
  if (pid == 0) {
    ::close(fds[0]);
    rows.clear();
    std::vector<double> figures;
    body(figures);
    wire w;
    w.f64(static_cast<double>(figures.size()));
    for (double f : figures) w.f64(f);
    w.f64(static_cast<double>(rows.size()));
    for (const auto& r : rows) {
      w.str(r.workload), w.str(r.what), w.f64(r.threads), w.str(r.unit), w.f64(r.ours), w.str(r.peer);
      w.f64(r.peer_value), w.f64(r.lower_is_better), w.str(r.target);
      put_optional(w, r.met ? std::optional<double>(*r.met) : std::nullopt);
      put_optional(w, r.ours_rss_mib), put_optional(w, r.peer_rss_mib);
    }
    const std::string& b = w.bytes();
    for (std::size_t at = 0; at < b.size();) {
      ssize_t n = ::write(fds[1], b.data() + at, b.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(1);
      at += static_cast<std::size_t>(n);
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(0);  // no exit handlers: they belong to the parent
  }
  ::close(fds[1]);
  std::string in;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0)
      in.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "db_bench: a child process failed ({})\n",
               WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                 : fmt::format("signal {}", WTERMSIG(status)));
    std::exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  wire w(std::move(in));
  child_result out;
  out.figures.resize(static_cast<std::size_t>(w.f64()));
  for (double& f : out.figures) f = w.f64();
  auto n = static_cast<std::size_t>(w.f64());
  for (std::size_t i = 0; i < n; ++i) {
    report_row r;
    r.workload = w.str(), r.what = w.str(), r.threads = static_cast<int>(w.f64()), r.unit = w.str();
    r.ours = w.f64(), r.peer = w.str(), r.peer_value = w.f64(), r.lower_is_better = w.f64() != 0;
    r.target = w.str();
    if (auto met = get_optional(w)) r.met = *met != 0;
    r.ours_rss_mib = get_optional(w), r.peer_rss_mib = get_optional(w);
    rows.push_back(std::move(r));
  }
  if (!w.done()) {
    fmt::print(stderr, "db_bench: a child process sent back more than its report\n");
    std::exit(1);
  }
  out.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  return out;
}

// ---------------------------------------------------------------------------
// Latency of single operations.

// Nanoseconds in buckets 1/32 to 1/64 of their value wide (32 a power of
// two), so each thread records every operation in fixed memory (~15 KiB) and
// adds nothing to the peak RSS it is measured beside.
class latency_histogram {
 public:
  void add(std::uint64_t ns) {
    ++counts_[bucket(ns)];
    ++n_;
  }
  void merge(const latency_histogram& o) {
    for (std::size_t b = 0; b < counts_.size(); ++b) counts_[b] += o.counts_[b];
    n_ += o.n_;
  }
  // The q-quantile (0 < q < 1), in nanoseconds: the middle of its bucket.
  double quantile(double q) const {
    if (n_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n_)));
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < counts_.size(); ++b) {
      seen += counts_[b];
      if (seen >= rank) return lower(b) + width(b) / 2;
    }
    return lower(counts_.size() - 1);
  }

 private:
  static std::size_t bucket(std::uint64_t v) {
    if (v < 32) return static_cast<std::size_t>(v);
    int e = 63 - std::countl_zero(v);  // 2^e <= v < 2^(e+1), e >= 5
    return static_cast<std::size_t>(32 + (e - 5) * 32 + ((v >> (e - 5)) & 31));
  }
  static double lower(std::size_t b) {
    if (b < 32) return static_cast<double>(b);
    std::size_t e = (b - 32) / 32 + 5, sub = (b - 32) % 32;
    return std::ldexp(static_cast<double>(32 + sub), static_cast<int>(e - 5));
  }
  static double width(std::size_t b) { return b < 32 ? 1.0 : std::ldexp(1.0, static_cast<int>((b - 32) / 32)); }

  std::array<std::uint64_t, 32 + 59 * 32> counts_{};
  std::uint64_t n_ = 0;
};

struct timed_result {
  double rate = 0;  // operations/s
  double p50_us = 0, p99_us = 0;
  std::uint64_t ops = 0;
};

// Runs `op(thread, rng)` from `threads` threads for `seconds`, timing each
// call (two steady_clock reads, the same for every engine).
template <class Op>
timed_result run_timed(int threads, double seconds, Op op) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0};
  std::vector<latency_histogram> hist(static_cast<std::size_t>(threads));
  std::vector<std::thread> ts;
  auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::uint64_t rng = 0x5eed0000ULL + static_cast<std::uint64_t>(t), n = 0;
      auto& h = hist[static_cast<std::size_t>(t)];
      while (!stop.load(std::memory_order_relaxed)) {
        auto a = clock_type::now();
        op(t, rng);
        h.add(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - a).count()));
        ++n;
      }
      done += n;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  timed_result r;
  r.ops = done.load();
  r.rate = static_cast<double>(r.ops) / since(t0);
  for (std::size_t t = 1; t < hist.size(); ++t) hist[0].merge(hist[t]);
  r.p50_us = hist[0].quantile(0.5) / 1000;
  r.p99_us = hist[0].quantile(0.99) / 1000;
  return r;
}

// ---------------------------------------------------------------------------
// Loads and rounds of rewrites, the same keys and values for every engine.

// Write j of round `round`: the key's index, and its value. Round 0 is the
// load: every key once in random order (a shuffled_order of N), or with
// --order sequential in key order (key_of is increasing in i), value_of(i).
// Round r > 0 rewrites every key once in a permuted order (i = a*j + b mod
// N, a prime to N) with values drawn from (r, i) that compress as value_of's.
struct round_plan {
  std::uint64_t keys = 0, round = 0, a = 1, b = 0;
  shuffled_order shuffled;

  round_plan(std::uint64_t n, std::uint64_t r) : keys(n), round(r), shuffled(n, 42) {
    if (r == 0) return;
    std::uint64_t s = r * 0x2545f4914f6cdd1dULL;
    a = splitmix64(s) % n | 1;
    while (std::gcd(a, n) != 1) a = (a + 2) % n;
    b = splitmix64(s) % n;
  }
  std::uint64_t index(std::uint64_t j) const {
    __extension__ using u128 = unsigned __int128;  // a * j needs 128 bits for large N
    if (round == 0) return random_order ? shuffled(j) : j;
    return static_cast<std::uint64_t>((static_cast<u128>(a) * j + b) % keys);
  }
  std::string value(std::uint64_t i) const {
    if (round == 0) return value_of(i);
    std::string v;
    compressible_into(round * 0x9e3779b97f4a7c15ULL ^ i * 0xd1b54a32d192ed03ULL, value_ratio, 100, v);
    return v;
  }
};

// Batches handed to the shards and not answered yet, at most `max` of them.
class in_flight {
 public:
  explicit in_flight(std::size_t max) : max_(max) {}
  void enter() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return n_ < max_; });
    ++n_;
  }
  void leave(const status& s) {
    {
      std::lock_guard lk(mu_);
      --n_;
      if (!s && error_.is_ok()) error_ = s;
    }
    cv_.notify_all();
  }
  status drain() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return n_ == 0; });
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t n_ = 0, max_;
  status error_;
};

database_options db_options(const std::string& dir, bool no_sync = false) {
  database_options o;
  o.dir = dir;
  o.shards = shard_count;
  o.worker_spin_polls = spin_polls;
  o.writer_spin = writer_spin;
  o.shard.wal_preallocate = wal_preallocate;
  o.shard.record_cache_share = record_cache_share;
  o.shard.leaves = leaves;
  o.shard.mapped_reads = mapped_reads;
  o.shard.max_space_amplification = max_space_amplification;
  o.shard.max_sorted_runs = max_sorted_runs;
  o.memory_budget = cache_bytes();  // the same as RocksDB's block cache
  if (no_sync) o.shard.fsync = wal::fsync_policy::interval;
  return o;
}

// One round into our database: atomic batches of 1 000 keys of one shard,
// asynchronous, at most 2 a shard in flight, so every shard works at once
// from one host thread. Returns once every batch is acknowledged.
void round_ours(database& db, const round_plan& p) {
  std::vector<std::vector<batch_write>> per_shard(db.shard_count());
  in_flight pending(2 * db.shard_count());
  auto flush = [&](std::size_t s) {
    if (per_shard[s].empty()) return;
    pending.enter();
    db.batch_async(
        per_shard[s], [&pending](status st) { pending.leave(st); }, std::string_view(per_shard[s].front().key));
    per_shard[s].clear();
  };
  for (std::uint64_t j = 0; j < p.keys; ++j) {
    std::uint64_t i = p.index(j);
    std::string k = key_of(i);
    std::size_t s = db.shard_of(k);
    per_shard[s].push_back({std::move(k), p.value(i), {}});
    if (per_shard[s].size() == 1000) flush(s);
  }
  for (std::size_t s = 0; s < per_shard.size(); ++s) flush(s);
  must(pending.drain(), "batch");
}

// One round into RocksDB: WriteBatches of 1 000, WAL on, no sync.
void round_rocksdb(rocksdb::DB& r, const round_plan& p) {
  rocksdb::WriteOptions wo;
  for (std::uint64_t j = 0; j < p.keys; j += 1000) {
    rocksdb::WriteBatch b;
    for (std::uint64_t m = j; m < std::min(p.keys, j + 1000); ++m) {
      std::uint64_t i = p.index(m);
      b.Put(key_of(i), p.value(i));
    }
    rocksdb_must(r.Write(wo, &b), "write");
  }
}

// LMDB: transactions of 10 000 puts without a sync, then one sync.
void load_lmdb(lmdb_store& l, const round_plan& p) {
  for (std::uint64_t i = 0; i < p.keys; i += 10000) {
    MDB_txn* txn = nullptr;
    lmdb_check(mdb_txn_begin(l.env, nullptr, 0, &txn), "txn_begin");
    for (std::uint64_t j = i; j < std::min(p.keys, i + 10000); ++j) {
      std::string k = key_of(p.index(j)), v = p.value(p.index(j));
      MDB_val key = lmdb_val(k), val = lmdb_val(v);
      lmdb_check(mdb_put(txn, l.dbi, &key, &val, 0), "put");
    }
    lmdb_check(mdb_txn_commit(txn), "txn_commit");
  }
  lmdb_check(mdb_env_sync(l.env, 1), "env_sync");
}

std::size_t lmdb_map_bytes(std::uint64_t keys) { return std::max<std::size_t>(std::size_t{1} << 30, keys * 1024); }

// The bytes of the files under `dir`: their lengths (du --apparent-size).
// Space an engine reserves inside a file's length counts (our log keeps 4 MiB
// a shard ahead of its last frame); space reserved past it does not (RocksDB
// preallocates its WAL with FALLOC_FL_KEEP_SIZE, about 1.1 write buffers),
// nor do holes. `allocated`, when given, gets the blocks allocated (du).
double disk_bytes(const std::string& dir, double* allocated = nullptr) {
  std::uint64_t total = 0, blocks = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<std::uint64_t>(st.st_size);
      blocks += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
  }
  if (allocated) *allocated = static_cast<double>(blocks);
  return static_cast<double>(total);
}

double live_bytes(std::uint64_t keys) { return static_cast<double>(keys) * 116; }

// Loads `keys` into the engine's fresh directory and makes them durable:
// ours commit(), RocksDB Flush (then, when `settle_after`, waits for its
// automatic compactions), LMDB one sync. Returns the seconds up to durable.
enum class engine { ours, rocksdb, lmdb };
const char* engine_name(engine e) {
  return e == engine::ours ? "magnetite" : e == engine::rocksdb ? "RocksDB" : "LMDB";
}

double load_engine(engine e, const std::string& dir, std::uint64_t keys, bool settle_after) {
  round_plan plan(keys, 0);
  auto t0 = clock_type::now();
  double took = 0;
  if (e == engine::ours) {
    auto db = must(database::open(db_options(dir, /*no_sync=*/true)), "open");
    round_ours(*db, plan);
    must(db->commit(), "commit");
    took = since(t0);
  } else if (e == engine::rocksdb) {
    auto r = open_rocksdb(dir);
    round_rocksdb(*r, plan);
    rocksdb_must(r->Flush(rocksdb::FlushOptions()), "flush");
    took = since(t0);
    if (settle_after) settle(*r);
  } else {
    lmdb_store l(dir, MDB_NOTLS | MDB_NOSYNC, lmdb_map_bytes(keys));
    load_lmdb(l, plan);
    took = since(t0);
  }
  return took;
}

// The same keys and values ingested in sorted runs of `ingest_run` keys,
// each run durable before the next: ours database::ingest (straight into
// the trees, no log frames), RocksDB an SST file per run written with
// SstFileWriter under the database's options, then IngestExternalFile
// (move_files: the file is linked into the database, not copied). Returns
// the seconds until the last run is durable.
constexpr std::uint64_t ingest_run = 100'000;

double ingest_engine(engine e, const std::string& dir, std::uint64_t keys) {
  auto t0 = clock_type::now();
  if (e == engine::ours) {
    auto db = must(database::open(db_options(dir)), "open");
    std::string bytes;
    std::vector<std::pair<std::size_t, std::size_t>> at;  // where each key and value ends in bytes
    std::vector<std::pair<std::string_view, std::string_view>> run;
    for (std::uint64_t j = 0; j < keys; j += ingest_run) {
      bytes.clear(), at.clear(), run.clear();
      for (std::uint64_t i = j; i < std::min(keys, j + ingest_run); ++i) {
        bytes += key_of(i);
        std::size_t k = bytes.size();
        bytes += value_of(i);
        at.emplace_back(k, bytes.size());
      }
      for (std::size_t n = 0, from = 0; n < at.size(); from = at[n++].second)
        run.emplace_back(std::string_view(bytes).substr(from, at[n].first - from),
                         std::string_view(bytes).substr(at[n].first, at[n].second - at[n].first));
      must(db->ingest(run), "ingest");
    }
    return since(t0);
  }
  rocksdb::Options options;
  auto r = open_rocksdb(dir, false, [&](rocksdb::Options& o) { options = o; });
  std::filesystem::create_directories(dir + "-sst");
  for (std::uint64_t j = 0; j < keys; j += ingest_run) {
    std::string path = fmt::format("{}-sst/{}.sst", dir, j);
    rocksdb::SstFileWriter w(rocksdb::EnvOptions(), options);
    rocksdb_must(w.Open(path), "sst open");
    for (std::uint64_t i = j; i < std::min(keys, j + ingest_run); ++i)
      rocksdb_must(w.Put(key_of(i), value_of(i)), "sst put");
    rocksdb_must(w.Finish(), "sst finish");
    rocksdb::IngestExternalFileOptions io;
    io.move_files = true;
    rocksdb_must(r->IngestExternalFile({path}, io), "ingest");
  }
  double took = since(t0);
  std::filesystem::remove_all(dir + "-sst");
  return took;
}

// ---------------------------------------------------------------------------
// Cases

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
          for (std::size_t s = 0; s < after.shards.size(); ++s)
            fs += after.shards[s].log_fsyncs - before.shards[s].log_fsyncs;
          fsyncs_per_write = static_cast<double>(fs) / static_cast<double>(writes.load());
        },
        [&] {
          auto r = open_rocksdb(base + "/w/rocksdb");
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
      rows.push_back(
          {"writes", "durable put", threads, "writes/s", ours, std::move(peer), value, false, std::move(target), met});
    };
    add("rocksdb", rocks, rocks_target,
        rocks_target.empty() ? std::nullopt : std::optional<bool>(ours / rocks >= rocks_min));
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
    auto r = open_rocksdb(rdir, /*avoid_flush_during_shutdown=*/true);
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
  auto r = open_rocksdb(rdir);
  double rocks = since(t0);
  std::string rv;
  if (!r->Get(rocksdb::ReadOptions(), key_of(writes - 1), &rv).ok() || rv != value_of(writes - 1)) std::exit(2);
  r.reset();
  std::filesystem::remove_all(base + "/r");

  bool met = took < 1.0;
  rows.push_back(
      {"restart", "reopen replaying 100 000 logged writes", 1, "s", took, "rocksdb", rocks, true, "ours < 1 s", met});
  say("restart: reopening a shard with 100 000 logged writes (no checkpoint) took {:.3f} s, {} records "
      "replayed (target < 1 s: {}); RocksDB reopening with them in its WAL {:.3f} s: {:.2f}x (lower is better)\n",
      took, replayed, verdict(met), rocks, took / rocks);
}

// ---------------------------------------------------------------------------
// Reads beyond RAM (--memory-limit-mib M): the reading child of `gets` runs
// in a memory cgroup (version 1, as this machine's kernel mounts it) of M
// MiB, which bounds its anonymous memory and the page cache it fills
// together, after the page cache was dropped: what does not fit is read from
// the disk. Needs root; where the cgroup cannot be made the case says so and
// is skipped.

std::size_t memory_limit_mib = 0;
constexpr const char* memory_cgroup_root = "/sys/fs/cgroup/memory";

std::string memory_cgroup_of(engine e) {
  return fmt::format("{}/magnetite-db-bench-{}-{}", memory_cgroup_root, ::getpid(), engine_name(e));
}

// Makes the cgroup (in the parent); what went wrong, or empty.
std::string make_memory_cgroup(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directory(dir, ec);
  if (ec) return fmt::format("cannot make the memory cgroup {}: {}", dir, ec.message());
  std::ofstream limit(dir + "/memory.limit_in_bytes");
  limit << (memory_limit_mib << 20);
  limit.close();
  if (!limit || read_text(dir + "/memory.limit_in_bytes") != fmt::format("{}\n", memory_limit_mib << 20))
    return fmt::format("cannot set {}/memory.limit_in_bytes", dir);
  return {};
}

// In the child: joins the cgroup and empties the page cache (dirty pages
// written first), so that its reads start from the disk.
void enter_memory_cgroup(const std::string& dir) {
  write_text(dir + "/cgroup.procs", fmt::format("{}\n", ::getpid()));
  ::sync();
  write_text("/proc/sys/vm/drop_caches", "3\n");
}

// Read requests the disk holding `dir` completed (all processes: the bench
// runs alone), from /sys/dev/block/MAJ:MIN/stat; nullopt when unknown
// (e.g. a partition's or a virtual file system's numbers).
std::optional<std::uint64_t> disk_reads(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  std::ifstream in(fmt::format("/sys/dev/block/{}:{}/stat", major(st.st_dev), minor(st.st_dev)));
  std::uint64_t reads = 0;
  if (!(in >> reads)) return std::nullopt;
  return reads;
}

// Reads every file under `dir` once, so that a case "with the data in the
// page cache" does not start from whatever an earlier case (a dropped page
// cache, another engine's files) left there.
void warm_page_cache(const std::string& dir) {
  std::vector<char> buf(1 << 20);
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    if (!f.is_regular_file()) continue;
    std::ifstream in(f.path(), std::ios::binary);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
  }
}

// Bytes this process caused to be read from storage (/proc/self/io).
std::uint64_t storage_bytes_read() {
  std::ifstream in("/proc/self/io");
  std::string name;
  std::uint64_t v = 0;
  while (in >> name >> v)
    if (name == "read_bytes:") return v;
  return 0;
}

// Reads of existing random keys from an engine reopened in this process:
// 1 thread, then 2 threads, `seconds` each. Figures: for 1 and 2 threads,
// gets/s, median us, p99 us, disk reads per get (-1: unknown) and KiB read
// from storage per get.
void read_engine(engine e, const std::string& dir, std::uint64_t keys, double seconds, std::vector<double>& out) {
  auto timed = [&](int threads, auto op) {
    auto reads0 = disk_reads(dir);
    std::uint64_t bytes0 = storage_bytes_read();
    timed_result r = run_timed(threads, seconds, op);
    auto reads1 = disk_reads(dir);
    double gets = static_cast<double>(std::max<std::uint64_t>(r.ops, 1));
    double per_get = reads0 && reads1 ? static_cast<double>(*reads1 - *reads0) / gets : -1;
    out.insert(out.end(),
               {r.rate, r.p50_us, r.p99_us, per_get, static_cast<double>(storage_bytes_read() - bytes0) / 1024 / gets});
  };
  if (e == engine::ours) {
    auto db = must(database::open(db_options(dir)), "reopen");
    auto op = [&](int, std::uint64_t& rng) {
      char k[16];
      key_into(splitmix64(rng) % keys, k);
      auto v = db->get(std::string_view(k, sizeof k));
      if (!v || !*v) std::exit(2);
    };
    for (int threads : {1, 2}) timed(threads, op);
  } else if (e == engine::rocksdb) {
    auto r = open_rocksdb(dir);
    std::vector<std::string> values(2);
    auto op = [&](int t, std::uint64_t& rng) {
      char k[16];
      key_into(splitmix64(rng) % keys, k);
      if (!r->Get(rocksdb::ReadOptions(), rocksdb::Slice(k, sizeof k), &values[static_cast<std::size_t>(t)]).ok())
        std::exit(2);
    };
    for (int threads : {1, 2}) timed(threads, op);
  } else {
    // Past RAM, as LMDB's documentation advises for a database larger than
    // memory: no readahead of the map (with it, each get read megabytes).
    lmdb_store l(dir, MDB_NOTLS | (memory_limit_mib ? MDB_NORDAHEAD : 0u), lmdb_map_bytes(keys));
    // One read-only transaction handle per thread, renewed for each get.
    std::vector<MDB_txn*> readers(2, nullptr);
    for (auto& txn : readers) {
      lmdb_check(mdb_txn_begin(l.env, nullptr, MDB_RDONLY, &txn), "txn_begin");
      mdb_txn_reset(txn);
    }
    auto op = [&](int t, std::uint64_t& rng) {
      char k[16];
      key_into(splitmix64(rng) % keys, k);
      MDB_txn* txn = readers[static_cast<std::size_t>(t)];
      lmdb_check(mdb_txn_renew(txn), "txn_renew");
      MDB_val key{sizeof k, k}, val{};
      if (mdb_get(txn, l.dbi, &key, &val) != 0 || val.mv_size != 100) std::exit(2);
      mdb_txn_reset(txn);
    };
    for (int threads : {1, 2}) timed(threads, op);
    for (auto* txn : readers) mdb_txn_abort(txn);
  }
}

void gets_case(const std::string& base, double seconds, std::uint64_t keys) {
  if (!keep_loaded) std::filesystem::remove_all(base + "/g");
  std::filesystem::create_directories(base + "/g");
  say("gets: {} keys, {} MiB cache a engine; each engine loaded, closed, reopened in a new process{}, then read "
      "from 1 and 2 threads, {} s each\n",
      keys, cache_mib,
      memory_limit_mib ? fmt::format(" limited to {} MiB with the page cache dropped", memory_limit_mib) : "", seconds);
  if (memory_limit_mib) {
    std::string probe = memory_cgroup_of(engine::ours);
    if (std::string why = make_memory_cgroup(probe); !why.empty()) {
      say("gets: skipped: {} (a memory cgroup needs root and cgroup version 1 at {})\n", why, memory_cgroup_root);
      std::filesystem::remove(probe);
      return;
    }
    std::filesystem::remove(probe);
  }
  constexpr std::size_t per_threads = 5;  // gets/s, p50, p99, disk reads/get, KiB read/get
  struct measured {
    std::vector<double> f;  // per thread count: per_threads figures
    double rss = 0;
  };
  std::vector<measured> m;
  for (engine e : {engine::ours, engine::rocksdb, engine::lmdb}) {
    if (no_peers && e != engine::ours) break;
    std::string dir = base + "/g/" + engine_name(e);
    // What a kept directory holds: the load that made it.
    std::string stamp_path = dir + ".loaded";
    std::string stamp =
        fmt::format("{} keys, {} order, values {}, {} shards{}\n", keys, random_order ? "random" : "key", value_ratio,
                    shard_count, e == engine::ours ? fmt::format(", {} leaves", leaf_form_name(leaves)) : "");
    child_result loaded;
    if (!keep_loaded || read_text(stamp_path) != stamp) {
      std::filesystem::remove_all(dir);
      std::filesystem::remove(stamp_path);
      loaded = in_child([&](std::vector<double>& f) { f.push_back(load_engine(e, dir, keys, true)); });
      if (keep_loaded) write_text(stamp_path, stamp);
    } else {
      loaded.figures = {0};
      say("gets: {:<9} reads the directory an earlier load left: {}", engine_name(e), stamp);
    }
    std::string cgroup = memory_limit_mib ? memory_cgroup_of(e) : std::string();
    if (!cgroup.empty()) {
      if (std::string why = make_memory_cgroup(cgroup); !why.empty()) {
        fmt::print(stderr, "db_bench: {}\n", why);
        std::exit(1);
      }
    }
    if (cgroup.empty()) warm_page_cache(dir);
    auto read = in_child([&](std::vector<double>& f) {
      if (!cgroup.empty()) enter_memory_cgroup(cgroup);
      read_engine(e, dir, keys, seconds, f);
    });
    if (!cgroup.empty()) std::filesystem::remove(cgroup);
    auto reads = [&](std::size_t at) {
      return read.figures[at + 3] < 0 ? std::string("disk reads unknown")
                                      : fmt::format("{:.2f} disk reads", read.figures[at + 3]);
    };
    say("gets: {:<9} loaded in {:.1f} s (load child's peak RSS {:.0f} MiB); reopened: 1 thread {:.0f} gets/s "
        "(median {:.2f} us, p99 {:.2f} us, {} and {:.1f} KiB read a get), 2 threads {:.0f} gets/s (median "
        "{:.2f} us, p99 {:.2f} us, {} and {:.1f} KiB a get); peak RSS {:.0f} MiB\n",
        engine_name(e), loaded.figures[0], loaded.rss_mib, read.figures[0], read.figures[1], read.figures[2], reads(0),
        read.figures[4], read.figures[per_threads], read.figures[per_threads + 1], read.figures[per_threads + 2],
        reads(per_threads), read.figures[per_threads + 4], read.rss_mib);
    m.push_back({read.figures, read.rss_mib});
    if (!keep_loaded) std::filesystem::remove_all(dir);
  }
  if (!keep_loaded) std::filesystem::remove_all(base + "/g");
  const measured& ours = m[0];
  std::string limited = memory_limit_mib ? fmt::format(" in {} MiB", memory_limit_mib) : "";
  for (int threads : {1, 2}) {
    std::size_t at = threads == 1 ? 0 : per_threads;
    for (std::size_t peer = 1; peer < m.size(); ++peer) {
      const char* name = peer == 1 ? "rocksdb" : "lmdb";
      const measured& p = m[peer];
      auto row = [&](std::string what, std::string unit, std::size_t k, bool lower, std::string target,
                     std::optional<bool> met) {
        report_row r{"gets", std::move(what), threads, std::move(unit),   ours.f[at + k],
                     name,   p.f[at + k],     lower,   std::move(target), met};
        r.ours_rss_mib = ours.rss;
        r.peer_rss_mib = p.rss;
        rows.push_back(std::move(r));
      };
      bool rocks = peer == 1;
      // Beyond RAM the goal is 1.5x RocksDB; in the page cache, 2x.
      double goal = memory_limit_mib ? 1.5 : 2;
      row("get after reopen" + limited, "gets/s", 0, false, rocks ? fmt::format("ratio >= {}", goal) : "",
          rocks ? std::optional<bool>(ours.f[at] / p.f[at] >= goal) : std::nullopt);
      bool latency_target = rocks && threads == 1 && !memory_limit_mib;
      row("get latency median" + limited, "us", 1, true, latency_target ? "ours <= 5 us" : "",
          latency_target ? std::optional<bool>(ours.f[at + 1] <= 5) : std::nullopt);
      row("get latency p99" + limited, "us", 2, true, "", std::nullopt);
      if (memory_limit_mib && ours.f[at + 3] >= 0) {
        bool reads_target = rocks;
        row("disk reads per get" + limited, "reads", 3, true, reads_target ? "ours <= 1.2" : "",
            reads_target ? std::optional<bool>(ours.f[at + 3] <= 1.2) : std::nullopt);
      }
      say("gets {} thread{}: magnetite {:>9.0f}/s, {} {:>9.0f}/s: {:.2f}x{}; median {:.2f} us vs {:.2f} us, p99 "
          "{:.2f} us vs {:.2f} us{}\n",
          threads, threads == 1 ? " " : "s", ours.f[at], name, p.f[at], ours.f[at] / p.f[at],
          rocks ? fmt::format(" (target >= {}x: {})", goal, verdict(ours.f[at] / p.f[at] >= goal)) : "", ours.f[at + 1],
          p.f[at + 1], ours.f[at + 2], p.f[at + 2],
          memory_limit_mib ? fmt::format("; disk reads a get {:.2f} vs {:.2f}", ours.f[at + 3], p.f[at + 3]) : "");
    }
  }
}

void load_case(const std::string& base, std::uint64_t keys) {
  std::filesystem::remove_all(base + "/l");
  std::filesystem::create_directories(base + "/l");
  say("load: {} keys in {} order, values compressing to {}, no sync per write, until durable\n", keys,
      random_order ? "random" : "key", value_ratio);
  std::vector<child_result> m;
  for (engine e : {engine::ours, engine::rocksdb}) {
    if (no_peers && e != engine::ours) {
      std::filesystem::remove_all(base + "/l");
      return;
    }
    std::string dir = base + "/l/" + engine_name(e);
    auto r = in_child([&](std::vector<double>& f) {
      f.push_back(load_engine(e, dir, keys, false));
      f.push_back(disk_bytes(dir));
    });
    say("load: {:<9} {:.2f} s, {:.0f} keys/s, {:.1f} MiB on disk ({:.2f}x the live bytes), peak RSS {:.0f} MiB\n",
        engine_name(e), r.figures[0], static_cast<double>(keys) / r.figures[0], r.figures[1] / 1048576.0,
        r.figures[1] / live_bytes(keys), r.rss_mib);
    m.push_back(std::move(r));
    std::filesystem::remove_all(dir);
  }
  say("load: the same keys ingested in sorted runs of {} keys, each durable before the next\n", ingest_run);
  for (engine e : {engine::ours, engine::rocksdb}) {
    std::string dir = base + "/l/" + engine_name(e);
    auto r = in_child([&](std::vector<double>& f) { f.push_back(ingest_engine(e, dir, keys)); });
    say("load: {:<9} ingested in {:.2f} s, {:.0f} keys/s, peak RSS {:.0f} MiB\n", engine_name(e), r.figures[0],
        static_cast<double>(keys) / r.figures[0], r.rss_mib);
    m.push_back(std::move(r));
    std::filesystem::remove_all(dir);
  }
  std::filesystem::remove_all(base + "/l");
  report_row rate{"load",
                  "bulk load without sync until durable",
                  1,
                  "keys/s",
                  keys / m[0].figures[0],
                  "rocksdb",
                  keys / m[1].figures[0],
                  false,
                  "",
                  std::nullopt};
  report_row space{
      "load",    "bytes on disk / live bytes after the load", 1,    "x", m[0].figures[1] / live_bytes(keys),
      "rocksdb", m[1].figures[1] / live_bytes(keys),          true, "",  std::nullopt};
  report_row ingest{"load",        "sorted ingest until durable", 1,     "keys/s", keys / m[2].figures[0],
                    "rocksdb_sst", keys / m[3].figures[0],        false, "",       std::nullopt};
  for (auto [r, ours, peer] : {std::tuple{&rate, 0, 1}, std::tuple{&space, 0, 1}, std::tuple{&ingest, 2, 3}}) {
    r->ours_rss_mib = m[ours].rss_mib;
    r->peer_rss_mib = m[peer].rss_mib;
    rows.push_back(*r);
  }
}

void overwrite_case(const std::string& base, std::uint64_t keys, std::uint64_t rounds) {
  std::filesystem::remove_all(base + "/o");
  std::filesystem::create_directories(base + "/o");
  say("overwrite: {} keys loaded, then {} rounds rewriting every key with new values (ours: commit() after each; "
      "RocksDB: its automatic compactions)\n",
      keys, rounds);
  // Figures: bytes on disk after the load and after each round, then the
  // seconds the rounds took.
  std::vector<child_result> m;
  for (engine e : {engine::ours, engine::rocksdb}) {
    std::string dir = base + "/o/" + engine_name(e);
    auto r = in_child([&](std::vector<double>& f) {
      double rewriting = 0;
      auto report = [&](std::uint64_t round) {
        double allocated = 0;
        f.push_back(disk_bytes(dir, &allocated));
        say("overwrite: {:<9} after {}: {:.1f} MiB, {:.2f}x the live bytes ({:.1f} MiB allocated: {:.2f}x)\n",
            engine_name(e), round == 0 ? std::string("the load") : fmt::format("round {}", round), f.back() / 1048576.0,
            f.back() / live_bytes(keys), allocated / 1048576.0, allocated / live_bytes(keys));
      };
      if (e == engine::ours) {
        auto db = must(database::open(db_options(dir, /*no_sync=*/true)), "open");
        round_ours(*db, round_plan(keys, 0));
        must(db->commit(), "commit");
        report(0);
        for (std::uint64_t round = 1; round <= rounds; ++round) {
          auto t0 = clock_type::now();
          round_ours(*db, round_plan(keys, round));
          must(db->commit(), "commit");
          rewriting += since(t0);
          report(round);
        }
        // Every key holds its last round's value.
        round_plan last(keys, rounds);
        for (std::uint64_t i = 0; i < keys; i += std::max<std::uint64_t>(1, keys / 1000)) {
          auto v = must(db->get(key_of(i)), "get");
          if (!v || *v != last.value(i)) std::exit(2);
        }
      } else {
        auto r = open_rocksdb(dir);
        round_rocksdb(*r, round_plan(keys, 0));
        report(0);
        for (std::uint64_t round = 1; round <= rounds; ++round) {
          auto t0 = clock_type::now();
          round_rocksdb(*r, round_plan(keys, round));
          rewriting += since(t0);
          report(round);
        }
        round_plan last(keys, rounds);
        for (std::uint64_t i = 0; i < keys; i += std::max<std::uint64_t>(1, keys / 1000)) {
          std::string v;
          if (!r->Get(rocksdb::ReadOptions(), key_of(i), &v).ok() || v != last.value(i)) std::exit(2);
        }
      }
      f.push_back(rewriting);
    });
    m.push_back(std::move(r));
    std::filesystem::remove_all(dir);
  }
  std::filesystem::remove_all(base + "/o");
  auto add = [&](report_row r) {
    r.ours_rss_mib = m[0].rss_mib;
    r.peer_rss_mib = m[1].rss_mib;
    rows.push_back(std::move(r));
  };
  for (std::uint64_t round = 0; round <= rounds; ++round) {
    std::string what =
        round == 0 ? "space amplification after the load" : fmt::format("space amplification after round {}", round);
    add({"overwrite", what, 1, "x", m[0].figures[round] / live_bytes(keys), "rocksdb",
         m[1].figures[round] / live_bytes(keys), true, "", std::nullopt});
  }
  double writes = static_cast<double>(keys * rounds);
  add({"overwrite", fmt::format("rewrites of every key in {} rounds", rounds), 1, "writes/s",
       writes / m[0].figures[rounds + 1], "rocksdb", writes / m[1].figures[rounds + 1], false, "", std::nullopt});
  say("overwrite: rewrites/s magnetite {:.0f} (commit after each round included), RocksDB {:.0f}; peak RSS {:.0f} "
      "and {:.0f} MiB\n",
      writes / m[0].figures[rounds + 1], writes / m[1].figures[rounds + 1], m[0].rss_mib, m[1].rss_mib);
}

// ---------------------------------------------------------------------------
// reclaim: durable random overwrites with automatic space reclamation on and
// off, and RocksDB with its automatic compactions (see the top comment).

std::uint64_t reclaim_ops = 0;  // 0: keys / 5
std::size_t reclaim_checkpoint_bytes = std::size_t{64} << 10;
int reclaim_only_threads = 0;        // --reclaim-threads: 0 both 1 and 32, else only this count
std::size_t reclaim_first_turn = 0;  // --reclaim-turn: rotation of (on, off, RocksDB) at the first count

// 100 letters and digits drawn from `seed`.
void random_value_into(std::uint64_t seed, std::string& v) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  v.resize(100);
  for (std::size_t k = 0; k < v.size(); k += 8) {
    std::uint64_t h = splitmix64(seed);
    for (std::size_t m = k; m < std::min(v.size(), k + 8); ++m, h >>= 8) v[m] = alphabet[(h & 0xff) % 62];
  }
}

struct overwrite_timing {
  double rate = 0;  // writes/s over the phase
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// `ops` durable overwrites of random keys below `keys` from `threads`
// threads; thread t draws its keys and values from seed t, whatever the
// engine. `put(key, value)` is the timed call; the key and value are made
// before the clock starts.
template <class Put>
overwrite_timing run_overwrites(int threads, std::uint64_t keys, std::uint64_t ops, Put put) {
  std::vector<latency_histogram> hist(static_cast<std::size_t>(threads));
  std::vector<std::uint64_t> worst(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> ts;
  auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      auto ut = static_cast<std::uint64_t>(t), n = static_cast<std::uint64_t>(threads);
      std::uint64_t mine = ops / n + (ut < ops % n ? 1 : 0);
      std::uint64_t rng = 0x7ec1a1e0000ULL + ut;
      auto& h = hist[ut];
      std::string value;
      char k[16];
      for (std::uint64_t j = 0; j < mine; ++j) {
        key_into(splitmix64(rng) % keys, k);
        random_value_into(splitmix64(rng), value);
        auto a = clock_type::now();
        put(std::string_view(k, sizeof k), std::string_view(value));
        auto ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - a).count());
        h.add(ns);
        worst[ut] = std::max(worst[ut], ns);
      }
    });
  for (auto& th : ts) th.join();
  overwrite_timing r;
  r.rate = static_cast<double>(ops) / since(t0);
  for (std::size_t t = 1; t < hist.size(); ++t) hist[0].merge(hist[t]);
  r.p50_us = hist[0].quantile(0.5) / 1000;
  r.p99_us = hist[0].quantile(0.99) / 1000;
  r.p999_us = hist[0].quantile(0.999) / 1000;
  r.max_us = static_cast<double>(*std::max_element(worst.begin(), worst.end())) / 1000;
  return r;
}

// Counts RocksDB's completed flushes and compactions.
class flush_and_compaction_counter : public rocksdb::EventListener {
 public:
  void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo&) override { ++flushes; }
  void OnCompactionCompleted(rocksdb::DB*, const rocksdb::CompactionJobInfo&) override { ++compactions; }
  std::atomic<std::uint64_t> flushes{0}, compactions{0};
};

// Figures of one configuration's child, in this order.
enum reclaim_figure : std::size_t {
  rf_rate,
  rf_p50,
  rf_p99,
  rf_p999,
  rf_max,
  rf_cycles,
  rf_reclaimed,
  rf_node_bytes,
  rf_wal_bytes,
  rf_live_node_bytes,
  rf_checkpoints,  // ours
  rf_node_syncs,
  rf_log_fsyncs,  // ours: pack fdatasyncs and log fsyncs during the run
  rf_count
};

// Ours: load (reclamation off, default checkpoint_bytes), close, reopen with
// the run's options and `amplification` (0: off), overwrite.
std::vector<double> reclaim_ours(const std::string& dir, std::uint64_t keys, std::uint64_t ops, int threads,
                                 double amplification) {
  {
    auto o = db_options(dir, /*no_sync=*/true);
    o.shard.max_space_amplification = 0;
    auto db = must(database::open(o), "open");
    round_ours(*db, round_plan(keys, 0));
    must(db->commit(), "commit");
  }
  auto o = db_options(dir);
  o.shard.checkpoint_bytes = reclaim_checkpoint_bytes;
  o.shard.max_space_amplification = amplification;
  auto db = must(database::open(o), "reopen");
  auto before = must(db->stats(), "stats");
  auto t =
      run_overwrites(threads, keys, ops, [&](std::string_view k, std::string_view v) { must(db->put(k, v), "put"); });
  auto after = must(db->stats(), "stats");
  std::vector<double> f(rf_count, 0);
  f[rf_rate] = t.rate, f[rf_p50] = t.p50_us, f[rf_p99] = t.p99_us, f[rf_p999] = t.p999_us, f[rf_max] = t.max_us;
  for (std::size_t s = 0; s < after.usage.size(); ++s) {
    const auto &u = after.usage[s], &b = before.usage[s];
    f[rf_cycles] += static_cast<double>(u.reclaim_cycles - b.reclaim_cycles);
    f[rf_reclaimed] += static_cast<double>(u.reclaimed_bytes - b.reclaimed_bytes);
    f[rf_node_bytes] += static_cast<double>(u.node_bytes);
    f[rf_wal_bytes] += static_cast<double>(u.wal_bytes);
    f[rf_live_node_bytes] += static_cast<double>(u.live_node_bytes);
    f[rf_checkpoints] += static_cast<double>(after.shards[s].checkpoints - before.shards[s].checkpoints);
    f[rf_node_syncs] += static_cast<double>(u.node_syncs - b.node_syncs);
    f[rf_log_fsyncs] += static_cast<double>(after.shards[s].log_fsyncs - before.shards[s].log_fsyncs);
  }
  return f;
}

// RocksDB: the same load with a write buffer of 2 x checkpoint_bytes, its
// compactions waited for, then the same overwrites with sync=true. Figures:
// rate, p50, p99, p999, max, then flushes and compactions during the run.
std::vector<double> reclaim_rocksdb(const std::string& dir, std::uint64_t keys, std::uint64_t ops, int threads) {
  auto counter = std::make_shared<flush_and_compaction_counter>();
  auto r = open_rocksdb(dir, false, [&](rocksdb::Options& o) {
    o.write_buffer_size = shard_count * reclaim_checkpoint_bytes;
    o.listeners.push_back(counter);
  });
  round_rocksdb(*r, round_plan(keys, 0));
  rocksdb_must(r->Flush(rocksdb::FlushOptions()), "flush");
  settle(*r);
  std::uint64_t flushes = counter->flushes, compactions = counter->compactions;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto t = run_overwrites(threads, keys, ops, [&](std::string_view k, std::string_view v) {
    rocksdb_must(r->Put(wo, rocksdb::Slice(k.data(), k.size()), rocksdb::Slice(v.data(), v.size())), "put");
  });
  return {t.rate,
          t.p50_us,
          t.p99_us,
          t.p999_us,
          t.max_us,
          static_cast<double>(counter->flushes - flushes),
          static_cast<double>(counter->compactions - compactions)};
}

void reclaim_case(const std::string& base, std::uint64_t keys) {
  std::uint64_t ops = reclaim_ops ? reclaim_ops : std::max<std::uint64_t>(1, keys / 5);
  const double on_amplification = shard_options{}.max_space_amplification;
  std::filesystem::remove_all(base + "/c");
  std::filesystem::create_directories(base + "/c");
  say("reclaim: {} keys loaded, then {} durable random overwrites (fsync policy always) from 1 and 32 threads, "
      "checkpoint_bytes {} KiB; reclamation on (max_space_amplification {}) and off (0), each in its own child "
      "with a fresh load; RocksDB with a {} KiB write buffer\n",
      keys, ops, reclaim_checkpoint_bytes >> 10, on_amplification, (shard_count * reclaim_checkpoint_bytes) >> 10);
  std::size_t turn = reclaim_first_turn;
  for (int threads : {1, 32}) {
    if (reclaim_only_threads && threads != reclaim_only_threads) continue;
    std::vector<double> on, off, rocks;
    double on_rss = 0, off_rss = 0, rocks_rss = 0;
    std::vector<std::function<void()>> configs = {
        [&] {
          auto c = in_child(
              [&](std::vector<double>& f) { f = reclaim_ours(base + "/c/on", keys, ops, threads, on_amplification); });
          on = c.figures, on_rss = c.rss_mib;
          std::filesystem::remove_all(base + "/c/on");
        },
        [&] {
          auto c = in_child([&](std::vector<double>& f) { f = reclaim_ours(base + "/c/off", keys, ops, threads, 0); });
          off = c.figures, off_rss = c.rss_mib;
          std::filesystem::remove_all(base + "/c/off");
        },
        [&] {
          auto c =
              in_child([&](std::vector<double>& f) { f = reclaim_rocksdb(base + "/c/rocksdb", keys, ops, threads); });
          rocks = c.figures, rocks_rss = c.rss_mib;
          std::filesystem::remove_all(base + "/c/rocksdb");
        },
    };
    for (std::size_t k = 0; k < configs.size(); ++k) configs[(k + turn) % configs.size()]();
    ++turn;
    if (on.size() != rf_count || off.size() != rf_count || rocks.size() != 7) {
      fmt::print(stderr, "db_bench: a reclaim child sent back the wrong number of figures\n");
      std::exit(1);
    }

    auto space = [&](const std::vector<double>& f) { return (f[rf_node_bytes] + f[rf_wal_bytes]) / live_bytes(keys); };
    auto add = [&](std::string what, std::string unit, double ours, std::string peer, double peer_value,
                   double peer_rss, bool lower, std::string target = "", std::optional<bool> met = std::nullopt) {
      report_row r{"reclaim",       std::move(what), threads, std::move(unit),   ours,
                   std::move(peer), peer_value,      lower,   std::move(target), met};
      r.ours_rss_mib = on_rss;
      if (!r.peer.empty()) r.peer_rss_mib = peer_rss;
      rows.push_back(std::move(r));
    };
    bool p99_met = on[rf_p99] <= 2 * off[rf_p99];
    add("durable overwrite latency median", "us", on[rf_p50], "reclaim_off", off[rf_p50], off_rss, true);
    add("durable overwrite latency p99", "us", on[rf_p99], "reclaim_off", off[rf_p99], off_rss, true, "ratio <= 2",
        p99_met);
    add("durable overwrites", "writes/s", on[rf_rate], "reclaim_off", off[rf_rate], off_rss, false);
    add("space amplification at the end", "x", space(on), "reclaim_off", space(off), off_rss, true);
    add("reclamation cycles completed in the run", "cycles", on[rf_cycles], "", 0, 0, false);
    add("MiB reclaimed in the run", "MiB", on[rf_reclaimed] / 1048576.0, "", 0, 0, false);
    add("durable overwrite latency p99", "us", on[rf_p99], "rocksdb", rocks[2], rocks_rss, true);
    add("durable overwrites", "writes/s", on[rf_rate], "rocksdb", rocks[0], rocks_rss, false);

    auto line = [&](const char* name, const std::vector<double>& f) {
      say("reclaim {:>2} thread{}: {:<11} {:>8.0f} writes/s, median {:.1f} us, p99 {:.1f} us, p99.9 {:.1f} us, max "
          "{:.1f} us\n",
          threads, threads == 1 ? " " : "s", name, f[rf_rate], f[rf_p50], f[rf_p99], f[rf_p999], f[rf_max]);
    };
    line("on", on);
    line("reclaim_off", off);
    line("RocksDB", rocks);
    for (const auto* f : {&on, &off})
      say("                    {:<11} {:.0f} checkpoints, {:.0f} reclamation cycles completed, {:.1f} MiB reclaimed, "
          "{:.0f} pack fdatasyncs, {:.0f} log fsyncs; at the end node bytes {:.1f} MiB, log bytes {:.1f} MiB: {:.2f}x "
          "the live bytes ({:.1f} MiB){}\n",
          f == &on ? "on" : "reclaim_off", (*f)[rf_checkpoints], (*f)[rf_cycles], (*f)[rf_reclaimed] / 1048576.0,
          (*f)[rf_node_syncs], (*f)[rf_log_fsyncs], (*f)[rf_node_bytes] / 1048576.0, (*f)[rf_wal_bytes] / 1048576.0,
          space(*f), live_bytes(keys) / 1048576.0,
          (*f)[rf_live_node_bytes] > 0 ? fmt::format("; node bytes / live node bytes the last cycle found {:.2f}x",
                                                     (*f)[rf_node_bytes] / (*f)[rf_live_node_bytes])
                                       : std::string());
    say("                    RocksDB     {:.0f} flushes and {:.0f} compactions completed during the run\n", rocks[5],
        rocks[6]);
    say("reclaim {:>2} thread{}: p99 on / off {:.2f}x (target <= 2x: {}){}\n", threads, threads == 1 ? " " : "s",
        on[rf_p99] / off[rf_p99], verdict(p99_met),
        on[rf_cycles] == 0 ? "; NO reclamation cycle completed during the run: the figure says nothing" : "");
  }
  std::filesystem::remove_all(base + "/c");
}

// ---------------------------------------------------------------------------
// scans: the merge of the memtables over the tree on the read path (see the top
// comment).

// Key i is rewritten when i % 10 == 0 and deleted when i % 100 == 5.
bool scans_deleted(std::uint64_t i) { return i % 100 == 5; }

// The rewrites and deletions, left in the memtables: batches of 1 000 keys of
// one shard, each a group of its own.
void scans_memtable_writes(database& db, std::uint64_t keys) {
  std::vector<std::vector<batch_write>> per_shard(db.shard_count());
  auto flush = [&](std::size_t s) {
    if (per_shard[s].empty()) return;
    must(db.batch(per_shard[s]), "batch");
    per_shard[s].clear();
  };
  for (std::uint64_t i = 0; i < keys; ++i) {
    if (i % 10 != 0 && !scans_deleted(i)) continue;
    std::string k = key_of(i);
    std::size_t s = db.shard_of(k);
    std::optional<std::string> v;
    if (!scans_deleted(i)) v = round_plan(keys, 1).value(i);
    per_shard[s].push_back({std::move(k), std::move(v), {}});
    if (per_shard[s].size() == 1000) flush(s);
  }
  for (std::size_t s = 0; s < per_shard.size(); ++s) flush(s);
}

// Repeats `pass` (which returns the entries it saw, or ranges it read) for
// `seconds`, at least once; returns them per second.
template <class Pass>
double scans_rate(double seconds, Pass pass) {
  auto t0 = clock_type::now();
  std::uint64_t n = 0;
  do n += pass();
  while (since(t0) < seconds);
  return static_cast<double>(n) / since(t0);
}

// Figures, with the memtables then the tree alone: database::scan entries/s,
// read_view::scan entries/s, read_view::scan_reverse entries/s, ranges/s; then
// the memtables each shard's view held (summed), before the commit.
void scans_engine(const std::string& dir, std::uint64_t keys, double seconds, std::vector<double>& out) {
  load_engine(engine::ours, dir, keys, false);
  auto db = must(database::open(db_options(dir, /*no_sync=*/true)), "reopen");
  scans_memtable_writes(*db, keys);
  std::uint64_t live = keys - (keys + 94) / 100;  // keys minus those with i % 100 == 5
  double memtables = 0;
  for (std::size_t s = 0; s < db->shard_count(); ++s)
    memtables += static_cast<double>(must(db->core().view_of(s), "view")->memtables().size());
  auto expect = [&](std::uint64_t seen) {
    if (seen != live) {
      fmt::print(stderr, "db_bench: a scan saw {} entries, not {}\n", seen, live);
      std::exit(2);
    }
    return seen;
  };
  auto whole_views = [&](bool reverse) {
    std::uint64_t seen = 0;
    for (std::size_t s = 0; s < db->shard_count(); ++s) {
      auto v = must(db->core().view_of(s), "view");
      auto count = [&](std::string_view, std::string_view) { return ++seen, true; };
      std::string from = keyspace::data_key(""), to = keyspace::data_end();
      must(reverse ? v->scan_reverse(from, to, count) : v->scan(from, to, count), "view scan");
    }
    return expect(seen);
  };
  for (bool layered : {true, false}) {
    if (!layered) must(db->commit(), "commit");
    out.push_back(scans_rate(seconds, [&] {
      auto c = must(db->scan("", ""), "scan");
      std::uint64_t seen = 0;
      while (must(c.next(), "next")) ++seen;
      return expect(seen);
    }));
    out.push_back(scans_rate(seconds, [&] { return whole_views(false); }));
    out.push_back(scans_rate(seconds, [&] { return whole_views(true); }));
    std::uint64_t rng = 0x5eed0000ULL;
    out.push_back(scans_rate(seconds, [&] {
      std::uint64_t i = splitmix64(rng) % (keys - keys / 10);  // at least 100 live keys follow
      auto r = must(db->range(key_of(i), "", 100), "range");
      if (r.size() != 100) std::exit(2);
      return std::uint64_t{1};
    }));
  }
  out.push_back(memtables);
}

void scans_case(const std::string& base, std::uint64_t keys, double seconds) {
  std::filesystem::remove_all(base + "/s");
  std::filesystem::create_directories(base + "/s");
  say("scans: {} keys loaded, every 10th rewritten and every 100th deleted in the memtables; 1 thread, {} s each\n",
      keys, seconds);
  std::string dir = base + "/s/" + engine_name(engine::ours);
  auto r = in_child([&](std::vector<double>& f) { scans_engine(dir, keys, seconds, f); });
  std::filesystem::remove_all(base + "/s");
  const auto& f = r.figures;
  static constexpr const char* whats[] = {"database::scan, whole range", "read_view::scan, each shard's view",
                                          "read_view::scan_reverse, each shard's view",
                                          "database::range of 100 entries from a random key"};
  for (std::size_t at = 0; at < 8; ++at) {
    bool layered = at < 4;
    std::size_t k = at % 4;
    std::string what = fmt::format("{}, {}", whats[k], layered ? "memtables over the tree" : "tree alone");
    const char* unit = k == 3 ? "ranges/s" : "entries/s";
    report_row row{"scans", what, 1, unit, f[at], "", 0, false, "", std::nullopt};
    row.ours_rss_mib = r.rss_mib;
    rows.push_back(std::move(row));
    say("scans: {:<78} {:>11.0f} {}\n", what, f[at], unit);
  }
  say("scans: {:.0f} memtables over the shards' trees before the commit; peak RSS {:.0f} MiB\n", f[8], r.rss_mib);
}

// The peer's read loop on a directory RocksDB's own db_bench filled with
// fillseq (see the top comment); prints one line.
int rocksdb_readrandom(const std::string& dir, std::uint64_t keys, double seconds) {
  auto r = open_rocksdb(dir);
  std::string value;
  std::atomic<std::uint64_t> missed{0};
  auto op = [&](int, std::uint64_t& rng) {
    std::uint64_t i = splitmix64(rng) % keys;
    char k[16];
    for (int b = 0; b < 8; ++b) k[b] = static_cast<char>(i >> (8 * (7 - b)));
    std::memset(k + 8, '0', 8);
    if (!r->Get(rocksdb::ReadOptions(), rocksdb::Slice(k, sizeof k), &value).ok()) ++missed;
  };
  auto t = run_timed(1, seconds, op);
  fmt::print(
      "rocksdb-readrandom: {} keys, {} MiB block cache, 1 thread, {} s: {:.0f} gets/s, median {:.2f} us, p99 "
      "{:.2f} us, {} missed\n",
      keys, cache_mib, seconds, t.rate, t.p50_us, t.p99_us, missed.load());
  return missed.load() ? 2 : 0;
}

// `reclaim`: the reclaim case ran, and the header names its ops and
// checkpoint_bytes.
void print_json(const std::string& base, double seconds, std::uint64_t keys, std::uint64_t rounds, bool reclaim) {
  std::string out = fmt::format(
      "{{\"program\":\"db_bench\",\"date\":\"{}\",\"dir\":{},\"seconds\":{},\"keys\":{},\"cache_mib\":{},"
      "\"rounds\":{},\"shards\":{},\"order\":\"{}\",\"values\":{},\"leaves\":\"{}\",{}{}\"rocksdb\":\"{}.{}.{}\","
      "\"lmdb\":\"{}.{}.{}\",\"rows\":[",
      utc_now(), json_string(base), json_number(seconds), keys, cache_mib, rounds, shard_count,
      random_order ? "random" : "sequential", json_number(value_ratio), leaf_form_name(leaves),
      memory_limit_mib ? fmt::format("\"memory_limit_mib\":{},", memory_limit_mib) : std::string(),
      reclaim ? fmt::format("\"ops\":{},\"checkpoint_bytes\":{},",
                            reclaim_ops ? reclaim_ops : std::max<std::uint64_t>(1, keys / 5), reclaim_checkpoint_bytes)
              : std::string(),
      ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH, MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH);
  out += json_rows(rows, /*rss_columns=*/true);
  fmt::print("{}\n]}}\n", out);
}

[[noreturn]] void usage() {
  fmt::print(
      stderr,
      "usage: db_bench [--dir D] [--seconds S] [--keys N] [--cache-mib M] [--rounds R] [--shards N] "
      "[--spin-polls N] [--writer-spin US] [--wal-preallocate BYTES] [--record-cache-share F]\n"
      "                [--max-space-amplification F] [--max-sorted-runs N] [--no-peers] [--in-process] [--ops N] "
      "[--checkpoint-bytes B] [--keep-loaded]\n"
      "                [--memory-limit-mib M] [--leaf-form lz4|zstd|searchable] [--mapped-reads]\n"
      "                [--reclaim-threads 1|32] [--reclaim-turn K] [--order random|sequential]\n"
      "                [--values RATIO]\n"
      "                [--only writes|gets|restart|load|overwrite|reclaim|scans] [--json]\n"
      "       db_bench --rocksdb-readrandom DIR [--keys N] [--cache-mib M] [--seconds S]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "bench-data/db", only, readrandom_dir;
  double seconds = 3;
  std::uint64_t keys = 1'000'000, rounds = 10;
  bool keys_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      base = argv[++i];
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--keys" && i + 1 < argc)
      keys = std::strtoull(argv[++i], nullptr, 10), keys_given = true;
    else if (a == "--ops" && i + 1 < argc)
      reclaim_ops = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--checkpoint-bytes" && i + 1 < argc)
      reclaim_checkpoint_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--reclaim-threads" && i + 1 < argc)
      reclaim_only_threads = std::atoi(argv[++i]);
    else if (a == "--reclaim-turn" && i + 1 < argc)
      reclaim_first_turn = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--cache-mib" && i + 1 < argc)
      cache_mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--shards" && i + 1 < argc)
      shard_count = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--spin-polls" && i + 1 < argc)
      spin_polls = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--writer-spin" && i + 1 < argc)
      writer_spin = std::chrono::microseconds(std::strtoll(argv[++i], nullptr, 10));
    else if (a == "--wal-preallocate" && i + 1 < argc)
      wal_preallocate = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--record-cache-share" && i + 1 < argc)
      record_cache_share = std::atof(argv[++i]);
    else if (a == "--max-space-amplification" && i + 1 < argc)
      max_space_amplification = std::atof(argv[++i]);
    else if (a == "--memory-limit-mib" && i + 1 < argc)
      memory_limit_mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--leaf-form" && i + 1 < argc) {
      std::string f = argv[++i];
      if (f == "lz4")
        leaves = leaf_form::lz4;
      else if (f == "zstd")
        leaves = leaf_form::zstd;
      else if (f == "searchable")
        leaves = leaf_form::searchable;
      else
        usage();
    } else if (a == "--mapped-reads")
      mapped_reads = true;
    else if (a == "--keep-loaded")
      keep_loaded = true;
    else if (a == "--no-peers")
      no_peers = true;
    else if (a == "--in-process")
      in_process = true;
    else if (a == "--max-sorted-runs" && i + 1 < argc)
      max_sorted_runs = static_cast<std::size_t>(std::atoll(argv[++i]));
    else if (a == "--rocksdb-readrandom" && i + 1 < argc)
      readrandom_dir = argv[++i];
    else if (a == "--order" && i + 1 < argc) {
      std::string o = argv[++i];
      if (o != "random" && o != "sequential") usage();
      random_order = o == "random";
    } else if (a == "--values" && i + 1 < argc) {
      value_ratio = std::atof(argv[++i]);
      if (!(value_ratio > 0 && value_ratio <= 1)) usage();
    } else if (a == "--json")
      json_output = true;
    else
      usage();
  }
  const std::vector<std::string> cases = {"writes", "gets", "restart", "load", "overwrite", "reclaim", "scans"};
  // reclaim preloads 200 000 keys unless told otherwise; scans reads 100
  // entries from a key below the last tenth.
  if (only == "reclaim" && !keys_given) keys = 200'000;
  // The database wants at least 1 MiB of cache a shard.
  if (!(seconds > 0) || keys == 0 || rounds == 0 || shard_count == 0 || cache_mib < shard_count ||
      reclaim_checkpoint_bytes == 0 ||
      !(reclaim_only_threads == 0 || reclaim_only_threads == 1 || reclaim_only_threads == 32) ||
      cache_mib > (std::size_t{1} << 20) || (only == "scans" && keys < 1000) ||
      !(only.empty() || std::find(cases.begin(), cases.end(), only) != cases.end()))
    usage();
  if (!readrandom_dir.empty()) return rocksdb_readrandom(readrandom_dir, keys, seconds);
  std::filesystem::create_directories(base);
  auto run = [&](const std::string& name) { return only.empty() || only == name; };
  // writes and restart open engines in-process: each runs whole in a child.
  if (run("writes")) in_child([&](std::vector<double>&) { writes_case(base, seconds); });
  if (run("gets")) gets_case(base, seconds, keys);
  if (run("restart")) in_child([&](std::vector<double>&) { restart_case(base); });
  if (run("load")) load_case(base, keys);
  if (run("overwrite")) overwrite_case(base, keys, rounds);
  // Not part of a run of every case: it is long (durable writes, 1 thread).
  if (only == "reclaim") reclaim_case(base, keys);
  if (only == "scans") scans_case(base, keys, seconds);
  if (!keep_loaded) std::filesystem::remove_all(base);
  if (json_output) print_json(base, seconds, keys, rounds, only == "reclaim");
  return 0;
}
