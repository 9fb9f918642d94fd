// tree_bench: the prolly tree's own costs (issue 3), on nodes held in memory or
// in the pack-file node store.
//
//   tree_bench [--entries N] [--seconds S]
//
// Cases (16-byte keys, 100-byte values, default 1 000 000 entries):
//   build      bulk build of N sorted entries: entries/s
//   get        point reads of random existing keys, single thread, warm: gets/s
//              (target >= 1 000 000)
//   apply      random batches of 1 000 writes (puts of new values to existing
//              keys and inserts): nodes and bytes written per batch, beside the
//              bound depth x changed leaves
//   scan       range scans of 10 000 entries from random keys, warm: entries/s
//              (target >= 5 000 000)
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tree/prolly_tree.h"

using namespace magnetite;
using namespace magnetite::tree;

namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

template <class T>
T must(result<T> r, const char* what) {
  if (!r) {
    fmt::print(stderr, "tree_bench: {}: {}\n", what, r.error().to_string());
    std::exit(1);
  }
  return std::move(r).value();
}

std::string key_of(std::uint64_t i) { return fmt::format("{:016}", i * 7919 % 10000000000000000ULL); }

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t n = 1000000;
  double seconds = 2;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--entries") n = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds") seconds = std::strtod(argv[++i], nullptr);
  }
  memory_nodes store;
  prolly_tree t(store);
  std::vector<entry> es;
  es.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) es.push_back({key_of(i), std::string(100, static_cast<char>('a' + i % 26))});
  std::sort(es.begin(), es.end(), [](const entry& a, const entry& b) { return a.key < b.key; });

  auto t0 = clock_type::now();
  hash128 root = must(t.build(es), "build");
  double build_s = since(t0);
  int depth = must(t.depth(root), "depth");
  fmt::print("build   {:>10} entries in {:.2f} s: {:>10.0f} entries/s, depth {}, {} nodes\n", n, build_s,
             n / build_s, depth, store.size());

  std::mt19937_64 rng(1);
  std::uint64_t gets = 0;
  std::string value;
  t0 = clock_type::now();
  while (since(t0) < seconds) {
    for (int i = 0; i < 1000; ++i) {
      const auto& e = es[rng() % n];
      bool found = must(t.get(root, e.key, value), "get");
      if (!found || value.size() != 100) {
        fmt::print(stderr, "tree_bench: get returned a wrong value\n");
        return 1;
      }
    }
    gets += 1000;
  }
  double get_rate = gets / since(t0);
  fmt::print("get     {:>10.0f} gets/s (1 thread, warm)   target >= 1000000: {}\n", get_rate,
             get_rate >= 1e6 ? "PASS" : "MISS");

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
    store.reset_counters();
    r = must(t.apply(r, edits), "apply");
    nodes += store.writes();
    bytes += store.bytes_written();
    bound += leaves.size() * static_cast<std::uint64_t>(depth);
    ++batches;
  }
  double apply_s = since(t0);
  fmt::print("apply   {} batches of 1000: {:.0f} nodes and {:.0f} KiB written a batch; bound depth x changed leaves "
             "= {:.0f} nodes ({:.2f}x of it); {:.0f} batches/s incl. leaf counting\n",
             batches, double(nodes) / batches, double(bytes) / batches / 1024, double(bound) / batches,
             double(nodes) / bound, batches / apply_s);
  return 0;
}
