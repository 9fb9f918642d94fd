// A replicated shard's storage: stamped writes merged by "highest stamp wins"
// (commutative, idempotent), stamped tombstones, stamped values turned into
// tombstones at their deadline, and the promise state made durable through the
// log. On fault_env: power cuts and failed fsyncs.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/fault_env.h"
#include "engine/keyspace.h"
#include "engine/merged_cursor.h"
#include "engine/shard.h"
#include "engine/state_space.h"
#include "tests/support/manual_clock.h"
#include "tests/support/stored_entries.h"
#include "tests/support/tree_model.h"
#include "tree/node.h"
#include "ttl/envelope.h"
#include "wal/frame.h"
#include "wal/record.h"
#include "wal/recovery.h"

using namespace magnetite;
using magnetite::testing::manual_clock;
using magnetite::testing::must;
using namespace std::chrono_literals;

namespace {

shard_options small_options(const manual_clock& c) {
  shard_options o;
  o.clock = c.fn();
  o.chunking = {256, 64, 1024};
  o.cache_bytes = 1 << 20;
  o.tombstone_retention = 1h;
  return o;
}

stamp st(std::uint64_t counter, std::uint32_t node, std::uint64_t seq) { return stamp{{counter, node}, seq}; }

stamped_write put(std::string key, stamp s, std::string value, std::optional<std::uint64_t> deadline = {}) {
  return {std::move(key), s, std::move(value), deadline};
}
stamped_write tomb(std::string key, stamp s, std::uint64_t purge) { return {std::move(key), s, std::nullopt, purge}; }

std::vector<bool> apply(shard& s, std::vector<stamped_write> w) { return must(s.apply_stamped(w)); }

// The stored bytes of a key (envelope included), as the tree and layers hold them.
std::optional<std::string> stored(const shard& s, std::string_view key) {
  std::string out;
  if (!must(s.view()->find(keyspace::data_key(key), out))) return std::nullopt;
  return out;
}

// Rewrites the log segment at `path` with every commit frame's payload
// replaced by `c`'s encoding, every frame re-sealed (the zero tail dropped).
void rewrite_commit_frames(fault_env& fe, const std::string& path, const wal::commit_record& c) {
  std::string seg = *fe.contents(path);
  std::uint64_t number = std::stoull(path.substr(path.rfind('/') + 1));
  auto h = must(wal::check_segment_header(std::string_view(seg).substr(0, wal::segment_header_size), number, path));
  std::string out = seg.substr(0, wal::segment_header_size);
  std::string_view rest = std::string_view(seg).substr(wal::segment_header_size);
  int commits = 0;
  for (;;) {
    auto f = wal::parse_frame(rest, h.salt);
    if (f.check != wal::frame_check::ok) break;
    std::size_t at = wal::begin_frame(out);
    if (f.header.type == wal::record_type::commit) {
      wal::encode_commit(out, c);
      ++commits;
    } else {
      out.append(f.payload);
    }
    wal::finish_frame(out, at, h.salt, f.header.sequence, f.header.type, f.header.flags);
    rest.remove_prefix(f.size);
  }
  REQUIRE(commits == 1);
  auto file = must(fe.open(path, open_mode::create_truncate));
  REQUIRE(file->append(out).is_ok());
  REQUIRE(file->sync().is_ok());
}

}  // namespace

TEST_CASE("stamped: the highest stamp wins per key; lower and equal stamps change nothing") {
  fault_env fe;
  manual_clock clock;
  auto s = must(shard::open(fe, "/db/s", small_options(clock)));
  CHECK(apply(*s, {put("k", st(2, 1, 5), "b")}) == std::vector<bool>{true});
  // Lower in every way the order looks: seq, then node, then counter.
  CHECK(apply(*s, {put("k", st(2, 1, 4), "x"), put("k", st(2, 0, 9), "y"), put("k", st(1, 9, 99), "z")}) ==
        std::vector<bool>{false, false, false});
  CHECK(apply(*s, {put("k", st(2, 1, 5), "again")}) == std::vector<bool>{false});  // a re-delivery
  REQUIRE(s->commit_group().is_ok());
  CHECK(must(s->get("k")) == "b");
  // Within one call, later writes are judged against earlier ones.
  CHECK(apply(*s, {put("k", st(3, 1, 1), "c"), put("k", st(3, 1, 0), "older"), put("k", st(3, 1, 2), "d")}) ==
        std::vector<bool>{true, false, true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(must(s->get("k")) == "d");
  // An unstamped value holds the zero stamp: any stamped write replaces it.
  REQUIRE(s->put("plain", "p").is_ok());
  CHECK(apply(*s, {put("plain", st(1, 1, 1), "stamped")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(must(s->get("plain")) == "stamped");
}

TEST_CASE("stamped: a tombstone reads as absent everywhere and fences older writes until it is purged") {
  fault_env fe;
  manual_clock clock;
  auto s = must(shard::open(fe, "/db/s", small_options(clock)));
  std::uint64_t purge = *clock.now + 3'600'000'000'000ull;
  CHECK(apply(*s, {put("a", st(1, 1, 1), "1"), put("b", st(1, 1, 2), "2"), tomb("a", st(1, 1, 3), purge)}) ==
        std::vector<bool>{true, true, true});
  REQUIRE(s->commit_group().is_ok());
  CHECK_FALSE(must(s->get("a")).has_value());
  auto chunk = must(read_range_chunk(*s->view(), "", "", 10, *clock.now));
  REQUIRE(chunk.entries.size() == 1);
  CHECK(chunk.entries[0].first == "b");
  // The write the delete superseded arrives late (from a lagging replica): refused.
  CHECK(apply(*s, {put("a", st(1, 1, 1), "1")}) == std::vector<bool>{false});
  REQUIRE(s->checkpoint());
  CHECK(apply(*s, {put("a", st(1, 1, 2), "late")}) == std::vector<bool>{false});  // from the tree, not a layer
  // At its purge deadline the TTL sweep drops it for good.
  clock.advance(1h);
  CHECK(must(s->stage_expired(100)) == 1);
  REQUIRE(s->commit_group().is_ok());
  CHECK_FALSE(stored(*s, "a").has_value());
  CHECK(stored(*s, "b").has_value());
}

TEST_CASE("stamped: a stamped value expires into a tombstone of its stamp, purged a retention later") {
  fault_env fe;
  manual_clock clock;
  auto s = must(shard::open(fe, "/db/s", small_options(clock)));
  std::uint64_t deadline = *clock.now + 10'000'000'000ull;
  CHECK(apply(*s, {put("k", st(4, 2, 7), "v", deadline)}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(must(s->get("k")) == "v");
  clock.advance(10s);
  CHECK_FALSE(must(s->get("k")).has_value());  // expired: absent before any sweep
  CHECK(must(s->stage_expired(100)) == 1);
  REQUIRE(s->commit_group().is_ok());
  auto bytes = stored(*s, "k");
  REQUIRE(bytes.has_value());
  CHECK(*bytes == ttl::wrap_stamped(st(4, 2, 7), std::nullopt, deadline + 3'600'000'000'000ull));
  // The write it replaced cannot come back, nor can an older one.
  CHECK(apply(*s, {put("k", st(4, 2, 6), "resurrected")}) == std::vector<bool>{false});
  // A later write can.
  CHECK(apply(*s, {put("k", st(4, 2, 8), "new")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(must(s->get("k")) == "new");
  // The tombstone's expiry entry went with it: nothing more to sweep.
  clock.advance(2h);
  CHECK(must(s->stage_expired(100)) == 0);
  CHECK(must(s->get("k")) == "new");
  auto report = must(s->verify({}));
  CHECK(report.problems.empty());
}

TEST_CASE(
    "stamped: replicas that receive the same writes in any order, any number of times, hold equal bytes and roots") {
  // Writes from two epochs to a few keys, with TTLs and deletes; each replica
  // gets a shuffled copy with duplicates, split into calls at random, on its
  // own clock (the owner chose every deadline, so the clocks do not matter
  // before the deadlines). The stored bytes, the root and what reads see agree.
  std::mt19937_64 rng(doctest::getContextOptions()->rand_seed + 17);
  for (int round = 0; round < 20; ++round) {
    std::vector<stamped_write> writes;
    std::uint64_t base = 2'000'000'000'000ull;
    for (std::uint64_t counter = 1; counter <= 2; ++counter)
      for (std::uint64_t seq = 1; seq <= 40; ++seq) {
        std::string key = fmt::format("k{}", rng() % 12);
        stamp s = st(counter, static_cast<std::uint32_t>(counter), seq);
        switch (rng() % 4) {
          case 0:
            writes.push_back(tomb(key, s, base + 7'200'000'000'000ull));
            break;
          case 1:
            writes.push_back(put(key, s, fmt::format("ttl{}", seq), base + 3'600'000'000'000ull));
            break;
          default:
            writes.push_back(put(key, s, fmt::format("v{}.{}", counter, seq)));
            break;
        }
      }
    std::vector<std::map<std::string, std::string>> bytes;
    std::vector<hash128> roots;
    for (int replica = 0; replica < 3; ++replica) {
      fault_env fe;
      manual_clock clock;
      clock.advance(std::chrono::nanoseconds(rng() % 1'000'000'000));
      auto s = must(shard::open(fe, "/db/s", small_options(clock)));
      auto copy = writes;
      for (std::size_t i = 0; i < writes.size() / 3; ++i) copy.push_back(writes[rng() % writes.size()]);
      std::shuffle(copy.begin(), copy.end(), rng);
      for (std::size_t at = 0; at < copy.size();) {
        std::size_t n = 1 + rng() % 7;
        std::vector<stamped_write> part(copy.begin() + static_cast<std::ptrdiff_t>(at),
                                        copy.begin() + static_cast<std::ptrdiff_t>(std::min(copy.size(), at + n)));
        (void)apply(*s, part);
        at += n;
        if (rng() % 3 == 0) REQUIRE(s->commit_group().is_ok());
        if (rng() % 11 == 0) REQUIRE(s->checkpoint());
      }
      roots.push_back(must(s->checkpoint()));
      bytes.push_back(testing::stored_entries(*s));
    }
    // The expected winner of each key: its highest stamp.
    std::map<std::string, const stamped_write*> best;
    for (const auto& w : writes)
      if (!best.count(w.key) || best[w.key]->stamp < w.stamp) best[w.key] = &w;
    for (const auto& [key, w] : best) {
      std::optional<std::string_view> v;
      if (w->value) v = *w->value;
      CHECK(bytes[0].at(key) == ttl::wrap_stamped(w->stamp, v, w->expires_at_ns));
    }
    CHECK(bytes[0].size() == best.size());
    CHECK(bytes[1] == bytes[0]);
    CHECK(bytes[2] == bytes[0]);
    CHECK(roots[1] == roots[0]);
    CHECK(roots[2] == roots[0]);
  }
}

TEST_CASE("stamped: bad input refuses the whole call and changes nothing") {
  fault_env fe;
  manual_clock clock;
  auto s = must(shard::open(fe, "/db/s", small_options(clock)));
  CHECK(apply(*s, {put("k", st(1, 1, 1), "v")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());
  auto before = s->view()->sequence();
  auto refused = [&](std::vector<stamped_write> w, std::string_view says) {
    auto r = s->apply_stamped(w);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::invalid_argument);
    CHECK(r.error().message().find(says) != std::string::npos);
    CHECK(s->staged() == 0);
  };
  refused({}, "empty");
  refused({put("k", st(2, 1, 1), "ok"), put("k2", st(0, 0, 3), "v")}, "no epoch");
  refused({put("k", st(2, 1, 1), "ok"), tomb("k", st(2, 1, 2), 0), {"k", st(2, 1, 3), std::nullopt, std::nullopt}},
          "purge deadline");
  refused({put("", st(2, 1, 1), "v")}, "empty");
  refused({put(std::string(limits::max_user_key_bytes + 1, 'k'), st(2, 1, 1), "v")}, "key");
  refused({put("k", st(2, 1, 1), std::string(limits::max_user_value_bytes + 1, 'v'))}, "value");
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->view()->sequence() == before);
  CHECK(must(s->get("k")) == "v");
  CHECK(s->failure().is_ok());
  // A state key is taken (the replica's request records live there).
  std::string record = std::string(state_space::prefix) + "i";
  CHECK(apply(*s, {put(record, st(2, 1, 1), "r")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->view()->sequence() > before);
}

TEST_CASE("stamped: what was durable survives a power cut with its stamps; the promise state with it") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must(shard::open(fe, "/db/s", o));
  CHECK_FALSE(s->replication_state().has_value());
  REQUIRE(s->record_replication_state("promised 3.1").is_ok());
  CHECK(apply(*s, {put("a", st(3, 1, 1), "1"), tomb("b", st(3, 1, 2), *clock.now + 1)}) ==
        std::vector<bool>{true, true});
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->checkpoint());
  CHECK(apply(*s, {put("c", st(3, 1, 3), "3")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());  // durable in the log, after the checkpoint
  REQUIRE(s->record_replication_state("promised 4.2").is_ok());
  CHECK(apply(*s, {put("d", st(3, 1, 4), "never durable")}) == std::vector<bool>{true});
  s.reset();  // the last promise and "d" were never synced
  fe.crash(fault_env::unsynced::lose);
  s = must(shard::open(fe, "/db/s", o));
  CHECK(s->replication_state() == "promised 3.1");  // carried across the checkpoint
  CHECK(must(s->get("a")) == "1");
  CHECK(must(s->get("c")) == "3");
  CHECK_FALSE(stored(*s, "d").has_value());
  CHECK(*stored(*s, "c") == ttl::wrap_stamped(st(3, 1, 3), std::string_view("3"), std::nullopt));
  // The replayed stamps still fence.
  CHECK(apply(*s, {put("c", st(3, 1, 2), "older"), put("b", st(3, 1, 1), "older")}) == std::vector<bool>{false, false});
}

TEST_CASE("stamped: the stamp bound stays above every stamp held, through checkpoints and restarts") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  auto s = must(shard::open(fe, "/db/s", o));
  CHECK(s->stamp_bound() == stamp{});     // a new shard holds no stamp
  REQUIRE(s->put("plain", "p").is_ok());  // unstamped values leave it
  CHECK(apply(*s, {put("a", st(3, 1, 5), "1"), put("b", st(3, 1, 2), "2")}) == std::vector<bool>{true, true});
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->stamp_bound() == st(3, 1, 5));
  // Writes at or below the bound are judged by what their key holds: b's
  // stamp 2 is below the bound, its seq 3 above what b holds.
  CHECK(apply(*s, {put("a", st(3, 1, 4), "older"), put("b", st(3, 1, 3), "3")}) == std::vector<bool>{false, true});
  REQUIRE(s->commit_group().is_ok());
  REQUIRE(s->checkpoint());  // the bound goes into the commit marker
  s.reset();
  s = must(shard::open(fe, "/db/s", o));
  CHECK(s->stamp_bound() == st(3, 1, 5));  // the marker's
  // Below it, the tree's stamps still fence (a bound too low would take these).
  CHECK(apply(*s, {put("a", st(3, 1, 4), "x"), put("b", st(3, 1, 2), "x")}) == std::vector<bool>{false, false});
  CHECK(apply(*s, {put("c", st(4, 2, 1), "4")}) == std::vector<bool>{true});
  REQUIRE(s->commit_group().is_ok());  // in the log only, after the marker
  s.reset();
  s = must(shard::open(fe, "/db/s", o));
  // The marker's bound, raised by the replayed write; its stamp fences too.
  CHECK(s->stamp_bound() == st(4, 2, 1));
  CHECK(apply(*s, {put("c", st(4, 1, 9), "x"), put("a", st(3, 1, 4), "x")}) == std::vector<bool>{false, false});
  CHECK(must(s->get("a")) == "1");
  CHECK(must(s->get("c")) == "4");
  // A merge of a foreign tree goes through the same path: it raises the bound.
  auto other = must(shard::open(fe, "/db/other", o));
  CHECK(apply(*other, {put("m", st(7, 3, 1), "merged")}) == std::vector<bool>{true});
  auto foreign = must(other->checkpoint());
  s.reset();
  other.reset();
  // The foreign tree's nodes in our store, as a pull brings them.
  {
    auto from = must(shard::open(fe, "/db/other", o));
    auto into = must(shard::open(fe, "/db/s", o));
    tree::node_store& src = *from->view()->store();
    // Children before their parent, as the store requires.
    std::function<void(const hash128&)> import = [&](const hash128& h) {
      if (into->holds_node(h)) return;
      auto n = must(src.read(h));
      if (!n->is_leaf())
        for (const auto& e : n->entries()) import(must(tree::child_ref::decode(e.value)).hash);
      REQUIRE(into->import_node(h, n->encode()).is_ok());
    };
    import(foreign);
    s = std::move(into);
  }
  auto report = must(s->merge_stamped(foreign));
  CHECK(report.taken >= 1);
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->stamp_bound() == st(7, 3, 1));
  CHECK(apply(*s, {put("m", st(7, 3, 0), "older")}) == std::vector<bool>{false});
}

TEST_CASE("stamped: a log whose commit marker carries no stamp bound is judged key by key, as before") {
  // Format version 1 wrote no bound, and a restored backup writes none: the
  // bound is then not known, every write reads its key, and none is lost.
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  {
    auto s = must(shard::open(fe, "/db/s", o));
    CHECK(apply(*s, {put("k", st(5, 1, 5), "v")}) == std::vector<bool>{true});
    REQUIRE(s->commit_group().is_ok());
    REQUIRE(s->checkpoint());
  }
  // Rewrite the last segment's commit frame without its bound, as version 1 did.
  auto segments = must(fe.list("/db/s/wal"));
  std::sort(segments.begin(), segments.end());
  REQUIRE_FALSE(segments.empty());
  std::string path = "/db/s/wal/" + segments.back();
  auto recovered = must(wal::recover(fe, "/db/s/wal"));
  REQUIRE(recovered.last_commit);
  REQUIRE(recovered.last_commit->stamp_bound == st(5, 1, 5));
  wal::commit_record old = *recovered.last_commit;
  old.stamp_bound.reset();
  rewrite_commit_frames(fe, path, old);
  auto s = must(shard::open(fe, "/db/s", o));
  CHECK_FALSE(s->stamp_bound().has_value());
  CHECK(apply(*s, {put("k", st(5, 1, 4), "older"), put("n", st(6, 1, 1), "new")}) == std::vector<bool>{false, true});
  REQUIRE(s->commit_group().is_ok());
  CHECK_FALSE(s->stamp_bound().has_value());  // not known stays not known
  CHECK(must(s->get("k")) == "v");
}

TEST_CASE("stamped: a promise state is fsynced whatever the policy, and a failed fsync stops the shard") {
  fault_env fe;
  manual_clock clock;
  auto o = small_options(clock);
  o.fsync = wal::fsync_policy::commit_only;  // writes alone would not be fsynced
  auto s = must(shard::open(fe, "/db/s", o));
  REQUIRE(s->put("k", "v").is_ok());
  auto syncs = s->stats().log_fsyncs;
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->stats().log_fsyncs == syncs);
  REQUIRE(s->record_replication_state("promised 5.1").is_ok());
  REQUIRE(s->commit_group().is_ok());
  CHECK(s->stats().log_fsyncs == syncs + 1);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must(shard::open(fe, "/db/s", o));
  CHECK(s->replication_state() == "promised 5.1");

  // A failed fsync of a promise: the shard stops and is never retried as durable.
  REQUIRE(s->record_replication_state("promised 6.1").is_ok());
  fe.fail_sync(1);
  CHECK_FALSE(s->commit_group().is_ok());
  CHECK(s->commit_group().code() == status_code::failed);
  CHECK(s->record_replication_state("promised 7.1").code() == status_code::failed);
  s.reset();
  fe.crash(fault_env::unsynced::lose);
  s = must(shard::open(fe, "/db/s", o));
  CHECK(s->replication_state() == "promised 5.1");
  // Oversized: refused, nothing changes, the shard goes on.
  CHECK(s->record_replication_state(std::string(limits::max_replication_state_bytes + 1, 'p')).code() ==
        status_code::invalid_argument);
  CHECK(s->failure().is_ok());
  CHECK(s->replication_state() == "promised 5.1");
}
