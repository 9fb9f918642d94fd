/* magnetite/c.h: the C API (C11 and C++), for hosts in C and for bindings of
 * other languages (bindings/ruby). docs/embedding.md, "The C API", maps every
 * call to the C++ API it wraps.
 *
 * Conventions, for every function:
 * - A call that can fail returns a magnetite_error*: NULL on success, else an
 *   error the caller owns and frees with magnetite_error_free(). It carries a
 *   code, a category (transient: retry may succeed, nothing was written;
 *   permanent: retrying will not help; ambiguous: the write may or may not
 *   have happened) and a message. No C++ exception ever crosses this API;
 *   out of memory is an error like any other.
 * - On an error, out parameters are left as they were, and nothing was
 *   changed unless the category is ambiguous.
 * - Keys, values and names are (pointer, length) pairs of bytes: embedded
 *   zero bytes are fine, and a NULL pointer with length 0 is the empty
 *   string. Where a parameter says "NULL: none", a NULL pointer means absent
 *   (which is not the same as empty).
 * - Every buffer the API returns through a `char**` or in a magnetite_owned_item
 *   is the caller's, freed with magnetite_free(). An out parameter is written
 *   over, never freed: release what it held before reusing it. Pointers returned through
 *   `const char**` (and magnetite_item views) point into the object they came
 *   from and stay valid until that object's next call or its free.
 * - Opaque objects are freed with their own *_free (or magnetite_close for a
 *   database); each accepts NULL. An object made from a database (a cursor,
 *   an owner state, a handle, a transaction) keeps it open: the database is
 *   checkpointed and stopped once magnetite_close was called AND the last
 *   such object is freed, whatever the order (a garbage collector's is
 *   safe). Until then its directory stays locked.
 * - Thread safety is the C++ API's: a magnetite_db may be used from any
 *   number of threads at once; every other object by one thread at a time.
 * - Durations are milliseconds; 0 means none (no TTL, no deadline).
 */
#ifndef MAGNETITE_C_H
#define MAGNETITE_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define MAGNETITE_C_API
#else
#define MAGNETITE_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------- */

typedef enum magnetite_code {
  MAGNETITE_OK = 0,
  MAGNETITE_NOT_FOUND = 1,
  MAGNETITE_INVALID_ARGUMENT = 2, /* the input breaks a documented rule */
  MAGNETITE_CORRUPTION = 3,       /* stored bytes fail a check */
  MAGNETITE_IO_ERROR = 4,
  MAGNETITE_NO_SPACE = 5,
  MAGNETITE_BUSY = 6,     /* held elsewhere (a data directory's lock), or a shard too full to admit a write */
  MAGNETITE_FAILED = 7,   /* fail-stop: refuses work after an earlier error */
  MAGNETITE_CONFLICT = 8, /* an optimistic precondition did not hold; nothing was written */
  MAGNETITE_TIMEOUT = 9,
  MAGNETITE_NOT_SUPPORTED = 10,
  MAGNETITE_PERMISSION_DENIED = 11 /* not granted to this client (a cluster file's `client` lines) */
} magnetite_code;

typedef enum magnetite_category {
  MAGNETITE_CATEGORY_NONE = 0,
  MAGNETITE_TRANSIENT = 1,
  MAGNETITE_PERMANENT = 2,
  MAGNETITE_AMBIGUOUS = 3
} magnetite_category;

typedef struct magnetite_error magnetite_error;

MAGNETITE_C_API magnetite_code magnetite_error_code(const magnetite_error* e);
MAGNETITE_C_API magnetite_category magnetite_error_category(const magnetite_error* e);
/* "code (category): message" is magnetite_error_describe's. The message alone,
 * zero-terminated, valid until the error is freed. */
MAGNETITE_C_API const char* magnetite_error_message(const magnetite_error* e);
MAGNETITE_C_API const char* magnetite_error_describe(const magnetite_error* e);
MAGNETITE_C_API void magnetite_error_free(magnetite_error* e);
/* "not_found", "transient", ...: static strings ("unknown" for a value that
 * is none of the enum's). The enums' values cross this API as int, so that
 * a value out of range is the API's to refuse rather than undefined. */
MAGNETITE_C_API const char* magnetite_code_name(int code);
MAGNETITE_C_API const char* magnetite_category_name(int category);

/* Frees a buffer the API returned (NULL is fine). */
MAGNETITE_C_API void magnetite_free(void* p);

/* The library's version, "MAJOR.MINOR.PATCH": a static string. */
MAGNETITE_C_API const char* magnetite_version(void);

/* ---- Opening a database ------------------------------------------------- */

typedef enum magnetite_fsync {
  MAGNETITE_FSYNC_ALWAYS = 0,      /* a write returns once its group's fsync did */
  MAGNETITE_FSYNC_COMMIT_ONLY = 1, /* only commit() syncs */
  MAGNETITE_FSYNC_INTERVAL = 2     /* at most every interval_ms */
} magnetite_fsync;

typedef struct magnetite_options magnetite_options;

MAGNETITE_C_API magnetite_options* magnetite_options_create(void); /* NULL: out of memory */
MAGNETITE_C_API void magnetite_options_free(magnetite_options* o);
/* 0: a new database gets one shard a core; an existing one keeps its count. */
MAGNETITE_C_API void magnetite_options_set_shards(magnetite_options* o, size_t shards);
/* Bytes all shards' caches share; 0: each shard's default (64 MiB). */
MAGNETITE_C_API void magnetite_options_set_memory_budget(magnetite_options* o, uint64_t bytes);
/* policy: a magnetite_fsync; another value makes magnetite_open refuse. */
MAGNETITE_C_API void magnetite_options_set_fsync(magnetite_options* o, int policy, uint32_t interval_ms);
MAGNETITE_C_API void magnetite_options_set_retained_checkpoints(magnetite_options* o, size_t n);
/* How long a thread that is the only one blocked on a write spins for its
 * answer before it sleeps (database_options::writer_spin; 500 by default).
 * 0: it sleeps at once. Above 100 000 open refuses. */
MAGNETITE_C_API void magnetite_options_set_writer_spin(magnetite_options* o, uint32_t microseconds);

typedef struct magnetite_db magnetite_db;

/* Opens (creating if missing) the database in `dir`. options NULL: defaults.
 * A directory held by another process is busy; bad options invalid_argument. */
MAGNETITE_C_API magnetite_error* magnetite_open(const char* dir, const magnetite_options* options, magnetite_db** out);
/* Frees the handle; once every object made from it is freed too, checkpoints
 * every shard and stops them (see above). NULL is fine. */
MAGNETITE_C_API void magnetite_close(magnetite_db* db);
MAGNETITE_C_API size_t magnetite_shard_count(const magnetite_db* db);

/* ---- Plain keys ---------------------------------------------------------- */

/* *found = 1 and *value (the caller's) set, or *found = 0. */
MAGNETITE_C_API magnetite_error* magnetite_get(magnetite_db* db, const char* key, size_t key_len, char** value,
                                               size_t* value_len, int* found);
/* Durable when it returns (under the `always` policy). ttl_ms 0: none. */
MAGNETITE_C_API magnetite_error* magnetite_put(magnetite_db* db, const char* key, size_t key_len, const char* value,
                                               size_t value_len, int64_t ttl_ms);
MAGNETITE_C_API magnetite_error* magnetite_del(magnetite_db* db, const char* key, size_t key_len);
/* Compare and set: swaps when the key holds `expected` (NULL: when it is
 * absent), writing `desired` (NULL: deleting it). *swapped says whether it
 * did; *has_current and *current (the caller's, may be NULL if not wanted)
 * the value it found. */
MAGNETITE_C_API magnetite_error* magnetite_cas(magnetite_db* db, const char* key, size_t key_len, const char* expected,
                                               size_t expected_len, const char* desired, size_t desired_len,
                                               int64_t ttl_ms, int* swapped, char** current, size_t* current_len,
                                               int* has_current);
/* Checkpoints every shard; root_hex (33 bytes) gets the combined root. */
MAGNETITE_C_API magnetite_error* magnetite_commit(magnetite_db* db, char root_hex[33]);

/* Live entries of [from, to) across every shard in key order; to NULL (or
 * of length 0): no upper bound. Each shard's view is pinned when the cursor is made. */
typedef struct magnetite_cursor magnetite_cursor;
MAGNETITE_C_API magnetite_error* magnetite_scan(magnetite_db* db, const char* from, size_t from_len, const char* to,
                                                size_t to_len, magnetite_cursor** out);
/* *has = 1 with the entry (views valid until the next call or the free), or
 * *has = 0 at the end, and at every call after. */
MAGNETITE_C_API magnetite_error* magnetite_cursor_next(magnetite_cursor* c, const char** key, size_t* key_len,
                                                       const char** value, size_t* value_len, int* has);
MAGNETITE_C_API void magnetite_cursor_free(magnetite_cursor* c);

/* ---- Items: what keyed state, records and streams store ----------------- */

typedef enum magnetite_item_kind {
  MAGNETITE_ITEM_JSON = 1, /* a JSON document as UTF-8 text; null is not storable */
  MAGNETITE_ITEM_BYTES = 2 /* raw bytes, stored as given */
} magnetite_item_kind;

/* An item given to the API, or a view of one it returns (see above). */
typedef struct magnetite_item {
  int kind; /* a magnetite_item_kind; another value is refused */
  const char* data;
  size_t size;
} magnetite_item;

/* An item the API returns to the caller: data (compact JSON text, or the
 * bytes) is the caller's, freed with magnetite_free (magnetite_owned_item_release). */
typedef struct magnetite_owned_item {
  int kind; /* a magnetite_item_kind */
  char* data;
  size_t size;
} magnetite_owned_item;

/* Frees item->data and zeroes it; NULL is fine. */
MAGNETITE_C_API void magnetite_owned_item_release(magnetite_owned_item* item);

/* ---- Rows: the results of a chunk, a page or a read ---------------------- */

/* A list of rows, each with a key (map entries, map keys, records), an item
 * (map entries, deque items, records, stream entries) and a number (a
 * record's revision, a stream entry's seq); what a row lacks is empty/0. */
typedef struct magnetite_rows magnetite_rows;
MAGNETITE_C_API size_t magnetite_rows_count(const magnetite_rows* r);
/* Row i < count: views valid until the rows are freed. */
MAGNETITE_C_API void magnetite_rows_get(const magnetite_rows* r, size_t i, const char** key, size_t* key_len,
                                        magnetite_item* item, uint64_t* number);
/* A page of records: 1 and the key to pass as start_after for the next
 * page, or 0 when this page is the last. */
MAGNETITE_C_API int magnetite_rows_next(const magnetite_rows* r, const char** start_after, size_t* len);
MAGNETITE_C_API void magnetite_rows_free(magnetite_rows* r);

/* ---- Keyed state: value, map, deque per owner ---------------------------- */

typedef struct magnetite_owner magnetite_owner;
typedef struct magnetite_value magnetite_value;
typedef struct magnetite_map magnetite_map;
typedef struct magnetite_deque magnetite_deque;
typedef struct magnetite_state_cursor magnetite_state_cursor;

typedef struct magnetite_collection_options {
  int64_t ttl_ms;    /* per item, from its last write; 0: none */
  uint64_t capacity; /* deque only: a push at capacity evicts from the other end; 0: none */
} magnetite_collection_options;

/* The collections of one (namespace, owner key): they share a shard and
 * commit together. */
MAGNETITE_C_API magnetite_error* magnetite_owner_open(magnetite_db* db, const char* ns, size_t ns_len,
                                                      const char* owner, size_t owner_len, magnetite_owner** out);
/* Every handle's buffered operations, in one durable frame. */
MAGNETITE_C_API magnetite_error* magnetite_owner_commit(magnetite_owner* o, int64_t timeout_ms);
MAGNETITE_C_API void magnetite_owner_rollback(magnetite_owner* o);
/* Closes the owner and every handle it made (their calls then fail), and
 * frees it. The handles must still be freed. */
MAGNETITE_C_API void magnetite_owner_free(magnetite_owner* o);

/* Handles by name; options NULL: none. A bad name or option makes every call
 * of the handle fail (transient, a caller mistake). */
MAGNETITE_C_API magnetite_error* magnetite_owner_value(magnetite_owner* o, const char* name, size_t name_len,
                                                       const magnetite_collection_options* options,
                                                       magnetite_value** out);
MAGNETITE_C_API magnetite_error* magnetite_owner_map(magnetite_owner* o, const char* name, size_t name_len,
                                                     const magnetite_collection_options* options, magnetite_map** out);
MAGNETITE_C_API magnetite_error* magnetite_owner_deque(magnetite_owner* o, const char* name, size_t name_len,
                                                       const magnetite_collection_options* options,
                                                       magnetite_deque** out);

/* Reads go through the handle's buffered writes. `found` 0: no item. */
MAGNETITE_C_API magnetite_error* magnetite_value_get(magnetite_value* h, magnetite_owned_item* out, int* found);
MAGNETITE_C_API magnetite_error* magnetite_value_set(magnetite_value* h, magnetite_item v);
MAGNETITE_C_API magnetite_error* magnetite_value_clear(magnetite_value* h);
MAGNETITE_C_API magnetite_error* magnetite_value_commit(magnetite_value* h, int64_t timeout_ms);
MAGNETITE_C_API void magnetite_value_rollback(magnetite_value* h);
MAGNETITE_C_API void magnetite_value_close(magnetite_value* h);
MAGNETITE_C_API void magnetite_value_free(magnetite_value* h);

typedef struct magnetite_scan_options {
  int backward; /* 0: in key order; 1: reverse */
  const char* from;
  size_t from_len; /* NULL: none. Start here, inclusive (in scan order) */
  const char* after;
  size_t after_len; /* NULL: none. Or just past this key (paging); not both */
  const char* to;
  size_t to_len; /* NULL: none. Stop before this key (in scan order) */
  const char* prefix;
  size_t prefix_len; /* NULL: none */
  size_t limit;      /* 0: none */
} magnetite_scan_options;

MAGNETITE_C_API magnetite_error* magnetite_map_get(magnetite_map* h, const char* key, size_t key_len,
                                                   magnetite_owned_item* out, int* found);
/* n keys; outs[i] and found[i] aligned with them, all read from one view. */
MAGNETITE_C_API magnetite_error* magnetite_map_get_many(magnetite_map* h, const char* const* keys,
                                                        const size_t* key_lens, size_t n, magnetite_owned_item* outs,
                                                        int* found);
MAGNETITE_C_API magnetite_error* magnetite_map_contains(magnetite_map* h, const char* key, size_t key_len,
                                                        int* contains);
MAGNETITE_C_API magnetite_error* magnetite_map_set(magnetite_map* h, const char* key, size_t key_len, magnetite_item v);
MAGNETITE_C_API magnetite_error* magnetite_map_remove(magnetite_map* h, const char* key, size_t key_len);
MAGNETITE_C_API magnetite_error* magnetite_map_clear(magnetite_map* h);
MAGNETITE_C_API magnetite_error* magnetite_map_is_empty(magnetite_map* h, int* empty);
MAGNETITE_C_API magnetite_error* magnetite_map_size(magnetite_map* h, uint64_t* size);
/* Rows with key and item; options NULL: forward, everything. */
MAGNETITE_C_API magnetite_error* magnetite_map_scan(magnetite_map* h, const magnetite_scan_options* options,
                                                    magnetite_state_cursor** out);
/* Rows with key only. */
MAGNETITE_C_API magnetite_error* magnetite_map_keys(magnetite_map* h, const magnetite_scan_options* options,
                                                    magnetite_state_cursor** out);
MAGNETITE_C_API magnetite_error* magnetite_map_commit(magnetite_map* h, int64_t timeout_ms);
MAGNETITE_C_API void magnetite_map_rollback(magnetite_map* h);
MAGNETITE_C_API void magnetite_map_close(magnetite_map* h);
MAGNETITE_C_API void magnetite_map_free(magnetite_map* h);

MAGNETITE_C_API magnetite_error* magnetite_deque_len(magnetite_deque* h, uint64_t* len); /* an upper bound under TTL */
MAGNETITE_C_API magnetite_error* magnetite_deque_is_empty(magnetite_deque* h, int* empty);
MAGNETITE_C_API magnetite_error* magnetite_deque_get(magnetite_deque* h, uint64_t index, magnetite_owned_item* out,
                                                     int* found);
MAGNETITE_C_API magnetite_error* magnetite_deque_peek_front(magnetite_deque* h, magnetite_owned_item* out, int* found);
MAGNETITE_C_API magnetite_error* magnetite_deque_peek_back(magnetite_deque* h, magnetite_owned_item* out, int* found);
MAGNETITE_C_API magnetite_error* magnetite_deque_push_front(magnetite_deque* h, magnetite_item v);
MAGNETITE_C_API magnetite_error* magnetite_deque_push_back(magnetite_deque* h, magnetite_item v);
MAGNETITE_C_API magnetite_error* magnetite_deque_pop_front(magnetite_deque* h, magnetite_owned_item* out, int* found);
MAGNETITE_C_API magnetite_error* magnetite_deque_pop_back(magnetite_deque* h, magnetite_owned_item* out, int* found);
MAGNETITE_C_API magnetite_error* magnetite_deque_clear(magnetite_deque* h);
/* Rows with item only; backward 1: from the back. */
MAGNETITE_C_API magnetite_error* magnetite_deque_scan(magnetite_deque* h, int backward, magnetite_state_cursor** out);
MAGNETITE_C_API magnetite_error* magnetite_deque_commit(magnetite_deque* h, int64_t timeout_ms);
MAGNETITE_C_API void magnetite_deque_rollback(magnetite_deque* h);
MAGNETITE_C_API void magnetite_deque_close(magnetite_deque* h);
MAGNETITE_C_API void magnetite_deque_free(magnetite_deque* h);

/* The next chunk of at most `max` (>= 1) rows; an empty chunk: exhausted,
 * and so is every later call. The first error closes the cursor and is
 * returned again by every later call. */
MAGNETITE_C_API magnetite_error* magnetite_state_cursor_next(magnetite_state_cursor* c, size_t max,
                                                             magnetite_rows** out);
MAGNETITE_C_API void magnetite_state_cursor_free(magnetite_state_cursor* c);

/* ---- Records and transactions ------------------------------------------- */

/* found 0: no record; else its item and revision. */
MAGNETITE_C_API magnetite_error* magnetite_record_load(magnetite_db* db, const char* ns, size_t ns_len, const char* key,
                                                       size_t key_len, magnetite_owned_item* out, uint64_t* revision,
                                                       int* found);
/* Rows with key, item and revision: records of ns whose key starts with
 * prefix, after start_after (NULL: from the first), at most limit (1..1000). */
MAGNETITE_C_API magnetite_error* magnetite_record_list(magnetite_db* db, const char* ns, size_t ns_len,
                                                       const char* prefix, size_t prefix_len, const char* start_after,
                                                       size_t start_after_len, size_t limit, magnetite_rows** out);

/* A serializable optimistic transaction over records on any shards. */
typedef struct magnetite_txn magnetite_txn;
MAGNETITE_C_API magnetite_error* magnetite_txn_begin(magnetite_db* db, magnetite_txn** out);
MAGNETITE_C_API magnetite_error* magnetite_txn_load(magnetite_txn* t, const char* ns, size_t ns_len, const char* key,
                                                    size_t key_len, magnetite_owned_item* out, uint64_t* revision,
                                                    int* found);
MAGNETITE_C_API magnetite_error* magnetite_txn_put(magnetite_txn* t, const char* ns, size_t ns_len, const char* key,
                                                   size_t key_len, magnetite_item v);
MAGNETITE_C_API magnetite_error* magnetite_txn_del(magnetite_txn* t, const char* ns, size_t ns_len, const char* key,
                                                   size_t key_len);
/* The revision of its writes. A conflict (transient) proves nothing was
 * written; a timeout is ambiguous. The transaction is finished afterwards,
 * whatever the result. */
MAGNETITE_C_API magnetite_error* magnetite_txn_commit(magnetite_txn* t, int64_t timeout_ms, uint64_t* revision);
MAGNETITE_C_API void magnetite_txn_rollback(magnetite_txn* t);
MAGNETITE_C_API void magnetite_txn_free(magnetite_txn* t);

/* ---- Streams ------------------------------------------------------------- */

/* Appends n >= 1 entries at expected_seq (a conflict, naming the stream's
 * next seq, if it has moved); *first_seq gets expected_seq. */
MAGNETITE_C_API magnetite_error* magnetite_stream_append(magnetite_db* db, const char* stream, size_t stream_len,
                                                         const magnetite_item* entries, size_t n, uint64_t expected_seq,
                                                         int64_t ttl_ms, int64_t timeout_ms, uint64_t* first_seq);
/* Rows with item and seq: live entries from from_seq on, at most limit (1..1000). */
MAGNETITE_C_API magnetite_error* magnetite_stream_read(magnetite_db* db, const char* stream, size_t stream_len,
                                                       uint64_t from_seq, size_t limit, magnetite_rows** out);
MAGNETITE_C_API magnetite_error* magnetite_stream_next_seq(magnetite_db* db, const char* stream, size_t stream_len,
                                                           uint64_t* next_seq);

#ifdef __cplusplus
}
#endif

#endif /* MAGNETITE_C_H */
