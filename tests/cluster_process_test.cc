// Three `magnetite serve` processes on loopback (the built binary, as an
// operator runs it). A client in this process links to them as node 0, has
// node 1 own shard 0, writes through it, and SIGKILLs node 1 while writes are
// in flight. Node 2 then wins shard 0 and must hold every write node 1
// acknowledged.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "core/env.h"
#include "replication/node.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree_model.h"

using namespace magnetite;
using namespace magnetite::replication;
using magnetite::testing::must;

namespace {

std::string tool_path() {
  auto exe = std::filesystem::read_symlink("/proc/self/exe");
  return (exe.parent_path().parent_path() / "tools" / "magnetite").string();
}

pid_t serve(const std::string& data, std::uint32_t id, const std::string& cluster, const std::string& out) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::string tool = tool_path(), node = std::to_string(id);
    ::execl(tool.c_str(), tool.c_str(), "--data", data.c_str(), "serve", "--node", node.c_str(), "--cluster",
            cluster.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

std::string slurp(const std::string& path) {
  auto t = read_whole_file(env::posix(), path);
  return t ? *t : std::string();
}

bool wait_for(const std::function<bool()>& ready, std::chrono::seconds limit) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

TEST_CASE("cluster processes: the owner is SIGKILLed during writes; the next owner holds every acknowledged write") {
  testing::temp_dir dir("cluster");
  auto base = static_cast<std::uint16_t>(24000 + (::getpid() % 1000) * 5);
  std::string cluster_path = dir / "cluster";
  std::string text = fmt::format("cluster killtest\nshards 2\nnode 1 127.0.0.1 {}\nnode 2 127.0.0.1 {}\n"
                                 "node 3 127.0.0.1 {}\n",
                                 base, base + 1, base + 2);
  std::ofstream(cluster_path) << text;
  auto cluster = must(cluster_file::parse(text));
  std::vector<pid_t> pids;
  for (std::uint32_t id = 1; id <= 3; ++id)
    pids.push_back(serve(dir / fmt::format("node{}", id), id, cluster_path, dir / fmt::format("out{}", id)));
  for (std::uint32_t id = 1; id <= 3; ++id) {
    std::string out = dir / fmt::format("out{}", id);
    bool linked = wait_for(
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

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor client{sys};
  auto replicas_of = [&](std::uint32_t id) {
    auto node = sys.middleman().remote_actor<node_actor>("127.0.0.1", base + id - 1);
    REQUIRE(node);
    std::vector<caf::actor> out;
    client->request(*node, std::chrono::seconds(10), hello_atom::value, std::uint32_t{0}, cluster.fingerprint(),
                    protocol_version)
        .receive([&](const std::vector<caf::actor>& r) { out = r; }, [&](caf::error& e) { FAIL(sys.render(e)); });
    REQUIRE(out.size() == 2);
    return caf::actor_cast<replica_actor>(out[0]);
  };
  auto one = replicas_of(1);
  auto two = replicas_of(2);
  bool owns = false;
  client->request(one, std::chrono::seconds(10), elect_atom::value)
      .receive([&](bool b) { owns = b; }, [&](caf::error& e) { FAIL(sys.render(e)); });
  REQUIRE(owns);

  // Writes one after another; a thread SIGKILLs node 1 at a random moment
  // once some are acknowledged.
  std::atomic<int> acked_count{0};
  std::mt19937_64 rng(doctest::getContextOptions()->rand_seed);
  int kill_after = 20 + static_cast<int>(rng() % 40);
  std::thread killer([&] {
    while (acked_count.load() < kill_after) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    ::kill(pids[0], SIGKILL);
  });
  std::map<std::string, std::string> acked;
  for (int i = 0; i < 10'000; ++i) {
    std::string k = fmt::format("k{:05}", i), v = fmt::format("v{}", i);
    bool ok = false;
    client->request(one, std::chrono::seconds(5), put_atom::value, k, v, std::int64_t{0})
        .receive([&](ok_atom) { ok = true; }, [&](caf::error&) {});
    if (!ok) break;
    acked[k] = v;
    ++acked_count;
  }
  killer.join();
  int wstatus = 0;
  ::waitpid(pids[0], &wstatus, 0);
  CHECK(WIFSIGNALED(wstatus));
  MESSAGE(acked.size() << " writes acknowledged before node 1 was killed");
  REQUIRE(acked.size() >= static_cast<std::size_t>(kill_after));

  // Node 2 takes shard 0 over (node 3's promise is the majority) and serves
  // every acknowledged write, read linearizably.
  owns = false;
  for (int attempt = 0; attempt < 5 && !owns; ++attempt)
    client->request(two, std::chrono::seconds(30), elect_atom::value)
        .receive([&](bool b) { owns = b; }, [&](caf::error&) {});
  REQUIRE(owns);
  std::size_t missing = 0;
  for (const auto& [k, v] : acked) {
    std::optional<std::string> got;
    client->request(two, std::chrono::seconds(10), get_atom::value, k)
        .receive([&](bool found, const std::string& value) { if (found) got = value; },
                 [&](caf::error& e) { FAIL(sys.render(e)); });
    if (got != v) ++missing;
  }
  CHECK(missing == 0);

  for (std::size_t i = 1; i < pids.size(); ++i) ::kill(pids[i], SIGTERM);
  for (std::size_t i = 1; i < pids.size(); ++i) {
    ::waitpid(pids[i], &wstatus, 0);
    CHECK((WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0));
  }
}
