#include "replication/guarded_network.h"

#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include <caf/detail/socket_guard.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/policy/tcp.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "replication/frame_guard.h"
#include "replication/payload_reader.h"
#include "replication/tls_context.h"

namespace magnetite::replication {

status check_limits(const connection_limits& l) {
  if (l.max_handshake_bytes < 1024)
    return status::invalid_argument(
        fmt::format("max_handshake_bytes {} is below 1024: a peer's handshake would not fit", l.max_handshake_bytes));
  if (l.max_message_bytes < l.max_handshake_bytes)
    return status::invalid_argument(fmt::format("max_message_bytes {} is below max_handshake_bytes {}",
                                                l.max_message_bytes, l.max_handshake_bytes));
  if (l.handshake_timeout.count() <= 0 || l.idle_timeout.count() <= 0)
    return status::invalid_argument("handshake_timeout and idle_timeout must be positive");
  if (l.max_inflight_bytes < l.max_message_bytes)
    return status::invalid_argument(fmt::format(
        "max_inflight_bytes {} is below max_message_bytes {}: a message of the largest size could never be taken",
        l.max_inflight_bytes, l.max_message_bytes));
  if (l.max_pending_connections == 0) return status::invalid_argument("max_pending_connections must be at least 1");
  if (l.max_pending_per_source == 0) return status::invalid_argument("max_pending_per_source must be at least 1");
  return status::ok();
}

namespace {

using clock = std::chrono::steady_clock;
using caf::io::network::native_socket;
using caf::io::network::rw_state;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

}  // namespace

// Every guarded connection of one network, for the sweep and the counts.
class connection_watch {
 public:
  struct entry {
    native_socket fd;
    bool accepted;
    std::string source;  // the peer's address, of an accepted connection
    std::int64_t opened_ns;
    std::atomic<std::int64_t> heard_ns;
    std::atomic<bool> shook{false};
    bool cut = false;                       // shut down by the sweep (under the watch's lock)
    caf::node_id named;                     // the node its peer's handshake named (under the lock)
    bool refused_name = false;              // refused for the node it named: counted apart
    std::optional<peer_identity> identity;  // what its TLS peer's certificate names (under the lock)
  };

  connection_watch(caf::actor_system& sys, connection_limits limits, std::string identities)
      : limits_(limits), reader_(sys), this_node_(sys.node()), cluster_(std::move(identities)) {}
  const connection_limits& limits() const { return limits_; }
  bool identities() const noexcept { return !cluster_.empty(); }

  // A connection's TLS handshake finished, showing `cert`.
  void identified(entry* e, x509_st* cert) {
    if (!identities()) return;
    auto id = identity_of(cert, cluster_);
    std::lock_guard<std::mutex> lock(m_);
    e->identity = std::move(id);
  }

  std::optional<peer_identity> identity_of_node(const caf::node_id& node) const {
    std::lock_guard<std::mutex> lock(m_);
    for (auto& [_, e] : entries_)
      if (!e->cut && e->named == node && e->identity) return e->identity;
    return std::nullopt;
  }
  // On the network thread only (every guarded stream's reads run there).
  std::string check_payload(entry* e, std::uint8_t op, std::span<const std::uint8_t> payload, caf::node_id& peer) {
    auto why = reader_.check(op, payload, peer);
    if (!why.empty() || (op != frame_guard::server_handshake && op != frame_guard::client_handshake)) return why;
    std::lock_guard<std::mutex> lock(m_);
    if (!peer) {
      why = "a handshake naming no node";
    } else if (e->accepted) {
      // (A connection we made was dialled to an address of the cluster
      // file: what its server names is CAF's to judge, which closes a
      // connection to itself or a redundant one. Its name still counts
      // for the others.)
      if (peer == this_node_) why = "a handshake naming this node";
      for (auto& [_, other] : entries_)
        if (why.empty() && other.get() != e && !other->cut && other->named == peer)
          why = fmt::format("a handshake naming node {}, linked on another connection", to_string(peer));
    }
    if (why.empty() && identities()) why = identity_conflict(e, peer);
    if (!why.empty()) {
      e->refused_name = true;
      return why;
    }
    e->named = peer;
    return why;
  }

  // Under the lock: why a handshake naming `peer` on e may not speak for
  // the identity e's certificate names, or "".
  std::string identity_conflict(entry* e, const caf::node_id& peer) const {
    if (!e->identity) return fmt::format("a certificate that names no node or client of cluster {}", cluster_);
    for (auto& [_, other] : entries_) {
      if (other.get() == e || other->cut || !other->named || !other->identity) continue;
      if (other->named == peer && !(*other->identity == *e->identity))
        return fmt::format("a handshake naming node {} as {}, which another connection speaks for as {}",
                           to_string(peer), e->identity->to_string(), other->identity->to_string());
      if (e->identity->as == peer_identity::role::node && *other->identity == *e->identity && other->named != peer)
        return fmt::format("{}'s certificate, from another process than the one linked as {}", e->identity->to_string(),
                           e->identity->to_string());
    }
    return std::string();
  }

  // Whether an accepted connection from `source` may be taken: fewer than
  // the limit have not shaken hands, in all and from that address. Counts
  // it either way.
  bool admit(const std::string& source) {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.accepted;
    if (pending_locked() >= limits_.max_pending_connections) {
      ++c_.refused_pending;
      return false;
    }
    if (pending_locked(&source) >= limits_.max_pending_per_source) {
      ++c_.refused_source;
      return false;
    }
    return true;
  }

  entry* add(native_socket fd, bool accepted) {
    auto e = std::make_unique<entry>();
    e->fd = fd;
    e->accepted = accepted;
    if (accepted) {
      auto addr = caf::io::network::remote_addr_of_fd(fd);
      e->source = addr ? *addr : std::string();
    }
    e->opened_ns = now_ns();
    e->heard_ns = e->opened_ns;
    entry* at = e.get();
    std::lock_guard<std::mutex> lock(m_);
    entries_.emplace(at, std::move(e));
    return at;
  }

  // Before the socket is closed (see the header).
  void remove(entry* e) {
    std::lock_guard<std::mutex> lock(m_);
    entries_.erase(e);
  }

  // The claim budget (frame_guard::claim_budget).
  bool claim(std::int64_t delta) {
    std::lock_guard<std::mutex> lock(m_);
    if (delta > 0 && c_.inflight_bytes + static_cast<std::uint64_t>(delta) > limits_.max_inflight_bytes) return false;
    c_.inflight_bytes = static_cast<std::uint64_t>(static_cast<std::int64_t>(c_.inflight_bytes) + delta);
    return true;
  }

  void refused(entry* e, const std::string& why) {
    std::lock_guard<std::mutex> lock(m_);
    ++(e->refused_name ? c_.refused_names : c_.refused_frames);
    c_.last_refusal = why;
  }

  void sweep() {
    auto now = now_ns();
    auto over = [now](std::int64_t since, std::chrono::milliseconds limit) {
      return now - since > std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
    };
    std::lock_guard<std::mutex> lock(m_);
    for (auto& [_, e] : entries_) {
      if (e->cut) continue;
      if (!e->shook.load(std::memory_order_relaxed) && over(e->opened_ns, limits_.handshake_timeout)) {
        ++c_.timed_out;
      } else if (over(e->heard_ns.load(std::memory_order_relaxed), limits_.idle_timeout)) {
        ++c_.idle;
      } else {
        continue;
      }
      e->cut = true;
      ::shutdown(e->fd, SHUT_RDWR);
    }
  }

  network_stats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    network_stats s = c_;
    s.open = entries_.size();
    s.pending = pending_locked();
    return s;
  }

 private:
  // Accepted, not cut, not shaken hands: in all, or from one address.
  std::size_t pending_locked(const std::string* source = nullptr) const {
    std::size_t n = 0;
    for (auto& [_, e] : entries_)
      n += e->accepted && !e->cut && !e->shook.load(std::memory_order_relaxed) && (!source || e->source == *source);
    return n;
  }

  const connection_limits limits_;
  payload_reader reader_;
  const caf::node_id this_node_;
  const std::string cluster_;  // whose identities links are bound to; "": none
  mutable std::mutex m_;
  std::map<entry*, std::unique_ptr<entry>> entries_;
  network_stats c_;  // the counts; open and pending are counted when asked
};

namespace {

// The transports under the guard: CAF's plain TCP, or an OpenSSL session of
// CAF's module (what its own scribes use).
//
// Plain TCP reads ahead. BASP asks for a frame's 32-byte header, then for
// its payload, then for the next header, a recv each, and the last recv
// finds the socket empty: three system calls a message. One recv of up to
// read_ahead_bytes serves all the asks its bytes cover (the header and
// payload of every message that waited), then one finds the socket empty.
// (Answering "would block" after a short recv without asking would save
// that one too, but the next event's first ask could not tell it apart, and
// would cost an epoll round instead.) Kept bytes make must_read_more true,
// so CAF's read loop hands them on before it waits for the socket. Kept
// bytes are invisible to epoll: a scribe that paused reading with bytes
// kept would wait for the peer's next ones, so these scribes must never be
// halted or given activity tokens (BASP does neither). Each connection
// keeps 16 KiB from its first read on (a stranger's too: as many as
// max_pending_connections before a handshake). What the guard judges is
// unchanged: the bytes as handed to CAF.
struct plain_transport {
  static constexpr size_t read_ahead_bytes = 16 * 1024;
  std::vector<char> kept;
  size_t kept_from = 0, kept_to = 0;

  rw_state read_some(size_t& n, native_socket fd, void* buf, size_t len) {
    if (kept_from == kept_to) {
      // An ask as large as the read-ahead goes straight to its buffer.
      if (len >= read_ahead_bytes) return caf::policy::tcp::read_some(n, fd, buf, len);
      kept.resize(read_ahead_bytes);
      rw_state s = caf::policy::tcp::read_some(n, fd, kept.data(), kept.size());
      if (s != rw_state::success || n == 0) return s;
      kept_from = 0;
      kept_to = n;
    }
    n = std::min(len, kept_to - kept_from);
    std::memcpy(buf, kept.data() + kept_from, n);
    kept_from += n;
    return rw_state::success;
  }
  rw_state write_some(size_t& n, native_socket fd, const void* buf, size_t len) {
    return caf::policy::tcp::write_some(n, fd, buf, len);
  }
  bool must_read_more(native_socket, size_t) { return kept_from != kept_to; }
};

// One TLS connection over a nonblocking socket, from the node's one context
// (tls_context.h). The handshake is driven by the stream's reads and writes
// (a write event with nothing to write, forced at launch, starts it).
// "Would block" is success with nothing moved, as for plain TCP; the end
// of the stream or any TLS error is a failure. Each call starts from an
// empty error queue of this thread and leaves it empty: SSL_get_error()
// reads that queue, so errors left behind would fail the next link that
// asks (what CAF 0.17.6's own sessions did).
struct tls_transport {
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl{nullptr, SSL_free};
  bool handshaking = true;

  // OpenSSL writes with write(2): a peer gone would raise SIGPIPE, which
  // ends a process by default. Blocked around each call, and one raised
  // meanwhile is taken before it is unblocked.
  class sigpipe_blocked {
   public:
    sigpipe_blocked() {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, &saved_);
    }
    ~sigpipe_blocked() {
      sigset_t pipe, pending;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{0, 0};
        sigtimedwait(&pipe, nullptr, &zero);
      }
      pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    }

   private:
    sigset_t saved_;
  };

  // The outcome of an SSL call that returned r <= 0.
  rw_state after(int r) {
    int e = SSL_get_error(ssl.get(), r);
    ERR_clear_error();
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? rw_state::success : rw_state::failure;
  }
  // An SSL_read or SSL_write of at most len bytes; n: what it moved.
  template <class Call>
  rw_state transfer(size_t& n, size_t len, Call call) {
    ERR_clear_error();
    int r = call(static_cast<int>(std::min<size_t>(len, INT32_MAX)));
    if (r <= 0) return after(r);
    n = static_cast<size_t>(r);
    return rw_state::success;
  }
  // Drives the handshake; success with handshaking still true: not done yet.
  rw_state shake() {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl.get());
    if (r == 1) {
      handshaking = false;
      return rw_state::success;
    }
    return after(r);
  }
  rw_state read_some(size_t& n, native_socket, void* buf, size_t len) {
    n = 0;
    sigpipe_blocked guard;
    if (handshaking) {
      rw_state s = shake();
      if (s != rw_state::success || handshaking) return s;
    }
    if (len == 0) return rw_state::success;
    return transfer(n, len, [&](int want) { return SSL_read(ssl.get(), buf, want); });
  }
  rw_state write_some(size_t& n, native_socket, const void* buf, size_t len) {
    n = 0;
    sigpipe_blocked guard;
    if (handshaking) {
      rw_state s = shake();
      if (s != rw_state::success) return s;
      // CAF's stream reads "indeterminate" for an empty write as "nothing
      // more to write now" (its own TLS sessions answer so).
      if (handshaking) return len == 0 ? rw_state::indeterminate : rw_state::success;
    }
    if (len == 0) return rw_state::indeterminate;
    return transfer(n, len, [&](int want) { return SSL_write(ssl.get(), buf, want); });
  }
  bool must_read_more(native_socket, size_t threshold) {
    return static_cast<size_t>(SSL_pending(ssl.get())) >= threshold;
  }
  // Once the handshake is done: the certificate the peer showed (verified).
  bool secured() const { return !handshaking; }
  x509_st* peer_certificate() const { return SSL_get0_peer_certificate(ssl.get()); }
};

// The stream policy: the transport's bytes, judged before CAF sees them.
template <class Transport>
class guarded_policy {
 public:
  guarded_policy(Transport t, std::shared_ptr<connection_watch> watch, native_socket fd, bool accepted)
      : transport_(std::move(t)),
        watch_(std::move(watch)),
        entry_(watch_->add(fd, accepted)),
        guard_(
            accepted ? frame_guard::side::accepted : frame_guard::side::connected, watch_->limits().max_handshake_bytes,
            watch_->limits().max_message_bytes,
            [w = watch_.get(), e = entry_, peer = caf::node_id()](std::uint8_t op,
                                                                  std::span<const std::uint8_t> payload) mutable {
              return w->check_payload(e, op, payload, peer);
            },
            [w = watch_.get()](std::int64_t delta) { return w->claim(delta); }) {}
  ~guarded_policy() { watch_->remove(entry_); }
  guarded_policy(const guarded_policy&) = delete;
  guarded_policy& operator=(const guarded_policy&) = delete;

  rw_state read_some(size_t& n, native_socket fd, void* buf, size_t len) {
    rw_state s = transport_.read_some(n, fd, buf, len);
    note_identity();
    if (s != rw_state::success || n == 0) return s;
    entry_->heard_ns.store(now_ns(), std::memory_order_relaxed);
    if (!guard_.take({static_cast<const std::uint8_t*>(buf), n})) {
      watch_->refused(entry_, guard_.refusal());
      n = 0;
      return rw_state::failure;
    }
    if (guard_.shook()) entry_->shook.store(true, std::memory_order_relaxed);
    return s;
  }
  rw_state write_some(size_t& n, native_socket fd, const void* buf, size_t len) {
    rw_state s = transport_.write_some(n, fd, buf, len);
    note_identity();
    return s;
  }
  bool must_read_more(native_socket fd, size_t threshold) { return transport_.must_read_more(fd, threshold); }

 private:
  // The TLS handshake ends in a read or a write, before any byte of BASP
  // passes: the watch learns the peer's certificate then, once.
  void note_identity() {
    if constexpr (std::is_same_v<Transport, tls_transport>) {
      if (!identified_ && transport_.secured()) {
        identified_ = true;
        watch_->identified(entry_, transport_.peer_certificate());
      }
    }
  }

  bool identified_ = false;
  Transport transport_;
  std::shared_ptr<connection_watch> watch_;
  connection_watch::entry* entry_;
  frame_guard guard_;
};

// A scribe (CAF's connection object) over a guarded stream; as CAF's own
// scribe_impl, and its OpenSSL module's, are.
template <class Transport>
class guarded_scribe : public caf::io::scribe {
 public:
  guarded_scribe(caf::io::network::default_multiplexer& mpx, native_socket fd, Transport t,
                 std::shared_ptr<connection_watch> watch, bool accepted)
      : caf::io::scribe(caf::io::network::conn_hdl_from_socket(fd)),
        stream_(mpx, fd, std::move(t), std::move(watch), fd, accepted) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) launch();
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

 private:
  void launch() {
    launched_ = true;
    stream_.start(this);
    // TLS may still have to finish SSL_accept / SSL_connect, which needs a
    // write event even with nothing to write (as CAF's OpenSSL scribe does).
    if constexpr (std::is_same_v<Transport, tls_transport>) stream_.force_empty_write(this);
  }

  bool launched_ = false;
  caf::io::network::stream_impl<guarded_policy<Transport>> stream_;
};

caf::io::network::default_multiplexer& backend_of(caf::actor_system& sys) {
  return static_cast<caf::io::network::default_multiplexer&>(sys.middleman().backend());
}

using tls_ptr = std::shared_ptr<const tls_context>;

// A scribe for fd, or nullptr when TLS cannot make a session for it.
caf::io::scribe_ptr make_scribe(caf::actor_system& sys, native_socket fd, bool accepted, const tls_ptr& tls,
                                const std::shared_ptr<connection_watch>& watch) {
  auto& mpx = backend_of(sys);
  (void)caf::io::network::keepalive(fd, true);
  if (!tls) return caf::make_counted<guarded_scribe<plain_transport>>(mpx, fd, plain_transport{}, watch, accepted);
  tls_transport t;
  ERR_clear_error();
  t.ssl.reset(SSL_new(tls->native()));
  if (!t.ssl || SSL_set_fd(t.ssl.get(), fd) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  if (accepted)
    SSL_set_accept_state(t.ssl.get());
  else
    SSL_set_connect_state(t.ssl.get());
  return caf::make_counted<guarded_scribe<tls_transport>>(mpx, fd, std::move(t), watch, accepted);
}

class guarded_doorman : public caf::io::network::doorman_impl {
 public:
  guarded_doorman(caf::io::network::default_multiplexer& mpx, native_socket fd, tls_ptr tls,
                  std::shared_ptr<connection_watch> watch)
      : caf::io::network::doorman_impl(mpx, fd), tls_(std::move(tls)), watch_(std::move(watch)) {}

  bool new_connection() override {
    if (detached()) return false;  // as CAF's: the broker let go of us already
    auto& mpx = acceptor_.backend();
    native_socket fd = acceptor_.accepted_socket();
    caf::detail::socket_guard closed_unless_taken{fd};
    auto source = caf::io::network::remote_addr_of_fd(fd);
    if (!watch_->admit(source ? *source : std::string())) return false;
    caf::io::network::nonblocking(fd, true);
    auto scribe = make_scribe(parent()->system(), fd, true, tls_, watch_);
    if (!scribe) return false;
    closed_unless_taken.release();
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

 private:
  tls_ptr tls_;
  std::shared_ptr<connection_watch> watch_;
};

class guarded_middleman_actor : public caf::io::middleman_actor_impl {
 public:
  guarded_middleman_actor(caf::actor_config& cfg, caf::actor broker, tls_ptr tls,
                          std::shared_ptr<connection_watch> watch)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)), tls_(std::move(tls)), watch_(std::move(watch)) {}

  const char* name() const override { return "magnetite::guarded_middleman_actor"; }

 protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd) return std::move(fd.error());
    caf::detail::socket_guard closed_unless_taken{*fd};
    caf::io::network::nonblocking(*fd, true);
    auto scribe = make_scribe(system(), *fd, false, tls_, watch_);
    if (!scribe) return caf::make_error(caf::sec::cannot_connect_to_node);
    closed_unless_taken.release();
    return scribe;
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    return caf::make_counted<guarded_doorman>(backend_of(system()), *fd, tls_, watch_);
  }

 private:
  tls_ptr tls_;
  std::shared_ptr<connection_watch> watch_;
};

caf::behavior sweeper(caf::event_based_actor* self, std::shared_ptr<connection_watch> watch) {
  auto& l = watch->limits();
  // A quarter of the shorter limit: a connection is cut at most 25% late.
  auto period = std::clamp(std::min(l.handshake_timeout, l.idle_timeout) / 4, std::chrono::milliseconds(10),
                           std::chrono::milliseconds(1000));
  self->send(self, sweep_atom::value);
  return {
      [self, watch, period](sweep_atom) {
        watch->sweep();
        self->delayed_send(self, period, sweep_atom::value);
      },
  };
}

}  // namespace

result<std::shared_ptr<guarded_network>> guarded_network::start(caf::actor_system& sys,
                                                                std::shared_ptr<const tls_context> tls,
                                                                const connection_limits& limits,
                                                                std::string identities) {
  MAGNETITE_TRY(check_limits(limits));
  if (!identities.empty() && !tls) return status::invalid_argument("identities need TLS: a certificate names them");
  std::shared_ptr<guarded_network> n(new guarded_network());
  n->watch_ = std::make_shared<connection_watch>(sys, limits, std::move(identities));
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  n->middleman_ = sys.spawn<guarded_middleman_actor, caf::hidden>(broker, tls, n->watch_);
  n->sweeper_ = sys.spawn<caf::hidden>(sweeper, n->watch_);
  return n;
}

guarded_network::~guarded_network() {
  // CAF's middleman actors ignore exit messages but `kill`.
  caf::anon_send_exit(middleman_, caf::exit_reason::kill);
  caf::anon_send_exit(sweeper_, caf::exit_reason::kill);
}

network_stats guarded_network::stats() const { return watch_->stats(); }

std::optional<peer_identity> guarded_network::identity_of(const caf::node_id& node) const {
  return watch_->identity_of_node(node);
}

bool guarded_network::identities() const noexcept { return watch_->identities(); }

}  // namespace magnetite::replication
