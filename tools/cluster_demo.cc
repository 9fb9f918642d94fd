#include "tools/cluster_demo.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include "actors/caf_headers.h"  // before any other CAF header

#include "replication/cluster_certificates.h"
#include "replication/node.h"
#include "replication/request_within.h"
#include "tools/progress_bar.h"

namespace magnetite {

namespace {

using namespace replication;
using steady = std::chrono::steady_clock;

constexpr std::uint32_t nodes = 3;

double ms_since(steady::time_point t0) { return std::chrono::duration<double, std::milli>(steady::now() - t0).count(); }

// Polls until ready() or the limit: the nodes are separate processes on real
// time, so waiting is all a client can do.
bool wait_for(const std::function<bool()>& ready, std::chrono::seconds limit) {
  auto give_up = steady::now() + limit;
  while (!ready()) {
    if (steady::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class demo_cluster {
 public:
  // Over TLS with the certificates in certs (magnetite cert's names): the
  // demo's own client shows client-demo's.
  demo_cluster(const cluster_demo_options& o, cluster_file cluster, std::string cluster_path, std::string certs)
      : o_(o), cluster_(std::move(cluster)), cluster_path_(std::move(cluster_path)), certs_(std::move(certs)) {
    configure_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    client_ = std::make_unique<caf::scoped_actor>(*sys_);
    // Through a guarded network of its own, as a node links: TLS sessions
    // from one context, which leave no errors behind to drop the links to
    // the living nodes when the killed one's breaks (CAF's own sessions
    // did, and the demo then waited out its requests).
    auto ctx = tls_context::load(files("client-demo"));
    if (ctx) {
      auto net = guarded_network::start(*sys_, *ctx, connection_limits{});
      if (net) network_ = std::move(*net);
    }
  }
  bool tls_ok() const { return network_ != nullptr; }
  tls_files files(const std::string& who) const { return certificate_files(certs_, who); }

  ~demo_cluster() {
    for (auto pid : pids_)
      if (pid > 0) ::kill(pid, SIGTERM);
    for (auto pid : pids_)
      if (pid > 0) ::waitpid(pid, nullptr, 0);
    client_.reset();
  }

  // `magnetite --data DIR/nodeN serve --node N --cluster FILE`, its output in
  // DIR/nodeN.log (appended: a restart keeps the first life's lines).
  void start(std::uint32_t id) {
    std::string data = (std::filesystem::path(o_.dir) / fmt::format("node{}", id)).string();
    std::string log = (std::filesystem::path(o_.dir) / fmt::format("node{}.log", id)).string();
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::string node = std::to_string(id);
      auto tls = files(fmt::format("node{}", id));
      ::execl(self.c_str(), self.c_str(), "--data", data.c_str(), "serve", "--node", node.c_str(), "--cluster",
              cluster_path_.c_str(), "--tls-cert", tls.certificate.c_str(), "--tls-key", tls.key.c_str(), "--tls-ca",
              tls.ca.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pids_[id - 1] = pid;
  }

  void kill(std::uint32_t id) {
    ::kill(pids_[id - 1], SIGKILL);
    ::waitpid(pids_[id - 1], nullptr, 0);
    pids_[id - 1] = 0;
    replicas_[id - 1] = std::nullopt;
  }

  pid_t pid(std::uint32_t id) const { return pids_[id - 1]; }

  // Shard 0's replica on node id, asked for as a client (node 0).
  std::optional<replica_actor> replica(std::uint32_t id) {
    if (replicas_[id - 1]) return replicas_[id - 1];
    const auto* line = cluster_.node(id);
    auto remote = connect_via(*sys_, network_->actor(), line->host, line->port, true, std::chrono::seconds(5));
    if (!remote) return std::nullopt;
    std::vector<caf::actor> out;
    request_within(*client_, *remote, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0},
                   cluster_.fingerprint(), protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { out = r; }, [](caf::error&) {});
    if (out.empty()) return std::nullopt;
    replicas_[id - 1] = caf::actor_cast<replica_actor>(out[0]);
    return replicas_[id - 1];
  }

  std::optional<replica_info> info(std::uint32_t id) {
    auto r = replica(id);
    if (!r) return std::nullopt;
    std::optional<replica_info> out;
    request_within(*client_, *r, std::chrono::seconds(5), info_atom::value)
        .receive([&](const replica_info& i) { out = i; }, [&](caf::error&) { replicas_[id - 1] = std::nullopt; });
    return out;
  }

  // The one live node that says it owns shard 0.
  std::optional<std::uint32_t> owner() {
    std::optional<std::uint32_t> found;
    for (std::uint32_t id = 1; id <= nodes; ++id) {
      if (pid(id) == 0) continue;
      auto i = info(id);
      if (i && i->role == 2) {
        if (found) return std::nullopt;
        found = id;
      }
    }
    return found;
  }

  status put(std::uint32_t id, const std::string& k, const std::string& v) {
    auto r = replica(id);
    if (!r) return status::io_error(fmt::format("node {} is not reachable", id));
    status out = status::ok();
    request_within(*client_, *r, std::chrono::seconds(5), put_atom::value, k, v, std::int64_t{0})
        .receive([](ok_atom) {}, [&](caf::error& e) { out = to_status(e); });
    return out;
  }

  // A put whose answer sent_put_answer() looks for later.
  void send_put(std::uint32_t id, const std::string& k, const std::string& v) {
    if (auto r = replica(id)) (*client_)->send(*r, put_atom::value, k, v, std::int64_t{0});
  }

  // The answer to send_put's write if it came: acknowledged or refused.
  std::optional<bool> sent_put_answer() {
    std::optional<bool> out;
    (*client_)->receive([&](ok_atom) { out = true; }, [&](caf::error&) { out = false; },
                        caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  result<std::optional<std::string>> get(std::uint32_t id, const std::string& k) {
    auto r = replica(id);
    if (!r) return status::io_error(fmt::format("node {} is not reachable", id));
    result<std::optional<std::string>> out = status::io_error("no answer");
    request_within(*client_, *r, std::chrono::seconds(5), get_atom::value, k)
        .receive([&](bool found, const std::string& v) { out = found ? std::optional(v) : std::nullopt; },
                 [&](caf::error& e) { out = to_status(e); });
    return out;
  }

 private:
  cluster_demo_options o_;
  cluster_file cluster_;
  std::string cluster_path_;
  std::string certs_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<caf::scoped_actor> client_;
  std::shared_ptr<guarded_network> network_;  // after sys_: goes first
  std::array<pid_t, nodes> pids_{};
  std::array<std::optional<replica_actor>, nodes> replicas_;
};

std::string key_of(std::uint64_t i) { return fmt::format("demo:{:08}", i); }
std::string value_of(std::uint64_t i) { return fmt::format("value {} of the cluster demo", i); }

// A new, empty data directory (a temporary one without --data) and the
// cluster file of three nodes on loopback; 0 or the exit code.
int prepare(cluster_demo_options& o, std::string& text, std::uint16_t& base) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (o.dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "magnetite-cluster-demo-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      fmt::print(stderr, "magnetite cluster-demo: cannot create a directory under {}\n",
                 fs::temp_directory_path().string());
      return 2;
    }
    o.dir = pattern;
  }
  if (fs::exists(o.dir) && !fs::is_empty(o.dir, ec)) {
    fmt::print(stderr, "magnetite cluster-demo: {} is not empty; give a new directory with --data\n", o.dir);
    return 2;
  }
  fs::create_directories(o.dir, ec);
  if (ec) {
    fmt::print(stderr, "magnetite cluster-demo: cannot create {}: {}\n", o.dir, ec.message());
    return 2;
  }
  base = o.base_port != 0 ? o.base_port : static_cast<std::uint16_t>(30000 + (::getpid() % 3000) * 3);
  text = fmt::format("cluster demo\nshards 1\ntls on\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n",
                     base, base + 1, base + 2);
  return 0;
}

// Acts 3 to 6: writes through the owner, the owner killed with one in flight,
// a new owner elected, every acknowledged write read back through it. The
// acknowledged count and how many were lost, or the exit code.
struct failover_result {
  std::uint32_t next = 0;
  std::uint64_t acked = 0, lost = 0;
  int exit_code = 0;
};

failover_result write_then_fail_over(demo_cluster& c, const cluster_demo_options& o, std::uint32_t first) {
  failover_result r;
  auto t0 = steady::now();
  for (; r.acked < o.keys; ++r.acked) {
    if (status s = c.put(first, key_of(r.acked), value_of(r.acked)); !s) {
      fmt::print(stderr, "magnetite cluster-demo: write {} through node {}: {}\n", r.acked, first, s.to_string());
      return {0, 0, 0, 1};
    }
  }
  fmt::print("3. {} writes through node {}, each acknowledged after a majority made it durable ({:.0f} writes/s)\n",
             r.acked, first, static_cast<double>(r.acked) * 1000.0 / ms_since(t0));
  // The next write goes out without waiting; the owner dies with it in
  // flight. Its answer, if one ever comes, is looked at after the failover.
  c.send_put(first, key_of(r.acked), value_of(r.acked));
  std::this_thread::sleep_for(std::chrono::microseconds(300));
  auto killed_at = steady::now();
  c.kill(first);
  fmt::print("4. node {} SIGKILLed while write {} was in flight\n", first, r.acked);
  std::optional<std::uint32_t> next;
  if (!wait_for([&] { return (next = c.owner()).has_value(); }, std::chrono::seconds(60))) {
    fmt::print(stderr, "magnetite cluster-demo: no node took over within 60 s\n");
    return {0, 0, 0, 1};
  }
  r.next = *next;
  fmt::print("5. node {} noticed, won an election and took the shard over, unasked ({:.0f} ms after the kill)\n",
             r.next, ms_since(killed_at));
  auto in_flight = c.sent_put_answer();
  fmt::print("   the write in flight {}\n", !in_flight ? "got no answer: it may or may not survive, and was not counted"
                                            : *in_flight ? std::string("was acknowledged before the kill: counted")
                                                         : std::string("was refused: not counted"));
  if (in_flight && *in_flight) ++r.acked;
  for (std::uint64_t i = 0; i < r.acked; ++i) {
    auto v = c.get(r.next, key_of(i));
    if (!v || *v != value_of(i)) ++r.lost;
  }
  fmt::print("6. read back through node {}: {} of {} acknowledged writes present, {} lost\n", r.next, r.acked - r.lost,
             r.acked, r.lost);
  return r;
}

// Acts 7 and 8: writes the dead node misses, then it comes back and catches
// up; false if it did not within 120 s.
bool miss_then_catch_up(demo_cluster& c, const cluster_demo_options& o, std::uint32_t first, std::uint32_t next,
                        std::uint64_t acked) {
  for (std::uint64_t i = 0; i < o.missed; ++i)
    if (status s = c.put(next, key_of(acked + i), value_of(acked + i)); !s) {
      fmt::print(stderr, "magnetite cluster-demo: write through node {}: {}\n", next, s.to_string());
      return false;
    }
  fmt::print("7. {} more writes through node {}, which node {} (down) misses\n", o.missed, next, first);
  c.start(first);
  auto t0 = steady::now();
  std::optional<replica_info> back;
  bool converged = wait_for(
      [&] {
        back = c.info(first);
        auto owner_now = c.info(next);
        return back && owner_now && back->root == owner_now->root;
      },
      std::chrono::seconds(120));
  if (!converged) {
    fmt::print("8. node {} restarted but did not catch up within 120 s\n", first);
    return false;
  }
  std::uint64_t data_bytes = 0;
  for (std::uint64_t i = 0; i < acked + o.missed; ++i) data_bytes += key_of(i).size() + value_of(i).size();
  fmt::print(
      "8. node {} restarted on its disk, was linked again, and caught up in the background ({:.0f} ms):\n"
      "   pulled {} tree nodes, {}, merged {} entries; the shard holds {} of keys and values\n"
      "   every replica's root: {}\n",
      first, ms_since(t0), with_commas(back->pulled_nodes), human_bytes(back->pulled_bytes),
      with_commas(back->merged_entries), human_bytes(data_bytes), back->root.to_hex());
  return true;
}

}  // namespace

int run_cluster_demo(const cluster_demo_options& given) {
  cluster_demo_options o = given;
  std::string text;
  std::uint16_t base = 0;
  if (int rc = prepare(o, text, base)) return rc;
  auto cluster = cluster_file::parse(text);
  if (!cluster) {
    fmt::print(stderr, "magnetite cluster-demo: {}\n", cluster.error().message());
    return 2;
  }
  std::string cluster_path = (std::filesystem::path(o.dir) / "cluster").string();
  std::ofstream(cluster_path) << text;
  // As `magnetite cert` makes them: every link over TLS, each bound to the
  // node or client its certificate names.
  std::string certs = (std::filesystem::path(o.dir) / "certs").string();
  if (auto made = make_cluster_certificates(*cluster, {certs, {"demo"}, 30}); !made) {
    fmt::print(stderr, "magnetite cluster-demo: {}\n", made.error().message());
    return 2;
  }

  demo_cluster c(o, *cluster, cluster_path, certs);
  if (!c.tls_ok()) {
    fmt::print(stderr, "magnetite cluster-demo: the client's certificate in {} does not check\n", certs);
    return 2;
  }
  fmt::print(
      "1. three nodes: `magnetite serve` processes on 127.0.0.1:{}-{}, over TLS with certificates naming each node "
      "(made as `magnetite cert` makes them, in {}), data and logs under {}\n",
      base, base + 2, certs, o.dir);
  for (std::uint32_t id = 1; id <= nodes; ++id) c.start(id);
  auto t0 = steady::now();
  std::optional<std::uint32_t> first;
  if (!wait_for([&] { return (first = c.owner()).has_value(); }, std::chrono::seconds(60))) {
    fmt::print(stderr, "magnetite cluster-demo: no owner was elected within 60 s (see {}/node*.log)\n", o.dir);
    return 2;
  }
  auto i0 = c.info(*first);
  fmt::print("2. the nodes elected node {} owner of the shard by themselves ({:.0f} ms, ballot {}.{})\n", *first,
             ms_since(t0), i0 ? i0->promised.counter : 0, *first);
  auto f = write_then_fail_over(c, o, *first);
  if (f.exit_code) return f.exit_code;
  if (!miss_then_catch_up(c, o, *first, f.next, f.acked)) return 1;
  bool owner_kept = c.owner() == f.next;
  fmt::print("9. node {} still owns the shard: the returning node deposed nobody ({})\n", f.next,
             owner_kept ? "yes" : "no");
  bool ok = f.lost == 0 && owner_kept;
  fmt::print("{}\n", ok ? "nothing acknowledged was lost." : "FAILED: see above.");
  return ok ? 0 : 1;
}

}  // namespace magnetite
