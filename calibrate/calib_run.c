/* calib_run.c — plans, op recipes, the measured run, its estimate, device names, the diff of two
 * runs, and the `kvcal run` / `kvcal diff` commands. See calib_run.h for the semantics.
 *
 * Layout of this file: plans → shapes and recipes → the run → estimate → device key → summary →
 * diff → CLI. Everything above the CLI section is library code (never prints, never exits); the
 * two kvcal_cmd_* functions are CLI code and print.
 * Complexity: a run is O(points × repetitions) kernel launches; buffers are allocated once per op
 * at the op's largest point and reused by its other points.
 */
#include "calibrate/calib_run.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/gpu.h"

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
        n_gemm = geo_axis(gemm_t, 1, 2048, 2, m64_cpu, (int)KV_ARRAY_LEN(m64_cpu));
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

/* ==================================================================== shapes and recipes */

typedef struct Shapes {
    const ModelLayout *ly;
    int64_t D, hq, hk, dh;
    int64_t I;          /* FFN width per GPU (MoE: one expert's) */
    int64_t gate;       /* 2 gated, 1 plain */
    int64_t E, topk, shared;
    int moe, layernorm, rope, norms;
} Shapes;

static int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void shapes_of(Shapes *s, const ModelLayout *ly)
{
    const ModelSpec *m = ly->m;
    int T = ly->tp < 1 ? 1 : ly->tp;
    memset(s, 0, sizeof *s);
    s->ly = ly;
    s->D = m->hidden;
    s->hq = ceil_div64(m->heads, T);
    s->hk = model_kv_heads_per_gpu(ly);
    s->dh = m->head_dim;
    s->moe = m->n_experts > 0 && m->layers > m->dense_layers; /* the last layer is an MoE layer */
    s->I = ceil_div64(s->moe ? m->moe_intermediate : m->intermediate, T);
    s->gate = m->gated_ffn ? 2 : 1;
    s->E = s->moe ? m->n_experts : 0;
    s->topk = s->moe ? m->experts_per_tok : 0;
    s->shared = s->moe ? m->shared_experts : 0;
    s->layernorm = m->norm == NORM_LAYER;
    s->rope = m->pos == POS_ROPE;
    s->norms = m->norms_per_layer < 1 ? 1 : m->norms_per_layer;
}

/* Routed experts t tokens touch on average: E·(1 − (1 − k/E)^t), rounded, in 1..E. */
static int64_t experts_touched(const Shapes *s, int64_t t)
{
    if (t < 1 || s->E < 1) return 0;
    double x = (double)s->E * (1.0 - pow(1.0 - (double)s->topk / (double)s->E, (double)t));
    int64_t n = (int64_t)llround(x);
    return n < 1 ? 1 : (n > s->E ? s->E : n);
}

/* One GEMM of a recipe: rows m of A start at a_row, rows of C at c_row; w: weight index (-1: the
 * MoE router, whose output goes to its own buffer). */
typedef struct GemmCall {
    int64_t m, n, k;
    int w;
    int64_t a_row, c_row;
} GemmCall;

/* The GEMMs of a projection op for t tokens; returns their count (<= max), 0 for t = 0. */
static int gemm_recipe(const Shapes *s, CostOp op, int64_t t, GemmCall *calls, int max)
{
    int64_t M, N, K;
    if (t < 1 || !model_gemm_shape(s->ly, op, t, &M, &N, &K)) return 0;
    int moe_ffn = s->moe && (op == OP_GEMM_FFN_UP || op == OP_GEMM_FFN_DOWN);
    if (!moe_ffn) {
        calls[0] = (GemmCall){M, N, K, 0, 0, 0};
        return 1;
    }
    int nc = 0;
    int64_t row = 0;
    if (op == OP_GEMM_FFN_UP && nc < max) calls[nc++] = (GemmCall){t, s->E, s->D, -1, 0, 0};
    int64_t touched = experts_touched(s, t);
    /* shared experts see every token; routed experts their average share M (model_gemm_shape) */
    for (int64_t j = 0; j < s->shared && nc < max; j++, row += t)
        calls[nc++] = (GemmCall){t, N, K, (int)(s->E + j), op == OP_GEMM_FFN_UP ? 0 : row, row};
    for (int64_t j = 0; j < touched && nc < max; j++, row += M)
        calls[nc++] = (GemmCall){M, N, K, (int)j, op == OP_GEMM_FFN_UP ? 0 : row, row};
    return nc;
}

static int gemm_recipe_max(const Shapes *s) { return (int)(s->E + s->shared + 2); }

/* Rows of the FFN intermediate for t tokens (act rows; ffn_down's A rows). */
static int64_t ffn_rows(const Shapes *s, int64_t t)
{
    if (!s->moe) return t;
    int64_t M, N, K;
    model_gemm_shape(s->ly, OP_GEMM_FFN_UP, t, &M, &N, &K);
    return s->shared * t + experts_touched(s, t) * M;
}

/* The buffers of one op (NULL when unused), sized for its largest point. */
typedef struct Work {
    ProbeDev *d;
    const Shapes *s;
    CostOp op;
    int cold;
    int64_t p1, p2;                 /* the current point */
    int64_t p1_max, p2_max;
    GemmCall *calls;                /* scratch for gemm_recipe */
    int max_calls;
    /* activations [rows][width] */
    void *x, *xn, *h, *hn, *qkv, *gu, *a, *dn, *kvp, *router_out;
    /* attention */
    void *q, *k, *v, *ao;
    int *ctx_off;                   /* decode: batch + 1 host offsets */
    /* weights */
    void *w_qkv, *w_o, *w_kv, *w_router, *nw, *nb;
    void **w_up, **w_down;          /* per expert (dense: one) */
    int n_w;                        /* distinct FFN weight sets */
    /* quantization */
    void *xq, *qi8, *scale;
    int launches;                   /* kernels launched by the last launch() */
} Work;

static int wbuf(Work *w, void **buf, int64_t elems, KvErr *e)
{
    if (elems <= 0) elems = 1;
    return w->d->ops->alloc(w->d, (size_t)elems * w->d->elem_bytes, PROBE_FILL_ELEMS, buf, e);
}

static void work_free(Work *w)
{
    ProbeDev *d = w->d;
    void **all[] = {&w->x, &w->xn, &w->h, &w->hn, &w->qkv, &w->gu, &w->a, &w->dn, &w->kvp, &w->router_out, &w->q,
                    &w->k, &w->v, &w->ao, &w->w_qkv, &w->w_o, &w->w_kv, &w->w_router, &w->nw, &w->nb, &w->xq,
                    &w->qi8, &w->scale};
    for (size_t i = 0; i < KV_ARRAY_LEN(all); i++) {
        d->ops->release(d, *all[i]);
        *all[i] = NULL;
    }
    for (int i = 0; i < w->n_w; i++) {
        if (w->w_up) d->ops->release(d, w->w_up[i]);
        if (w->w_down) d->ops->release(d, w->w_down[i]);
    }
    free(w->w_up);
    free(w->w_down);
    free(w->ctx_off);
    free(w->calls);
    w->w_up = w->w_down = NULL;
    w->ctx_off = NULL;
    w->calls = NULL;
    w->n_w = 0;
}

/* FFN weights: one set (dense) or one per routed + shared expert, capped at `cap_bytes` in all
 * (beyond it, experts cycle over the sets allocated: noted by the run). */
static int alloc_ffn_weights(Work *w, int up, int down, size_t cap_bytes, KvErr *e)
{
    const Shapes *s = w->s;
    int64_t per = (up ? s->gate * s->I * s->D : 0) + (down ? s->I * s->D : 0);
    int64_t want = s->moe ? s->E + s->shared : 1;
    int64_t fit = (int64_t)(cap_bytes / ((size_t)(per > 0 ? per : 1) * w->d->elem_bytes));
    w->n_w = (int)(want < fit ? want : (fit < 1 ? 1 : fit));
    w->w_up = calloc((size_t)w->n_w, sizeof *w->w_up);
    w->w_down = calloc((size_t)w->n_w, sizeof *w->w_down);
    if (!w->w_up || !w->w_down) return kv_err(e, "calibration: out of memory");
    for (int i = 0; i < w->n_w; i++) {
        if (up && wbuf(w, &w->w_up[i], s->gate * s->I * s->D, e) != 0) return -1;
        if (down && wbuf(w, &w->w_down[i], s->I * s->D, e) != 0) return -1;
    }
    if (s->moe && up && wbuf(w, &w->w_router, s->E * s->D, e) != 0) return -1;
    return 0;
}

static size_t expert_cap_bytes(const ProbeDev *d) { return !strcmp(d->backend, "cuda") ? ((size_t)8 << 30) : ((size_t)4 << 30); }

/* Allocate what op needs at its largest point (p1_max, p2_max). */
static int work_alloc(Work *w, KvErr *e)
{
    const Shapes *s = w->s;
    int64_t t = w->p1_max, c = w->p2_max;
    w->max_calls = gemm_recipe_max(s);
    w->calls = calloc((size_t)w->max_calls, sizeof *w->calls);
    if (!w->calls) return kv_err(e, "calibration: out of memory");
    int64_t qkv_w = (s->hq + 2 * s->hk) * s->dh, rows = ffn_rows(s, t);
    switch (w->op) {
    case OP_GEMM_QKV:
        return wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->w_qkv, qkv_w * s->D, e) || wbuf(w, &w->qkv, t * qkv_w, e) ? -1 : 0;
    case OP_GEMM_O:
        return wbuf(w, &w->ao, t * s->hq * s->dh, e) || wbuf(w, &w->w_o, s->D * s->hq * s->dh, e) || wbuf(w, &w->h, t * s->D, e)
                   ? -1 : 0;
    case OP_GEMM_KV_PROJ:
        return wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->w_kv, 2 * s->hk * s->dh * s->D, e) ||
                       wbuf(w, &w->kvp, t * 2 * s->hk * s->dh, e) || wbuf(w, &w->k, t * s->hk * s->dh, e)
                   ? -1 : 0;
    case OP_GEMM_FFN_UP:
        if (wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->gu, rows * s->gate * s->I, e)) return -1;
        if (s->moe && wbuf(w, &w->router_out, t * s->E, e)) return -1;
        return alloc_ffn_weights(w, 1, 0, expert_cap_bytes(w->d), e);
    case OP_GEMM_FFN_DOWN:
        if (wbuf(w, &w->a, rows * s->I, e) || wbuf(w, &w->dn, rows * s->D, e)) return -1;
        return alloc_ffn_weights(w, 0, 1, expert_cap_bytes(w->d), e);
    case OP_ATTN_PREFILL:
        return wbuf(w, &w->q, t * s->hq * s->dh, e) || wbuf(w, &w->ao, t * s->hq * s->dh, e) ||
                       wbuf(w, &w->k, (c + t) * s->hk * s->dh, e) || wbuf(w, &w->v, (c + t) * s->hk * s->dh, e)
                   ? -1 : 0;
    case OP_ATTN_DECODE:
        w->ctx_off = calloc((size_t)t + 1, sizeof *w->ctx_off);
        if (!w->ctx_off) return kv_err(e, "calibration: out of memory");
        return wbuf(w, &w->q, t * s->hq * s->dh, e) || wbuf(w, &w->ao, t * s->hq * s->dh, e) ||
                       wbuf(w, &w->k, c * s->hk * s->dh, e) || wbuf(w, &w->v, c * s->hk * s->dh, e)
                   ? -1 : 0;
    case OP_NORM:
        return wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->xn, t * s->D, e) || wbuf(w, &w->nw, s->D, e) || wbuf(w, &w->nb, s->D, e)
                   ? -1 : 0;
    case OP_ACT:
        return wbuf(w, &w->gu, rows * s->gate * s->I, e) || wbuf(w, &w->a, rows * s->I, e) ? -1 : 0;
    case OP_ROPE:
        return wbuf(w, &w->q, t * s->hq * s->dh, e) || wbuf(w, &w->k, t * s->hk * s->dh, e) ? -1 : 0;
    case OP_QUANT:
    case OP_DEQUANT: {
        int64_t vals = t * 2 * s->hk * s->dh;
        if (wbuf(w, &w->xq, vals, e)) return -1;
        if (w->d->ops->alloc(w->d, (size_t)vals, PROBE_FILL_I8, &w->qi8, e) != 0) return -1;
        return w->d->ops->alloc(w->d, (size_t)(t * 2 * s->hk) * sizeof(float), PROBE_FILL_SCALE, &w->scale, e);
    }
    case OP_LAYER_PREFILL:
        if (wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->xn, t * s->D, e) || wbuf(w, &w->h, t * s->D, e) ||
            wbuf(w, &w->hn, t * s->D, e) || wbuf(w, &w->qkv, t * qkv_w, e) || wbuf(w, &w->w_qkv, qkv_w * s->D, e) ||
            wbuf(w, &w->w_o, s->D * s->hq * s->dh, e) || wbuf(w, &w->nw, s->D, e) || wbuf(w, &w->nb, s->D, e) ||
            wbuf(w, &w->q, t * s->hq * s->dh, e) || wbuf(w, &w->ao, t * s->hq * s->dh, e) ||
            wbuf(w, &w->k, (c + t) * s->hk * s->dh, e) || wbuf(w, &w->v, (c + t) * s->hk * s->dh, e) ||
            wbuf(w, &w->gu, rows * s->gate * s->I, e) || wbuf(w, &w->a, rows * s->I, e))
            return -1;
        if (s->moe && (wbuf(w, &w->router_out, t * s->E, e) || wbuf(w, &w->dn, rows * s->D, e))) return -1;
        return alloc_ffn_weights(w, 1, 1, expert_cap_bytes(w->d), e);
    default:
        return kv_err(e, "calibration: op %s has no compute recipe", cost_op_name(w->op));
    }
}

static void *rows_at(const Work *w, void *base, int64_t row, int64_t width)
{
    return (char *)base + (size_t)(row * width) * w->d->elem_bytes;
}

/* The GEMMs of a projection op: input `in` ([rows][K]), output `out` ([rows][N]). */
static int launch_gemms(Work *w, CostOp op, int64_t t, void *in, void *out, const void *weight, KvErr *e)
{
    ProbeDev *d = w->d;
    int nc = gemm_recipe(w->s, op, t, w->calls, w->max_calls);
    for (int i = 0; i < nc; i++) {
        const GemmCall *g = &w->calls[i];
        const void *b = g->w < 0 ? w->w_router
                        : weight ? weight
                        : op == OP_GEMM_FFN_UP ? w->w_up[g->w % w->n_w] : w->w_down[g->w % w->n_w];
        void *c = g->w < 0 ? w->router_out : rows_at(w, out, g->c_row, g->n);
        if (d->ops->gemm(d, (int)g->m, (int)g->n, (int)g->k, rows_at(w, in, g->a_row, g->k), b, c, e) != 0) return -1;
        w->launches++;
    }
    return 0;
}

static int launch_norm(Work *w, void *x, void *y, int64_t t, KvErr *e)
{
    w->launches++;
    return w->d->ops->norm(w->d, w->s->layernorm, x, w->nw, w->nb, y, (int)t, (int)w->s->D, e);
}

static int launch_act(Work *w, int64_t t, KvErr *e)
{
    const Shapes *s = w->s;
    int64_t rows = ffn_rows(s, t), f = s->gate == 2 ? s->I : s->I / 2; /* plain FFN: gated kernel over I/2 pairs */
    if (f < 1) f = 1;
    w->launches++;
    return w->d->ops->act(w->d, KACT_SILU, w->gu, w->a, (int)rows, (int)f, e);
}

static int launch_rope(Work *w, void *q, void *k, int64_t t, KvErr *e)
{
    const Shapes *s = w->s;
    w->launches += 2;
    if (w->d->ops->rope(w->d, q, (int)t, (int)s->hq, (int)s->dh, e) != 0) return -1;
    return w->d->ops->rope(w->d, k, (int)t, (int)s->hk, (int)s->dh, e);
}

/* Launch the kernels of the current point (everything between the timer's start and stop). */
static int work_launch(Work *w, KvErr *e)
{
    ProbeDev *d = w->d;
    const Shapes *s = w->s;
    int64_t t = w->p1, c = w->p2;
    w->launches = 0;
    switch (w->op) {
    case OP_GEMM_QKV:
        return launch_gemms(w, OP_GEMM_QKV, t, w->x, w->qkv, w->w_qkv, e);
    case OP_GEMM_O:
        return launch_gemms(w, OP_GEMM_O, t, w->ao, w->h, w->w_o, e);
    case OP_GEMM_FFN_UP:
        return launch_gemms(w, OP_GEMM_FFN_UP, t, w->x, w->gu, NULL, e);
    case OP_GEMM_FFN_DOWN:
        return launch_gemms(w, OP_GEMM_FFN_DOWN, t, w->a, w->dn, NULL, e);
    case OP_GEMM_KV_PROJ:
        if (launch_gemms(w, OP_GEMM_KV_PROJ, t, w->x, w->kvp, w->w_kv, e) != 0) return -1;
        if (!s->rope) return 0;
        w->launches++;
        return d->ops->rope(d, w->k, (int)t, (int)s->hk, (int)s->dh, e);
    case OP_ATTN_PREFILL:
        w->launches++;
        return d->ops->attn_prefill(d, w->q, w->k, w->v, w->ao, (int)t, (int)c, (int)s->hq, (int)s->hk, (int)s->dh, e);
    case OP_ATTN_DECODE:
        w->launches++;
        return d->ops->attn_decode(d, w->q, w->k, w->v, w->ao, (int)t, w->ctx_off, (int)s->hq, (int)s->hk, (int)s->dh, e);
    case OP_NORM:
        return launch_norm(w, w->x, w->xn, t, e);
    case OP_ACT:
        return launch_act(w, t, e);
    case OP_ROPE:
        return launch_rope(w, w->q, w->k, t, e);
    case OP_QUANT:
        w->launches++;
        return d->ops->quant(d, w->xq, w->qi8, w->scale, (int)(t * 2 * s->hk), (int)s->dh, e);
    case OP_DEQUANT:
        w->launches++;
        return d->ops->dequant(d, w->qi8, w->scale, w->xq, (int)(t * 2 * s->hk), (int)s->dh, e);
    case OP_LAYER_PREFILL: {
        /* the new tokens' K rows sit after the context's */
        void *k_new = rows_at(w, w->k, c, s->hk * s->dh);
        if (launch_norm(w, w->x, w->xn, t, e) || launch_gemms(w, OP_GEMM_QKV, t, w->xn, w->qkv, w->w_qkv, e) ||
            (s->rope && launch_rope(w, w->q, k_new, t, e)))
            return -1;
        w->launches++;
        if (d->ops->attn_prefill(d, w->q, w->k, w->v, w->ao, (int)t, (int)c, (int)s->hq, (int)s->hk, (int)s->dh, e) != 0 ||
            launch_gemms(w, OP_GEMM_O, t, w->ao, w->h, w->w_o, e) || launch_norm(w, w->h, w->hn, t, e) ||
            launch_gemms(w, OP_GEMM_FFN_UP, t, w->hn, w->gu, NULL, e) || launch_act(w, t, e) ||
            launch_gemms(w, OP_GEMM_FFN_DOWN, t, w->a, s->moe ? w->dn : w->x, NULL, e))
            return -1;
        for (int i = 2; i < s->norms; i++) /* the model's extra norms (Gemma-2: 4 per layer) */
            if (launch_norm(w, i % 2 ? w->xn : w->x, i % 2 ? w->x : w->xn, t, e) != 0) return -1;
        return 0;
    }
    default:
        return kv_err(e, "calibration: op %s has no compute recipe", cost_op_name(w->op));
    }
}

/* Kernels per repetition of a point (for the estimate), without a device. */
static int recipe_launches(const Shapes *s, CostOp op, int64_t p1, GemmCall *scratch, int max)
{
    switch (op) {
    case OP_GEMM_QKV:
    case OP_GEMM_O:
    case OP_GEMM_FFN_UP:
    case OP_GEMM_FFN_DOWN:
        return gemm_recipe(s, op, p1, scratch, max);
    case OP_GEMM_KV_PROJ:
        return 1 + s->rope;
    case OP_ROPE:
        return 2;
    case OP_LAYER_PREFILL:
        /* norms, qkv, RoPE on Q and K, attention, o, act: then the FFN GEMMs */
        return s->norms + 4 + 2 * s->rope + gemm_recipe(s, OP_GEMM_FFN_UP, p1, scratch, max) +
               gemm_recipe(s, OP_GEMM_FFN_DOWN, p1, scratch, max);
    default:
        return 1;
    }
}

static void work_set_point(Work *w, int64_t p1, int64_t p2)
{
    w->p1 = p1;
    w->p2 = p2;
    if (w->op == OP_ATTN_DECODE) /* C keys shared evenly by the batch (later sequences take the remainder) */
        for (int64_t b = 0; b <= p1; b++) w->ctx_off[b] = (int)(p2 * b / p1);
}

static int work_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    Work *w = ctx;
    ProbeDev *d = w->d;
    if (w->cold && d->ops->flush_cache && d->ops->flush_cache(d, e) != 0) return -1;
    if (d->ops->timer_start(d, e) != 0) return -1;
    if (work_launch(w, e) != 0) {
        double ignored;
        KvErr e2;
        d->ops->timer_stop(d, &ignored, &e2);
        return -1;
    }
    return d->ops->timer_stop(d, ns, e);
}

/* ==================================================================== the run */

typedef struct RunCtx {
    CostStore *st;
    const CalibOptions *o;
    CalibResult *r;
    const CalibPlan *plan;
    ProbeDev *dev;
    Shapes s;
    int64_t run_id;
    int64_t done, total;
    char model[64], dtype[8];
} RunCtx;

static int interrupted(const CalibOptions *o) { return o->stop && *o->stop; }

static void progress(RunCtx *rc, CalibProgress *pr)
{
    pr->index = rc->done;
    pr->total = rc->total;
    if (rc->o->progress) rc->o->progress(rc->o->progress_ctx, pr);
}

static int store_stats(RunCtx *rc, CostOp op, int64_t p1, int64_t p2, int64_t p3, const TimingStats *ts, double op_s,
                       KvErr *e)
{
    StorePoint pt;
    memset(&pt, 0, sizeof pt);
    pt.op = op;
    snprintf(pt.model, sizeof pt.model, "%s", cost_op_is_io(op) ? "" : rc->model);
    snprintf(pt.dtype, sizeof pt.dtype, "%s", rc->dtype);
    pt.tp = cost_op_is_io(op) ? 1 : rc->s.ly->tp;
    pt.p1 = p1, pt.p2 = p2, pt.p3 = p3;
    pt.n = ts->n;
    pt.median_ns = ts->median_ns, pt.p10_ns = ts->p10_ns, pt.p90_ns = ts->p90_ns;
    if (store_add_point(rc->st, rc->run_id, &pt, e) != 0) return -1;
    rc->done++;
    CalibProgress pr = {.ev = CALIB_EV_POINT, .op = op, .p1 = p1, .p2 = p2, .p3 = p3, .st = ts, .op_seconds = op_s};
    progress(rc, &pr);
    if (rc->o->fail_after_points > 0 && rc->done >= rc->o->fail_after_points)
        return kv_err(e, "simulated failure after %lld points (test hook)", (long long)rc->done);
    return 0;
}

/* The per-point timing: the plan's, with the stop flag, the warm-up rule and the op budget. */
static TimingCfg point_cfg(const RunCtx *rc, const CalibOpPlan *op_plan, double prev_median_ns, int64_t op_t0,
                           int64_t points_left)
{
    TimingCfg cfg = op_plan->timing;
    cfg.stop = rc->o->stop;
    if (prev_median_ns > (double)CALIB_SKIP_WARMUP_NS) cfg.warmup = 0;
    if (op_plan->op_budget_ns > 0) {
        int64_t left = op_plan->op_budget_ns - (timing_now_ns() - op_t0);
        int64_t per = points_left > 0 ? left / points_left : left;
        if (per < 1) per = 1;
        if (cfg.budget_ns == 0 || per < cfg.budget_ns) cfg.budget_ns = per;
    }
    return cfg;
}

static int measure_compute_op(RunCtx *rc, CostOp op, KvErr *e)
{
    const CalibOpPlan *op_plan = &rc->plan->op[op];
    const CalibAxis *a1 = &op_plan->ax[0], *a2 = &op_plan->ax[1];
    Work w;
    memset(&w, 0, sizeof w);
    w.d = rc->dev;
    w.s = &rc->s;
    w.op = op;
    w.cold = op_plan->cold_cache;
    w.p1_max = a1->v[a1->n - 1];
    w.p2_max = a2->v[a2->n - 1];
    int64_t t0 = timing_now_ns(), npts = (int64_t)a1->n * a2->n, k = 0;
    if (work_alloc(&w, e) != 0) {
        work_free(&w);
        return kv_err_prefix(e, "%s: buffers for (%lld, %lld): ", cost_op_name(op), (long long)w.p1_max, (long long)w.p2_max);
    }
    double prev = 0;
    for (int i = 0; i < a1->n; i++)
        for (int j = 0; j < a2->n; j++, k++) {
            if (interrupted(rc->o)) {
                work_free(&w);
                return kv_err(e, "interrupted");
            }
            work_set_point(&w, a1->v[i], a2->v[j]);
            TimingCfg cfg = point_cfg(rc, op_plan, prev, t0, npts - k);
            TimingStats ts;
            if (timing_run(&cfg, work_rep, &w, &ts, e) != 0 ||
                store_stats(rc, op, a1->v[i], a2->v[j], 0, &ts, (double)(timing_now_ns() - t0) * 1e-9, e) != 0) {
                work_free(&w);
                return kv_err_prefix(e, "%s (%lld, %lld): ", cost_op_name(op), (long long)a1->v[i], (long long)a2->v[j]);
            }
            prev = ts.median_ns;
        }
    work_free(&w);
    CalibProgress pr = {.ev = CALIB_EV_OP_DONE, .op = op, .op_points = npts, .op_seconds = (double)(timing_now_ns() - t0) * 1e-9};
    progress(rc, &pr);
    return 0;
}

static int measure_io_op(RunCtx *rc, CostOp op, ProbeLink *link, ProbeSsd *ssd, KvErr *e)
{
    const CalibOpPlan *op_plan = &rc->plan->op[op];
    const CalibAxis *a1 = &op_plan->ax[0], *a2 = &op_plan->ax[1], *a3 = &op_plan->ax[2];
    int64_t t0 = timing_now_ns(), npts = (int64_t)a1->n * a2->n * a3->n, k = 0;
    double prev = 0;
    for (int i = 0; i < a1->n; i++)
        for (int j = 0; j < a2->n; j++)
            for (int l = 0; l < a3->n; l++, k++) {
                if (interrupted(rc->o)) return kv_err(e, "interrupted");
                TimingCfg cfg = point_cfg(rc, op_plan, prev, t0, npts - k);
                TimingStats ts;
                int r = ssd ? probe_ssd_measure(ssd, op, a1->v[i], (int)a2->v[j], (int)a3->v[l], &cfg, &ts, e)
                            : probe_link_measure(link, op, a1->v[i], &cfg, &ts, e);
                if (r != 0 || store_stats(rc, op, a1->v[i], a2->v[j], a3->v[l], &ts, (double)(timing_now_ns() - t0) * 1e-9, e) != 0)
                    return kv_err_prefix(e, "%s (%lld, %lld, %lld): ", cost_op_name(op), (long long)a1->v[i], (long long)a2->v[j],
                                         (long long)a3->v[l]);
                prev = ts.median_ns;
            }
    CalibProgress pr = {.ev = CALIB_EV_OP_DONE, .op = op, .op_points = npts, .op_seconds = (double)(timing_now_ns() - t0) * 1e-9};
    progress(rc, &pr);
    return 0;
}

/* Append "; text" to a notes buffer, keeping it terminated (truncates at the end). */
static void note_add(char *notes, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_add(char *notes, size_t len, const char *fmt, ...)
{
    size_t used = strlen(notes);
    if (used + 3 >= len) return;
    if (used) {
        memcpy(notes + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + used, len - used, fmt, ap);
    va_end(ap);
}

static void warn_add(CalibResult *r, const char *msg)
{
    size_t used = strlen(r->warnings);
    snprintf(r->warnings + used, sizeof r->warnings - used, "%s%s", used ? "\n" : "", msg);
}

static int64_t axis_max(const CalibOpPlan *p, int d) { return p->ax[d].v[p->ax[d].n - 1]; }

/* Split "a,b,c" into up to max directories (in buf); returns the count. */
static int split_dirs(const char *s, char *buf, size_t len, const char **dirs, int max)
{
    snprintf(buf, len, "%s", s);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
        if (*tok) dirs[n++] = tok;
    return n;
}

static void fill_spec_inputs(SpecInputs *in, const HwCatalog *hw, const ModelLayout *ly, const char *gpu_key)
{
    KvErr e2;
    memset(in, 0, sizeof *in);
    in->ly = ly;
    in->gpu = hw_find_gpu(hw, gpu_key, &e2);
    if (!in->gpu) in->gpu = hw_find_gpu(hw, "H200", &e2);
    if (!in->gpu && hw->n_gpus > 0) in->gpu = &hw->gpus[0];
    if (in->gpu && in->gpu->pcie[0]) in->link = hw_find_link(hw, in->gpu->pcie, &e2);
}

int calib_run(CostStore *st, const CalibOptions *o, CalibResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    int64_t t_start = timing_now_ns();
    if (!o->backend || (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")))
        return kv_err(e, "calibration: backend '%s': expected cpu or cuda", o->backend ? o->backend : "(null)");
    if (!o->model) return kv_err(e, "calibration: a model is required");
    if (o->dtype != KV_DT_FP16 && o->dtype != KV_DT_BF16)
        return kv_err(e, "calibration: dtype %s: expected fp16 or bf16", kv_dtype_name(o->dtype) ? kv_dtype_name(o->dtype) : "?");
    int cuda = !strcmp(o->backend, "cuda");
    ModelLayout ly = {o->model, o->dtype, o->tp, 1};
    if (model_layout_check(&ly, e) != 0) return -1;

    RunCtx rc;
    memset(&rc, 0, sizeof rc);
    rc.st = st;
    rc.o = o;
    rc.r = r;
    shapes_of(&rc.s, &ly);
    snprintf(rc.model, sizeof rc.model, "%s", o->model->name);
    snprintf(rc.dtype, sizeof rc.dtype, "%s", kv_dtype_name(o->dtype));

    CalibPlan own_plan;
    if (!o->plan && calib_plan_default(&own_plan, o->backend, o->quick, e) != 0) return -1;
    CalibPlan plan = o->plan ? *o->plan : own_plan;
    if (!rc.s.rope) plan.op[OP_ROPE].enabled = 0;
    /* one device: no collectives, no network link */
    plan.op[OP_ALLREDUCE].enabled = plan.op[OP_ALLGATHER].enabled = plan.op[OP_NET].enabled = 0;
    rc.plan = &plan;

    HwCatalog own_hw;
    memset(&own_hw, 0, sizeof own_hw);
    const HwCatalog *hw = o->hw;
    if (!hw) {
        if (hw_catalog_load(&own_hw, NULL, e) != 0) return -1;
        hw = &own_hw;
    }

    int rcode = -1, run_open = 0;
    ProbeDev dev;
    memset(&dev, 0, sizeof dev);
    ProbeLink *link = NULL;
    ProbeSsd *ssd = NULL;
    StoreRunMeta meta;
    memset(&meta, 0, sizeof meta);
    if ((cuda ? probe_cuda_open(&dev, o->cuda_device, o->dtype, e) : probe_cpu_open(&dev, e)) != 0) goto out;
    rc.dev = &dev;

    /* device name */
    if (o->device_name && o->device_name[0]) snprintf(meta.device, sizeof meta.device, "%s", o->device_name);
    else if (cuda) calib_device_key(hw, dev.device, meta.device, sizeof meta.device);
    else snprintf(meta.device, sizeof meta.device, "cpu");

    /* notes, most important first (the column holds 511 characters; the end is cut when longer):
     * the device, the link and SSD figures and fallbacks, what was not measured, the caps */
    char notes[sizeof meta.notes] = "", io_notes[sizeof meta.notes] = "", tail_notes[sizeof meta.notes] = "";
    if (o->quick) note_add(notes, sizeof notes, "quick");
    note_add(notes, sizeof notes, "%s", dev.info);
    if (ly.tp > 1) note_add(notes, sizeof notes, "tp %d: per-GPU shapes timed on one device", ly.tp);
    note_add(tail_notes, sizeof tail_notes, "not measured: allreduce, allgather, net%s", rc.s.rope ? "" : ", rope (learned positions)");

    /* SSD probes */
    int want_ssd = plan.op[OP_SSD_READ].enabled || plan.op[OP_SSD_WRITE].enabled;
    if (want_ssd && (!o->scratch || !o->scratch[0])) {
        note_add(io_notes, sizeof io_notes, "ssd: skipped (no --scratch)");
        plan.op[OP_SSD_READ].enabled = plan.op[OP_SSD_WRITE].enabled = 0;
    } else if (want_ssd) {
        char dbuf[4096];
        const char *dirs[PROBE_SSD_MAX_DIRS];
        int nd = split_dirs(o->scratch, dbuf, sizeof dbuf, dirs, PROBE_SSD_MAX_DIRS);
        const CalibOpPlan *sp = plan.op[OP_SSD_READ].enabled ? &plan.op[OP_SSD_READ] : &plan.op[OP_SSD_WRITE];
        int64_t max_bytes = axis_max(sp, 0), max_files = axis_max(sp, 2);
        for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++)
            if (plan.op[op].enabled) {
                max_bytes = kv_max_i64(max_bytes, axis_max(&plan.op[op], 0));
                max_files = kv_max_i64(max_files, axis_max(&plan.op[op], 2));
            }
        KvErr se;
        ssd = nd > 0 ? probe_ssd_open(dirs, nd, (int)max_files, 2 * max_bytes, &se) : NULL;
        if (nd == 0) snprintf(se.msg, sizeof se.msg, "--scratch '%s': no directory given", o->scratch);
        if (!ssd) {
            char w[1200];
            snprintf(w, sizeof w, "ssd probes skipped: %s", se.msg);
            warn_add(r, w);
            note_add(io_notes, sizeof io_notes, "%s", w);
            plan.op[OP_SSD_READ].enabled = plan.op[OP_SSD_WRITE].enabled = 0;
        } else {
            if (o->ssd_threads) probe_ssd_use_threads(ssd);
            note_add(io_notes, sizeof io_notes, "%s", probe_ssd_note(ssd));
        }
    }

    /* host link probes (and the pageable figure for the notes) */
    int64_t link_max = 0;
    for (int op = OP_H2D; op <= OP_D2H_BIDIR; op++)
        if (plan.op[op].enabled) link_max = kv_max_i64(link_max, axis_max(&plan.op[op], 0));
    if (link_max > 0) {
        if (!(link = probe_link_open(cuda, o->cuda_device, (size_t)link_max, e))) goto out;
        int64_t pb = kv_min_i64(link_max, (int64_t)64 << 20);
        double ph = 0, pd = 0;
        if (probe_link_pageable(link, pb, &ph, &pd, e) != 0) goto out;
        if (cuda)
            note_add(io_notes, sizeof io_notes, "pageable at %lld MiB: h2d %.1f GB/s, d2h %.1f GB/s (h2d/d2h points: pinned)",
                     (long long)(pb >> 20), ph * 1e-9, pd * 1e-9);
        else
            note_add(io_notes, sizeof io_notes, "h2d/d2h = host memcpy (%.1f GB/s at %lld MiB)", ph * 1e-9, (long long)(pb >> 20));
    }

    if (rc.s.moe) {
        int64_t per = (rc.s.gate + 1) * rc.s.I * rc.s.D * (int64_t)dev.elem_bytes, want = rc.s.E + rc.s.shared;
        int64_t fit = (int64_t)(expert_cap_bytes(&dev) / (size_t)per);
        if (fit < want)
            note_add(tail_notes, sizeof tail_notes, "moe: %lld distinct expert weight sets of %lld (memory cap), experts cycle over them",
                     (long long)(fit < 1 ? 1 : fit), (long long)want);
    }
    if (plan.caps[0]) note_add(tail_notes, sizeof tail_notes, "%s", plan.caps);
    if (io_notes[0]) note_add(notes, sizeof notes, "%s", io_notes);
    note_add(notes, sizeof notes, "%s", tail_notes);
    /* estimate (cuda), on the plan as it will run */
    if (cuda) {
        SpecInputs in;
        fill_spec_inputs(&in, hw, &ly, meta.device);
        if (in.gpu) calib_estimate(&plan, &in, 1, &r->estimate);
    }
    rc.total = calib_plan_points(&plan);
    CalibProgress start = {.ev = CALIB_EV_START, .device = meta.device, .estimate = &r->estimate};
    progress(&rc, &start);

    snprintf(meta.backend, sizeof meta.backend, "%s", cuda ? "cuda" : "cpu");
    if (gethostname(meta.host, sizeof meta.host) != 0) snprintf(meta.host, sizeof meta.host, "unknown");
    meta.host[sizeof meta.host - 1] = '\0';
    snprintf(meta.driver, sizeof meta.driver, "%s", dev.driver);
    snprintf(meta.cuda, sizeof meta.cuda, "%s", dev.cuda);
    snprintf(meta.git_rev, sizeof meta.git_rev, "%s", kv_git_rev());
    snprintf(meta.model, sizeof meta.model, "%s", rc.model);
    snprintf(meta.dtype, sizeof meta.dtype, "%s", rc.dtype);
    meta.tp = ly.tp;
    meta.quick = o->quick ? 1 : 0;
    snprintf(meta.notes, sizeof meta.notes, "%s", notes);
    if (store_begin_run(st, &meta, e) != 0) goto out;
    run_open = 1;
    rc.run_id = meta.id;

    static const CostOp compute[] = {OP_GEMM_QKV, OP_GEMM_O,  OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                     OP_ATTN_PREFILL, OP_ATTN_DECODE, OP_LAYER_PREFILL, OP_NORM, OP_ACT,
                                     OP_ROPE, OP_QUANT, OP_DEQUANT};
    for (size_t i = 0; i < KV_ARRAY_LEN(compute); i++)
        if (plan.op[compute[i]].enabled && measure_compute_op(&rc, compute[i], e) != 0) goto out;
    for (int op = OP_H2D; op <= OP_D2H_BIDIR; op++)
        if (plan.op[op].enabled && measure_io_op(&rc, (CostOp)op, link, NULL, e) != 0) goto out;
    for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++)
        if (plan.op[op].enabled && measure_io_op(&rc, (CostOp)op, NULL, ssd, e) != 0) goto out;
    if (rc.done == 0) {
        kv_err(e, "calibration: the plan has no point to measure");
        goto out;
    }
    run_open = 0;
    if (store_end_run(st, meta.id, 1, e) != 0) goto out;
    if (store_get_run(st, meta.id, &r->meta, e) != 0) goto out;
    r->run_id = meta.id;
    r->points = rc.done;
    rcode = 0;
out:
    if (run_open) {
        KvErr e2;
        store_end_run(st, meta.id, 0, &e2);
    }
    probe_ssd_close(ssd);
    probe_link_close(link);
    probe_close(&dev);
    if (hw == &own_hw) hw_catalog_free(&own_hw);
    r->wall_s = (double)(timing_now_ns() - t_start) * 1e-9;
    return rcode;
}

/* ==================================================================== estimate */

#define EST_SYNC_NS 15000.0         /* event record + stream sync + launch, per repetition */
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
    Shapes s;
    shapes_of(&s, in->ly);
    int max_calls = gemm_recipe_max(&s);
    GemmCall *scratch = calloc((size_t)max_calls, sizeof *scratch);
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
                    int kernels = cost_op_is_io((CostOp)op) ? 1 : recipe_launches(&s, (CostOp)op, p1, scratch, max_calls);
                    double t = est_kernel_ns(in, (CostOp)op, p1, p2, p3);
                    if (cuda && t < kernels * EST_LAUNCH_NS) t = kernels * EST_LAUNCH_NS; /* launch-bound recipes (MoE) */
                    double over = (cuda ? EST_SYNC_NS : 0) + (o->cold_cache ? flush_ns : 0);
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

/* ==================================================================== device names */

/* Reported-name fragments (case-insensitive) that name one catalogued GPU; NULL key: a GPU that
 * would otherwise match a wrong entry (GH200 contains "H200"). First match wins. */
static const struct {
    const char *fragment;
    const char *key;
} g_dev_map[] = {
    {"GH200", NULL},
    {"H200", "H200"},
    {"H100 PCIe", "H100-PCIe"},
    {"H100 NVL", NULL},
    {"H100", "H100-SXM"},          /* "NVIDIA H100 80GB HBM3" is the SXM5 part */
    {"A100-SXM4-40GB", "A100-40GB"},
    {"A100-SXM4-80GB", "A100-80GB"},
    {"A100-SXM-80GB", "A100-80GB"},
    {"L40S", "L40S"},
    {"RTX 4090", "RTX4090"},
    {"B200", "B200"},
};

static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (strncasecmp(p, needle, n) == 0) return 1;
    return 0;
}

static void alnum_lower(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (; *in && k + 1 < len; in++)
        if ((*in >= '0' && *in <= '9') || (*in >= 'a' && *in <= 'z')) out[k++] = *in;
        else if (*in >= 'A' && *in <= 'Z') out[k++] = (char)(*in - 'A' + 'a');
    out[k] = '\0';
}

int calib_device_key(const HwCatalog *hw, const char *reported, char *out, size_t len)
{
    KvErr e2;
    for (size_t i = 0; i < KV_ARRAY_LEN(g_dev_map); i++) {
        if (!ci_contains(reported, g_dev_map[i].fragment)) continue;
        const GpuSpec *g = g_dev_map[i].key && hw ? hw_find_gpu(hw, g_dev_map[i].key, &e2) : NULL;
        if (g) {
            snprintf(out, len, "%s", g->name);
            return 1;
        }
        snprintf(out, len, "%s", reported);
        return 0;
    }
    /* no fragment: a catalogued name contained in the reported one, letters and digits only
     * ("L40S" in "NVIDIA L40S"); the longest such name wins */
    char r_norm[256];
    alnum_lower(reported, r_norm, sizeof r_norm);
    const GpuSpec *best = NULL;
    size_t best_len = 0;
    for (int i = 0; hw && i < hw->n_gpus; i++) {
        char g_norm[128];
        alnum_lower(hw->gpus[i].name, g_norm, sizeof g_norm);
        size_t gl = strlen(g_norm);
        if (gl >= 3 && gl > best_len && strstr(r_norm, g_norm)) {
            best = &hw->gpus[i];
            best_len = gl;
        }
    }
    snprintf(out, len, "%s", best ? best->name : reported);
    return best != NULL;
}

/* ==================================================================== summary */

/* a run's points in memory */
typedef StorePointList PointBuf;

static int load_points(CostStore *st, int64_t run, PointBuf *b, KvErr *e) { return store_points_all(st, run, -1, b, e); }

static const StorePoint *find_point(const PointBuf *b, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].op == op && b->v[i].p1 == p1 && b->v[i].p2 == p2 && b->v[i].p3 == p3) return &b->v[i];
    return NULL;
}

/* distinct values of parameter d of op's points, ascending; returns the count (<= max) */
static int op_axis(const PointBuf *b, CostOp op, int d, int64_t *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i].op != op) continue;
        int64_t v = d == 0 ? b->v[i].p1 : d == 1 ? b->v[i].p2 : b->v[i].p3;
        int k = 0;
        while (k < n && out[k] < v) k++;
        if (k < n && out[k] == v) continue;
        if (n == max) continue;
        memmove(out + k + 1, out + k, (size_t)(n - k) * sizeof *out);
        out[k] = v;
        n++;
    }
    return n;
}

static void buf_add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void buf_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

static const char *fmt_bytes(int64_t b, char *s, size_t len)
{
    if (b >= ((int64_t)1 << 30) && b % ((int64_t)1 << 30) == 0) snprintf(s, len, "%lld GiB", (long long)(b >> 30));
    else if (b >= (1 << 20) && b % (1 << 20) == 0) snprintf(s, len, "%lld MiB", (long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0) snprintf(s, len, "%lld KiB", (long long)(b >> 10));
    else snprintf(s, len, "%lld B", (long long)b);
    return s;
}

int calib_summary(CostStore *st, int64_t run_id, const ModelSpec *m, char *buf, size_t len, KvErr *e)
{
    if (len) buf[0] = '\0';
    StoreRunMeta meta;
    if (store_get_run(st, run_id, &meta, e) != 0) return -1;
    KvDtype dt;
    if (kv_dtype_parse(meta.dtype, &dt, e) != 0) return -1;
    ModelLayout ly = {m, dt, meta.tp < 1 ? 1 : meta.tp, 1};
    PointBuf b;
    if (load_points(st, run_id, &b, e) != 0) return -1;
    int cpu = !strcmp(meta.backend, "cpu");
    double unit = cpu ? 1e9 : 1e12;
    const char *uname = cpu ? "GFLOP/s" : "TFLOP/s";
    int64_t ax1[CALIB_MAX_AXIS * 4], ax2[CALIB_MAX_AXIS * 4], ax3[CALIB_MAX_AXIS * 4];
    int n1, n2, n3;

    static const CostOp gemm_ops[] = {OP_GEMM_FFN_UP, OP_GEMM_QKV};
    for (size_t g = 0; g < KV_ARRAY_LEN(gemm_ops); g++) {
        CostOp op = gemm_ops[g];
        if (!(n1 = op_axis(&b, op, 0, ax1, (int)KV_ARRAY_LEN(ax1)))) continue;
        buf_add(buf, len, "%s %s by tokens:", cost_op_name(op), uname);
        for (int i = 0; i < n1; i++) {
            const StorePoint *p = find_point(&b, op, ax1[i], 0, 0);
            if (p && p->median_ns > 0)
                buf_add(buf, len, " %lld: %.3g", (long long)ax1[i], model_op_flops(&ly, op, ax1[i], 0) / (p->median_ns * 1e-9) / unit);
        }
        buf_add(buf, len, "\n");
    }
    if ((n1 = op_axis(&b, OP_ATTN_PREFILL, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_ATTN_PREFILL, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        /* a mid-size and the largest new-token count, without context and at the largest context */
        int mid = 0;
        for (int i = 0; i < n1; i++)
            if (llabs(ax1[i] - 512) < llabs(ax1[mid] - 512)) mid = i;
        int64_t shapes[4][2] = {{ax1[mid], ax2[0]}, {ax1[n1 - 1], ax2[0]}, {ax1[mid], ax2[n2 - 1]}, {ax1[n1 - 1], ax2[n2 - 1]}};
        buf_add(buf, len, "attn_prefill %s (new, context):", uname);
        for (int i = 0; i < 4; i++) {
            int dup = 0;
            for (int j = 0; j < i; j++) dup |= shapes[j][0] == shapes[i][0] && shapes[j][1] == shapes[i][1];
            const StorePoint *p = dup ? NULL : find_point(&b, OP_ATTN_PREFILL, shapes[i][0], shapes[i][1], 0);
            if (p && p->median_ns > 0)
                buf_add(buf, len, " (%lld, %lld): %.3g", (long long)shapes[i][0], (long long)shapes[i][1],
                        model_op_flops(&ly, OP_ATTN_PREFILL, shapes[i][0], shapes[i][1]) / (p->median_ns * 1e-9) / unit);
        }
        buf_add(buf, len, "\n");
    }
    if ((n1 = op_axis(&b, OP_ATTN_DECODE, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_ATTN_DECODE, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        buf_add(buf, len, "attn_decode GB/s (KV read, batch x total context):");
        int64_t bs[2] = {ax1[0], ax1[n1 - 1]};
        for (int i = 0; i < (n1 > 1 ? 2 : 1); i++) {
            const StorePoint *p = find_point(&b, OP_ATTN_DECODE, bs[i], ax2[n2 - 1], 0);
            if (p && p->median_ns > 0)
                buf_add(buf, len, " %lld x %lld: %.3g", (long long)bs[i], (long long)ax2[n2 - 1],
                        model_op_bytes(&ly, OP_ATTN_DECODE, bs[i], ax2[n2 - 1]) / (p->median_ns * 1e-9) * 1e-9);
        }
        buf_add(buf, len, "\n");
    }
    /* the layer against the sum of its parts, where every part has the point */
    if ((n1 = op_axis(&b, OP_LAYER_PREFILL, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_LAYER_PREFILL, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        int shown = 0;
        for (int i = 0; i < n1; i++)
            for (int j = 0; j < n2; j++) {
                int64_t n = ax1[i], c = ax2[j];
                const StorePoint *lp = find_point(&b, OP_LAYER_PREFILL, n, c, 0);
                const StorePoint *parts[] = {find_point(&b, OP_GEMM_QKV, n, 0, 0), find_point(&b, OP_GEMM_O, n, 0, 0),
                                             find_point(&b, OP_GEMM_FFN_UP, n, 0, 0), find_point(&b, OP_GEMM_FFN_DOWN, n, 0, 0),
                                             find_point(&b, OP_ATTN_PREFILL, n, c, 0), find_point(&b, OP_NORM, n, 0, 0),
                                             find_point(&b, OP_ACT, n, 0, 0)};
                const StorePoint *rope = find_point(&b, OP_ROPE, n, 0, 0);
                int ok = lp != NULL;
                double sum = 0;
                for (size_t k = 0; k < KV_ARRAY_LEN(parts) && ok; k++) {
                    ok = parts[k] != NULL;
                    if (ok) sum += parts[k]->median_ns * (k == 5 ? (m->norms_per_layer < 1 ? 1 : m->norms_per_layer) : 1);
                }
                if (!ok || sum <= 0) continue;
                if (m->pos == POS_ROPE && rope) sum += rope->median_ns;
                if (!shown++) buf_add(buf, len, "layer_prefill / sum of its parts (new, context):");
                buf_add(buf, len, " (%lld, %lld): %.2f", (long long)n, (long long)c, lp->median_ns / sum);
            }
        if (shown) buf_add(buf, len, "\n");
    }
    static const CostOp links[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    int shown = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(links); i++) {
        if (!(n1 = op_axis(&b, links[i], 0, ax1, (int)KV_ARRAY_LEN(ax1)))) continue;
        const StorePoint *p = find_point(&b, links[i], ax1[n1 - 1], 0, 0);
        char s[32];
        if (!p || p->median_ns <= 0) continue;
        if (!shown++) buf_add(buf, len, "copies GB/s%s:", cpu ? " (host memcpy)" : " (pinned)");
        buf_add(buf, len, " %s %.1f at %s", cost_op_name(links[i]), (double)ax1[n1 - 1] / p->median_ns,
                fmt_bytes(ax1[n1 - 1], s, sizeof s));
    }
    if (shown) buf_add(buf, len, "\n");
    for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++) {
        if (!(n1 = op_axis(&b, (CostOp)op, 0, ax1, (int)KV_ARRAY_LEN(ax1))) ||
            !(n2 = op_axis(&b, (CostOp)op, 1, ax2, (int)KV_ARRAY_LEN(ax2))) ||
            !(n3 = op_axis(&b, (CostOp)op, 2, ax3, (int)KV_ARRAY_LEN(ax3))))
            continue;
        char s[32];
        const StorePoint *lo = find_point(&b, (CostOp)op, ax1[n1 - 1], ax2[0], ax3[0]);
        const StorePoint *hi = find_point(&b, (CostOp)op, ax1[n1 - 1], ax2[n2 - 1], ax3[n3 - 1]);
        buf_add(buf, len, "%s GB/s at %s:", cost_op_name((CostOp)op), fmt_bytes(ax1[n1 - 1], s, sizeof s));
        if (lo && lo->median_ns > 0)
            buf_add(buf, len, " qd %lld x %lld file%s %.2f", (long long)ax2[0], (long long)ax3[0], ax3[0] > 1 ? "s" : "",
                    (double)ax1[n1 - 1] / lo->median_ns);
        if (hi && hi != lo && hi->median_ns > 0)
            buf_add(buf, len, ", qd %lld x %lld files %.2f", (long long)ax2[n2 - 1], (long long)ax3[n3 - 1],
                    (double)ax1[n1 - 1] / hi->median_ns);
        buf_add(buf, len, "\n");
    }
    free(b.v);
    return 0;
}

/* ==================================================================== diff */

static int cmp_point_key(const StorePoint *a, const StorePoint *b)
{
    int c = strcmp(cost_op_name(a->op), cost_op_name(b->op));
    if (!c) c = strcmp(a->model, b->model);
    if (!c) c = strcmp(a->dtype, b->dtype);
    if (!c) c = (a->tp > b->tp) - (a->tp < b->tp);
    if (!c) c = (a->p1 > b->p1) - (a->p1 < b->p1);
    if (!c) c = (a->p2 > b->p2) - (a->p2 < b->p2);
    if (!c) c = (a->p3 > b->p3) - (a->p3 < b->p3);
    return c;
}

static int cmp_point_qsort(const void *a, const void *b) { return cmp_point_key(a, b); }

static int same_curve(const CalibDiffCurve *c, const StorePoint *p)
{
    return c->op == p->op && !strcmp(c->model, p->model) && !strcmp(c->dtype, p->dtype) && c->tp == p->tp;
}

/* The curve of p: the last one when it matches (points arrive in key order), else a new one. */
static CalibDiffCurve *curve_of(CalibDiff *d, const StorePoint *p, int *cap)
{
    for (int i = d->n_curves - 1; i >= 0; i--)
        if (same_curve(&d->curves[i], p)) return &d->curves[i];
    if (d->n_curves == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        CalibDiffCurve *n = realloc(d->curves, (size_t)nc * sizeof *n);
        if (!n) return NULL;
        d->curves = n;
        *cap = nc;
    }
    CalibDiffCurve *c = &d->curves[d->n_curves++];
    memset(c, 0, sizeof *c);
    c->op = p->op;
    snprintf(c->model, sizeof c->model, "%s", p->model);
    snprintf(c->dtype, sizeof c->dtype, "%s", p->dtype);
    c->tp = p->tp;
    return c;
}

static int cmp_curve(const void *x, const void *y)
{
    const CalibDiffCurve *a = x, *b = y;
    int c = strcmp(cost_op_name(a->op), cost_op_name(b->op));
    if (!c) c = strcmp(a->model, b->model);
    if (!c) c = strcmp(a->dtype, b->dtype);
    if (!c) c = (a->tp > b->tp) - (a->tp < b->tp);
    return c;
}

void calib_diff_free(CalibDiff *d)
{
    free(d->curves);
    memset(d, 0, sizeof *d);
}

int calib_diff(CostStore *st, int64_t run_a, int64_t run_b, double tolerance, CalibDiff *d, KvErr *e)
{
    memset(d, 0, sizeof *d);
    if (!(tolerance >= 0)) return kv_err(e, "diff: tolerance %g: expected >= 0", tolerance);
    StoreRunMeta ma, mb;
    if (store_get_run(st, run_a, &ma, e) != 0 || store_get_run(st, run_b, &mb, e) != 0) return -1;
    PointBuf a, b;
    if (load_points(st, run_a, &a, e) != 0) return -1;
    if (load_points(st, run_b, &b, e) != 0) {
        free(a.v);
        return -1;
    }
    if (a.n) qsort(a.v, a.n, sizeof *a.v, cmp_point_qsort);
    if (b.n) qsort(b.v, b.n, sizeof *b.v, cmp_point_qsort);
    int cap = 0, rc = 0;
    size_t i = 0, j = 0;
    while (i < a.n || j < b.n) {
        int c = i >= a.n ? 1 : j >= b.n ? -1 : cmp_point_key(&a.v[i], &b.v[j]);
        const StorePoint *p = c <= 0 ? &a.v[i] : &b.v[j];
        CalibDiffCurve *cv = curve_of(d, p, &cap);
        if (!cv) {
            rc = kv_err(e, "diff: out of memory");
            break;
        }
        if (c < 0) {
            cv->only_a++, d->only_a++, i++;
            continue;
        }
        if (c > 0) {
            cv->only_b++, d->only_b++, j++;
            continue;
        }
        double va = a.v[i].median_ns, vb = b.v[j].median_ns;
        double rel = va > 0 ? (vb - va) / va : (vb > 0 ? INFINITY : 0);
        cv->common++, d->common++;
        if (fabs(rel) > tolerance) cv->beyond++, d->beyond++;
        if (cv->common == 1 || fabs(rel) > fabs(cv->worst_rel)) {
            cv->worst_rel = rel;
            cv->worst_p[0] = p->p1, cv->worst_p[1] = p->p2, cv->worst_p[2] = p->p3;
            cv->worst_a_ns = va, cv->worst_b_ns = vb;
        }
        i++, j++;
    }
    free(a.v);
    free(b.v);
    if (rc != 0) {
        calib_diff_free(d);
        return -1;
    }
    if (d->n_curves > 1) qsort(d->curves, (size_t)d->n_curves, sizeof *d->curves, cmp_curve);
    for (int k = 0; k < d->n_curves; k++) d->drifted += d->curves[k].beyond > 0;
    return 0;
}

int calib_parse_tolerance(const char *s, double *out, KvErr *e)
{
    if (!s || !*s) return kv_err(e, "tolerance: empty; expected a percentage such as 5%% or a fraction such as 0.05");
    char tmp[64];
    size_t n = strlen(s);
    if (n >= sizeof tmp) return kv_err(e, "tolerance '%s': too long", s);
    int pct = s[n - 1] == '%';
    memcpy(tmp, s, n + 1);
    if (pct) tmp[n - 1] = '\0';
    char *end;
    double v = strtod(tmp, &end);
    if (end == tmp || *end || !isfinite(v) || v < 0)
        return kv_err(e, "tolerance '%s': expected a percentage such as 5%% or a fraction such as 0.05", s);
    if (pct) v /= 100.0;
    else if (v >= 1)
        return kv_err(e, "tolerance '%s': a plain number is a fraction and must be below 1 (write %g%% for a percentage)", s, v);
    if (v >= 10) return kv_err(e, "tolerance '%s': expected below 1000%%", s);
    *out = v;
    return 0;
}

/* ==================================================================== CLI (prints) */

static volatile sig_atomic_t g_stop;
static void on_stop_signal(int sig) { g_stop = 1; }

typedef struct CliArg {
    const char *name;   /* "--db" */
    int flag;           /* 1: takes no value */
    const char *value;  /* value, or "1" for a flag given */
} CliArg;

/* Options into args, positionals into pos; 0, or 2 after printing a usage error; 3 for --help. */
static int cli_parse(const char *cmd, const char *usage, int argc, char **argv, CliArg *args, int nargs, const char **pos,
                     int maxpos, int *npos)
{
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: %s\n", usage);
            return 3;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            CliArg *o = NULL;
            for (int k = 0; k < nargs; k++)
                if (strlen(args[k].name) == len && !strncmp(args[k].name, a, len)) o = &args[k];
            if (!o) {
                fprintf(stderr, "kvcal %s: unknown option '%s'\nusage: %s\n", cmd, a, usage);
                return 2;
            }
            if (o->value) {
                fprintf(stderr, "kvcal %s: option %s given twice\n", cmd, o->name);
                return 2;
            }
            if (o->flag) {
                if (eq) {
                    fprintf(stderr, "kvcal %s: option %s takes no value\n", cmd, o->name);
                    return 2;
                }
                o->value = "1";
                continue;
            }
            if (eq) o->value = eq + 1;
            else if (i + 1 < argc) o->value = argv[++i];
            else {
                fprintf(stderr, "kvcal %s: option %s needs a value\n", cmd, o->name);
                return 2;
            }
            if (!o->value[0]) {
                fprintf(stderr, "kvcal %s: option %s: empty value\n", cmd, o->name);
                return 2;
            }
            continue;
        }
        if (*npos >= maxpos) {
            fprintf(stderr, "kvcal %s: unexpected argument '%s'\nusage: %s\n", cmd, a, usage);
            return 2;
        }
        pos[(*npos)++] = a;
    }
    return 0;
}

static int parse_count(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || end == v || n < lo || n > hi) {
        fprintf(stderr, "kvcal %s: %s: expected an integer %d..%d, got '%s'\n", cmd, opt, lo, hi, v);
        return 2;
    }
    *out = (int)n;
    return 0;
}

static void cli_progress(void *ctx, const CalibProgress *pr)
{
    (void)ctx;
    if (pr->ev == CALIB_EV_START) {
        printf("kvcal run: device '%s', %lld points\n", pr->device, (long long)pr->total);
        if (pr->estimate && pr->estimate->points > 0)
            printf("kvcal run: predicted %lld timed repetitions (%lld kernel launches) + %lld warm-ups, about %.0f s\n",
                   (long long)pr->estimate->reps, (long long)pr->estimate->launches, (long long)pr->estimate->warmups,
                   pr->estimate->seconds);
        fflush(stdout);
    } else if (pr->ev == CALIB_EV_OP_DONE) {
        printf("  %-14s %5lld points %8.1f s   (%lld/%lld)\n", cost_op_name(pr->op), (long long)pr->op_points, pr->op_seconds,
               (long long)pr->index, (long long)pr->total);
        fflush(stdout);
    }
}

static void print_plan(const CalibPlan *plan, const SpecInputs *in, int cuda)
{
    CalibEstimate est;
    calib_estimate(plan, in, cuda, &est);
    printf("%-14s %7s %s\n", "op", "points", cuda ? "predicted s" : "");
    for (int op = 0; op < OP_COUNT; op++) {
        int64_t n = calib_plan_op_points(plan, (CostOp)op);
        if (!n) continue;
        if (cuda) printf("%-14s %7lld %8.1f\n", cost_op_name((CostOp)op), (long long)n, est.op_seconds[op]);
        else printf("%-14s %7lld\n", cost_op_name((CostOp)op), (long long)n);
    }
    printf("total: %lld points", (long long)calib_plan_points(plan));
    if (cuda)
        printf(", %lld timed repetitions (%lld kernel launches), %lld warm-ups; predicted %.0f s on %s "
               "(spec roofline + %.0f us sync per repetition + cold-L2 memsets)",
               (long long)est.reps, (long long)est.launches, (long long)est.warmups, est.seconds, in->gpu->name, EST_SYNC_NS / 1e3);
    printf("\n");
}

/* Every directory of --scratch DIR[,DIR...] exists (created first with --create-scratch); a
 * missing one is refused by name, so a typo never measures the root disk as the SSD. */
static int scratch_dirs_ready(const char *list, int create)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        struct stat sb;
        KvErr e;
        if (create && kv_mkdirs(tok, &e) != 0) {
            fprintf(stderr, "kvcal run: --create-scratch: %s\n", e.msg);
            return -1;
        }
        if (stat(tok, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "kvcal run: --scratch %s: %s (create it, or pass --create-scratch)\n", tok,
                    stat(tok, &sb) != 0 ? "no such directory" : "not a directory");
            return -1;
        }
    }
    return 0;
}

int kvcal_cmd_run(int argc, char **argv)
{
    static const char *usage =
        "kvcal run --backend cpu|cuda --model M --db FILE [--quick] [--tp N] [--dtype fp16|bf16]\n"
        "                 [--device-name NAME] [--scratch DIR[,DIR...] [--create-scratch]] [--device N] [--dry-run]\n"
        "  Measure cost curves on this machine and store them as one run (one transaction; Ctrl-C rolls it back).\n"
        "  --device-name  the device key stored (default: cuda → the hardware catalog's GPU key, cpu → \"cpu\")\n"
        "  --scratch      existing directories for the SSD probes (O_DIRECT files; none: SSD probes skipped)\n"
        "  --create-scratch  create the --scratch directories when missing (else a missing one is refused)\n"
        "  --dry-run      print the plan (points per op; cuda: predicted time on --device-name, default H200)";
    CliArg args[] = {{"--backend", 0, NULL}, {"--model", 0, NULL},       {"--db", 0, NULL},      {"--quick", 1, NULL},
                     {"--tp", 0, NULL},      {"--dtype", 0, NULL},       {"--device-name", 0, NULL}, {"--scratch", 0, NULL},
                     {"--device", 0, NULL},  {"--dry-run", 1, NULL}, {"--create-scratch", 1, NULL}};
    enum { A_BACKEND, A_MODEL, A_DB, A_QUICK, A_TP, A_DTYPE, A_DEVNAME, A_SCRATCH, A_DEVICE, A_DRY, A_MKSCRATCH };
    const char *pos[1];
    int npos, rc = cli_parse("run", usage, argc, argv, args, (int)KV_ARRAY_LEN(args), pos, 0, &npos);
    if (rc) return rc == 3 ? 0 : rc;
    const char *backend = args[A_BACKEND].value, *dtype_s = args[A_DTYPE].value ? args[A_DTYPE].value : "fp16";
    int dry = args[A_DRY].value != NULL, quick = args[A_QUICK].value != NULL, tp = 1, device = 0;
    if (!backend || (strcmp(backend, "cpu") && strcmp(backend, "cuda"))) {
        fprintf(stderr, "kvcal run: --backend cpu|cuda is required%s%s%s\nusage: %s\n", backend ? " (got '" : "",
                backend ? backend : "", backend ? "')" : "", usage);
        return 2;
    }
    if (!args[A_MODEL].value || (!dry && !args[A_DB].value)) {
        fprintf(stderr, "kvcal run: --model%s is required\nusage: %s\n", dry ? "" : " and --db", usage);
        return 2;
    }
    if ((args[A_TP].value && parse_count("run", "--tp", args[A_TP].value, 1, 1024, &tp)) ||
        (args[A_DEVICE].value && parse_count("run", "--device", args[A_DEVICE].value, 0, 1023, &device)))
        return 2;
    KvErr e;
    KvDtype dt;
    if (kv_dtype_parse(dtype_s, &dt, &e) != 0 || (dt != KV_DT_FP16 && dt != KV_DT_BF16)) {
        fprintf(stderr, "kvcal run: --dtype '%s': expected fp16 or bf16\n", dtype_s);
        return 2;
    }
    ModelCatalog mc;
    HwCatalog hw;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) {
        fprintf(stderr, "kvcal: %s\n", e.msg);
        return 1;
    }
    rc = 1;
    CostStore st;
    memset(&st, 0, sizeof st);
    const ModelSpec *m = model_find(&mc, args[A_MODEL].value, &e);
    ModelLayout ly = {m, dt, tp, 1};
    if (!m || model_layout_check(&ly, &e) != 0) {
        fprintf(stderr, "kvcal run: %s\n", e.msg);
        rc = 2;
        goto out;
    }
    if (dry) {
        CalibPlan plan;
        if (calib_plan_default(&plan, backend, quick, &e) != 0) goto fail;
        if (!args[A_SCRATCH].value) plan.op[OP_SSD_READ].enabled = plan.op[OP_SSD_WRITE].enabled = 0;
        if (m->pos != POS_ROPE) plan.op[OP_ROPE].enabled = 0;
        SpecInputs in;
        const char *gpu = args[A_DEVNAME].value ? args[A_DEVNAME].value : "H200";
        if (!strcmp(backend, "cuda") && !hw_find_gpu(&hw, gpu, &e)) goto fail;
        fill_spec_inputs(&in, &hw, &ly, gpu);
        printf("kvcal run --dry-run: %s%s, %s %s tp %d\n", backend, quick ? " --quick" : "", m->name, kv_dtype_name(dt), tp);
        print_plan(&plan, &in, !strcmp(backend, "cuda"));
        rc = 0;
        goto out;
    }
    if (args[A_SCRATCH].value && scratch_dirs_ready(args[A_SCRATCH].value, args[A_MKSCRATCH].value != NULL) != 0) {
        rc = 2;
        goto out;
    }
    const char *db = args[A_DB].value;
    if (store_open(&st, db, 1, &e) != 0) goto fail;
    CalibOptions o = {.backend = backend, .model = m, .dtype = dt, .tp = tp, .quick = quick,
                      .device_name = args[A_DEVNAME].value, .scratch = args[A_SCRATCH].value, .cuda_device = device,
                      .hw = &hw, .stop = &g_stop, .progress = cli_progress};
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    g_stop = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    printf("kvcal run: %s%s, %s %s tp %d -> %s\n", backend, quick ? " --quick" : "", m->name, kv_dtype_name(dt), tp, db);
    fflush(stdout);
    CalibResult r;
    int run_rc = calib_run(&st, &o, &r, &e);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (r.warnings[0]) fprintf(stderr, "kvcal run: warning: %s\n", r.warnings);
    if (run_rc != 0) {
        if (g_stop) {
            fprintf(stderr, "kvcal run: interrupted after %.1f s; the run was rolled back (%s unchanged)\n", r.wall_s, db);
            rc = 130;
            goto out;
        }
        goto fail;
    }
    printf("kvcal run: run %lld: %lld points of %s on '%s' (%s) in %.1f s -> %s\n", (long long)r.run_id, (long long)r.points,
           m->name, r.meta.device, r.meta.backend, r.wall_s, db);
    printf("notes: %s\n", r.meta.notes);
    char sum[4096];
    if (calib_summary(&st, r.run_id, m, sum, sizeof sum, &e) != 0) goto fail;
    fputs(sum, stdout);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "kvcal: %s\n", e.msg);
    rc = 1;
out:
    if (st.db) store_close(&st);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
    return rc;
}

static void fmt_ns(double ns, char *s, size_t len)
{
    if (ns >= 1e9) snprintf(s, len, "%.3g s", ns * 1e-9);
    else if (ns >= 1e6) snprintf(s, len, "%.3g ms", ns * 1e-6);
    else if (ns >= 1e3) snprintf(s, len, "%.3g us", ns * 1e-3);
    else snprintf(s, len, "%.3g ns", ns);
}

static int parse_run_id(const char *v, int64_t *out)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end || end == v || n < 1) {
        fprintf(stderr, "kvcal diff: run id '%s': expected a positive integer (kvcal show --db FILE lists runs)\n", v);
        return 2;
    }
    *out = n;
    return 0;
}

int kvcal_cmd_diff(int argc, char **argv)
{
    static const char *usage =
        "kvcal diff --db FILE RUN_A RUN_B [--tolerance 5%]\n"
        "  Compare the medians of every (op, model, dtype, tp, p1, p2, p3) point the two runs share; list the\n"
        "  curves with points beyond the tolerance and the points present in one run only.\n"
        "  Exit: 0 no drift, 1 drift beyond the tolerance, 2 usage error or unreadable runs.";
    CliArg args[] = {{"--db", 0, NULL}, {"--tolerance", 0, NULL}};
    const char *pos[2];
    int npos, rc = cli_parse("diff", usage, argc, argv, args, 2, pos, 2, &npos);
    if (rc) return rc == 3 ? 0 : rc;
    if (!args[0].value || npos != 2) {
        fprintf(stderr, "kvcal diff: --db and two run ids are required\nusage: %s\n", usage);
        return 2;
    }
    KvErr e;
    double tol = 0.05;
    if (args[1].value && calib_parse_tolerance(args[1].value, &tol, &e) != 0) {
        fprintf(stderr, "kvcal diff: %s\n", e.msg);
        return 2;
    }
    int64_t ra, rb;
    if (parse_run_id(pos[0], &ra) || parse_run_id(pos[1], &rb)) return 2;
    CostStore st;
    if (store_open(&st, args[0].value, STORE_OPEN_READONLY, &e) != 0) {
        fprintf(stderr, "kvcal diff: %s\n", e.msg);
        return 2;
    }
    CalibDiff d;
    StoreRunMeta ma, mb;
    if (store_get_run(&st, ra, &ma, &e) != 0 || store_get_run(&st, rb, &mb, &e) != 0 || calib_diff(&st, ra, rb, tol, &d, &e) != 0) {
        fprintf(stderr, "kvcal diff: %s\n", e.msg);
        store_close(&st);
        return 2;
    }
    store_close(&st);
    printf("kvcal diff: run %lld (%s '%s' %s, %s) vs run %lld (%s '%s' %s, %s): %lld common points, tolerance %g%%\n",
           (long long)ra, ma.backend, ma.device, ma.model[0] ? ma.model : "(io)", ma.started_at, (long long)rb, mb.backend,
           mb.device, mb.model[0] ? mb.model : "(io)", mb.started_at, (long long)d.common, tol * 100);
    if (d.drifted) {
        printf("%-14s %-16s %-5s %3s %7s %7s %12s  %-28s %s\n", "op", "model", "dtype", "tp", "points", "beyond", "worst",
               "at (p1, p2, p3)", "median A -> B");
        for (int i = 0; i < d.n_curves; i++) {
            const CalibDiffCurve *c = &d.curves[i];
            if (!c->beyond) continue;
            char at[96], sa[32], sb[32], w[32];
            snprintf(at, sizeof at, "(%lld, %lld, %lld)", (long long)c->worst_p[0], (long long)c->worst_p[1],
                     (long long)c->worst_p[2]);
            fmt_ns(c->worst_a_ns, sa, sizeof sa);
            fmt_ns(c->worst_b_ns, sb, sizeof sb);
            if (isinf(c->worst_rel)) snprintf(w, sizeof w, "from 0");
            else snprintf(w, sizeof w, "%+.1f%%", c->worst_rel * 100);
            printf("%-14s %-16s %-5s %3d %7lld %7lld %12s  %-28s %s -> %s\n", cost_op_name(c->op), c->model[0] ? c->model : "(io)",
                   c->dtype, c->tp, (long long)c->common, (long long)c->beyond, w, at, sa, sb);
        }
    }
    for (int side = 0; side < 2; side++) {
        int64_t n = side ? d.only_b : d.only_a;
        if (!n) continue;
        printf("only in run %lld: %lld points (", (long long)(side ? rb : ra), (long long)n);
        int first = 1;
        for (int i = 0; i < d.n_curves; i++) {
            int64_t k = side ? d.curves[i].only_b : d.curves[i].only_a;
            if (!k) continue;
            printf("%s%s %lld", first ? "" : ", ", cost_op_name(d.curves[i].op), (long long)k);
            first = 0;
        }
        printf(")\n");
    }
    if (d.drifted)
        printf("drift: %d curve%s with %lld point%s beyond %g%%\n", d.drifted, d.drifted > 1 ? "s" : "", (long long)d.beyond,
               d.beyond > 1 ? "s" : "", tol * 100);
    else {
        double worst = 0;
        const char *wop = "";
        for (int i = 0; i < d.n_curves; i++)
            if (d.curves[i].common && fabs(d.curves[i].worst_rel) >= fabs(worst)) {
                worst = d.curves[i].worst_rel;
                wop = cost_op_name(d.curves[i].op);
            }
        printf("no drift beyond %g%%%s", tol * 100, d.common ? "" : " (no common points)");
        if (d.common) printf(" (largest change %+.1f%% in %s)", worst * 100, wop);
        printf("\n");
    }
    rc = d.drifted ? 1 : 0;
    calib_diff_free(&d);
    return rc;
}
