// payload_reader: what CAF's BASP will decode of a frame's payload, read
// first by us, bounded (docs/design/replication.md, 7.1).
//
// Why: CAF 0.17's binary deserializer sizes a byte vector to the length it
// claims before reading it, and any message may carry one (std::vector<char>
// is a built-in type, "@charbuf"; an error carries a message inside it).
// bench/stranger_bench: such a claim of 4 GiB took a bare CAF node to
// about 3.5 GiB resident, and CAF then answered an empty message and no
// error. So a node reads every payload first with a deserializer that
// refuses a sequence claiming more elements than bytes are left (every
// element of every type a node sends takes at least one byte).
//
// Contract: check(op, payload, peer) is "" when BASP may decode the payload of a
// frame of BASP operation `op` (0 server handshake, 1 client handshake, 2
// direct, 3 routed, 4 monitor, 5 down), else why not. It decodes what BASP
// decodes: the handshakes' node id, application ids and interface; the
// nodes of routed, monitor and down frames and a down frame's error; a
// message's forwarding stages and header. A message whose element types are
// all flat (integers, strings, actor handles, vectors of them, and ours,
// which are made of the same) passes on its header, since CAF fills those
// element by element; any other is decoded whole. A floating-point number
// anywhere is refused: no node sends one, and CAF 0.17 loops forever
// serializing an infinite one; so is a payload whose decoding throws (CAF
// throws from some decoders, and nothing on its network thread catches it;
// both found by the basp_payload fuzz target).
// Routed messages are refused. One names its source node in its payload,
// and BASP takes that name as it is: claiming this very node, it is
// delivered as if a local actor sent it (CAF looks the source actor up in
// our own registry), which passes a replica's checks for what only its own
// process or itself may send (`peers`, its timers); claiming another node,
// it speaks for that node's actors. A direct message's source node is the
// connection's, from its handshake. CAF routes a message only through a
// node that is not linked to its destination, or on behalf of another
// node's actor; the nodes of a cluster are linked each to each, a client to
// each node, and none forwards another node's messages (nor links to a
// remote actor: CAF 0.17 announces such a link with a routed message).
// Monitor and down frames name nodes too (which node asks to monitor, whose
// actor died): BASP would take a stranger's word for a down of any node's
// actor and kill our proxy of it. They are taken only from the node the
// connection shook hands with, about it, to this node; check() is given
// that node (`peer`, none until the handshake, which sets it).
// Nothing is made while reading: remote actors decode as no actor. Not
// thread-safe: one reader a network thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "actors/caf_headers.h"  // before any other CAF header

#include <caf/proxy_registry.hpp>
#include <caf/scoped_execution_unit.hpp>

namespace magnetite::replication {

class bounded_deserializer;

class payload_reader : private caf::proxy_registry::backend {
 public:
  explicit payload_reader(caf::actor_system& sys);
  ~payload_reader() override;
  payload_reader(const payload_reader&) = delete;
  payload_reader& operator=(const payload_reader&) = delete;

  std::string check(std::uint8_t op, std::span<const std::uint8_t> payload, caf::node_id& peer);

  // Whether a message of this element type passes on its header.
  static bool flat_type(std::string_view name);

 private:
  caf::strong_actor_ptr make_proxy(caf::node_id, caf::actor_id) override;
  void set_last_hop(caf::node_id*) override;
  // Sets `refused` when it refuses on what it decoded (the nodes a frame
  // names), rather than on how it decodes.
  caf::error read(std::uint8_t op, bounded_deserializer& in, std::span<const std::uint8_t> payload, caf::node_id& peer,
                  std::string& refused);
  caf::error read_message(bounded_deserializer& in, std::span<const std::uint8_t> payload);

  caf::scoped_execution_unit unit_;
  caf::proxy_registry proxies_;
};

}  // namespace magnetite::replication
