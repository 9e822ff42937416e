/* store.c — the SQLite cost store; see store.h for the schema and the API contract.
 *
 * Responsible for: opening (and creating) a store file and refusing anything that is not one
 * (other application_id, newer user_version, not SQLite, failing PRAGMA quick_check); writing a
 * run in one transaction; reading runs and points back; choosing the run to read for a key
 * (store_pick_run); a deterministic SQL dump and its import; CSV and JSON export, CSV import.
 * Not responsible for: what the numbers mean (cost.c interpolates them, spec.c and the probes
 * produce them) or any printing (store_cmds.c is the CLI face of this module).
 *
 * Storage decisions:
 *   - op is stored as its name (ops.h cost_op_name), so reordering the enum never reinterprets
 *     stored points; a name this build does not know is an error when reading points.
 *   - IO ops (cost_op_is_io) are normalised to model = '' and tp = 1 on the way in; their dtype is
 *     kept as given, and store_pick_run ignores dtype for them (bytes do not depend on it). The
 *     newest_run view reports dtype '' for IO ops accordingly.
 *   - "Newest" is the latest started_at (ISO 8601 UTC, so text order is time order), ties broken by
 *     the higher id. Backend rank: cuda, cpu (measured) < anything else ("import") < spec.
 *   - No WAL: a store is one file (it is committed to repositories), and the rollback journal
 *     gives the crash guarantee: a run's transaction that never committed is rolled back by the
 *     next opener (hot journal), so an interrupted kvcal leaves no partial run.
 *
 * Costs: store_open runs PRAGMA quick_check, O(file size) (milliseconds for stores of thousands
 * of points); add_point is one insert into the UNIQUE index, O(log points); pick_run visits the
 * device's complete runs and probes that index once per run; the dump reads in index order (no
 * sort); an SQL import holds the dump in an in-memory database while copying it.
 *
 * Invariants:
 *   - run.complete = 1 only for runs whose end_run committed (or imported as complete);
 *   - every point satisfies validate_point (known op, unused parameters 0, n >= 1, finite times
 *     with 0 <= p10 <= median <= p90); imports go through the same checks as add_point;
 *   - s->in_run <=> a BEGIN IMMEDIATE transaction is open for run s->run_id on s->db;
 *   - every failing function leaves a message naming the file (or the import's origin) in the
 *     KvErr, with SQLite's own message when SQLite failed.
 */
#include "sim/cost/store.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define STORE_BUSY_TIMEOUT_MS 10000

/* ---------------------------------------------------------------------------------------------
 * Schema. These strings are both executed (creation) and printed (dump), so a dump always carries
 * the schema of the build that wrote it. STORE_IO_OPS_SQL must list exactly the ops for which
 * cost_op_is_io() is true (tested by store_view_io_ops_match_ops_table).
 * ------------------------------------------------------------------------------------------- */
#define STORE_IO_OPS_SQL "('h2d', 'd2h', 'h2d_bidir', 'd2h_bidir', 'ssd_read', 'ssd_write', 'net')"
#define STORE_RANK_SQL(b) "CASE " b " WHEN 'cuda' THEN 0 WHEN 'cpu' THEN 0 WHEN 'spec' THEN 2 ELSE 1 END"

static const char *const k_schema_sql[] = {
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

#define RUN_COLS                                                                                   \
    "id, backend, device, host, driver, cuda, git_rev, started_at, finished_at, model, dtype, tp, " \
    "quick, notes, complete"
#define POINT_COLS "op, model, dtype, tp, p1, p2, p3, n, median_ns, p10_ns, p90_ns"
#define CSV_HEADER "run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns"
#define CSV_NCOLS 14
#define DUMP_MAGIC "-- kvsim cost store dump, schema "

/* ---------------------------------------------------------------------------------------------
 * Error and statement helpers
 * ------------------------------------------------------------------------------------------- */

/* A SQLite failure as a message: names the file, says what was being done, keeps SQLite's text.
 * "not a database" and "corrupt" are worded for the user, since they are what people hit. */
static int sql_err(KvErr *e, const char *name, sqlite3 *db, int rc, const char *what)
{
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
        return kv_err(e, "%s: not a kvsim cost store (%s)", name, msg);
    case SQLITE_CORRUPT:
        return kv_err(e, "%s: corrupt cost store (%s: %s)", name, what, msg);
    default:
        return kv_err(e, "%s: %s: %s", name, what, msg);
    }
}

static int exec_sql(sqlite3 *db, const char *name, const char *sql, const char *what, KvErr *e)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sql_err(e, name, db, rc, what);
}

static int prep(sqlite3 *db, const char *name, const char *sql, sqlite3_stmt **st, const char *what, KvErr *e)
{
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return sql_err(e, name, db, rc, what);
    }
    return 0;
}

/* Rolls back whatever transaction is open; used on error paths, where the first error is the
 * one worth reporting, so its own failure is ignored (the next opener rolls back anyway). */
static void rollback_quietly(sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

static int pragma_int(sqlite3 *db, const char *name, const char *pragma, int64_t *out, KvErr *e)
{
    char sql[64], what[80];
    snprintf(sql, sizeof sql, "PRAGMA %s", pragma);
    snprintf(what, sizeof what, "reading PRAGMA %s", pragma);
    sqlite3_stmt *st;
    if (prep(db, name, sql, &st, what, e) != 0) return -1;
    int rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc != SQLITE_OK) sql_err(e, name, db, rc, what);
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

/* One integer from a one-row query with up to one int64 parameter (?1; not bound when has_arg = 0). */
static int query_int(sqlite3 *db, const char *name, const char *sql, int has_arg, int64_t arg, int64_t *out,
                     const char *what, KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(db, name, sql, &st, what, e) != 0) return -1;
    int rc = has_arg ? sqlite3_bind_int64(st, 1, arg) : SQLITE_OK;
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc != SQLITE_OK) sql_err(e, name, db, rc, what);
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

static void now_iso(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Doubles in text output: integral values (|v| < 2^53) as integers, others with %.17g, which
 * reads back to the same double. Same value, same text: what makes dumps deterministic. */
static void fmt_double(char *buf, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        snprintf(buf, cap, "%lld", (long long)v);
    else
        snprintf(buf, cap, "%.17g", v);
}

/* ---------------------------------------------------------------------------------------------
 * Opening: recognise our files, create the schema in an empty one, refuse everything else.
 * ------------------------------------------------------------------------------------------- */

static int create_schema(sqlite3 *db, const char *name, KvErr *e)
{
    if (exec_sql(db, name, "BEGIN IMMEDIATE", "starting schema creation", e) != 0) return -1;
    int64_t nobj = 0;
    if (query_int(db, name, "SELECT count(*) FROM sqlite_master", 0, 0, &nobj, "reading the schema", e) != 0)
        goto fail;
    if (nobj == 0) { /* another process may have created it while we waited for the lock */
        for (size_t i = 0; i < KV_ARRAY_LEN(k_schema_sql); i++)
            if (exec_sql(db, name, k_schema_sql[i], "creating the schema", e) != 0) goto fail;
        char sql[128];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 STORE_APPLICATION_ID, STORE_SCHEMA_VERSION);
        if (exec_sql(db, name, sql, "setting application_id and user_version", e) != 0) goto fail;
    }
    if (exec_sql(db, name, "COMMIT", "committing the schema", e) != 0) goto fail;
    return 0;
fail:
    rollback_quietly(db);
    return -1;
}

static int check_tables(sqlite3 *db, const char *name, KvErr *e)
{
    static const struct {
        const char *what, *sql;
    } probes[] = {
        {"table run", "SELECT " RUN_COLS " FROM run LIMIT 0"},
        {"table point", "SELECT run_id, " POINT_COLS " FROM point LIMIT 0"},
        {"view newest_run", "SELECT device, model, dtype, tp, op, run_id FROM newest_run LIMIT 0"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(probes); i++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, probes[i].sql, -1, &st, NULL);
        sqlite3_finalize(st);
        if (rc == SQLITE_OK) continue;
        if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
            return sql_err(e, name, db, rc, "reading the schema");
        return kv_err(e, "%s: not a kvsim cost store (%s missing or malformed: %s)", name, probes[i].what,
                      sqlite3_errmsg(db));
    }
    return 0;
}

static int quick_check(sqlite3 *db, const char *name, KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(db, name, "PRAGMA quick_check", &st, "running PRAGMA quick_check", e) != 0) return -1;
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok") != 0)
            ret = kv_err(e, "%s: corrupt cost store (PRAGMA quick_check: %s)", name, r ? r : "no result");
    } else {
        ret = sql_err(e, name, db, rc, "PRAGMA quick_check");
    }
    sqlite3_finalize(st);
    return ret;
}

/* Decide whether db (named name in messages) is a kvsim store this build can read; with create,
 * turn an empty database into one. full = 1 also runs quick_check (files; not in-memory copies). */
static int schema_check(sqlite3 *db, const char *name, int create, int full, KvErr *e)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t app = 0, ver = 0, nobj = 0;
        if (pragma_int(db, name, "application_id", &app, e) != 0) return -1;
        if (pragma_int(db, name, "user_version", &ver, e) != 0) return -1;
        if (query_int(db, name, "SELECT count(*) FROM sqlite_master", 0, 0, &nobj, "reading the schema", e) != 0)
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
        if (check_tables(db, name, e) != 0) return -1;
        if (full && quick_check(db, name, e) != 0) return -1;
        return 0;
    }
    return kv_err(e, "%s: could not create the schema", name);
}

int store_open(CostStore *s, const char *path, int create, KvErr *e)
{
    memset(s, 0, sizeof *s);
    if (!path || !*path) return kv_err(e, "cost store: empty file name");
    if (strlen(path) >= sizeof s->path) return kv_err(e, "%.200s...: path too long", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno != ENOENT || !create) return kv_err(e, "%s: cannot open cost store: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        return kv_err(e, "%s: not a kvsim cost store (not a regular file)", path);
    }
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        kv_err(e, "%s: cannot open cost store: %s", path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        sqlite3_close(s->db);
        s->db = NULL;
        return -1;
    }
    rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK) {
        sql_err(e, path, s->db, rc, "setting busy_timeout");
        goto fail;
    }
    if (schema_check(s->db, path, create, 1, e) != 0) goto fail;
    if (exec_sql(s->db, path, "PRAGMA foreign_keys = ON", "enabling foreign keys", e) != 0) goto fail;
    return 0;
fail:
    sqlite3_close(s->db);
    s->db = NULL;
    return -1;
}

void store_close(CostStore *s)
{
    if (!s || !s->db) return;
    sqlite3_finalize(s->ins_point);
    s->ins_point = NULL;
    if (s->in_run) rollback_quietly(s->db);
    s->in_run = 0;
    s->run_id = 0;
    sqlite3_close(s->db); /* all our statements are finalized, so this cannot be SQLITE_BUSY */
    s->db = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Validation (shared by add_point and both imports)
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

static int backend_ok(const char *b)
{
    return strcmp(b, "cpu") == 0 || strcmp(b, "cuda") == 0 || strcmp(b, "spec") == 0 || strcmp(b, "import") == 0;
}

static int validate_meta(const char *name, const StoreRunMeta *m, KvErr *e)
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
    if (!backend_ok(m->backend))
        return kv_err(e, "%s: run field backend: '%s', expected cpu, cuda, spec or import", name, m->backend);
    if (!m->device[0]) return kv_err(e, "%s: run field device: empty, expected the device name", name);
    if (m->tp < 1) return kv_err(e, "%s: run field tp: %d, expected >= 1", name, m->tp);
    if (m->quick != 0 && m->quick != 1) return kv_err(e, "%s: run field quick: %d, expected 0 or 1", name, m->quick);
    if (m->started_at[0] && !iso_time_ok(m->started_at))
        return kv_err(e, "%s: run field started_at: '%s', expected YYYY-MM-DDTHH:MM:SSZ (UTC)", name, m->started_at);
    if (m->finished_at[0] && !iso_time_ok(m->finished_at))
        return kv_err(e, "%s: run field finished_at: '%s', expected YYYY-MM-DDTHH:MM:SSZ (UTC)", name, m->finished_at);
    return 0;
}

static void normalize_point(StorePoint *p)
{
    if (cost_op_is_io(p->op)) {
        p->model[0] = '\0';
        p->tp = 1;
    }
}

static int validate_point(const char *name, int64_t run_id, const StorePoint *p, KvErr *e)
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

static int col_text(sqlite3_stmt *st, int col, char *dst, size_t cap, const char *name, int64_t run_id,
                    const char *field, KvErr *e)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);
    if (!t) n = 0;
    if ((size_t)n >= cap)
        return kv_err(e, "%s: run %lld: field %s is %d bytes, longer than this build's limit of %zu", name,
                      (long long)run_id, field, n, cap - 1);
    if (n) memcpy(dst, t, (size_t)n);
    dst[n] = '\0';
    return 0;
}

static int col_int(sqlite3_stmt *st, int col, int *out, const char *name, int64_t run_id, const char *field,
                   KvErr *e)
{
    int64_t v = sqlite3_column_int64(st, col);
    if (v < INT_MIN || v > INT_MAX)
        return kv_err(e, "%s: run %lld: field %s = %lld out of range", name, (long long)run_id, field, (long long)v);
    *out = (int)v;
    return 0;
}

/* Columns in RUN_COLS order, from column 0. */
static int read_run_row(sqlite3_stmt *st, const char *name, StoreRunMeta *m, KvErr *e)
{
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(st, 0);
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
        if (col_text(st, 1 + (int)i, txt[i].dst, txt[i].cap, name, m->id, txt[i].field, e) != 0) return -1;
    if (col_int(st, 11, &m->tp, name, m->id, "tp", e) != 0) return -1;
    if (col_int(st, 12, &m->quick, name, m->id, "quick", e) != 0) return -1;
    if (col_text(st, 13, m->notes, sizeof m->notes, name, m->id, "notes", e) != 0) return -1;
    if (col_int(st, 14, &m->complete, name, m->id, "complete", e) != 0) return -1;
    return 0;
}

/* Columns in POINT_COLS order, starting at column c0. */
static int read_point_row(sqlite3_stmt *st, int c0, const char *name, int64_t run_id, StorePoint *p, KvErr *e)
{
    memset(p, 0, sizeof *p);
    const char *opname = (const char *)sqlite3_column_text(st, c0);
    int op = opname ? cost_op_parse(opname) : -1;
    if (op < 0)
        return kv_err(e, "%s: run %lld: unknown op '%s' (written by a newer kvsim?)", name, (long long)run_id,
                      opname ? opname : "(null)");
    p->op = (CostOp)op;
    if (col_text(st, c0 + 1, p->model, sizeof p->model, name, run_id, "point model", e) != 0) return -1;
    if (col_text(st, c0 + 2, p->dtype, sizeof p->dtype, name, run_id, "point dtype", e) != 0) return -1;
    if (col_int(st, c0 + 3, &p->tp, name, run_id, "point tp", e) != 0) return -1;
    p->p1 = sqlite3_column_int64(st, c0 + 4);
    p->p2 = sqlite3_column_int64(st, c0 + 5);
    p->p3 = sqlite3_column_int64(st, c0 + 6);
    if (col_int(st, c0 + 7, &p->n, name, run_id, "point n", e) != 0) return -1;
    p->median_ns = sqlite3_column_double(st, c0 + 8);
    p->p10_ns = sqlite3_column_double(st, c0 + 9);
    p->p90_ns = sqlite3_column_double(st, c0 + 10);
    return 0;
}

/* Insert a run row; want_id 0 lets SQLite choose (max + 1). */
static int insert_run(sqlite3 *db, const char *name, const StoreRunMeta *m, int64_t want_id, int complete,
                      int64_t *id, KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(db, name, "INSERT INTO run(" RUN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
        sql_err(e, name, db, rc, "inserting the run");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db);
    return 0;
}

static const char k_insert_point_sql[] =
    "INSERT INTO point(run_id, " POINT_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/* Bind and step a prepared k_insert_point_sql; resets it for the next use. p is validated. */
static int insert_point(sqlite3 *db, sqlite3_stmt *st, const char *name, int64_t run_id, const StorePoint *p, KvErr *e)
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
        ret = sql_err(e, name, db, rc, what);
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
    if (!s->db) return kv_err(e, "cost store: not open");
    if (s->in_run)
        return kv_err(e, "%s: run %lld is still open; end it before beginning another", s->path, (long long)s->run_id);
    if (!meta->started_at[0]) now_iso(meta->started_at, sizeof meta->started_at);
    if (validate_meta(s->path, meta, e) != 0) return -1;
    if (exec_sql(s->db, s->path, "BEGIN IMMEDIATE", "beginning the run's transaction", e) != 0) return -1;
    int64_t id = 0;
    if (insert_run(s->db, s->path, meta, 0, 0, &id, e) != 0) {
        rollback_quietly(s->db);
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
    if (!s->db) return kv_err(e, "cost store: not open");
    if (!s->in_run || run_id != s->run_id)
        return kv_err(e, "%s: run %lld is not the open run (%s)", s->path, (long long)run_id,
                      s->in_run ? "another run is open" : "no run is open; call store_begin_run");
    StorePoint q = *p;
    if ((unsigned)q.op < OP_COUNT) normalize_point(&q);
    if (validate_point(s->path, run_id, &q, e) != 0) return -1;
    if (!s->ins_point && prep(s->db, s->path, k_insert_point_sql, &s->ins_point, "preparing the point insert", e) != 0)
        return -1;
    return insert_point(s->db, s->ins_point, s->path, run_id, &q, e);
}

int store_end_run(CostStore *s, int64_t run_id, int commit, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    if (!s->in_run || run_id != s->run_id)
        return kv_err(e, "%s: run %lld is not the open run", s->path, (long long)run_id);
    sqlite3_finalize(s->ins_point);
    s->ins_point = NULL;
    s->in_run = 0;
    s->run_id = 0;
    if (!commit) return exec_sql(s->db, s->path, "ROLLBACK", "rolling back the run", e);
    char now[32];
    now_iso(now, sizeof now);
    sqlite3_stmt *st;
    if (prep(s->db, s->path, "UPDATE run SET complete = 1, finished_at = CASE WHEN finished_at = '' THEN ?2 ELSE finished_at END WHERE id = ?1",
             &st, "preparing the run's completion", e) != 0)
        goto fail;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        sql_err(e, s->path, s->db, rc, "marking the run complete");
        sqlite3_finalize(st);
        goto fail;
    }
    sqlite3_finalize(st);
    if (exec_sql(s->db, s->path, "COMMIT", "committing the run", e) != 0) goto fail;
    return 0;
fail:
    rollback_quietly(s->db);
    return kv_err_prefix(e, "run %lld rolled back: ", (long long)run_id);
}

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------- */

int store_list_runs(CostStore *s, StoreRunFn fn, void *ctx, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    sqlite3_stmt *st;
    if (prep(s->db, s->path, "SELECT " RUN_COLS " FROM run ORDER BY id", &st, "listing runs", e) != 0) return -1;
    int rc, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRunMeta m;
        if (read_run_row(st, s->path, &m, e) != 0) {
            ret = -1;
            break;
        }
        if (fn(ctx, &m) != 0) break;
    }
    if (ret == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE) ret = sql_err(e, s->path, s->db, rc, "listing runs");
    sqlite3_finalize(st);
    return ret;
}

static int get_run_db(sqlite3 *db, const char *name, int64_t run_id, StoreRunMeta *out, KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(db, name, "SELECT " RUN_COLS " FROM run WHERE id = ?1", &st, "reading a run", e) != 0) return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW)
        ret = read_run_row(st, name, out, e);
    else if (rc == SQLITE_DONE)
        ret = kv_err(e, "%s: no run %lld", name, (long long)run_id);
    else
        ret = sql_err(e, name, db, rc, "reading a run");
    sqlite3_finalize(st);
    return ret;
}

int store_get_run(CostStore *s, int64_t run_id, StoreRunMeta *out, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    return get_run_db(s->db, s->path, run_id, out, e);
}

/* "CASE op WHEN 'gemm_qkv' THEN 0 ... END": orders points by the enum, whatever the names. */
static void op_rank_sql(char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "CASE op");
    for (int op = 0; op < OP_COUNT && k < cap; op++)
        k += (size_t)snprintf(buf + k, cap - k, " WHEN '%s' THEN %d", cost_op_name((CostOp)op), op);
    if (k < cap) snprintf(buf + k, cap - k, " ELSE %d END", OP_COUNT);
}

static int run_points_db(sqlite3 *db, const char *name, int64_t run_id, int op, StorePointFn fn, void *ctx, KvErr *e)
{
    if (op >= OP_COUNT) return kv_err(e, "%s: op %d out of range (0..%d)", name, op, OP_COUNT - 1);
    char rank[2048], sql[2600];
    op_rank_sql(rank, sizeof rank);
    snprintf(sql, sizeof sql,
             "SELECT " POINT_COLS " FROM point WHERE run_id = ?1 AND (?2 IS NULL OR op = ?2) "
             "ORDER BY %s, model, dtype, tp, p1, p2, p3",
             rank);
    sqlite3_stmt *st;
    if (prep(db, name, sql, &st, "reading points", e) != 0) return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK)
        rc = op < 0 ? sqlite3_bind_null(st, 2) : sqlite3_bind_text(st, 2, cost_op_name((CostOp)op), -1, SQLITE_STATIC);
    int ret = 0;
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            StorePoint p;
            if (read_point_row(st, 0, name, run_id, &p, e) != 0) {
                ret = -1;
                break;
            }
            if (fn(ctx, &p) != 0) break;
        }
    }
    if (ret == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE) ret = sql_err(e, name, db, rc, "reading points");
    sqlite3_finalize(st);
    return ret;
}

int store_run_points(CostStore *s, int64_t run_id, int op, StorePointFn fn, void *ctx, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    return run_points_db(s->db, s->path, run_id, op, fn, ctx, e);
}

int store_count_points(CostStore *s, int64_t run_id, int op, int64_t *n, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    if (op >= OP_COUNT) return kv_err(e, "%s: op %d out of range (0..%d)", s->path, op, OP_COUNT - 1);
    sqlite3_stmt *st;
    if (prep(s->db, s->path, "SELECT count(*) FROM point WHERE run_id = ?1 AND (?2 IS NULL OR op = ?2)", &st,
             "counting points", e) != 0)
        return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK)
        rc = op < 0 ? sqlite3_bind_null(st, 2) : sqlite3_bind_text(st, 2, cost_op_name((CostOp)op), -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    *n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int ret = rc == SQLITE_ROW ? 0 : sql_err(e, s->path, s->db, rc, "counting points");
    sqlite3_finalize(st);
    return ret;
}

int store_pick_run(CostStore *s, const char *device, const char *model, const char *dtype, int tp, CostOp op,
                   int64_t *run_id, KvErr *e)
{
    *run_id = 0;
    if (!s->db) return kv_err(e, "cost store: not open");
    if ((unsigned)op >= OP_COUNT) return kv_err(e, "%s: op %d out of range (0..%d)", s->path, (int)op, OP_COUNT - 1);
    if (!device) return kv_err(e, "%s: picking a run needs a device", s->path);
    int io = cost_op_is_io(op);
    sqlite3_stmt *st;
    if (prep(s->db, s->path,
             "SELECT r.id FROM run AS r WHERE r.complete = 1 AND r.device = ?1 AND EXISTS ("
             "  SELECT 1 FROM point AS p WHERE p.run_id = r.id AND p.op = ?2 AND p.model = ?3 AND p.tp = ?5"
             "  AND (?4 IS NULL OR p.dtype = ?4)) "
             "ORDER BY " STORE_RANK_SQL("r.backend") ", r.started_at DESC, r.id DESC LIMIT 1",
             &st, "picking a run", e) != 0)
        return -1;
    int rc = sqlite3_bind_text(st, 1, device, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, cost_op_name(op), -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 3, io || !model ? "" : model, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK)
        rc = io ? sqlite3_bind_null(st, 4) : sqlite3_bind_text(st, 4, dtype ? dtype : "", -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 5, io ? 1 : tp);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW)
        *run_id = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE)
        ret = sql_err(e, s->path, s->db, rc, "picking a run");
    sqlite3_finalize(st);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * Deterministic SQL dump
 * ------------------------------------------------------------------------------------------- */

static void dump_value(FILE *out, sqlite3_stmt *st, int col)
{
    switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER:
        fprintf(out, "%lld", (long long)sqlite3_column_int64(st, col));
        break;
    case SQLITE_FLOAT: {
        char buf[40];
        fmt_double(buf, sizeof buf, sqlite3_column_double(st, col));
        fputs(buf, out);
        break;
    }
    case SQLITE_TEXT: {
        const char *t = (const char *)sqlite3_column_text(st, col);
        fputc('\'', out);
        for (; t && *t; t++) {
            if (*t == '\'') fputc('\'', out);
            fputc(*t, out);
        }
        fputc('\'', out);
        break;
    }
    case SQLITE_BLOB: { /* not in our schema; printed faithfully anyway */
        const unsigned char *b = sqlite3_column_blob(st, col);
        int n = sqlite3_column_bytes(st, col);
        fputs("X'", out);
        for (int i = 0; i < n; i++) fprintf(out, "%02x", b[i]);
        fputc('\'', out);
        break;
    }
    default:
        fputs("NULL", out);
    }
}

static int dump_rows(CostStore *s, FILE *out, const char *sql, const char *table, int ncols, int64_t run_id,
                     KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(s->db, s->path, sql, &st, "dumping", e) != 0) return -1;
    int rc = run_id > 0 ? sqlite3_bind_int64(st, 1, run_id) : sqlite3_bind_null(st, 1);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            fprintf(out, "INSERT INTO %s VALUES(", table);
            for (int c = 0; c < ncols; c++) {
                if (c) fputc(',', out);
                dump_value(out, st, c);
            }
            fputs(");\n", out);
        }
    }
    int ret = rc == SQLITE_DONE ? 0 : sql_err(e, s->path, s->db, rc, "dumping");
    sqlite3_finalize(st);
    return ret;
}

int store_dump_sql_run(CostStore *s, int64_t run_id, FILE *out, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    if (s->in_run) return kv_err(e, "%s: cannot dump while run %lld is open", s->path, (long long)s->run_id);
    /* one read transaction: the counts in the header and the rows come from the same snapshot */
    if (exec_sql(s->db, s->path, "BEGIN", "starting the dump", e) != 0) return -1;
    int64_t nruns = 0, npoints = 0;
    int ret = -1;
    if (run_id > 0) {
        StoreRunMeta m;
        if (get_run_db(s->db, s->path, run_id, &m, e) != 0) goto done;
        nruns = 1;
    } else if (query_int(s->db, s->path, "SELECT count(*) FROM run", 0, 0, &nruns, "counting runs", e) != 0) {
        goto done;
    }
    if (query_int(s->db, s->path, "SELECT count(*) FROM point WHERE ?1 = 0 OR run_id = ?1", 1, run_id, &npoints,
                  "counting points", e) != 0)
        goto done;
    fprintf(out, DUMP_MAGIC "%d\n", STORE_SCHEMA_VERSION);
    fprintf(out, "-- %lld run%s, %lld point%s. Load with: kvcal import --db STORE.db THIS.sql\n", (long long)nruns,
            nruns == 1 ? "" : "s", (long long)npoints, npoints == 1 ? "" : "s");
    fputs("BEGIN TRANSACTION;\n", out);
    fprintf(out, "PRAGMA application_id = %d;\nPRAGMA user_version = %d;\n", STORE_APPLICATION_ID,
            STORE_SCHEMA_VERSION);
    for (size_t i = 0; i < KV_ARRAY_LEN(k_schema_sql); i++) fprintf(out, "%s;\n", k_schema_sql[i]);
    if (dump_rows(s, out, "SELECT " RUN_COLS " FROM run WHERE ?1 IS NULL OR id = ?1 ORDER BY id", "run", 15, run_id,
                  e) != 0)
        goto done;
    if (dump_rows(s, out,
                  "SELECT run_id, " POINT_COLS " FROM point WHERE ?1 IS NULL OR run_id = ?1 "
                  "ORDER BY run_id, op, model, dtype, tp, p1, p2, p3",
                  "point", 12, run_id, e) != 0)
        goto done;
    fputs("COMMIT;\n", out);
    if (ferror(out)) {
        kv_err(e, "%s: writing the dump failed", s->path);
        goto done;
    }
    ret = 0;
done:
    if (exec_sql(s->db, s->path, "COMMIT", "ending the dump", ret == 0 ? e : NULL) != 0) ret = -1;
    return ret;
}

int store_dump_sql(CostStore *s, FILE *out, KvErr *e) { return store_dump_sql_run(s, 0, out, e); }

/* ---------------------------------------------------------------------------------------------
 * SQL import: the dump runs in a private in-memory database (no ATTACH, few PRAGMAs allowed), is
 * checked like a store file, then its runs are copied into the store in one transaction.
 * ------------------------------------------------------------------------------------------- */

static int import_authorizer(void *ud, int action, const char *a1, const char *a2, const char *a3, const char *a4)
{
    (void)ud, (void)a2, (void)a3, (void)a4;
    switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
        return SQLITE_DENY; /* a dump must not reach other files (ATTACH, VACUUM INTO) */
    case SQLITE_PRAGMA:
        return a1 && (strcmp(a1, "application_id") == 0 || strcmp(a1, "user_version") == 0 ||
                      strcmp(a1, "foreign_keys") == 0)
                   ? SQLITE_OK
                   : SQLITE_DENY;
    default:
        return SQLITE_OK;
    }
}

static int parse_dump_header(const char *text, const char *origin, KvErr *e)
{
    size_t ml = strlen(DUMP_MAGIC);
    if (strncmp(text, DUMP_MAGIC, ml) != 0)
        return kv_err(e, "%s: line 1: not a kvsim cost store dump (expected '%sN')", origin, DUMP_MAGIC);
    const char *p = text + ml;
    long v = 0;
    int nd = 0;
    while (isdigit((unsigned char)*p) && nd < 9) v = v * 10 + (*p++ - '0'), nd++;
    if (nd == 0 || !(*p == '\n' || *p == '\r' || *p == '\0'))
        return kv_err(e, "%s: line 1: expected '%sN' with N a schema number", origin, DUMP_MAGIC);
    if (v > STORE_SCHEMA_VERSION)
        return kv_err(e, "%s: dump written by a newer kvsim (schema %ld, this build reads %d)", origin, v,
                      STORE_SCHEMA_VERSION);
    if (v < 1) return kv_err(e, "%s: line 1: schema %ld is not a kvsim schema", origin, v);
    return 0;
}

/* Skip whitespace and SQL comments, counting newlines into *line. */
static const char *skip_blank(const char *p, int *line)
{
    for (;;) {
        if (*p == '\n') {
            (*line)++;
            p++;
        } else if (isspace((unsigned char)*p)) {
            p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p && *p != '\n') p++;
        } else if (p[0] == '/' && p[1] == '*') {
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/')) *line += *p++ == '\n';
            if (*p) p += 2;
        } else {
            return p;
        }
    }
}

/* Run a script statement by statement, so an error can say on which line its statement starts. */
static int exec_script(sqlite3 *db, const char *sql, const char *origin, KvErr *e)
{
    int line = 1;
    const char *p = sql;
    for (;;) {
        p = skip_blank(p, &line);
        if (!*p) return 0;
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        int rc = sqlite3_prepare_v2(db, p, -1, &st, &tail);
        if (rc == SQLITE_OK && st) {
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        if (rc != SQLITE_OK) {
            kv_err(e, "%s: line %d: %s", origin, line, sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return -1;
        }
        sqlite3_finalize(st);
        if (!tail || tail == p) return 0;
        for (; p < tail; p++) line += *p == '\n';
    }
}

/* Ids of the runs added by this import, so that two equal runs of one dump are both kept. */
typedef struct {
    int64_t *v;
    size_t n, cap;
} IdList;

static int idlist_push(IdList *l, int64_t id)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        int64_t *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = id;
    return 0;
}

static int idlist_has(const IdList *l, int64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == id) return 1;
    return 0;
}

/* Whether the store already had (before this import) a run equal to m in every field but id. */
static int run_present(sqlite3 *db, const char *name, const StoreRunMeta *m, const IdList *added, int *found, KvErr *e)
{
    *found = 0;
    sqlite3_stmt *st;
    if (prep(db, name,
             "SELECT id FROM run WHERE backend = ?1 AND device = ?2 AND host = ?3 AND driver = ?4 AND cuda = ?5 "
             "AND git_rev = ?6 AND started_at = ?7 AND finished_at = ?8 AND model = ?9 AND dtype = ?10 "
             "AND tp = ?11 AND quick = ?12 AND notes = ?13 AND complete = ?14",
             &st, "looking for an equal run", e) != 0)
        return -1;
    const char *txt[] = {m->backend, m->device, m->host, m->driver, m->cuda, m->git_rev,
                         m->started_at, m->finished_at, m->model, m->dtype};
    int rc = SQLITE_OK;
    for (int i = 0; i < (int)KV_ARRAY_LEN(txt) && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_text(st, 1 + i, txt[i], -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 11, m->tp);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 12, m->quick);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 13, m->notes, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 14, m->complete);
    if (rc == SQLITE_OK)
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            if (!idlist_has(added, sqlite3_column_int64(st, 0))) *found = 1;
    int ret = rc == SQLITE_DONE ? 0 : sql_err(e, name, db, rc, "looking for an equal run");
    sqlite3_finalize(st);
    return ret;
}

/* An id for a run arriving with src_id: the same when free (so a dump loaded into an empty store
 * dumps back identically), else 0 (SQLite picks max + 1). */
static int choose_id(sqlite3 *db, const char *name, int64_t src_id, int64_t *id, KvErr *e)
{
    int64_t taken = 0;
    if (src_id <= 0) {
        *id = 0;
        return 0;
    }
    if (query_int(db, name, "SELECT count(*) FROM run WHERE id = ?1", 1, src_id, &taken, "checking run ids", e) != 0)
        return -1;
    *id = taken ? 0 : src_id;
    return 0;
}

static int copy_points(sqlite3 *src, const char *origin, int64_t src_run, CostStore *s, sqlite3_stmt *ins,
                       int64_t dst_run, int64_t *count, KvErr *e)
{
    sqlite3_stmt *st;
    if (prep(src, origin, "SELECT " POINT_COLS " FROM point WHERE run_id = ?1 ORDER BY op, model, dtype, tp, p1, p2, p3",
             &st, "reading the dump's points", e) != 0)
        return -1;
    int rc = sqlite3_bind_int64(st, 1, src_run), ret = 0;
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            StorePoint p;
            if (read_point_row(st, 0, origin, src_run, &p, e) != 0 || validate_point(origin, src_run, &p, e) != 0 ||
                insert_point(s->db, ins, s->path, dst_run, &p, e) != 0) {
                ret = -1;
                break;
            }
            (*count)++;
        }
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = sql_err(e, origin, src, rc, "reading the dump's points");
    sqlite3_finalize(st);
    return ret;
}

static int copy_runs(sqlite3 *src, const char *origin, CostStore *s, StoreImportStats *stats, KvErr *e)
{
    sqlite3_stmt *st = NULL, *ins = NULL;
    IdList added = {0};
    int ret = -1, rc;
    if (prep(s->db, s->path, k_insert_point_sql, &ins, "preparing the point insert", e) != 0) goto done;
    if (prep(src, origin, "SELECT " RUN_COLS " FROM run ORDER BY id", &st, "reading the dump's runs", e) != 0) goto done;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRunMeta m;
        if (read_run_row(st, origin, &m, e) != 0) goto done;
        char name[300];
        snprintf(name, sizeof name, "%s: run %lld", origin, (long long)m.id);
        if (validate_meta(name, &m, e) != 0) goto done;
        int found = 0;
        if (run_present(s->db, s->path, &m, &added, &found, e) != 0) goto done;
        if (found) {
            stats->runs_skipped++;
            continue;
        }
        int64_t want = 0, id = 0;
        if (choose_id(s->db, s->path, m.id, &want, e) != 0) goto done;
        if (insert_run(s->db, s->path, &m, want, m.complete, &id, e) != 0) goto done;
        if (idlist_push(&added, id) != 0) {
            kv_err(e, "%s: out of memory", origin);
            goto done;
        }
        if (copy_points(src, origin, m.id, s, ins, id, &stats->points_added, e) != 0) goto done;
        stats->runs_added++;
    }
    if (rc != SQLITE_DONE) {
        sql_err(e, origin, src, rc, "reading the dump's runs");
        goto done;
    }
    ret = 0;
done:
    sqlite3_finalize(st);
    sqlite3_finalize(ins);
    free(added.v);
    return ret;
}

int store_import_sql_stats(CostStore *s, const char *sql_text, const char *origin, StoreImportStats *stats,
                           KvErr *e)
{
    StoreImportStats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!origin) origin = "(dump)";
    if (!s->db) return kv_err(e, "cost store: not open");
    if (s->in_run) return kv_err(e, "%s: cannot import while run %lld is open", s->path, (long long)s->run_id);
    if (parse_dump_header(sql_text, origin, e) != 0) return -1;
    sqlite3 *mem = NULL;
    int rc = sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        kv_err(e, "%s: cannot open an in-memory database: %s", origin, mem ? sqlite3_errmsg(mem) : sqlite3_errstr(rc));
        sqlite3_close(mem);
        return -1;
    }
    int ret = -1;
    rc = sqlite3_set_authorizer(mem, import_authorizer, NULL);
    if (rc != SQLITE_OK) {
        sql_err(e, origin, mem, rc, "installing the import authorizer");
        goto done;
    }
    if (exec_script(mem, sql_text, origin, e) != 0) goto done;
    if (!sqlite3_get_autocommit(mem)) {
        kv_err(e, "%s: the dump ends inside its transaction (truncated? expected a final COMMIT)", origin);
        goto done;
    }
    if (schema_check(mem, origin, 0, 0, e) != 0) goto done;
    if (exec_sql(s->db, s->path, "BEGIN IMMEDIATE", "beginning the import", e) != 0) goto done;
    if (copy_runs(mem, origin, s, stats, e) != 0 || exec_sql(s->db, s->path, "COMMIT", "committing the import", e) != 0) {
        rollback_quietly(s->db);
        memset(stats, 0, sizeof *stats);
        goto done;
    }
    ret = 0;
done:
    sqlite3_close(mem);
    return ret;
}

int store_import_sql(CostStore *s, const char *sql_text, const char *origin, KvErr *e)
{
    return store_import_sql_stats(s, sql_text, origin, NULL, e);
}

/* ---------------------------------------------------------------------------------------------
 * CSV and JSON
 * ------------------------------------------------------------------------------------------- */

/* A growable array collected from a listing callback. */
typedef struct {
    void *v;
    size_t n, cap, elem;
    int oom;
} Collect;

static int collect_add(Collect *c, const void *item)
{
    if (c->oom) return 1;
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        void *nv = realloc(c->v, nc * c->elem);
        if (!nv) {
            c->oom = 1;
            return 1;
        }
        c->v = nv;
        c->cap = nc;
    }
    memcpy((char *)c->v + c->n++ * c->elem, item, c->elem);
    return 0;
}

static int collect_run(void *ctx, const StoreRunMeta *r) { return collect_add(ctx, r); }
static int collect_point(void *ctx, const StorePoint *p) { return collect_add(ctx, p); }

int store_runs_all(CostStore *s, int64_t run_id, StoreRunList *out, KvErr *e)
{
    Collect c = {NULL, 0, 0, sizeof(StoreRunMeta), 0};
    memset(out, 0, sizeof *out);
    if (run_id > 0) {
        StoreRunMeta m;
        if (store_get_run(s, run_id, &m, e) != 0) return -1;
        collect_add(&c, &m);
    } else if (store_list_runs(s, collect_run, &c, e) != 0) {
        free(c.v);
        return -1;
    }
    if (c.oom) {
        free(c.v);
        return kv_err(e, "%s: out of memory listing runs", s->path);
    }
    out->v = c.v;
    out->n = c.n;
    return 0;
}

int store_points_all(CostStore *s, int64_t run_id, int op, StorePointList *out, KvErr *e)
{
    Collect c = {NULL, 0, 0, sizeof(StorePoint), 0};
    memset(out, 0, sizeof *out);
    if (store_run_points(s, run_id, op, collect_point, &c, e) != 0) {
        free(c.v);
        return -1;
    }
    if (c.oom) {
        free(c.v);
        return kv_err(e, "%s: out of memory reading run %lld", s->path, (long long)run_id);
    }
    out->v = c.v;
    out->n = c.n;
    return 0;
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

typedef struct {
    FILE *out;
    const StoreRunMeta *run;
} CsvCtx;

static int csv_point(void *ctx, const StorePoint *p)
{
    CsvCtx *c = ctx;
    char m[40], lo[40], hi[40];
    fmt_double(m, sizeof m, p->median_ns);
    fmt_double(lo, sizeof lo, p->p10_ns);
    fmt_double(hi, sizeof hi, p->p90_ns);
    fprintf(c->out, "%lld,", (long long)c->run->id);
    csv_field(c->out, c->run->backend);
    fputc(',', c->out);
    csv_field(c->out, c->run->device);
    fprintf(c->out, ",%s,", cost_op_name(p->op));
    csv_field(c->out, p->model);
    fputc(',', c->out);
    csv_field(c->out, p->dtype);
    fprintf(c->out, ",%d,%lld,%lld,%lld,%d,%s,%s,%s\n", p->tp, (long long)p->p1, (long long)p->p2,
            (long long)p->p3, p->n, m, lo, hi);
    return 0;
}

int store_export_csv(CostStore *s, int64_t run_id, FILE *out, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    StoreRunList l;
    if (store_runs_all(s, run_id, &l, e) != 0) return -1;
    fputs(CSV_HEADER "\n", out);
    int ret = 0;
    for (size_t i = 0; i < l.n && ret == 0; i++) {
        CsvCtx c = {out, &l.v[i]};
        ret = store_run_points(s, l.v[i].id, -1, csv_point, &c, e);
    }
    free(l.v);
    if (ret == 0 && ferror(out)) ret = kv_err(e, "%s: writing the CSV export failed", s->path);
    return ret;
}

typedef struct {
    cJSON *arr;
    int oom;
} JsonCtx;

static int json_point(void *ctx, const StorePoint *p)
{
    JsonCtx *c = ctx;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(c->arr, o)) {
        cJSON_Delete(o);
        c->oom = 1;
        return 1;
    }
    int ok = cJSON_AddStringToObject(o, "op", cost_op_name(p->op)) && cJSON_AddStringToObject(o, "model", p->model) &&
             cJSON_AddStringToObject(o, "dtype", p->dtype) && cJSON_AddNumberToObject(o, "tp", p->tp) &&
             cJSON_AddNumberToObject(o, "p1", (double)p->p1) && cJSON_AddNumberToObject(o, "p2", (double)p->p2) &&
             cJSON_AddNumberToObject(o, "p3", (double)p->p3) && cJSON_AddNumberToObject(o, "n", p->n) &&
             cJSON_AddNumberToObject(o, "median_ns", p->median_ns) &&
             cJSON_AddNumberToObject(o, "p10_ns", p->p10_ns) && cJSON_AddNumberToObject(o, "p90_ns", p->p90_ns);
    if (!ok) c->oom = 1;
    return !ok;
}

static cJSON *json_run(const StoreRunMeta *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = cJSON_AddNumberToObject(o, "id", (double)m->id) && cJSON_AddStringToObject(o, "backend", m->backend) &&
             cJSON_AddStringToObject(o, "device", m->device) && cJSON_AddStringToObject(o, "host", m->host) &&
             cJSON_AddStringToObject(o, "driver", m->driver) && cJSON_AddStringToObject(o, "cuda", m->cuda) &&
             cJSON_AddStringToObject(o, "git_rev", m->git_rev) &&
             cJSON_AddStringToObject(o, "started_at", m->started_at) &&
             cJSON_AddStringToObject(o, "finished_at", m->finished_at) &&
             cJSON_AddStringToObject(o, "model", m->model) && cJSON_AddStringToObject(o, "dtype", m->dtype) &&
             cJSON_AddNumberToObject(o, "tp", m->tp) && cJSON_AddBoolToObject(o, "quick", m->quick) &&
             cJSON_AddBoolToObject(o, "complete", m->complete) && cJSON_AddStringToObject(o, "notes", m->notes);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int store_export_json(CostStore *s, int64_t run_id, FILE *out, KvErr *e)
{
    if (!s->db) return kv_err(e, "cost store: not open");
    StoreRunList l;
    if (store_runs_all(s, run_id, &l, e) != 0) return -1;
    int ret = -1;
    char *text = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *runs = root && cJSON_AddNumberToObject(root, "schema", STORE_SCHEMA_VERSION) ? cJSON_AddArrayToObject(root, "runs")
                                                                                       : NULL;
    if (!runs) goto oom;
    for (size_t i = 0; i < l.n; i++) {
        cJSON *r = json_run(&l.v[i]);
        if (!r || !cJSON_AddItemToArray(runs, r)) {
            cJSON_Delete(r);
            goto oom;
        }
        JsonCtx c = {cJSON_AddArrayToObject(r, "points"), 0};
        if (!c.arr) goto oom;
        if (store_run_points(s, l.v[i].id, -1, json_point, &c, e) != 0) goto done;
        if (c.oom) goto oom;
    }
    text = cJSON_Print(root);
    if (!text) goto oom;
    fputs(text, out);
    fputc('\n', out);
    ret = ferror(out) ? kv_err(e, "%s: writing the JSON export failed", s->path) : 0;
    goto done;
oom:
    kv_err(e, "%s: out of memory building the JSON export", s->path);
done:
    cJSON_free(text);
    cJSON_Delete(root);
    free(l.v);
    return ret;
}

/* One CSV row of the export format, parsed and validated. */
typedef struct {
    int line;
    int64_t src_run;
    char backend[16];
    char device[128];
    StorePoint p;
} CsvRow;

#define CSV_FIELD_CAP 256

/* Read one record (RFC 4180: quoted fields may hold commas, "" and newlines). Returns the number
 * of fields, 0 at the end of the text, -1 on error. *line is the current line, advanced. */
static int csv_record(const char **pp, int *line, char fields[][CSV_FIELD_CAP], int max, const char *origin, KvErr *e)
{
    const char *p = *pp;
    if (!*p) return 0;
    int nf = 0, start_line = *line;
    for (;;) {
        if (nf == max) return kv_err(e, "%s: line %d: more than %d fields", origin, start_line, max);
        char *f = fields[nf++];
        size_t k = 0;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) return kv_err(e, "%s: line %d: unterminated quoted field", origin, start_line);
                if (*p == '"' && p[1] != '"') {
                    p++;
                    break;
                }
                if (*p == '"') p++;
                if (*p == '\n') (*line)++;
                if (k + 1 >= CSV_FIELD_CAP)
                    return kv_err(e, "%s: line %d: field %d longer than %d bytes", origin, start_line, nf, CSV_FIELD_CAP - 1);
                f[k++] = *p++;
            }
            if (*p && *p != ',' && *p != '\r' && *p != '\n')
                return kv_err(e, "%s: line %d: field %d: text after the closing quote", origin, start_line, nf);
        } else {
            while (*p && *p != ',' && *p != '\r' && *p != '\n') {
                if (k + 1 >= CSV_FIELD_CAP)
                    return kv_err(e, "%s: line %d: field %d longer than %d bytes", origin, start_line, nf, CSV_FIELD_CAP - 1);
                f[k++] = *p++;
            }
        }
        f[k] = '\0';
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '\r') p++;
        if (*p == '\n') {
            p++;
            (*line)++;
        }
        *pp = p;
        return nf;
    }
}

static int csv_int(const char *s, int64_t lo, int64_t *out, const char *origin, int line, const char *field, KvErr *e)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo)
        return kv_err(e, "%s: line %d: field %s: expected an integer >= %lld, got '%s'", origin, line, field,
                      (long long)lo, s);
    *out = v;
    return 0;
}

static int csv_num(const char *s, double *out, const char *origin, int line, const char *field, KvErr *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return kv_err(e, "%s: line %d: field %s: expected a finite number of ns, got '%s'", origin, line, field, s);
    *out = v;
    return 0;
}

static int csv_text(const char *s, char *dst, size_t cap, const char *origin, int line, const char *field, KvErr *e)
{
    if (strlen(s) >= cap)
        return kv_err(e, "%s: line %d: field %s: longer than %zu bytes", origin, line, field, cap - 1);
    snprintf(dst, cap, "%s", s);
    return 0;
}

static int csv_parse_row(char f[][CSV_FIELD_CAP], int line, const char *origin, CsvRow *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    int64_t v;
    if (csv_int(f[0], 1, &r->src_run, origin, line, "run_id", e) != 0) return -1;
    if (csv_text(f[1], r->backend, sizeof r->backend, origin, line, "backend", e) != 0) return -1;
    if (!backend_ok(r->backend))
        return kv_err(e, "%s: line %d: field backend: '%s', expected cpu, cuda, spec or import", origin, line, r->backend);
    if (csv_text(f[2], r->device, sizeof r->device, origin, line, "device", e) != 0) return -1;
    if (!r->device[0]) return kv_err(e, "%s: line %d: field device: empty", origin, line);
    int op = cost_op_parse(f[3]);
    if (op < 0) return kv_err(e, "%s: line %d: field op: unknown op '%s'", origin, line, f[3]);
    r->p.op = (CostOp)op;
    if (csv_text(f[4], r->p.model, sizeof r->p.model, origin, line, "model", e) != 0) return -1;
    if (csv_text(f[5], r->p.dtype, sizeof r->p.dtype, origin, line, "dtype", e) != 0) return -1;
    if (csv_int(f[6], 1, &v, origin, line, "tp", e) != 0) return -1;
    if (v > INT_MAX) return kv_err(e, "%s: line %d: field tp: %lld too large", origin, line, (long long)v);
    r->p.tp = (int)v;
    if (csv_int(f[7], 0, &r->p.p1, origin, line, "p1", e) != 0) return -1;
    if (csv_int(f[8], 0, &r->p.p2, origin, line, "p2", e) != 0) return -1;
    if (csv_int(f[9], 0, &r->p.p3, origin, line, "p3", e) != 0) return -1;
    if (csv_int(f[10], 1, &v, origin, line, "n", e) != 0) return -1;
    if (v > INT_MAX) return kv_err(e, "%s: line %d: field n: %lld too large", origin, line, (long long)v);
    r->p.n = (int)v;
    if (csv_num(f[11], &r->p.median_ns, origin, line, "median_ns", e) != 0) return -1;
    if (csv_num(f[12], &r->p.p10_ns, origin, line, "p10_ns", e) != 0) return -1;
    if (csv_num(f[13], &r->p.p90_ns, origin, line, "p90_ns", e) != 0) return -1;
    normalize_point(&r->p);
    char name[300];
    snprintf(name, sizeof name, "%s: line %d", origin, line);
    return validate_point(name, r->src_run, &r->p, e);
}

/* Parse the whole CSV; rows in file order. Caller frees *rows. */
static int csv_parse(const char *text, const char *origin, CsvRow **rows, size_t *nrows, KvErr *e)
{
    char (*f)[CSV_FIELD_CAP] = malloc(CSV_NCOLS * sizeof *f);
    CsvRow *v = NULL;
    size_t n = 0, cap = 0;
    int line = 1, nf;
    const char *p = text;
    *rows = NULL;
    *nrows = 0;
    if (!f) return kv_err(e, "%s: out of memory", origin);
    static const char *const names[CSV_NCOLS] = {"run_id", "backend", "device", "op", "model", "dtype", "tp",
                                                 "p1", "p2", "p3", "n", "median_ns", "p10_ns", "p90_ns"};
    nf = csv_record(&p, &line, f, CSV_NCOLS, origin, e);
    if (nf < 0) goto fail;
    int header_ok = nf == CSV_NCOLS;
    for (int i = 0; header_ok && i < CSV_NCOLS; i++) header_ok = strcmp(f[i], names[i]) == 0;
    if (!header_ok) {
        kv_err(e, "%s: line 1: expected the header '%s'", origin, CSV_HEADER);
        goto fail;
    }
    for (;;) {
        int row_line = line;
        nf = csv_record(&p, &line, f, CSV_NCOLS, origin, e);
        if (nf < 0) goto fail;
        if (nf == 0) break;
        if (nf == 1 && f[0][0] == '\0') continue; /* blank line */
        if (nf != CSV_NCOLS) {
            kv_err(e, "%s: line %d: %d fields, expected %d (%s)", origin, row_line, nf, CSV_NCOLS, CSV_HEADER);
            goto fail;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            CsvRow *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                kv_err(e, "%s: out of memory", origin);
                goto fail;
            }
            v = nv;
            cap = nc;
        }
        if (csv_parse_row(f, row_line, origin, &v[n], e) != 0) goto fail;
        n++;
    }
    free(f);
    *rows = v;
    *nrows = n;
    return 0;
fail:
    free(f);
    free(v);
    return -1;
}

int store_import_csv_stats(CostStore *s, const char *csv_text, const char *origin, StoreImportStats *stats,
                           KvErr *e)
{
    StoreImportStats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!origin) origin = "(csv)";
    if (!s->db) return kv_err(e, "cost store: not open");
    if (s->in_run) return kv_err(e, "%s: cannot import while run %lld is open", s->path, (long long)s->run_id);
    CsvRow *rows;
    size_t n;
    if (csv_parse(csv_text, origin, &rows, &n, e) != 0) return -1;
    /* done[i]: row i has been written (as part of its source run's group) */
    char *done = calloc(n ? n : 1, 1);
    sqlite3_stmt *ins = NULL;
    int ret = -1;
    if (!done) {
        kv_err(e, "%s: out of memory", origin);
        goto out;
    }
    if (prep(s->db, s->path, k_insert_point_sql, &ins, "preparing the point insert", e) != 0) goto out;
    if (exec_sql(s->db, s->path, "BEGIN IMMEDIATE", "beginning the import", e) != 0) goto out;
    char now[32];
    now_iso(now, sizeof now);
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        const CsvRow *first = &rows[i];
        StoreRunMeta m;
        memset(&m, 0, sizeof m);
        snprintf(m.backend, sizeof m.backend, "%s", first->backend);
        snprintf(m.device, sizeof m.device, "%s", first->device);
        snprintf(m.started_at, sizeof m.started_at, "%s", now);
        snprintf(m.finished_at, sizeof m.finished_at, "%s", now);
        snprintf(m.dtype, sizeof m.dtype, "%s", first->p.dtype);
        m.tp = 1;
        m.complete = 1;
        snprintf(m.notes, sizeof m.notes, "imported from %.400s (run %lld there)", origin, (long long)first->src_run);
        for (size_t j = i; j < n; j++) { /* the run's model/dtype/tp: those of its first compute point */
            if (rows[j].src_run != first->src_run || cost_op_is_io(rows[j].p.op)) continue;
            snprintf(m.model, sizeof m.model, "%s", rows[j].p.model);
            snprintf(m.dtype, sizeof m.dtype, "%s", rows[j].p.dtype);
            m.tp = rows[j].p.tp;
            break;
        }
        int64_t want = 0, id = 0;
        if (choose_id(s->db, s->path, first->src_run, &want, e) != 0) goto rollback;
        if (insert_run(s->db, s->path, &m, want, 1, &id, e) != 0) goto rollback;
        for (size_t j = i; j < n; j++) {
            const CsvRow *r = &rows[j];
            if (r->src_run != first->src_run) continue;
            if (strcmp(r->backend, first->backend) != 0 || strcmp(r->device, first->device) != 0) {
                kv_err(e, "%s: line %d: run %lld has backend '%s', device '%s' here but '%s', '%s' on line %d", origin,
                       r->line, (long long)r->src_run, r->backend, r->device, first->backend, first->device,
                       first->line);
                goto rollback;
            }
            if (insert_point(s->db, ins, s->path, id, &r->p, e) != 0) {
                kv_err_prefix(e, "%s: line %d: ", origin, r->line);
                goto rollback;
            }
            done[j] = 1;
            stats->points_added++;
        }
        stats->runs_added++;
    }
    if (exec_sql(s->db, s->path, "COMMIT", "committing the import", e) != 0) goto rollback;
    ret = 0;
    goto out;
rollback:
    rollback_quietly(s->db);
    memset(stats, 0, sizeof *stats);
out:
    sqlite3_finalize(ins);
    free(done);
    free(rows);
    return ret;
}

int store_import_csv(CostStore *s, const char *csv_text, const char *origin, KvErr *e)
{
    return store_import_csv_stats(s, csv_text, origin, NULL, e);
}
