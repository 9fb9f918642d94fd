// answer_relay: hands a group's answers to the host threads blocked on them
// without making the shard actor wake each one.
//
// A host thread blocked on a write waits on its own host_wait. When a group's
// fsync returns, the actor fills in every answer of the group (plain stores),
// then wakes ONE waiter; each waiter, once awake, wakes the next two of the
// group (a binary tree over the group's order) before it returns. So the actor
// pays one wake-up a group instead of one a write (about 12 us each on this VM,
// which at 30 writes a group kept the log idle for longer than its fsync), and
// the wake-ups spread over the host threads and cores.
//
// A waiter may spin for a while before it sleeps (database_options::
// writer_spin, when it is the only writer blocked): then the answer usually
// finds it awake, and no one needs to wake it. A waiter says it sleeps
// (`sleeping`) before its last look at `ready`; whoever answers it sets
// `ready` before looking at `sleeping`; both sequentially consistent, so at
// least one of the two sees the other's store: either the waiter sees its
// answer and does not sleep, or it is woken. A FUTEX_WAKE that finds no one
// asleep would cost the actor a syscall (and an IPI on a VM) for nothing.
//
// Invariants: every waiter of a released group that sleeps is woken by
// someone (the actor for the first, its parent in the tree for the others);
// an answer is complete before its `ready` flag is set; a waiter's children's
// flags are set before its own, so a waiter that finds its flag set can relay
// at once.
// A waiter keeps its group alive until it has woken its children, and drops it
// then, which breaks the group <-> waiter cycle.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "magnetite/write.h"  // cas_outcome: the answer to every write

namespace magnetite {

class host_wait {
 public:
  // Host thread: blocks until answered (spinning for up to `spin` first,
  // then sleeping), then wakes its part of the group.
  void wait(std::chrono::nanoseconds spin = {});
  // Answers this waiter alone (an error before any group, say) and wakes it.
  void answer_now(const status& s, cas_outcome o = {});

  const status& result() const noexcept { return st_; }
  const cas_outcome& outcome() const noexcept { return outcome_; }

 private:
  friend class answer_relay;
  using group = std::vector<std::shared_ptr<host_wait>>;

  status st_;
  cas_outcome outcome_;
  std::shared_ptr<group> group_;  // set with the answer, dropped after relaying
  std::size_t index_ = 0;
  std::atomic<std::uint32_t> ready_{0};  // the futex word: 1 once answered
  std::atomic<bool> sleeping_{false};    // set before the waiter's last look at ready_
  // Called after w's ready_ is set: wakes w if it sleeps or is about to.
  static void wake(host_wait& w);
  static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && std::atomic<std::uint32_t>::is_always_lock_free);
};

// The waiters of the group being gathered; used by one actor only.
class answer_relay {
 public:
  void add(std::shared_ptr<host_wait> w, cas_outcome o);
  bool empty() const noexcept { return waiting_.empty(); }
  // Answers every waiter added since the last release with `s` (and, when s
  // is ok, its own outcome), then wakes the first.
  void release(const status& s);

 private:
  std::vector<std::shared_ptr<host_wait>> waiting_;
  std::vector<cas_outcome> outcomes_;
};

}  // namespace magnetite
