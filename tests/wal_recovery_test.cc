// Recovery against every kind of damage: torn tails at every byte, bit flips in
// every byte, damaged headers, missing segments, files from a newer format.
#include <doctest/doctest.h>

#include "core/coding.h"
#include "tests/support/wal_fixture.h"
#include "wal/frame.h"

using namespace magnetite;
using namespace magnetite::testing;

namespace {

// Writes `n` durable frames (one sync each, so each is its own group), and
// returns the byte offsets where each frame starts in segment 1.
std::vector<std::uint64_t> write_durable(wal::log_writer& w, int n) {
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < n; ++i) {
    offsets.push_back(w.segment_bytes());
    REQUIRE(w.append_put(key_of(i), value_of(i)).is_ok());
    REQUIRE(w.sync().is_ok());
  }
  return offsets;
}

// A fresh log holding n durable frames, one group each.
std::vector<std::uint64_t> durable_log(wal_fixture& fx, int n) {
  auto [rec, w] = fx.reopen();
  return write_durable(*w, n);
}

// Writes bytes right after the last frame of segment `n` (into the space the
// writer reserved, if any) behind the writer's back, as damage or a crash would
// leave them.
void append_raw(wal_fixture& fx, std::uint64_t n, std::string_view bytes) {
  auto before = fx.recover(/*repair=*/false);
  REQUIRE(before.is_ok());
  auto f = fx.env.open(fx.segment_path(n), open_mode::open_or_create);
  REQUIRE(f.is_ok());
  std::uint64_t end = before->last_segment == n ? before->last_segment_end : (*f)->size().value();
  REQUIRE((*f)->write_at(end, bytes).is_ok());
}

std::string segment_header(std::uint64_t n) {
  std::string h;
  wal::encode_segment_header(h, {n, 0x5eed});
  return h;
}

// The salt frames of segment `n` are checked with.
std::uint64_t salt_of(wal_fixture& fx, std::uint64_t n) {
  auto seg = fx.env.contents(fx.segment_path(n));
  REQUIRE(seg);
  auto h = wal::check_segment_header(*seg, n, "test");
  REQUIRE(h.is_ok());
  return h->salt;
}

void check_keys(const wal::recovered_log& r, int n) {
  REQUIRE(r.tail.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    CHECK(r.tail[i].mutations[0].key == key_of(i));
    CHECK(r.tail[i].mutations[0].value == value_of(i));
  }
}

}  // namespace

TEST_CASE("recovery: a torn last frame at every byte offset is cut, and the log goes on") {
  // Measure the last frame's size once.
  std::size_t frame_size;
  {
    wal_fixture fx;
    auto [rec, w] = fx.reopen();
    auto before = w->segment_bytes();
    REQUIRE(w->append_put(key_of(3), value_of(3)).is_ok());
    REQUIRE(w->sync().is_ok());
    frame_size = w->segment_bytes() - before;
  }
  for (std::size_t keep = 0; keep < frame_size; ++keep) {
    CAPTURE(keep);
    wal_fixture fx;
    fx.options.policy = wal::fsync_policy::commit_only;  // so the last write is not durable
    auto [rec, w] = fx.reopen();
    for (int i = 0; i < 3; ++i) REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
    REQUIRE(w->sync_durable().is_ok());
    std::uint64_t good_end = w->segment_bytes();
    REQUIRE(w->append_put(key_of(3), value_of(3)).is_ok());
    REQUIRE(w->sync().is_ok());
    fx.env.crash_tearing_last_write(fx.segment_path(1), keep);
    std::uint64_t size_after_crash = fx.env.durable_contents(fx.segment_path(1))->size();

    auto r = fx.recover();
    REQUIRE(r.is_ok());
    check_keys(*r, 3);
    // The torn bytes count as discarded up to the last non-zero one; the zeros
    // after them (reserved space, or torn bytes that were zero) as reserved.
    CHECK(r->discarded_bytes <= keep);
    CHECK(r->discarded_bytes + r->reserved_bytes == size_after_crash - good_end);
    CHECK(r->discarded_detail.empty() == (r->discarded_bytes == 0));
    CHECK(r->next_sequence == 4);
    CHECK(fx.env.contents(fx.segment_path(1))->size() == good_end);  // truncated before any append
    CHECK(fx.env.durable_contents(fx.segment_path(1))->size() == good_end);

    auto w2 = wal::log_writer::open(fx.env, wal_dir, fx.options, *r);
    REQUIRE(w2.is_ok());
    REQUIRE((*w2)->append_put("after", "crash").is_ok());
    REQUIRE((*w2)->sync_durable().is_ok());
    fx.env.crash();
    auto r2 = fx.recover();
    REQUIRE(r2.is_ok());
    REQUIRE(r2->tail.size() == 4);
    CHECK(r2->tail[3].mutations[0].key == "after");
    CHECK(r2->tail[3].sequence == 4);
    CHECK(r2->discarded_bytes == 0);
  }
}

TEST_CASE(
    "recovery: a flipped bit in the last frame: in its header it is cut as torn, in its payload it is "
    "corruption") {
  // A torn write leaves a frame short or missing whole sectors (zeros); a bit
  // flipped in a whole frame's payload cannot be one, and the frame may hold
  // an acknowledged write, so it is reported, never cut. A damaged header
  // cannot be told from a torn one, and is cut.
  wal_fixture probe;
  std::vector<std::uint64_t> offsets;
  std::uint64_t end;
  {
    auto [rec, w] = probe.reopen();
    offsets = write_durable(*w, 4);
    end = w->segment_bytes();
  }
  int cut = 0, refused = 0;
  for (std::uint64_t byte = offsets[3]; byte < end; ++byte) {
    CAPTURE(byte);
    wal_fixture fx;
    durable_log(fx, 4);
    REQUIRE(fx.env.flip_bit(fx.segment_path(1), byte, static_cast<int>(byte % 8)));
    std::string before = *fx.env.contents(fx.segment_path(1));
    bool ends_in_zero = before[end - 1] == '\0';  // the flip may make the last byte 0: could be torn
    auto r = fx.recover();
    if (byte < offsets[3] + wal::frame_header_size || ends_in_zero) {
      REQUIRE(r.is_ok());
      check_keys(*r, 3);  // the damaged frame is never returned as data
      CHECK(r->discarded_bytes == end - offsets[3]);
      ++cut;
    } else {
      REQUIRE_FALSE(r.is_ok());
      CHECK(r.error().code() == status_code::corruption);
      CHECK(r.error().message().find(fmt::format("offset {}", offsets[3])) != std::string::npos);
      CHECK(r.error().message().find("media damage") != std::string::npos);
      CHECK(*fx.env.contents(fx.segment_path(1)) == before);
      ++refused;
    }
  }
  CHECK(cut >= static_cast<int>(wal::frame_header_size));
  CHECK(refused > 0);
}

TEST_CASE(
    "recovery: a frame that lost a whole sector or its end to a crash is torn; one whole sector is not "
    "damage enough to refuse") {
  // Frames of 1 500 bytes span sectors. The last one loses, as a crash may
  // leave it: its last 100 bytes; one 512-byte sector in its middle; the
  // sector holding its end. Each reads as zeros (space reserved or past the old
  // end of the file) and is cut as a torn tail.
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    wal_fixture fx;
    std::uint64_t last, end;
    {
      auto [rec, w] = fx.reopen();
      for (int i = 0; i < 3; ++i) {
        last = w->segment_bytes();
        REQUIRE(w->append_put(key_of(i), std::string(1500, static_cast<char>('a' + i))).is_ok());
        REQUIRE(w->sync().is_ok());
      }
      end = w->segment_bytes();
    }
    std::uint64_t from = 0, to = 0;
    if (variant == 0) from = end - 100, to = end;
    if (variant == 1) from = (last / 512 + 1) * 512, to = from + 512;
    if (variant == 2) from = (end - 1) / 512 * 512, to = end;
    REQUIRE(from > last);
    REQUIRE(to <= end);
    auto f = fx.env.open(fx.segment_path(1), open_mode::open_or_create);
    REQUIRE(f.is_ok());
    REQUIRE((*f)->write_at(from, std::string(to - from, '\0')).is_ok());
    auto r = fx.recover();
    REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
    REQUIRE(r->tail.size() == 2);
    CHECK(r->last_segment_end == last);
  }
}

TEST_CASE("recovery: a flipped bit in any byte of a middle frame is corruption and changes nothing") {
  wal_fixture probe;
  std::vector<std::uint64_t> offsets;
  {
    auto [rec, w] = probe.reopen();
    offsets = write_durable(*w, 4);
  }
  for (std::uint64_t byte = offsets[1]; byte < offsets[2]; ++byte) {
    CAPTURE(byte);
    wal_fixture fx;
    durable_log(fx, 4);
    REQUIRE(fx.env.flip_bit(fx.segment_path(1), byte, static_cast<int>(byte % 8)));
    std::string before = *fx.env.contents(fx.segment_path(1));
    auto r = fx.recover();
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::corruption);
    CHECK(r.error().message().find(wal::segment_file_name(1)) != std::string::npos);
    CHECK(r.error().message().find(fmt::format("offset {}", offsets[1])) != std::string::npos);
    CHECK(*fx.env.contents(fx.segment_path(1)) == before);
  }
}

TEST_CASE("recovery: damage inside the last unsynced group is a torn tail, not corruption") {
  // Under commit_only, later groups are written without an fsync between them:
  // a crash may persist them out of order, so a frame there that lost a
  // sector is torn even when an intact frame follows it (one without
  // follows_sync).
  wal_fixture fx;
  fx.options.policy = wal::fsync_policy::commit_only;
  std::uint64_t second;
  {
    auto [rec, w] = fx.reopen();
    REQUIRE(w->append_put("a", "1").is_ok());
    REQUIRE(w->sync_durable().is_ok());
    second = w->segment_bytes();
    for (int i = 0; i < 3; ++i) {
      REQUIRE(w->append_put(key_of(i), std::string(1500, 'x')).is_ok());
      REQUIRE(w->sync().is_ok());
    }
  }
  // The second sector of the second group's frame is lost.
  std::uint64_t hole = (second / 512 + 1) * 512;
  auto f = fx.env.open(fx.segment_path(1), open_mode::open_or_create);
  REQUIRE(f.is_ok());
  REQUIRE((*f)->write_at(hole, std::string(512, '\0')).is_ok());
  auto r = fx.recover();
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  REQUIRE(r->tail.size() == 1);
  CHECK(r->last_segment_end == second);
  CHECK(r->discarded_bytes > 0);
}

TEST_CASE("recovery: garbage or zeros after the last frame are cut") {
  for (std::string junk : {std::string(4096, '\0'), std::string("not a frame at all"), std::string(3, '\xff')}) {
    wal_fixture fx;
    durable_log(fx, 2);
    append_raw(fx, 1, junk);
    auto r = fx.recover();
    REQUIRE(r.is_ok());
    check_keys(*r, 2);
    bool zeros = junk.find_first_not_of('\0') == std::string::npos;
    // Zeros read as space reserved and never written, not as damage.
    CHECK(r->discarded_bytes == (zeros ? 0 : junk.size()));
    CHECK(r->reserved_bytes >= (zeros ? junk.size() : 0));
    CHECK(fx.env.contents(fx.segment_path(1))->size() == r->last_segment_end);  // repaired: cut
  }
}

TEST_CASE("recovery: damage in a sealed segment is corruption, even at its end") {
  wal_fixture fx;
  {
    auto [rec, w] = fx.reopen();
    write_durable(*w, 2);
    REQUIRE(w->commit({hash128::of("r1"), 10}).is_ok());  // replay starts at segment 2
    REQUIRE(w->append_put("x", "y").is_ok());
    REQUIRE(w->sync().is_ok());
  }
  // A successor exists, so segment 2 was sealed (durable) before it: a damaged
  // last frame there cannot be a torn write.
  append_raw(fx, 3, segment_header(3));
  auto seg2 = *fx.env.contents(fx.segment_path(2));
  REQUIRE(fx.env.flip_bit(fx.segment_path(2), seg2.size() - 1, 3));
  auto r = fx.recover();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::corruption);
  CHECK(r.error().message().find("sealed") != std::string::npos);
  CHECK(r.error().message().find(wal::segment_file_name(2)) != std::string::npos);
  CHECK(fx.env.exists(fx.segment_path(3)).value());
}

TEST_CASE("recovery: a missing middle segment is corruption") {
  wal_fixture fx;
  for (std::uint64_t n : {1, 2, 4}) append_raw(fx, n, segment_header(n));
  auto r = fx.recover();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::corruption);
  CHECK(r.error().message().find("segment 3 is missing") != std::string::npos);
}

TEST_CASE("recovery: headers - any damage is corruption, newer is refused, leftover temp files go") {
  SUBCASE("torn header of the last segment (a rename never leaves one)") {
    wal_fixture fx;
    durable_log(fx, 2);
    append_raw(fx, 2, segment_header(2).substr(0, 17));
    auto r = fx.recover();
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::corruption);
    CHECK(fx.env.contents(fx.segment_path(2))->size() == 17);  // untouched
  }
  SUBCASE("a half-written temporary segment is ignored and removed") {
    wal_fixture fx;
    durable_log(fx, 2);
    auto f = fx.env.open(path_join(wal_dir, wal::segment_temp_file_name(2)), open_mode::create_new);
    REQUIRE((*f)->append(segment_header(2).substr(0, 17)).is_ok());
    auto r = fx.recover();
    REQUIRE(r.is_ok());
    check_keys(*r, 2);
    CHECK(r->discarded_bytes == 0);
    CHECK(fx.env.list(wal_dir).value() == std::vector<std::string>{wal::segment_file_name(1)});
    auto w = wal::log_writer::open(fx.env, wal_dir, fx.options, *r);
    REQUIRE(w.is_ok());
    REQUIRE((*w)->commit({hash128::of("x"), 1}).is_ok());  // segment 2 can be made
    CHECK((*w)->segment() == 2);
  }
  SUBCASE("damaged header of the last segment with frames after it") {
    wal_fixture fx;
    durable_log(fx, 3);
    REQUIRE(fx.env.flip_bit(fx.segment_path(1), 20, 0));
    auto r = fx.recover();
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::corruption);
  }
  SUBCASE("a newer format version") {
    wal_fixture fx;
    durable_log(fx, 1);
    // Rewrite the header with the next version and a valid checksum.
    std::string seg = *fx.env.contents(fx.segment_path(1));
    auto* h = reinterpret_cast<std::uint8_t*>(seg.data());
    encode_fixed32_le(h + 8, wal::format_version + 1);
    encode_fixed32_le(h + 36, magnetite::checksum32(std::string_view(seg).substr(0, 36)));
    auto f = fx.env.open(fx.segment_path(1), open_mode::create_truncate);
    REQUIRE((*f)->append(seg).is_ok());
    auto r = fx.recover();
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::not_supported);
    CHECK(r.error().message().find("newer") != std::string::npos);
  }
}

TEST_CASE("recovery: a frame with a valid checksum but an unknown type is refused, not skipped") {
  wal_fixture fx;
  durable_log(fx, 1);
  std::string frame;
  std::size_t at = wal::begin_frame(frame);
  frame.append("payload");
  wal::finish_frame(frame, at, salt_of(fx, 1), 2, static_cast<wal::record_type>(42), wal::flag_follows_sync);
  append_raw(fx, 1, frame);
  auto r = fx.recover();
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::not_supported);
}

TEST_CASE("recovery: a stale frame (wrong sequence) is not replayed") {
  wal_fixture fx;
  durable_log(fx, 2);
  std::string frame;
  std::size_t at = wal::begin_frame(frame);
  wal::encode_put(frame, "stale", "x");
  wal::finish_frame(frame, at, salt_of(fx, 1), 1, wal::record_type::put, 0);  // sequence 1 again
  append_raw(fx, 1, frame);
  auto r = fx.recover();
  REQUIRE(r.is_ok());
  check_keys(*r, 2);
  CHECK(r->discarded_bytes == frame.size());
}

TEST_CASE("recovery: superseded segments left by a crash are skipped and removed") {
  wal_fixture fx;
  durable_log(fx, 2);
  std::string seg1 = *fx.env.contents(fx.segment_path(1));
  {
    auto [rec, w] = fx.reopen();
    REQUIRE(w->commit({hash128::of("r"), 5}).is_ok());
  }
  // As if the removal of segment 1 had not reached the disk, and it was damaged.
  seg1[seg1.size() / 2] ^= 1;
  append_raw(fx, 1, seg1);
  auto r = fx.recover();
  REQUIRE(r.is_ok());
  CHECK(r->superseded_segments == std::vector<std::uint64_t>{1});
  CHECK(r->tail.empty());
  CHECK(r->last_commit->node_store_length == 5);
  CHECK_FALSE(fx.env.exists(fx.segment_path(1)).value());
}
