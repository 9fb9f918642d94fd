// Shared by the tree tests: a std::map model of a tree's content, random edits
// applied to both, and `must` (must.h).
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/support/must.h"
#include "tree/prolly_tree.h"

namespace magnetite::testing {

using tree_model = std::map<std::string, std::string>;

// Small nodes, so a few thousand entries make trees several levels deep.
inline const tree::chunk_policy small_nodes{256, 64, 1024};

inline std::vector<tree::entry> entries_of(const tree_model& m) {
  std::vector<tree::entry> out;
  for (auto& [k, v] : m) out.push_back({k, v});
  return out;
}

inline std::string model_key(std::uint64_t i) { return fmt::format("k{:08}", i); }

inline std::string random_value(std::mt19937_64& rng) {
  std::string v(rng() % 60, '\0');
  for (auto& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

// Applies about `size` random puts and deletes of keys below `space` to the tree
// and to the model; returns the new root. Keys and values come from the given
// functions (tests that count bytes choose their own).
inline hash128 random_batch(tree::prolly_tree& t, hash128 root, tree_model& m, std::mt19937_64& rng, int space,
                            int size, std::string (*key_fn)(std::uint64_t) = model_key,
                            std::string (*value_fn)(std::mt19937_64&) = random_value) {
  std::map<std::string, std::optional<std::string>> batch;
  for (int i = 0; i < size; ++i) {
    std::string k = key_fn(rng() % space);
    if (rng() % 4 == 0) batch[k] = std::nullopt;
    else batch[k] = value_fn(rng);
  }
  std::vector<tree::edit> edits;
  for (auto& [k, v] : batch) {
    edits.push_back({k, v});
    if (v) m[k] = *v;
    else m.erase(k);
  }
  return must(t.apply(root, edits));
}

}  // namespace magnetite::testing
