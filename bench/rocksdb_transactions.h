// rocksdb_transactions: RocksDB's two transactional stores opened the way the
// benches compare against them (state_bench, replication_bench --records):
// TransactionDB (pessimistic: GetForUpdate locks, deadlock detection on) and
// OptimisticTransactionDB (checked at Commit), other options RocksDB's
// defaults. Every commit the benches make is durable: they pass
// WriteOptions::sync = true to begin().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/optimistic_transaction_db.h>
#include <rocksdb/utilities/transaction.h>
#include <rocksdb/utilities/transaction_db.h>

namespace magnetite::bench {

// The base DB (for loading and checking) and a way to begin a transaction
// that reuses the thread's previous handle, as RocksDB allows.
struct rocks_transactions {
  std::unique_ptr<rocksdb::DB> db;  // the transaction DB, as its base class
  std::function<rocksdb::Transaction*(const rocksdb::WriteOptions&, rocksdb::Transaction*)> begin;
};

inline rocksdb::Status open_rocks_transactions(const std::string& dir, bool optimistic, rocks_transactions& out) {
  rocksdb::Options o;
  o.create_if_missing = true;
  if (optimistic) {
    rocksdb::OptimisticTransactionDB* raw = nullptr;
    auto s = rocksdb::OptimisticTransactionDB::Open(o, dir, &raw);
    if (!s.ok()) return s;
    out.db.reset(raw);
    out.begin = [raw](const rocksdb::WriteOptions& wo, rocksdb::Transaction* old) {
      return raw->BeginTransaction(wo, rocksdb::OptimisticTransactionOptions(), old);
    };
    return s;
  }
  rocksdb::TransactionDB* raw = nullptr;
  auto s = rocksdb::TransactionDB::Open(o, rocksdb::TransactionDBOptions(), dir, &raw);
  if (!s.ok()) return s;
  out.db.reset(raw);
  // Without detection a deadlock (two transactions locking the same two
  // keys in opposite orders) would wait out the 1 s lock timeout.
  rocksdb::TransactionOptions to;
  to.deadlock_detect = true;
  out.begin = [raw, to](const rocksdb::WriteOptions& wo, rocksdb::Transaction* old) {
    return raw->BeginTransaction(wo, to, old);
  };
  return s;
}

// A conflict the transaction is retried after (rolled back first, which
// releases the locks it holds). Busy: a deadlock (pessimistic) or a write
// since the read (optimistic); TimedOut: a lock wait that ran out; TryAgain:
// the optimistic check found too little history in the memtables to decide.
inline bool rocks_conflict(const rocksdb::Status& s) { return s.IsBusy() || s.IsTimedOut() || s.IsTryAgain(); }

// One read-modify-write transaction over `keys`, run until it commits: for
// each key in order GetForUpdate, then Put update(key, its value or nullopt
// when absent); then Commit. A conflict is rolled back (which releases the
// locks it holds), counted in `conflicts` and retried; any other error is
// returned. `handle` is the calling thread's transaction, reused across calls.
template <class Update>
rocksdb::Status locked_update(const rocks_transactions& r, const rocksdb::WriteOptions& wo,
                              std::unique_ptr<rocksdb::Transaction>& handle, std::span<const std::string> keys,
                              Update update, std::uint64_t& conflicts) {
  for (;;) {
    rocksdb::Transaction* txn = r.begin(wo, handle.get());
    if (txn != handle.get()) handle.reset(txn);
    bool lost = false;
    for (const auto& k : keys) {
      std::string old;
      auto s = txn->GetForUpdate(rocksdb::ReadOptions(), k, &old);
      if (rocks_conflict(s)) {
        lost = true;
        break;
      }
      if (!s.ok() && !s.IsNotFound()) return s;
      if (s = txn->Put(k, update(k, s.ok() ? std::optional<std::string>(std::move(old)) : std::nullopt)); !s.ok())
        return s;
    }
    if (!lost) {
      auto s = txn->Commit();
      if (s.ok() || !rocks_conflict(s)) return s;
    }
    if (auto s = txn->Rollback(); !s.ok()) return s;
    ++conflicts;
  }
}

}  // namespace magnetite::bench
