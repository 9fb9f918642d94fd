#include <doctest/doctest.h>

#include <random>

#include "core/limits.h"
#include "wal/record.h"

using namespace magnetite;
using namespace magnetite::wal;

namespace {
record decode_ok(record_type t, std::string_view payload) {
  auto r = decode_record(t, 9, payload);
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  CHECK(r->sequence == 9);
  CHECK(r->type == t);
  return std::move(*r);
}
}  // namespace

TEST_CASE("record: put and del round trip, with empty and maximal sizes") {
  std::string max_key(limits::max_key_bytes, 'k');
  std::string max_value(limits::max_value_bytes, 'v');
  for (auto [k, v] : {std::pair<std::string_view, std::string_view>{"k", ""},
                      {"k", "v"},
                      {max_key, max_value},
                      {std::string_view("\0\xff", 2), std::string_view("\0", 1)}}) {
    std::string p;
    encode_put(p, k, v);
    record r = decode_ok(record_type::put, p);
    REQUIRE(r.mutations.size() == 1);
    CHECK(r.mutations[0].kind == mutation_kind::put);
    CHECK(r.mutations[0].key == k);
    CHECK(r.mutations[0].value == v);

    std::string d;
    encode_del(d, k);
    record rd = decode_ok(record_type::del, d);
    REQUIRE(rd.mutations.size() == 1);
    CHECK(rd.mutations[0].kind == mutation_kind::del);
    CHECK(rd.mutations[0].key == k);
  }
}

TEST_CASE("record: batch, commit and replication state round trip") {
  std::string max_key(limits::max_key_bytes, 'x');
  std::vector<mutation_view> batch = {{mutation_kind::put, "a", "1"},
                                      {mutation_kind::del, "b", ""},
                                      {mutation_kind::put, "c", ""},
                                      {mutation_kind::put, max_key, "big"}};
  REQUIRE(check_batch(batch).is_ok());
  std::string p;
  encode_batch(p, batch);
  record r = decode_ok(record_type::batch, p);
  REQUIRE(r.mutations.size() == batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(r.mutations[i].kind == batch[i].kind);
    CHECK(r.mutations[i].key == batch[i].key);
    CHECK(r.mutations[i].value == batch[i].value);
  }

  commit_record c{hash128::of("root"), 123456789};
  std::string cp;
  encode_commit(cp, c);
  CHECK(cp.size() == 24);  // format version 1's commit, as a shard without a stamp bound writes it
  CHECK(decode_ok(record_type::commit, cp).commit == c);
  commit_record bounded{hash128::of("root"), 7, stamp{{9, 2}, 0x0102030405060708ULL}};
  std::string bp;
  encode_commit(bp, bounded);
  CHECK(bp.size() == 44);
  CHECK(decode_ok(record_type::commit, bp).commit == bounded);
  // Any other size is corruption: half a bound, a bound and more.
  CHECK(decode_record(record_type::commit, 1, bp.substr(0, 34)).error().code() == status_code::corruption);
  CHECK(decode_record(record_type::commit, 1, bp + "x").error().code() == status_code::corruption);

  CHECK(decode_ok(record_type::replication_state, "").payload.empty());
  CHECK(decode_ok(record_type::replication_state, "ballot=7").payload == "ballot=7");
}

TEST_CASE("record: a marker that names sorted runs round trips as commit_runs, and only whole") {
  for (bool bounded : {false, true}) {
    commit_record c{hash128::of("root"), 99};
    c.covered_sequence = 5;
    if (bounded) c.stamp_bound = stamp{{3, 1}, 8};
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, limits::max_sorted_runs}) {
      c.runs.clear();
      for (std::size_t i = 0; i < n; ++i) c.runs.push_back(hash128::of(fmt::format("run-{}", i)));
      REQUIRE(commit_type(c) == record_type::commit_runs);
      std::string p;
      encode_commit(p, c);
      CHECK(p.size() == 1 + n * hash128::byte_size + 32 + (bounded ? stamp::encoded_bytes : 0));
      CHECK(decode_ok(record_type::commit_runs, p).commit == c);
      // Each cut and a trailing byte are corruption, and so is the marker
      // read as a plain commit; but a bounded marker cut before its bound is
      // the same marker without one (as with a plain commit: the frame's
      // checksum is what tells a cut payload).
      for (std::size_t cut = 0; cut < p.size(); ++cut) {
        auto r = decode_record(record_type::commit_runs, 9, p.substr(0, cut));
        if (bounded && cut == p.size() - stamp::encoded_bytes) {
          auto unbounded = c;
          unbounded.stamp_bound.reset();
          CHECK(r->commit == unbounded);
        } else {
          CHECK(r.error().code() == status_code::corruption);
        }
      }
      CHECK(decode_record(record_type::commit_runs, 9, p + "x").error().code() == status_code::corruption);
      CHECK(decode_record(record_type::commit, 9, p).error().code() == status_code::corruption);
    }
  }
  // No runs: a plain commit. A count of 0 or above the limit, or no covered
  // sequence (a version 1 or 2 payload after the roots), is corruption.
  commit_record plain{hash128::of("root"), 1};
  CHECK(commit_type(plain) == record_type::commit);
  std::string tail;
  encode_commit(tail, plain);  // 24 bytes: no covered sequence
  std::string root16 = std::string(16, 'r');
  CHECK(decode_record(record_type::commit_runs, 9, std::string(1, '\1') + root16 + tail).error().code() ==
        status_code::corruption);
  plain.covered_sequence = 0;
  tail.clear();
  encode_commit(tail, plain);
  CHECK(decode_ok(record_type::commit_runs, std::string(1, '\1') + root16 + tail).commit.runs.size() == 1);
  CHECK(decode_record(record_type::commit_runs, 9, std::string(1, '\0') + tail).error().code() ==
        status_code::corruption);
  std::string over(1, static_cast<char>(limits::max_sorted_runs + 1));
  for (std::size_t i = 0; i <= limits::max_sorted_runs; ++i) over += root16;
  CHECK(decode_record(record_type::commit_runs, 9, over + tail).error().code() == status_code::corruption);
}

TEST_CASE("record: a batch at the byte limit passes, one byte over is refused") {
  // Four values of max_value_bytes fill max_batch_bytes minus the keys' bytes.
  std::string big(limits::max_value_bytes, 'v');
  std::vector<mutation_view> batch;
  for (int i = 0; i < 4; ++i) batch.push_back({mutation_kind::put, "k", big});
  CHECK(check_batch(batch).code() == status_code::invalid_argument);  // 4 bytes of keys over
  std::string smaller(limits::max_value_bytes - 1, 'v');
  batch.assign(4, {mutation_kind::put, "k", smaller});
  CHECK(check_batch(batch).is_ok());
  std::string p;
  encode_batch(p, batch);
  CHECK(p.size() <= max_frame_payload);
  CHECK(decode_ok(record_type::batch, p).mutations.size() == 4);
}

TEST_CASE("record: bad input to the writer's checks is refused") {
  std::vector<mutation_view> empty;
  CHECK(check_batch(empty).code() == status_code::invalid_argument);
  std::vector<mutation_view> empty_key = {{mutation_kind::put, "", "v"}};
  CHECK(check_batch(empty_key).code() == status_code::invalid_argument);
  std::string long_key(limits::max_key_bytes + 1, 'k');
  std::vector<mutation_view> too_long = {{mutation_kind::del, long_key, ""}};
  CHECK(check_batch(too_long).code() == status_code::invalid_argument);
  std::string long_value(limits::max_value_bytes + 1, 'v');
  std::vector<mutation_view> too_big = {{mutation_kind::put, "k", long_value}};
  CHECK(check_batch(too_big).code() == status_code::invalid_argument);
  std::vector<mutation_view> bad_kind = {{static_cast<mutation_kind>(9), "k", ""}};
  CHECK(check_batch(bad_kind).code() == status_code::invalid_argument);
}

TEST_CASE("record: every truncation and random damage of a payload is refused or decodes sanely") {
  std::vector<mutation_view> batch = {
      {mutation_kind::put, "alpha", "1"}, {mutation_kind::del, "beta", ""}, {mutation_kind::put, "gamma", "333"}};
  std::string p;
  encode_batch(p, batch);
  for (std::size_t n = 0; n < p.size(); ++n) {
    auto r = decode_record(record_type::batch, 1, std::string_view(p).substr(0, n));
    CHECK_FALSE(r.is_ok());
    CHECK(r.error().code() == status_code::corruption);
  }
  CHECK_FALSE(decode_record(record_type::batch, 1, p + "x").is_ok());  // trailing bytes
  CHECK_FALSE(decode_record(record_type::del, 1, "").is_ok());
  CHECK_FALSE(decode_record(record_type::commit, 1, "short").is_ok());
  std::string put;
  encode_put(put, "k", "v");
  CHECK_FALSE(decode_record(record_type::put, 1, put.substr(0, 1)).is_ok());
  CHECK(decode_record(static_cast<record_type>(77), 1, "").error().code() == status_code::not_supported);

  // Random bytes never crash the decoder, and whatever decodes obeys the limits.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 40, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    auto type = static_cast<record_type>(1 + rng() % max_record_type);
    auto r = decode_record(type, 1, junk);
    if (!r.is_ok()) continue;
    for (const auto& m : r->mutations) {
      CHECK_FALSE(m.key.empty());
      CHECK(m.key.size() <= limits::max_key_bytes);
    }
  }
}

TEST_CASE("segment file names round trip and nothing else parses") {
  CHECK(parse_segment_file_name(segment_file_name(0)) == 0u);
  CHECK(parse_segment_file_name(segment_file_name(123)) == 123u);
  CHECK(parse_segment_file_name(segment_file_name(~0ULL)) == ~0ULL);
  CHECK(segment_file_name(5) < segment_file_name(40));  // names sort numerically
  CHECK_FALSE(parse_segment_file_name("LOCK"));
  CHECK_FALSE(parse_segment_file_name("0000000000000000000a.wal"));
  CHECK_FALSE(parse_segment_file_name("99999999999999999999.wal"));  // overflows u64
  CHECK_FALSE(parse_segment_file_name("00000000000000000001.wal.tmp"));
}
