#include "magnetite/state/keyed_state.h"

#include <algorithm>

#include <fmt/format.h>

#include "actors/database_core.h"
#include "core/limits.h"
#include "engine/state_space.h"
#include "state/collection.h"
#include "state/errors.h"
#include "state/item_codec.h"
#include "state/state_reader.h"

namespace magnetite::state {

namespace detail {

// ---- what every kind shares ----

collection::collection(std::shared_ptr<owner_state::core> owner, kind k, std::string name, collection_options o)
    : owner_(std::move(owner)), kind_(k), name_(std::move(name)), opts_(o) {
  switch (kind_) {
    case kind::value:
      key_ = value_key(owner_->prefix, name_);
      break;
    case kind::map:
      key_ = map_entries_prefix(owner_->prefix, name_);
      break;
    case kind::deque:
      key_ = deque_slots_prefix(owner_->prefix, name_);
      meta_key_ = deque_meta_key(owner_->prefix, name_);
      break;
  }
  // Options and names that can never work are refused by every call, as a
  // caller mistake, before anything is buffered.
  std::size_t longest = kind_ == kind::deque ? key_.size() + 8 : key_.size();
  if (kind_ == kind::map) longest = key_.size() + 2;  // the shortest entry: an empty map key
  if (auto s = check_key_size(longest); !s)
    invalid_ = s;
  else if (opts_.ttl && opts_.ttl->count() <= 0)
    invalid_ = mistake(fmt::format("{}: ttl of {} ns must be > 0", describe(), opts_.ttl->count()));
  else if (opts_.capacity && (kind_ != kind::deque || *opts_.capacity == 0))
    invalid_ = mistake(fmt::format("{}: a capacity must be >= 1, and only a deque takes one", describe()));
}

std::string collection::describe() const {
  static constexpr const char* names[] = {"value", "map", "deque"};
  return fmt::format("{} {:?} of {}", names[static_cast<int>(kind_)], name_, owner_->describe());
}

status collection::usable() const {
  if (closed_ || owner_->closed) return mistake(fmt::format("{} is closed", describe()));
  return invalid_;
}

status collection::check_key_size(std::size_t bytes) const {
  if (bytes > limits::max_user_key_bytes)
    return mistake(fmt::format("{}: a key of {} bytes encoded exceeds the limit of {}", describe(), bytes,
                               limits::max_user_key_bytes));
  return status::ok();
}

status collection::check_item(const item& v, std::string_view delete_verb) const {
  auto e = encode_item(v, delete_verb);
  if (!e) return e.error();
  if (e->size() > state_space::max_value_bytes)
    return mistake(fmt::format("{}: a value of {} bytes encoded exceeds the limit of {}", describe(), e->size(),
                               state_space::max_value_bytes));
  return status::ok();
}

result<std::optional<item>> collection::read(const state_view& v, const std::string& key) const {
  // describe() is formatted only for an error: reads are a hot path.
  auto named = [&](const status& e) {
    return status::make(e.code(), e.category(), fmt::format("{}: {}", describe(), e.message()));
  };
  auto live = v.read(key);
  if (!live) return named(live.error());
  if (!*live) return std::optional<item>();
  auto found = item_of(**live, "stored value");
  if (!found) return named(found.error());
  return std::optional<item>(std::move(found->value));
}

void collection::keep_buffer() {
  if (kept_ || owner_->detached) return;
  owner_->buffered.push_back(shared_from_this());
  kept_ = true;
}

// ---- commit and rollback ----

status collection::collect(std::vector<state_check>& checks, std::vector<batch_write>& writes,
                           std::vector<const collection*>& owners) const {
  if (closed_) return status::ok();
  if (kind_ == kind::map && cleared_) MAGNETITE_TRY(collect_clear(writes));
  auto ttl = opts_.ttl;
  for (const auto& [k, v] : pending_) {
    if (!v) {
      writes.push_back({k, std::nullopt, std::nullopt});
      continue;
    }
    auto e = encode_item(*v, "");
    if (!e) return e.error();
    writes.push_back({k, std::move(*e), ttl});
  }
  if (kind_ == kind::deque && dirty_) collect_meta(checks, writes, owners);
  return status::ok();
}

void collection::reset() noexcept {
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

void collection::close() noexcept {
  closed_ = true;
  reset();
}

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
  auto out = owner.store->apply(owner.shard, std::move(checks), std::move(writes), d);
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

status commit_one(const std::shared_ptr<collection>& c, std::optional<deadline> d) {
  MAGNETITE_TRY(c->usable());
  return commit_all(c->owner(), {c}, d);
}

}  // namespace detail

// ---- owner_state ----

owner_state::owner_state(database& db, std::string ns, std::string owner)
    : owner_state(db.core(), std::move(ns), std::move(owner)) {}

owner_state::owner_state(state_storage& store, std::string ns, std::string owner) : core_(std::make_shared<core>()) {
  core_->store = &store;
  core_->prefix = owner_prefix(ns, owner);
  core_->shard = store.shard_of(core_->prefix);
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

}  // namespace magnetite::state
