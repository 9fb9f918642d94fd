// stranger_bench: what a few bytes from anyone who reaches its port do to a
// bare CAF 0.17 node (CAF's own middleman, none of our guard), each attack in
// a child process of its own: its peak RSS (from wait4) and how it ended.
// The figures docs/design/replication.md (7.1) and docs/fuzzing.md quote;
// tests/network_guard_test.cc sends the same bytes to a guarded node.
//
//   stranger_bench
//
// Each child publishes one actor on loopback, connects a raw socket to it,
// sends the attack, waits 3 s and, still alive, says whether the node kept
// the connection (exit 0) or closed it (exit 5). A connection kept after a
// handshake naming this very node, or no node, is one the node took as a
// route to that node (docs/design/replication.md, 7.2).
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "actors/caf_headers.h"  // before any other CAF header

namespace {

using bytes = std::vector<unsigned char>;

// A BASP header as CAF 0.17 writes it (replication/frame_guard.h).
bytes header(unsigned char op, std::uint32_t length, std::uint64_t dest = 0) {
  bytes h{op, 0, 0, 0};
  for (int i = 3; i >= 0; --i) h.push_back(static_cast<unsigned char>(length >> (8 * i)));
  h.insert(h.end(), 16, 0);  // operation data, source actor
  for (int i = 7; i >= 0; --i) h.push_back(static_cast<unsigned char>(dest >> (8 * i)));
  return h;
}

bytes operator+(bytes a, const bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A direct message's payload: no stages, a message of `type`, its bytes.
bytes message(std::string_view type, const bytes& body) {
  std::string names = fmt::format("@<>+{}", type);
  bytes b{0, 0, 0, static_cast<unsigned char>(names.size())};
  b.insert(b.end(), names.begin(), names.end());
  return b + body;
}

// What an attack is made from: the published actor's id, a handshake of
// another node to send first, and handshakes naming the node itself and
// naming no node.
struct material {
  std::uint64_t target;
  bytes handshake, naming_victim, naming_none;
};

struct attack {
  const char* what;
  std::function<bytes(const material&)> make;
};

bytes client_handshake(caf::actor_system& sys, const caf::node_id& who) {
  std::vector<char> node;
  caf::binary_serializer sink{sys, node};
  if (sink(who)) std::_Exit(3);
  return header(1, static_cast<std::uint32_t>(node.size())) + bytes(node.begin(), node.end());
}

// Whether the peer closed fd (what it sent is read and dropped).
bool closed(int fd) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

void run_child(const attack& a) {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto target = sys.spawn([] { return caf::behavior{[](int x) { return x; }}; });
  auto port = sys.middleman().publish(target, 0, "127.0.0.1", true);
  if (!port) std::_Exit(3);
  caf::actor_system_config other_cfg;
  caf::actor_system other{other_cfg};
  material m{target.id(), client_handshake(other, other.node()), client_handshake(other, sys.node()),
             client_handshake(other, caf::node_id{})};
  bytes sent = a.make(m);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(*port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) std::_Exit(3);
  (void)::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::_Exit(closed(fd) ? 5 : 0);  // alive; CAF's own shutdown is not what is measured
}

}  // namespace

int main() {
  const std::uint32_t four_gib = 0xfffffff0u;
  std::vector<attack> attacks = {
      {"nothing (baseline)", [](const material&) { return bytes{}; }},
      {"a header claiming 4 GiB", [&](const material&) { return header(1, four_gib); }},
      {"an empty client handshake", [](const material&) { return header(1, 0); }},
      {"a byte vector claiming 4 GiB, after a handshake",
       [](const material& m) {
         bytes body = message("@charbuf", bytes{0xf0, 0xff, 0xff, 0xff, 0x0f}) + bytes(16, 'c');
         return m.handshake + header(2, static_cast<std::uint32_t>(body.size()), m.target) + body;
       }},
      {"a config value of an unknown kind, after a handshake",
       [](const material& m) {
         bytes body = message("@config_value", bytes(8, 0xff));
         return m.handshake + header(2, static_cast<std::uint32_t>(body.size()), m.target) + body;
       }},
      {"a client handshake naming the node itself", [](const material& m) { return m.naming_victim; }},
      {"a client handshake naming no node", [](const material& m) { return m.naming_none; }},
  };
  fmt::print("stranger_bench: a bare CAF {}.{}.{} node, one child process an attack\n", CAF_MAJOR_VERSION,
             CAF_MINOR_VERSION, CAF_PATCH_VERSION);
  for (const auto& a : attacks) {
    pid_t pid = ::fork();
    if (pid == 0) run_child(a);
    int status = 0;
    rusage use{};
    ::wait4(pid, &status, 0, &use);
    std::string ended = WIFEXITED(status)
                            ? (WEXITSTATUS(status) == 0   ? "alive, connection kept"
                               : WEXITSTATUS(status) == 5 ? "alive, connection closed"
                                                          : fmt::format("exit {}", WEXITSTATUS(status)))
                            : fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    fmt::print("{:<55} {:>10.1f} MiB peak RSS  {}\n", a.what, static_cast<double>(use.ru_maxrss) / 1024, ended);
  }
  return 0;
}
