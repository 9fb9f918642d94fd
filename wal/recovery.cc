#include "wal/recovery.h"

#include <algorithm>

#include "core/coding.h"
#include "wal/frame.h"
#include "wal/log_reader.h"

namespace magnetite::wal {

namespace {

struct segment_file {
  std::uint64_t number;
  std::string path;
  std::unique_ptr<file> handle;
  std::uint64_t size;
};

result<segment_file> open_segment(env& e, const std::string& dir, std::uint64_t number) {
  std::string path = path_join(dir, segment_file_name(number));
  auto f = e.open(path, open_mode::open_existing);
  if (!f) return f.error();
  auto size = (*f)->size();
  if (!size) return size.error();
  return segment_file{number, std::move(path), std::move(*f), *size};
}

// True if the segment's header is intact and its first frame is a commit marker.
bool starts_with_commit(segment_file& s) {
  std::string head(segment_header_size + frame_header_size + hash128::byte_size + 8, '\0');
  auto n = s.handle->read_at(0, head.size(), head.data());
  if (!n || *n != head.size()) return false;
  if (!check_segment_header(head, s.number, s.path)) return false;
  parsed_frame f = parse_frame(std::string_view(head).substr(segment_header_size));
  return f.check == frame_check::ok && f.type == record_type::commit;
}

// Looks for an intact frame flagged follows_sync with a sequence number of at
// least `min_sequence`, anywhere in [from, s.size). Such a frame was written after
// everything before it was durable, so damage before it is not a torn write.
result<std::optional<std::uint64_t>> find_sync_frame(segment_file& s, std::uint64_t from,
                                                     std::uint64_t min_sequence) {
  if (from >= s.size) return std::optional<std::uint64_t>{};
  std::string rest(static_cast<std::size_t>(s.size - from), '\0');
  auto n = s.handle->read_at(from, rest.size(), rest.data());
  if (!n) return n.error();
  rest.resize(*n);
  std::string_view v(rest);
  for (std::size_t o = 0; o + frame_header_size <= v.size(); ++o) {
    const auto* h = reinterpret_cast<const std::uint8_t*>(v.data() + o);
    // Cheap filters first; the checksum decides.
    if (h[17] != flag_follows_sync || h[16] == 0 || h[16] > max_record_type || h[18] != 0 || h[19] != 0)
      continue;
    if (decode_fixed64_le(h + 8) < min_sequence) continue;
    if (parse_frame(v.substr(o)).check == frame_check::ok) return std::optional<std::uint64_t>{from + o};
  }
  return std::optional<std::uint64_t>{};
}

status corrupt_at(const segment_file& s, std::uint64_t offset, std::string_view what) {
  return status::corruption(fmt::format("WAL segment {}, offset {}: {}; the log is corrupt, not torn, "
                                        "and nothing was modified",
                                        s.path, offset, what));
}

}  // namespace

result<recovered_log> recover(env& e, const std::string& dir, const recovery_options& options) {
  auto names = e.list(dir);
  if (!names) return names.error();
  std::vector<std::uint64_t> numbers;
  for (const auto& n : *names)
    if (auto num = parse_segment_file_name(n)) numbers.push_back(*num);
  std::sort(numbers.begin(), numbers.end());

  recovered_log out;
  if (numbers.empty()) return out;
  for (std::size_t i = 1; i < numbers.size(); ++i)
    if (numbers[i] != numbers[i - 1] + 1)
      return status::corruption(fmt::format("WAL directory {}: segment {} is missing between {} and {}",
                                            dir, numbers[i - 1] + 1, numbers[i - 1], numbers[i]));

  std::vector<segment_file> segs;
  for (auto num : numbers) {
    auto s = open_segment(e, dir, num);
    if (!s) return s.error();
    segs.push_back(std::move(*s));
  }

  // Replay starts at the newest segment that begins with a commit marker: every
  // older segment is superseded by that marker.
  std::size_t start = 0;
  for (std::size_t i = segs.size(); i-- > 0;)
    if (starts_with_commit(segs[i])) {
      start = i;
      break;
    }
  for (std::size_t i = 0; i < start; ++i) out.superseded_segments.push_back(segs[i].number);

  std::optional<std::uint64_t> expected;  // sequence number of the next frame
  struct cut_plan {
    std::size_t segment;
    std::uint64_t offset;
    bool remove_file;
  };
  std::optional<cut_plan> cut;

  for (std::size_t i = start; i < segs.size() && !cut; ++i) {
    segment_file& s = segs[i];
    bool last = i + 1 == segs.size();
    std::string header(std::min<std::uint64_t>(s.size, segment_header_size), '\0');
    auto hn = s.handle->read_at(0, header.size(), header.data());
    if (!hn) return hn.error();
    header.resize(*hn);
    if (status hs = check_segment_header(header, s.number, s.path); !hs) {
      if (hs.code() == status_code::not_supported || !last) return hs;
      // A torn header can only come from a crash while the segment was created,
      // before any frame in it could have been acknowledged.
      auto later = find_sync_frame(s, 0, expected.value_or(0));
      if (!later) return later.error();
      if (*later) return corrupt_at(s, 0, fmt::format("bad segment header ({}) before an intact frame at offset {}",
                                                      hs.message(), **later));
      cut = cut_plan{i, 0, true};
      break;
    }
    log_reader reader(*s.handle, segment_header_size, s.size, s.path);
    for (;;) {
      log_reader::step st = reader.next();
      if (st == log_reader::step::end) break;
      if (st == log_reader::step::error) return reader.error();
      std::string why;
      if (st == log_reader::step::damaged) {
        why = "damaged frame (truncated or checksum mismatch)";
      } else if (expected && reader.frame().sequence != *expected) {
        why = fmt::format("frame has sequence {} where {} was expected", reader.frame().sequence, *expected);
      }
      if (why.empty()) {
        const parsed_frame& f = reader.frame();
        auto rec = decode_record(f.type, f.sequence, f.payload);
        if (!rec) return corrupt_at(s, reader.offset(), rec.error().message());
        ++out.frames;
        expected = f.sequence + 1;
        switch (rec->type) {
          case record_type::commit:
            out.last_commit = rec->commit;
            out.tail.clear();
            break;
          case record_type::replication_state:
            out.replication_state = std::move(rec->payload);
            break;
          default:
            out.tail.push_back(std::move(*rec));
        }
        continue;
      }
      if (!last) return corrupt_at(s, reader.offset(), why + " in a sealed segment");
      auto later = find_sync_frame(s, reader.offset() + 1, expected.value_or(0));
      if (!later) return later.error();
      if (*later)
        return corrupt_at(s, reader.offset(), fmt::format("{}, followed by an intact frame at offset {}", why, **later));
      cut = cut_plan{i, reader.offset(), false};
      break;
    }
  }

  out.next_sequence = expected.value_or(1);
  if (cut) {
    segment_file& s = segs[cut->segment];
    out.discarded_bytes = s.size - cut->offset;
    out.discarded_detail =
        cut->remove_file
            ? fmt::format("removed {} ({} bytes): its header was torn while it was being created", s.path, s.size)
            : fmt::format("cut {} bytes of a torn tail from {} at offset {}", out.discarded_bytes, s.path, cut->offset);
  }
  // Where the writer continues: the last segment, or the one before a torn-header
  // segment that is removed (none if that was the only one).
  if (cut && cut->remove_file) {
    if (cut->segment > start) {
      out.last_segment = segs[cut->segment - 1].number;
      out.last_segment_end = segs[cut->segment - 1].size;
    }
  } else {
    out.last_segment = segs.back().number;
    out.last_segment_end = cut ? cut->offset : segs.back().size;
  }

  if (!options.repair) return out;

  // Repairs, only now that everything has been checked.
  bool dir_changed = false;
  if (cut) {
    segment_file& s = segs[cut->segment];
    if (cut->remove_file) {
      s.handle.reset();
      MAGNETITE_TRY(e.remove(s.path));
      dir_changed = true;
    } else {
      MAGNETITE_TRY(s.handle->truncate(cut->offset));
      MAGNETITE_TRY(s.handle->sync());
    }
  }
  for (std::size_t i = 0; i < start; ++i) {
    segs[i].handle.reset();
    MAGNETITE_TRY(e.remove(segs[i].path));
    dir_changed = true;
  }
  if (dir_changed) MAGNETITE_TRY(e.sync_dir(dir));
  out.repaired = true;
  return out;
}

}  // namespace magnetite::wal
