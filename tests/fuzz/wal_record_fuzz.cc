// wal_record: WAL payload decoding (wal::decode_record) on arbitrary bytes.
//
// Input: u8 record type (any value, known or not) | payload.
// Invariants: decode_record never reads outside the payload; it fails only with
// corruption (or not_supported for an unknown type); a record it accepts
// passes the writer's own checks (check_batch) and re-encodes with the writer's
// encoders to exactly the payload (one encoding per record).
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "wal/record.h"

using namespace magnetite;
using namespace magnetite::fuzz;

MAGNETITE_FUZZ_TARGET(wal_record) {
  control c(as_view(data, size));
  auto type = static_cast<wal::record_type>(c.u8());
  std::string_view payload = c.rest();
  auto r = wal::decode_record(type, 7, payload);
  if (!r) {
    auto code = r.error().code();
    FUZZ_CHECK(code == status_code::corruption || code == status_code::not_supported);
    bool known = static_cast<std::uint8_t>(type) >= 1 && static_cast<std::uint8_t>(type) <= wal::max_record_type;
    FUZZ_CHECK(known == (code == status_code::corruption));
    return 0;
  }
  FUZZ_CHECK(r->type == type && r->sequence == 7);
  std::vector<wal::mutation_view> views;
  for (const auto& m : r->mutations) views.push_back({m.kind, m.key, m.value});
  std::string re;
  switch (type) {
    case wal::record_type::put:
      FUZZ_CHECK(views.size() == 1 && views[0].kind == wal::mutation_kind::put);
      FUZZ_CHECK(wal::check_batch(views).is_ok());
      wal::encode_put(re, views[0].key, views[0].value);
      break;
    case wal::record_type::del:
      FUZZ_CHECK(views.size() == 1 && views[0].kind == wal::mutation_kind::del && views[0].value.empty());
      FUZZ_CHECK(wal::check_batch(views).is_ok());
      wal::encode_del(re, views[0].key);
      break;
    case wal::record_type::batch:
      FUZZ_CHECK(!views.empty());
      for (const auto& v : views) FUZZ_CHECK(v.kind == wal::mutation_kind::put || v.value.empty());
      FUZZ_CHECK(wal::check_batch(views).is_ok());
      wal::encode_batch(re, views);
      break;
    case wal::record_type::commit:
    case wal::record_type::commit_runs:
      FUZZ_CHECK(views.empty());
      FUZZ_CHECK(wal::commit_type(r->commit) == type);
      wal::encode_commit(re, r->commit);
      break;
    case wal::record_type::replication_state:
      FUZZ_CHECK(views.empty());
      re = r->payload;
      break;
    default:
      FUZZ_CHECK(!"decode_record accepted an unknown record type");
  }
  FUZZ_CHECK(re == payload);
  return 0;
}
