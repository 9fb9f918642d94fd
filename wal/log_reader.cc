#include "wal/log_reader.h"

#include <algorithm>


namespace magnetite::wal {

namespace {
constexpr std::size_t read_chunk = 1 << 20;
}

log_reader::log_reader(file& f, std::uint64_t salt, std::uint64_t start, std::uint64_t file_size,
                       std::string where)
    : file_(f), salt_(salt), file_size_(file_size), where_(std::move(where)), buf_offset_(start), pos_(start),
      next_pos_(start) {}

status log_reader::fill(std::size_t n) {
  std::uint64_t want_end = std::min<std::uint64_t>(pos_ + n, file_size_);
  std::uint64_t have_end = buf_offset_ + buf_.size();
  if (buf_offset_ <= pos_ && have_end >= want_end) return status::ok();
  // Keep the unread part, then read at least a chunk more.
  if (pos_ >= buf_offset_ && pos_ <= have_end) {
    buf_.erase(0, static_cast<std::size_t>(pos_ - buf_offset_));
  } else {
    buf_.clear();
  }
  buf_offset_ = pos_;
  have_end = buf_offset_ + buf_.size();
  std::uint64_t read_end = std::min<std::uint64_t>(std::max<std::uint64_t>(want_end, have_end + read_chunk), file_size_);
  std::size_t old = buf_.size();
  buf_.resize(static_cast<std::size_t>(read_end - buf_offset_));
  auto got = file_.read_at(have_end, buf_.size() - old, buf_.data() + old);
  if (!got) return got.error();
  buf_.resize(old + *got);
  // A short read means the file is shorter than when we started: treat its new
  // end as the end, rather than waiting for bytes that will not come.
  if (buf_offset_ + buf_.size() < read_end) file_size_ = buf_offset_ + buf_.size();
  return status::ok();
}

log_reader::step log_reader::next() {
  pos_ = next_pos_;
  if (pos_ >= file_size_) return step::end;
  std::size_t need = frame_header_size;
  for (;;) {
    if (status s = fill(need); !s) {
      error_ = s;
      return step::error;
    }
    std::string_view avail(buf_.data() + (pos_ - buf_offset_), buf_.size() - (pos_ - buf_offset_));
    frame_ = parse_frame(avail, salt_);
    bool at_file_end = buf_offset_ + buf_.size() >= file_size_;
    if (frame_.check == frame_check::truncated && !at_file_end) {
      // Read the whole frame the (checked, bounded) header announces.
      std::size_t want = avail.size() < frame_header_size ? frame_header_size
                                                          : frame_header_size + frame_.header.length;
      if (want <= avail.size()) return step::damaged;  // cannot happen; never spin
      need = want;
      continue;
    }
    switch (frame_.check) {
      case frame_check::ok:
        next_pos_ = pos_ + frame_.size;
        return step::frame;
      case frame_check::truncated:
      case frame_check::bad:
        return step::damaged;
      case frame_check::unsupported:
        error_ = status::make(status_code::not_supported, status_category::permanent,
                              fmt::format("{}, offset {}: frame uses a record type or flags this build does "
                                          "not know: written by a newer magnetite",
                                          where_, pos_));
        return step::error;
    }
  }
}

}  // namespace magnetite::wal
