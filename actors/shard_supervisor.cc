#include "actors/shard_supervisor.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

namespace magnetite {

namespace {

using restart_atom = caf::atom_constant<caf::atom("restart")>;

struct supervisor_state {
  std::shared_ptr<shard_supervision> shared;
  std::vector<shard_actor_config> configs;
  std::vector<std::deque<std::chrono::steady_clock::time_point>> history;
  std::vector<std::size_t> streak;  // restarts in a row, for the backoff
  std::size_t max_restarts = 0;
  std::chrono::milliseconds window{0};
  std::chrono::milliseconds backoff{0};
  static inline const char* name = "magnetite.supervisor";
};

using supervisor_ptr = caf::stateful_actor<supervisor_state>*;

void spawn_one(supervisor_ptr self, std::size_t i, std::optional<status> fail_with = std::nullopt) {
  auto cfg = self->state.configs[i];
  cfg.supervisor = caf::actor_cast<caf::actor>(self);
  cfg.fail_with = std::move(fail_with);
  auto h = spawn_shard(self->system(), std::move(cfg));
  self->monitor(h);
  std::lock_guard lk(self->state.shared->mu);
  self->state.shared->handles[i] = h;
}

}  // namespace

// Damaged files or a newer format do not heal: restarting would only find
// them again, max_restarts times, with backoff.
bool boot_is_hopeless(const status& why) {
  return why.category() == status_category::permanent &&
         (why.code() == status_code::corruption || why.code() == status_code::not_supported);
}

// Keeps the boot's code (corruption, not_supported): it says what is wrong
// with the files, which `failed` would hide.
status files_cannot_be_opened(std::size_t shard, const status& why) {
  return status::make(why.code(), status_category::permanent,
                      fmt::format("shard {} was stopped: its files cannot be opened: {}", shard, why.message()));
}

namespace {

// A shard died or could not boot: restart it after a backoff, or give up.
void on_shard_failure(supervisor_ptr self, std::size_t i, const caf::error& reason) {
  auto& st = self->state;
  auto& slot = *st.configs[i].slot;
  // Readers must let go of the dead shard's store before it is reopened.
  slot.view.store(nullptr);
  auto now = std::chrono::steady_clock::now();
  auto& h = st.history[i];
  h.push_back(now);
  while (!h.empty() && now - h.front() > st.window) h.pop_front();
  {
    std::lock_guard lk(st.shared->mu);
    ++st.shared->restarts[i];
  }
  status why = to_status(reason);
  bool hopeless = boot_is_hopeless(why);
  if (hopeless || h.size() > st.max_restarts) {
    status failed =
        hopeless ? files_cannot_be_opened(i, why)
                 : status::failed(fmt::format("shard {} failed {} times within {} ms and was stopped; last error: {}",
                                              i, h.size(), st.window.count(), why.to_string()));
    slot.error.store(std::make_shared<const status>(failed));
    spawn_one(self, i, failed);
    return;
  }
  slot.error.store(std::make_shared<const status>(
      status::io_error(fmt::format("shard {} is restarting after: {}", i, why.message()), status_category::transient)));
  std::size_t shift = std::min<std::size_t>(st.streak[i]++, 10);
  self->delayed_send(self, st.backoff * (1u << shift), restart_atom::value, i);
}

caf::behavior supervisor_behavior(supervisor_ptr self, std::shared_ptr<shard_supervision> shared,
                                  std::vector<shard_actor_config> configs, std::size_t max_restarts,
                                  std::chrono::milliseconds window, std::chrono::milliseconds backoff) {
  auto& st = self->state;
  st.shared = std::move(shared);
  st.configs = std::move(configs);
  st.history.resize(st.configs.size());
  st.streak.assign(st.configs.size(), 0);
  st.max_restarts = max_restarts;
  st.window = window;
  st.backoff = backoff;
  for (std::size_t i = 0; i < st.configs.size(); ++i) spawn_one(self, i);
  // Shards are not linked to the supervisor (a shard's death must not end it):
  // when it ends, it ends them, so nothing outlives the database.
  self->attach_functor([shared = st.shared] {
    std::lock_guard lk(shared->mu);
    for (auto& h : shared->handles)
      if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    std::size_t i = 0;
    {
      std::lock_guard lk(st.shared->mu);
      while (i < st.shared->handles.size() && st.shared->handles[i].address() != dm.source) ++i;
      if (i == st.shared->handles.size()) return;  // a replaced shard
    }
    if (!dm.reason || dm.reason == caf::exit_reason::normal) return;  // shut down on purpose
    on_shard_failure(self, i, dm.reason);
  });
  return {
      [=](boot_failed_atom, std::size_t i, const caf::error& reason) {
        // The sentinel keeps answering until its replacement is up.
        on_shard_failure(self, i, reason);
      },
      [=](restart_atom, std::size_t i) {
        shard_engine_actor old;
        {
          std::lock_guard lk(self->state.shared->mu);
          old = self->state.shared->handles[i];
        }
        if (old) {
          self->demonitor(old.address());
          self->send_exit(old, caf::exit_reason::user_shutdown);
        }
        spawn_one(self, i);
      },
      [=](get_atom) {
        // The host waits for this answer: by then every shard was spawned.
        return ok_atom::value;
      },
      [=](ok_atom, std::size_t i) {
        // A shard reports a healthy boot: its backoff starts over.
        self->state.streak[i] = 0;
      },
  };
}

}  // namespace

caf::actor spawn_shard_supervisor(caf::actor_system& sys, std::shared_ptr<shard_supervision> shared,
                                  std::vector<shard_actor_config> configs, std::size_t max_restarts,
                                  std::chrono::milliseconds window, std::chrono::milliseconds backoff) {
  return sys.spawn(supervisor_behavior, std::move(shared), std::move(configs), max_restarts, window, backoff);
}

}  // namespace magnetite
