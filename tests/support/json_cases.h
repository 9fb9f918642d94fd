// Documents holding a number JSON cannot write (dump() would turn it into
// null), at the top and nested, each with where the refusal must say it is:
// what keyed state, records and streams must all refuse.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "magnetite/state/item.h"

namespace magnetite::testing {

inline std::vector<std::pair<state::json, std::string>> no_json_form() {
  using state::json;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  return {{json(nan), "value is NaN"},
          {json(inf), "value is infinity"},
          {json(-inf), "value is -infinity"},
          {json::array({json{{"deep", json::array({nan})}}}), "value at /0/deep/0 is NaN"},
          {json{{"a", 1}, {"list", json::array({1, json{{"x/y", nan}}})}}, "value at /list/1/x~1y is NaN"}};
}

}  // namespace magnetite::testing
