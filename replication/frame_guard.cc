#include "replication/frame_guard.h"

#include <algorithm>

#include <fmt/format.h>

namespace magnetite::replication {

namespace {

const char* operation_name(std::uint8_t op) {
  switch (op) {
    case 0:
      return "server handshake";
    case 1:
      return "client handshake";
    case 2:
      return "direct message";
    case 3:
      return "routed message";
    case 4:
      return "monitor message";
    case 5:
      return "down message";
    case 6:
      return "heartbeat";
    default:
      return "unknown operation";
  }
}

}  // namespace

frame_guard::frame_guard(side s, std::uint32_t max_handshake_bytes, std::uint32_t max_message_bytes,
                         payload_check check, claim_budget budget)
    : side_(s),
      max_handshake_(max_handshake_bytes),
      max_message_(max_message_bytes),
      check_(std::move(check)),
      budget_(std::move(budget)) {}

frame_guard::~frame_guard() {
  if (claimed_ > 0) budget_(-static_cast<std::int64_t>(claimed_));
}

bool frame_guard::take(std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    if (refused()) return false;
    if (payload_left_ > 0) {
      auto n = std::min<std::uint64_t>(payload_left_, bytes.size());
      if (check_) payload_.insert(payload_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      payload_left_ -= n;
      bytes = bytes.subspan(n);
      if (payload_left_ == 0) end_of_frame();
      continue;
    }
    auto n = std::min(header_bytes - header_have_, bytes.size());
    std::copy_n(bytes.begin(), n, header_ + header_have_);
    header_have_ += n;
    bytes = bytes.subspan(n);
    if (header_have_ < header_bytes) break;
    header_have_ = 0;
    if (!judge_header()) return false;
  }
  return !refused();
}

bool frame_guard::judge_header() {
  std::uint8_t op = header_[0];
  std::uint32_t length = (std::uint32_t{header_[4]} << 24) | (std::uint32_t{header_[5]} << 16) |
                         (std::uint32_t{header_[6]} << 8) | std::uint32_t{header_[7]};
  if (op > last_operation) {
    refusal_ = fmt::format("a frame of unknown operation {:#04x}", op);
    return false;
  }
  std::uint32_t limit = max_message_;
  in_handshake_ = false;
  if (!shook_) {
    std::uint8_t expected = side_ == side::accepted ? client_handshake : server_handshake;
    if (op != expected) {
      refusal_ = fmt::format("a {} before its {}", operation_name(op), operation_name(expected));
      return false;
    }
    in_handshake_ = true;
    limit = max_handshake_;
  }
  // CAF reads a handshake's payload without checking that there is one: an
  // empty handshake, before or after the first, would have it dereference a
  // null buffer.
  if ((op == client_handshake || op == server_handshake) && length == 0) {
    refusal_ = fmt::format("a {} without a payload", operation_name(op));
    return false;
  }
  if (length > limit) {
    refusal_ = fmt::format("a {} of {} bytes, over the {} allowed {} the handshake", operation_name(op), length, limit,
                           shook_ ? "after" : "before");
    return false;
  }
  if (budget_ && length > 0) {
    if (!budget_(length)) {
      refusal_ =
          fmt::format("a {} of {} bytes, over what is left of the budget all connections share for payloads in flight",
                      operation_name(op), length);
      return false;
    }
    claimed_ = length;
  }
  payload_left_ = length;
  if (payload_left_ == 0) end_of_frame();
  return true;
}

void frame_guard::end_of_frame() {
  if (claimed_ > 0) {
    budget_(-static_cast<std::int64_t>(claimed_));
    claimed_ = 0;
  }
  if (check_ && !payload_.empty()) {
    refusal_ = check_(header_[0], payload_);
    // A large payload's room is not kept for a connection that may idle.
    if (payload_.capacity() > (1u << 20))
      std::vector<std::uint8_t>().swap(payload_);
    else
      payload_.clear();
    if (refused()) return;
  }
  ++frames_;
  if (in_handshake_) shook_ = true;
  in_handshake_ = false;
}

}  // namespace magnetite::replication
