/* store_read.c — reading the SQLite cost store: runs and points listed and read back, each row
 * validated, the run to read for a key (store_pick_run), whole listings in memory; see store.h.
 * The store's opening, guard, validation and writing are store.c's.
 */
#include "sim/cost/store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost/store_int.h"

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------- */

int store_list_runs(CostStore *s, StoreRunFn fn, void *ctx, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    sqlite3_stmt *st;
    if (store_prep(s->db, s->path, "SELECT " STORE_RUN_COLS " FROM run ORDER BY id", &st, "listing runs", e) != 0) return -1;
    int rc, ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRunMeta m;
        if (store_read_run_row(st, 0, s->path, &m, e) != 0) {
            ret = -1;
            break;
        }
        if (fn(ctx, &m) != 0) break;
    }
    if (ret == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE) ret = store_sql_err(e, s->path, s->db, rc, "listing runs");
    sqlite3_finalize(st);
    return ret;
}

int store_get_run_db(sqlite3 *db, const char *name, int64_t run_id, StoreRunMeta *out, KvErr *e)
{
    sqlite3_stmt *st;
    if (store_prep(db, name, "SELECT " STORE_RUN_COLS " FROM run WHERE id = ?1", &st, "reading a run", e) != 0) return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW)
        ret = store_read_run_row(st, 0, name, out, e);
    else if (rc == SQLITE_DONE)
        ret = kv_err(e, "%s: no run %lld", name, (long long)run_id);
    else
        ret = store_sql_err(e, name, db, rc, "reading a run");
    sqlite3_finalize(st);
    return ret;
}

int store_get_run(CostStore *s, int64_t run_id, StoreRunMeta *out, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    return store_get_run_db(s->db, s->path, run_id, out, e);
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
             "SELECT " STORE_POINT_COLS " FROM point WHERE run_id = ?1 AND (?2 IS NULL OR op = ?2) "
             "ORDER BY %s, model, dtype, tp, p1, p2, p3",
             rank);
    sqlite3_stmt *st;
    if (store_prep(db, name, sql, &st, "reading points", e) != 0) return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK)
        rc = op < 0 ? sqlite3_bind_null(st, 2) : sqlite3_bind_text(st, 2, cost_op_name((CostOp)op), -1, SQLITE_STATIC);
    int ret = 0;
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            StorePoint p;
            if (store_read_point_row(st, 0, name, run_id, &p, e) != 0) {
                ret = -1;
                break;
            }
            if (fn(ctx, &p) != 0) break;
        }
    }
    if (ret == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE) ret = store_sql_err(e, name, db, rc, "reading points");
    sqlite3_finalize(st);
    return ret;
}

int store_run_points(CostStore *s, int64_t run_id, int op, StorePointFn fn, void *ctx, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    return run_points_db(s->db, s->path, run_id, op, fn, ctx, e);
}

static int count_cb(void *ctx, const StorePoint *p)
{
    (*(int64_t *)ctx)++;
    return 0;
}

int store_check_run(CostStore *s, int64_t run_id, KvErr *e)
{
    StoreRunMeta m;
    int64_t n = 0;
    if (store_get_run(s, run_id, &m, e) != 0) return -1;
    return store_run_points(s, run_id, -1, count_cb, &n, e);
}

int store_count_points(CostStore *s, int64_t run_id, int op, int64_t *n, KvErr *e)
{
    if (store_enter(s, e) != 0) return -1;
    if (op >= OP_COUNT) return kv_err(e, "%s: op %d out of range (0..%d)", s->path, op, OP_COUNT - 1);
    sqlite3_stmt *st;
    if (store_prep(s->db, s->path, "SELECT count(*) FROM point WHERE run_id = ?1 AND (?2 IS NULL OR op = ?2)", &st,
             "counting points", e) != 0)
        return -1;
    int rc = sqlite3_bind_int64(st, 1, run_id);
    if (rc == SQLITE_OK)
        rc = op < 0 ? sqlite3_bind_null(st, 2) : sqlite3_bind_text(st, 2, cost_op_name((CostOp)op), -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    *n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int ret = rc == SQLITE_ROW ? 0 : store_sql_err(e, s->path, s->db, rc, "counting points");
    sqlite3_finalize(st);
    return ret;
}

int store_pick_run(CostStore *s, const char *device, const char *model, const char *dtype, int tp, CostOp op,
                   int64_t *run_id, KvErr *e)
{
    *run_id = 0;
    if (store_enter(s, e) != 0) return -1;
    if ((unsigned)op >= OP_COUNT) return kv_err(e, "%s: op %d out of range (0..%d)", s->path, (int)op, OP_COUNT - 1);
    if (!device) return kv_err(e, "%s: picking a run needs a device", s->path);
    int io = cost_op_is_io(op);
    sqlite3_stmt *st;
    if (store_prep(s->db, s->path,
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
        ret = store_sql_err(e, s->path, s->db, rc, "picking a run");
    sqlite3_finalize(st);
    return ret;
}


/* ---------------------------------------------------------------------------------------------
 * Whole listings in memory
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
