// tree_node: tree node decoding (tree::node::decode, child_ref::decode) and
// search over the decoded node (its in-memory search index).
//
// Input: the bytes given to node::decode (and to child_ref::decode).
// Invariants: decoding stays inside the bytes and fails only with corruption;
// a node it accepts is canonical: rebuilding it from its entries gives the same
// bytes; its keys strictly increase; lower_bound over the search index agrees
// with a plain binary search for every key and for probes between, before and
// after them; search_leaf finds each key of a leaf with its value (and refuses
// a node that is not a leaf); every child reference of an internal node
// decodes and re-encodes to itself; copies and moves keep the views valid.
#include <algorithm>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "tree/node.h"

using namespace magnetite;
using namespace magnetite::fuzz;
using magnetite::tree::node;

namespace {

std::size_t reference_lower_bound(const std::vector<std::string>& keys, std::string_view k) {
  return static_cast<std::size_t>(
      std::lower_bound(keys.begin(), keys.end(), k, [](const std::string& a, std::string_view b) { return a < b; }) -
      keys.begin());
}

void check_search(const node& n, const std::vector<std::string>& keys, std::string_view probe) {
  std::size_t want = reference_lower_bound(keys, probe);
  FUZZ_CHECK(n.lower_bound(probe) == want);
  FUZZ_CHECK(n.search_index().lower_bound(probe) == want);
  std::string value;
  auto found = tree::search_leaf(n.search_index(), hash128{}, probe, value);
  if (!n.is_leaf()) {
    FUZZ_CHECK(!found.is_ok() && found.error().code() == status_code::corruption);
    return;
  }
  FUZZ_CHECK(found.is_ok());
  bool present = want < keys.size() && keys[want] == probe;
  FUZZ_CHECK(*found == present);
  if (present) FUZZ_CHECK(value == n.entries()[want].value);
}

void check_views(const node& n, std::string_view encoding) {
  FUZZ_CHECK(n.encode() == encoding);
  auto ix = n.search_index();
  FUZZ_CHECK(ix.size() == n.entries().size() && ix.level() == n.level());
  for (std::size_t i = 0; i < ix.size(); ++i) {
    FUZZ_CHECK(ix.entry(i).key == n.entries()[i].key);
    FUZZ_CHECK(ix.entry(i).value == n.entries()[i].value);
  }
}

}  // namespace

MAGNETITE_FUZZ_TARGET(tree_node) {
  std::string_view in = as_view(data, size);

  if (auto r = tree::child_ref::decode(in))
    FUZZ_CHECK(r->encode() == in);
  else
    FUZZ_CHECK(r.error().code() == status_code::corruption);

  auto n = node::decode(in);
  if (!n) {
    FUZZ_CHECK(n.error().code() == status_code::corruption);
    return 0;
  }
  check_views(*n, in);

  std::vector<tree::entry> owned;
  std::vector<std::string> keys;
  for (const auto& e : n->entries()) {
    owned.push_back(e.owned());
    keys.push_back(std::string(e.key));
  }
  for (std::size_t i = 1; i < keys.size(); ++i) FUZZ_CHECK(keys[i - 1] < keys[i]);
  for (const auto& k : keys) FUZZ_CHECK(!k.empty());
  node rebuilt(n->level(), owned);
  FUZZ_CHECK(rebuilt.encode() == in);  // canonical: one encoding per node

  std::uint64_t total = 0;
  if (!n->is_leaf()) {
    for (const auto& e : n->entries()) {
      auto r = tree::child_ref::decode(e.value);
      FUZZ_CHECK(r.is_ok());
      FUZZ_CHECK(r->encode() == e.value);
      total += r->count;
    }
    FUZZ_CHECK(n->count() == total);
  } else {
    FUZZ_CHECK(n->count() == keys.size());
  }

  // Every key, and probes around each: shorter, longer, one step either side.
  check_search(*n, keys, "");
  check_search(*n, keys, std::string(9, '\xff'));
  for (const auto& k : keys) {
    check_search(*n, keys, k);
    check_search(*n, keys, k.substr(0, k.size() - 1));
    check_search(*n, keys, k + '\0');
    check_search(*n, keys, k + "\xff\xff\xff\xff\xff\xff\xff\xff\xff");
    std::string up = k, down = k;
    if (static_cast<unsigned char>(up.back()) != 0xff) {
      up.back() = static_cast<char>(static_cast<unsigned char>(up.back()) + 1);
      check_search(*n, keys, up);
    }
    if (down.back() != '\0') {
      down.back() = static_cast<char>(static_cast<unsigned char>(down.back()) - 1);
      check_search(*n, keys, down);
    }
  }

  // Copies and moves rebuild or keep the views.
  node copy = *n;
  check_views(copy, in);
  node moved = std::move(copy);
  check_views(moved, in);
  node assigned;
  assigned = moved;
  check_views(assigned, in);
  assigned = std::move(moved);
  check_views(assigned, in);
  return 0;
}
