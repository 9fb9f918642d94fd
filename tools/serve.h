// serve: `magnetite serve --node ID --cluster FILE [--data DIR]` runs one node
// of a cluster (replication/node.h) until SIGINT or SIGTERM: the database in
// DIR with the cluster's shard count, its replicas published on the node's
// cluster-file address, and links to the other nodes, tried every 200 ms
// (a node lost is linked again once it is back). It prints one line when it
// listens and one each time a peer is linked or lost, for scripts and tests
// to wait on. Elections, failover and anti-entropy run in the replicas.
// A cluster runs over TLS unless its file says `tls off`: then `tls`
// (--tls-cert, --tls-key, --tls-ca) is this node's own certificate and key
// and the cluster's CA; with `tls off` they are refused, and so is the
// cluster itself, loopback included, unless `insecure` (--insecure), which
// is then said on standard error at every start, naming who can join.
// `network` bounds what one
// connection may send and how long it may stay silent (--max-message-bytes,
// --max-handshake-bytes, --max-inflight-bytes, --handshake-timeout-ms, --idle-timeout-ms,
// --max-pending-connections; replication/guarded_network.h).
#pragma once

#include <cstdint>
#include <string>

#include "replication/node.h"

namespace magnetite {

int run_serve(std::uint32_t node_id, const std::string& cluster_path, const std::string& data_dir,
              const replication::tls_files& tls = {}, bool insecure = false,
              const replication::connection_limits& network = {});

}  // namespace magnetite
