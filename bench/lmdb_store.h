// lmdb_store: an LMDB environment with its main database, as the benchmarks
// that measure LMDB beside us open it (Debian liblmdb-dev). Any LMDB error
// ends the run: a benchmark that carries on past one measures nothing.
#pragma once

#include <lmdb.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace magnetite::bench {

inline void lmdb_check(int rc, const char* what) {
  if (rc == 0) return;
  fmt::print(stderr, "lmdb {}: {}\n", what, mdb_strerror(rc));
  std::exit(1);
}

inline MDB_val lmdb_val(const std::string& s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }
inline std::string_view view_of(const MDB_val& v) { return {static_cast<const char*>(v.mv_data), v.mv_size}; }

// An environment in `dir` (created). `flags` 0 keeps LMDB's durable commits.
struct lmdb_store {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;

  lmdb_store(const std::string& dir, unsigned flags, std::size_t map_bytes) {
    std::filesystem::create_directories(dir);
    lmdb_check(mdb_env_create(&env), "env_create");
    lmdb_check(mdb_env_set_mapsize(env, map_bytes), "set_mapsize");
    lmdb_check(mdb_env_open(env, dir.c_str(), flags, 0644), "env_open");
    MDB_txn* txn = nullptr;
    lmdb_check(mdb_txn_begin(env, nullptr, 0, &txn), "txn_begin");
    lmdb_check(mdb_dbi_open(txn, nullptr, 0, &dbi), "dbi_open");
    lmdb_check(mdb_txn_commit(txn), "txn_commit");
  }
  ~lmdb_store() { mdb_env_close(env); }
  lmdb_store(const lmdb_store&) = delete;
  lmdb_store& operator=(const lmdb_store&) = delete;
};

}  // namespace magnetite::bench
