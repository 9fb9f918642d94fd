// Crash tests of the WAL.
//
// 1. Randomised crash points on fault_env: a random workload (puts, deletes,
//    batches, replication state, syncs, commits, injected fsync/write/ENOSPC
//    failures) is cut by a simulated power loss that keeps a random prefix of the
//    unsynced writes, possibly torn. Recovery must return EXACTLY a prefix of
//    what was appended that covers every frame a completed sync made durable.
// 2. A real child process writing to a real directory is killed with SIGKILL at
//    random moments; every frame it acknowledged must be recovered intact.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "tests/support/temp_dir.h"
#include "tests/support/wal_fixture.h"

using namespace magnetite;
using namespace magnetite::testing;

namespace {

// What the test believes was appended, by sequence number (index = seq - 1).
struct model_log {
  std::vector<wal::record> records;

  void add(wal::record r) {
    REQUIRE(r.sequence == records.size() + 1);
    records.push_back(std::move(r));
  }

  // Checks `rec` against the prefix of `records` that ends before next_sequence.
  void check_recovered(const wal::recovered_log& rec) const {
    std::uint64_t end = rec.next_sequence - 1;
    REQUIRE(end <= records.size());
    std::optional<wal::commit_record> commit;
    std::optional<std::string> state;
    std::vector<wal::record> tail;
    for (std::uint64_t i = 0; i < end; ++i) {
      const auto& r = records[i];
      if (r.type == wal::record_type::commit) {
        commit = r.commit;
        // A two-step commit covers only the frames before its checkpoint began.
        std::erase_if(tail, [&](const wal::record& t) { return t.sequence <= *r.commit.covered_sequence; });
      } else if (r.type == wal::record_type::replication_state) {
        state = r.payload;
      } else {
        tail.push_back(r);
      }
    }
    CHECK(rec.last_commit == commit);
    CHECK(rec.replication_state == state);
    REQUIRE(rec.tail.size() == tail.size());
    for (std::size_t i = 0; i < tail.size(); ++i) CHECK(rec.tail[i] == tail[i]);
  }

  std::optional<std::string> latest_state() const {
    for (auto it = records.rbegin(); it != records.rend(); ++it)
      if (it->type == wal::record_type::replication_state) return it->payload;
    return std::nullopt;
  }
};

wal::record data_record(wal::record_type type, std::uint64_t seq, std::vector<wal::mutation> m) {
  wal::record r;
  r.type = type;
  r.sequence = seq;
  r.mutations = std::move(m);
  return r;
}

}  // namespace

TEST_CASE("crash: at 1000+ random points, recovery returns a prefix that covers every synced frame") {
  int crash_points = 0;
  int torn_tails = 0;
  int injected = 0;
  for (std::uint64_t seed = 0; seed < 250; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    wal_fixture fx;
    auto now = std::chrono::steady_clock::time_point{};
    fx.options.policy = static_cast<wal::fsync_policy>(rng() % 3);
    fx.options.interval = std::chrono::milliseconds(5);
    fx.options.clock = [&now] { return now; };
    model_log model;
    std::uint64_t acked = 0;  // highest sequence a completed sync or commit made durable
    auto [first, w] = fx.reopen();
    // A checkpoint begun and not committed: the last sequence it covers.
    std::optional<std::uint64_t> begun;

    for (int cycle = 0; cycle < 5; ++cycle) {
      int ops = static_cast<int>(rng() % 60);
      for (int op = 0; op < ops; ++op) {
        now += std::chrono::milliseconds(rng() % 3);
        std::uint64_t seq = w->last_sequence() + 1;
        unsigned dice = static_cast<unsigned>(rng() % 100);
        bool ok = true;
        if (dice < 50) {
          std::string k = fmt::format("k{}", rng() % 1000), v(rng() % 300, static_cast<char>('a' + rng() % 26));
          ok = w->append_put(k, v).is_ok();
          if (ok) model.add(data_record(wal::record_type::put, seq, {{wal::mutation_kind::put, k, v}}));
        } else if (dice < 60) {
          std::string k = fmt::format("k{}", rng() % 1000);
          ok = w->append_delete(k).is_ok();
          if (ok) model.add(data_record(wal::record_type::del, seq, {{wal::mutation_kind::del, k, ""}}));
        } else if (dice < 70) {
          std::vector<wal::mutation> ms;
          std::vector<wal::mutation_view> views;
          for (std::uint64_t i = 0, n = 1 + rng() % 5; i < n; ++i) {
            bool put = rng() % 3 != 0;
            ms.push_back({put ? wal::mutation_kind::put : wal::mutation_kind::del, fmt::format("b{}", rng() % 1000),
                          put ? std::string(rng() % 50, 'b') : ""});
          }
          for (auto& m : ms) views.push_back({m.kind, m.key, m.value});
          ok = w->append_batch(views).is_ok();
          if (ok) model.add(data_record(wal::record_type::batch, seq, ms));
        } else if (dice < 74) {
          std::string p = fmt::format("ballot-{}", rng() % 100);
          ok = w->append_replication_state(p).is_ok();
          if (ok) {
            wal::record r;
            r.type = wal::record_type::replication_state;
            r.sequence = seq;
            r.payload = p;
            model.add(r);
          }
        } else if (dice < 78 && !begun && rng() % 2 == 0) {
          // A checkpoint's first step: a new segment, carrying the state. Its
          // frames get these sequence numbers if they are written at all; the
          // prefix check decides whether they count.
          auto carried = model.latest_state();
          auto covered = w->begin_checkpoint();
          ok = covered.is_ok();
          if (ok) {
            CHECK(*covered == seq - 1);
            begun = *covered;
          }
          if (carried) {
            wal::record r;
            r.type = wal::record_type::replication_state;
            r.sequence = seq;
            r.payload = *carried;
            model.add(r);
          }
          if (ok) acked = w->durable_sequence();
        } else if (dice < 78) {
          // A begun checkpoint's marker goes after the frames written since
          // and covers those before it; without one, the marker begins the
          // new segment and covers every frame before.
          wal::commit_record c{hash128::of(fmt::format("root-{}", seq)), rng() % 100000};
          auto carried = model.latest_state();
          bool two_step = begun.has_value();
          ok = w->commit(c).is_ok();
          wal::record m;
          m.type = wal::record_type::commit;
          m.sequence = seq;
          m.commit = c;
          m.commit.covered_sequence = two_step ? *begun : seq - 1;
          model.add(m);
          if (carried && !two_step) {
            wal::record r;
            r.type = wal::record_type::replication_state;
            r.sequence = seq + 1;
            r.payload = *carried;
            model.add(r);
          }
          begun.reset();
          if (ok) acked = w->durable_sequence();
        } else {
          if (rng() % 12 == 0) {
            ++injected;
            switch (rng() % 4) {
              case 0:
                fx.env.fail_sync(1);
                break;
              case 3:
                fx.env.fail_remove(1);
                break;
              case 1:
                fx.env.fail_write(1, status_code::no_space, static_cast<std::size_t>(rng() % 200));
                break;
              default:
                fx.env.fail_write(1, status_code::io_error, 0);
                break;
            }
          }
          ok = (rng() % 4 == 0 ? w->sync_durable() : w->sync()).is_ok();
          if (ok) acked = w->durable_sequence();
        }
        if (!ok) {
          CHECK_FALSE(w->failure().is_ok());  // only I/O failures end up here
          break;
        }
      }
      fx.env.clear_faults();
      w.reset();
      begun.reset();  // a checkpoint not committed is forgotten with its writer
      // Either the machine loses power now, or only the process dies and the
      // machine loses power after the restart's recovery: what that recovery
      // returned must survive the power cut.
      bool process_first = rng() % 3 == 0;
      auto power = rng() % 2 ? fault_env::unsynced::random : fault_env::unsynced::reorder;
      if (process_first)
        fx.env.process_crash();
      else
        fx.env.crash(power, rng());
      ++crash_points;

      auto rec = fx.recover();
      REQUIRE_MESSAGE(rec.is_ok(), rec.error().to_string());
      CHECK(rec->next_sequence - 1 >= acked);  // nothing acknowledged is lost
      model.check_recovered(*rec);
      if (process_first) {
        fx.env.crash(power, rng());
        ++crash_points;
        auto again = fx.recover();
        REQUIRE_MESSAGE(again.is_ok(), again.error().to_string());
        CHECK(again->next_sequence == rec->next_sequence);
        model.check_recovered(*again);
        rec = std::move(again);
      }
      if (rec->discarded_bytes > 0) ++torn_tails;
      model.records.resize(rec->next_sequence - 1);
      acked = rec->next_sequence - 1;  // the writer makes the recovered tail durable
      auto reopened = wal::log_writer::open(fx.env, wal_dir, fx.options, *rec);
      REQUIRE_MESSAGE(reopened.is_ok(), reopened.error().to_string());
      w = std::move(*reopened);
    }
  }
  MESSAGE(fmt::format("{} crash points, {} torn tails cut, {} faults injected", crash_points, torn_tails, injected));
  CHECK(crash_points >= 1000);
  CHECK(torn_tails > 50);  // the crashes really tore frames
  CHECK(injected > 50);
}

TEST_CASE("crash: a failed checkpoint, a restart, then a power cut: nothing acknowledged is lost") {
  // The new segment's fsync fails (its pages are dropped), the process dies and
  // restarts, recovery runs, and then the power goes.
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.fail_sync(1);
  CHECK_FALSE(w->commit({hash128::of("r"), 1}).is_ok());
  w.reset();
  fx.env.process_crash();
  auto r1 = fx.recover();
  REQUIRE(r1.is_ok());
  CHECK(r1->tail.size() == 1);
  fx.env.crash(fault_env::unsynced::lose);
  auto r2 = fx.recover();
  REQUIRE_MESSAGE(r2.is_ok(), r2.error().to_string());
  REQUIRE(r2->tail.size() == 1);
  CHECK(r2->tail[0].mutations[0].key == "a");
  CHECK(r2->next_sequence == r1->next_sequence);
}

TEST_CASE("crash: frames a failed fsync left only in the page cache are made durable by recovery") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync().is_ok());
  REQUIRE(w->append_put("b", "2").is_ok());
  fx.env.fail_sync(1);
  CHECK_FALSE(w->sync().is_ok());
  w.reset();
  fx.env.process_crash();
  auto [r1, w1] = fx.reopen();  // recovery reads "b" from the page cache
  REQUIRE(r1.tail.size() == 2);
  REQUIRE(w1->append_put("c", "3").is_ok());
  REQUIRE(w1->sync().is_ok());  // "c" is acknowledged on top of "b"
  fx.env.crash(fault_env::unsynced::lose);
  auto r2 = fx.recover();
  REQUIRE_MESSAGE(r2.is_ok(), r2.error().to_string());
  REQUIRE(r2->tail.size() == 3);
  CHECK(r2->tail[2].mutations[0].key == "c");
}

TEST_CASE("crash: a checkpoint torn by a crash never loses the replication state") {
  for (std::size_t keep : {0, 40, 64, 76, 90, 120}) {
    CAPTURE(keep);
    wal_fixture fx;
    auto [rec, w] = fx.reopen();
    REQUIRE(w->append_replication_state("ballot-7").is_ok());
    REQUIRE(w->sync().is_ok());
    fx.env.fail_write(1, status_code::no_space, keep);  // the new segment's only write
    CHECK_FALSE(w->commit({hash128::of("r"), 1}).is_ok());
    w.reset();
    fx.env.crash(fault_env::unsynced::keep);
    auto r = fx.recover();
    REQUIRE(r.is_ok());
    CHECK(r->replication_state == "ballot-7");
  }
}

TEST_CASE("crash: a torn write whose value holds WAL bytes is a torn tail, not corruption") {
  // The value carries a whole segment of another log: intact frames, flagged
  // follows_sync, but salted for that other segment.
  wal_fixture other;
  {
    auto [rec, w] = other.reopen();
    for (int i = 0; i < 5; ++i) {
      REQUIRE(w->append_put(key_of(i), value_of(i)).is_ok());
      REQUIRE(w->sync().is_ok());
    }
  }
  std::string foreign = *other.env.contents(other.segment_path(1));
  wal_fixture fx;
  fx.options.policy = wal::fsync_policy::commit_only;
  auto [rec, w] = fx.reopen();
  REQUIRE(w->append_put("a", "1").is_ok());
  REQUIRE(w->sync_durable().is_ok());
  REQUIRE(w->append_put("payload", foreign).is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.crash_tearing_last_write(fx.segment_path(1), 30);  // the header of the frame is cut
  auto r = fx.recover();
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  CHECK(r->tail.size() == 1);
  CHECK(r->discarded_bytes == 30);
}

TEST_CASE("crash: a failed removal of an old segment leaves a log that recovers") {
  wal_fixture fx;
  auto [rec, w] = fx.reopen();
  for (int c = 0; c < 3; ++c) {
    REQUIRE(w->append_put(key_of(c), "v").is_ok());
    REQUIRE(w->sync().is_ok());
    if (c < 2) fx.env.fail_remove(1);  // keep old segments around
    REQUIRE(w->commit({hash128::of(fmt::format("r{}", c)), static_cast<std::uint64_t>(c)}).is_ok());
  }
  REQUIRE(w->append_put("after", "v").is_ok());
  REQUIRE(w->sync().is_ok());
  fx.env.crash();
  auto r = fx.recover();
  REQUIRE_MESSAGE(r.is_ok(), r.error().to_string());
  CHECK(r->last_commit->node_store_length == 2);
  REQUIRE(r->tail.size() == 1);
  CHECK(fx.env.list(wal_dir)->size() == 1);  // superseded segments removed
}

namespace {

std::string value_for(std::string_view key) { return fmt::format("{}={}", key, hash128::of(key).to_hex()); }

// The child: appends groups of puts forever, reporting each durable sequence
// number to the parent through `ack_fd` only after sync() returned ok.
[[noreturn]] void run_writer_child(const std::string& dir, int ack_fd, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto rec = wal::recover(env::posix(), dir);
  if (!rec) ::_exit(10);
  auto w = wal::log_writer::open(env::posix(), dir, {}, *rec);
  if (!w) ::_exit(11);
  for (std::uint64_t group = 0;; ++group) {
    for (std::uint64_t i = 0, n = 1 + rng() % 16; i < n; ++i) {
      std::string key = fmt::format("s{}-g{}-{}", seed, group, i);
      if (!(*w)->append_put(key, value_for(key))) ::_exit(12);
    }
    if (!(*w)->sync()) ::_exit(13);
    if (group % 50 == 49 && !(*w)->commit({hash128::of(fmt::format("g{}", group)), group})) ::_exit(14);
    std::uint64_t durable = (*w)->durable_sequence();
    if (::write(ack_fd, &durable, sizeof durable) != sizeof durable) ::_exit(15);
  }
}

}  // namespace

TEST_CASE("crash: a writer process killed with SIGKILL at random moments loses no acknowledged frame") {
  testing::temp_dir dir("walkill");
  std::string wal_path = dir / "wal";
  REQUIRE(env::posix().create_dir(wal_path).is_ok());
  std::mt19937_64 rng(2026);
  std::uint64_t acked = 0;
  const int iterations = 30;
  for (int it = 0; it < iterations; ++it) {
    CAPTURE(it);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(fds[0]);
      run_writer_child(wal_path, fds[1], 1000 + static_cast<std::uint64_t>(it));
    }
    ::close(fds[1]);
    // Kill after a random number of acknowledgements: the child is mid-write.
    std::uint64_t target = 1 + rng() % 200, seen = 0, got = 0;
    while (seen < target && ::read(fds[0], &got, sizeof got) == sizeof got) {
      acked = std::max(acked, got);
      ++seen;
    }
    ::kill(child, SIGKILL);
    // Acknowledgements already in the pipe were made before the kill: count them.
    while (::read(fds[0], &got, sizeof got) == sizeof got) acked = std::max(acked, got);
    ::close(fds[0]);
    int wstatus = 0;
    REQUIRE(::waitpid(child, &wstatus, 0) == child);
    REQUIRE_MESSAGE(WIFSIGNALED(wstatus), fmt::format("child exited early with {}", WEXITSTATUS(wstatus)));

    auto rec = wal::recover(env::posix(), wal_path);
    REQUIRE_MESSAGE(rec.is_ok(), rec.error().to_string());
    CHECK(rec->next_sequence - 1 >= acked);
    std::uint64_t expect_seq = rec->tail.empty() ? 0 : rec->tail.front().sequence;
    for (const auto& r : rec->tail) {
      REQUIRE(r.type == wal::record_type::put);
      CHECK(r.sequence == expect_seq++);
      CHECK(r.mutations[0].value == value_for(r.mutations[0].key));
    }
  }
}
