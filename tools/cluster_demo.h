// cluster_demo: `magnetite cluster-demo` shows replication end to end
// (docs/cli.md): three `magnetite serve` processes on loopback under DIR, an
// owner elected by the nodes themselves, writes through it, the owner
// SIGKILLed while a write is in flight, another node taking over unasked with
// every acknowledged write, and the killed node restarted and brought up to
// date by delta (the nodes and bytes it pulled, beside the shard's data).
//
// It exits 0 only if no acknowledged write was lost and the three replicas
// ended with the same tree; 1 otherwise, 2 when it could not set up.
#pragma once

#include <cstdint>
#include <string>

namespace magnetite {

struct cluster_demo_options {
  std::string dir;                // created; must not hold anything yet (empty: a new
                                  // directory under the system's temporary directory)
  std::uint64_t keys = 2000;      // acknowledged writes before the kill
  std::uint64_t missed = 500;     // writes the killed node misses
  std::uint16_t base_port = 0;    // nodes on base_port, +1, +2; 0: from the pid
};

int run_cluster_demo(const cluster_demo_options& options);

}  // namespace magnetite
