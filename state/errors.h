// errors: the categories state/ gives its errors (docs/embedding.md).
//
// A stream processor retries the message on a transient error and drops it on
// a permanent one, so a caller mistake is transient here (unlike the plain
// API, where bad input is permanent). After a write was handed to a shard,
// only a conflict proves that nothing was written.
#pragma once

#include <string>

#include "core/status.h"

namespace magnetite::state {

// A caller mistake: invalid_argument, transient.
status mistake(std::string msg);

// What a failed conditional batch proves. Refusals that stage nothing keep
// their code and category: bad input, damaged data, a shard failed for good,
// a deadline past before sending, a shard too full to admit it (busy), a
// conflict, a key the cluster's client lines do not grant (permission
// denied, judged before anything is staged). Anything else may have happened
// after the request reached the shard (a failed fsync, a shard that died
// holding it, a deadline passed while waiting): the write may or may not have
// landed, so it is ambiguous.
status after_handoff(status e);

}  // namespace magnetite::state
