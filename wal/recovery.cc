#include "wal/recovery.h"

#include <algorithm>

#include "core/coding.h"
#include "wal/frame.h"
#include "wal/log_reader.h"

namespace magnetite::wal {

namespace {

constexpr std::size_t scan_window = 1 << 20;

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

result<std::string> read_range(file& f, std::uint64_t offset, std::size_t n) {
  std::string out(n, '\0');
  auto got = f.read_at(offset, n, out.data());
  if (!got) return got.error();
  out.resize(*got);
  return out;
}

// True if the segment's header is intact and its first frame is a commit marker.
bool starts_with_commit(segment_file& s) {
  // The largest commit payload: the most runs, root, length, covered
  // sequence, stamp bound.
  constexpr std::size_t commit_bytes =
      1 + (limits::max_sorted_runs + 1) * hash128::byte_size + 8 + 8 + stamp::encoded_bytes;
  auto head = read_range(*s.handle, 0, segment_header_size + frame_header_size + commit_bytes);
  if (!head) return false;
  auto h = check_segment_header(*head, s.number, s.path);
  if (!h) return false;
  parsed_frame f = parse_frame(std::string_view(*head).substr(segment_header_size), h->salt);
  return f.check == frame_check::ok && is_commit(f.header.type);
}

// Looks for an intact frame flagged follows_sync with a sequence number of at
// least `min_sequence` whose header starts in [from, before). Such a frame was
// written after everything before it was durable, so damage before it is not a
// torn write. `before` is where the segment's content ends: a header holds the
// non-zero follows_sync flag, so none starts in the zeros after it (the
// reserved space, up to 4 MiB, is not scanned at every open).
// Reads a window at a time: headers are checked in constant time (salted
// checksum), a payload only for a header that passes.
result<std::optional<std::uint64_t>> find_sync_frame(segment_file& s, std::uint64_t salt, std::uint64_t from,
                                                     std::uint64_t before, std::uint64_t min_sequence) {
  using found = std::optional<std::uint64_t>;
  for (std::uint64_t base = from; base < before && base + frame_header_size <= s.size; base += scan_window) {
    auto buf = read_range(
        *s.handle, base,
        static_cast<std::size_t>(std::min<std::uint64_t>(scan_window + frame_header_size - 1, s.size - base)));
    if (!buf) return buf.error();
    std::string_view v(*buf);
    for (std::size_t o = 0; o < scan_window && base + o < before && o + frame_header_size <= v.size(); ++o) {
      const auto* h = reinterpret_cast<const std::uint8_t*>(v.data() + o);
      if (h[17] != flag_follows_sync || h[16] == 0 || h[16] > max_record_type) continue;
      frame_header fh;
      if (check_frame_header(v.substr(o), salt, fh) != frame_check::ok || fh.sequence < min_sequence) continue;
      std::uint64_t at = base + o;
      if (at + frame_header_size + fh.length > s.size) continue;
      auto payload = read_range(*s.handle, at + frame_header_size, fh.length);
      if (!payload) return payload.error();
      if (checksum32(*payload, salt) == fh.payload_checksum) return found{at};
    }
  }
  return found{};
}

// Where the last non-zero byte of [from, s.size) ends (`from` if none). The
// zeros after it are space the writer reserved and never wrote, or wrote
// without a sync that reached the disk: nothing acknowledged either way.
result<std::uint64_t> content_end(segment_file& s, std::uint64_t from) {
  std::uint64_t end = from;
  for (std::uint64_t base = from; base < s.size; base += scan_window) {
    auto buf =
        read_range(*s.handle, base, static_cast<std::size_t>(std::min<std::uint64_t>(scan_window, s.size - base)));
    if (!buf) return buf.error();
    auto last = buf->find_last_not_of('\0');
    if (last != std::string::npos) end = base + last + 1;
  }
  return end;
}

// True if the damaged frame at `at` is whole: its header checks (with the
// expected sequence number), its bytes lie inside the file, its last byte is
// not zero and none of the 512-byte sectors it touches reads as zeros within
// it, yet its payload fails its checksum. A write torn by a crash leaves a
// frame short, or missing whole sectors, or cut inside its last sector; all of
// them read as zeros here (reserved space, or space past the old end of the
// file). A whole frame with a bad payload is media damage: cutting it as a
// torn tail would silently drop a group that may have been acknowledged.
// A damaged frame that merely could be torn (its payload ends in a zero byte,
// or holds a zero sector of its own) is still treated as torn.
result<bool> whole_but_damaged(segment_file& s, std::uint64_t salt, std::uint64_t at,
                               std::optional<std::uint64_t> expected) {
  constexpr std::uint64_t sector = 512;
  if (at + frame_header_size > s.size) return false;
  auto head = read_range(*s.handle, at, frame_header_size);
  if (!head) return head.error();
  frame_header fh;
  if (check_frame_header(*head, salt, fh) != frame_check::ok) return false;
  if (expected && fh.sequence != *expected) return false;
  std::uint64_t end = at + frame_header_size + fh.length;
  if (end > s.size) return false;
  auto bytes = read_range(*s.handle, at, static_cast<std::size_t>(end - at));
  if (!bytes) return bytes.error();
  std::string_view v(*bytes);
  if (v.size() != end - at || v.back() == '\0') return false;
  if (checksum32(v.substr(frame_header_size), salt) == fh.payload_checksum) return false;
  for (std::uint64_t from = at; from < end;) {
    std::uint64_t to = std::min(end, (from / sector + 1) * sector);
    if (v.substr(from - at, to - from).find_first_not_of('\0') == std::string_view::npos) return false;
    from = to;
  }
  return true;
}

status corrupt_at(const segment_file& s, std::uint64_t offset, std::string_view what) {
  return status::corruption(
      fmt::format("WAL segment {}, offset {}: {}; the log is corrupt, not torn, "
                  "and nothing was modified",
                  s.path, offset, what));
}

// Writes a file's bytes over themselves and syncs it. After a failed fsync
// (in this or an earlier process) the kernel may hold pages it will never write
// and a later fsync reports success anyway; rewriting makes them dirty again,
// so the sync really covers what recovery read.
status rewrite_and_sync(file& f, std::uint64_t size) {
  for (std::uint64_t off = 0; off < size; off += scan_window) {
    auto chunk = read_range(f, off, static_cast<std::size_t>(std::min<std::uint64_t>(scan_window, size - off)));
    if (!chunk) return chunk.error();
    MAGNETITE_TRY(f.write_at(off, *chunk));
  }
  return f.sync();
}

// The log's files: its segments, oldest first, open, and leftover temporary
// segments (a crash between create and rename) that repair removes.
struct log_files {
  std::vector<segment_file> segments;
  std::vector<std::string> temps;
};

result<log_files> open_log_files(env& e, const std::string& dir) {
  auto names = e.list(dir);
  if (!names) return names.error();
  std::vector<std::uint64_t> numbers;
  log_files out;
  for (const auto& n : *names) {
    if (auto num = parse_segment_file_name(n))
      numbers.push_back(*num);
    else if (n.ends_with(temp_suffix) && parse_segment_file_name(n.substr(0, n.size() - temp_suffix.size())))
      out.temps.push_back(n);
  }
  std::sort(numbers.begin(), numbers.end());
  for (auto num : numbers) {
    auto s = open_segment(e, dir, num);
    if (!s) return s.error();
    out.segments.push_back(std::move(*s));
  }
  return out;
}

// Replay starts at the newest segment that begins with a commit marker: every
// older segment is superseded by that marker (and may have gaps: removal stops
// at the first failure). A marker that begins a segment covers every frame
// before it: its checkpoint began that segment. Without one, at the oldest
// segment: the marker of a background checkpoint lies inside the segment its
// checkpoint began (after the carried replication state and the writes made
// meanwhile), and the writer removes the segments before that one only once
// the marker is durable. From the start on the segments must be contiguous.
result<std::size_t> replay_start(const std::string& dir, std::vector<segment_file>& segs, recovered_log& out) {
  std::size_t start = 0;
  for (std::size_t i = segs.size(); i-- > 0;)
    if (starts_with_commit(segs[i])) {
      start = i;
      break;
    }
  for (std::size_t i = 0; i < start; ++i) out.superseded_segments.push_back(segs[i].number);
  for (std::size_t i = start + 1; i < segs.size(); ++i)
    if (segs[i].number != segs[i - 1].number + 1)
      return status::corruption(fmt::format("WAL directory {}: segment {} is missing between {} and {}", dir,
                                            segs[i - 1].number + 1, segs[i - 1].number, segs[i].number));
  return start;
}

// Why the frame the reader stopped at cannot be the next one replayed, or
// empty if it can.
std::string why_not_next(log_reader::step st, const log_reader& reader, std::optional<std::uint64_t> expected) {
  if (st == log_reader::step::damaged) return "damaged frame (truncated or checksum mismatch)";
  std::uint64_t seq = reader.frame().header.sequence;
  if (expected && seq != *expected) return fmt::format("frame has sequence {} where {} was expected", seq, *expected);
  // Numbers start at 1, and the last one has no successor: the next sequence
  // must not wrap to 0 (found by tests/fuzz, wal_recovery).
  if (seq == 0 || seq == UINT64_MAX) return fmt::format("frame has sequence {}, outside 1 .. 2^64-2", seq);
  return {};
}

// A replayed record: a commit marker starts the tail afresh; the replication
// state is kept aside (the newest wins); the rest is the tail to replay.
void take_record(record rec, recovered_log& out) {
  switch (rec.type) {
    case record_type::commit:
    case record_type::commit_runs: {
      // The frames it covers are in its tree, wherever they lie: a marker
      // of a background checkpoint follows frames written after the ones it
      // covers (format version 3); an older marker covers every frame
      // before its own.
      std::uint64_t covered = rec.commit.covered_sequence.value_or(rec.sequence - 1);
      out.last_commit = rec.commit;
      std::erase_if(out.tail, [&](const record& r) { return r.sequence <= covered; });
      break;
    }
    case record_type::replication_state:
      out.replication_state = std::move(rec.payload);
      break;
    default:
      out.tail.push_back(std::move(rec));
  }
}

// Where the last segment is cut: the first frame that cannot be replayed,
// and where the content after it ends.
struct cut_plan {
  std::size_t segment;
  std::uint64_t offset;
  std::uint64_t content_end;  // the reserved zeros start here
};

// The frame at the reader's offset of the LAST segment cannot be replayed:
// a torn tail to cut, or corruption (nothing is modified). It is torn only
// when nothing after it was written after a sync (no intact follows_sync frame
// of a later sequence), and it is not a whole frame with a bad payload.
result<cut_plan> judge_tail(segment_file& s, std::size_t i, std::uint64_t salt, const log_reader& reader,
                            log_reader::step st, const std::string& why, std::optional<std::uint64_t> expected) {
  if (st == log_reader::step::damaged) {
    auto whole = whole_but_damaged(s, salt, reader.offset(), expected);
    if (!whole) return whole.error();
    if (*whole)
      return corrupt_at(s, reader.offset(),
                        "a whole frame (no sector of it missing) whose payload fails its checksum: media "
                        "damage, not a torn write");
  }
  auto end = content_end(s, reader.offset());
  if (!end) return end.error();  // == offset: only reserved zeros follow, a clean end
  auto later = find_sync_frame(s, salt, reader.offset() + 1, *end, expected.value_or(0));
  if (!later) return later.error();
  if (*later)
    return corrupt_at(s, reader.offset(), fmt::format("{}, followed by an intact frame at offset {}", why, **later));
  return cut_plan{i, reader.offset(), *end};
}

// Reads every frame from segment `start` on into `out`; where the last
// segment must be cut, if anywhere. A frame that cannot be replayed in a
// sealed segment (not the last) is corruption: sealed segments were synced
// whole before the next one began.
result<std::optional<cut_plan>> read_frames(std::vector<segment_file>& segs, std::size_t start, recovered_log& out) {
  std::optional<std::uint64_t> expected;  // sequence number of the next frame
  for (std::size_t i = start; i < segs.size(); ++i) {
    segment_file& s = segs[i];
    auto header =
        read_range(*s.handle, 0, static_cast<std::size_t>(std::min<std::uint64_t>(s.size, segment_header_size)));
    if (!header) return header.error();
    // Segments appear (by rename) only once their header is durable, so a bad
    // header is never a torn write.
    auto sh = check_segment_header(*header, s.number, s.path);
    if (!sh) return sh.error();
    log_reader reader(*s.handle, sh->salt, segment_header_size, s.size, s.path);
    for (;;) {
      log_reader::step st = reader.next();
      if (st == log_reader::step::end) break;
      if (st == log_reader::step::error) return reader.error();
      std::string why = why_not_next(st, reader, expected);
      if (why.empty()) {
        const parsed_frame& f = reader.frame();
        auto rec = decode_record(f.header.type, f.header.sequence, f.payload);
        if (!rec) return corrupt_at(s, reader.offset(), rec.error().message());
        ++out.frames;
        expected = f.header.sequence + 1;
        take_record(std::move(*rec), out);
        continue;
      }
      out.next_sequence = expected.value_or(1);
      if (i + 1 != segs.size()) return corrupt_at(s, reader.offset(), why + " in a sealed segment");
      auto cut = judge_tail(s, i, sh->salt, reader, st, why, expected);
      if (!cut) return cut.error();
      return std::optional<cut_plan>(*cut);
    }
  }
  out.next_sequence = expected.value_or(1);
  return std::optional<cut_plan>();
}

// Repairs, only once everything has been checked: first what will be
// replayed is made durable (with its directory entries), then the tail is cut
// and superseded and temporary files are removed.
status repair(env& e, const std::string& dir, log_files& files, std::size_t start, const std::optional<cut_plan>& cut,
              const recovered_log& out) {
  auto& segs = files.segments;
  if (cut) MAGNETITE_TRY(segs[cut->segment].handle->truncate(cut->offset));
  for (std::size_t i = start; i < segs.size(); ++i)
    MAGNETITE_TRY(rewrite_and_sync(*segs[i].handle, i + 1 == segs.size() ? out.last_segment_end : segs[i].size));
  MAGNETITE_TRY(e.sync_dir(dir));
  bool removed = false;
  for (const auto& t : files.temps) {
    MAGNETITE_TRY(e.remove(path_join(dir, t)));
    removed = true;
  }
  for (std::size_t i = 0; i < start; ++i) {  // oldest first, so survivors stay contiguous
    segs[i].handle.reset();
    MAGNETITE_TRY(e.remove(segs[i].path));
    removed = true;
  }
  if (removed) MAGNETITE_TRY(e.sync_dir(dir));
  return status::ok();
}

}  // namespace

result<recovered_log> recover(env& e, const std::string& dir, const recovery_options& options) {
  auto files = open_log_files(e, dir);
  if (!files) return files.error();
  auto& segs = files->segments;
  recovered_log out;
  auto start = replay_start(dir, segs, out);
  if (!start) return start.error();
  auto cut = read_frames(segs, *start, out);
  if (!cut) return cut.error();

  if (!segs.empty()) {
    out.last_segment = segs.back().number;
    out.last_segment_end = *cut ? (*cut)->offset : segs.back().size;
  }
  if (*cut) {
    const cut_plan& c = **cut;
    out.reserved_bytes = segs[c.segment].size - c.content_end;
    if (c.content_end > c.offset) {
      out.discarded_bytes = c.content_end - c.offset;
      out.discarded_detail = fmt::format("cut {} bytes of a torn tail from {} at offset {}", out.discarded_bytes,
                                         segs[c.segment].path, c.offset);
    }
  }
  if (!options.repair) return out;
  MAGNETITE_TRY(repair(e, dir, *files, *start, *cut, out));
  out.repaired = true;
  return out;
}

}  // namespace magnetite::wal
