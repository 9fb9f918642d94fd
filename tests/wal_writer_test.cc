#include <doctest/doctest.h>

#include "core/limits.h"
#include "tests/support/wal_fixture.h"
#include "wal/frame.h"

using namespace magnetite;
using namespace magnetite::testing;
using namespace std::chrono_literals;

namespace {
// A log holding one durable frame, its writer closed; where the frame ends.
std::uint64_t one_durable_frame(wal_fixture& fx) {
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  return w->segment_bytes();
}
}  // namespace

TEST_CASE("writer: N appends and one sync cost one write and one fsync") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  CHECK_FALSE(rec.last_segment);
  auto before = fx.env.stats();
  for (int i = 0; i < 64; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
  CHECK(w->durable_sequence() == 0);
  REQUIRE(w->sync().is_ok());
  auto after = fx.env.stats();
  CHECK(after.file_syncs - before.file_syncs == 1);
  CHECK(after.writes - before.writes == 1);
  CHECK(w->durable_sequence() == 64);
  CHECK(w->stats().fsyncs >= 1);
  // A sync with nothing new costs nothing.
  REQUIRE(w->sync().is_ok());
  CHECK(fx.env.stats().file_syncs == after.file_syncs);

  auto [rec2, w2] = fx.reopen();
  REQUIRE(rec2.tail.size() == 64);
  for (int i = 0; i < 64; ++i) {
    CHECK(rec2.tail[i].sequence == static_cast<std::uint64_t>(i + 1));
    CHECK(rec2.tail[i].mutations[0].key == key_of(i));
    CHECK(rec2.tail[i].mutations[0].value == value_of(i));
  }
  CHECK(rec2.next_sequence == 65);
}

TEST_CASE("writer: every record type survives a crash once synced") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  std::vector<wal::mutation_view> batch = {{wal::mutation_kind::put, "b1", "x"}, {wal::mutation_kind::del, "b2", ""}};
  REQUIRE(w->append_put("p", "v").is_ok());
  REQUIRE(w->append_delete("d").is_ok());
  REQUIRE(w->append_batch(batch).is_ok());
  REQUIRE(w->append_replication_state("promise-1").is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.crash();
  auto [r, w2] = fx.reopen();
  REQUIRE(r.tail.size() == 3);
  CHECK(r.tail[0].type == wal::record_type::put);
  CHECK(r.tail[1].type == wal::record_type::del);
  CHECK(r.tail[1].mutations[0].key == "d");
  CHECK(r.tail[2].type == wal::record_type::batch);
  CHECK(r.tail[2].mutations.size() == 2);
  CHECK(r.tail[2].mutations[1].kind == wal::mutation_kind::del);
  CHECK(r.replication_state == "promise-1");
  CHECK(r.next_sequence == 5);
  CHECK(r.discarded_bytes == 0);
}

TEST_CASE("writer: unsynced appends are not durable and a crash drops them cleanly") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  REQUIRE(w->append_put("b", "2").is_ok());  // never synced
  fx.env.crash();
  auto [r, w2] = fx.reopen();
  REQUIRE(r.tail.size() == 1);
  CHECK(r.tail[0].mutations[0].key == "a");
  CHECK(r.next_sequence == 2);
}

TEST_CASE("writer: invalid input is refused and changes nothing") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  std::size_t pending = w->pending_bytes();
  std::uint64_t last = w->last_sequence();
  CHECK(w->append_put("", "v").error().code() == status_code::invalid_argument);
  CHECK(w->append_put(std::string(limits::max_key_bytes + 1, 'k'), "v").error().code() ==
        status_code::invalid_argument);
  CHECK(w->append_put("k", std::string(limits::max_value_bytes + 1, 'v')).error().code() ==
        status_code::invalid_argument);
  CHECK(w->append_delete("").error().code() == status_code::invalid_argument);
  CHECK(w->append_batch({}).error().code() == status_code::invalid_argument);
  CHECK(w->append_replication_state(std::string(limits::max_replication_state_bytes + 1, 'r')).error().code() ==
        status_code::invalid_argument);
  CHECK(w->pending_bytes() == pending);
  CHECK(w->last_sequence() == last);
  CHECK(w->failure().is_ok());  // a caller mistake does not stop the writer
  REQUIRE(w->sync().is_ok());
  auto [r, w2] = fx.reopen();
  CHECK(r.tail.size() == 1);
}

TEST_CASE("writer: commit starts a new segment with the marker and removes the old ones") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  for (int i = 0; i < 10; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
  REQUIRE(w->sync().is_ok());
  REQUIRE(w->append_replication_state("ballot-3").is_ok());
  wal::commit_record marker{hash128::of("root-1"), 4096};
  REQUIRE(w->commit(marker).is_ok());
  CHECK(w->segment() == 2);
  CHECK(fx.env.list(wal_dir).value() == std::vector<std::string>{wal::segment_file_name(2)});
  for (int i = 10; i < 15; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.crash();

  auto [r, w2] = fx.reopen();
  REQUIRE(r.last_commit);
  marker.covered_sequence = 11;  // the puts and the state: every frame before the marker
  CHECK(*r.last_commit == marker);
  CHECK(r.replication_state == "ballot-3");  // carried into the new segment
  REQUIRE(r.tail.size() == 5);
  CHECK(r.tail.front().mutations[0].key == key_of(10));
  CHECK(r.next_sequence == 10 + 1 + 1 + 1 + 5 + 1);  // puts, state, marker, carried state, puts; then the next

  // A second commit with no writes in between works too, and supersedes the first.
  wal::commit_record marker2{hash128::of("root-2"), 8192};
  REQUIRE(w2->commit(marker2).is_ok());
  fx.env.crash();
  auto [r3, w3] = fx.reopen();
  marker2.covered_sequence = r.next_sequence - 1;
  CHECK(*r3.last_commit == marker2);
  CHECK(r3.tail.empty());
  CHECK(r3.replication_state == "ballot-3");
}

// A background checkpoint's log (engine/shard.h): the checkpoint covers the
// frames before its begin; the writes made while its tree is written go into
// the new segment ahead of its marker, and recovery replays exactly those.
TEST_CASE("writer: a checkpoint in two steps covers what came before its begin, not what came meanwhile") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->commit({hash128::of("root-0"), 1}).is_ok());  // an earlier checkpoint, in one step
  for (int i = 0; i < 5; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
  REQUIRE(w->append_replication_state("ballot-7").is_ok());
  REQUIRE(w->sync().is_ok());
  auto covered = w->begin_checkpoint();
  REQUIRE(covered.is_ok());
  CHECK(*covered == w->last_sequence() - 1);  // the carried state follows the covered frames
  CHECK(w->checkpoint_begun());
  CHECK(w->begin_checkpoint().error().code() == status_code::invalid_argument);  // one at a time
  for (int i = 5; i < 8; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
  REQUIRE(w->sync().is_ok());

  SUBCASE("a crash before the marker: the earlier checkpoint stands, everything after it replays") {
    fx.env.crash();
    auto [r, w2] = fx.reopen();
    REQUIRE(r.last_commit);
    CHECK(r.last_commit->root == hash128::of("root-0"));
    REQUIRE(r.tail.size() == 8);
    CHECK(r.tail.front().mutations[0].key == key_of(0));
    CHECK(r.tail.back().mutations[0].key == key_of(7));
    CHECK(r.replication_state == "ballot-7");
  }
  SUBCASE("the marker: only what was written meanwhile replays, and the segments before are gone") {
    wal::commit_record marker{hash128::of("root-1"), 4096};
    REQUIRE(w->commit(marker).is_ok());
    CHECK_FALSE(w->checkpoint_begun());
    CHECK(fx.env.list(wal_dir).value() == std::vector<std::string>{wal::segment_file_name(w->segment())});
    REQUIRE(w->append_put(key_of(8), value_of(8)).is_ok());
    REQUIRE(w->sync().is_ok());
    fx.env.crash();
    auto [r, w2] = fx.reopen();
    REQUIRE(r.last_commit);
    marker.covered_sequence = *covered;
    CHECK(*r.last_commit == marker);
    REQUIRE(r.tail.size() == 4);  // the three written meanwhile (before the marker), and the one after
    for (int i = 0; i < 4; ++i) CHECK(r.tail[static_cast<std::size_t>(i)].mutations[0].key == key_of(5 + i));
    CHECK(r.replication_state == "ballot-7");  // carried across the removal
    // A later checkpoint in one step supersedes it.
    REQUIRE(w2->commit({hash128::of("root-2"), 8192}).is_ok());
    fx.env.crash();
    auto [r3, w3] = fx.reopen();
    CHECK(r3.last_commit->root == hash128::of("root-2"));
    CHECK(r3.tail.empty());
  }
}

TEST_CASE("writer: commit_only policy writes on sync and fsyncs only at commit") {
  wal_fixture fx;
  fx.options.policy = wal::fsync_policy::commit_only;
  auto [rec, w] = fx.reopen();
  auto syncs = fx.env.stats().file_syncs;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(w->append_put(key_of(i), "v").is_ok());
    REQUIRE(w->sync().is_ok());
  }
  CHECK(fx.env.stats().file_syncs == syncs);
  CHECK(w->written_sequence() == 5);
  CHECK(w->durable_sequence() == 0);
  CHECK(fx.env.contents(fx.segment_path(1))->size() > wal::segment_header_size);
  REQUIRE(w->commit({hash128::of("r"), 1}).is_ok());
  CHECK(w->durable_sequence() == w->last_sequence());
  CHECK(fx.env.stats().file_syncs > syncs);
}

TEST_CASE("writer: interval policy fsyncs when the interval has passed on the injected clock") {
  wal_fixture fx;
  auto now = std::chrono::steady_clock::time_point{};
  fx.options.policy = wal::fsync_policy::interval;
  fx.options.interval = 100ms;
  fx.options.clock = [&now] { return now; };
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  CHECK(w->durable_sequence() == 0);
  now += 99ms;
  REQUIRE(w->append_put("b", "2").is_ok());
  REQUIRE(w->sync().is_ok());
  CHECK(w->durable_sequence() == 0);
  now += 1ms;
  REQUIRE(w->sync().is_ok());  // nothing new to write, but the interval is due
  CHECK(w->durable_sequence() == 2);
  REQUIRE(w->append_put("c", "3").is_ok());
  REQUIRE(w->sync_durable().is_ok());  // the owner's timer forces it
  CHECK(w->durable_sequence() == 3);
}

TEST_CASE("writer: a failed fsync is ambiguous, stops the writer, and is never counted durable") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.fail_sync(1);
  REQUIRE(w->append_put("b", "2").is_ok());
  status s = w->sync();
  CHECK(s.code() == status_code::io_error);
  CHECK(s.category() == status_category::ambiguous);
  CHECK(w->durable_sequence() == 1);
  CHECK_FALSE(w->failure().is_ok());
  // Fail-stop: nothing more is accepted, not even a retry of the sync.
  auto again = w->append_put("c", "3");
  CHECK(again.error().code() == status_code::failed);
  CHECK(again.error().category() == status_category::permanent);
  CHECK(w->sync().code() == status_code::failed);
  CHECK(w->commit({}).code() == status_code::failed);

  fx.env.crash();
  auto [r, w2] = fx.reopen();
  REQUIRE(r.tail.size() == 1);  // the failed group never became durable
  CHECK(r.tail[0].mutations[0].key == "a");
  REQUIRE(w2->append_put("c", "3").is_ok());
  REQUIRE(w2->sync().is_ok());
  fx.env.crash();
  CHECK(fx.recover()->tail.size() == 2);
}

TEST_CASE("writer: a full disk reaches the caller, stops the writer, and recovery cuts the partial frame") {
  // With reserved space the disk fills when the writer tries to reserve more;
  // it then writes past its reservation, and that write meets the full disk.
  for (std::uint64_t preallocate : {std::uint64_t{0}, std::uint64_t{4096}}) {
    CAPTURE(preallocate);
    wal_fixture fx;
    fx.options.preallocate = preallocate;
    auto [rec, w] = fx.reopen();
    REQUIRE(w->append_put("a", "1").is_ok());
    REQUIRE(w->sync().is_ok());
    std::uint64_t used = fx.env.contents(fx.segment_path(1))->size();
    std::uint64_t frames_end = w->segment_bytes();
    fx.env.set_space_limit(used + 30);                            // room for part of the next frame only
    REQUIRE(w->append_put("b", std::string(5000, 'x')).is_ok());  // beyond any reservation
    status s = w->sync();
    CHECK(s.code() == status_code::no_space);
    CHECK(s.category() == status_category::ambiguous);
    CHECK(w->append_put("c", "3").error().code() == status_code::failed);
    CHECK(w->durable_sequence() == 1);

    fx.env.clear_faults();
    fx.env.crash(fault_env::unsynced::keep);  // the partial frame reached the disk
    auto r = fx.recover();
    REQUIRE(r.is_ok());
    CHECK(r->tail.size() == 1);
    CHECK(r->discarded_bytes == used + 30 - frames_end);  // the reservation, then 30 bytes more
    auto w2 = wal::log_writer::open(fx.env, wal_dir, fx.options, *r);
    REQUIRE(w2.is_ok());
    REQUIRE((*w2)->append_put("b", "2").is_ok());
    REQUIRE((*w2)->sync().is_ok());
    fx.env.crash();
    auto r2 = fx.recover();
    REQUIRE(r2->tail.size() == 2);
    CHECK(r2->tail[1].mutations[0].value == "2");
    CHECK(r2->discarded_bytes == 0);
  }
}

TEST_CASE("writer: a failed segment creation during commit stops the writer and loses nothing") {
  for (int which : {0, 1}) {
    wal_fixture fx;
    auto [rec, w] = fx.reopen();
    REQUIRE(w->append_put("a", "1").is_ok());
    REQUIRE(w->sync().is_ok());
    if (which == 0)
      fx.env.fail_sync(1);  // the new segment's (the old one has nothing unsynced)
    else
      fx.env.fail_dir_sync(1);
    status s = w->commit({hash128::of("r"), 1});
    CHECK_FALSE(s.is_ok());
    CHECK(s.category() == status_category::ambiguous);
    CHECK(w->append_put("b", "2").error().code() == status_code::failed);
    fx.env.clear_faults();
    fx.env.crash();
    auto [r, w2] = fx.reopen();
    // Either the marker made it or it did not; the put is there either way.
    if (r.last_commit)
      CHECK(r.tail.empty());
    else
      CHECK(r.tail.size() == 1);
  }
}

TEST_CASE("writer: open refuses a recovery that did not repair") {
  wal_fixture fx;
  std::uint64_t end = one_durable_frame(fx);
  auto f = fx.env.open(fx.segment_path(1), open_mode::open_existing);
  REQUIRE((*f)->write_at(end, "garbage").is_ok());
  auto r = fx.recover(/*repair=*/false);
  REQUIRE(r.is_ok());
  CHECK(r->discarded_bytes == 7);
  CHECK_FALSE(r->repaired);
  CHECK(fx.env.contents(fx.segment_path(1))->substr(end, 7) == "garbage");  // untouched
  CHECK(wal::log_writer::open(fx.env, wal_dir, fx.options, *r).error().code() == status_code::invalid_argument);
  // Even a clean log must be repaired (made durable) before a writer opens it.
  auto clean = fx.recover(/*repair=*/true);
  REQUIRE(clean.is_ok());
  auto again = fx.recover(/*repair=*/false);
  REQUIRE(again.is_ok());
  CHECK(again->discarded_bytes == 0);
  CHECK_FALSE(wal::log_writer::open(fx.env, wal_dir, fx.options, *again).is_ok());
}

TEST_CASE("writer: space is reserved ahead of the frames; sealing cuts it; recovery reads it as the unwritten end") {
  wal_fixture fx;
  fx.options.preallocate = 4096;
  auto [rec, w] = fx.reopen();
  std::string seg1 = fx.segment_path(1);
  // The new segment's reservation is durable with its header.
  CHECK(fx.env.durable_contents(seg1)->size() == 4096);
  std::uint64_t writes_before = fx.env.stats().writes;
  int n = 0;
  while (w->segment_bytes() < 4096 - 200) {
    REQUIRE(w->append_put(key_of(n), value_of(n)).is_ok());
    REQUIRE(w->sync().is_ok());
    ++n;
    CHECK(fx.env.contents(seg1)->size() == 4096);  // groups land inside the reservation
  }
  CHECK(fx.env.stats().writes - writes_before == static_cast<std::uint64_t>(n));  // one write a group
  REQUIRE(w->append_put("big", std::string(5000, 'b')).is_ok());                  // crosses it: reserve more
  REQUIRE(w->sync().is_ok());
  std::uint64_t frames_end = w->segment_bytes();
  CHECK(fx.env.durable_contents(seg1)->size() == (frames_end / 4096 + 1) * 4096);

  // A crash: the zero tail is the unwritten end, not a torn write.
  fx.env.crash();
  auto r = fx.recover(/*repair=*/false);
  REQUIRE(r.is_ok());
  CHECK(r->tail.size() == static_cast<std::size_t>(n) + 1);
  CHECK(r->discarded_bytes == 0);
  CHECK(r->discarded_detail.empty());
  CHECK(r->last_segment_end == frames_end);
  CHECK(r->reserved_bytes == fx.env.durable_contents(seg1)->size() - frames_end);

  // The writer goes on after a repair (which cuts the tail), and reserves again.
  auto [r2, w2] = fx.reopen();
  CHECK(r2.reserved_bytes > 0);
  REQUIRE(w2->append_put("after", "crash").is_ok());
  REQUIRE(w2->sync().is_ok());
  CHECK(fx.env.contents(seg1)->size() > w2->segment_bytes());
  // A checkpoint seals segment 1 at its last frame: only the last segment has
  // a zero tail (damage at the end of a sealed one stays detectable).
  REQUIRE(w2->commit({hash128::of("root"), 1}).is_ok());
  // (segment 1 is superseded and removed; the new one has its reservation)
  CHECK_FALSE(fx.env.exists(seg1).value());
  CHECK(fx.env.durable_contents(fx.segment_path(2))->size() == 4096);
  REQUIRE(w2->append_put("x", "y").is_ok());
  REQUIRE(w2->sync().is_ok());
  fx.env.crash();
  auto r3 = fx.recover();
  REQUIRE(r3.is_ok());
  REQUIRE(r3->tail.size() == 1);
  CHECK(r3->tail[0].mutations[0].key == "x");
  CHECK(r3->discarded_bytes == 0);
}

TEST_CASE("writer: a sealed segment is cut at its last frame before its successor exists") {
  // Observed through a commit whose new segment cannot be made: the old one is
  // sealed (and remains the last).
  wal_fixture fx;
  fx.options.preallocate = 4096;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  std::uint64_t end = w->segment_bytes();
  CHECK(fx.env.contents(fx.segment_path(1))->size() == 4096);
  fx.env.fail_dir_sync(1);  // the new segment's rename is never made durable
  CHECK_FALSE(w->commit({hash128::of("r"), 1}).is_ok());
  CHECK(fx.env.durable_contents(fx.segment_path(1))->size() == end);
}

TEST_CASE("recovery: zeros after the last frame of a sealed segment are corruption") {
  wal_fixture fx;
  std::uint64_t end = one_durable_frame(fx);
  // Segment 1 gets a successor that does not start with a marker, so segment 1
  // is replayed and sealed; the writer never leaves zeros after a sealed one.
  auto f = fx.env.open(fx.segment_path(1), open_mode::open_existing);
  REQUIRE((*f)->truncate(end + 100).is_ok());
  std::string h;
  wal::encode_segment_header(h, {2, 7});
  auto g = fx.env.open(fx.segment_path(2), open_mode::create_new);
  REQUIRE((*g)->append(h).is_ok());
  auto r = fx.recover();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::corruption);
  CHECK(r.error().message().find("sealed") != std::string::npos);
}

TEST_CASE("writer: after a failed reservation a segment is extended frame by frame; the next segment reserves again") {
  wal_fixture fx;
  fx.options.preallocate = 4096;
  auto [rec, w] = fx.reopen();
  std::string seg1 = fx.segment_path(1);
  while (w->segment_bytes() < 4096 - 100) {
    REQUIRE(w->append_put("k", std::string(50, 'v')).is_ok());
    REQUIRE(w->sync().is_ok());
  }
  // The disk has room for frames but not for another 4 KiB reservation.
  fx.env.set_space_limit(fx.env.contents(seg1)->size() + 1000);
  REQUIRE(w->append_put("k", std::string(200, 'v')).is_ok());  // crosses the reservation
  REQUIRE(w->sync().is_ok());
  CHECK(fx.env.contents(seg1)->size() == w->segment_bytes());
  // Space again: this segment does not try again (each group would pay for a
  // failing fallocate on a full or unsupporting file system)...
  fx.env.clear_faults();
  REQUIRE(w->append_put("k", "v").is_ok());
  REQUIRE(w->sync().is_ok());
  CHECK(fx.env.contents(seg1)->size() == w->segment_bytes());
  // ...and the next segment does.
  REQUIRE(w->commit({hash128::of("r"), 1}).is_ok());
  CHECK(fx.env.contents(fx.segment_path(2))->size() == 4096);
  fx.env.crash();
  auto r = fx.recover();
  REQUIRE(r.is_ok());
  CHECK(r->discarded_bytes == 0);
}
