/* calib_recipe.c — per-GPU shapes, the kernels of each op's recipe, their buffers and one timed
 * repetition. See calib_recipe.h for the recipes. Library code: never prints, never exits.
 */
#include "calibrate/calib_recipe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

void calib_shapes_of(CalibShapes *s, const ModelLayout *ly)
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
static int64_t experts_touched(const CalibShapes *s, int64_t t)
{
    if (t < 1 || s->E < 1) return 0;
    double x = (double)s->E * (1.0 - pow(1.0 - (double)s->topk / (double)s->E, (double)t));
    int64_t n = (int64_t)llround(x);
    return n < 1 ? 1 : (n > s->E ? s->E : n);
}


/* The GEMMs of a projection op for t tokens; returns their count (<= max), 0 for t = 0. */
static int gemm_recipe(const CalibShapes *s, CostOp op, int64_t t, CalibGemm *calls, int max)
{
    int64_t M, N, K;
    if (t < 1 || !model_gemm_shape(s->ly, op, t, &M, &N, &K)) return 0;
    int moe_ffn = s->moe && (op == OP_GEMM_FFN_UP || op == OP_GEMM_FFN_DOWN);
    if (!moe_ffn) {
        calls[0] = (CalibGemm){M, N, K, 0, 0, 0};
        return 1;
    }
    int nc = 0;
    int64_t row = 0;
    if (op == OP_GEMM_FFN_UP && nc < max) calls[nc++] = (CalibGemm){t, s->E, s->D, -1, 0, 0};
    int64_t touched = experts_touched(s, t);
    /* shared experts see every token; routed experts their average share M (model_gemm_shape) */
    for (int64_t j = 0; j < s->shared && nc < max; j++, row += t)
        calls[nc++] = (CalibGemm){t, N, K, (int)(s->E + j), op == OP_GEMM_FFN_UP ? 0 : row, row};
    for (int64_t j = 0; j < touched && nc < max; j++, row += M)
        calls[nc++] = (CalibGemm){M, N, K, (int)j, op == OP_GEMM_FFN_UP ? 0 : row, row};
    return nc;
}

int calib_gemm_recipe_max(const CalibShapes *s) { return (int)(s->E + s->shared + 2); }

/* Rows of the FFN intermediate for t tokens (act rows; ffn_down's A rows). */
static int64_t ffn_rows(const CalibShapes *s, int64_t t)
{
    if (!s->moe) return t;
    int64_t M, N, K;
    model_gemm_shape(s->ly, OP_GEMM_FFN_UP, t, &M, &N, &K);
    return s->shared * t + experts_touched(s, t) * M;
}


static int wbuf(CalibWork *w, void **buf, int64_t elems, KvErr *e)
{
    if (elems <= 0) elems = 1;
    return w->d->ops->alloc(w->d, (size_t)elems * w->d->elem_bytes, PROBE_FILL_ELEMS, buf, e);
}

/* A weight buffer: `copies` copies of elems (the GEMM reading it is N x K = elems). */
static int wbuf_w(CalibWork *w, void **buf, int64_t elems, KvErr *e) { return wbuf(w, buf, elems * w->copies, e); }

/* The weight elements one repetition of the op reads (one copy; MoE: the expert sets wanted). */
static int64_t op_weight_elems(const CalibShapes *s, CostOp op)
{
    int64_t qkv_w = (s->hq + 2 * s->hk) * s->dh, sets = s->moe ? s->E + s->shared : 1;
    int64_t up = sets * s->gate * s->I * s->D + (s->moe ? s->E * s->D : 0), down = sets * s->I * s->D;
    switch (op) {
    case OP_GEMM_QKV: return qkv_w * s->D;
    case OP_GEMM_O: return s->D * s->hq * s->dh;
    case OP_GEMM_KV_PROJ: return 2 * s->hk * s->dh * s->D;
    case OP_GEMM_FFN_UP: return up;
    case OP_GEMM_FFN_DOWN: return down;
    case OP_LAYER_PREFILL: return qkv_w * s->D + s->D * s->hq * s->dh + up + down;
    default: return 0;
    }
}

void calib_work_free(CalibWork *w)
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
static int alloc_ffn_weights(CalibWork *w, int up, int down, size_t cap_bytes, KvErr *e)
{
    const CalibShapes *s = w->s;
    int64_t per = (up ? s->gate * s->I * s->D : 0) + (down ? s->I * s->D : 0);
    int64_t want = s->moe ? s->E + s->shared : 1;
    int64_t fit = (int64_t)(cap_bytes / ((size_t)(per > 0 ? per : 1) * w->d->elem_bytes));
    w->n_w = (int)(want < fit ? want : (fit < 1 ? 1 : fit));
    w->w_up = calloc((size_t)w->n_w, sizeof *w->w_up);
    w->w_down = calloc((size_t)w->n_w, sizeof *w->w_down);
    if (!w->w_up || !w->w_down) return kv_err(e, "calibration: out of memory");
    for (int i = 0; i < w->n_w; i++) {
        if (up && wbuf_w(w, &w->w_up[i], s->gate * s->I * s->D, e) != 0) return -1;
        if (down && wbuf_w(w, &w->w_down[i], s->I * s->D, e) != 0) return -1;
    }
    if (s->moe && up && wbuf_w(w, &w->w_router, s->E * s->D, e) != 0) return -1;
    return 0;
}

size_t calib_expert_cap_bytes(const ProbeDev *d) { return !strcmp(d->backend, "cuda") ? ((size_t)8 << 30) : ((size_t)4 << 30); }

/* Allocate what op needs at its largest point (p1_max, p2_max). */
int calib_work_alloc(CalibWork *w, KvErr *e)
{
    const CalibShapes *s = w->s;
    int64_t t = w->p1_max, c = w->p2_max;
    w->max_calls = calib_gemm_recipe_max(s);
    w->calls = calloc((size_t)w->max_calls, sizeof *w->calls);
    if (!w->calls) return kv_err(e, "calibration: out of memory");
    int64_t qkv_w = (s->hq + 2 * s->hk) * s->dh, rows = ffn_rows(s, t);
    int64_t per_copy = op_weight_elems(s, w->op) * w->d->elem_bytes;
    w->copies = 1;
    w->copy = 0;
    if (w->cold_bytes > 0 && per_copy > 0) { /* enough copies that one rotation exceeds cold_bytes */
        int64_t n = w->cold_bytes / per_copy + 1;
        w->copies = (int)(n < CALIB_MAX_COPIES ? n : CALIB_MAX_COPIES);
    }
    switch (w->op) {
    case OP_GEMM_QKV:
        return wbuf(w, &w->x, t * s->D, e) || wbuf_w(w, &w->w_qkv, qkv_w * s->D, e) || wbuf(w, &w->qkv, t * qkv_w, e) ? -1 : 0;
    case OP_GEMM_O:
        return wbuf(w, &w->ao, t * s->hq * s->dh, e) || wbuf_w(w, &w->w_o, s->D * s->hq * s->dh, e) || wbuf(w, &w->h, t * s->D, e)
                   ? -1 : 0;
    case OP_GEMM_KV_PROJ:
        return wbuf(w, &w->x, t * s->D, e) || wbuf_w(w, &w->w_kv, 2 * s->hk * s->dh * s->D, e) ||
                       wbuf(w, &w->kvp, t * 2 * s->hk * s->dh, e) || wbuf(w, &w->k, t * s->hk * s->dh, e)
                   ? -1 : 0;
    case OP_GEMM_FFN_UP:
        if (wbuf(w, &w->x, t * s->D, e) || wbuf(w, &w->gu, rows * s->gate * s->I, e)) return -1;
        if (s->moe && wbuf(w, &w->router_out, t * s->E, e)) return -1;
        return alloc_ffn_weights(w, 1, 0, calib_expert_cap_bytes(w->d), e);
    case OP_GEMM_FFN_DOWN:
        if (wbuf(w, &w->a, rows * s->I, e) || wbuf(w, &w->dn, rows * s->D, e)) return -1;
        return alloc_ffn_weights(w, 0, 1, calib_expert_cap_bytes(w->d), e);
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
            wbuf(w, &w->hn, t * s->D, e) || wbuf(w, &w->qkv, t * qkv_w, e) || wbuf_w(w, &w->w_qkv, qkv_w * s->D, e) ||
            wbuf_w(w, &w->w_o, s->D * s->hq * s->dh, e) || wbuf(w, &w->nw, s->D, e) || wbuf(w, &w->nb, s->D, e) ||
            wbuf(w, &w->q, t * s->hq * s->dh, e) || wbuf(w, &w->ao, t * s->hq * s->dh, e) ||
            wbuf(w, &w->k, (c + t) * s->hk * s->dh * (w->seq ? w->copies : 1), e) ||
            wbuf(w, &w->v, (c + t) * s->hk * s->dh * (w->seq ? w->copies : 1), e) ||
            wbuf(w, &w->gu, rows * s->gate * s->I, e) || wbuf(w, &w->a, rows * s->I, e))
            return -1;
        if (s->moe && (wbuf(w, &w->router_out, t * s->E, e) || wbuf(w, &w->dn, rows * s->D, e))) return -1;
        return alloc_ffn_weights(w, 1, 1, calib_expert_cap_bytes(w->d), e);
    default:
        return kv_err(e, "calibration: op %s has no compute recipe", cost_op_name(w->op));
    }
}

static void *rows_at(const CalibWork *w, void *base, int64_t row, int64_t width)
{
    return (char *)base + (size_t)(row * width) * w->d->elem_bytes;
}

/* The GEMMs of a projection op: input `in` ([rows][K]), output `out` ([rows][N]). */
static int launch_gemms(CalibWork *w, CostOp op, int64_t t, void *in, void *out, const void *weight, KvErr *e)
{
    ProbeDev *d = w->d;
    int nc = gemm_recipe(w->s, op, t, w->calls, w->max_calls);
    for (int i = 0; i < nc; i++) {
        const CalibGemm *g = &w->calls[i];
        const void *b = g->w < 0 ? w->w_router
                        : weight ? weight
                        : op == OP_GEMM_FFN_UP ? w->w_up[g->w % w->n_w] : w->w_down[g->w % w->n_w];
        void *c = g->w < 0 ? w->router_out : rows_at(w, out, g->c_row, g->n);
        b = (const char *)b + (size_t)(w->copy % w->copies) * (size_t)(g->n * g->k) * w->d->elem_bytes; /* cold: this rep's copy */
        if (d->ops->gemm(d, (int)g->m, (int)g->n, (int)g->k, rows_at(w, in, g->a_row, g->k), b, c, e) != 0) return -1;
        w->launches++;
    }
    return 0;
}

static int launch_norm(CalibWork *w, void *x, void *y, int64_t t, KvErr *e)
{
    w->launches++;
    return w->d->ops->norm(w->d, w->s->layernorm, x, w->nw, w->nb, y, (int)t, (int)w->s->D, e);
}

static int launch_act(CalibWork *w, int64_t t, KvErr *e)
{
    const CalibShapes *s = w->s;
    int64_t rows = ffn_rows(s, t), f = s->gate == 2 ? s->I : s->I / 2; /* plain FFN: gated kernel over I/2 pairs */
    if (f < 1) f = 1;
    w->launches++;
    return w->d->ops->act(w->d, KACT_SILU, w->gu, w->a, (int)rows, (int)f, e);
}

static int launch_rope(CalibWork *w, void *q, void *k, int64_t t, KvErr *e)
{
    const CalibShapes *s = w->s;
    w->launches += 2;
    if (w->d->ops->rope(w->d, q, (int)t, (int)s->hq, (int)s->dh, e) != 0) return -1;
    return w->d->ops->rope(w->d, k, (int)t, (int)s->hk, (int)s->dh, e);
}

/* Launch the kernels of the current point (everything between the timer's start and stop). */
static int work_launch(CalibWork *w, KvErr *e)
{
    ProbeDev *d = w->d;
    const CalibShapes *s = w->s;
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
int calib_recipe_launches(const CalibShapes *s, CostOp op, int64_t p1, CalibGemm *scratch, int max)
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

void calib_work_set_point(CalibWork *w, int64_t p1, int64_t p2)
{
    w->p1 = p1;
    w->p2 = p2;
    if (w->op == OP_ATTN_DECODE) /* C keys shared evenly by the batch (later sequences take the remainder) */
        for (int64_t b = 0; b <= p1; b++) w->ctx_off[b] = (int)(p2 * b / p1);
}

int calib_work_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    CalibWork *w = ctx;
    ProbeDev *d = w->d;
    if (w->cold && d->ops->flush_cache && d->ops->flush_cache(d, e) != 0) return -1;
    if (w->copies > 1) w->copy = (w->copy + 1) % w->copies; /* cold weights: the next copy */
    if (d->ops->timer_start(d, e) != 0) return -1;
    if (work_launch(w, e) != 0) {
        double ignored;
        KvErr e2;
        d->ops->timer_stop(d, &ignored, &e2);
        return -1;
    }
    return d->ops->timer_stop(d, ns, e);
}

/* ==================================================================== in sequence */

int calib_seq_alloc(CalibWork *w, int64_t t_max, int64_t ctx_max, int64_t batch_max, KvErr *e)
{
    w->op = OP_LAYER_PREFILL; /* the layer's buffers; K and V with a copy per weight copy */
    w->seq = 1;
    w->cold = 1;
    w->p1_max = t_max < 1 ? 1 : t_max;
    w->p2_max = ctx_max < 0 ? 0 : ctx_max;
    w->seq_batch_max = batch_max < 1 ? 1 : batch_max;
    if (calib_work_alloc(w, e) != 0) return -1;
    w->ctx_off = calloc((size_t)w->seq_batch_max + 1, sizeof *w->ctx_off);
    if (!w->ctx_off) return kv_err(e, "calibration: out of memory");
    return 0;
}

void calib_seq_set(CalibWork *w, int attn, int64_t p1, int64_t p2)
{
    w->seq_attn = attn;
    w->p1 = p1;
    w->p2 = p2;
    if (attn == CALIB_SEQ_DECODE) /* C keys shared evenly by the batch, as calib_work_set_point */
        for (int64_t b = 0; b <= p1 && b <= w->seq_batch_max; b++) w->ctx_off[b] = (int)(p2 * b / p1);
}

/* the clock around one kernel group of the layer: its time added to op_ns[op] */
static int seq_timed_begin(CalibWork *w, KvErr *e) { return w->d->ops->timer_start(w->d, e); }

static int seq_timed_end(CalibWork *w, int failed, double *op_ns, CostOp op, KvErr *e)
{
    double ns = 0;
    KvErr e2;
    if (failed) {
        w->d->ops->timer_stop(w->d, &ns, &e2);
        return -1;
    }
    if (w->d->ops->timer_stop(w->d, &ns, e) != 0) return -1;
    op_ns[op] += ns;
    return 0;
}

#define SEQ_TIMED(op, call)                                                                  \
    do {                                                                                     \
        if (seq_timed_begin(w, e) != 0 || seq_timed_end(w, (call) != 0, op_ns, (op), e) != 0) \
            return -1;                                                                       \
    } while (0)

int calib_seq_rep(CalibWork *w, double op_ns[OP_COUNT], double *layer_ns, KvErr *e)
{
    ProbeDev *d = w->d;
    const CalibShapes *s = w->s;
    int64_t t = w->p1, c = w->p2;
    for (int i = 0; i < OP_COUNT; i++) op_ns[i] = 0;
    if (w->copies > 1) w->copy = (w->copy + 1) % w->copies; /* the next layer: its own weights and KV */
    w->launches = 0;
    size_t kv_rows = (size_t)(w->p2_max + w->p1_max);
    void *kc = rows_at(w, w->k, (int64_t)(kv_rows * (size_t)w->copy), s->hk * s->dh);
    void *vc = rows_at(w, w->v, (int64_t)(kv_rows * (size_t)w->copy), s->hk * s->dh);
    /* prefill: the new tokens' K rows after the context's; decode: the new rows' place is immaterial */
    void *k_new = rows_at(w, kc, w->seq_attn == CALIB_SEQ_PREFILL ? c : 0, s->hk * s->dh);
    SEQ_TIMED(OP_NORM, launch_norm(w, w->x, w->xn, t, e));
    SEQ_TIMED(OP_GEMM_QKV, launch_gemms(w, OP_GEMM_QKV, t, w->xn, w->qkv, w->w_qkv, e));
    if (s->rope) SEQ_TIMED(OP_ROPE, launch_rope(w, w->q, k_new, t, e));
    if (w->seq_attn == CALIB_SEQ_PREFILL) {
        w->launches++;
        SEQ_TIMED(OP_ATTN_PREFILL, d->ops->attn_prefill(d, w->q, kc, vc, w->ao, (int)t, (int)c, (int)s->hq, (int)s->hk, (int)s->dh, e));
    } else if (w->seq_attn == CALIB_SEQ_DECODE) {
        w->launches++;
        SEQ_TIMED(OP_ATTN_DECODE, d->ops->attn_decode(d, w->q, kc, vc, w->ao, (int)t, w->ctx_off, (int)s->hq, (int)s->hk, (int)s->dh, e));
    }
    SEQ_TIMED(OP_GEMM_O, launch_gemms(w, OP_GEMM_O, t, w->ao, w->h, w->w_o, e));
    SEQ_TIMED(OP_NORM, launch_norm(w, w->h, w->hn, t, e));
    SEQ_TIMED(OP_GEMM_FFN_UP, launch_gemms(w, OP_GEMM_FFN_UP, t, w->hn, w->gu, NULL, e));
    SEQ_TIMED(OP_ACT, launch_act(w, t, e));
    SEQ_TIMED(OP_GEMM_FFN_DOWN, launch_gemms(w, OP_GEMM_FFN_DOWN, t, w->a, s->moe ? w->dn : w->x, NULL, e));
    for (int i = 2; i < s->norms; i++) /* the model's extra norms (Gemma-2: 4 per layer) */
        SEQ_TIMED(OP_NORM, launch_norm(w, i % 2 ? w->xn : w->x, i % 2 ? w->x : w->xn, t, e));
    double sum = 0;
    for (int i = 0; i < OP_COUNT; i++) sum += op_ns[i];
    op_ns[OP_NORM] /= s->norms < 2 ? 2 : s->norms; /* per call: the layer ran max(2, norms) of them */
    *layer_ns = sum;
    return 0;
}
