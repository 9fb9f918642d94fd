#include "tools/demo.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "actors/database_core.h"
#include "tools/cli_text.h"
#include "tools/load_run.h"
#include "tools/progress_bar.h"

namespace magnetite {

namespace {

constexpr std::uint64_t phase_keys = 30'000;
constexpr std::size_t writers = 32;
constexpr std::size_t ttl_keys = 200;
constexpr auto ttl_length = std::chrono::seconds(1);

struct totals {
  std::uint64_t fsyncs = 0, acknowledged = 0, expired = 0, replayed = 0, restarts = 0;
};

result<totals> sum_stats(database& db) {
  auto st = db.stats();
  if (!st) return st.error();
  totals t;
  for (std::size_t i = 0; i < st->shards.size(); ++i) {
    t.fsyncs += st->shards[i].log_fsyncs;
    t.acknowledged += st->shards[i].acknowledged;
    t.expired += st->shards[i].expired;
    t.replayed += st->shards[i].replayed_records;
    t.restarts += st->restarts[i];
  }
  return t;
}

result<load_result> load_with_bar(database& db, load_options o) {
  progress_bar bar(o.keys, "writes");
  o.progress = [&](std::uint64_t done) { bar.update(done); };
  auto r = run_load(db, o);
  bar.finish();
  return r;
}

// Reads every key of a load back: how many are missing or wrong.
result<std::uint64_t> lost_keys(database& db, const std::string& prefix, std::uint64_t seed, std::uint64_t n,
                                std::size_t value_size) {
  std::uint64_t lost = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    auto v = db.get(load_key(prefix, seed, i));
    if (!v) return v.error();
    if (!*v || **v != load_value(seed, i, value_size)) ++lost;
  }
  return lost;
}

void heading(int n, std::string_view text) { fmt::print("\n{}. {}\n", n, text); }

}  // namespace

result<int> run_demo(const std::string& dir, std::optional<std::size_t> shards) {
  MAGNETITE_TRY(env::posix().create_dir(dir));
  auto recorded = database::recorded_shards(dir);
  if (!recorded) return recorded.error();
  database_options opts;
  opts.dir = dir;
  opts.shards = *recorded ? *recorded : shards;
  auto opened = database::open(opts);
  if (!opened) return opened.error();
  database& db = **opened;
  const std::uint64_t run = static_cast<std::uint64_t>(std::time(nullptr));
  const std::string prefix = fmt::format("demo/{}/", run);
  const std::size_t value_size = 100;
  bool all_good = true;
  fmt::print("magnetite demo: a database of {} shards in {}, each shard a supervised CAF actor.\n"
             "This run's keys start with {}.\n",
             db.shard_count(), dir, prefix);

  // 1. Group commit.
  heading(1, fmt::format("Group commit: {} durable writes from {} concurrent writers", with_commas(phase_keys), writers));
  auto before = sum_stats(db);
  if (!before) return before.error();
  load_options o;
  o.keys = phase_keys;
  o.writers = writers;
  o.value_size = value_size;
  o.seed = 1;
  o.prefix = prefix;
  auto first = load_with_bar(db, o);
  if (!first) return first.error();
  auto after = sum_stats(db);
  if (!after) return after.error();
  double rate = static_cast<double>(first->written) / first->seconds;
  std::uint64_t fsyncs = after->fsyncs - before->fsyncs;
  double per_fsync = fsyncs ? static_cast<double>(first->written) / static_cast<double>(fsyncs) : 0;
  fmt::print("   {} writes acknowledged in {:.2f} s ({} writes/s). Each was acknowledged only after an fsync\n"
             "   of the log, yet the shards made only {} fsyncs: {:.1f} writes shared each one, because the\n"
             "   writes waiting in a shard's mailbox are committed together.\n",
             with_commas(first->written), first->seconds, with_commas(static_cast<std::uint64_t>(rate)),
             with_commas(fsyncs), per_fsync);

  // 2. A shard killed mid-load.
  const std::size_t victim = db.shard_count() / 2;
  const std::uint64_t seed2 = 2;
  heading(2, fmt::format("Crash and recovery: {} more writes; shard {}'s actor is killed halfway", with_commas(phase_keys),
                         victim));
  before = sum_stats(db);
  if (!before) return before.error();
  o.seed = seed2;
  o.event_at = phase_keys / 2;
  o.event = [&] { caf::anon_send_exit(db.core().shard_handle(victim), caf::exit_reason::kill); };
  auto second = load_with_bar(db, o);
  if (!second) return second.error();
  auto st = db.stats();
  if (!st) return st.error();
  std::uint64_t restarts = st->restarts[victim];
  std::uint64_t replayed = st->shards[victim].replayed_records;
  fmt::print("   shard {} was killed (exit reason `kill`, as a crash) after {} acknowledged writes.\n"
             "   Its supervisor restarted it {} time(s); the new actor re-opened its log and replayed {} records\n"
             "   into its tree. {} writes that reached it while it was down got a transient error and were retried.\n",
             victim, with_commas(phase_keys / 2), restarts, with_commas(replayed), with_commas(second->retries));
  auto lost1 = lost_keys(db, prefix, 1, phase_keys, value_size);
  if (!lost1) return lost1.error();
  auto lost2 = lost_keys(db, prefix, seed2, phase_keys, value_size);
  if (!lost2) return lost2.error();
  std::uint64_t lost = *lost1 + *lost2;
  fmt::print("   Read back all {} acknowledged keys: {} lost.\n", with_commas(2 * phase_keys), lost);
  if (lost || restarts == 0) all_good = false;

  // 3. TTL.
  heading(3, fmt::format("TTL: {} keys written with a time to live of {} s", ttl_keys, ttl_length.count()));
  before = sum_stats(db);
  if (!before) return before.error();
  {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t answered = 0;
    status failed;
    for (std::size_t i = 0; i < ttl_keys; ++i)
      db.put_async(fmt::format("{}ttl-{}", prefix, i), "short-lived", ttl_length, [&](status s) {
        std::lock_guard lk(mu);
        if (!s && failed.is_ok()) failed = s;
        ++answered;
        cv.notify_one();
      });
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return answered == ttl_keys; });
    if (!failed.is_ok()) return failed;
  }
  auto written_at = std::chrono::steady_clock::now();
  auto readable = [&]() -> result<std::size_t> {
    std::size_t n = 0;
    for (std::size_t i = 0; i < ttl_keys; ++i) {
      auto v = db.get(fmt::format("{}ttl-{}", prefix, i));
      if (!v) return v.error();
      n += v->has_value();
    }
    return n;
  };
  auto now_readable = readable();
  if (!now_readable) return now_readable.error();
  fmt::print("   right after the writes: {} of {} readable\n", *now_readable, ttl_keys);
  std::uint64_t expired = 0;
  double waited = 0;
  while (waited < 10) {  // the timers fire about 1 s from now; give them ample time on a busy machine
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = sum_stats(db);
    if (!after) return after.error();
    expired = after->expired - before->expired;
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - written_at).count();
    if (expired >= ttl_keys) break;
  }
  auto later_readable = readable();
  if (!later_readable) return later_readable.error();
  fmt::print("   {:.2f} s later: {} readable; the shards' TTL timers (armed through each actor's clock) had\n"
             "   deleted {} keys through the log, like any delete: no read had to find them first.\n",
             waited, *later_readable, expired);
  if (expired < ttl_keys || *later_readable != 0) all_good = false;

  // 4. Checkpoints.
  heading(4, "Checkpoints: every shard's Merkle root, and one root over them");
  for (int i = 0; i < 5; ++i) MAGNETITE_TRY(db.put(fmt::format("{}edit-{}", prefix, i), "original"));
  auto a = db.commit();
  if (!a) return a.error();
  for (std::size_t i = 0; i < a->roots.size(); ++i) fmt::print("   shard {}  {}\n", i, a->roots[i]);
  fmt::print("   combined {}   (checkpoint A)\n", a->combined);
  fmt::print("   then 5 keys added, 3 deleted and 2 changed, and a second commit:\n");
  for (int i = 0; i < 5; ++i) MAGNETITE_TRY(db.put(fmt::format("{}new-{}", prefix, i), "added"));
  for (int i = 0; i < 3; ++i) MAGNETITE_TRY(db.del(fmt::format("{}edit-{}", prefix, i)));
  for (int i = 3; i < 5; ++i) MAGNETITE_TRY(db.put(fmt::format("{}edit-{}", prefix, i), "changed"));
  auto b = db.commit();
  if (!b) return b.error();
  fmt::print("   combined {}   (checkpoint B)\n", b->combined);

  // 5. Diff.
  heading(5, "Diff from checkpoint A to B (only the subtrees whose hashes differ are read)");
  auto changes = db.diff(a->combined, b->combined);
  if (!changes) return changes.error();
  for (const auto& c : *changes) {
    const char* sign = c.what == key_change::kind::added ? "+" : c.what == key_change::kind::removed ? "-" : "~";
    fmt::print("   {} {}  {}\n", sign, escape_field(c.key),
               c.what == key_change::kind::changed ? fmt::format("{} -> {}", *c.old_value, *c.new_value)
                                                   : escape_field(c.new_value ? *c.new_value : *c.old_value));
  }
  if (changes->size() != 10) all_good = false;

  // 6. Verify.
  heading(6, "Verify: every node read back against its hash, every log frame against its checksum");
  auto v = db.verify();
  if (!v) return v.error();
  std::uint64_t nodes = 0, frames = 0;
  for (const auto& s : v->shards) {
    nodes += s.nodes;
    frames += s.log_frames;
  }
  fmt::print("   {} nodes, {} log frames, {} retained checkpoints: {}\n", with_commas(nodes), with_commas(frames),
             v->checkpoints, v->problems.empty() ? "no damage" : fmt::format("{} problems", v->problems.size()));
  for (const auto& p : v->problems) fmt::print("   damage: {}\n", p);
  if (!v->problems.empty()) all_good = false;

  // 7. gc.
  heading(7, "Garbage collection: nodes no current root or retained checkpoint reaches");
  auto g = db.gc();
  if (!g) return g.error();
  std::uint64_t reclaimed = 0;
  for (const auto& r : g->shards) reclaimed += r.bytes_reclaimed;
  fmt::print("   reclaimed {}\n", human_bytes(reclaimed));

  fmt::print("\nSummary\n");
  auto line = [](std::string_view what, std::string figure) { fmt::print("   {:<44} {}\n", what, figure); };
  line(fmt::format("durable writes/s, {} writers", writers), with_commas(static_cast<std::uint64_t>(rate)));
  line("writes sharing one fsync", fmt::format("{:.1f}", per_fsync));
  line("shard restarts / log records replayed", fmt::format("{} / {}", restarts, with_commas(replayed)));
  line("acknowledged writes lost", std::to_string(lost));
  line("TTL keys deleted by timer", fmt::format("{} of {}", expired, ttl_keys));
  line("keys changed between checkpoints A and B", std::to_string(changes->size()));
  line("verify", v->problems.empty() ? fmt::format("no damage in {} nodes", with_commas(nodes)) : "DAMAGE");
  line("gc reclaimed", human_bytes(reclaimed));
  fmt::print("\nNext: `magnetite --help`, docs/cli.md, and docs/embedding.md to embed it.\n");
  if (!all_good) {
    fmt::print(stderr, "magnetite demo: a check of the tour failed (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace magnetite
