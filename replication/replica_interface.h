// replica_interface: the typed messages of one shard's replica on one node,
// declared once (docs/design/replication.md). Between replicas:
//
//   message                              -> reply
//   (prepare, ballot)                    -> promise_reply        after the promise is durable;
//                                                                root: our checkpointed tree
//   (rwrite, epoch, round, [stamped_op]) fenced below our promise; taken by highest stamp; after
//                                        its fsync (or at once, refused) we send the writer
//                                        (rvote, round, vote): no reply, so the writer's round
//                                        waits in no CAF request, and no CAF clock timeout
//   (rvote, round, vote)                 a peer's answer to our rwrite of that round (the round as
//                                        we sent it, masked: replica_state::round_mask)
//   (confirm, epoch)                     -> vote                 does epoch still hold our promise
//   (fetch, [hash])                      -> [encoding]           nodes of our store, for a pull
//   (sync, root, from node)              -> merge_report         pull root from that peer, merge
//   (peers, [node id], [actor])          the other replicas of the shard (set once, or again)
//   (probe)                              -> bool   would we campaign too: we heard no live owner
//                                                for election_ticks heartbeats (a pre-vote)
//   (beat, chain)                        our own heartbeat timer (failure detection, anti-entropy)
//   (rflush)                             our own: the owner's batch of writes goes out
//   (rexpire)                            our own timer: write rounds past their deadline fail
//   (info)                               -> replica_info   role, promise, checkpointed root and
//                                                whether it is absent (the long-absence rule)
//
// From clients (the owner answers; another replica refuses with `busy`,
// naming the owner it knows of):
//   (put, key, value, ttl_ns)            -> ok      after a majority, the owner included, made it durable
//   (del, key)                           -> ok      a stamped tombstone, the same way
//   (cas, key, has_expected, expected,
//         has_desired, desired, ttl_ns)  -> (swapped, has_current, current)
//   the same three with a request_id last: at most once (request_record.h):
//   a retry of a write that took place answers ok (a CAS: swapped) and
//   writes nothing; one still in flight is waited for first
//   (get, key)                           -> (found, value)   linearizable: confirmed with a majority
//   state/ on a cluster (replica_conditional.cc; state keys only):
//   (apply, [state_check], [batch_op], request_id)
//                                        -> (applied, revision, failed_check, found)   a
//                                           conditional batch, at most once: checks judged at
//                                           the owner, writes in ONE batch once a majority made
//                                           them durable; a failed check writes nothing
//   (sread, key)                         -> (found, live value)   linearizable
//   (srange, from, to, limit, backward)  -> ([key], [live value], more, resume)   linearizable;
//                                           to "" : no bound; at most 4 MiB of values an answer
//   transactions across shards (replica_transactions.cc), the shard actor's
//   messages of the same names (actors/shard_interface.h), each idempotent:
//   (txprepare, id, coordinator, [state_check], [batch_op]) -> (prepared, failed_check, found)
//   (txcommit, id, [state_check], [batch_op], [participant])
//                                        -> (committed, failed_check, found, revision)
//                                           failed_check UINT32_MAX: an abort stands
//   (txdecide, id, commit, [participant]) -> committed   the decision that stands
//   (txfinish, id, commit)               -> revision   0: nothing was prepared (or it wrote nothing)
//   (txforget, id)                       -> ok
//   (txstale, older_than_ns)             -> ([id], [coordinator])   prepared here that long ago
//   (elect)                              -> owns    campaign now; true when this replica owns the shard
//
// Errors are caf::errors in the "magnetite" category (actors/shard_interface.h).
// A write that may or may not have reached a majority is `ambiguous`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/caf_headers.h"  // before any other CAF header

#include "actors/shard_interface.h"
#include "replication/request_record.h"

namespace magnetite::replication {

using prepare_atom = caf::atom_constant<caf::atom("prepare")>;
using rwrite_atom = caf::atom_constant<caf::atom("rwrite")>;
using confirm_atom = caf::atom_constant<caf::atom("confirm")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using sync_atom = caf::atom_constant<caf::atom("sync")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using elect_atom = caf::atom_constant<caf::atom("elect")>;
using beat_atom = caf::atom_constant<caf::atom("beat")>;
using info_atom = caf::atom_constant<caf::atom("info")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
using rflush_atom = caf::atom_constant<caf::atom("rflush")>;
using rvote_atom = caf::atom_constant<caf::atom("rvote")>;
using rexpire_atom = caf::atom_constant<caf::atom("rexpire")>;
using sread_atom = caf::atom_constant<caf::atom("sread")>;
using srange_atom = caf::atom_constant<caf::atom("srange")>;
using tx_stale_atom = caf::atom_constant<caf::atom("txstale")>;

struct promise_reply {
  bool accepted = false;
  ballot promised;  // ours after the prepare (a refusal's reason)
  ballot epoch;     // the epoch whose writes we accepted last
  hash128 root;     // accepted: our tree, checkpointed after the promise
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, promise_reply& x) {
  return f(caf::meta::type_name("promise_reply"), x.accepted, x.promised, x.epoch, x.root);
}

// A replica's answer to a write or a confirm round: yes, or no with the
// promise that refused it (above the asker's epoch: the asker was deposed).
struct vote {
  bool accepted = false;
  ballot promised;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, vote& x) {
  return f(caf::meta::type_name("vote"), x.accepted, x.promised);
}

// What a replica is now, for operators, tools and tests.
struct replica_info {
  std::uint32_t node = 0;
  std::uint8_t role = 0;  // 0 follower, 1 candidate, 2 owner
  ballot promised;        // the ballot this replica promised last
  ballot epoch;           // the epoch whose writes it accepted last
  hash128 root;           // its tree, checkpointed for the answer
  // What this replica pulled from peers since it started (handoffs and
  // anti-entropy): tree nodes, their encoded bytes, entries its merges took.
  std::uint64_t pulled_nodes = 0;
  std::uint64_t pulled_bytes = 0;
  std::uint64_t merged_entries = 0;
  // The long-absence rule (docs/design/replication.md, 6): when it last knew
  // it held every committed write (wall clock ns; 0 never), when it last
  // settled with an absent majority, and whether it is absent now.
  std::uint64_t synced_ns = 0;
  std::uint64_t settled_ns = 0;
  bool absent = false;
  // As owner since it started: batches of writes it shipped to its peers,
  // and the writes in them (their ratio is the mean batch).
  std::uint64_t batches = 0;
  std::uint64_t batched_writes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_info& x) {
  return f(caf::meta::type_name("replica_info"), x.node, x.role, x.promised, x.epoch, x.root, x.pulled_nodes,
           x.pulled_bytes, x.merged_entries, x.synced_ns, x.settled_ns, x.absent, x.batches, x.batched_writes);
}

using replica_actor = caf::typed_actor<
    caf::replies_to<prepare_atom, ballot>::with<promise_reply>,
    caf::reacts_to<rwrite_atom, ballot, std::uint64_t, std::vector<stamped_op>>,
    caf::reacts_to<rvote_atom, std::uint64_t, vote>, caf::replies_to<confirm_atom, ballot>::with<vote>,
    caf::replies_to<fetch_atom, std::vector<hash128>>::with<std::vector<std::string>>,
    caf::replies_to<sync_atom, hash128, std::uint32_t>::with<merge_report>,
    caf::reacts_to<peers_atom, std::vector<std::uint32_t>, std::vector<caf::actor>>,
    caf::replies_to<put_atom, std::string, std::string, std::int64_t>::with<ok_atom>,
    caf::replies_to<del_atom, std::string>::with<ok_atom>,
    caf::replies_to<cas_atom, std::string, bool, std::string, bool, std::string, std::int64_t>::with<bool, bool,
                                                                                                     std::string>,
    caf::replies_to<put_atom, std::string, std::string, std::int64_t, request_id>::with<ok_atom>,
    caf::replies_to<del_atom, std::string, request_id>::with<ok_atom>,
    caf::replies_to<cas_atom, std::string, bool, std::string, bool, std::string, std::int64_t,
                    request_id>::with<bool, bool, std::string>,
    caf::replies_to<get_atom, std::string>::with<bool, std::string>,
    caf::replies_to<apply_atom, std::vector<state_check>, std::vector<batch_op>,
                    request_id>::with<bool, std::uint64_t, std::uint32_t, std::uint64_t>,
    caf::replies_to<sread_atom, std::string>::with<bool, std::string>,
    caf::replies_to<tx_stale_atom, std::uint64_t>::with<std::vector<hash128>, std::vector<std::uint32_t>>,
    caf::replies_to<srange_atom, std::string, std::string, std::uint64_t,
                    bool>::with<std::vector<std::string>, std::vector<std::string>, bool, std::string>,
    caf::replies_to<elect_atom>::with<bool>, caf::replies_to<probe_atom>::with<bool>,
    caf::reacts_to<beat_atom, std::uint64_t>, caf::reacts_to<rflush_atom>, caf::reacts_to<rexpire_atom>,
    caf::replies_to<info_atom>::with<replica_info>>::extend_with<transaction_participant>;

}  // namespace magnetite::replication
