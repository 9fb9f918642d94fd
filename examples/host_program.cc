// host_program: a host that runs its OWN caf::actor_system and embeds magnetite
// in it, then talks to the shard actors with the typed messages of
// <magnetite/caf.h> as well as through the plain C++ API.
//
// What it shows, in order:
//   1. The host configures and owns the actor system (its worker count, and the
//      idle-poll setting database_options::worker_spin_polls explains) and
//      opens the database inside it (magnetite::open_database(sys, options)): the shard
//      actors run on the host's scheduler, beside the host's own actors.
//   2. A scoped_actor (any thread of the host) messages one shard: the shard of
//      a key is db.shard_of(key), its typed handle shard_handle(db, i). put, get,
//      cas, commit and stats by message; refused input comes back as a
//      caf::error that magnetite::to_status turns into a status.
//   3. The two paths see one database: a write acknowledged by message is read
//      by db.get(), a db.put() is read by message, and the root a `commit`
//      message returns is the one db.commit() reports for that shard.
//   4. An actor of the host's own (spawned) writes 200 keys with asynchronous
//      requests (request(...).then(...)), all in flight at once so that each
//      shard commits them in groups, then asks every shard for its part of
//      the range and merges them: the same entries as db.range().
//   5. TTL by message: the value is there, then expired for both paths.
// Every result is checked; the first mismatch ends the program with
// "host_program: FAILED: ..." on stderr and exit status 1. "host_program: ok"
// is its last line on success.
//
//   host_program [DATA_DIR]     default: a fresh directory under /tmp, removed at exit
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <magnetite/caf.h>  // CAF itself, the shard interface, open_database

using namespace std::chrono_literals;
using magnetite::shard_actor;

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

std::string fail_text(const caf::error& e) { return magnetite::to_status(e).to_string(); }

// --- 4. the host's own actor ----------------------------------------------

using report_atom = caf::atom_constant<caf::atom("report")>;

struct loader_state {
  std::size_t acked = 0;
  std::size_t ranges_back = 0;
  std::map<std::string, std::string> merged;  // what the shards answered to `range`
  std::string error;
  bool reported = false;
};

// Writes `n` keys "load/NNN" to their shards, all requests in flight at once;
// when every write is acknowledged (durable), asks each shard for its entries
// of ["load/", "load0") and merges them. Then sends (report, error, keys,
// values) to `report_to` and quits. `db` must outlive it (main waits for the
// report before closing the database).
caf::behavior loader(caf::stateful_actor<loader_state>* self, magnetite::database* db, std::size_t n,
                     caf::actor report_to) {
  auto finish = [self, report_to] {
    if (self->state.reported) return;
    self->state.reported = true;
    std::vector<std::string> keys, values;
    for (auto& [k, v] : self->state.merged) {
      keys.push_back(k);
      values.push_back(v);
    }
    self->send(report_to, report_atom::value, self->state.error, std::move(keys), std::move(values));
    self->quit();
  };
  auto read_back = [self, db, finish] {
    for (std::size_t i = 0; i < db->shard_count(); ++i) {
      self->request(magnetite::shard_handle(*db, i), caf::infinite, magnetite::range_atom::value, std::string("load/"),
                    std::string("load0"), std::uint32_t{10'000})
          .then(
              [self, db, finish](std::vector<std::string>& keys, std::vector<std::string>& values, bool more) {
                if (more) self->state.error = "a shard's range answer was cut short";
                for (std::size_t j = 0; j < keys.size(); ++j) self->state.merged.emplace(keys[j], values[j]);
                if (++self->state.ranges_back == db->shard_count()) finish();
              },
              [self, finish](caf::error& e) {
                self->state.error = "range: " + fail_text(e);
                finish();
              });
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "load/%03zu", i);
    auto shard = magnetite::shard_handle(*db, db->shard_of(key));
    self->request(shard, caf::infinite, magnetite::put_atom::value, std::string(key), "value-" + std::to_string(i),
                  std::int64_t{0})
        .then(
            [self, n, read_back](magnetite::ok_atom) {
              if (++self->state.acked == n) read_back();
            },
            [self, key = std::string(key), finish](caf::error& e) {
              self->state.error = "put " + key + ": " + fail_text(e);
              finish();
            });
  }
  return {};  // nothing else to answer: the requests' handlers do the work
}

// Long on purpose: an example a host reads top to bottom, one numbered step
// after another, as its own program would run them.
int run(const std::string& dir) {
  // --- 1. the host's actor system, and the database inside it ------------
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{2});
  cfg.set("work-stealing.aggressive-poll-attempts", std::size_t{20'000});
  caf::actor_system sys{cfg};

  magnetite::database_options options;
  options.dir = dir;
  options.shards = 4;
  auto opened = magnetite::open_database(sys, options);
  check(opened.is_ok(), "open: " + opened.error().to_string());
  magnetite::database& db = **opened;
  check(&magnetite::actor_system_of(db) == &sys, "the database runs in another actor system than the host's");
  std::printf("opened %s: %zu shards in the host's actor system\n", dir.c_str(), db.shard_count());

  {
    caf::scoped_actor self{sys};
    // A blocking request to the shard of `key`; the reply goes to `on_reply`.
    auto ask = [&](const std::string& key, auto&& on_reply, auto&&... xs) {
      shard_actor shard = magnetite::shard_handle(db, db.shard_of(key));
      check(static_cast<bool>(shard), "no actor for the shard of " + key);
      self->request(shard, caf::infinite, std::forward<decltype(xs)>(xs)...)
          .receive(on_reply, [&](caf::error& e) { check(false, key + ": " + fail_text(e)); });
    };

    // --- 2 and 3. typed messages and the plain API, on the same keys -------
    ask("user/ada", [](magnetite::ok_atom) {}, magnetite::put_atom::value, std::string("user/ada"),
        std::string("lovelace"), std::int64_t{0});
    auto ada = db.get("user/ada");
    check(ada && *ada && **ada == "lovelace", "db.get does not see the put acknowledged by message");
    std::printf("put by message, db.get: user/ada = %s\n", (*ada)->c_str());

    check(db.put("user/bob", "babbage").is_ok(), "db.put user/bob");
    ask("user/bob",
        [](bool found, const std::string& value) {
          check(found && value == "babbage", "a get message does not see db.put's write");
          std::printf("db.put, get by message: user/bob = %s\n", value.c_str());
        },
        magnetite::get_atom::value, std::string("user/bob"));

    // cas (key, has_expected, expected, has_desired, desired, ttl_ns) -> (swapped, has_current, current)
    ask("user/ada",
        [](bool swapped, bool has_current, const std::string& current) {
          check(!swapped && has_current && current == "lovelace", "a cas with a wrong expectation swapped");
        },
        magnetite::cas_atom::value, std::string("user/ada"), true, std::string("byron"), true,
        std::string("king"), std::int64_t{0});
    ask("user/ada", [](bool swapped, bool, const std::string&) { check(swapped, "a cas that should swap did not"); },
        magnetite::cas_atom::value, std::string("user/ada"), true, std::string("lovelace"), true,
        std::string("king"), std::int64_t{0});
    ada = db.get("user/ada");
    check(ada && *ada && **ada == "king", "db.get does not see the swapped value");
    std::printf("cas by message: user/ada = %s\n", (*ada)->c_str());

    // Refused input: an error in the "magnetite" category, back as a status.
    bool refused = false;
    shard_actor any = magnetite::shard_handle(db, 0);
    self->request(any, caf::infinite, magnetite::put_atom::value, std::string(), std::string("x"), std::int64_t{0})
        .receive([](magnetite::ok_atom) {},
                 [&](caf::error& e) {
                   refused = magnetite::to_status(e).code() == magnetite::status_code::invalid_argument;
                   std::printf("empty key refused: %s\n", magnetite::to_status(e).to_string().c_str());
                 });
    check(refused, "an empty key was not refused with invalid_argument");

    // --- 4. the host's own actor: asynchronous writes, a merged range ------
    constexpr std::size_t n = 200;
    auto started = std::chrono::steady_clock::now();
    self->spawn(loader, &db, n, caf::actor_cast<caf::actor>(self));
    self->receive(
        [&](report_atom, const std::string& error, const std::vector<std::string>& keys,
            const std::vector<std::string>& values) {
          check(error.empty(), "loader: " + error);
          check(keys.size() == n, "the shards' ranges hold " + std::to_string(keys.size()) + " keys, not 200");
          auto range = db.range("load/", "load0", 10'000);
          check(range.is_ok() && range->size() == n, "db.range does not see the loader's 200 keys");
          for (std::size_t i = 0; i < n; ++i) {
            check((*range)[i].first == keys[i] && (*range)[i].second == values[i],
                  "db.range and the merged range messages differ at " + keys[i]);
            check(values[i] == "value-" + std::to_string(i), "wrong value for " + keys[i]);
          }
        },
        caf::after(60s) >> [] { check(false, "the loader did not report within 60 s"); });
    std::printf("host actor: %zu async puts acknowledged and read back from %zu shards in %lld ms\n", n,
                db.shard_count(),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - started)
                                           .count()));

    std::uint64_t writes = 0, fsyncs = 0;
    for (std::size_t i = 0; i < db.shard_count(); ++i) {
      self->request(magnetite::shard_handle(db, i), caf::infinite, magnetite::stats_atom::value)
          .receive(
              [&](const magnetite::shard_stats& s) {
                writes += s.writes;
                fsyncs += s.log_fsyncs;
              },
              [&](caf::error& e) { check(false, "stats: " + fail_text(e)); });
    }
    check(writes >= n + 3, "the shards count fewer writes than were acknowledged");
    std::printf("stats by message: %llu writes, %llu log fsyncs\n", static_cast<unsigned long long>(writes),
                static_cast<unsigned long long>(fsyncs));

    // The root a commit message returns is the one db.commit() reports.
    std::size_t home = db.shard_of("user/ada");
    std::string root;
    ask("user/ada", [&](const std::string& hex) { root = hex; }, magnetite::commit_atom::value);
    auto commit = db.commit();
    check(commit.is_ok(), "db.commit: " + commit.error().to_string());
    check(root.size() == 32 && commit->roots[home].to_hex() == root,
          "the commit message's root " + root + " is not db.commit()'s " + commit->roots[home].to_hex());
    std::printf("commit by message: shard %zu root %s, combined %s\n", home, root.c_str(),
                commit->combined.to_hex().c_str());

    // --- 5. TTL by message ---------------------------------------------------
    const std::int64_t ttl_ns = std::chrono::nanoseconds(1s).count();
    ask("token/1", [](magnetite::ok_atom) {}, magnetite::put_atom::value, std::string("token/1"),
        std::string("secret"), ttl_ns);
    auto token = db.get("token/1");
    check(token && *token && **token == "secret", "a value with a 1 s TTL is missing right after its put");
    std::this_thread::sleep_for(1200ms);
    token = db.get("token/1");
    check(token && !*token, "db.get still returns a value past its TTL");
    ask("token/1", [](bool found, const std::string&) { check(!found, "a get message returns an expired value"); },
        magnetite::get_atom::value, std::string("token/1"));
    std::printf("ttl by message: token/1 expired after 1 s for both paths\n");
  }  // the scoped actor goes before the database, the database before the system
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::filesystem::path scratch;
  if (argc > 1) {
    dir = argv[1];
  } else {
    std::string pattern = (std::filesystem::temp_directory_path() / "magnetite-host-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return std::fprintf(stderr, "host_program: mkdtemp failed\n"), 1;
    scratch = pattern;
    dir = (scratch / "db").string();
  }
  int rc = 1;
  try {
    rc = run(dir);
    std::printf("host_program: ok\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_program: FAILED: %s\n", e.what());
  }
  if (!scratch.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  return rc;
}
