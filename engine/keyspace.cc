#include "engine/keyspace.h"

#include "core/coding.h"

namespace magnetite::keyspace {

std::string data_key(std::string_view user_key) {
  std::string k;
  k.reserve(1 + user_key.size());
  k.push_back(data_tag);
  k.append(user_key);
  return k;
}

std::string expiry_key(std::uint64_t deadline_ns, std::string_view user_key) {
  std::string k(9, '\0');
  k[0] = expiry_tag;
  encode_fixed64_be(reinterpret_cast<std::uint8_t*>(k.data() + 1), deadline_ns);
  k.append(user_key);
  return k;
}

bool parse_expiry_key(std::string_view tree_key, std::uint64_t& deadline_ns, std::string_view& user_key) {
  if (tree_key.size() < 10 || tree_key[0] != expiry_tag) return false;
  deadline_ns = decode_fixed64_be(reinterpret_cast<const std::uint8_t*>(tree_key.data() + 1));
  user_key = tree_key.substr(9);
  return true;
}

}  // namespace magnetite::keyspace
