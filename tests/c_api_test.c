/* c_api_tests: the C API (<magnetite/c.h>) from a C11 program, every call and
 * its error paths, as a C host would use it. It runs in every build of the
 * suites, the sanitizer builds included: an unfreed buffer or a read past one
 * fails it there.
 *
 * A tiny harness of its own (C has no doctest): each test case is a function;
 * CHECK and the call macros record a failure and go on. It ends with the line
 * scripts/run-tests reads from every suite:
 *   [doctest] test cases: T | P passed | F failed
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "magnetite/c.h"

static const char* current_case = "";
static int case_failed = 0;

#define CHECK(cond)                                                                                   \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) is not true\n", __FILE__, __LINE__, current_case, #cond); \
      case_failed = 1;                                                                                \
    }                                                                                                 \
  } while (0)

/* The call must succeed. */
#define OK(call)                                                                             \
  do {                                                                                       \
    magnetite_error* ok_e_ = (call);                                                         \
    if (ok_e_) {                                                                             \
      fprintf(stderr, "%s:%d: %s: %s failed: %s\n", __FILE__, __LINE__, current_case, #call, \
              magnetite_error_describe(ok_e_));                                              \
      case_failed = 1;                                                                       \
      magnetite_error_free(ok_e_);                                                           \
    }                                                                                        \
  } while (0)

/* The call must fail with this code and category, and a message that
 * contains `part` (NULL: any). */
#define FAILS(call, code, cat, part)                                                                                 \
  do {                                                                                                               \
    magnetite_error* f_e_ = (call);                                                                                  \
    if (!f_e_) {                                                                                                     \
      fprintf(stderr, "%s:%d: %s: %s succeeded; expected %s\n", __FILE__, __LINE__, current_case, #call,             \
              magnetite_code_name(code));                                                                            \
      case_failed = 1;                                                                                               \
    } else {                                                                                                         \
      const char* f_part_ = (part);                                                                                  \
      if (magnetite_error_code(f_e_) != (code) || magnetite_error_category(f_e_) != (cat) ||                         \
          (f_part_ && !strstr(magnetite_error_message(f_e_), f_part_))) {                                            \
        fprintf(stderr, "%s:%d: %s: %s: got %s; expected %s (%s) naming \"%s\"\n", __FILE__, __LINE__, current_case, \
                #call, magnetite_error_describe(f_e_), magnetite_code_name(code), magnetite_category_name(cat),      \
                f_part_ ? f_part_ : "");                                                                             \
        case_failed = 1;                                                                                             \
      }                                                                                                              \
      magnetite_error_free(f_e_);                                                                                    \
    }                                                                                                                \
  } while (0)

#define S(str) (str), strlen(str)

static magnetite_item json(const char* text) {
  magnetite_item i = {MAGNETITE_ITEM_JSON, text, strlen(text)};
  return i;
}

static magnetite_item raw(const char* data, size_t n) {
  magnetite_item i = {MAGNETITE_ITEM_BYTES, data, n};
  return i;
}

/* An owned item equals (kind, text). */
static int item_is(const magnetite_owned_item* it, int kind, const char* text) {
  return it->kind == kind && it->size == strlen(text) && memcmp(it->data, text, it->size) == 0;
}

static int view_is(magnetite_item it, int kind, const char* text) {
  return it.kind == kind && it.size == strlen(text) && memcmp(it.data, text, it.size) == 0;
}

static int bytes_are(const char* p, size_t n, const char* text) { return n == strlen(text) && memcmp(p, text, n) == 0; }

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static char base_dir[64];
static int dirs_made = 0;

/* A new directory under the run's base (removed at the end). */
static void fresh_dir(char* out, size_t n) { snprintf(out, n, "%s/db%d", base_dir, dirs_made++); }

static magnetite_db* open_db(const char* dir, size_t shards) {
  magnetite_options* o = magnetite_options_create();
  magnetite_options_set_shards(o, shards);
  magnetite_options_set_memory_budget(o, 16u << 20);
  magnetite_db* db = NULL;
  OK(magnetite_open(dir, o, &db));
  magnetite_options_free(o);
  return db;
}

/* ---- Errors and the library ------------------------------------------------ */

static void test_errors(void) {
  CHECK(strcmp(magnetite_code_name(MAGNETITE_CONFLICT), "conflict") == 0);
  CHECK(strcmp(magnetite_category_name(MAGNETITE_AMBIGUOUS), "ambiguous") == 0);
  CHECK(strcmp(magnetite_code_name(99), "unknown") == 0);
  CHECK(strlen(magnetite_version()) >= 5);
  magnetite_error_free(NULL);
  magnetite_free(NULL);
  magnetite_owned_item_release(NULL);
  magnetite_close(NULL);
  magnetite_rows_free(NULL);
  CHECK(magnetite_error_code(NULL) == MAGNETITE_OK);

  magnetite_db* db = NULL;
  FAILS(magnetite_open(NULL, NULL, &db), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT,
        "magnetite_open: dir is NULL");
  CHECK(db == NULL);
  magnetite_error* e = magnetite_open("/proc/no-such-place/db", NULL, &db);
  CHECK(e != NULL);
  CHECK(db == NULL);
  if (e) {
    CHECK(magnetite_error_category(e) == MAGNETITE_PERMANENT);
    /* "code (category): message" */
    CHECK(strstr(magnetite_error_describe(e), magnetite_code_name(magnetite_error_code(e))) ==
          magnetite_error_describe(e));
    CHECK(strstr(magnetite_error_describe(e), magnetite_error_message(e)) != NULL);
  }
  magnetite_error_free(e);

  /* A bad option: refused by open, naming it. */
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_options* o = magnetite_options_create();
  magnetite_options_set_memory_budget(o, 1024); /* under 1 MiB a shard */
  FAILS(magnetite_open(dir, o, &db), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "memory_budget");
  magnetite_options_set_memory_budget(o, 0);
  magnetite_options_set_fsync(o, 9, 0);
  FAILS(magnetite_open(dir, o, &db), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "fsync policy 9");
  magnetite_options_set_fsync(o, MAGNETITE_FSYNC_ALWAYS, 0);
  magnetite_options_set_writer_spin(o, 100001);
  FAILS(magnetite_open(dir, o, &db), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "writer_spin");
  CHECK(db == NULL);
  /* No spin at all: a lone writer sleeps at once and still gets its answer. */
  magnetite_options_set_writer_spin(o, 0);
  OK(magnetite_open(dir, o, &db));
  if (db) {
    OK(magnetite_put(db, "spun", 4, "no", 2, 0));
    magnetite_close(db);
    db = NULL;
  }
  magnetite_options_free(o);
  CHECK(db == NULL);
}

/* ---- Plain keys -------------------------------------------------------------- */

static void test_plain_keys(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  CHECK(magnetite_shard_count(db) == 2);

  /* Keys and values are bytes: zeros inside are kept. */
  const char key[] = {'k', 0, 'x'};
  const char value[] = {'v', 0, 0, 'w'};
  OK(magnetite_put(db, key, sizeof key, value, sizeof value, 0));
  char* got = NULL;
  size_t got_len = 0;
  int found = -1;
  OK(magnetite_get(db, key, sizeof key, &got, &got_len, &found));
  CHECK(found == 1 && got_len == sizeof value && memcmp(got, value, sizeof value) == 0);
  magnetite_free(got);
  got = NULL;
  OK(magnetite_get(db, key, 1, &got, &got_len, &found)); /* "k": another key */
  CHECK(found == 0 && got == NULL);
  OK(magnetite_put(db, S("empty"), NULL, 0, 0)); /* the empty value */
  OK(magnetite_get(db, S("empty"), &got, &got_len, &found));
  CHECK(found == 1 && got_len == 0);
  magnetite_free(got);
  FAILS(magnetite_put(db, NULL, 0, S("v"), 0), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "empty");

  OK(magnetite_del(db, key, sizeof key));
  OK(magnetite_get(db, key, sizeof key, &got, &got_len, &found));
  CHECK(found == 0);

  /* Bad input: a clear error, and nothing changes. */
  FAILS(magnetite_put(NULL, S("a"), S("b"), 0), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "db is NULL");
  FAILS(magnetite_put(db, NULL, 3, S("b"), 0), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "key is NULL");
  FAILS(magnetite_put(db, S("a"), S("b"), -1), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "ttl_ms");
  FAILS(magnetite_get(db, S("a"), NULL, &got_len, &found), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "out");
  size_t big = (size_t)64 << 10;
  char* huge = malloc(big);
  memset(huge, 'k', big);
  FAILS(magnetite_put(db, huge, big, S("v"), 0), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "key");
  OK(magnetite_get(db, huge, 16, &got, &got_len, &found));
  CHECK(found == 0);
  free(huge);
  const char state_key[] = {(char)0xFF, (char)0xFF, 'x'}; /* keyed state's space */
  FAILS(magnetite_put(db, state_key, sizeof state_key, S("v"), 0), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT,
        NULL);

  /* Compare and set. */
  int swapped = -1, has_current = -1;
  char* current = NULL;
  size_t current_len = 0;
  OK(magnetite_cas(db, S("c"), NULL, 0, S("one"), 0, &swapped, &current, &current_len, &has_current));
  CHECK(swapped == 1 && has_current == 0 && current == NULL);
  OK(magnetite_cas(db, S("c"), S("two"), S("three"), 0, &swapped, &current, &current_len, &has_current));
  CHECK(swapped == 0 && has_current == 1 && bytes_are(current, current_len, "one"));
  magnetite_free(current);
  current = NULL;
  OK(magnetite_cas(db, S("c"), S("one"), NULL, 0, 0, &swapped, NULL, NULL, NULL)); /* deletes */
  CHECK(swapped == 1);
  OK(magnetite_get(db, S("c"), &got, &got_len, &found));
  CHECK(found == 0);
  FAILS(magnetite_cas(db, S("c"), NULL, 0, S("x"), 0, &swapped, &current, NULL, NULL), MAGNETITE_INVALID_ARGUMENT,
        MAGNETITE_PERMANENT, "all given or all NULL");

  /* A TTL: gone once it passes (polled: the API reads the wall clock). */
  OK(magnetite_put(db, S("session"), S("alice"), 30));
  long long until = now_ms() + 10000;
  do {
    OK(magnetite_get(db, S("session"), &got, &got_len, &found));
    if (found) magnetite_free(got);
    if (found) sleep_ms(5);
  } while (found && now_ms() < until);
  CHECK(found == 0);

  /* A second open of a directory in use is busy; the first goes on. */
  magnetite_db* second = NULL;
  FAILS(magnetite_open(dir, NULL, &second), MAGNETITE_BUSY, MAGNETITE_TRANSIENT, dir);
  CHECK(second == NULL);
  OK(magnetite_put(db, S("still"), S("here"), 0));

  char root[33] = {0};
  OK(magnetite_commit(db, root));
  CHECK(strlen(root) == 32);
  magnetite_close(db);

  /* What was acknowledged is there after a reopen. */
  db = open_db(dir, 0);
  if (!db) return;
  OK(magnetite_get(db, S("still"), &got, &got_len, &found));
  CHECK(found == 1 && bytes_are(got, got_len, "here"));
  magnetite_free(got);
  magnetite_close(db);
}

static void test_scan(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 3);
  if (!db) return;
  char k[16], v[16];
  for (int i = 0; i < 200; ++i) {
    snprintf(k, sizeof k, "k%03d", i);
    snprintf(v, sizeof v, "v%d", i);
    OK(magnetite_put(db, k, strlen(k), v, strlen(v), 0));
  }
  magnetite_cursor* c = NULL;
  OK(magnetite_scan(db, S("k050"), S("k150"), &c));
  int n = 0, in_order = 1, has = 0;
  const char *key, *value;
  size_t key_len, value_len;
  char prev[16] = "";
  for (;;) {
    OK(magnetite_cursor_next(c, &key, &key_len, &value, &value_len, &has));
    if (!has) break;
    char kk[16];
    snprintf(kk, sizeof kk, "%.*s", (int)key_len, key);
    if (strcmp(kk, prev) <= 0) in_order = 0;
    strcpy(prev, kk);
    ++n;
  }
  CHECK(n == 100 && in_order);
  CHECK(strcmp(prev, "k149") == 0);
  OK(magnetite_cursor_next(c, &key, &key_len, &value, &value_len, &has)); /* exhausted stays exhausted */
  CHECK(has == 0);
  magnetite_cursor_free(c);
  /* to NULL: no upper bound. */
  OK(magnetite_scan(db, S("k190"), NULL, 0, &c));
  n = 0;
  for (;;) {
    OK(magnetite_cursor_next(c, &key, &key_len, &value, &value_len, &has));
    if (!has) break;
    ++n;
  }
  CHECK(n == 10);
  magnetite_cursor_free(c);
  FAILS(magnetite_cursor_next(NULL, &key, &key_len, &value, &value_len, &has), MAGNETITE_INVALID_ARGUMENT,
        MAGNETITE_PERMANENT, "cursor is NULL");
  magnetite_cursor_free(NULL);
  magnetite_close(db);
}

/* Objects made from a database keep it open past magnetite_close, in any
 * order of frees; the last one closes it (and frees its directory's lock). */
static void test_lifetimes(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  magnetite_owner* o = NULL;
  magnetite_value* v = NULL;
  magnetite_txn* t = NULL;
  magnetite_cursor* c = NULL;
  OK(magnetite_owner_open(db, S("ns"), S("owner"), &o));
  OK(magnetite_owner_value(o, S("v"), NULL, &v));
  OK(magnetite_txn_begin(db, &t));
  OK(magnetite_put(db, S("k"), S("v"), 0));
  OK(magnetite_scan(db, NULL, 0, NULL, 0, &c));
  magnetite_close(db); /* first: the others still work */
  OK(magnetite_value_set(v, json("7")));
  OK(magnetite_value_commit(v, 0));
  OK(magnetite_txn_put(t, S("r"), S("k"), json("1")));
  OK(magnetite_txn_commit(t, 0, NULL));
  const char *key, *value;
  size_t kl, vl;
  int has = 0;
  OK(magnetite_cursor_next(c, &key, &kl, &value, &vl, &has));
  CHECK(has == 1 && bytes_are(key, kl, "k"));
  magnetite_db* again = NULL;
  FAILS(magnetite_open(dir, NULL, &again), MAGNETITE_BUSY, MAGNETITE_TRANSIENT, NULL); /* still open */
  magnetite_owner_free(o); /* the handle outlives its owner, closed */
  magnetite_error* e = magnetite_value_set(v, json("8"));
  CHECK(e != NULL);
  magnetite_error_free(e);
  magnetite_txn_free(t);
  magnetite_cursor_free(c);
  magnetite_value_free(v); /* the last: the database closes */
  again = open_db(dir, 0);
  if (!again) return;
  magnetite_owned_item it = {MAGNETITE_ITEM_JSON, NULL, 0};
  uint64_t rev = 0;
  int found = 0;
  OK(magnetite_record_load(again, S("r"), S("k"), &it, &rev, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "1"));
  magnetite_owned_item_release(&it);
  magnetite_owner* o2 = NULL;
  magnetite_value* v2 = NULL;
  OK(magnetite_owner_open(again, S("ns"), S("owner"), &o2));
  OK(magnetite_owner_value(o2, S("v"), NULL, &v2));
  OK(magnetite_value_get(v2, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "7"));
  magnetite_owned_item_release(&it);
  magnetite_value_free(v2);
  magnetite_owner_free(o2);
  magnetite_close(again);
}

/* ---- Keyed state --------------------------------------------------------- */

static void test_value_state(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  magnetite_owner* o = NULL;
  OK(magnetite_owner_open(db, S("orders"), S("customer-7"), &o));
  magnetite_value* v = NULL;
  OK(magnetite_owner_value(o, S("total"), NULL, &v));
  magnetite_owned_item it = {MAGNETITE_ITEM_JSON, NULL, 0};
  int found = -1;
  OK(magnetite_value_get(v, &it, &found));
  CHECK(found == 0);
  /* Buffered writes read back before the commit. */
  OK(magnetite_value_set(v, json("{\"n\": 3, \"tags\": [\"a\", \"b\"]}")));
  OK(magnetite_value_get(v, &it, &found));
  CHECK(found == 1 && item_is(&it, MAGNETITE_ITEM_JSON, "{\"n\":3,\"tags\":[\"a\",\"b\"]}"));
  magnetite_owned_item_release(&it);
  CHECK(it.data == NULL);
  OK(magnetite_value_commit(v, 0));
  /* A rollback drops what was buffered since the commit. */
  OK(magnetite_value_set(v, json("42")));
  magnetite_value_rollback(v);
  OK(magnetite_value_get(v, &it, &found));
  CHECK(found == 1 && item_is(&it, MAGNETITE_ITEM_JSON, "{\"n\":3,\"tags\":[\"a\",\"b\"]}"));
  magnetite_owned_item_release(&it);

  /* A JSON null is refused, transient, naming the verb that deletes; a bad
   * document, a bad kind, NULL data: transient caller mistakes. */
  FAILS(magnetite_value_set(v, json("null")), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "clear");
  FAILS(magnetite_value_set(v, json("{\"n\": ")), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "not a JSON");
  magnetite_item bad = {7, "x", 1};
  FAILS(magnetite_value_set(v, bad), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "kind");
  magnetite_item nulldata = {MAGNETITE_ITEM_BYTES, NULL, 3};
  FAILS(magnetite_value_set(v, nulldata), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "NULL");
  FAILS(magnetite_value_set(v, json("\"\xff\xfe\"")), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, NULL);

  /* Raw bytes round trip as bytes. */
  const char blob[] = {1, 0, 2, (char)0xFF};
  OK(magnetite_value_set(v, raw(blob, sizeof blob)));
  OK(magnetite_value_commit(v, 1000));
  OK(magnetite_value_get(v, &it, &found));
  CHECK(found && it.kind == MAGNETITE_ITEM_BYTES && it.size == sizeof blob && memcmp(it.data, blob, it.size) == 0);
  magnetite_owned_item_release(&it);

  /* Another owner_state sees the commit. */
  magnetite_owner* o2 = NULL;
  OK(magnetite_owner_open(db, S("orders"), S("customer-7"), &o2));
  magnetite_value* v2 = NULL;
  OK(magnetite_owner_value(o2, S("total"), NULL, &v2));
  OK(magnetite_value_get(v2, &it, &found));
  CHECK(found && it.kind == MAGNETITE_ITEM_BYTES && it.size == sizeof blob);
  magnetite_owned_item_release(&it);

  /* clear deletes on commit. */
  OK(magnetite_value_clear(v));
  OK(magnetite_value_commit(v, 0));
  OK(magnetite_value_get(v2, &it, &found));
  CHECK(found == 0);

  /* A closed handle refuses every call; so do the handles of a freed owner. */
  magnetite_value_close(v);
  magnetite_error* e = magnetite_value_get(v, &it, &found);
  CHECK(e != NULL);
  magnetite_error_free(e);
  magnetite_value_free(v);
  magnetite_owner_free(o2);
  e = magnetite_value_set(v2, json("1"));
  CHECK(e != NULL);
  magnetite_error_free(e);
  magnetite_value_free(v2);
  magnetite_owner_free(o);
  FAILS(magnetite_value_get(NULL, &it, &found), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_PERMANENT, "handle is NULL");
  magnetite_close(db);
}

/* Pulls a whole state cursor in chunks of `chunk`; rows appended to keys /
 * texts as "key=item" strings joined with ','. */
static int pull_all(magnetite_state_cursor* c, size_t chunk, char* out, size_t out_size) {
  out[0] = 0;
  int rows = 0;
  for (;;) {
    magnetite_rows* r = NULL;
    magnetite_error* e = magnetite_state_cursor_next(c, chunk, &r);
    if (e) {
      fprintf(stderr, "%s: pull: %s\n", current_case, magnetite_error_describe(e));
      magnetite_error_free(e);
      case_failed = 1;
      return -1;
    }
    size_t n = magnetite_rows_count(r);
    CHECK(n <= chunk);
    for (size_t i = 0; i < n; ++i) {
      const char* key;
      size_t key_len;
      magnetite_item it;
      uint64_t number;
      magnetite_rows_get(r, i, &key, &key_len, &it, &number);
      char piece[128];
      snprintf(piece, sizeof piece, "%s%.*s=%.*s", out[0] ? "," : "", (int)key_len, key, (int)it.size,
               it.data ? it.data : "");
      strncat(out, piece, out_size - strlen(out) - 1);
      ++rows;
    }
    magnetite_rows_free(r);
    if (n == 0) break;
  }
  /* Exhausted stays exhausted. */
  magnetite_rows* r = NULL;
  OK(magnetite_state_cursor_next(c, chunk, &r));
  CHECK(magnetite_rows_count(r) == 0);
  magnetite_rows_free(r);
  return rows;
}

static void test_map_state(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  magnetite_owner* o = NULL;
  OK(magnetite_owner_open(db, S("ns"), S("owner"), &o));
  magnetite_map* m = NULL;
  OK(magnetite_owner_map(o, S("m"), NULL, &m));
  const char* keys[] = {"b", "a", "d", "c", "e"};
  for (int i = 0; i < 5; ++i) {
    char v[8];
    snprintf(v, sizeof v, "%d", i);
    OK(magnetite_map_set(m, keys[i], 1, json(v)));
  }
  int empty = -1, contains = -1, found = -1;
  uint64_t size = 0;
  OK(magnetite_map_is_empty(m, &empty));
  CHECK(empty == 0);
  OK(magnetite_map_size(m, &size));
  CHECK(size == 5);
  OK(magnetite_map_contains(m, S("d"), &contains));
  CHECK(contains == 1);
  OK(magnetite_map_contains(m, S("z"), &contains));
  CHECK(contains == 0);
  OK(magnetite_map_commit(m, 0));
  OK(magnetite_map_remove(m, S("e")));
  magnetite_owned_item it = {MAGNETITE_ITEM_JSON, NULL, 0};
  OK(magnetite_map_get(m, S("e"), &it, &found));
  CHECK(found == 0);
  OK(magnetite_map_get(m, S("c"), &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "3"));
  magnetite_owned_item_release(&it);

  /* get_many: aligned with the keys. */
  const char* many[] = {"a", "zz", "d"};
  size_t lens[] = {1, 2, 1};
  magnetite_owned_item outs[3] = {{0, NULL, 0}, {0, NULL, 0}, {0, NULL, 0}};
  int founds[3] = {-1, -1, -1};
  OK(magnetite_map_get_many(m, many, lens, 3, outs, founds));
  CHECK(founds[0] == 1 && founds[1] == 0 && founds[2] == 1);
  CHECK(item_is(&outs[0], MAGNETITE_ITEM_JSON, "1") && item_is(&outs[2], MAGNETITE_ITEM_JSON, "2"));
  CHECK(outs[1].data == NULL);
  for (int i = 0; i < 3; ++i) magnetite_owned_item_release(&outs[i]);

  /* Scans both ways, with bounds, a prefix, paging, a limit; the buffered
   * removal of "e" shows. */
  char text[512];
  magnetite_state_cursor* c = NULL;
  OK(magnetite_map_scan(m, NULL, &c));
  CHECK(pull_all(c, 2, text, sizeof text) == 4);
  CHECK(strcmp(text, "a=1,b=0,c=3,d=2") == 0);
  magnetite_state_cursor_free(c);
  magnetite_scan_options so;
  memset(&so, 0, sizeof so);
  so.backward = 1;
  OK(magnetite_map_scan(m, &so, &c));
  pull_all(c, 3, text, sizeof text);
  CHECK(strcmp(text, "d=2,c=3,b=0,a=1") == 0);
  magnetite_state_cursor_free(c);
  so.backward = 0;
  so.after = "a";
  so.after_len = 1;
  so.limit = 2;
  OK(magnetite_map_keys(m, &so, &c));
  pull_all(c, 10, text, sizeof text);
  CHECK(strcmp(text, "b=,c=") == 0);
  magnetite_state_cursor_free(c);
  memset(&so, 0, sizeof so);
  so.from = "b";
  so.from_len = 1;
  so.after = "a";
  so.after_len = 1;
  c = NULL;
  FAILS(magnetite_map_scan(m, &so, &c), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, NULL);
  CHECK(c == NULL);
  memset(&so, 0, sizeof so);
  so.prefix = NULL;
  so.prefix_len = 4;
  FAILS(magnetite_map_scan(m, &so, &c), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "NULL");

  /* Rollback brings "e" back; clear empties it at the commit. */
  magnetite_map_rollback(m);
  OK(magnetite_map_size(m, &size));
  CHECK(size == 5);
  OK(magnetite_map_clear(m));
  OK(magnetite_map_commit(m, 0));
  OK(magnetite_map_is_empty(m, &empty));
  CHECK(empty == 1);
  FAILS(magnetite_map_set(m, S("k"), json("null")), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "remove");
  magnetite_map_close(m);
  FAILS(magnetite_map_size(m, &size), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "closed");
  magnetite_map_free(m);
  magnetite_owner_free(o);
  magnetite_close(db);
}

static void test_deque_state(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  magnetite_owner* o = NULL;
  OK(magnetite_owner_open(db, S("ns"), S("owner"), &o));
  magnetite_collection_options co = {0, 3}; /* capacity 3 */
  magnetite_deque* d = NULL;
  OK(magnetite_owner_deque(o, S("recent"), &co, &d));
  OK(magnetite_deque_push_back(d, json("1")));
  OK(magnetite_deque_push_back(d, json("2")));
  OK(magnetite_deque_push_front(d, json("0")));
  OK(magnetite_deque_push_back(d, json("3"))); /* at capacity: evicts 0 from the front */
  uint64_t len = 0;
  OK(magnetite_deque_len(d, &len));
  CHECK(len == 3);
  magnetite_owned_item it = {MAGNETITE_ITEM_JSON, NULL, 0};
  int found = -1, empty = -1;
  OK(magnetite_deque_peek_front(d, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "1"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_peek_back(d, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "3"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_get(d, 1, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "2"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_get(d, 3, &it, &found));
  CHECK(found == 0);
  OK(magnetite_deque_commit(d, 0));

  char text[256];
  magnetite_state_cursor* c = NULL;
  OK(magnetite_deque_scan(d, 0, &c));
  CHECK(pull_all(c, 2, text, sizeof text) == 3);
  CHECK(strcmp(text, "=1,=2,=3") == 0);
  magnetite_state_cursor_free(c);
  OK(magnetite_deque_scan(d, 1, &c));
  pull_all(c, 1, text, sizeof text);
  CHECK(strcmp(text, "=3,=2,=1") == 0);
  magnetite_state_cursor_free(c);

  OK(magnetite_deque_pop_front(d, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "1"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_pop_back(d, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "3"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_commit(d, 0));
  OK(magnetite_deque_clear(d));
  OK(magnetite_deque_is_empty(d, &empty));
  CHECK(empty == 1);
  magnetite_deque_rollback(d);
  OK(magnetite_deque_len(d, &len));
  CHECK(len == 1);
  OK(magnetite_deque_pop_back(d, &it, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "2"));
  magnetite_owned_item_release(&it);
  OK(magnetite_deque_pop_back(d, &it, &found));
  CHECK(found == 0);
  magnetite_deque_free(d);

  /* A TTL per item: gone once it passes. */
  magnetite_collection_options ttl = {40, 0};
  OK(magnetite_owner_deque(o, S("short"), &ttl, &d));
  OK(magnetite_deque_push_back(d, json("\"soon gone\"")));
  OK(magnetite_owner_commit(o, 0)); /* the owner commits every handle */
  OK(magnetite_deque_peek_front(d, &it, &found));
  CHECK(found == 1);
  magnetite_owned_item_release(&it);
  long long until = now_ms() + 10000;
  do {
    sleep_ms(5);
    OK(magnetite_deque_peek_front(d, &it, &found));
    magnetite_owned_item_release(&it);
  } while (found && now_ms() < until);
  CHECK(found == 0);
  magnetite_deque_free(d);

  /* A capacity of 0 on a deque, or one on a map, is a caller mistake at every call. */
  magnetite_map* m = NULL;
  magnetite_collection_options cap = {0, 5};
  OK(magnetite_owner_map(o, S("m"), &cap, &m));
  int contains = 0;
  FAILS(magnetite_map_contains(m, S("k"), &contains), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT, "capacity");
  magnetite_map_free(m);
  magnetite_owner_free(o);
  magnetite_close(db);
}

/* ---- Records and transactions ------------------------------------------- */

static void test_records(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  magnetite_owned_item it = {MAGNETITE_ITEM_JSON, NULL, 0};
  uint64_t rev = 0, rev2 = 0, committed = 0;
  int found = -1;
  OK(magnetite_record_load(db, S("accounts"), S("alice"), &it, &rev, &found));
  CHECK(found == 0);

  magnetite_txn* t = NULL;
  OK(magnetite_txn_begin(db, &t));
  OK(magnetite_txn_load(t, S("accounts"), S("alice"), &it, &rev, &found));
  CHECK(found == 0);
  OK(magnetite_txn_put(t, S("accounts"), S("alice"), json("{\"balance\": 10}")));
  OK(magnetite_txn_put(t, S("accounts"), S("bob"), json("{\"balance\": 5}")));
  OK(magnetite_txn_load(t, S("accounts"), S("alice"), &it, &rev, &found)); /* its own write */
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "{\"balance\":10}") && rev == 0);
  magnetite_owned_item_release(&it);
  OK(magnetite_txn_commit(t, 5000, &committed));
  CHECK(committed > 0);
  /* Finished: it refuses further calls. */
  FAILS(magnetite_txn_put(t, S("accounts"), S("carol"), json("1")), MAGNETITE_INVALID_ARGUMENT, MAGNETITE_TRANSIENT,
        NULL);
  magnetite_txn_free(t);
  OK(magnetite_record_load(db, S("accounts"), S("alice"), &it, &rev, &found));
  CHECK(found && rev == committed && item_is(&it, MAGNETITE_ITEM_JSON, "{\"balance\":10}"));
  magnetite_owned_item_release(&it);

  /* A conflict: two transactions read alice; the second commit is refused,
   * transient, and writes nothing. */
  magnetite_txn *a = NULL, *b = NULL;
  OK(magnetite_txn_begin(db, &a));
  OK(magnetite_txn_begin(db, &b));
  OK(magnetite_txn_load(a, S("accounts"), S("alice"), &it, &rev, &found));
  magnetite_owned_item_release(&it);
  OK(magnetite_txn_load(b, S("accounts"), S("alice"), &it, &rev2, &found));
  magnetite_owned_item_release(&it);
  OK(magnetite_txn_put(a, S("accounts"), S("alice"), json("{\"balance\": 11}")));
  OK(magnetite_txn_put(b, S("accounts"), S("alice"), json("{\"balance\": 99}")));
  OK(magnetite_txn_commit(a, 0, &committed));
  FAILS(magnetite_txn_commit(b, 0, NULL), MAGNETITE_CONFLICT, MAGNETITE_TRANSIENT, NULL);
  magnetite_txn_free(a);
  magnetite_txn_free(b);
  OK(magnetite_record_load(db, S("accounts"), S("alice"), &it, &rev, &found));
  CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "{\"balance\":11}"));
  magnetite_owned_item_release(&it);

  /* A rolled back transaction writes nothing; a delete. */
  OK(magnetite_txn_begin(db, &t));
  OK(magnetite_txn_del(t, S("accounts"), S("bob")));
  magnetite_txn_rollback(t);
  magnetite_txn_free(t);
  OK(magnetite_record_load(db, S("accounts"), S("bob"), &it, &rev, &found));
  CHECK(found == 1);
  magnetite_owned_item_release(&it);
  OK(magnetite_txn_begin(db, &t));
  OK(magnetite_txn_del(t, S("accounts"), S("bob")));
  OK(magnetite_txn_commit(t, 0, NULL));
  magnetite_txn_free(t);
  OK(magnetite_record_load(db, S("accounts"), S("bob"), &it, &rev, &found));
  CHECK(found == 0);

  /* A transaction across namespaces (and so, here, shards). */
  OK(magnetite_txn_begin(db, &t));
  char ns[16];
  for (int i = 0; i < 6; ++i) {
    snprintf(ns, sizeof ns, "ledger-%d", i);
    OK(magnetite_txn_put(t, ns, strlen(ns), S("entry"), json("[1, 2]")));
  }
  OK(magnetite_txn_commit(t, 5000, &committed));
  magnetite_txn_free(t);
  for (int i = 0; i < 6; ++i) {
    snprintf(ns, sizeof ns, "ledger-%d", i);
    OK(magnetite_record_load(db, ns, strlen(ns), S("entry"), &it, &rev, &found));
    CHECK(found && item_is(&it, MAGNETITE_ITEM_JSON, "[1,2]"));
    magnetite_owned_item_release(&it);
  }

  /* list: a prefix, pages, the cursor to the next page. */
  OK(magnetite_txn_begin(db, &t));
  char key[16];
  for (int i = 0; i < 5; ++i) {
    snprintf(key, sizeof key, "item-%d", i);
    OK(magnetite_txn_put(t, S("catalog"), key, strlen(key), json("true")));
  }
  OK(magnetite_txn_put(t, S("catalog"), S("other"), json("false")));
  OK(magnetite_txn_commit(t, 0, NULL));
  magnetite_txn_free(t);
  magnetite_rows* page = NULL;
  OK(magnetite_record_list(db, S("catalog"), S("item-"), NULL, 0, 2, &page));
  CHECK(magnetite_rows_count(page) == 2);
  const char* next = NULL;
  size_t next_len = 0;
  CHECK(magnetite_rows_next(page, &next, &next_len) == 1);
  char after[32];
  snprintf(after, sizeof after, "%.*s", (int)next_len, next);
  CHECK(strcmp(after, "item-1") == 0);
  const char* k;
  size_t kl;
  magnetite_item view;
  uint64_t number = 0;
  magnetite_rows_get(page, 0, &k, &kl, &view, &number);
  CHECK(bytes_are(k, kl, "item-0") && view_is(view, MAGNETITE_ITEM_JSON, "true") && number > 0);
  magnetite_rows_free(page);
  OK(magnetite_record_list(db, S("catalog"), S("item-"), after, strlen(after), 10, &page));
  CHECK(magnetite_rows_count(page) == 3);
  CHECK(magnetite_rows_next(page, &next, &next_len) == 0);
  magnetite_rows_free(page);
  page = NULL;
  FAILS(magnetite_record_list(db, S("catalog"), NULL, 0, NULL, 0, 1001, &page), MAGNETITE_INVALID_ARGUMENT,
        MAGNETITE_TRANSIENT, NULL);
  CHECK(page == NULL);
  magnetite_close(db);
}

/* ---- Streams -------------------------------------------------------------- */

static void test_streams(void) {
  char dir[96];
  fresh_dir(dir, sizeof dir);
  magnetite_db* db = open_db(dir, 2);
  if (!db) return;
  uint64_t next = 99, first = 99;
  OK(magnetite_stream_next_seq(db, S("events"), &next));
  CHECK(next == 0);
  magnetite_item batch[3] = {json("{\"e\": \"created\"}"), raw("\x00\x01", 2), json("\"shipped\"")};
  OK(magnetite_stream_append(db, S("events"), batch, 3, 0, 0, 0, &first));
  CHECK(first == 0);
  /* The same expected seq again: a conflict naming where the stream is. */
  FAILS(magnetite_stream_append(db, S("events"), batch, 1, 0, 0, 0, &first), MAGNETITE_CONFLICT, MAGNETITE_TRANSIENT,
        "3");
  OK(magnetite_stream_append(db, S("events"), batch + 2, 1, 3, 0, 1000, &first));
  CHECK(first == 3);
  OK(magnetite_stream_next_seq(db, S("events"), &next));
  CHECK(next == 4);
  magnetite_rows* r = NULL;
  OK(magnetite_stream_read(db, S("events"), 1, 2, &r));
  CHECK(magnetite_rows_count(r) == 2);
  magnetite_item view;
  uint64_t seq = 0;
  magnetite_rows_get(r, 0, NULL, NULL, &view, &seq);
  CHECK(seq == 1 && view.kind == MAGNETITE_ITEM_BYTES && view.size == 2 && memcmp(view.data, "\x00\x01", 2) == 0);
  magnetite_rows_get(r, 1, NULL, NULL, &view, &seq);
  CHECK(seq == 2 && view_is(view, MAGNETITE_ITEM_JSON, "\"shipped\""));
  magnetite_rows_get(r, 5, NULL, NULL, &view, &seq); /* past the end: nothing written */
  CHECK(seq == 2);
  magnetite_rows_free(r);
  FAILS(magnetite_stream_append(db, S("events"), batch, 0, 4, 0, 0, &first), MAGNETITE_INVALID_ARGUMENT,
        MAGNETITE_TRANSIENT, NULL);
  magnetite_item null_entry = json("null");
  FAILS(magnetite_stream_append(db, S("events"), &null_entry, 1, 4, 0, 0, &first), MAGNETITE_INVALID_ARGUMENT,
        MAGNETITE_TRANSIENT, NULL);
  OK(magnetite_stream_next_seq(db, S("events"), &next));
  CHECK(next == 4); /* nothing written by the refusals */
  magnetite_close(db);
}

/* ---- The harness -------------------------------------------------------- */

static int remove_entry(const char* path, const struct stat* st, int flag, struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

int main(void) {
  struct {
    const char* name;
    void (*fn)(void);
  } cases[] = {
      {"errors and the library", test_errors},
      {"plain keys", test_plain_keys},
      {"range scans", test_scan},
      {"lifetimes", test_lifetimes},
      {"keyed state: value", test_value_state},
      {"keyed state: map", test_map_state},
      {"keyed state: deque", test_deque_state},
      {"records and transactions", test_records},
      {"streams", test_streams},
  };
  strcpy(base_dir, "/tmp/magnetite-c-api-XXXXXX");
  if (!mkdtemp(base_dir)) {
    perror("mkdtemp");
    return 1;
  }
  int passed = 0, failed = 0;
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; ++i) {
    current_case = cases[i].name;
    case_failed = 0;
    cases[i].fn();
    if (case_failed) {
      ++failed;
      fprintf(stderr, "c_api_tests: FAILED: %s\n", cases[i].name);
    } else {
      ++passed;
    }
  }
  nftw(base_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  /* The summary line scripts/run-tests reads from every suite. */
  printf("[doctest] test cases: %d | %d passed | %d failed |\n", n, passed, failed);
  return failed ? 1 : 0;
}
