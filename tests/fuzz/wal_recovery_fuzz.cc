// wal_recovery: wal::recover on a log directory made of the input, in an
// in-memory env (core/fault_env.h).
//
// Input: u8 mode | u8 skip | segment files back to back, cut before each
// "MGNTWAL1" (at most 4 files; the first may not start with the magic).
//   Files are named <n>.wal with n = 1, 2, ... (mode bit 4: n starts at the
//   number in the first file's header), one number skipped after the first file
//   with mode bit 3 (a gap).
//   mode bit 0: make every checksum hold: each header's (and its number the
//               file's), each frame's header and payload (lengths clamped to the
//               file), but the frame numbered `skip` (from 1; 0: none); frames
//               end at the first all-zero frame header (reserved space).
//   mode bit 1: recover without repair (report only).
//   mode bit 2: also a leftover "<n+1>.wal.tmp".
//   mode bit 5: after a repaired recovery, open a writer, append a put, and
//               recover once more.
// Invariants: recover returns ok or a clean error (corruption, not_supported)
// and never crashes or reads out of bounds; on an error or without repair no
// file changes; what it returns is consistent (tail records are put/del/batch);
// a repaired log recovers again to the same records, with nothing left to cut;
// a write on top of it is recovered after them.
#include <vector>

#include "core/coding.h"
#include "core/fault_env.h"
#include "tests/fuzz/fuzz_target.h"
#include "wal/frame.h"
#include "wal/log_writer.h"
#include "wal/recovery.h"

using namespace magnetite;
using namespace magnetite::fuzz;

namespace {

const std::string dir = "/wal";

std::uint8_t* at(std::string& s, std::size_t i) { return reinterpret_cast<std::uint8_t*>(s.data() + i); }

// Makes the checksums of segment `b` hold (see the input description).
void fix_segment(std::string& b, std::uint64_t number, unsigned skip) {
  if (b.size() < wal::segment_header_size) return;
  encode_fixed64_le(at(b, 16), number);
  encode_fixed32_le(at(b, 36), magnetite::checksum32(std::string_view(b).substr(0, 36)));
  std::uint64_t salt = decode_fixed64_le(at(b, 24));
  std::size_t off = wal::segment_header_size;
  for (unsigned k = 1; b.size() - off >= wal::frame_header_size; ++k) {
    std::string_view h = std::string_view(b).substr(off, wal::frame_header_size);
    if (h.find_first_not_of('\0') == std::string_view::npos) break;
    std::uint32_t len = decode_fixed32_le(at(b, off + 4));
    std::size_t room = b.size() - off - wal::frame_header_size;
    if (len > room) {
      len = static_cast<std::uint32_t>(room);
      encode_fixed32_le(at(b, off + 4), len);
    }
    if (k != skip) {
      std::string_view v(b);
      encode_fixed32_le(at(b, off + 20), magnetite::checksum32(v.substr(off + wal::frame_header_size, len), salt));
      encode_fixed32_le(at(b, off), magnetite::checksum32(v.substr(off + 4, wal::frame_header_size - 4), salt));
    }
    off += wal::frame_header_size + len;
  }
}

void check_same(const wal::recovered_log& a, const wal::recovered_log& b) {
  FUZZ_CHECK(a.last_commit == b.last_commit);
  FUZZ_CHECK(a.tail == b.tail);
  FUZZ_CHECK(a.replication_state == b.replication_state);
  FUZZ_CHECK(a.next_sequence == b.next_sequence);
  FUZZ_CHECK(a.last_segment == b.last_segment);
  FUZZ_CHECK(a.last_segment_end == b.last_segment_end);
}

}  // namespace

MAGNETITE_FUZZ_TARGET(wal_recovery) {
  control c(as_view(data, size));
  std::uint8_t mode = c.u8();
  unsigned skip = c.u8();
  bool repair = !(mode & 2);
  const std::string_view magic(wal::segment_magic, sizeof wal::segment_magic);
  auto pieces = split_at_magics(c.rest(), std::span(&magic, 1), 4);

  fault_env e;
  FUZZ_CHECK(e.create_dir(dir).is_ok());
  std::uint64_t number = 1;
  if ((mode & 16) && !pieces.empty() && pieces[0].size() >= 24)
    number = decode_fixed64_le(reinterpret_cast<const std::uint8_t*>(pieces[0].data() + 16));
  for (std::size_t i = 0; i < pieces.size(); ++i, ++number) {
    if (i == 1 && (mode & 8)) ++number;
    std::string b(pieces[i]);
    if (mode & 1) fix_segment(b, number, skip);
    put_file(e, path_join(dir, wal::segment_file_name(number)), b);
  }
  if (mode & 4) put_file(e, path_join(dir, wal::segment_temp_file_name(number)), "leftover");
  FUZZ_CHECK(e.sync_dir(dir).is_ok());

  auto before = snapshot(e, dir);
  auto r = wal::recover(e, dir, {.repair = repair});
  if (!r) {
    auto code = r.error().code();
    FUZZ_CHECK(code == status_code::corruption || code == status_code::not_supported);
    FUZZ_CHECK(snapshot(e, dir) == before);  // nothing modified
    return 0;
  }
  for (const auto& rec : r->tail) {
    FUZZ_CHECK(rec.type == wal::record_type::put || rec.type == wal::record_type::del ||
               rec.type == wal::record_type::batch);
    FUZZ_CHECK(!rec.mutations.empty() && rec.sequence < r->next_sequence);
  }
  // Increasing, not consecutive: a replication-state frame takes a number and
  // is not a tail record (found by this target: regress-replication-state-between).
  for (std::size_t i = 1; i < r->tail.size(); ++i) FUZZ_CHECK(r->tail[i].sequence > r->tail[i - 1].sequence);
  FUZZ_CHECK(r->repaired == repair);
  FUZZ_CHECK(r->frames >= r->tail.size());

  if (!repair) {
    FUZZ_CHECK(snapshot(e, dir) == before);
    auto again = wal::recover(e, dir, {.repair = false});
    FUZZ_CHECK(again.is_ok());
    check_same(*r, *again);
    FUZZ_CHECK(again->discarded_bytes == r->discarded_bytes && again->reserved_bytes == r->reserved_bytes);
    return 0;
  }

  // Repaired: a second recovery finds the same log and nothing to cut.
  auto after = snapshot(e, dir);
  auto again = wal::recover(e, dir);
  FUZZ_CHECK(again.is_ok());
  check_same(*r, *again);
  FUZZ_CHECK(again->discarded_bytes == 0 && again->reserved_bytes == 0);
  FUZZ_CHECK(again->superseded_segments.empty());
  FUZZ_CHECK(snapshot(e, dir) == after);

  if (mode & 32) {
    wal::writer_options wo;
    wo.preallocate = 0;
    auto w = wal::log_writer::open(e, dir, wo, *again);
    if (!w) return 0;  // e.g. sequence or segment numbers at their end
    auto seq = (*w)->append_put("fuzz-key", "fuzz-value");
    if (!seq || !(*w)->sync_durable()) return 0;
    w->reset();
    auto third = wal::recover(e, dir);
    FUZZ_CHECK(third.is_ok());
    FUZZ_CHECK(third->last_commit == again->last_commit);
    FUZZ_CHECK(third->tail.size() == again->tail.size() + 1);
    FUZZ_CHECK(std::equal(again->tail.begin(), again->tail.end(), third->tail.begin()));
    const wal::record& last = third->tail.back();
    FUZZ_CHECK(last.sequence == *seq && last.mutations.size() == 1 && last.mutations[0].key == "fuzz-key" &&
               last.mutations[0].value == "fuzz-value");
  }
  return 0;
}
