#include "ttl/expiry_index.h"

namespace magnetite::ttl {

void expiry_index::set(std::string_view key, std::uint64_t deadline_ns) {
  std::string k(key);
  auto it = by_key_.find(k);
  if (it != by_key_.end()) {
    if (it->second == deadline_ns) return;
    by_deadline_.erase({it->second, k});
    it->second = deadline_ns;
  } else {
    by_key_.emplace(k, deadline_ns);
  }
  by_deadline_.emplace(deadline_ns, std::move(k));
}

void expiry_index::erase(std::string_view key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  by_deadline_.erase({it->second, it->first});
  by_key_.erase(it);
}

std::optional<std::uint64_t> expiry_index::deadline(std::string_view key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint64_t> expiry_index::earliest() const {
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first;
}

std::vector<expired_key> expiry_index::take_expired(std::uint64_t now_ns, std::size_t limit) {
  std::vector<expired_key> out;
  while (!by_deadline_.empty() && out.size() < limit && by_deadline_.begin()->first <= now_ns) {
    auto node = by_deadline_.extract(by_deadline_.begin());
    by_key_.erase(node.value().second);
    out.push_back({std::move(node.value().second), node.value().first});
  }
  return out;
}

}  // namespace magnetite::ttl
