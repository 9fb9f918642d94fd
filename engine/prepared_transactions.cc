#include "engine/prepared_transactions.h"

#include "engine/keyspace.h"
#include "ttl/envelope.h"

namespace magnetite {

namespace tr = transaction_records;

result<prepared_transactions> prepared_transactions::load(const read_view& view) {
  auto ids = tr::ids_in(view, tr::prepare_prefix);
  if (!ids) return ids.error();
  prepared_transactions out;
  for (const auto& id : *ids) {
    std::string stored;
    auto found = view.find(keyspace::data_key(tr::prepare_key(id)), stored);
    if (!found) return found.error();
    auto value = ttl::unwrap(stored);
    if (!value) return value.error();
    if (value->tombstone) continue;  // a replicated shard's deleted record
    auto p = tr::decode_prepare(id, value->value);
    if (!p) return p.error();
    out.add(std::move(*p));
  }
  return out;
}

std::optional<std::string> prepared_transactions::blocking(std::span<const state_check> checks,
                                                           std::span<const batch_write> writes) const {
  if (holds_.empty()) return std::nullopt;
  for (const auto& c : checks)
    if (auto h = holds_.find(c.key); h != holds_.end() && h->second.writers > 0) return c.key;
  for (const auto& w : writes)
    if (holds_.contains(w.key)) return w.key;
  return std::nullopt;
}

void prepared_transactions::add(tr::prepare p) {
  if (prepared_.contains(p.id)) return;  // its holds are counted once
  for (const auto& k : p.reads) ++holds_[k].readers;
  for (const auto& w : p.writes) ++holds_[w.key].writers;
  auto id = p.id;
  prepared_.emplace(id, std::move(p));
}

void prepared_transactions::release(const tr::prepare& p) {
  auto drop = [&](const std::string& key, std::size_t hold::*count) {
    auto h = holds_.find(key);
    if (h == holds_.end() || h->second.*count == 0) return;
    if (--(h->second.*count) == 0 && h->second.readers == 0 && h->second.writers == 0) holds_.erase(h);
  };
  for (const auto& k : p.reads) drop(k, &hold::readers);
  for (const auto& w : p.writes) drop(w.key, &hold::writers);
}

std::optional<tr::prepare> prepared_transactions::take(const hash128& id) {
  auto p = prepared_.find(id);
  if (p == prepared_.end()) return std::nullopt;
  tr::prepare out = std::move(p->second);
  prepared_.erase(p);
  release(out);
  return out;
}

std::vector<std::pair<hash128, std::uint32_t>> prepared_transactions::in_doubt() const {
  std::vector<std::pair<hash128, std::uint32_t>> out;
  out.reserve(prepared_.size());
  for (const auto& [id, p] : prepared_) out.emplace_back(id, p.coordinator);
  return out;
}

}  // namespace magnetite
