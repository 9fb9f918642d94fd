#include "actors/transaction_coordinator.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/hash128.h"

namespace magnetite {

namespace {
using clock = std::chrono::steady_clock;

// How long the background resolution keeps trying one transaction before it
// leaves it to the next open.
constexpr auto background_patience = std::chrono::minutes(10);

// The time a request may take: what is left until `until`, or no limit.
caf::duration time_left(std::optional<clock::time_point> until) {
  if (!until) return caf::duration(caf::infinite);
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(*until - clock::now());
  return caf::duration(std::max(left, std::chrono::nanoseconds(1)));
}

std::vector<batch_op> ops_of(const std::vector<batch_write>& writes) {
  std::vector<batch_op> ops;
  ops.reserve(writes.size());
  for (const auto& w : writes) ops.push_back({w.key, w.value.has_value(), w.value.value_or(std::string()), 0});
  return ops;
}

// A shard that is restarting answers (or its dead handle refuses) with a
// transient error: worth asking again. A stopped shard's sentinel answers
// with its permanent reason.
bool worth_retrying(const status& s) { return s.category() == status_category::transient; }

status timed_out(std::string_view step, std::size_t shard) {
  return status::make(status_code::timeout, status_category::ambiguous,
                      fmt::format("deadline passed while shard {} {}: the transaction was decided or will be, as a "
                                  "whole, and its keys stay held until then",
                                  shard, step));
}
}  // namespace

transaction_coordinator::transaction_coordinator(caf::actor_system& system, std::shared_ptr<shard_supervision> shards)
    : system_(system), shards_(std::move(shards)) {}

transaction_coordinator::~transaction_coordinator() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

shard_engine_actor transaction_coordinator::handle(std::size_t shard) const {
  std::lock_guard lk(shards_->mu);
  return shards_->handles.at(shard);
}

result<transaction_outcome> transaction_coordinator::commit(std::vector<transaction_part> parts,
                                                            std::optional<deadline> until) {
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.shard < b.shard; });
  if (parts.size() < 2 || std::adjacent_find(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
                            return a.shard == b.shard;
                          }) != parts.end())
    return status::invalid_argument("a transaction across shards takes parts on two or more distinct shards");
  in_doubt t{random_hash128(), static_cast<std::uint32_t>(parts.front().shard), {}};
  for (const auto& p : parts) t.participants.push_back(static_cast<std::uint32_t>(p.shard));
  caf::scoped_actor self{system_};
  transaction_outcome out;
  auto backoff = std::chrono::milliseconds(5);
  auto pause = [&] {
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  };
  // Nobody decided `commit`, and nobody will: the prepared participants drop
  // their part (a prepare still on its way is dropped by the finish queued
  // behind it). One that cannot be reached now is left to the background
  // resolution, which finds no decision and writes `abort`.
  auto abort_others = [&] {
    for (std::size_t i = 1; i < parts.size(); ++i) {
      status s;
      self->request(handle(parts[i].shard), time_left(clock::now() + std::chrono::seconds(1)), tx_finish_atom::value,
                    t.id, false)
          .receive([](std::uint64_t) {}, [&](caf::error& e) { s = to_status(e); });
      if (!s) {
        resolve_later(t);
        return;
      }
    }
  };

  // 1. Prepare every participant but the coordinator, at once.
  using prepared_answer =
      caf::response_handle<caf::blocking_actor, caf::detail::type_list<bool, std::uint32_t, std::uint64_t>, true>;
  std::vector<prepared_answer> asked;
  for (std::size_t i = 1; i < parts.size(); ++i)
    asked.push_back(self->request(handle(parts[i].shard), time_left(until), tx_prepare_atom::value, t.id, t.coordinator,
                                  parts[i].checks, ops_of(parts[i].writes)));
  status failure;
  bool refused = false;
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked[i].receive(
        [&](bool prepared, std::uint32_t failed_check, std::uint64_t found) {
          if (prepared || refused || !failure.is_ok()) return;
          refused = true;
          out.failed_part = i + 1;
          out.failed_check = failed_check;
          out.found = found;
        },
        [&](caf::error& e) {
          if (failure.is_ok() && !refused) failure = to_status(e);
        });
  if (refused || !failure.is_ok()) {
    abort_others();
    if (refused) return out;
    return status::make(failure.code(), status_category::transient,
                        fmt::format("transaction not committed, nothing was written: {}", failure.message()));
  }

  // 2. The coordinator checks its own part, and applies it with the decision
  // `commit` in ONE frame: the decision is durable before anyone hears it,
  // and a failed check there writes no decision at all. A failed attempt may
  // have written it, so the same request is sent again: the record, if it
  // exists, answers.
  std::optional<bool> committed;
  for (;;) {
    status s;
    std::uint32_t failed_check = 0;
    self->request(handle(t.coordinator), time_left(until), tx_commit_atom::value, t.id, parts.front().checks,
                  ops_of(parts.front().writes), t.participants)
        .receive(
            [&](bool c, std::uint32_t check, std::uint64_t found, std::uint64_t revision) {
              committed = c;
              failed_check = check;
              out.found = found;
              out.revision = revision;
            },
            [&](caf::error& e) { s = to_status(e); });
    if (committed && !*committed) {
      abort_others();
      if (failed_check == UINT32_MAX)  // resolved as aborted meanwhile
        return status::make(status_code::conflict, status_category::transient,
                            "conflict: the transaction was aborted while it was being committed; nothing was written");
      out.failed_part = 0;
      out.failed_check = failed_check;
      return out;
    }
    if (committed) break;
    if (s.code() == status_code::conflict) {  // a key held there: nothing written, no decision
      abort_others();
      return s;
    }
    if (!worth_retrying(s) || (until && clock::now() >= *until)) {
      resolve_later(t);
      if (!worth_retrying(s))
        return status::make(s.code(), status_category::ambiguous,
                            fmt::format("transaction's decision not confirmed: {}", s.message()));
      return timed_out("recorded the decision", t.coordinator);
    }
    pause();
  }

  // 3. Finish the others at once (one that is restarting is asked again),
  // then forget the decision. The forget is not waited for: a decision left
  // behind by a crash is forgotten at the next open.
  using finished_answer = caf::response_handle<caf::blocking_actor, caf::detail::type_list<std::uint64_t>, true>;
  std::vector<std::size_t> unfinished;
  for (std::size_t i = 1; i < parts.size(); ++i) unfinished.push_back(parts[i].shard);
  backoff = std::chrono::milliseconds(5);
  while (!unfinished.empty()) {
    std::vector<finished_answer> finishing;
    for (auto shard : unfinished)
      finishing.push_back(self->request(handle(shard), time_left(until), tx_finish_atom::value, t.id, true));
    std::vector<std::size_t> again;
    status s;
    for (std::size_t i = 0; i < finishing.size(); ++i)
      finishing[i].receive([&](std::uint64_t revision) { out.revision = std::max(out.revision, revision); },
                           [&](caf::error& e) {
                             again.push_back(unfinished[i]);
                             if (s.is_ok() || !worth_retrying(s)) s = to_status(e);
                           });
    unfinished = std::move(again);
    if (unfinished.empty()) break;
    if (!worth_retrying(s) || (until && clock::now() >= *until)) {
      resolve_later(t);
      if (!worth_retrying(s))
        return status::make(s.code(), status_category::ambiguous,
                            fmt::format("transaction committed but shard {} did not apply it yet: {}",
                                        unfinished.front(), s.message()));
      return timed_out("applied the decision", unfinished.front());
    }
    pause();
  }
  caf::anon_send(handle(t.coordinator), tx_forget_atom::value, t.id);
  out.committed = true;
  return out;
}

status transaction_coordinator::resolve(const in_doubt& t, deadline until, bool forget) {
  caf::scoped_actor self{system_};
  // Retries what a restarting shard refuses, until `until`.
  auto ask = [&](std::size_t shard, auto on_answer, auto... xs) -> status {
    for (auto backoff = std::chrono::milliseconds(5);;) {
      status s;
      self->request(handle(shard), time_left(until), xs...).receive(on_answer, [&](caf::error& e) {
        s = to_status(e);
      });
      if (s.is_ok() || !worth_retrying(s) || clock::now() >= until) return s;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  };
  bool commit = false;
  MAGNETITE_TRY(ask(
      t.coordinator, [&](bool c) { commit = c; }, tx_decide_atom::value, t.id, false, t.participants));
  for (auto shard : t.participants)
    MAGNETITE_TRY(ask(
        shard, [](std::uint64_t) {}, tx_finish_atom::value, t.id, commit));
  if (!forget) return status::ok();
  return ask(
      t.coordinator, [](ok_atom) {}, tx_forget_atom::value, t.id);
}

void transaction_coordinator::resolve_later(in_doubt t) {
  std::lock_guard lk(mu_);
  if (stopping_) return;
  queue_.push_back(std::move(t));
  if (!thread_.joinable()) thread_ = std::thread([this] { background(); });
  cv_.notify_one();
}

void transaction_coordinator::background() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    in_doubt t = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    (void)resolve(t, clock::now() + background_patience, true);  // unresolved: the next open does it
    lk.lock();
  }
}

status transaction_coordinator::resolve_at_open(
    const std::vector<std::vector<std::pair<hash128, std::uint32_t>>>& prepared,
    const std::vector<std::vector<hash128>>& decided, bool every_shard_up) {
  std::map<hash128, in_doubt> all;
  for (std::size_t shard = 0; shard < prepared.size(); ++shard)
    for (const auto& [id, coordinator] : prepared[shard]) {
      auto& t = all[id];
      t.id = id;
      t.coordinator = coordinator;
      t.participants.push_back(static_cast<std::uint32_t>(shard));
    }
  // Shards that are still booting answer once they are up; one that cannot
  // boot holds its transactions until it can.
  auto until = clock::now() + std::chrono::seconds(30);
  for (const auto& [id, t] : all) {
    if (t.coordinator >= prepared.size())
      return status::corruption(
          fmt::format("transaction {} names coordinator shard {} of {}", id.to_hex(), t.coordinator, prepared.size()));
    MAGNETITE_TRY(resolve(t, until, every_shard_up));
  }
  // A shard that is down may hold a prepare nobody here saw: its decision
  // must stay until that shard boots and asks.
  if (!every_shard_up) return status::ok();
  caf::scoped_actor self{system_};
  for (std::size_t shard = 0; shard < decided.size(); ++shard)
    for (const auto& id : decided[shard]) {
      if (all.contains(id)) continue;  // resolve() forgot it
      status s;
      self->request(handle(shard), time_left(until), tx_forget_atom::value, id)
          .receive([](ok_atom) {}, [&](caf::error& e) { s = to_status(e); });
      MAGNETITE_TRY(s);
    }
  return status::ok();
}

}  // namespace magnetite
