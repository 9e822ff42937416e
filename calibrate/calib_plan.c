/* calib_plan.c — default plans per backend and mode, plan editing, and the spec-based estimate of
 * a plan's duration. See calib_plan.h for the grids, timing rules and caps.
 * Library code: never prints, never exits.
 */
#include "calibrate/calib_plan.h"

#include <stdlib.h>
#include <string.h>

#include "calibrate/calib_recipe.h"

/* ==================================================================== plans */

void calib_plan_clear(CalibPlan *p) { memset(p, 0, sizeof *p); }

static int axis_from(CalibAxis *a, const int64_t *v, int n, const char *what, CostOp op, KvErr *e)
{
    if (!v || n == 0) {
        a->n = 1;
        a->v[0] = 0;
        return 0;
    }
    if (n < 0 || n > CALIB_MAX_AXIS)
        return kv_err(e, "plan: %s %s: %d values, expected 1..%d", cost_op_name(op), what, n, CALIB_MAX_AXIS);
    for (int i = 0; i < n; i++) {
        if (v[i] < 0) return kv_err(e, "plan: %s %s: value %lld < 0", cost_op_name(op), what, (long long)v[i]);
        if (i && v[i] <= v[i - 1])
            return kv_err(e, "plan: %s %s: values must be ascending and distinct (%lld after %lld)", cost_op_name(op),
                          what, (long long)v[i], (long long)v[i - 1]);
        a->v[i] = v[i];
    }
    a->n = n;
    return 0;
}

int calib_plan_set(CalibPlan *p, CostOp op, const int64_t *a1, int n1, const int64_t *a2, int n2, const int64_t *a3,
                   int n3, const TimingCfg *timing, int64_t op_budget_ns, KvErr *e)
{
    if ((unsigned)op >= OP_COUNT) return kv_err(e, "plan: op %d out of range", (int)op);
    int np = cost_op_nparams(op);
    const int64_t *ax[3] = {a1, a2, a3};
    int nx[3] = {n1, n2, n3};
    static const char *names[3] = {"p1", "p2", "p3"};
    CalibOpPlan op_plan;
    memset(&op_plan, 0, sizeof op_plan);
    for (int d = 0; d < 3; d++) {
        if (d >= np && ax[d] && nx[d] > 0 && !(nx[d] == 1 && ax[d][0] == 0))
            return kv_err(e, "plan: %s has %d parameter%s; %s must be unset or {0}", cost_op_name(op), np, np > 1 ? "s" : "",
                          names[d]);
        if (d < np && (!ax[d] || nx[d] < 1)) return kv_err(e, "plan: %s: %s needs at least one value", cost_op_name(op), names[d]);
        if (axis_from(&op_plan.ax[d], d < np ? ax[d] : NULL, d < np ? nx[d] : 0, names[d], op, e) != 0) return -1;
    }
    if (timing_cfg_check(timing, e) != 0) return kv_err_prefix(e, "plan: %s: ", cost_op_name(op));
    if (op_budget_ns < 0) return kv_err(e, "plan: %s: op budget %lld ns < 0", cost_op_name(op), (long long)op_budget_ns);
    op_plan.enabled = 1;
    op_plan.timing = *timing;
    op_plan.timing.clock_ns = NULL;
    op_plan.timing.stop = NULL;
    op_plan.op_budget_ns = op_budget_ns;
    op_plan.cold_cache = op <= OP_LAYER_PREFILL; /* GEMMs, attention, the layer */
    p->op[op] = op_plan;
    return 0;
}

int64_t calib_plan_op_points(const CalibPlan *p, CostOp op)
{
    if ((unsigned)op >= OP_COUNT || !p->op[op].enabled) return 0;
    const CalibOpPlan *o = &p->op[op];
    return (int64_t)o->ax[0].n * o->ax[1].n * o->ax[2].n;
}

int64_t calib_plan_points(const CalibPlan *p)
{
    int64_t n = 0;
    for (int op = 0; op < OP_COUNT; op++) n += calib_plan_op_points(p, (CostOp)op);
    return n;
}

/* powers of two from lo to hi, plus `extra` values in range; sorted, distinct */
static int geo_axis(int64_t *out, int64_t lo, int64_t hi, int64_t factor, const int64_t *extra, int n_extra)
{
    int n = 0;
    for (int64_t v = lo; v <= hi && n < CALIB_MAX_AXIS; v *= factor) out[n++] = v;
    for (int i = 0; i < n_extra && n < CALIB_MAX_AXIS; i++)
        if (extra[i] >= lo && extra[i] <= hi) out[n++] = extra[i];
    for (int i = 1; i < n; i++) /* insertion sort, then drop duplicates */
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            int64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || out[k - 1] != out[i]) out[k++] = out[i];
    return k;
}

#define MS(x) ((int64_t)(x) * 1000000LL)
#define SEC(x) ((int64_t)(x) * 1000000000LL)

int calib_plan_default(CalibPlan *p, const char *backend, int quick, KvErr *e)
{
    calib_plan_clear(p);
    int cuda;
    if (backend && !strcmp(backend, "cuda")) cuda = 1;
    else if (backend && !strcmp(backend, "cpu")) cuda = 0;
    else return kv_err(e, "unknown backend '%s' (expected cpu or cuda)", backend ? backend : "(null)");

    /* multiples of 64 between the powers of two (1.5x steps) */
    static const int64_t mult64[] = {192, 384, 768, 1536, 3072, 6144, 12288, 24576, 49152};
    int64_t gemm_t[CALIB_MAX_AXIS], ew_t[CALIB_MAX_AXIS], an[CALIB_MAX_AXIS], ac[CALIB_MAX_AXIS], db[CALIB_MAX_AXIS],
        dc[CALIB_MAX_AXIS], ln[CALIB_MAX_AXIS], lc[CALIB_MAX_AXIS], lb[CALIB_MAX_AXIS], sb[CALIB_MAX_AXIS];
    int n_gemm, n_ew, n_an, n_ac, n_db, n_dc, n_ln, n_lc, n_lb, n_sb;
    static const int64_t ssd_qd_full[] = {1, 4, 16, 32}, ssd_qd_quick[] = {1, 16};
    static const int64_t ssd_nf_full[] = {1, 2, 4}, ssd_nf_quick[] = {1, 2};
    const int64_t *sq = quick ? ssd_qd_quick : ssd_qd_full, *sf = quick ? ssd_nf_quick : ssd_nf_full;
    int n_sq = quick ? 2 : 4, n_sf = quick ? 2 : 3;
    TimingCfg t_kern, t_link, t_ssd;
    int64_t b_gemm, b_attn, b_layer, b_ew, b_io;

#define SET(dst, n, ...)                                              \
    do {                                                             \
        static const int64_t v_[] = {__VA_ARGS__};                   \
        n = (int)KV_ARRAY_LEN(v_);                                   \
        memcpy(dst, v_, sizeof v_);                                  \
    } while (0)

    if (cuda && !quick) {
        n_gemm = geo_axis(gemm_t, 1, 65536, 2, mult64, (int)KV_ARRAY_LEN(mult64));
        n_ew = geo_axis(ew_t, 1, 65536, 2, mult64, (int)KV_ARRAY_LEN(mult64));
        SET(an, n_an, 1, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536);
        SET(ac, n_ac, 0, 1024, 4096, 16384, 32768, 65536, 131072);
        SET(db, n_db, 1, 2, 4, 8, 16, 32, 64, 128, 256);
        SET(dc, n_dc, 1024, 4096, 16384, 65536, 262144, 1048576);
        SET(ln, n_ln, 1, 16, 256, 1024, 4096, 16384, 65536);
        SET(lc, n_lc, 0, 4096, 32768, 131072);
        n_lb = geo_axis(lb, 4096, (int64_t)1 << 30, 4, NULL, 0);
        SET(sb, n_sb, 65536, 1048576, 16777216, 67108864);
        t_kern = (TimingCfg){.warmup = 3, .warmup_max_ns = MS(20), .min_reps = 10, .max_reps = 200, .min_time_ns = MS(50),
                             .budget_ns = MS(400)};
        t_link = (TimingCfg){.warmup = 2, .min_reps = 10, .max_reps = 100, .min_time_ns = MS(20), .budget_ns = MS(500)};
        t_ssd = (TimingCfg){.warmup = 1, .min_reps = 3, .max_reps = 20, .min_time_ns = MS(50), .budget_ns = SEC(1)};
        b_gemm = SEC(20), b_attn = SEC(40), b_layer = SEC(30), b_ew = SEC(10), b_io = SEC(30);
        snprintf(p->caps, sizeof p->caps, "cuda full grids: tokens 1..64K, attention 64K new over 128K context, decode 256 x 1M");
    } else if (cuda) {
        SET(gemm_t, n_gemm, 1, 16, 64, 512, 4096, 16384);
        SET(ew_t, n_ew, 1, 64, 512, 4096, 32768);
        SET(an, n_an, 1, 64, 512, 4096);
        SET(ac, n_ac, 0, 4096, 32768);
        SET(db, n_db, 1, 16, 128);
        SET(dc, n_dc, 4096, 65536, 524288);
        SET(ln, n_ln, 1, 512, 4096);
        SET(lc, n_lc, 0, 4096);
        SET(lb, n_lb, 4096, 1048576, 67108864, 268435456);
        SET(sb, n_sb, 1048576, 16777216);
        t_kern = (TimingCfg){.warmup = 2, .warmup_max_ns = MS(10), .min_reps = 5, .max_reps = 50, .min_time_ns = MS(10),
                             .budget_ns = MS(200)};
        t_link = (TimingCfg){.warmup = 1, .min_reps = 5, .max_reps = 20, .min_time_ns = MS(10), .budget_ns = MS(200)};
        t_ssd = (TimingCfg){.warmup = 1, .min_reps = 2, .max_reps = 10, .min_time_ns = MS(20), .budget_ns = MS(500)};
        b_gemm = SEC(5), b_attn = SEC(10), b_layer = SEC(10), b_ew = SEC(3), b_io = SEC(10);
        snprintf(p->caps, sizeof p->caps, "cuda quick grids: gemm tokens <= 16K, attention 4K new over 32K context");
    } else if (!quick) {
        static const int64_t m64_cpu[] = {192, 384, 768, 1536, 3072, 6144, 12288};
        /* the GEMMs also at every row count up to 16 that is not a power of two: a BLAS's cost is
         * not linear there (calib_plan_add_small), and decode batches are those sizes */
        static const int64_t gemm_x[] = {3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 192, 384, 768, 1536, 3072, 6144, 12288};
        n_gemm = geo_axis(gemm_t, 1, 2048, 2, gemm_x, (int)KV_ARRAY_LEN(gemm_x));
        n_ew = geo_axis(ew_t, 1, 16384, 2, m64_cpu, (int)KV_ARRAY_LEN(m64_cpu));
        SET(an, n_an, 1, 16, 64, 256, 512, 1024);
        SET(ac, n_ac, 0, 1024, 4096, 8192, 16384);
        SET(db, n_db, 1, 4, 16, 64, 256);
        SET(dc, n_dc, 1024, 4096, 16384, 65536);
        SET(ln, n_ln, 1, 16, 256, 1024);
        SET(lc, n_lc, 0, 4096, 16384);
        n_lb = geo_axis(lb, 4096, (int64_t)1 << 28, 4, NULL, 0);
        SET(sb, n_sb, 65536, 1048576, 16777216, 67108864);
        t_kern = (TimingCfg){.warmup = 1, .min_reps = 3, .max_reps = 50, .min_time_ns = MS(100), .budget_ns = SEC(5)};
        t_link = (TimingCfg){.warmup = 1, .min_reps = 5, .max_reps = 50, .min_time_ns = MS(20), .budget_ns = SEC(1)};
        t_ssd = (TimingCfg){.warmup = 1, .min_reps = 3, .max_reps = 20, .min_time_ns = MS(50), .budget_ns = SEC(1)};
        b_gemm = SEC(120), b_attn = SEC(600), b_layer = SEC(600), b_ew = SEC(30), b_io = SEC(60);
        snprintf(p->caps, sizeof p->caps, "cpu caps: gemm tokens <= 2K, elementwise <= 16K, attention 1K new over 16K "
                                          "context, decode 256 x 64K, layer 1K x 16K, copies <= 256 MiB");
    } else {
        SET(gemm_t, n_gemm, 1, 64, 512);
        SET(ew_t, n_ew, 1, 64, 512, 4096);
        SET(an, n_an, 1, 64, 256);
        SET(ac, n_ac, 0, 1024, 4096);
        SET(db, n_db, 1, 8, 32);
        SET(dc, n_dc, 1024, 8192, 32768);
        SET(ln, n_ln, 1, 64);
        SET(lc, n_lc, 0, 1024);
        SET(lb, n_lb, 4096, 262144, 16777216, 67108864);
        SET(sb, n_sb, 1048576, 16777216);
        t_kern = (TimingCfg){.warmup = 1, .min_reps = 2, .max_reps = 10, .min_time_ns = MS(20), .budget_ns = SEC(2)};
        t_link = (TimingCfg){.warmup = 1, .min_reps = 3, .max_reps = 10, .min_time_ns = MS(10), .budget_ns = MS(300)};
        t_ssd = (TimingCfg){.warmup = 1, .min_reps = 2, .max_reps = 5, .min_time_ns = MS(20), .budget_ns = MS(500)};
        b_gemm = SEC(10), b_attn = SEC(15), b_layer = SEC(15), b_ew = SEC(3), b_io = SEC(5);
        snprintf(p->caps, sizeof p->caps, "cpu quick caps: gemm tokens {1,64,512}, attention {1,64,256}x{0,1K,4K}, decode "
                                          "{1,8,32}x{1K,8K,32K}, layer {1,64}x{0,1K}");
    }
#undef SET
    static const CostOp gemms[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ};
    for (size_t i = 0; i < KV_ARRAY_LEN(gemms); i++)
        if (calib_plan_set(p, gemms[i], gemm_t, n_gemm, NULL, 0, NULL, 0, &t_kern, b_gemm, e) != 0) return -1;
    static const CostOp ews[] = {OP_NORM, OP_ACT, OP_ROPE, OP_QUANT, OP_DEQUANT};
    for (size_t i = 0; i < KV_ARRAY_LEN(ews); i++)
        if (calib_plan_set(p, ews[i], ew_t, n_ew, NULL, 0, NULL, 0, &t_kern, b_ew, e) != 0) return -1;
    if (calib_plan_set(p, OP_ATTN_PREFILL, an, n_an, ac, n_ac, NULL, 0, &t_kern, b_attn, e) != 0 ||
        calib_plan_set(p, OP_ATTN_DECODE, db, n_db, dc, n_dc, NULL, 0, &t_kern, b_attn, e) != 0 ||
        calib_plan_set(p, OP_LAYER_PREFILL, ln, n_ln, lc, n_lc, NULL, 0, &t_kern, b_layer, e) != 0)
        return -1;
    static const CostOp links[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    for (size_t i = 0; i < KV_ARRAY_LEN(links); i++)
        if (calib_plan_set(p, links[i], lb, n_lb, NULL, 0, NULL, 0, &t_link, b_io, e) != 0) return -1;
    if (calib_plan_set(p, OP_SSD_READ, sb, n_sb, sq, n_sq, sf, n_sf, &t_ssd, b_io, e) != 0 ||
        calib_plan_set(p, OP_SSD_WRITE, sb, n_sb, sq, n_sq, sf, n_sf, &t_ssd, b_io, e) != 0)
        return -1;
    return 0;
}

/* merge v[0..n) into axis a (sorted, distinct); values past CALIB_MAX_AXIS refused */
static int axis_merge(CalibAxis *a, const int64_t *v, int n, CostOp op, KvErr *e)
{
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < a->n && a->v[k] < v[i]) k++;
        if (k < a->n && a->v[k] == v[i]) continue;
        if (a->n >= CALIB_MAX_AXIS) return kv_err(e, "plan: %s: more than %d values on an axis", cost_op_name(op), CALIB_MAX_AXIS);
        memmove(&a->v[k + 1], &a->v[k], (size_t)(a->n - k) * sizeof a->v[0]);
        a->v[k] = v[i];
        a->n++;
    }
    return 0;
}

int calib_plan_add_small(CalibPlan *p, KvErr *e)
{
    /* every token count up to 16: a BLAS's GEMM at a few rows is not linear between powers of two
     * (OpenBLAS's sgemm here: 3, 5-7, 9-11, 13-15 rows cost 15-50 % more than the multiple of 4
     * next to them, each remainder of rows one more pass over the weights; docs/validation.md,
     * "Decode steps of 3") — a decode batch's size, measured instead of interpolated */
    /* and a layer-wise recompute of a 1024-token history (all its tokens in one pass of a layer:
     * make validate's split sweep), measured: the prefill attention grows with the square of the new
     * tokens, which a line through 256 and 512 extrapolates ~2x short at 1024 */
    static const int64_t tok[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 32, 128, 256, 1024},
                         an[] = {16, 32, 128, 512, 1024}, ac[] = {256, 512},
                         db[] = {2, 3, 4}, dc[] = {128, 256, 512, 2048};
    static const CostOp tok_ops[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                     OP_NORM, OP_ACT, OP_ROPE, OP_QUANT, OP_DEQUANT};
    for (size_t i = 0; i < KV_ARRAY_LEN(tok_ops); i++)
        if (p->op[tok_ops[i]].enabled && axis_merge(&p->op[tok_ops[i]].ax[0], tok, (int)KV_ARRAY_LEN(tok), tok_ops[i], e) != 0)
            return -1;
    CalibOpPlan *pf = &p->op[OP_ATTN_PREFILL], *dd = &p->op[OP_ATTN_DECODE];
    if (pf->enabled && (axis_merge(&pf->ax[0], an, (int)KV_ARRAY_LEN(an), OP_ATTN_PREFILL, e) != 0 ||
                        axis_merge(&pf->ax[1], ac, (int)KV_ARRAY_LEN(ac), OP_ATTN_PREFILL, e) != 0))
        return -1;
    if (dd->enabled && (axis_merge(&dd->ax[0], db, (int)KV_ARRAY_LEN(db), OP_ATTN_DECODE, e) != 0 ||
                        axis_merge(&dd->ax[1], dc, (int)KV_ARRAY_LEN(dc), OP_ATTN_DECODE, e) != 0))
        return -1;
    /* a layer's saved state (KV or hidden states of a 128..512-token history of a small model): the
     * reads a restoration issues, measured instead of extrapolated down from 1 MiB */
    static const int64_t sb[] = {65536, 131072, 262144, 524288};
    CalibOpPlan *sr = &p->op[OP_SSD_READ];
    if (sr->enabled && axis_merge(&sr->ax[0], sb, (int)KV_ARRAY_LEN(sb), OP_SSD_READ, e) != 0) return -1;
    size_t len = strlen(p->caps);
    snprintf(p->caps + len, sizeof p->caps - len, "; + small points");
    return 0;
}

int calib_plan_add_net(CalibPlan *p, KvErr *e)
{
    static const int64_t nb[] = {65536, 131072, 262144, 524288, 1048576, 16777216};
    const TimingCfg t = {.warmup = 1, .min_reps = 3, .max_reps = 10, .min_time_ns = 10 * 1000000LL, .budget_ns = 300 * 1000000LL};
    if (calib_plan_set(p, OP_NET, nb, (int)KV_ARRAY_LEN(nb), NULL, 0, NULL, 0, &t, 3 * 1000000000LL, e) != 0) return -1;
    size_t len = strlen(p->caps);
    snprintf(p->caps + len, sizeof p->caps - len, "; + net (loopback)");
    return 0;
}

/* ==================================================================== estimate */

#define EST_LAUNCH_NS 3000.0        /* floor per kernel of a recipe: back-to-back launches */
#define EST_OP_SETUP_S 0.05         /* buffers and fills per op */
#define EST_RUN_SETUP_S 3.0         /* context, cuBLAS handle, pinned buffers, pageable probe */

static double est_kernel_ns(const SpecInputs *in, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    if (op == OP_SSD_READ || op == OP_SSD_WRITE) {
        if (in->ssd) return spec_op_ns(in, op, p1, p2, p3);
        double qd = (double)(p2 < 1 ? 1 : p2), n = (double)(p3 < 1 ? 1 : p3);
        return 100e3 + (double)p1 / (2e9 * n * qd / (qd + 1)) * 1e9; /* a generic NVMe drive per file */
    }
    if (op >= OP_H2D && op <= OP_D2H_BIDIR && !in->link) return 10e3 + (double)p1 / 25e9 * 1e9;
    return spec_op_ns(in, op, p1, p2, p3);
}

void calib_estimate(const CalibPlan *p, const SpecInputs *in, int cuda, CalibEstimate *est)
{
    memset(est, 0, sizeof *est);
    if (!in || !in->ly || !in->ly->m || !in->gpu) return;
    CalibShapes s;
    calib_shapes_of(&s, in->ly);
    int max_calls = calib_gemm_recipe_max(&s);
    CalibGemm *scratch = calloc((size_t)max_calls, sizeof *scratch);
    if (!scratch) return;
    double flush_ns = cuda ? (double)(256 << 20) / (in->gpu->mem_bw_bytes_per_s * 0.8) * 1e9 : 0;
    double total_s = cuda ? EST_RUN_SETUP_S : 0;
    for (int op = 0; op < OP_COUNT; op++) {
        const CalibOpPlan *o = &p->op[op];
        if (!o->enabled || (op == OP_ROPE && !s.rope) || op == OP_ALLREDUCE || op == OP_ALLGATHER || op == OP_NET) continue;
        double op_ns = 0, prev = 0;
        int64_t npts = calib_plan_op_points(p, (CostOp)op), k = 0;
        for (int i = 0; i < o->ax[0].n; i++)
            for (int j = 0; j < o->ax[1].n; j++)
                for (int l = 0; l < o->ax[2].n; l++, k++) {
                    int64_t p1 = o->ax[0].v[i], p2 = o->ax[1].v[j], p3 = o->ax[2].v[l];
                    int kernels = cost_op_is_io((CostOp)op) ? 1 : calib_recipe_launches(&s, (CostOp)op, p1, scratch, max_calls);
                    double t = est_kernel_ns(in, (CostOp)op, p1, p2, p3);
                    if (cuda && t < kernels * EST_LAUNCH_NS) t = kernels * EST_LAUNCH_NS; /* launch-bound recipes (MoE) */
                    double over = (cuda ? CALIB_EST_SYNC_NS : 0) + (o->cold_cache ? flush_ns : 0);
                    if (op == OP_H2D_BIDIR || op == OP_D2H_BIDIR) /* waiting for the busy copies */
                        over += est_kernel_ns(in, op == OP_H2D_BIDIR ? OP_D2H_BIDIR : OP_H2D_BIDIR, kv_max_i64(p1, (int64_t)32 << 20), 0, 0) * 2;
                    TimingCfg c = o->timing;
                    if (prev > (double)CALIB_SKIP_WARMUP_NS) c.warmup = 0;
                    if (o->op_budget_ns > 0) {
                        double left = (double)o->op_budget_ns - op_ns, per = left / (double)(npts - k);
                        if (per < 1) per = 1;
                        if (c.budget_ns == 0 || per < (double)c.budget_ns) c.budget_ns = (int64_t)per;
                    }
                    /* the rules of timing_run on predicted times */
                    double el = 0, sum = 0;
                    int w = 0;
                    for (; w < c.warmup; w++) {
                        if (w > 0 && c.warmup_max_ns > 0 && el >= (double)c.warmup_max_ns) break;
                        el += t + over;
                    }
                    int n = 0;
                    for (;;) {
                        el += t + over;
                        sum += t;
                        n++;
                        if (n >= c.max_reps || (n >= c.min_reps && sum >= (double)c.min_time_ns) ||
                            (c.budget_ns > 0 && el >= (double)c.budget_ns))
                            break;
                    }
                    est->points++;
                    est->reps += n;
                    est->warmups += w;
                    est->launches += (int64_t)n * kernels;
                    op_ns += el;
                    prev = t;
                }
        est->op_seconds[op] = op_ns * 1e-9 + EST_OP_SETUP_S;
        total_s += est->op_seconds[op];
    }
    free(scratch);
    est->seconds = total_s;
}

void calib_spec_inputs(SpecInputs *in, const HwCatalog *hw, const ModelLayout *ly, const char *gpu_key)
{
    KvErr e2;
    memset(in, 0, sizeof *in);
    in->ly = ly;
    in->gpu = hw_find_gpu(hw, gpu_key, &e2);
    if (!in->gpu) in->gpu = hw_find_gpu(hw, "H200", &e2);
    if (!in->gpu && hw->n_gpus > 0) in->gpu = &hw->gpus[0];
    if (in->gpu && in->gpu->pcie[0]) in->link = hw_find_link(hw, in->gpu->pcie, &e2);
}
