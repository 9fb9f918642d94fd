// diff, missing and merge: checked against models, and diff's cost counted.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <set>

#include "tree/diff.h"
#include "tree/merge.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::tree;

namespace {

using model = testing::tree_model;
using testing::must;
using testing::small_nodes;

hash128 build(prolly_tree& t, const model& m) { return must(t.build(testing::entries_of(m))); }

// Random edits of a model: about `n` keys put or deleted.
model mutate(const model& base, std::mt19937_64& rng, int n, int space) {
  model m = base;
  for (int i = 0; i < n; ++i) {
    std::string k = fmt::format("k{:07}", rng() % space);
    if (rng() % 3 == 0) m.erase(k);
    else m[k] = fmt::format("v{}", rng() % 1000);
  }
  return m;
}

std::vector<diff_entry> diff_all(node_source& s, const hash128& a, const hash128& b) {
  std::vector<diff_entry> out;
  REQUIRE(diff(s, a, b, [&](const diff_entry& d) {
            out.push_back(d);
            return true;
          }).is_ok());
  return out;
}

}  // namespace

TEST_CASE("diff: agrees with a model diff, and applied to a gives b") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    memory_nodes store;
    prolly_tree t(store, small_nodes);
    model a = mutate({}, rng, 1 + static_cast<int>(rng() % 3000), 5000);
    model b = mutate(a, rng, static_cast<int>(rng() % 200), 5000);
    hash128 ra = build(t, a), rb = build(t, b);
    auto d = diff_all(store, ra, rb);
    std::vector<diff_entry> want;
    std::set<std::string> keys;
    for (auto& [k, _] : a) keys.insert(k);
    for (auto& [k, _] : b) keys.insert(k);
    for (const auto& k : keys) {
      auto ia = a.find(k), ib = b.find(k);
      if (ia == a.end()) want.push_back({diff_entry::kind::added, k, std::nullopt, ib->second});
      else if (ib == b.end()) want.push_back({diff_entry::kind::removed, k, ia->second, std::nullopt});
      else if (ia->second != ib->second) want.push_back({diff_entry::kind::changed, k, ia->second, ib->second});
    }
    REQUIRE(d.size() == want.size());
    std::vector<edit> edits;
    for (std::size_t i = 0; i < d.size(); ++i) {
      CHECK(d[i].what == want[i].what);
      CHECK(d[i].key == want[i].key);
      CHECK(d[i].old_value == want[i].old_value);
      CHECK(d[i].new_value == want[i].new_value);
      edits.push_back({d[i].key, d[i].new_value});
    }
    CHECK(must(t.apply(ra, edits)) == rb);
    CHECK(diff_all(store, ra, ra).empty());
  }
}

TEST_CASE("diff: two 1 000 000-entry trees that differ in 100 keys read at most 2 x 100 x depth nodes") {
  memory_nodes store;
  prolly_tree t(store);  // default 4 KiB nodes
  std::vector<entry> es;
  es.reserve(1000000);
  for (int i = 0; i < 1000000; ++i) es.push_back({fmt::format("key{:012}", i * 2), std::string(100, 'v')});
  hash128 a = must(t.build(es));
  std::mt19937_64 rng(77);
  std::map<std::string, std::optional<std::string>> changes;
  while (changes.size() < 100) {
    std::uint64_t i = rng() % 1000000;
    switch (changes.size() % 3) {
      case 0: changes[es[i].key] = std::string(100, 'w'); break;           // changed
      case 1: changes[es[i].key] = std::nullopt; break;                    // removed
      default: changes[fmt::format("key{:012}", i * 2 + 1)] = "new"; break;  // added
    }
  }
  std::vector<edit> edits;
  for (auto& [k, v] : changes) edits.push_back({k, v});
  hash128 b = must(t.apply(a, edits));
  int depth = t.depth(a).value();
  store.reset_counters();
  auto d = diff_all(store, a, b);
  CHECK(d.size() == 100);
  std::uint64_t reads = store.reads();
  MESSAGE(fmt::format("diff read {} nodes (depth {}, bound {})", reads, depth, 2 * 100 * depth));
  CHECK(reads <= static_cast<std::uint64_t>(2 * 100 * depth));
}

TEST_CASE("missing: exactly the nodes the other store lacks, children before parents") {
  std::mt19937_64 rng(3);
  memory_nodes src;
  prolly_tree t(src, small_nodes);
  model a = mutate({}, rng, 8000, 10000);
  model b = mutate(a, rng, 20, 10000);
  hash128 ra = build(t, a);
  memory_nodes dst;  // holds tree a only
  REQUIRE(missing(src, ra, [&](const hash128& h) { return dst.contains(h); },
                  [&](const hash128& h, const node& n) {
                    CHECK(must(dst.write(n)) == h);
                    return status::ok();
                  }).is_ok());
  hash128 rb = build(t, b);
  std::size_t before = dst.size();
  std::uint64_t sent = 0;
  REQUIRE(missing(src, rb, [&](const hash128& h) { return dst.contains(h); },
                  [&](const hash128& h, const node& n) {
                    // Every child is already there: the receiver never holds a
                    // node whose subtree is incomplete.
                    if (!n.is_leaf())
                      for (const auto& e : n.entries()) CHECK(dst.contains(child_ref::decode(e.value)->hash));
                    CHECK_FALSE(dst.contains(h));
                    CHECK(must(dst.write(n)) == h);
                    ++sent;
                    return status::ok();
                  }).is_ok());
  CHECK(sent > 0);
  CHECK(dst.size() == before + sent);
  // A small change ships few nodes: at most two a level per changed key.
  CHECK(sent <= static_cast<std::uint64_t>(2 * 20 * t.depth(rb).value()));
  CHECK(sent < before / 2);
  // Tree b reads back entirely from the receiver.
  prolly_tree td(dst, small_nodes);
  for (auto& [k, v] : b) CHECK(td.get(rb, k).value() == v);
  CHECK(td.count(rb).value() == b.size());
}

TEST_CASE("merge: agrees with a model three-way merge") {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    memory_nodes store;
    prolly_tree t(store, small_nodes);
    model base = mutate({}, rng, 2000, 3000);
    model ours = mutate(base, rng, static_cast<int>(rng() % 300), 3000);
    model theirs = mutate(base, rng, static_cast<int>(rng() % 300), 3000);
    auto opt = [](const model& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? std::optional<std::string>{} : std::optional<std::string>(it->second);
    };
    int conflicts = 0;
    merge_resolver resolver = [&](std::string_view, const std::optional<std::string>&,
                                  const std::optional<std::string>& o,
                                  const std::optional<std::string>& th) -> result<std::optional<std::string>> {
      ++conflicts;
      if (!o && !th) return std::optional<std::string>{};
      return std::optional<std::string>(o.value_or("-") + "|" + th.value_or("-"));
    };
    // The model: per key, the three-way rule.
    std::set<std::string> keys;
    for (const auto* m : {&base, &ours, &theirs})
      for (auto& [k, _] : *m) keys.insert(k);
    model want;
    int want_conflicts = 0;
    for (const auto& k : keys) {
      auto b = opt(base, k), o = opt(ours, k), th = opt(theirs, k);
      std::optional<std::string> v;
      if (o == th) v = o;
      else if (o == b) v = th;
      else if (th == b) v = o;
      else {
        ++want_conflicts;
        v = o.value_or("-") + "|" + th.value_or("-");
      }
      if (v) want[k] = *v;
    }
    hash128 merged = must(merge(t, build(t, base), build(t, ours), build(t, theirs), resolver));
    CHECK(merged == build(t, want));
    CHECK(conflicts == want_conflicts);
  }
}

TEST_CASE("merge: a resolver's error aborts the merge") {
  memory_nodes store;
  prolly_tree t(store, small_nodes);
  model base{{"a", "1"}}, ours{{"a", "2"}}, theirs{{"a", "3"}};
  auto r = merge(t, build(t, base), build(t, ours), build(t, theirs),
                 [](std::string_view k, auto&, auto&, auto&) -> result<std::optional<std::string>> {
                   return status::make(status_code::conflict, status_category::permanent,
                                       fmt::format("both sides changed {}", k));
                 });
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::conflict);
}
