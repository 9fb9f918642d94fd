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

merged_cursor::merged_cursor(std::vector<std::shared_ptr<const read_view>> views, std::string from, std::string to,
                           std::uint64_t now_ns, std::size_t chunk)
    : to_(std::move(to)), now_ns_(now_ns), chunk_(std::max<std::size_t>(chunk, 1)) {
  for (auto& v : views) sources_.push_back({std::move(v), {}, from, false});
}

status merged_cursor::refill(source& s) {
  auto c = read_range_chunk(*s.view, s.resume, to_, chunk_, now_ns_);
  if (!c) return c.error();
  for (auto& e : c->entries) s.buffered.push_back(std::move(e));
  s.exhausted = !c->more;
  // The next chunk starts just past the last key read: the smallest key
  // greater than it is the key with a zero byte appended.
  if (!s.buffered.empty()) s.resume = s.buffered.back().first + '\0';
  return status::ok();
}

result<bool> merged_cursor::next() {
  source* best = nullptr;
  for (auto& s : sources_) {
    if (s.buffered.empty() && !s.exhausted) MAGNETITE_TRY(refill(s));
    if (s.buffered.empty()) continue;
    if (!best || s.buffered.front().first < best->buffered.front().first) best = &s;
  }
  if (!best) return false;
  current_ = std::move(best->buffered.front());
  best->buffered.pop_front();
  return true;
}

}  // namespace magnetite
