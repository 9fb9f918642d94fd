#include "tree/cursor.h"

#include <algorithm>

namespace magnetite::tree {

namespace {
result<node_ptr> load_child(node_source& src, const node& parent, std::size_t i) {
  auto ref = child_ref::decode(parent.entries()[i].value);
  if (!ref) return ref.error();
  auto child = src.read(ref->hash);
  if (!child) return child.error();
  if ((*child)->level() + 1 != parent.level() || (*child)->entries().empty())
    return status::corruption(fmt::format("tree node {} has level {} under a node of level {}", ref->hash,
                                          (*child)->level(), parent.level()));
  return child;
}
}  // namespace

result<cursor> cursor::seek(node_source& src, const node_ptr& root, std::uint8_t level, std::string_view key) {
  if (root->level() < level) return status::invalid_argument("cursor level above the root");
  cursor c(src);
  c.path_.push_back({root, 0});
  while (c.node().level() > level) {
    std::size_t i = std::min(c.node().lower_bound(key), c.node().entries().size() - 1);
    c.path_.back().i = i;
    auto child = load_child(src, c.node(), i);
    if (!child) return child.error();
    c.path_.push_back({std::move(*child), 0});
  }
  c.path_.back().i = c.node().lower_bound(key);
  c.settle();
  return c;
}

result<cursor> cursor::first(node_source& src, const node_ptr& root) {
  cursor c(src);
  c.path_.push_back({root, 0});
  MAGNETITE_TRY(c.descend(0, true));
  c.settle();
  return c;
}

result<cursor> cursor::last(node_source& src, const node_ptr& root) {
  cursor c(src);
  c.path_.push_back({root, root->entries().empty() ? 0 : root->entries().size() - 1});
  MAGNETITE_TRY(c.descend(0, false));
  c.settle();
  return c;
}

// From the current frame, descends to `level` along the leftmost (rightmost)
// children; the bottom frame's index is its first (last) entry.
status cursor::descend(std::uint8_t level, bool leftmost) {
  for (;;) {
    frame& f = path_.back();
    f.i = leftmost || f.n->entries().empty() ? 0 : f.n->entries().size() - 1;
    if (f.n->level() <= level) return status::ok();
    auto child = load_child(*src_, *f.n, f.i);
    if (!child) return child.error();
    path_.push_back({std::move(*child), 0});
  }
}

bool cursor::at_last_node() const noexcept {
  for (std::size_t d = 0; d + 1 < path_.size(); ++d)
    if (path_[d].i + 1 < path_[d].n->entries().size()) return false;
  return true;
}

result<bool> cursor::next_node() { return step_node(true); }
result<bool> cursor::prev_node() { return step_node(false); }

// Up to the deepest ancestor that has a sibling that way, over to it, and down
// its nearest edge to the level we were on.
result<bool> cursor::step_node(bool forward) {
  std::uint8_t level = node().level();
  for (std::size_t d = path_.size() - 1; d-- > 0;) {
    frame& f = path_[d];
    if (forward ? f.i + 1 < f.n->entries().size() : f.i > 0) {
      path_.resize(d + 1);
      forward ? ++path_[d].i : --path_[d].i;
      auto child = load_child(*src_, *path_[d].n, path_[d].i);
      if (!child) return child.error();
      path_.push_back({std::move(*child), 0});
      MAGNETITE_TRY(descend(level, forward));
      return true;
    }
  }
  return false;
}

std::optional<std::string_view> cursor::parent_ref() const {
  if (path_.size() < 2) return std::nullopt;
  const frame& p = path_[path_.size() - 2];
  return std::string_view(p.n->entries()[p.i].value);
}

status cursor::next() {
  frame& f = path_.back();
  if (before_begin_) {
    before_begin_ = false;  // the bottom frame is still the first node
  } else if (f.i < f.n->entries().size() && ++f.i == f.n->entries().size()) {
    auto moved = next_node();  // resets the index to 0 when it moves
    if (!moved) return moved.error();
  }
  settle();
  return status::ok();
}

status cursor::prev() {
  frame& f = path_.back();
  if (before_begin_) return status::ok();
  if (f.i > 0) {
    --f.i;
  } else {
    auto moved = prev_node();  // sets the index to the last entry when it moves
    if (!moved) return moved.error();
    if (!*moved) before_begin_ = true;
  }
  settle();
  return status::ok();
}

}  // namespace magnetite::tree
