// collection: what the handles of one (owner, kind, name) share: the
// collection's keys, its buffer of pending writes (the overlay reads go
// through), and what a commit sends. Internal to state/; the handles
// (keyed_state.h) hold one through a shared_ptr.
//
// Files by concept: keyed_state.cc has the owner (owner_state), the buffer's
// commit and rollback, and what every kind shares; value_handle.cc,
// map_handle.cc and deque_handle.cc each have one kind's operations and its
// handle; merged_range.h the scans (the overlay merged over a view).
//
// Invariants: `pending_` holds writes by encoded state key, each key under
// `key_` (a value: that key itself); a collection with writes buffered is in
// its owner's `buffered` list (kept_) until reset() or the owner goes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "actors/state_storage.h"
#include "core/coding.h"
#include "magnetite/state/keyed_state.h"
#include "state/layout.h"
#include "state/merged_range.h"

namespace magnetite::state {

struct owner_state::core {
  state_storage* store = nullptr;
  std::string ns, owner, prefix;
  std::size_t shard = 0;
  std::vector<std::weak_ptr<detail::collection>> handles;
  // The collections that hold buffered writes. Those writes belong to the
  // owner's next commit or rollback whether or not the caller kept a handle
  // (`s.value("v").set(x); s.commit();`), so the owner keeps the collection
  // alive until then. A collection points back here: the owner_state empties
  // this when it goes (detached), and a handle that outlives it keeps its own
  // buffer for its own commit.
  std::vector<std::shared_ptr<detail::collection>> buffered;
  bool detached = false;
  bool closed = false;

  std::string describe() const { return fmt::format("owner ({:?}, {:?})", ns, owner); }
};

namespace detail {

enum class kind { value, map, deque };

class collection : public std::enable_shared_from_this<collection> {
 public:
  collection(std::shared_ptr<owner_state::core> owner, kind k, std::string name, collection_options o);

  kind kind_of() const { return kind_; }
  const std::string& name() const { return name_; }
  bool closed() const { return closed_; }
  bool has_ttl() const { return opts_.ttl.has_value(); }
  owner_state::core& owner() const { return *owner_; }
  std::string describe() const;
  // ok, or why no call can be made: closed, or an option or name that never works.
  status usable() const;
  // The shard as it is now: reads of one call go through one of these.
  result<std::shared_ptr<const state_view>> view() const { return owner_->store->pin(owner_->shard); }

  // ---- value (value_handle.cc) ----
  result<std::optional<item>> value_get() const;
  status value_put(std::optional<item> v);

  // ---- map (map_handle.cc) ----
  // `pinned`: read from that view (get_many's one view), else the current one.
  result<std::optional<item>> map_get(const state_view* pinned, std::string_view k) const;
  result<bool> map_contains(std::string_view k) const;
  status map_put(std::string_view k, std::optional<item> v);
  status map_clear();
  result<std::unique_ptr<merged_range>> map_range(const scan_options& o) const;
  // The map key of an entry's encoded state key.
  std::string map_key_of(const std::string& key) const { return bytes_after(key_, key).value_or(std::string()); }

  // ---- deque (deque_handle.cc) ----
  result<deque_meta> deque_state() const;
  result<std::optional<item>> slot(std::uint64_t i) const;
  status push(bool back, item v);
  result<std::optional<item>> pop(bool back);
  status deque_clear();
  result<std::unique_ptr<merged_range>> deque_range(direction dir, std::optional<std::size_t> limit) const;

  // ---- commit (keyed_state.cc) ----
  // Appends this collection's buffer to a conditional batch; `owners` gets
  // this collection once per check added.
  status collect(std::vector<state_check>& checks, std::vector<batch_write>& writes,
                 std::vector<const collection*>& owners) const;
  // The buffer is durable (or discarded): start afresh from the shard's view.
  void reset() noexcept;
  void close() noexcept;

 private:
  struct deque_read {
    std::uint64_t revision = 0;  // of the meta (0: none)
    deque_meta meta;
  };

  // Shared by the kinds (keyed_state.cc).
  status check_key_size(std::size_t bytes) const;
  // Refuses what cannot be stored (null, too large) before it is buffered.
  status check_item(const item& v, std::string_view delete_verb) const;
  result<std::optional<item>> read(const state_view& v, const std::string& key) const;
  // Every call that buffers a write ends here: see owner_state::core::buffered.
  void keep_buffer();

  // Map (map_handle.cc).
  std::string entry_key(std::string_view k) const { return key_ + key_encoder().bytes(k).str(); }
  // A buffered clear: deletes of every entry the shard holds now but those
  // the buffer writes after it.
  status collect_clear(std::vector<batch_write>& writes) const;

  // Deque (deque_handle.cc).
  status load_meta() const;
  std::string slot_key(std::uint64_t i) const { return deque_slot_key(key_, i); }
  // The check of the meta read, and the meta after the buffered operations.
  void collect_meta(std::vector<state_check>& checks, std::vector<batch_write>& writes,
                    std::vector<const collection*>& owners) const;

  std::shared_ptr<owner_state::core> owner_;
  kind kind_;
  std::string name_;
  collection_options opts_;
  std::string key_;       // value: its key; map, deque: the prefix of entries / slots
  std::string meta_key_;  // deque
  bool closed_ = false;
  status invalid_;  // why this collection can never be used (a name too long, a bad option), or ok
  overlay pending_;
  bool cleared_ = false;                    // map: a clear is buffered
  bool dirty_ = false;                      // deque: the meta must be written
  bool kept_ = false;                       // in owner_->buffered
  mutable std::optional<deque_read> meta_;  // deque: as read from the view
  mutable deque_meta now_meta_;             // deque: after the buffered operations
};

// Sends the buffers of `cols` as one conditional batch; on success, resets them.
status commit_all(owner_state::core& owner, const std::vector<std::shared_ptr<collection>>& cols,
                  std::optional<deadline> d);
// A handle's own commit: its collection's buffer alone.
status commit_one(const std::shared_ptr<collection>& c, std::optional<deadline> d);

// Chunks of a merged range, converted.
template <class T, class F>
class converting_source final : public cursor_source<T> {
 public:
  converting_source(std::unique_ptr<merged_range> r, F f) : r_(std::move(r)), f_(std::move(f)) {}
  result<std::vector<T>> next(std::size_t max) override {
    auto chunk = r_->next(max);
    if (!chunk) return chunk.error();
    std::vector<T> out;
    out.reserve(chunk->size());
    for (auto& [k, v] : *chunk) out.push_back(f_(k, std::move(v)));
    return out;
  }

 private:
  std::unique_ptr<merged_range> r_;
  F f_;
};

template <class T, class F>
cursor<T> make_cursor(std::unique_ptr<merged_range> r, F f) {
  return cursor<T>(std::make_unique<converting_source<T, F>>(std::move(r), std::move(f)));
}

}  // namespace detail
}  // namespace magnetite::state
