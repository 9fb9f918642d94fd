// The C API (<magnetite/c.h>) over the public C++ API: every call checks its
// arguments, converts, calls, and converts the result back, and no exception
// leaves it (`guarded`). It sees only include/magnetite/.
#include "magnetite/c.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "magnetite/database.h"
#include "magnetite/state.h"
#include "magnetite/version.h"

namespace ms = magnetite::state;
using magnetite::status;
using magnetite::status_category;
using magnetite::status_code;

struct magnetite_error {
  magnetite_code code = MAGNETITE_OK;
  magnetite_category category = MAGNETITE_CATEGORY_NONE;
  std::string message;
  std::string described;
};

struct magnetite_options {
  magnetite::database_options o;
  int bad_fsync = -1;  // a policy that is none of the enum's, refused by magnetite_open
};

// What a database handle and every object made from it share: the database
// is closed (checkpointed and stopped) when the last of them is freed, so
// that no order of frees (a garbage collector's) can outlive it.
struct open_database {
  std::unique_ptr<magnetite::database> db;
  std::optional<ms::records> records;  // over *db: declared after it, destroyed before it
  std::optional<ms::streams> streams;
};
using shared_database = std::shared_ptr<open_database>;

struct magnetite_db {
  shared_database core;
  magnetite::database* db;
  ms::records* records;
  ms::streams* streams;
};

// Each object made from a database keeps it (`keep`, declared first, so it
// is destroyed after the object it keeps the database for).
struct magnetite_cursor {
  shared_database keep;
  magnetite::range_cursor c;
};

struct magnetite_owner {
  shared_database keep;
  ms::owner_state s;
};
struct magnetite_value {
  shared_database keep;
  ms::value_handle h;
};
struct magnetite_map {
  shared_database keep;
  ms::map_handle h;
};
struct magnetite_deque {
  shared_database keep;
  ms::deque_handle h;
};
struct magnetite_state_cursor {
  shared_database keep;
  std::variant<ms::cursor<ms::map_entry>, ms::cursor<std::string>, ms::cursor<ms::item>> c;
};
struct magnetite_txn {
  shared_database keep;
  ms::transaction t;
};

struct magnetite_rows {
  struct row {
    std::string key;
    magnetite_item_kind kind = MAGNETITE_ITEM_BYTES;
    std::string data;
    std::uint64_t number = 0;
  };
  std::vector<row> rows;
  std::optional<std::string> next;
};

namespace {

// Out of memory: the one error that is not allocated (magnetite_error_free
// leaves it alone).
magnetite_error out_of_memory{MAGNETITE_FAILED, MAGNETITE_TRANSIENT, "out of memory",
                              "failed (transient): out of memory"};

magnetite_code code_of(status_code c) {
  switch (c) {
    case status_code::ok:
      return MAGNETITE_OK;
    case status_code::not_found:
      return MAGNETITE_NOT_FOUND;
    case status_code::invalid_argument:
      return MAGNETITE_INVALID_ARGUMENT;
    case status_code::corruption:
      return MAGNETITE_CORRUPTION;
    case status_code::io_error:
      return MAGNETITE_IO_ERROR;
    case status_code::no_space:
      return MAGNETITE_NO_SPACE;
    case status_code::busy:
      return MAGNETITE_BUSY;
    case status_code::failed:
      return MAGNETITE_FAILED;
    case status_code::conflict:
      return MAGNETITE_CONFLICT;
    case status_code::timeout:
      return MAGNETITE_TIMEOUT;
    case status_code::not_supported:
      return MAGNETITE_NOT_SUPPORTED;
    case status_code::permission_denied:
      return MAGNETITE_PERMISSION_DENIED;
  }
  return MAGNETITE_FAILED;
}

magnetite_category category_of(status_category c) {
  switch (c) {
    case status_category::none:
      return MAGNETITE_CATEGORY_NONE;
    case status_category::transient:
      return MAGNETITE_TRANSIENT;
    case status_category::permanent:
      return MAGNETITE_PERMANENT;
    case status_category::ambiguous:
      return MAGNETITE_AMBIGUOUS;
  }
  return MAGNETITE_PERMANENT;
}

magnetite_error* error_of(const status& s) {
  if (s.is_ok()) return nullptr;
  auto* e = new magnetite_error;
  e->code = code_of(s.code());
  e->category = category_of(s.category());
  e->message = s.message();
  e->described =
      std::string(magnetite_code_name(e->code)) + " (" + magnetite_category_name(e->category) + "): " + e->message;
  return e;
}

// A caller's mistake the C layer finds itself (a NULL handle, a bad item
// kind): invalid_argument, in the category the C++ API gives such a mistake
// where it has one (transient in keyed state, records and streams).
magnetite_error* mistake(std::string msg, status_category cat = status_category::permanent) {
  return error_of(status::make(status_code::invalid_argument, cat, std::move(msg)));
}

template <class F>
magnetite_error* guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return &out_of_memory;
  } catch (const std::exception& e) {
    try {
      return error_of(
          status::make(status_code::failed, status_category::permanent, std::string("internal error: ") + e.what()));
    } catch (...) {
      return &out_of_memory;
    }
  } catch (...) {
    try {
      return error_of(status::make(status_code::failed, status_category::permanent, "internal error"));
    } catch (...) {
      return &out_of_memory;
    }
  }
}

// Bytes (p, n); NULL with n > 0 is a mistake, reported by the caller.
bool bytes_ok(const char* p, std::size_t n) { return p != nullptr || n == 0; }
std::string_view view(const char* p, std::size_t n) { return p ? std::string_view(p, n) : std::string_view(); }
std::optional<std::string_view> optional_view(const char* p, std::size_t n) {
  if (!p) return std::nullopt;
  return std::string_view(p, n);
}

// Inside a call's guarded body, whose capture `fn` names the C function.
#define MAGNETITE_REQUIRE(cond, what) \
  if (!(cond)) return mistake(std::string(fn) + ": " + (what))
#define MAGNETITE_REQUIRE_BYTES(p, n) MAGNETITE_REQUIRE(bytes_ok(p, n), #p " is NULL with a length above 0")

std::optional<std::chrono::nanoseconds> ttl_of(std::int64_t ms) {
  if (ms == 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

std::optional<ms::deadline> deadline_of(std::int64_t timeout_ms) {
  if (timeout_ms <= 0) return std::nullopt;
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

char* copy_out(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() ? s.size() : 1));
  if (!p) throw std::bad_alloc();
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return p;
}

// An item given by the caller. JSON text is parsed here; whether the
// document may be stored (not null, finite numbers, UTF-8) the C++ API
// judges, with its own messages.
magnetite::result<ms::item> item_in(const char* fn, const magnetite_item& v) {
  if (!bytes_ok(v.data, v.size))
    return status::make(status_code::invalid_argument, status_category::transient,
                        std::string(fn) + ": the item's data is NULL with a size above 0");
  if (v.kind == MAGNETITE_ITEM_BYTES) return ms::item(ms::bytes{std::string(view(v.data, v.size))});
  if (v.kind != MAGNETITE_ITEM_JSON)
    return status::make(status_code::invalid_argument, status_category::transient,
                        std::string(fn) + ": an item's kind is MAGNETITE_ITEM_JSON or MAGNETITE_ITEM_BYTES, not " +
                            std::to_string(v.kind));
  ms::json j = ms::json::parse(view(v.data, v.size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return status::make(status_code::invalid_argument, status_category::transient,
                        std::string(fn) + ": the item is not a JSON document");
  return ms::item(std::move(j));
}

// Stored items were checked at their write (UTF-8); replace is a guard only.
void encode_item(const ms::item& v, magnetite_item_kind& kind, std::string& data) {
  if (const auto* b = std::get_if<ms::bytes>(&v)) {
    kind = MAGNETITE_ITEM_BYTES;
    data = b->data;
  } else {
    kind = MAGNETITE_ITEM_JSON;
    data = std::get<ms::json>(v).dump(-1, ' ', false, ms::json::error_handler_t::replace);
  }
}

void item_out(const ms::item& v, magnetite_owned_item* out) {
  magnetite_item_kind kind;
  std::string data;
  encode_item(v, kind, data);
  char* p = copy_out(data);
  out->kind = kind;
  out->data = p;
  out->size = data.size();
}

// For calls that answer an optional item.
magnetite_error* optional_item_out(const magnetite::result<std::optional<ms::item>>& r, magnetite_owned_item* out,
                                   int* found) {
  if (!r) return error_of(r.error());
  if (r->has_value()) item_out(**r, out);
  *found = r->has_value() ? 1 : 0;
  return nullptr;
}

ms::collection_options collection_options_of(const magnetite_collection_options* o) {
  ms::collection_options out;
  if (!o) return out;
  if (o->ttl_ms != 0) out.ttl = std::chrono::milliseconds(o->ttl_ms);
  if (o->capacity != 0) out.capacity = o->capacity;
  return out;
}

magnetite::result<ms::scan_options> scan_options_of(const magnetite_scan_options* o) {
  ms::scan_options out;
  if (!o) return out;
  if (!bytes_ok(o->from, o->from_len) || !bytes_ok(o->after, o->after_len) || !bytes_ok(o->to, o->to_len) ||
      !bytes_ok(o->prefix, o->prefix_len))
    return status::make(status_code::invalid_argument, status_category::transient,
                        "scan options: a bound is NULL with a length above 0");
  out.dir = o->backward ? ms::direction::backward : ms::direction::forward;
  if (o->from) out.from = std::string(o->from, o->from_len);
  if (o->after) out.after = std::string(o->after, o->after_len);
  if (o->to) out.to = std::string(o->to, o->to_len);
  if (o->prefix) out.prefix = std::string(o->prefix, o->prefix_len);
  if (o->limit) out.limit = o->limit;
  return out;
}

template <class Handle>
magnetite_error* commit_of(Handle* h, std::int64_t timeout_ms) {
  return error_of(h->h.commit(deadline_of(timeout_ms)));
}

}  // namespace

extern "C" {

// ---- Errors ------------------------------------------------------------------

magnetite_code magnetite_error_code(const magnetite_error* e) { return e ? e->code : MAGNETITE_OK; }
magnetite_category magnetite_error_category(const magnetite_error* e) {
  return e ? e->category : MAGNETITE_CATEGORY_NONE;
}
const char* magnetite_error_message(const magnetite_error* e) { return e ? e->message.c_str() : ""; }
const char* magnetite_error_describe(const magnetite_error* e) { return e ? e->described.c_str() : "ok"; }
void magnetite_error_free(magnetite_error* e) {
  if (e != &out_of_memory) delete e;
}

const char* magnetite_code_name(int c) {
  switch (c) {
    case MAGNETITE_OK:
      return "ok";
    case MAGNETITE_NOT_FOUND:
      return "not_found";
    case MAGNETITE_INVALID_ARGUMENT:
      return "invalid_argument";
    case MAGNETITE_CORRUPTION:
      return "corruption";
    case MAGNETITE_IO_ERROR:
      return "io_error";
    case MAGNETITE_NO_SPACE:
      return "no_space";
    case MAGNETITE_BUSY:
      return "busy";
    case MAGNETITE_FAILED:
      return "failed";
    case MAGNETITE_CONFLICT:
      return "conflict";
    case MAGNETITE_TIMEOUT:
      return "timeout";
    case MAGNETITE_NOT_SUPPORTED:
      return "not_supported";
    case MAGNETITE_PERMISSION_DENIED:
      return "permission_denied";
  }
  return "unknown";
}

const char* magnetite_category_name(int c) {
  switch (c) {
    case MAGNETITE_CATEGORY_NONE:
      return "none";
    case MAGNETITE_TRANSIENT:
      return "transient";
    case MAGNETITE_PERMANENT:
      return "permanent";
    case MAGNETITE_AMBIGUOUS:
      return "ambiguous";
  }
  return "unknown";
}

void magnetite_free(void* p) { std::free(p); }

const char* magnetite_version(void) { return magnetite::version(); }

// ---- Opening -------------------------------------------------------------------

magnetite_options* magnetite_options_create(void) { return new (std::nothrow) magnetite_options; }
void magnetite_options_free(magnetite_options* o) { delete o; }
void magnetite_options_set_shards(magnetite_options* o, size_t shards) {
  if (!o) return;
  if (shards)
    o->o.shards = shards;
  else
    o->o.shards.reset();
}
void magnetite_options_set_memory_budget(magnetite_options* o, uint64_t bytes) {
  if (!o) return;
  if (bytes)
    o->o.memory_budget = static_cast<std::size_t>(bytes);
  else
    o->o.memory_budget.reset();
}
void magnetite_options_set_fsync(magnetite_options* o, int policy, uint32_t interval_ms) {
  if (!o) return;
  switch (policy) {
    case MAGNETITE_FSYNC_ALWAYS:
      o->o.shard.fsync = magnetite::fsync_policy::always;
      break;
    case MAGNETITE_FSYNC_COMMIT_ONLY:
      o->o.shard.fsync = magnetite::fsync_policy::commit_only;
      break;
    case MAGNETITE_FSYNC_INTERVAL:
      o->o.shard.fsync = magnetite::fsync_policy::interval;
      break;
    default:
      o->bad_fsync = static_cast<int>(policy);
      return;  // refused by magnetite_open
  }
  o->bad_fsync = -1;
  if (interval_ms) o->o.shard.fsync_interval = std::chrono::milliseconds(interval_ms);
}
void magnetite_options_set_retained_checkpoints(magnetite_options* o, size_t n) {
  if (o) o->o.retained_checkpoints = n;
}
void magnetite_options_set_writer_spin(magnetite_options* o, uint32_t microseconds) {
  if (o) o->o.writer_spin = std::chrono::microseconds(microseconds);
}

magnetite_error* magnetite_open(const char* dir, const magnetite_options* options, magnetite_db** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(dir, "dir is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    MAGNETITE_REQUIRE(!options || options->bad_fsync < 0,
                      "the fsync policy " + std::to_string(options ? options->bad_fsync : 0) +
                          " is none of MAGNETITE_FSYNC_ALWAYS, _COMMIT_ONLY, _INTERVAL");
    magnetite::database_options o = options ? options->o : magnetite::database_options{};
    o.dir = dir;
    auto db = magnetite::database::open(std::move(o));
    if (!db) return error_of(db.error());
    auto core = std::make_shared<open_database>();
    core->db = std::move(*db);
    core->records.emplace(*core->db);
    core->streams.emplace(*core->db);
    *out = new magnetite_db{core, core->db.get(), &*core->records, &*core->streams};
    return nullptr;
  });
}

// The last reference to a database runs ~database (noexcept: it checkpoints
// and stops the shards, reporting nothing), whichever free drops it.
void magnetite_close(magnetite_db* db) { delete db; }

size_t magnetite_shard_count(const magnetite_db* db) { return db ? db->db->shard_count() : 0; }

// ---- Plain keys --------------------------------------------------------------

magnetite_error* magnetite_get(magnetite_db* db, const char* key, size_t key_len, char** value, size_t* value_len,
                               int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(value && value_len && found, "an out parameter is NULL");
    auto r = db->db->get(view(key, key_len));
    if (!r) return error_of(r.error());
    if (*r) {
      *value = copy_out(**r);
      *value_len = (*r)->size();
    }
    *found = r->has_value() ? 1 : 0;
    return nullptr;
  });
}

magnetite_error* magnetite_put(magnetite_db* db, const char* key, size_t key_len, const char* value, size_t value_len,
                               int64_t ttl_ms) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE_BYTES(value, value_len);
    MAGNETITE_REQUIRE(ttl_ms >= 0, "ttl_ms is below 0");
    return error_of(db->db->put(view(key, key_len), view(value, value_len), ttl_of(ttl_ms)));
  });
}

magnetite_error* magnetite_del(magnetite_db* db, const char* key, size_t key_len) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    return error_of(db->db->del(view(key, key_len)));
  });
}

magnetite_error* magnetite_cas(magnetite_db* db, const char* key, size_t key_len, const char* expected,
                               size_t expected_len, const char* desired, size_t desired_len, int64_t ttl_ms,
                               int* swapped, char** current, size_t* current_len, int* has_current) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(swapped, "swapped is NULL");
    MAGNETITE_REQUIRE(ttl_ms >= 0, "ttl_ms is below 0");
    MAGNETITE_REQUIRE(!current == !current_len && !current == !has_current,
                      "current, current_len and has_current are all given or all NULL");
    auto r = db->db->cas(view(key, key_len), optional_view(expected, expected_len), optional_view(desired, desired_len),
                         ttl_of(ttl_ms));
    if (!r) return error_of(r.error());
    if (current) {
      if (r->current) {
        *current = copy_out(*r->current);
        *current_len = r->current->size();
      }
      *has_current = r->current ? 1 : 0;
    }
    *swapped = r->swapped ? 1 : 0;
    return nullptr;
  });
}

magnetite_error* magnetite_commit(magnetite_db* db, char root_hex[33]) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    auto r = db->db->commit();
    if (!r) return error_of(r.error());
    if (root_hex) {
      std::string hex = r->combined.to_hex();
      std::memcpy(root_hex, hex.c_str(), std::min<std::size_t>(hex.size() + 1, 33));
      root_hex[32] = '\0';
    }
    return nullptr;
  });
}

magnetite_error* magnetite_scan(magnetite_db* db, const char* from, size_t from_len, const char* to, size_t to_len,
                                magnetite_cursor** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(from, from_len);
    MAGNETITE_REQUIRE_BYTES(to, to_len);
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto c = db->db->scan(view(from, from_len), view(to, to_len));
    if (!c) return error_of(c.error());
    *out = new magnetite_cursor{db->core, std::move(*c)};
    return nullptr;
  });
}

magnetite_error* magnetite_cursor_next(magnetite_cursor* c, const char** key, size_t* key_len, const char** value,
                                       size_t* value_len, int* has) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(c, "cursor is NULL");
    MAGNETITE_REQUIRE(key && key_len && value && value_len && has, "an out parameter is NULL");
    auto r = c->c.next();
    if (!r) return error_of(r.error());
    if (*r) {
      *key = c->c.key().data();
      *key_len = c->c.key().size();
      *value = c->c.value().data();
      *value_len = c->c.value().size();
    }
    *has = *r ? 1 : 0;
    return nullptr;
  });
}

void magnetite_cursor_free(magnetite_cursor* c) { delete c; }

// ---- Items and rows ----------------------------------------------------------

void magnetite_owned_item_release(magnetite_owned_item* item) {
  if (!item) return;
  std::free(item->data);
  item->data = nullptr;
  item->size = 0;
}

size_t magnetite_rows_count(const magnetite_rows* r) { return r ? r->rows.size() : 0; }

void magnetite_rows_get(const magnetite_rows* r, size_t i, const char** key, size_t* key_len, magnetite_item* item,
                        uint64_t* number) {
  if (!r || i >= r->rows.size()) return;
  const auto& row = r->rows[i];
  if (key) *key = row.key.data();
  if (key_len) *key_len = row.key.size();
  if (item) *item = magnetite_item{row.kind, row.data.data(), row.data.size()};
  if (number) *number = row.number;
}

int magnetite_rows_next(const magnetite_rows* r, const char** start_after, size_t* len) {
  if (!r || !r->next) return 0;
  if (start_after) *start_after = r->next->data();
  if (len) *len = r->next->size();
  return 1;
}

void magnetite_rows_free(magnetite_rows* r) { delete r; }

// ---- Keyed state -------------------------------------------------------------

magnetite_error* magnetite_owner_open(magnetite_db* db, const char* ns, size_t ns_len, const char* owner,
                                      size_t owner_len, magnetite_owner** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(owner, owner_len);
    MAGNETITE_REQUIRE(out, "out is NULL");
    *out = new magnetite_owner{
        db->core, ms::owner_state(*db->db, std::string(view(ns, ns_len)), std::string(view(owner, owner_len)))};
    return nullptr;
  });
}

magnetite_error* magnetite_owner_commit(magnetite_owner* o, int64_t timeout_ms) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(o, "owner is NULL");
    return error_of(o->s.commit(deadline_of(timeout_ms)));
  });
}

void magnetite_owner_rollback(magnetite_owner* o) {
  if (o) o->s.rollback();
}

void magnetite_owner_free(magnetite_owner* o) {
  if (!o) return;
  o->s.close();
  delete o;
}

#define MAGNETITE_HANDLE_MAKER(kind, type)                                                                    \
  magnetite_error* magnetite_owner_##kind(magnetite_owner* o, const char* name, size_t name_len,              \
                                          const magnetite_collection_options* options, type** out) {          \
    return guarded([&, fn = __func__]() -> magnetite_error* {                                                 \
      MAGNETITE_REQUIRE(o, "owner is NULL");                                                                  \
      MAGNETITE_REQUIRE_BYTES(name, name_len);                                                                \
      MAGNETITE_REQUIRE(out, "out is NULL");                                                                  \
      *out = new type{o->keep, o->s.kind(std::string(view(name, name_len)), collection_options_of(options))}; \
      return nullptr;                                                                                         \
    });                                                                                                       \
  }
MAGNETITE_HANDLE_MAKER(value, magnetite_value)
MAGNETITE_HANDLE_MAKER(map, magnetite_map)
MAGNETITE_HANDLE_MAKER(deque, magnetite_deque)
#undef MAGNETITE_HANDLE_MAKER

// What every handle kind has alike: commit, rollback, close, free.
#define MAGNETITE_HANDLE_COMMON(kind, type)                                 \
  magnetite_error* magnetite_##kind##_commit(type* h, int64_t timeout_ms) { \
    return guarded([&, fn = __func__]() -> magnetite_error* {               \
      MAGNETITE_REQUIRE(h, "handle is NULL");                               \
      return commit_of(h, timeout_ms);                                      \
    });                                                                     \
  }                                                                         \
  void magnetite_##kind##_rollback(type* h) {                               \
    if (h) h->h.rollback();                                                 \
  }                                                                         \
  void magnetite_##kind##_close(type* h) {                                  \
    if (h) h->h.close();                                                    \
  }                                                                         \
  void magnetite_##kind##_free(type* h) { delete h; }
MAGNETITE_HANDLE_COMMON(value, magnetite_value)
MAGNETITE_HANDLE_COMMON(map, magnetite_map)
MAGNETITE_HANDLE_COMMON(deque, magnetite_deque)
#undef MAGNETITE_HANDLE_COMMON

magnetite_error* magnetite_value_get(magnetite_value* h, magnetite_owned_item* out, int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(out && found, "an out parameter is NULL");
    return optional_item_out(h->h.get(), out, found);
  });
}

magnetite_error* magnetite_value_set(magnetite_value* h, magnetite_item v) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    auto item = item_in(fn, v);
    if (!item) return error_of(item.error());
    return error_of(h->h.set(std::move(*item)));
  });
}

magnetite_error* magnetite_value_clear(magnetite_value* h) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    return error_of(h->h.clear());
  });
}

magnetite_error* magnetite_map_get(magnetite_map* h, const char* key, size_t key_len, magnetite_owned_item* out,
                                   int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(out && found, "an out parameter is NULL");
    return optional_item_out(h->h.get(view(key, key_len)), out, found);
  });
}

magnetite_error* magnetite_map_get_many(magnetite_map* h, const char* const* keys, const size_t* key_lens, size_t n,
                                        magnetite_owned_item* outs, int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(n == 0 || (keys && key_lens && outs && found), "keys, key_lens, outs or found is NULL");
    std::vector<std::string> ks;
    ks.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      MAGNETITE_REQUIRE_BYTES(keys[i], key_lens[i]);
      ks.emplace_back(view(keys[i], key_lens[i]));
    }
    auto r = h->h.get_many(ks);
    if (!r) return error_of(r.error());
    // Every item is copied out before any out parameter is written: an
    // allocation failure half way leaves them as they were.
    std::vector<magnetite_owned_item> copies(n, magnetite_owned_item{MAGNETITE_ITEM_BYTES, nullptr, 0});
    try {
      for (std::size_t i = 0; i < n; ++i)
        if ((*r)[i]) item_out(*(*r)[i], &copies[i]);
    } catch (...) {
      for (auto& c : copies) magnetite_owned_item_release(&c);
      throw;
    }
    for (std::size_t i = 0; i < n; ++i) {
      found[i] = (*r)[i] ? 1 : 0;
      if (found[i]) outs[i] = copies[i];
    }
    return nullptr;
  });
}

magnetite_error* magnetite_map_contains(magnetite_map* h, const char* key, size_t key_len, int* contains) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(contains, "contains is NULL");
    auto r = h->h.contains(view(key, key_len));
    if (!r) return error_of(r.error());
    *contains = *r ? 1 : 0;
    return nullptr;
  });
}

magnetite_error* magnetite_map_set(magnetite_map* h, const char* key, size_t key_len, magnetite_item v) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    auto item = item_in(fn, v);
    if (!item) return error_of(item.error());
    return error_of(h->h.set(view(key, key_len), std::move(*item)));
  });
}

magnetite_error* magnetite_map_remove(magnetite_map* h, const char* key, size_t key_len) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    return error_of(h->h.remove(view(key, key_len)));
  });
}

magnetite_error* magnetite_map_clear(magnetite_map* h) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    return error_of(h->h.clear());
  });
}

magnetite_error* magnetite_map_is_empty(magnetite_map* h, int* empty) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(empty, "empty is NULL");
    auto r = h->h.is_empty();
    if (!r) return error_of(r.error());
    *empty = *r ? 1 : 0;
    return nullptr;
  });
}

magnetite_error* magnetite_map_size(magnetite_map* h, uint64_t* size) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(size, "size is NULL");
    auto r = h->h.size();
    if (!r) return error_of(r.error());
    *size = *r;
    return nullptr;
  });
}

magnetite_error* magnetite_map_scan(magnetite_map* h, const magnetite_scan_options* options,
                                    magnetite_state_cursor** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto o = scan_options_of(options);
    if (!o) return error_of(o.error());
    auto c = h->h.scan(std::move(*o));
    if (!c) return error_of(c.error());
    *out = new magnetite_state_cursor{h->keep, std::move(*c)};
    return nullptr;
  });
}

magnetite_error* magnetite_map_keys(magnetite_map* h, const magnetite_scan_options* options,
                                    magnetite_state_cursor** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto o = scan_options_of(options);
    if (!o) return error_of(o.error());
    auto c = h->h.keys(std::move(*o));
    if (!c) return error_of(c.error());
    *out = new magnetite_state_cursor{h->keep, std::move(*c)};
    return nullptr;
  });
}

magnetite_error* magnetite_deque_len(magnetite_deque* h, uint64_t* len) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(len, "len is NULL");
    auto r = h->h.len();
    if (!r) return error_of(r.error());
    *len = *r;
    return nullptr;
  });
}

magnetite_error* magnetite_deque_is_empty(magnetite_deque* h, int* empty) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(empty, "empty is NULL");
    auto r = h->h.is_empty();
    if (!r) return error_of(r.error());
    *empty = *r ? 1 : 0;
    return nullptr;
  });
}

// The deque's reads and pops that answer an optional item.
#define MAGNETITE_DEQUE_ITEM(name, call)                                                               \
  magnetite_error* magnetite_deque_##name(magnetite_deque* h, magnetite_owned_item* out, int* found) { \
    return guarded([&, fn = __func__]() -> magnetite_error* {                                          \
      MAGNETITE_REQUIRE(h, "handle is NULL");                                                          \
      MAGNETITE_REQUIRE(out&& found, "an out parameter is NULL");                                      \
      return optional_item_out(h->h.call(), out, found);                                               \
    });                                                                                                \
  }
MAGNETITE_DEQUE_ITEM(peek_front, peek_front)
MAGNETITE_DEQUE_ITEM(peek_back, peek_back)
MAGNETITE_DEQUE_ITEM(pop_front, pop_front)
MAGNETITE_DEQUE_ITEM(pop_back, pop_back)
#undef MAGNETITE_DEQUE_ITEM

magnetite_error* magnetite_deque_get(magnetite_deque* h, uint64_t index, magnetite_owned_item* out, int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(out && found, "an out parameter is NULL");
    return optional_item_out(h->h.get(index), out, found);
  });
}

magnetite_error* magnetite_deque_push_front(magnetite_deque* h, magnetite_item v) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    auto item = item_in(fn, v);
    if (!item) return error_of(item.error());
    return error_of(h->h.push_front(std::move(*item)));
  });
}

magnetite_error* magnetite_deque_push_back(magnetite_deque* h, magnetite_item v) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    auto item = item_in(fn, v);
    if (!item) return error_of(item.error());
    return error_of(h->h.push_back(std::move(*item)));
  });
}

magnetite_error* magnetite_deque_clear(magnetite_deque* h) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    return error_of(h->h.clear());
  });
}

magnetite_error* magnetite_deque_scan(magnetite_deque* h, int backward, magnetite_state_cursor** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(h, "handle is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto c = h->h.scan(backward ? ms::direction::backward : ms::direction::forward);
    if (!c) return error_of(c.error());
    *out = new magnetite_state_cursor{h->keep, std::move(*c)};
    return nullptr;
  });
}

magnetite_error* magnetite_state_cursor_next(magnetite_state_cursor* c, size_t max, magnetite_rows** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(c, "cursor is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto rows = std::make_unique<magnetite_rows>();
    magnetite_error* e = std::visit(
        [&](auto& cur) -> magnetite_error* {
          auto chunk = cur.next_chunk(max == 0 ? 1 : max);
          if (!chunk) return error_of(chunk.error());
          for (auto& x : *chunk) {
            magnetite_rows::row row;
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, ms::map_entry>) {
              row.key = std::move(x.key);
              encode_item(x.value, row.kind, row.data);
            } else if constexpr (std::is_same_v<T, std::string>) {
              row.key = std::move(x);
            } else {
              encode_item(x, row.kind, row.data);
            }
            rows->rows.push_back(std::move(row));
          }
          return nullptr;
        },
        c->c);
    if (e) return e;
    *out = rows.release();
    return nullptr;
  });
}

void magnetite_state_cursor_free(magnetite_state_cursor* c) { delete c; }

// ---- Records and transactions -------------------------------------------------

namespace {

magnetite_error* record_out(const magnetite::result<std::optional<ms::record>>& r, magnetite_owned_item* out,
                            uint64_t* revision, int* found) {
  if (!r) return error_of(r.error());
  if (*r) {
    item_out((*r)->value, out);
    *revision = (*r)->revision;
  }
  *found = r->has_value() ? 1 : 0;
  return nullptr;
}

}  // namespace

magnetite_error* magnetite_record_load(magnetite_db* db, const char* ns, size_t ns_len, const char* key, size_t key_len,
                                       magnetite_owned_item* out, uint64_t* revision, int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(out && revision && found, "an out parameter is NULL");
    return record_out(db->records->load(view(ns, ns_len), view(key, key_len)), out, revision, found);
  });
}

magnetite_error* magnetite_record_list(magnetite_db* db, const char* ns, size_t ns_len, const char* prefix,
                                       size_t prefix_len, const char* start_after, size_t start_after_len, size_t limit,
                                       magnetite_rows** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(prefix, prefix_len);
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto p = db->records->list(view(ns, ns_len), view(prefix, prefix_len), optional_view(start_after, start_after_len),
                               limit);
    if (!p) return error_of(p.error());
    auto rows = std::make_unique<magnetite_rows>();
    for (auto& [k, rec] : p->records) {
      magnetite_rows::row row;
      row.key = k;
      encode_item(rec.value, row.kind, row.data);
      row.number = rec.revision;
      rows->rows.push_back(std::move(row));
    }
    rows->next = p->next;
    *out = rows.release();
    return nullptr;
  });
}

magnetite_error* magnetite_txn_begin(magnetite_db* db, magnetite_txn** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE(out, "out is NULL");
    *out = new magnetite_txn{db->core, db->records->begin()};
    return nullptr;
  });
}

magnetite_error* magnetite_txn_load(magnetite_txn* t, const char* ns, size_t ns_len, const char* key, size_t key_len,
                                    magnetite_owned_item* out, uint64_t* revision, int* found) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(t, "transaction is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    MAGNETITE_REQUIRE(out && revision && found, "an out parameter is NULL");
    return record_out(t->t.load(view(ns, ns_len), view(key, key_len)), out, revision, found);
  });
}

magnetite_error* magnetite_txn_put(magnetite_txn* t, const char* ns, size_t ns_len, const char* key, size_t key_len,
                                   magnetite_item v) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(t, "transaction is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    auto item = item_in(fn, v);
    if (!item) return error_of(item.error());
    return error_of(t->t.put(view(ns, ns_len), view(key, key_len), std::move(*item)));
  });
}

magnetite_error* magnetite_txn_del(magnetite_txn* t, const char* ns, size_t ns_len, const char* key, size_t key_len) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(t, "transaction is NULL");
    MAGNETITE_REQUIRE_BYTES(ns, ns_len);
    MAGNETITE_REQUIRE_BYTES(key, key_len);
    return error_of(t->t.del(view(ns, ns_len), view(key, key_len)));
  });
}

magnetite_error* magnetite_txn_commit(magnetite_txn* t, int64_t timeout_ms, uint64_t* revision) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(t, "transaction is NULL");
    auto r = t->t.commit(deadline_of(timeout_ms));
    if (!r) return error_of(r.error());
    if (revision) *revision = *r;
    return nullptr;
  });
}

void magnetite_txn_rollback(magnetite_txn* t) {
  if (t) t->t.rollback();
}

void magnetite_txn_free(magnetite_txn* t) { delete t; }

// ---- Streams ------------------------------------------------------------------

magnetite_error* magnetite_stream_append(magnetite_db* db, const char* stream, size_t stream_len,
                                         const magnetite_item* entries, size_t n, uint64_t expected_seq, int64_t ttl_ms,
                                         int64_t timeout_ms, uint64_t* first_seq) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(stream, stream_len);
    MAGNETITE_REQUIRE(n == 0 || entries, "entries is NULL");
    MAGNETITE_REQUIRE(ttl_ms >= 0, "ttl_ms is below 0");
    std::vector<ms::item> items;
    items.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      auto item = item_in(fn, entries[i]);
      if (!item) return error_of(item.error());
      items.push_back(std::move(*item));
    }
    auto r =
        db->streams->append(view(stream, stream_len), items, expected_seq, ttl_of(ttl_ms), deadline_of(timeout_ms));
    if (!r) return error_of(r.error());
    if (first_seq) *first_seq = *r;
    return nullptr;
  });
}

magnetite_error* magnetite_stream_read(magnetite_db* db, const char* stream, size_t stream_len, uint64_t from_seq,
                                       size_t limit, magnetite_rows** out) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(stream, stream_len);
    MAGNETITE_REQUIRE(out, "out is NULL");
    auto r = db->streams->read(view(stream, stream_len), from_seq, limit);
    if (!r) return error_of(r.error());
    auto rows = std::make_unique<magnetite_rows>();
    for (auto& e : *r) {
      magnetite_rows::row row;
      encode_item(e.value, row.kind, row.data);
      row.number = e.seq;
      rows->rows.push_back(std::move(row));
    }
    *out = rows.release();
    return nullptr;
  });
}

magnetite_error* magnetite_stream_next_seq(magnetite_db* db, const char* stream, size_t stream_len,
                                           uint64_t* next_seq) {
  return guarded([&, fn = __func__]() -> magnetite_error* {
    MAGNETITE_REQUIRE(db, "db is NULL");
    MAGNETITE_REQUIRE_BYTES(stream, stream_len);
    MAGNETITE_REQUIRE(next_seq, "next_seq is NULL");
    auto r = db->streams->next_seq(view(stream, stream_len));
    if (!r) return error_of(r.error());
    *next_seq = *r;
    return nullptr;
  });
}

}  // extern "C"
