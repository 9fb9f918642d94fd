// cluster_certificates: a development CA, and a certificate and key for
// every node of a cluster file and for each client named, in one step
// (`magnetite cert`; docs/design/replication.md, 7).
//
// Each certificate names who it is for in a URI subject alternative name,
//   magnetite://CLUSTER/node/ID       a node of the cluster file
//   magnetite://CLUSTER/client/NAME   a client
// (a node's also its host, as an IP address or DNS name), so that a node can
// tell members from clients and one node from another by the certificate
// a link shows, not by what the link claims.
//
// Contract:
// - Writes into `dir` (made if missing, 0700): ca.pem and ca.key, then
//   node<ID>.pem/.key for every node and client-<NAME>.pem/.key for every
//   client. Keys are 0600, certificates 0644. No file is ever overwritten:
//   if any of them exists, nothing is written and the error names it.
// - EC P-256 keys, SHA-256 signatures, valid from an hour ago for `days`
//   days; node certificates serve both ends of a link, client ones only
//   the client end. Every certificate passes check_tls_files with ca.pem.
// - A client name is 1 to 64 of letters, digits, '.', '-', '_'.
// - For development and tests: the CA's key lies beside the certificates.
//   A production cluster's CA belongs elsewhere, and its key offline.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "replication/cluster_file.h"
#include "replication/tls_context.h"

namespace magnetite::replication {

struct certificate_set {
  std::string dir;
  // Clients to certify besides those the cluster file grants keys to
  // (each named once, whichever list names it).
  std::vector<std::string> clients;
  int days = 365;
};

// What one holder uses of a set made in `dir`: its certificate and key,
// `who` being `node<ID>` or `client-<NAME>`, and the CA's certificate.
tls_files certificate_files(const std::string& dir, std::string_view who);

// The files written, in order, or why none was.
result<std::vector<std::string>> make_cluster_certificates(const cluster_file& cluster, const certificate_set& set);

// The magnetite:// names a PEM certificate file carries, in order.
result<std::vector<std::string>> certificate_names(const std::string& pem_file);

}  // namespace magnetite::replication
