// cluster_client: a host's handle on a replicated cluster, used like a
// database (this header pulls in no CAF). It reads the cluster file every
// node runs with, connects to the nodes as a client (node id 0) over CAF's
// network layer, and sends each call to the owner of the key's shard
// (docs/design/replication.md, 8).
//
// Routing: shard = XXH3-64(key) mod shards, as a database routes; the client
// remembers each shard's owner. A node that does not own the shard answers
// `busy`; the client then asks every node who owns it and goes there, and
// while an election runs (nobody owns it) it waits, from 20 ms doubling to
// 500 ms, until the call's deadline.
//
// At most once: every write carries a request id (this client's random
// session and a number it never reuses), kept on every retry of it. A write
// whose answer was lost - a timeout, a broken connection, an owner that
// stepped down or died - is sent again with its id, to whichever node owns
// the shard by then; an owner that finds the write's record answers as the
// write did and writes nothing (replication/request_record.h). So a call
// that returns ok took place exactly once, and a CAS that reports swapped
// did swap. Records are kept for the cluster's request memory (10 minutes);
// calls end long before (call_timeout).
//
// Errors: invalid input is invalid_argument at once, and nothing is sent. A
// call that runs out of time answers `timeout`: transient if no attempt can
// have been applied (every node refused it), ambiguous if one may have.
//
// Reads are linearizable: the owner confirms with a majority that it still
// owns the shard before it answers.
//
// Thread-safe: calls from many threads run concurrently (each waits for its
// own answer); the client owns an actor system of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "magnetite/config.h"
#include "magnetite/stats.h"
#include "magnetite/status.h"
#include "magnetite/write.h"

namespace magnetite {

class state_storage;

struct cluster_client_options {
  // The cluster file, as every node runs with it (docs/design/replication.md, 7).
  std::string cluster_file;
  // Unless the file says `tls off`: this client's certificate and key (its
  // owner's alone, mode 0600) and the cluster's CA, PEM, read once at
  // connect; the nodes check the certificate against the CA, and with
  // certificates that name members (`magnetite cert`), take this one as the
  // client it names, never as a node.
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_ca;
  // A call gives up after this long, retries included.
  std::chrono::milliseconds call_timeout{10'000};
  // One request to one node: past it the client tries again (the same
  // request id), elsewhere if the owner changed.
  std::chrono::milliseconds attempt_timeout{2'000};
  // A transaction across shards (<magnetite/state/records.h>) holds its keys
  // from its prepare to its finish. One whose client died or lost touch is
  // resolved by the next call that meets its hold once it is older than
  // this: it commits if its coordinator decided so, else it is aborted.
  // Shorter than a commit's own calls can take, it aborts commits that are
  // only slow (they then answer a conflict, nothing written).
  std::chrono::milliseconds resolve_after{30'000};
  // Calls (of every thread, state's included) in flight at once. Past it a
  // call waits for room until its call_timeout, then answers `busy`
  // (transient, nothing sent): a host with unbounded threads meets a bound
  // here, not in the owners' queues and its own memory.
  std::size_t max_calls_in_flight = 1024;
};

class MAGNETITE_API cluster_client {
 public:
  // Reads and checks the cluster file (and the TLS files); connects lazily,
  // so nodes that are down now are not an error.
  static result<std::unique_ptr<cluster_client>> connect(cluster_client_options options);
  ~cluster_client();
  cluster_client(const cluster_client&) = delete;
  cluster_client& operator=(const cluster_client&) = delete;

  status put(std::string_view key, std::string_view value, std::optional<std::chrono::nanoseconds> ttl = {});
  status del(std::string_view key);
  result<std::optional<std::string>> get(std::string_view key);
  // expected nullopt: the key must be absent; desired nullopt: delete it.
  result<cas_outcome> cas(std::string_view key, std::optional<std::string_view> expected,
                          std::optional<std::string_view> desired, std::optional<std::chrono::nanoseconds> ttl = {});

  std::size_t shards() const noexcept;
  std::size_t shard_of(std::string_view key) const noexcept;
  // The node this client last found owning `shard`; 0 when it knows none.
  std::uint32_t owner_of(std::size_t shard) const noexcept;
  // Calls sent again after a lost answer or a moved owner, since connect.
  std::uint64_t retries() const noexcept;
  // max_calls_in_flight's counts since connect (bytes are not counted).
  admission_stats calls() const;

  // The way <magnetite/state.h> reaches the cluster (state::records has a
  // constructor from a cluster_client); not for hosts to call.
  state_storage& state_store() noexcept;

  // The client's inside (replication/cluster_client_impl.h), opaque here.
  struct impl;

 private:
  explicit cluster_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace magnetite
