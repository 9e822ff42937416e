/* sweep_db.c — kvsim sweep's results database; see sweep_db.h and sweep.h. */
#include "sim/cli/sweep_db.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/cli/sweep.h"
#include "sim/cost/store.h"
#include "sim/engine/sim.h"

/* ---------------------------------------------------------------- database */

#define SWEEP_APPLICATION_ID 0x4b565357 /* 'KVSW' (PRAGMA application_id) */
#define SWEEP_SCHEMA_VERSION 1          /* PRAGMA user_version */

/* The tables, as executed at creation and as sqlite_master keeps them (compared on open). */
static const char *const k_tables[] = {
    "CREATE TABLE point(id INTEGER PRIMARY KEY, params TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL CHECK(status IN ('pending','done','failed')))",
    "CREATE TABLE metric(point_id INTEGER NOT NULL REFERENCES point(id), policy TEXT NOT NULL,"
    " name TEXT NOT NULL, value REAL, PRIMARY KEY(point_id, policy, name))",
    "CREATE TABLE failure(point_id INTEGER PRIMARY KEY REFERENCES point(id), message TEXT NOT NULL)",
};
/* Every object of a sweep database (sql: index into k_tables; -1: an automatic index, no text). */
static const struct {
    const char *type, *name;
    int sql;
} k_objects[] = {
    {"table", "point", 0}, {"index", "sqlite_autoindex_point_1", -1}, {"table", "metric", 1},
    {"index", "sqlite_autoindex_metric_1", -1}, {"table", "failure", 2},
};

static int db_fail(sqlite3 *db, const char *path, const char *what, KvErr *e)
{
    return kv_err(e, "%s: %s: %s", path, what, db ? sqlite3_errmsg(db) : "cannot open");
}

static int db_int(sqlite3 *db, const char *path, const char *sql, int64_t *out, KvErr *e)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) {
        if ((rc & 0xff) == SQLITE_NOTADB) return kv_err(e, "%s: not an SQLite database, not a sweep database", path);
        return db_fail(db, path, sql, e);
    }
    return 0;
}

/* The four letters of an application id when they are printable ("'KVSM'"), else "". */
static void app_letters(int64_t app, char *buf, size_t cap)
{
    char c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (char)((uint32_t)app >> (24 - 8 * i) & 0xff);
        if (c[i] < 0x20 || c[i] > 0x7e) {
            buf[0] = '\0';
            return;
        }
    }
    snprintf(buf, cap, " '%.4s'", c);
}

/* sqlite_master holds exactly k_objects with our SQL (and the statistics tables ANALYZE adds): 1;
 * anything else: 0 with what differs in why. */
static int db_objects_ours(sqlite3 *db, const char *path, char *why, size_t cap, KvErr *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT type, name, sql FROM sqlite_master ORDER BY rowid", -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, path, "reading the schema", e);
    int seen[KV_ARRAY_LEN(k_objects)] = {0}, ours = 1, rc;
    why[0] = '\0';
    while (ours && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 0), *nm = (const char *)sqlite3_column_text(st, 1);
        const char *sql = (const char *)sqlite3_column_text(st, 2);
        if (!type || !nm) {
            snprintf(why, cap, "a schema entry without type or name");
            ours = 0;
            break;
        }
        size_t k = 0;
        while (k < KV_ARRAY_LEN(k_objects) && strcmp(nm, k_objects[k].name)) k++;
        if (k == KV_ARRAY_LEN(k_objects)) {
            if (!strcmp(type, "table") && !strncmp(nm, "sqlite_stat", 11)) continue;
            snprintf(why, cap, "%.20s '%.100s'", type, nm);
            ours = 0;
        } else if (strcmp(type, k_objects[k].type) ||
                   (k_objects[k].sql < 0 ? sql != NULL : !sql || strcmp(sql, k_tables[k_objects[k].sql]))) {
            snprintf(why, cap, "%.20s '%.100s' differs from a sweep database's", type, nm);
            ours = 0;
        } else {
            seen[k] = 1;
        }
    }
    if (ours && rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return db_fail(db, path, "reading the schema", e);
    }
    sqlite3_finalize(st);
    for (size_t k = 0; ours && k < KV_ARRAY_LEN(k_objects); k++)
        if (!seen[k]) {
            snprintf(why, cap, "no %s '%s'", k_objects[k].type, k_objects[k].name);
            ours = 0;
        }
    return ours;
}

/* What an open file is. 0: ours (*state: 0 a sweep database of this schema, 1 an empty database
 * (no schema, no ids: one to create ours in), 2 a sweep database written before databases carried
 * their id: exactly our tables, application_id 0); -1: refused, the message says what it is. */
static int db_identify(sqlite3 *db, const char *path, int *state, KvErr *e)
{
    int64_t app, ver, nobj;
    if (db_int(db, path, "PRAGMA application_id", &app, e) != 0 || db_int(db, path, "PRAGMA user_version", &ver, e) != 0 ||
        db_int(db, path, "SELECT count(*) FROM sqlite_master", &nobj, e) != 0)
        return -1;
    char letters[16], why[300];
    app_letters(app, letters, sizeof letters);
    if (app == STORE_APPLICATION_ID)
        return kv_err(e, "%s: a kvsim cost store, not a sweep database (application_id 0x%08x 'KVSM': kvcal writes it, "
                         "kvsim --costs reads it); nothing was written to it",
                      path, (unsigned)app);
    if (app == SWEEP_APPLICATION_ID) {
        if (ver > SWEEP_SCHEMA_VERSION)
            return kv_err(e, "%s: a sweep database of a newer kvsim (schema %lld; this build reads schema %d)", path,
                          (long long)ver, SWEEP_SCHEMA_VERSION);
        if (ver < 1) return kv_err(e, "%s: a sweep database with schema %lld, which no kvsim writes", path, (long long)ver);
        int ours = db_objects_ours(db, path, why, sizeof why, e);
        if (ours < 0) return -1;
        if (!ours) return kv_err(e, "%s: a damaged sweep database (%s)", path, why);
        *state = 0;
        return 0;
    }
    if (app == 0 && ver == 0 && nobj == 0) {
        *state = 1;
        return 0;
    }
    if (app == 0) {
        int ours = db_objects_ours(db, path, why, sizeof why, e);
        if (ours < 0) return -1;
        if (ours && ver == 0) {
            *state = 2;
            return 0;
        }
        return kv_err(e, "%s: another application's database (application_id 0x00000000, user_version %lld, %lld schema "
                         "objects: %s), not a sweep database; nothing was written to it",
                      path, (long long)ver, (long long)nobj, ours ? "the tables of a sweep database" : why);
    }
    return kv_err(e, "%s: another application's database (application_id 0x%08x%s), not a sweep database; nothing was "
                     "written to it",
                  path, (unsigned)app, letters);
}

/* Create our tables and ids in an empty database (state 1), or write the ids into a database of
 * the schema before them (state 2: adopted), in one transaction. */
static int db_make_ours(sqlite3 *db, const char *path, int state, KvErr *e)
{
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return db_fail(db, path, "BEGIN", e);
    int64_t nobj = 0;
    int again = 0;
    if (db_int(db, path, "SELECT count(*) FROM sqlite_master", &nobj, e) != 0) goto fail;
    if (state == 1 && nobj > 0) { /* created by another process while we waited for the lock: check it again */
        again = 1;
    } else {
        for (size_t i = 0; state == 1 && i < KV_ARRAY_LEN(k_tables); i++)
            if (sqlite3_exec(db, k_tables[i], NULL, NULL, NULL) != SQLITE_OK) {
                db_fail(db, path, "creating the tables", e);
                goto fail;
            }
        char sql[128];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d", SWEEP_APPLICATION_ID,
                 SWEEP_SCHEMA_VERSION);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            db_fail(db, path, "setting application_id and user_version", e);
            goto fail;
        }
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        db_fail(db, path, "COMMIT", e);
        goto fail;
    }
    if (again) {
        int st2 = -1;
        if (db_identify(db, path, &st2, e) != 0) return -1;
        if (st2 != 0) return db_make_ours(db, path, st2, e);
    }
    return 0;
fail:
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Open a sweep database. create: a missing or empty file becomes one, and one of the schema before
 * the ids is adopted (its ids written); else it must exist and be ours, and is only read. Anything
 * else is refused before a byte is written, naming what it is. */
int db_open(sqlite3 **db, const char *path, int create, KvErr *e)
{
    *db = NULL;
    struct stat sb;
    int exists = stat(path, &sb) == 0;
    if (!exists && (errno != ENOENT || !create))
        return kv_err(e, "%s: %s", path, errno == ENOENT ? "no such sweep database" : strerror(errno));
    if (exists && !S_ISREG(sb.st_mode)) return kv_err(e, "%s: not a regular file, not a sweep database", path);
    if (exists && sb.st_size > 0) { /* SQLite's own check comes at the first read; this one names the file's kind */
        char head[16] = {0};
        FILE *f = fopen(path, "rb");
        size_t got = f ? fread(head, 1, sizeof head, f) : 0;
        if (f) fclose(f);
        if (!f) return kv_err(e, "%s: cannot open: %s", path, strerror(errno));
        if (got < sizeof head || memcmp(head, "SQLite format 3", 16) != 0)
            return kv_err(e, "%s: not an SQLite database (it does not start with \"SQLite format 3\"), not a sweep database; "
                             "nothing was written to it",
                          path);
    }
    int flags = create ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
        int rc = db_fail(*db, path, "open", e);
        sqlite3_close(*db);
        *db = NULL;
        return rc;
    }
    sqlite3_busy_timeout(*db, 10000);
    int state = -1;
    if (db_identify(*db, path, &state, e) != 0 || (state == 1 && !create &&
                                                    kv_err(e, "%s: an empty database, not a sweep database", path)) ||
        (state != 0 && create && db_make_ours(*db, path, state, e) != 0)) {
        sqlite3_close(*db);
        *db = NULL;
        if (!exists) unlink(path); /* ours, created empty just now */
        return -1;
    }
    return 0;
}

static int db_exec(sqlite3 *db, const char *path, const char *sql, KvErr *e)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return db_fail(db, path, sql, e);
    return 0;
}

/* Register every point (new ones get ids in enumeration order); ids[i], status[i]: 0 pending,
 * 1 done, 2 failed. */
int db_register(sqlite3 *db, const char *path, char **params, int n, int64_t *ids, int *status, KvErr *e)
{
    sqlite3_stmt *ins = NULL, *sel = NULL;
    if (db_exec(db, path, "BEGIN IMMEDIATE", e) != 0) return -1;
    int rc = -1;
    if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO point(params, status) VALUES(?, 'pending')", -1, &ins, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT id, status FROM point WHERE params = ?", -1, &sel, NULL) != SQLITE_OK) {
        db_fail(db, path, "prepare", e);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_text(ins, 1, params[i], -1, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            db_fail(db, path, "insert point", e);
            goto done;
        }
        sqlite3_reset(sel);
        sqlite3_bind_text(sel, 1, params[i], -1, SQLITE_STATIC);
        if (sqlite3_step(sel) != SQLITE_ROW) {
            db_fail(db, path, "select point", e);
            goto done;
        }
        ids[i] = sqlite3_column_int64(sel, 0);
        const char *st = (const char *)sqlite3_column_text(sel, 1);
        status[i] = !strcmp(st, "done") ? 1 : !strcmp(st, "failed") ? 2 : 0;
    }
    rc = 0;
done:
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    if (db_exec(db, path, rc == 0 ? "COMMIT" : "ROLLBACK", rc == 0 ? e : NULL) != 0) rc = -1;
    return rc;
}

/* One finished point: its metric rows (or its failure) and its status, in one transaction. */
int db_store(sqlite3 *db, const char *path, int64_t id, const PointResult *r, KvErr *e)
{
    if (db_exec(db, path, "BEGIN IMMEDIATE", e) != 0) return -1;
    sqlite3_stmt *st = NULL;
    int rc = -1;
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM metric WHERE point_id = %lld; DELETE FROM failure WHERE point_id = %lld",
             (long long)id, (long long)id);
    if (db_exec(db, path, sql, e) != 0) goto done;
    if (r->error[0]) {
        if (sqlite3_prepare_v2(db, "INSERT INTO failure(point_id, message) VALUES(?, ?)", -1, &st, NULL) != SQLITE_OK) goto fail;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, r->error, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE) goto fail;
    } else {
        if (sqlite3_prepare_v2(db, "INSERT INTO metric(point_id, policy, name, value) VALUES(?, ?, ?, ?)", -1, &st, NULL) !=
            SQLITE_OK)
            goto fail;
        for (int i = 0; i < r->n; i++) {
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_text(st, 2, r->m[i].policy, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 3, r->m[i].name, -1, SQLITE_STATIC);
            if (isfinite(r->m[i].value)) sqlite3_bind_double(st, 4, r->m[i].value);
            else sqlite3_bind_null(st, 4);
            if (sqlite3_step(st) != SQLITE_DONE) goto fail;
        }
    }
    snprintf(sql, sizeof sql, "UPDATE point SET status = '%s' WHERE id = %lld", r->error[0] ? "failed" : "done", (long long)id);
    if (db_exec(db, path, sql, e) != 0) goto done;
    rc = 0;
    goto done;
fail:
    db_fail(db, path, "store a point", e);
done:
    sqlite3_finalize(st);
    if (db_exec(db, path, rc == 0 ? "COMMIT" : "ROLLBACK", rc == 0 ? e : NULL) != 0) rc = -1;
    return rc;
}

/* The tidy CSV: point, one column per setting that any point names (first appearance order),
 * policy, metric, value; a row per done point × policy × metric, in point id order. */
int db_export_csv(sqlite3 *db, const char *dbpath, const char *csv, KvErr *e)
{
    sqlite3_stmt *st = NULL;
    char **cols = NULL;
    int ncols = 0, rc = -1;
    KvAtomicFile af;
    memset(&af, 0, sizeof af);
    if (sqlite3_prepare_v2(db, "SELECT params FROM point ORDER BY id", -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, dbpath, "read points", e);
    while (sqlite3_step(st) == SQLITE_ROW) {
        cJSON *p = cJSON_Parse((const char *)sqlite3_column_text(st, 0));
        for (const cJSON *it = p ? p->child : NULL; it; it = it->next) {
            int known = 0;
            for (int i = 0; i < ncols && !known; i++) known = !strcmp(cols[i], it->string);
            if (known) continue;
            char **c2 = realloc(cols, (size_t)(ncols + 1) * sizeof *c2);
            if (!c2 || !(c2[ncols] = strdup(it->string))) {
                cols = c2 ? c2 : cols;
                cJSON_Delete(p);
                kv_err(e, "out of memory");
                goto done;
            }
            cols = c2;
            ncols++;
        }
        cJSON_Delete(p);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (kv_atomic_open(&af, csv, e) != 0) goto done;
    fputs("point", af.f);
    for (int i = 0; i < ncols; i++) {
        fputc(',', af.f);
        kv_csv_field(af.f, cols[i]);
    }
    fputs(",policy,metric,value\n", af.f);
    if (sqlite3_prepare_v2(db,
                           "SELECT p.id, p.params, m.policy, m.name, m.value FROM metric m JOIN point p ON p.id = m.point_id "
                           "WHERE p.status = 'done' ORDER BY p.id, m.rowid",
                           -1, &st, NULL) != SQLITE_OK) {
        db_fail(db, dbpath, "read metrics", e);
        kv_atomic_abort(&af);
        goto done;
    }
    int64_t last = -1;
    cJSON *params = NULL;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (id != last) {
            cJSON_Delete(params);
            params = cJSON_Parse((const char *)sqlite3_column_text(st, 1));
            last = id;
        }
        fprintf(af.f, "%lld", (long long)id);
        for (int i = 0; i < ncols; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, cols[i]);
            fputc(',', af.f);
            if (cJSON_IsString(v)) kv_csv_field(af.f, v->valuestring);
        }
        fputc(',', af.f);
        kv_csv_field(af.f, (const char *)sqlite3_column_text(st, 2));
        fputc(',', af.f);
        kv_csv_field(af.f, (const char *)sqlite3_column_text(st, 3));
        if (sqlite3_column_type(st, 4) == SQLITE_NULL) fputs(",\n", af.f);
        else fprintf(af.f, ",%.17g\n", sqlite3_column_double(st, 4));
    }
    cJSON_Delete(params);
    rc = kv_atomic_commit(&af, e);
done:
    sqlite3_finalize(st);
    for (int i = 0; i < ncols; i++) free(cols[i]);
    free(cols);
    return rc;
}

/* kvsim plot --sweep FILE.db: the tidy CSV of a results database (plots) */
int sweep_export_csv(const char *db_path, const char *csv, KvErr *e)
{
    sqlite3 *db = NULL;
    if (db_open(&db, db_path, 0, e) != 0) return -1;
    int rc = db_export_csv(db, db_path, csv, e);
    sqlite3_close(db);
    return rc;
}

/* points by status: n[0] pending, n[1] done, n[2] failed */
int db_counts(sqlite3 *db, const char *path, int64_t n[3], KvErr *e)
{
    sqlite3_stmt *st = NULL;
    n[0] = n[1] = n[2] = 0;
    if (sqlite3_prepare_v2(db, "SELECT status, count(*) FROM point GROUP BY status", -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, path, "count points", e);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *s = (const char *)sqlite3_column_text(st, 0);
        n[!strcmp(s, "done") ? 1 : !strcmp(s, "failed") ? 2 : 0] += sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return 0;
}

