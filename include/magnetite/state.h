// state: keyed state, records and event streams on top of a database
// (docs/embedding.md, "Keyed state, records, transactions and event streams").
//
//   owner_state   one owner's value, map and deque collections, committed or
//                 rolled back together (magnetite/state/keyed_state.h)
//   records       JSON or raw records by namespace and key, in optimistic
//                 transactions with revisions (magnetite/state/records.h)
//   streams       append-only event streams read by position
//                 (magnetite/state/streams.h)
#pragma once

#include "magnetite/state/item.h"
#include "magnetite/state/keyed_state.h"
#include "magnetite/state/records.h"
#include "magnetite/state/streams.h"
