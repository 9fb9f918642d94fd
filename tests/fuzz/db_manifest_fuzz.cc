// db_manifest: the database's MANIFEST ("magnetite-manifest 1\nshards N\n"),
// read by database::recorded_shards (read_manifest in engine/data_directory.cc) from
// an in-memory env.
//
// Input: the MANIFEST file's bytes.
// Invariants: reading returns the shard count, corruption, or not_supported
// (a newer version's manifest), never crashes;
// what it accepts is exactly the text the database writes for that count.
#include <fmt/format.h>

#include "actors/database_core.h"
#include "core/fault_env.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;

MAGNETITE_FUZZ_TARGET(db_manifest) {
  std::string_view in = as_view(data, size);
  fault_env e;
  FUZZ_CHECK(e.create_dir("/db").is_ok());
  put_file(e, "/db/MANIFEST", in);
  auto r = database_core::recorded_shards("/db", &e);
  if (!r) {
    // not_supported: a manifest of a newer format version, refused as such.
    auto code = r.error().code();
    FUZZ_CHECK(code == status_code::corruption ||
               (code == status_code::not_supported && in.starts_with("magnetite-manifest")));
    return 0;
  }
  FUZZ_CHECK(r->has_value());
  FUZZ_CHECK(in == fmt::format("magnetite-manifest 1\nshards {}\n", **r));
  return 0;
}
