// read_view: an immutable snapshot of one shard, readable from any thread.
//
// A view is the shard's committed tree (a root in its node store) plus the
// writes made since that checkpoint: in the shard's memtables, newest
// first (the active one up to the sequence of its last durable group, and
// the one a background checkpoint is writing, if any, whole), and then in
// the sorted runs checkpoints wrote and no fold has taken into the tree yet
// (sorted_run.h), newest first.
// The shard actor publishes a new view after each group of writes is
// durable and BEFORE it acknowledges them, so a host thread that saw an
// acknowledgement and then reads the shard's current view sees that write
// (read-your-writes), and a view never holds a write that is not yet durable
// under the `always` fsync policy. A view never changes: it holds its
// memtables (a reference, not a copy) and reads them at its sequences while
// the shard goes on inserting into the active one; readers need no lock and
// never talk to the actor.
//
// Invariants: a memtable's entry hides the same key in older memtables, in
// the runs and in the tree, and a run's in older runs and in the tree; an
// entry without a value is a deletion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"
#include "engine/memtable.h"
#include "engine/sorted_run.h"
#include "tree/chunker.h"
#include "tree/node_store.h"
#include "tree/prolly_tree.h"

namespace magnetite {

// A memtable as a view reads it: the inserts numbered up to `sequence`.
struct memtable_ref {
  std::shared_ptr<const memtable> table;
  std::uint64_t sequence = 0;
};

// A run of live user keys in scan order, with their values.
struct live_run {
  std::vector<std::pair<std::string, std::string>> entries;  // user key, live value
  // Set when the run stopped before the end of its range (a limit, or a cap
  // on its bytes): the bound to read the rest with - forward the next
  // `from`, backward the next `to` (exclusive, so the key just past it).
  std::optional<std::string> resume;
};

class read_view {
 public:
  // `root_pin` is shared by every view of one root: while any of them lives,
  // the owner's gc keeps that root's nodes (shard.h).
  // Runs are pins too: the owner keeps the nodes of every run a live view
  // holds.
  read_view(std::shared_ptr<tree::node_store> store, tree::chunk_policy policy, hash128 root,
            std::vector<memtable_ref> memtables, std::uint64_t sequence,
            std::shared_ptr<const hash128> root_pin = nullptr, std::vector<run_ptr> runs = {});

  // The stored bytes under a tree key: true and `out` set, or false if absent.
  result<bool> find(std::string_view tree_key, std::string& out) const;
  // The value of a user key at time now_ns: nullopt if absent or expired.
  result<std::optional<std::string>> get(std::string_view user_key, std::uint64_t now_ns) const;
  // Visits the tree keys in [from, to) in order (to empty: no upper bound) with
  // their stored bytes, memtables merged over the tree, deletions hidden; stops
  // when fn returns false. A loop over a view_cursor (view_cursor.h), which
  // reads the same entries one at a time.
  status scan(std::string_view from, std::string_view to,
              const std::function<bool(std::string_view key, std::string_view stored)>& fn) const;
  // The live values of user keys in [from, to) at now_ns (to empty: no
  // upper bound), ascending or (backward) descending: at most `limit`
  // entries, and no more once `max_bytes` of keys and values are in (one
  // entry at least, whatever its size).
  result<live_run> live_range(std::string_view from, std::string_view to, std::uint64_t now_ns, std::size_t limit,
                              bool backward = false, std::size_t max_bytes = SIZE_MAX) const;
  // The same keys of [from, to) in descending order.
  status scan_reverse(std::string_view from, std::string_view to,
                      const std::function<bool(std::string_view key, std::string_view stored)>& fn) const;

  const hash128& root() const noexcept { return root_; }
  const tree::chunk_policy& policy() const noexcept { return policy_; }
  // The node store its tree is in (reads are thread-safe).
  const std::shared_ptr<tree::node_store>& store() const noexcept { return store_; }
  // Newest first; the runs and then the tree hold everything older.
  const std::vector<memtable_ref>& memtables() const noexcept { return memtables_; }
  // Newest first; the tree holds everything older.
  const std::vector<run_ptr>& runs() const noexcept { return runs_; }
  // True when a memtable holds a write the view sees: a write not yet
  // checkpointed (into a run or the tree).
  bool holds_writes() const noexcept;
  // The stored bytes under a tree key in the runs and the tree alone (the
  // memtables not looked at): true and `out` set, or false if absent.
  result<bool> find_below_memtables(std::string_view tree_key, std::string& out) const;
  // The last log sequence whose write this view holds.
  std::uint64_t sequence() const noexcept { return sequence_; }

 private:
  std::shared_ptr<tree::node_store> store_;
  tree::chunk_policy policy_;
  hash128 root_;
  std::vector<memtable_ref> memtables_;
  std::uint64_t sequence_;
  std::shared_ptr<const hash128> root_pin_;
  std::vector<run_ptr> runs_;
};

}  // namespace magnetite
