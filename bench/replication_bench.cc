// replication_bench: replicated durable writes (issue 8): writes/s and the
// latency of one write through the owner of a 3-node cluster on loopback,
// beside the same writes on a single node without replication and on a
// three-member etcd cluster (issue 22), in one run.
//
//   replication_bench [--dir D] [--ops N] [--threads T] [--keys K]
//                     [--value-bytes B] [--shards S] [--rounds R]
//                     [--warmup N] [--port P] [--request-timeout-ms MS]
//                     [--max-errors E] [--node-scheduler sharing|stealing]
//                     [--batches-in-flight N] [--middleman-workers N]
//                     [--etcd PATH|none] [--request-ids] [--records] [--tls]
//                     [--only CASE[,CASE...]]
//
// Every case but the raw one takes N writes (20 000 by default) from T client
// threads (32), N / T each, one at a time per thread; keys are 16 bytes, drawn
// at random from K (100 000), values B bytes (100); S shards (2: this machine
// has 2 cores), the default shard options (fsync policy `always`). A write
// counts when it is acknowledged, and each one is timed from its call to its
// answer:
//   single node: put   database::put, acknowledged after its group's
//                  fdatasync; the database with its own actor system, as a
//                  host embeds it (and as db_bench measures it);
//   single node: shard actor   the same database's shard actors asked
//                  directly with (put, key, value, 0) from a caf::scoped_actor
//                  per client thread (blocking requests): how the replicated
//                  cases' clients talk, without a replica in the way;
//   1-node cluster the same request to the replica of the key's shard, a
//                  cluster file with one node: the replica actor's path
//                  (per-key queue, stamp, one stamped apply to the shard)
//                  without a peer;
//   3 nodes        the same against a cluster of three: three actor systems in
//                  this process, each configured as `magnetite serve` does
//                  (io middleman, the replication message types), each with
//                  its own database in its own directory and its node
//                  published on 127.0.0.1. Node 1 owns every shard (an explicit
//                  elect per shard) and answers a write once its own shard and
//                  one peer made it durable (majority 2 of 3); rwrite goes to
//                  nodes 2 and 3 over TCP. The clients live in node 1's actor
//                  system, so a client's request crosses no socket: the case
//                  adds replication only, not a client's network hop;
//   etcd, 3 members  the same keys and values put into etcd (Debian's
//                  etcd-server, 3.4): three `etcd` child processes, a static
//                  cluster on 127.0.0.1 with etcd's default durability (its
//                  WAL fdatasync'd before an answer) and its own data under
//                  D. Each client thread has its own keep-alive HTTP/1.1
//                  connection to the leader's HTTP/JSON gateway and sends
//                  POST /v3/kv/put (etcd_peer.h): a client that needs no
//                  library, but whose JSON, and the gateway's hop into etcd's
//                  gRPC server, etcd pays for in CPU and latency, as it pays
//                  for the loopback socket a client of node 1 does not cross.
//                  Every write goes to the leader (as it was when the cluster
//                  became ready), as every write of the 3-node case goes to
//                  the owner: none pays a follower's forwarding hop. etcd is
//                  found on PATH, else at /usr/bin/etcd, or given by --etcd;
//                  without it (or with --etcd none) the row is skipped, said
//                  in one line, and the other cases run as ever;
//   3 nodes, cluster_client   a cluster like the 3-node case's, of its
//                  own (three more nodes), through the public client
//                  (<magnetite/cluster_client.h>) with its own actor system in
//                  this process, as a host uses a cluster: each write crosses
//                  a socket to the owner and carries a request id, so the
//                  owner also writes its request record (at most once). The
//                  records cases below use that cluster too: what they leave
//                  (a record a write, kept request_memory) must not burden
//                  the 3-node case's later rounds, as it did when they shared
//                  one (docs/benchmarks.md);
//   3 nodes, client, TLS+grants   with --tls: the cluster_client case on a
//                  cluster of its own over TLS (TLS is a cluster file's
//                  default), with certificates from make_cluster_certificates
//                  that name each node and the client, and a `client bench
//                  readwrite *` line: each write crosses a TLS session and is
//                  judged by the client's grants at the owner (design 7.4);
//   records: single node, records: 3 nodes, cluster_client   with
//                  --records: each write is a record transaction instead
//                  (state::records, <magnetite/state/records.h>): load the
//                  record (namespace = the key, record "r"), put the value,
//                  commit; a conflict is retried, and the retries are in the
//                  write's latency. On the single node the load reads the
//                  published view and the commit is one conditional batch;
//                  through the cluster client the load is a confirmed read at
//                  the owner and the commit a conditional batch with a
//                  request id: two round trips, the second answered after a
//                  majority made it durable; and "records across 2 shards"
//                  moves the value between the key's record and one in a
//                  namespace on the other shard (loads of both, a commit
//                  across shards: prepare, commit at the coordinator,
//                  finish, forget), through the client as well;
//   TransactionDB: 1 key, TransactionDB: 2 keys   with --records, beside
//                  them: RocksDB's TransactionDB (pessimistic, on one node,
//                  its files under D) doing a record transaction's work:
//                  GetForUpdate and Put of the key (and of a second key for
//                  the cross-shard case), Commit with WriteOptions::sync; a
//                  conflict is rolled back and retried within the write;
//   raw fdatasync  the physical limit of one sync per write: ONE thread
//                  writing 116-byte records into a preallocated file,
//                  fdatasync after each (bench_support.h), for 1 s.
// The three nodes share this machine's cores and its one disk: every write
// goes into three logs on the same device, and three nodes' actors run on the
// same cores as the 32 clients. Separate machines would not pay that; nor
// would etcd's three members, which pay it here alike.
//
// The cases run R rounds (3), in a rotated order each round; the report is the
// median over rounds per case: writes/s, p50 and p99 latency, the process's
// CPU time (getrusage, every thread) as a share of the cores and per write
// (for etcd, plus its members' from /proc/<pid>/stat: they are other
// processes), the writes in one batch the owner shipped, on average
// (replica_info), and the log fdatasyncs per acknowledged write on each node
// (etcd's members: their WAL's, from etcd's own /metrics); then the ratios
// 3 nodes / single node and the steps between, and 3 nodes / etcd (issue 22
// asks for 5x at 32 clients), of the medians and per round.
// After the rounds each cluster's three nodes must hold the same roots (every write
// reached every node), or the run fails. A write that fails is counted by
// kind (busy: not the owner; ambiguous: the owner stepped down; other); more
// than E (5) in a case fails the run after the report. --node-scheduler
// stealing gives the nodes' systems CAF's work stealing scheduler with its
// default polling instead of the work sharing one that
// replication::configure_system chooses (the cluster client's own system
// keeps it): what that choice is worth; --batches-in-flight the nodes'
// node_options::batches_in_flight (1, its default);
// --middleman-workers sets CAF's middleman.workers there (the
// threads that deserialize what arrives from peers; CAF's default when not
// given, as `magnetite serve`); --request-ids sends a request id with every write of the 1-node
// and 3-node cases (as cluster_client does), so the owners also write a
// request record each (what at-most-once costs, without the client's
// socket); --request-timeout-ms the nodes' request_timeout (2000, as
// node_options: an owner that hears from no majority within it steps down).
// --only runs the cases named and no others (their rows and the ratios
// between them): raw, put, shard-actor, one-node, three, client, etcd, and
// with --tls client-tls, with --records records, records-client,
// records-across, txdb, txdb-2; a
// profile of one case is `--only three` under perf.
// Ports: P to P + 3 for the nodes, P + 4 to P + 9 for etcd, P + 10 to P + 12
// for the client cases' nodes, P + 13 to P + 15 for client-tls's (default: 16 a
// process from 10000, by pid, below the ephemeral ports, so that runs side by
// side do not collide).
// Data under D (default ./bench-data/replication), removed at the end; the
// etcd members are stopped and reaped before, on every way out.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include "bench/bench_support.h"
#include "bench/etcd_peer.h"
#include "bench/rocksdb_transactions.h"
#include "magnetite/cluster_client.h"
#include "magnetite/state/records.h"
#include "replication/cluster_certificates.h"
#include "replication/node.h"
#include "replication/request_within.h"

using namespace magnetite;
using namespace magnetite::bench;

namespace {

std::size_t thread_count = 32, shard_count = 2, value_bytes = 100;
std::uint64_t key_space = 100'000;
bool with_records = false;  // --records
std::chrono::milliseconds request_timeout{2000};
bool node_stealing = false;  // --node-scheduler stealing
std::size_t batches_in_flight = replication::node_options{}.batches_in_flight;
std::optional<std::size_t> middleman_workers;  // CAF's default, as `magnetite serve`
bool request_ids = false;                      // replicated cases: a request id on every write
bool with_tls = false;                         // --tls: the client-tls case

std::string value_for(std::uint64_t n) {
  std::string v = fmt::format("{:016}", n);
  v.resize(value_bytes, static_cast<char>('a' + n % 26));
  return v;
}

// ---------------------------------------------------------------------------
// Failed writes, by kind.

struct failures {
  std::atomic<std::uint64_t> busy{0}, ambiguous{0}, other{0};
  std::mutex mu;
  std::string first;

  void add(const status& s) {
    if (s.code() == status_code::busy)
      ++busy;
    else if (s.category() == status_category::ambiguous)
      ++ambiguous;
    else
      ++other;
    std::lock_guard lock(mu);
    if (first.empty()) first = s.to_string();
  }
  std::uint64_t total() const { return busy + ambiguous + other; }
};

// ---------------------------------------------------------------------------
// The magnetite side: a database, alone or as one node of a cluster.

struct node_process {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<database> db;
  std::unique_ptr<replication::node> n;

  // Configured as tools/serve.cc configures a node; over TLS with `tls`.
  node_process(const std::string& dir, const replication::cluster_file& cluster, std::uint32_t id,
               const std::optional<replication::tls_files>& tls = {}) {
    replication::configure_system(cfg);
    if (tls) must(replication::configure_tls(cfg, *tls), "configure a node's TLS");
    if (node_stealing) cfg.set("scheduler.policy", caf::atom("stealing"));
    if (middleman_workers) cfg.set("middleman.workers", *middleman_workers);
    sys = std::make_unique<caf::actor_system>(cfg);
    db = must(open_database(replication::core_options_for(cluster, dir, *sys)), "open a node's database");
    replication::node_options no;
    no.id = id;
    no.cluster = cluster;
    no.db = db.get();
    no.request_timeout = request_timeout;
    no.batches_in_flight = batches_in_flight;
    // Owners are fixed by explicit elections (as when the figures in
    // docs/benchmarks.md were taken): no heartbeats, no anti-entropy pushes.
    no.heartbeat = std::chrono::milliseconds(0);
    // Plaintext on loopback (`tls off`, as every figure of this bench before
    // the client-tls case), unless the cluster is over TLS.
    no.insecure = !cluster.tls;
    n = must(replication::node::start(no), "start a node");
  }
  ~node_process() {
    n.reset();
    db.reset();
  }
};

struct cluster {
  std::vector<std::unique_ptr<node_process>> nodes;  // nodes[0] is node 1, the owner
  std::string file_path;                             // the cluster file, for a cluster_client
  std::string certs;                                 // over TLS: `magnetite cert`'s files

  // Over TLS (`tls`): certificates from make_cluster_certificates, naming
  // each node and the client `bench`, which a `client` line grants every
  // key, so every write is also judged by its grants (design 7.4).
  cluster(const std::string& dir, std::size_t size, std::uint16_t port, bool tls = false) {
    std::string text = fmt::format("cluster bench{}\nshards {}\n{}", size, shard_count,
                                   tls ? "client bench readwrite *\n" : "tls off\n");
    for (std::size_t i = 0; i < size; ++i)
      text += fmt::format("node {} 127.0.0.1 {}\n", i + 1, port + static_cast<std::uint16_t>(i));
    auto file = must(replication::cluster_file::parse(text), "cluster file");
    std::filesystem::create_directories(dir);
    file_path = dir + "/cluster";
    std::ofstream(file_path) << text;
    if (tls) {
      certs = dir + "/certs";
      (void)must(replication::make_cluster_certificates(file, {certs, {}, 30}), "make the certificates");
    }
    for (std::uint32_t id = 1; id <= size; ++id)
      nodes.push_back(
          std::make_unique<node_process>(fmt::format("{}/node{}", dir, id), file, id,
                                         tls ? std::optional(files(fmt::format("node{}", id))) : std::nullopt));
    for (int attempt = 0;; ++attempt) {
      bool linked = true;
      for (auto& p : nodes) linked = p->n->connect_peers().empty() && linked;
      if (linked) break;
      if (attempt == 50) {
        for (auto& p : nodes)
          for (const auto& e : p->n->last_errors()) fmt::print(stderr, "replication_bench: {}\n", e);
        fail("link the nodes", status::io_error("some nodes stayed unreachable"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    caf::scoped_actor self{*nodes[0]->sys};
    for (std::size_t s = 0; s < shard_count; ++s) {
      status failed;
      bool owns = false;
      self->request(nodes[0]->n->replica(s), std::chrono::seconds(30), replication::elect_atom::value)
          .receive([&](bool b) { owns = b; }, [&](caf::error& e) { failed = to_status(e); });
      must(failed, "elect node 1");
      if (!owns) fail("elect node 1", status::busy(fmt::format("node 1 did not win shard {}", s)));
    }
  }
  replication::tls_files files(const std::string& who) const { return replication::certificate_files(certs, who); }
};

std::uint64_t log_fsyncs(database& db) {
  auto st = must(db.stats(), "stats");
  std::uint64_t n = 0;
  for (const auto& s : st.shards) n += s.log_fsyncs;
  return n;
}

// ---------------------------------------------------------------------------
// Clients

// CPU seconds of the whole process (every thread: clients, actors, the
// middleman) so far.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct case_result {
  std::uint64_t acknowledged = 0;
  double writes_per_s = 0, p50_ms = 0, p99_ms = 0;  // of the acknowledged writes
  double cpu_busy = 0;                              // CPU seconds / (wall seconds x cores), of cpu_now()
  double cpu_us_write = 0;                          // CPU microseconds per acknowledged write, of cpu_now()
  std::vector<double> fsyncs_per_write;             // per node (the owner or leader first)
  double writes_per_batch = 0;                      // the owner's mean batch (replicated cases)
};

// `ops` writes from thread_count threads; make_writer() runs on each thread
// before the start and returns its `status write(key, value)`. cpu_now() is
// the CPU seconds the case is charged so far: this process's, unless the
// servers run in other processes too.
template <class MakeWriter>
case_result run_clients(std::uint64_t ops, std::uint64_t seed, failures& failed, MakeWriter make_writer,
                        const std::function<double()>& cpu_now = cpu_seconds) {
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::vector<double>> latency(thread_count);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      auto write = make_writer();
      std::mt19937_64 rng(seed * 1000 + t);
      std::uint64_t mine = ops / thread_count + (t < ops % thread_count ? 1 : 0);
      latency[t].reserve(mine);
      ++ready;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::uint64_t i = 0; i < mine; ++i) {
        std::string key = key_of(rng() % key_space), value = value_for(rng());
        auto t0 = clock_type::now();
        status s = write(key, value);
        if (s)
          latency[t].push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        else
          failed.add(s);
      }
    });
  while (ready.load() < thread_count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = clock_type::now();
  double cpu0 = cpu_now();
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  double seconds = since(t0), cpu = cpu_now() - cpu0;
  std::vector<double> all;
  for (auto& l : latency) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))];
  };
  return {all.size(),
          static_cast<double>(all.size()) / seconds,
          at(0.50),
          at(0.99),
          cpu / (seconds * std::max(1u, std::thread::hardware_concurrency())),
          cpu * 1e6 / static_cast<double>(std::max<std::size_t>(1, all.size())),
          {}};
}

// A client thread's blocking (put, key, value, 0) to whatever actor
// target(key) names (a shard actor and a replica take the same message).
// Its wait is bounded by the receive, not by a timeout in CAF's clock
// (request_within.h), as the cluster client waits: each such timeout wakes
// the clock's thread, and a blocking actor keeps its message when it fires.
template <class Target>
auto scoped_put(caf::actor_system& sys, Target target) {
  return [self = std::make_unique<caf::scoped_actor>(sys), target](const std::string& key, const std::string& value) {
    status s;
    replication::request_within(*self, target(key), std::chrono::seconds(60), put_atom::value, key, value,
                                std::int64_t{0})
        .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
    return s;
  };
}

// A node's log fsyncs so far (a database's, or an etcd member's WAL's).
using fsync_counter = std::function<std::uint64_t()>;

std::vector<fsync_counter> log_fsync_counters(const std::vector<database*>& dbs) {
  std::vector<fsync_counter> out;
  for (auto* db : dbs) out.push_back([db] { return log_fsyncs(*db); });
  return out;
}

// run_clients, with each node's log fsyncs per acknowledged write.
template <class MakeWriter>
case_result counted_case(const std::vector<fsync_counter>& nodes, std::uint64_t ops, std::uint64_t seed,
                         failures& failed, MakeWriter make_writer,
                         const std::function<double()>& cpu_now = cpu_seconds) {
  std::vector<std::uint64_t> before;
  for (const auto& fsyncs : nodes) before.push_back(fsyncs());
  auto r = run_clients(ops, seed, failed, make_writer, cpu_now);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    r.fsyncs_per_write.push_back(static_cast<double>(nodes[i]() - before[i]) /
                                 static_cast<double>(std::max<std::uint64_t>(1, r.acknowledged)));
  return r;
}

// database::put: the host call, a futex wait per write (no actor on the thread).
case_result single_case(database& db, std::uint64_t ops, std::uint64_t seed, failures& failed) {
  return counted_case(log_fsync_counters({&db}), ops, seed, failed, [&] {
    return [&](const std::string& key, const std::string& value) { return db.put(key, value); };
  });
}

// The same database's shard actors asked directly by scoped actors: the
// client mechanism of the replicated cases without the replica actor.
case_result shard_actor_case(database& db, std::uint64_t ops, std::uint64_t seed, failures& failed) {
  return counted_case(log_fsync_counters({&db}), ops, seed, failed, [&] {
    return scoped_put(db.core().system(),
                      [&db](const std::string& key) { return db.core().shard_handle(db.shard_of(key)); });
  });
}

// Batches node 1 shipped as owner and the writes in them, over its shards.
std::pair<std::uint64_t, std::uint64_t> owner_batches(node_process& owner) {
  caf::scoped_actor self{*owner.sys};
  std::pair<std::uint64_t, std::uint64_t> n{0, 0};
  for (std::size_t s = 0; s < shard_count; ++s) {
    status failed;
    self->request(owner.n->replica(s), std::chrono::seconds(30), replication::info_atom::value)
        .receive(
            [&](const replication::replica_info& i) {
              n.first += i.batches;
              n.second += i.batched_writes;
            },
            [&](caf::error& e) { failed = to_status(e); });
    must(failed, "ask node 1's replica for its info");
  }
  return n;
}

// run_clients with make_writer, on cluster c: fsyncs on every node, and the
// owner's mean batch.
template <class MakeWriter>
case_result cluster_case(cluster& c, std::uint64_t ops, std::uint64_t seed, failures& failed, MakeWriter make_writer) {
  std::vector<database*> dbs;
  for (auto& p : c.nodes) dbs.push_back(p->db.get());
  node_process& owner = *c.nodes[0];
  auto before = owner_batches(owner);
  auto r = counted_case(log_fsync_counters(dbs), ops, seed, failed, make_writer);
  auto after = owner_batches(owner);
  r.writes_per_batch = static_cast<double>(after.second - before.second) /
                       static_cast<double>(std::max<std::uint64_t>(1, after.first - before.first));
  return r;
}

// Through the owner replica (node 1) of the key's shard; with --request-ids
// each writer is a session of its own, numbering its writes.
case_result replicated_case(cluster& c, std::uint64_t ops, std::uint64_t seed, failures& failed) {
  node_process& owner = *c.nodes[0];
  auto replica_of = [&owner](const std::string& key) { return owner.n->replica(owner.db->shard_of(key)); };
  if (!request_ids) return cluster_case(c, ops, seed, failed, [&] { return scoped_put(*owner.sys, replica_of); });
  static std::atomic<std::uint64_t> sessions{0};
  return cluster_case(c, ops, seed, failed, [&] {
    return [self = std::make_unique<caf::scoped_actor>(*owner.sys), replica_of,
            id = replication::request_id{hash128{seed, ++sessions}, 0}](const std::string& key,
                                                                        const std::string& value) mutable {
      status s;
      ++id.seq;
      replication::request_within(*self, replica_of(key), std::chrono::seconds(60), put_atom::value, key, value,
                                  std::int64_t{0}, id)
          .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
      return s;
    };
  });
}

// Through the public cluster_client: its own actor system, over a socket to
// the owner, every write with a request id (and so a request record).
case_result client_case(cluster& c, cluster_client& client, std::uint64_t ops, std::uint64_t seed, failures& failed) {
  return cluster_case(c, ops, seed, failed, [&] {
    return [&client](const std::string& key, const std::string& value) { return client.put(key, value); };
  });
}

// A record transaction as one write: a load and a put of record "r" in each
// namespace, one commit; retried on conflict. Namespaces routed to two
// shards make it a transaction across shards.
status records_commit(state::records& recs, const std::vector<std::string>& namespaces, const std::string& value) {
  for (;;) {
    auto t = recs.begin();
    for (const auto& ns : namespaces) {
      auto seen = t.load(ns, "r");
      if (!seen) return seen.error();
      MAGNETITE_TRY(t.put(ns, "r", state::bytes{value}));
    }
    auto out = t.commit();
    if (out) return status::ok();
    if (out.error().code() != status_code::conflict) return out.error();
  }
}

// The key's namespace and its partner: the first "key/i" routed to another shard.
std::vector<std::string> with_partner(const state::records& recs, const std::string& key) {
  for (int i = 0;; ++i)
    if (std::string p = fmt::format("{}/{}", key, i); recs.shard_of(p) != recs.shard_of(key)) return {key, p};
}

case_result records_single_case(database& db, state::records& recs, std::uint64_t ops, std::uint64_t seed,
                                failures& failed) {
  return counted_case(log_fsync_counters({&db}), ops, seed, failed, [&] {
    return [&](const std::string& key, const std::string& value) { return records_commit(recs, {key}, value); };
  });
}

case_result records_client_case(cluster& c, state::records& recs, std::uint64_t ops, std::uint64_t seed,
                                failures& failed, bool across = false) {
  return cluster_case(c, ops, seed, failed, [&, across] {
    return [&, across](const std::string& key, const std::string& value) {
      return records_commit(recs, across ? with_partner(recs, key) : std::vector<std::string>{key}, value);
    };
  });
}

// RocksDB's TransactionDB doing a record transaction's work on one node: lock
// and read the key (and with `across` its partner, key + "/p"), put the value
// to each, commit with a sync; a conflict is rolled back and retried, inside
// the write's time, as records_commit retries.
case_result rocks_records_case(rocks_transactions& r, std::uint64_t ops, std::uint64_t seed, failures& failed,
                               bool across) {
  return run_clients(ops, seed, failed, [&r, across] {
    return [&r, across, handle = std::unique_ptr<rocksdb::Transaction>()](const std::string& key,
                                                                          const std::string& value) mutable {
      rocksdb::WriteOptions wo;
      wo.sync = true;
      std::vector<std::string> keys{key};
      if (across) keys.push_back(key + "/p");
      std::uint64_t conflicts = 0;
      auto s = locked_update(
          r, wo, handle, keys, [&](const std::string&, const std::optional<std::string>&) { return value; }, conflicts);
      return s.ok() ? status::ok() : status::io_error(fmt::format("rocksdb: {}", s.ToString()));
    };
  });
}

// etcd through its HTTP/JSON gateway: each client thread with its own
// keep-alive connection to the leader, as it was when the cluster became
// ready: the fastest way in, since a follower forwards every write to the
// leader, and the way node 1's clients reach the owner. The case is charged
// this process's CPU and the members'.
case_result etcd_case(etcd::cluster& c, std::uint64_t ops, std::uint64_t seed, failures& failed) {
  std::vector<fsync_counter> members;
  for (const auto& m : c.members())
    members.push_back([&m] { return must(etcd::cluster::wal_fsyncs(m), "count etcd's WAL fsyncs"); });
  return counted_case(
      members, ops, seed, failed,
      [&c] {
        auto to = std::make_unique<etcd::http_connection>(c.leader().client_port);
        (void)to->open();  // connected before the start; a failure shows on the first write
        return [to = std::move(to)](const std::string& key, const std::string& value) {
          return etcd::put(*to, key, value);
        };
      },
      [&c] { return cpu_seconds() + c.cpu_seconds(); });
}

case_result raw_case(const std::string& path) {
  auto file = must(preallocated_file::create(path, std::uint64_t{4} << 20), "preallocate");
  std::uint64_t n = 0;
  std::string record = key_of(0) + value_for(0);
  auto t0 = clock_type::now();
  do {
    must(file->write_and_sync(record), "raw write");
    ++n;
  } while (since(t0) < 1.0);
  double rate = static_cast<double>(n) / since(t0);
  file.reset();
  std::filesystem::remove(path);
  return {n, rate, 1000.0 / rate, 0, 0, 0, {1.0}};
}

[[noreturn]] void usage() {
  fmt::print(stderr,
             "usage: replication_bench [--dir D] [--ops N] [--threads T] [--keys K] [--value-bytes B] [--shards S] "
             "[--rounds R] [--warmup N] [--port P] [--request-timeout-ms MS] [--max-errors E] "
             "[--node-scheduler sharing|stealing] [--batches-in-flight N] [--middleman-workers N] "
             "[--etcd PATH|none] [--request-ids] [--records] [--tls] [--only CASE[,CASE...]]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string base = "bench-data/replication";
  std::uint64_t ops = 20'000, rounds = 3, warmup = 640, max_errors = 5;
  // 16 ports from P: the nodes take P to P + 3, etcd P + 4 to P + 9, the
  // client cases' nodes P + 10 to P + 12. Below
  // 32768, where Linux's ephemeral ports begin: a port an outgoing
  // connection held moments ago may not be listened on again at once.
  std::uint64_t port = 10000 + static_cast<std::uint64_t>(::getpid() % 1360) * 16;
  std::string etcd_choice;                   // --etcd: a binary, or "none"
  std::vector<std::string> only;             // --only: the keys of the cases to run; empty: all
  constexpr std::uint64_t warm_round = 998;  // a case's warm-up (seed 999)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return std::strtoull(argv[++i], nullptr, 10); };
    if (a == "--dir" && i + 1 < argc)
      base = argv[++i];
    else if (a == "--ops" && i + 1 < argc)
      ops = next();
    else if (a == "--threads" && i + 1 < argc)
      thread_count = next();
    else if (a == "--keys" && i + 1 < argc)
      key_space = next();
    else if (a == "--value-bytes" && i + 1 < argc)
      value_bytes = next();
    else if (a == "--shards" && i + 1 < argc)
      shard_count = next();
    else if (a == "--rounds" && i + 1 < argc)
      rounds = next();
    else if (a == "--warmup" && i + 1 < argc)
      warmup = next();
    else if (a == "--port" && i + 1 < argc)
      port = next();
    else if (a == "--request-timeout-ms" && i + 1 < argc)
      request_timeout = std::chrono::milliseconds(next());
    else if (a == "--max-errors" && i + 1 < argc)
      max_errors = next();
    else if (a == "--node-scheduler" && i + 1 < argc &&
             (argv[i + 1] == std::string("sharing") || argv[i + 1] == std::string("stealing")))
      node_stealing = argv[++i] == std::string("stealing");
    else if (a == "--batches-in-flight" && i + 1 < argc)
      batches_in_flight = next();
    else if (a == "--middleman-workers" && i + 1 < argc)
      middleman_workers = next();
    else if (a == "--request-ids")
      request_ids = true;
    else if (a == "--only" && i + 1 < argc)
      for (std::string_view rest = argv[++i]; !rest.empty();) {
        auto comma = rest.find(',');
        only.emplace_back(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    else if (a == "--records")
      with_records = true;
    else if (a == "--tls")
      with_tls = true;
    else if (a == "--etcd" && i + 1 < argc)
      etcd_choice = argv[++i];
    else
      usage();
  }
  if (ops == 0 || thread_count == 0 || key_space == 0 || value_bytes < 16 || shard_count == 0 || rounds == 0 ||
      batches_in_flight == 0 || port == 0 || port > 65535 - 16)
    usage();
  std::optional<std::string> etcd_binary;  // none: no etcd row
  if (etcd_choice.empty())
    etcd_binary = etcd::find_binary();
  else if (etcd_choice != "none" && etcd::executable(etcd_choice))
    etcd_binary = etcd_choice;
  else if (etcd_choice != "none")
    fail("--etcd", status::invalid_argument(fmt::format("{} is not an executable file", etcd_choice)));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);

  say("replication_bench {}  threads {}  ops {} a case  keys {}  value {} B  shards {}  rounds {}\n", utc_now(),
      thread_count, ops, key_space, value_bytes, shard_count, rounds);
  auto t_setup = clock_type::now();
  database_options single_options;
  single_options.dir = base + "/single";
  single_options.shards = shard_count;
  auto single = must(database::open(single_options), "open the single node");
  // Whether --only lets the case of this key run (every case without it).
  auto chosen = [&](std::string_view key) {
    return only.empty() || std::find(only.begin(), only.end(), key) != only.end();
  };
  auto one = std::make_unique<cluster>(base + "/one", 1, static_cast<std::uint16_t>(port));
  auto three = std::make_unique<cluster>(base + "/three", 3, static_cast<std::uint16_t>(port + 1));
  // The client cases write to a cluster of their own: what they leave (a
  // request record a write, at most once; records and transactions) would
  // otherwise burden the 3-node case's later rounds, by the order of cases.
  std::unique_ptr<cluster> served;
  if (chosen("client") || (with_records && (chosen("records-client") || (shard_count > 1 && chosen("records-across")))))
    served = std::make_unique<cluster>(base + "/served", 3, static_cast<std::uint16_t>(port + 10));
  say("setup: {:.1f} s (3 nodes linked on ports {}-{}{}, node 1 elected owner of {} shard{})\n", since(t_setup),
      port + 1, port + 3, served ? fmt::format(", the client cases' 3 on {}-{}", port + 10, port + 12) : "",
      shard_count, shard_count == 1 ? "" : "s");
  std::unique_ptr<etcd::cluster> etcd_members;
  if (etcd_binary) {
    auto t_etcd = clock_type::now();
    etcd_members = must(etcd::cluster::start(*etcd_binary, base + "/etcd", static_cast<std::uint16_t>(port + 4),
                                             std::chrono::seconds(20)),
                        "start etcd");
    say("etcd {} ({}): 3 members ready in {:.1f} s, client ports {}-{}, leader {}; each client thread with its own\n"
        "  keep-alive HTTP/1.1 connection to the leader's JSON gateway, POST /v3/kv/put\n",
        etcd_members->version(), *etcd_binary, since(t_etcd), port + 4, port + 6, etcd_members->leader().name);
  } else {
    say("etcd, 3 members: skipped ({})\n",
        etcd_choice == "none" ? "--etcd none"
                              : "no etcd on PATH nor at /usr/bin/etcd: Debian's etcd-server is not installed");
  }

  struct named_case {
    std::string key;  // what --only names it by
    std::string name;
    std::function<case_result(std::uint64_t round)> run;
    bool selected = true;
    failures failed;
    std::vector<case_result> results;
  };
  std::vector<std::unique_ptr<named_case>> cases;
  // Each case's run as f(round, failures); round 998 is its warm-up.
  auto add = [&](std::string key, std::string name, std::function<case_result(std::uint64_t, failures&)> f) {
    auto made = std::make_unique<named_case>();
    made->key = std::move(key);
    made->name = std::move(name);
    made->run = [f, c = made.get()](std::uint64_t round) { return f(round, c->failed); };
    made->selected = chosen(made->key);
    cases.push_back(std::move(made));
  };
  // In this order: the indices below name them (etcd_i only when etcd runs).
  enum : std::size_t { raw_i, single_i, shard_i, one_i, three_i, client_i, etcd_i };
  // The number of writes of a round: the warm-up's is `warmup`.
  auto writes = [&](std::uint64_t r) { return r == warm_round ? warmup : ops; };
  add("raw", "raw fdatasync, 1 thread", [&](std::uint64_t, failures&) { return raw_case(base + "/raw"); });
  add("put", "single node: put",
      [&](std::uint64_t r, failures& f) { return single_case(*single, writes(r), r + 1, f); });
  add("shard-actor", "single node: shard actor",
      [&](std::uint64_t r, failures& f) { return shard_actor_case(*single, writes(r), r + 1, f); });
  add("one-node", "1-node cluster",
      [&](std::uint64_t r, failures& f) { return replicated_case(*one, writes(r), r + 1, f); });
  add("three", "3 nodes, loopback",
      [&](std::uint64_t r, failures& f) { return replicated_case(*three, writes(r), r + 1, f); });
  std::unique_ptr<cluster_client> client;
  std::optional<state::records> client_records;
  if (served) {
    cluster_client_options client_options;
    client_options.cluster_file = served->file_path;
    client = must(cluster_client::connect(client_options), "connect a cluster client");
    client_records.emplace(*client);
  }
  add("client", "3 nodes, cluster_client",
      [&](std::uint64_t r, failures& f) { return client_case(*served, *client, writes(r), r + 1, f); });
  if (etcd_members)
    add("etcd", "etcd, 3 members",
        [&](std::uint64_t r, failures& f) { return etcd_case(*etcd_members, writes(r), r + 1, f); });
  state::records single_records(*single);
  std::size_t records_single_i = cases.size() + (with_tls ? 1 : 0), records_client_i = records_single_i + 1,
              records_across_i = records_single_i + 2;
  // Closed after the cases (their threads' transaction handles are gone by then).
  rocks_transactions rocks;
  std::size_t rocks_i = 0;  // then the 2-key case
  // Over TLS with grants: a cluster of its own, as the client case's.
  std::unique_ptr<cluster> served_tls;
  std::unique_ptr<cluster_client> tls_client;
  std::size_t client_tls_i = cases.size();
  if (with_tls) {
    if (chosen("client-tls")) {
      served_tls = std::make_unique<cluster>(base + "/served-tls", 3, static_cast<std::uint16_t>(port + 13), true);
      cluster_client_options o;
      o.cluster_file = served_tls->file_path;
      auto f = served_tls->files("client-bench");
      o.tls_certificate = f.certificate;
      o.tls_key = f.key;
      o.tls_ca = f.ca;
      tls_client = must(cluster_client::connect(o), "connect a cluster client over TLS");
    }
    add("client-tls", "3 nodes, client, TLS+grants",
        [&](std::uint64_t r, failures& f) { return client_case(*served_tls, *tls_client, writes(r), r + 1, f); });
  }
  if (with_records) {
    add("records", "records: single node", [&](std::uint64_t r, failures& f) {
      return records_single_case(*single, single_records, writes(r), r + 1, f);
    });
    add("records-client", "records: 3 nodes, client", [&](std::uint64_t r, failures& f) {
      return records_client_case(*served, *client_records, writes(r), r + 1, f);
    });
    if (shard_count > 1)
      add("records-across", "records across 2 shards", [&](std::uint64_t r, failures& f) {
        return records_client_case(*served, *client_records, writes(r), r + 1, f, true);
      });
    if (auto s = open_rocks_transactions(base + "/rocksdb", false, rocks); !s.ok())
      fail("open RocksDB's TransactionDB", status::io_error(s.ToString()));
    rocks_i = cases.size();
    add("txdb", "TransactionDB: 1 key",
        [&](std::uint64_t r, failures& f) { return rocks_records_case(rocks, writes(r), r + 1, f, false); });
    add("txdb-2", "TransactionDB: 2 keys",
        [&](std::uint64_t r, failures& f) { return rocks_records_case(rocks, writes(r), r + 1, f, true); });
  }
  for (const auto& k : only)
    if (std::none_of(cases.begin(), cases.end(), [&](const auto& c) { return c->key == k; }))
      fail("--only", status::invalid_argument(fmt::format("no case {} in this run", k)));

  // Warm-up, not reported: files reserved, sockets and mailboxes busy once.
  for (auto& c : cases)
    if (c->selected && c->key != "raw") (void)c->run(warm_round);
  for (auto& c : cases)
    if (c->failed.total() > 0)
      fail("warm-up",
           status::failed(fmt::format("{}: {} writes failed: {}", c->name, c->failed.total(), c->failed.first)));

  auto t_run = clock_type::now();
  for (std::uint64_t r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < cases.size(); ++k) {
      auto& c = *cases[(k + r) % cases.size()];
      if (c.selected) c.results.push_back(c.run(r));
    }
  double run_s = since(t_run);

  // Every write went to every node: once quiet, a cluster's three roots are
  // one (waited for up to 2 s).
  struct roots_verdict {
    bool equal = false;
    std::string said;  // "equal (root)", else "DIFFER (each node's)"
  };
  auto settled_roots = [](cluster& c) {
    std::string roots;
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::set<std::string> distinct;
      roots.clear();
      for (auto& p : c.nodes) {
        auto root = must(p->db->commit(), "commit a node").combined.to_hex();
        roots += (roots.empty() ? "" : " ") + root;
        distinct.insert(root);
      }
      if (distinct.size() == 1) return roots_verdict{true, fmt::format("equal ({})", *distinct.begin())};
    }
    return roots_verdict{false, fmt::format("DIFFER ({})", roots)};
  };
  auto three_roots = settled_roots(*three);
  auto served_roots = served ? settled_roots(*served) : roots_verdict{true, ""};
  auto tls_roots = served_tls ? settled_roots(*served_tls) : roots_verdict{true, ""};
  bool same = three_roots.equal && served_roots.equal && tls_roots.equal;

  auto med = [&](const named_case& c, double case_result::*field) {
    std::vector<double> v;
    for (const auto& x : c.results) v.push_back(x.*field);
    return median(v);
  };
  say("{} rounds in {:.1f} s; medians over the rounds:\n", rounds, run_s);
  say("{:<26} {:>9} {:>7} {:>7} {:>5} {:>8} {:>6}  {:<20} {}\n", "case", "writes/s", "p50 ms", "p99 ms", "cpu",
      "cpu us/w", "batch", "log fsyncs/write", "failed");
  for (auto& cp : cases) {
    auto& c = *cp;
    if (!c.selected) continue;
    bool raw = &c == cases[raw_i].get();
    std::string fsyncs;
    for (std::size_t i = 0; i < c.results[0].fsyncs_per_write.size(); ++i) {
      std::vector<double> v;
      for (const auto& x : c.results) v.push_back(x.fsyncs_per_write[i]);
      fsyncs += fmt::format("{}{:.3f}", i ? " " : "", median(v));
    }
    if (fsyncs.empty()) fsyncs = "-";
    auto or_dash = [raw](std::string s) { return raw ? std::string("-") : s; };
    double batch = med(c, &case_result::writes_per_batch);
    say("{:<26} {:>9.0f} {:>7.2f} {:>7} {:>5} {:>8} {:>6}  {:<20} {}\n", c.name, med(c, &case_result::writes_per_s),
        med(c, &case_result::p50_ms), or_dash(fmt::format("{:.2f}", med(c, &case_result::p99_ms))),
        or_dash(fmt::format("{:.0f}%", 100 * med(c, &case_result::cpu_busy))),
        or_dash(fmt::format("{:.0f}", med(c, &case_result::cpu_us_write))),
        batch > 0 ? fmt::format("{:.1f}", batch) : std::string("-"), fsyncs,
        raw ? std::string("-")
            : fmt::format("{} (busy {}, ambiguous {}, other {})", c.failed.total(), c.failed.busy.load(),
                          c.failed.ambiguous.load(), c.failed.other.load()));
  }
  say("(cpu: this process's CPU time over the case / (its wall time x {} cores), and per write; batch: the\n"
      " writes in one batch the owner shipped to its peers, on average; log fsyncs per\n"
      " write for 3 nodes: node 1, the owner, then nodes 2 and 3; raw: the mean time of one write + sync as p50)\n",
      std::max(1u, std::thread::hardware_concurrency()));
  if (etcd_members)
    say("(etcd: cpu is this process's and its three members' (/proc/<pid>/stat: they are other processes); log\n"
        " fsyncs are each member's WAL fdatasyncs (etcd's /metrics), the leader first)\n");
  say("writes/s per round:\n");
  for (auto& c : cases) {
    if (!c->selected) continue;
    say("  {:<26}", c->name);
    for (const auto& x : c->results) say(" {:>7.0f}", x.writes_per_s);
    say("\n");
  }

  // Ratios: of the medians, and per round (the two cases of a round ran seconds apart).
  auto ratio = [&](std::size_t a, std::size_t b) {
    const auto &x = *cases[a], &y = *cases[b];
    if (!x.selected || !y.selected) return;
    std::string per_round;
    for (std::size_t r = 0; r < rounds; ++r)
      per_round += fmt::format(" {:.2f}", x.results[r].writes_per_s / y.results[r].writes_per_s);
    say("{} / {}: throughput {:.2f}x (per round{}), median latency {:.2f}x, p99 {:.2f}x\n", x.name, y.name,
        med(x, &case_result::writes_per_s) / med(y, &case_result::writes_per_s), per_round,
        med(x, &case_result::p50_ms) / med(y, &case_result::p50_ms),
        med(x, &case_result::p99_ms) / med(y, &case_result::p99_ms));
  };
  ratio(three_i, single_i);
  ratio(client_i, single_i);
  ratio(client_i, three_i);
  ratio(three_i, one_i);
  ratio(one_i, shard_i);
  ratio(shard_i, single_i);
  if (etcd_members) {
    ratio(three_i, etcd_i);
    ratio(client_i, etcd_i);
  }
  if (with_tls) ratio(client_tls_i, client_i);
  if (with_records) {
    ratio(records_client_i, records_single_i);
    ratio(records_single_i, single_i);
    ratio(records_client_i, client_i);
    if (shard_count > 1) ratio(records_across_i, records_client_i);
    ratio(records_single_i, rocks_i);
    ratio(records_client_i, rocks_i);
    if (shard_count > 1) ratio(records_across_i, rocks_i + 1);
  }
  if (cases[raw_i]->selected && cases[single_i]->selected && cases[three_i]->selected)
    say("against raw fdatasync: single node: put {:.2f}x, 3 nodes {:.2f}x\n",
        med(*cases[single_i], &case_result::writes_per_s) / med(*cases[raw_i], &case_result::writes_per_s),
        med(*cases[three_i], &case_result::writes_per_s) / med(*cases[raw_i], &case_result::writes_per_s));
  say("3 nodes' combined roots after the run: {}\n", three_roots.said);
  if (served) say("the client cases' 3 nodes' combined roots: {}\n", served_roots.said);
  if (served_tls) say("the client-tls case's 3 nodes' combined roots: {}\n", tls_roots.said);

  int rc = same ? 0 : 1;
  for (auto& c : cases)
    if (c->failed.total() > max_errors) {
      fmt::print(stderr, "replication_bench: {}: {} writes failed (more than {}); first: {}\n", c->name,
                 c->failed.total(), max_errors, c->failed.first);
      rc = 1;
    }
  etcd_members.reset();
  rocks.db.reset();
  client_records.reset();  // it holds the client
  client.reset();
  served.reset();
  tls_client.reset();
  served_tls.reset();
  three.reset();
  one.reset();
  single.reset();
  std::filesystem::remove_all(base);
  return rc;
}
