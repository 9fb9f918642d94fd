// Shared set-up for WAL tests: a fault_env with a log directory, and helpers to
// recover and reopen the log the way an owner would after a restart.
#pragma once

#include <doctest/doctest.h>

#include "core/fault_env.h"
#include "wal/log_writer.h"
#include "wal/recovery.h"

namespace magnetite::testing {

inline constexpr const char* wal_dir = "/db/wal";

struct wal_fixture {
  fault_env env;
  wal::writer_options options;

  wal_fixture() {
    REQUIRE(env.create_dir("/db").is_ok());
    REQUIRE(env.create_dir(wal_dir).is_ok());
  }

  result<wal::recovered_log> recover(bool repair = true) {
    return wal::recover(env, wal_dir, wal::recovery_options{repair});
  }

  // Recovers, then opens a writer on the result.
  std::pair<wal::recovered_log, std::unique_ptr<wal::log_writer>> reopen() {
    auto rec = recover();
    REQUIRE_MESSAGE(rec.is_ok(), rec.error().to_string());
    auto w = wal::log_writer::open(env, wal_dir, options, *rec);
    REQUIRE_MESSAGE(w.is_ok(), w.error().to_string());
    return {std::move(*rec), std::move(*w)};
  }

  std::string segment_path(std::uint64_t n) const {
    return path_join(wal_dir, wal::segment_file_name(n));
  }
};

inline std::string key_of(int i) { return fmt::format("key-{:06}", i); }
inline std::string value_of(int i) { return fmt::format("value-{}-{}", i, std::string(i % 37, 'v')); }

}  // namespace magnetite::testing
