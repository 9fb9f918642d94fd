// shard_interface: the typed messages a shard actor answers, declared once.
//
//   message                                          -> reply
//   (get, key)                                       -> (found, value)
//   (put, key, value, ttl_ns)                        -> ok          ttl_ns 0: none
//   (del, key)                                       -> ok
//   (cas, key, has_expected, expected,
//         has_desired, desired, ttl_ns)              -> (swapped, has_current, current)
//   (batch, [batch_op])                              -> ok          all or nothing
//   (apply, [state_check], [batch_op])               -> (applied, revision, failed_check, found)
//                                                    the conditional batch of state/ (shard.h):
//                                                    failed_check is meaningful when !applied
//   (stamped, [stamped_op])                          -> [taken]     a replicated shard's writes: each
//                                                    taken if its stamp is above the key's
//   (promise, payload)                               -> ok          once the promise state is durable
//   (promise)                                        -> (has, payload)   the latest durable promise state
//   (import, [hash], [encoding])                     -> ok          nodes from a peer, in order (bottom up)
//   (merge, root)                                    -> merge_report   after the group: root's entries
//                                                    offered to apply_stamped (shard::merge_stamped)
//   (txprepare, id, coordinator, [state_check], [batch_op])
//                                                    -> (prepared, failed_check, found)   a participant's
//                                                    half of a transaction across shards: checks, a
//                                                    prepare record and holds (prepared_transactions.h);
//                                                    a key another prepare holds: conflict, at once
//   (txcommit, id, [state_check], [batch_op], [participant])
//                                                    -> (committed, failed_check, found, revision)
//                                                    the coordinator's own part and the decision
//                                                    `commit`, in ONE frame, if its checks hold and no
//                                                    decision exists (else: the one that stands)
//   (txdecide, id, commit, [participant])            -> committed   the coordinator's decision record,
//                                                    written unless one exists; the one that stands
//   (txfinish, id, commit)                           -> revision    applies (commit) or drops the
//                                                    prepared writes, ends the holds; 0: none held
//   (txforget, id)                                   -> ok          deletes the decision record
//   (range, from, to, limit)                         -> (keys, values, more)  to "": no bound
//   (commit)                                         -> root (32 hex digits)
//   (ingest, bytes, [size])                          -> root       sorted writes straight into the
//                                                    tree, durable at the reply (shard::ingest)
//   (stats)                                          -> shard_stats    counters since open
//   (usage)                                          -> shard_usage    keys, bytes, cache, root
//   (verify, [retained root])                        -> shard_verify_report   damage is in the report
//   (gc, [retained root])                            -> gc_result      nodes of other roots dropped
//   (reclaim, [retained root])                       -> bytes reclaimed   a whole reclamation cycle now
//   (shutdown)                                       -> ok          checkpoints, then the actor quits
//   (rcheck)                                         starts a space reclamation cycle if one is due
//                                                    (the database sends it when a commit's hold ends)
//   (host, host_request)                             a write from a host thread; answered through
//                                                    the request's waiter or callback (below)
//   (group), (expire, generation), (aged),
//   (durable), (reclaim)                             internal: the actor sends them to itself
//   (ckptdone)                                       internal: a background checkpoint's thread
//                                                    sends it when the tree is written
//
// Writes are acknowledged only once durable (their group's one fsync), except
// under the `interval` fsync policy: there a write is acknowledged and visible
// once its group is written to the log, and made durable within about
// fsync_interval (shard.h). A get answers from the shard's published view.
// Errors arrive as caf::error in the "magnetite" category (see to_error /
// to_status): the status code is the error code, the message is the context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/caf_headers.h"  // before any other CAF header

#include "actors/answer_relay.h"
#include "core/status.h"
#include "engine/shard.h"
#include "magnetite/caf.h"

namespace magnetite {

using ingest_atom = caf::atom_constant<caf::atom("ingest")>;
// Checkpoints now and answers the root: commit for the engine's own actors,
// which take roots as hash128, never as text (hosts' commit answers hex).
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
using verify_atom = caf::atom_constant<caf::atom("verify")>;
using gc_atom = caf::atom_constant<caf::atom("gc")>;
using view_at_atom = caf::atom_constant<caf::atom("viewat")>;
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
using group_atom = caf::atom_constant<caf::atom("group")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;
using aged_atom = caf::atom_constant<caf::atom("aged")>;
using durable_atom = caf::atom_constant<caf::atom("durable")>;
using reclaim_atom = caf::atom_constant<caf::atom("reclaim")>;
using rcheck_atom = caf::atom_constant<caf::atom("rcheck")>;
// A background checkpoint's work is over (its thread says so).
using checkpointed_atom = caf::atom_constant<caf::atom("ckptdone")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using stamped_atom = caf::atom_constant<caf::atom("stamped")>;
using promise_atom = caf::atom_constant<caf::atom("promise")>;
using import_atom = caf::atom_constant<caf::atom("import")>;
using merge_atom = caf::atom_constant<caf::atom("merge")>;
using adopt_atom = caf::atom_constant<caf::atom("adopt")>;
using tx_prepare_atom = caf::atom_constant<caf::atom("txprepare")>;
using tx_decide_atom = caf::atom_constant<caf::atom("txdecide")>;
using tx_commit_atom = caf::atom_constant<caf::atom("txcommit")>;
using tx_finish_atom = caf::atom_constant<caf::atom("txfinish")>;
using tx_forget_atom = caf::atom_constant<caf::atom("txforget")>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hash128& x) {
  return f(caf::meta::type_name("hash128"), x.high, x.low);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, merge_report& x) {
  return f(caf::meta::type_name("merge_report"), x.differing, x.taken, x.dropped);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ballot& x) {
  return f(caf::meta::type_name("ballot"), x.counter, x.node);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stamp& x) {
  return f(caf::meta::type_name("stamp"), x.epoch, x.seq);
}

// One stamped write as a message carries it (stamped_write in shard.h).
struct stamped_op {
  std::string key;
  magnetite::stamp stamp;
  bool is_put = true;
  std::string value;
  bool has_deadline = false;  // a tombstone always has one
  std::uint64_t deadline_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stamped_op& x) {
  return f(caf::meta::type_name("stamped_op"), x.key, x.stamp, x.is_put, x.value, x.has_deadline, x.deadline_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, state_check& x) {
  return f(caf::meta::type_name("state_check"), x.key, x.revision);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_verify_report& x) {
  return f(caf::meta::type_name("shard_verify_report"), x.roots, x.nodes, x.node_bytes, x.log_frames, x.expiring_keys,
           x.problems);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gc_result& x) {
  return f(caf::meta::type_name("gc_result"), x.position, x.nodes_kept, x.bytes_kept, x.bytes_removed,
           x.bytes_reclaimed, x.packs_removed);
}

// A write handed over by a host thread that has no actor of its own (see
// database_core.h): the shard answers it exactly once, when the write's group is
// durable or failed, through `waiter` (a blocked host thread: the group's
// answers are relayed, see answer_relay.h) or by calling `done`: exactly one
// of the two is set. A request
// that is dropped unanswered (its shard died with it queued) answers itself
// from its destructor with a transient error, so a host never waits on a dead
// shard. In-process only.
struct host_request {
  enum class kind { put, del, cas, batch, apply };
  kind op = kind::put;
  std::string key;
  std::string value;  // put; cas: desired
  bool has_expected = false;
  std::string expected;
  bool has_desired = false;
  std::int64_t ttl_ns = 0;
  std::vector<batch_op> ops;        // batch; apply: its writes
  std::vector<state_check> checks;  // apply
  std::shared_ptr<host_wait> waiter;
  std::function<void(const status&, const cas_outcome&)> done;

  host_request() = default;
  host_request(const host_request&) = delete;
  host_request& operator=(const host_request&) = delete;
  ~host_request() {
    finish(status::io_error("shard unavailable: it stopped before answering the request", status_category::transient));
  }
  // Answers now, alone (not through a group's relay).
  void finish(const status& s, const cas_outcome& o = {}) {
    if (auto w = std::move(waiter)) w->answer_now(s, o);
    auto d = std::move(done);
    done = nullptr;
    if (d) d(s, o);
  }
};
using host_request_ptr = std::shared_ptr<host_request>;
// A pinned view of a retained checkpoint's root (shard::view_at), handed to
// the host thread that asked for it. In-process only.
using read_view_ptr = std::shared_ptr<const read_view>;
using host_atom = caf::atom_constant<caf::atom("host")>;

// A participant in a transaction across shards (the messages above): a
// shard actor on one node, a shard's owner on a cluster
// (replication/replica_interface.h).
using transaction_participant = caf::typed_actor<
    caf::replies_to<tx_prepare_atom, hash128, std::uint32_t, std::vector<state_check>,
                    std::vector<batch_op>>::with<bool, std::uint32_t, std::uint64_t>,
    caf::replies_to<tx_commit_atom, hash128, std::vector<state_check>, std::vector<batch_op>,
                    std::vector<std::uint32_t>>::with<bool, std::uint32_t, std::uint64_t, std::uint64_t>,
    caf::replies_to<tx_decide_atom, hash128, bool, std::vector<std::uint32_t>>::with<bool>,
    caf::replies_to<tx_finish_atom, hash128, bool>::with<std::uint64_t>,
    caf::replies_to<tx_forget_atom, hash128>::with<ok_atom>>;

// The whole interface: what hosts see (<magnetite/caf.h>) and the engine's
// own messages.
using shard_engine_actor = shard_actor::extend_with<transaction_participant>::extend<
    caf::replies_to<apply_atom, std::vector<state_check>, std::vector<batch_op>>::with<bool, std::uint64_t,
                                                                                       std::uint32_t, std::uint64_t>,
    caf::replies_to<stamped_atom, std::vector<stamped_op>>::with<std::vector<bool>>,
    caf::replies_to<promise_atom, std::string>::with<ok_atom>, caf::replies_to<promise_atom>::with<bool, std::string>,
    caf::replies_to<import_atom, std::vector<hash128>, std::vector<std::string>>::with<ok_atom>,
    caf::replies_to<merge_atom, hash128>::with<merge_report>, caf::replies_to<adopt_atom, hash128>::with<merge_report>,
    caf::replies_to<checkpoint_atom>::with<hash128>,
    caf::replies_to<ingest_atom, std::string, std::vector<std::uint32_t>>::with<hash128>,
    caf::replies_to<verify_atom, std::vector<hash128>>::with<shard_verify_report>,
    caf::replies_to<gc_atom, std::vector<hash128>>::with<tree::gc_result>,
    caf::replies_to<view_at_atom, hash128>::with<read_view_ptr>,
    caf::replies_to<reclaim_atom, std::vector<hash128>>::with<std::uint64_t>,
    caf::replies_to<shutdown_atom>::with<ok_atom>, caf::reacts_to<group_atom>,
    caf::reacts_to<expire_atom, std::uint64_t>, caf::reacts_to<aged_atom>, caf::reacts_to<durable_atom>,
    caf::reacts_to<reclaim_atom>, caf::reacts_to<rcheck_atom>, caf::reacts_to<checkpointed_atom>,
    caf::reacts_to<host_atom, host_request_ptr>>;

}  // namespace magnetite

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(magnetite::host_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(magnetite::read_view_ptr)
