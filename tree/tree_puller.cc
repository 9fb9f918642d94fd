#include "tree/tree_puller.h"

#include <fmt/format.h>

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
  if (asked.size() != encodings.size() || asked.size() > outstanding_)
    return broken(status::corruption(fmt::format("peer answered {} nodes for {} asked ({} outstanding)",
                                                 encodings.size(), asked.size(), outstanding_)));
  for (std::size_t i = 0; i < asked.size(); ++i) {
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

result<pull_stats> pull_local(const hash128& root, node_source& from, node_store& to) {
  tree_puller p(root, [&](const hash128& h) { return to.contains(h); });
  auto import = [&](const hash128& h, std::string_view encoding) -> status {
    auto n = node::decode(encoding);
    if (!n) return n.error();
    auto written = to.write(*n);
    if (!written) return written.error();
    if (*written != h) return status::corruption(fmt::format("node {} was stored as {}", h, *written));
    return status::ok();
  };
  std::vector<std::string> encodings;
  while (!p.done()) {
    auto want = p.next_request(256);
    encodings.clear();
    for (const auto& h : want) {
      auto n = from.read(h);
      if (!n) return n.error();
      encodings.emplace_back((*n)->encode());
    }
    MAGNETITE_TRY(p.take(want, encodings, import));
  }
  MAGNETITE_TRY(p.finish(import));
  return p.stats();
}

}  // namespace magnetite::tree
