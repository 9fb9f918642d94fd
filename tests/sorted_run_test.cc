// Sorted runs (engine/sorted_run.h) in a shard: when a checkpoint writes one
// and when it folds them, what reads see through them, what a reopen reads
// back, and what gc and reclamation keep. On fault_env against a std::map.
#include <doctest/doctest.h>

#include <random>

#include "core/fault_env.h"
#include "engine/keyspace.h"
#include "engine/shard.h"
#include "engine/sorted_run.h"
#include "tests/support/manual_clock.h"
#include "tests/support/must.h"
#include "tests/support/view_contents.h"
#include "tree/prolly_tree.h"

using namespace magnetite;
using magnetite::testing::kv_map;
using magnetite::testing::manual_clock;
using magnetite::testing::must;
using magnetite::testing::read_all;
using namespace std::chrono_literals;

namespace {

const std::string dir = "/db/runs-0";

shard_options run_options(const manual_clock& c, std::size_t max_runs) {
  shard_options o;
  o.clock = c.fn();
  o.chunking = {256, 64, 1024};
  o.cache_bytes = 1 << 20;
  o.max_sorted_runs = max_runs;
  return o;
}

std::string value_of(int round, int k) { return fmt::format("v{}-{}-", round, k) + std::string(k % 40, 'x'); }

// The root a tree built in one go from the model's content has.
hash128 built_root(const kv_map& model, const tree::chunk_policy& policy) {
  tree::memory_nodes mem;
  std::vector<tree::entry> es;
  for (const auto& [k, v] : model) es.push_back({keyspace::data_key(k), std::string(1, '\0') + v});
  return must(tree::prolly_tree(mem, policy).build(es));
}

// Every key of [0, keys) read by get against the model, absent ones too.
void check_gets(shard& s, const kv_map& model, int keys) {
  for (int k = 0; k < keys; ++k) {
    std::string key = fmt::format("k{:04}", k);
    auto it = model.find(key);
    CAPTURE(key);
    CHECK(must(s.get(key)) == (it == model.end() ? std::nullopt : std::optional<std::string>(it->second)));
  }
}

void check_reads(shard& s, const kv_map& model, int keys) {
  CHECK(read_all(*s.view()) == model);
  CHECK(read_all(*s.view(), /*backward=*/true) == model);
  check_gets(s, model, keys);
}

// One group of writes over keys [0, keys): puts, rewrites and deletes,
// some of keys only the tree or an older run holds.
void write_round(shard& s, kv_map& model, std::mt19937_64& rng, int round, int writes, int keys) {
  for (int i = 0; i < writes; ++i) {
    int k = static_cast<int>(rng() % keys);
    std::string key = fmt::format("k{:04}", k);
    if (rng() % 4 == 0) {
      REQUIRE(s.del(key).is_ok());
      model.erase(key);
    } else {
      REQUIRE(s.put(key, value_of(round, k)).is_ok());
      model[key] = value_of(round, k);
    }
  }
  REQUIRE(s.commit_group().is_ok());
}

// Puts `value` under each key, in one group.
void put_group(shard& s, kv_map& model, std::initializer_list<const char*> keys, const std::string& value) {
  for (const char* k : keys) {
    REQUIRE(s.put(k, value).is_ok());
    model[k] = value;
  }
  REQUIRE(s.commit_group().is_ok());
}

// A checkpoint of the active memtable, its work done on this thread.
void checkpoint_inline(shard& s) {
  REQUIRE(s.begin_checkpoint(/*background=*/false).is_ok());
  must(s.finish_checkpoint());
}

}  // namespace

TEST_CASE("sorted runs: written beside the tree until they hold as many entries or number max_sorted_runs") {
  fault_env fe;
  manual_clock clock;
  auto o = run_options(clock, 3);
  auto s = must(shard::open(fe, dir, o));
  std::mt19937_64 rng(7);
  kv_map model;
  for (int k = 0; k < 600; k += 2) {
    REQUIRE(s->put(fmt::format("k{:04}", k), value_of(0, k)).is_ok());
    model[fmt::format("k{:04}", k)] = value_of(0, k);
  }
  REQUIRE(s->commit_group().is_ok());
  hash128 tree_root = must(s->checkpoint());  // 300 entries in the tree
  CHECK(s->stats().folds == 1);
  CHECK(s->stats().sorted_runs == 0);

  // Three checkpoints of 40 writes each: runs, the tree untouched.
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    write_round(*s, model, rng, round, 40, 600);
    checkpoint_inline(*s);
    CHECK(s->stats().runs_written == static_cast<std::uint64_t>(round));
    CHECK(s->stats().sorted_runs == static_cast<std::uint64_t>(round));
    CHECK(s->view()->runs().size() == static_cast<std::size_t>(round));
    CHECK(s->view()->root() == tree_root);  // no leaf of the tree rewritten
    CHECK_FALSE(s->view()->holds_writes());
    check_reads(*s, model, 600);
  }
  // The fourth would make four runs: the memtable and the runs are folded,
  // and the tree is the one a build of the content makes.
  write_round(*s, model, rng, 4, 40, 600);
  checkpoint_inline(*s);
  CHECK(s->stats().folds == 2);
  CHECK(s->stats().sorted_runs == 0);
  CHECK(s->view()->runs().empty());
  CHECK(s->view()->root() == built_root(model, o.chunking));
  check_reads(*s, model, 600);

  // Runs that would hold as many entries as the tree are folded too: a
  // memtable of more than the tree's entries (keys among the tree's, so no
  // append) goes straight in.
  std::uint64_t tree_entries = must(tree::prolly_tree(*s->view()->store(), o.chunking).count(s->view()->root()));
  for (int k = 0; k < static_cast<int>(tree_entries) + 10; ++k) {
    std::string key = fmt::format("k{:04}x{:05}", k % 600, k);
    REQUIRE(s->put(key, "new").is_ok());
    model[key] = "new";
  }
  REQUIRE(s->commit_group().is_ok());
  checkpoint_inline(*s);
  CHECK(s->stats().folds == 3);
  CHECK(s->stats().sorted_runs == 0);
  CHECK(s->view()->root() == built_root(model, o.chunking));
  check_reads(*s, model, 600);
}

TEST_CASE("sorted runs: a memtable whose keys all come after every other is applied to the tree, runs kept") {
  fault_env fe;
  manual_clock clock;
  auto o = run_options(clock, 8);
  auto s = must(shard::open(fe, dir, o));
  kv_map model;
  // Keys in order: every checkpoint appends to the tree's right edge.
  int next = 0;
  auto write_next = [&](int n) {
    for (int i = 0; i < n; ++i, ++next) {
      std::string key = fmt::format("k{:04}", next);
      REQUIRE(s->put(key, value_of(9, next)).is_ok());
      model[key] = value_of(9, next);
    }
    REQUIRE(s->commit_group().is_ok());
  };
  for (int round = 0; round < 4; ++round) {
    write_next(50);
    checkpoint_inline(*s);
    CHECK(s->stats().runs_written == 0);
    CHECK(s->stats().folds == static_cast<std::uint64_t>(round + 1));
    CHECK(s->view()->root() == built_root(model, o.chunking));
  }
  // A rewrite of old keys makes a run; keys after everything still append,
  // the run kept beside the tree; one below the run's last key makes a run.
  std::mt19937_64 rng(5);
  write_round(*s, model, rng, 10, 30, next);
  checkpoint_inline(*s);
  REQUIRE(s->stats().sorted_runs == 1);
  hash128 before = s->view()->root();
  write_next(20);
  checkpoint_inline(*s);
  CHECK(s->stats().sorted_runs == 1);
  CHECK(s->stats().runs_written == 1);
  CHECK(s->view()->root() != before);
  check_reads(*s, model, next);
  put_group(*s, model, {"k0000"}, "below");
  write_next(5);
  checkpoint_inline(*s);
  CHECK(s->stats().sorted_runs == 2);
  check_reads(*s, model, next);
  // Above the tree's last key but not above a run's: a run, not an append
  // (the tree would take k9000's new value under the run's older one).
  must(s->checkpoint());
  put_group(*s, model, {"k0001", "k9000"}, "in-a-run");
  checkpoint_inline(*s);
  REQUIRE(s->stats().sorted_runs == 1);
  put_group(*s, model, {"k8000", "k9000"}, "newer");
  checkpoint_inline(*s);
  CHECK(s->stats().sorted_runs == 2);
  CHECK(must(s->get("k9000")) == "newer");
  check_reads(*s, model, next);
  CHECK(must(s->checkpoint()) == built_root(model, o.chunking));
}

TEST_CASE("sorted runs: an explicit checkpoint folds them, and max_sorted_runs 0 never writes one") {
  for (std::size_t max_runs : {std::size_t{0}, std::size_t{2}, limits::max_sorted_runs}) {
    CAPTURE(max_runs);
    fault_env fe;
    manual_clock clock;
    auto o = run_options(clock, max_runs);
    auto s = must(shard::open(fe, dir, o));
    std::mt19937_64 rng(max_runs + 1);
    kv_map model;
    write_round(*s, model, rng, 0, 400, 300);
    must(s->checkpoint());
    for (int round = 1; round <= 5; ++round) {
      write_round(*s, model, rng, round, 20, 300);
      checkpoint_inline(*s);
      CHECK(s->stats().sorted_runs <= max_runs);
      check_reads(*s, model, 300);
    }
    if (max_runs == 0)
      CHECK(s->stats().runs_written == 0);
    else
      CHECK(s->stats().runs_written > 0);
    write_round(*s, model, rng, 6, 20, 300);
    hash128 root = must(s->checkpoint());
    CHECK(s->view()->runs().empty());
    CHECK(root == built_root(model, o.chunking));
    check_reads(*s, model, 300);
  }
  manual_clock clock;
  auto o = run_options(clock, limits::max_sorted_runs + 1);
  CHECK(o.validate().code() == status_code::invalid_argument);
}

TEST_CASE("sorted runs: a reopen reads back the runs the last marker names; a cut before it replays") {
  for (auto mode : {fault_env::unsynced::lose, fault_env::unsynced::keep, fault_env::unsynced::random}) {
    CAPTURE(static_cast<int>(mode));
    fault_env fe;
    manual_clock clock;
    auto o = run_options(clock, 8);
    auto s = must(shard::open(fe, dir, o));
    std::mt19937_64 rng(11);
    kv_map model;
    write_round(*s, model, rng, 0, 500, 400);
    must(s->checkpoint());
    for (int round = 1; round <= 3; ++round) {
      write_round(*s, model, rng, round, 30, 400);
      // A key with a deadline in a run: the expiry index comes back from it.
      REQUIRE(s->put("ttl-key", "t", 1h).is_ok());
      REQUIRE(s->commit_group().is_ok());
      checkpoint_inline(*s);
    }
    REQUIRE(s->stats().sorted_runs == 3);
    auto deadline = s->next_deadline();
    REQUIRE(deadline);
    // A memtable whose run is written but never named by a marker: its
    // writes come back from the log.
    write_round(*s, model, rng, 4, 30, 400);
    REQUIRE(s->begin_checkpoint(false).is_ok());
    s.reset();
    fe.crash(mode);
    s = must(shard::open(fe, dir, o));
    CHECK(s->stats().sorted_runs == 3);
    CHECK(s->stats().replayed_records > 0);
    CHECK(s->next_deadline() == deadline);
    CHECK(must(s->get("ttl-key")) == "t");
    model["ttl-key"] = "t";
    for (const auto& [k, v] : model)
      if (k != "ttl-key") CHECK(must(s->get(k)) == v);
    CHECK(read_all(*s->view()).size() == model.size());
    CHECK(must(s->verify({})).problems.empty());
    // The deadline passes: the sweep deletes the key wherever it lies.
    clock.advance(2h);
    CHECK(must(s->stage_expired(10)) == 1);
    REQUIRE(s->commit_group().is_ok());
    model.erase("ttl-key");
    checkpoint_inline(*s);
    CHECK_FALSE(must(s->get("ttl-key")).has_value());
    hash128 root = must(s->checkpoint());
    CHECK(root == built_root(model, o.chunking));
    CHECK(must(s->verify({})).problems.empty());
  }
}

TEST_CASE("sorted runs: gc and reclamation keep the runs of the current view and of views still held") {
  fault_env fe;
  manual_clock clock;
  auto o = run_options(clock, 8);
  o.max_space_amplification = 0;  // reclamation only when asked
  auto s = must(shard::open(fe, dir, o));
  std::mt19937_64 rng(3);
  kv_map model;
  write_round(*s, model, rng, 0, 600, 500);
  must(s->checkpoint());
  for (int round = 1; round <= 3; ++round) {
    write_round(*s, model, rng, round, 40, 500);
    checkpoint_inline(*s);
  }
  REQUIRE(s->view()->runs().size() == 3);
  CHECK(must(s->usage()).keys == model.size());

  // gc and a whole reclamation cycle with the runs current.
  must(s->gc({}));
  check_reads(*s, model, 500);
  REQUIRE(s->begin_reclaim({}, 1.01).is_ok());
  while (!must(s->reclaim_step())) {
  }
  check_reads(*s, model, 500);
  CHECK(must(s->verify({})).problems.empty());

  // A view held across a fold keeps its runs through gc.
  auto held = s->view();
  kv_map held_model = model;
  write_round(*s, model, rng, 9, 40, 500);
  must(s->checkpoint());
  REQUIRE(s->view()->runs().empty());
  auto with_held = must(s->usage()).live_node_bytes;
  must(s->gc({}));
  CHECK(read_all(*held) == held_model);
  CHECK(read_all(*held, /*backward=*/true) == held_model);
  held.reset();
  must(s->gc({}));
  CHECK(must(s->usage()).live_node_bytes < with_held);  // its runs and old tree went with the view
  check_reads(*s, model, 500);
}
