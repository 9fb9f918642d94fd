#include "tree/tree_puller.h"

#include <fmt/format.h>

#include <algorithm>

#include "tree/node.h"

namespace magnetite::tree {

tree_puller::tree_puller(const hash128& root, holds_fn holds) : holds_(std::move(holds)) {
  if (!holds_(root)) {
    frontier_.push_back(root);
    seen_.insert(root);
    stats_.levels = 1;
  }
}

std::vector<hash128> tree_puller::next_request(std::size_t max_nodes) {
  std::vector<hash128> out;
  if (!broken_.is_ok()) return out;
  while (!frontier_.empty() && out.size() < max_nodes) {
    out.push_back(frontier_.front());
    frontier_.pop_front();
  }
  outstanding_ += out.size();
  if (!out.empty()) ++stats_.requests;
  return out;
}

status tree_puller::take(std::span<const hash128> asked, std::span<const std::string> encodings,
                         const import_fn& import) {
  MAGNETITE_TRY(broken_);
  auto broken = [&](status s) {
    broken_ = s;
    return s;
  };
  if (encodings.size() > asked.size() || asked.size() > outstanding_ || (!asked.empty() && encodings.empty()))
    return broken(status::corruption(fmt::format("peer answered {} nodes for {} asked ({} outstanding)",
                                                 encodings.size(), asked.size(), outstanding_)));
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    const std::string& bytes = encodings[i];
    if (hash128::of(bytes) != asked[i])
      return broken(status::corruption(fmt::format("peer sent {} bytes for node {} that hash to {}", bytes.size(),
                                                   asked[i].to_hex(), hash128::of(bytes).to_hex())));
    auto n = tree::node::decode(bytes);
    if (!n) return broken(n.error());
    ++stats_.nodes;
    stats_.bytes += bytes.size();
    if (n->is_leaf()) {
      if (status s = import(asked[i], bytes); !s) return broken(s);
      continue;
    }
    for (const auto& e : n->entries()) {
      auto ref = tree::child_ref::decode(e.value);
      if (!ref) return broken(ref.error());
      if (holds_(ref->hash) || !seen_.insert(ref->hash).second) continue;
      next_level_.push_back(ref->hash);
    }
    internal_.emplace_back(asked[i], bytes);
  }
  // What a short answer left out is asked for again, first, in order.
  for (std::size_t i = asked.size(); i-- > encodings.size();) frontier_.push_front(asked[i]);
  outstanding_ -= asked.size();
  if (frontier_.empty() && outstanding_ == 0 && !next_level_.empty()) {
    frontier_.assign(next_level_.begin(), next_level_.end());
    next_level_.clear();
    ++stats_.levels;
  }
  return status::ok();
}

status tree_puller::finish(const import_fn& import) {
  MAGNETITE_TRY(broken_);
  if (!done() || outstanding_ != 0) return status::invalid_argument("tree_puller::finish before the walk is done");
  // Walk order is top down, level by level: reversed, every node comes after
  // all of its children.
  for (auto it = internal_.rbegin(); it != internal_.rend(); ++it) MAGNETITE_TRY(import(it->first, it->second));
  internal_.clear();
  return status::ok();
}

namespace {

// Depth first, children before their parent: a node `to` holds is a
// subtree it holds, whenever the copy stops.
status copy_subtree(const hash128& h, std::uint64_t level, node_store& from, node_store& to,
                    std::unordered_set<hash128, hash128_hasher>& seen, pull_stats& stats, byte_pacer* pace) {
  if (to.contains(h) || !seen.insert(h).second) return status::ok();
  auto rec = from.copy_out(h);
  if (!rec) return rec.error();
  ++stats.nodes;
  stats.bytes += rec->raw.size();
  stats.levels = std::max(stats.levels, level);
  if (!rec->raw.empty() && rec->raw[0] != 0) {  // an internal node: its children first
    auto n = node::decode(rec->raw);
    if (!n) return n.error();
    for (const auto& e : n->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return ref.error();
      MAGNETITE_TRY(copy_subtree(ref->hash, level + 1, from, to, seen, stats, pace));
    }
  }
  MAGNETITE_TRY(to.copy_in(*rec));
  if (pace) pace->spent(rec->payload.size());
  return status::ok();
}

}  // namespace

result<pull_stats> pull_local(const hash128& root, node_store& from, node_store& to, byte_pacer* pace) {
  pull_stats stats;
  std::unordered_set<hash128, hash128_hasher> seen;
  MAGNETITE_TRY(copy_subtree(root, 0, from, to, seen, stats, pace));
  return stats;
}

}  // namespace magnetite::tree
