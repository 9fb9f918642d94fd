#include "magnetite/state/streams.h"

#include <fmt/format.h>

#include "actors/database_core.h"
#include "actors/state_storage.h"
#include "core/limits.h"
#include "state/errors.h"
#include "state/item_codec.h"
#include "state/layout.h"
#include "state/state_reader.h"

namespace magnetite::state {

namespace {
std::string describe(std::string_view stream) { return fmt::format("stream {:?}", stream); }

status check_name(std::string_view stream) {
  // The longest key a stream uses: an entry, 8 bytes past its prefix.
  std::size_t longest = stream_entries_prefix(stream).size() + 8;
  if (longest > limits::max_user_key_bytes)
    return mistake(fmt::format("stream name of {} bytes takes {} bytes encoded, over the key limit of {}",
                               stream.size(), longest, limits::max_user_key_bytes));
  return status::ok();
}
}  // namespace

streams::streams(database& db) : store_(&db.core()) {}

std::size_t streams::shard_of(std::string_view stream) const { return store_->shard_of(stream_routing(stream)); }

result<std::pair<std::uint64_t, std::uint64_t>> streams::meta(std::string_view stream) const {
  auto live = store_->read(shard_of(stream), stream_meta_key(stream));
  if (!live) return live.error();
  if (!*live) return std::pair<std::uint64_t, std::uint64_t>{0, 0};
  std::string what = describe(stream);
  auto found = state_value_of(**live, what);
  if (!found) return found.error();
  auto next = decode_stream_meta(found->body, what);
  if (!next) return next.error();
  return std::pair<std::uint64_t, std::uint64_t>{found->revision, *next};
}

result<std::uint64_t> streams::next_seq(std::string_view stream) const {
  MAGNETITE_TRY(check_name(stream));
  auto m = meta(stream);
  if (!m) return m.error();
  return m->second;
}

result<std::uint64_t> streams::append(std::string_view stream, std::span<const item> entries,
                                      std::uint64_t expected_seq, std::optional<std::chrono::nanoseconds> ttl,
                                      std::optional<deadline> d) {
  MAGNETITE_TRY(check_name(stream));
  if (entries.empty()) return mistake(fmt::format("{}: append of no entries", describe(stream)));
  // The meta is written in the same frame: one write more than the entries.
  if (entries.size() + 1 > limits::max_batch_mutations)
    return mistake(fmt::format("{}: append of {} entries exceeds the limit of {}", describe(stream), entries.size(),
                               limits::max_batch_mutations - 1));
  if (expected_seq > UINT64_MAX - entries.size())
    return mistake(fmt::format("{}: sequence numbers past 2^64 - 1", describe(stream)));
  if (ttl && ttl->count() <= 0) return mistake(fmt::format("ttl of {} ns: must be > 0", ttl->count()));
  // Entries are encoded before the stream's position is read, so an entry
  // that cannot be stored is refused as such at any expected_seq: a conflict
  // would have the caller retry what can never succeed.
  std::vector<batch_write> writes;
  writes.reserve(entries.size() + 1);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto stored = encode_item(entries[i], "a stream entry cannot be deleted; give it a ttl");
    if (!stored) return stored.error();
    writes.push_back({stream_entry_key(stream, expected_seq + i), std::move(*stored), ttl});
  }
  auto m = meta(stream);
  if (!m) return m.error();
  auto [meta_revision, next] = *m;
  auto conflict = [&](std::uint64_t at) {
    return status::make(status_code::conflict, status_category::transient,
                        fmt::format("conflict: {} is at seq {}, not {}", describe(stream), at, expected_seq));
  };
  if (next != expected_seq) return conflict(next);
  writes.push_back({stream_meta_key(stream), encode_stream_meta(expected_seq + entries.size()), std::nullopt});
  // The meta still at the revision read above proves next_seq is still
  // expected_seq: only appends write it, and each moves it forward.
  std::vector<state_check> checks{{stream_meta_key(stream), meta_revision}};
  auto out = store_->apply(shard_of(stream), std::move(checks), std::move(writes), d);
  if (!out) return after_handoff(out.error());
  if (out->failed_check) {
    // The refusal is answered after the group that beat it is published.
    auto now = meta(stream);
    return conflict(now ? now->second : expected_seq + 1);
  }
  return expected_seq;
}

result<std::vector<stream_entry>> streams::read(std::string_view stream, std::uint64_t from_seq,
                                                std::size_t limit) const {
  MAGNETITE_TRY(check_name(stream));
  if (limit < 1 || limit > max_read_limit)
    return mistake(fmt::format("read limit of {}: must be 1..{}", limit, max_read_limit));
  std::string prefix = stream_entries_prefix(stream);
  std::string first = stream_entry_key(stream, from_seq), end = prefix_successor(prefix);
  std::string what = fmt::format("{} entry", describe(stream));
  std::vector<stream_entry> out;
  while (out.size() < limit) {
    auto run = store_->read_range(shard_of(stream), first, end, limit - out.size());
    if (!run) return run.error();
    for (auto& [key, live] : run->entries) {
      auto seq = stream_seq_of(prefix, key);
      if (!seq) return status::corruption(fmt::format("{}: a key of {} bytes is not an entry key", what, key.size()));
      auto found = item_of(live, what);
      if (!found) return found.error();
      out.push_back({*seq, std::move(found->value)});
    }
    if (!run->resume) break;
    first = std::move(*run->resume);
  }
  return out;
}

}  // namespace magnetite::state
