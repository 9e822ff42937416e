/* test_cost.c — cost.c: grid validation, interpolation, extrapolation counting, monotone envelope. */
#include "sim/cost/cost.h"
#include "tests/harness.h"

TEST(cost_interpolates_linearly_in_own_scale)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    CostPoint p[] = {{OP_GEMM_QKV, {1, 0, 0}, 10}, {OP_GEMM_QKV, {100, 0, 0}, 1000}, {OP_GEMM_QKV, {200, 0, 0}, 1500}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_GEMM_QKV, p, 3, 0, "spec", &e) == 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 1, 0, 0), 10, 0, 1e-9);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 100, 0, 0), 1000, 0, 1e-9);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 150, 0, 0), 1250, 0, 1e-9);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 34, 0, 0), 10 + 33.0 * 990 / 99, 1e-12, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_GEMM_QKV], 0);
    CHECK_EQ_U(cm.lookups[OP_GEMM_QKV], 4);
    cost_model_free(&cm);
}

TEST(cost_extrapolates_linearly_and_counts)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    CostPoint p[] = {{OP_H2D, {1000, 0, 0}, 100}, {OP_H2D, {2000, 0, 0}, 150}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_H2D, p, 2, 0, "spec", &e) == 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_H2D, 4000, 0, 0), 250, 0, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_H2D], 1);
    /* below the range: 500 → 75; far below clamps at 0 */
    CHECK_NEAR(cost_lookup_ns(&cm, OP_H2D, 500, 0, 0), 75, 0, 1e-9);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_H2D, -100000, 0, 0), 0, 0, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_H2D], 3);
    CHECK_EQ_U(cost_extrapolations_total(&cm), 3);
    cost_model_free(&cm);
}

TEST(cost_bilinear_grid)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    /* f(n, c) = 2n + 3c + n·c/100 sampled on {10,20} × {0,100,300} */
    CostPoint p[6];
    int k = 0;
    int64_t ns[] = {10, 20}, cs[] = {300, 0, 100}; /* unsorted on purpose */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            p[k++] = (CostPoint){OP_ATTN_PREFILL, {ns[i], cs[j], 0}, 2.0 * ns[i] + 3.0 * cs[j] + ns[i] * cs[j] / 100.0};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_ATTN_PREFILL, p, 6, 0, "spec", &e) == 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_ATTN_PREFILL, 10, 100, 0), 20 + 300 + 10, 0, 1e-9);
    /* bilinear is exact for f linear in each variable: f(15, 50) = 30 + 150 + 7.5 */
    CHECK_NEAR(cost_lookup_ns(&cm, OP_ATTN_PREFILL, 15, 50, 0), 187.5, 1e-12, 1e-9);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_ATTN_PREFILL, 15, 200, 0), 30 + 600 + 30, 1e-12, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_ATTN_PREFILL], 0);
    /* beyond the context axis: the function is linear in c for fixed n, so extrapolation is exact */
    CHECK_NEAR(cost_lookup_ns(&cm, OP_ATTN_PREFILL, 20, 600, 0), 40 + 1800 + 120, 1e-12, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_ATTN_PREFILL], 1);
    cost_model_free(&cm);
}

TEST(cost_grid_hole_is_an_error)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    CostPoint p[] = {{OP_ATTN_DECODE, {1, 100, 0}, 1}, {OP_ATTN_DECODE, {1, 200, 0}, 2}, {OP_ATTN_DECODE, {2, 100, 0}, 3}};
    KvErr e = {{0}};
    CHECK(cost_model_set_op(&cm, OP_ATTN_DECODE, p, 3, 0, "spec", &e) == -1);
    CHECK_CONTAINS(e.msg, "attn_decode");
    CHECK_CONTAINS(e.msg, "(2, 200, 0) is missing");
    CHECK(!cost_has(&cm, OP_ATTN_DECODE));
    cost_model_free(&cm);
}

TEST(cost_duplicate_and_negative_points_refused)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    CostPoint dup[] = {{OP_GEMM_O, {8, 0, 0}, 1}, {OP_GEMM_O, {8, 0, 0}, 2}};
    KvErr e = {{0}};
    CHECK(cost_model_set_op(&cm, OP_GEMM_O, dup, 2, 0, "spec", &e) == -1);
    CHECK_CONTAINS(e.msg, "duplicate point (8, 0, 0)");
    CostPoint neg[] = {{OP_GEMM_O, {8, 0, 0}, -5}};
    CHECK(cost_model_set_op(&cm, OP_GEMM_O, neg, 1, 0, "spec", &e) == -1);
    CHECK_CONTAINS(e.msg, "invalid time");
    CHECK(cost_model_set_op(&cm, OP_GEMM_O, neg, 0, 0, "spec", &e) == -1);
    CHECK_CONTAINS(e.msg, "no points");
    cost_model_free(&cm);
}

TEST(cost_monotone_envelope)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    /* a noisy measurement dips at 3 */
    CostPoint p[] = {{OP_GEMM_FFN_UP, {1, 0, 0}, 10}, {OP_GEMM_FFN_UP, {2, 0, 0}, 20},
                     {OP_GEMM_FFN_UP, {3, 0, 0}, 15}, {OP_GEMM_FFN_UP, {4, 0, 0}, 40}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_GEMM_FFN_UP, p, 4, 0, "cuda", &e) == 0);
    CHECK_EQ_U(cm.monotone_fixes, 1);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_FFN_UP, 3, 0, 0), 20, 0, 1e-9);
    double prev = 0;
    for (int64_t x = 1; x <= 4; x++) {
        double v = cost_lookup_ns(&cm, OP_GEMM_FFN_UP, x, 0, 0);
        CHECK(v >= prev);
        prev = v;
    }
    cost_model_free(&cm);
}

TEST(cost_single_point_axis_is_constant)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "", "", 1);
    /* ssd_read at one queue depth and one drive count: only bytes vary */
    CostPoint p[] = {{OP_SSD_READ, {4096, 32, 4}, 100}, {OP_SSD_READ, {8192, 32, 4}, 150}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_SSD_READ, p, 2, 0, "spec", &e) == 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_SSD_READ, 6144, 32, 4), 125, 0, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_SSD_READ], 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_SSD_READ, 6144, 8, 4), 125, 0, 1e-9);
    CHECK_EQ_U(cm.extrapolations[OP_SSD_READ], 1); /* qd 8 is outside the sampled {32} */
    cost_model_free(&cm);
}

TEST(cost_queue_depth_axis_may_decrease)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "", "", 1);
    /* deeper queues are faster: not a measurement error, so not "fixed" */
    CostPoint p[] = {{OP_SSD_READ, {4096, 1, 1}, 200}, {OP_SSD_READ, {4096, 32, 1}, 100},
                     {OP_SSD_READ, {8192, 1, 1}, 300}, {OP_SSD_READ, {8192, 32, 1}, 150}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_SSD_READ, p, 4, 0, "cpu", &e) == 0);
    CHECK_EQ_U(cm.monotone_fixes, 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_SSD_READ, 4096, 32, 1), 100, 0, 1e-9);
    cost_model_free(&cm);
}

/* ---- loading from a store: every point of a run read is validated (hand-edited stores) ---- */

#include <sqlite3.h>
#include <unistd.h>

#include "sim/cost/store.h"

static void cost_store_with_grid(TestCtx *t, const char *path)
{
    unlink(path);
    CostStore s;
    KvErr e = {{0}};
    CHECK_MSG(store_open(&s, path, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
    StoreRunMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.backend, sizeof m.backend, "cpu");
    snprintf(m.device, sizeof m.device, "dev");
    snprintf(m.model, sizeof m.model, "m");
    snprintf(m.dtype, sizeof m.dtype, "fp16");
    m.tp = 1;
    CHECK_MSG(store_begin_run(&s, &m, &e) == 0, "%s", e.msg);
    for (int i = 1; i <= 3; i++) {
        StorePoint p;
        memset(&p, 0, sizeof p);
        p.op = OP_GEMM_QKV;
        snprintf(p.model, sizeof p.model, "m");
        snprintf(p.dtype, sizeof p.dtype, "fp16");
        p.tp = 1;
        p.p1 = 100 * i;
        p.n = 3;
        p.median_ns = p.p10_ns = p.p90_ns = 1000.0 * i;
        CHECK_MSG(store_add_point(&s, m.id, &p, &e) == 0, "%s", e.msg);
    }
    CHECK_MSG(store_end_run(&s, m.id, 1, &e) == 0, "%s", e.msg);
    store_close(&s);
}

static void cost_edit(TestCtx *t, const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK_MSG(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
}

TEST(cost_load_refuses_hand_edited_store)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/edited.db", test_tmpdir(t));
    static const struct {
        const char *sql, *want;
    } cases[] = {
        {"UPDATE point SET median_ns = 'abc' WHERE p1 = 200", ": run 1: gemm_qkv point: field median_ns: 'abc' is text"},
        {"UPDATE point SET p1 = -100 WHERE p1 = 100", ": run 1: gemm_qkv point (-100, 0, 0): negative shape parameter"},
        /* an op this build does not know, in the run kvsim reads: no longer ignored */
        {"INSERT INTO point VALUES(1, 'warp_drive', 'm', 'fp16', 1, 1, 0, 0, 1, 1, 1, 1)",
         ": run 1: point: field op: unknown op 'warp_drive'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cost_store_with_grid(t, path);
        CostModel cm;
        KvErr e = {{0}};
        CHECK_MSG(cost_model_load_db(&cm, path, "dev", "m", "fp16", 1, &e) == 0, "%s", e.msg); /* the good store */
        cost_model_free(&cm);
        cost_edit(t, path, cases[i].sql);
        CHECK(cost_model_load_db(&cm, path, "dev", "m", "fp16", 1, &e) == -1);
        CHECK_CONTAINS(e.msg, path);
        CHECK_CONTAINS(e.msg, cases[i].want);
    }
}

/* ---- the fast path (cost_lookup_ns, cost_lookup_hint_ns) against the reference loop ---- */

static uint64_t tc_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* a full grid over n[0] × n[1] × n[2] irregular axis values with values of many significant digits */
static int tc_grid(CostModel *cm, CostOp op, const int *n, uint64_t *s, int64_t ax[3][16], KvErr *e)
{
    CostPoint pts[16 * 16 * 16];
    size_t k = 0;
    for (int d = 0; d < 3; d++) {
        int64_t v = (int64_t)(tc_rng(s) % 5);
        for (int i = 0; i < n[d]; i++) {
            ax[d][i] = v;
            v += 1 + (int64_t)(tc_rng(s) % 1000);
        }
    }
    for (int i = 0; i < n[0]; i++)
        for (int j = 0; j < n[1]; j++)
            for (int l = 0; l < n[2]; l++)
                pts[k++] = (CostPoint){op, {ax[0][i], n[1] > 0 ? ax[1][j] : 0, ax[2][l]},
                                       (double)(tc_rng(s) % 1000000) / 7.0 + (double)(i + j + l) * 1e3};
    return cost_model_set_op(cm, op, pts, k, 0, "spec", e);
}

/* two cost models with the same random grid of op (shape n) from seed *s (advanced): the fast and
 * the reference path each look up their own, so that their counters can be compared */
static int tc_grid_pair(CostModel *a, CostModel *b, CostOp op, const int n[3], uint64_t *s, int64_t ax[3][16], KvErr *e)
{
    cost_model_init(a, "dev", "m", "fp16", 1);
    cost_model_init(b, "dev", "m", "fp16", 1);
    uint64_t s2 = *s;
    if (tc_grid(a, op, n, s, ax, e) != 0) return -1;
    return tc_grid(b, op, n, &s2, ax, e);
}

TEST(cost_fast_path_is_bit_identical_to_the_reference)
{
    /* 1-, 2- and 3-parameter ops with single-point axes, queried inside, on points, on edges and far
     * outside (extrapolation), hinted and not: the same double, the same counters */
    static const CostOp ops[] = {OP_GEMM_QKV, OP_ATTN_DECODE, OP_SSD_READ};
    static const int shapes[][3] = {{1, 1, 1}, {2, 1, 1}, {7, 1, 1}, {16, 1, 1}, {1, 5, 1}, {6, 1, 1},
                                    {5, 9, 1}, {3, 2, 4}, {1, 1, 3}, {4, 1, 2}, {9, 7, 5}};
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    int compared = 0, extrap = 0;
    for (size_t o = 0; o < KV_ARRAY_LEN(ops); o++)
        for (size_t sh = 0; sh < KV_ARRAY_LEN(shapes); sh++) {
            int nd = cost_op_nparams(ops[o]);
            int n[3] = {shapes[sh][0], nd > 1 ? shapes[sh][1] : 1, nd > 2 ? shapes[sh][2] : 1};
            CostModel a, b;
            int64_t ax[3][16];
            KvErr e;
            CHECK(tc_grid_pair(&a, &b, ops[o], n, &s, ax, &e) == 0);
            CostHint h = {{0, 0, 0}};
            for (int q = 0; q < 3000; q++) {
                int64_t x[3];
                for (int d = 0; d < 3; d++) {
                    int64_t lo = ax[d][0], hi = ax[d][n[d] - 1];
                    switch (tc_rng(&s) % 5) {
                    case 0: x[d] = ax[d][tc_rng(&s) % (uint64_t)n[d]]; break;           /* a grid point */
                    case 1: x[d] = lo - 1 - (int64_t)(tc_rng(&s) % 3000); break;         /* below */
                    case 2: x[d] = hi + 1 + (int64_t)(tc_rng(&s) % 3000); break;         /* above */
                    default: x[d] = lo + (int64_t)(tc_rng(&s) % (uint64_t)(hi - lo + 1)); /* inside */
                    }
                }
                double want = cost_lookup_ref_ns(&a, ops[o], x[0], x[1], x[2]);
                double got = q % 2 ? cost_lookup_hint_ns(&b, ops[o], &h, x[0], x[1], x[2])
                                   : cost_lookup_ns(&b, ops[o], x[0], x[1], x[2]);
                CHECK_MSG(memcmp(&want, &got, sizeof want) == 0, "%s (%d×%d×%d) at (%lld, %lld, %lld): %.17g vs %.17g",
                          cost_op_name(ops[o]), n[0], n[1], n[2], (long long)x[0], (long long)x[1], (long long)x[2], want, got);
                compared++;
            }
            CHECK_EQ_U(a.lookups[ops[o]], b.lookups[ops[o]]);
            CHECK_EQ_U(a.extrapolations[ops[o]], b.extrapolations[ops[o]]);
            extrap += a.extrapolations[ops[o]] > 0;
            cost_model_free(&a);
            cost_model_free(&b);
        }
    CHECK(compared > 0 && extrap > 0);
}

TEST(cost_hint_any_value_gives_the_same_result)
{
    CostModel cm;
    cost_model_init(&cm, "dev", "m", "fp16", 1);
    CostPoint p[] = {{OP_GEMM_O, {1, 0, 0}, 3}, {OP_GEMM_O, {4, 0, 0}, 9}, {OP_GEMM_O, {16, 0, 0}, 40}, {OP_GEMM_O, {64, 0, 0}, 100}};
    KvErr e;
    CHECK(cost_model_set_op(&cm, OP_GEMM_O, p, 4, 0, "spec", &e) == 0);
    for (int lo = -3; lo < 8; lo++)
        for (int64_t x = -5; x < 80; x++) {
            CostHint h = {{lo, lo, lo}};
            double want = cost_lookup_ref_ns(&cm, OP_GEMM_O, x, 0, 0), got = cost_lookup_hint_ns(&cm, OP_GEMM_O, &h, x, 0, 0);
            CHECK(memcmp(&want, &got, sizeof want) == 0);
            CHECK(h.lo[0] >= 0 && h.lo[0] <= 2);
        }
    cost_model_free(&cm);
}

/* CostLine (a decode run's attention: p1 fixed, p2 moving) against the reference lookup: on the
 * shapes above (single-point axes, extrapolation on either axis), p2 walked upward in steps of
 * several sizes from below the grid to above it (as a run's context grows: every segment entered,
 * its boundaries hit) and then jumping at random, and ops that are not two-parameter or absent
 * (the generic path): the same double, and the same lookup and extrapolation counts once the line
 * ends */
TEST(cost_line_is_bit_identical_to_the_reference)
{
    static const CostOp ops[] = {OP_ATTN_DECODE, OP_GEMM_QKV, OP_SSD_READ};
    static const int shapes[][3] = {{1, 1, 1}, {2, 1, 1}, {1, 5, 1}, {5, 9, 1}, {3, 2, 4}, {9, 7, 5}, {4, 16, 1}};
    static const int64_t steps[] = {1, 3, 40, 997};
    uint64_t s = 0x243f6a8885a308d3ULL;
    int compared = 0, extrap = 0, segments = 0;
    for (size_t o = 0; o < KV_ARRAY_LEN(ops); o++)
        for (size_t sh = 0; sh < KV_ARRAY_LEN(shapes); sh++)
            for (size_t st = 0; st < KV_ARRAY_LEN(steps); st++) {
                int nd = cost_op_nparams(ops[o]);
                int n[3] = {shapes[sh][0], nd > 1 ? shapes[sh][1] : 1, nd > 2 ? shapes[sh][2] : 1};
                CostModel a, b;
                int64_t ax[3][16];
                KvErr e;
                CHECK(tc_grid_pair(&a, &b, ops[o], n, &s, ax, &e) == 0);
                for (int k = 0; k < 4; k++) { /* p1 below, on a point, inside, above */
                    int64_t lo0 = ax[0][0], hi0 = ax[0][n[0] - 1];
                    int64_t p1 = k == 0 ? lo0 - 7 : k == 1 ? ax[0][n[0] / 2] : k == 2 ? lo0 + (hi0 - lo0) / 3 : hi0 + 11;
                    CostHint h = {{0, 0, 0}};
                    CostLine ln;
                    cost_line_begin(&ln, &b, ops[o], &h, p1);
                    int64_t lo1 = ax[1][0], hi1 = ax[1][n[1] - 1], last_seg = -1;
                    for (int q = 0; q < 1200; q++) {
                        int64_t p2 = q < 600 ? lo1 - 50 + steps[st] * q : lo1 - 3000 + (int64_t)(tc_rng(&s) % (uint64_t)(hi1 - lo1 + 6001));
                        double want = cost_lookup_ref_ns(&a, ops[o], p1, p2, 0);
                        double got = cost_line_ns(&ln, p2);
                        CHECK_MSG(memcmp(&want, &got, sizeof want) == 0, "%s (%d×%d×%d) at (%lld, %lld): %.17g vs %.17g",
                                  cost_op_name(ops[o]), n[0], n[1], n[2], (long long)p1, (long long)p2, want, got);
                        compared++;
                        if (ln.mode == 1 && ln.x_lo != last_seg) segments++, last_seg = ln.x_lo;
                    }
                    cost_line_end(&ln);
                    CHECK_EQ_U(a.lookups[ops[o]], b.lookups[ops[o]]);
                    CHECK_EQ_U(a.extrapolations[ops[o]], b.extrapolations[ops[o]]);
                    extrap += b.extrapolations[ops[o]] > 0;
                }
                cost_model_free(&a);
                cost_model_free(&b);
            }
    /* an absent op: 0 ns, counted as lookups */
    CostModel c;
    cost_model_init(&c, "dev", "m", "fp16", 1);
    CostLine ln;
    cost_line_begin(&ln, &c, OP_ATTN_DECODE, NULL, 4);
    for (int64_t p2 = 0; p2 < 10; p2++) CHECK(cost_line_ns(&ln, p2) == 0);
    cost_line_end(&ln);
    CHECK_EQ_U(c.lookups[OP_ATTN_DECODE], 10);
    cost_model_free(&c);
    CHECK(compared > 0 && extrap > 0 && segments > 100);
}
