// The one `must` of the tests: the value of a result, or the test stops there
// with the error's text.
#pragma once

#include <doctest/doctest.h>

#include <utility>

#include "core/status.h"

namespace magnetite::testing {

template <class T>
T must(result<T> r) {
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  return std::move(r.value());
}

}  // namespace magnetite::testing
