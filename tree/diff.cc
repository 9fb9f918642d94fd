#include "tree/diff.h"

#include <vector>

namespace magnetite::tree {

namespace {

// One pending item of a walk: a subtree not yet read, or a leaf entry.
struct item {
  bool is_ref = false;
  std::uint8_t level = 0;  // of the referenced node
  hash128 hash;            // ref only
  entry e;                 // ref: e.key is the subtree's last key; entry: the entry
};

// The items of a tree still to visit; back() is the next in key order.
class walk {
 public:
  walk(node_source& src) : src_(src) {}

  status start(const hash128& root) {
    auto n = src_.read(root);
    if (!n) return n.error();
    push_children(**n);
    return status::ok();
  }

  bool empty() const noexcept { return stack_.empty(); }
  item& head() noexcept { return stack_.back(); }
  void pop() { stack_.pop_back(); }

  // Replaces the head (a reference) by the items of the node it names.
  status expand() {
    item ref = std::move(stack_.back());
    stack_.pop_back();
    auto n = src_.read(ref.hash);
    if (!n) return n.error();
    if ((*n)->level() != ref.level || (*n)->entries().empty())
      return status::corruption(fmt::format("tree node {} is not the level-{} node its parent names", ref.hash,
                                            static_cast<int>(ref.level)));
    push_children(**n);
    return status::ok();
  }

 private:
  void push_children(const node& n) {
    auto entries = n.entries();
    for (std::size_t i = entries.size(); i-- > 0;) {
      entry_view e = entries[i];
      item x;
      x.e = e.owned();
      if (!n.is_leaf()) {
        auto ref = child_ref::decode(e.value);
        x.is_ref = true;
        x.level = static_cast<std::uint8_t>(n.level() - 1);
        x.hash = ref ? ref->hash : hash128{};  // decode() already validated stored nodes
      }
      stack_.push_back(std::move(x));
    }
  }

  node_source& src_;
  std::vector<item> stack_;
};

}  // namespace

status diff(node_source& src, const hash128& a, const hash128& b,
            const std::function<bool(const diff_entry&)>& fn) {
  if (a == b) return status::ok();
  walk wa(src), wb(src);
  MAGNETITE_TRY(wa.start(a));
  MAGNETITE_TRY(wb.start(b));
  auto emit = [&](diff_entry::kind k, const entry* before, const entry* after) {
    diff_entry d;
    d.what = k;
    d.key = before ? before->key : after->key;
    if (before) d.old_value = before->value;
    if (after) d.new_value = after->value;
    return fn(d);
  };
  for (;;) {
    if (wa.empty() && wb.empty()) return status::ok();
    if (wb.empty()) {  // the rest of a was removed
      if (wa.head().is_ref) MAGNETITE_TRY(wa.expand());
      else if (!emit(diff_entry::kind::removed, &wa.head().e, nullptr)) return status::ok();
      else wa.pop();
      continue;
    }
    if (wa.empty()) {  // the rest of b was added
      if (wb.head().is_ref) MAGNETITE_TRY(wb.expand());
      else if (!emit(diff_entry::kind::added, nullptr, &wb.head().e)) return status::ok();
      else wb.pop();
      continue;
    }
    item& x = wa.head();
    item& y = wb.head();
    if (x.is_ref && y.is_ref) {
      if (x.hash == y.hash) {  // the same subtree on both sides: skip it unread
        wa.pop();
        wb.pop();
      } else if (x.level != y.level) {
        MAGNETITE_TRY(x.level > y.level ? wa.expand() : wb.expand());
      } else if (x.e.key < y.e.key) {
        MAGNETITE_TRY(wa.expand());  // the one that ends first
      } else if (y.e.key < x.e.key) {
        MAGNETITE_TRY(wb.expand());
      } else {
        MAGNETITE_TRY(wa.expand());
        MAGNETITE_TRY(wb.expand());
      }
      continue;
    }
    if (x.is_ref) {
      MAGNETITE_TRY(wa.expand());
      continue;
    }
    if (y.is_ref) {
      MAGNETITE_TRY(wb.expand());
      continue;
    }
    if (x.e.key < y.e.key) {
      if (!emit(diff_entry::kind::removed, &x.e, nullptr)) return status::ok();
      wa.pop();
    } else if (y.e.key < x.e.key) {
      if (!emit(diff_entry::kind::added, nullptr, &y.e)) return status::ok();
      wb.pop();
    } else {
      if (x.e.value != y.e.value && !emit(diff_entry::kind::changed, &x.e, &y.e)) return status::ok();
      wa.pop();
      wb.pop();
    }
  }
}

namespace {
status missing_from(node_source& src, const hash128& h, const std::function<bool(const hash128&)>& has,
                    const std::function<status(const hash128&, const node&)>& fn) {
  if (has(h)) return status::ok();
  auto n = src.read(h);
  if (!n) return n.error();
  if (!(*n)->is_leaf()) {
    for (const auto& e : (*n)->entries()) {
      auto ref = child_ref::decode(e.value);
      if (!ref) return ref.error();
      MAGNETITE_TRY(missing_from(src, ref->hash, has, fn));
    }
  }
  return fn(h, **n);
}
}  // namespace

status missing(node_source& src, const hash128& root, const std::function<bool(const hash128&)>& has,
               const std::function<status(const hash128&, const node&)>& fn) {
  return missing_from(src, root, has, fn);
}

}  // namespace magnetite::tree
