// serve: `magnetite serve --node ID --cluster FILE [--data DIR]` runs one node
// of a cluster (replication/node.h) until SIGINT or SIGTERM: the database in
// DIR with the cluster's shard count, its replicas published on the node's
// cluster-file address, and links to the other nodes, retried every 500 ms
// until all are linked. It prints one line when it listens and one when each
// peer is linked, for scripts and tests to wait on.
#pragma once

#include <cstdint>
#include <string>

namespace magnetite {

int run_serve(std::uint32_t node_id, const std::string& cluster_path, const std::string& data_dir);

}  // namespace magnetite
