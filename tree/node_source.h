// node_source / node_sink: how the tree reads and writes nodes, so that the
// same algorithms run over the pack-file node_store and over memory in tests.
//
// Contract: read(h) returns the node whose encoding hashes to h, or an error
// (not_found, corruption naming the hash); never a node with another hash.
// write(n) stores n's encoding under its hash and returns the hash; writing a
// node that is already stored is a cheap no-op. Writes need not be durable
// until the sink's own flush/commit says so.
#pragma once

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "tree/node.h"

namespace magnetite::tree {

class node_source {
 public:
  virtual ~node_source() = default;
  node_source(const node_source&) = delete;
  node_source& operator=(const node_source&) = delete;

  virtual result<node_ptr> read(const hash128& h) = 0;

  // Looks key up in the leaf h: true with the value copied out when the leaf
  // holds it. The same as searching read(h), which is what this default does; a
  // store with a cache answers a hit without taking a reference to the node.
  virtual result<bool> leaf_get(const hash128& leaf, std::string_view key, std::string& value);

  // Readers that keep nodes of a source outside it (the tree's per-thread table
  // of upper nodes) key them by this pair, so they never answer for a source
  // that no longer holds a node: the id is unique to this object for the whole
  // process, and the epoch changes whenever nodes may have been dropped (gc).
  std::uint64_t source_id() const noexcept { return id_; }
  virtual std::uint64_t epoch() const noexcept { return 0; }

 protected:
  node_source();

 private:
  std::uint64_t id_;
};

class node_sink : public node_source {
 public:
  virtual result<hash128> write(const node& n) = 0;
};

// Nodes in memory, with counters: for tests and tools. Thread-safe.
class memory_nodes final : public node_sink {
 public:
  result<node_ptr> read(const hash128& h) override;
  result<hash128> write(const node& n) override;

  std::uint64_t reads() const noexcept { return reads_.load(); }
  std::uint64_t writes() const noexcept { return writes_.load(); }  // new nodes only
  std::uint64_t bytes_written() const noexcept { return bytes_written_.load(); }
  std::size_t size() const;
  void reset_counters() noexcept { reads_ = writes_ = bytes_written_ = 0; }
  bool contains(const hash128& h) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<hash128, node_ptr, hash128_hasher> nodes_;
  std::atomic<std::uint64_t> reads_{0}, writes_{0}, bytes_written_{0};
};

}  // namespace magnetite::tree
