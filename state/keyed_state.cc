#include "magnetite/state/keyed_state.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "actors/database_core.h"
#include "engine/keyspace.h"
#include "core/coding.h"
#include "core/limits.h"
#include "state/errors.h"
#include "state/item_codec.h"
#include "state/layout.h"
#include "state/merged_range.h"
#include "state/state_reader.h"

namespace magnetite::state {

struct owner_state::core {
  database* db = nullptr;
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
  collection(std::shared_ptr<owner_state::core> owner, kind k, std::string name, collection_options o)
      : owner_(std::move(owner)), kind_(k), name_(std::move(name)), opts_(o) {
    switch (kind_) {
      case kind::value: key_ = value_key(owner_->prefix, name_); break;
      case kind::map: key_ = map_entries_prefix(owner_->prefix, name_); break;
      case kind::deque:
        key_ = deque_slots_prefix(owner_->prefix, name_);
        meta_key_ = deque_meta_key(owner_->prefix, name_);
        break;
    }
    // Options and names that can never work are refused by every call, as a
    // caller mistake, before anything is buffered.
    std::size_t longest = kind_ == kind::deque ? key_.size() + 8 : key_.size();
    if (kind_ == kind::map) longest = key_.size() + 2;  // the shortest entry: an empty map key
    if (auto s = check_key_size(longest); !s) invalid_ = s;
    else if (opts_.ttl && opts_.ttl->count() <= 0)
      invalid_ = mistake(fmt::format("{}: ttl of {} ns must be > 0", describe(), opts_.ttl->count()));
    else if (opts_.capacity && (kind_ != kind::deque || *opts_.capacity == 0))
      invalid_ = mistake(fmt::format("{}: a capacity must be >= 1, and only a deque takes one", describe()));
  }

  kind kind_of() const { return kind_; }
  const std::string& name() const { return name_; }
  bool closed() const { return closed_; }

  std::string describe() const {
    static constexpr const char* names[] = {"value", "map", "deque"};
    return fmt::format("{} {:?} of {}", names[static_cast<int>(kind_)], name_, owner_->describe());
  }

  status usable() const {
    if (closed_ || owner_->closed) return mistake(fmt::format("{} is closed", describe()));
    return invalid_;
  }

  status check_key_size(std::size_t bytes) const {
    if (bytes > limits::max_user_key_bytes)
      return mistake(fmt::format("{}: a key of {} bytes encoded exceeds the limit of {}", describe(), bytes,
                                 limits::max_user_key_bytes));
    return status::ok();
  }

  // Refuses what cannot be stored (null, too large) before it is buffered.
  status check_item(const item& v, std::string_view delete_verb) const {
    auto e = encode_item(v, delete_verb);
    if (!e) return e.error();
    if (e->size() > limits::max_state_value_bytes)
      return mistake(fmt::format("{}: a value of {} bytes encoded exceeds the limit of {}", describe(), e->size(),
                                 limits::max_state_value_bytes));
    return status::ok();
  }

  result<std::shared_ptr<const read_view>> view() const { return owner_->db->core().view_of(owner_->shard); }
  std::uint64_t now() const { return owner_->db->core().now_ns(); }

  result<std::optional<item>> read(const read_view& v, const std::string& key) const {
    // describe() is formatted only for an error: reads are a hot path.
    auto found = read_item(v, key, now(), "stored value");
    if (!found) return status::make(found.error().code(), found.error().category(),
                                    fmt::format("{}: {}", describe(), found.error().message()));
    if (!*found) return std::optional<item>();
    return std::optional<item>(std::move((*found)->value));
  }

  // ---- value ----
  result<std::optional<item>> value_get() const {
    MAGNETITE_TRY(usable());
    if (auto it = pending_.find(key_); it != pending_.end()) return it->second;
    auto v = view();
    if (!v) return v.error();
    return read(**v, key_);
  }
  status value_put(std::optional<item> v) {
    MAGNETITE_TRY(usable());
    if (v) MAGNETITE_TRY(check_item(*v, "clear()"));
    pending_[key_] = std::move(v);
    keep_buffer();
    return status::ok();
  }

  // ---- map ----
  std::string entry_key(std::string_view k) const { return key_ + key_encoder().bytes(k).str(); }

  result<std::optional<item>> map_get(const read_view* pinned, std::string_view k) const {
    MAGNETITE_TRY(usable());
    std::string key = entry_key(k);
    MAGNETITE_TRY(check_key_size(key.size()));
    if (auto it = pending_.find(key); it != pending_.end()) return it->second;
    if (cleared_) return std::optional<item>();
    if (pinned) return read(*pinned, key);
    auto v = view();
    if (!v) return v.error();
    return read(**v, key);
  }
  result<bool> map_contains(std::string_view k) const {
    MAGNETITE_TRY(usable());
    std::string key = entry_key(k);
    MAGNETITE_TRY(check_key_size(key.size()));
    if (auto it = pending_.find(key); it != pending_.end()) return it->second.has_value();
    if (cleared_) return false;
    auto v = view();
    if (!v) return v.error();
    auto found = read_state(**v, key, now(), describe());
    if (!found) return found.error();
    return found->has_value();
  }
  status map_put(std::string_view k, std::optional<item> v) {
    MAGNETITE_TRY(usable());
    std::string key = entry_key(k);
    MAGNETITE_TRY(check_key_size(key.size()));
    if (v) MAGNETITE_TRY(check_item(*v, "remove(key)"));
    pending_[std::move(key)] = std::move(v);
    keep_buffer();
    return status::ok();
  }
  status map_clear() {
    MAGNETITE_TRY(usable());
    pending_.clear();
    cleared_ = true;
    keep_buffer();
    return status::ok();
  }
  result<std::unique_ptr<merged_range>> map_range(const scan_options& o) const {
    MAGNETITE_TRY(usable());
    if (o.from && o.after) return mistake(fmt::format("{}: a scan takes `from` or `after`, not both", describe()));
    std::string lo = key_, hi = prefix_successor(key_);
    auto raise = [&](std::string k) { lo = std::max(lo, std::move(k)); };
    auto lower = [&](std::string k) { hi = std::min(hi, std::move(k)); };
    if (o.prefix) {
      std::string p = key_ + open_component(*o.prefix);
      lower(prefix_successor(p));
      raise(std::move(p));
    }
    bool forward = o.dir == direction::forward;
    if (o.from) forward ? raise(entry_key(*o.from)) : lower(entry_key(*o.from) + '\0');
    if (o.after) forward ? raise(entry_key(*o.after) + '\0') : lower(entry_key(*o.after));
    if (o.to) forward ? lower(entry_key(*o.to)) : raise(entry_key(*o.to) + '\0');
    auto v = view();
    if (!v) return v.error();
    return std::make_unique<merged_range>(*v, now(), pending_, cleared_, std::move(lo), std::move(hi), o.dir, o.limit,
                                          describe());
  }
  std::string map_key_of(const std::string& key) const { return bytes_after(key_, key).value_or(std::string()); }

  // ---- deque ----
  struct deque_read {
    std::uint64_t revision = 0;  // of the meta (0: none)
    deque_meta meta;
  };
  // The meta as the view holds it now, unless buffered operations were made
  // against an earlier read (then the commit checks that one).
  status load_meta() const {
    if (meta_ && dirty_) return status::ok();
    auto v = view();
    if (!v) return v.error();
    auto found = read_state(**v, meta_key_, now(), describe());
    if (!found) return found.error();
    deque_read r;
    if (*found) {
      auto m = decode_deque_meta((*found)->body, describe());
      if (!m) return m.error();
      r = {(*found)->revision, *m};
    }
    meta_ = r;
    now_meta_ = r.meta;
    return status::ok();
  }
  std::string slot_key(std::uint64_t i) const { return deque_slot_key(key_, i); }
  result<std::optional<item>> slot(std::uint64_t i) const {
    if (auto it = pending_.find(slot_key(i)); it != pending_.end()) return it->second;
    auto v = view();
    if (!v) return v.error();
    return read(**v, slot_key(i));
  }
  result<deque_meta> deque_state() const {
    MAGNETITE_TRY(usable());
    MAGNETITE_TRY(load_meta());
    return now_meta_;
  }
  status push(bool back, item v) {
    MAGNETITE_TRY(usable());
    MAGNETITE_TRY(check_item(v, "pop_front()/pop_back() or clear()"));
    MAGNETITE_TRY(load_meta());
    if (opts_.capacity && now_meta_.tail - now_meta_.head >= *opts_.capacity) {
      auto evicted = pop(!back);
      if (!evicted) return evicted.error();
    }
    if (back ? now_meta_.tail == UINT64_MAX : now_meta_.head == 0)
      return mistake(fmt::format("{}: no index left at the {} end", describe(), back ? "back" : "front"));
    std::uint64_t at = back ? now_meta_.tail++ : --now_meta_.head;
    pending_[slot_key(at)] = std::move(v);
    dirty_ = true;
    keep_buffer();
    return status::ok();
  }
  result<std::optional<item>> pop(bool back) {
    MAGNETITE_TRY(usable());
    MAGNETITE_TRY(load_meta());
    if (now_meta_.head == now_meta_.tail) return std::optional<item>();
    std::uint64_t at = back ? now_meta_.tail - 1 : now_meta_.head;
    auto v = slot(at);
    if (!v) return v.error();
    pending_[slot_key(at)] = std::nullopt;
    back ? --now_meta_.tail : ++now_meta_.head;
    dirty_ = true;
    keep_buffer();
    return v;
  }
  status deque_clear() {
    MAGNETITE_TRY(usable());
    MAGNETITE_TRY(load_meta());
    if (now_meta_.tail - now_meta_.head > limits::max_batch_mutations)
      return mistake(fmt::format("{}: {} slots are more than one commit can delete ({})", describe(),
                                 now_meta_.tail - now_meta_.head, limits::max_batch_mutations));
    for (std::uint64_t i = now_meta_.head; i < now_meta_.tail; ++i) pending_[slot_key(i)] = std::nullopt;
    now_meta_.head = now_meta_.tail;
    dirty_ = true;
    keep_buffer();
    return status::ok();
  }
  result<std::unique_ptr<merged_range>> deque_range(direction dir, std::optional<std::size_t> limit) const {
    MAGNETITE_TRY(usable());
    MAGNETITE_TRY(load_meta());
    auto v = view();
    if (!v) return v.error();
    return std::make_unique<merged_range>(*v, now(), pending_, false, slot_key(now_meta_.head),
                                          slot_key(now_meta_.tail), dir, limit, describe());
  }

  // ---- commit ----
  // Appends this collection's buffer to a conditional batch; `owners` gets
  // this collection once per check added.
  status collect(std::vector<state_check>& checks, std::vector<batch_write>& writes,
                 std::vector<const collection*>& owners) const {
    if (closed_) return status::ok();
    auto ttl = opts_.ttl;
    if (kind_ == kind::map && cleared_) {
      // Delete every entry the shard holds now (expired ones too), except
      // those the buffer writes after the clear.
      auto v = view();
      if (!v) return v.error();
      status s = (*v)->scan(keyspace::data_key(key_), keyspace::data_key(prefix_successor(key_)),
                            [&](std::string_view tree_key, std::string_view) {
                              std::string k(keyspace::user_key_of(tree_key));
                              if (!pending_.count(k)) writes.push_back({std::move(k), std::nullopt, std::nullopt});
                              return true;
                            });
      if (!s) return s;
    }
    for (const auto& [k, v] : pending_) {
      if (!v) {
        writes.push_back({k, std::nullopt, std::nullopt});
        continue;
      }
      auto e = encode_item(*v, "");
      if (!e) return e.error();
      writes.push_back({k, std::move(*e), ttl});
    }
    if (kind_ == kind::deque && dirty_) {
      checks.push_back({meta_key_, meta_->revision});
      owners.push_back(this);
      // An empty deque keeps no meta: the next push starts at the origin again.
      if (now_meta_.head == now_meta_.tail) writes.push_back({meta_key_, std::nullopt, std::nullopt});
      else writes.push_back({meta_key_, encode_deque_meta(now_meta_), ttl});
    }
    return status::ok();
  }
  bool has_ttl() const { return opts_.ttl.has_value(); }
  // The buffer is durable (or discarded): start afresh from the shard's view.
  void reset() noexcept {
    pending_.clear();
    cleared_ = false;
    dirty_ = false;
    meta_.reset();
    if (!kept_) return;
    kept_ = false;
    auto& kept = owner_->buffered;
    auto it = std::find_if(kept.begin(), kept.end(), [this](const auto& c) { return c.get() == this; });
    if (it == kept.end()) return;  // detached
    // The owner's reference may be the last one: it goes when this returns.
    std::shared_ptr<collection> last = std::move(*it);
    kept.erase(it);
  }
  void close() noexcept {
    closed_ = true;
    reset();
  }
  owner_state::core& owner() const { return *owner_; }

 private:
  // Every call that buffers a write ends here: see owner_state::core::buffered.
  void keep_buffer() {
    if (kept_ || owner_->detached) return;
    owner_->buffered.push_back(shared_from_this());
    kept_ = true;
  }

  std::shared_ptr<owner_state::core> owner_;
  kind kind_;
  std::string name_;
  collection_options opts_;
  std::string key_;       // value: its key; map, deque: the prefix of entries / slots
  std::string meta_key_;  // deque
  bool closed_ = false;
  status invalid_;  // why this collection can never be used (a name too long, a bad option), or ok
  overlay pending_;
  bool cleared_ = false;  // map: a clear is buffered
  bool dirty_ = false;    // deque: the meta must be written
  bool kept_ = false;     // in owner_->buffered
  mutable std::optional<deque_read> meta_;  // deque: as read from the view
  mutable deque_meta now_meta_;             // deque: after the buffered operations
};

// Sends the buffers of `cols` as one conditional batch; on success, resets them.
status commit_all(owner_state::core& owner, const std::vector<std::shared_ptr<collection>>& cols,
                  std::optional<deadline> d) {
  if (owner.closed) return mistake(fmt::format("{} is closed", owner.describe()));
  std::vector<state_check> checks;
  std::vector<batch_write> writes;
  std::vector<const collection*> check_owner;
  for (const auto& c : cols) MAGNETITE_TRY(c->collect(checks, writes, check_owner));
  if (writes.empty() && checks.empty()) return status::ok();
  if (writes.size() > limits::max_batch_mutations)
    return mistake(fmt::format("{}: a commit of {} writes exceeds the batch limit of {}", owner.describe(),
                               writes.size(), limits::max_batch_mutations));
  auto out = owner.db->core().apply(owner.shard, std::move(checks), std::move(writes), d);
  if (!out) return after_handoff(out.error());
  if (out->failed_check) {
    const collection* c = check_owner.at(*out->failed_check);
    return status::make(status_code::conflict, status_category::transient,
                        fmt::format("conflict: {} was changed by another writer since this handle read it; roll "
                                    "back and redo",
                                    c->describe()));
  }
  for (const auto& c : cols) c->reset();
  return status::ok();
}

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

// ---- owner_state ----

owner_state::owner_state(database& db, std::string ns, std::string owner) : core_(std::make_shared<core>()) {
  core_->db = &db;
  core_->prefix = owner_prefix(ns, owner);
  core_->shard = db.shard_of(core_->prefix);
  core_->ns = std::move(ns);
  core_->owner = std::move(owner);
}
namespace {
// The owner_state goes: writes buffered through handles it no longer has die
// with it (never committed), and collections stop pointing back at a core
// that would keep them alive.
void detach(const std::shared_ptr<owner_state::core>& core) noexcept {
  if (!core) return;  // moved from
  core->detached = true;
  core->buffered.clear();
}
}  // namespace

owner_state::~owner_state() { detach(core_); }
owner_state::owner_state(owner_state&&) noexcept = default;
owner_state& owner_state::operator=(owner_state&& other) noexcept {
  if (this != &other) {
    detach(core_);
    core_ = std::move(other.core_);
  }
  return *this;
}

std::size_t owner_state::shard() const { return core_->shard; }

namespace {
// Handles of one (kind, name) share one collection, its buffer and its
// options (the first handle's): two buffers over one deque would both stamp
// the same slots and move its ends from the same read, in one frame.
std::shared_ptr<detail::collection> make_collection(const std::shared_ptr<owner_state::core>& core, detail::kind k,
                                                    std::string name, collection_options o) {
  std::erase_if(core->handles, [](const auto& w) { return w.expired(); });
  for (const auto& w : core->handles)
    if (auto c = w.lock(); c && c->kind_of() == k && c->name() == name && !c->closed()) return c;
  auto c = std::make_shared<detail::collection>(core, k, std::move(name), o);
  core->handles.push_back(c);
  return c;
}

std::vector<std::shared_ptr<detail::collection>> live_handles(owner_state::core& core) {
  std::vector<std::shared_ptr<detail::collection>> out;
  for (const auto& w : core.handles)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}
}  // namespace

value_handle owner_state::value(std::string name, collection_options o) {
  return value_handle(make_collection(core_, detail::kind::value, std::move(name), o));
}
map_handle owner_state::map(std::string name, collection_options o) {
  return map_handle(make_collection(core_, detail::kind::map, std::move(name), o));
}
deque_handle owner_state::deque(std::string name, collection_options o) {
  return deque_handle(make_collection(core_, detail::kind::deque, std::move(name), o));
}

status owner_state::commit(std::optional<deadline> d) { return detail::commit_all(*core_, live_handles(*core_), d); }

void owner_state::rollback() noexcept {
  for (const auto& c : live_handles(*core_)) c->reset();
}

void owner_state::close() noexcept {
  for (const auto& c : live_handles(*core_)) c->close();
  core_->closed = true;
}

// ---- the handles ----

namespace {
status commit_one(const std::shared_ptr<detail::collection>& c, std::optional<deadline> d) {
  MAGNETITE_TRY(c->usable());
  return detail::commit_all(c->owner(), {c}, d);
}
}  // namespace

result<std::optional<item>> value_handle::get() const { return c_->value_get(); }
status value_handle::set(item v) { return c_->value_put(std::move(v)); }
status value_handle::clear() { return c_->value_put(std::nullopt); }
status value_handle::commit(std::optional<deadline> d) { return commit_one(c_, d); }
void value_handle::rollback() noexcept { c_->reset(); }
void value_handle::close() noexcept { c_->close(); }

result<std::optional<item>> map_handle::get(std::string_view key) const { return c_->map_get(nullptr, key); }

result<std::vector<std::optional<item>>> map_handle::get_many(std::span<const std::string> keys) const {
  MAGNETITE_TRY(c_->usable());
  auto v = c_->view();
  if (!v) return v.error();
  std::vector<std::optional<item>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    auto x = c_->map_get(v->get(), k);
    if (!x) return x.error();
    out.push_back(std::move(*x));
  }
  return out;
}

result<bool> map_handle::contains(std::string_view key) const { return c_->map_contains(key); }
status map_handle::set(std::string_view key, item v) { return c_->map_put(key, std::move(v)); }
status map_handle::remove(std::string_view key) { return c_->map_put(key, std::nullopt); }
status map_handle::clear() { return c_->map_clear(); }

result<bool> map_handle::is_empty() const {
  auto r = c_->map_range({});
  if (!r) return r.error();
  auto first = (*r)->next(1);
  if (!first) return first.error();
  return first->empty();
}

result<std::uint64_t> map_handle::size() const {
  auto r = c_->map_range({});
  if (!r) return r.error();
  std::uint64_t n = 0;
  for (;;) {
    auto chunk = (*r)->next(1024);
    if (!chunk) return chunk.error();
    if (chunk->empty()) return n;
    n += chunk->size();
  }
}

result<cursor<map_entry>> map_handle::scan(scan_options o) const {
  auto r = c_->map_range(o);
  if (!r) return r.error();
  return detail::make_cursor<map_entry>(std::move(*r), [c = c_](const std::string& k, item v) {
    return map_entry{c->map_key_of(k), std::move(v)};
  });
}

result<cursor<std::string>> map_handle::keys(scan_options o) const {
  auto r = c_->map_range(o);
  if (!r) return r.error();
  return detail::make_cursor<std::string>(std::move(*r),
                                          [c = c_](const std::string& k, item) { return c->map_key_of(k); });
}

status map_handle::commit(std::optional<deadline> d) { return commit_one(c_, d); }
void map_handle::rollback() noexcept { c_->reset(); }
void map_handle::close() noexcept { c_->close(); }

result<std::uint64_t> deque_handle::len() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  return m->tail - m->head;
}

result<bool> deque_handle::is_empty() const {
  auto n = len();
  if (!n) return n.error();
  return *n == 0;
}

result<std::optional<item>> deque_handle::get(std::uint64_t i) const {
  if (!c_->has_ttl()) {
    // Without expiry the slots of [head, tail) are dense: one point read.
    auto m = c_->deque_state();
    if (!m) return m.error();
    if (i >= m->tail - m->head) return std::optional<item>();
    return c_->slot(m->head + i);
  }
  auto r = c_->deque_range(direction::forward, std::nullopt);
  if (!r) return r.error();
  // The i-th live slot: expired ones do not count.
  for (;;) {
    auto chunk = (*r)->next(256);
    if (!chunk) return chunk.error();
    if (chunk->empty()) return std::optional<item>();
    if (i < chunk->size()) return std::optional<item>(std::move((*chunk)[i].second));
    i -= chunk->size();
  }
}

result<std::optional<item>> deque_handle::peek_front() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  if (m->head == m->tail) return std::optional<item>();
  return c_->slot(m->head);
}

result<std::optional<item>> deque_handle::peek_back() const {
  auto m = c_->deque_state();
  if (!m) return m.error();
  if (m->head == m->tail) return std::optional<item>();
  return c_->slot(m->tail - 1);
}

status deque_handle::push_front(item v) { return c_->push(false, std::move(v)); }
status deque_handle::push_back(item v) { return c_->push(true, std::move(v)); }
result<std::optional<item>> deque_handle::pop_front() { return c_->pop(false); }
result<std::optional<item>> deque_handle::pop_back() { return c_->pop(true); }
status deque_handle::clear() { return c_->deque_clear(); }

result<cursor<item>> deque_handle::scan(direction dir) const {
  auto r = c_->deque_range(dir, std::nullopt);
  if (!r) return r.error();
  return detail::make_cursor<item>(std::move(*r), [](const std::string&, item v) { return v; });
}

status deque_handle::commit(std::optional<deadline> d) { return commit_one(c_, d); }
void deque_handle::rollback() noexcept { c_->reset(); }
void deque_handle::close() noexcept { c_->close(); }

}  // namespace magnetite::state
