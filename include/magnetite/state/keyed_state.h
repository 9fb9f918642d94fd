// keyed_state: the collections a stream processor keeps per message key.
//
// A collection is addressed by (namespace, owner key, name) and lives on the
// shard of its owner (namespace, owner): one owner's collections share a
// shard and commit together. Kinds: value, map (string keys, in key order),
// deque (both ends).
//
// Contract:
// - Writes go to the handle's buffer and overlay; reads go through the
//   overlay to the shard's current published view (read your own writes; a
//   handle pins no view, so it also sees other writers' commits).
// - commit() makes the handle's buffered operations durable atomically: ONE
//   conditional batch (shard::apply), one log frame. owner_state::commit()
//   does the same for every handle it made, kept by the caller or not:
//   `s.value("v").set(x); s.commit();` writes x. On failure the buffer is
//   kept; rollback() discards it and cannot fail. An empty commit sends
//   nothing. Writes still buffered when the owner_state goes are dropped,
//   except those of a handle the caller still holds (its own commit).
// - A JSON null is not storable: refused naming the deleting verb.
// - Value and map writes carry no precondition, so they never conflict (one
//   owner per key is the model; two writers: last commit wins per key). A
//   deque's commit checks that its meta (head, tail) is still the one the
//   handle read: another writer's commit in between is a conflict (roll back
//   and redo).
// - TTL per collection, per item from its last write (collection_options).
//   Readers skip expired items. A deque's meta carries the same TTL and is
//   rewritten by every push and pop, so it expires no earlier than any slot;
//   `len` counts expired slots not yet popped (an upper bound), `get(i)` and
//   scans skip them, `peek_*` of an expired end gives nothing, `pop_*`
//   consumes it and gives nothing.
// - Costs: get, contains, set, remove, push, pop, peek, len, and a deque's
//   get(i) without TTL: O(log n) reads of the view (no message). A deque's
//   get(i) with a TTL walks i live slots (expired ones do not count); map
//   `size` scans (O(n)), `is_empty` until the first live entry. `clear` of a
//   map or deque deletes its live keys in the commit's one frame: O(n),
//   within the batch limit (limits.h); expired entries are left to the TTL
//   purge.
// - Scans are cursors over one pinned view and a copy of the overlay, pulled
//   in chunks; exhausted stays exhausted; the first error closes the cursor;
//   close is idempotent. Later writes to the handle do not show in it.
// - On a replicated cluster (owner_state(cluster_client&)) every read and
//   commit goes to the owner of the owner's shard
//   (docs/design/replication.md, 10): each read is linearizable on its own,
//   but a scan's chunks and get_many's keys are separate reads there, not
//   one view; every read is a round trip; a commit is acknowledged once a
//   majority made it durable and is applied at most once across retries.
// - Handles of one (kind, name) made by one owner_state share one buffer and
//   the first handle's options. A deque handle with nothing buffered reads
//   the deque's ends anew on every call.
// - A closed handle (closed by itself or by its owner_state) refuses every
//   call with a clear error. A name too long for the key limit, a ttl <= 0 or
//   a capacity of 0 (or on a value or map) make every call of that handle fail
//   as a caller mistake. Errors carry categories as in records.h.
// Handles and owner_state are used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "magnetite/database.h"
#include "magnetite/state/item.h"
#include "magnetite/state/records.h"

namespace magnetite::state {

struct collection_options {
  std::optional<std::chrono::nanoseconds> ttl;  // per item, from its last write
  std::optional<std::uint64_t> capacity;        // deque only: a push at capacity evicts from the other end
};

enum class direction { forward, backward };

struct scan_options {
  direction dir = direction::forward;
  std::optional<std::string> from;   // start here, inclusive (in scan order)
  std::optional<std::string> after;  // or just past this key (paging); not both
  std::optional<std::string> to;     // stop before this key (in scan order)
  std::optional<std::string> prefix;
  std::optional<std::size_t> limit;
};

struct map_entry {
  std::string key;
  item value;
};

namespace detail {
class collection;
template <class T>
class MAGNETITE_API cursor_source {
 public:
  virtual ~cursor_source() = default;
  virtual result<std::vector<T>> next(std::size_t max) = 0;
};
}  // namespace detail

// A scan's results, pulled in chunks.
template <class T>
class MAGNETITE_API cursor {
 public:
  explicit cursor(std::unique_ptr<detail::cursor_source<T>> src) : src_(std::move(src)) {}
  // Up to `max` (>= 1) more items; empty: exhausted, and so is every later
  // call. The first error closes the cursor and is returned again by every
  // later call.
  result<std::vector<T>> next_chunk(std::size_t max) {
    if (!error_.is_ok()) return error_;
    if (!src_) return std::vector<T>();
    auto r = src_->next(max == 0 ? 1 : max);
    if (!r) {
      error_ = r.error();
      src_.reset();
      return error_;
    }
    if (r->empty()) src_.reset();
    return r;
  }
  void close() noexcept { src_.reset(); }

 private:
  std::unique_ptr<detail::cursor_source<T>> src_;
  status error_;
};

class value_handle;
class map_handle;
class deque_handle;

class MAGNETITE_API owner_state {
 public:
  owner_state(database& db, std::string ns, std::string owner);
  // On a replicated cluster: reads and commits go to the owner of the
  // owner's shard (see the contract above for what differs).
  owner_state(cluster_client& cluster, std::string ns, std::string owner)
      : owner_state(cluster.state_store(), std::move(ns), std::move(owner)) {}
  ~owner_state();
  owner_state(owner_state&&) noexcept;
  owner_state& operator=(owner_state&&) noexcept;

  value_handle value(std::string name, collection_options o = {});
  map_handle map(std::string name, collection_options o = {});
  deque_handle deque(std::string name, collection_options o = {});
  // Every open handle's buffer, in one frame.
  status commit(std::optional<deadline> d = {});
  void rollback() noexcept;
  // Closes every handle; idempotent.
  void close() noexcept;
  std::size_t shard() const;

  struct core;

 private:
  owner_state(state_storage& store, std::string ns, std::string owner);
  std::shared_ptr<core> core_;
};

class MAGNETITE_API value_handle {
 public:
  result<std::optional<item>> get() const;
  status set(item v);
  status clear();
  status commit(std::optional<deadline> d = {});
  void rollback() noexcept;
  void close() noexcept;

 private:
  friend class owner_state;
  explicit value_handle(std::shared_ptr<detail::collection> c) : c_(std::move(c)) {}
  std::shared_ptr<detail::collection> c_;
};

class MAGNETITE_API map_handle {
 public:
  result<std::optional<item>> get(std::string_view key) const;
  // Aligned with `keys`: all of them from one view, or an error.
  result<std::vector<std::optional<item>>> get_many(std::span<const std::string> keys) const;
  result<bool> contains(std::string_view key) const;  // no value decoding
  status set(std::string_view key, item v);
  status remove(std::string_view key);
  status clear();
  result<bool> is_empty() const;
  result<std::uint64_t> size() const;
  result<cursor<map_entry>> scan(scan_options o = {}) const;
  result<cursor<std::string>> keys(scan_options o = {}) const;
  status commit(std::optional<deadline> d = {});
  void rollback() noexcept;
  void close() noexcept;

 private:
  friend class owner_state;
  explicit map_handle(std::shared_ptr<detail::collection> c) : c_(std::move(c)) {}
  std::shared_ptr<detail::collection> c_;
};

class MAGNETITE_API deque_handle {
 public:
  result<std::uint64_t> len() const;  // an upper bound under TTL
  result<bool> is_empty() const;
  // The i-th item from the front; with a TTL, the i-th live one. A deque
  // written with a TTL must be opened with one for get(i) to skip expired slots.
  result<std::optional<item>> get(std::uint64_t i) const;
  result<std::optional<item>> peek_front() const;
  result<std::optional<item>> peek_back() const;
  status push_front(item v);
  status push_back(item v);
  result<std::optional<item>> pop_front();
  result<std::optional<item>> pop_back();
  status clear();
  result<cursor<item>> scan(direction dir = direction::forward) const;
  status commit(std::optional<deadline> d = {});
  void rollback() noexcept;
  void close() noexcept;

 private:
  friend class owner_state;
  explicit deque_handle(std::shared_ptr<detail::collection> c) : c_(std::move(c)) {}
  std::shared_ptr<detail::collection> c_;
};

}  // namespace magnetite::state
