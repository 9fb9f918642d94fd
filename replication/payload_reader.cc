#include "replication/payload_reader.h"

#include <set>
#include <vector>

#include <fmt/format.h>
#include <caf/binary_deserializer.hpp>

#include "replication/frame_guard.h"

namespace magnetite::replication {

// CAF's binary deserializer, except that no sequence may claim more elements
// than bytes are left: every element of every type a node sends takes at
// least one byte. CAF's own sizes a byte vector (std::vector<char>, a type
// any message may carry) to its claim before reading it.
class bounded_deserializer final : public caf::deserializer {
 public:
  bounded_deserializer(caf::execution_unit* ctx, std::span<const std::uint8_t> bytes)
      : caf::deserializer(ctx), inner_(ctx, reinterpret_cast<const char*>(bytes.data()), bytes.size()) {}
  std::size_t remaining() const { return inner_.remaining(); }
  // A sequence claimed more elements than bytes were left (refused then,
  // before anything was sized to the claim).
  bool overclaimed() const { return overclaimed_; }
  bool floating() const { return floating_; }

  caf::error begin_object(uint16_t& nr, std::string& name) override { return inner_.begin_object(nr, name); }
  caf::error end_object() override { return inner_.end_object(); }
  caf::error begin_sequence(size_t& n) override {
    if (auto e = inner_.begin_sequence(n)) return e;
    if (n > inner_.remaining()) {
      overclaimed_ = true;
      n = 0;
      return caf::make_error(caf::sec::end_of_stream);
    }
    return caf::none;
  }
  caf::error end_sequence() override { return inner_.end_sequence(); }
  caf::error apply_raw(size_t n, void* data) override { return inner_.apply_raw(n, data); }

 protected:
  caf::error apply_impl(int8_t& x) override { return inner_(x); }
  caf::error apply_impl(uint8_t& x) override { return inner_(x); }
  caf::error apply_impl(int16_t& x) override { return inner_(x); }
  caf::error apply_impl(uint16_t& x) override { return inner_(x); }
  caf::error apply_impl(int32_t& x) override { return inner_(x); }
  caf::error apply_impl(uint32_t& x) override { return inner_(x); }
  caf::error apply_impl(int64_t& x) override { return inner_(x); }
  caf::error apply_impl(uint64_t& x) override { return inner_(x); }
  // No node sends a floating-point number, and CAF 0.17 loops forever
  // serializing an infinite one (found by basp_payload: all-ones bits decode
  // to infinity): refused wherever it is, so nothing can echo one.
  caf::error apply_impl(float&) override { return refuse_floating(); }
  caf::error apply_impl(double&) override { return refuse_floating(); }
  caf::error apply_impl(long double&) override { return refuse_floating(); }
  caf::error apply_impl(std::string& x) override { return inner_(x); }
  caf::error apply_impl(std::u16string& x) override { return inner_(x); }
  caf::error apply_impl(std::u32string& x) override { return inner_(x); }

 private:
  caf::error refuse_floating() {
    floating_ = true;
    return caf::make_error(caf::sec::unknown_type);
  }

  caf::binary_deserializer inner_;
  bool overclaimed_ = false;
  bool floating_ = false;
};

// payload_reader.h says what makes a type flat; a vector of a flat type is.
bool payload_reader::flat_type(std::string_view name) {
  static const std::set<std::string_view> flat = {
      "@actor", "@addr", "@atom", "@duration", "@i16", "@i32", "@i64", "@i8", "@ldouble", "@message_id", "@node",
      "@str", "@strmap", "@strong_actor_ptr", "@strset", "@strvec", "@timespan", "@timestamp", "@u16", "@u16_str",
      "@u32", "@u32_str", "@u64", "@u8", "@unit", "@weak_actor_ptr", "@actorvec", "@addrvec", "uint32_t",
      // replication::add_message_types's own
      "magnetite::ballot", "magnetite::stamp", "magnetite::hash128", "magnetite::stamped_op", "magnetite::merge_report",
      "magnetite::replication::promise_reply", "magnetite::replication::vote", "magnetite::replication::replica_info",
      "magnetite::replication::request_id", "magnetite::state_check", "magnetite::batch_op"};
  // Not "bool" inside a vector: CAF packs std::vector<bool> into a byte vector.
  if (name == "bool") return true;
  constexpr std::string_view vector = "std::vector<";
  while (name.size() > vector.size() + 1 && name.substr(0, vector.size()) == vector && name.back() == '>')
    name = name.substr(vector.size(), name.size() - vector.size() - 1);
  return flat.count(name) > 0;
}

payload_reader::payload_reader(caf::actor_system& sys) : unit_(&sys), proxies_(sys, *this) {
  unit_.proxy_registry_ptr(&proxies_);
}

payload_reader::~payload_reader() = default;

// Remote actors named in a payload decode as no actor: nothing is made.
caf::strong_actor_ptr payload_reader::make_proxy(caf::node_id, caf::actor_id) { return nullptr; }
void payload_reader::set_last_hop(caf::node_id*) {}

std::string payload_reader::check(std::uint8_t op, std::span<const std::uint8_t> payload, caf::node_id& peer) {
  bounded_deserializer in(&unit_, payload);
  caf::error e;
  std::string refused, thrown;
  // CAF 0.17 throws from some decoders (a config value's variant of an
  // unknown index: std::runtime_error "invalid type found", found by
  // basp_payload); on the network thread, or in BASP's worker, nothing
  // catches it and the process ends. Thrown here, it is a refusal.
  try {
    e = read(op, in, payload, peer, refused);
  } catch (const std::exception& x) {
    thrown = x.what();
  } catch (...) {
    thrown = "an exception";
  }
  proxies_.clear();
  if (!refused.empty()) return refused;
  if (!thrown.empty())
    return fmt::format("a {}-byte payload of operation {} whose decoding threw ({})", payload.size(), op, thrown);
  if (!e && (in.overclaimed() || in.floating())) e = caf::make_error(caf::sec::end_of_stream);
  if (!e) return {};
  return fmt::format("a {}-byte payload of operation {} that does not decode within its bytes ({})", payload.size(), op,
                     unit_.system().render(e));
}

caf::error payload_reader::read(std::uint8_t op, bounded_deserializer& in, std::span<const std::uint8_t> payload,
                                caf::node_id& peer, std::string& refused) {
  caf::node_id from, to;
  // The node a handshake names is the connection's peer from then on; a
  // later handshake may not name another.
  auto shook_with = [&](caf::error e) {
    if (e) return e;
    if (peer && peer != from) {
      refused = "a second handshake naming another node";
      return caf::make_error(caf::sec::invalid_argument);
    }
    peer = from;
    return caf::error{};
  };
  switch (op) {
    case frame_guard::server_handshake: {
      std::vector<std::string> app_ids;
      caf::actor_id aid = 0;
      std::set<std::string> sigs;
      return shook_with(in(from, app_ids, aid, sigs));
    }
    case frame_guard::client_handshake:
      return shook_with(in(from));
    case 3:  // routed (payload_reader.h): refused once its nodes are read
      if (auto e = in(from, to)) return e;
      refused = from == unit_.system().node()
                    ? "a routed message that claims to come from this node"
                    : "a routed message (a node relays nothing, and takes direct messages only)";
      return caf::make_error(caf::sec::invalid_argument);
    case 2:
      return read_message(in, payload);
    case 4:    // monitor: `from` asks to monitor an actor of `to`
    case 5: {  // down: an actor of `from` is gone, says `from` to `to`
      caf::error reason;
      if (auto e = op == 4 ? in(from, to) : in(from, to, reason)) return e;
      if (!peer || from != peer || to != unit_.system().node()) {
        refused = fmt::format("a {} message naming other nodes than the one linked and this one",
                              op == 4 ? "monitor" : "down");
        return caf::make_error(caf::sec::invalid_argument);
      }
      return caf::error{};
    }
    default:
      return caf::make_error(caf::sec::unknown_type);
  }
}

// (stages, message): on its header when every element type is flat,
// else whole.
caf::error payload_reader::read_message(bounded_deserializer& in, std::span<const std::uint8_t> payload) {
  std::size_t start = payload.size() - in.remaining();
  std::vector<caf::strong_actor_ptr> stages;
  std::uint16_t zero = 0;
  std::string names;
  if (auto e = in(stages)) return e;
  if (auto e = in.begin_object(zero, names)) return e;
  bool flat = zero == 0 && names.rfind("@<>", 0) == 0;
  for (std::size_t at = 3; flat && at < names.size();) {
    std::size_t next = names.find('+', at + 1);
    if (next == std::string::npos) next = names.size();
    flat = names[at] == '+' && flat_type(std::string_view(names).substr(at + 1, next - at - 1));
    at = next;
  }
  if (flat) return caf::none;
  bounded_deserializer whole(&unit_, payload.subspan(start));
  caf::message m;
  auto e = whole(stages, m);
  // CAF 0.17 loses an element's error inside a message (it answers an
  // empty message and no error): the claim, or the number, is remembered.
  if (!e && (whole.overclaimed() || whole.floating())) e = caf::make_error(caf::sec::end_of_stream);
  return e;
}

}  // namespace magnetite::replication
