// version: which magnetite a host was compiled against, and which it runs on.
//
// The library follows semantic versioning: the major version is in its
// SONAME (libmagnetite.so.MAJOR) and changes only when the public API or ABI
// breaks; CHANGELOG.md records every change to the public headers.
#pragma once

#include "magnetite/config.h"

// The version of these headers (from meson.build's project version; the
// version test checks that they agree).
#define MAGNETITE_VERSION_MAJOR 0
#define MAGNETITE_VERSION_MINOR 1
#define MAGNETITE_VERSION_PATCH 0

namespace magnetite {

// The version of the library the program runs on, "MAJOR.MINOR.PATCH".
MAGNETITE_API const char* version() noexcept;

}  // namespace magnetite
