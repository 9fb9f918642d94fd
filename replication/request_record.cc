#include "replication/request_record.h"

#include "core/coding.h"
#include "engine/state_space.h"

namespace magnetite::replication {

namespace {
constexpr char request_tag = 0x69;
}

std::string request_record_key(const request_id& id) {
  std::string key(state_space::prefix);
  key.push_back(request_tag);
  auto session = id.session.to_bytes();
  key.append(reinterpret_cast<const char*>(session.data()), session.size());
  std::uint8_t seq[8];
  encode_fixed64_be(seq, id.seq);
  key.append(reinterpret_cast<const char*>(seq), sizeof seq);
  return key;
}

std::string request_record_value(std::uint64_t revision) {
  std::uint8_t v[8];
  encode_fixed64_le(v, revision);
  return std::string(reinterpret_cast<const char*>(v), sizeof v);
}

}  // namespace magnetite::replication
