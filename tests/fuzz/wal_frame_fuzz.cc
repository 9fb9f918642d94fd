// wal_frame: segment headers and frames (wal/frame.h) on arbitrary bytes.
//
// Input: u64 salt | u8 mode | bytes.
//   mode bit 0: before each frame is parsed, make its checksums hold (its length
//               clamped to the bytes that follow), so the fuzzer gets past the
//               checksums to the length, type, flag and payload checks.
//   mode bit 1: the same for the segment header (bit 2).
//   mode bit 2: `bytes` is a segment: a header, then frames from offset 40
//               checked with the header's salt (the input's if the header is bad);
//               otherwise frames start at offset 0.
// Invariants: check_segment_header and parse_frame stay inside the bytes; a
// header that checks re-encodes to the same 40 bytes; a frame that parses
// re-encodes (begin_frame/finish_frame) to the same bytes; parse_frame agrees
// with check_frame_header; a frame's payload goes through decode_record.
#include "core/coding.h"
#include "tests/fuzz/fuzz_target.h"
#include "wal/frame.h"
#include "wal/record.h"

using namespace magnetite;
using namespace magnetite::fuzz;

namespace {

std::uint8_t* at(std::string& s, std::size_t i) { return reinterpret_cast<std::uint8_t*>(s.data() + i); }

void fix_frame(std::string& b, std::size_t off, std::uint64_t salt) {
  if (b.size() - off < wal::frame_header_size) return;
  std::uint32_t len = decode_fixed32_le(at(b, off + 4));
  std::size_t room = b.size() - off - wal::frame_header_size;
  if (len > room) {
    len = static_cast<std::uint32_t>(room);
    encode_fixed32_le(at(b, off + 4), len);
  }
  std::string_view v(b);
  encode_fixed32_le(at(b, off + 20), magnetite::checksum32(v.substr(off + wal::frame_header_size, len), salt));
  encode_fixed32_le(at(b, off), magnetite::checksum32(v.substr(off + 4, wal::frame_header_size - 4), salt));
}

}  // namespace

MAGNETITE_FUZZ_TARGET(wal_frame) {
  control c(as_view(data, size));
  std::uint64_t salt = c.u64();
  std::uint8_t mode = c.u8();
  std::string b(c.rest());

  std::size_t pos = 0;
  if (mode & 4) {
    if ((mode & 2) && b.size() >= wal::segment_header_size)
      encode_fixed32_le(at(b, 36), magnetite::checksum32(std::string_view(b).substr(0, 36)));
    std::uint64_t number = b.size() >= 24 ? decode_fixed64_le(at(b, 16)) : 0;
    auto sh = wal::check_segment_header(b, number, "fuzz");
    if (sh) {
      FUZZ_CHECK(sh->number == number);
      std::string re;
      wal::encode_segment_header(re, *sh);
      FUZZ_CHECK(re == std::string_view(b).substr(0, wal::segment_header_size));
      salt = sh->salt;
    } else {
      FUZZ_CHECK(sh.error().code() == status_code::corruption || sh.error().code() == status_code::not_supported);
      // Another expected number is a mismatch, never a crash.
      (void)wal::check_segment_header(b, number + 1, "fuzz");
    }
    pos = std::min(b.size(), wal::segment_header_size);
  }

  for (int frames = 0; frames < 64 && pos <= b.size(); ++frames) {
    if (mode & 1) fix_frame(b, pos, salt);
    std::string_view rest = std::string_view(b).substr(pos);
    wal::parsed_frame f = wal::parse_frame(rest, salt);
    wal::frame_header fh;
    wal::frame_check hc = wal::check_frame_header(rest, salt, fh);
    if (f.check == wal::frame_check::ok) {
      FUZZ_CHECK(hc == wal::frame_check::ok);
      FUZZ_CHECK(f.size == wal::frame_header_size + f.header.length && f.size <= rest.size());
      FUZZ_CHECK(f.payload.data() == rest.data() + wal::frame_header_size);
      std::string re;
      std::size_t h = wal::begin_frame(re);
      re.append(f.payload);
      wal::finish_frame(re, h, salt, f.header.sequence, f.header.type, f.header.flags);
      FUZZ_CHECK(re == rest.substr(0, f.size));
      auto rec = wal::decode_record(f.header.type, f.header.sequence, f.payload);
      if (!rec) FUZZ_CHECK(rec.error().code() == status_code::corruption);
      pos += f.size;
      continue;
    }
    if (f.check == wal::frame_check::truncated)
      FUZZ_CHECK(rest.size() < wal::frame_header_size ||
                 (hc == wal::frame_check::ok && rest.size() - wal::frame_header_size < fh.length));
    if (f.check == wal::frame_check::unsupported) FUZZ_CHECK(hc == wal::frame_check::unsupported);
    break;
  }
  return 0;
}
