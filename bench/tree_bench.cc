// tree_bench: the prolly tree's own costs (issue 3), on nodes held in memory or
// in the pack-file node store.
//
//   tree_bench [--entries N] [--seconds S]
//
// Cases (16-byte keys, 100-byte values, default 1 000 000 entries):
//   build      bulk build of N sorted entries: entries/s
//   get        point reads of random existing keys, single thread, warm: gets/s
//              (target >= 1 000 000), and beside it this machine's latency of one
//              dependent random read from memory, the unit a cold get is paid in
//   apply      random batches of 1 000 writes (puts of new values to existing
//              keys and inserts): nodes and bytes written per batch, beside the
//              bound depth x changed leaves
//   scan       range scans of 10 000 entries from random keys, warm: entries/s
//              (target >= 5 000 000)
//   disk       the same entries in the pack-file node store (zstd) beside RocksDB
//              (values compress about 2:1, like db_bench's default), and RocksDB's
//              warm point reads beside ours
//              (its defaults, flushed and fully compacted) in the same run:
//              bytes on disk, and the ratio
//
// Nodes live in the node store (a cache big enough to be warm) under --dir
// (default ./bench-data/tree, removed at the end); --memory keeps them in memory
// instead, to see the tree's own cost without the store's; --hot-keys K draws
// the gets from the first K keys only (their nodes stay in the CPU caches).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <filesystem>

#include <rocksdb/db.h>
#include <rocksdb/cache.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include "bench/bench_support.h"
#include "core/env.h"
#include "tree/node_store.h"
#include "tree/prolly_tree.h"

using namespace magnetite;
using namespace magnetite::bench;
using namespace magnetite::tree;

namespace {




// Random existing keys laid out back to back, so that fetching the next query
// costs the harness no cache miss of its own: the loop measures the engine.
struct query_keys {
  std::string bytes;
  std::size_t width = 0;
  std::size_t count = 0;
  std::string_view operator[](std::size_t i) const { return {bytes.data() + (i % count) * width, width}; }
};

// `hot`: draw only from the first `hot` keys (0: all), to see a get's cost
// with its nodes in the CPU caches.
query_keys make_queries(const std::vector<entry>& es, std::size_t count, std::size_t hot) {
  query_keys q;
  q.width = es.front().key.size();
  q.count = count;
  std::mt19937_64 rng(1);
  std::size_t from = hot ? std::min(hot, es.size()) : es.size();
  for (std::size_t i = 0; i < count; ++i) q.bytes += es[rng() % from].key;
  return q;
}

// Nanoseconds one dependent random read of memory takes here: a pointer chase
// through a random cycle over 256 MiB (64-byte cells, ordinary 4 KiB pages), so
// every step misses the caches and mostly the TLB, as a cold get does.
double memory_latency_ns() {
  struct alignas(64) cell {
    std::size_t next;
  };
  const std::size_t cells = (256u << 20) / sizeof(cell);
  std::vector<cell> a(cells);
  std::vector<std::size_t> order(cells);
  for (std::size_t i = 0; i < cells; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  for (std::size_t i = 0; i < cells; ++i) a[order[i]].next = order[(i + 1) % cells];
  const std::size_t steps = 5'000'000;
  std::size_t at = order[0];
  auto t0 = clock_type::now();
  for (std::size_t i = 0; i < steps; ++i) at = a[at].next;
  double ns = since(t0) * 1e9 / steps;
  if (at == cells) std::abort();  // keeps the chase from being optimised away
  return ns;
}

std::uint64_t dir_bytes(const std::string& dir, std::string_view suffix) {
  std::uint64_t total = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.is_regular_file() && f.path().string().ends_with(suffix)) total += f.file_size();
  return total;
}

// RocksDB holding the same entries, flushed and compacted: its bytes on disk,
// and its warm point reads (block cache big enough for everything).
struct rocksdb_figures {
  std::uint64_t bytes = 0;
  double gets_per_s = 0;
};

rocksdb_figures rocksdb_run(const std::string& dir, const std::vector<entry>& es, const query_keys& queries,
                            double seconds) {
  rocksdb::Options o;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(std::size_t{1} << 30);
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(o, dir, &raw);
  if (!st.ok()) {
    fmt::print(stderr, "tree_bench: rocksdb open: {}\n", st.ToString());
    std::exit(1);
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  for (std::size_t i = 0; i < es.size(); i += 1000) {
    rocksdb::WriteBatch b;
    for (std::size_t j = i; j < std::min(es.size(), i + 1000); ++j) b.Put(es[j].key, es[j].value);
    if (!db->Write(wo, &b).ok()) std::exit(1);
  }
  if (!db->Flush(rocksdb::FlushOptions()).ok()) std::exit(1);
  if (!db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok()) std::exit(1);
  rocksdb_figures f;
  f.bytes = dir_bytes(dir, ".sst");
  std::string v;
  for (const auto& e : es)  // warm the block cache
    if (!db->Get(rocksdb::ReadOptions(), e.key, &v).ok()) std::exit(1);
  std::uint64_t gets = 0;
  auto t0 = clock_type::now();
  while (since(t0) < seconds) {
    for (int i = 0; i < 1000; ++i)
      if (!db->Get(rocksdb::ReadOptions(), rocksdb::Slice(queries[gets + i].data(), queries.width), &v).ok())
        std::exit(1);
    gets += 1000;
  }
  f.gets_per_s = gets / since(t0);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t n = 1000000;
  double seconds = 2;
  bool in_memory = false;
  std::size_t hot_keys = 0;
  std::string base = "bench-data/tree";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--entries" && i + 1 < argc) n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::strtod(argv[++i], nullptr);
    else if (a == "--dir" && i + 1 < argc) base = argv[++i];
    else if (a == "--memory") in_memory = true;
    else if (a == "--hot-keys" && i + 1 < argc) hot_keys = std::strtoull(argv[++i], nullptr, 10);
    else {
      fmt::print(stderr, "usage: tree_bench [--entries N] [--seconds S] [--dir D] [--memory] [--hot-keys K]\n");
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
  std::filesystem::create_directories(base + "/nodes", ec);
  std::filesystem::create_directories(base + "/rocksdb", ec);
  if (ec) {
    fmt::print(stderr, "tree_bench: cannot create {}: {}\n", base, ec.message());
    return 1;
  }
  memory_nodes mem;
  std::unique_ptr<node_store> disk;
  if (!in_memory) {
    node_store_options o;
    o.cache_bytes = std::size_t{1} << 30;  // warm: everything fits
    disk = must(node_store::open(env::posix(), base + "/nodes", o, std::nullopt), "open node store");
  }
  node_sink& store = in_memory ? static_cast<node_sink&>(mem) : *disk;
  prolly_tree t(store);
  std::vector<entry> es;
  es.reserve(n);
  // Values compress about 2:1, as db_bench's default: 50 random characters,
  // then the same 50 again.
  std::mt19937_64 vrng(42);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string half(50, ' ');
    for (auto& c : half) c = static_cast<char>(33 + vrng() % 94);
    es.push_back({key_of(i), half + half});
  }
  std::sort(es.begin(), es.end(), [](const entry& a, const entry& b) { return a.key < b.key; });

  auto t0 = clock_type::now();
  hash128 root = must(t.build(es), "build");
  double build_s = since(t0);
  int depth = must(t.depth(root), "depth");
  if (disk) must(disk->flush(), "flush");
  fmt::print("{}: {}\n", in_memory ? "nodes in memory" : "nodes in the node store", in_memory ? "" : base + "/nodes");
  fmt::print("build   {:>10} entries in {:.2f} s: {:>10.0f} entries/s (flush included), depth {}\n", n, build_s,
             n / build_s, depth);
  // Warm the cache: one pass over every key.
  {
    std::string v;
    for (const auto& e : es) must(t.get(root, e.key, v), "warm-up get");
  }

  std::mt19937_64 rng(1);
  const query_keys queries = make_queries(es, 1 << 20, hot_keys);
  std::uint64_t gets = 0;
  std::string value;
  t0 = clock_type::now();
  while (since(t0) < seconds) {
    for (int i = 0; i < 1000; ++i) {
      bool found = must(t.get(root, queries[gets + i], value), "get");
      if (!found || value.size() != 100) {
        fmt::print(stderr, "tree_bench: get returned a wrong value\n");
        return 1;
      }
    }
    gets += 1000;
  }
  double get_rate = gets / since(t0);
  if (hot_keys)
    fmt::print("get     {:>10.0f} gets/s (1 thread, only the first {} keys: not the target's case)\n", get_rate,
               hot_keys);
  else
    fmt::print("get     {:>10.0f} gets/s (1 thread, warm)   target >= 1000000: {}\n", get_rate,
               get_rate >= 1e6 ? "PASS" : "MISS");
  double miss_ns = memory_latency_ns();
  fmt::print("memory  {:>10.0f} ns a dependent random read (256 MiB, 4 KiB pages): a get takes {:.0f} ns = {:.1f} "
             "such reads\n",
             miss_ns, 1e9 / get_rate, 1e9 / get_rate / miss_ns);

  std::uint64_t scanned = 0;
  t0 = clock_type::now();
  while (since(t0) < seconds) {
    std::uint64_t left = 10000;
    const auto& from = es[rng() % n].key;
    if (!t.scan(root, from, "", false, [&](const entry_view&) { return --left > 0; })) return 1;
    scanned += 10000 - left;
  }
  double scan_rate = scanned / since(t0);
  fmt::print("scan    {:>10.0f} entries/s (1 thread, warm) target >= 5000000: {}\n", scan_rate,
             scan_rate >= 5e6 ? "PASS" : "MISS");

  std::uint64_t batches = 0, nodes = 0, bytes = 0, bound = 0;
  t0 = clock_type::now();
  hash128 r = root;
  while (batches < 20) {
    std::map<std::string, std::optional<std::string>> b;
    while (b.size() < 1000) {
      std::uint64_t i = rng() % n;
      if (rng() % 2) b[es[i].key] = std::string(100, 'z');
      else b[es[i].key + "+"] = std::string(100, 'n');
    }
    std::vector<edit> edits;
    for (auto& [k, v] : b) edits.push_back({k, v});
    // Leaves the batch touches in the old tree: the bound's "changed leaves".
    std::set<std::string> leaves;
    for (auto& e : edits) {
      auto c = must(t.seek(r, e.key), "seek");
      leaves.insert(c.node().entries().empty() ? std::string() : std::string(c.node().last_key()));
    }
    std::uint64_t nodes_before = in_memory ? mem.writes() : disk->stats().nodes_written;
    std::uint64_t bytes_before = in_memory ? mem.bytes_written() : disk->stats().pack_bytes_written;
    r = must(t.apply(r, edits), "apply");
    if (disk) must(disk->flush(), "flush");
    nodes += (in_memory ? mem.writes() : disk->stats().nodes_written) - nodes_before;
    bytes += (in_memory ? mem.bytes_written() : disk->stats().pack_bytes_written) - bytes_before;
    bound += leaves.size() * static_cast<std::uint64_t>(depth);
    ++batches;
  }
  double apply_s = since(t0);
  fmt::print("apply   {} batches of 1000: {:.0f} nodes and {:.0f} KiB written a batch; bound depth x changed leaves "
             "= {:.0f} nodes ({:.2f}x of it); {:.0f} batches/s incl. leaf counting\n",
             batches, double(nodes) / batches, double(bytes) / batches / 1024, double(bound) / batches,
             double(nodes) / bound, batches / apply_s);

  if (disk) {
    // On-disk bytes of the ORIGINAL tree only: gc keeps what `root` needs.
    auto g = must(disk->gc(std::span<const hash128>(&root, 1)), "gc");
    std::uint64_t ours = dir_bytes(base + "/nodes", ".pack");
    rocksdb_figures rf = rocksdb_run(base + "/rocksdb", es, queries, seconds);
    fmt::print("disk    {} entries: magnetite packs {:.1f} MiB (after gc, {} nodes), RocksDB SSTs {:.1f} MiB "
               "(defaults, compacted): {:.2f}x RocksDB\n",
               n, ours / 1048576.0, g.nodes_kept, rf.bytes / 1048576.0, double(ours) / rf.bytes);
    fmt::print("rocksdb {:>10.0f} gets/s (1 thread, warm 1 GiB block cache): magnetite get = {:.2f}x RocksDB\n",
               rf.gets_per_s, get_rate / rf.gets_per_s);
  }
  disk.reset();
  std::filesystem::remove_all(base, ec);
  return 0;
}
