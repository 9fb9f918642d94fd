// load_run: N distinct keys written by W concurrent writers through a
// blocking put (a database's, or a cluster client's), as `magnetite load`
// and the demo run them.
//
// Key i (0 <= i < N) is "<prefix><seed>-<i>" and its value the `value_size`
// bytes load_value(value_seed, i, value_size), value_seed being seed unless
// given: both are functions of their inputs only, so a checker can recompute
// what a load wrote, and a load with the same seed and another value_seed
// rewrites the same keys with new values. Writers take the next i
// from a shared counter.
//
// Acknowledgement contract (the ack log): after put(key i) returned ok, and
// before the writer takes another key, the line "key<TAB>value\n" (escaped as
// `scan` prints, cli_text.h) is appended to the ack log with ONE write(2) on a
// descriptor opened O_APPEND, one writer at a time. A process killed at any
// moment therefore leaves a log whose every complete line is a write the
// database acknowledged. A failed or short write is cut back to the start of
// its line and stops the load with an error.
//
// A write that fails with a transient or ambiguous error (its shard is
// restarting) is retried until `retry_for` has passed since its first attempt:
// a put of the same key and value is idempotent. Any other error stops every
// writer and is returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "actors/database_core.h"

namespace magnetite {

struct load_options {
  std::uint64_t keys = 0;
  std::size_t writers = 1;
  std::size_t value_size = 100;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> value_seed;  // nullopt: seed
  std::string prefix;
  std::string ack_log;  // empty: none
  std::chrono::milliseconds retry_for{30'000};
  // Called about every 100 ms from a watcher thread with the writes done so
  // far, and once at the end.
  std::function<void(std::uint64_t done)> progress;
  // Called by the writer that completed write `at`, once, when `at` writes are
  // done (the demo kills a shard there). May block briefly.
  std::uint64_t event_at = 0;
  std::function<void()> event;
};

struct load_result {
  std::uint64_t written = 0;
  std::uint64_t retries = 0;  // attempts that failed transiently and were repeated
  double seconds = 0;
};

std::string load_key(const std::string& prefix, std::uint64_t seed, std::uint64_t i);
std::string load_value(std::uint64_t seed, std::uint64_t i, std::size_t size);

// A blocking put of key = value: ok once durable.
using load_put = std::function<status(const std::string& key, const std::string& value)>;

result<load_result> run_load(const load_put& put, const load_options& o);
result<load_result> run_load(database& db, const load_options& o);

}  // namespace magnetite
