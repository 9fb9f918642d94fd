// basp_payload: every payload a socket can deliver to a node, as the node's
// payload_reader reads it (replication/payload_reader.h), then, where it
// passes, as CAF's BASP decodes it: the handshakes; direct and routed
// messages of every type a node registers, client messages (put, del, cas,
// get, apply, sread, srange, the transaction messages), `peers`, `hello`,
// `offer` and replication's own among them; monitor and down frames.
//
// Input: a BASP operation byte (modulo 6), then the payload.
// Invariants: the reader returns for every input; a direct message it passes
// is decoded by CAF's own deserializer without allocating more than the
// input pays for (ASan and libFuzzer's -malloc_limit_mb watch: CAF alone
// sizes a byte vector to its claim); a message that decoded serializes to
// bytes that decode and serialize to the same bytes again.
#include "actors/caf_headers.h"  // before any other CAF header

#include <caf/proxy_registry.hpp>
#include <caf/scoped_execution_unit.hpp>

#include "replication/node.h"
#include "replication/payload_reader.h"
#include "tests/fuzz/fuzz_target.h"

using namespace magnetite;
using namespace magnetite::fuzz;
using namespace magnetite::replication;

namespace {

// One actor system for the whole run, with every type a node registers.
struct world : caf::proxy_registry::backend {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<payload_reader> reader;
  std::unique_ptr<caf::proxy_registry> proxies;
  caf::scoped_execution_unit unit;
  world() {
    add_message_types(cfg);
    // CAF's test coordinator: no scheduler threads, which the thread
    // sanitizer (fuzz_corpus_tests runs under it) could not see into.
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    reader = std::make_unique<payload_reader>(*sys);
    proxies = std::make_unique<caf::proxy_registry>(*sys, *this);
    unit.system_ptr(sys.get());
    unit.proxy_registry_ptr(proxies.get());
  }
  caf::strong_actor_ptr make_proxy(caf::node_id, caf::actor_id) override { return nullptr; }
  void set_last_hop(caf::node_id*) override {}
};

// Never destroyed: an actor system torn down among static destructors may
// wait on threads that are gone.
world& the_world() {
  static world* w = new world;
  return *w;
}

std::vector<char> serialize(world& w, std::vector<caf::strong_actor_ptr>& stages, caf::message& m) {
  std::vector<char> out;
  caf::binary_serializer sink{&w.unit, out};
  FUZZ_CHECK(!sink(stages, m));
  return out;
}

}  // namespace

MAGNETITE_FUZZ_TARGET(basp_payload) {
  if (size == 0) return 0;
  auto& w = the_world();
  std::uint8_t op = data[0] % 6;
  std::span<const std::uint8_t> payload(data + 1, size - 1);
  caf::node_id peer;  // a fresh connection's: none until a handshake
  std::string verdict = w.reader->check(op, payload, peer);
  if (!verdict.empty() || op != 2) return 0;
  // Passed: what BASP's remote_message_handler decodes next, with CAF's own.
  std::vector<caf::strong_actor_ptr> stages;
  caf::message m;
  caf::binary_deserializer source{&w.unit, reinterpret_cast<const char*>(payload.data()), payload.size()};
  auto err = source(stages, m);
  if (!err && !m.empty()) {
    auto once = serialize(w, stages, m);
    std::vector<caf::strong_actor_ptr> stages2;
    caf::message m2;
    caf::binary_deserializer again{&w.unit, once};
    FUZZ_CHECK(!again(stages2, m2));
    FUZZ_CHECK(serialize(w, stages2, m2) == once);
  }
  w.proxies->clear();
  return 0;
}
