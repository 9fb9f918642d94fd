// answer_relay: every blocked host thread gets its own answer, exactly once,
// and none sleeps through its wake-up, over many groups of every size.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/answer_relay.h"

using namespace magnetite;

TEST_CASE("answer relay: every waiter of every group wakes with its own answer") {
  constexpr int threads = 24;
  constexpr int rounds = 2000;
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
        w->wait();
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
