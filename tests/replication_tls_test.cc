// Nodes linked over TLS (caf::openssl): the `tls on` line of the cluster
// file, the check of a node's certificate files, three actor systems in one
// process electing, writing and reading over TLS on loopback, a client
// (node id 0) over TLS, and the links that must fail: a node without TLS, and
// a node whose certificate another CA signed. Every failure must be reported
// within the node's request timeout, never hang.
//
// The certificates are committed in tests/data/tls (generate.sh made them
// once; the tests never run the openssl command).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include <caf/openssl/all.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "magnetite/cluster_client.h"
#include "magnetite/state/records.h"
#include "replication/cluster_certificates.h"
#include "replication/node.h"
#include "state/layout.h"
#include "tests/support/node_process.h"
#include "tests/support/poll.h"
#include "tests/support/raw_socket.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

std::string tls_data(std::string_view file) { return std::string(MAGNETITE_TLS_DATA) + "/" + std::string(file); }

// A committed key as a node must hold it: a copy only its owner may read (a
// checkout gives every file 0644, which a node refuses).
std::string private_key(std::string_view file) {
  static testing::temp_dir keys("tls-keys");
  auto to = keys / std::string(file);
  if (!std::filesystem::exists(to)) {
    std::filesystem::copy_file(tls_data(file), to);
    std::filesystem::permissions(to, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  return to;
}

tls_files node_files(std::uint32_t id) {
  return {tls_data(fmt::format("node{}.pem", id)), private_key(fmt::format("node{}.key", id)), tls_data("ca.pem")};
}

// A node of another cluster's CA: consistent on its own, a stranger to ours.
tls_files stranger_files() { return {tls_data("stranger.pem"), private_key("stranger.key"), tls_data("other-ca.pem")}; }

// Ports apart from replication_network_test's (20000 + ...), by process id.
std::uint16_t base_port() { return static_cast<std::uint16_t>(10000 + (::getpid() % 1000) * 10); }

std::string cluster_text(std::string_view name, std::uint16_t base, bool tls) {
  return fmt::format("cluster {}\nshards 2\n{}node 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n", name,
                     tls ? "" : "tls off\n", base, base + 1, base + 2);
}

// A node over TLS with these files (plain when none), with this request timeout.
testing::node_process_options over_tls(std::optional<tls_files> files,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
  testing::node_process_options o;
  o.tls = std::move(files);
  o.request_timeout = timeout;
  return o;
}

bool mentions(const std::vector<std::string>& lines, std::string_view what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

// What node::start says for node `id` on a fresh database in dir, its actor
// system given these files (none: no TLS at all).
status start_status(const cluster_file& cluster, const std::string& dir, std::uint32_t id,
                    const std::optional<tls_files>& files) {
  caf::actor_system_config cfg;
  configure_system(cfg);
  if (files) REQUIRE(configure_tls(cfg, *files).is_ok());
  caf::actor_system sys{cfg};
  auto db = must(open_database(core_options_for(cluster, dir, sys)));
  node_options no;
  no.id = id;
  no.cluster = cluster;
  no.db = db.get();
  auto n = node::start(no);
  return n ? status::ok() : n.error();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("tls: on by default, a fact of the cluster file; `tls off` keeps the plaintext fingerprint of before") {
  auto off = must(cluster_file::parse(cluster_text("c", 7401, false)));
  auto on = must(cluster_file::parse(cluster_text("c", 7401, true)));
  CHECK_FALSE(off.tls);
  CHECK(on.tls);
  CHECK(on.canonical().find("\ntls on\n") != std::string::npos);
  CHECK(on.fingerprint() != off.fingerprint());
  auto said_on = must(cluster_file::parse("tls on\n" + cluster_text("c", 7401, true)));
  CHECK(said_on.fingerprint() == on.fingerprint());
  // `tls off` is the fingerprint a file without the line had when no line
  // meant plaintext: such a cluster's nodes still link with older ones.
  CHECK(off.canonical() ==
        "magnetite cluster v1\ncluster c\nshards 2\ntombstone_retention_s 86400\n"
        "node 1 127.0.0.1 7401\nnode 2 127.0.0.1 7402\nnode 3 127.0.0.1 7403\n");
  for (auto [text, says] : {std::pair{"tls yes\n", "line 1: expected `tls on` or `tls off`"},
                            std::pair{"tls\n", "line 1: expected `tls on` or `tls off`"},
                            std::pair{"tls on\n", "line 4: a second `tls` line"}}) {
    auto r = cluster_file::parse(text + cluster_text("c", 7401, false));
    REQUIRE_FALSE(r.is_ok());
    INFO(r.error().message());
    CHECK(r.error().message().find(says) != std::string::npos);
  }
}

TEST_CASE("tls: a node's certificate files are checked before CAF reads them, and what is wrong is named") {
  CHECK(check_tls_files(node_files(1)).is_ok());
  CHECK(check_tls_files(stranger_files()).is_ok());
  auto refused = [](const tls_files& f, std::string_view says) {
    auto s = check_tls_files(f);
    REQUIRE_FALSE(s.is_ok());
    INFO(s.message());
    CHECK(s.message().find(says) != std::string::npos);
  };
  refused({tls_data("node1.pem"), private_key("node1.key"), ""}, "all needed");
  refused({tls_data("missing.pem"), private_key("node1.key"), tls_data("ca.pem")}, "cannot load the certificate");
  refused({tls_data("node1.pem"), tls_data("missing.key"), tls_data("ca.pem")}, "cannot load the key");
  refused({tls_data("node1.pem"), private_key("node2.key"), tls_data("ca.pem")}, "is not the key of the certificate");
  refused({tls_data("node1.pem"), private_key("node1.key"), tls_data("missing.pem")}, "cannot load the CA file");
  // Signed by the other CA: peers would refuse it; so does the check.
  refused({tls_data("stranger.pem"), private_key("stranger.key"), tls_data("ca.pem")}, "does not check against");
  // A key the group or others may read (as a checkout leaves it) is refused,
  // naming its mode; the same bytes at 0600 pass above.
  refused({tls_data("node1.pem"), tls_data("node1.key"), tls_data("ca.pem")}, "by others than its owner");
  auto group_readable = private_key("node3.key") + ".0640";
  std::filesystem::copy_file(private_key("node3.key"), group_readable,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(group_readable, std::filesystem::perms::owner_read |
                                                   std::filesystem::perms::owner_write |
                                                   std::filesystem::perms::group_read);
  refused({tls_data("node3.pem"), group_readable, tls_data("ca.pem")}, "mode 0640");
  // The actor system is not given files that fail.
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  CHECK_FALSE(configure_tls(cfg, {tls_data("node1.pem"), private_key("node2.key"), tls_data("ca.pem")}).is_ok());
  CHECK(cfg.openssl_certificate.empty());
}

TEST_CASE("tls: a node of a `tls on` cluster does not start without its certificate") {
  testing::temp_dir dir("tls0");
  auto cluster = must(cluster_file::parse(cluster_text("secure", base_port(), true)));
  auto s = start_status(cluster, dir / "node1", 1, std::nullopt);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.message().find("cluster file secure is over TLS (no `tls off` line)") != std::string::npos);
}

TEST_CASE(
    "tls: three nodes over TLS on loopback elect, write and read; a client with the cluster's CA connects, "
    "one without TLS does not") {
  testing::temp_dir dir("tls");
  auto base = static_cast<std::uint16_t>(base_port() + 3);
  auto cluster = must(cluster_file::parse(cluster_text("secure", base, true)));
  std::vector<std::unique_ptr<testing::node_process>> nodes;
  for (std::uint32_t id = 1; id <= 3; ++id)
    nodes.push_back(std::make_unique<testing::node_process>(dir / fmt::format("node{}", id), cluster, id,
                                                            over_tls(node_files(id))));
  for (auto& p : nodes) {
    auto missing = p->n->connect_peers();
    for (const auto& e : p->n->last_errors()) MESSAGE(e);
    CHECK(missing.empty());
  }
  caf::scoped_actor client{*nodes[0]->sys};
  bool owns = false;
  client->request(nodes[0]->n->replica(0), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  REQUIRE(owns);  // a majority promised over TLS
  for (int i = 0; i < 10; ++i) {
    bool ok = false;
    client
        ->request(nodes[0]->n->replica(0), std::chrono::seconds(10), put_atom::value, fmt::format("k{}", i),
                  fmt::format("v{}", i), std::int64_t{0})
        .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    CHECK(ok);
  }
  // Every replica holds the writes: they crossed the TLS links (a majority
  // acknowledged each; the third may still be applying the last).
  for (auto& p : nodes) {
    auto holds = [&] {
      auto v = p->db->core().slot_of(0)->view.load()->get("k9", system_now_ns());
      return v.is_ok() && *v == std::optional<std::string>("v9");
    };
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!holds() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(holds());
  }

  // A client of its own (node id 0, its own actor system) with a certificate
  // of the cluster's CA: hello over TLS to node 2, then a linearizable read
  // at the owner, node 1, through the replicas node 2 handed out.
  {
    caf::actor_system_config cfg;
    configure_system(cfg);
    REQUIRE(configure_tls(cfg, node_files(3)).is_ok());
    caf::actor_system sys{cfg};
    auto two = connect_to(sys, "127.0.0.1", static_cast<std::uint16_t>(base + 1), true, std::chrono::seconds(5));
    REQUIRE_MESSAGE(two.is_ok(), two.error().to_string());
    caf::scoped_actor self{sys};
    std::vector<caf::actor> replicas;
    self->request(*two, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
                 [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(replicas.size() == 2);
    auto one = connect_to(sys, "127.0.0.1", base, true, std::chrono::seconds(5));
    REQUIRE(one.is_ok());
    self->request(*one, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
                 [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(replicas.size() == 2);
    bool found = false;
    std::string value;
    self->request(replicas[0], std::chrono::seconds(10), get_atom::value, std::string("k3"))
        .receive([&](bool f, const std::string& v) { found = f, value = v; },
                 [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    CHECK(found);
    CHECK(value == "v3");
  }
  // A client without TLS gets nothing from a TLS node, within its timeout.
  {
    caf::actor_system_config cfg;
    configure_system(cfg);
    caf::actor_system sys{cfg};
    auto t0 = std::chrono::steady_clock::now();
    auto plain = connect_to(sys, "127.0.0.1", base, false, std::chrono::seconds(2));
    CHECK_FALSE(plain.is_ok());
    MESSAGE("plain client: " << plain.error().to_string() << " after " << seconds_since(t0) << " s");
    CHECK(seconds_since(t0) < 2.5);
  }
  // A client with a certificate of another CA fails the TLS handshake: it
  // never gets the node's actor, so no message of it reaches one.
  {
    caf::actor_system_config cfg;
    configure_system(cfg);
    REQUIRE(configure_tls(cfg, stranger_files()).is_ok());
    caf::actor_system sys{cfg};
    auto t0 = std::chrono::steady_clock::now();
    auto stranger = connect_to(sys, "127.0.0.1", static_cast<std::uint16_t>(base + 2), true, std::chrono::seconds(2));
    CHECK_FALSE(stranger.is_ok());
    MESSAGE("client of another CA: " << (stranger ? "" : stranger.error().to_string()) << " after " << seconds_since(t0)
                                     << " s");
    CHECK(seconds_since(t0) < 2.5);
  }
}

TEST_CASE("tls: a node without TLS, or with a certificate of another CA, cannot link to TLS nodes, and says so") {
  testing::temp_dir dir("tls2");
  auto base = static_cast<std::uint16_t>(base_port() + 6);
  auto cluster = must(cluster_file::parse(cluster_text("secure", base, true)));
  const auto timeout = std::chrono::seconds(1);
  testing::node_process one(dir / "node1", cluster, 1, over_tls(node_files(1), timeout));
  testing::node_process two(dir / "node2", cluster, 2, over_tls(node_files(2), timeout));

  SUBCASE("another CA") {
    // Node 3 has the right cluster file, but its certificate and CA are
    // another cluster's: each side's handshake refuses the other's
    // certificate. Over TLS the lower ids connect (node.h, connect_peers).
    testing::node_process three(dir / "node3", cluster, 3, over_tls(stranger_files(), timeout));
    for (auto* p : {&one, &two}) {
      auto t0 = std::chrono::steady_clock::now();
      auto missing = p->n->connect_peers();
      double took = seconds_since(t0);
      for (const auto& e : p->n->last_errors()) MESSAGE(e);
      CHECK(missing == std::vector<std::uint32_t>{3});
      CHECK(mentions(p->n->last_errors(), "node 3 at 127.0.0.1"));
      CHECK(took < 1.5);  // within the timeout
    }
    // Node 3 was offered no link.
    auto missing = three.n->connect_peers();
    for (const auto& e : three.n->last_errors()) MESSAGE(e);
    CHECK(missing == std::vector<std::uint32_t>{1, 2});
    CHECK(mentions(three.n->last_errors(), "node 1 has not connected to node 3"));
    // One and two are linked to each other, at once or after linking again:
    // a failed handshake can drop a node's other TLS links (node.cc,
    // clear_network_thread_errors).
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool linked = false;
    while (!linked && std::chrono::steady_clock::now() < give_up) {
      auto a = one.n->connect_peers(), b = two.n->connect_peers();
      linked = a == std::vector<std::uint32_t>{3} && b == std::vector<std::uint32_t>{3};
    }
    CHECK(linked);
  }
  SUBCASE("no TLS") {
    // Node 3 was given the cluster file with `tls off` (so its fingerprint
    // differs too, but the link fails before any hello can say so).
    auto plain = must(cluster_file::parse(cluster_text("secure", base, false)));
    testing::node_process three(dir / "node3", plain, 3, over_tls(std::nullopt, timeout));
    auto t0 = std::chrono::steady_clock::now();
    auto missing = three.n->connect_peers();
    double took = seconds_since(t0);
    for (const auto& e : three.n->last_errors()) MESSAGE(e);
    CHECK(missing == std::vector<std::uint32_t>{1, 2});
    CHECK(mentions(three.n->last_errors(), "node 1 at 127.0.0.1"));
    CHECK(took < 2 * 1.5);
    // A TLS node reaching the plain one: its handshake is not answered in
    // TLS; it gives up after its timeout.
    t0 = std::chrono::steady_clock::now();
    auto from_one = one.n->connect_peers();
    took = seconds_since(t0);
    for (const auto& e : one.n->last_errors()) MESSAGE(e);
    CHECK(from_one == std::vector<std::uint32_t>{3});
    CHECK(mentions(one.n->last_errors(), "node 3 at 127.0.0.1"));
    CHECK(took < 1.5);
  }
}

TEST_CASE("tls: a node reads its files once, at start: with them gone, links still come, elect and write") {
  testing::temp_dir dir("tls-once");
  // Two nodes (a majority is both), each with its own copies of its files.
  auto base = static_cast<std::uint16_t>(base_port());
  auto cluster = must(cluster_file::parse(
      fmt::format("cluster once\nshards 1\ntls on\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\n", base, base + 1)));
  std::vector<std::string> copies;
  auto own_copy = [&](std::uint32_t id) {
    tls_files f = node_files(id);
    for (std::string* path : {&f.certificate, &f.key, &f.ca}) {
      auto to = dir / fmt::format("node{}-{}", id, std::filesystem::path(*path).filename().string());
      std::filesystem::copy_file(*path, to);
      *path = to;
      copies.push_back(to);
    }
    return f;
  };
  testing::node_process one(dir / "node1", cluster, 1, over_tls(own_copy(1)));
  testing::node_process two(dir / "node2", cluster, 2, over_tls(own_copy(2)));
  for (const auto& f : copies) REQUIRE(std::filesystem::remove(f));
  // No link was made before the files went: every handshake below is made
  // from the context loaded at start. (CAF's own sessions read the files
  // again for each connection, on the network thread.)
  CHECK(one.n->connect_peers().empty());
  for (const auto& e : one.n->last_errors()) MESSAGE(e);
  CHECK(two.n->connect_peers().empty());
  for (const auto& e : two.n->last_errors()) MESSAGE(e);
  caf::scoped_actor member{*one.sys};
  bool owns = false;
  member->request(one.n->replica(0), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  REQUIRE(owns);
  bool ok = false;
  member
      ->request(one.n->replica(0), std::chrono::seconds(10), put_atom::value, std::string("k"), std::string("v"),
                std::int64_t{0})
      .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(ok);  // on both disks, over the link
}

TEST_CASE("tls: a peer that speaks at most TLS 1.1 is refused; the same peer at TLS 1.2 shakes hands") {
  testing::temp_dir dir("tls-version");
  auto base = static_cast<std::uint16_t>(base_port() + 2);
  auto cluster =
      must(cluster_file::parse(fmt::format("cluster version\nshards 1\ntls on\nnode 1 127.0.0.1 {}\n", base)));
  testing::node_process one(dir / "node1", cluster, 1, over_tls(node_files(1)));
  // A client of OpenSSL itself, with a certificate of the cluster's CA:
  // only the highest version it offers differs between the two tries.
  auto shakes_hands = [&](int max_version) {
    auto files = node_files(2);
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    REQUIRE(ctx);
    SSL_CTX_set_security_level(ctx.get(), 0);  // let the client offer old versions at all
    REQUIRE(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_VERSION) == 1);
    REQUIRE(SSL_CTX_set_max_proto_version(ctx.get(), max_version) == 1);
    REQUIRE(SSL_CTX_use_certificate_chain_file(ctx.get(), files.certificate.c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx.get(), files.key.c_str(), SSL_FILETYPE_PEM) == 1);
    REQUIRE(SSL_CTX_load_verify_locations(ctx.get(), files.ca.c_str(), nullptr) == 1);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    int fd = testing::dial(base);
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
    SSL_set_fd(ssl.get(), fd);
    bool done = SSL_connect(ssl.get()) == 1;
    ERR_clear_error();
    ssl.reset();
    ::close(fd);
    return done;
  };
  CHECK_FALSE(shakes_hands(TLS1_1_VERSION));
  CHECK(shakes_hands(TLS1_2_VERSION));
}

TEST_CASE("tls: make_cluster_certificates: each file checks, names its node or client, overwrites nothing, links") {
  testing::temp_dir dir("tls-made");
  auto base = static_cast<std::uint16_t>(base_port() + 6);
  auto cluster = must(cluster_file::parse(
      fmt::format("cluster made\nshards 1\ntls on\nnode 1 127.0.0.1 {}\nnode 2 localhost {}\n", base, base + 1)));
  certificate_set set{dir / "certs", {"reporter"}, 30};
  auto files = must(make_cluster_certificates(cluster, set));
  CHECK(files.size() == 8);  // the CA, two nodes, one client: a certificate and a key each
  auto at = [&](std::string_view f) { return set.dir + "/" + std::string(f); };
  for (const auto& f : files) {
    auto mode = std::filesystem::status(f).permissions();
    bool key = f.ends_with(".key");
    CAPTURE(f);
    CHECK((mode & (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
          (key ? std::filesystem::perms::none
               : std::filesystem::perms::group_read | std::filesystem::perms::others_read));
  }
  for (std::string who : {"node1", "node2", "client-reporter"})
    CHECK(check_tls_files({at(who + ".pem"), at(who + ".key"), at("ca.pem")}).is_ok());
  CHECK(must(certificate_names(at("node2.pem"))) == std::vector<std::string>{"magnetite://made/node/2"});
  CHECK(must(certificate_names(at("client-reporter.pem"))) ==
        std::vector<std::string>{"magnetite://made/client/reporter"});
  CHECK(must(certificate_names(at("ca.pem"))).empty());
  // Again into the same directory: refused by the first file's name, and
  // not one byte changed.
  auto before = std::filesystem::last_write_time(at("node1.key"));
  auto again = make_cluster_certificates(cluster, set);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.error().message().find("ca.pem exists") != std::string::npos);
  CHECK(std::filesystem::last_write_time(at("node1.key")) == before);
  CHECK_FALSE(make_cluster_certificates(cluster, {dir / "other", {"no spaces"}, 30}).is_ok());
  CHECK_FALSE(std::filesystem::exists(dir / "other/ca.pem"));
  // Two nodes link and elect with them; the client's certificate gets it
  // the replicas over TLS.
  testing::node_process one(dir / "node1", cluster, 1,
                            over_tls(tls_files{at("node1.pem"), at("node1.key"), at("ca.pem")}));
  testing::node_process two(dir / "node2", cluster, 2,
                            over_tls(tls_files{at("node2.pem"), at("node2.key"), at("ca.pem")}));
  CHECK(one.n->connect_peers().empty());
  CHECK(two.n->connect_peers().empty());
  caf::scoped_actor member{*one.sys};
  bool owns = false;
  member->request(one.n->replica(0), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(owns);
  caf::actor_system_config cfg;
  configure_system(cfg);
  REQUIRE(configure_tls(cfg, {at("client-reporter.pem"), at("client-reporter.key"), at("ca.pem")}).is_ok());
  caf::actor_system client_sys{cfg};
  auto node2 =
      must(connect_to(client_sys, "127.0.0.1", static_cast<std::uint16_t>(base + 1), true, std::chrono::seconds(5)));
  caf::scoped_actor client{client_sys};
  std::size_t replicas = 0;
  client
      ->request(node2, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                protocol_version)
      .receive([&](const std::vector<caf::actor>& r) { replicas = r.size(); },
               [&](caf::error& e) { FAIL(to_status(e).message()); });
  CHECK(replicas == 1);
}

TEST_CASE("tls: with certificates that name members, a link is the node its certificate names, and no other") {
  testing::temp_dir dir("tls-named");
  auto base = static_cast<std::uint16_t>(base_port() + 3);
  auto cluster = must(cluster_file::parse(
      fmt::format("cluster named\nshards 1\ntls on\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\nnode 3 127.0.0.1 {}\n",
                  base, base + 1, base + 2)));
  certificate_set set{dir / "certs", {"ops"}, 30};
  (void)must(make_cluster_certificates(cluster, set));
  auto files = [&](std::string_view who) { return certificate_files(set.dir, who); };
  // A node given another node's certificate does not start.
  auto wrong = start_status(cluster, dir / "wrong", 2, files("node3"));
  REQUIRE_FALSE(wrong.is_ok());
  CHECK(wrong.message().find("names node 3, not this node") != std::string::npos);
  testing::node_process one(dir / "node1", cluster, 1, over_tls(files("node1")));
  // At node 2's address, a process with node 3's certificate (a member's,
  // signed by the cluster's CA) that answers hello as a node would. Node 1
  // dials node 2 there: the certificate, not the address, says who it is.
  {
    caf::actor_system_config cfg;
    configure_system(cfg);
    REQUIRE(configure_tls(cfg, files("node3")).is_ok());
    caf::actor_system sys{cfg};
    auto dummy = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
    auto fake = sys.spawn([dummy]() -> node_actor::behavior_type {
      return {
          [dummy](hello_atom, std::uint32_t, const hash128&, std::uint32_t) { return std::vector<caf::actor>{dummy}; },
          [](offer_atom, std::uint32_t, const caf::actor&) { return true; }};
    });
    REQUIRE(caf::openssl::publish(fake, static_cast<std::uint16_t>(base + 1), "127.0.0.1", true));
    auto missing = one.n->connect_peers();
    CHECK(std::find(missing.begin(), missing.end(), 2u) != missing.end());
    CHECK(mentions(one.n->last_errors(), "its certificate names node 3, not node 2"));
    caf::anon_send_exit(fake, caf::exit_reason::kill);
    caf::anon_send_exit(dummy, caf::exit_reason::kill);
  }
  // The real node 3; a client's certificate may say hello as a client, but
  // not as a node, and may not offer itself as node 1.
  testing::node_process three(dir / "node3", cluster, 3, over_tls(files("node3")));
  caf::actor_system_config cfg;
  configure_system(cfg);
  REQUIRE(configure_tls(cfg, files("client-ops")).is_ok());
  caf::actor_system client_sys{cfg};
  auto node3 =
      must(connect_to(client_sys, "127.0.0.1", static_cast<std::uint16_t>(base + 2), true, std::chrono::seconds(5)));
  caf::scoped_actor client{client_sys};
  auto hello_as = [&](std::uint32_t id) {
    std::string out;
    client->request(node3, std::chrono::seconds(5), hello_atom::value, id, cluster.fingerprint(), protocol_version)
        .receive([&](const std::vector<caf::actor>&) { out = "taken"; },
                 [&](caf::error& e) { out = to_status(e).message(); });
    return out;
  };
  CHECK(hello_as(0) == "taken");
  CHECK(hello_as(2).find("a link whose certificate names client ops calls itself node 2") != std::string::npos);
  auto own = client_sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  bool taken = true;
  client->request(node3, std::chrono::seconds(5), offer_atom::value, std::uint32_t{1}, own)
      .receive([&](bool b) { taken = b; }, [&](caf::error&) {});
  CHECK_FALSE(taken);
  caf::anon_send_exit(own, caf::exit_reason::kill);
  // Node 1 links to node 3 (it dials, node 3 links back through its offer),
  // and they elect: the names hold for the nodes themselves.
  CHECK(testing::poll_until(
      [&] {
        one.n->connect_peers();
        three.n->connect_peers();
        auto m = three.n->connect_peers();
        return std::find(m.begin(), m.end(), 1u) == m.end();
      },
      std::chrono::seconds(10)));
  caf::scoped_actor member{*one.sys};
  bool owns = false;
  member->request(one.n->replica(0), std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  CHECK(owns);
  // A second process showing node 1's certificate while node 1 is linked
  // (a copied key) is closed at node 3's door: one node, one process.
  {
    caf::actor_system_config twin_cfg;
    configure_system(twin_cfg);
    REQUIRE(configure_tls(twin_cfg, files("node1")).is_ok());
    caf::actor_system twin{twin_cfg};
    // (Node 3 sends its own handshake as it accepts, so CAF on the twin's
    // side may hand out node 3's actor before the close arrives; nothing
    // sent through it is answered.)
    auto r = connect_to(twin, "127.0.0.1", static_cast<std::uint16_t>(base + 2), true, std::chrono::seconds(3));
    if (r) {
      caf::scoped_actor asker{twin};
      bool answered = false;
      asker
          ->request(*r, std::chrono::seconds(3), hello_atom::value, std::uint32_t{1}, cluster.fingerprint(),
                    protocol_version)
          .receive([&](const std::vector<caf::actor>&) { answered = true; }, [&](caf::error&) {});
      CHECK_FALSE(answered);
    }
    CHECK(three.n->network().last_refusal.find("node 1's certificate, from another process") != std::string::npos);
  }
}

TEST_CASE("tls: client lines limit each client to its prefixes; a refusal is permission_denied and writes nothing") {
  testing::temp_dir dir("tls-roles");
  auto base = static_cast<std::uint16_t>(base_port() + 7);
  std::string path = dir / "cluster";
  std::string text = fmt::format(
      "cluster roles\nshards 1\nnode 1 127.0.0.1 {}\n"
      "client reader read a/\nclient writer readwrite a/\nclient writer readwrite records inv\n",
      base);
  std::ofstream(path) << text;
  auto cluster = must(cluster_file::parse(text));
  // Grants need links that name their clients: certificates without names
  // (tests/data/tls) are refused at start, rather than run open.
  auto unnamed = start_status(cluster, dir / "unnamed", 1, node_files(1));
  REQUIRE_FALSE(unnamed.is_ok());
  CHECK(unnamed.message().find("grants clients by key prefix") != std::string::npos);
  // `magnetite cert` certifies the clients the file names, and `ops` besides.
  certificate_set set{dir / "certs", {"ops"}, 30};
  (void)must(make_cluster_certificates(cluster, set));
  auto files = [&](std::string_view who) { return certificate_files(set.dir, who); };
  testing::node_process one(dir / "node1", cluster, 1, over_tls(files("node1")));
  {
    caf::scoped_actor member{*one.sys};
    bool owns = false;
    member->request(one.n->replica(0), std::chrono::seconds(10), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(owns);
  }
  auto client = [&](std::string_view who) {
    cluster_client_options o;
    o.cluster_file = path;
    auto f = files(fmt::format("client-{}", who));
    o.tls_certificate = f.certificate;
    o.tls_key = f.key;
    o.tls_ca = f.ca;
    o.call_timeout = std::chrono::seconds(10);
    return must(cluster_client::connect(o));
  };
  auto denied = [](const status& s) {
    INFO(s.to_string());
    return s.code() == status_code::permission_denied && s.category() == status_category::permanent &&
           s.message().find("permission denied") != std::string::npos;
  };
  auto local = [&](const std::string& k) {
    return one.db->core().slot_of(0)->view.load()->get(k, system_now_ns()).value();
  };
  auto reader = client("reader"), writer = client("writer"), ops = client("ops");
  CHECK(writer->put("a/1", "v1").is_ok());
  CHECK(must(reader->get("a/1")) == std::optional<std::string>("v1"));
  CHECK(denied(reader->put("a/1", "mine")));
  CHECK(denied(reader->del("a/1")));
  CHECK(denied(reader->cas("a/1", std::string_view("v1"), std::string_view("mine")).error()));
  CHECK(denied(reader->get("b/1").error()));
  CHECK(denied(writer->put("b/1", "v")));
  CHECK(denied(writer->get("b/1").error()));
  CHECK(must(writer->cas("a/1", std::string_view("v1"), std::string_view("v2"))).swapped);
  // A certified client the file names in no line may do nothing.
  CHECK(denied(ops->get("a/1").error()));
  CHECK(denied(ops->put("a/2", "v")));
  CHECK(local("a/1") == std::optional<std::string>("v2"));
  CHECK_FALSE(local("b/1"));
  CHECK_FALSE(local("a/2"));
  // Records: the writer's namespace and no other; the reader none.
  state::records by_writer(*writer), by_reader(*reader);
  {
    auto t = by_writer.begin();
    REQUIRE(t.put("inv", "k1", nlohmann::json{{"n", 1}}).is_ok());
    CHECK(t.commit().is_ok());
  }
  {
    auto t = by_writer.begin();
    REQUIRE(t.put("other", "k1", nlohmann::json{{"n", 1}}).is_ok());
    auto c = t.commit();
    CHECK(denied(c.error()));
  }
  CHECK(must(by_writer.list("inv", "", std::nullopt, 10)).records.size() == 1);
  CHECK(denied(by_reader.load("inv", "k1").error()));
  CHECK(denied(by_reader.list("inv", "", std::nullopt, 10).error()));
  CHECK(denied(by_writer.list("other", "", std::nullopt, 10).error()));
  CHECK(denied(by_writer.load("other", "k1").error()));
  CHECK_FALSE(local(state::record_key("other", "k1")));
}
