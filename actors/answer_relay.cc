#include "actors/answer_relay.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace magnetite {

namespace {
// The futex word is `ready`: FUTEX_WAIT sleeps only if the word still reads 0
// under the kernel's lock for that word, and FUTEX_WAKE takes the same lock.
void sleep_while_zero(std::atomic<std::uint32_t>& word) {
  while (word.load(std::memory_order_acquire) == 0)
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
}

void wake(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
}  // namespace

void host_wait::wait() {
  sleep_while_zero(ready_);
  std::shared_ptr<group> g = std::move(group_);
  if (!g) return;
  for (std::size_t child : {2 * index_ + 1, 2 * index_ + 2})
    if (child < g->size()) wake((*g)[child]->ready_);
}

void host_wait::answer_now(const status& s, cas_outcome o) {
  st_ = s;
  outcome_ = std::move(o);
  ready_.store(1, std::memory_order_release);
  wake(ready_);
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
  for (std::size_t i = g->size(); i-- > 0;) (*g)[i]->ready_.store(1, std::memory_order_release);
  wake((*g)[0]->ready_);
}

}  // namespace magnetite
