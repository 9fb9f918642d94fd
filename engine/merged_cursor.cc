#include "engine/merged_cursor.h"

#include "engine/keyspace.h"
#include "ttl/envelope.h"

namespace magnetite {

result<range_chunk> read_range_chunk(const read_view& view, std::string_view from, std::string_view to,
                                     std::size_t limit, std::uint64_t now_ns) {
  range_chunk out;
  status bad;
  status s = view.scan(keyspace::data_key(from), to.empty() ? keyspace::data_end() : keyspace::data_key(to),
                       [&](std::string_view k, std::string_view stored) {
                         auto v = ttl::live_value(stored, now_ns);
                         if (!v) {
                           bad = v.error();
                           return false;
                         }
                         if (!*v) return true;  // expired
                         if (out.entries.size() == limit) {
                           out.more = true;
                           return false;
                         }
                         out.entries.emplace_back(std::string(keyspace::user_key_of(k)), std::move(**v));
                         return true;
                       });
  MAGNETITE_TRY(s);
  MAGNETITE_TRY(bad);
  return out;
}

status shard_chunks::read_chunk() {
  auto c = read_range_chunk(*view_, resume_, to_, chunk_, now_ns_);
  if (!c) return c.error();
  for (auto& e : c->entries) buffered_.push_back(std::move(e));
  exhausted_ = !c->more;
  // The next chunk starts just past the last key read: the smallest key
  // greater than it is the key with a zero byte appended.
  if (!buffered_.empty()) resume_ = buffered_.back().first + '\0';
  return status::ok();
}

merged_cursor::merged_cursor(std::vector<std::shared_ptr<const read_view>> views, std::string from, std::string to,
                             std::uint64_t now_ns, std::size_t chunk) {
  chunk = std::max<std::size_t>(chunk, 1);
  shards_.reserve(views.size());
  for (auto& v : views) shards_.emplace_back(std::move(v), from, to, now_ns, chunk);
}

result<bool> merged_cursor::next() {
  if (!merge_) {
    for (auto& s : shards_) MAGNETITE_TRY(s.fill());
    merge_.emplace(std::move(shards_), scan_direction::forward, equal_keys::all);
  }
  MAGNETITE_TRY(merge_->next());
  if (!merge_->valid()) return false;
  // The entry moves out; the shard steps past it at the next next().
  current_ = std::move(merge_->top().front());
  return true;
}

}  // namespace magnetite
