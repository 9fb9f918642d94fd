// diff and missing: comparing trees by their hashes.
//
// diff(a, b) streams, in key order, every key added, removed or changed from
// root a to root b. Both trees are walked together as stacks of pending items
// (subtree references or entries); two references with the same hash are
// skipped without reading them, so the nodes read grow with the size of the
// difference times the depth, not with the trees. It relies on history
// independence: equal content between the same boundaries is the same node.
//
// missing(root, has) streams the nodes of a root that another store lacks,
// children before parents, so the receiver can store each node as it arrives
// and never hold a node whose children it does not have. A node the other side
// has is taken to have its whole subtree there (stores only ever hold complete
// subtrees).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "magnetite/history.h"
#include "tree/node_source.h"

namespace magnetite::tree {

using diff_entry = magnetite::key_change;  // <magnetite/history.h>

// fn returns false to stop early.
status diff(node_source& src, const hash128& a, const hash128& b,
            const std::function<bool(const diff_entry&)>& fn);

status missing(node_source& src, const hash128& root, const std::function<bool(const hash128&)>& has,
               const std::function<status(const hash128&, const node&)>& fn);

}  // namespace magnetite::tree
