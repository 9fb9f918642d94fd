#include "wal/log_writer.h"

#include <random>

#include "core/limits.h"
#include "wal/frame.h"

namespace magnetite::wal {

namespace {
// A group buffer that grew for one huge batch is given back afterwards.
constexpr std::size_t keep_buffer_capacity = 4 << 20;

std::uint64_t random_salt() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}
}  // namespace

log_writer::log_writer(env& e, std::string dir, writer_options options)
    : env_(e), dir_(std::move(dir)), options_(std::move(options)) {}

result<std::unique_ptr<log_writer>> log_writer::open(env& e, std::string dir, writer_options options,
                                                     const recovered_log& recovered) {
  if (!recovered.repaired)
    return status::invalid_argument(
        fmt::format("WAL in {} was recovered without repair; recover with repair before writing", dir));
  std::unique_ptr<log_writer> w(new log_writer(e, std::move(dir), std::move(options)));
  w->next_sequence_ = recovered.next_sequence;
  w->written_sequence_ = w->durable_sequence_ = recovered.next_sequence - 1;
  w->replication_state_ = recovered.replication_state;
  w->last_fsync_ = w->options_.clock();
  MAGNETITE_TRY(e.create_dir(w->dir_));
  if (!recovered.last_segment) {
    MAGNETITE_TRY(w->create_segment(1, nullptr));
    return w;
  }
  std::string path = path_join(w->dir_, segment_file_name(*recovered.last_segment));
  auto f = e.open(path, open_mode::open_existing);
  if (!f) return f.error();
  auto size = (*f)->size();
  if (!size) return size.error();
  if (*size != recovered.last_segment_end)
    return status::invalid_argument(
        fmt::format("{} is {} bytes but recovery ended at {}: the log changed after it was recovered", path, *size,
                    recovered.last_segment_end));
  std::string header(segment_header_size, '\0');
  auto n = (*f)->read_at(0, header.size(), header.data());
  if (!n) return n.error();
  header.resize(*n);
  auto sh = check_segment_header(header, *recovered.last_segment, path);
  if (!sh) return sh.error();
  w->file_ = std::move(*f);
  w->segment_ = *recovered.last_segment;
  w->segment_size_ = *size;
  w->segment_reserved_ = *size;
  w->salt_ = sh->salt;
  return w;
}

status log_writer::check_usable() const {
  if (failure_.is_ok()) return status::ok();
  return status::failed(fmt::format("WAL writer in {} stopped after an earlier error ({}); recover and reopen", dir_,
                                    failure_.message()));
}

status log_writer::fail(status s) {
  if (failure_.is_ok()) failure_ = s;
  return s.with_category(status_category::ambiguous);
}

std::uint64_t log_writer::finish(std::size_t header_at, record_type type) {
  std::uint64_t seq = next_sequence_++;
  finish_frame(pending_, header_at, salt_, seq, type, next_follows_sync_ ? flag_follows_sync : 0);
  next_follows_sync_ = false;
  ++stats_.frames;
  return seq;
}

result<std::uint64_t> log_writer::append_put(std::string_view key, std::string_view value) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(limits::check_key(key));
  MAGNETITE_TRY(limits::check_value(value));
  std::size_t at = begin_frame(pending_);
  encode_put(pending_, key, value);
  return finish(at, record_type::put);
}

result<std::uint64_t> log_writer::append_delete(std::string_view key) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(limits::check_key(key));
  std::size_t at = begin_frame(pending_);
  encode_del(pending_, key);
  return finish(at, record_type::del);
}

result<std::uint64_t> log_writer::append_batch(std::span<const mutation_view> batch) {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(check_batch(batch));
  std::size_t at = begin_frame(pending_);
  encode_batch(pending_, batch);
  return finish(at, record_type::batch);
}

result<std::uint64_t> log_writer::append_replication_state(std::string_view payload) {
  MAGNETITE_TRY(check_usable());
  if (payload.size() > limits::max_replication_state_bytes)
    return status::invalid_argument(fmt::format("replication state of {} bytes exceeds the limit of {} bytes",
                                                payload.size(), limits::max_replication_state_bytes));
  std::size_t at = begin_frame(pending_);
  pending_.append(payload);
  replication_state_ = std::string(payload);
  return finish(at, record_type::replication_state);
}

std::uint64_t log_writer::reserve(file& f, std::uint64_t end, std::uint64_t reserved) {
  if (options_.preallocate == 0 || reserve_failed_ || end < reserved) return reserved;
  std::uint64_t chunk = options_.preallocate;
  std::uint64_t target = (end / chunk + 1) * chunk;
  // A failure leaves the size as it was or larger (zeros either way, which
  // recovery reads as the unwritten end): the frames are then written by
  // extending the file, which is slower, not less safe; a full disk or a
  // failing device shows up in that write or its fdatasync. No new attempt in
  // this segment (unsupported, or full: each group would pay for it).
  if (!f.preallocate(target).is_ok()) {
    reserve_failed_ = true;
    auto size = f.size();
    return size ? std::max(reserved, *size) : reserved;
  }
  return target;
}

status log_writer::write_pending() {
  if (pending_.empty()) return status::ok();
  segment_reserved_ = reserve(*file_, segment_size_ + pending_.size(), segment_reserved_);
  if (status s = file_->write_at(segment_size_, pending_); !s) return fail(std::move(s));
  segment_size_ += pending_.size();
  stats_.bytes += pending_.size();
  ++stats_.syncs;
  written_sequence_ = last_sequence();
  pending_.clear();
  if (pending_.capacity() > keep_buffer_capacity) pending_.shrink_to_fit();
  return status::ok();
}

status log_writer::fdatasync() {
  if (status s = file_->sync(); !s) return fail(std::move(s));
  ++stats_.fsyncs;
  durable_sequence_ = written_sequence_;
  last_fsync_ = options_.clock();
  next_follows_sync_ = pending_.empty();
  return status::ok();
}

status log_writer::sync() {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(write_pending());
  if (durable_sequence_ == written_sequence_) return status::ok();
  switch (options_.policy) {
    case fsync_policy::always:
      return fdatasync();
    case fsync_policy::commit_only:
      return status::ok();
    case fsync_policy::interval:
      if (options_.clock() - last_fsync_ >= options_.interval) return fdatasync();
      return status::ok();
  }
  return status::ok();
}

status log_writer::sync_durable() {
  MAGNETITE_TRY(check_usable());
  MAGNETITE_TRY(write_pending());
  if (durable_sequence_ == written_sequence_) return status::ok();
  return fdatasync();
}

status log_writer::seal() {
  MAGNETITE_TRY(write_pending());
  // The file's size, not segment_reserved_: a reservation that failed half way
  // may have grown the file without the writer knowing how far.
  auto size = file_->size();
  if (!size) return fail(size.error());
  bool cut = *size > segment_size_;
  if (cut) {
    // Only the last segment may end in reserved zeros (docs/formats/wal.md).
    if (status s = file_->truncate(segment_size_); !s) return fail(std::move(s));
    segment_reserved_ = segment_size_;
  }
  if (!cut && durable_sequence_ == written_sequence_) return status::ok();
  return fdatasync();
}

status log_writer::create_segment(std::uint64_t number, const commit_record* marker) {
  std::string path = path_join(dir_, segment_file_name(number));
  std::string temp = path_join(dir_, segment_temp_file_name(number));
  std::uint64_t salt = random_salt();
  std::string buf;
  encode_segment_header(buf, {number, salt});
  std::uint64_t seq = next_sequence_;
  // The first frame of a segment follows a durable predecessor.
  std::uint8_t flags = flag_follows_sync;
  if (marker) {
    std::size_t at = begin_frame(buf);
    encode_commit(buf, *marker);
    finish_frame(buf, at, salt, seq++, commit_type(*marker), flags);
    flags = 0;
  }
  if (replication_state_) {
    // The state survives the removal of the segments before this one.
    std::size_t at = begin_frame(buf);
    buf.append(*replication_state_);
    finish_frame(buf, at, salt, seq++, record_type::replication_state, flags);
  }
  // Written and synced under a temporary name, then renamed: recovery never sees
  // a segment whose marker is durable but whose carried state is not.
  auto f = env_.open(temp, open_mode::create_truncate);
  if (!f) return fail(f.error());
  if (status s = (*f)->append(buf); !s) return fail(std::move(s));
  // Reserved before the first sync: the reservation is durable with the header,
  // and the first groups' fdatasyncs change no size.
  reserve_failed_ = false;  // a new file: worth trying again
  std::uint64_t reserved = reserve(**f, buf.size(), buf.size());
  if (status s = (*f)->sync(); !s) return fail(std::move(s));
  if (status s = env_.rename(temp, path); !s) return fail(std::move(s));
  if (status s = env_.sync_dir(dir_); !s) return fail(std::move(s));
  // The handle still carries the temporary name, and every error of a later
  // write or fdatasync would name a file that no longer exists: write on
  // through a handle opened by the segment's name. If that open fails, the
  // old handle (same file) still works; only its errors are misnamed.
  if (auto named = env_.open(path, open_mode::open_existing)) f = std::move(named);
  file_ = std::move(*f);
  segment_ = number;
  segment_size_ = buf.size();
  segment_reserved_ = reserved;
  salt_ = salt;
  stats_.frames += seq - next_sequence_;
  stats_.bytes += buf.size();
  ++stats_.fsyncs;
  ++stats_.segments_created;
  next_sequence_ = seq;
  written_sequence_ = durable_sequence_ = last_sequence();
  next_follows_sync_ = true;
  last_fsync_ = options_.clock();
  return status::ok();
}

result<std::uint64_t> log_writer::begin_checkpoint() {
  MAGNETITE_TRY(check_usable());
  if (checkpoint_segment_)
    return status::invalid_argument(
        fmt::format("WAL in {}: a checkpoint begun at segment {} is not committed yet", dir_, *checkpoint_segment_));
  // The old segment is durable before its successor exists: recovery relies on
  // every segment but the last being sealed.
  MAGNETITE_TRY(seal());
  std::uint64_t covered = last_sequence();
  MAGNETITE_TRY(create_segment(segment_ + 1, nullptr));
  checkpoint_segment_ = segment_;
  checkpoint_covered_ = covered;
  return covered;
}

status log_writer::commit(const commit_record& marker) {
  MAGNETITE_TRY(check_usable());
  commit_record m = marker;
  std::uint64_t first_kept = 0;
  if (checkpoint_segment_) {
    // The second step: the marker goes after what was written meanwhile.
    m.covered_sequence = checkpoint_covered_;
    std::size_t at = begin_frame(pending_);
    encode_commit(pending_, m);
    finish(at, commit_type(m));
    MAGNETITE_TRY(write_pending());
    MAGNETITE_TRY(fdatasync());
    first_kept = *checkpoint_segment_;
    checkpoint_segment_.reset();
  } else {
    // Both steps at once: the marker begins the new segment (a sync fewer).
    MAGNETITE_TRY(seal());
    m.covered_sequence = last_sequence();
    MAGNETITE_TRY(create_segment(segment_ + 1, &m));
    first_kept = segment_;
  }
  // The marker is durable: the segments before the one the checkpoint began
  // hold only frames it covers. Failing to remove one loses nothing (recovery
  // reads past it to the marker, and the next commit tries again), so it does
  // not stop the writer.
  // Oldest first, each removal durable before the next: the segments left
  // after a crash are always a run up to the newest, never a run with a gap
  // (recovery reads from the oldest one left when no segment begins with a
  // marker, and a gap after its start is corruption).
  auto names = env_.list(dir_);
  if (!names) return status::ok();
  for (const auto& name : *names) {  // sorted
    auto num = parse_segment_file_name(name);
    if (!num || *num >= first_kept) continue;
    if (!env_.remove(path_join(dir_, name)).is_ok() || !env_.sync_dir(dir_).is_ok()) break;
    ++stats_.segments_removed;
  }
  return status::ok();
}

}  // namespace magnetite::wal
