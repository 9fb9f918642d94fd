// replication/'s pure parts: the promise state (codec and the acceptor's
// rules, against a model of what Paxos requires) and the delta transfer between
// two shards (tree_puller + import_node + merge_stamped): only missing nodes
// are shipped, a peer's bad bytes are refused, and the merged replica holds
// exactly the winner of every key.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "core/fault_env.h"
#include "engine/keyspace.h"
#include "engine/shard.h"
#include "replication/client_access.h"
#include "replication/cluster_file.h"
#include "replication/promise_state.h"
#include "state/layout.h"
#include "tests/support/manual_clock.h"
#include "tests/support/stored_entries.h"
#include "tests/support/tree_model.h"
#include "tree/tree_puller.h"
#include "ttl/envelope.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::manual_clock;
using magnetite::testing::must;
using magnetite::tree::pull_stats;
using magnetite::tree::tree_puller;

namespace {

std::uint64_t rand_seed() { return doctest::getContextOptions()->rand_seed; }

}  // namespace

TEST_CASE("promise state: encodes to a fixed size and back; anything else is refused by name") {
  std::mt19937_64 rng(rand_seed() + 1);
  for (int i = 0; i < 200; ++i) {
    promise_state s;
    s.promised = {rng(), static_cast<std::uint32_t>(rng())};
    s.epoch = rng() % 2 ? s.promised : ballot{s.promised.counter / 2, static_cast<std::uint32_t>(rng())};
    s.minted = rng();
    s.synced_ns = rng();
    s.settled_ns = rng();
    std::string bytes = s.encode();
    CHECK(bytes.size() == promise_state::encoded_bytes);
    CHECK(must(promise_state::decode(bytes)) == s);
  }
  promise_state s{{7, 2}, {5, 1}, 9, 1'700'000'000'000'000'000, 1'600'000'000'000'000'000};
  std::string good = s.encode();
  auto refused = [](std::string bytes, status_code code, std::string_view says) {
    auto r = promise_state::decode(bytes);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == code);
    CHECK(r.error().message().find(says) != std::string::npos);
  };
  refused("", status_code::corruption, "MGPS");
  refused("XGPS" + good.substr(4), status_code::corruption, "MGPS");
  std::string v3 = good;
  v3[4] = 3;
  refused(v3, status_code::not_supported, "version 3");
  refused(good + "x", status_code::corruption, "version 2 has 53");
  refused(good.substr(0, good.size() - 1), status_code::corruption, "version 2 has 53");
  // Version 1 (before the long-absence rule) is read with no sync known: the
  // replica counts as absent until it catches up or settles (design, 6).
  std::string v1 = good.substr(0, promise_state::encoded_bytes_v1);
  v1[4] = 1;
  promise_state old = must(promise_state::decode(v1));
  CHECK(old.promised == s.promised);
  CHECK(old.epoch == s.epoch);
  CHECK(old.minted == s.minted);
  CHECK(old.synced_ns == 0);
  CHECK(old.settled_ns == 0);
  refused(v1 + std::string(16, '\0'), status_code::corruption, "version 1 has 37");
  refused(promise_state{{5, 1}, {7, 2}, 0}.encode(), status_code::corruption, "above its promise");
  CHECK(must(from_log(std::nullopt)) == promise_state{});
  CHECK(must(from_log(good)) == s);
}

namespace {

minted_ballot must_mint(const promise_state& s, std::uint32_t node) {
  auto m = mint(s, node);
  REQUIRE(m.has_value());
  return *m;
}

}  // namespace

TEST_CASE("promise state: the acceptor's rules keep Paxos's invariants over random histories") {
  // A model replica: what it has promised and accepted, updated only through
  // the rules' `store`. Checked after each step: promised never decreases,
  // epoch <= promised, a refusal changes nothing and names the promise, an
  // acceptance of a prepare is strictly above every earlier promise, a write
  // below the promise is always refused, and a minted ballot is above every
  // ballot seen.
  std::mt19937_64 rng(rand_seed() + 2);
  for (int history = 0; history < 200; ++history) {
    promise_state s;
    ballot highest_seen;
    for (int step = 0; step < 60; ++step) {
      ballot b{rng() % 8, static_cast<std::uint32_t>(1 + rng() % 3)};
      promise_state before = s;
      switch (rng() % 3) {
        case 0: {
          decision d = on_prepare(s, b);
          CHECK(d.accepted == (b > before.promised));
          if (d.accepted) {
            REQUIRE(d.store.has_value());
            CHECK(d.store->promised == b);
            CHECK(d.store->epoch == before.epoch);
            s = *d.store;
          } else {
            CHECK_FALSE(d.store.has_value());
            CHECK(d.promised == before.promised);
          }
          break;
        }
        case 1: {
          decision d = on_write(s, b);
          CHECK(d.accepted == (b >= before.promised));
          if (d.accepted) {
            if (d.store) s = *d.store;
            CHECK(s.promised == b);
            CHECK(s.epoch == b);
            // Accepting the same epoch again needs nothing durable.
            CHECK_FALSE(on_write(s, b).store.has_value());
          } else {
            CHECK_FALSE(d.store.has_value());
            CHECK(d.promised == before.promised);
          }
          break;
        }
        default: {
          auto node = static_cast<std::uint32_t>(1 + rng() % 3);
          minted_ballot m = must_mint(s, node);
          CHECK(m.b.node == node);
          CHECK(m.b > highest_seen);
          CHECK(m.b > before.promised);
          CHECK(m.store.minted == m.b.counter);
          CHECK(m.store.promised == before.promised);
          CHECK(must_mint(m.store, node).b.counter > m.b.counter);  // never the same ballot twice
          s = m.store;
          highest_seen = std::max(highest_seen, m.b);
          break;
        }
      }
      CHECK(s.promised >= before.promised);
      CHECK(s.epoch <= s.promised);
      CHECK(s.minted >= before.minted);
      highest_seen = std::max(highest_seen, s.promised);
      CHECK(must(promise_state::decode(s.encode())) == s);
    }
  }
}

TEST_CASE("promise state: a ballot past the bounds changes nothing, and mint refuses instead of wrapping") {
  promise_state s;
  s.promised = {100, 2};
  s.epoch = {100, 2};
  s.minted = 90;
  const promise_state before = s;
  // The attack: counter 2^64-1 as a prepare and as a write. Taken, it was a
  // durable promise no candidate could mint above.
  for (ballot b : {ballot{UINT64_MAX, 3}, ballot{max_ballot_counter + 1, 3}, ballot{100 + max_ballot_jump + 1, 3}}) {
    CAPTURE(b.counter);
    CHECK_FALSE(s.reachable(b));
    for (const decision& d : {on_prepare(s, b), on_write(s, b)}) {
      CHECK_FALSE(d.accepted);
      CHECK_FALSE(d.store.has_value());
      CHECK(d.promised == before.promised);
    }
  }
  // The largest jump is still taken: a replica that missed many elections
  // catches up with the owner's epoch.
  ballot far{100 + max_ballot_jump, 3};
  CHECK(s.reachable(far));
  CHECK(on_prepare(s, far).accepted);
  auto w = on_write(s, far);
  REQUIRE(w.store.has_value());
  CHECK(w.store->epoch == far);
  // The jump is measured from the highest counter promised or minted.
  s.minted = 1000;
  CHECK(s.reachable({1000 + max_ballot_jump, 1}));
  CHECK_FALSE(s.reachable({1001 + max_ballot_jump, 1}));
  // mint: above everything seen up to the bound, then none, never 0.
  promise_state top;
  top.promised = {max_ballot_counter - 1, 1};
  top.epoch = top.promised;
  auto last = mint(top, 2);
  REQUIRE(last.has_value());
  CHECK(last->b == ballot{max_ballot_counter, 2});
  CHECK_FALSE(mint(last->store, 2).has_value());
  promise_state poisoned;  // a state written before the bounds, as one message left it
  poisoned.promised = {UINT64_MAX, 9};
  CHECK_FALSE(mint(poisoned, 1).has_value());
}

namespace {

shard_options replica_options(const manual_clock& c) {
  shard_options o;
  o.clock = c.fn();
  o.cache_bytes = 8 << 20;
  return o;
}

std::string key_of(std::uint64_t i) { return fmt::format("key-{:08}", i); }

// Writes keys [0, n) stamped (epoch, 1..n) in frames of 4096, then checkpoints.
void load(shard& s, std::uint64_t n, ballot epoch, std::uint64_t seq0 = 0) {
  std::vector<stamped_write> w;
  for (std::uint64_t i = 0; i < n; ++i) {
    w.push_back({key_of(i), stamp{epoch, seq0 + i + 1}, fmt::format("value-{}-{}", epoch.counter, i), std::nullopt});
    if (w.size() == 4096 || i + 1 == n) {
      (void)must(s.apply_stamped(w));
      w.clear();
      REQUIRE(s.commit_group().is_ok());
    }
  }
  (void)must(s.checkpoint());
}

// Pulls `root` from `from` into `to` with requests of at most batch nodes.
// With `short_answers`, the peer answers a random prefix of each request (at
// least one node), as a replica bounding its answer's bytes does.
pull_stats pull(shard& from, shard& to, const hash128& root, std::size_t batch = 64,
                std::mt19937_64* short_answers = nullptr) {
  tree_puller p(root, [&](const hash128& h) { return to.holds_node(h); });
  auto import = [&](const hash128& h, std::string_view bytes) { return to.import_node(h, bytes); };
  while (!p.done()) {
    auto want = p.next_request(batch);
    std::size_t answered = short_answers ? 1 + (*short_answers)() % want.size() : want.size();
    std::vector<std::string> got;
    for (std::size_t i = 0; i < answered; ++i) got.push_back(must(from.node_encoding(want[i])));
    REQUIRE(p.take(want, got, import).is_ok());
  }
  REQUIRE(p.finish(import).is_ok());
  return p.stats();
}

}  // namespace

TEST_CASE("delta transfer: a replica that missed k writes pulls about k x depth nodes, then merges to the same root") {
  fault_env fa, fb;
  manual_clock clock;
  auto a = must(shard::open(fa, "/db/a", replica_options(clock)));
  auto b = must(shard::open(fb, "/db/b", replica_options(clock)));
  const std::uint64_t n = 20'000;
  load(*a, n, {1, 1});
  load(*b, n, {1, 1});
  CHECK(must(a->checkpoint()) == must(b->checkpoint()));
  // A gets k writes B misses: updates, deletes and new keys, from a later epoch.
  std::mt19937_64 rng(rand_seed() + 3);
  const std::uint64_t k = 100;
  std::vector<stamped_write> missed;
  for (std::uint64_t i = 0; i < k; ++i) {
    stamp st{{2, 2}, i + 1};
    std::uint64_t key = rng() % (n + n / 10);
    if (i % 5 == 0)
      missed.push_back({key_of(key), st, std::nullopt, *clock.now + 1'000'000'000'000ull});
    else
      missed.push_back({key_of(key), st, fmt::format("updated-{}", i), std::nullopt});
  }
  (void)must(a->apply_stamped(missed));
  REQUIRE(a->commit_group().is_ok());
  hash128 root_a = must(a->checkpoint());
  // B also took a write A never saw (an old owner's, on a minority): the merge keeps it.
  stamped_write only_b{key_of(n + n), stamp{{1, 1}, n + 1}, "only on b", std::nullopt};
  (void)must(b->apply_stamped(std::span<const stamped_write>(&only_b, 1)));
  REQUIRE(b->commit_group().is_ok());

  auto stats = pull(*a, *b, root_a);
  // Depth of A's tree: levels walked is at most it. The bound the issue names:
  // a small multiple (here 2) of k x node size x depth, node size being the
  // chunker's target (4 KiB).
  std::uint64_t depth = stats.levels;
  std::uint64_t bound = 2 * k * depth * 4096;
  MESSAGE("pulled " << stats.nodes << " nodes, " << stats.bytes << " bytes in " << stats.requests << " requests over "
                    << depth << " levels; 2 x k x depth x 4 KiB = " << bound);
  CHECK(stats.bytes <= bound);
  CHECK(stats.nodes <= k * depth + 1);
  CHECK(b->holds_node(root_a));

  auto report = must(b->merge_stamped(root_a));
  CHECK(report.taken <= k);
  CHECK(report.taken >= 1);
  REQUIRE(b->commit_group().is_ok());
  // B = A plus its own extra write; A pulls B back and they are equal.
  auto root_b = must(b->checkpoint());
  pull(*b, *a, root_b);
  (void)must(a->merge_stamped(root_b));
  REQUIRE(a->commit_group().is_ok());
  CHECK(must(a->checkpoint()) == must(b->checkpoint()));
  auto sa = testing::stored_entries(*a);
  CHECK(sa == testing::stored_entries(*b));
  CHECK(ttl::unwrap(sa.at(key_of(n + n)))->value == "only on b");
  for (const auto& w : missed) {
    auto u = must(ttl::unwrap(sa.at(w.key)));
    CHECK(*u.stamp >= w.stamp);  // the highest write of each key won
  }
  // Pulling a root we hold ships nothing.
  CHECK(pull(*a, *b, must(a->checkpoint())).nodes == 0);
  CHECK(b->verify({}).value().problems.empty());
}

TEST_CASE("delta transfer: a peer's wrong bytes are refused and never stored; nodes are imported bottom up only") {
  fault_env fa, fb;
  manual_clock clock;
  auto a = must(shard::open(fa, "/db/a", replica_options(clock)));
  auto b = must(shard::open(fb, "/db/b", replica_options(clock)));
  load(*a, 5'000, {1, 1});
  hash128 root = must(a->checkpoint());
  auto root_bytes = must(a->node_encoding(root));
  auto import = [&](const hash128& h, std::string_view bytes) { return b->import_node(h, bytes); };

  // Bytes that do not hash to the name asked for.
  {
    tree_puller p(root, [&](const hash128& h) { return b->holds_node(h); });
    auto want = p.next_request(8);
    REQUIRE(want.size() == 1);
    std::string bad = root_bytes;
    bad[bad.size() / 2] ^= 0x40;
    std::vector<std::string> got{bad};
    auto s = p.take(want, got, import);
    CHECK(s.code() == status_code::corruption);
    CHECK(s.message().find(root.to_hex()) != std::string::npos);
    CHECK(p.take(want, std::vector<std::string>{root_bytes}, import).code() ==
          status_code::corruption);  // broken stays broken
    CHECK_FALSE(b->holds_node(root));
  }
  // An answer of the wrong length: nothing, or more than was asked.
  {
    tree_puller p(root, [&](const hash128& h) { return b->holds_node(h); });
    auto want = p.next_request(8);
    CHECK(p.take(want, std::vector<std::string>{}, import).code() == status_code::corruption);
    tree_puller q(root, [&](const hash128& h) { return b->holds_node(h); });
    want = q.next_request(8);
    CHECK(q.take(want, std::vector<std::string>{root_bytes, root_bytes}, import).code() == status_code::corruption);
  }
  // The shard itself refuses a wrong name, and an internal node before its children.
  CHECK(b->import_node(root, "\x00\x00").code() == status_code::corruption);
  auto early = b->import_node(root, root_bytes);
  CHECK(early.code() == status_code::invalid_argument);
  CHECK(early.message().find("bottom up") != std::string::npos);
  CHECK_FALSE(b->holds_node(root));
  CHECK(b->failure().is_ok());
  // A merge from a root not held is refused, changing nothing.
  CHECK(b->merge_stamped(root).error().code() == status_code::invalid_argument);
  // And the honest pull then works.
  pull(*a, *b, root, 3);
  CHECK(b->holds_node(root));
  (void)must(b->merge_stamped(root));
  REQUIRE(b->commit_group().is_ok());
  CHECK(must(b->checkpoint()) == root);
}

TEST_CASE("delta transfer: imported nodes survive a power cut only as complete subtrees; a pull after it completes") {
  fault_env fa, fb;
  manual_clock clock;
  auto a = must(shard::open(fa, "/db/a", replica_options(clock)));
  auto b = must(shard::open(fb, "/db/b", replica_options(clock)));
  load(*a, 8'000, {3, 1});
  hash128 root = must(a->checkpoint());
  // A pull that stops half way (the peer died), then B loses power.
  {
    tree_puller p(root, [&](const hash128& h) { return b->holds_node(h); });
    auto import = [&](const hash128& h, std::string_view bytes) { return b->import_node(h, bytes); };
    for (int i = 0; i < 3 && !p.done(); ++i) {
      auto want = p.next_request(4);
      std::vector<std::string> got;
      for (const auto& h : want) got.push_back(must(a->node_encoding(h)));
      REQUIRE(p.take(want, got, import).is_ok());
    }
  }
  (void)must(b->checkpoint());  // flushes whatever was imported, with B's own root
  b.reset();
  fb.crash(fault_env::unsynced::lose);
  b = must(shard::open(fb, "/db/b", replica_options(clock)));
  CHECK(b->verify({}).value().problems.empty());
  pull(*a, *b, root);
  (void)must(b->merge_stamped(root));
  REQUIRE(b->commit_group().is_ok());
  CHECK(must(b->checkpoint()) == root);
  b.reset();
  fb.crash(fault_env::unsynced::lose);
  b = must(shard::open(fb, "/db/b", replica_options(clock)));
  CHECK(must(b->checkpoint()) == root);
}

TEST_CASE(
    "delta transfer: adopting a tree drops what only we hold, keeps our newer writes and unreplicated "
    "values, and survives a power cut") {
  fault_env fa, fb;
  manual_clock clock;
  auto a = must(shard::open(fa, "/db/a", replica_options(clock)));
  auto b = must(shard::open(fb, "/db/b", replica_options(clock)));
  load(*a, 3'000, {1, 1});
  load(*b, 3'000, {1, 1});
  // A deleted 50 keys and its tombstones were purged: gone from its tree.
  // B, away meanwhile, still holds their old values, plus a write of its own
  // A never saw, one newer than A's for a key both hold, and a value written
  // outside replication.
  for (std::uint64_t i = 0; i < 50; ++i) REQUIRE(a->del(key_of(i * 7)).is_ok());
  REQUIRE(a->commit_group().is_ok());
  hash128 root_a = must(a->checkpoint());
  std::vector<stamped_write> own{{key_of(9'999), stamp{{2, 2}, 1}, "only on b", std::nullopt},
                                 {key_of(1), stamp{{2, 2}, 2}, "newer on b", std::nullopt}};
  (void)must(b->apply_stamped(own));
  REQUIRE(b->put("plain", "unreplicated").is_ok());
  REQUIRE(b->commit_group().is_ok());

  pull(*a, *b, root_a);
  auto report = must(b->adopt_stamped(root_a));
  CHECK(report.dropped == 51);  // the 50 purged deletes and the write only b held
  CHECK(report.taken == 0);     // b's values were never older than a's
  REQUIRE(b->commit_group().is_ok());
  auto check = [&](shard& s) {
    for (std::uint64_t i = 0; i < 50; ++i) CHECK_FALSE(must(s.get(key_of(i * 7))).has_value());
    CHECK_FALSE(must(s.get(key_of(9'999))).has_value());
    CHECK(must(s.get(key_of(1))) == "newer on b");
    CHECK(must(s.get(key_of(2))) == "value-1-2");
    CHECK(must(s.get("plain")) == "unreplicated");
  };
  check(*b);
  b.reset();
  fb.crash(fault_env::unsynced::lose);
  b = must(shard::open(fb, "/db/b", replica_options(clock)));
  check(*b);
  CHECK(b->verify({}).value().problems.empty());
  // Adopting a root not held is refused, changing nothing.
  CHECK(b->adopt_stamped(hash128{}).error().code() == status_code::invalid_argument);
}

TEST_CASE("cluster file: parses the facts; comments, spacing and node order do not change the fingerprint") {
  auto a = must(cluster_file::parse(
      "# three nodes on loopback\ncluster orders\nshards 4\n\nnode 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402\n"
      "node 3 127.0.0.1 7403\n"));
  CHECK(a.name == "orders");
  CHECK(a.shards == 4);
  CHECK(a.tombstone_retention_s == 86'400);
  REQUIRE(a.nodes.size() == 3);
  CHECK(a.node(2)->port == 7402);
  CHECK(a.node(4) == nullptr);
  CHECK(a.majority() == 2);
  auto b = must(cluster_file::parse(
      "node 3 127.0.0.1 7403   # last\r\n  node 1\t127.0.0.1 7401\nshards 4\ncluster orders\nnode 2 127.0.0.1 7402"));
  CHECK(b.fingerprint() == a.fingerprint());
  CHECK(b.canonical() == a.canonical());
  // Any fact that differs changes it.
  for (std::string_view other :
       {"cluster orders\nshards 8\nnode 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402\nnode 3 127.0.0.1 7403",
        "cluster billing\nshards 4\nnode 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402\nnode 3 127.0.0.1 7403",
        "cluster orders\nshards 4\nnode 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402\nnode 3 127.0.0.1 7404",
        "cluster orders\nshards 4\nnode 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402",
        "cluster orders\nshards 4\ntombstone_retention_s 60\nnode 1 127.0.0.1 7401\nnode 2 "
        "127.0.0.1 7402\nnode 3 127.0.0.1 7403"})
    CHECK(must(cluster_file::parse(other)).fingerprint() != a.fingerprint());
}

TEST_CASE("cluster file: beyond_loopback names the first node not on loopback; names other than localhost count") {
  auto with = [](std::string_view host) {
    return must(cluster_file::parse(fmt::format("cluster c\nshards 1\nnode 1 127.0.0.1 7401\nnode 2 {} 7402\n", host)));
  };
  for (std::string_view local : {"127.0.0.1", "127.255.0.9", "localhost", "::1"}) {
    CAPTURE(local);
    CHECK(with(local).beyond_loopback() == nullptr);
  }
  for (std::string_view open : {"10.0.0.2", "0.0.0.0", "128.0.0.1", "127.0.0.256", "127.0.0", "127.1", "db2.example",
                                "localhost.evil.example", "::"}) {
    CAPTURE(open);
    auto c = with(open);
    REQUIRE(c.beyond_loopback() != nullptr);
    CHECK(c.beyond_loopback()->id == 2);
  }
}

TEST_CASE("cluster file: every mistake is refused with its line and what is wrong") {
  auto refused = [](std::string_view text, std::string_view says) {
    auto r = cluster_file::parse(text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::invalid_argument);
    INFO(r.error().message());
    CHECK(r.error().message().find(says) != std::string::npos);
  };
  const std::string ok = "cluster c\nshards 2\n";
  refused("", "no `cluster NAME` line");
  refused("cluster c\nnode 1 h 1", "no `shards N` line");
  refused(ok, "no `node` line");
  refused(ok + "node 1 h 7401\nnode 1 h 7402", "line 4: node 1 is named twice");
  refused(ok + "node 1 h 7401\nnode 2 h 7401", "line 4: h:7401 is given twice");
  refused(ok + "node 0 h 7401", "line 3: expected `node ID HOST PORT`");
  refused(ok + "node 1 h 70000", "line 3: expected `node ID HOST PORT`");
  refused(ok + "node 1 h", "line 3: expected `node ID HOST PORT`");
  refused(ok + "node x h 1", "line 3");
  refused("cluster c\nshards 0\nnode 1 h 1", "line 2: expected `shards N`, 1..1024");
  refused("cluster c\nshards 2000\nnode 1 h 1", "1..1024");
  refused("cluster c\nshards 2\nshards 2\nnode 1 h 1", "line 3: a second `shards` line");
  refused("cluster c d\nshards 2\nnode 1 h 1", "line 1: expected `cluster NAME`");
  refused("cluster c/d\nshards 2\nnode 1 h 1", "line 1");
  refused(ok + "tombstone_retention_s 0\nnode 1 h 1", "line 3: expected `tombstone_retention_s SECONDS`");
  refused(ok + "replicas 3\nnode 1 h 1", "line 3: unknown setting `replicas`");
}

TEST_CASE("client access: a grant covers the keys its prefix starts, readwrite includes read, no grant nothing") {
  client_access none;
  CHECK_FALSE(none.may_read("a"));
  CHECK_FALSE(none.may_read_range("a", "b"));
  CHECK_FALSE(none.writes_anything());
  client_access a({{"orders/", false}, {"carts/", true}});
  CHECK(a.may_read("orders/1"));
  CHECK_FALSE(a.may_write("orders/1"));
  CHECK(a.may_read("carts/1"));
  CHECK(a.may_write("carts/1"));
  CHECK(a.writes_anything());
  CHECK_FALSE(a.may_read("orders"));  // shorter than the prefix
  CHECK_FALSE(a.may_read("order/1"));
  CHECK_FALSE(a.may_write("orders/1"));
  // Ranges: within one prefix, up to its successor and no further.
  CHECK(a.may_read_range("orders/", "orders0"));  // '/' + 1 is '0'
  CHECK(a.may_read_range("orders/5", "orders/6"));
  CHECK_FALSE(a.may_read_range("orders/", std::string("orders0\0", 8)));
  CHECK_FALSE(a.may_read_range("orders/", ""));  // no upper bound
  CHECK_FALSE(a.may_read_range("order", "orders0"));
  CHECK_FALSE(a.may_read_range("carts/", "orders0"));  // two grants do not join
  // A prefix ending in FF: its successor raises the byte before.
  client_access ff({{std::string("k\xff", 2), false}});
  CHECK(ff.may_read_range(std::string("k\xff", 2), "l"));
  CHECK_FALSE(ff.may_read_range(std::string("k\xff", 2), std::string("l\0", 2)));
  // All FF (the state space) and the empty prefix reach the end.
  client_access space({{std::string("\xff\xff", 2), true}});
  CHECK(space.may_read_range(std::string("\xff\xff\x72", 3), ""));
  CHECK_FALSE(space.may_read_range("a", ""));
  CHECK_FALSE(space.may_write("a"));
  client_access all({{"", false}});
  CHECK(all.may_read_range("", ""));
  CHECK(all.may_read("anything"));
  CHECK_FALSE(all.may_write("anything"));
}

TEST_CASE("client access: prefixes as the cluster file writes them, and the named forms of state") {
  CHECK(must(parse_prefix("*")).empty());
  CHECK(must(parse_prefix("a%20b%25%ff")) == std::string("a b%\xff"));
  for (const char* bad : {"", "%", "%2", "%zz", "a%2", "a*"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_prefix(bad).is_ok());
  }
  // Every byte string goes out as one word and comes back the same.
  std::mt19937_64 rng(43);
  for (int i = 0; i < 200; ++i) {
    std::string p(1 + rng() % 12, '\0');
    for (auto& c : p) c = static_cast<char>(rng());
    auto word = format_prefix(p);
    CHECK(word.find_first_of(" \t\r\n#") == std::string::npos);
    CHECK(must(parse_prefix(word)) == p);
  }
  CHECK(format_prefix("") == "*");
  // The named forms are the prefixes state/ lays its keys under.
  CHECK(must(state_prefix("records", "inv")) == state::record_prefix("inv"));
  CHECK(must(state_prefix("stream", "pay")) == state::stream_routing("pay"));
  auto ns = must(state_prefix("state", "sessions"));
  CHECK(state::owner_prefix("sessions", "user-7").starts_with(ns));
  CHECK_FALSE(state::owner_prefix("sessions2", "user-7").starts_with(ns));
  CHECK_FALSE(state::record_prefix("inv2").starts_with(must(state_prefix("records", "inv"))));
  CHECK_FALSE(state_prefix("tables", "x").is_ok());
  CHECK_FALSE(state_prefix("records", "").is_ok());
}

TEST_CASE("cluster file: client lines grant prefixes; their order and spelling do not change the fingerprint") {
  const std::string head = "cluster c\nshards 2\nnode 1 127.0.0.1 7401\n";
  auto a = must(cluster_file::parse(head + "client reports read orders/\nclient ingest readwrite orders/\n"
                                           "client ingest read records inv\nclient admin readwrite *\n"));
  CHECK(a.clients.size() == 3);
  CHECK(a.access_of("reports").may_read("orders/1"));
  CHECK_FALSE(a.access_of("reports").may_write("orders/1"));
  CHECK(a.access_of("ingest").may_write("orders/1"));
  CHECK(a.access_of("ingest").may_read(state::record_key("inv", "k")));
  CHECK_FALSE(a.access_of("ingest").may_write(state::record_key("inv", "k")));
  CHECK(a.access_of("admin").may_write(std::string("\xff\xff", 2)));
  CHECK_FALSE(a.access_of("stranger").may_read("orders/1"));
  auto b = must(cluster_file::parse("client admin readwrite *\nclient ingest read records inv\n" + head +
                                    "client ingest readwrite %6Frders/\nclient reports read orders%2F\n"));
  CHECK(b.fingerprint() == a.fingerprint());
  CHECK(b.canonical() == a.canonical());
  for (std::string other : {"client reports readwrite orders/\nclient ingest readwrite orders/\n"
                            "client ingest read records inv\nclient admin readwrite *\n",
                            "client reports read orders/\nclient ingest readwrite orders/\n"
                            "client ingest read records inv\n"}) {
    CHECK(must(cluster_file::parse(head + other)).fingerprint() != a.fingerprint());
  }
  CHECK(must(cluster_file::parse(head)).clients.empty());
  auto refused = [&](const std::string& lines, std::string_view says) {
    auto r = cluster_file::parse(head + lines);
    REQUIRE_FALSE(r.is_ok());
    INFO(r.error().message());
    CHECK(r.error().message().find(says) != std::string::npos);
  };
  refused("client x write a/\n", "line 4: expected `client NAME read|readwrite PREFIX`");
  refused("client x read\n", "line 4: expected `client NAME");
  refused("client x/y read a\n", "line 4: expected `client NAME");
  refused("client x read a b c\n", "line 4: expected `client NAME");
  refused("client x read a%zz\n", "line 4: prefix `a%zz`: `%` must be followed by two hex digits");
  refused("client x read tables t\n", "line 4: `tables` is not a kind of state");
  refused("client x read a/\nclient x read %61/\n", "line 5: client x is granted read a/ twice");
}
