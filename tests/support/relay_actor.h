// relay_actor: a fault-injecting link between two replicas in one process.
// Every message sent to the relay is delegated to its target (so the answer
// goes straight back to the sender) unless the link is cut: then it is
// dropped without an answer, and the sender's request times out, as over a
// network partition. Messages already delivered are not recalled.
#pragma once

#include <memory>

#include "actors/caf_headers.h"  // before any other CAF header

namespace magnetite::testing {

struct relay_link {
  bool cut = false;
  std::uint64_t dropped = 0;
  std::uint64_t passed = 0;
};

struct relay_state {
  caf::actor target;
  std::shared_ptr<relay_link> link;
};

inline caf::behavior relay_behavior(caf::stateful_actor<relay_state>* self, caf::actor target,
                                    std::shared_ptr<relay_link> link) {
  self->state.target = std::move(target);
  self->state.link = std::move(link);
  self->set_default_handler([self](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
    if (self->state.link->cut) {
      ++self->state.link->dropped;
      return caf::delegated<caf::message>{};  // no answer, ever
    }
    ++self->state.link->passed;
    return self->delegate(self->state.target, x.move_content_to_message());
  });
  // Everything goes through the default handler; this entry is never matched
  // by a replica message.
  return {[](caf::unit_t) {}};
}

}  // namespace magnetite::testing
