// request_within: a blocking actor's request that waits at most `timeout`
// for its answer, WITHOUT a request timeout in CAF's clock.
//
// Why not `self->request(dest, timeout, ...)`: CAF 0.17 then schedules an
// error message for the request's response id, and sends it when the timeout
// passes even if the answer came long before. A scheduled actor drops such a
// message; a blocking actor skips it (a response nobody awaits is never
// consumed) and keeps it in its mailbox for as long as it lives. An actor
// that makes many calls (the cluster client lends the same scoped actors to
// call after call) then holds one such message per call it ever made, and
// every later receive walks all of them: a client's writes went from about
// 10 000 a second to 1 700 within two minutes (docs/benchmarks.md).
//
// Contract: request_within(self, dest, timeout, xs...).receive(on_answer,
// on_error) sends xs to dest and calls exactly one of them: on_answer with
// the answer, or on_error with the error it got, or with sec::request_timeout
// when nothing came in time. Nothing is left behind in self's mailbox except
// the late answer of a request that timed out (so an actor that saw a
// timeout should not be reused for calls that expect an empty mailbox).
// The wait restarts if an unrelated message arrives meanwhile (CAF's blocking
// receive measures its timeout from the last arrival); only such late answers
// can arrive here, so the wait stays bounded.
#pragma once

#include <chrono>
#include <utility>

#include "actors/caf_headers.h"  // before any other CAF header

namespace magnetite::replication {

template <class Self, class Output>
class bounded_response {
 public:
  using handle = caf::response_handle<Self, Output, true>;
  bounded_response(handle h, std::chrono::milliseconds timeout) : h_(std::move(h)), timeout_(timeout) {}

  template <class OnAnswer, class OnError>
  void receive(OnAnswer on_answer, OnError on_error) {
    caf::detail::type_checker<Output, OnAnswer>::check();  // as response_handle::receive checks
    caf::blocking_actor::accept_one_cond once;
    h_.self()->varargs_receive(
        once, h_.id(), std::move(on_answer), on_error, caf::after(timeout_) >> [&] {
          caf::error e = caf::sec::request_timeout;
          on_error(e);
        });
  }

 private:
  handle h_;
  std::chrono::milliseconds timeout_;
};

template <class Self, class Output>
bounded_response<Self, Output> bound(caf::response_handle<Self, Output, true> h, std::chrono::milliseconds timeout) {
  return {std::move(h), timeout};
}

// Only for blocking actors (caf::scoped_actor): an event-based actor's
// request timeout is harmless and should stay as it is.
template <class Dest, class... Ts>
auto request_within(caf::scoped_actor& self, const Dest& dest, std::chrono::milliseconds timeout, Ts&&... xs) {
  return bound(self->request(dest, caf::infinite, std::forward<Ts>(xs)...), timeout);
}

}  // namespace magnetite::replication
