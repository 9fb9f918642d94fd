// tree_puller: pulls from a peer the nodes of its tree that this replica lacks
// (docs/design/replication.md, 5), as a resumable state machine so that an
// actor can drive it with one request per step and tests can drive it directly.
//
//   tree_puller p(root, holds);
//   while (!p.done()) {
//     auto want = p.next_request(max_nodes);      // hashes to ask the peer for
//     auto got = peer.fetch(want);                // their encodings, in order
//     p.take(want, got, import);                  // checked, leaves imported
//   }
//   p.finish(import);                             // internal nodes, bottom up
//
// The walk goes top down, level by level, and descends only into children the
// local store does not hold (`holds`): stores hold complete subtrees, so a held
// child means a held subtree. Leaves are imported as they arrive; internal
// nodes are kept (they are few: about one per fanout leaves) and imported by
// finish() deepest level first, so the local store never holds a node without
// its children, even if the pull stops half way.
//
// Every node is checked against the hash it was asked for before anything is
// done with it: a peer cannot make us store a node under a wrong name. The
// bytes received are counted, for the catch-up cost the issue bounds.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/byte_pacer.h"
#include "core/hash128.h"
#include "core/status.h"
#include "tree/node_store.h"

namespace magnetite::tree {

struct pull_stats {
  std::uint64_t requests = 0;
  std::uint64_t nodes = 0;
  std::uint64_t bytes = 0;  // node encodings received
  std::uint64_t levels = 0;
};

class tree_puller {
 public:
  using holds_fn = std::function<bool(const hash128&)>;
  using import_fn = std::function<status(const hash128&, std::string_view)>;

  tree_puller(const hash128& root, holds_fn holds);

  // True when nothing is left to ask for (finish() still imports the kept nodes).
  bool done() const noexcept { return frontier_.empty() && next_level_.empty(); }
  // Up to max_nodes hashes to request next (a prefix of the current level).
  std::vector<hash128> next_request(std::size_t max_nodes);
  // The peer's answer to `asked` (the last next_request): one encoding per
  // hash, in order, for a prefix of at least one of them (a peer bounds the
  // bytes of one answer; the rest is asked for again next). Corruption if one
  // does not hash to its name or does not decode, or nothing was answered;
  // the puller is then unusable.
  status take(std::span<const hash128> asked, std::span<const std::string> encodings, const import_fn& import);
  // Imports the kept internal nodes, deepest first.
  status finish(const import_fn& import);

  const pull_stats& stats() const noexcept { return stats_; }

 private:
  holds_fn holds_;
  std::deque<hash128> frontier_;     // the current level, still to request
  std::vector<hash128> next_level_;  // children found so far for the level below
  std::unordered_set<hash128, hash128_hasher> seen_;
  std::size_t outstanding_ = 0;                            // requested from the current level, not yet taken
  std::vector<std::pair<hash128, std::string>> internal_;  // in walk order (top down)
  pull_stats stats_;
  status broken_;
};

// The same walk between two stores of this process (backup and restore):
// copies into `to` every node of `root` that `to` lacks, from `from`, each
// node after its children, as records (node_store::copy_out / copy_in: no
// node is compressed again). The nodes are written, not flushed. `bytes`
// counts the encodings copied; `levels` the levels below the root reached.
// With a pacer, each record's stored bytes (what `to` writes) are reported
// to it after the record is copied: the walk runs at most at its rate.
result<pull_stats> pull_local(const hash128& root, node_store& from, node_store& to, byte_pacer* pace = nullptr);

}  // namespace magnetite::tree
