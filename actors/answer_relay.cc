#include "actors/answer_relay.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace magnetite {

namespace {
// The futex word is `ready`: FUTEX_WAIT sleeps only if the word still reads 0
// under the kernel's lock for that word, and FUTEX_WAKE takes the same lock.
void sleep_while_zero(std::atomic<std::uint32_t>& word) {
  while (word.load(std::memory_order_seq_cst) == 0)
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
}

// A hint to the core that this is a spin loop (x86 PAUSE, Arm YIELD).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void wake_word(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
}  // namespace

void host_wait::wake(host_wait& w) {
  if (w.sleeping_.load(std::memory_order_seq_cst)) wake_word(w.ready_);
}

void host_wait::wait(std::chrono::nanoseconds spin) {
  if (spin.count() > 0) {
    auto until = std::chrono::steady_clock::now() + spin;
    // A few microseconds of PAUSE, then yields: a spinner that only paused
    // could keep the very thread it waits for (an actor woken from its
    // fsync on this core) off the CPU until the scheduler preempts it.
    for (unsigned i = 1; ready_.load(std::memory_order_acquire) == 0; ++i) {
      if (i < 16) {
        cpu_relax();
        continue;
      }
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() >= until) break;
    }
  }
  if (ready_.load(std::memory_order_acquire) == 0) {
    sleeping_.store(true, std::memory_order_seq_cst);
    sleep_while_zero(ready_);
  }
  std::shared_ptr<group> g = std::move(group_);
  if (!g) return;
  for (std::size_t child : {2 * index_ + 1, 2 * index_ + 2})
    if (child < g->size()) wake(*(*g)[child]);
}

void host_wait::answer_now(const status& s, cas_outcome o) {
  st_ = s;
  outcome_ = std::move(o);
  ready_.store(1, std::memory_order_seq_cst);
  wake(*this);
}

void answer_relay::add(std::shared_ptr<host_wait> w, cas_outcome o) {
  waiting_.push_back(std::move(w));
  outcomes_.push_back(std::move(o));
}

void answer_relay::release(const status& s) {
  if (waiting_.empty()) return;
  auto g = std::make_shared<host_wait::group>(std::move(waiting_));
  waiting_.clear();
  for (std::size_t i = 0; i < g->size(); ++i) {
    host_wait& w = *(*g)[i];
    w.st_ = s;
    w.outcome_ = s ? std::move(outcomes_[i]) : cas_outcome{};
    w.group_ = g;
    w.index_ = i;
  }
  outcomes_.clear();
  // Flags are set last index first. A waiter may see its flag before anyone
  // wakes it (it had not gone to sleep yet) and relay at once; its children
  // come later in the group, so their flags are already set and visible to it
  // (release / acquire on its own flag), and its wake cannot reach a child
  // that then goes to sleep on a 0. In index order, db_bench hung with every
  // host thread asleep on an answered request.
  for (std::size_t i = g->size(); i-- > 0;) (*g)[i]->ready_.store(1, std::memory_order_seq_cst);
  host_wait::wake(*(*g)[0]);
}

}  // namespace magnetite
