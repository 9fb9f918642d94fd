// prepared_transactions: a participant's transactions that are prepared and
// not yet decided, and the keys they hold.
//
// A prepared transaction holds the keys it writes (against every other
// request) and the keys it read (against writers): until it is decided, a
// write or a check of a key it writes, or a write of a key it read, must
// wait (a conditional batch) or be refused (another prepare: prepares never
// wait, so two transactions can never wait on each other). That is what
// makes a transaction across shards serializable like one on a single shard:
// its checks stay true from its prepare until its writes are applied.
//
// The table is memory only; the prepare records in the shard's tree are the
// truth. A shard actor loads the table from its view when it boots (replay
// brings the records back), adds a transaction when its prepare is staged and
// removes it when its finish is staged, so the table always equals the
// records of the latest state, staged included.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/read_view.h"
#include "engine/shard.h"
#include "engine/transaction_records.h"

namespace magnetite {

class prepared_transactions {
 public:
  // Every prepare record the view holds (a replicated shard's stamped
  // tombstone of one is a record deleted); a damaged one is corruption
  // naming its transaction.
  static result<prepared_transactions> load(const read_view& view);

  // A key a conditional batch (checks, writes) may not touch now: the first
  // key held against it, or nullopt.
  std::optional<std::string> blocking(std::span<const state_check> checks, std::span<const batch_write> writes) const;
  bool holds(const hash128& id) const { return prepared_.contains(id); }
  // The prepared transaction `id`, or null.
  const transaction_records::prepare* find(const hash128& id) const {
    auto p = prepared_.find(id);
    return p == prepared_.end() ? nullptr : &p->second;
  }
  void add(transaction_records::prepare p);
  // Drops the transaction and its holds; what it held, or nullopt.
  std::optional<transaction_records::prepare> take(const hash128& id);
  // Every prepared transaction: id and coordinator.
  std::vector<std::pair<hash128, std::uint32_t>> in_doubt() const;
  std::size_t size() const noexcept { return prepared_.size(); }

 private:
  struct hold {
    std::size_t writers = 0;  // 0 or 1: two prepares never write one key
    std::size_t readers = 0;
  };
  void release(const transaction_records::prepare& p);

  std::map<hash128, transaction_records::prepare> prepared_;
  std::unordered_map<std::string, hold> holds_;
};

}  // namespace magnetite
