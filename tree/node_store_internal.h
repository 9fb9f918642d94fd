// node_store_internal: the parts of node_store that its source files share, and
// nothing else. Included only by them:
//   node_store.cc          the store: its state, packs, writing, flush
//   node_store_read.cc     reading, the caches' policy, check
//   node_store_open.cc     open and recovery
//   node_store_gc.cc       gc and the manifest switch
//   node_store_reclaim.cc  incremental reclamation
// The byte formats are tree/pack_format.h.
//
// Contract (what every one of those files relies on):
// - A pack's number, path and salt never change once it is made; any thread
//   may read its file (read_at), only the writer (write_mu_ held) appends to
//   it, to its index file, or sets its sealed_size. A pack is shared: readers
//   that looked a node up keep its pack open after gc or reclamation dropped
//   it, so dropping a pack never invalidates a read in flight.
// - A cached record's content was checked against its hash before it was put,
//   and a cached node is the decoding of checked bytes: a hit in either cache
//   is never hashed again.
// - A reclaim_cycle lives in cycle_ only while a cycle runs, and is read and
//   changed only under write_mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/env.h"
#include "core/hash128.h"
#include "tree/clock_cache.h"
#include "tree/node.h"
#include "tree/node_store.h"

namespace magnetite::tree {

// Reads and writes of bulk data go in pieces of this size.
inline constexpr std::size_t io_chunk = 1 << 20;

struct node_store::pack {
  std::uint32_t number = 0;
  std::string path;
  std::uint64_t salt = 0;
  // Its size once sealed (or at open; the active pack's is written_size_):
  // what reclamation weighs without asking the file system.
  std::uint64_t sealed_size = 0;
  std::unique_ptr<file> f;
  // Sealed packs, when the store maps them (node_store_options::map_packs):
  // its first sealed_size bytes. Set and read under state_mu_.
  std::shared_ptr<const file_mapping> map;
  // Writer only: the index file, appended at flush; null once it failed (the
  // entries past its valid prefix are then rebuilt by the next open).
  std::unique_ptr<file> index;
};

// What one reclamation cycle knows (node_store.h, reclamation).
struct node_store::reclaim_cycle {
  double max_amplification = 1.5;
  std::uint32_t boundary = 0;  // packs numbered below it are candidates
  struct item {
    hash128 h;
    int level;  // -1: not known (a root, a pending node): read it to know
  };
  std::vector<item> stack;
  std::unordered_set<hash128, hash128_hasher> internal_seen;
  // Per candidate pack, its records found live (a leaf reached through two
  // parents is listed twice until the victims are chosen).
  std::map<std::uint32_t, std::vector<index_entry>> live;
  bool chosen = false;
  std::map<std::uint32_t, std::size_t> victims;  // victim -> copy cursor into live[victim]
  std::uint64_t live_bytes = 0;
  std::uint64_t victim_bytes = 0;
  std::uint64_t copied = 0;
};

// ---- caches ------------------------------------------------------------------------

// A decoded node, with its search index kept beside it so that a leaf lookup
// need not read the node object.
struct cached_node {
  node_ptr n;
  node_index ix;
  explicit operator bool() const noexcept { return n != nullptr; }
};
class node_store::node_cache : public clock_cache<cached_node> {
  using clock_cache::clock_cache;
};

// A leaf's record as stored (its payload: compressed or not), whose content
// was verified against its hash when it was read from its pack.
struct cached_record {
  std::string payload;
  std::uint32_t raw_length = 0;
  std::uint8_t flags = 0;
  explicit operator bool() const noexcept { return !payload.empty(); }
};
class node_store::record_cache : public clock_cache<cached_record> {
  using clock_cache::clock_cache;
};

}  // namespace magnetite::tree
