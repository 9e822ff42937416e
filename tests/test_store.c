/* test_store.c — store.c (the SQLite cost store) and store_cmds.c (kvcal show/export/import).
 *
 * Covers: create/open/reopen and the header pragmas; a run's metadata and points round trip
 * exactly; IO-op normalisation; store_pick_run ordering (measured over spec, newest started_at,
 * incomplete runs never) and the newest_run view agreeing with it; rollback and a killed writer
 * leave nothing; the SQL dump is deterministic and survives dump -> import -> dump byte for byte;
 * import remaps ids and skips runs already present; CSV export/import round trip; JSON export;
 * every refusal (text file, foreign SQLite, newer schema, missing tables, corrupt and truncated
 * files, newer/truncated/hostile dumps, bad CSV, invalid points and metadata), each naming the
 * file; the CLI commands' exit codes, files and output.
 */
#include <cJSON.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"
#include "sim/cost/store.h"
#include "sim/cost/store_int.h"
#include "calibrate/store_io.h"
#include "calibrate/cli/store_cmds.h"

/* ---- helpers ---- */

static const char *tmp_path(TestCtx *t, const char *name)
{
    static char buf[8][4200];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 4200, "%s/%s", test_tmpdir(t), name);
    return p;
}

static StoreRunMeta meta(const char *backend, const char *device, const char *started_at)
{
    StoreRunMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.backend, sizeof m.backend, "%s", backend);
    snprintf(m.device, sizeof m.device, "%s", device);
    snprintf(m.started_at, sizeof m.started_at, "%s", started_at);
    snprintf(m.model, sizeof m.model, "llama-3-8b");
    snprintf(m.dtype, sizeof m.dtype, "bf16");
    m.tp = 1;
    return m;
}

static StorePoint pt(CostOp op, const char *model, int64_t p1, int64_t p2, int64_t p3, double med)
{
    StorePoint p;
    memset(&p, 0, sizeof p);
    p.op = op;
    snprintf(p.model, sizeof p.model, "%s", model);
    snprintf(p.dtype, sizeof p.dtype, "bf16");
    p.tp = 1;
    p.p1 = p1;
    p.p2 = p2;
    p.p3 = p3;
    p.n = 10;
    p.median_ns = med;
    p.p10_ns = med * 0.9;
    p.p90_ns = med * 1.25;
    return p;
}

/* A complete run with the given points; returns its id (0 on failure, recorded). */
static int64_t add_run(TestCtx *t, CostStore *s, StoreRunMeta m, const StorePoint *pts, int n)
{
    KvErr e = {{0}};
    if (store_begin_run(s, &m, &e) != 0) {
        CHECK_MSG(0, "begin_run: %s", e.msg);
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (store_add_point(s, m.id, &pts[i], &e) != 0) {
            CHECK_MSG(0, "add_point %d: %s", i, e.msg);
            store_end_run(s, m.id, 0, &e);
            return 0;
        }
    if (store_end_run(s, m.id, 1, &e) != 0) {
        CHECK_MSG(0, "end_run: %s", e.msg);
        return 0;
    }
    return m.id;
}

typedef struct {
    StorePoint v[4096];
    int n;
} PointSet;

static int collect(void *ctx, const StorePoint *p)
{
    PointSet *ps = ctx;
    if (ps->n < (int)KV_ARRAY_LEN(ps->v)) ps->v[ps->n++] = *p;
    return 0;
}

typedef struct {
    StoreRunMeta v[64];
    int n;
} RunSet;

static int collect_run(void *ctx, const StoreRunMeta *r)
{
    RunSet *rs = ctx;
    if (rs->n < (int)KV_ARRAY_LEN(rs->v)) rs->v[rs->n++] = *r;
    return 0;
}

static void check_same_point(TestCtx *t, const StorePoint *a, const StorePoint *b)
{
    CHECK_EQ_I(a->op, b->op);
    CHECK_STR(a->model, b->model);
    CHECK_STR(a->dtype, b->dtype);
    CHECK_EQ_I(a->tp, b->tp);
    CHECK_EQ_I(a->p1, b->p1);
    CHECK_EQ_I(a->p2, b->p2);
    CHECK_EQ_I(a->p3, b->p3);
    CHECK_EQ_I(a->n, b->n);
    CHECK_NEAR(a->median_ns, b->median_ns, 0, 0);
    CHECK_NEAR(a->p10_ns, b->p10_ns, 0, 0);
    CHECK_NEAR(a->p90_ns, b->p90_ns, 0, 0);
}

/* Dump to a malloc'd string (NULL on failure, recorded). */
static char *dump_text(TestCtx *t, CostStore *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    KvErr e = {{0}};
    int rc = store_dump_sql(s, f, &e);
    fclose(f);
    CHECK_MSG(rc == 0, "dump: %s", e.msg);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Run a raw SQL statement on a file with the plain sqlite3 API (to craft foreign/odd files). */
static void raw_sql(TestCtx *t, const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    CHECK_MSG(rc == SQLITE_OK, "raw sql: %s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* A store with two runs covering 1-, 2- and 3-parameter ops, odd strings and fractional times. */
static void make_sample(TestCtx *t, CostStore *s)
{
    StorePoint a[] = {
        pt(OP_GEMM_QKV, "llama-3-8b", 1, 0, 0, 12345.5),
        pt(OP_GEMM_QKV, "llama-3-8b", 128, 0, 0, 20000),
        pt(OP_ATTN_PREFILL, "llama-3-8b", 512, 1024, 0, 0.1),
        pt(OP_H2D, "", 1000000000, 0, 0, 50e6),
        pt(OP_SSD_READ, "", 1048576, 32, 4, 123456.789),
    };
    StoreRunMeta m = meta("cuda", "NVIDIA H200, \"SXM\"", "2024-05-01T10:00:00Z");
    snprintf(m.host, sizeof m.host, "gpu-node's host");
    snprintf(m.driver, sizeof m.driver, "550.54");
    snprintf(m.cuda, sizeof m.cuda, "12.4");
    snprintf(m.git_rev, sizeof m.git_rev, "abc123def456");
    snprintf(m.notes, sizeof m.notes, "line one\nline two, with 'quotes'");
    m.quick = 1;
    CHECK(add_run(t, s, m, a, (int)KV_ARRAY_LEN(a)) == 1);
    StorePoint b[] = {
        pt(OP_GEMM_O, "llama-3-8b", 64, 0, 0, 999.25),
        pt(OP_ATTN_DECODE, "llama-3-8b", 8, 4096, 0, 3e-3),
    };
    CHECK(add_run(t, s, meta("spec", "H100-SXM", "2024-06-01T00:00:00Z"), b, (int)KV_ARRAY_LEN(b)) == 2);
}

/* ---- open / create ---- */

TEST(store_create_open_reopen)
{
    const char *path = tmp_path(t, "costs.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 0, &e) == -1); /* absent and not asked to create */
    CHECK_CONTAINS(e.msg, path);
    CHECK(access(path, F_OK) != 0);
    CHECK_MSG(store_open(&s, path, 1, &e) == 0, "%s", e.msg);
    CHECK(access(path, F_OK) == 0);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(s.db, "PRAGMA application_id", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_I(sqlite3_column_int64(st, 0), 0x4b56534d);
    sqlite3_finalize(st);
    CHECK(sqlite3_prepare_v2(s.db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_I(sqlite3_column_int64(st, 0), STORE_SCHEMA_VERSION);
    sqlite3_finalize(st);
    CHECK(sqlite3_prepare_v2(s.db, "PRAGMA foreign_keys", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_I(sqlite3_column_int64(st, 0), 1);
    sqlite3_finalize(st);
    StorePoint p = pt(OP_GEMM_QKV, "m", 1, 0, 0, 100);
    int64_t id = add_run(t, &s, meta("cpu", "Xeon", "2024-01-01T00:00:00Z"), &p, 1);
    store_close(&s);
    store_close(&s); /* idempotent */

    CHECK_MSG(store_open(&s, path, 0, &e) == 0, "%s", e.msg); /* reopen, no create */
    StoreRunMeta r;
    CHECK_MSG(store_get_run(&s, id, &r, &e) == 0, "%s", e.msg);
    CHECK_STR(r.device, "Xeon");
    CHECK_EQ_I(r.complete, 1);
    store_close(&s);
    CHECK_MSG(store_open(&s, path, 1, &e) == 0, "%s", e.msg); /* create on an existing store is a plain open */
    int64_t n = -1;
    CHECK(store_count_points(&s, id, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 1);
    store_close(&s);
}

TEST(store_open_empty_file_creates_only_when_asked)
{
    const char *path = test_write_file(t, "empty.db", "");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "empty database");
    CHECK_MSG(store_open(&s, path, 1, &e) == 0, "%s", e.msg);
    store_close(&s);
    CHECK_MSG(store_open(&s, path, 0, &e) == 0, "%s", e.msg);
    store_close(&s);
}

TEST(store_open_refuses_directory_and_empty_name)
{
    KvErr e = {{0}};
    CostStore s;
    const char *dir = test_tmpdir(t);
    CHECK(store_open(&s, dir, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, dir);
    CHECK_CONTAINS(e.msg, "not a regular file");
    CHECK(store_open(&s, "", 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "empty file name");
    CHECK(store_open(&s, "/nonexistent-dir/costs.db", 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "/nonexistent-dir/costs.db");
}

/* ---- refusals ---- */

TEST(store_refuses_text_file)
{
    const char *path = test_write_file(t, "notes.txt", "this is a text file, not a database at all\n"
                                                       "it is long enough to have a header's worth of bytes in it, "
                                                       "which SQLite reads before saying no\n");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "not a kvsim cost store (file is not a database)");
    char *after = kv_read_file(path, NULL, &e); /* create must not have touched it */
    CHECK(after && strncmp(after, "this is a text file", 19) == 0);
    free(after);
}

TEST(store_refuses_foreign_sqlite_even_empty)
{
    const char *path = tmp_path(t, "foreign.db");
    raw_sql(t, path, "PRAGMA application_id = 123");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "not a kvsim cost store (application_id 0x0000007b");
    /* an application_id 0 database that holds somebody else's tables */
    const char *other = tmp_path(t, "other.db");
    raw_sql(t, other, "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)");
    CHECK(store_open(&s, other, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, other);
    CHECK_CONTAINS(e.msg, "application_id 0x00000000 with 1 schema objects");
}

TEST(store_refuses_newer_schema)
{
    const char *path = tmp_path(t, "newer.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    store_close(&s);
    raw_sql(t, path, "PRAGMA user_version = 2");
    CHECK(store_open(&s, path, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "written by a newer kvsim (schema 2, this build reads 1)");
}

TEST(store_refuses_missing_tables_and_schema_zero)
{
    const char *path = tmp_path(t, "half.db");
    raw_sql(t, path, "PRAGMA application_id = 1263948621; PRAGMA user_version = 1; CREATE TABLE run(id INTEGER)");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "not a kvsim cost store: table run differs from this build's schema 1");
    const char *zero = tmp_path(t, "zero.db");
    raw_sql(t, zero, "PRAGMA application_id = 1263948621");
    CHECK(store_open(&s, zero, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, zero);
    CHECK_CONTAINS(e.msg, "schema 0");
}

/* A store with enough points to span many pages. */
static void make_big_store(TestCtx *t, const char *path)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK_MSG(store_open(&s, path, 1, &e) == 0, "%s", e.msg);
    static StorePoint pts[600];
    for (int i = 0; i < 600; i++) pts[i] = pt(OP_GEMM_QKV, "llama-3-8b", i + 1, 0, 0, 1000 + i);
    add_run(t, &s, meta("cuda", "H100", "2024-01-01T00:00:00Z"), pts, 600);
    store_close(&s);
}

TEST(store_refuses_corrupted_file)
{
    const char *path = tmp_path(t, "corrupt.db");
    make_big_store(t, path);
    int64_t size = file_size(path);
    CHECK(size >= 8 * 4096);
    /* overwrite 4 KiB straddling a page boundary in the middle: one page's cells, the next's header */
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    off_t off = (off_t)(size / 2 / 4096 * 4096 - 2048);
    CHECK(pwrite(fd, junk, sizeof junk, off) == (ssize_t)sizeof junk);
    close(fd);
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "corrupt cost store");
}

TEST(store_refuses_truncated_file)
{
    const char *path = tmp_path(t, "trunc.db");
    make_big_store(t, path);
    int64_t size = file_size(path);
    CHECK(truncate(path, (off_t)(size / 2)) == 0);
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "corrupt cost store");
}

/* ---- runs and points ---- */

TEST(store_run_round_trip_all_fields)
{
    const char *path = tmp_path(t, "rt.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    StoreRunMeta m = meta("cuda", "NVIDIA H200", "2024-05-01T10:00:00Z");
    snprintf(m.host, sizeof m.host, "node-7");
    snprintf(m.driver, sizeof m.driver, "550.54.15");
    snprintf(m.cuda, sizeof m.cuda, "12.4");
    snprintf(m.git_rev, sizeof m.git_rev, "0123456789ab-dirty");
    snprintf(m.finished_at, sizeof m.finished_at, "2024-05-01T11:30:00.250Z");
    snprintf(m.model, sizeof m.model, "qwen2-7b");
    snprintf(m.dtype, sizeof m.dtype, "fp16");
    m.tp = 2;
    m.quick = 1;
    snprintf(m.notes, sizeof m.notes, "sweep with 'quotes' and, commas");
    /* points given out of order; read back in (op enum, model, dtype, tp, p1, p2, p3) order */
    StorePoint in[] = {
        pt(OP_SSD_READ, "ignored-for-io", 4096, 8, 2, 80000.125),
        pt(OP_ATTN_PREFILL, "qwen2-7b", 512, 2048, 0, 1.5e6),
        pt(OP_GEMM_QKV, "qwen2-7b", 256, 0, 0, 0.1),
        pt(OP_GEMM_QKV, "qwen2-7b", 16, 0, 0, 7.0 / 3.0),
        pt(OP_H2D, "qwen2-7b", 1 << 20, 0, 0, 5e4),
    };
    in[0].tp = 4; /* IO ops are normalised to model '' and tp 1 */
    in[2].tp = in[3].tp = in[1].tp = 2;
    in[2].n = 1;
    in[1].p10_ns = in[1].median_ns; /* p10 == median == p90 allowed */
    in[1].p90_ns = in[1].median_ns;
    CHECK(store_begin_run(&s, &m, &e) == 0);
    CHECK_EQ_I(m.id, 1);
    for (size_t i = 0; i < KV_ARRAY_LEN(in); i++) CHECK_MSG(store_add_point(&s, m.id, &in[i], &e) == 0, "%s", e.msg);
    CHECK(store_end_run(&s, m.id, 1, &e) == 0);
    store_close(&s);

    CHECK(store_open(&s, path, 0, &e) == 0);
    StoreRunMeta r;
    CHECK(store_get_run(&s, 1, &r, &e) == 0);
    CHECK_EQ_I(r.id, 1);
    CHECK_STR(r.backend, "cuda");
    CHECK_STR(r.device, "NVIDIA H200");
    CHECK_STR(r.host, "node-7");
    CHECK_STR(r.driver, "550.54.15");
    CHECK_STR(r.cuda, "12.4");
    CHECK_STR(r.git_rev, "0123456789ab-dirty");
    CHECK_STR(r.started_at, "2024-05-01T10:00:00Z");
    CHECK_STR(r.finished_at, "2024-05-01T11:30:00.250Z"); /* given: kept */
    CHECK_STR(r.model, "qwen2-7b");
    CHECK_STR(r.dtype, "fp16");
    CHECK_EQ_I(r.tp, 2);
    CHECK_EQ_I(r.quick, 1);
    CHECK_EQ_I(r.complete, 1);
    CHECK_STR(r.notes, "sweep with 'quotes' and, commas");

    static PointSet ps;
    ps.n = 0;
    CHECK(store_run_points(&s, 1, -1, collect, &ps, &e) == 0);
    CHECK_EQ_I(ps.n, 5);
    const int order[] = {3, 2, 1, 4, 0}; /* gemm_qkv 16, gemm_qkv 256, attn_prefill, h2d, ssd_read */
    for (int i = 0; i < 5 && i < ps.n; i++) {
        StorePoint want = in[order[i]];
        if (want.op == OP_SSD_READ || want.op == OP_H2D) {
            want.model[0] = '\0';
            want.tp = 1;
        }
        check_same_point(t, &ps.v[i], &want);
    }
    ps.n = 0;
    CHECK(store_run_points(&s, 1, OP_GEMM_QKV, collect, &ps, &e) == 0);
    CHECK_EQ_I(ps.n, 2);
    int64_t n = 0;
    CHECK(store_count_points(&s, 1, OP_SSD_READ, &n, &e) == 0);
    CHECK_EQ_I(n, 1);
    CHECK(store_count_points(&s, 1, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 5);
    CHECK(store_count_points(&s, 99, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 0);
    CHECK(store_get_run(&s, 99, &r, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "no run 99");
    CHECK(store_run_points(&s, 1, OP_COUNT, collect, &ps, &e) == -1);
    CHECK_CONTAINS(e.msg, "out of range");
    store_close(&s);
}

TEST(store_begin_run_fills_times_and_list_order)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "l.db"), 1, &e) == 0);
    StoreRunMeta m = meta("spec", "H100-SXM", "");
    CHECK(store_begin_run(&s, &m, &e) == 0);
    CHECK_EQ_I(strlen(m.started_at), 20); /* YYYY-MM-DDTHH:MM:SSZ */
    CHECK(m.started_at[10] == 'T' && m.started_at[19] == 'Z');
    CHECK(store_end_run(&s, m.id, 1, &e) == 0);
    StoreRunMeta r;
    CHECK(store_get_run(&s, m.id, &r, &e) == 0);
    CHECK_EQ_I(strlen(r.finished_at), 20); /* end_run stamps it */
    CHECK(strcmp(r.finished_at, r.started_at) >= 0);
    add_run(t, &s, meta("cpu", "Xeon", "2023-01-01T00:00:00Z"), NULL, 0);
    static RunSet rs;
    rs.n = 0;
    CHECK(store_list_runs(&s, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 2);
    CHECK_EQ_I(rs.v[0].id, 1); /* oldest id first, whatever started_at says */
    CHECK_STR(rs.v[1].device, "Xeon");
    store_close(&s);
}

static int stop_after_one(void *ctx, const StoreRunMeta *r)
{
    ++*(int *)ctx;
    return 1;
}

static int stop_point(void *ctx, const StorePoint *p)
{
    ++*(int *)ctx;
    return 1;
}

TEST(store_callbacks_can_stop)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "cb.db"), 1, &e) == 0);
    make_sample(t, &s);
    int calls = 0;
    CHECK(store_list_runs(&s, stop_after_one, &calls, &e) == 0);
    CHECK_EQ_I(calls, 1);
    calls = 0;
    CHECK(store_run_points(&s, 1, -1, stop_point, &calls, &e) == 0);
    CHECK_EQ_I(calls, 1);
    store_close(&s);
}

TEST(store_rollback_leaves_nothing)
{
    const char *path = tmp_path(t, "rb.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    StoreRunMeta m = meta("cuda", "H100", "2024-01-01T00:00:00Z");
    CHECK(store_begin_run(&s, &m, &e) == 0);
    for (int i = 1; i <= 50; i++) {
        StorePoint p = pt(OP_GEMM_O, "llama-3-8b", i, 0, 0, 10.0 * i);
        CHECK(store_add_point(&s, m.id, &p, &e) == 0);
    }
    CHECK(store_end_run(&s, m.id, 0, &e) == 0);
    CHECK_EQ_I(s.in_run, 0);
    static RunSet rs;
    rs.n = 0;
    CHECK(store_list_runs(&s, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 0);
    int64_t n = -1;
    CHECK(store_count_points(&s, m.id, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 0);
    /* the store still works, and the next run is complete */
    StorePoint p = pt(OP_GEMM_O, "llama-3-8b", 1, 0, 0, 10);
    CHECK(add_run(t, &s, meta("cuda", "H100", "2024-01-02T00:00:00Z"), &p, 1) > 0);
    /* closing with a run open rolls it back too */
    StoreRunMeta m2 = meta("cuda", "H100", "2024-01-03T00:00:00Z");
    CHECK(store_begin_run(&s, &m2, &e) == 0);
    CHECK(store_add_point(&s, m2.id, &p, &e) == 0);
    store_close(&s);
    CHECK(store_open(&s, path, 0, &e) == 0);
    rs.n = 0;
    CHECK(store_list_runs(&s, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 1);
    CHECK_STR(rs.v[0].started_at, "2024-01-02T00:00:00Z");
    store_close(&s);
}

TEST(store_killed_writer_leaves_no_partial_run)
{
    const char *path = tmp_path(t, "crash.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    StorePoint keep = pt(OP_GEMM_QKV, "llama-3-8b", 1, 0, 0, 5);
    int64_t kept = add_run(t, &s, meta("cuda", "H100", "2024-01-01T00:00:00Z"), &keep, 1);
    store_close(&s);
    int64_t size_before = file_size(path);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* child: a tiny page cache forces the uncommitted pages into the file, then it dies */
        CostStore c;
        KvErr ce;
        if (store_open(&c, path, 0, &ce) != 0) _exit(3);
        sqlite3_exec(c.db, "PRAGMA cache_size = 4", NULL, NULL, NULL);
        StoreRunMeta m = meta("cuda", "H100", "2024-02-01T00:00:00Z");
        if (store_begin_run(&c, &m, &ce) != 0) _exit(4);
        for (int i = 1; i <= 3000; i++) {
            StorePoint p = pt(OP_GEMM_FFN_UP, "llama-3-8b", i, 0, 0, 100.0 + i);
            if (store_add_point(&c, m.id, &p, &ce) != 0) _exit(5);
        }
        _exit(0); /* no end_run, no close: as if killed */
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    /* the situation we mean to test: uncommitted pages in the file, a hot journal beside it */
    char journal[4300];
    snprintf(journal, sizeof journal, "%s-journal", path);
    CHECK(access(journal, F_OK) == 0);
    CHECK(file_size(path) > size_before);
    /* a reader (read-only) finds the hot journal: rolled back, quick_check ok */
    CHECK_MSG(store_open(&s, path, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg);
    CHECK(access(journal, F_OK) != 0);
    static RunSet rs;
    rs.n = 0;
    CHECK(store_list_runs(&s, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 1);
    CHECK_EQ_I(rs.v[0].id, kept);
    int64_t n = -1;
    CHECK(store_count_points(&s, kept + 1, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 0);
    store_close(&s);
}

TEST(store_write_api_misuse_is_refused)
{
    const char *path = tmp_path(t, "misuse.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    StorePoint p = pt(OP_GEMM_QKV, "llama-3-8b", 1, 0, 0, 5);
    CHECK(store_add_point(&s, 1, &p, &e) == -1);
    CHECK_CONTAINS(e.msg, "no run is open");
    CHECK(store_end_run(&s, 1, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "not the open run");
    StoreRunMeta m = meta("cuda", "H100", "2024-01-01T00:00:00Z");
    CHECK(store_begin_run(&s, &m, &e) == 0);
    StoreRunMeta m2 = meta("cuda", "H100", "2024-01-01T00:00:00Z");
    CHECK(store_begin_run(&s, &m2, &e) == -1);
    CHECK_CONTAINS(e.msg, "still open");
    CHECK(store_add_point(&s, m.id + 1, &p, &e) == -1);
    CHECK_CONTAINS(e.msg, "another run is open");
    CHECK(store_add_point(&s, m.id, &p, &e) == 0);
    CHECK(store_add_point(&s, m.id, &p, &e) == -1); /* same key twice */
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "UNIQUE constraint failed");
    CHECK(store_dump_sql(&s, stdout, &e) == -1);
    CHECK_CONTAINS(e.msg, "open");
    CHECK(store_import_sql(&s, "-- kvsim cost store dump, schema 1\n", "x.sql", &e) == -1);
    CHECK_CONTAINS(e.msg, "open");
    CHECK(store_import_csv(&s, "x", "x.csv", &e) == -1);
    CHECK_CONTAINS(e.msg, "open");
    CHECK(store_end_run(&s, m.id, 1, &e) == 0); /* the failed add did not spoil the run */
    int64_t n = 0;
    CHECK(store_count_points(&s, m.id, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 1);
    store_close(&s);
    CostStore closed = {0};
    CHECK(store_begin_run(&closed, &m, &e) == -1);
    CHECK_CONTAINS(e.msg, "not open");
}

TEST(store_meta_validation)
{
    KvErr e = {{0}};
    CostStore s;
    const char *path = tmp_path(t, "meta.db");
    CHECK(store_open(&s, path, 1, &e) == 0);
    struct {
        const char *backend, *device, *started;
        int tp, quick;
        const char *want;
    } bad[] = {
        {"gpu", "H100", "", 1, 0, "backend: 'gpu', expected cpu, cuda, spec, import or measured"},
        {"cuda", "", "", 1, 0, "device: empty"},
        {"cuda", "H100", "", 0, 0, "tp: 0, expected >= 1"},
        {"cuda", "H100", "", 1, 2, "quick: 2"},
        {"cuda", "H100", "May 1st 2024", 1, 0, "started_at: 'May 1st 2024'"},
        {"cuda", "H100", "2024-05-01 10:00:00", 1, 0, "expected YYYY-MM-DDTHH:MM:SSZ"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(bad); i++) {
        StoreRunMeta m = meta(bad[i].backend, bad[i].device, bad[i].started);
        m.tp = bad[i].tp;
        m.quick = bad[i].quick;
        CHECK_MSG(store_begin_run(&s, &m, &e) == -1, "case %zu accepted", i);
        CHECK_CONTAINS(e.msg, path);
        CHECK_CONTAINS(e.msg, bad[i].want);
        CHECK_EQ_I(s.in_run, 0);
    }
    StoreRunMeta m = meta("import", "H100", "2024-05-01T10:00:00.5Z");
    snprintf(m.finished_at, sizeof m.finished_at, "yesterday");
    CHECK(store_begin_run(&s, &m, &e) == -1);
    CHECK_CONTAINS(e.msg, "finished_at: 'yesterday'");
    m.finished_at[0] = '\0';
    CHECK_MSG(store_begin_run(&s, &m, &e) == 0, "%s", e.msg); /* "import" backend and fractions are fine */
    CHECK(store_end_run(&s, m.id, 0, &e) == 0);
    store_close(&s);
}

TEST(store_point_validation)
{
    KvErr e = {{0}};
    CostStore s;
    const char *path = tmp_path(t, "pv.db");
    CHECK(store_open(&s, path, 1, &e) == 0);
    StoreRunMeta m = meta("cuda", "H100", "2024-01-01T00:00:00Z");
    CHECK(store_begin_run(&s, &m, &e) == 0);
    StorePoint p;
#define BAD(setup, want)                                                                           \
    do {                                                                                           \
        p = pt(OP_GEMM_QKV, "llama-3-8b", 16, 0, 0, 100);                                          \
        setup;                                                                                     \
        CHECK_MSG(store_add_point(&s, m.id, &p, &e) == -1, "accepted: %s", #setup);                \
        CHECK_CONTAINS(e.msg, path);                                                               \
        CHECK_CONTAINS(e.msg, want);                                                               \
    } while (0)
    BAD(p.op = (CostOp)OP_COUNT, "out of range");
    BAD(p.op = (CostOp)-1, "out of range");
    BAD(p.model[0] = '\0', "model is empty");
    BAD(p.dtype[0] = '\0', "dtype is empty");
    BAD(p.tp = 0, "tp 0");
    BAD(p.p1 = -1, "negative shape parameter");
    BAD(p.p2 = 5, "p2 must be 0");
    BAD((p.op = OP_ATTN_PREFILL, p.p2 = 64, p.p3 = 1), "p3 must be 0");
    BAD(p.n = 0, "n = 0");
    BAD(p.median_ns = NAN, "finite");
    BAD(p.p90_ns = INFINITY, "finite");
    BAD(p.p10_ns = 101, "p10 <= median <= p90");
    BAD(p.p90_ns = 99, "p10 <= median <= p90");
    BAD((p.p10_ns = -1), "0 <= p10");
    BAD(memset(p.model, 'x', sizeof p.model), "NUL-terminated");
#undef BAD
    p = pt(OP_SSD_WRITE, "", 4096, 1, 8, 100);
    CHECK_MSG(store_add_point(&s, m.id, &p, &e) == 0, "%s", e.msg);
    CHECK(store_end_run(&s, m.id, 1, &e) == 0);
    int64_t n = 0;
    CHECK(store_count_points(&s, m.id, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 1);
    store_close(&s);
}

/* ---- pick_run ---- */

TEST(store_pick_run_ordering)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "pick.db"), 1, &e) == 0);
    StorePoint g = pt(OP_GEMM_QKV, "llama-3-8b", 16, 0, 0, 100);
    StorePoint io = pt(OP_H2D, "", 4096, 0, 0, 100);
    int64_t run = -1;

    /* nothing yet */
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 0);

    /* older cuda (run 1) vs newer spec (run 2): cuda wins */
    StorePoint both[] = {g, io};
    int64_t cuda_old = add_run(t, &s, meta("cuda", "H100", "2024-01-01T00:00:00Z"), both, 2);
    int64_t spec_new = add_run(t, &s, meta("spec", "H100", "2024-09-01T00:00:00Z"), both, 2);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cuda_old);
    (void)spec_new;

    /* a second cuda run, inserted later (higher id) but started EARLIER: the first stays newest */
    int64_t cuda_older = add_run(t, &s, meta("cuda", "H100", "2023-06-01T00:00:00Z"), &g, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cuda_old);
    (void)cuda_older;
    /* a newer cuda run wins; cpu counts as measured too and wins when newest */
    int64_t cuda_new = add_run(t, &s, meta("cuda", "H100", "2024-03-01T00:00:00Z"), &g, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cuda_new);
    int64_t cpu_newest = add_run(t, &s, meta("cpu", "H100", "2024-04-01T00:00:00Z"), &g, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cpu_newest);
    /* "import" ranks between measured and spec */
    int64_t imp = add_run(t, &s, meta("import", "H100", "2025-01-01T00:00:00Z"), &g, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cpu_newest);

    /* same started_at: the higher id wins */
    int64_t tie = add_run(t, &s, meta("cpu", "H100", "2024-04-01T00:00:00Z"), &g, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, tie);

    /* the key matters: other model, dtype, tp, device, op find nothing or the right run */
    CHECK(store_pick_run(&s, "H100", "other-model", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 0);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "fp16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 0);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 2, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 0);
    CHECK(store_pick_run(&s, "A100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 0);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_O, &run, &e) == 0);
    CHECK_EQ_I(run, 0);
    /* IO ops: model, dtype and tp of the question do not matter; only runs with h2d points count */
    CHECK(store_pick_run(&s, "H100", "any-model", "fp8", 8, OP_H2D, &run, &e) == 0);
    CHECK_EQ_I(run, cuda_old);

    /* the only spec-covered key falls back to spec */
    StorePoint dec = pt(OP_ATTN_DECODE, "llama-3-8b", 8, 1024, 0, 50);
    int64_t spec_only = add_run(t, &s, meta("spec", "H100", "2020-01-01T00:00:00Z"), &dec, 1);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_ATTN_DECODE, &run, &e) == 0);
    CHECK_EQ_I(run, spec_only);
    (void)imp;

    /* an incomplete run is never picked: the open run of this connection, newest of all ... */
    StoreRunMeta open = meta("cuda", "H100", "2030-01-01T00:00:00Z");
    CHECK(store_begin_run(&s, &open, &e) == 0);
    CHECK(store_add_point(&s, open.id, &g, &e) == 0);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, tie);
    CHECK(store_end_run(&s, open.id, 0, &e) == 0);
    /* ... nor a stored one whose complete flag is 0 */
    CHECK(sqlite3_exec(s.db, "UPDATE run SET complete = 0 WHERE started_at = '2024-04-01T00:00:00Z'", NULL, NULL,
                       NULL) == SQLITE_OK);
    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, cuda_new);

    /* the view agrees with pick_run */
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(s.db,
                             "SELECT run_id FROM newest_run WHERE device = 'H100' AND model = 'llama-3-8b' "
                             "AND dtype = 'bf16' AND tp = 1 AND op = 'gemm_qkv'",
                             -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_I(sqlite3_column_int64(st, 0), cuda_new);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);

    CHECK(store_pick_run(&s, "H100", "llama-3-8b", "bf16", 1, (CostOp)OP_COUNT, &run, &e) == -1);
    CHECK_CONTAINS(e.msg, "out of range");
    store_close(&s);
}

TEST(store_view_io_ops_match_ops_table)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "view.db"), 1, &e) == 0);
    static StorePoint pts[OP_COUNT];
    for (int op = 0; op < OP_COUNT; op++) {
        int np = cost_op_nparams((CostOp)op);
        pts[op] = pt((CostOp)op, cost_op_is_io((CostOp)op) ? "" : "m", 4, np >= 2 ? 4 : 0, np >= 3 ? 4 : 0, 10);
    }
    int64_t id = add_run(t, &s, meta("cuda", "H100", "2024-01-01T00:00:00Z"), pts, OP_COUNT);
    for (int op = 0; op < OP_COUNT; op++) {
        sqlite3_stmt *st;
        CHECK(sqlite3_prepare_v2(s.db, "SELECT dtype, run_id FROM newest_run WHERE op = ?1", -1, &st, NULL) == SQLITE_OK);
        sqlite3_bind_text(st, 1, cost_op_name((CostOp)op), -1, SQLITE_STATIC);
        CHECK(sqlite3_step(st) == SQLITE_ROW);
        CHECK_MSG(strcmp((const char *)sqlite3_column_text(st, 0), cost_op_is_io((CostOp)op) ? "" : "bf16") == 0,
                  "op %s: the view's IO list (STORE_IO_OPS_SQL) disagrees with cost_op_is_io",
                  cost_op_name((CostOp)op));
        CHECK_EQ_I(sqlite3_column_int64(st, 1), id);
        sqlite3_finalize(st);
    }
    store_close(&s);
}

/* ---- SQL dump and import ---- */

TEST(store_dump_import_dump_is_identical)
{
    KvErr e = {{0}};
    CostStore a, b;
    CHECK(store_open(&a, tmp_path(t, "a.db"), 1, &e) == 0);
    make_sample(t, &a);
    char *d1 = dump_text(t, &a);
    char *d1b = dump_text(t, &a);
    CHECK(d1 && d1b && strcmp(d1, d1b) == 0); /* same store, same text */
    CHECK(d1 && strncmp(d1, "-- kvsim cost store dump, schema 1\n-- 2 runs, 7 points.", 55) == 0);
    /* doubles: integral as integers, others with 17 significant digits; strings '' escaped */
    CHECK_CONTAINS(d1, ",12345.5,11110.950000000001,15431.875);");
    CHECK_CONTAINS(d1, ",50000000,45000000,62500000);");
    CHECK_CONTAINS(d1, ",0.10000000000000001,0.090000000000000011,0.125);");
    CHECK_CONTAINS(d1, "'gpu-node''s host'");
    CHECK_CONTAINS(d1, "'line one\nline two, with ''quotes'''");
    CHECK_CONTAINS(d1, "INSERT INTO point VALUES(1,'attn_prefill','llama-3-8b','bf16',1,512,1024,0,10,");
    CHECK(d1 && strstr(d1, "\nCOMMIT;\n") && strcmp(d1 + strlen(d1) - 8, "COMMIT;\n") == 0);

    CHECK(store_open(&b, tmp_path(t, "b.db"), 1, &e) == 0);
    StoreImportStats st;
    CHECK_MSG(store_import_sql_stats(&b, d1, "a.sql", &st, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(st.runs_added, 2);
    CHECK_EQ_I(st.runs_skipped, 0);
    CHECK_EQ_I(st.points_added, 7);
    char *d2 = dump_text(t, &b);
    CHECK(d1 && d2 && strcmp(d1, d2) == 0);
    /* the imported points equal the originals */
    static PointSet pa, pb;
    pa.n = pb.n = 0;
    CHECK(store_run_points(&a, 1, -1, collect, &pa, &e) == 0);
    CHECK(store_run_points(&b, 1, -1, collect, &pb, &e) == 0);
    CHECK_EQ_I(pa.n, 5);
    CHECK_EQ_I(pb.n, 5);
    for (int i = 0; i < pa.n && i < pb.n; i++) check_same_point(t, &pa.v[i], &pb.v[i]);
    StoreRunMeta r;
    CHECK(store_get_run(&b, 1, &r, &e) == 0);
    CHECK_STR(r.device, "NVIDIA H200, \"SXM\"");
    CHECK_STR(r.notes, "line one\nline two, with 'quotes'");
    CHECK_EQ_I(r.quick, 1);

    /* importing again adds nothing */
    CHECK(store_import_sql_stats(&b, d1, "a.sql", &st, &e) == 0);
    CHECK_EQ_I(st.runs_added, 0);
    CHECK_EQ_I(st.runs_skipped, 2);
    char *d3 = dump_text(t, &b);
    CHECK(d1 && d3 && strcmp(d1, d3) == 0);

    /* a plain sqlite3 load of the dump gives a store we open */
    const char *c_path = tmp_path(t, "c.db");
    raw_sql(t, c_path, d1 ? d1 : "");
    CostStore c;
    CHECK_MSG(store_open(&c, c_path, 0, &e) == 0, "%s", e.msg);
    char *d4 = dump_text(t, &c);
    CHECK(d1 && d4 && strcmp(d1, d4) == 0);
    store_close(&c);

    /* one run's dump */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(store_dump_sql_run(&a, 2, f, &e) == 0);
    fclose(f);
    CHECK_CONTAINS(buf, "-- 1 run, 2 points.");
    CHECK(buf && !strstr(buf, "INSERT INTO run VALUES(1,"));
    CHECK_CONTAINS(buf, "INSERT INTO run VALUES(2,'spec','H100-SXM'");
    free(buf);
    f = open_memstream(&buf, &len);
    CHECK(store_dump_sql_run(&a, 7, f, &e) == -1);
    fclose(f);
    free(buf);
    CHECK_CONTAINS(e.msg, "no run 7");

    free(d1);
    free(d1b);
    free(d2);
    free(d3);
    free(d4);
    store_close(&a);
    store_close(&b);
}

TEST(store_import_remaps_ids_into_existing_store)
{
    KvErr e = {{0}};
    CostStore a, b;
    CHECK(store_open(&a, tmp_path(t, "a.db"), 1, &e) == 0);
    make_sample(t, &a);
    char *d = dump_text(t, &a);
    CHECK(store_open(&b, tmp_path(t, "b.db"), 1, &e) == 0);
    StorePoint mine = pt(OP_NORM, "mine", 3, 0, 0, 7);
    CHECK(add_run(t, &b, meta("cpu", "laptop", "2022-01-01T00:00:00Z"), &mine, 1) == 1);
    StoreImportStats st;
    CHECK_MSG(store_import_sql_stats(&b, d ? d : "", "a.sql", &st, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(st.runs_added, 2);
    static RunSet rs;
    rs.n = 0;
    CHECK(store_list_runs(&b, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 3);
    CHECK_STR(rs.v[0].device, "laptop"); /* kept as run 1 */
    CHECK_EQ_I(rs.v[1].id, 2);           /* source run 1: id taken, so max + 1 */
    CHECK_STR(rs.v[1].device, "NVIDIA H200, \"SXM\"");
    CHECK_EQ_I(rs.v[2].id, 3); /* source run 2: now taken too */
    CHECK_STR(rs.v[2].backend, "spec");
    static PointSet ps;
    ps.n = 0;
    CHECK(store_run_points(&b, 1, -1, collect, &ps, &e) == 0);
    CHECK_EQ_I(ps.n, 1);
    CHECK_STR(ps.v[0].model, "mine");
    ps.n = 0;
    CHECK(store_run_points(&b, 3, -1, collect, &ps, &e) == 0);
    CHECK_EQ_I(ps.n, 2);
    CHECK_NEAR(ps.v[0].median_ns, 999.25, 0, 0);
    int64_t run = 0; /* the imported measured run is what the reader gets */
    CHECK(store_pick_run(&b, "NVIDIA H200, \"SXM\"", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 2);
    free(d);
    store_close(&a);
    store_close(&b);
}

/* Make a dump, apply an edit (replace first `from` by `to`), import into a fresh store. */
static int import_edited(TestCtx *t, const char *from, const char *to, KvErr *e, int *runs_after)
{
    CostStore a, b;
    KvErr e0 = {{0}};
    CHECK(store_open(&a, tmp_path(t, "src.db"), 1, &e0) == 0);
    StoreRunMeta r;
    if (store_get_run(&a, 1, &r, &e0) != 0) make_sample(t, &a); /* first call of the test */
    char *d = dump_text(t, &a);
    store_close(&a);
    if (!d) return 0;
    char *hit = strstr(d, from);
    CHECK_MSG(hit != NULL, "'%s' not in dump", from);
    size_t nl = strlen(d) - strlen(from) + strlen(to) + 1;
    char *ed = malloc(nl);
    if (hit) {
        memcpy(ed, d, (size_t)(hit - d));
        strcpy(ed + (hit - d), to);
        strcat(ed, hit + strlen(from));
    } else {
        strcpy(ed, d);
    }
    free(d);
    const char *dst = tmp_path(t, "dst.db");
    unlink(dst);
    CHECK(store_open(&b, dst, 1, &e0) == 0);
    int rc = store_import_sql(&b, ed, "edited.sql", e);
    static RunSet rs;
    rs.n = 0;
    store_list_runs(&b, collect_run, &rs, &e0);
    *runs_after = rs.n;
    store_close(&b);
    free(ed);
    return rc;
}

TEST(store_import_refuses_newer_and_broken_dumps)
{
    KvErr e = {{0}};
    int runs = -1;
    CHECK(import_edited(t, "schema 1\n", "schema 2\n", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql");
    CHECK_CONTAINS(e.msg, "dump written by a newer kvsim (schema 2, this build reads 1)");
    CHECK_EQ_I(runs, 0);
    /* the header promises schema 1, the body sets user_version 2: refused by the same check */
    CHECK(import_edited(t, "PRAGMA user_version = 1;", "PRAGMA user_version = 2;", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: written by a newer kvsim (schema 2, this build reads 1)");
    /* no header */
    CHECK(import_edited(t, "-- kvsim cost store dump", "-- some other dump", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: line 1: not a kvsim cost store dump");
    /* truncated before COMMIT */
    CHECK(import_edited(t, "COMMIT;\n", "", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: the dump ends inside its transaction");
    CHECK_EQ_I(runs, 0);
    /* a statement that is not one of the dump's own forms names its line */
    CHECK(import_edited(t, "INSERT INTO point VALUES(2,", "INSERT INTO point VALUES(2,,", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: line ");
    CHECK_CONTAINS(e.msg, "not a statement of a kvsim cost store dump: 'INSERT INTO point VALUES(2,,");
    /* a dump that reaches for other files */
    CHECK(import_edited(t, "BEGIN TRANSACTION;\n", "ATTACH DATABASE 'stolen.db' AS x;\nBEGIN TRANSACTION;\n", &e,
                        &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: line 3: not a statement of a kvsim cost store dump: 'ATTACH DATABASE");
    CHECK(import_edited(t, "BEGIN TRANSACTION;\n", "PRAGMA journal_mode = OFF;\nBEGIN TRANSACTION;\n", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: line 3: not a statement of a kvsim cost store dump: 'PRAGMA journal_mode");
    /* invalid points are refused like add_point refuses them, and nothing is imported */
    CHECK(import_edited(t, ",999.25,", ",1e9,", &e, &runs) == -1); /* median above p90 */
    CHECK_CONTAINS(e.msg, "edited.sql: run 2: gemm_o point (64, 0, 0): expected 0 <= p10 <= median <= p90");
    CHECK_EQ_I(runs, 0);
    CHECK(import_edited(t, "'gemm_o'", "'gemm_zz'", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: run 2: point: field op: unknown op 'gemm_zz'");
    CHECK_EQ_I(runs, 0);
    CHECK(import_edited(t, "'spec','H100-SXM'", "'gpu','H100-SXM'", &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: run 2: run field backend: 'gpu'");
    /* a run whose metadata does not fit the struct */
    char longdev[200];
    memset(longdev, 'D', sizeof longdev - 1);
    longdev[sizeof longdev - 1] = '\0';
    char to[260];
    snprintf(to, sizeof to, "'spec','%s'", longdev);
    CHECK(import_edited(t, "'spec','H100-SXM'", to, &e, &runs) == -1);
    CHECK_CONTAINS(e.msg, "edited.sql: run 2: run: field device is 199 bytes");
    /* the unedited dump imports: the edits above were the only problem */
    CHECK_MSG(import_edited(t, "-- kvsim", "-- kvsim", &e, &runs) == 0, "%s", e.msg);
    CHECK_EQ_I(runs, 2);
}

/* ---- CSV and JSON ---- */

static char *export_text(TestCtx *t, CostStore *s, int64_t run_id, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    KvErr e = {{0}};
    int rc = json ? store_export_json(s, run_id, f, &e) : store_export_csv(s, run_id, f, &e);
    fclose(f);
    CHECK_MSG(rc == 0, "export: %s", e.msg);
    return buf;
}

TEST(store_csv_export_import_round_trip)
{
    KvErr e = {{0}};
    CostStore a, b;
    CHECK(store_open(&a, tmp_path(t, "a.db"), 1, &e) == 0);
    make_sample(t, &a);
    char *c1 = export_text(t, &a, 0, 0);
    CHECK(c1 && strncmp(c1, "run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns\n", 75) == 0);
    CHECK_CONTAINS(c1, "\n1,cuda,\"NVIDIA H200, \"\"SXM\"\"\",gemm_qkv,llama-3-8b,bf16,1,1,0,0,10,12345.5,11110.950000000001,15431.875\n");
    CHECK_CONTAINS(c1, "\n1,cuda,\"NVIDIA H200, \"\"SXM\"\"\",ssd_read,,bf16,1,1048576,32,4,10,");
    CHECK_CONTAINS(c1, "\n2,spec,H100-SXM,attn_decode,llama-3-8b,bf16,1,8,4096,0,10,0.0030000000000000001,");
    char *one = export_text(t, &a, 2, 0);
    CHECK(one && !strstr(one, "\n1,"));
    CHECK_CONTAINS(one, "\n2,spec,H100-SXM,gemm_o,");

    CHECK(store_open(&b, tmp_path(t, "b.db"), 1, &e) == 0);
    StoreImportStats st;
    CHECK_MSG(store_import_csv_stats(&b, c1 ? c1 : "", "a.csv", &st, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(st.runs_added, 2);
    CHECK_EQ_I(st.points_added, 7);
    char *c2 = export_text(t, &b, 0, 0);
    CHECK(c1 && c2 && strcmp(c1, c2) == 0);
    static PointSet pa, pb;
    for (int run = 1; run <= 2; run++) {
        pa.n = pb.n = 0;
        CHECK(store_run_points(&a, run, -1, collect, &pa, &e) == 0);
        CHECK(store_run_points(&b, run, -1, collect, &pb, &e) == 0);
        CHECK_EQ_I(pa.n, pb.n);
        for (int i = 0; i < pa.n && i < pb.n; i++) check_same_point(t, &pa.v[i], &pb.v[i]);
    }
    StoreRunMeta r;
    CHECK(store_get_run(&b, 1, &r, &e) == 0);
    CHECK_STR(r.backend, "cuda"); /* the source backend is kept: measured stays measured */
    CHECK_STR(r.model, "llama-3-8b");
    CHECK_EQ_I(r.complete, 1);
    CHECK_CONTAINS(r.notes, "imported from a.csv (run 1 there)");
    /* importing again adds new runs with fresh ids (CSV carries no run identity) */
    CHECK(store_import_csv_stats(&b, c1 ? c1 : "", "a.csv", &st, &e) == 0);
    CHECK_EQ_I(st.runs_added, 2);
    int64_t n = 0;
    CHECK(store_count_points(&b, 4, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 2);
    free(c1);
    free(c2);
    free(one);
    store_close(&a);
    store_close(&b);
}

TEST(store_csv_import_errors_name_file_and_line)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "c.db"), 1, &e) == 0);
#define H "run_id,backend,device,op,model,dtype,tp,p1,p2,p3,n,median_ns,p10_ns,p90_ns\n"
#define ROW "1,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,5,100,90,110\n"
    struct {
        const char *text, *want;
    } bad[] = {
        {"id,backend\n" ROW, "in.csv: line 1: expected the header"},
        {H ROW "1,cuda,H100,gemm_qkv,m,bf16,1,32,0,0,5,100\n", "in.csv: line 3: 12 fields, expected 14"},
        {H ROW "1,cuda,H100,gemm_qkv,m,bf16,1,32,0,0,5,100,90,110,extra\n", "in.csv: line 3: more than 14 fields"},
        {H "x,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,5,100,90,110\n", "in.csv: line 2: field run_id: expected an integer"},
        {H "1,cuda,H100,gemm_qq,m,bf16,1,16,0,0,5,100,90,110\n", "in.csv: line 2: field op: unknown op 'gemm_qq'"},
        {H "1,tpu,H100,gemm_qkv,m,bf16,1,16,0,0,5,100,90,110\n", "in.csv: line 2: field backend: 'tpu'"},
        {H "1,cuda,,gemm_qkv,m,bf16,1,16,0,0,5,100,90,110\n", "in.csv: line 2: field device: empty"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,0,16,0,0,5,100,90,110\n", "in.csv: line 2: field tp: expected an integer >= 1"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,0,100,90,110\n", "in.csv: line 2: field n: expected an integer >= 1"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,-5,0,0,5,100,90,110\n", "in.csv: line 2: field p1: expected an integer >= 0"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,5,fast,90,110\n", "in.csv: line 2: field median_ns: expected a finite"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,5,inf,90,110\n", "in.csv: line 2: field median_ns: expected a finite"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,16,0,0,5,100,90,80\n", "in.csv: line 2: run 1: gemm_qkv point (16, 0, 0): expected 0 <= p10"},
        {H "1,cuda,H100,gemm_qkv,m,bf16,1,16,7,0,5,100,90,110\n", "p2 must be 0"},
        {H "1,cuda,\"H100,5,0,0\n", "in.csv: line 2: unterminated quoted field"},
        {H "1,cuda,\"H100\"x,gemm_qkv,m,bf16,1,16,0,0,5,100,90,110\n", "in.csv: line 2: field 3: text after the closing quote"},
        {H ROW "1,spec,H100,gemm_qkv,m,bf16,1,32,0,0,5,100,90,110\n", "in.csv: line 3: run 1 has backend 'spec'"},
        {H ROW ROW, "in.csv: line 3: "},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(bad); i++) {
        e.msg[0] = '\0';
        CHECK_MSG(store_import_csv(&s, bad[i].text, "in.csv", &e) == -1, "case %zu accepted", i);
        CHECK_CONTAINS(e.msg, bad[i].want);
    }
    CHECK_CONTAINS(e.msg, "UNIQUE constraint failed"); /* the last case: a duplicate point */
    static RunSet rs;
    rs.n = 0;
    CHECK(store_list_runs(&s, collect_run, &rs, &e) == 0);
    CHECK_EQ_I(rs.n, 0); /* nothing half-imported */
    /* CRLF line ends, blank lines, a quoted device with a comma, IO rows normalised */
    const char *ok = H "\r\n" "7,cpu,\"Xeon, 2S\",h2d,,fp32,1,4096,0,0,3,10,9,11\r\n"
                       "7,cpu,\"Xeon, 2S\",gemm_qkv,m,fp32,2,16,0,0,5,100,90,110\r\n\r\n";
    StoreImportStats st;
    CHECK_MSG(store_import_csv_stats(&s, ok, "ok.csv", &st, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(st.runs_added, 1);
    CHECK_EQ_I(st.points_added, 2);
    StoreRunMeta r;
    CHECK(store_get_run(&s, 7, &r, &e) == 0); /* the source id was free, so kept */
    CHECK_STR(r.device, "Xeon, 2S");
    CHECK_STR(r.model, "m"); /* from the first compute point */
    CHECK_STR(r.dtype, "fp32");
    CHECK_EQ_I(r.tp, 2);
#undef H
#undef ROW
    store_close(&s);
}

TEST(store_json_export_has_runs_and_points)
{
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "j.db"), 1, &e) == 0);
    make_sample(t, &s);
    char *j = export_text(t, &s, 0, 1);
    cJSON *root = cJSON_Parse(j ? j : "");
    CHECK(root != NULL);
    CHECK_EQ_I(cJSON_GetObjectItem(root, "schema")->valueint, 1);
    cJSON *runs = cJSON_GetObjectItem(root, "runs");
    CHECK(cJSON_IsArray(runs));
    CHECK_EQ_I(cJSON_GetArraySize(runs), 2);
    cJSON *r0 = cJSON_GetArrayItem(runs, 0);
    CHECK_EQ_I(cJSON_GetObjectItem(r0, "id")->valuedouble, 1);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(r0, "device")), "NVIDIA H200, \"SXM\"");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(r0, "host")), "gpu-node's host");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r0, "quick")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r0, "complete")));
    cJSON *pts = cJSON_GetObjectItem(r0, "points");
    CHECK_EQ_I(cJSON_GetArraySize(pts), 5);
    cJSON *p0 = cJSON_GetArrayItem(pts, 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p0, "op")), "gemm_qkv");
    CHECK_EQ_I(cJSON_GetObjectItem(p0, "p1")->valuedouble, 1);
    CHECK_NEAR(cJSON_GetObjectItem(p0, "median_ns")->valuedouble, 12345.5, 0, 0);
    CHECK_NEAR(cJSON_GetObjectItem(p0, "p10_ns")->valuedouble, 12345.5 * 0.9, 0, 0);
    cJSON *p3 = cJSON_GetArrayItem(pts, 3); /* h2d, 1e9 bytes */
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p3, "op")), "h2d");
    CHECK_NEAR(cJSON_GetObjectItem(p3, "p1")->valuedouble, 1e9, 0, 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p3, "model")), "");
    cJSON *p4 = cJSON_GetArrayItem(pts, 4);
    CHECK_EQ_I(cJSON_GetObjectItem(p4, "p3")->valuedouble, 4);
    CHECK_NEAR(cJSON_GetObjectItem(p4, "median_ns")->valuedouble, 123456.789, 0, 0);
    cJSON_Delete(root);
    free(j);
    j = export_text(t, &s, 2, 1);
    root = cJSON_Parse(j ? j : "");
    CHECK(root != NULL);
    runs = cJSON_GetObjectItem(root, "runs");
    CHECK_EQ_I(cJSON_GetArraySize(runs), 1);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 0), "backend")), "spec");
    cJSON_Delete(root);
    free(j);
    FILE *f = fopen("/dev/null", "w");
    CHECK(store_export_json(&s, 9, f, &e) == -1);
    CHECK_CONTAINS(e.msg, "no run 9");
    CHECK(store_export_csv(&s, 9, f, &e) == -1);
    fclose(f);
    store_close(&s);
}

TEST(store_read_refuses_unknown_op_in_file)
{
    const char *path = tmp_path(t, "newop.db");
    KvErr e = {{0}};
    CostStore s;
    CHECK(store_open(&s, path, 1, &e) == 0);
    StorePoint p = pt(OP_GEMM_QKV, "m", 1, 0, 0, 5);
    add_run(t, &s, meta("cuda", "H100", "2024-01-01T00:00:00Z"), &p, 1);
    CHECK(sqlite3_exec(s.db, "UPDATE point SET op = 'warp_drive'", NULL, NULL, NULL) == SQLITE_OK);
    static PointSet ps;
    ps.n = 0;
    CHECK(store_run_points(&s, 1, -1, collect, &ps, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "unknown op 'warp_drive'");
    store_close(&s);
}

/* ---- the CLI commands ---- */

typedef int (*CmdFn)(int, char **);

/* Run a command with stdout and stderr captured into files of the scratch dir. */
static int run_cmd(TestCtx *t, CmdFn fn, const char *out_name, const char *err_name, int argc, const char **argv)
{
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(tmp_path(t, out_name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(tmp_path(t, err_name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = fn(argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    return rc;
}

static char *slurp(TestCtx *t, const char *name)
{
    KvErr e;
    char *s = kv_read_file(tmp_path(t, name), NULL, &e);
    return s ? s : calloc(1, 1);
}

TEST(store_cmd_export_import_show)
{
    KvErr e = {{0}};
    CostStore s;
    char db[4200], sql[4200], csv[4200], json[4200], db2[4200], db3[4200];
    snprintf(db, sizeof db, "%s", tmp_path(t, "src.db"));
    snprintf(sql, sizeof sql, "%s", tmp_path(t, "dump.sql"));
    snprintf(csv, sizeof csv, "%s", tmp_path(t, "pts.csv"));
    snprintf(json, sizeof json, "%s", tmp_path(t, "pts.json"));
    snprintf(db2, sizeof db2, "%s", tmp_path(t, "copy.db"));
    snprintf(db3, sizeof db3, "%s", tmp_path(t, "fromcsv.db"));
    CHECK(store_open(&s, db, 1, &e) == 0);
    make_sample(t, &s);
    char *want = dump_text(t, &s);
    store_close(&s);

    const char *ex[] = {"export", "--db", db, "--format", "sql", "--out", sql};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o", "e", 7, ex), 0);
    char *got = kv_read_file(sql, NULL, &e);
    CHECK(got && want && strcmp(got, want) == 0);
    free(got);
    char dbopt[4300];
    snprintf(dbopt, sizeof dbopt, "--db=%s", db); /* the --opt=value form */
    const char *exc[] = {"export", dbopt, "--format=csv", "--out", csv};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o", "e", 5, exc), 0);
    const char *exj[] = {"export", "--db", db, "--run", "2", "--format", "json"};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "json.out", "e", 7, exj), 0);
    char *jt = slurp(t, "json.out");
    cJSON *root = cJSON_Parse(jt);
    CHECK(root && cJSON_GetArraySize(cJSON_GetObjectItem(root, "runs")) == 1);
    cJSON_Delete(root);
    free(jt);

    const char *im[] = {"import", "--db", db2, sql};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im), 0);
    char *o = slurp(t, "o");
    CHECK_CONTAINS(o, "imported 2 runs (7 points) from");
    free(o);
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im), 0);
    o = slurp(t, "o");
    CHECK_CONTAINS(o, "imported 0 runs (0 points)");
    CHECK_CONTAINS(o, "skipped 2 runs already in the store");
    free(o);
    const char *imc[] = {"import", "--db", db3, csv};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, imc), 0);
    CHECK(store_open(&s, db3, 0, &e) == 0);
    int64_t n = 0;
    CHECK(store_count_points(&s, 1, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 5);
    store_close(&s);

    /* show: the run list and one run's tables, with hand-computed throughput */
    const char *sh[] = {"show", "--db", db2};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_show, "show.out", "e", 3, sh), 0);
    o = slurp(t, "show.out");
    CHECK_CONTAINS(o, "started_at");
    CHECK_CONTAINS(o, "NVIDIA H200, \"SXM\"");
    CHECK_CONTAINS(o, "2024-06-01T00:00:00Z  yes");
    free(o);
    const char *sh1[] = {"show", "--db", db2, "--run", "1"};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_show, "show.out", "e", 5, sh1), 0);
    o = slurp(t, "show.out");
    CHECK_CONTAINS(o, "  device       NVIDIA H200, \"SXM\"\n");
    CHECK_CONTAINS(o, "  points       5\n");
    CHECK_CONTAINS(o, "gemm_qkv: model llama-3-8b, bf16, tp 1 (2 points)");
    /* h2d: 1e9 bytes in 50e6 ns = 20 GB/s; median 50000 us, p10 45000, p90 62500 */
    CHECK_CONTAINS(o, "    1000000000     10    50000.000    45000.000    62500.000     20.00\n");
    /* gemm_qkv 128 tokens in 20000 ns = 6400 ktok/s */
    CHECK_CONTAINS(o, "           128     10       20.000       18.000       25.000    6400.0\n");
    /* ssd_read shows its three parameters: 1 MiB, qdepth 32, 4 drives; 1048576 / 123456.789 ns */
    CHECK_CONTAINS(o, "         bytes        qdepth         n_ssd");
    CHECK_CONTAINS(o, "       1048576            32             4     10      123.457");
    CHECK_CONTAINS(o, "      8.49\n");
    free(o);
    const char *sh2[] = {"show", "--db", db2, "--run", "1", "--op", "attn_prefill"};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_show, "show.out", "e", 7, sh2), 0);
    o = slurp(t, "show.out");
    CHECK_CONTAINS(o, "points       1 of op attn_prefill");
    CHECK_CONTAINS(o, "       new_tok       context");
    CHECK(!strstr(o, "gemm_qkv:"));
    free(o);
    const char *sh3[] = {"show", "--db", db2, "--op", "attn_decode"};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_show, "show.out", "e", 5, sh3), 0);
    o = slurp(t, "show.out");
    CHECK_CONTAINS(o, "H100-SXM");
    CHECK(!strstr(o, "NVIDIA H200"));
    free(o);
    free(want);
}

TEST(store_cmd_usage_and_failures)
{
    KvErr e = {{0}};
    CostStore s;
    char db[4200];
    snprintf(db, sizeof db, "%s", tmp_path(t, "u.db"));
    CHECK(store_open(&s, db, 1, &e) == 0);
    make_sample(t, &s);
    store_close(&s);
    struct {
        CmdFn fn;
        int argc;
        const char *argv[8];
        int want_rc;
        const char *want_text; /* in stderr (or stdout for --help) */
    } cases[] = {
        {kvcal_cmd_show, 2, {"show", "--help"}, 0, "usage: kvcal show --db FILE"},
        {kvcal_cmd_export, 2, {"export", "--help"}, 0, "--format"},
        {kvcal_cmd_import, 2, {"import", "--help"}, 0, "usage: kvcal import --db FILE INPUT"},
        {kvcal_cmd_show, 3, {"show", "--frob", "x"}, 2, "unknown option '--frob'"},
        {kvcal_cmd_export, 4, {"export", "--db", db, "--verbose"}, 2, "unknown option '--verbose'"},
        {kvcal_cmd_import, 3, {"import", "-x", "f"}, 2, "unknown option '-x'"},
        {kvcal_cmd_show, 1, {"show"}, 2, "--db is required"},
        {kvcal_cmd_show, 2, {"show", "--db"}, 2, "option --db needs a value"},
        {kvcal_cmd_show, 5, {"show", "--db", db, "--db", db}, 2, "option --db given twice"},
        {kvcal_cmd_show, 4, {"show", "--db", db, "stray"}, 2, "unexpected argument 'stray'"},
        {kvcal_cmd_show, 5, {"show", "--db", db, "--run", "abc"}, 2, "--run: 'abc' is not a run id"},
        {kvcal_cmd_show, 5, {"show", "--db", db, "--op", "gemm_zz"}, 2, "unknown op 'gemm_zz'"},
        {kvcal_cmd_show, 5, {"show", "--db", db, "--run", "42"}, 1, "no run 42"},
        {kvcal_cmd_show, 3, {"show", "--db", "/no/such/store.db"}, 1, "/no/such/store.db"},
        {kvcal_cmd_export, 3, {"export", "--db", db}, 2, "--format is required"},
        {kvcal_cmd_export, 5, {"export", "--db", db, "--format", "xml"}, 2, "--format: 'xml', expected csv, json or sql"},
        {kvcal_cmd_export, 7, {"export", "--db", db, "--format", "csv", "--run", "9"}, 1, "no run 9"},
        {kvcal_cmd_export, 7, {"export", "--db", db, "--format", "csv", "--out", "/no/dir/x.csv"}, 1, "/no/dir/x.csv"},
        {kvcal_cmd_import, 3, {"import", "--db", db}, 2, "the INPUT file to import is required"},
        {kvcal_cmd_import, 5, {"import", "--db", db, "a.sql", "b.sql"}, 2, "unexpected argument 'b.sql'"},
        {kvcal_cmd_import, 4, {"import", "--db", db, "/no/such/input.sql"}, 1, "/no/such/input.sql"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        int rc = run_cmd(t, cases[i].fn, "o", "e", cases[i].argc, cases[i].argv);
        CHECK_MSG(rc == cases[i].want_rc, "case %zu (%s %s): rc %d, wanted %d", i, cases[i].argv[0],
                  cases[i].argc > 1 ? cases[i].argv[1] : "", rc, cases[i].want_rc);
        char *o = slurp(t, cases[i].want_rc == 0 ? "o" : "e");
        CHECK_MSG(strstr(o, cases[i].want_text) != NULL, "case %zu: '%s' not in '%s'", i, cases[i].want_text, o);
        free(o);
    }
    /* a failed export to --out leaves no file behind; a good one replaces the old file wholly */
    const char *out = test_write_file(t, "keep.csv", "old content\n");
    const char *ex_bad[] = {"export", "--db", db, "--run", "9", "--format", "csv", "--out", out};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o", "e", 9, ex_bad), 1);
    char *k = kv_read_file(out, NULL, &e);
    CHECK_STR(k, "old content\n");
    free(k);
    /* an import of something that is neither kind: refused before any store is created */
    const char *junk = test_write_file(t, "junk.txt", "hello\n");
    const char *newdb = tmp_path(t, "new.db");
    const char *im[] = {"import", "--db", newdb, junk};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im), 1);
    char *o = slurp(t, "e");
    CHECK_CONTAINS(o, "neither a kvsim SQL dump nor a CSV export");
    free(o);
    CHECK(access(newdb, F_OK) != 0);
    /* a failing first import into a new store removes the new file */
    const char *badcsv = test_write_file(t, "bad.csv", "run_id,backend\n1,cuda\n");
    const char *im2[] = {"import", "--db", newdb, badcsv};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im2), 1);
    o = slurp(t, "e");
    CHECK_CONTAINS(o, "bad.csv: line 1: expected the header");
    free(o);
    CHECK(access(newdb, F_OK) != 0);
    /* into an existing store, a failing import keeps the store (and its runs) */
    const char *im3[] = {"import", "--db", db, badcsv};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im3), 1);
    CHECK(store_open(&s, db, 0, &e) == 0);
    int64_t n = 0;
    CHECK(store_count_points(&s, 1, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 5);
    store_close(&s);
    /* importing a text file as a store is refused with the store's name */
    const char *txt = test_write_file(t, "notastore.db", "plain text, not SQLite, long enough to have a header..........................................\n");
    char dump[4200];
    snprintf(dump, sizeof dump, "%s", tmp_path(t, "d.sql"));
    const char *ex[] = {"export", "--db", db, "--format", "sql", "--out", dump};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o", "e", 7, ex), 0);
    const char *im4[] = {"import", "--db", txt, dump};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_import, "o", "e", 4, im4), 1);
    o = slurp(t, "e");
    CHECK_CONTAINS(o, "notastore.db: not a kvsim cost store (file is not a database)");
    free(o);
    CHECK(access(txt, F_OK) == 0); /* an existing file is never removed */
}

/* ---- golden fixtures: a committed schema-1 dump and CSV must keep loading and re-export
 * byte for byte; if this fails after a deliberate format change, bump STORE_SCHEMA_VERSION and
 * regenerate the fixtures (kvcal export --format sql|csv of a store loaded from them). ---- */

TEST(store_golden_dump_fixture_round_trips)
{
    KvErr e = {{0}};
    const char *fx = test_path("tests/fixtures/store_dump_v1.sql");
    char *want = kv_read_file(fx, NULL, &e);
    CHECK_MSG(want != NULL, "%s", e.msg);
    if (!want) return;
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "g.db"), 1, &e) == 0);
    StoreImportStats st;
    CHECK_MSG(store_import_sql_stats(&s, want, fx, &st, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(st.runs_added, 2);
    CHECK_EQ_I(st.points_added, 9);
    char *got = dump_text(t, &s);
    CHECK_MSG(got && strcmp(got, want) == 0, "the dump of %s differs from the file", fx);
    /* what a reader gets from it */
    int64_t run = 0;
    CHECK(store_pick_run(&s, "NVIDIA H200", "llama-3-8b", "bf16", 1, OP_GEMM_QKV, &run, &e) == 0);
    CHECK_EQ_I(run, 1);
    CHECK(store_pick_run(&s, "H100-SXM", "llama-3-8b", "bf16", 2, OP_GEMM_O, &run, &e) == 0);
    CHECK_EQ_I(run, 2);
    static PointSet ps;
    ps.n = 0;
    CHECK(store_run_points(&s, 1, OP_SSD_READ, collect, &ps, &e) == 0);
    CHECK_EQ_I(ps.n, 1);
    CHECK_NEAR(ps.v[0].median_ns, 98765.4321, 0, 0);
    CHECK_EQ_I(ps.v[0].p2, 32);
    CHECK_EQ_I(ps.v[0].p3, 4);
    free(got);
    free(want);
    store_close(&s);
}

TEST(store_golden_csv_fixture_round_trips)
{
    KvErr e = {{0}};
    const char *fx = test_path("tests/fixtures/store_export_v1.csv");
    char *want = kv_read_file(fx, NULL, &e);
    CHECK_MSG(want != NULL, "%s", e.msg);
    if (!want) return;
    CostStore s;
    CHECK(store_open(&s, tmp_path(t, "g.db"), 1, &e) == 0);
    CHECK_MSG(store_import_csv(&s, want, fx, &e) == 0, "%s", e.msg);
    char *got = export_text(t, &s, 0, 0);
    CHECK_MSG(got && strcmp(got, want) == 0, "the CSV export differs from %s", fx);
    free(got);
    free(want);
    store_close(&s);
}

/* ---- hardening: untrusted stores and dumps ---- */

#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

TEST(store_import_refuses_recursive_and_growing_dumps_fast)
{
    const char *db = tmp_path(t, "x.db");
    static const char *const bodies[] = {
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c;\n",
        "CREATE TABLE big AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT zeroblob(1000000) AS b FROM c;\n",
        /* our own INSERT form, but a subquery in place of a literal */
        "BEGIN TRANSACTION;\nINSERT INTO point VALUES((WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT count(*) FROM c),'h2d','','fp16',1,1,0,0,1,1,1,1);\n",
        /* a function call where a literal belongs */
        "INSERT INTO run VALUES(1,'spec',randomblob(1000000000),'','','','','','','','',1,0,'',1);\n",
        /* a trigger: not a statement a dump holds */
        "CREATE TRIGGER t AFTER INSERT ON point BEGIN SELECT 1; END;\n",
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(bodies); i++) {
        char text[1024];
        snprintf(text, sizeof text, "-- kvsim cost store dump, schema 1\n%s", bodies[i]);
        unlink(db);
        CostStore s;
        KvErr e = {{0}};
        CHECK_MSG(store_open(&s, db, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
        double t0 = now_s();
        CHECK(store_import_sql(&s, text, "d.sql", &e) == -1);
        CHECK_MSG(now_s() - t0 < 5, "import %zu took %.1f s", i, now_s() - t0);
        CHECK_CONTAINS(e.msg, "d.sql: line ");
        CHECK_CONTAINS(e.msg, "not a statement of a kvsim cost store dump");
        int64_t nruns = -1;
        CHECK(store_count_points(&s, 1, -1, &nruns, &e) == 0);
        CHECK_EQ_I(nruns, 0);
        store_close(&s);
    }
}

TEST(store_guard_stops_a_runaway_statement)
{
    /* the guard on a plain connection: an endless recursive query is interrupted within budget */
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
    StoreGuard g;
    KvErr e = {{0}};
    CHECK(store_guard_install(db, &g, 1000000, "mem", &e) == 0);
    double t0 = now_s();
    int rc = sqlite3_exec(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c",
                          NULL, NULL, NULL);
    CHECK_EQ_I(rc & 0xff, SQLITE_INTERRUPT);
    CHECK(now_s() - t0 < 5);
    /* and the limits: no ATTACH, no giant values */
    CHECK(sqlite3_exec(db, "ATTACH ':memory:' AS other", NULL, NULL, NULL) != SQLITE_OK);
    store_guard_reset(&g, 1000000);
    CHECK_EQ_I(sqlite3_exec(db, "SELECT zeroblob(100000000)", NULL, NULL, NULL) & 0xff, SQLITE_TOOBIG);
    sqlite3_close(db);
}

/* A fresh good store at path with the sample runs. */
static void sample_store(TestCtx *t, const char *path)
{
    unlink(path);
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, path, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
    make_sample(t, &s);
    store_close(&s);
}

/* Open path in every mode and expect a refusal containing want, quickly. */
static void expect_refused(TestCtx *t, const char *path, const char *want)
{
    for (int mode = STORE_OPEN_EXISTING; mode <= STORE_OPEN_READONLY; mode++) {
        CostStore s;
        KvErr e = {{0}};
        double t0 = now_s();
        int rc = store_open(&s, path, mode, &e);
        CHECK_MSG(rc == -1, "mode %d: %s opened", mode, path);
        if (rc == 0) store_close(&s);
        CHECK(now_s() - t0 < 5);
        CHECK_CONTAINS(e.msg, path);
        CHECK_CONTAINS(e.msg, want);
    }
}

TEST(store_open_refuses_planted_views_triggers_and_altered_schema)
{
    const char *p = tmp_path(t, "view.db");
    sample_store(t, p);
    raw_sql(t, p,
            "PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON; ALTER TABLE run RENAME TO run_old;"
            "CREATE VIEW run AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
            "SELECT r.* FROM run_old AS r, c");
    expect_refused(t, p, "not a kvsim cost store: run is a view, expected a table");
    p = tmp_path(t, "trigger.db");
    sample_store(t, p);
    raw_sql(t, p,
            "CREATE TRIGGER boom AFTER INSERT ON point BEGIN "
            "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c); END");
    expect_refused(t, p, "not a kvsim cost store (unexpected trigger 'boom'");
    p = tmp_path(t, "newest.db");
    sample_store(t, p);
    raw_sql(t, p, "DROP VIEW newest_run; CREATE VIEW newest_run AS SELECT device, model, dtype, tp, op, run_id FROM "
                  "(SELECT '' AS device, '' AS model, '' AS dtype, 1 AS tp, '' AS op, 1 AS run_id)");
    expect_refused(t, p, "not a kvsim cost store: view newest_run differs from this build's schema 1");
    p = tmp_path(t, "column.db");
    sample_store(t, p);
    raw_sql(t, p, "ALTER TABLE point ADD COLUMN extra TEXT");
    expect_refused(t, p, "table point differs from this build's schema 1");
    p = tmp_path(t, "index.db");
    sample_store(t, p);
    raw_sql(t, p, "CREATE INDEX by_op ON point(op)");
    expect_refused(t, p, "unexpected index 'by_op'");
    /* ANALYZE's statistics are tolerated: they only steer the planner */
    p = tmp_path(t, "analyzed.db");
    sample_store(t, p);
    raw_sql(t, p, "ANALYZE");
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, p, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg);
    store_close(&s);
}

/* Edit the sample store by hand (sql on its first gemm_qkv point) and expect every reader to refuse
 * it with a message holding want (file, run, op, field). */
static void expect_edit_refused(TestCtx *t, const char *name, const char *sql, const char *want)
{
    const char *p = tmp_path(t, name);
    sample_store(t, p);
    raw_sql(t, p, sql);
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, p, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg);
    CHECK(store_check_run(&s, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, p);
    CHECK_CONTAINS(e.msg, want);
    StorePointList l;
    if (strstr(sql, "UPDATE point")) {
        CHECK(store_points_all(&s, 1, -1, &l, &e) == -1);
        CHECK_CONTAINS(e.msg, want);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(store_dump_sql(&s, f, &e) == -1); /* export never writes what import would refuse */
    CHECK_CONTAINS(e.msg, want);
    CHECK(store_export_csv(&s, 0, f, &e) == -1);
    CHECK_CONTAINS(e.msg, want);
    fclose(f);
    free(buf);
    store_close(&s);
}

TEST(store_readers_validate_points_as_import_does)
{
    const char *first = "WHERE rowid = (SELECT min(rowid) FROM point WHERE op = 'gemm_qkv')";
    char sql[512];
    snprintf(sql, sizeof sql, "UPDATE point SET median_ns = 'abc' %s", first);
    expect_edit_refused(t, "abc.db", sql, ": run 1: gemm_qkv point: field median_ns: 'abc' is text, expected a number");
    snprintf(sql, sizeof sql, "UPDATE point SET p1 = -5 %s", first);
    expect_edit_refused(t, "neg.db", sql, ": run 1: gemm_qkv point (-5, 0, 0): negative shape parameter");
    snprintf(sql, sizeof sql, "UPDATE point SET op = 'warp_drive' %s", first);
    expect_edit_refused(t, "op.db", sql, ": run 1: point: field op: unknown op 'warp_drive'");
    snprintf(sql, sizeof sql, "UPDATE point SET p2 = 7 %s", first);
    expect_edit_refused(t, "p2.db", sql, "p2 must be 0 (the op has 1 parameter)");
    snprintf(sql, sizeof sql, "UPDATE point SET n = 0 %s", first);
    expect_edit_refused(t, "n.db", sql, "n = 0, expected >= 1");
    snprintf(sql, sizeof sql, "UPDATE point SET p10_ns = p90_ns * 2 %s", first);
    expect_edit_refused(t, "order.db", sql, "expected 0 <= p10 <= median <= p90");
    snprintf(sql, sizeof sql, "UPDATE point SET tp = 'one' %s", first);
    expect_edit_refused(t, "tptext.db", sql, "gemm_qkv point: field tp: 'one' is text, expected an integer");
    expect_edit_refused(t, "backend.db", "UPDATE run SET backend = 'gpu' WHERE id = 1",
                        ": run 1: run field backend: 'gpu'");
}

TEST(store_export_then_import_round_trips)
{
    const char *p = tmp_path(t, "src.db");
    sample_store(t, p);
    CostStore a, b;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&a, p, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg);
    char *sql = dump_text(t, &a);
    char *csv = export_text(t, &a, 0, 0);
    store_close(&a);
    const char *q = tmp_path(t, "dst_sql.db");
    unlink(q);
    CHECK_MSG(store_open(&b, q, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
    CHECK_MSG(sql && store_import_sql(&b, sql, "out.sql", &e) == 0, "%s", e.msg);
    char *again = dump_text(t, &b);
    CHECK(sql && again && strcmp(sql, again) == 0);
    store_close(&b);
    q = tmp_path(t, "dst_csv.db");
    unlink(q);
    CHECK_MSG(store_open(&b, q, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
    CHECK_MSG(csv && store_import_csv(&b, csv, "out.csv", &e) == 0, "%s", e.msg);
    char *csv2 = export_text(t, &b, 0, 0);
    CHECK(csv && csv2 && strcmp(csv, csv2) == 0);
    store_close(&b);
    free(sql);
    free(again);
    free(csv);
    free(csv2);
}

TEST(store_readonly_refuses_writes)
{
    const char *p = tmp_path(t, "ro.db");
    sample_store(t, p);
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, p, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg);
    StoreRunMeta m = meta("cpu", "cpu", "");
    CHECK(store_begin_run(&s, &m, &e) == -1);
    CHECK_CONTAINS(e.msg, "read-only");
    CHECK(store_import_sql(&s, "-- kvsim cost store dump, schema 1\n", "d.sql", &e) == -1);
    CHECK_CONTAINS(e.msg, "read-only");
    store_close(&s);
    /* a read-only open of a missing file neither creates it nor succeeds */
    const char *missing = tmp_path(t, "missing.db");
    CHECK(store_open(&s, missing, STORE_OPEN_READONLY, &e) == -1);
    CHECK(access(missing, F_OK) != 0);
}

TEST(store_cmd_export_refuses_its_own_store)
{
    const char *db = tmp_path(t, "self.db");
    sample_store(t, db);
    int64_t before = file_size(db);
    char dbarg[4300];
    snprintf(dbarg, sizeof dbarg, "%s", db);
    const char *argv[] = {"export", "--db", dbarg, "--format", "sql", "--out", dbarg};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o.txt", "e.txt", 7, argv), 2);
    char *err = slurp(t, "e.txt");
    CHECK_CONTAINS(err, "is the same file as --db");
    free(err);
    CHECK_EQ_I(file_size(db), before);
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, db, STORE_OPEN_READONLY, &e) == 0, "%s", e.msg); /* still a store */
    store_close(&s);
    /* the same file by another name */
    char other[4400];
    snprintf(other, sizeof other, "%s/./self.db", test_tmpdir(t));
    const char *argv2[] = {"export", "--db", dbarg, "--format", "csv", "--out", other};
    CHECK_EQ_I(run_cmd(t, kvcal_cmd_export, "o.txt", "e.txt", 7, argv2), 2);
    CHECK_EQ_I(file_size(db), before);
}
