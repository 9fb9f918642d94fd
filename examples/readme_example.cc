// Embedding magnetite: open, put, get, scan, TTL, commit (README.md, "Embedding").
#include <chrono>
#include <cstdio>
#include <thread>

#include <magnetite/database.h>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  magnetite::database_options options;
  options.dir = argc > 1 ? argv[1] : "example-data";  // created if missing; one shard a core
  auto opened = magnetite::database::open(options);
  if (!opened) return std::fprintf(stderr, "%s\n", opened.error().to_string().c_str()), 1;
  magnetite::database& db = **opened;

  // A write returns once it is durable (its group's fsync).
  if (!db.put("fruit/apple", "red") || !db.put("fruit/kiwi", "green")) return 1;
  if (!db.put("session/42", "alice", 100ms)) return 1;  // expires in 100 ms

  auto apple = db.get("fruit/apple");  // result<optional<string>>
  std::printf("apple is %s\n", apple && *apple ? (*apple)->c_str() : "missing");

  auto scan = db.scan("fruit/", "fruit0");  // [from, to): every "fruit/..." key, in order
  if (!scan) return 1;
  for (auto more = scan->next(); more && *more; more = scan->next())
    std::printf("%s = %s\n", scan->key().c_str(), scan->value().c_str());

  std::this_thread::sleep_for(200ms);
  auto session = db.get("session/42");
  std::printf("session/42 %s\n", session && !*session ? "expired" : "still there");

  auto commit = db.commit();  // checkpoint: each shard's Merkle root, and one over them
  if (!commit) return 1;
  std::printf("root %s\n", commit->combined.to_hex().c_str());
}
