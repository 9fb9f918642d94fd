// What tests that open a whole database share: options with small tree nodes
// (so that a few hundred keys make a deep tree) and an open that fails the
// test case with the error's text.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "actors/database_core.h"
#include "tests/support/crashable_env.h"

namespace magnetite::testing {

inline core_options options_for(const std::string& dir, std::size_t shards = 4) {
  core_options o;
  o.dir = dir;
  o.shards = shards;
  o.shard.chunking = {256, 64, 1024};
  return o;
}

inline std::unique_ptr<database> must_open(core_options o) {
  auto db = open_database(std::move(o));
  REQUIRE_MESSAGE(db.is_ok(), db.error().to_string());
  return std::move(*db);
}

// One field of stats().usage summed over the shards, e.g.
// usage_total(db, &shard_usage::live_node_bytes).
inline std::uint64_t usage_total(database& db, std::uint64_t shard_usage::*field) {
  auto st = db.stats();
  REQUIRE_MESSAGE(st.is_ok(), st.error().to_string());
  std::uint64_t n = 0;
  for (const auto& u : st->usage) n += u.*field;
  return n;
}

// A database on a fault_env whose power a test cuts between calls, then opens
// again as a new process would (a fresh crashable_env over the same files).
class power_cut_database {
 public:
  // options_for(dir, shards), for a machine other tests share; `fs` is set here.
  power_cut_database(std::string dir, std::size_t shards) : options_(options_for(dir, shards)) {
    options_.worker_spin_polls = 100;
  }
  ~power_cut_database() { db_.reset(); }  // before the env its files live in

  database& open() {
    db_.reset();
    if (fs_ && fs_->dead()) fs_.reset();
    if (!fs_) fs_ = std::make_unique<crashable_env>(fe_);
    auto o = options_;
    o.fs = fs_.get();
    db_ = must_open(std::move(o));
    return *db_;
  }
  // The power goes: unsynced writes are lost, kept or torn as `mode` says
  // (the n-th of lose, keep, random, reorder); the database is dropped.
  void power_cut(std::uint64_t mode, std::uint64_t seed) {
    static constexpr fault_env::unsynced modes[] = {fault_env::unsynced::lose, fault_env::unsynced::keep,
                                                    fault_env::unsynced::random, fault_env::unsynced::reorder};
    fs_->kill();
    fe_.crash(modes[mode % 4], seed);
    db_.reset();
  }
  database& db() { return *db_; }

 private:
  core_options options_;
  fault_env fe_;
  std::unique_ptr<crashable_env> fs_;
  std::unique_ptr<database> db_;
};

}  // namespace magnetite::testing
