#include "core/stamp.h"

#include <fmt/format.h>

namespace magnetite {

std::string to_string(const ballot& b) { return fmt::format("{}.{}", b.counter, b.node); }

std::string to_string(const stamp& s) { return fmt::format("{}.{}:{}", s.epoch.counter, s.epoch.node, s.seq); }

}  // namespace magnetite
