// ledgers: pairs of ledgers, one on shard 0 and one on shard 1, and
// transfers between them in one transaction across shards, for the cluster
// tests that check such a transaction is all or nothing: whatever a fault
// cuts, each pair sums to 0.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "magnetite/state/records.h"

namespace magnetite::testing {

// A ledger's balance, record "bal" as a JSON number; 0 when absent.
inline int balance_of(const std::optional<state::record>& r) {
  return r ? std::get<state::json>(r->value).get<int>() : 0;
}

// n pairs of ledger namespaces ("ledger<i>"): firsts on shard 0, seconds on shard 1.
inline std::pair<std::vector<std::string>, std::vector<std::string>> ledger_pairs(const state::records& recs, int n) {
  std::vector<std::string> a(n), b(n);
  for (int t = 0, i = 0; t < n; ++i) {
    std::string ns = fmt::format("ledger{}", i);
    if (recs.shard_of(ns) == 0 && a[t].empty()) a[t] = ns;
    if (recs.shard_of(ns) == 1 && b[t].empty()) b[t] = ns;
    if (!a[t].empty() && !b[t].empty()) ++t;
  }
  return {a, b};
}

// Moves `amount` from ledger `from` to ledger `to` in one transaction; the
// balances it read go to `read` when given.
inline result<std::uint64_t> transfer(state::records& recs, const std::string& from, const std::string& to, int amount,
                                      std::pair<int, int>* read = nullptr) {
  auto tx = recs.begin();
  auto x = tx.load(from, "bal");
  if (!x) return x.error();
  if (read) read->first = balance_of(*x);
  auto y = tx.load(to, "bal");
  if (!y) return y.error();
  if (read) read->second = balance_of(*y);
  MAGNETITE_TRY(tx.put(from, "bal", state::json(balance_of(*x) - amount)));
  MAGNETITE_TRY(tx.put(to, "bal", state::json(balance_of(*y) + amount)));
  return tx.commit();
}

}  // namespace magnetite::testing
