// answer_relay: every blocked host thread gets its own answer, exactly once,
// and none sleeps through its wake-up, over many groups of every size.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/answer_relay.h"

using namespace magnetite;

namespace {
// `threads` host threads, each `rounds` writes; thread t spins for spin_of(t)
// before it sleeps on each answer.
void run_groups(int threads, int rounds, const std::function<std::chrono::nanoseconds(int)>& spin_of) {
  std::mutex mu;
  std::condition_variable queued;
  std::vector<std::pair<std::shared_ptr<host_wait>, int>> queue;  // the "mailbox"
  std::atomic<int> wrong{0}, answered{0}, failed_answers{0};

  std::vector<std::thread> hosts;
  for (int t = 0; t < threads; ++t)
    hosts.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        auto w = std::make_shared<host_wait>();
        {
          std::lock_guard lk(mu);
          queue.push_back({w, t});
        }
        queued.notify_one();
        w->wait(spin_of(t));
        if (w->result().is_ok()) {
          if (w->outcome().current != std::to_string(t)) ++wrong;
        } else {
          if (w->result().code() != status_code::io_error) ++wrong;
          ++failed_answers;
        }
        ++answered;
      }
    });

  // The "actor": takes whatever is queued as one group, answers it, and fails
  // every seventh group. A lost wake-up stops all progress: after 30 s without
  // any, the test fails and the process exits rather than hang.
  answer_relay relay;
  int groups = 0;
  auto last_progress = std::chrono::steady_clock::now();
  int last_answered = 0;
  while (answered.load() < threads * rounds) {
    std::vector<std::pair<std::shared_ptr<host_wait>, int>> group;
    {
      std::unique_lock lk(mu);
      queued.wait_for(lk, std::chrono::milliseconds(50), [&] { return !queue.empty(); });
      group.swap(queue);
    }
    if (!group.empty()) {
      for (auto& [w, t] : group) relay.add(std::move(w), cas_outcome::refused(std::to_string(t)));
      ++groups;
      relay.release(groups % 7 == 0 ? status::io_error("injected group failure") : status::ok());
    }
    if (answered.load() != last_answered) {
      last_answered = answered.load();
      last_progress = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(30)) {
      FAIL_CHECK("no waiter woke for 30 s: a lost wake-up (" << answered.load() << " of " << threads * rounds
                                                             << " answered)");
      std::_Exit(1);
    }
  }
  for (auto& h : hosts) h.join();
  CHECK(wrong.load() == 0);
  CHECK(answered.load() == threads * rounds);
  CHECK(failed_answers.load() > 0);
  CHECK(relay.empty());
  MESSAGE(groups << " groups for " << threads * rounds << " answers");
}
}  // namespace

TEST_CASE("answer relay: every waiter of every group wakes with its own answer") {
  run_groups(24, 2000, [](int) { return std::chrono::nanoseconds(0); });
}

// Spinners mixed with sleepers: a spin that ends just as its answer comes is
// the race between the waiter's `sleeping` and the answer's `ready`; a waiter
// lost there never wakes, and the run stops.
TEST_CASE("answer relay: waiters that spin first, for no time, briefly or long, all wake") {
  run_groups(12, 2000, [](int t) {
    switch (t % 4) {
      case 0:
        return std::chrono::nanoseconds(0);
      case 1:
        return std::chrono::nanoseconds(std::chrono::microseconds(2));
      case 2:
        return std::chrono::nanoseconds(std::chrono::microseconds(40));
      default:
        return std::chrono::nanoseconds(std::chrono::milliseconds(2));
    }
  });
}

// One writer alone, as a lone host thread with writer_spin waits: each answer
// lands while it spins, or after its spin ran out and it went to sleep.
TEST_CASE("answer relay: a lone spinning waiter is answered in and after its spin") {
  for (auto spin : {std::chrono::microseconds(1), std::chrono::microseconds(50), std::chrono::microseconds(100'000)}) {
    std::atomic<int> good{0};
    constexpr int rounds = 3000;
    std::mutex mu;
    std::condition_variable queued;
    std::shared_ptr<host_wait> pending;
    std::thread host([&] {
      for (int r = 0; r < rounds; ++r) {
        auto w = std::make_shared<host_wait>();
        {
          std::lock_guard lk(mu);
          pending = w;
        }
        queued.notify_one();
        w->wait(spin);
        if (w->result().is_ok() && w->outcome().current == std::to_string(r)) ++good;
      }
    });
    answer_relay relay;
    for (int r = 0; r < rounds; ++r) {
      std::shared_ptr<host_wait> w;
      {
        std::unique_lock lk(mu);
        REQUIRE(queued.wait_for(lk, std::chrono::seconds(30), [&] { return pending != nullptr; }));
        w = std::move(pending);
        pending = nullptr;
      }
      // Every few rounds the answer comes late, so short spins end first.
      if (r % 5 == 0) std::this_thread::yield();
      relay.add(std::move(w), cas_outcome::refused(std::to_string(r)));
      relay.release(status::ok());
    }
    host.join();
    CHECK(good.load() == rounds);
  }
}

TEST_CASE("answer relay: a waiter answered alone, before or after it sleeps, wakes") {
  auto early = std::make_shared<host_wait>();
  early->answer_now(status::invalid_argument("refused"));
  early->wait();  // already answered: returns at once
  CHECK(early->result().code() == status_code::invalid_argument);

  auto late = std::make_shared<host_wait>();
  std::thread t([&] { late->wait(); });
  late->answer_now(status::ok(), cas_outcome::refused(std::string("current")));
  t.join();
  CHECK(late->result().is_ok());
  CHECK(late->outcome().current == std::optional<std::string>("current"));
}
