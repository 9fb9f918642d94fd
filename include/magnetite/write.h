// write: what a host hands to a write and what a conditional write answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "magnetite/config.h"

namespace magnetite {

// One write of an atomic batch.
struct batch_write {
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
  std::optional<std::chrono::nanoseconds> ttl;
};

// What cas() answers (and the engine's conditional batches): whether the
// write took place, and if not what was found instead.
struct cas_outcome {
  bool swapped = false;
  std::optional<std::string> current;  // the value found when the CAS failed
  // apply only: the revision of its writes (the log frame's sequence number),
  // or, for an apply without writes, the last sequence it was checked against.
  std::uint64_t revision = 0;
  // apply only, when it was refused: the first check that failed, and the
  // revision found there (0: absent or expired).
  std::optional<std::uint32_t> failed_check;
  std::uint64_t found = 0;

  // A write that took place; a CAS that found `current` instead.
  static cas_outcome applied() {
    cas_outcome o;
    o.swapped = true;
    return o;
  }
  static cas_outcome refused(std::optional<std::string> current) {
    cas_outcome o;
    o.current = std::move(current);
    return o;
  }
};

}  // namespace magnetite
