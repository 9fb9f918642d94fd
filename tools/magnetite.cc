// magnetite: the command-line tool (issue 5). Every command opens the database
// in --data (default ./magnetite-data) through the same library a host embeds.
//
//   magnetite put KEY VALUE [--ttl DURATION]    DURATION: 250ms, 10s, 5m, 1h, ...
//   magnetite get KEY                           exit 1 with "not found" when absent
//   magnetite del KEY
//   magnetite scan [--from K] [--to K] [--prefix P] [--limit N] [--reverse]
//   magnetite commit [--json]
//   magnetite load --keys N [--writers W] [--value-size B] [--seed S] [--value-seed S]
//                  [--prefix P] [--durable | --no-sync] [--ack-log FILE] [--json]
//   magnetite stats [--json]
//   magnetite verify
//   magnetite diff VERSION_A VERSION_B
//   magnetite tag NAME [--at VERSION]             name a version (default: commit, then name that)
//   magnetite tags [--json]
//   magnetite untag NAME
//   magnetite backup DEST [--at VERSION] [--rate MIB]   ships only the nodes DEST lacks
//   magnetite backups DEST                        the versions a backup holds
//   magnetite restore SRC DIR [--at VERSION]      a new database at DIR
//   magnetite verify                              on --data: a database or a backup
//   magnetite gc [--json]
//   magnetite demo
//   magnetite cert --cluster FILE --out DIR [--client NAME]... [--days N]
//                                                 a development CA, and a certificate
//                                                 for each node and client
//   magnetite bench [--workload writes|gets|restart|load|overwrite|reclaim|all] [--seconds S]
//                   [--keys N] [--rounds R] [--order random|sequential] [--values R]
//                   [--memory-limit-mib M] [--leaf-form lz4|zstd|searchable] [--json]
//
// Global, before or after the command (`magnetite put --data DIR K V`):
// --data DIR, --shards N (used when the directory is created, by
// default one a core: database_options::default_shards(); an existing
// database keeps its own count), --cache-mib M (the node caches of
// all shards share M MiB: database_options::memory_budget; bench gives both
// engines M MiB). --version prints meson's project version. Every error is one
// line on stderr and a non-zero exit; an unknown command is named.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "actors/database_core.h"
#include "core/limits.h"
#include "engine/state_space.h"
#include "magnetite/cluster_client.h"
#include "replication/cluster_certificates.h"
#include "tools/bench_command.h"
#include "tools/cli_text.h"
#include "tools/cluster_demo.h"
#include "tools/demo.h"
#include "tools/load_run.h"
#include "tools/progress_bar.h"
#include "tools/serve.h"

using namespace magnetite;

namespace {

// Thrown to main, which prints it and exits 2 after the database closed.
struct failure {
  status why;
};

[[noreturn]] void die(const status& s) { throw failure{s}; }

template <class T>
T must(result<T> r) {
  if (!r) die(r.error());
  return std::move(*r);
}

// Commands that only read or inspect (create = false) never make a database
// where there is none: a mistyped --data is an error, not a new empty store.
result<std::unique_ptr<database>> try_open_db(const std::string& dir, std::optional<std::size_t> shards, bool create,
                                              std::optional<std::size_t> cache_mib, shard_options so = {}) {
  auto recorded = database::recorded_shards(dir);
  if (!recorded) return recorded.error();
  if (!*recorded && !create)
    return status::not_found(fmt::format("no database in {} (put, load or demo creates one)", dir));
  if (auto made = env::posix().create_dir(dir); !made) return made;
  database_options o;
  o.dir = dir;
  o.shards = *recorded ? *recorded : shards;
  o.shard = std::move(so);
  if (cache_mib) o.memory_budget = *cache_mib << 20;
  return database::open(std::move(o));
}

std::unique_ptr<database> open_db(const std::string& dir, std::optional<std::size_t> shards, bool create,
                                  std::optional<std::size_t> cache_mib, shard_options so = {}) {
  return must(try_open_db(dir, shards, create, cache_mib, std::move(so)));
}

// What the command line asked for, filled in by CLI11.
struct command_line {
  std::string dir = "./magnetite-data";
  std::optional<std::size_t> shards;     // nullopt: database_options::default_shards()
  std::optional<std::size_t> cache_mib;  // nullopt: each shard's default cache
  std::string key, value, ttl;
  std::optional<std::string> from, to, prefix;
  std::optional<std::size_t> limit;
  bool reverse = false;
  bool json = false;
  std::uint64_t keys = 0;
  std::size_t writers = 8;
  std::size_t value_size = 100;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> value_seed;  // nullopt: seed
  bool durable = false;
  bool no_sync = false;
  std::string ack_log;
  std::string root_a, root_b;
  std::string at;  // get, scan, tag: a version (a combined root or a tag's name)
  std::string tag_name;
  std::string backup_dir, restore_dir;
  std::uint64_t backup_rate_mib = 0;  // backup --rate: MiB/s, 0 for no limit
  CLI::App* put = nullptr;
  CLI::App* get = nullptr;
  CLI::App* del = nullptr;
  CLI::App* scan = nullptr;
  CLI::App* commit = nullptr;
  CLI::App* load = nullptr;
  CLI::App* stats = nullptr;
  CLI::App* verify = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* gc = nullptr;
  CLI::App* tag = nullptr;
  CLI::App* tags = nullptr;
  CLI::App* untag = nullptr;
  CLI::App* backup = nullptr;
  CLI::App* backups = nullptr;
  CLI::App* restore = nullptr;
  CLI::App* demo = nullptr;
  CLI::App* bench = nullptr;
  bench_command_options bench_options;  // bench: all but data_dir
  CLI::App* serve = nullptr;
  std::uint32_t node_id = 0;
  std::string cluster;
  CLI::App* cluster_demo = nullptr;
  cluster_demo_options demo_cluster;  // cluster-demo
  CLI::App* cert = nullptr;
  replication::certificate_set certificates;  // cert
  replication::tls_files tls;                 // serve, and --cluster clients, unless `tls off`
  bool insecure = false;                      // serve: a `tls off` cluster, on purpose
  replication::connection_limits network;     // serve: what one connection may send
  std::int64_t handshake_timeout_ms = replication::connection_limits{}.handshake_timeout.count();
  std::int64_t idle_timeout_ms = replication::connection_limits{}.idle_timeout.count();
};

// Every command and option of the tool, in the order --help lists them. Long
// on purpose: it is one table, and splitting it would scatter the interface.
void declare(CLI::App& app, command_line& c) {
  app.require_subcommand(1);
  // A command hands the options it does not know up to the app, so each
  // global option is defined once, here, and is accepted before or after the
  // command. Commands made below inherit this.
  app.fallthrough();
  app.set_version_flag("--version", "magnetite " MAGNETITE_VERSION);
  app.add_option("--data", c.dir, "data directory")->capture_default_str();
  app.add_option("--shards", c.shards,
                 fmt::format("shard count for a new database (default: one a core, at most 16; here {})",
                             database_options::default_shards()))
      ->check(CLI::Range(1, 4096));
  // Up to 1 TiB; the database refuses less than 1 MiB a shard.
  app.add_option("--cache-mib", c.cache_mib, "MiB the node caches of all shards share (default: 64 MiB a shard)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  c.put = app.add_subcommand("put", "write KEY = VALUE, durably");
  c.put->add_option("KEY", c.key)->required();
  c.put->add_option("VALUE", c.value)->required();
  c.put->add_option("--ttl", c.ttl, "time to live: a number and ns, us, ms, s, m or h");
  c.get = app.add_subcommand("get", "print the value of KEY");
  c.get->add_option("KEY", c.key)->required();
  c.del = app.add_subcommand("del", "delete KEY, durably");
  c.del->add_option("KEY", c.key)->required();
  c.scan = app.add_subcommand("scan", "print live entries as key<TAB>value in key order, escaped");
  c.scan->add_option("--from", c.from, "first key (inclusive)");
  c.scan->add_option("--to", c.to, "end key (exclusive)");
  c.scan->add_option("--prefix", c.prefix, "only keys starting with P");
  c.scan->add_option("--limit", c.limit, "at most N entries");
  c.scan->add_flag("--reverse", c.reverse, "descending key order (reads the whole range first)");
  for (CLI::App* command : {c.get, c.scan})
    command->add_option("--at", c.at,
                        "read the version VERSION: a retained checkpoint's combined root, as `commit` prints it, "
                        "or a tag's name");
  c.commit = app.add_subcommand("commit", "checkpoint every shard; print the roots");
  c.commit->add_flag("--json", c.json, "one JSON object");
  c.load = app.add_subcommand("load", "write N distinct keys <prefix><seed>-<i> from concurrent writers");
  c.load->add_option("--keys", c.keys, "how many keys")
      ->required()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  c.load->add_option("--writers", c.writers, "concurrent writers")->check(CLI::Range(1, 1024))->capture_default_str();
  c.load->add_option("--value-size", c.value_size, "bytes a value")
      ->check(CLI::Range(std::size_t{0}, limits::max_user_value_bytes))
      ->capture_default_str();
  CLI::Validator non_negative(
      [](std::string& v) { return v.starts_with('-') ? std::string("must not be negative") : std::string(); },
      "NON-NEGATIVE");
  c.load->add_option("--seed", c.seed, "part of every key and value")->check(non_negative)->capture_default_str();
  c.load
      ->add_option("--value-seed", c.value_seed,
                   "draw the values from this seed instead (same keys as --seed, new values)")
      ->check(non_negative);
  c.load->add_option("--prefix", c.prefix, "the keys' prefix");
  auto durable = c.load->add_flag("--durable", c.durable, "acknowledge a write after its fsync (the default)");
  auto no_sync = c.load->add_flag("--no-sync", c.no_sync,
                                  "acknowledge once written to the log; fsync every 100 ms (the interval policy)");
  durable->excludes(no_sync);
  c.load->add_option("--ack-log", c.ack_log, "append key<TAB>value to FILE as each write is acknowledged");
  c.load->add_flag("--json", c.json, "print the figures as one JSON object");
  // put, get, del and load on a replicated cluster, through its owners,
  // instead of a data directory (include/magnetite/cluster_client.h).
  for (CLI::App* command : {c.put, c.get, c.del, c.load}) {
    command->add_option("--cluster", c.cluster, "a cluster file: go through the cluster's owners, not --data");
    command->add_option("--tls-cert", c.tls.certificate,
                        "with --cluster (unless it says `tls off`): this client's certificate");
    command->add_option("--tls-key", c.tls.key, "with --cluster: its key");
    command->add_option("--tls-ca", c.tls.ca, "with --cluster: the cluster's CA certificate");
  }
  c.stats = app.add_subcommand("stats", "per shard and in total: keys, bytes, cache, fsyncs, groups, roots");
  c.stats->add_flag("--json", c.json, "one JSON object");
  c.verify = app.add_subcommand("verify", "check every node, log frame and expiry entry; exit 1 on damage");
  c.diff = app.add_subcommand("diff", "keys added, removed and changed from VERSION_A to VERSION_B");
  c.diff->add_option("VERSION_A", c.root_a, "a root as `commit` prints it, or a tag's name")->required();
  c.diff->add_option("VERSION_B", c.root_b)->required();
  c.tag = app.add_subcommand("tag", "keep a version under NAME until untagged (default: commit, then name that)");
  c.tag->add_option("NAME", c.tag_name)->required();
  c.tag->add_option("--at", c.at, "name this version instead: a retained checkpoint's combined root, or a tag's name");
  c.tags = app.add_subcommand("tags", "the named versions: NAME<TAB>combined root, by name");
  c.tags->add_flag("--json", c.json, "one JSON object");
  c.untag = app.add_subcommand("untag", "remove the name NAME; gc may then drop its version");
  c.untag->add_option("NAME", c.tag_name)->required();
  c.backup = app.add_subcommand(
      "backup", "copy a version into the backup directory DEST: only the nodes it lacks (default: commit, then that)");
  c.backup->add_option("DEST", c.backup_dir)->required();
  c.backup->add_option("--at", c.at, "back up this version: a retained checkpoint's combined root, or a tag's name");
  c.backup
      ->add_option("--rate", c.backup_rate_mib,
                   "write at most this many MiB of the backup a second (default 0: no limit); a rate leaves the "
                   "cores and the disk to the writes the database serves meanwhile")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 20));
  c.backups = app.add_subcommand("backups", "the versions the backup directory DIR holds, oldest first");
  c.backups->add_option("DIR", c.backup_dir)->required();
  c.restore = app.add_subcommand("restore", "make a new database at DIR from the backup SRC (not --data)");
  c.restore->add_option("SRC", c.backup_dir)->required();
  c.restore->add_option("DIR", c.restore_dir)->required();
  c.restore->add_option("--at", c.at, "this backed-up version (combined root or label); default: the newest");
  c.gc = app.add_subcommand("gc", "drop tree nodes no current root or retained checkpoint reaches");
  c.gc->add_flag("--json", c.json, "one JSON object");
  c.demo = app.add_subcommand("demo", "a guided tour of what magnetite does, on --data");
  c.bench = app.add_subcommand("bench", "bench/db_bench's side-by-side figures: ours beside RocksDB, LMDB, fdatasync");
  c.bench
      ->add_option("--workload", c.bench_options.workload,
                   "writes, gets, restart, load, overwrite, reclaim or all (all: every one but reclaim)")
      ->capture_default_str();
  c.bench->add_option("--seconds", c.bench_options.seconds, "length of each measured case (db_bench's default: 3)");
  c.bench->add_option("--keys", c.bench_options.keys,
                      "keys of gets, load, overwrite and reclaim (db_bench's default: 1000000; reclaim: 200000)");
  c.bench->add_option("--rounds", c.bench_options.rounds, "rounds of overwrite (db_bench's default: 10)");
  c.bench->add_option("--order", c.bench_options.order,
                      "how the loads visit the keys: random or sequential (db_bench's default: random)");
  c.bench->add_option("--values", c.bench_options.values,
                      "how well values compress, as RocksDB's --compression_ratio (db_bench's default: 0.5)");
  c.bench->add_option("--memory-limit-mib", c.bench_options.memory_limit_mib,
                      "read gets in a memory cgroup of M MiB, page cache dropped first (needs root)");
  c.bench->add_option("--leaf-form", c.bench_options.leaf_form,
                      "how our loads write leaves: lz4 (the default), zstd or searchable");
  c.bench->add_flag("--json", c.bench_options.json, "print db_bench's JSON object instead of the table");
  c.serve = app.add_subcommand("serve", "run one node of a replicated cluster (docs/design/replication.md) on --data");
  c.serve->add_option("--node", c.node_id, "this node's id in the cluster file")
      ->required()
      ->check(CLI::Range(std::uint32_t{1}, std::numeric_limits<std::uint32_t>::max()));
  c.serve->add_option("--cluster", c.cluster, "the cluster file (the same on every node)")->required();
  c.serve->add_option("--tls-cert", c.tls.certificate,
                      "this node's certificate, PEM (unless the cluster file says `tls off`)");
  c.serve->add_option("--tls-key", c.tls.key, "this node's private key, PEM, unencrypted");
  c.serve->add_option("--tls-ca", c.tls.ca, "the cluster's CA certificate, PEM: every peer's must check against it");
  c.serve->add_flag("--insecure", c.insecure,
                    "run a cluster file that says `tls off` (refused otherwise, loopback included): anyone who can "
                    "reach the ports can then join as any node or client; only where that is accepted");
  c.serve
      ->add_option("--max-message-bytes", c.network.max_message_bytes,
                   "the largest message a connection may send once it shook hands (docs/design/replication.md, 7.1)")
      ->capture_default_str();
  c.serve
      ->add_option("--max-handshake-bytes", c.network.max_handshake_bytes,
                   "the largest message a connection may send before it shook hands")
      ->capture_default_str();
  c.serve
      ->add_option("--max-inflight-bytes", c.network.max_inflight_bytes,
                   "what all connections together may have claimed and not yet delivered")
      ->capture_default_str();
  c.serve
      ->add_option("--handshake-timeout-ms", c.handshake_timeout_ms,
                   "a connection that has not shaken hands by then is cut")
      ->capture_default_str();
  c.serve->add_option("--idle-timeout-ms", c.idle_timeout_ms, "a connection that sent nothing that long is cut")
      ->capture_default_str();
  c.serve
      ->add_option("--max-pending-connections", c.network.max_pending_connections,
                   "past this many connections that have not shaken hands, a new one is closed at once")
      ->capture_default_str();
  c.serve
      ->add_option("--max-pending-per-source", c.network.max_pending_per_source,
                   "the same, counting the connections from one address only")
      ->capture_default_str();
  c.cluster_demo = app.add_subcommand(
      "cluster-demo", "three serve processes on loopback: failover after SIGKILL, nothing lost, catch-up by delta");
  c.cluster_demo->add_option("--dir", c.demo_cluster.dir, "a new directory for the nodes (default: a temporary one)");
  c.cluster_demo->add_option("--keys", c.demo_cluster.keys, "writes acknowledged before the owner is killed")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10'000'000}))
      ->capture_default_str();
  c.cluster_demo->add_option("--missed", c.demo_cluster.missed, "writes the killed node misses")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{10'000'000}))
      ->capture_default_str();
  c.cluster_demo->add_option("--base-port", c.demo_cluster.base_port,
                             "the nodes listen on this port and the next two (default: from the process id)");
  c.cert = app.add_subcommand(
      "cert", "a development CA, and a certificate and key for every node of a cluster file and each client");
  c.cert->add_option("--cluster", c.cluster, "the cluster file")->required();
  c.cert->add_option("--out", c.certificates.dir, "a directory to write into (no file is overwritten)")->required();
  c.cert->add_option("--client", c.certificates.clients, "a client's name (repeat for more)");
  c.cert->add_option("--days", c.certificates.days, "how long they are valid")->capture_default_str();
}

// `magnetite cert`: the files, then how a node and a client use them.
int make_certificates(const command_line& c) {
  auto text = must(read_whole_file(env::posix(), c.cluster));
  auto cluster = replication::cluster_file::parse(text);
  if (!cluster) die(status::invalid_argument(fmt::format("{}: {}", c.cluster, cluster.error().message())));
  for (const auto& f : must(replication::make_cluster_certificates(*cluster, c.certificates))) fmt::print("{}\n", f);
  if (!cluster->tls)
    fmt::print(stderr, "note: {} says `tls off`; the nodes use these only once that line is gone\n", c.cluster);
  const auto& first = cluster->nodes.front();
  fmt::print(stderr,
             "a node: magnetite --data DIR serve --node {0} --cluster {1} --tls-cert {2}/node{0}.pem "
             "--tls-key {2}/node{0}.key --tls-ca {2}/ca.pem\n",
             first.id, c.cluster, c.certificates.dir);
  fmt::print(stderr, "ca.key signs them all: keep it away from the nodes in anything but a development cluster\n");
  return 0;
}

// On the database, or on a snapshot of one of its versions (--at).
template <class Reader>
void scan(Reader& db, const command_line& c) {
  auto bounds = must(scan_bounds(c.from, c.to, c.prefix));
  auto cursor = must(db.scan(bounds.first, bounds.second));
  std::vector<std::string> lines;  // --reverse: collected, then printed backwards
  std::size_t printed = 0;
  while (c.reverse || !c.limit || printed < *c.limit) {
    if (!must(cursor.next())) break;
    std::string line = escape_field(cursor.key()) + '\t' + escape_field(cursor.value()) + '\n';
    if (c.reverse) {
      lines.push_back(std::move(line));
      continue;
    }
    std::fputs(line.c_str(), stdout);
    ++printed;
  }
  for (auto it = lines.rbegin(); it != lines.rend() && (!c.limit || printed < *c.limit); ++it, ++printed)
    std::fputs(it->c_str(), stdout);
}

void commit(database& db, const command_line& c) {
  auto r = must(db.commit());
  if (c.json) {
    std::string roots;
    for (std::size_t i = 0; i < r.roots.size(); ++i)
      roots += fmt::format("{}\"{}\"", i ? "," : "", r.roots[i].to_hex());
    fmt::print("{{\"roots\":[{}],\"combined\":\"{}\"}}\n", roots, r.combined.to_hex());
    return;
  }
  for (std::size_t i = 0; i < r.roots.size(); ++i) fmt::print("shard {:3}  {}\n", i, r.roots[i].to_hex());
  fmt::print("combined   {}\n", r.combined.to_hex());
}

load_options load_options_of(const command_line& c) {
  load_options o;
  o.keys = c.keys;
  o.writers = c.writers;
  o.value_size = c.value_size;
  o.seed = c.seed;
  o.value_seed = c.value_seed;
  o.prefix = c.prefix.value_or("");
  o.ack_log = c.ack_log;
  return o;
}

void load(database& db, const command_line& c) {
  auto o = load_options_of(c);
  progress_bar bar(c.keys, "writes");
  if (bar.enabled() && !c.json) o.progress = [&](std::uint64_t done) { bar.update(done); };
  auto before = must(db.stats());
  auto r = must(run_load(db, o));
  bar.finish();
  auto after = must(db.stats());
  std::uint64_t fsyncs = 0;
  for (std::size_t i = 0; i < after.shards.size(); ++i) {
    // A shard that restarted during the load counts again from zero: count its
    // fsyncs since the restart (fewer than the truth, never garbage).
    std::uint64_t b = before.shards[i].log_fsyncs, a = after.shards[i].log_fsyncs;
    fsyncs += a >= b && after.restarts[i] == before.restarts[i] ? a - b : a;
  }
  double rate = r.seconds > 0 ? static_cast<double>(r.written) / r.seconds : 0;
  double per_write = r.written ? static_cast<double>(fsyncs) / static_cast<double>(r.written) : 0;
  if (c.json) {
    fmt::print(
        "{{\"keys\":{},\"writers\":{},\"value_size\":{},\"durable\":{},\"seconds\":{:.3f},"
        "\"writes_per_second\":{:.0f},\"log_fsyncs\":{},\"fsyncs_per_write\":{:.4f},\"retries\":{}}}\n",
        r.written, c.writers, c.value_size, c.no_sync ? "false" : "true", r.seconds, rate, fsyncs, per_write,
        r.retries);
    return;
  }
  fmt::print("{} keys from {} writers in {:.2f} s: {} writes/s ({}), {} log fsyncs ({:.3f} a write)\n",
             with_commas(r.written), c.writers, r.seconds, with_commas(static_cast<std::uint64_t>(rate)),
             c.no_sync ? "no-sync: acknowledged before the fsync" : "durable: acknowledged after the fsync",
             with_commas(fsyncs), per_write);
}

// load --cluster: the same keys through the cluster's owners. The client
// retries a write itself (at most once by request id) until its deadline;
// what reaches the load's own retries is a call that ran out of time.
void load(cluster_client& client, const command_line& c) {
  auto o = load_options_of(c);
  progress_bar bar(c.keys, "writes");
  if (bar.enabled() && !c.json) o.progress = [&](std::uint64_t done) { bar.update(done); };
  auto r = must(run_load([&client](const std::string& k, const std::string& v) { return client.put(k, v); }, o));
  bar.finish();
  double rate = r.seconds > 0 ? static_cast<double>(r.written) / r.seconds : 0;
  if (c.json) {
    fmt::print(
        "{{\"keys\":{},\"writers\":{},\"value_size\":{},\"durable\":true,\"seconds\":{:.3f},"
        "\"writes_per_second\":{:.0f},\"retries\":{},\"client_retries\":{}}}\n",
        r.written, c.writers, c.value_size, r.seconds, rate, r.retries, client.retries());
    return;
  }
  fmt::print(
      "{} keys from {} writers in {:.2f} s: {} writes/s (acknowledged once a majority made each durable), "
      "{} calls retried by the client\n",
      with_commas(r.written), c.writers, r.seconds, with_commas(static_cast<std::uint64_t>(rate)),
      with_commas(client.retries()));
}

std::string histogram_json(const std::vector<std::uint64_t>& h) {
  std::string out;
  for (std::size_t b = 0; b < h.size(); ++b) out += fmt::format("{}{}", b ? "," : "", h[b]);
  return "[" + out + "]";
}

// "1", "2-3", "4-7", ..., "2048+": the bucket's group sizes.
std::string bucket_name(std::size_t b) {
  if (b + 1 == group_size_buckets) return fmt::format("{}+", std::uint64_t{1} << b);
  if (b == 0) return "1";
  return fmt::format("{}-{}", std::uint64_t{1} << b, (std::uint64_t{2} << b) - 1);
}

// Space amplification of the node store: its pack bytes over the live bytes
// (the records the kept roots reach); null when nothing is live.
std::string amplification_json(const shard_usage& u) {
  if (u.live_node_bytes == 0) return "null";
  return fmt::format("{:.3f}", static_cast<double>(u.node_bytes) / static_cast<double>(u.live_node_bytes));
}
std::string amplification_text(const shard_usage& u) {
  if (u.live_node_bytes == 0) return "-";
  return fmt::format("{:.2f}x", static_cast<double>(u.node_bytes) / static_cast<double>(u.live_node_bytes));
}

void tag(database& db, const command_line& c) {
  std::optional<hash128> version;
  if (!c.at.empty()) version = must(db.resolve(c.at));
  auto named = must(db.tag(c.tag_name, version));
  fmt::print("tagged {} = {}\n", c.tag_name, named.combined.to_hex());
}

// Tag names are letters, digits, '.', '_' and '-': nothing to escape.
std::string tags_json(const std::vector<version_tag>& tags) {
  std::string out;
  for (const auto& t : tags)
    out += fmt::format("{}{{\"name\":\"{}\",\"version\":\"{}\"}}", out.empty() ? "" : ",", t.name,
                       t.version.combined.to_hex());
  return "[" + out + "]";
}

void tags(database& db, const command_line& c) {
  auto all = db.tags();
  if (c.json) {
    fmt::print("{{\"tags\":{}}}\n", tags_json(all));
    return;
  }
  for (const auto& t : all) fmt::print("{}\t{}\n", t.name, t.version.combined.to_hex());
}

void stats(database& db, const command_line& c) {
  auto st = must(db.stats());
  shard_stats sum;
  shard_usage total;
  std::uint64_t restarts = 0;
  admission_stats admitted;
  auto admission_json = [](const admission_stats& a) {
    return fmt::format(
        "{{\"admitted\":{},\"waited\":{},\"refused\":{},\"waiting\":{},\"requests\":{},\"bytes\":{},"
        "\"max_requests\":{},\"max_bytes\":{},\"stalls\":{},\"stall_ns\":{}}}",
        a.admitted, a.waited, a.refused, a.waiting, a.requests, a.bytes, a.max_requests, a.max_bytes, a.stalls,
        a.stall_ns);
  };
  for (std::size_t i = 0; i < st.shards.size(); ++i) {
    const auto& s = st.shards[i];
    const auto& u = st.usage[i];
    sum.acknowledged += s.acknowledged;
    sum.groups += s.groups;
    sum.log_fsyncs += s.log_fsyncs;
    sum.checkpoints += s.checkpoints;
    sum.runs_written += s.runs_written;
    sum.folds += s.folds;
    sum.sorted_runs += s.sorted_runs;
    sum.run_entries += s.run_entries;
    sum.expired += s.expired;
    sum.replayed_records += s.replayed_records;
    for (std::size_t b = 0; b < group_size_buckets; ++b) sum.group_sizes[b] += s.group_sizes[b];
    const auto& a = st.admission[i];
    admitted.admitted += a.admitted;
    admitted.waited += a.waited;
    admitted.refused += a.refused;
    admitted.waiting += a.waiting;
    admitted.requests += a.requests;
    admitted.bytes += a.bytes;
    admitted.max_requests += a.max_requests;
    admitted.max_bytes += a.max_bytes;
    admitted.stalls += a.stalls;
    admitted.stall_ns += a.stall_ns;
    total.keys += u.keys;
    total.wal_bytes += u.wal_bytes;
    total.node_bytes += u.node_bytes;
    total.cache_hits += u.cache_hits;
    total.cache_misses += u.cache_misses;
    total.record_cache_hits += u.record_cache_hits;
    total.node_reads += u.node_reads;
    total.leaf_lookups += u.leaf_lookups;
    total.node_syncs += u.node_syncs;
    total.live_node_bytes += u.live_node_bytes;
    total.reclaimed_bytes += u.reclaimed_bytes;
    total.reclaim_cycles += u.reclaim_cycles;
    restarts += st.restarts[i];
  }
  auto combined = db.checkpoints();
  if (c.json) {
    auto one = [&](const shard_stats& s, const shard_usage& u, std::uint64_t r) {
      return fmt::format(
          "\"keys\":{},\"wal_bytes\":{},\"node_bytes\":{},\"cache_hits\":{},\"cache_misses\":{},"
          "\"log_fsyncs\":{},\"node_fsyncs\":{},\"acknowledged_writes\":{},\"groups\":{},"
          "\"group_sizes\":{},\"checkpoints\":{},\"runs_written\":{},\"folds\":{},\"sorted_runs\":{},"
          "\"run_entries\":{},\"expired\":{},\"replayed_records\":{},"
          "\"restarts\":{},\"live_node_bytes\":{},\"space_amplification\":{},"
          "\"reclaimed_bytes\":{},\"reclaim_cycles\":{},\"record_cache_hits\":{},\"node_reads\":{},"
          "\"leaf_lookups\":{}",
          u.keys, u.wal_bytes, u.node_bytes, u.cache_hits, u.cache_misses, s.log_fsyncs, u.node_syncs, s.acknowledged,
          s.groups, histogram_json(s.group_sizes), s.checkpoints, s.runs_written, s.folds, s.sorted_runs, s.run_entries,
          s.expired, s.replayed_records, r, u.live_node_bytes, amplification_json(u), u.reclaimed_bytes,
          u.reclaim_cycles, u.record_cache_hits, u.node_reads, u.leaf_lookups);
    };
    std::string shards;
    for (std::size_t i = 0; i < st.shards.size(); ++i)
      shards += fmt::format("{}{{\"shard\":{},{},\"admission\":{},\"root\":\"{}\"}}", i ? "," : "", i,
                            one(st.shards[i], st.usage[i], st.restarts[i]), admission_json(st.admission[i]),
                            st.usage[i].root);
    fmt::print("{{\"shards\":[{}],\"total\":{{{},\"admission\":{}}},\"last_commit\":{},\"tags\":{}}}\n", shards,
               one(sum, total, restarts), admission_json(admitted),
               combined.empty() ? "null" : fmt::format("\"{}\"", combined.back().combined), tags_json(st.tags));
    return;
  }
  fmt::print("counters are since this process opened the database (a restart of a shard starts its own again)\n");
  fmt::print("{:>6} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>8} {:>8} {:>10} {:>8} {:>8}  {}\n", "shard",
             "keys", "wal", "nodes", "live", "amp", "reclaimed", "cache hit", "miss", "fsyncs", "acked", "groups",
             "restarts", "root");
  auto row = [&](std::string name, const shard_stats& s, const shard_usage& u, std::uint64_t r, std::string root) {
    fmt::print("{:>6} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>8} {:>8} {:>10} {:>8} {:>8}  {}\n", name,
               with_commas(u.keys), human_bytes(u.wal_bytes), human_bytes(u.node_bytes), human_bytes(u.live_node_bytes),
               amplification_text(u), human_bytes(u.reclaimed_bytes), with_commas(u.cache_hits),
               with_commas(u.cache_misses), with_commas(s.log_fsyncs + u.node_syncs), with_commas(s.acknowledged),
               with_commas(s.groups), r, root);
  };
  for (std::size_t i = 0; i < st.shards.size(); ++i)
    row(std::to_string(i), st.shards[i], st.usage[i], st.restarts[i], st.usage[i].root);
  row("total", sum, total, restarts, combined.empty() ? "" : fmt::format("{} (last commit)", combined.back().combined));
  fmt::print("reads of node files: {} for {} leaf lookups ({} a lookup)\n", with_commas(total.node_reads),
             with_commas(total.leaf_lookups),
             total.leaf_lookups ? fmt::format("{:.2f}", static_cast<double>(total.node_reads) /
                                                            static_cast<double>(total.leaf_lookups))
                                : std::string("none yet"));
  fmt::print("writes per group (fsync):");
  for (std::size_t b = 0; b < group_size_buckets; ++b)
    if (sum.group_sizes[b]) fmt::print("  {}: {}", bucket_name(b), with_commas(sum.group_sizes[b]));
  fmt::print("{}\n", sum.groups ? "" : "  none yet");
  fmt::print(
      "admission: {} writes admitted, {} waited for room, {} refused busy; now {} waiting, {} in ({}) of {} ({}); "
      "{} stalls for memory ({:.3f} s)\n",
      with_commas(admitted.admitted), with_commas(admitted.waited), with_commas(admitted.refused),
      with_commas(admitted.waiting), with_commas(admitted.requests), human_bytes(admitted.bytes),
      with_commas(admitted.max_requests), human_bytes(admitted.max_bytes), with_commas(admitted.stalls),
      static_cast<double>(admitted.stall_ns) / 1e9);
  fmt::print("named versions:{}\n", st.tags.empty() ? " none" : "");
  for (const auto& t : st.tags) fmt::print("  {}  {}\n", t.name, t.version.combined.to_hex());
}

// verify on a backup directory (it holds a BACKUP file).
int verify_backup_dir(const command_line& c) {
  auto r = must(verify_backup(c.dir));
  for (const auto& p : r.problems) fmt::print("damage: {}\n", p);
  if (!r.problems.empty()) {
    fmt::print("{} problems found\n", r.problems.size());
    return 1;
  }
  fmt::print("ok: a backup of {} versions, {} nodes and {} of packs read back, no damage\n", r.versions,
             with_commas(r.nodes), human_bytes(r.bytes));
  return 0;
}

int verify(const command_line& c) {
  if (std::filesystem::exists(std::filesystem::path(c.dir) / "BACKUP")) return verify_backup_dir(c);
  auto db = try_open_db(c.dir, c.shards, false, c.cache_mib);
  if (!db && db.error().code() == status_code::corruption) {
    fmt::print("damage: {}\n1 problem found (the database does not open)\n", db.error().message());
    return 1;
  }
  if (!db) die(db.error());
  auto r = must((*db)->verify());
  for (std::size_t i = 0; i < r.shards.size(); ++i) {
    const auto& s = r.shards[i];
    fmt::print("shard {}: {} nodes ({}) from {} root{}, {} log frames, {} expiring keys\n", i, with_commas(s.nodes),
               human_bytes(s.node_bytes), s.roots, s.roots == 1 ? "" : "s", with_commas(s.log_frames),
               with_commas(s.expiring_keys));
  }
  for (const auto& p : r.problems) fmt::print("damage: {}\n", p);
  // Open printed these to standard error already; here they stand in the report.
  for (const auto& w : r.warnings) fmt::print("warning: {}\n", w);
  if (!r.problems.empty()) {
    fmt::print("{} problems found\n", r.problems.size());
    return 1;
  }
  fmt::print("ok: {} shards, {} retained checkpoints and {} named versions, no damage{}\n", r.shards.size(),
             r.checkpoints, r.tags, r.warnings.empty() ? "" : " (see the warnings)");
  return 0;
}

void diff(database& db, const command_line& c) {
  hash128 a = must(db.resolve(c.root_a));
  hash128 b = must(db.resolve(c.root_b));
  auto changes = must(db.diff(a, b));
  std::size_t added = 0, removed = 0, changed = 0;
  for (const auto& ch : changes) {
    std::string k = escape_field(ch.key);
    switch (ch.what) {
      case key_change::kind::added:
        ++added;
        fmt::print("+ {}\t{}\n", k, escape_field(*ch.new_value));
        break;
      case key_change::kind::removed:
        ++removed;
        fmt::print("- {}\t{}\n", k, escape_field(*ch.old_value));
        break;
      case key_change::kind::changed:
        ++changed;
        fmt::print("~ {}\t{}\t{}\n", k, escape_field(*ch.old_value), escape_field(*ch.new_value));
        break;
    }
  }
  fmt::print("{} added, {} removed, {} changed\n", added, removed, changed);
}

void gc(database& db, const command_line& c) {
  auto report = must(db.gc());
  const auto& r = report.shards;
  std::uint64_t reclaimed = 0, kept = 0, nodes = 0;
  for (const auto& g : r) {
    reclaimed += g.bytes_reclaimed;
    kept += g.bytes_kept;
    nodes += g.nodes_kept;
  }
  if (c.json) {
    fmt::print("{{\"bytes_reclaimed\":{},\"bytes_kept\":{},\"nodes_kept\":{},\"damaged_checkpoints_dropped\":{}}}\n",
               reclaimed, kept, nodes, report.damaged_checkpoints_dropped);
    return;
  }
  for (std::size_t i = 0; i < r.size(); ++i)
    fmt::print("shard {}: kept {} nodes ({}), reclaimed {}\n", i, with_commas(r[i].nodes_kept),
               human_bytes(r[i].bytes_kept), human_bytes(r[i].bytes_reclaimed));
  fmt::print("reclaimed {} ({} bytes)\n", human_bytes(reclaimed), reclaimed);
  if (report.damaged_checkpoints_dropped)
    fmt::print("dropped {} damaged lines of CHECKPOINTS\n", report.damaged_checkpoints_dropped);
}

// get's answer: the value, or "not found" and exit code 1.
int print_found(const std::optional<std::string>& v) {
  if (!v) {
    fmt::print(stderr, "not found\n");
    return 1;
  }
  fmt::print("{}\n", *v);
  return 0;
}

// get or scan --at: a snapshot of that version.
int read_at(database& db, const command_line& c) {
  auto s = must(db.at(c.at));
  if (*c.get) return print_found(must(s.get(c.key)));
  scan(s, c);
  return 0;
}

// put, get or del, on a database or through a cluster's owners (their calls
// are alike).
template <class Store>
int key_command(Store& store, const command_line& c, std::optional<std::chrono::nanoseconds> ttl) {
  if (*c.put) {
    if (auto s = store.put(c.key, c.value, ttl); !s) die(s);
  } else if (*c.get) {
    return print_found(must(store.get(c.key)));
  } else if (*c.del) {
    if (auto s = store.del(c.key); !s) die(s);
  }
  return 0;
}

// --cluster: put, get, del and load go to the cluster, not to a data
// directory.
int cluster_call(const command_line& c, std::optional<std::chrono::nanoseconds> ttl) {
  cluster_client_options o;
  o.cluster_file = c.cluster;
  o.tls_certificate = c.tls.certificate;
  o.tls_key = c.tls.key;
  o.tls_ca = c.tls.ca;
  auto client = must(cluster_client::connect(o));
  if (*c.load) {
    load(*client, c);
    return 0;
  }
  return key_command(*client, c, ttl);
}

// The command's exit code; failures are thrown.
int execute(const command_line& c) {
  if (*c.verify) return verify(c);
  if (*c.restore) {
    if (auto s = restore_backup(c.backup_dir, c.restore_dir,
                                c.at.empty() ? std::nullopt : std::optional<std::string_view>(c.at));
        !s)
      die(s);
    fmt::print("restored {} into {}\n", c.backup_dir, c.restore_dir);
    return 0;
  }
  if (*c.backups) {
    for (const auto& v : must(list_backup(c.backup_dir)))
      fmt::print("{}\t{}\t{}\n", v.version.to_hex(), v.label.empty() ? "-" : v.label, v.made_ns);
    return 0;
  }
  if (*c.demo) return must(run_demo(c.dir, c.shards));
  if (*c.serve) {
    replication::connection_limits network = c.network;
    network.handshake_timeout = std::chrono::milliseconds(c.handshake_timeout_ms);
    network.idle_timeout = std::chrono::milliseconds(c.idle_timeout_ms);
    return run_serve(c.node_id, c.cluster, c.dir, c.tls, c.insecure, network);
  }
  if (*c.cluster_demo) return run_cluster_demo(c.demo_cluster);
  if (*c.cert) return make_certificates(c);
  if (*c.bench) {
    bench_command_options o = c.bench_options;
    o.data_dir = c.dir;
    o.cache_mib = c.cache_mib;
    return run_bench_command(o);
  }
  // Bad input is refused before the data directory is opened (or created).
  std::optional<std::chrono::nanoseconds> ttl;
  if (*c.put || *c.get || *c.del) {
    if (auto s = state_space::check_user_key(c.key); !s) die(s);
  }
  if (*c.put) {
    if (auto s = state_space::check_user_value(c.value); !s) die(s);
    if (!c.ttl.empty()) ttl = must(parse_duration(c.ttl));
  }
  if (!c.cluster.empty() && *c.load && c.no_sync)
    die(
        status::invalid_argument("load --no-sync needs a data directory: a cluster acknowledges a write once a "
                                 "majority made it durable"));
  if (!c.cluster.empty() && !c.at.empty())
    die(status::invalid_argument("--at reads a data directory's retained checkpoints; a cluster client has none"));
  if (!c.cluster.empty() && (*c.put || *c.get || *c.del || *c.load)) return cluster_call(c, ttl);
  shard_options so;
  if (*c.load && c.no_sync) so.fsync = wal::fsync_policy::interval;
  bool creates = *c.put || *c.del || *c.load;
  auto db = open_db(c.dir, c.shards, creates, c.cache_mib, so);
  if (!c.at.empty() && (*c.get || *c.scan)) return read_at(*db, c);
  if (*c.put || *c.get || *c.del) return key_command(*db, c, ttl);
  if (*c.scan) {
    scan(*db, c);
  } else if (*c.commit) {
    commit(*db, c);
  } else if (*c.load) {
    load(*db, c);
  } else if (*c.stats) {
    stats(*db, c);
  } else if (*c.diff) {
    diff(*db, c);
  } else if (*c.gc) {
    gc(*db, c);
  } else if (*c.tag) {
    tag(*db, c);
  } else if (*c.tags) {
    tags(*db, c);
  } else if (*c.backup) {
    backup_options o;
    if (!c.at.empty()) o.version = c.at;
    o.max_bytes_per_second = c.backup_rate_mib << 20;
    auto r = must(db->backup(c.backup_dir, o));
    fmt::print("backed up {}{} into {}: {} nodes ({}) shipped; it holds {} versions\n", r.version.to_hex(),
               r.label.empty() ? "" : " (" + r.label + ")", c.backup_dir, with_commas(r.nodes_shipped),
               human_bytes(r.bytes_shipped), r.versions_held);
  } else if (*c.untag) {
    if (auto s = db->untag(c.tag_name); !s) die(s);
    fmt::print("untagged {}\n", c.tag_name);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"magnetite: an embeddable storage engine on CAF; this tool inspects and edits a database"};
  command_line c;
  declare(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // No command was recognised, and a word was left over: that word was
    // meant as the command (CLI11 itself would only say one is required).
    auto left = app.remaining();
    if (app.get_subcommands().empty() && !left.empty() && !left.front().starts_with('-')) {
      fmt::print(stderr, "magnetite: unknown command '{}' (magnetite --help lists them)\n", left.front());
      return 2;
    }
    if (app.get_subcommands().empty() && left.empty() && dynamic_cast<const CLI::RequiredError*>(&e)) {
      fmt::print(stderr, "magnetite: a command is required (magnetite --help lists them)\n");
      return 2;
    }
    fmt::print(stderr, "magnetite: {}\n", e.what());
    return 2;
  }
  try {
    return execute(c);
  } catch (const failure& f) {
    fmt::print(stderr, "magnetite: {}\n", f.why.to_string());
    return 2;
  }
}
