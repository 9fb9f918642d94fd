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

// The tour's database and what each act found, for the summary.
struct tour {
  tour(database& d, std::string p) : db(d), prefix(std::move(p)) {}
  database& db;
  std::string prefix;  // this run's keys start with it
  std::size_t value_size = 100;
  load_options load;  // the group-commit act's load, reused by the crash act
  double rate = 0;    // durable writes a second
  double per_fsync = 0;
  std::uint64_t restarts = 0, replayed = 0, lost = 0, expired = 0, nodes = 0, reclaimed = 0;
  std::size_t changes = 0;
  bool damage = false;
  bool all_good = true;
};

status act_group_commit(tour& t) {
  heading(1,
          fmt::format("Group commit: {} durable writes from {} concurrent writers", with_commas(phase_keys), writers));
  auto before = sum_stats(t.db);
  if (!before) return before.error();
  t.load.keys = phase_keys;
  t.load.writers = writers;
  t.load.value_size = t.value_size;
  t.load.seed = 1;
  t.load.prefix = t.prefix;
  auto first = load_with_bar(t.db, t.load);
  if (!first) return first.error();
  auto after = sum_stats(t.db);
  if (!after) return after.error();
  t.rate = static_cast<double>(first->written) / first->seconds;
  std::uint64_t fsyncs = after->fsyncs - before->fsyncs;
  t.per_fsync = fsyncs ? static_cast<double>(first->written) / static_cast<double>(fsyncs) : 0;
  fmt::print(
      "   {} writes acknowledged in {:.2f} s ({} writes/s). Each was acknowledged only after an fsync\n"
      "   of the log, yet the shards made only {} fsyncs: {:.1f} writes shared each one, because the\n"
      "   writes waiting in a shard's mailbox are committed together.\n",
      with_commas(first->written), first->seconds, with_commas(static_cast<std::uint64_t>(t.rate)), with_commas(fsyncs),
      t.per_fsync);
  return status::ok();
}

status act_crash(tour& t) {
  const std::size_t victim = t.db.shard_count() / 2;
  const std::uint64_t seed2 = 2;
  heading(2, fmt::format("Crash and recovery: {} more writes; shard {}'s actor is killed halfway",
                         with_commas(phase_keys), victim));
  load_options o = t.load;
  o.seed = seed2;
  o.event_at = phase_keys / 2;
  o.event = [&] { caf::anon_send_exit(t.db.core().shard_handle(victim), caf::exit_reason::kill); };
  auto second = load_with_bar(t.db, o);
  if (!second) return second.error();
  auto st = t.db.stats();
  if (!st) return st.error();
  t.restarts = st->restarts[victim];
  t.replayed = st->shards[victim].replayed_records;
  fmt::print(
      "   shard {} was killed (exit reason `kill`, as a crash) after {} acknowledged writes.\n"
      "   Its supervisor restarted it {} time(s); the new actor re-opened its log and replayed {} records\n"
      "   into its tree. {} writes that reached it while it was down got a transient error and were retried.\n",
      victim, with_commas(phase_keys / 2), t.restarts, with_commas(t.replayed), with_commas(second->retries));
  auto lost1 = lost_keys(t.db, t.prefix, 1, phase_keys, t.value_size);
  if (!lost1) return lost1.error();
  auto lost2 = lost_keys(t.db, t.prefix, seed2, phase_keys, t.value_size);
  if (!lost2) return lost2.error();
  t.lost = *lost1 + *lost2;
  fmt::print("   Read back all {} acknowledged keys: {} lost.\n", with_commas(2 * phase_keys), t.lost);
  if (t.lost || t.restarts == 0) t.all_good = false;
  return status::ok();
}

// Writes the TTL keys and waits for every answer.
status put_ttl_keys(tour& t) {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t answered = 0;
  status failed;
  for (std::size_t i = 0; i < ttl_keys; ++i)
    t.db.put_async(fmt::format("{}ttl-{}", t.prefix, i), "short-lived", ttl_length, [&](status s) {
      std::lock_guard lk(mu);
      if (!s && failed.is_ok()) failed = s;
      ++answered;
      cv.notify_one();
    });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return answered == ttl_keys; });
  return failed;
}

result<std::size_t> readable_ttl_keys(tour& t) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < ttl_keys; ++i) {
    auto v = t.db.get(fmt::format("{}ttl-{}", t.prefix, i));
    if (!v) return v.error();
    n += v->has_value();
  }
  return n;
}

status act_ttl(tour& t) {
  heading(3, fmt::format("TTL: {} keys written with a time to live of {} s", ttl_keys, ttl_length.count()));
  auto before = sum_stats(t.db);
  if (!before) return before.error();
  MAGNETITE_TRY(put_ttl_keys(t));
  auto written_at = std::chrono::steady_clock::now();
  auto now_readable = readable_ttl_keys(t);
  if (!now_readable) return now_readable.error();
  fmt::print("   right after the writes: {} of {} readable\n", *now_readable, ttl_keys);
  double waited = 0;
  while (waited < 10) {  // the timers fire about 1 s from now; give them ample time on a busy machine
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto after = sum_stats(t.db);
    if (!after) return after.error();
    t.expired = after->expired - before->expired;
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - written_at).count();
    if (t.expired >= ttl_keys) break;
  }
  auto later_readable = readable_ttl_keys(t);
  if (!later_readable) return later_readable.error();
  fmt::print(
      "   {:.2f} s later: {} readable; the shards' TTL timers (armed through each actor's clock) had\n"
      "   deleted {} keys through the log, like any delete: no read had to find them first.\n",
      waited, *later_readable, t.expired);
  if (t.expired < ttl_keys || *later_readable != 0) t.all_good = false;
  return status::ok();
}

// Two checkpoints with edits between them; their combined roots.
result<std::pair<hash128, hash128>> act_checkpoints(tour& t) {
  heading(4, "Checkpoints: every shard's Merkle root, and one root over them");
  for (int i = 0; i < 5; ++i) MAGNETITE_TRY(t.db.put(fmt::format("{}edit-{}", t.prefix, i), "original"));
  auto a = t.db.commit();
  if (!a) return a.error();
  for (std::size_t i = 0; i < a->roots.size(); ++i) fmt::print("   shard {}  {}\n", i, a->roots[i]);
  fmt::print("   combined {}   (checkpoint A)\n", a->combined);
  fmt::print("   then 5 keys added, 3 deleted and 2 changed, and a second commit:\n");
  for (int i = 0; i < 5; ++i) MAGNETITE_TRY(t.db.put(fmt::format("{}new-{}", t.prefix, i), "added"));
  for (int i = 0; i < 3; ++i) MAGNETITE_TRY(t.db.del(fmt::format("{}edit-{}", t.prefix, i)));
  for (int i = 3; i < 5; ++i) MAGNETITE_TRY(t.db.put(fmt::format("{}edit-{}", t.prefix, i), "changed"));
  auto b = t.db.commit();
  if (!b) return b.error();
  fmt::print("   combined {}   (checkpoint B)\n", b->combined);
  return std::pair{a->combined, b->combined};
}

status act_diff(tour& t, const hash128& a, const hash128& b) {
  heading(5, "Diff from checkpoint A to B (only the subtrees whose hashes differ are read)");
  auto changes = t.db.diff(a, b);
  if (!changes) return changes.error();
  for (const auto& c : *changes) {
    const char* sign = c.what == key_change::kind::added ? "+" : c.what == key_change::kind::removed ? "-" : "~";
    fmt::print("   {} {}  {}\n", sign, escape_field(c.key),
               c.what == key_change::kind::changed ? fmt::format("{} -> {}", *c.old_value, *c.new_value)
                                                   : escape_field(c.new_value ? *c.new_value : *c.old_value));
  }
  t.changes = changes->size();
  if (t.changes != 10) t.all_good = false;
  // Checkpoint A is still a version one can read whole (database::at).
  auto at_a = t.db.at(a);
  if (!at_a) return at_a.error();
  std::string deleted = fmt::format("{}edit-0", t.prefix);
  auto then = at_a->get(deleted);
  if (!then) return then.error();
  auto now = t.db.get(deleted);
  if (!now) return now.error();
  fmt::print("   read at checkpoint A (database::at, `magnetite get --at`): {} = {}; now: {}\n", escape_field(deleted),
             then->value_or("absent"), now->value_or("absent"));
  if (*then != std::optional<std::string>("original") || now->has_value()) t.all_good = false;
  return status::ok();
}

status act_verify(tour& t) {
  heading(6, "Verify: every node read back against its hash, every log frame against its checksum");
  auto v = t.db.verify();
  if (!v) return v.error();
  std::uint64_t frames = 0;
  for (const auto& s : v->shards) {
    t.nodes += s.nodes;
    frames += s.log_frames;
  }
  fmt::print("   {} nodes, {} log frames, {} retained checkpoints: {}\n", with_commas(t.nodes), with_commas(frames),
             v->checkpoints, v->problems.empty() ? "no damage" : fmt::format("{} problems", v->problems.size()));
  for (const auto& p : v->problems) fmt::print("   damage: {}\n", p);
  t.damage = !v->problems.empty();
  if (t.damage) t.all_good = false;
  return status::ok();
}

status act_gc(tour& t) {
  heading(7, "Garbage collection: nodes no current root or retained checkpoint reaches");
  auto g = t.db.gc();
  if (!g) return g.error();
  for (const auto& r : g->shards) t.reclaimed += r.bytes_reclaimed;
  fmt::print("   reclaimed {}\n", human_bytes(t.reclaimed));
  return status::ok();
}

void print_summary(const tour& t) {
  fmt::print("\nSummary\n");
  auto line = [](std::string_view what, std::string figure) { fmt::print("   {:<44} {}\n", what, figure); };
  line(fmt::format("durable writes/s, {} writers", writers), with_commas(static_cast<std::uint64_t>(t.rate)));
  line("writes sharing one fsync", fmt::format("{:.1f}", t.per_fsync));
  line("shard restarts / log records replayed", fmt::format("{} / {}", t.restarts, with_commas(t.replayed)));
  line("acknowledged writes lost", std::to_string(t.lost));
  line("TTL keys deleted by timer", fmt::format("{} of {}", t.expired, ttl_keys));
  line("keys changed between checkpoints A and B", std::to_string(t.changes));
  line("verify", !t.damage ? fmt::format("no damage in {} nodes", with_commas(t.nodes)) : "DAMAGE");
  line("gc reclaimed", human_bytes(t.reclaimed));
  fmt::print("\nNext: `magnetite --help`, docs/cli.md, and docs/embedding.md to embed it.\n");
}

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
  tour t(**opened, fmt::format("demo/{}/", static_cast<std::uint64_t>(std::time(nullptr))));
  fmt::print(
      "magnetite demo: a database of {} shards in {}, each shard a supervised CAF actor.\n"
      "This run's keys start with {}.\n",
      t.db.shard_count(), dir, t.prefix);
  MAGNETITE_TRY(act_group_commit(t));
  MAGNETITE_TRY(act_crash(t));
  MAGNETITE_TRY(act_ttl(t));
  auto roots = act_checkpoints(t);
  if (!roots) return roots.error();
  MAGNETITE_TRY(act_diff(t, roots->first, roots->second));
  MAGNETITE_TRY(act_verify(t));
  MAGNETITE_TRY(act_gc(t));
  print_summary(t);
  if (!t.all_good) {
    fmt::print(stderr, "magnetite demo: a check of the tour failed (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace magnetite
