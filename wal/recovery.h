// recovery: reads a WAL directory back after a restart or a crash.
//
// What it guarantees:
// - Every frame is checked (salted header and payload checksums, sequence
//   continuity, payload shape) from the newest segment that begins with a commit
//   marker (or the oldest, when none does) to the end of the log.
// - It returns the last commit marker, the put/del/batch records numbered above
//   the sequence it covers in order (frames written during a background
//   checkpoint lie before its marker), the latest replication-state payload,
//   and where the writer continues.
// - The LAST segment may end in zero bytes the writer reserved in advance: from
//   the first frame position where every byte to the end of the file is zero,
//   that is its unwritten end (reported as reserved_bytes, not as damage), cut
//   when repairing.
// - A damaged tail of the LAST segment that no intact follows_sync frame follows
//   (a torn last write) is cut; the bytes cut are reported.
// - Damage anywhere else, damage followed by an intact follows_sync frame, a bad
//   segment header (segments appear by rename only once durable), or a missing
//   segment after the replay start is corruption: an error naming the segment
//   file and offset, and nothing in the directory is modified.
// - With `repair`, and only after all of the above passed: the torn tail is
//   truncated; every replayed segment is rewritten over itself and synced (so
//   that bytes a failed fsync left only in the page cache really reach the disk
//   before anything depends on them) and the directory synced; then leftover
//   temporary segment files and superseded segments are removed. Only a repaired
//   result can open a log_writer.
//
// The caller must own the directory (hold the data directory's env::lock):
// repairing a log another process is appending to would destroy it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "wal/record.h"

namespace magnetite::wal {

struct recovery_options {
  // false: only read and report (for verification tools); a writer refuses
  // to open on such a result.
  bool repair = true;
};

struct recovered_log {
  std::optional<commit_record> last_commit;
  std::vector<record> tail;  // put, del and batch records last_commit does not cover
  std::optional<std::string> replication_state;
  std::uint64_t next_sequence = 1;

  // The segment the writer continues in and its valid length; nullopt for an
  // empty log (no segment left).
  std::optional<std::uint64_t> last_segment;
  std::uint64_t last_segment_end = 0;

  std::uint64_t frames = 0;           // intact frames read
  std::uint64_t discarded_bytes = 0;  // torn tail cut (or to be cut), to its last non-zero byte
  std::string discarded_detail;       // where and why, empty if nothing was cut
  std::uint64_t reserved_bytes = 0;   // zero tail of the last segment (cut by repair)
  std::vector<std::uint64_t> superseded_segments;
  bool repaired = false;  // repairs done, replayed segments durable
};

result<recovered_log> recover(env& e, const std::string& dir, const recovery_options& options = {});

}  // namespace magnetite::wal
