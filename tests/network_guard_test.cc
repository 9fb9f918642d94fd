// What a stranger can do to a node's port (replication/frame_guard.h,
// replication/guarded_network.h): the guard's judgement of a byte stream,
// pinned to the installed CAF's BASP header; then raw TCP sockets on
// loopback against a real node, which sends garbage, huge lengths, empty
// handshakes, nothing at all, or too many connections at once, while the
// test checks that each connection is cut, that the node's memory did not
// grow with what the stranger claimed, and that the node still serves.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "actors/caf_headers.h"  // before any other CAF header

#include <caf/io/basp/header.hpp>

#include "replication/frame_guard.h"
#include "replication/node.h"
#include "replication/payload_reader.h"
#include "tests/support/node_process.h"
#include "tests/support/poll.h"
#include "tests/support/raw_socket.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::closed_within;
using magnetite::testing::dial;
using magnetite::testing::must;
using magnetite::testing::send_all;

namespace {

using bytes = std::vector<std::uint8_t>;

// A BASP header as CAF 0.17 writes it (frame_guard.h); the first case checks
// this against CAF's own serializer.
bytes basp_header(std::uint8_t op, std::uint32_t length, std::uint64_t op_data = 0, std::uint64_t source = 0,
                  std::uint64_t dest = 0, std::uint8_t flags = 0) {
  bytes out{op, 0, 0, flags};
  auto put = [&out](std::uint64_t x, int n) {
    for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
  };
  put(length, 4);
  put(op_data, 8);
  put(source, 8);
  put(dest, 8);
  return out;
}

bytes operator+(bytes a, const bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr std::uint8_t direct = 2, routed_op = 3, heartbeat = 6;

frame_guard accepted_guard(std::uint32_t before = 1024, std::uint32_t after = 1 << 20) {
  return frame_guard(frame_guard::side::accepted, before, after);
}

}  // namespace

TEST_CASE("frame_guard: the header layout is the installed CAF's") {
  caf::io::basp::header h{caf::io::basp::message_type::direct_message, 0x02, 0x01020304, 0x1122334455667788, 7, 9};
  std::vector<char> written;
  caf::binary_serializer sink{nullptr, written};
  REQUIRE(!sink(h));
  REQUIRE(written.size() == frame_guard::header_bytes);
  REQUIRE(written.size() == caf::io::basp::header_size);
  auto ours = basp_header(direct, 0x01020304, 0x1122334455667788, 7, 9, 0x02);
  CHECK(bytes(written.begin(), written.end()) == ours);
  // And the guard reads the length where CAF put it: a limit one below it refuses.
  auto hs = basp_header(frame_guard::client_handshake, 16) + bytes(16, 0);
  auto g = frame_guard(frame_guard::side::accepted, 64, 0x01020303);
  REQUIRE(g.take(hs));
  CHECK_FALSE(g.take(ours));
  CHECK(g.refusal().find("16909060 bytes") != std::string::npos);  // 0x01020304
}

TEST_CASE("frame_guard: nothing but the peer's handshake first, and it must carry a payload") {
  SUBCASE("a direct message before the handshake") {
    auto g = accepted_guard();
    CHECK_FALSE(g.take(basp_header(direct, 8, 0, 0, 1)));
    CHECK(g.refusal() == "a direct message before its client handshake");
  }
  SUBCASE("a heartbeat before the handshake") {
    auto g = accepted_guard();
    CHECK_FALSE(g.take(basp_header(heartbeat, 0)));
  }
  SUBCASE("the wrong handshake for our side") {
    auto accepted = accepted_guard();
    CHECK_FALSE(accepted.take(basp_header(frame_guard::server_handshake, 8, 1)));
    frame_guard connected(frame_guard::side::connected, 1024, 1 << 20);
    CHECK_FALSE(connected.take(basp_header(frame_guard::client_handshake, 8)));
    frame_guard connected2(frame_guard::side::connected, 1024, 1 << 20);
    CHECK(connected2.take(basp_header(frame_guard::server_handshake, 8, 1) + bytes(8, 0)));
    CHECK(connected2.shook());
  }
  SUBCASE("an empty handshake") {
    auto g = accepted_guard();
    CHECK_FALSE(g.take(basp_header(frame_guard::client_handshake, 0)));
    CHECK(g.refusal().find("without a payload") != std::string::npos);
  }
  SUBCASE("an operation BASP does not have") {
    auto g = accepted_guard();
    CHECK_FALSE(g.take(basp_header(7, 0)));
    auto h = accepted_guard();
    CHECK_FALSE(h.take(basp_header(0xff, 0)));
    CHECK(h.refusal() == "a frame of unknown operation 0xff");
  }
}

TEST_CASE("frame_guard: the limits before and after the handshake, at the byte") {
  auto g = accepted_guard(100, 1000);
  CHECK_FALSE(accepted_guard(100, 1000).take(basp_header(frame_guard::client_handshake, 101)));
  REQUIRE(g.take(basp_header(frame_guard::client_handshake, 100)));
  CHECK_FALSE(g.shook());  // its payload has not come yet
  REQUIRE(g.take(bytes(99, 0)));
  CHECK_FALSE(g.shook());
  REQUIRE(g.take(bytes(1, 0)));
  CHECK(g.shook());
  // After it: up to 1000, heartbeats, a second handshake (CAF repeats it).
  CHECK(g.take(basp_header(direct, 1000, 0, 0, 1) + bytes(1000, 0x5a)));
  CHECK(g.take(basp_header(heartbeat, 0)));
  CHECK(g.take(basp_header(frame_guard::client_handshake, 20, 0, 0, 0, 0x02) + bytes(20, 0)));
  CHECK(g.frames() == 4);
  {
    auto h = accepted_guard(100, 1000);
    REQUIRE(h.take(basp_header(frame_guard::client_handshake, 10) + bytes(10, 0)));
    CHECK_FALSE(h.take(basp_header(frame_guard::server_handshake, 0)));  // empty, after the handshake too
  }
  CHECK_FALSE(g.take(basp_header(direct, 1001, 0, 0, 1)));
  CHECK(g.refusal().find("over the 1000 allowed after the handshake") != std::string::npos);
  // Refused is final, whatever comes next.
  CHECK_FALSE(g.take(basp_header(heartbeat, 0)));
  CHECK(g.frames() == 4);
}

TEST_CASE("frame_guard: a claim takes from the shared budget until its payload is whole, or the guard is gone") {
  std::int64_t left = 1000;
  std::vector<std::int64_t> calls;
  auto budget = [&](std::int64_t delta) {
    calls.push_back(delta);
    if (delta > left) return false;
    left -= delta;
    return true;
  };
  {
    frame_guard a(frame_guard::side::accepted, 1000, 1000, {}, budget);
    REQUIRE(a.take(basp_header(frame_guard::client_handshake, 600) + bytes(599, 0)));
    CHECK(left == 400);
    frame_guard b(frame_guard::side::accepted, 1000, 1000, {}, budget);
    CHECK_FALSE(b.take(basp_header(frame_guard::client_handshake, 401)));
    CHECK(b.refusal().find("budget all connections share") != std::string::npos);
    CHECK(left == 400);  // a refusal takes nothing
    REQUIRE(a.take(bytes(1, 0)));
    CHECK(left == 1000);  // whole: given back
    REQUIRE(a.take(basp_header(direct, 700, 0, 0, 1) + bytes(10, 0)));
    CHECK(left == 300);
  }  // a went away in the middle of its frame
  CHECK(left == 1000);
  CHECK(calls == std::vector<std::int64_t>{600, 401, -600, 700, -700});
}

TEST_CASE("frame_guard: pieces of any size are judged as the whole") {
  // A valid stream, then a header the guard must refuse at its last byte.
  auto stream = basp_header(frame_guard::client_handshake, 40) + bytes(40, 1) + basp_header(direct, 500, 0, 0, 3) +
                bytes(500, 2) + basp_header(heartbeat, 0);
  auto bad = basp_header(direct, 5000, 0, 0, 3);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    auto g = accepted_guard(64, 4096);
    std::size_t at = 0;
    while (at < stream.size()) {
      std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + rng() % 70);
      REQUIRE(g.take({stream.data() + at, n}));
      at += n;
    }
    CHECK(g.frames() == 3);
    // The refusal comes with the piece that completes the bad header, not before.
    std::size_t split = rng() % frame_guard::header_bytes;
    CHECK(g.take({bad.data(), split}));
    CHECK_FALSE(g.take({bad.data() + split, bad.size() - split}));
  }
}

TEST_CASE("payload_reader: every type a node registers passes on its header, but those with a byte vector") {
  caf::actor_system_config plain, cfg;
  add_message_types(cfg);
  std::size_t ours = 0;
  for (const auto& [name, factory] : cfg.value_factories_by_name) {
    // CAF's own, and the stream<T> handles it adds for each type (never sent).
    if (plain.value_factories_by_name.count(name) || name.rfind("stream<", 0) == 0) continue;
    CAPTURE(name);
    bool byte_vector_inside = name.find("std::vector<bool>") != std::string::npos;
    bool message_inside = name.find("@message") != std::string::npos || name.find("@config_value") != std::string::npos;
    CHECK(payload_reader::flat_type(name) == !(byte_vector_inside || message_inside));
    ++ours;
  }
  CHECK(ours >= 16);
  CHECK(payload_reader::flat_type("bool"));
  CHECK(payload_reader::flat_type("std::vector<std::vector<magnetite::stamped_op>>"));
  for (const char* not_flat : {"@charbuf", "@error", "@message", "std::vector<bool>", "std::vector<@charbuf>",
                               "std::vector<>", "@down", "@exit"})
    CHECK_FALSE(payload_reader::flat_type(not_flat));
}

// ---------------------------------------------------------------------------
// Raw sockets against a node.

namespace {

std::uint16_t guard_base_port() { return static_cast<std::uint16_t>(24000 + (::getpid() % 400) * 10); }

struct rss {
  // Resets the peak (VmHWM) to what is resident now.
  static void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }
  static std::uint64_t kib(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field)));
    return 0;
  }
};

// xs as CAF serializes them (a frame's payload).
template <class... Ts>
bytes serialized(caf::actor_system& sys, Ts... xs) {
  std::vector<char> out;
  caf::binary_serializer sink{sys, out};
  REQUIRE(!sink(xs...));
  return bytes(out.begin(), out.end());
}

// A whole frame: the header of operation `op` between those actors, then xs.
template <class... Ts>
bytes frame(caf::actor_system& sys, std::uint8_t op, std::uint64_t source, std::uint64_t dest, Ts... xs) {
  bytes payload = serialized(sys, xs...);
  return basp_header(op, static_cast<std::uint32_t>(payload.size()), 0, source, dest) + payload;
}

// A client handshake's payload: the node id of another actor system, as
// CAF serializes it.
bytes client_handshake_payload(caf::actor_system& other) { return serialized(other, other.node()); }

// A whole client handshake naming `who`, made up (no process has it) or real.
bytes client_handshake_naming(caf::actor_system& sys, const caf::node_id& who) {
  return frame(sys, frame_guard::client_handshake, 0, 0, who);
}
caf::node_id made_up_node(std::uint32_t n) {
  caf::node_id::default_data::host_id_type host{};
  host[0] = 0x5a;
  host[1] = static_cast<std::uint8_t>(n);
  return caf::make_node_id(4'000'000 + n, host);
}

struct guarded_node {
  testing::temp_dir dir{"guard"};
  std::uint16_t port;
  cluster_file cluster;
  std::unique_ptr<testing::node_process> p;
  guarded_node(std::uint16_t port_, const connection_limits& limits)
      : port(port_),
        cluster(
            must(cluster_file::parse(fmt::format("cluster guard\nshards 1\ntls off\nnode 1 127.0.0.1 {}\n", port_)))) {
    testing::node_process_options o;
    o.network = limits;
    p = std::make_unique<testing::node_process>(dir / "node1", cluster, 1, o);
  }
  // A real client gets the node's replicas; its write of `value_bytes` lands.
  status put_as_client(std::size_t value_bytes, std::chrono::seconds timeout = std::chrono::seconds(10)) {
    caf::actor_system_config cfg;
    configure_system(cfg);
    caf::actor_system sys{cfg};
    auto remote = connect_to(sys, "127.0.0.1", port, false, std::chrono::seconds(10));
    REQUIRE_MESSAGE(remote.is_ok(), remote.error().message());
    caf::scoped_actor asker{sys};
    std::vector<caf::actor> replicas;
    asker
        ->request(*remote, std::chrono::seconds(10), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { replicas = r; },
                 [&](caf::error& e) { FAIL(to_status(e).message()); });
    REQUIRE(replicas.size() == 1);
    // `elect` is a member's: asked in the node's own process.
    bool owns = false;
    caf::scoped_actor member{*p->sys};
    member->request(p->n->replica(0), std::chrono::seconds(10), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(to_status(e).message()); });
    REQUIRE(owns);
    status out = status::failed("no answer");
    asker
        ->request(caf::actor_cast<replica_actor>(replicas[0]), timeout, put_atom::value, std::string("after"),
                  std::string(value_bytes, 'v'), std::int64_t{0})
        .receive([&](ok_atom) { out = status::ok(); }, [&](caf::error& e) { out = to_status(e); });
    return out;
  }
  void still_serves() { CHECK(put_as_client(16).is_ok()); }
};

}  // namespace

TEST_CASE("network guard: garbage, huge lengths and empty handshakes are cut; memory stays flat") {
  connection_limits limits;  // the defaults
  guarded_node node(guard_base_port(), limits);
  caf::actor_system_config other_cfg;
  configure_system(other_cfg);
  caf::actor_system other{other_cfg};
  auto handshake = frame(other, frame_guard::client_handshake, 0, 0, other.node());

  // A direct message as BASP carries it, (stages, message), whose last
  // element is a 16-byte std::vector<char> that then claims 4 GiB: CAF sizes
  // such a vector to its claim before reading it.
  auto claiming = [&](const caf::message& m) {
    std::vector<char> out;
    caf::binary_serializer sink{other, out};
    REQUIRE(!sink(std::vector<caf::strong_actor_ptr>{}, m));
    bytes b(out.begin(), out.end());
    REQUIRE(b[b.size() - 17] == 16);
    b.resize(b.size() - 17);
    for (std::uint8_t x : {0xf0, 0xff, 0xff, 0xff, 0x0f}) b.push_back(x);  // varbyte 0xfffffff0
    b.resize(b.size() + 16, 0);
    return basp_header(direct, static_cast<std::uint32_t>(b.size()), 0, 0, 1) + b;
  };
  auto byte_vector = claiming(caf::make_message(std::string("x"), std::vector<char>(16, 'c')));
  auto in_an_error = claiming(caf::make_message(caf::make_error(caf::sec::runtime_error, std::vector<char>(16, 'c'))));

  // A config value of a kind CAF does not know: its decoder throws, and a
  // CAF 0.17 process without the guard aborts (std::terminate).
  bytes unknown_kind{0, 0, 0, 17};
  for (char ch : std::string_view("@<>+@config_value")) unknown_kind.push_back(static_cast<std::uint8_t>(ch));
  unknown_kind.insert(unknown_kind.end(), 8, 0xff);
  auto config_value = basp_header(direct, static_cast<std::uint32_t>(unknown_kind.size()), 0, 0, 1) + unknown_kind;

  // A routed message names its source node in its payload, and BASP takes
  // the name: one naming the node itself is delivered as if a local actor
  // sent it, here a `peers` that would re-point the node's replicas; one
  // naming another node speaks for that node's actors.
  auto routed = [&](const caf::node_id& from, const caf::node_id& to) {
    return frame(other, routed_op, 1, 1, from, to, std::vector<caf::strong_actor_ptr>{},
                 caf::make_message(peers_atom::value, std::vector<std::uint32_t>{1}, std::vector<caf::actor>{}));
  };
  caf::node_id victim = node.p->sys->node();
  // Monitor and down frames name nodes too: a down naming a node it did not
  // come from would have BASP kill our proxy of that node's actor.
  // As CAF checks a header: a down names the actor gone (source), a
  // monitor the actor watched (destination).
  auto down = [&](const caf::node_id& from, const caf::node_id& to) {
    return frame(other, 5, 1, 0, from, to, caf::error{});
  };
  auto monitor = [&](const caf::node_id& from, const caf::node_id& to) { return frame(other, 4, 0, 1, from, to); };
  caf::actor_system_config third_cfg;
  configure_system(third_cfg);
  caf::actor_system third{third_cfg};  // a node that is not on this connection

  std::mt19937 rng(11);
  bytes garbage(4096);
  for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
  garbage[0] = 0x99;  // not an operation: the first header is refused whatever the rest
  struct attack {
    const char* what;
    bytes sent;
    const char* reason;  // in last_refusal
  };
  const std::uint32_t huge = 0xfffffff0;
  // Frames that arrive together are read ahead in one recv (plain TCP,
  // guarded_network.cc): past CAF's 50 reads an event the kept ones must
  // still be handed on, or the bad frame at the end would sit unread.
  bytes heartbeats;
  for (int i = 0; i < 200; ++i) heartbeats = heartbeats + basp_header(heartbeat, 0);
  std::vector<attack> attacks = {
      {"garbage after 200 heartbeats that arrived with it", handshake + heartbeats + basp_header(0x99, 0),
       "unknown operation"},
      {"garbage", garbage, "unknown operation"},
      {"a 4 GiB handshake", basp_header(frame_guard::client_handshake, huge), "before the handshake"},
      {"an empty handshake", basp_header(frame_guard::client_handshake, 0), "without a payload"},
      {"an empty handshake after a real one", handshake + basp_header(frame_guard::client_handshake, 0),
       "without a payload"},
      {"a message to actor 1 without a handshake", basp_header(direct, 64, 0, 0, 1) + bytes(64, 0),
       "before its client handshake"},
      {"a 4 GiB message after a handshake", handshake + basp_header(direct, huge, 0, 0, 1), "after the handshake"},
      {"a byte vector claiming 4 GiB in a message", handshake + byte_vector, "does not decode within its bytes"},
      {"a byte vector claiming 4 GiB in an error's context", handshake + in_an_error,
       "does not decode within its bytes"},
      {"a config value CAF throws on", handshake + config_value, "whose decoding threw"},
      {"a routed message claiming to come from the node itself", handshake + routed(victim, victim),
       "claims to come from this node"},
      {"a routed message from the stranger's own node", handshake + routed(other.node(), victim),
       "a routed message (a node relays nothing"},
      {"a routed message for another node", handshake + routed(other.node(), other.node()),
       "a routed message (a node relays nothing"},
      {"a down message naming a node it did not come from", handshake + down(third.node(), victim),
       "down message naming other nodes"},
      {"a down message for another node", handshake + down(other.node(), third.node()),
       "down message naming other nodes"},
      {"a monitor message naming a node it did not come from", handshake + monitor(third.node(), victim),
       "monitor message naming other nodes"},
      {"a message over the limit after a handshake",
       handshake + basp_header(direct, limits.max_message_bytes + 1, 0, 0, 1), "after the handshake"},
  };
  rss::reset_peak();
  auto before = rss::kib("VmRSS:");
  std::uint64_t refused = 0;
  for (const auto& a : attacks) {
    CAPTURE(std::string(a.what));
    CAPTURE(node.p->n->network().last_refusal);
    int fd = dial(node.port);
    send_all(fd, a.sent);
    CHECK(closed_within(fd, std::chrono::seconds(10)));
    ::close(fd);
    auto s = node.p->n->network();
    CHECK(s.refused_frames == ++refused);
    CHECK(s.last_refusal.find(a.reason) != std::string::npos);
  }
  // Each claim of 4 GiB cost nothing: CAF never read those headers.
  auto peak = rss::kib("VmHWM:");
  CHECK(peak < before + 64 * 1024);
  node.still_serves();
}

TEST_CASE("network guard: silent connections are cut; past the pending limit a new one is closed at once") {
  connection_limits limits;
  // Idle longer than the handshake's limit: a silent stranger is cut as one
  // that never shook hands, the quiet peer below as idle.
  limits.handshake_timeout = std::chrono::seconds(3);
  limits.idle_timeout = std::chrono::seconds(4);
  limits.max_pending_connections = 3;
  guarded_node node(guard_base_port() + 1, limits);
  auto wait_for = [&](auto pred) {
    return testing::poll_until([&] { return pred(node.p->n->network()); }, std::chrono::seconds(10));
  };
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(dial(node.port));
  REQUIRE(wait_for([](const network_stats& s) { return s.pending == 3; }));
  auto opened = std::chrono::steady_clock::now();
  int fourth = dial(node.port);
  CHECK(closed_within(fourth, std::chrono::seconds(10)));
  ::close(fourth);
  auto s = node.p->n->network();
  CHECK(s.refused_pending == 1);
  CHECK(s.accepted == 4);
  // Closed at accept, not at the timeout: the three are still open.
  if (std::chrono::steady_clock::now() - opened < limits.handshake_timeout) {
    for (int fd : silent) CHECK_FALSE(closed_within(fd, std::chrono::milliseconds(0)));
  }
  // Then no handshake in time cuts each, and the node serves on.
  for (int fd : silent) {
    CHECK(closed_within(fd, std::chrono::seconds(10)));
    ::close(fd);
  }
  CHECK(wait_for([](const network_stats& s) { return s.timed_out == 3 && s.pending == 0; }));
  node.still_serves();

  // A peer that shook hands and then sends nothing is cut at the idle timeout.
  caf::actor_system_config other_cfg;
  configure_system(other_cfg);
  caf::actor_system other{other_cfg};
  auto payload = client_handshake_payload(other);
  int quiet = dial(node.port);
  send_all(quiet, basp_header(frame_guard::client_handshake, static_cast<std::uint32_t>(payload.size())) + payload);
  CHECK(closed_within(quiet, std::chrono::seconds(10)));
  ::close(quiet);
  CHECK(wait_for([](const network_stats& s) { return s.idle >= 1; }));
  CHECK(node.p->n->network().refused_frames == 0);
}

TEST_CASE("network guard: claims of many connections together stop at max_inflight_bytes") {
  connection_limits limits;
  limits.max_message_bytes = 1 << 20;
  limits.max_inflight_bytes = 3 << 20;
  guarded_node node(guard_base_port() + 4, limits);
  caf::actor_system_config other_cfg;
  configure_system(other_cfg);
  caf::actor_system other{other_cfg};
  // Each shakes hands (as a node of its own: one node is linked once), then
  // claims the largest message and sends none of it; one after another,
  // each judged before the next comes.
  std::vector<int> held;
  for (int i = 0; i < 5; ++i) {
    int fd = dial(node.port);
    auto handshake = client_handshake_naming(other, made_up_node(static_cast<std::uint32_t>(i)));
    send_all(fd, handshake + basp_header(direct, 1 << 20, 0, 0, 1));
    held.push_back(fd);
    CHECK(testing::poll_until(
        [&] {
          auto s = node.p->n->network();
          return s.inflight_bytes + s.refused_frames * (1 << 20) == static_cast<std::uint64_t>(i + 1) << 20;
        },
        std::chrono::seconds(10)));
  }
  // The first three fit the budget and stay; the last two are cut.
  CHECK(closed_within(held[3], std::chrono::seconds(10)));
  CHECK(closed_within(held[4], std::chrono::seconds(10)));
  for (int i = 0; i < 3; ++i) CHECK_FALSE(closed_within(held[i], std::chrono::milliseconds(0)));
  auto s = node.p->n->network();
  CHECK(s.refused_frames == 2);
  CHECK(s.inflight_bytes == (3u << 20));
  CHECK(s.last_refusal.find("budget all connections share") != std::string::npos);
  for (int fd : held) ::close(fd);
  CHECK(testing::poll_until([&] { return node.p->n->network().inflight_bytes == 0; }, std::chrono::seconds(10)));
  node.still_serves();
}

TEST_CASE("network guard: a real client's message over max_message_bytes is cut, and the node serves on") {
  connection_limits limits;
  limits.max_message_bytes = 64 << 10;
  guarded_node node(guard_base_port() + 2, limits);
  CHECK(node.put_as_client(60 << 10).is_ok());
  CHECK_FALSE(node.put_as_client(100 << 10, std::chrono::seconds(2)).is_ok());  // no answer: the link was cut
  auto s = node.p->n->network();
  CHECK(s.refused_frames == 1);
  CHECK(s.last_refusal.find("over the 65536 allowed after the handshake") != std::string::npos);
  node.still_serves();
}

TEST_CASE("network guard: a handshake naming this node, no node, or a node linked elsewhere is closed before CAF") {
  guarded_node node(guard_base_port() + 5, connection_limits{});
  caf::actor_system_config other_cfg;
  configure_system(other_cfg);
  caf::actor_system other{other_cfg};
  caf::node_id victim = node.p->sys->node();
  auto refused_names = [&] { return node.p->n->network().refused_names; };
  auto cut_naming = [&](const bytes& sent, const char* reason, std::uint64_t count) {
    CAPTURE(node.p->n->network().last_refusal);
    int fd = dial(node.port);
    send_all(fd, sent);
    CHECK(closed_within(fd, std::chrono::seconds(10)));
    ::close(fd);
    CHECK(refused_names() == count);
    CHECK(node.p->n->network().last_refusal.find(reason) != std::string::npos);
  };
  // Naming the node itself: CAF would deliver its messages as our own
  // process's (a replica takes `peers` from those).
  cut_naming(client_handshake_naming(other, victim), "naming this node", 1);
  cut_naming(client_handshake_naming(other, caf::node_id{}), "naming no node", 2);

  // A made-up node is taken once; a second connection naming it while the
  // first is open is not; once the first is closed, the name is free again.
  int first = dial(node.port);
  send_all(first, client_handshake_naming(other, made_up_node(1)));
  REQUIRE(testing::poll_until([&] { return node.p->n->network().pending == 0 && node.p->n->network().open >= 1; },
                              std::chrono::seconds(10)));
  cut_naming(client_handshake_naming(other, made_up_node(1)), "linked on another connection", 3);
  CHECK_FALSE(closed_within(first, std::chrono::milliseconds(0)));
  ::close(first);
  REQUIRE(testing::poll_until([&] { return node.p->n->network().open == 0; }, std::chrono::seconds(10)));
  int again = dial(node.port);
  send_all(again, client_handshake_naming(other, made_up_node(1)));
  CHECK_FALSE(closed_within(again, std::chrono::milliseconds(500)));
  CHECK(refused_names() == 3);
  ::close(again);

  // Route takeover: a real client is linked; a stranger names the client's
  // node, with BASP's select-connection flag, which would move every
  // message for the client onto the stranger's connection. Refused, and
  // the client's next request is answered on its own link.
  auto remote = connect_to(other, "127.0.0.1", node.port, false, std::chrono::seconds(10));
  REQUIRE_MESSAGE(remote.is_ok(), remote.error().message());
  caf::scoped_actor asker{other};
  auto hello = [&] {
    bool answered = false;
    asker
        ->request(*remote, std::chrono::seconds(5), hello_atom::value, std::uint32_t{0}, node.cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>&) { answered = true; }, [&](caf::error&) {});
    return answered;
  };
  REQUIRE(hello());
  auto payload = serialized(other, other.node());
  auto takeover = basp_header(frame_guard::client_handshake, static_cast<std::uint32_t>(payload.size()), 0, 0, 0,
                              caf::io::basp::header::select_connection_flag) +
                  payload;
  cut_naming(takeover, "linked on another connection", 4);
  CHECK(hello());
  CHECK(node.p->n->network().refused_frames == 0);  // names are counted apart
  node.still_serves();
}

TEST_CASE("network guard: pending handshakes are bounded per source address as well as in total") {
  connection_limits limits;
  limits.max_pending_connections = 6;
  limits.max_pending_per_source = 2;
  limits.handshake_timeout = std::chrono::seconds(30);  // none is cut for silence while the test runs
  guarded_node node(guard_base_port() + 6, limits);
  auto pending = [&] { return node.p->n->network().pending; };
  constexpr std::uint32_t one = 0x7f000001, two = 0x7f000002;  // 127.0.0.1, 127.0.0.2
  std::vector<int> held{dial(node.port, one), dial(node.port, one)};
  REQUIRE(testing::poll_until([&] { return pending() == 2; }, std::chrono::seconds(10)));
  // A third from the same address is closed as it is accepted...
  int third = dial(node.port, one);
  CHECK(closed_within(third, std::chrono::seconds(10)));
  ::close(third);
  CHECK(node.p->n->network().refused_source == 1);
  // ...while another address still gets its slots.
  held.push_back(dial(node.port, two));
  held.push_back(dial(node.port, two));
  CHECK(testing::poll_until([&] { return pending() == 4; }, std::chrono::seconds(10)));
  for (int fd : held) CHECK_FALSE(closed_within(fd, std::chrono::milliseconds(0)));
  auto s = node.p->n->network();
  CHECK(s.refused_source == 1);
  CHECK(s.refused_pending == 0);
  // A slot freed is a slot again.
  ::close(held[0]);
  held.erase(held.begin());
  REQUIRE(testing::poll_until([&] { return pending() == 3; }, std::chrono::seconds(10)));
  held.push_back(dial(node.port, one));
  CHECK(testing::poll_until([&] { return pending() == 4; }, std::chrono::seconds(10)));
  CHECK(node.p->n->network().refused_source == 1);
  for (int fd : held) ::close(fd);
  node.still_serves();
}

TEST_CASE("network guard: limits a node cannot run with are refused at start") {
  testing::temp_dir dir("guard-limits");
  auto cluster = must(cluster_file::parse(
      fmt::format("cluster guard\nshards 1\ntls off\nnode 1 127.0.0.1 {}\n", guard_base_port() + 3)));
  caf::actor_system_config cfg;
  configure_system(cfg);
  caf::actor_system sys{cfg};
  auto db = must(open_database(core_options_for(cluster, dir / "n", sys)));
  auto with = [&](auto change) {
    node_options o;
    o.id = 1;
    o.cluster = cluster;
    o.db = db.get();
    o.insecure = true;  // the cluster is plaintext on loopback, on purpose
    change(o.network);
    return node::start(o);
  };
  auto small = with([](connection_limits& l) { l.max_handshake_bytes = 100; });
  REQUIRE_FALSE(small.is_ok());
  CHECK(small.error().message().find("max_handshake_bytes 100") != std::string::npos);
  CHECK_FALSE(with([](connection_limits& l) { l.max_message_bytes = 2000; }).is_ok());
  CHECK_FALSE(with([](connection_limits& l) { l.idle_timeout = std::chrono::milliseconds(0); }).is_ok());
  CHECK_FALSE(with([](connection_limits& l) { l.max_pending_connections = 0; }).is_ok());
  CHECK_FALSE(with([](connection_limits& l) { l.max_pending_per_source = 0; }).is_ok());
  CHECK_FALSE(with([](connection_limits& l) { l.max_inflight_bytes = l.max_message_bytes - 1; }).is_ok());
  CHECK(with([](connection_limits&) {}).is_ok());
}
