// replica_internal: what the replica actor's files share (replica_actor.cc
// holds the behaviour; replica_owner.cc what an owner does with writes and
// reads; replica_election.cc campaigns and heartbeats; replica_catch_up.cc
// anti-entropy and the long-absence rule). Not part of any interface: only
// the replica's own files include it.
//
// Every function takes the actor's self and runs in its context; a callback
// that outlives a term checks `term` before it acts (a stale callback must
// change nothing).
#pragma once

#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "engine/prepared_transactions.h"
#include "replication/guarded_network.h"
#include "replication/replica_actor.h"
#include "tree/node_store.h"

namespace magnetite::replication::replica_internal {

enum class role { follower, candidate, owner };

// Requests on one key at the owner: a write in flight holds the key, and
// everything after it waits, in order. A waiting request is told whether it
// may go on (false: the owner stepped down).
struct key_queue {
  bool writing = false;
  std::deque<std::function<void(bool)>> waiting;
};

// A write the owner stamped, waiting in its batch to be shipped; the writes
// that must land with it (a conditional batch's), and its request record
// (request_record.h): all in the same batch, so in one frame everywhere.
struct pending_write {
  stamped_op op;
  std::vector<stamped_op> more;
  std::optional<stamped_op> record;
  std::function<void(const status&)> done;
};
// A batch goes out at once when it holds this many writes or bytes of keys
// and values; its log frame stays far below limits::max_batch_bytes even
// with one value of the largest size on top.
inline constexpr std::size_t max_batch_writes = 1024;
inline constexpr std::size_t max_batch_bytes = 4 << 20;
// A fetch is answered with nodes up to this many bytes, and one more.
inline constexpr std::size_t fetch_reply_bytes = 8 << 20;

// Every message a node sends must pass its peers' frame guard at the default
// limit (guarded_network.h), with 1 MiB for CAF's envelope and our fields:
// a client's largest batch, shipped in a replication batch on top of the
// largest value; a fetch answer of fetch_reply_bytes and the largest node.
inline constexpr std::size_t envelope_room = 1 << 20;
static_assert(connection_limits{}.max_message_bytes >=
              limits::max_batch_bytes + max_batch_bytes + limits::max_value_bytes + envelope_room);
static_assert(connection_limits{}.max_message_bytes >= fetch_reply_bytes + tree::max_node_bytes + envelope_room);

// Who cast a vote: a peer by its node (whatever actor of it sent the vote,
// it is one voice), an actor of this process by its id (only tests run
// several replicas in one process).
using voter = std::pair<caf::node_id, caf::actor_id>;

// A read (or a CAS refusal) waiting for a confirm round.
struct queued_read {
  ballot epoch;  // the owner's when the value was read
  std::function<void(bool)> done;
};

struct replica_state {
  replica_config config;
  std::map<std::uint32_t, replica_actor> peers;
  promise_state ps;  // as decided; a reply that depends on it waits for its fsync
  role now = role::follower;
  ballot epoch;  // the ballot we campaign with or own with
  std::uint64_t next_seq = 1;
  // Changes whenever the role does: a callback of an older term is stale.
  std::uint64_t term = 0;
  std::map<std::string, key_queue, std::less<>> keys;
  // The owner's writes not yet shipped, whether our flush is queued, and
  // the batches shipped and not yet decided (config.batches_in_flight).
  std::vector<pending_write> batch;
  std::size_t batch_bytes = 0;
  bool flush_queued = false;
  std::size_t in_flight = 0;
  // Write rounds (replica_owner.cc): a batch's rwrite to every peer,
  // tallied from their rvotes by round number. One timer, for the earliest
  // deadline, fails the rounds left unanswered: a round costs CAF's clock
  // nothing (a request with a timeout pushes an event to the clock's thread
  // and, in CAF 0.17, has its timeout message delivered even after the
  // answer came) and leaves no response handler behind for a peer that
  // never answers (one that died or was cut off).
  struct write_round {
    caf::actor_clock::time_point deadline;
    ballot epoch;
    std::size_t expected = 0;  // peers asked
    std::size_t yes = 1;       // ourselves
    std::size_t answered = 0;
    std::function<void(bool)> done;
    std::vector<voter> voted;  // whose vote counted (voter_of): once each
  };
  std::map<std::uint64_t, write_round> write_rounds;  // by round: by deadline too
  std::uint64_t next_round = 1;
  // A secret of this incarnation (std::random_device): a round goes out as
  // round ^ round_mask, and a vote counts only if its round, unmasked, is
  // one we sent. Round numbers alone are easy to guess; with the mask,
  // whoever may send us messages without seeing our peers' traffic (any
  // holder of a certificate of the cluster's CA) cannot forge a yes (a write
  // acknowledged without a majority) nor a no that deposes us.
  std::uint64_t round_mask = 0;
  bool round_timer_armed = false;
  std::uint64_t batches_shipped = 0, writes_shipped = 0;  // for info
  // Conditional batches (replica_conditional.cc): the highest revision this
  // replica gave or found, and the term it was last brought up to date with
  // the shard's revision mark in.
  std::uint64_t revision_mark = 0;
  std::uint64_t mark_term = 0;
  // Transactions across shards prepared here and not finished
  // (replica_transactions.cc): loaded from our tree's prepare records once a
  // term, changed as prepares and finishes are shipped; and since when each
  // is known here (our clock), for resolvers.
  prepared_transactions prepared;
  std::map<hash128, std::uint64_t> prepared_since;
  std::uint64_t prepared_term = 0;
  // Reads waiting for the next confirm round, and whether one is out.
  std::vector<queued_read> reads;
  // Client writes admitted and not yet answered (replica_config::
  // max_client_writes); shared with their tokens, which may outlive the
  // state when the actor ends with writes in its queues.
  std::shared_ptr<std::size_t> client_writes = std::make_shared<std::size_t>(0);
  bool confirming = false;

  // Failure detection: heartbeats heard from nobody in a row, and how many a
  // follower waits before it campaigns (drawn anew after every campaign).
  std::mt19937_64 rng;
  std::uint64_t chain = 0;  // our timer's; a beat of another chain is ignored
  std::uint64_t ticks = 0;
  std::uint32_t silent = 0;
  std::uint32_t patience = 0;
  bool beating = false;             // a heartbeat round is out
  std::uint64_t pre_vote_term = 0;  // the term of our own pre-vote, while it runs
  // Anti-entropy: to the peer after the last one, skipping a peer whose
  // last push is still out (a dead or cut-off peer stalls nobody else).
  // A push to a replica that died, or over a connection that broke, is never
  // answered: it ends only at its deadline (30 request timeouts). So a push
  // holds back only the handle it went to, and only until that handle is
  // reported down; a handle reported down gets no push (nothing could answer
  // it) until the peer is linked again; a peer linked again under a new
  // handle (a restarted node) is pushed to at once. Held back by peer id
  // instead, a restarted node got no push from anyone until those deadlines
  // passed, and nothing else brings it the writes it missed: a live owner's
  // confirm rounds keep it from campaigning.
  struct push_out {
    caf::actor_addr to;
    std::uint64_t number = 0;  // which push: only its own end clears it
  };
  std::map<std::uint32_t, push_out> pushing;
  std::uint64_t pushes = 0;
  std::uint32_t pushed_last = 0;
  // The peers' replicas we monitor, not yet reported down.
  std::map<caf::actor_addr, std::uint32_t> monitored;
  std::uint64_t pulled_nodes = 0, pulled_bytes = 0, merged_entries = 0;  // for info

  // The long-absence rule (design, 6). When each peer's last completed pull
  // into us began; synced_ns as the shard's log holds it; a recovery running,
  // and what waits for it.
  std::map<std::uint32_t, std::uint64_t> pulled_at;
  std::uint64_t durable_synced = 0;
  std::uint64_t campaign_began = 0;  // a won campaign merged every write committed before it
  bool recovering = false;
  std::vector<std::function<void()>> after_recovery;

  std::size_t majority() const { return config.cluster_size / 2 + 1; }

  // Pulls from this many distinct peers reach every majority we are not in,
  // so they hold every committed write. Zero (one or two nodes): every
  // committed write is on every replica that is up; nothing can be missed.
  std::size_t pulls_for_sync() const { return config.cluster_size - majority(); }
  std::uint64_t half_retention() const { return static_cast<std::uint64_t>(config.tombstone_retention.count()) / 2; }
  // After this moment we acknowledge nothing until we catch up or settle.
  std::uint64_t horizon() const {
    auto base = std::max(ps.synced_ns, ps.settled_ns);
    return base > UINT64_MAX - half_retention() ? UINT64_MAX : base + half_retention();
  }
  bool absent() const { return pulls_for_sync() > 0 && config.clock() > horizon(); }
  // Whether a peer's answer says it held every committed write recently.
  bool knows_recent(const replica_info& i) const {
    return i.synced_ns > UINT64_MAX - half_retention() || i.synced_ns + half_retention() >= config.clock();
  }

  void draw_patience() {
    auto k = std::max<std::uint32_t>(1, config.election_ticks);
    patience = k + static_cast<std::uint32_t>(rng() % k);
    silent = 0;
  }
};

using self_ptr = replica_actor::stateful_pointer<replica_state>;

// A client write admitted into the owner's bounded queue: it is released
// when the last closure that holds it goes, which is once the write is
// answered or refused, whichever path that takes.
struct client_admission {
  std::shared_ptr<std::size_t> count;
  client_admission(const client_admission&) = delete;
  client_admission& operator=(const client_admission&) = delete;
  explicit client_admission(std::shared_ptr<std::size_t> c) : count(std::move(c)) { ++*count; }
  ~client_admission() { --*count; }
};
using admission_ptr = std::shared_ptr<const client_admission>;
// A token, or `busy` (transient, nothing written) while max_client_writes
// are in: a cluster_client takes busy as "ask again" and backs off.
result<admission_ptr> admit_client_write(self_ptr self);

inline std::shared_ptr<const read_view> view_of(self_ptr self) { return self->state.config.slot->view.load(); }

// Whether the reply being handled came from the node of `asked`. CAF
// matches a reply to its request by message id alone: a sender that
// guessed a pending request's id could answer in the peer's place (a
// forged promise could win an election). Routed messages are refused at
// the door (payload_reader.h), so a reply's source node is its
// connection's own.
inline bool replied_by_node_of(self_ptr self, const replica_actor& asked) {
  const auto& from = self->current_sender();
  return from != nullptr && from->node() == asked.node();
}

// Who may say what to a replica (docs/design/replication.md, 7.2). A member
// is this process or the node of one of our peers' replicas, as this node
// linked them; anyone else (a client, a stranger, a message with no sender)
// is not, and may send none of the messages replicas send each other
// (prepare, rwrite, rvote, confirm, fetch, sync, probe, elect, peers). Which
// node a peer id is rests on the link (the address in the cluster file,
// or over TLS the offer) and on the door refusing a second connection that
// names a linked node (guarded_network.h). With certificates that name
// members, the node links peer K only to a node whose certificate names K
// (node.cc, link and offer), and the door keeps that CAF node bound to that
// name: a peer's node is then a verified node, and a client's never is one,
// so nothing here needs to ask the certificates again.
bool sent_by_member(self_ptr self);
// Whether the sender may speak for member `id` (a ballot's or a stamp's
// node, a sync's `from`): its node is that peer's, or ours for our own id.
bool sent_by_node(self_ptr self, std::uint32_t id);
// Who cast the vote being handled, once a member sent it (voter, above).
std::optional<voter> voter_of(self_ptr self);

// What a client's request may touch (replica_access.cc): an empty error
// when the sender may, else `permission_denied` naming the message, what
// it would do and the key's first bytes. Members are never limited, nor is
// anyone when replica_config::access is empty. `what` names the message.
caf::error refused_keys(self_ptr self, const char* what, std::initializer_list<std::string_view> reads,
                        std::initializer_list<std::string_view> writes);
// A conditional batch's checks read, its ops write.
caf::error refused_batch(self_ptr self, const char* what, const std::vector<state_check>& checks,
                         const std::vector<batch_op>& ops);
caf::error refused_range(self_ptr self, const std::string& from, const std::string& to);
// A message that names no key but decides writes (a transaction's
// decision, finish, forget, or the list of those in doubt): only a client
// with some readwrite grant.
caf::error refused_unless_writer(self_ptr self, const char* what);

// One round to every peer, counting ourselves as the first yes: `yes` judges
// each reply (a failed request, or a reply from another node than the
// peer's, is a no). `done(true)` as soon as the yes count reaches a
// majority, `done(false)` once every peer answered short of it; `done` runs
// exactly once.
template <class Reply, class... Ts>
void majority_round(self_ptr self, caf::timespan timeout, std::function<bool(std::uint32_t, const Reply&)> yes,
                    std::function<void(bool)> done, const Ts&... xs) {
  struct tally {
    std::size_t yes = 1;
    std::size_t answered = 0;
    bool finished = false;
  };
  auto t = std::make_shared<tally>();
  std::size_t expected = self->state.peers.size();
  auto check = [self, t, expected, done]() {
    if (t->finished) return;
    if (t->yes >= self->state.majority() || t->answered == expected) {
      t->finished = true;
      done(t->yes >= self->state.majority());
    }
  };
  check();  // a cluster of one
  for (auto& [id, peer] : self->state.peers)
    self->request(peer, timeout, xs...)
        .then(
            [self, t, check, yes, id = id, asked = peer](const Reply& r) {
              if (replied_by_node_of(self, asked) && yes(id, r)) ++t->yes;
              ++t->answered;
              check();
            },
            [t, check](caf::error&) {
              ++t->answered;
              check();
            });
}

// Asks every peer the same request; `done` gets each peer's answer (an error,
// a timeout or a reply from another node than the peer's: none) once all
// are in.
template <class Reply, class... Ts>
void ask_every_peer(self_ptr self, caf::timespan timeout,
                    std::function<void(std::vector<std::pair<std::uint32_t, std::optional<Reply>>>)> done,
                    const Ts&... xs) {
  using answers = std::vector<std::pair<std::uint32_t, std::optional<Reply>>>;
  auto got = std::make_shared<answers>();
  std::size_t expected = self->state.peers.size();
  if (expected == 0) return done({});
  auto add = [got, expected, done](std::uint32_t id, std::optional<Reply> r) {
    got->emplace_back(id, std::move(r));
    if (got->size() == expected) done(std::move(*got));
  };
  for (auto& [id, peer] : self->state.peers)
    self->request(peer, timeout, xs...)
        .then(
            [self, add, id = id, asked = peer](const Reply& r) {
              add(id, replied_by_node_of(self, asked) ? std::optional<Reply>(r) : std::nullopt);
            },
            [add, id = id](caf::error&) { add(id, std::nullopt); });
}

// Answers rp with xs when s is ok, else with s.
template <class Promise, class... Ts>
void answer(Promise& rp, const status& s, Ts&&... xs) {
  if (s)
    rp.deliver(std::forward<Ts>(xs)...);
  else
    rp.deliver(to_error(s));
}

// What clients hear (replica_owner.cc).
status not_owner(self_ptr self);
status away(self_ptr self);
status deposed(std::string_view what);

// The owner's side (replica_owner.cc).
void step_down(self_ptr self);
void with_key(self_ptr self, const std::string& key, std::function<void(bool)> fn);
// Lets the next request waiting on key go (a hold taken without a write).
void release_key(self_ptr self, const std::string& key);
bool counted(self_ptr self, const vote& v, const ballot& epoch);
// `record`: the request record of a write that carries a request_id; it
// holds its key until the batch is decided, and is stamped after op.
void replicate(self_ptr self, stamped_op op, std::function<void(const status&)> done,
               std::optional<stamped_op> record = std::nullopt);
// Several writes that must land together (in one batch, never split), with
// the record of the request they answer; their keys are the caller's to hold.
// A record that carries a value keeps it (else: request_record_value(seq)).
void replicate_together(self_ptr self, std::vector<stamped_op> ops, std::function<void(const status&)> done,
                        std::optional<stamped_op> record = std::nullopt);
void flush_batch(self_ptr self);
// A peer's vote on our write round `round`, and our round timer.
void on_write_vote(self_ptr self, std::uint64_t sent_round, const vote& v);
void expire_write_rounds(self_ptr self);
void confirm(self_ptr self, std::function<void(bool)> done);
// A client's read of key, linearizable: once no write of it is in flight,
// from our tree, answered after a confirm round that began after the read.
caf::result<bool, std::string> confirmed_read(self_ptr self, const std::string& key);

// A client's write, at most once: without a request id, `write(nullopt)` at
// once. With one, after any earlier attempt of the same request was decided:
// `applied(revision)` if its record is in our tree (it took place; the
// revision the record keeps), else `write(record)`, the record to ship with
// the write. The record's key is held from the look-up on, so a retry
// arriving meanwhile waits; `write` then replicates the record or lets its
// key go (drop).
void at_most_once(self_ptr self, const std::optional<request_id>& rid, std::function<void(const status&)> refuse,
                  std::function<void(std::uint64_t)> applied, std::function<void(std::optional<stamped_op>)> write);
// Lets a request record's key go when the write it guards was not shipped.
void drop(self_ptr self, const std::optional<stamped_op>& record);

// What a refused client request hears.
template <class Promise>
std::function<void(const status&)> refusal(Promise rp) {
  return [rp](const status& s) mutable { rp.deliver(to_error(s)); };
}

// State keys through the owner (replica_conditional.cc): a conditional batch
// of state/ and linearizable reads of state keys, and the pieces the
// transactions across shards (replica_transactions.cc) share with it.
//
// Holds `keys` (sorted, distinct) in turn, each once no write in flight has
// it; then `then(true)`, or `then(false)` with none held if we stop owning
// the shard first. Everything that holds several keys holds them in key
// order, so nothing waits in a cycle.
void hold_keys(self_ptr self, std::shared_ptr<const std::vector<std::string>> keys, std::function<void(bool)> then);
// The first check that does not hold against v now: its index and the
// revision found.
result<std::optional<std::pair<std::uint32_t, std::uint64_t>>> failed_check(self_ptr self, const read_view& v,
                                                                            const std::vector<state_check>& checks);
// The revision a batch writing `ops` takes (design, 10) and gives the mark.
result<std::uint64_t> give_revision(self_ptr self, const read_view& v, const std::vector<batch_op>& ops);
// The ops as stamped state writes carrying `revision` (TTLs and tombstones by
// our clock), then the mark.
std::vector<stamped_op> stamped_state_writes(self_ptr self, std::uint64_t revision, std::vector<batch_op> ops);
// Ships `out` together (with `record`), letting go at once the keys of
// `held` it does not write; the written ones go when the batch is decided.
void ship_holding(self_ptr self, std::vector<stamped_op> out, std::shared_ptr<const std::vector<std::string>> held,
                  std::function<void(const status&)> done, std::optional<stamped_op> record = std::nullopt);
// What state/ may send in one batch: state keys, none of the shard's own
// records, within the frame's room.
status check_batch_request(const std::vector<state_check>& checks, const std::vector<batch_op>& ops);
// ok, or a conflict if a transaction prepared here holds a key the batch
// checks or writes (the table is brought up to date once a term).
status held_against(self_ptr self, const read_view& v, const std::vector<state_check>& checks,
                    const std::vector<batch_op>& ops);
caf::result<bool, std::uint64_t, std::uint32_t, std::uint64_t> client_apply(self_ptr self,
                                                                            std::vector<state_check> checks,
                                                                            std::vector<batch_op> ops,
                                                                            const request_id& rid);
caf::result<bool, std::string> client_state_read(self_ptr self, const std::string& key);
caf::result<std::vector<std::string>, std::vector<std::string>, bool, std::string> client_state_range(
    self_ptr self, const std::string& from, const std::string& to, std::uint64_t limit, bool backward);

// Transactions across shards at the owner (replica_transactions.cc); the
// messages of replica_interface.h.
caf::result<bool, std::uint32_t, std::uint64_t> client_tx_prepare(self_ptr self, const hash128& id,
                                                                  std::uint32_t coordinator,
                                                                  std::vector<state_check> checks,
                                                                  std::vector<batch_op> ops);
caf::result<bool, std::uint32_t, std::uint64_t, std::uint64_t> client_tx_commit(
    self_ptr self, const hash128& id, std::vector<state_check> checks, std::vector<batch_op> ops,
    std::vector<std::uint32_t> participants);
caf::result<bool> client_tx_decide(self_ptr self, const hash128& id, bool commit,
                                   std::vector<std::uint32_t> participants);
caf::result<std::uint64_t> client_tx_finish(self_ptr self, const hash128& id, bool commit);
caf::result<ok_atom> client_tx_forget(self_ptr self, const hash128& id);
caf::result<std::vector<hash128>, std::vector<std::uint32_t>> client_tx_stale(self_ptr self,
                                                                              std::uint64_t older_than_ns);

// Judges a batch's holds and checks against v in this turn. true: the batch
// may be shipped. false: `let_go` ran and rp is answered: the hold's
// conflict or the error, or - after a confirm round, since a refusal is a
// read - `failed(rp, index, revision found)` for the first failed check.
template <class Promise, class Failed>
bool judge_checks(self_ptr self, Promise& rp, const read_view& v, const std::vector<state_check>& checks,
                  const std::vector<batch_op>& ops, const std::function<void()>& let_go, Failed failed) {
  auto refuse = [&](const status& s) {
    let_go();
    rp.deliver(to_error(s));
    return false;
  };
  if (auto held = held_against(self, v, checks, ops); !held) return refuse(held);
  auto first = failed_check(self, v, checks);
  if (!first) return refuse(first.error());
  if (!*first) return true;
  let_go();
  confirm(self, [self, rp, f = **first, failed](bool ok) mutable {
    if (!ok) return (void)rp.deliver(to_error(not_owner(self)));
    failed(rp, f.first, f.second);
  });
  return false;
}

// Elections (replica_election.cc).
void persist_then(self_ptr self, std::function<void()> next, std::function<void(caf::error&)> failed);
void campaign(self_ptr self, std::function<void(const status&, bool owns)> finish);
void pre_vote_then_campaign(self_ptr self);
void heartbeat(self_ptr self);

// Catching up (replica_catch_up.cc).
void pull_and_merge(self_ptr self, hash128 root, std::uint32_t from,
                    std::function<void(const status&, const merge_report&)> done, bool adopt = false);
void recover(self_ptr self, std::function<void()> then);
void push_root(self_ptr self);

}  // namespace magnetite::replication::replica_internal
