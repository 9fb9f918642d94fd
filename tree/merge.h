// merge: three-way merge of two descendants of a common root.
//
// The changes base->ours and base->theirs are found with diff (so identical
// subtrees are never read) and walked together by key. A key changed on one
// side only takes that side's change; a key changed the same way on both sides
// takes it once; a key changed differently on both sides goes to the resolver,
// whose answer (a value, or nullopt to delete) is taken, or whose error aborts
// the merge. The result is `ours` with the theirs-side outcome applied, so every
// subtree ours shares with the result is kept whole. Cost grows with the
// changes on both sides times the depth.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "tree/prolly_tree.h"

namespace magnetite::tree {

using merge_resolver = std::function<result<std::optional<std::string>>(
    std::string_view key, const std::optional<std::string>& base, const std::optional<std::string>& ours,
    const std::optional<std::string>& theirs)>;

result<hash128> merge(prolly_tree& tree, const hash128& base, const hash128& ours, const hash128& theirs,
                      const merge_resolver& resolve);

}  // namespace magnetite::tree
