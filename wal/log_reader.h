// log_reader: reads the frames of one segment file in order, with a bounded
// buffer (frames are read whole, so memory stays within the largest frame plus
// one read chunk).
//
// next() returns each intact frame, then `end` at the end of the file, or
// `damaged` at the first frame that is truncated or fails its checksum (offset()
// tells where), or `error` for an I/O error or a frame from a newer format. It
// does not judge damage (torn tail or corruption): recovery does.
#pragma once

#include <cstdint>
#include <string>

#include "core/env.h"
#include "wal/frame.h"

namespace magnetite::wal {

class log_reader {
 public:
  enum class step { frame, end, damaged, error };

  // Reads frames from `start` (just after the segment header) to `file_size`,
  // checking them with the segment's salt.
  log_reader(file& f, std::uint64_t salt, std::uint64_t start, std::uint64_t file_size, std::string where);

  step next();

  // Valid after `frame` until the next call.
  const parsed_frame& frame() const noexcept { return frame_; }
  // Offset of the frame just returned, or of the damage found.
  std::uint64_t offset() const noexcept { return pos_; }
  const status& error() const noexcept { return error_; }

 private:
  // Makes sure the buffer holds [pos_, pos_ + n) or everything up to the end.
  status fill(std::size_t n);

  file& file_;
  std::uint64_t salt_;
  std::uint64_t file_size_;
  std::string where_;
  std::string buf_;
  std::uint64_t buf_offset_;  // file offset of buf_[0]
  std::uint64_t pos_;         // file offset of the current frame
  std::uint64_t next_pos_;
  parsed_frame frame_;
  status error_;
};

}  // namespace magnetite::wal
