// request_within (replication/request_within.h): a blocking actor that makes
// call after call keeps an empty mailbox, and a call nobody answers ends with
// request_timeout at its bound.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/caf_headers.h"  // before any other CAF header

#include "replication/request_within.h"

using namespace magnetite::replication;
using namespace std::chrono_literals;

namespace {

caf::behavior doubler() {
  return {[](int x) { return 2 * x; }};
}

// Takes every request and never answers it.
caf::behavior silent(caf::event_based_actor* self) {
  auto kept = std::make_shared<std::vector<caf::response_promise>>();
  return {[=](int) { kept->push_back(self->make_response_promise()); }};
}

}  // namespace

TEST_CASE("request_within: answered calls leave nothing in the caller's mailbox, even after their bound") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto target = sys.spawn(doubler);
  caf::scoped_actor self{sys};
  constexpr int calls = 200;
  int right = 0;
  for (int i = 0; i < calls; ++i)
    request_within(self, target, 500ms, i)
        .receive([&](int doubled) { right += doubled == 2 * i; }, [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK(right == calls);
  // A request timeout in CAF's clock would fire 500 ms after its call (a
  // bound no answer here comes near, even under a sanitizer on a busy
  // machine); the clock fires in deadline order, so once this later message
  // is here, any such timeout would be in the mailbox before it.
  self->delayed_send(self, 600ms, std::string("marker"));
  bool marked = false;
  self->receive([&](const std::string& m) { marked = m == "marker"; });
  REQUIRE(marked);
  CHECK(self->mailbox().size() == 0);
  self->send_exit(target, caf::exit_reason::user_shutdown);
}

TEST_CASE("request_within: a call nobody answers ends with request_timeout") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto target = sys.spawn(silent);
  caf::scoped_actor self{sys};
  bool answered = false;
  caf::error got;
  auto start = std::chrono::steady_clock::now();
  request_within(self, target, 30ms, 1)
      .receive([&](int) { answered = true; }, [&](caf::error& e) { got = std::move(e); });
  CHECK_FALSE(answered);
  CHECK(got == caf::sec::request_timeout);
  CHECK(std::chrono::steady_clock::now() - start >= 30ms);
  // It holds the promises, and they hold it: only an exit ends it.
  self->send_exit(target, caf::exit_reason::user_shutdown);
}
