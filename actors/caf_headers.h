// caf_headers: CAF, as the engine's own code includes it: first, before any
// other CAF header, so that the warnings below stay silenced for CAF's code
// only.
//
// Why: GCC 12 reports -Warray-bounds (and, with the sanitizers' inlining,
// -Wstringop-overflow and -Wstringop-overread) inside CAF 0.17's serializer
// when it is instantiated for our message types: it serializes a bool through
// a one-byte temporary that GCC's range analysis, after inlining, takes for
// an out-of-bounds copy. The code is CAF's and correct; the reports would
// scroll past any warning of ours. GCC judges such a warning by every
// location it was inlined through, so a pragma around the place where CAF's
// headers are read covers CAF's templates and nothing of ours.
//
// Invariant: every file of ours that uses CAF includes this header (directly
// or through a header that does) before any <caf/...> header; CAF's headers
// have include guards, so a later <caf/all.hpp> adds nothing.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#pragma GCC diagnostic pop
