// frame_guard: what one network connection may send a node, judged on its
// raw bytes before CAF's BASP broker reads them (docs/design/replication.md,
// 7.1, "What a stranger can do").
//
// Why: CAF 0.17's BASP reads a 32-byte header, then exactly the payload
// length the header claims, and sizes (zero-fills) its read buffer to that
// length before a byte of payload arrives: one header claiming 4 GiB costs
// the node 4 GiB. It also hands a message to any local actor by id whether
// or not the sender ever shook hands. The frame layout is CAF's (header:
// operation u8, two pad bytes, flags u8, payload length u32 big-endian,
// operation data u64, source and destination actor ids u64; then the
// payload); tests/network_guard_test.cc pins it to the installed CAF.
//
// Contract: take() is given every byte the connection delivers, in order, in
// pieces of any size. It refuses at the byte that completes the first header
// that
//   - names an operation BASP does not have;
//   - is not the peer's handshake while the peer has not shaken hands (a
//     connection we accepted must open with a client handshake, one we made
//     must be answered with a server handshake);
//   - claims a payload over max_handshake_bytes before the handshake, or over
//     max_message_bytes after it;
//   - is a handshake without a payload (CAF 0.17 would read it from a null
//     buffer: 32 bytes from anyone would end the node);
//   - claims more than is left of a claim_budget shared with the other
//     connections (a stranger may shake hands, then claim the limit again
//     and again on many connections).
// With a payload_check, the guard also keeps each frame's payload as it
// arrives (grown with the bytes that came, never sized to the claim) and
// hands it whole to the check at its last byte; an answer other than "" is
// the refusal. CAF's decoder trusts the lengths inside a payload, too (a
// byte vector of a message is sized to its claim): guarded_network's check
// reads them first.
// Refused is final: every later take() refuses too. The caller then closes
// the connection without passing the refused bytes on, so BASP never reads
// that header (or that payload). The guard is a function of the bytes (and
// the check) alone: no clock, no socket (a silent connection is
// connection_watch's, guarded_network.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace magnetite::replication {

class frame_guard {
 public:
  static constexpr std::size_t header_bytes = 32;
  // BASP's operations (caf/io/basp/message_type.hpp): 0 server handshake,
  // 1 client handshake, 2 direct, 3 routed, 4 monitor, 5 down, 6 heartbeat.
  static constexpr std::uint8_t server_handshake = 0, client_handshake = 1, last_operation = 6;

  // Which end of the connection we are: the peer must send the other
  // handshake before anything else.
  enum class side { accepted, connected };

  // (operation, whole payload) -> "" to pass, else why not.
  using payload_check = std::function<std::string(std::uint8_t, std::span<const std::uint8_t>)>;

  // A budget shared by connections for the payloads they claimed and have
  // not delivered whole (what CAF has sized its read buffers to): called
  // with +length as a header passes (false: refused, nothing taken) and
  // with -length when its payload is whole or the guard goes away first.
  using claim_budget = std::function<bool(std::int64_t)>;

  frame_guard(side s, std::uint32_t max_handshake_bytes, std::uint32_t max_message_bytes, payload_check check = {},
              claim_budget budget = {});
  ~frame_guard();
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;

  // Takes the next bytes; false once refused (refusal() says why).
  bool take(std::span<const std::uint8_t> bytes);

  // The peer's handshake frame passed whole: the larger limit applies now.
  bool shook() const { return shook_; }
  bool refused() const { return !refusal_.empty(); }
  const std::string& refusal() const { return refusal_; }
  // Whole frames passed (handshakes and heartbeats included).
  std::uint64_t frames() const { return frames_; }

 private:
  void end_of_frame();
  bool judge_header();

  side side_;
  std::uint32_t max_handshake_;
  std::uint32_t max_message_;
  std::uint8_t header_[header_bytes] = {};
  std::size_t header_have_ = 0;
  std::uint64_t payload_left_ = 0;
  payload_check check_;
  claim_budget budget_;
  std::uint32_t claimed_ = 0;          // taken from the budget for the frame being read
  std::vector<std::uint8_t> payload_;  // the frame's so far, with a check
  bool in_handshake_ = false;          // the frame being read is the peer's handshake
  bool shook_ = false;
  std::uint64_t frames_ = 0;
  std::string refusal_;
};

}  // namespace magnetite::replication
