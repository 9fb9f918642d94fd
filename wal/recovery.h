// recovery: reads a WAL directory back after a restart or a crash.
//
// What it guarantees:
// - Every frame is checked (checksum, sequence continuity, payload shape) from the
//   newest segment that begins with a commit marker to the end of the log.
// - It returns the last commit marker, the put/del/batch records after it in
//   order, the latest replication-state payload, and where the writer continues.
// - A damaged tail of the LAST segment that no intact follows_sync frame follows
//   (a torn last write) is cut: with `repair`, the file is truncated to the last
//   good frame and synced BEFORE anyone can append; the bytes cut are reported.
//   A last segment whose header is torn is removed the same way.
// - Damage anywhere else, or damage followed by an intact follows_sync frame, is
//   corruption: an error naming the segment file and offset, and nothing in the
//   directory is modified. So is a missing segment in the middle of the log.
// - With `repair`, segments older than the newest commit marker (superseded
//   ones a crash left behind) are removed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "wal/record.h"

namespace magnetite::wal {

struct recovery_options {
  // false: only read and report (for verification tools); the writer refuses to
  // open a log whose damage was reported but not repaired.
  bool repair = true;
};

struct recovered_log {
  std::optional<commit_record> last_commit;
  std::vector<record> tail;  // put, del and batch records after last_commit
  std::optional<std::string> replication_state;
  std::uint64_t next_sequence = 1;

  // The segment the writer continues in and its valid length; nullopt for an
  // empty log (no segment left).
  std::optional<std::uint64_t> last_segment;
  std::uint64_t last_segment_end = 0;

  std::uint64_t frames = 0;           // intact frames read
  std::uint64_t discarded_bytes = 0;  // torn tail cut (or to be cut)
  std::string discarded_detail;       // where and why, empty if nothing was cut
  std::vector<std::uint64_t> superseded_segments;
  bool repaired = false;              // the cuts above were carried out
};

result<recovered_log> recover(env& e, const std::string& dir, const recovery_options& options = {});

}  // namespace magnetite::wal
