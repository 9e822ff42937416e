/* store_int.h — the cost store's internals shared by its two halves: the core (sim/cost/store.c:
 * open, schema, runs, points, validation) and the text formats (calibrate/store_io.c: SQL dump
 * and import, CSV and JSON export, CSV import). Not a public API: only those two files and the
 * store tests include it.
 *
 * Responsible for: the schema text (executed on creation, printed in dumps, compared on open),
 * the column lists, SQLite error wording, statement helpers, the validated row readers and
 * writers, and the guard that bounds every connection (limits + instruction budget).
 * Not responsible for: anything a caller of store.h needs; the formats themselves.
 *
 * Invariants: every row reader validates what it read (SQLite type of each column, then
 * store_validate_point / store_validate_meta), so no unvalidated value leaves the store; every
 * connection the store opens (files and the import's in-memory database) has the guard installed
 * before its first statement is prepared.
 */
#ifndef KV_STORE_INT_H
#define KV_STORE_INT_H

#include <sqlite3.h>

#include "sim/cost/store.h"

/* The schema, statement by statement (no trailing ';'). A store file's sqlite_master must hold
 * exactly these texts: changing any of them is a schema change (bump STORE_SCHEMA_VERSION). */
extern const char *const store_schema_sql[];
extern const size_t store_schema_count;

#define STORE_RUN_COLS                                                                             \
    "id, backend, device, host, driver, cuda, git_rev, started_at, finished_at, model, dtype, tp, " \
    "quick, notes, complete"
#define STORE_POINT_COLS "op, model, dtype, tp, p1, p2, p3, n, median_ns, p10_ns, p90_ns"
/* a run's backend rank for choosing a run: measured here (cuda, cpu) first, then imports, spec last */
#define STORE_RANK_SQL(b) "CASE " b " WHEN 'cuda' THEN 0 WHEN 'cpu' THEN 0 WHEN 'spec' THEN 2 ELSE 1 END"
#define STORE_RUN_NCOLS 15
#define STORE_POINT_NCOLS 12 /* with run_id first */
#define STORE_DUMP_MAGIC "-- kvsim cost store dump, schema "

/* Guard budgets, in SQLite VM instructions (one progress callback per STORE_GUARD_STEP). A store
 * call (reset by store_guard_reset) may run STORE_CALL_BUDGET; one statement of a dump being
 * imported STORE_STMT_BUDGET (a literal INSERT needs about a hundred). */
#define STORE_GUARD_STEP 1000
#define STORE_CALL_BUDGET 1000000000LL
#define STORE_STMT_BUDGET 10000000LL

typedef struct StoreGuard {
    int64_t ticks;     /* progress callbacks since the last reset */
    int64_t max_ticks; /* interrupt beyond this */
} StoreGuard;

/* Limits (lengths, depths, no ATTACH, no triggers) and the progress handler on db; g must live
 * as long as db. budget in VM instructions. */
int store_guard_install(sqlite3 *db, StoreGuard *g, int64_t budget, const char *name, KvErr *e);
void store_guard_reset(StoreGuard *g, int64_t budget);
/* The open check every CostStore function starts with; resets the store's guard. */
int store_enter(CostStore *s, KvErr *e);

int store_sql_err(KvErr *e, const char *name, sqlite3 *db, int rc, const char *what);
int store_exec(sqlite3 *db, const char *name, const char *sql, const char *what, KvErr *e);
int store_prep(sqlite3 *db, const char *name, const char *sql, sqlite3_stmt **st, const char *what, KvErr *e);
void store_rollback_quietly(sqlite3 *db);
int store_query_int(sqlite3 *db, const char *name, const char *sql, int has_arg, int64_t arg, int64_t *out,
                    const char *what, KvErr *e);
void store_now_iso(char *buf, size_t cap);
/* Integral doubles (|v| < 2^53) as integers, others %.17g: same value, same text. */
void store_fmt_double(char *buf, size_t cap, double v);

/* Whether db (named name) is a store this build reads: application_id, user_version, exactly our
 * schema objects. create: turn an empty database into one. full: also PRAGMA quick_check. */
int store_schema_check(sqlite3 *db, const char *name, int create, int full, KvErr *e);

int store_backend_ok(const char *b);
int store_validate_meta(const char *name, const StoreRunMeta *m, KvErr *e);
void store_normalize_point(StorePoint *p);
int store_validate_point(const char *name, int64_t run_id, const StorePoint *p, KvErr *e);

/* Row readers: columns in STORE_RUN_COLS order from column c0 / STORE_POINT_COLS order from c0.
 * Both check each column's SQLite type and validate the whole row. */
int store_read_run_row(sqlite3_stmt *st, int c0, const char *name, StoreRunMeta *m, KvErr *e);
int store_read_point_row(sqlite3_stmt *st, int c0, const char *name, int64_t run_id, StorePoint *p, KvErr *e);
int store_get_run_db(sqlite3 *db, const char *name, int64_t run_id, StoreRunMeta *out, KvErr *e);

extern const char store_insert_point_sql[];
/* want_id 0: SQLite chooses. m is validated by the caller. */
int store_insert_run(sqlite3 *db, const char *name, const StoreRunMeta *m, int64_t want_id, int complete, int64_t *id,
                     KvErr *e);
/* Bind and step a prepared store_insert_point_sql, then reset it. p is validated by the caller. */
int store_insert_point(sqlite3 *db, sqlite3_stmt *st, const char *name, int64_t run_id, const StorePoint *p, KvErr *e);

#endif
