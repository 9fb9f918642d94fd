// backup_bench: backups and restores (issue 23) beside RocksDB's
// BackupEngine on the same data, in one run (docs/benchmarks.md):
//
//   full backup      ours database::backup into an empty directory;
//                    RocksDB BackupEngine::CreateNewBackup (flush first)
//   incremental      after --changed random keys were rewritten: ours ships
//                    only the nodes the backup lacks (checked against
//                    changed x depth x node size, node size being the chunk
//                    target); RocksDB copies the new SST files
//   restore          ours restore_backup (the newest version); RocksDB
//                    RestoreDBFromLatestBackup
//   writes during    durable writes/s from --writers threads while full
//                    backups run back to back (each into a new directory,
//                    removed after it) for at least 3 s, against the same
//                    threads for 3 s without just before; --pairs such pairs
//                    (3), the median of their ratios (the target: at
//                    least 0.8x). Twice: backups as fast as they go, then
//                    paced at --rate MiB/s (32; ours backup_options::
//                    max_bytes_per_second, RocksDB's BackupEngineOptions::
//                    backup_rate_limit)
//
// Both engines get the same keys ("%016d") and values (--value-size
// pseudo-random letters), loaded in sorted runs (ours database::ingest,
// RocksDB SstFileWriter + IngestExternalFile as db_bench's ingest case);
// RocksDB is configured as in bench/db_bench.cc (its db_bench's defaults),
// with the same cache as ours (--cache-mib). Each engine's part runs in its
// own child process; peak RSS is that child's.
//
//   build/bench/backup_bench [--keys N] [--changed C] [--value-size B] [--writers W]
//                            [--cache-mib M] [--dir DIR] [--pairs P] [--rate MIB]
#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/backup_engine.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "bench/bench_support.h"
#include "magnetite/backup.h"
#include "magnetite/database.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

std::uint64_t keys = 1'000'000;
std::uint64_t changed = 1000;
std::size_t value_size = 100;
int writers = 16;
std::size_t cache_mib = 128;
std::string base = "/tmp/magnetite-backup-bench";

std::string key(std::uint64_t i) { return fmt::format("{:016}", i); }
std::string value(std::uint64_t i, std::uint64_t round = 0) {
  std::string v(value_size, 'a');
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ (round + 1) * 0xD1B54A32D192ED03ULL;
  for (auto& c : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return v;
}

std::uint64_t tree_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

// CPU seconds of this process so far, every thread (a backup alone: what
// the backup took, the engine's background threads included).
double process_cpu_s() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The keys changed by the incremental case: the same for both engines.
std::vector<std::uint64_t> changed_keys() {
  std::mt19937_64 rng(23);
  std::vector<std::uint64_t> out;
  for (std::uint64_t n = 0; n < changed; ++n) out.push_back(rng() % keys);
  return out;
}

// Durable writes/s from `writers` threads calling `put` until `meanwhile`
// returns. Every window writes keys of its own (new keys, never overwrites),
// so that one window's work is like another's.
template <class Put>
double writes_while(Put put, const std::function<void()>& meanwhile) {
  static int windows = 0;
  const int window = windows++;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        put(fmt::format("w{:03}-{:02}-{:012}", window, t, i), value(i, 7));
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
  auto t0 = clock_type::now();
  meanwhile();
  double seconds = since(t0);
  std::uint64_t n = done.load();
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(n) / seconds;
}

constexpr int max_pairs = 16;
int pairs = 3;
std::uint64_t rate_mib = 32;  // --rate: the paced backups' MiB/s

// Durable writes/s in windows without a backup and during backups.
struct write_windows {
  double without[max_pairs] = {}, during[max_pairs] = {};
  double backups = 0;   // backups made during the windows
  double backup_s = 0;  // the mean time of one
};

struct figures {
  double load_s = 0, full_s = 0, full_cpu_s = 0, full_bytes = 0, incremental_s = 0, incremental_bytes = 0,
         incremental_nodes = 0, incremental_encoded = 0, depth = 0, restore_s = 0, rss_mib = 0;
  write_windows full_speed, paced;  // backups as fast as they go; at --rate
};

// --pairs windows of writes without a backup (3 s) and during backups
// (`backup` back to back for at least 3 s), alternating: the disk's own
// rate drifts by a third between runs and within one, so each during window
// is judged against the window just before it.
template <class Put>
void write_pairs(write_windows& w, Put put, const std::function<void()>& backup) {
  for (int p = 0; p < pairs; ++p) {
    w.without[p] = writes_while(put, [] { std::this_thread::sleep_for(std::chrono::seconds(3)); });
    w.during[p] = writes_while(put, [&] {
      for (auto tb = clock_type::now(); since(tb) < 3.0; ++w.backups) {
        auto t0 = clock_type::now();
        backup();
        w.backup_s += since(t0);
      }
    });
  }
  if (w.backups > 0) w.backup_s /= w.backups;
}

// Runs `body` in a child; its figures and peak RSS.
figures in_child(const std::function<figures()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) std::exit(1);
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    figures f = body();
    if (::write(fds[1], &f, sizeof f) != static_cast<ssize_t>(sizeof f)) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  figures f;
  ssize_t n = ::read(fds[0], &f, sizeof f);
  ::close(fds[0]);
  int wstatus = 0;
  struct rusage ru {};
  ::wait4(pid, &wstatus, 0, &ru);
  if (n != static_cast<ssize_t>(sizeof f) || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    fmt::print(stderr, "backup_bench: a child failed\n");
    std::exit(1);
  }
  f.rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return f;
}

figures ours() {
  figures f;
  const std::string dir = base + "/ours", dest = base + "/ours-backup", again = base + "/ours-backup-2";
  database_options o;
  o.dir = dir;
  o.memory_budget = cache_mib << 20;
  auto db = must(database::open(o), "open");
  auto t0 = clock_type::now();
  for (std::uint64_t j = 0; j < keys; j += 100'000) {
    std::vector<std::string> ks, vs;
    for (std::uint64_t i = j; i < std::min(keys, j + 100'000); ++i) ks.push_back(key(i)), vs.push_back(value(i));
    std::vector<std::pair<std::string_view, std::string_view>> run;
    for (std::size_t n = 0; n < ks.size(); ++n) run.emplace_back(ks[n], vs[n]);
    must(db->ingest(run), "ingest");
  }
  f.load_s = since(t0);
  t0 = clock_type::now();
  double cpu0 = process_cpu_s();
  auto full = must(db->backup(dest), "backup");
  f.full_s = since(t0);
  f.full_cpu_s = process_cpu_s() - cpu0;
  f.full_bytes = static_cast<double>(tree_bytes(dest));
  for (auto i : changed_keys()) must(db->put(key(i), value(i, 1)), "put");
  t0 = clock_type::now();
  auto inc = must(db->backup(dest), "incremental backup");
  f.incremental_s = since(t0);
  f.incremental_bytes = static_cast<double>(tree_bytes(dest)) - f.full_bytes;
  f.incremental_encoded = static_cast<double>(inc.bytes_shipped);
  f.incremental_nodes = static_cast<double>(inc.nodes_shipped);
  f.depth = static_cast<double>(full.depth);
  t0 = clock_type::now();
  must(restore_backup(dest, base + "/ours-restored"), "restore");
  f.restore_s = since(t0);
  auto put = [&](const std::string& k, const std::string& v) { must(db->put(k, v), "put"); };
  // Full backups, each into a new directory removed after it.
  auto backup_at = [&](std::uint64_t rate) {
    return [&, rate] {
      backup_options bo;
      bo.max_bytes_per_second = rate;
      must(db->backup(again, bo), "backup during writes");
      std::filesystem::remove_all(again);
    };
  };
  write_pairs(f.full_speed, put, backup_at(0));
  write_pairs(f.paced, put, backup_at(rate_mib << 20));
  return f;
}

void rocks_must(const rocksdb::Status& s, const char* what) {
  if (s.ok()) return;
  fmt::print(stderr, "backup_bench: rocksdb {}: {}\n", what, s.ToString());
  std::exit(1);
}

// As bench/db_bench.cc opens it: db_bench's own defaults.
rocksdb::Options rocks_options() {
  rocksdb::Options o;
  rocksdb::BlockBasedTableOptions table;
  rocksdb::LRUCacheOptions cache(cache_mib << 20, -1, false, 0.0);
  table.block_cache = rocksdb::NewLRUCache(cache);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.table_cache_numshardbits = 4;
  o.create_if_missing = true;
  return o;
}

figures rocks() {
  figures f;
  const std::string dir = base + "/rocksdb", dest = base + "/rocksdb-backup", again = base + "/rocksdb-backup-2";
  auto options = rocks_options();
  rocksdb::DB* raw = nullptr;
  rocks_must(rocksdb::DB::Open(options, dir, &raw), "open");
  std::unique_ptr<rocksdb::DB> db(raw);
  auto t0 = clock_type::now();
  std::filesystem::create_directories(base + "/sst");
  for (std::uint64_t j = 0; j < keys; j += 100'000) {
    std::string path = fmt::format("{}/sst/{}.sst", base, j);
    rocksdb::SstFileWriter w(rocksdb::EnvOptions(), options);
    rocks_must(w.Open(path), "sst open");
    for (std::uint64_t i = j; i < std::min(keys, j + 100'000); ++i) rocks_must(w.Put(key(i), value(i)), "sst put");
    rocks_must(w.Finish(), "sst finish");
    rocksdb::IngestExternalFileOptions io;
    io.move_files = true;
    rocks_must(db->IngestExternalFile({path}, io), "ingest");
  }
  f.load_s = since(t0);
  rocksdb::BackupEngine* engine_raw = nullptr;
  rocks_must(rocksdb::BackupEngine::Open(rocksdb::Env::Default(), rocksdb::BackupEngineOptions(dest), &engine_raw),
             "backup engine");
  std::unique_ptr<rocksdb::BackupEngine> engine(engine_raw);
  t0 = clock_type::now();
  double cpu0 = process_cpu_s();
  rocks_must(engine->CreateNewBackup(db.get(), true), "backup");
  f.full_s = since(t0);
  f.full_cpu_s = process_cpu_s() - cpu0;
  f.full_bytes = static_cast<double>(tree_bytes(dest));
  rocksdb::WriteOptions sync;
  sync.sync = true;
  for (auto i : changed_keys()) rocks_must(db->Put(sync, key(i), value(i, 1)), "put");
  const auto before = tree_bytes(dest);
  t0 = clock_type::now();
  rocks_must(engine->CreateNewBackup(db.get(), true), "incremental backup");
  f.incremental_s = since(t0);
  f.incremental_bytes = static_cast<double>(tree_bytes(dest) - before);
  t0 = clock_type::now();
  rocks_must(engine->RestoreDBFromLatestBackup(base + "/rocksdb-restored", base + "/rocksdb-restored"), "restore");
  f.restore_s = since(t0);
  auto put = [&](const std::string& k, const std::string& v) { rocks_must(db->Put(sync, k, v), "put"); };
  // A new backup directory each time, as ours: every backup a full one.
  auto backup_at = [&](std::uint64_t rate) {
    return [&, rate] {
      {
        rocksdb::BackupEngineOptions bo(again);
        bo.backup_rate_limit = rate;
        rocksdb::BackupEngine* fresh = nullptr;
        rocks_must(rocksdb::BackupEngine::Open(rocksdb::Env::Default(), bo, &fresh), "backup engine");
        std::unique_ptr<rocksdb::BackupEngine> e(fresh);
        rocks_must(e->CreateNewBackup(db.get(), true), "backup");
      }
      std::filesystem::remove_all(again);
    };
  };
  write_pairs(f.full_speed, put, backup_at(0));
  write_pairs(f.paced, put, backup_at(rate_mib << 20));
  return f;
}

void row(const char* what, double o, double r, const char* unit, const std::string& note = "") {
  fmt::print("{:<44} {:>12.3f} {:>12.3f} {:>8.2f}x {:<4} {}\n", what, o, r, r > 0 ? o / r : 0.0, unit, note);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--keys")
      keys = std::stoull(argv[i + 1]);
    else if (a == "--changed")
      changed = std::stoull(argv[i + 1]);
    else if (a == "--value-size")
      value_size = std::stoull(argv[i + 1]);
    else if (a == "--writers")
      writers = std::stoi(argv[i + 1]);
    else if (a == "--cache-mib")
      cache_mib = std::stoull(argv[i + 1]);
    else if (a == "--dir")
      base = argv[i + 1];
    else if (a == "--pairs")
      pairs = std::clamp(std::stoi(argv[i + 1]), 1, max_pairs);
    else if (a == "--rate")
      rate_mib = std::stoull(argv[i + 1]);
    else {
      fmt::print(stderr, "backup_bench: unknown option {}\n", a);
      return 2;
    }
  }
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  fmt::print("backup_bench {}: {} keys of 16 B, values of {} B, {} changed, {} writers, cache {} MiB each\n", utc_now(),
             keys, value_size, changed, writers, cache_mib);
  figures o = in_child(ours);
  figures r = in_child(rocks);
  fmt::print("{:<44} {:>12} {:>12} {:>9} {}\n", "", "ours", "RocksDB", "ours/peer", "unit");
  row("load (sorted runs, ingest)", o.load_s, r.load_s, "s");
  row("full backup", o.full_s, r.full_s, "s");
  row("full backup: CPU time", o.full_cpu_s, r.full_cpu_s, "s", "every thread of the process");
  row("full backup: bytes in the backup directory", o.full_bytes / 1048576, r.full_bytes / 1048576, "MiB");
  row("incremental backup", o.incremental_s, r.incremental_s, "s");
  const double node_target = 4096;  // chunk_policy{}.target
  const double bound = static_cast<double>(changed) * o.depth * node_target;
  row("incremental backup: bytes the backup grew by", o.incremental_bytes / 1024, r.incremental_bytes / 1024, "KiB");
  fmt::print(
      "ours shipped {:.0f} nodes, {:.0f} KiB as encoded (uncompressed), tree depth {:.0f}; the bound changed x "
      "depth x {:.0f} B = {:.0f} KiB: {}\n",
      o.incremental_nodes, o.incremental_encoded / 1024, o.depth, node_target, bound / 1024,
      o.incremental_encoded <= bound ? "met" : "NOT met");
  row("restore (the newest version)", o.restore_s, r.restore_s, "s");
  // Each during window against the window without just before it.
  auto ratios = [](const write_windows& w) {
    std::vector<double> out;
    for (int p = 0; p < pairs; ++p) out.push_back(w.without[p] > 0 ? w.during[p] / w.without[p] : 0);
    return out;
  };
  auto listed = [](const std::vector<double>& v) {
    std::string out;
    for (double x : v) out += fmt::format("{}{:.2f}", out.empty() ? "" : " ", x);
    return out;
  };
  auto windows = [&](const char* what, const write_windows& ow, const write_windows& rw) {
    row(fmt::format("{}: one backup", what).c_str(), ow.backup_s, rw.backup_s, "s",
        fmt::format("{:.0f} / {:.0f} backups back to back", ow.backups, rw.backups));
    row(fmt::format("{}: durable writes/s without", what).c_str(),
        median(std::vector<double>(ow.without, ow.without + pairs)),
        median(std::vector<double>(rw.without, rw.without + pairs)), "/s", "median of the windows");
    row(fmt::format("{}: durable writes/s during", what).c_str(),
        median(std::vector<double>(ow.during, ow.during + pairs)),
        median(std::vector<double>(rw.during, rw.during + pairs)), "/s", "median of the windows");
    const auto ours_pairs = ratios(ow), peer_pairs = ratios(rw);
    const double ours_ratio = median(ours_pairs), peer_ratio = median(peer_pairs);
    fmt::print(
        "{}: writes during / without, median of {} pairs: ours {:.2f}x (pairs {}; target >= 0.8x: {}), RocksDB "
        "{:.2f}x (pairs {})\n",
        what, pairs, ours_ratio, listed(ours_pairs), ours_ratio >= 0.8 ? "met" : "NOT met", peer_ratio,
        listed(peer_pairs));
  };
  windows("full speed", o.full_speed, r.full_speed);
  windows(fmt::format("paced at {} MiB/s", rate_mib).c_str(), o.paced, r.paced);
  fmt::print("peak RSS of each engine's process: ours {:.0f} MiB, RocksDB {:.0f} MiB\n", o.rss_mib, r.rss_mib);
  std::filesystem::remove_all(base);
  return 0;
}
