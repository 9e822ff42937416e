/* store.c — the SQLite cost store's core; see store.h for the schema and the API contract.
 *
 * Responsible for: opening (and creating) a store file and refusing anything that is not one
 * (other application_id, newer user_version, not SQLite, any schema object that is not exactly
 * ours, failing PRAGMA quick_check); bounding every connection (store_guard_install: length and
 * depth limits, no ATTACH, an instruction budget per call); validating points and rows; writing a
 * run in one transaction. Reading runs and points back and choosing the run to read for a key
 * (store_pick_run) are store_read.c's. These two are what kvsim needs to read a store.
 * Not responsible for: the text formats (calibrate/store_io.c: SQL dump and import, CSV, JSON),
 * what the numbers mean (cost.c interpolates them, spec.c and the probes produce them) or any
 * printing (store_cmds.c is the CLI face of the store).
 *
 * Storage decisions:
 *   - op is stored as its name (ops.h cost_op_name), so reordering the enum never reinterprets
 *     stored points; a name this build does not know is an error when reading points.
 *   - IO ops (cost_op_is_io) are normalised to model = '' and tp = 1 on the way in; their dtype is
 *     kept as given, and store_pick_run ignores dtype for them (bytes do not depend on it). The
 *     newest_run view reports dtype '' for IO ops accordingly.
 *   - "Newest" is the latest started_at (ISO 8601 UTC, so text order is time order), ties broken by
 *     the higher id. Backend rank: cuda, cpu (measured here) < anything else ("import", "measured":
 *     public profiles imported by kvcal import-profile) < spec.
 *   - No WAL: a store is one file (it is committed to repositories), and the rollback journal
 *     gives the crash guarantee: a run's transaction that never committed is rolled back by the
 *     next opener (hot journal), so an interrupted kvcal leaves no partial run. A read-only
 *     opener that finds a hot journal lets SQLite roll it back through a short read-write open
 *     first (recovery only; nothing of ours is written).
 *   - A store file is untrusted input: its schema objects are compared with ours by their SQL
 *     text (sqlite_master), so a view, trigger or extra object planted in a file never runs; the
 *     guard bounds what is left (huge rows, deep expressions) and every call's instruction count.
 *
 * Costs: store_open runs PRAGMA quick_check, O(file size) (milliseconds for stores of thousands
 * of points); add_point is one insert into the UNIQUE index, O(log points); pick_run visits the
 * device's complete runs and probes that index once per run; reading validates each row, O(1).
 *
 * Invariants:
 *   - run.complete = 1 only for runs whose end_run committed (or imported as complete);
 *   - every point satisfies store_validate_point (known op, unused parameters 0, n >= 1, finite
 *     times with 0 <= p10 <= median <= p90), on the way in (add_point, imports) and on the way out
 *     (every reader, so a store edited by hand is refused, naming file, run, op and field);
 *   - s->in_run <=> a BEGIN IMMEDIATE transaction is open for run s->run_id on s->db;
 *   - s->readonly => the connection was opened SQLITE_OPEN_READONLY and the write calls refuse;
 *   - every failing function leaves a message naming the file (or the import's origin) in the
 *     KvErr, with SQLite's own message when SQLite failed.
 */
#include "sim/cost/store.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sim/cost/store_int.h"

#define STORE_BUSY_TIMEOUT_MS 10000

/* ---------------------------------------------------------------------------------------------
 * Schema. These strings are executed (creation), printed (dump) and compared with a file's
 * sqlite_master (open), so a dump always carries the schema of the build that wrote it.
 * STORE_IO_OPS_SQL must list exactly the ops for which cost_op_is_io() is true (tested by
 * store_view_io_ops_match_ops_table).
 * ------------------------------------------------------------------------------------------- */
#define STORE_IO_OPS_SQL "('h2d', 'd2h', 'h2d_bidir', 'd2h_bidir', 'ssd_read', 'ssd_write', 'net')"

const char *const store_schema_sql[] = {
    "CREATE TABLE run(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  backend TEXT NOT NULL,\n"
    "  device TEXT NOT NULL,\n"
    "  host TEXT NOT NULL,\n"
    "  driver TEXT NOT NULL,\n"
    "  cuda TEXT NOT NULL,\n"
    "  git_rev TEXT NOT NULL,\n"
    "  started_at TEXT NOT NULL,\n"
    "  finished_at TEXT NOT NULL,\n"
    "  model TEXT NOT NULL,\n"
    "  dtype TEXT NOT NULL,\n"
    "  tp INTEGER NOT NULL,\n"
    "  quick INTEGER NOT NULL,\n"
    "  notes TEXT NOT NULL,\n"
    "  complete INTEGER NOT NULL DEFAULT 0\n"
    ")",
    "CREATE TABLE point(\n"
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL,\n"
    "  model TEXT NOT NULL,\n"
    "  dtype TEXT NOT NULL,\n"
    "  tp INTEGER NOT NULL,\n"
    "  p1 INTEGER NOT NULL,\n"
    "  p2 INTEGER NOT NULL,\n"
    "  p3 INTEGER NOT NULL,\n"
    "  n INTEGER NOT NULL,\n"
    "  median_ns REAL NOT NULL,\n"
    "  p10_ns REAL NOT NULL,\n"
    "  p90_ns REAL NOT NULL,\n"
    "  UNIQUE(run_id, op, model, dtype, tp, p1, p2, p3)\n"
    ")",
    "CREATE VIEW newest_run AS\n"
    "SELECT device, model, dtype, tp, op, run_id FROM (\n"
    "  SELECT r.device AS device, k.model AS model, k.dtype AS dtype, k.tp AS tp, k.op AS op,\n"
    "         r.id AS run_id,\n"
    "         row_number() OVER (PARTITION BY r.device, k.model, k.dtype, k.tp, k.op\n"
    "                            ORDER BY " STORE_RANK_SQL("r.backend") ",\n"
    "                                     r.started_at DESC, r.id DESC) AS rank_in_key\n"
    "  FROM run AS r\n"
    "  JOIN (SELECT DISTINCT run_id, op, model, tp,\n"
    "               CASE WHEN op IN " STORE_IO_OPS_SQL " THEN '' ELSE dtype END AS dtype\n"
    "        FROM point) AS k ON k.run_id = r.id\n"
    "  WHERE r.complete = 1)\n"
    "WHERE rank_in_key = 1",
};
const size_t store_schema_count = KV_ARRAY_LEN(store_schema_sql);

/* The objects of a store, as sqlite_master lists them; sql NULL: an automatic index (no text). */
static const struct {
    const char *type, *name, *tbl;
    int schema; /* index into store_schema_sql, -1: none */
} k_objects[] = {
    {"table", "run", "run", 0},
    {"table", "point", "point", 1},
    {"index", "sqlite_autoindex_point_1", "point", -1},
    {"view", "newest_run", "newest_run", 2},
};

/* ---------------------------------------------------------------------------------------------
 * Error and statement helpers
 * ------------------------------------------------------------------------------------------- */

/* A SQLite failure as a message: names the file, says what was being done, keeps SQLite's text.
 * "not a database" and "corrupt" are worded for the user, since they are what people hit; an
 * interrupt is the guard's budget running out. */
int store_sql_err(KvErr *e, const char *name, sqlite3 *db, int rc, const char *what)
{
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
        return kv_err(e, "%s: not a kvsim cost store (%s)", name, msg);
    case SQLITE_CORRUPT:
        return kv_err(e, "%s: corrupt cost store (%s: %s)", name, what, msg);
    case SQLITE_INTERRUPT:
        return kv_err(e, "%s: %s: stopped after %lld million SQLite instructions (the budget of one store call); "
                         "not a kvsim cost store?",
                      name, what, STORE_CALL_BUDGET / 1000000);
    case SQLITE_TOOBIG:
        return kv_err(e, "%s: %s: a value or statement beyond the store's limits (%s)", name, what, msg);
    default:
        return kv_err(e, "%s: %s: %s", name, what, msg);
    }
}

int store_exec(sqlite3 *db, const char *name, const char *sql, const char *what, KvErr *e)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : store_sql_err(e, name, db, rc, what);
}

int store_prep(sqlite3 *db, const char *name, const char *sql, sqlite3_stmt **st, const char *what, KvErr *e)
{
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return store_sql_err(e, name, db, rc, what);
    }
    return 0;
}

/* Rolls back whatever transaction is open; used on error paths, where the first error is the
 * one worth reporting, so its own failure is ignored (the next opener rolls back anyway). */
void store_rollback_quietly(sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

static int pragma_int(sqlite3 *db, const char *name, const char *pragma, int64_t *out, KvErr *e)
{
    char sql[64], what[80];
    snprintf(sql, sizeof sql, "PRAGMA %s", pragma);
    snprintf(what, sizeof what, "reading PRAGMA %s", pragma);
    return store_query_int(db, name, sql, 0, 0, out, what, e);
}

/* One integer from a one-row query with up to one int64 parameter (?1; not bound when has_arg = 0). */
int store_query_int(sqlite3 *db, const char *name, const char *sql, int has_arg, int64_t arg, int64_t *out,
                    const char *what, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(db, name, sql, &st, what, e) != 0) return -1;
    int rc = has_arg ? sqlite3_bind_int64(st, 1, arg) : SQLITE_OK;
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc != SQLITE_OK) store_sql_err(e, name, db, rc, what);
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

void store_now_iso(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void store_fmt_double(char *buf, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%.17g", v);
}

/* ---------------------------------------------------------------------------------------------
 * The guard: whatever a file or a dump holds, no statement runs forever or grows without bound.
 * ------------------------------------------------------------------------------------------- */

static int guard_progress(void *ud)
{
    StoreGuard *g = ud;
    return ++g->ticks > g->max_ticks; /* non-zero interrupts the statement (SQLITE_INTERRUPT) */
}

void store_guard_reset(StoreGuard *g, int64_t budget)
{
    g->ticks = 0;
    g->max_ticks = budget / STORE_GUARD_STEP + 1;
}

int store_guard_install(sqlite3 *db, StoreGuard *g, int64_t budget, const char *name, KvErr *e)
{
    /* our rows are under 2 KiB and our statements under 4 KiB; a dump's INSERT is one row */
    static const struct {
        int id, value;
    } lim[] = {
        {SQLITE_LIMIT_LENGTH, 1 << 20},     {SQLITE_LIMIT_SQL_LENGTH, 1 << 20}, {SQLITE_LIMIT_COLUMN, 64},
        {SQLITE_LIMIT_EXPR_DEPTH, 64},      {SQLITE_LIMIT_COMPOUND_SELECT, 4},  {SQLITE_LIMIT_VDBE_OP, 50000},
        {SQLITE_LIMIT_FUNCTION_ARG, 8},     {SQLITE_LIMIT_ATTACHED, 0},         {SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 256},
        {SQLITE_LIMIT_VARIABLE_NUMBER, 32}, {SQLITE_LIMIT_TRIGGER_DEPTH, 1},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(lim); i++) sqlite3_limit(db, lim[i].id, lim[i].value);
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 1, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    if (rc != SQLITE_OK) return store_sql_err(e, name, db, rc, "configuring the connection");
    store_guard_reset(g, budget);
    sqlite3_progress_handler(db, STORE_GUARD_STEP, guard_progress, g);
    return 0;
}

int store_enter(CostStore *s, KvErr *e)
{
    if (!s || !s->db || !s->guard) return kv_err(e, "cost store: not open");
    store_guard_reset(s->guard, STORE_CALL_BUDGET);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Opening: recognise our files, create the schema in an empty one, refuse everything else.
 * ------------------------------------------------------------------------------------------- */

static int create_schema(sqlite3 *db, const char *name, KvErr *e)
{
    if (store_exec(db, name, "BEGIN IMMEDIATE", "starting schema creation", e) != 0) return -1;
    int64_t nobj = 0;
    if (store_query_int(db, name, "SELECT count(*) FROM sqlite_master", 0, 0, &nobj, "reading the schema", e) != 0)
        goto fail;
    if (nobj == 0) { /* another process may have created it while we waited for the lock */
        for (size_t i = 0; i < store_schema_count; i++)
            if (store_exec(db, name, store_schema_sql[i], "creating the schema", e) != 0) goto fail;
        char sql[128];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 STORE_APPLICATION_ID, STORE_SCHEMA_VERSION);
        if (store_exec(db, name, sql, "setting application_id and user_version", e) != 0) goto fail;
    }
    if (store_exec(db, name, "COMMIT", "committing the schema", e) != 0) goto fail;
    return 0;
fail:
    store_rollback_quietly(db);
    return -1;
}

/* an open that failed: the connection and the guard released, -1 */
static int open_failed(CostStore *s)
{
    sqlite3_close(s->db);
    s->db = NULL;
    free(s->guard);
    s->guard = NULL;
    return -1;
}

/* sqlite_master must list exactly k_objects, each with our SQL text (and the statistics tables
 * ANALYZE may add, which only steer the planner). Nothing the file defines is run before this. */
static int check_objects(sqlite3 *db, const char *name, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(db, name, "SELECT type, name, tbl_name, sql FROM sqlite_master "
                   "ORDER BY name IN ('run', 'point', 'newest_run') DESC, rowid", &st,
                   "reading the schema", e) != 0)
        return -1;
    int seen[KV_ARRAY_LEN(k_objects)] = {0};
    int rc, ret = 0;
    while (ret == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 0), *nm = (const char *)sqlite3_column_text(st, 1);
        const char *tbl = (const char *)sqlite3_column_text(st, 2), *sql = (const char *)sqlite3_column_text(st, 3);
        if (!type || !nm || !tbl) {
            ret = kv_err(e, "%s: not a kvsim cost store (a schema entry without type or name)", name);
            break;
        }
        size_t k = 0;
        while (k < KV_ARRAY_LEN(k_objects) && strcmp(nm, k_objects[k].name) != 0) k++;
        if (k == KV_ARRAY_LEN(k_objects)) {
            if (!strcmp(type, "table") && !strncmp(nm, "sqlite_stat", 11)) continue;
            ret = kv_err(e, "%s: not a kvsim cost store (unexpected %.20s '%.100s'; a store holds only the tables "
                            "run and point and the view newest_run)",
                         name, type, nm);
            break;
        }
        if (strcmp(type, k_objects[k].type) != 0) {
            ret = kv_err(e, "%s: not a kvsim cost store: %s is a%s %.20s, expected a%s %s", name, nm,
                         strchr("aeiou", type[0]) ? "n" : "", type, k_objects[k].type[0] == 'i' ? "n" : "",
                         k_objects[k].type);
            break;
        }
        int sch = k_objects[k].schema;
        if (strcmp(tbl, k_objects[k].tbl) != 0 || (sch < 0 ? sql != NULL : !sql || strcmp(sql, store_schema_sql[sch]) != 0)) {
            ret = kv_err(e, "%s: not a kvsim cost store: %s %s differs from this build's schema %d (columns, "
                            "constraints or query changed)",
                         name, type, nm, STORE_SCHEMA_VERSION);
            break;
        }
        seen[k] = 1;
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = store_sql_err(e, name, db, rc, "reading the schema");
    sqlite3_finalize(st);
    for (size_t k = 0; ret == 0 && k < KV_ARRAY_LEN(k_objects); k++)
        if (!seen[k])
            ret = kv_err(e, "%s: not a kvsim cost store (%s %s missing)", name, k_objects[k].type, k_objects[k].name);
    return ret;
}

static int quick_check(sqlite3 *db, const char *name, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(db, name, "PRAGMA quick_check", &st, "running PRAGMA quick_check", e) != 0) return -1;
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0)
            ret = kv_err(e, "%s: corrupt cost store (PRAGMA quick_check: %.300s)", name, r ? r : "no result");
    } else {
        ret = store_sql_err(e, name, db, rc, "PRAGMA quick_check");
    }
    sqlite3_finalize(st);
    return ret;
}

int store_schema_check(sqlite3 *db, const char *name, int create, int full, KvErr *e)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t app = 0, ver = 0, nobj = 0;
        if (pragma_int(db, name, "application_id", &app, e) != 0) return -1;
        if (pragma_int(db, name, "user_version", &ver, e) != 0) return -1;
        if (store_query_int(db, name, "SELECT count(*) FROM sqlite_master", 0, 0, &nobj, "reading the schema", e) != 0)
            return -1;
        if (app == 0 && ver == 0 && nobj == 0) {
            if (!create) return kv_err(e, "%s: not a kvsim cost store (an empty database)", name);
            if (attempt > 0) return kv_err(e, "%s: creating the schema left an empty database", name);
            if (create_schema(db, name, e) != 0) return -1;
            continue;
        }
        if (app != STORE_APPLICATION_ID)
            return kv_err(e, "%s: not a kvsim cost store (application_id 0x%08x with %lld schema objects; "
                             "a store has 0x%08x 'KVSM')",
                          name, (unsigned)app, (long long)nobj, (unsigned)STORE_APPLICATION_ID);
        if (ver > STORE_SCHEMA_VERSION)
            return kv_err(e, "%s: written by a newer kvsim (schema %lld, this build reads %d)", name,
                          (long long)ver, STORE_SCHEMA_VERSION);
        if (ver < 1)
            return kv_err(e, "%s: kvsim cost store with schema %lld, which this build cannot read (it reads %d)",
                          name, (long long)ver, STORE_SCHEMA_VERSION);
        if (check_objects(db, name, e) != 0) return -1;
        if (full && quick_check(db, name, e) != 0) return -1;
        return 0;
    }
    return kv_err(e, "%s: could not create the schema", name);
}

static int open_db(CostStore *s, const char *path, int flags, KvErr *e)
{
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        kv_err(e, "%s: cannot open cost store: %s", path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        sqlite3_close(s->db);
        s->db = NULL;
        return -1;
    }
    if (store_guard_install(s->db, s->guard, STORE_CALL_BUDGET, path, e) != 0) return -1;
    rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK) return store_sql_err(e, path, s->db, rc, "setting busy_timeout");
    return 0;
}

int store_open(CostStore *s, const char *path, int mode, KvErr *e)
{
    memset(s, 0, sizeof *s);
    if (mode != STORE_OPEN_EXISTING && mode != STORE_OPEN_CREATE && mode != STORE_OPEN_READONLY)
        return kv_err(e, "cost store: open mode %d, expected STORE_OPEN_EXISTING, _CREATE or _READONLY", mode);
    if (!path || !*path) return kv_err(e, "cost store: empty file name");
    if (strlen(path) >= sizeof s->path) return kv_err(e, "%.200s...: path too long", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    int create = mode == STORE_OPEN_CREATE;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT || !create) return kv_err(e, "%s: cannot open cost store: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        return kv_err(e, "%s: not a kvsim cost store (not a regular file)", path);
    }
    s->guard = calloc(1, sizeof *s->guard);
    if (!s->guard) return kv_err(e, "%s: out of memory", path);
    s->readonly = mode == STORE_OPEN_READONLY;
    int flags = s->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if (open_db(s, path, flags, e) != 0) goto fail;
    int64_t app = 0;
    int rc = sqlite3_exec(s->db, "PRAGMA application_id", NULL, NULL, NULL); /* first read: hot journal? */
    if (s->readonly && (rc & 0xff) == SQLITE_READONLY) {
        /* an interrupted writer's journal: let SQLite roll it back, then read as asked */
        sqlite3_close(s->db);
        s->db = NULL;
        if (open_db(s, path, SQLITE_OPEN_READWRITE, e) != 0 || pragma_int(s->db, path, "application_id", &app, e) != 0)
            goto fail;
        sqlite3_close(s->db);
        s->db = NULL;
        if (open_db(s, path, flags, e) != 0) goto fail;
    }
    if (store_schema_check(s->db, path, create, 1, e) != 0) goto fail;
    if (!s->readonly && store_exec(s->db, path, "PRAGMA foreign_keys = ON", "enabling foreign keys", e) != 0) goto fail;
    return 0;
fail:
    return open_failed(s);
}

/* A private store in memory, named `label` in messages: the schema created, read-write. */
int store_open_memory(CostStore *s, const char *label, KvErr *e)
{
    memset(s, 0, sizeof *s);
    if (!label || !*label) return kv_err(e, "cost store: empty name");
    if (strlen(label) >= sizeof s->path) return kv_err(e, "%.200s...: name too long", label);
    snprintf(s->path, sizeof s->path, "%s", label);
    s->guard = calloc(1, sizeof *s->guard);
    if (!s->guard) return kv_err(e, "%s: out of memory", label);
    int rc = sqlite3_open_v2(":memory:", &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        kv_err(e, "%s: cannot open an in-memory store: %s", label, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        goto fail;
    }
    if (store_guard_install(s->db, s->guard, STORE_CALL_BUDGET, label, e) != 0 ||
        store_schema_check(s->db, label, 1, 0, e) != 0 ||
        store_exec(s->db, label, "PRAGMA foreign_keys = ON", "enabling foreign keys", e) != 0)
        goto fail;
    return 0;
fail:
    return open_failed(s);
}

const char *kv_embedded(const char *name, size_t *len); /* build/gen/embedded.c */

int store_committed_kind(const char *costs)
{
    return !strncmp(costs, "measured:", 9) || !strncmp(costs, "spec:", 5);
}

const char *store_committed_dump(const char *costs, char *path, size_t cap, size_t *len)
{
    const char *colon = strchr(costs, ':');
    if (!store_committed_kind(costs) || !colon[1] || strchr(colon + 1, '/')) return NULL;
    int k = snprintf(path, cap, STORE_COMMITTED_DIR "%.*s-%s.sql", (int)(colon - costs), costs, colon + 1);
    if (k < 0 || (size_t)k >= cap) return NULL;
    return kv_embedded(path, len);
}

static StoreNamedOpener g_named_opener;

void store_set_named_opener(StoreNamedOpener fn) { g_named_opener = fn; }

int store_open_costs(CostStore *s, const char *costs, KvErr *e)
{
    if (g_named_opener) {
        int rc = g_named_opener(costs, s, e);
        if (rc <= 0) return rc;
    }
    return store_open(s, costs, STORE_OPEN_READONLY, e);
}

void store_close(CostStore *s)
{
    if (!s) return;
    if (s->db) {
        sqlite3_finalize(s->ins_point);
        s->ins_point = NULL;
        if (s->in_run) store_rollback_quietly(s->db);
        s->in_run = 0;
        s->run_id = 0;
        sqlite3_close(s->db); /* all our statements are finalized, so this cannot be SQLITE_BUSY */
        s->db = NULL;
    }
    free(s->guard);
    s->guard = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Validation (shared by add_point, both imports and every reader)
 * ------------------------------------------------------------------------------------------- */

static int terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* YYYY-MM-DDTHH:MM:SS[.fff]Z: the only form whose text order is time order. */
static int iso_time_ok(const char *s)
{
    static const char pat[] = "dddd-dd-ddTdd:dd:dd";
    for (int i = 0; pat[i]; i++)
        if (pat[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != pat[i]) return 0;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    return p[0] == 'Z' && p[1] == '\0';
}

int store_backend_ok(const char *b)
{
    return strcmp(b, "cpu") == 0 || strcmp(b, "cuda") == 0 || strcmp(b, "spec") == 0 || strcmp(b, "import") == 0 ||
           strcmp(b, "measured") == 0;
}

int store_validate_meta(const char *name, const StoreRunMeta *m, KvErr *e)
{
    const struct {
        const char *field, *s;
        size_t cap;
    } txt[] = {
        {"backend", m->backend, sizeof m->backend},     {"device", m->device, sizeof m->device},
        {"host", m->host, sizeof m->host},              {"driver", m->driver, sizeof m->driver},
        {"cuda", m->cuda, sizeof m->cuda},              {"git_rev", m->git_rev, sizeof m->git_rev},
        {"started_at", m->started_at, sizeof m->started_at},
        {"finished_at", m->finished_at, sizeof m->finished_at},
        {"model", m->model, sizeof m->model},           {"dtype", m->dtype, sizeof m->dtype},
        {"notes", m->notes, sizeof m->notes},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(txt); i++)
        if (!terminated(txt[i].s, txt[i].cap))
            return kv_err(e, "%s: run field %s: not NUL-terminated within %zu bytes", name, txt[i].field, txt[i].cap);
    if (!store_backend_ok(m->backend))
        return kv_err(e, "%s: run field backend: '%s', expected cpu, cuda, spec, import or measured", name, m->backend);
    if (!m->device[0]) return kv_err(e, "%s: run field device: empty, expected the device name", name);
    if (m->tp < 1) return kv_err(e, "%s: run field tp: %d, expected >= 1", name, m->tp);
    if (m->quick != 0 && m->quick != 1) return kv_err(e, "%s: run field quick: %d, expected 0 or 1", name, m->quick);
    if (m->complete != 0 && m->complete != 1)
        return kv_err(e, "%s: run field complete: %d, expected 0 or 1", name, m->complete);
    if (m->started_at[0] && !iso_time_ok(m->started_at))
        return kv_err(e, "%s: run field started_at: '%s', expected YYYY-MM-DDTHH:MM:SSZ (UTC)", name, m->started_at);
    if (m->finished_at[0] && !iso_time_ok(m->finished_at))
        return kv_err(e, "%s: run field finished_at: '%s', expected YYYY-MM-DDTHH:MM:SSZ (UTC)", name, m->finished_at);
    return 0;
}

void store_normalize_point(StorePoint *p)
{
    if (cost_op_is_io(p->op)) {
        p->model[0] = '\0';
        p->tp = 1;
    }
}

int store_validate_point(const char *name, int64_t run_id, const StorePoint *p, KvErr *e)
{
    if ((unsigned)p->op >= OP_COUNT)
        return kv_err(e, "%s: run %lld: point op %d: out of range (0..%d)", name, (long long)run_id, (int)p->op,
                      OP_COUNT - 1);
    char where[192];
    snprintf(where, sizeof where, "%s point (%lld, %lld, %lld)", cost_op_name(p->op), (long long)p->p1,
             (long long)p->p2, (long long)p->p3);
#define PT_ERR(...) (kv_err_prefix(e, "%s: run %lld: %s: ", name, (long long)run_id, where), -1)
    if (!terminated(p->model, sizeof p->model) || !terminated(p->dtype, sizeof p->dtype)) {
        kv_err(e, "model or dtype not NUL-terminated");
        return PT_ERR();
    }
    if (!cost_op_is_io(p->op)) {
        if (!p->model[0]) return kv_err(e, "model is empty (compute ops need one)"), PT_ERR();
        if (!p->dtype[0]) return kv_err(e, "dtype is empty (compute ops need one)"), PT_ERR();
        if (p->tp < 1) return kv_err(e, "tp %d, expected >= 1", p->tp), PT_ERR();
    } else if (p->model[0] || p->tp != 1) {
        return kv_err(e, "IO ops are stored with model '' and tp 1"), PT_ERR();
    }
    int np = cost_op_nparams(p->op);
    if (p->p1 < 0 || p->p2 < 0 || p->p3 < 0) return kv_err(e, "negative shape parameter"), PT_ERR();
    if (np < 2 && p->p2 != 0) return kv_err(e, "p2 must be 0 (the op has %d parameter)", np), PT_ERR();
    if (np < 3 && p->p3 != 0) return kv_err(e, "p3 must be 0 (the op has %d parameters)", np), PT_ERR();
    if (p->n < 1) return kv_err(e, "n = %d, expected >= 1 repetition", p->n), PT_ERR();
    if (!isfinite(p->median_ns) || !isfinite(p->p10_ns) || !isfinite(p->p90_ns))
        return kv_err(e, "times must be finite (median %g, p10 %g, p90 %g ns)", p->median_ns, p->p10_ns, p->p90_ns),
               PT_ERR();
    if (!(p->p10_ns >= 0 && p->p10_ns <= p->median_ns && p->median_ns <= p->p90_ns))
        return kv_err(e, "expected 0 <= p10 <= median <= p90, got p10 %g, median %g, p90 %g ns", p->p10_ns,
                      p->median_ns, p->p90_ns),
               PT_ERR();
#undef PT_ERR
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Row readers and writers
 * ------------------------------------------------------------------------------------------- */

static const char *type_name(int t)
{
    switch (t) {
    case SQLITE_INTEGER: return "an integer";
    case SQLITE_FLOAT: return "a real";
    case SQLITE_TEXT: return "text";
    case SQLITE_BLOB: return "a blob";
    default: return "NULL";
    }
}

/* Column col must have SQLite type want (SQLITE_FLOAT also accepts an integer). Else a message
 * naming the file (name), the run, what (the row: "run" or "gemm_qkv point"), the field and the
 * value as stored. */
static int col_type(sqlite3_stmt *st, int col, int want, const char *name, int64_t run_id, const char *what,
                    const char *field, KvErr *e)
{
    int t = sqlite3_column_type(st, col);
    if (t == want || (want == SQLITE_FLOAT && t == SQLITE_INTEGER)) return 0;
    const char *v = t == SQLITE_NULL ? "NULL" : (const char *)sqlite3_column_text(st, col);
    return kv_err(e, "%s: run %lld: %s: field %s: '%.60s' is %s, expected %s", name, (long long)run_id, what, field,
                  v ? v : "", type_name(t),
                  want == SQLITE_TEXT ? "text" : want == SQLITE_INTEGER ? "an integer" : "a number of ns");
}

static int col_text(sqlite3_stmt *st, int col, char *dst, size_t cap, const char *name, int64_t run_id,
                    const char *what, const char *field, KvErr *e)
{
    if (col_type(st, col, SQLITE_TEXT, name, run_id, what, field, e) != 0) return -1;
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    if (!t) n = 0;
    if ((size_t)n >= cap)
        return kv_err(e, "%s: run %lld: %s: field %s is %d bytes, longer than this build's limit of %zu", name,
                      (long long)run_id, what, field, n, cap - 1);
    if (n && memchr(t, '\0', (size_t)n))
        return kv_err(e, "%s: run %lld: %s: field %s holds a NUL byte", name, (long long)run_id, what, field);
    if (n) memcpy(dst, t, (size_t)n);
    dst[n] = '\0';
    return 0;
}

static int col_i64(sqlite3_stmt *st, int col, int64_t *out, const char *name, int64_t run_id, const char *what,
                   const char *field, KvErr *e)
{
    if (col_type(st, col, SQLITE_INTEGER, name, run_id, what, field, e) != 0) return -1;
    *out = sqlite3_column_int64(st, col);
    return 0;
}

static int col_int(sqlite3_stmt *st, int col, int *out, const char *name, int64_t run_id, const char *what,
                   const char *field, KvErr *e)
{
    int64_t v;
    if (col_i64(st, col, &v, name, run_id, what, field, e) != 0) return -1;
    if (v < INT_MIN || v > INT_MAX)
        return kv_err(e, "%s: run %lld: %s: field %s = %lld out of range", name, (long long)run_id, what, field,
                      (long long)v);
    *out = (int)v;
    return 0;
}

static int col_ns(sqlite3_stmt *st, int col, double *out, const char *name, int64_t run_id, const char *what,
                  const char *field, KvErr *e)
{
    if (col_type(st, col, SQLITE_FLOAT, name, run_id, what, field, e) != 0) return -1;
    *out = sqlite3_column_double(st, col);
    return 0;
}

int store_read_run_row(sqlite3_stmt *st, int c0, const char *name, StoreRunMeta *m, KvErr *e)
{
    memset(m, 0, sizeof *m);
    if (sqlite3_column_type(st, c0) != SQLITE_INTEGER)
        return kv_err(e, "%s: a run whose id is %s, expected an integer", name, type_name(sqlite3_column_type(st, c0)));
    m->id = sqlite3_column_int64(st, c0);
    struct {
        char *dst;
        size_t cap;
        const char *field;
    } txt[] = {
        {m->backend, sizeof m->backend, "backend"}, {m->device, sizeof m->device, "device"},
        {m->host, sizeof m->host, "host"},          {m->driver, sizeof m->driver, "driver"},
        {m->cuda, sizeof m->cuda, "cuda"},          {m->git_rev, sizeof m->git_rev, "git_rev"},
        {m->started_at, sizeof m->started_at, "started_at"},
        {m->finished_at, sizeof m->finished_at, "finished_at"},
        {m->model, sizeof m->model, "model"},       {m->dtype, sizeof m->dtype, "dtype"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(txt); i++)
        if (col_text(st, c0 + 1 + (int)i, txt[i].dst, txt[i].cap, name, m->id, "run", txt[i].field, e) != 0) return -1;
    if (col_int(st, c0 + 11, &m->tp, name, m->id, "run", "tp", e) != 0) return -1;
    if (col_int(st, c0 + 12, &m->quick, name, m->id, "run", "quick", e) != 0) return -1;
    if (col_text(st, c0 + 13, m->notes, sizeof m->notes, name, m->id, "run", "notes", e) != 0) return -1;
    if (col_int(st, c0 + 14, &m->complete, name, m->id, "run", "complete", e) != 0) return -1;
    char where[4200];
    snprintf(where, sizeof where, "%s: run %lld", name, (long long)m->id);
    return store_validate_meta(where, m, e);
}

int store_read_point_row(sqlite3_stmt *st, int c0, const char *name, int64_t run_id, StorePoint *p, KvErr *e)
{
    memset(p, 0, sizeof *p);
    char opname[32];
    if (col_text(st, c0, opname, sizeof opname, name, run_id, "point", "op", e) != 0) return -1;
    int op = cost_op_parse(opname);
    if (op < 0)
        return kv_err(e, "%s: run %lld: point: field op: unknown op '%s' (written by a newer kvsim?)", name,
                      (long long)run_id, opname);
    p->op = (CostOp)op;
    char what[48];
    snprintf(what, sizeof what, "%s point", opname);
    if (col_text(st, c0 + 1, p->model, sizeof p->model, name, run_id, what, "model", e) != 0) return -1;
    if (col_text(st, c0 + 2, p->dtype, sizeof p->dtype, name, run_id, what, "dtype", e) != 0) return -1;
    if (col_int(st, c0 + 3, &p->tp, name, run_id, what, "tp", e) != 0) return -1;
    if (col_i64(st, c0 + 4, &p->p1, name, run_id, what, "p1", e) != 0) return -1;
    if (col_i64(st, c0 + 5, &p->p2, name, run_id, what, "p2", e) != 0) return -1;
    if (col_i64(st, c0 + 6, &p->p3, name, run_id, what, "p3", e) != 0) return -1;
    if (col_int(st, c0 + 7, &p->n, name, run_id, what, "n", e) != 0) return -1;
    if (col_ns(st, c0 + 8, &p->median_ns, name, run_id, what, "median_ns", e) != 0) return -1;
    if (col_ns(st, c0 + 9, &p->p10_ns, name, run_id, what, "p10_ns", e) != 0) return -1;
    if (col_ns(st, c0 + 10, &p->p90_ns, name, run_id, what, "p90_ns", e) != 0) return -1;
    return store_validate_point(name, run_id, p, e);
}

int store_insert_run(sqlite3 *db, const char *name, const StoreRunMeta *m, int64_t want_id, int complete, int64_t *id,
                     KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(db, name,
                   "INSERT INTO run(" STORE_RUN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                   &st, "preparing the run insert", e) != 0)
        return -1;
    int rc = want_id > 0 ? sqlite3_bind_int64(st, 1, want_id) : sqlite3_bind_null(st, 1);
    const char *txt[] = {m->backend, m->device, m->host, m->driver, m->cuda, m->git_rev,
                         m->started_at, m->finished_at, m->model, m->dtype};
    for (int i = 0; i < (int)KV_ARRAY_LEN(txt) && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_text(st, 2 + i, txt[i], -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 12, m->tp);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 13, m->quick);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 14, m->notes, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 15, complete);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        store_sql_err(e, name, db, rc, "inserting the run");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db);
    return 0;
}

const char store_insert_point_sql[] =
    "INSERT INTO point(run_id, " STORE_POINT_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

int store_insert_point(sqlite3 *db, sqlite3_stmt *st, const char *name, int64_t run_id, const StorePoint *p, KvErr *e)
{
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, cost_op_name(p->op), -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 3, p->model, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 4, p->dtype, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 5, p->tp);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 6, p->p1);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 7, p->p2);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 8, p->p3);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 9, p->n);
    if (rc == SQLITE_OK) rc = sqlite3_bind_double(st, 10, p->median_ns);
    if (rc == SQLITE_OK) rc = sqlite3_bind_double(st, 11, p->p10_ns);
    if (rc == SQLITE_OK) rc = sqlite3_bind_double(st, 12, p->p90_ns);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int ret = 0;
    if (rc != SQLITE_DONE) {
        char what[256];
        snprintf(what, sizeof what, "run %lld: %s point (%lld, %lld, %lld) model '%s' dtype '%s' tp %d%s",
                 (long long)run_id, cost_op_name(p->op), (long long)p->p1, (long long)p->p2, (long long)p->p3,
                 p->model, p->dtype, p->tp, (rc & 0xff) == SQLITE_CONSTRAINT ? " (duplicate point?)" : "");
        ret = store_sql_err(e, name, db, rc, what);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * Writing a run
 * ------------------------------------------------------------------------------------------- */

int store_begin_run(CostStore *s, StoreRunMeta *meta, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    if (s->readonly) return kv_err(e, "%s: opened read-only; cannot begin a run", s->path);
    if (s->in_run)
        return kv_err(e, "%s: run %lld is still open; end it before beginning another", s->path, (long long)s->run_id);
    if (!meta->started_at[0]) store_now_iso(meta->started_at, sizeof meta->started_at);
    if (store_validate_meta(s->path, meta, e) != 0) return -1;
    if (store_exec(s->db, s->path, "BEGIN IMMEDIATE", "beginning the run's transaction", e) != 0) return -1;
    int64_t id = 0;
    if (store_insert_run(s->db, s->path, meta, 0, 0, &id, e) != 0) {
        store_rollback_quietly(s->db);
        return -1;
    }
    meta->id = id;
    meta->complete = 0;
    s->in_run = 1;
    s->run_id = id;
    return 0;
}

int store_add_point(CostStore *s, int64_t run_id, const StorePoint *p, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    if (!s->in_run || run_id != s->run_id)
        return kv_err(e, "%s: run %lld is not the open run (%s)", s->path, (long long)run_id,
                      s->in_run ? "another run is open" : "no run is open; call store_begin_run");
    StorePoint q = *p;
    if ((unsigned)q.op < OP_COUNT) store_normalize_point(&q);
    if (store_validate_point(s->path, run_id, &q, e) != 0) return -1;
    if (!s->ins_point && store_prep(s->db, s->path, store_insert_point_sql, &s->ins_point, "preparing the point insert", e) != 0)
        return -1;
    return store_insert_point(s->db, s->ins_point, s->path, run_id, &q, e);
}

int store_end_run(CostStore *s, int64_t run_id, int commit, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    if (!s->in_run || run_id != s->run_id)
        return kv_err(e, "%s: run %lld is not the open run", s->path, (long long)run_id);
    sqlite3_finalize(s->ins_point);
    s->ins_point = NULL;
    s->in_run = 0;
    s->run_id = 0;
    if (!commit) return store_exec(s->db, s->path, "ROLLBACK", "rolling back the run", e);
    char now[32];
    store_now_iso(now, sizeof now);
    sqlite3_stmt *st;
    if (store_prep(s->db, s->path, "UPDATE run SET complete = 1, finished_at = CASE WHEN finished_at = '' THEN ?2 ELSE finished_at END WHERE id = ?1",
             &st, "preparing the run's completion", e) != 0)
        goto fail;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        store_sql_err(e, s->path, s->db, rc, "marking the run complete");
        sqlite3_finalize(st);
        goto fail;
    }
    sqlite3_finalize(st);
    if (store_exec(s->db, s->path, "COMMIT", "committing the run", e) != 0) goto fail;
    return 0;
fail:
    store_rollback_quietly(s->db);
    return kv_err_prefix(e, "run %lld rolled back: ", (long long)run_id);
}
