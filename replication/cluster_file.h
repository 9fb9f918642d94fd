// cluster_file: the fixed membership of a cluster (docs/formats/replication.md,
// section 4), one line per fact:
//
//   # a comment; blank lines are skipped
//   cluster orders                 a name (letters, digits, '-', '_', '.')
//   shards 4                       every node holds every shard, 1..1024
//   tombstone_retention_s 86400    optional (default 86400): see design, 1
//   tls off                        optional (default on): links only over TLS;
//                                  off needs every node started insecure
//   node 1 127.0.0.1 7401          id (1..2^32-1), host, port (1..65535)
//   client reports read orders/    optional, any number: what a named client
//                                  may read, or read and write (readwrite), by
//                                  key prefix (client_access.h). With any
//                                  `client` line, a client named in none may
//                                  do nothing; with none, every client may do
//                                  everything. Needs certificates that name
//                                  nodes and clients (peer_identity.h).
//
// Every node of a cluster must read the same facts: the fingerprint (XXH3-128
// of the canonical text: the facts in a fixed order, nodes by id) is what two
// nodes compare at the handshake, so comments, blank lines, spacing and the
// order of node lines do not matter, and any other difference refuses the
// link. parse() names the line and what is wrong; nothing is guessed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash128.h"
#include "core/status.h"
#include "replication/client_access.h"

namespace magnetite::replication {

// A cluster's or a client's name: 1 to 64 letters, digits, '-', '_' or '.'
// (what a cluster file and a certificate's URI name both hold).
bool valid_name(std::string_view name);

struct cluster_node {
  std::uint32_t id = 0;
  std::string host;
  std::uint16_t port = 0;
};

struct cluster_file {
  std::string name;
  std::size_t shards = 0;
  std::uint64_t tombstone_retention_s = 86'400;
  // Every link over TLS, both ends showing a certificate signed by the
  // cluster's CA: on unless the file says `tls off`. Only the switch is a
  // fact of the cluster file: each node's certificate, key and CA file are
  // its own (node.h, tls_files), so the paths can differ per machine.
  bool tls = true;
  std::vector<cluster_node> nodes;  // by id
  // What each named client may touch; empty: every client, everything.
  std::map<std::string, client_access> clients;

  static result<cluster_file> parse(std::string_view text);
  std::string canonical() const;
  hash128 fingerprint() const { return hash128::of(canonical()); }
  // The node with this id, or nullptr.
  const cluster_node* node(std::uint32_t id) const;
  // The grants of client `name` (none when the file names it in no line).
  client_access access_of(const std::string& name) const;
  std::size_t majority() const { return nodes.size() / 2 + 1; }
  // The first node whose host is not a loopback address (127.0.0.0/8 as a
  // dotted quad, ::1, localhost), or nullptr. A host name other than
  // localhost counts as beyond loopback: what it resolves to is not known
  // here, and a guess would fail open.
  const cluster_node* beyond_loopback() const;
};

}  // namespace magnetite::replication
