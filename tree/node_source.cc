#include "tree/node_source.h"

namespace magnetite::tree {

node_source::node_source() {
  static std::atomic<std::uint64_t> next{1};
  id_ = next.fetch_add(1, std::memory_order_relaxed);
}

result<bool> node_source::leaf_get(const hash128& leaf, std::string_view key, std::string& value) {
  auto n = read(leaf);
  if (!n) return n.error();
  return search_leaf((*n)->search_index(), leaf, key, value);
}

result<node_ptr> memory_nodes::read(const hash128& h) {
  ++reads_;
  std::lock_guard lk(mu_);
  auto it = nodes_.find(h);
  if (it == nodes_.end()) return status::not_found(fmt::format("tree node {} is not stored", h));
  return it->second;
}

result<hash128> memory_nodes::write(const node& n) {
  std::string_view bytes = n.encode();
  hash128 h = hash128::of(bytes);
  std::lock_guard lk(mu_);
  if (nodes_.emplace(h, std::make_shared<const node>(n)).second) {
    ++writes_;
    bytes_written_ += bytes.size();
  }
  return h;
}

std::size_t memory_nodes::size() const {
  std::lock_guard lk(mu_);
  return nodes_.size();
}

bool memory_nodes::contains(const hash128& h) const {
  std::lock_guard lk(mu_);
  return nodes_.count(h) != 0;
}

}  // namespace magnetite::tree
