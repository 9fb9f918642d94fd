// raw_socket: a plain TCP client on loopback for tests that speak to a
// node's port without CAF (what a stranger does): connect, send, and wait
// for the node to close the connection.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

namespace magnetite::testing {

// A connected socket to 127.0.0.1:port, from `source` (a loopback address,
// host order; any 127.x.y.z is this machine's) when not 0.
inline int dial(std::uint16_t port, std::uint32_t source = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  if (source != 0) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(source);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Sends what it can: the node may cut us while we send, which the caller
// then checks with closed_within.
inline void send_all(int fd, const std::vector<std::uint8_t>& b) {
  std::size_t at = 0;
  while (at < b.size()) {
    auto n = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return;
    at += static_cast<std::size_t>(n);
  }
}

// Whether the peer closed the connection within `limit` (what it sent
// before, a handshake and heartbeats, is read and dropped). Looks at least
// once, also with no time left: what already came counts.
inline bool closed_within(int fd, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count()))) > 0) {
      auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
      if (n > 0) continue;
    }
    if (left.count() <= 0) return false;
  }
}

}  // namespace magnetite::testing
