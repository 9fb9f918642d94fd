// A client's grants, judged at the replica that takes its request (the
// owner, or the replica that refuses it as not the owner: a refusal for
// want of a grant comes first, so a client learns it whichever replica it
// asked). The grants come from the cluster file's `client` lines, by the
// name the client's certificate gives (node::client_access_fn).
#include "replication/client_access.h"
#include "replication/replica_internal.h"

namespace magnetite::replication::replica_internal {

namespace {

// The grants of the sender of the message being handled; null: no limit.
std::shared_ptr<const client_access> access_of_sender(self_ptr self) {
  const auto& fn = self->state.config.access;
  if (!fn || sent_by_member(self)) return nullptr;
  const auto& s = self->current_sender();
  return fn(s ? s->node() : caf::node_id());
}

// A key in a refusal: its first bytes, as a cluster file would write them.
std::string shown(std::string_view key) { return format_prefix(key.substr(0, 32)); }

caf::error denied(const char* what, std::string_view doing, std::string_view key) {
  return to_error(status::make(
      status_code::permission_denied, status_category::permanent,
      fmt::format("permission denied: `{}` would {} a key ({} bytes, starting {}) that the cluster file grants this "
                  "client no {} of",
                  what, doing, key.size(), shown(key), doing)));
}

}  // namespace

caf::error refused_keys(self_ptr self, const char* what, std::initializer_list<std::string_view> reads,
                        std::initializer_list<std::string_view> writes) {
  auto access = access_of_sender(self);
  if (!access) return {};
  for (auto k : writes)
    if (!access->may_write(k)) return denied(what, "write", k);
  for (auto k : reads)
    if (!access->may_read(k)) return denied(what, "read", k);
  return {};
}

caf::error refused_batch(self_ptr self, const char* what, const std::vector<state_check>& checks,
                         const std::vector<batch_op>& ops) {
  auto access = access_of_sender(self);
  if (!access) return {};
  for (const auto& op : ops)
    if (!access->may_write(op.key)) return denied(what, "write", op.key);
  for (const auto& c : checks)
    if (!access->may_read(c.key)) return denied(what, "read", c.key);
  return {};
}

caf::error refused_range(self_ptr self, const std::string& from, const std::string& to) {
  auto access = access_of_sender(self);
  if (!access || access->may_read_range(from, to)) return {};
  return to_error(status::make(
      status_code::permission_denied, status_category::permanent,
      fmt::format("permission denied: `srange` from {} to {} reaches keys that the cluster file grants this client no "
                  "read of (a range must lie within one granted prefix)",
                  shown(from), to.empty() ? std::string("the end") : shown(to))));
}

caf::error refused_unless_writer(self_ptr self, const char* what) {
  auto access = access_of_sender(self);
  if (!access || access->writes_anything()) return {};
  return to_error(status::make(
      status_code::permission_denied, status_category::permanent,
      fmt::format("permission denied: `{}` decides writes, and the cluster file grants this client none", what)));
}

}  // namespace magnetite::replication::replica_internal
