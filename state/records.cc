#include "magnetite/state/records.h"

#include <fmt/format.h>

#include "actors/database_core.h"
#include "actors/state_storage.h"
#include "core/limits.h"
#include "engine/keyspace.h"
#include "engine/state_space.h"
#include "state/errors.h"
#include "state/item_codec.h"
#include "state/layout.h"
#include "state/state_reader.h"

namespace magnetite::state {

namespace {
std::string describe(std::string_view ns, std::string_view key) { return fmt::format("record ({:?}, {:?})", ns, key); }

// The state key of a record, or a caller mistake when it is too long.
result<std::string> checked_record_key(std::string_view ns, std::string_view key) {
  std::string k = record_key(ns, key);
  if (k.size() > limits::max_user_key_bytes)
    return mistake(fmt::format("{}: namespace and key take {} bytes encoded, over the limit of {}",
                               describe(ns.substr(0, 64), key.substr(0, 64)), k.size(), limits::max_user_key_bytes));
  return k;
}

result<std::optional<record>> load_from(state_storage& store, std::size_t shard, const std::string& k,
                                        std::string_view ns, std::string_view key) {
  auto live = store.read(shard, k);
  // The record's name is formatted only for an error: loads are a hot path.
  auto named = [&](const status& e) {
    return status::make(e.code(), e.category(), fmt::format("{}: {}", describe(ns, key), e.message()));
  };
  if (!live) return named(live.error());
  if (!*live) return std::optional<record>();
  auto found = item_of(**live, "stored value");
  if (!found) return named(found.error());
  return std::optional<record>(record{std::move(found->value), found->revision});
}
}  // namespace

records::records(database& db) : store_(&db.core()) {}

std::size_t records::shard_of(std::string_view ns) const { return store_->shard_of(record_prefix(ns)); }

result<std::optional<record>> records::load(std::string_view ns, std::string_view key) const {
  auto k = checked_record_key(ns, key);
  if (!k) return k.error();
  return load_from(*store_, shard_of(ns), *k, ns, key);
}

result<page> records::list(std::string_view ns, std::string_view prefix, std::optional<std::string_view> start_after,
                           std::size_t limit) const {
  if (limit < 1 || limit > max_list_limit)
    return mistake(fmt::format("list limit of {}: must be 1..{}", limit, max_list_limit));
  std::string ns_prefix = record_prefix(ns);
  std::string first = ns_prefix + open_component(prefix);
  std::string end = prefix_successor(first);
  if (start_after) {
    // Just past the record key of start_after: no other key sits between.
    std::string after = record_key(ns, *start_after) + '\0';
    if (after > first) first = std::move(after);
  }
  page out;
  std::size_t shard = shard_of(ns);
  // One more than the page, to know whether a next page exists.
  while (out.records.size() <= limit) {
    auto run = store_->read_range(shard, first, end, limit + 1 - out.records.size());
    if (!run) return run.error();
    for (auto& [user_key, live] : run->entries) {
      auto key = bytes_after(ns_prefix, user_key);
      if (!key)
        return status::corruption(
            fmt::format("namespace {:?}: a key of {} bytes is not a record key", ns, user_key.size()));
      auto found = item_of(live, describe(ns, *key));
      if (!found) return found.error();
      if (out.records.size() == limit) {
        out.next = out.records.back().first;
        return out;
      }
      out.records.emplace_back(std::move(*key), record{std::move(found->value), found->revision});
    }
    if (!run->resume) break;
    first = std::move(*run->resume);
  }
  return out;
}

transaction records::begin() const { return transaction(*store_); }

result<std::string> transaction::key_for(std::string_view ns, std::string_view key) {
  if (finished_) return mistake("transaction is finished (committed or rolled back)");
  return checked_record_key(ns, key);
}

result<std::optional<record>> transaction::load(std::string_view ns, std::string_view key) {
  auto k = key_for(ns, key);
  if (!k) return k.error();
  if (auto w = writes_.find(*k); w != writes_.end()) {
    if (!w->second.value) return std::optional<record>();
    return std::optional<record>(record{*w->second.value, 0});
  }
  if (auto r = reads_.find(*k); r != reads_.end()) {
    if (!r->second.value) return std::optional<record>();
    return std::optional<record>(record{*r->second.value, r->second.revision});
  }
  auto got = load_from(*store_, store_->shard_of(record_prefix(ns)), *k, ns, key);
  if (!got) return got.error();
  read r{0, std::nullopt, std::string(ns), std::string(key)};
  if (*got) {
    r.revision = (*got)->revision;
    r.value = (*got)->value;
  }
  reads_.emplace(std::move(*k), std::move(r));
  return got;
}

status transaction::put(std::string_view ns, std::string_view key, item value) {
  auto k = key_for(ns, key);
  if (!k) return k.error();
  // Encoded now, so bad input is refused here and not at commit.
  auto stored = encode_item(value, "del(namespace, key)");
  if (!stored) return stored.error();
  if (stored->size() > state_space::max_value_bytes)
    return mistake(fmt::format("{}: value of {} bytes encoded exceeds the limit of {} bytes", describe(ns, key),
                               stored->size(), state_space::max_value_bytes));
  writes_[*k] = write{std::move(value), std::move(*stored), std::string(ns), std::string(key)};
  return status::ok();
}

status transaction::del(std::string_view ns, std::string_view key) {
  auto k = key_for(ns, key);
  if (!k) return k.error();
  writes_[*k] = write{std::nullopt, {}, std::string(ns), std::string(key)};
  return status::ok();
}

void transaction::rollback() noexcept {
  finished_ = true;
  reads_.clear();
  writes_.clear();
}

namespace {
status conflict_on(std::string_view ns, std::string_view key, std::uint64_t read_at, std::uint64_t found) {
  return status::make(
      status_code::conflict, status_category::transient,
      fmt::format("conflict: {} was read at revision {} and is now at {}", describe(ns, key), read_at, found));
}
}  // namespace

result<std::uint64_t> transaction::commit(std::optional<deadline> d) {
  if (finished_) return mistake("transaction is finished (committed or rolled back)");
  finished_ = true;
  // Each shard's part, in shard order, and the reads behind its checks.
  std::map<std::size_t, transaction_part> parts;
  std::map<std::size_t, std::vector<const read*>> read_of;
  for (const auto& [k, r] : reads_) {
    std::size_t s = store_->shard_of(record_prefix(r.ns));
    parts[s].shard = s;
    parts[s].checks.push_back({k, r.revision});
    read_of[s].push_back(&r);
  }
  for (auto& [k, w] : writes_) {
    std::size_t s = store_->shard_of(record_prefix(w.ns));
    parts[s].shard = s;
    parts[s].writes.push_back(
        {k, w.value ? std::optional<std::string>(std::move(w.stored)) : std::nullopt, std::nullopt});
  }
  if (parts.empty()) return std::uint64_t{0};  // touched nothing
  if (parts.size() == 1) {
    auto& [shard, part] = *parts.begin();
    auto out = store_->apply(shard, std::move(part.checks), std::move(part.writes), d);
    if (!out) return after_handoff(out.error());
    if (out->failed_check) {
      const read& r = *read_of[shard].at(*out->failed_check);
      return conflict_on(r.ns, r.key, r.revision, out->found);
    }
    return out->revision;
  }
  std::vector<transaction_part> list;
  for (auto& [s, p] : parts) list.push_back(std::move(p));
  auto out = store_->commit_across(std::move(list), d);
  // The coordinator answers transient only when nothing was written.
  if (!out) return out.error().category() == status_category::transient ? out.error() : after_handoff(out.error());
  if (!out->committed) {
    // Parts went in shard order, as the map holds them.
    auto part = std::next(parts.begin(), static_cast<std::ptrdiff_t>(out->failed_part));
    const read& r = *read_of.at(part->first).at(out->failed_check);
    return conflict_on(r.ns, r.key, r.revision, out->found);
  }
  return out->revision;
}

}  // namespace magnetite::state
