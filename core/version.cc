#include "magnetite/version.h"

// meson.build's project version, passed in by core/meson.build. The header's
// macros are written by hand: a release that bumps one and not the other
// stops here.
static_assert(MAGNETITE_VERSION_MAJOR == MAGNETITE_PROJECT_VERSION_MAJOR &&
                  MAGNETITE_VERSION_MINOR == MAGNETITE_PROJECT_VERSION_MINOR &&
                  MAGNETITE_VERSION_PATCH == MAGNETITE_PROJECT_VERSION_PATCH,
              "include/magnetite/version.h and meson.build's version differ");

const char* magnetite::version() noexcept { return MAGNETITE_PROJECT_VERSION; }
