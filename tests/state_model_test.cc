// state/ against models: a seeded random walk over records, transactions and
// streams compared with an in-memory model after every step, with clean
// reopens and power cuts (fault_env) in between; and many threads running
// conflicting transactions, whose committed history is checked to be
// serializable.
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
#include "tests/support/database_fixture.h"
#include "tests/support/temp_dir.h"

using namespace magnetite;
using namespace magnetite::state;
using namespace std::chrono_literals;
using magnetite::testing::must_open;
using magnetite::testing::options_for;

namespace {

// ---- the random walk ------------------------------------------------------------

struct model_record {
  std::uint64_t revision = 0;
  json value;
};

// One open transaction and what the model expects of it.
struct open_txn {
  transaction t;
  std::map<std::pair<std::string, std::string>, std::uint64_t> reads;  // revision seen (0: missing)
  std::map<std::pair<std::string, std::string>, std::optional<json>> writes;
};

class walk {
 public:
  explicit walk(std::uint64_t seed) : rng_(seed), seed_(seed) {}

  void run(int steps) {
    open();
    for (int i = 0; i < steps; ++i) {
      step_ = i;
      std::uint64_t dice = rng_() % 100;
      if (dice < 50)
        txn_step();
      else if (dice < 60)
        commit_step();
      else if (dice < 64)
        rollback_step();
      else if (dice < 76)
        stream_step();
      else if (dice < 86)
        list_step();
      else if (dice < 87)
        reopen();
      else if (dice < 88)
        power_cut();
      else if (dice < 89)
        REQUIRE(db_->commit().is_ok());
      else
        check_everything();
    }
    check_everything();
    txns_.clear();
  }

  std::uint64_t commits = 0, across = 0, conflicts = 0, power_cuts = 0, reopens = 0, appends = 0;

 private:
  std::string where() const { return fmt::format("seed {} step {}", seed_, step_); }

  // Mostly the first namespace, so that transactions collide.
  std::string pick_ns() { return namespaces_[rng_() % 2 ? 0 : rng_() % namespaces_.size()]; }
  std::string pick_key() { return fmt::format("k{}", rng_() % keys_); }

  void open() {
    txns_.clear();
    db_ = &host_.open();
    recs_.emplace(*db_);
    streams_.emplace(*db_);
    if (namespaces_.empty()) {
      // Three namespaces on shard 0, one on shard 1: transactions mostly
      // commit on one shard, and sometimes across the two (two-phase).
      for (int i = 0; namespaces_.size() < 4; ++i) {
        std::string ns = fmt::format("ns{}", i);
        std::size_t want = namespaces_.size() < 3 ? 0 : 1;
        if (recs_->shard_of(ns) == want) namespaces_.push_back(ns);
      }
    }
  }

  void reopen() {
    ++reopens;
    open();
    check_everything();
  }

  // The power goes: nothing was in flight (every call returned), so every
  // acknowledged commit must be there and nothing else.
  void power_cut() {
    ++power_cuts;
    txns_.clear();
    host_.power_cut(rng_(), rng_());
    open();
    check_everything();
  }

  // A load, put or delete in one of the open transactions. A new transaction
  // starts with loads, as a read-modify-write does.
  void txn_step() {
    bool fresh = txns_.empty() || (txns_.size() < 4 && rng_() % 3 == 0);
    if (fresh) txns_.push_back({recs_->begin(), {}, {}});
    open_txn& x = fresh ? txns_.back() : txns_[rng_() % txns_.size()];
    if (fresh) {
      std::string ns = pick_ns();
      for (int n = 0; n < 2; ++n) load_step(x, ns, pick_key());
      return;
    }
    std::string ns = pick_ns(), key = pick_key();
    std::uint64_t op = rng_() % 3;
    if (op == 0) return load_step(x, ns, key);
    if (!x.reads.empty() && rng_() % 2) {  // mostly write what it read
      auto it = std::next(x.reads.begin(), static_cast<std::ptrdiff_t>(rng_() % x.reads.size()));
      std::tie(ns, key) = it->first;
    }
    std::pair id{ns, key};
    std::optional<json> value;
    if (op == 1) value = json{{"v", next_value_++}, {"ns", ns}};
    status st = value ? x.t.put(ns, key, *value) : x.t.del(ns, key);
    REQUIRE_MESSAGE(st.is_ok(), where(), st.to_string());
    x.writes[id] = value;
  }

  void load_step(open_txn& x, const std::string& ns, const std::string& key) {
    std::pair id{ns, key};
    auto got = x.t.load(ns, key);
    REQUIRE_MESSAGE(got.is_ok(), where(), got.error().to_string());
    std::optional<json> expect;
    std::uint64_t revision = 0;
    if (auto w = x.writes.find(id); w != x.writes.end()) {
      expect = w->second;
    } else if (auto r = x.reads.find(id); r != x.reads.end()) {
      // Repeatable: what it saw first, whatever was committed since.
      revision = r->second;
      expect = seen_.at({id, revision});
    } else {
      if (auto m = committed_.find(id); m != committed_.end()) {
        revision = m->second.revision;
        expect = m->second.value;
      }
      x.reads[id] = revision;
      seen_[{id, revision}] = expect;
    }
    REQUIRE_MESSAGE(got->has_value() == expect.has_value(), where());
    if (expect) {
      CHECK_MESSAGE((*got)->value == item(*expect), where());
      CHECK_MESSAGE((*got)->revision == revision, where());
    }
  }

  void commit_step() {
    if (txns_.empty()) return;
    std::size_t i = rng_() % txns_.size();
    open_txn x = std::move(txns_[i]);
    txns_.erase(txns_.begin() + static_cast<std::ptrdiff_t>(i));
    bool should_conflict = false;
    for (const auto& [id, revision] : x.reads) {
      auto m = committed_.find(id);
      should_conflict |= (m == committed_.end() ? 0 : m->second.revision) != revision;
    }
    auto r = x.t.commit();
    if (should_conflict) {
      REQUIRE_MESSAGE(!r.is_ok(), where());
      CHECK_MESSAGE(r.error().code() == status_code::conflict, where(), r.error().to_string());
      ++conflicts;
      return;
    }
    REQUIRE_MESSAGE(r.is_ok(), where(), r.error().to_string());
    if (x.reads.empty() && x.writes.empty()) {
      CHECK(*r == 0);
      return;
    }
    if (x.writes.empty()) return;  // validated reads only
    ++commits;
    // Each shard numbers its own writes: one revision a shard, above that
    // shard's last, and the commit answers the highest.
    std::map<std::size_t, std::uint64_t> revision_of;
    for (const auto& w : x.writes) revision_of[recs_->shard_of(w.first.first)] = 0;
    if (revision_of.size() == 1) {
      revision_of.begin()->second = *r;
    } else {
      ++across;
      for (const auto& [id, value] : x.writes) {
        if (!value) continue;  // a shard that only deleted shows no revision
        auto got = recs_->load(id.first, id.second);
        REQUIRE_MESSAGE((got.is_ok() && got->has_value()), where());
        std::uint64_t& revision = revision_of[recs_->shard_of(id.first)];
        if (revision != 0) CHECK_MESSAGE((*got)->revision == revision, where());
        revision = (*got)->revision;
      }
    }
    std::uint64_t highest = 0;
    for (auto& [shard, revision] : revision_of) {
      highest = std::max(highest, revision);
      if (revision == 0) continue;
      std::uint64_t& last = last_revision_[shard];
      CHECK_MESSAGE(revision > last, where());
      last = revision;
    }
    CHECK_MESSAGE(highest <= *r, where());
    if (revision_of.size() == 1) CHECK_MESSAGE(highest == *r, where());
    for (const auto& [id, value] : x.writes) {
      if (value)
        committed_[id] = {revision_of.at(recs_->shard_of(id.first)), *value};
      else
        committed_.erase(id);
    }
  }

  void rollback_step() {
    if (txns_.empty()) return;
    std::size_t i = rng_() % txns_.size();
    txns_[i].t.rollback();
    CHECK(txns_[i].t.put(pick_ns(), "x", json(1)).code() == status_code::invalid_argument);
    txns_.erase(txns_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void stream_step() {
    std::string name = std::string(1, static_cast<char>(rng_() % 3)) + "s";
    auto& model = streams_model_[name];
    std::uint64_t expected = model.size();
    bool wrong = rng_() % 5 == 0;
    if (wrong) expected = rng_() % 2 ? expected + 1 + rng_() % 3 : (expected > 0 ? expected - 1 : expected + 1);
    std::vector<item> entries;
    for (std::uint64_t n = 1 + rng_() % 3; n > 0; --n) entries.push_back(json(next_value_++));
    auto r = streams_->append(name, entries, expected);
    if (wrong) {
      REQUIRE_MESSAGE(r.error().code() == status_code::conflict, where());
      CHECK(r.error().message().find(fmt::format("at seq {}", model.size())) != std::string::npos);
      return;
    }
    REQUIRE_MESSAGE(r.is_ok(), where(), r.error().to_string());
    ++appends;
    for (auto& e : entries) model.push_back(std::get<json>(e));
    std::uint64_t from = rng_() % (model.size() + 1);
    std::size_t limit = 1 + rng_() % 5;
    auto got = streams_->read(name, from, limit);
    REQUIRE(got.is_ok());
    std::size_t want = std::min<std::size_t>(limit, model.size() - from);
    REQUIRE_MESSAGE(got->size() == want, where());
    for (std::size_t k = 0; k < want; ++k) {
      CHECK((*got)[k].seq == from + k);
      CHECK((*got)[k].value == item(model[from + k]));
    }
  }

  // A list of one namespace in random pages against the committed model.
  void list_step() {
    std::string ns = pick_ns();
    std::string prefix = rng_() % 2 ? "" : fmt::format("k{}", rng_() % 2);
    std::size_t limit = 1 + rng_() % 5;
    std::vector<std::pair<std::string, model_record>> want;
    for (const auto& [id, m] : committed_)
      if (id.first == ns && id.second.starts_with(prefix)) want.push_back({id.second, m});
    std::vector<std::pair<std::string, record>> got;
    std::optional<std::string> after;
    for (int pages = 0;; ++pages) {
      REQUIRE_MESSAGE(pages <= 20, where());
      auto p = recs_->list(ns, prefix, after, limit);
      REQUIRE_MESSAGE(p.is_ok(), where());
      REQUIRE(p->records.size() <= limit);
      for (auto& r : p->records) got.push_back(std::move(r));
      if (!p->next) break;
      CHECK(p->records.size() == limit);
      after = p->next;
    }
    REQUIRE_MESSAGE(got.size() == want.size(), where());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].first == want[i].first);
      CHECK(got[i].second.revision == want[i].second.revision);
      CHECK(got[i].second.value == item(want[i].second.value));
    }
  }

  void check_everything() {
    for (const auto& ns : namespaces_)
      for (int k = 0; k < keys_; ++k) {
        std::pair id{ns, fmt::format("k{}", k)};
        auto got = recs_->load(ns, id.second);
        REQUIRE_MESSAGE(got.is_ok(), where());
        auto m = committed_.find(id);
        REQUIRE_MESSAGE(got->has_value() == (m != committed_.end()), where(), " ", ns, "/", id.second);
        if (m != committed_.end()) {
          CHECK_MESSAGE((*got)->revision == m->second.revision, where());
          CHECK_MESSAGE((*got)->value == item(m->second.value), where());
        }
      }
    for (const auto& [name, model] : streams_model_) {
      REQUIRE(streams_->next_seq(name).value() == model.size());
      auto all = streams_->read(name, 0, 1000).value();
      REQUIRE(all.size() == model.size());
      for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].value == item(model[i]));
    }
  }

  std::mt19937_64 rng_;
  std::uint64_t seed_;
  int step_ = 0;
  testing::power_cut_database host_{"/db", 2};
  database* db_ = nullptr;
  std::optional<records> recs_;
  std::optional<streams> streams_;
  std::vector<std::string> namespaces_;
  std::vector<open_txn> txns_;
  std::map<std::pair<std::string, std::string>, model_record> committed_;
  // What a transaction's first load of a key at a revision saw.
  std::map<std::pair<std::pair<std::string, std::string>, std::uint64_t>, std::optional<json>> seen_;
  std::map<std::size_t, std::uint64_t> last_revision_;
  std::map<std::string, std::vector<json>> streams_model_;
  int next_value_ = 0;
  static constexpr int keys_ = 6;  // few: transactions collide
};

}  // namespace

TEST_CASE("state model: records, interleaved transactions and streams against a model, with reopens and power cuts") {
  std::uint64_t commits = 0, across = 0, conflicts = 0, cuts = 0, appends = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    walk w(seed);
    w.run(700);
    commits += w.commits;
    across += w.across;
    conflicts += w.conflicts;
    cuts += w.power_cuts;
    appends += w.appends;
  }
  // The walk reached what it is for.
  CHECK(commits > 150);
  CHECK(across > 15);
  CHECK(conflicts > 15);
  CHECK(cuts > 15);
  CHECK(appends > 200);
  MESSAGE(commits, " commits (", across, " across shards), ", conflicts, " conflicts, ", cuts, " power cuts, ", appends,
          " appends");
}

// ---- serializability under contention ----------------------------------------------

namespace {

// What one thread saw and did in one transaction.
struct txn_log {
  int id = 0;
  std::vector<std::tuple<std::string, std::uint64_t, std::optional<json>>> reads;  // key (ns/key), revision, value
  std::vector<std::pair<std::string, json>> writes;
  bool committed = false;
  std::uint64_t revision = 0;
  bool ambiguous = false;  // a commit whose deadline passed while waiting
  bool unsent = false;     // a commit whose deadline passed before it was sent
};

struct key_state {
  std::uint64_t revision = 0;
  std::optional<json> value;
};

// Runs `threads` threads of `per_thread` transactions over 16 keys in two
// namespaces of one shard; each loads 2-4 keys and puts 1-2 of them (or a
// key it did not read) with a value unique to the transaction.
std::vector<txn_log> run_contended(database& db, int threads, int per_thread,
                                   std::optional<std::chrono::microseconds> deadline,
                                   const std::vector<std::string>& ns) {
  std::vector<std::vector<txn_log>> logs(threads);
  std::vector<std::thread> pool;
  records recs(db);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < per_thread; ++i) {
        txn_log log;
        log.id = t * per_thread + i + 1;
        auto x = recs.begin();
        auto key = [&] { return std::pair{ns[rng() % 2], fmt::format("hot{}", rng() % 8)}; };
        std::set<std::pair<std::string, std::string>> read;
        for (int n = 2 + static_cast<int>(rng() % 3); n > 0; --n) {
          auto k = key();
          if (!read.insert(k).second) continue;
          auto got = x.load(k.first, k.second);
          REQUIRE(got.is_ok());
          std::optional<json> v;
          if (*got) v = std::get<json>((*got)->value);
          log.reads.emplace_back(k.first + "/" + k.second, *got ? (*got)->revision : 0, v);
        }
        std::vector<std::pair<std::string, std::string>> targets(read.begin(), read.end());
        std::shuffle(targets.begin(), targets.end(), rng);
        targets.resize(1 + rng() % 2);
        if (rng() % 4 == 0) targets.back() = key();  // sometimes a blind write
        for (const auto& k : targets) {
          json v{{"t", log.id}, {"reads", log.reads.size()}};
          REQUIRE(x.put(k.first, k.second, v).is_ok());
          log.writes.emplace_back(k.first + "/" + k.second, v);
        }
        auto r = x.commit(deadline ? std::optional(std::chrono::steady_clock::now() + *deadline) : std::nullopt);
        if (r.is_ok()) {
          log.committed = true;
          log.revision = *r;
        } else if (r.error().code() == status_code::timeout) {
          // Ambiguous once sent; transient when the deadline passed before
          // the request left (a slow build, a loaded machine): nothing sent.
          if (r.error().category() == status_category::ambiguous) {
            log.ambiguous = true;
          } else {
            REQUIRE(r.error().category() == status_category::transient);
            log.unsent = true;
          }
        } else {
          REQUIRE_MESSAGE(r.error().code() == status_code::conflict, r.error().to_string());
        }
        logs[t].push_back(std::move(log));
      }
    });
  for (auto& p : pool) p.join();
  std::vector<txn_log> all;
  for (auto& l : logs)
    for (auto& x : l) all.push_back(std::move(x));
  return all;
}

// The checker: committed transactions in revision order are a serial
// history in which each read exactly what it saw; the final state is that
// history's; each conflict is explained by a later commit of a key it read.
void check_serializable(std::vector<txn_log> logs, const std::map<std::string, key_state>& final_state) {
  // An ambiguous commit landed iff its unique value is in the final state or
  // was read by someone; then it holds the revision found there.
  std::map<int, std::uint64_t> landed;
  auto note = [&](const std::optional<json>& v, std::uint64_t revision) {
    if (v) landed[(*v)["t"].get<int>()] = revision;
  };
  for (const auto& l : logs)
    for (const auto& [k, rev, v] : l.reads) note(v, rev);
  for (const auto& [k, s] : final_state) note(s.value, s.revision);
  for (auto& l : logs)
    if (l.ambiguous && landed.count(l.id)) {
      l.committed = true;
      l.revision = landed[l.id];
    }
  std::vector<const txn_log*> order;
  for (const auto& l : logs)
    if (l.committed) order.push_back(&l);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->revision < b->revision; });
  std::map<std::string, key_state> model;
  std::map<std::string, std::vector<std::uint64_t>> writes_at;  // key -> revisions of commits that wrote it
  for (std::size_t i = 0; i < order.size(); ++i) {
    const txn_log& l = *order[i];
    if (i > 0) REQUIRE_MESSAGE(order[i - 1]->revision < l.revision, "two commits share revision ", l.revision);
    for (const auto& [k, rev, v] : l.reads) {
      const key_state& m = model[k];
      REQUIRE_MESSAGE(m.revision == rev, "txn ", l.id, " read ", k, " at ", rev, " but the serial order has ",
                      m.revision);
      REQUIRE(m.value == v);
    }
    for (const auto& [k, v] : l.writes) {
      model[k] = {l.revision, v};
      writes_at[k].push_back(l.revision);
    }
  }
  // The final state is the serial history's.
  for (const auto& [k, s] : final_state) {
    CHECK_MESSAGE(model[k].revision == s.revision, k);
    CHECK_MESSAGE(model[k].value == s.value, k);
  }
  // Nothing of a transaction that did not commit is anywhere; every conflict
  // is justified by a commit, after what it read, of a key it read.
  for (const auto& l : logs) {
    if (l.committed || l.ambiguous) continue;
    CHECK_FALSE(landed.count(l.id));
    if (l.unsent) continue;  // refused before sending: no conflict to explain
    bool justified = false;
    for (const auto& [k, rev, v] : l.reads)
      for (std::uint64_t w : writes_at[k]) justified |= w > rev;
    CHECK_MESSAGE(justified, "txn ", l.id, " conflicted with no later write of a key it read");
  }
}

std::vector<std::string> two_namespaces_on_one_shard(const records& recs) {
  std::vector<std::string> ns{"hot-a"};
  for (int i = 0; ns.size() < 2; ++i)
    if (recs.shard_of(fmt::format("hot-{}", i)) == recs.shard_of(ns[0])) ns.push_back(fmt::format("hot-{}", i));
  return ns;
}

std::map<std::string, key_state> final_state_of(const records& recs, const std::vector<std::string>& ns) {
  std::map<std::string, key_state> out;
  for (const auto& n : ns)
    for (int k = 0; k < 8; ++k) {
      std::string key = fmt::format("hot{}", k);
      auto got = recs.load(n, key);
      REQUIRE(got.is_ok());
      if (*got)
        out[n + "/" + key] = {(*got)->revision, std::get<json>((*got)->value)};
      else
        out[n + "/" + key] = {};
    }
  return out;
}

}  // namespace

TEST_CASE("state transactions: 16 threads of conflicting transactions commit a serializable history") {
  testing::temp_dir d("state-serial");
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  auto ns = two_namespaces_on_one_shard(recs);
  auto logs = run_contended(*db, 16, 150, std::nullopt, ns);
  std::size_t committed = 0, conflicted = 0;
  for (const auto& l : logs) (l.committed ? committed : conflicted) += 1;
  MESSAGE(committed, " committed, ", conflicted, " conflicts");
  CHECK(committed > 100);
  CHECK(conflicted > 10);  // the test contended
  check_serializable(std::move(logs), final_state_of(recs, ns));
}

TEST_CASE(
    "state transactions: with 1 ms deadlines, ambiguous commits are decided by their values and the history "
    "stays serializable") {
  testing::temp_dir d("state-serial");
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  auto ns = two_namespaces_on_one_shard(recs);
  auto logs = run_contended(*db, 8, 150, 1ms, ns);
  std::size_t ambiguous = 0;
  for (const auto& l : logs) ambiguous += l.ambiguous;
  MESSAGE(ambiguous, " ambiguous commits of ", logs.size());
  // Let every admitted commit finish: a write queued behind them is answered after them.
  for (const auto& n : ns) {
    auto t = recs.begin();
    REQUIRE(t.put(n, "barrier", json(1)).is_ok());
    REQUIRE(t.commit().is_ok());
  }
  check_serializable(std::move(logs), final_state_of(recs, ns));
}

// ---- serializability across shards ---------------------------------------------------

namespace {

// One transaction across two shards: reads 2-4 hot keys and rewrites 1-2 of
// them, each new value naming the transaction and the writer of the value it
// replaces, so every key's committed versions form one chain.
struct chained_txn {
  int id = 0;
  std::map<std::string, int> read;   // key -> writer of the value seen (0: none)
  std::map<std::string, int> wrote;  // key -> writer it replaced
  bool committed = false;
};

std::vector<chained_txn> run_across(records& recs, const std::vector<std::string>& ns, int threads, int per_thread) {
  std::vector<std::vector<chained_txn>> logs(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(7000 + t);
      for (int i = 0; i < per_thread; ++i) {
        chained_txn log;
        log.id = t * per_thread + i + 1;
        auto x = recs.begin();
        for (int n = 2 + static_cast<int>(rng() % 3); n > 0; --n) {
          const std::string& space = ns[rng() % ns.size()];
          std::string key = fmt::format("hot{}", rng() % 3);
          if (log.read.contains(space + "/" + key)) continue;
          auto got = x.load(space, key);
          REQUIRE(got.is_ok());
          log.read[space + "/" + key] = *got ? std::get<json>((*got)->value)["t"].get<int>() : 0;
        }
        std::vector<std::string> targets;
        for (const auto& [k, w] : log.read) targets.push_back(k);
        std::shuffle(targets.begin(), targets.end(), rng);
        targets.resize(std::min<std::size_t>(targets.size(), 1 + rng() % 2));
        for (const auto& k : targets) {
          auto slash = k.find('/');
          json v{{"t", log.id}, {"prev", log.read.at(k)}};
          REQUIRE(x.put(k.substr(0, slash), k.substr(slash + 1), v).is_ok());
          log.wrote[k] = log.read.at(k);
        }
        auto r = x.commit();
        if (r.is_ok())
          log.committed = true;
        else
          REQUIRE_MESSAGE(r.error().code() == status_code::conflict, r.error().to_string());
        logs[t].push_back(std::move(log));
      }
    });
  for (auto& p : pool) p.join();
  std::vector<chained_txn> all;
  for (auto& l : logs)
    for (auto& x : l) all.push_back(std::move(x));
  return all;
}

// Conflict serializability: every key's versions are the chain its final
// value ends; the graph of write-write, write-read and read-write edges over
// committed transactions has no cycle; no aborted write is anywhere.
void check_chains(const std::vector<chained_txn>& logs, const std::map<std::string, int>& final_writer) {
  std::map<int, const chained_txn*> by_id;
  for (const auto& l : logs) by_id[l.id] = &l;
  std::map<std::string, std::vector<int>> chain;  // key -> writers, oldest first (0: the initial absence)
  for (const auto& [k, last] : final_writer) {
    std::vector<int> c;
    for (int w = last; w != 0;) {
      REQUIRE_MESSAGE(c.size() <= logs.size(), "a cycle in the chain of ", k);
      const chained_txn& t = *by_id.at(w);
      REQUIRE_MESSAGE(t.committed, "txn ", w, " did not commit, yet ", k, " holds its write");
      c.push_back(w);
      w = t.wrote.at(k);
    }
    c.push_back(0);
    std::reverse(c.begin(), c.end());
    chain[k] = std::move(c);
  }
  // No lost update: every committed write is in its key's chain.
  for (const auto& l : logs)
    if (l.committed)
      for (const auto& [k, prev] : l.wrote) {
        const auto& c = chain.at(k);
        REQUIRE_MESSAGE(std::find(c.begin(), c.end(), l.id) != c.end(), "txn ", l.id, "'s write of ", k, " is lost");
      }
  std::map<int, std::set<int>> edges;
  for (const auto& [k, c] : chain) {
    std::map<int, std::size_t> at;
    for (std::size_t i = 0; i < c.size(); ++i) at[c[i]] = i;
    for (std::size_t i = 1; i + 1 < c.size(); ++i) edges[c[i]].insert(c[i + 1]);  // ww
    for (const auto& l : logs) {
      if (!l.committed || !l.read.contains(k)) continue;
      int seen = l.read.at(k);
      REQUIRE_MESSAGE(at.contains(seen), "txn ", l.id, " read ", k, " from txn ", seen, ", not a committed version");
      std::size_t i = at.at(seen);
      if (seen != 0 && seen != l.id) edges[seen].insert(l.id);                 // wr
      if (i + 1 < c.size() && c[i + 1] != l.id) edges[l.id].insert(c[i + 1]);  // rw
    }
  }
  // Kahn's algorithm: every committed transaction must be ordered.
  std::map<int, int> indegree;
  for (const auto& l : logs)
    if (l.committed) indegree[l.id] = 0;
  for (const auto& [from, to] : edges)
    for (int t : to) ++indegree[t];
  std::vector<int> ready;
  for (const auto& [t, n] : indegree)
    if (n == 0) ready.push_back(t);
  std::size_t ordered = 0;
  while (!ready.empty()) {
    int t = ready.back();
    ready.pop_back();
    ++ordered;
    for (int next : edges[t])
      if (--indegree[next] == 0) ready.push_back(next);
  }
  std::size_t on_cycle = indegree.size() - ordered;
  CHECK_MESSAGE(on_cycle == 0, on_cycle, " committed transactions sit on a cycle");
}

}  // namespace

TEST_CASE("state transactions: 16 threads of transactions across two shards commit a serializable history") {
  testing::temp_dir d("state-across");
  auto db = must_open(options_for(d.path(), 2));
  records recs(*db);
  std::vector<std::string> ns;
  for (int i = 0; ns.size() < 2; ++i) {
    std::string n = fmt::format("acct-{}", i);
    if (recs.shard_of(n) == ns.size()) ns.push_back(n);
  }
  auto logs = run_across(recs, ns, 16, 80);
  std::size_t committed = 0, spanning = 0;
  for (const auto& l : logs) {
    committed += l.committed;
    std::set<std::string> spaces;
    for (const auto& [k, w] : l.read) spaces.insert(k.substr(0, k.find('/')));
    spanning += l.committed && spaces.size() == 2;
  }
  MESSAGE(committed, " committed (", spanning, " across shards) of ", logs.size());
  // Enough commits across shards for the check to mean something: they
  // vary with the race (49 to 73 seen in five runs on 2 cores, 2026-12-07),
  // so the bound sits well under that.
  CHECK(spanning > 25);
  CHECK(logs.size() - committed > 50);  // the test contended
  std::map<std::string, int> final_writer;
  for (const auto& n : ns)
    for (int k = 0; k < 3; ++k) {
      auto got = recs.load(n, fmt::format("hot{}", k));
      REQUIRE(got.is_ok());
      final_writer[n + "/hot" + std::to_string(k)] = *got ? std::get<json>((*got)->value)["t"].get<int>() : 0;
    }
  check_chains(logs, final_writer);
}
