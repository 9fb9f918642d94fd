// peer_identity: who a certificate says its holder is in a cluster, from a
// URI subject alternative name (cluster_certificates.h makes them):
//
//   magnetite://CLUSTER/node/ID       a node of the cluster file (ID > 0)
//   magnetite://CLUSTER/client/NAME   a client
//
// A cluster whose nodes' certificates carry such names binds every TLS link
// to one: the door refuses a link whose certificate names no member or
// client of the cluster, or names a node another link already speaks for,
// and the replicas take member-only messages from node certificates alone
// (docs/design/replication.md, 7.3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct x509_st;

namespace magnetite::replication {

struct peer_identity {
  enum class role : std::uint8_t { node, client };
  role as = role::node;
  std::uint32_t node = 0;  // as node
  std::string client;      // as client

  friend bool operator==(const peer_identity&, const peer_identity&) = default;
  bool is_node(std::uint32_t id) const noexcept { return as == role::node && node == id; }
  std::string to_string() const;
};

// The identity `uri` names in `cluster`, or none (another cluster, another
// form, a node id of 0 or beyond 32 bits, an empty client name).
std::optional<peer_identity> parse_identity(std::string_view uri, std::string_view cluster);

// The magnetite:// URIs of a certificate's subject alternative names, in order.
std::vector<std::string> certificate_names(x509_st* cert);

// The one identity in `cluster` a certificate's names give, or none (also
// when it names two).
std::optional<peer_identity> identity_of(x509_st* cert, std::string_view cluster);

}  // namespace magnetite::replication
