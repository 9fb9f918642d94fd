// etcd_peer: etcd, the peer that replication_bench measures the replicated
// nodes against: a three-member etcd cluster (Debian's etcd-server, `etcd`
// 3.4) in child processes of the bench on 127.0.0.1, and the client that
// writes to it through etcd's HTTP/JSON gateway (POST /v3/kv/put) over
// keep-alive HTTP/1.1 connections, one connection per client thread.
//
// Limits: plain HTTP on loopback (no TLS, no authentication); the client
// speaks only as much HTTP/1.1 as etcd's answers need (a body by
// Content-Length or chunked, one request in flight per connection, no
// redirects, no Expect: 100-continue). The members run with etcd's defaults
// (the WAL fdatasync'd before a write is acknowledged, snapshot count and
// quota as shipped) and log errors only, each into a file beside its data.
// They are started from the main thread: PR_SET_PDEATHSIG, which kills them
// with the bench, follows the thread that forked. The cluster's destructor
// stops and reaps them, and so does an exit handler when the run ends early
// by fail() (std::exit runs no destructor of a local).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench/bench_support.h"

namespace magnetite::bench::etcd {

inline bool executable(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// The etcd binary: the first `etcd` on PATH, else Debian's /usr/bin/etcd;
// none when neither is an executable file.
inline std::optional<std::string> find_binary() {
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (true) {
      auto colon = rest.find(':');
      std::string dir(rest.substr(0, colon));
      std::string candidate = (dir.empty() ? std::string(".") : dir) + "/etcd";
      if (executable(candidate)) return candidate;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (executable("/usr/bin/etcd")) return std::string("/usr/bin/etcd");
  return std::nullopt;
}

// The gateway takes keys and values as base64 (they are bytes in etcd's API).
inline std::string base64(std::string_view in) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])); };
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    std::uint32_t n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift : {18, 12, 6, 0}) out += alphabet[(n >> shift) & 63];
  }
  if (std::size_t left = in.size() - i; left > 0) {
    std::uint32_t n = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += left == 2 ? alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The string value of "name":"..." in a JSON answer of etcd's (the gateway
// writes every 64-bit number as a string); empty when absent. The first
// occurrence counts: callers ask for fields that occur once.
inline std::string json_field(std::string_view json, std::string_view name) {
  std::string pattern = fmt::format("\"{}\":\"", name);
  auto at = json.find(pattern);
  if (at == std::string_view::npos) return {};
  at += pattern.size();
  auto end = json.find('"', at);
  return end == std::string_view::npos ? std::string() : std::string(json.substr(at, end - at));
}

struct http_response {
  int code = 0;
  std::string body;
};

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port, opened on first use
// and again after an error, one request at a time. A request not sent whole
// fails `permanent` (nothing reached the server); one sent but not answered
// fails `ambiguous` (the server may have applied it). Sends and receives give
// up after `timeout`.
class http_connection {
 public:
  explicit http_connection(std::uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : port_(port), timeout_(timeout) {}
  ~http_connection() { close(); }
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  status open() {
    if (fd_ >= 0) return status::ok();
    buffer_.clear();
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return errno_status("socket");
    // A request is one send; without TCP_NODELAY a send that splits would wait
    // for the previous answer's ACK.
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{static_cast<time_t>(timeout_.count() / 1000), static_cast<suseconds_t>(timeout_.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      status s = errno_status("connect");
      close();
      return s;
    }
    return status::ok();
  }

  result<http_response> request(std::string_view method, std::string_view path, std::string_view body = {}) {
    if (auto s = open(); !s) return s;
    std::string message = fmt::format(
        "{} {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
        "Connection: keep-alive\r\n\r\n",
        method, path, port_, body.size());
    message += body;
    if (auto s = send_all(message); !s) {
      close();
      return s;
    }
    auto r = read_response();
    if (!r) {
      close();
      return r.error().with_category(status_category::ambiguous);
    }
    return r;
  }

 private:
  status errno_status(const char* op) const {
    return status::io_error(fmt::format("{} 127.0.0.1:{}: {}", op, port_, std::strerror(errno)));
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  status send_all(std::string_view data) {
    while (!data.empty()) {
      // MSG_NOSIGNAL: a closed connection is an error here, not a SIGPIPE
      // that ends the bench.
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status("send to");
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return status::ok();
  }

  // More bytes into buffer_.
  status fill() {
    char chunk[16384];
    while (true) {
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<std::size_t>(n));
        return status::ok();
      }
      if (n == 0) return status::io_error(fmt::format("127.0.0.1:{} closed the connection", port_));
      if (errno == EINTR) continue;
      return errno_status("receive from");
    }
  }

  // buffer_ up to and without the next CRLF, taken out of buffer_.
  result<std::string> take_line() {
    std::size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos)
      if (auto s = fill(); !s) return s;
    std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    return line;
  }

  result<std::string> take_bytes(std::size_t n) {
    while (buffer_.size() < n)
      if (auto s = fill(); !s) return s;
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }

  result<http_response> read_response() {
    auto malformed = [&](std::string_view what) {
      return status::io_error(fmt::format("127.0.0.1:{}: malformed HTTP answer: {}", port_, what));
    };
    http_response r;
    auto status_line = take_line();
    if (!status_line) return status_line.error();
    std::string_view sl = *status_line;
    if (sl.substr(0, 5) != "HTTP/" || sl.find(' ') == std::string_view::npos) return malformed(sl);
    sl.remove_prefix(sl.find(' ') + 1);
    if (std::from_chars(sl.data(), sl.data() + sl.size(), r.code).ec != std::errc{}) return malformed(*status_line);

    std::optional<std::size_t> length;
    bool chunked = false, close_after = false;
    while (true) {
      auto line = take_line();
      if (!line) return line.error();
      if (line->empty()) break;
      auto colon = line->find(':');
      if (colon == std::string::npos) return malformed(*line);
      std::string name = line->substr(0, colon), value = line->substr(colon + 1);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      for (auto& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      value.erase(0, value.find_first_not_of(' '));
      if (name == "content-length") {
        std::size_t n = 0;
        if (std::from_chars(value.data(), value.data() + value.size(), n).ec != std::errc{}) return malformed(*line);
        length = n;
      } else if (name == "transfer-encoding") {
        chunked = value.find("chunked") != std::string::npos;
      } else if (name == "connection") {
        close_after = value.find("close") != std::string::npos;
      }
    }

    if (chunked) {
      while (true) {
        auto size_line = take_line();
        if (!size_line) return size_line.error();
        std::size_t n = 0;
        if (std::from_chars(size_line->data(), size_line->data() + size_line->size(), n, 16).ec != std::errc{})
          return malformed(*size_line);
        if (n == 0) break;
        auto data = take_bytes(n + 2);  // the chunk and its CRLF
        if (!data) return data.error();
        r.body.append(*data, 0, n);
      }
      while (true) {  // trailers, up to the empty line
        auto line = take_line();
        if (!line) return line.error();
        if (line->empty()) break;
      }
    } else if (length) {
      auto data = take_bytes(*length);
      if (!data) return data.error();
      r.body = std::move(*data);
    } else if (!(r.code == 204 || r.code == 304 || r.code / 100 == 1)) {
      return malformed("a body with neither Content-Length nor chunked encoding");
    }
    if (close_after) close();
    return r;
  }

  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string buffer_;  // received, not yet taken
};

// One put of the bench through a member's gateway: ok on 200; any other answer
// fails with etcd's message (the gateway answers gRPC errors with their HTTP
// equivalent, e.g. 503 with no leader).
inline status put(http_connection& to, std::string_view key, std::string_view value) {
  auto r =
      to.request("POST", "/v3/kv/put", fmt::format("{{\"key\":\"{}\",\"value\":\"{}\"}}", base64(key), base64(value)));
  if (!r) return r.error();
  if (r->code != 200) return status::failed(fmt::format("etcd answered {}: {}", r->code, r->body.substr(0, 200)));
  return status::ok();
}

namespace detail {

// The members started and not yet reaped, for the exit handler.
inline std::mutex children_mu;
inline std::vector<pid_t> children;

inline void kill_children() {
  std::lock_guard lock(children_mu);
  for (pid_t pid : children) ::kill(pid, SIGKILL);
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  children.clear();
}

inline void track(pid_t pid) {
  static const bool registered = (std::atexit(kill_children), true);
  (void)registered;
  std::lock_guard lock(children_mu);
  children.push_back(pid);
}

inline void untrack(pid_t pid) {
  std::lock_guard lock(children_mu);
  std::erase(children, pid);
}

}  // namespace detail

// Three members, m1 to m3, as a static cluster on 127.0.0.1: client ports
// first_port to first_port + 2, peer ports first_port + 3 to first_port + 5;
// data and logs under `dir`.
class cluster {
 public:
  struct member {
    std::string name, data_dir, log_path;
    std::uint16_t client_port = 0, peer_port = 0;
    pid_t pid = -1;  // -1 once reaped
    std::string id;  // etcd's member id, as its gateway writes it
  };

  // Starts the members and waits until every one is healthy and they agree on
  // a leader; fails (the members stopped) after `ready_within`.
  static result<std::unique_ptr<cluster>> start(const std::string& binary, const std::string& dir,
                                                std::uint16_t first_port, std::chrono::seconds ready_within) {
    std::unique_ptr<cluster> c(new cluster);
    std::filesystem::create_directories(dir);
    std::string initial_cluster;
    for (int i = 0; i < 3; ++i) {
      member m;
      m.name = fmt::format("m{}", i + 1);
      m.data_dir = fmt::format("{}/{}", dir, m.name);
      m.log_path = fmt::format("{}/{}.log", dir, m.name);
      m.client_port = static_cast<std::uint16_t>(first_port + i);
      m.peer_port = static_cast<std::uint16_t>(first_port + 3 + i);
      initial_cluster += fmt::format("{}{}=http://127.0.0.1:{}", i ? "," : "", m.name, m.peer_port);
      c->members_.push_back(std::move(m));
    }
    // A token of this run only: members of another run on other ports never
    // take these for theirs.
    std::string token = fmt::format("magnetite-bench-{}-{}-{}", ::getpid(), first_port, std::time(nullptr));
    for (auto& m : c->members_) {
      auto client = fmt::format("http://127.0.0.1:{}", m.client_port);
      auto peer = fmt::format("http://127.0.0.1:{}", m.peer_port);
      auto pid = spawn({binary,
                        "--name",
                        m.name,
                        "--data-dir",
                        m.data_dir,
                        "--listen-client-urls",
                        client,
                        "--advertise-client-urls",
                        client,
                        "--listen-peer-urls",
                        peer,
                        "--initial-advertise-peer-urls",
                        peer,
                        "--initial-cluster",
                        initial_cluster,
                        "--initial-cluster-state",
                        "new",
                        "--initial-cluster-token",
                        token,
                        "--logger",
                        "zap",
                        "--log-outputs",
                        "stderr",
                        "--log-level",
                        "error"},
                       m.log_path);
      if (!pid) return pid.error();
      m.pid = *pid;
    }
    auto deadline = clock_type::now() + ready_within;
    while (true) {
      std::string why = c->not_ready();
      if (why.empty()) return c;
      for (auto& m : c->members_) {
        int st = 0;
        if (m.pid > 0 && ::waitpid(m.pid, &st, WNOHANG) == m.pid) {
          detail::untrack(m.pid);
          m.pid = -1;
          return status::failed(fmt::format(
              "etcd member {} exited ({}){}", m.name,
              WIFEXITED(st) ? fmt::format("status {}", WEXITSTATUS(st)) : fmt::format("signal {}", WTERMSIG(st)),
              c->log_tails()));
        }
      }
      if (clock_type::now() > deadline)
        return status::failed(
            fmt::format("etcd not ready within {} s: {}{}", ready_within.count(), why, c->log_tails()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Asks every member to stop (SIGTERM), waits 2 s, kills those left and
  // reaps them all. The data is the caller's to remove.
  ~cluster() {
    for (auto& m : members_)
      if (m.pid > 0) ::kill(m.pid, SIGTERM);
    auto deadline = clock_type::now() + std::chrono::seconds(2);
    for (auto& m : members_) {
      if (m.pid <= 0) continue;
      bool reaped = false;  // waitpid is 0 while the child runs
      while (!(reaped = ::waitpid(m.pid, nullptr, WNOHANG) != 0) && clock_type::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!reaped) {
        ::kill(m.pid, SIGKILL);
        ::waitpid(m.pid, nullptr, 0);
      }
      detail::untrack(m.pid);
      m.pid = -1;
    }
  }
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  // The leader first, then the followers, as they were when the cluster
  // became ready. A later election moves no client: a follower forwards
  // what it is sent to the leader.
  const std::vector<member>& members() const { return members_; }
  const member& leader() const { return members_[0]; }
  const std::string& version() const { return version_; }

  // CPU seconds (user + system, every thread) the members used so far, from
  // /proc/<pid>/stat.
  double cpu_seconds() const {
    static const double ticks_per_s = static_cast<double>(::sysconf(_SC_CLK_TCK));
    double total = 0;
    for (const auto& m : members_) {
      std::ifstream in(fmt::format("/proc/{}/stat", m.pid));
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto paren = stat.rfind(')');  // the command name in parentheses may hold spaces
      if (paren == std::string::npos) fail("read an etcd member's CPU time", status::io_error("no /proc/<pid>/stat"));
      std::istringstream fields(stat.substr(paren + 1));
      std::string skip;
      for (int field = 3; field < 14; ++field) fields >> skip;  // state (3) up to cmajflt (13)
      std::uint64_t utime = 0, stime = 0;
      fields >> utime >> stime;  // fields 14 and 15, in clock ticks
      total += static_cast<double>(utime + stime) / ticks_per_s;
    }
    return total;
  }

  // WAL fdatasyncs of member `m` so far: etcd counts each in its
  // etcd_disk_wal_fsync_duration_seconds histogram (/metrics).
  static result<std::uint64_t> wal_fsyncs(const member& m) {
    http_connection c(m.client_port, std::chrono::seconds(10));
    auto r = c.request("GET", "/metrics");
    if (!r) return r.error();
    if (r->code != 200) return status::failed(fmt::format("{} /metrics answered {}", m.name, r->code));
    static constexpr std::string_view name = "\netcd_disk_wal_fsync_duration_seconds_count ";
    auto at = r->body.find(name);
    if (at == std::string::npos) return status::failed(fmt::format("{} /metrics: no WAL fsync count", m.name));
    return static_cast<std::uint64_t>(std::strtod(r->body.c_str() + at + name.size(), nullptr));
  }

 private:
  cluster() = default;

  static result<pid_t> spawn(const std::vector<std::string>& args, const std::string& log_path) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) return status::io_error(fmt::format("open {}: {}", log_path, std::strerror(errno)));
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    sigset_t no_signals;
    sigemptyset(&no_signals);
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      // The bench has threads: only async-signal-safe calls up to exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the bench died before the line above
      ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(log, 2);
      // Sockets and files of the bench that lack O_CLOEXEC stay the bench's.
      ::close_range(3, ~0U, 0);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int fork_errno = errno;
    ::close(log);
    if (null >= 0) ::close(null);
    if (pid < 0) return status::io_error(fmt::format("fork: {}", std::strerror(fork_errno)));
    detail::track(pid);
    return pid;
  }

  // Empty when every member is healthy and they agree on a leader, which then
  // comes first in members_; else what is missing.
  std::string not_ready() {
    std::string leader_id;
    for (auto& m : members_) {
      http_connection c(m.client_port, std::chrono::seconds(2));
      auto health = c.request("GET", "/health");
      if (!health) return fmt::format("{}: {}", m.name, health.error().to_string());
      if (health->code != 200 || json_field(health->body, "health") != "true")
        return fmt::format("{}: /health answered {} {}", m.name, health->code, health->body);
      auto s = c.request("POST", "/v3/maintenance/status", "{}");
      if (!s) return fmt::format("{}: {}", m.name, s.error().to_string());
      if (s->code != 200) return fmt::format("{}: /v3/maintenance/status answered {}", m.name, s->code);
      m.id = json_field(s->body, "member_id");
      std::string leader = json_field(s->body, "leader");
      if (leader.empty() || (!leader_id.empty() && leader != leader_id)) return "no leader agreed on yet";
      leader_id = leader;
      version_ = json_field(s->body, "version");
    }
    auto leader = std::find_if(members_.begin(), members_.end(), [&](const member& m) { return m.id == leader_id; });
    if (leader == members_.end()) return fmt::format("leader {} is none of the members", leader_id);
    std::rotate(members_.begin(), leader, leader + 1);
    return {};
  }

  // The end of each member's log, for a failure's message.
  std::string log_tails() const {
    std::string out;
    for (const auto& m : members_) {
      std::ifstream in(m.log_path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.size() > 1000) text = "..." + text.substr(text.size() - 1000);
      if (!text.empty()) out += fmt::format("\n{} ({}):\n{}", m.name, m.log_path, text);
    }
    return out;
  }

  std::vector<member> members_;
  std::string version_;
};

}  // namespace magnetite::bench::etcd
