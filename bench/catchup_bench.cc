// catchup_bench: what a replica that missed k writes costs to repair by delta
// (docs/design/replication.md, section 5), beside a full transfer of the
// shard (what haematite's handoff ships) and the bound the issue names,
// k x depth x node size.
//
// Two shards on this machine's disk (posix env): A is loaded with --keys
// stamped keys; B gets A's whole tree by a pull (the full transfer); then A
// takes --missed random updates B does not see, and B pulls only what it
// lacks and merges. Both roots must then be equal, or the run fails.
#include <filesystem>
#include <random>

#include "bench/bench_support.h"
#include "engine/shard.h"
#include "tree/tree_puller.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

std::string user_key(std::uint64_t i) { return fmt::format("user:{:012}", i); }

struct pulled {
  tree::pull_stats stats;
  double seconds = 0;
};

pulled pull(shard& from, shard& to, const hash128& root) {
  auto t0 = clock_type::now();
  tree::tree_puller p(root, [&](const hash128& h) { return to.holds_node(h); });
  auto import = [&](const hash128& h, std::string_view bytes) { return to.import_node(h, bytes); };
  while (!p.done()) {
    auto want = p.next_request(256);
    std::vector<std::string> got;
    got.reserve(want.size());
    for (const auto& h : want) got.push_back(must(from.node_encoding(h), "read node"));
    must(p.take(want, got, import), "take nodes");
  }
  must(p.finish(import), "import internal nodes");
  return {p.stats(), since(t0)};
}

[[noreturn]] void usage() {
  fmt::print(stderr, "usage: catchup_bench [--dir D] [--keys N] [--missed K] [--value-bytes B] [--seed S]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "bench-data/catchup";
  std::uint64_t keys = 1'000'000, missed = 1'000, value_bytes = 100, seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      base = argv[++i];
    else if (a == "--keys" && i + 1 < argc)
      keys = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--missed" && i + 1 < argc)
      missed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--value-bytes" && i + 1 < argc)
      value_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else
      usage();
  }
  if (keys == 0 || missed == 0 || value_bytes == 0) usage();
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  shard_options o;  // the defaults a database uses: 4 KiB target nodes
  auto a = must(shard::open(env::posix(), base + "/a", o), "open a");
  auto b = must(shard::open(env::posix(), base + "/b", o), "open b");
  std::mt19937_64 rng(seed);
  auto value = [&](std::uint64_t tag) {
    std::string v(value_bytes, 'v');
    for (std::size_t i = 0; i < v.size() && i < 16; ++i) v[i] = static_cast<char>('a' + (tag >> (i * 4)) % 26);
    return v;
  };

  auto t0 = clock_type::now();
  std::vector<stamped_write> w;
  for (std::uint64_t i = 0; i < keys; ++i) {
    w.push_back({user_key(i), stamp{{1, 1}, i + 1}, value(rng()), std::nullopt});
    if (w.size() == 4096 || i + 1 == keys) {
      must(a->apply_stamped(w), "load");
      must(a->commit_group(), "load group");
      w.clear();
    }
  }
  hash128 root = must(a->checkpoint(), "checkpoint a");
  double load_s = since(t0);

  pulled full = pull(*a, *b, root);
  must(b->merge_stamped(root), "merge full");
  must(b->commit_group(), "merge group");
  if (must(b->checkpoint(), "checkpoint b") != root) {
    fmt::print(stderr, "catchup_bench: after the full transfer b's root differs from a's\n");
    return 1;
  }

  // Updates of random existing keys by a later owner: B misses them.
  for (std::uint64_t i = 0; i < missed; ++i)
    w.push_back({user_key(rng() % keys), stamp{{2, 2}, i + 1}, value(rng()), std::nullopt});
  must(a->apply_stamped(w), "missed writes");
  must(a->commit_group(), "missed group");
  hash128 root2 = must(a->checkpoint(), "checkpoint a again");

  pulled delta = pull(*a, *b, root2);
  auto t1 = clock_type::now();
  auto merged = must(b->merge_stamped(root2), "merge delta");
  must(b->commit_group(), "merge delta group");
  hash128 root_b = must(b->checkpoint(), "checkpoint b again");
  double merge_s = since(t1);
  if (root_b != root2) {
    fmt::print(stderr, "catchup_bench: after the delta b's root differs from a's\n");
    return 1;
  }
  std::uint64_t depth = delta.stats.levels;
  std::uint64_t bound = missed * depth * 4096;
  std::uint64_t payload = missed * (user_key(0).size() + value_bytes);
  fmt::print("catchup_bench {}  keys {}  missed {}  value {} B  seed {}\n", utc_now(), keys, missed, value_bytes, seed);
  fmt::print("load a: {:.1f} s\n", load_s);
  fmt::print("{:<34} {:>8} {:>14} {:>9} {:>8} {:>9}\n", "transfer", "nodes", "bytes", "requests", "levels", "seconds");
  fmt::print("{:<34} {:>8} {:>14} {:>9} {:>8} {:>9.2f}\n", "full tree (a handoff that ships all)", full.stats.nodes,
             full.stats.bytes, full.stats.requests, full.stats.levels, full.seconds);
  fmt::print("{:<34} {:>8} {:>14} {:>9} {:>8} {:>9.2f}\n", "delta (missing nodes only)", delta.stats.nodes,
             delta.stats.bytes, delta.stats.requests, delta.stats.levels, delta.seconds);
  fmt::print("merge of the delta: {} entries differ, {} taken, {:.2f} s\n", merged.differing, merged.taken, merge_s);
  fmt::print(
      "delta / (missed x depth x 4 KiB) = {:.3f}   delta / full = {:.5f}   delta / payload of the missed "
      "writes = {:.1f}\n",
      static_cast<double>(delta.stats.bytes) / static_cast<double>(bound),
      static_cast<double>(delta.stats.bytes) / static_cast<double>(full.stats.bytes),
      static_cast<double>(delta.stats.bytes) / static_cast<double>(payload));
  a.reset();
  b.reset();
  std::filesystem::remove_all(base);
  return 0;
}
