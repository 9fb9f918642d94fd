// register_checker: a Wing & Gong linearizability check (with Lowe's
// memoisation of visited states) of one key's history, the key being a
// register with read, write, delete and compare-and-swap.
//
// An operation has an invocation time, and a response time if it completed.
// An operation without a response (an ambiguous error: timeout, deposed
// owner) may have taken effect at any moment after its invocation, or never;
// its result is unknown, so it constrains nothing but the state. Operations
// that provably did nothing (a refusal before anything was sent) and reads
// that failed are left out of the history by the caller.
//
// A pending write (or CAS) whose value no operation ever observed (a kept
// pending CAS's expectation counts as observed) is dropped before the
// search: if some order takes it, the same order without it also replays
// (every later read or CAS saw another value, written after it), so
// it changes no answer, and pending operations would otherwise make the
// search exponential. Values must be unique per write for this to hold.
//
// linearizable() is true iff some total order of the completed operations
// and a subset of the pending ones respects real time (an operation that
// responded before another was invoked comes first) and replays on a
// sequential register to the results observed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace magnetite::testing {

struct register_op {
  enum class kind { read, write, del, cas };
  kind what = kind::read;
  std::optional<std::string> arg;       // write: value; cas: desired (nullopt: delete)
  std::optional<std::string> expected;  // cas
  // Observed, when completed: read: the value; cas: swapped and, if not, the current value.
  std::optional<std::string> result;
  bool swapped = false;
  std::uint64_t call = 0;
  std::uint64_t ret = std::numeric_limits<std::uint64_t>::max();  // max: no response (pending)

  bool completed() const { return ret != std::numeric_limits<std::uint64_t>::max(); }
};

class register_checker {
 public:
  explicit register_checker(std::vector<register_op> ops) {
    std::set<std::string> observed;
    for (const auto& o : ops) {
      if (!o.completed()) continue;
      if (o.result) observed.insert(*o.result);
      if (o.what == register_op::kind::cas && o.swapped && o.expected) observed.insert(*o.expected);
    }
    // A pending CAS that is kept may have swapped, so the value it expects
    // counts as observed too: the pending write of that value must stay (a
    // pending CAS x -> y seen as y needs the pending write of x). Until no
    // more is kept.
    auto writes_value = [](const register_op& o) {
      return o.what == register_op::kind::write || (o.what == register_op::kind::cas && o.arg);
    };
    std::vector<bool> keep(ops.size());
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& o = ops[i];
        if (!keep[i] && (o.completed() || !writes_value(o) || observed.count(*o.arg))) keep[i] = changed = true;
        if (keep[i] && !o.completed() && o.what == register_op::kind::cas && o.expected)
          changed |= observed.insert(*o.expected).second;
      }
    }
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (keep[i]) ops_.push_back(std::move(ops[i]));
  }

  bool linearizable() {
    seen_.clear();
    return search(std::string(ops_.size(), '0'), std::nullopt, 0);
  }

 private:
  // Applies op to state; false if a completed op's observed result disagrees.
  bool apply(const register_op& op, std::optional<std::string>& state) const {
    switch (op.what) {
      case register_op::kind::read:
        return !op.completed() || op.result == state;
      case register_op::kind::write:
        state = op.arg;
        return true;
      case register_op::kind::del:
        state.reset();
        return true;
      case register_op::kind::cas: {
        bool match = state == op.expected;
        if (op.completed()) {
          if (op.swapped != match) return false;
          if (!match && op.result != state) return false;
        }
        if (match) state = op.arg;
        return true;
      }
    }
    return false;
  }

  bool search(std::string done, const std::optional<std::string>& state, std::size_t completed_done) {
    std::size_t completed_total = 0;
    std::uint64_t min_ret = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].completed()) ++completed_total;
      if (done[i] == '0' && ops_[i].completed()) min_ret = std::min(min_ret, ops_[i].ret);
    }
    if (completed_done == completed_total) return true;  // pending ones may never have happened
    std::string memo = done + (state ? "=" + *state : "#");
    if (!seen_.insert(memo).second) return false;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      if (done[i] == '1' || ops_[i].call > min_ret) continue;  // something finished before it began
      std::optional<std::string> next = state;
      if (!apply(ops_[i], next)) continue;
      done[i] = '1';
      if (search(done, next, completed_done + (ops_[i].completed() ? 1 : 0))) return true;
      done[i] = '0';
    }
    return false;
  }

  std::vector<register_op> ops_;
  std::set<std::string> seen_;
};

}  // namespace magnetite::testing
