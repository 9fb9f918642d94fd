// state/ on a replicated cluster: records, streams and keyed state through
// a cluster_client, three nodes over loopback in this process. Loads, lists
// and commits go to the owner of the shard; a commit is one batch a majority
// holds; revisions keep growing when the owner moves; a retried commit is
// applied once; bad input is refused with nothing written
// (docs/design/replication.md, 10).
#include <doctest/doctest.h>

#include "actors/caf_headers.h"  // before any other CAF header

#include "engine/prepared_transactions.h"
#include "engine/transaction_records.h"
#include "magnetite/state/keyed_state.h"
#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
#include "replication/request_record.h"
#include "state/layout.h"
#include "tests/support/keyed_state_walk.h"
#include "tests/support/poll.h"
#include "tests/support/three_nodes.h"

using namespace magnetite;
using namespace magnetite::state;
using magnetite::testing::must;

namespace {

json doc(int n) { return json{{"n", n}}; }

// The namespace's shard, elected to node `owner`, and a records handle.
struct cluster_records {
  testing::three_nodes c;
  std::unique_ptr<cluster_client> client;
  records recs;
  std::size_t shard;

  cluster_records(std::uint16_t first, std::uint32_t owner)
      : c(testing::three_nodes::base_port(first), "records"),
        client(c.client()),
        recs(*client),
        shard(recs.shard_of("acct")) {
    REQUIRE(c.elect(owner, shard));
  }

  // How many nodes' own shard holds record (ns, key) with this revision.
  int holding(std::string_view ns, std::string_view key, std::uint64_t revision) {
    int n = 0;
    for (std::uint32_t id = 1; id <= 3; ++id) {
      auto v = c.local_in(id, shard, record_key(ns, key));
      if (v && v->size() >= 8 && state_space::revision_of("", *v).value() == revision) ++n;
    }
    return n;
  }
};

int number(const record& r) { return std::get<json>(r.value).at("n").get<int>(); }

}  // namespace

TEST_CASE("records on a cluster: loads, lists and commits go through the owner; a majority holds every commit") {
  cluster_records r(12, 1);
  CHECK_FALSE(r.recs.load("acct", "x").value());
  auto t = r.recs.begin();
  CHECK_FALSE(t.load("acct", "x").value());
  REQUIRE(t.put("acct", "x", doc(1)).is_ok());
  REQUIRE(t.put("acct", "y", bytes{std::string("raw\0", 4)}).is_ok());
  auto rev = t.commit();
  REQUIRE(rev.is_ok());
  CHECK(*rev > 0);
  auto x = r.recs.load("acct", "x").value();
  REQUIRE(x);
  CHECK(number(*x) == 1);
  CHECK(x->revision == *rev);
  CHECK(r.recs.load("acct", "y").value()->value == item(bytes{std::string("raw\0", 4)}));
  // Acknowledged: the owner and at least one more node hold the same bytes.
  CHECK(r.holding("acct", "x", *rev) >= 2);
  CHECK(r.c.local_in(1, r.shard, record_key("acct", "x")).has_value());

  // A later commit of one key moves only that key's revision, upward; a
  // delete and a re-create never bring an old revision back.
  auto t2 = r.recs.begin();
  REQUIRE(t2.put("acct", "x", doc(2)).is_ok());
  auto rev2 = t2.commit().value();
  CHECK(rev2 > *rev);
  CHECK(r.recs.load("acct", "y").value()->revision == *rev);
  auto t3 = r.recs.begin();
  REQUIRE(t3.del("acct", "x").is_ok());
  REQUIRE(t3.commit().is_ok());
  CHECK_FALSE(r.recs.load("acct", "x").value());
  auto t4 = r.recs.begin();
  REQUIRE(t4.put("acct", "x", doc(3)).is_ok());
  auto rev4 = t4.commit().value();
  CHECK(rev4 > rev2);

  // Conflicts: a read that moved refuses the whole commit, nothing written.
  auto a = r.recs.begin(), b = r.recs.begin();
  REQUIRE(a.load("acct", "x").value());
  REQUIRE(b.load("acct", "x").value());
  REQUIRE(b.put("acct", "x", doc(4)).is_ok());
  auto won = b.commit().value();
  REQUIRE(a.put("acct", "x", doc(5)).is_ok());
  REQUIRE(a.put("acct", "z", doc(5)).is_ok());
  auto lost = a.commit();
  REQUIRE_FALSE(lost.is_ok());
  CHECK(lost.error().code() == status_code::conflict);
  CHECK(lost.error().category() == status_category::transient);
  CHECK(lost.error().message().find(fmt::format("revision {} and is now at {}", rev4, won)) != std::string::npos);
  CHECK(number(*r.recs.load("acct", "x").value()) == 4);
  CHECK_FALSE(r.recs.load("acct", "z").value());
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK_FALSE(r.c.local_in(id, r.shard, record_key("acct", "z")));

  // Write skew: each reads x and y and writes one of them; never both.
  auto s1 = r.recs.begin(), s2 = r.recs.begin();
  for (auto* s : {&s1, &s2}) {
    REQUIRE(s->load("acct", "x").is_ok());
    REQUIRE(s->load("acct", "y").is_ok());
  }
  REQUIRE(s1.put("acct", "x", doc(-1)).is_ok());
  REQUIRE(s2.put("acct", "y", doc(-1)).is_ok());
  auto c1 = s1.commit();
  auto c2 = s2.commit();
  CHECK(c1.is_ok() != c2.is_ok());

  // A read-only commit is validated too, and a page of a list ends where
  // the namespace does.
  auto ro = r.recs.begin();
  REQUIRE(ro.load("acct", "x").is_ok());
  CHECK(ro.commit().is_ok());
  auto fill = r.recs.begin();
  for (int i = 0; i < 25; ++i) REQUIRE(fill.put("acct", fmt::format("i{:02}", i), doc(i)).is_ok());
  REQUIRE(fill.commit().is_ok());
  std::vector<std::string> seen;
  std::optional<std::string> after;
  int pages = 0;
  do {
    auto p = r.recs.list("acct", "i", after, 10);
    REQUIRE(p.is_ok());
    ++pages;
    for (auto& [k, rec] : p->records) {
      CHECK(number(rec) == std::stoi(k.substr(1)));
      seen.push_back(k);
    }
    after = p->next;
  } while (after);
  CHECK(pages == 3);
  REQUIRE(seen.size() == 25);
  for (int i = 0; i < 25; ++i) CHECK(seen[i] == fmt::format("i{:02}", i));
  auto all = r.recs.list("acct", "", std::nullopt, 1000).value();
  CHECK(all.records.size() == 27);  // i00..i24, x and y
  CHECK_FALSE(all.next);
}

TEST_CASE("records on a cluster: a new owner gives revisions above every committed one; a retry applies once") {
  cluster_records r(15, 1);
  auto t = r.recs.begin();
  REQUIRE(t.put("acct", "x", doc(1)).is_ok());
  auto rev1 = t.commit().value();
  auto other = r.recs.begin();
  REQUIRE(other.put("acct", "y", doc(1)).is_ok());
  auto rev_y = other.commit().value();
  CHECK(rev_y > rev1);

  // Node 3 takes the shard. Its first commit, on a key of its own, must
  // still go above everything node 1 gave, or a delete and re-create of y
  // could come back to a revision a reader once saw.
  REQUIRE(r.c.elect(3, r.shard));
  auto t2 = r.recs.begin();
  REQUIRE(t2.put("acct", "fresh", doc(2)).is_ok());
  auto rev2 = t2.commit().value();
  CHECK(rev2 > rev_y);
  CHECK(r.client->owner_of(r.shard) == 3);
  CHECK(r.holding("acct", "fresh", rev2) >= 2);
  // A load through the new owner sees node 1's commits.
  CHECK(r.recs.load("acct", "y").value()->revision == rev_y);

  // The same conditional batch sent twice under one request id (a retry
  // after a lost answer): the second answer repeats the first's revision,
  // and nothing is written again.
  caf::scoped_actor self{*r.c.nodes[2]->sys};
  auto owner = r.c.nodes[2]->n->replica(r.shard);
  replication::request_id rid{hash128{7, 9}, 1};
  std::vector<state_check> checks{{record_key("acct", "y"), rev_y}};
  std::vector<batch_op> ops{{record_key("acct", "y"), true, std::string("\0again", 6), 0}};
  std::vector<std::uint64_t> answers;
  for (int attempt = 0; attempt < 2; ++attempt)
    self->request(owner, std::chrono::seconds(10), apply_atom::value, checks, ops, rid)
        .receive(
            [&](bool applied, std::uint64_t revision, std::uint32_t, std::uint64_t) {
              CHECK(applied);
              answers.push_back(revision);
            },
            [&](caf::error& e) { FAIL(to_status(e).to_string()); });
  REQUIRE(answers.size() == 2);
  CHECK(answers[0] == answers[1]);
  CHECK(answers[0] > rev2);
  auto y = r.recs.load("acct", "y").value();
  REQUIRE(y);
  CHECK(y->revision == answers[0]);
  CHECK(y->value == item(bytes{"again"}));
  // A new request with the same check now fails: y moved.
  rid.seq = 2;
  self->request(owner, std::chrono::seconds(10), apply_atom::value, checks, ops, rid)
      .receive(
          [&](bool applied, std::uint64_t, std::uint32_t failed, std::uint64_t found) {
            CHECK_FALSE(applied);
            CHECK(failed == 0);
            CHECK(found == answers[0]);
          },
          [&](caf::error& e) { FAIL(to_status(e).to_string()); });
}

TEST_CASE("records on a cluster: bad input is refused, nothing written") {
  cluster_records r(18, 2);
  // A transaction across shards with a TTL'd write cannot be sent at all.
  std::string other;
  for (int i = 0; other.empty(); ++i)
    if (r.recs.shard_of(fmt::format("ns{}", i)) != r.shard) other = fmt::format("ns{}", i);
  REQUIRE(r.c.elect(2, r.recs.shard_of(other)));
  std::vector<transaction_part> parts{
      {r.shard, {}, {{record_key("acct", "x"), std::string("\0v", 2), {}}}},
      {r.recs.shard_of(other), {}, {{record_key(other, "x"), std::string("\0v", 2), std::chrono::seconds(1)}}}};
  CHECK(r.client->state_store().commit_across(parts).error().code() == status_code::invalid_argument);
  CHECK(r.client->state_store().commit_across({}).error().code() == status_code::invalid_argument);
  std::vector<transaction_part> twice{{r.shard, {}, {{record_key("acct", "x"), std::string("\0v", 2), {}}}},
                                      {r.shard, {}, {{record_key("acct", "y"), std::string("\0v", 2), {}}}}};
  CHECK(r.client->state_store().commit_across(twice).error().code() == status_code::invalid_argument);
  CHECK_FALSE(r.recs.load("acct", "x").value());
  CHECK_FALSE(r.recs.load(other, "x").value());

  // The owner refuses what state/ never sends: a batch that names the
  // shard's own records, a plain key, a delete with a TTL.
  caf::scoped_actor self{*r.c.nodes[1]->sys};
  auto owner = r.c.nodes[1]->n->replica(r.shard);
  auto refused = [&](std::vector<state_check> checks, std::vector<batch_op> ops) {
    status got;
    self->request(owner, std::chrono::seconds(10), apply_atom::value, checks, ops,
                  replication::request_id{hash128{1, 2}, 3})
        .receive([&](bool, std::uint64_t, std::uint32_t, std::uint64_t) {}, [&](caf::error& e) { got = to_status(e); });
    return got.code();
  };
  std::string mark("\xff\xff\x6d", 3);
  CHECK(refused({}, {{mark, true, std::string(8, '\x7f'), 0}}) == status_code::invalid_argument);
  CHECK(refused({{mark, 1}}, {}) == status_code::invalid_argument);
  CHECK(refused({}, {{replication::request_record_key({hash128{1, 1}, 1}), true, std::string(8, '\x01'), 0}}) ==
        status_code::invalid_argument);
  CHECK(refused({}, {{"plain", true, "v", 0}}) == status_code::invalid_argument);
  CHECK(refused({}, {{record_key("acct", "x"), false, "", 5}}) == status_code::invalid_argument);
  CHECK(refused({}, {{transaction_records::prepare_key(hash128{1, 1}), true, std::string(9, '\x01'), 0}}) ==
        status_code::invalid_argument);
  CHECK(refused({}, {{transaction_records::decision_key(hash128{1, 1}), true, std::string(9, '\x01'), 0}}) ==
        status_code::invalid_argument);
  CHECK_FALSE(r.c.local_in(2, r.shard, mark).has_value());
  // Oversized values are refused by the client before anything is sent.
  auto big = r.recs.begin();
  CHECK(big.put("acct", "x", bytes{std::string(state_space::max_value_bytes, 'v')}).code() ==
        status_code::invalid_argument);
  CHECK(r.client->retries() == 0);
}

TEST_CASE(
    "streams on a cluster: appends at the expected seq, one winner of two, reads in order across an owner change") {
  testing::three_nodes c(testing::three_nodes::base_port(21), "streams");
  auto client = c.client();
  streams logs(*client);
  std::size_t shard = logs.shard_of("events");
  REQUIRE(c.elect(1, shard));
  CHECK(logs.next_seq("events").value() == 0);
  std::vector<item> two{json(0), json(1)};
  CHECK(logs.append("events", two, 0).value() == 0);
  CHECK(logs.next_seq("events").value() == 2);
  // A second append at a seq already taken loses, naming where the stream is.
  std::vector<item> late{json(99)};
  auto lost = logs.append("events", late, 1);
  REQUIRE_FALSE(lost.is_ok());
  CHECK(lost.error().code() == status_code::conflict);
  CHECK(lost.error().message().find("is at seq 2, not 1") != std::string::npos);
  // Node 2 takes the shard: the stream goes on from where it was.
  REQUIRE(c.elect(2, shard));
  std::vector<item> third{json(2)};
  CHECK(logs.append("events", third, 2).value() == 2);
  CHECK(client->owner_of(shard) == 2);
  auto all = logs.read("events", 0, 10).value();
  REQUIRE(all.size() == 3);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].seq == i);
    CHECK(std::get<json>(all[i].value).get<std::size_t>() == i);
  }
  auto from1 = logs.read("events", 1, 1).value();
  REQUIRE(from1.size() == 1);
  CHECK(from1[0].seq == 1);
  // Every entry is on a majority: node 2's own shard and one more.
  int holding = 0;
  for (std::uint32_t id = 1; id <= 3; ++id) holding += c.local_in(id, shard, stream_entry_key("events", 2)) ? 1 : 0;
  CHECK(holding >= 2);
}

TEST_CASE(
    "keyed state on a cluster: commits through the owner, a deque's conflict, large scans across an owner change") {
  testing::three_nodes c(testing::three_nodes::base_port(24), "keyed");
  auto client = c.client();
  owner_state o(*client, "carts", "u1");
  REQUIRE(c.elect(1, o.shard()));
  auto v = o.value("total");
  REQUIRE(v.set(json(3)).is_ok());
  CHECK(v.get().value() == std::optional<item>(json(3)));  // read your own buffered write
  REQUIRE(o.commit().is_ok());
  owner_state reader(*client, "carts", "u1");
  CHECK(reader.value("total").get().value() == std::optional<item>(json(3)));
  // A deque changed by another writer between read and commit conflicts,
  // and nothing of the loser is written.
  auto q1 = o.deque("q");
  REQUIRE(q1.push_back(json(1)).is_ok());
  REQUIRE(q1.commit().is_ok());
  owner_state other(*client, "carts", "u1");
  auto q2 = other.deque("q");
  REQUIRE(q1.push_back(json(2)).is_ok());
  REQUIRE(q2.push_back(json(20)).is_ok());
  REQUIRE(q2.commit().is_ok());
  auto lost = q1.commit();
  REQUIRE_FALSE(lost.is_ok());
  CHECK(lost.code() == status_code::conflict);
  q1.rollback();
  CHECK(testing::drain_cursor(must(q1.scan()), 10) == std::vector<item>{json(1), json(20)});
  // Node 2 takes the shard; a map and a deque of several scan chunks
  // (and several range answers) are walked against models through it.
  REQUIRE(c.elect(2, o.shard()));
  testing::walk_large_collections(o, 600, 12, 5);
  CHECK(client->owner_of(o.shard()) == 2);
  CHECK(reader.value("total").get().value() == std::optional<item>(json(3)));
}

namespace {

// Two namespaces on the two shards, shard a owned by node 1 and shard b by
// node 2; a client whose resolvers act on holds older than 1 ms.
struct two_shards {
  testing::three_nodes c;
  std::unique_ptr<cluster_client> client;
  records recs;
  std::string a = "acct", b;
  std::size_t sa, sb;

  explicit two_shards(std::uint16_t first)
      : c(testing::three_nodes::base_port(first), "across"), client(make_client()), recs(*client) {
    sa = recs.shard_of(a);
    for (int i = 0; b.empty(); ++i)
      if (recs.shard_of(fmt::format("ns{}", i)) != sa) b = fmt::format("ns{}", i);
    sb = recs.shard_of(b);
    REQUIRE(c.elect(1, sa));
    REQUIRE(c.elect(2, sb));
  }
  std::unique_ptr<cluster_client> make_client() {
    cluster_client_options o;
    o.cluster_file = c.file;
    o.call_timeout = std::chrono::seconds(10);
    o.attempt_timeout = std::chrono::milliseconds(1000);
    o.resolve_after = std::chrono::milliseconds(1);
    return must(cluster_client::connect(o));
  }
  int balance(const std::string& ns) {
    auto r = recs.load(ns, "bal").value();
    return r ? number(*r) : 0;
  }
  // Moves n from a to b (or b to a for n < 0) in one transaction.
  result<std::uint64_t> transfer(int n) {
    auto t = recs.begin();
    int x = 0, y = 0;
    if (auto r = t.load(a, "bal").value()) x = number(*r);
    if (auto r = t.load(b, "bal").value()) y = number(*r);
    MAGNETITE_TRY(t.put(a, "bal", doc(x - n)));
    MAGNETITE_TRY(t.put(b, "bal", doc(y + n)));
    return t.commit();
  }
  // Prepare records node `id` holds on shard s (a deleted one is a tombstone).
  std::size_t prepares_on(std::uint32_t id, std::size_t s) {
    auto v = c.nodes[id - 1]->db->core().slot_of(s)->view.load();
    return prepared_transactions::load(*v).value().size();
  }
  // Balances set by one single-shard commit each.
  void seed(int x, int y) {
    for (auto [ns, n] : {std::pair{a, x}, std::pair{b, y}}) {
      auto t = recs.begin();
      REQUIRE(t.put(ns, "bal", doc(n)).is_ok());
      REQUIRE(t.commit().is_ok());
    }
  }
  std::optional<bool> decision_on(std::uint32_t id, std::size_t s, const hash128& tx) {
    auto v = c.local_in(id, s, transaction_records::decision_key(tx));
    if (!v) return std::nullopt;
    return transaction_records::decode_decision(*v).value().commit;
  }
  // A prepare of `tx` at b's owner (node `owner`) writing b's balance, as a
  // driver that then died would leave it.
  void prepare_only(std::uint32_t owner, const hash128& tx, int value) {
    caf::scoped_actor self{*c.nodes[owner - 1]->sys};
    std::string body = std::string(1, '\x01') + json{{"n", value}}.dump();
    bool prepared = false;
    self->request(c.nodes[owner - 1]->n->replica(sb), std::chrono::seconds(10), tx_prepare_atom::value, tx,
                  static_cast<std::uint32_t>(sa), std::vector<state_check>{},
                  std::vector<batch_op>{{record_key(b, "bal"), true, body, 0}})
        .receive([&](bool p, std::uint32_t, std::uint64_t) { prepared = p; },
                 [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(prepared);
  }
  // What a driver does once every part is prepared: the decision `commit`
  // at a's owner (node 1), then the finish at b's owner (node `owner`);
  // the finish's revision (0: nothing was held).
  std::uint64_t decide_and_finish(std::uint32_t owner, const hash128& tx) {
    caf::scoped_actor self{*c.nodes[0]->sys};
    bool committed = false;
    self->request(c.nodes[0]->n->replica(sa), std::chrono::seconds(10), tx_decide_atom::value, tx, true,
                  std::vector<std::uint32_t>{})
        .receive([&](bool x) { committed = x; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(committed);
    return finish(owner, tx);
  }
  std::uint64_t finish(std::uint32_t owner, const hash128& tx) {
    caf::scoped_actor self{*c.nodes[0]->sys};
    std::uint64_t revision = 0;
    self->request(c.nodes[owner - 1]->n->replica(sb), std::chrono::seconds(10), tx_finish_atom::value, tx, true)
        .receive([&](std::uint64_t r) { revision = r; }, [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    return revision;
  }
};

}  // namespace

TEST_CASE("transactions across shards on a cluster: a transfer commits whole; a conflict writes nothing") {
  two_shards t(27);
  t.seed(100, 0);
  auto rev = t.transfer(30);
  REQUIRE(rev.is_ok());
  CHECK(*rev > 0);
  CHECK(t.balance(t.a) == 70);
  CHECK(t.balance(t.b) == 30);
  // Every participant finished: no prepare is left anywhere.
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK(t.prepares_on(id, t.sb) == 0);
  // Two transfers read the same balances; the second to commit conflicts
  // and writes nothing on either shard.
  auto t1 = t.recs.begin(), t2 = t.recs.begin();
  for (auto* x : {&t1, &t2}) {
    REQUIRE(x->load(t.a, "bal").is_ok());
    REQUIRE(x->load(t.b, "bal").is_ok());
  }
  REQUIRE(t1.put(t.a, "bal", doc(0)).is_ok());
  REQUIRE(t1.put(t.b, "bal", doc(100)).is_ok());
  REQUIRE(t2.put(t.a, "bal", doc(69)).is_ok());
  REQUIRE(t2.put(t.b, "bal", doc(31)).is_ok());
  REQUIRE(t1.commit().is_ok());
  auto lost = t2.commit();
  REQUIRE_FALSE(lost.is_ok());
  CHECK(lost.error().code() == status_code::conflict);
  CHECK(t.balance(t.a) == 0);
  CHECK(t.balance(t.b) == 100);
  for (std::uint32_t id = 1; id <= 3; ++id) CHECK(t.prepares_on(id, t.sb) == 0);
}

TEST_CASE("transactions across shards on a cluster: a prepare whose client died is resolved by the next commit") {
  two_shards t(30);
  t.seed(100, 10);
  SUBCASE("no decision: presumed abort, the prepared write never lands") {
    hash128 tx{7, 7};
    t.prepare_only(2, tx, 999);
    // The first commit that meets the hold resolves it (the hold is older
    // than resolve_after) and answers a conflict; the next one goes through.
    status last;
    bool done = testing::poll_until(
        [&] {
          auto r = t.transfer(1);
          last = r.is_ok() ? status::ok() : r.error();
          return r.is_ok();
        },
        std::chrono::seconds(20));
    INFO(last.to_string());
    REQUIRE(done);
    CHECK(t.balance(t.b) == 11);
    CHECK(t.decision_on(1, t.sa, tx) == std::optional<bool>(false));
    CHECK(t.prepares_on(2, t.sb) == 0);
  }
  SUBCASE("decided commit, never finished: the resolver finishes it, the write lands") {
    hash128 tx{8, 8};
    t.prepare_only(2, tx, 555);
    caf::scoped_actor self{*t.c.nodes[0]->sys};
    bool committed = false;
    self->request(t.c.nodes[0]->n->replica(t.sa), std::chrono::seconds(10), tx_commit_atom::value, tx,
                  std::vector<state_check>{}, std::vector<batch_op>{},
                  std::vector<std::uint32_t>{static_cast<std::uint32_t>(t.sa), static_cast<std::uint32_t>(t.sb)})
        .receive([&](bool c, std::uint32_t, std::uint64_t, std::uint64_t) { committed = c; },
                 [&](caf::error& e) { FAIL(to_status(e).to_string()); });
    REQUIRE(committed);
    // A load does not wait for the hold: b still shows its old balance.
    CHECK(t.balance(t.b) == 10);
    bool done = testing::poll_until([&] { return t.transfer(5).is_ok(); }, std::chrono::seconds(20));
    REQUIRE(done);
    CHECK(t.balance(t.b) == 560);
    CHECK(t.prepares_on(2, t.sb) == 0);
  }
}

TEST_CASE("transactions across shards on a cluster: a participant's new owner keeps the holds of its prepares") {
  two_shards t(33);
  // Node 3 owns shard b for a while first (its table loaded then, empty),
  // so its later term must load the table again.
  REQUIRE(t.c.elect(3, t.sb));
  t.seed(0, 1);
  REQUIRE(t.c.elect(2, t.sb));
  hash128 tx{9, 9};
  t.prepare_only(2, tx, 42);
  // Node 3 takes shard b: it loads the hold from the prepare record it merged.
  REQUIRE(t.c.elect(3, t.sb));
  cluster_client_options o;
  o.cluster_file = t.c.file;
  o.resolve_after = std::chrono::hours(1);  // no resolver steps in
  auto patient = must(cluster_client::connect(o));
  records recs(*patient);
  auto w = recs.begin();
  REQUIRE(w.put(t.b, "bal", doc(1)).is_ok());
  auto held = w.commit();
  REQUIRE_FALSE(held.is_ok());
  CHECK(held.error().code() == status_code::conflict);
  CHECK(t.prepares_on(3, t.sb) == 1);
  // The driver goes on with the new owner: decide, finish there.
  CHECK(t.decide_and_finish(3, tx) > 0);
  CHECK(t.balance(t.b) == 42);
  CHECK(t.prepares_on(3, t.sb) == 0);
  // A finish sent again finds nothing to do.
  CHECK(t.finish(3, tx) == 0);
  auto again = recs.begin();
  REQUIRE(again.put(t.b, "bal", doc(2)).is_ok());
  CHECK(again.commit().is_ok());
}

TEST_CASE("transactions across shards on a cluster: a node started again keeps the prepares its log holds") {
  // A replicated node's open must not settle the cluster's transaction
  // records the way a single node settles its own (presumed abort): a
  // prepare a majority made durable would be gone from the restarted node,
  // and a new owner promised by it and a node that never saw the prepare
  // would finish the transaction with one side missing (the cluster torture
  // found transfers across shards half applied that way).
  two_shards t(36);
  t.seed(0, 1);
  hash128 tx{7, 7};
  t.prepare_only(2, tx, 42);
  REQUIRE(t.prepares_on(2, t.sb) == 1);
  t.c.nodes[1].reset();
  t.c.nodes[1] = std::make_unique<testing::node_process>(t.c.dir / "node2", t.c.cluster, 2);
  CHECK(t.prepares_on(2, t.sb) == 1);
  // The driver's decision, then the finish at the owner (node 2 again),
  // apply the prepared write whole.
  REQUIRE(t.c.nodes[1]->n->connect_peers().empty());
  for (auto& p : t.c.nodes) (void)p->n->connect_peers();
  REQUIRE(t.c.elect(2, t.sb));
  CHECK(t.decide_and_finish(2, tx) > 0);
  CHECK(t.prepares_on(2, t.sb) == 0);
  CHECK(t.balance(t.b) == 42);
}
