#include "replication/peer_identity.h"

#include <charconv>

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fmt/format.h>

namespace magnetite::replication {

std::string peer_identity::to_string() const {
  return as == role::node ? fmt::format("node {}", node) : fmt::format("client {}", client);
}

std::optional<peer_identity> parse_identity(std::string_view uri, std::string_view cluster) {
  std::string prefix = fmt::format("magnetite://{}/", cluster);
  if (uri.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = uri.substr(prefix.size());
  peer_identity out;
  if (rest.substr(0, 5) == "node/") {
    std::string_view digits = rest.substr(5);
    std::uint32_t id = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (ec != std::errc() || end != digits.data() + digits.size() || id == 0) return std::nullopt;
    out.node = id;
    return out;
  }
  if (rest.substr(0, 7) == "client/" && rest.size() > 7 && rest.find('/', 7) == std::string_view::npos) {
    out.as = peer_identity::role::client;
    out.client = std::string(rest.substr(7));
    return out;
  }
  return std::nullopt;
}

std::vector<std::string> certificate_names(x509_st* cert) {
  std::vector<std::string> out;
  if (!cert) return out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = g->d.uniformResourceIdentifier;
    std::string s(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                  static_cast<std::size_t>(ASN1_STRING_length(uri)));
    if (s.rfind("magnetite://", 0) == 0) out.push_back(std::move(s));
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::optional<peer_identity> identity_of(x509_st* cert, std::string_view cluster) {
  std::optional<peer_identity> found;
  for (const auto& n : certificate_names(cert)) {
    auto id = parse_identity(n, cluster);
    if (!id) continue;
    if (found && !(*found == *id)) return std::nullopt;
    found = std::move(id);
  }
  return found;
}

}  // namespace magnetite::replication
