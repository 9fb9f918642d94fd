// Bounded admission (database_options::admission_bytes/_requests) through the
// database: a shard held inside a write fills its budget; past it an
// asynchronous write is answered `busy` on the calling thread with nothing
// written, a blocking one waits for room, and everything admitted is durable
// once answered. The shard is held by the before_write hook, so what is in
// the budget is known exactly, never timed.
#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "actors/database_core.h"
#include "magnetite/state.h"
#include "tests/support/database_fixture.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace std::chrono_literals;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

// One shard whose actor stops inside the write of key "hold" until released.
struct held_shard {
  std::latch released{1};
  std::atomic<bool> inside{false};
  core_options options(const std::string& dir, std::size_t requests) {
    auto o = options_for(dir, 1);
    o.admission_requests = requests;
    o.before_write = [this](const std::string& key) {
      if (key != "hold") return;
      inside = true;
      released.wait();
    };
    return o;
  }
  void until_inside() const {
    while (!inside) std::this_thread::yield();
  }
};

const admission_budget& budget_of(database& db) { return *db.core().slot_of(0)->admission; }

}  // namespace

TEST_CASE("admission: past the budget an async write is busy at once, a blocking one waits; all admitted land") {
  testing::temp_dir d("admission");
  held_shard h;
  std::set<std::string> refused;
  std::mutex mu;
  std::vector<std::string> answered_ok;
  std::atomic<int> answers{0};
  {
    auto db = must_open(h.options(d.path(), 16));
    CHECK(budget_of(*db).max_requests() == 16);
    db->put_async("hold", "v", std::nullopt, [&](status s) {
      REQUIRE(s.is_ok());
      ++answers;
    });
    h.until_inside();
    // 15 more fit (16 requests); the rest are refused on this thread.
    for (int i = 0; i < 40; ++i) {
      std::string k = fmt::format("k{:02}", i);
      db->put_async(k, "v", std::nullopt, [&, k, here = std::this_thread::get_id()](status s) {
        ++answers;
        std::lock_guard lk(mu);
        if (s.is_ok()) {
          answered_ok.push_back(k);
          return;
        }
        CHECK(s.code() == status_code::busy);
        CHECK(s.category() == status_category::transient);
        CHECK(std::this_thread::get_id() == here);
        refused.insert(k);
      });
    }
    CHECK(refused.size() == 25);
    CHECK(budget_of(*db).now().requests == 16);
    CHECK(budget_of(*db).now().refused == 25);
    // A blocking write waits for room rather than failing.
    std::atomic<bool> blocking_done{false};
    std::thread blocking([&] {
      CHECK(db->put("blocking", "v").is_ok());
      blocking_done = true;
    });
    while (budget_of(*db).now().waiting < 1) std::this_thread::yield();
    CHECK_FALSE(blocking_done.load());
    h.released.count_down();
    blocking.join();
    CHECK(blocking_done.load());
    while (answers < 41) std::this_thread::yield();
    CHECK(answered_ok.size() == 15);
    auto st = db->stats();
    REQUIRE(st.is_ok());
    REQUIRE(st->admission.size() == 1);
    CHECK(st->admission[0].admitted == 17);
    CHECK(st->admission[0].refused == 25);
    CHECK(st->admission[0].waited == 1);
    CHECK(st->admission[0].waiting == 0);
    CHECK(st->admission[0].requests == 0);
    CHECK(st->admission[0].bytes == 0);
  }
  // Reopened: every admitted write is there, no refused one is.
  auto db = must_open(options_for(d.path(), 1));
  for (const auto& k : answered_ok) CHECK(db->get(k).value() == std::optional<std::string>("v"));
  CHECK(db->get("blocking").value() == std::optional<std::string>("v"));
  for (const auto& k : refused) CHECK_FALSE(db->get(k).value().has_value());
}

TEST_CASE("admission: a conditional batch with a deadline waits for room until then, and is busy after") {
  testing::temp_dir d("admission");
  held_shard h;
  auto db = must_open(h.options(d.path(), 16));
  db->put_async("hold", "v", std::nullopt, [](status) {});
  h.until_inside();
  for (int i = 0; i < 15; ++i) db->put_async(fmt::format("k{}", i), "v", std::nullopt, [](status) {});
  REQUIRE(budget_of(*db).now().requests == 16);
  state::records recs(*db);
  auto t = recs.begin();
  REQUIRE(t.put("n", "k", state::json(1)).is_ok());
  auto r = t.commit(std::chrono::steady_clock::now() + 30ms);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.error().code() == status_code::busy);
  CHECK(r.error().category() == status_category::transient);
  h.released.count_down();
  REQUIRE(db->put("after", "x").is_ok());
  CHECK_FALSE(recs.load("n", "k").value().has_value());
}

TEST_CASE("admission: a budget below its floor is refused at open, naming the option") {
  testing::temp_dir d("admission");
  auto o = options_for(d.path(), 1);
  o.admission_bytes = 1000;
  auto db = open_database(o);
  REQUIRE_FALSE(db.is_ok());
  CHECK(db.error().code() == status_code::invalid_argument);
  CHECK(db.error().message().find("admission_bytes") != std::string::npos);
  o = options_for(d.path(), 1);
  o.admission_requests = 0;
  db = open_database(o);
  REQUIRE_FALSE(db.is_ok());
  CHECK(db.error().message().find("admission_requests") != std::string::npos);
}
