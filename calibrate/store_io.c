/* store_io.c — the cost store's text formats; see store_io.h.
 *
 * Responsible for: the deterministic SQL dump and its import, CSV and JSON export, CSV import.
 * Not responsible for: the store itself (sim/cost/store.c: open, schema, validation, rows),
 * printing (calibrate/cli/store_cmds.c) or choosing files.
 *
 * A dump is untrusted input. Its import never hands SQLite a statement it has not recognised as
 * one of the forms store_dump_sql writes: BEGIN TRANSACTION, PRAGMA application_id = N, PRAGMA
 * user_version = N, this build's CREATE statements (byte for byte), INSERT INTO run/point
 * VALUES(literals) and COMMIT. Each recognised statement then runs in a private in-memory
 * database under an authorizer that allows only what its form needs, the store's guard (limits,
 * an instruction budget per statement) and a page cap, so no input runs forever or grows without
 * bound. The in-memory copy is checked like a store file and its rows are read through the
 * validating readers before one transaction copies them into the store.
 *
 * Costs: dump O(points) in index order (no sort); SQL import O(dump bytes) to recognise and run,
 * then O(points · log points) to copy; CSV import O(rows · runs) to group rows by source run.
 * Invariants: an import either adds all its runs or nothing (one transaction, rolled back on
 * any error); what an export writes was read through the validating readers, so export →
 * import of the output always works.
 */
#include "calibrate/store_io.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost/store_int.h"

#define CSV_HEADER "run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns"
#define CSV_NCOLS 14

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
        store_fmt_double(buf, sizeof buf, sqlite3_column_double(st, col));
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
    default: /* the validating readers let no other type through */
        fputs("NULL", out);
    }
}

/* Rows of run (points = 0: columns STORE_RUN_COLS) or point (points = 1: run_id, STORE_POINT_COLS),
 * each validated by the store's readers before it is printed. */
static int dump_rows(CostStore *s, FILE *out, const char *sql, int points, int64_t run_id, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(s->db, s->path, sql, &st, "dumping", e) != 0) return -1;
    int ncols = points ? STORE_POINT_NCOLS : STORE_RUN_NCOLS, ret = 0;
    int rc = run_id > 0 ? sqlite3_bind_int64(st, 1, run_id) : sqlite3_bind_null(st, 1);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            StoreRunMeta m;
            StorePoint p;
            ret = points ? store_read_point_row(st, 1, s->path, sqlite3_column_int64(st, 0), &p, e)
                         : store_read_run_row(st, 0, s->path, &m, e);
            if (ret != 0) break;
            fprintf(out, "INSERT INTO %s VALUES(", points ? "point" : "run");
            for (int c = 0; c < ncols; c++) {
                if (c) fputc(',', out);
                dump_value(out, st, c);
            }
            fputs(");\n", out);
        }
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = store_sql_err(e, s->path, s->db, rc, "dumping");
    sqlite3_finalize(st);
    return ret;
}

int store_dump_sql_run(CostStore *s, int64_t run_id, FILE *out, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    if (s->in_run) return kv_err(e, "%s: cannot dump while run %lld is open", s->path, (long long)s->run_id);
    /* one read transaction: the counts in the header and the rows come from the same snapshot */
    if (store_exec(s->db, s->path, "BEGIN", "starting the dump", e) != 0) return -1;
    int64_t nruns = 0, npoints = 0;
    int ret = -1;
    if (run_id > 0) {
        StoreRunMeta m;
        if (store_get_run_db(s->db, s->path, run_id, &m, e) != 0) goto done;
        nruns = 1;
    } else if (store_query_int(s->db, s->path, "SELECT count(*) FROM run", 0, 0, &nruns, "counting runs", e) != 0) {
        goto done;
    }
    if (store_query_int(s->db, s->path, "SELECT count(*) FROM point WHERE ?1 = 0 OR run_id = ?1", 1, run_id,
                        &npoints, "counting points", e) != 0)
        goto done;
    fprintf(out, STORE_DUMP_MAGIC "%d\n", STORE_SCHEMA_VERSION);
    fprintf(out, "-- %lld run%s, %lld point%s. Load with: kvcal import --db STORE.db THIS.sql\n", (long long)nruns,
            nruns == 1 ? "" : "s", (long long)npoints, npoints == 1 ? "" : "s");
    fputs("BEGIN TRANSACTION;\n", out);
    fprintf(out, "PRAGMA application_id = %d;\nPRAGMA user_version = %d;\n", STORE_APPLICATION_ID,
            STORE_SCHEMA_VERSION);
    for (size_t i = 0; i < store_schema_count; i++) fprintf(out, "%s;\n", store_schema_sql[i]);
    if (dump_rows(s, out, "SELECT " STORE_RUN_COLS " FROM run WHERE ?1 IS NULL OR id = ?1 ORDER BY id", 0, run_id,
                  e) != 0)
        goto done;
    if (dump_rows(s, out,
                  "SELECT run_id, " STORE_POINT_COLS " FROM point WHERE ?1 IS NULL OR run_id = ?1 "
                  "ORDER BY run_id, op, model, dtype, tp, p1, p2, p3",
                  1, run_id, e) != 0)
        goto done;
    fputs("COMMIT;\n", out);
    if (ferror(out)) {
        kv_err(e, "%s: writing the dump failed", s->path);
        goto done;
    }
    ret = 0;
done:
    if (store_exec(s->db, s->path, "COMMIT", "ending the dump", ret == 0 ? e : NULL) != 0) ret = -1;
    return ret;
}

int store_dump_sql(CostStore *s, FILE *out, KvErr *e) { return store_dump_sql_run(s, 0, out, e); }

/* ---------------------------------------------------------------------------------------------
 * SQL import, step 1: recognise each statement as one of the dump's own forms.
 * ------------------------------------------------------------------------------------------- */

typedef enum { ST_BEGIN, ST_COMMIT, ST_PRAGMA, ST_SCHEMA, ST_INSERT_RUN, ST_INSERT_POINT } StmtKind;

/* p past the exact text w, or NULL. */
static const char *after(const char *p, const char *w)
{
    size_t n = strlen(w);
    return strncmp(p, w, n) == 0 ? p + n : NULL;
}

/* The end of a statement whose text ended at q: spaces, then ';' (consumed) or the end of the text. */
static const char *stmt_end(const char *q)
{
    if (!q) return NULL;
    while (*q == ' ' || *q == '\t' || *q == '\r') q++;
    if (*q == ';') return q + 1;
    return *q == '\0' || *q == '\n' ? q : NULL;
}

/* One SQL literal (a number, a 'string' with '' escapes, NULL); p past it, or NULL. */
static const char *scan_literal(const char *q)
{
    if (*q == '\'') {
        for (q++;; q++) {
            if (!*q) return NULL;
            if (*q == '\'') {
                if (q[1] != '\'') return q + 1;
                q++;
            }
        }
    }
    if (strncmp(q, "NULL", 4) == 0) return q + 4;
    int digits = 0;
    if (*q == '-' || *q == '+') q++;
    while (isdigit((unsigned char)*q)) q++, digits++;
    if (*q == '.')
        for (q++; isdigit((unsigned char)*q); q++) digits++;
    if (!digits) return NULL;
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!isdigit((unsigned char)*q)) return NULL;
        while (isdigit((unsigned char)*q)) q++;
    }
    return q;
}

/* "lit, lit, ...)" with exactly want literals; p past the ')', or NULL. */
static const char *scan_values(const char *q, int want)
{
    for (int n = 1;; n++) {
        while (*q == ' ') q++;
        if (!(q = scan_literal(q))) return NULL;
        while (*q == ' ') q++;
        if (*q == ')') return n == want ? q + 1 : NULL;
        if (*q != ',' || n == want) return NULL;
        q++;
    }
}

static const char *classify(const char *p, StmtKind *kind)
{
    const char *q;
    if ((q = stmt_end(after(p, "BEGIN TRANSACTION")))) return *kind = ST_BEGIN, q;
    if ((q = stmt_end(after(p, "COMMIT")))) return *kind = ST_COMMIT, q;
    if ((q = after(p, "PRAGMA application_id = ")) || (q = after(p, "PRAGMA user_version = "))) {
        if (*q == '-') q++;
        const char *d = q;
        while (isdigit((unsigned char)*q) && q - d < 12) q++;
        return q > d && (q = stmt_end(q)) ? (*kind = ST_PRAGMA, q) : NULL;
    }
    for (size_t i = 0; i < store_schema_count; i++)
        if ((q = stmt_end(after(p, store_schema_sql[i])))) return *kind = ST_SCHEMA, q;
    if ((q = after(p, "INSERT INTO run VALUES(")) && (q = stmt_end(scan_values(q, STORE_RUN_NCOLS))))
        return *kind = ST_INSERT_RUN, q;
    if ((q = after(p, "INSERT INTO point VALUES(")) && (q = stmt_end(scan_values(q, STORE_POINT_NCOLS))))
        return *kind = ST_INSERT_POINT, q;
    return NULL;
}

/* Second line of defence, at prepare time: only what the recognised form needs. A recognised
 * CREATE is this build's own text, so it may do what creating our schema does. */
static int import_authorizer(void *ud, int action, const char *a1, const char *a2, const char *a3, const char *a4)
{
    StmtKind k = *(const StmtKind *)ud;
    switch (k) {
    case ST_BEGIN:
    case ST_COMMIT:
        return action == SQLITE_TRANSACTION ? SQLITE_OK : SQLITE_DENY;
    case ST_PRAGMA:
        return action == SQLITE_PRAGMA && a1 && (!strcmp(a1, "application_id") || !strcmp(a1, "user_version"))
                   ? SQLITE_OK
                   : SQLITE_DENY;
    case ST_SCHEMA:
        return action == SQLITE_ATTACH || action == SQLITE_DETACH || action == SQLITE_PRAGMA ? SQLITE_DENY : SQLITE_OK;
    case ST_INSERT_RUN:
        return action == SQLITE_INSERT && a1 && !strcmp(a1, "run") ? SQLITE_OK : SQLITE_DENY;
    case ST_INSERT_POINT:
        return action == SQLITE_INSERT && a1 && !strcmp(a1, "point") ? SQLITE_OK : SQLITE_DENY;
    }
    return SQLITE_DENY;
}

static int parse_dump_header(const char *text, const char *origin, KvErr *e)
{
    size_t ml = strlen(STORE_DUMP_MAGIC);
    if (strncmp(text, STORE_DUMP_MAGIC, ml) != 0)
        return kv_err(e, "%s: line 1: not a kvsim cost store dump (expected '%sN')", origin, STORE_DUMP_MAGIC);
    const char *p = text + ml;
    long v = 0;
    int nd = 0;
    while (isdigit((unsigned char)*p) && nd < 9) v = v * 10 + (*p++ - '0'), nd++;
    if (nd == 0 || !(*p == '\n' || *p == '\r' || *p == '\0'))
        return kv_err(e, "%s: line 1: expected '%sN' with N a schema number", origin, STORE_DUMP_MAGIC);
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

/* Recognise and run the dump statement by statement, so an error can say on which line its
 * statement starts; g is mem's guard, given each statement's budget. */
static int exec_script(sqlite3 *db, StoreGuard *g, StmtKind *kind, const char *sql, const char *origin, KvErr *e)
{
    int line = 1;
    const char *p = sql;
    for (;;) {
        p = skip_blank(p, &line);
        if (!*p) return 0;
        const char *end = classify(p, kind);
        if (!end) {
            int n = (int)strcspn(p, "\n");
            return kv_err(e, "%s: line %d: not a statement of a kvsim cost store dump: '%.*s%s' (a dump holds only "
                             "BEGIN TRANSACTION, PRAGMA application_id/user_version, this build's CREATE statements, "
                             "INSERT INTO run/point VALUES(literals) and COMMIT)",
                          origin, line, n > 80 ? 80 : n, p, n > 80 ? "..." : "");
        }
        if (end - p > (1 << 20)) return kv_err(e, "%s: line %d: statement longer than 1 MiB", origin, line);
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        store_guard_reset(g, STORE_STMT_BUDGET);
        int rc = sqlite3_prepare_v2(db, p, (int)(end - p), &st, &tail);
        if (rc == SQLITE_OK && st) {
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        const char *rest = tail ? tail : end;
        while (rc == SQLITE_OK && rest < end && (isspace((unsigned char)*rest) || *rest == ';')) rest++;
        if (rc == SQLITE_OK && rest < end) {
            sqlite3_finalize(st);
            return kv_err(e, "%s: line %d: more than one statement", origin, line);
        }
        if (rc != SQLITE_OK) {
            const char *why = (rc & 0xff) == SQLITE_INTERRUPT ? "exceeded the instruction budget of one statement"
                              : (rc & 0xff) == SQLITE_FULL ? "the dump is larger than an import may be (in-memory page cap)"
                                                           : sqlite3_errmsg(db);
            kv_err(e, "%s: line %d: %s", origin, line, why);
            sqlite3_finalize(st);
            return -1;
        }
        sqlite3_finalize(st);
        for (; p < end; p++) line += *p == '\n';
    }
}

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
    if (store_prep(db, name,
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
    int ret = rc == SQLITE_DONE ? 0 : store_sql_err(e, name, db, rc, "looking for an equal run");
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
    if (store_query_int(db, name, "SELECT count(*) FROM run WHERE id = ?1", 1, src_id, &taken, "checking run ids", e) != 0)
        return -1;
    *id = taken ? 0 : src_id;
    return 0;
}

static int copy_points(sqlite3 *src, const char *origin, int64_t src_run, CostStore *s, sqlite3_stmt *ins,
                       int64_t dst_run, int64_t *count, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(src, origin, "SELECT " STORE_POINT_COLS " FROM point WHERE run_id = ?1 ORDER BY op, model, dtype, tp, p1, p2, p3",
             &st, "reading the dump's points", e) != 0)
        return -1;
    int rc = sqlite3_bind_int64(st, 1, src_run), ret = 0;
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            StorePoint p;
            if (store_read_point_row(st, 0, origin, src_run, &p, e) != 0 ||
                store_insert_point(s->db, ins, s->path, dst_run, &p, e) != 0) {
                ret = -1;
                break;
            }
            (*count)++;
        }
    }
    if (ret == 0 && rc != SQLITE_DONE) ret = store_sql_err(e, origin, src, rc, "reading the dump's points");
    sqlite3_finalize(st);
    return ret;
}

static int copy_runs(sqlite3 *src, const char *origin, CostStore *s, StoreImportStats *stats, KvErr *e)
{
    sqlite3_stmt *st = NULL, *ins = NULL;
    IdList added = {0};
    int ret = -1, rc;
    if (store_prep(s->db, s->path, store_insert_point_sql, &ins, "preparing the point insert", e) != 0) goto done;
    if (store_prep(src, origin, "SELECT " STORE_RUN_COLS " FROM run ORDER BY id", &st, "reading the dump's runs", e) != 0) goto done;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRunMeta m;
        if (store_read_run_row(st, 0, origin, &m, e) != 0) goto done;
        int found = 0;
        if (run_present(s->db, s->path, &m, &added, &found, e) != 0) goto done;
        if (found) {
            stats->runs_skipped++;
            continue;
        }
        int64_t want = 0, id = 0;
        if (choose_id(s->db, s->path, m.id, &want, e) != 0) goto done;
        if (store_insert_run(s->db, s->path, &m, want, m.complete, &id, e) != 0) goto done;
        if (idlist_push(&added, id) != 0) {
            kv_err(e, "%s: out of memory", origin);
            goto done;
        }
        if (copy_points(src, origin, m.id, s, ins, id, &stats->points_added, e) != 0) goto done;
        stats->runs_added++;
    }
    if (rc != SQLITE_DONE) {
        store_sql_err(e, origin, src, rc, "reading the dump's runs");
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
    if (store_enter(s, e) != 0) return -1;
    if (s->readonly) return kv_err(e, "%s: opened read-only; cannot import", s->path);
    if (s->in_run) return kv_err(e, "%s: cannot import while run %lld is open", s->path, (long long)s->run_id);
    size_t len = strnlen(sql_text, STORE_IMPORT_MAX_BYTES + 1);
    if (len > STORE_IMPORT_MAX_BYTES)
        return kv_err(e, "%s: larger than an import may be (%d MiB)", origin, STORE_IMPORT_MAX_BYTES >> 20);
    if (parse_dump_header(sql_text, origin, e) != 0) return -1;
    sqlite3 *mem = NULL;
    int rc = sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        kv_err(e, "%s: cannot open an in-memory database: %s", origin, mem ? sqlite3_errmsg(mem) : sqlite3_errstr(rc));
        sqlite3_close(mem);
        return -1;
    }
    int ret = -1;
    StoreGuard g;
    StmtKind kind = ST_BEGIN;
    char pages[64];
    snprintf(pages, sizeof pages, "PRAGMA max_page_count = %d", STORE_IMPORT_MAX_PAGES);
    if (store_guard_install(mem, &g, STORE_STMT_BUDGET, origin, e) != 0) goto done;
    if (store_exec(mem, origin, "PRAGMA page_size = 4096", "sizing the in-memory database", e) != 0 ||
        store_exec(mem, origin, pages, "capping the in-memory database", e) != 0)
        goto done;
    rc = sqlite3_set_authorizer(mem, import_authorizer, &kind);
    if (rc != SQLITE_OK) {
        store_sql_err(e, origin, mem, rc, "installing the import authorizer");
        goto done;
    }
    if (exec_script(mem, &g, &kind, sql_text, origin, e) != 0) goto done;
    sqlite3_set_authorizer(mem, NULL, NULL); /* from here on only our own statements run on mem */
    if (!sqlite3_get_autocommit(mem)) {
        kv_err(e, "%s: the dump ends inside its transaction (truncated? expected a final COMMIT)", origin);
        goto done;
    }
    store_guard_reset(&g, STORE_CALL_BUDGET);
    if (store_schema_check(mem, origin, 0, 0, e) != 0) goto done;
    if (store_exec(s->db, s->path, "BEGIN IMMEDIATE", "beginning the import", e) != 0) goto done;
    if (copy_runs(mem, origin, s, stats, e) != 0 || store_exec(s->db, s->path, "COMMIT", "committing the import", e) != 0) {
        store_rollback_quietly(s->db);
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


typedef struct {
    FILE *out;
    const StoreRunMeta *run;
} CsvCtx;

static int csv_point(void *ctx, const StorePoint *p)
{
    CsvCtx *c = ctx;
    char m[40], lo[40], hi[40];
    store_fmt_double(m, sizeof m, p->median_ns);
    store_fmt_double(lo, sizeof lo, p->p10_ns);
    store_fmt_double(hi, sizeof hi, p->p90_ns);
    fprintf(c->out, "%lld,", (long long)c->run->id);
    kv_csv_field(c->out, c->run->backend);
    fputc(',', c->out);
    kv_csv_field(c->out, c->run->device);
    fprintf(c->out, ",%s,", cost_op_name(p->op));
    kv_csv_field(c->out, p->model);
    fputc(',', c->out);
    kv_csv_field(c->out, p->dtype);
    fprintf(c->out, ",%d,%lld,%lld,%lld,%d,%s,%s,%s\n", p->tp, (long long)p->p1, (long long)p->p2,
            (long long)p->p3, p->n, m, lo, hi);
    return 0;
}

int store_export_csv(CostStore *s, int64_t run_id, FILE *out, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
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
    if (store_enter(s, e) != 0) return -1;
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
    int64_t v = 0;
    if (csv_int(f[0], 1, &r->src_run, origin, line, "run_id", e) != 0) return -1;
    if (csv_text(f[1], r->backend, sizeof r->backend, origin, line, "backend", e) != 0) return -1;
    if (!store_backend_ok(r->backend))
        return kv_err(e, "%s: line %d: field backend: '%s', expected cpu, cuda, spec, import or measured", origin, line, r->backend);
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
    store_normalize_point(&r->p);
    char name[300];
    snprintf(name, sizeof name, "%s: line %d", origin, line);
    return store_validate_point(name, r->src_run, &r->p, e);
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

/* Rows grouped by source run: sorted by (src_run, file order), O(rows log rows). */
typedef struct {
    int64_t src_run;
    size_t row;
} RowKey;

static int cmp_rowkey(const void *a, const void *b)
{
    const RowKey *x = a, *y = b;
    if (x->src_run != y->src_run) return x->src_run < y->src_run ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

/* Groups (start index into the sorted keys) ordered by their first row, i.e. file order. */
static int cmp_group(const void *a, const void *b, void *keys)
{
    const RowKey *k = keys;
    size_t x = k[*(const size_t *)a].row, y = k[*(const size_t *)b].row;
    return x < y ? -1 : x > y;
}

int store_import_csv_stats(CostStore *s, const char *csv_text, const char *origin, StoreImportStats *stats,
                           KvErr *e)
{
    StoreImportStats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!origin) origin = "(csv)";
    if (store_enter(s, e) != 0) return -1;
    if (s->readonly) return kv_err(e, "%s: opened read-only; cannot import", s->path);
    if (s->in_run) return kv_err(e, "%s: cannot import while run %lld is open", s->path, (long long)s->run_id);
    if (strnlen(csv_text, STORE_IMPORT_MAX_BYTES + 1) > STORE_IMPORT_MAX_BYTES)
        return kv_err(e, "%s: larger than an import may be (%d MiB)", origin, STORE_IMPORT_MAX_BYTES >> 20);
    CsvRow *rows;
    size_t n, ng = 0;
    if (csv_parse(csv_text, origin, &rows, &n, e) != 0) return -1;
    RowKey *keys = malloc((n ? n : 1) * sizeof *keys);
    size_t *groups = malloc((n ? n : 1) * sizeof *groups);
    sqlite3_stmt *ins = NULL;
    int ret = -1;
    if (!keys || !groups) {
        kv_err(e, "%s: out of memory", origin);
        goto out;
    }
    for (size_t i = 0; i < n; i++) keys[i] = (RowKey){rows[i].src_run, i};
    qsort(keys, n, sizeof *keys, cmp_rowkey);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || keys[i].src_run != keys[i - 1].src_run) groups[ng++] = i;
    qsort_r(groups, ng, sizeof *groups, cmp_group, keys);
    if (store_prep(s->db, s->path, store_insert_point_sql, &ins, "preparing the point insert", e) != 0) goto out;
    if (store_exec(s->db, s->path, "BEGIN IMMEDIATE", "beginning the import", e) != 0) goto out;
    char now[32];
    store_now_iso(now, sizeof now);
    for (size_t g = 0; g < ng; g++) {
        size_t k0 = groups[g], k1 = k0;
        while (k1 < n && keys[k1].src_run == keys[k0].src_run) k1++;
        const CsvRow *first = &rows[keys[k0].row];
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
        for (size_t k = k0; k < k1; k++) { /* the run's model/dtype/tp: those of its first compute point */
            const CsvRow *r = &rows[keys[k].row];
            if (cost_op_is_io(r->p.op)) continue;
            snprintf(m.model, sizeof m.model, "%s", r->p.model);
            snprintf(m.dtype, sizeof m.dtype, "%s", r->p.dtype);
            m.tp = r->p.tp;
            break;
        }
        int64_t want = 0, id = 0;
        if (choose_id(s->db, s->path, first->src_run, &want, e) != 0) goto rollback;
        if (store_insert_run(s->db, s->path, &m, want, 1, &id, e) != 0) goto rollback;
        for (size_t k = k0; k < k1; k++) {
            const CsvRow *r = &rows[keys[k].row];
            if (strcmp(r->backend, first->backend) != 0 || strcmp(r->device, first->device) != 0) {
                kv_err(e, "%s: line %d: run %lld has backend '%s', device '%s' here but '%s', '%s' on line %d", origin,
                       r->line, (long long)r->src_run, r->backend, r->device, first->backend, first->device,
                       first->line);
                goto rollback;
            }
            if (store_insert_point(s->db, ins, s->path, id, &r->p, e) != 0) {
                kv_err_prefix(e, "%s: line %d: ", origin, r->line);
                goto rollback;
            }
            stats->points_added++;
        }
        stats->runs_added++;
    }
    if (store_exec(s->db, s->path, "COMMIT", "committing the import", e) != 0) goto rollback;
    ret = 0;
    goto out;
rollback:
    store_rollback_quietly(s->db);
    memset(stats, 0, sizeof *stats);
out:
    sqlite3_finalize(ins);
    free(groups);
    free(keys);
    free(rows);
    return ret;
}

int store_import_csv(CostStore *s, const char *csv_text, const char *origin, KvErr *e)
{
    return store_import_csv_stats(s, csv_text, origin, NULL, e);
}

