// Three `magnetite serve` processes on loopback (the built binary, as an
// operator runs it). A client in this process links to them as node 0. The
// nodes elect an owner of shard 0 by themselves; the client writes through it
// and SIGKILLs it while writes are in flight. Another node must take the
// shard over unasked and hold every acknowledged write; the killed node,
// started again on its disk, must be linked again and catch up by
// anti-entropy until the three replicas hold the same tree.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "actors/caf_headers.h"  // before any other CAF header

#include "core/env.h"
#include "core/shard_routing.h"
#include "magnetite/cluster_client.h"
#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
#include "replication/node.h"
#include "tests/support/ledgers.h"
#include "tests/support/magnetite_process.h"
#include "tests/support/poll.h"
#include "tests/support/raw_socket.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

std::string slurp(const std::string& path) {
  auto t = read_whole_file(env::posix(), path);
  return t ? *t : std::string();
}

}  // namespace

// Three `magnetite serve` processes on loopback, each linked to the other
// two, and a client in this process linked to them as node 0.
struct serve_cluster {
  testing::temp_dir dir{"cluster"};
  std::uint16_t base = static_cast<std::uint16_t>(24000 + (::getpid() % 1000) * 5);
  std::string cluster_path = dir / "cluster";
  cluster_file cluster;
  std::vector<pid_t> pids;
  std::unique_ptr<caf::actor_system_config> cfg = std::make_unique<caf::actor_system_config>();
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> client;
  std::map<std::uint32_t, replica_actor> replicas;  // of shard 0

  // `settings`: cluster-file lines before the nodes.
  explicit serve_cluster(const std::string& name, const std::string& settings = "") {
    std::string text = fmt::format(
        "cluster {}\nshards 2\ntls off\n{}node 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\n"
        "node 3 127.0.0.1 {}\n",
        name, settings, base, base + 1, base + 2);
    std::ofstream(cluster_path) << text;
    cluster = must(cluster_file::parse(text));
    for (std::uint32_t id = 1; id <= 3; ++id) pids.push_back(start(id, fmt::format("out{}", id)));
    for (std::uint32_t id = 1; id <= 3; ++id) {
      std::string out = dir / fmt::format("out{}", id);
      bool linked = testing::poll_until(
          [&] {
            auto s = slurp(out);
            std::size_t n = 0;
            for (auto at = s.find("linked node"); at != std::string::npos; at = s.find("linked node", at + 1)) ++n;
            return n == 2;
          },
          std::chrono::seconds(60));
      INFO(slurp(out));
      REQUIRE(linked);
    }
    configure_system(*cfg);
    sys = std::make_unique<caf::actor_system>(*cfg);
    client = std::make_unique<caf::scoped_actor>(*sys);
    for (std::uint32_t id = 1; id <= 3; ++id) {
      auto r = replica_of(id);
      REQUIRE(r);
      replicas[id] = *r;
    }
  }

  ~serve_cluster() {
    for (auto pid : pids) ::kill(pid, SIGKILL);
    for (auto pid : pids) ::waitpid(pid, nullptr, 0);
  }

  pid_t start(std::uint32_t id, const std::string& out) {
    return testing::spawn_serve(dir / fmt::format("node{}", id), id, cluster_path, dir / out);
  }

  // Shard 0's replica on node id, through a hello as node 0 (a client).
  std::optional<replica_actor> replica_of(std::uint32_t id) {
    auto node = sys->middleman().remote_actor<node_actor>("127.0.0.1", base + id - 1);
    if (!node) return std::nullopt;
    std::vector<caf::actor> out;
    (*client)
        ->request(*node, std::chrono::seconds(10), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                  protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { out = r; }, [&](caf::error&) {});
    if (out.size() != 2) return std::nullopt;
    return caf::actor_cast<replica_actor>(out[0]);
  }

  // Waits until node id (started again) answers a hello.
  bool relink(std::uint32_t id) {
    return testing::poll_until(
        [&] {
          auto r = replica_of(id);
          if (r) replicas[id] = *r;
          return r.has_value();
        },
        std::chrono::seconds(60));
  }

  std::optional<replica_info> info_of(std::uint32_t id) {
    std::optional<replica_info> out;
    (*client)
        ->request(replicas[id], std::chrono::seconds(10), info_atom::value)
        .receive([&](const replica_info& i) { out = i; }, [&](caf::error&) {});
    return out;
  }

  // A client that rides out a failover (a few heartbeats), once shard 0 has
  // an owner.
  std::unique_ptr<cluster_client> failover_client() {
    REQUIRE(testing::poll_until([&] { return owner_among({1, 2, 3}).has_value(); }, std::chrono::seconds(60)));
    cluster_client_options o;
    o.cluster_file = cluster_path;
    o.call_timeout = std::chrono::seconds(60);
    o.attempt_timeout = std::chrono::milliseconds(1000);
    return must(cluster_client::connect(o));
  }

  // SIGKILLs shard 0's owner once `done` reaches a number drawn from
  // [at_least, at_least + spread) by the run's seed, a moment after; the
  // node killed.
  std::uint32_t kill_owner_after(const std::atomic<int>& done, int at_least, int spread) {
    std::mt19937_64 rng(doctest::getContextOptions()->rand_seed);
    int after = at_least + static_cast<int>(rng() % static_cast<std::uint64_t>(spread));
    while (done.load() < after) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    auto owner = owner_among({1, 2, 3});
    REQUIRE(owner);
    ::kill(pids[*owner - 1], SIGKILL);
    MESSAGE("node " << *owner << " killed after " << after);
    return *owner;
  }

  // The one node whose replica says it owns shard 0, among those given.
  std::optional<std::uint32_t> owner_among(const std::vector<std::uint32_t>& ids) {
    std::optional<std::uint32_t> found;
    for (auto id : ids) {
      auto i = info_of(id);
      if (i && i->role == 2) {
        if (found) return std::nullopt;
        found = id;
      }
    }
    return found;
  }

  // Every replica of shard 0 on one tree, within `limit`.
  bool converged(std::chrono::seconds limit) {
    return testing::poll_until(
        [&] {
          std::optional<hash128> root;
          for (std::uint32_t id = 1; id <= 3; ++id) {
            auto i = info_of(id);
            if (!i || (root && *root != i->root)) return false;
            root = i->root;
          }
          return true;
        },
        limit);
  }

  status put(std::uint32_t id, const std::string& k, const std::string& v) {
    status out = status::io_error("no answer");
    (*client)
        ->request(replicas[id], std::chrono::seconds(5), put_atom::value, k, v, std::int64_t{0})
        .receive([&](ok_atom) { out = status::ok(); }, [&](caf::error& e) { out = to_status(e); });
    return out;
  }

  status del(std::uint32_t id, const std::string& k) {
    status out = status::io_error("no answer");
    (*client)
        ->request(replicas[id], std::chrono::seconds(5), del_atom::value, k)
        .receive([&](ok_atom) { out = status::ok(); }, [&](caf::error& e) { out = to_status(e); });
    return out;
  }

  result<std::optional<std::string>> get(std::uint32_t id, const std::string& k) {
    result<std::optional<std::string>> out = status::io_error("no answer");
    (*client)
        ->request(replicas[id], std::chrono::seconds(10), get_atom::value, k)
        .receive([&](bool found, const std::string& v) { out = found ? std::optional<std::string>(v) : std::nullopt; },
                 [&](caf::error& e) { out = to_status(e); });
    return out;
  }

  // Stops every node with SIGTERM: each must exit cleanly.
  void stop() {
    for (auto pid : pids) ::kill(pid, SIGTERM);
    for (auto pid : pids) {
      int wstatus = 0;
      ::waitpid(pid, &wstatus, 0);
      CHECK((WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0));
    }
    pids.clear();
  }
};

TEST_CASE(
    "cluster processes: the owner is SIGKILLed during writes; another takes over unasked with every "
    "acknowledged write; restarted, the killed node catches up") {
  serve_cluster c("killtest");
  std::optional<std::uint32_t> first;
  REQUIRE(testing::poll_until(
      [&] {
        return (first = c.owner_among({1, 2, 3})).has_value();
      },
      std::chrono::seconds(60)));
  MESSAGE("node " << *first << " was elected owner of shard 0 unasked");

  // Writes one after another; a thread SIGKILLs the owner at a random moment
  // once some are acknowledged.
  std::atomic<int> acked_count{0};
  std::mt19937_64 rng(doctest::getContextOptions()->rand_seed);
  int kill_after = 20 + static_cast<int>(rng() % 40);
  pid_t victim = c.pids[*first - 1];
  std::thread killer([&] {
    while (acked_count.load() < kill_after) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    ::kill(victim, SIGKILL);
  });
  std::map<std::string, std::string> acked;
  for (int i = 0; i < 10'000; ++i) {
    std::string k = fmt::format("k{:05}", i), v = fmt::format("v{}", i);
    if (!c.put(*first, k, v).is_ok()) {
      if (acked_count.load() < kill_after) continue;  // refused before the kill: not acknowledged
      break;
    }
    acked[k] = v;
    ++acked_count;
  }
  killer.join();
  int wstatus = 0;
  ::waitpid(victim, &wstatus, 0);
  CHECK(WIFSIGNALED(wstatus));
  MESSAGE(acked.size() << " writes acknowledged before node " << *first << " was killed");
  REQUIRE(acked.size() >= static_cast<std::size_t>(kill_after));

  // Nobody is asked to campaign: the survivors detect the loss and elect.
  std::vector<std::uint32_t> survivors;
  for (std::uint32_t id = 1; id <= 3; ++id)
    if (id != *first) survivors.push_back(id);
  std::optional<std::uint32_t> next;
  REQUIRE(testing::poll_until([&] { return (next = c.owner_among(survivors)).has_value(); }, std::chrono::seconds(60)));
  MESSAGE("node " << *next << " took shard 0 over");
  std::size_t missing = 0;
  for (const auto& [k, v] : acked) {
    auto got = c.get(*next, k);
    REQUIRE(got.is_ok());
    if (*got != v) ++missing;
  }
  CHECK(missing == 0);
  CHECK(c.put(*next, "late", "x").is_ok());

  // The killed node, started again on its disk, is linked again by the
  // others and catches up in the background: every replica's tree equal.
  std::string again = fmt::format("out{}-again", *first);
  c.pids[*first - 1] = c.start(*first, again);
  REQUIRE(c.relink(*first));
  bool converged = c.converged(std::chrono::seconds(120));
  INFO(slurp(c.dir / again));
  CHECK(converged);
  CHECK(c.owner_among({1, 2, 3}) == next);  // the returning node deposed nobody
  c.stop();
}

TEST_CASE(
    "cluster processes: a node SIGKILLed and kept down past the tombstone retention comes back absent, "
    "adopts a peer's tree, and does not bring back a key deleted and purged meanwhile") {
  // Retention 10 s: a replica is absent 5 s after its last sync; anti-entropy
  // syncs each about once a second.
  serve_cluster c("absence", "tombstone_retention_s 10\n");
  std::optional<std::uint32_t> o;
  REQUIRE(testing::poll_until([&] { return (o = c.owner_among({1, 2, 3})).has_value(); }, std::chrono::seconds(60)));
  std::uint32_t f = *o == 3 ? 2 : 3;
  REQUIRE(c.put(*o, "gone", "old").is_ok());
  REQUIRE(c.put(*o, "kept", "1").is_ok());
  REQUIRE(c.converged(std::chrono::seconds(60)));  // f holds "gone"

  ::kill(c.pids[f - 1], SIGKILL);
  ::waitpid(c.pids[f - 1], nullptr, 0);
  auto killed_at = system_now_ns();
  REQUIRE(c.del(*o, "gone").is_ok());
  REQUIRE(c.put(*o, "new", "2").is_ok());
  // Past the tombstone's purge (10 s after the delete) on the two that stayed.
  std::this_thread::sleep_for(std::chrono::seconds(12));  // real time must pass: the purge runs on the wall clock
  CHECK(c.owner_among({1, 2, 3}) == o);

  std::string again = fmt::format("out{}-again", f);
  c.pids[f - 1] = c.start(f, again);
  REQUIRE(c.relink(f));
  bool caught_up = testing::poll_until(
      [&] {
        auto i = c.info_of(f);
        return i && !i->absent && i->synced_ns > killed_at;
      },
      std::chrono::seconds(60));
  INFO(slurp(c.dir / again));
  REQUIRE(caught_up);
  CHECK(c.converged(std::chrono::seconds(60)));
  CHECK(c.get(*o, "gone").value() == std::nullopt);
  CHECK(c.get(*o, "kept").value() == "1");
  CHECK(c.get(*o, "new").value() == "2");
  CHECK(c.owner_among({1, 2, 3}) == o);
  c.stop();
}

TEST_CASE(
    "magnetite cluster-demo: failover after SIGKILL loses nothing acknowledged, and the killed node catches "
    "up by delta") {
  testing::temp_dir dir("cluster-demo");
  std::string out = dir / "out";
  auto [code, text] =
      testing::run_magnetite({"cluster-demo", "--dir", dir / "nodes", "--keys", "300", "--missed", "100"}, out);
  INFO(text);
  CHECK(code == 0);
  // The demo's own checks, as it prints them: every acknowledged write read
  // back after the failover, and the restarted node on the owner's root.
  CHECK(text.find("acknowledged writes present, 0 lost") != std::string::npos);
  CHECK(text.find("caught up in the background") != std::string::npos);
  CHECK(text.find("nothing acknowledged was lost.") != std::string::npos);
  // It refuses a directory that already holds something.
  CHECK(testing::run_magnetite({"cluster-demo", "--dir", dir / "nodes"}, out).first == 2);
}

TEST_CASE("cluster processes: a cluster client's CAS increments survive SIGKILL of the owner, each exactly once") {
  serve_cluster c("once");
  auto client = c.failover_client();
  // Four counters on shard 0 (the one owner_among watches), one a thread:
  // read, then CAS n -> n + 1. A CAS applied but answered "refused" (or
  // applied twice) would leave a counter above its thread's count.
  std::vector<std::string> counters;
  for (int i = 0; counters.size() < 4; ++i)
    if (client->shard_of(fmt::format("counter{}", i)) == 0) counters.push_back(fmt::format("counter{}", i));
  constexpr int per_thread = 60;
  std::vector<int> swapped(counters.size(), 0);
  std::vector<std::string> failed(counters.size());
  std::atomic<int> total{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < counters.size(); ++t)
    threads.emplace_back([&, t] {
      while (swapped[t] < per_thread) {
        auto now = client->get(counters[t]);
        if (!now) return (void)(failed[t] = now.error().to_string());
        int n = now->has_value() ? std::stoi(**now) : 0;
        auto next = std::to_string(n + 1);
        auto out = n == 0 ? client->cas(counters[t], std::nullopt, std::string_view(next))
                          : client->cas(counters[t], std::string_view(**now), std::string_view(next));
        if (!out) return (void)(failed[t] = out.error().to_string());
        if (out->swapped) {
          ++swapped[t];
          ++total;
        }
      }
    });
  // SIGKILL the owner of shard 0 once some increments are in.
  auto owner = c.kill_owner_after(total, 20, 60);
  for (auto& th : threads) th.join();
  for (const auto& f : failed) CHECK(f == "");
  for (std::size_t t = 0; t < counters.size(); ++t)
    CHECK(client->get(counters[t]).value() == std::optional<std::string>(std::to_string(swapped[t])));
  CHECK(client->owner_of(0) != owner);
  CHECK(client->retries() >= 1);
  MESSAGE(client->retries() << " calls retried");
}

TEST_CASE("cluster processes: record commits and stream appends survive SIGKILL of the owner, each once and whole") {
  serve_cluster c("txns");
  auto client = c.failover_client();
  state::records recs(*client);
  state::streams logs(*client);
  // A namespace and streams on shard 0 (the one owner_among watches).
  // Threads 0..3 commit "counter n -> n + 1, and an entry named n + 1": a
  // commit applied twice, applied but answered as a conflict, or applied in
  // part, leaves the counter off its thread's count of successes, or an
  // entry without its counter value. Threads 4 and 5 each append to a stream
  // of their own at its next_seq: an append applied but not acknowledged (or
  // applied twice) leaves the stream longer than the appends acknowledged.
  std::string ns;
  for (int i = 0; ns.empty(); ++i)
    if (recs.shard_of(fmt::format("ledger{}", i)) == 0) ns = fmt::format("ledger{}", i);
  std::vector<std::string> stream_of(6);
  for (int t = 4, i = 0; t < 6; ++i)
    if (logs.shard_of(fmt::format("log{}", i)) == 0) stream_of[t++] = fmt::format("log{}", i);
  constexpr int threads_n = 6, records_n = 4, per_thread = 40;
  std::vector<int> committed(threads_n, 0);
  std::vector<std::string> failed(threads_n);
  std::atomic<int> total{0};
  auto commit_one = [&](int t) -> status {
    std::string counter = fmt::format("counter{}", t);
    auto tx = recs.begin();
    auto now = tx.load(ns, counter);
    if (!now) return now.error();
    int n = *now ? std::get<state::json>((*now)->value).get<int>() : 0;
    MAGNETITE_TRY(tx.put(ns, counter, state::json(n + 1)));
    MAGNETITE_TRY(tx.put(ns, fmt::format("entry{}-{:03}", t, n + 1), state::json(t)));
    auto out = tx.commit();
    return out ? status::ok() : out.error();
  };
  auto append_one = [&](int t) -> status {
    auto next = logs.next_seq(stream_of[t]);
    if (!next) return next.error();
    std::vector<state::item> entry{state::json(static_cast<int>(*next))};
    auto out = logs.append(stream_of[t], entry, *next);
    return out ? status::ok() : out.error();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t)
    threads.emplace_back([&, t] {
      while (committed[t] < per_thread) {
        status s = t < records_n ? commit_one(t) : append_one(t);
        if (s.code() == status_code::conflict) continue;
        if (!s) return (void)(failed[t] = s.to_string());
        ++committed[t];
        ++total;
      }
    });
  auto owner = c.kill_owner_after(total, 20, 70);
  for (auto& th : threads) th.join();
  for (const auto& f : failed) CHECK(f == "");
  for (int t = 0; t < records_n; ++t) {
    auto value = recs.load(ns, fmt::format("counter{}", t)).value();
    REQUIRE(value);
    CHECK(std::get<state::json>(value->value).get<int>() == committed[t]);
    std::vector<std::string> entries;
    std::optional<std::string> after;
    do {
      auto page = recs.list(ns, fmt::format("entry{}-", t), after, 100).value();
      for (auto& [k, r] : page.records) entries.push_back(k);
      after = page.next;
    } while (after);
    REQUIRE(entries.size() == static_cast<std::size_t>(committed[t]));
    for (int i = 0; i < committed[t]; ++i) CHECK(entries[i] == fmt::format("entry{}-{:03}", t, i + 1));
  }
  for (int t = records_n; t < threads_n; ++t) {
    CHECK(logs.next_seq(stream_of[t]).value() == static_cast<std::uint64_t>(committed[t]));
    auto entries = logs.read(stream_of[t], 0, 1000).value();
    REQUIRE(entries.size() == static_cast<std::size_t>(committed[t]));
    for (std::size_t i = 0; i < entries.size(); ++i) {
      CHECK(entries[i].seq == i);
      CHECK(std::get<state::json>(entries[i].value).get<std::size_t>() == i);
    }
  }
  CHECK(client->owner_of(0) != owner);
  MESSAGE(client->retries() << " calls retried");
}

TEST_CASE("cluster processes: transfers across shards survive SIGKILL of the coordinator's owner, all or nothing") {
  serve_cluster c("xtxn");
  cluster_client_options o;
  o.cluster_file = c.cluster_path;
  o.call_timeout = std::chrono::seconds(60);
  o.attempt_timeout = std::chrono::milliseconds(1000);
  o.resolve_after = std::chrono::seconds(1);  // holds of a driver that lost touch are settled soon
  REQUIRE(testing::poll_until([&] { return c.owner_among({1, 2, 3}).has_value(); }, std::chrono::seconds(60)));
  auto client = must(cluster_client::connect(o));
  state::records recs(*client);
  // Thread t moves 1 at a time from ledger a_t (shard 0, the coordinator,
  // whose owner is killed) to ledger b_t (shard 1), both from 0. Whatever a
  // kill cuts, a_t + b_t stays 0; b_t counts the commits acknowledged, plus
  // at most the ones answered ambiguous.
  constexpr int threads_n = 4, per_thread = 25;
  auto [a, b] = testing::ledger_pairs(recs, threads_n);
  auto transfer = [&](int t, int n) { return testing::transfer(recs, a[t], b[t], n); };
  std::vector<int> committed(threads_n, 0), ambiguous(threads_n, 0);
  std::vector<std::string> failed(threads_n);
  std::atomic<int> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t)
    threads.emplace_back([&, t] {
      while (committed[t] + ambiguous[t] < per_thread) {
        auto out = transfer(t, 1);
        if (out) {
          ++committed[t];
        } else if (out.error().code() == status_code::conflict) {
          continue;
        } else if (out.error().category() == status_category::ambiguous) {
          ++ambiguous[t];
        } else {
          return (void)(failed[t] = out.error().to_string());
        }
        ++total;
      }
    });
  c.kill_owner_after(total, 10, 40);
  for (auto& th : threads) th.join();
  for (const auto& f : failed) CHECK(f == "");
  for (int t = 0; t < threads_n; ++t) {
    // Settle any hold left behind: a commit that touches both keys.
    REQUIRE(testing::poll_until([&] { return transfer(t, 0).is_ok(); }, std::chrono::seconds(60)));
    int x = testing::balance_of(recs.load(a[t], "bal").value()),
        y = testing::balance_of(recs.load(b[t], "bal").value());
    CHECK(x + y == 0);
    CHECK(y >= committed[t]);
    CHECK(y <= committed[t] + ambiguous[t]);
    MESSAGE("pair " << t << ": " << committed[t] << " committed, " << ambiguous[t] << " ambiguous, b = " << y);
  }
}

TEST_CASE("cluster processes: the magnetite tool puts, gets and deletes through a cluster file") {
  serve_cluster c("tool");
  REQUIRE(testing::poll_until([&] { return c.owner_among({1, 2, 3}).has_value(); }, std::chrono::seconds(60)));
  std::string out = c.dir / "tool-out";
  // Keys of both shards: the tool finds each one's owner.
  for (int i = 0; i < 4; ++i) {
    auto k = fmt::format("key{}", i);
    CHECK(testing::run_magnetite({"put", k, "v" + k, "--cluster", c.cluster_path}, out).first == 0);
  }
  for (int i = 0; i < 4; ++i) {
    auto k = fmt::format("key{}", i);
    auto got = testing::run_magnetite({"get", k, "--cluster", c.cluster_path}, out);
    CHECK(got.first == 0);
    CHECK(got.second == "v" + k + "\n");
  }
  // Shard 0's owner (the one this fixture watches) holds its keys.
  std::string on0;
  for (int i = 0; i < 4 && on0.empty(); ++i)
    if (shard_for(fmt::format("key{}", i), c.cluster.shards) == 0) on0 = fmt::format("key{}", i);
  REQUIRE_FALSE(on0.empty());
  auto owner = c.owner_among({1, 2, 3});
  REQUIRE(owner);
  CHECK(c.get(*owner, on0).value() == std::optional<std::string>("v" + on0));
  CHECK(testing::run_magnetite({"del", on0, "--cluster", c.cluster_path}, out).first == 0);
  CHECK_FALSE(c.get(*owner, on0).value().has_value());
  auto gone = testing::run_magnetite({"get", on0, "--cluster", c.cluster_path}, out);
  CHECK(gone.first == 1);
  CHECK(gone.second == "not found\n");
  // Bad input and a missing file: a clear error, exit 2.
  auto bad = testing::run_magnetite({"put", "", "v", "--cluster", c.cluster_path}, out);
  CHECK(bad.first == 2);
  auto missing = testing::run_magnetite({"get", "k", "--cluster", c.dir / "nope"}, out);
  CHECK(missing.first == 2);
  CHECK(missing.second.find(c.dir / "nope") != std::string::npos);
}

TEST_CASE(
    "cluster processes: magnetite load --cluster rides through SIGKILL of an owner; every acknowledged "
    "write reads back") {
  serve_cluster c("loadkill");
  REQUIRE(testing::poll_until([&] { return c.owner_among({1, 2, 3}).has_value(); }, std::chrono::seconds(60)));
  std::string acks = c.dir / "acks", out = c.dir / "load-out";
  constexpr int keys = 2000;
  pid_t load = testing::spawn_magnetite(
      {"load", "--keys", std::to_string(keys), "--writers", "8", "--ack-log", acks, "--cluster", c.cluster_path}, out);
  auto lines = [&] {
    auto text = slurp(acks);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  };
  std::mt19937_64 rng(doctest::getContextOptions()->rand_seed);
  int kill_after = 200 + static_cast<int>(rng() % 600);
  REQUIRE(testing::poll_until([&] { return lines() >= kill_after; }, std::chrono::seconds(60)));
  auto owner = c.owner_among({1, 2, 3});
  REQUIRE(owner);
  ::kill(c.pids[*owner - 1], SIGKILL);
  int wstatus = 0;
  ::waitpid(load, &wstatus, 0);
  INFO(slurp(out));
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  // Every line of the ack log is a write the cluster acknowledged: each one
  // reads back through a client, with its value.
  cluster_client_options o;
  o.cluster_file = c.cluster_path;
  o.call_timeout = std::chrono::seconds(60);
  auto client = must(cluster_client::connect(o));
  auto text = slurp(acks);
  int checked = 0, wrong = 0;
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    REQUIRE(end != std::string::npos);
    auto line = text.substr(at, end - at);
    at = end + 1;
    auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    auto got = client->get(line.substr(0, tab));
    REQUIRE(got.is_ok());
    if (*got != line.substr(tab + 1)) ++wrong;
    ++checked;
  }
  CHECK(checked == keys);
  CHECK(wrong == 0);
  MESSAGE("node " << *owner << " killed after " << kill_after << " acknowledged writes; " << checked << " read back");
}

TEST_CASE(
    "cluster processes: serve refuses `tls off` unless --insecure, loopback included, and says who can join each "
    "start") {
  testing::temp_dir dir("insecure");
  auto base = static_cast<std::uint16_t>(29000 + (::getpid() % 1000) * 2);
  std::string path = dir / "cluster";
  std::string out = dir / "out";
  for (auto [second, who] :
       {std::pair{"127.0.0.1", "every user and process of this machine can join as any node or client"},
        std::pair{"10.255.255.1", "anyone who can reach its ports can join as any node or client"}}) {
    CAPTURE(second);
    std::ofstream(path) << fmt::format("cluster open\nshards 1\ntls off\nnode 1 127.0.0.1 {}\nnode 2 {} {}\n", base,
                                       second, base + 1);
    auto refused = testing::run_magnetite({"--data", dir / "node1", "serve", "--node", "1", "--cluster", path}, out);
    CHECK(refused.first == 2);
    CHECK(refused.second.find("says `tls off`") != std::string::npos);
    CHECK(refused.second.find("--insecure") != std::string::npos);
    // Refused before anything was made: no data directory.
    CHECK_FALSE(std::filesystem::exists(dir / "node1"));
    // The child truncates `out` after the fork: without this the poll below
    // could see an earlier start's "listening on" before this child emptied
    // the file (seen once in make test, 2026-12-07).
    std::filesystem::remove(out);
    pid_t pid = testing::spawn_magnetite(
        {"--data", dir / "node1", "serve", "--node", "1", "--cluster", path, "--insecure"}, out);
    bool listening = testing::poll_until([&] { return slurp(out).find("listening on") != std::string::npos; },
                                         std::chrono::seconds(60));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    INFO(slurp(out));
    CHECK(listening);
    CHECK(slurp(out).find("INSECURE (--insecure): cluster open runs without TLS") != std::string::npos);
    CHECK(slurp(out).find(who) != std::string::npos);
    std::filesystem::remove_all(dir / "node1");
  }
  // With no `tls` line the cluster is over TLS: serve wants its files.
  std::ofstream(path) << fmt::format("cluster open\nshards 1\nnode 1 127.0.0.1 {}\n", base);
  auto bare = testing::run_magnetite({"--data", dir / "node1", "serve", "--node", "1", "--cluster", path}, out);
  CHECK(bare.first == 2);
  CHECK(bare.second.find("runs over TLS (no `tls off` line): give --tls-cert, --tls-key and --tls-ca") !=
        std::string::npos);
}

TEST_CASE("cluster processes: serve takes the network limits, refuses ones it cannot run with, and cuts a stranger") {
  testing::temp_dir dir("limits");
  auto base = static_cast<std::uint16_t>(29000 + (::getpid() % 1000) * 2);
  std::string path = dir / "cluster";
  std::ofstream(path) << fmt::format("cluster limits\nshards 1\ntls off\nnode 1 127.0.0.1 {}\n", base);
  std::string out = dir / "out";
  auto refused = testing::run_magnetite({"--data", dir / "node1", "serve", "--node", "1", "--cluster", path,
                                         "--insecure", "--max-handshake-bytes", "100"},
                                        out);
  CHECK(refused.first == 2);
  CHECK(refused.second.find("max_handshake_bytes 100 is below 1024") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "node1"));
  // Running with a 500 ms handshake timeout: a silent connection is cut by then.
  pid_t pid = testing::spawn_magnetite({"--data", dir / "node1", "serve", "--node", "1", "--cluster", path,
                                        "--insecure", "--handshake-timeout-ms", "500"},
                                       out);
  bool listening = testing::poll_until([&] { return slurp(out).find("listening on") != std::string::npos; },
                                       std::chrono::seconds(60));
  REQUIRE(listening);
  int fd = testing::dial(base);
  auto began = std::chrono::steady_clock::now();
  bool cut = testing::closed_within(fd, std::chrono::seconds(10));  // after the node's handshake
  auto took = std::chrono::steady_clock::now() - began;
  ::close(fd);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  CHECK(cut);
  CHECK(took < std::chrono::seconds(9));
}
