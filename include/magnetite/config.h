// config: what every public header of magnetite needs first.
//
// - The language: the public headers use C++20 (std::span, operator<=>,
//   concepts); an older standard stops here with an error that says so,
//   instead of with errors about those features.
// - MAGNETITE_API marks what the shared library exports. The library is built
//   with every other symbol hidden (-fvisibility=hidden), so what a host can
//   link against is exactly what the public headers declare with it.
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "magnetite needs C++20: compile with -std=c++20 (or later); pkg-config --cflags magnetite says so"
#endif

#if defined(_WIN32)
#define MAGNETITE_API
#else
#define MAGNETITE_API [[gnu::visibility("default")]]
#endif
