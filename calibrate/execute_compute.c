/* execute_compute.c — kvcal execute: the compute side: one layer of an iteration on the stage's
 * kernels, the buffers. See execute.h for what a replay does and execute_int.h for the state its files
 * share. */
#include "calibrate/execute_int.h"

#define DEV(call)                                                                                                      \
    do {                                                                                                               \
        if ((call) != 0) return -1;                                                                                    \
    } while (0)

/* layer l on stage g's buffers, over `items` (the iteration's batch, or one lane's history as a
 * prefill): first its restoration work `ly` (NULL: none; projections, dequantizations: what turns
 * loaded state into KV, at the head of the layer as iteration.c costs it; *work_end: when that is
 * done; cuda: work_ev, when not NULL, recorded on the stage's stream there instead), then the
 * layer over the batch. cuda: everything enqueued on the stage's stream, nothing waited for */
int ex_layer_run(Ex *x, ExStage *g, const SchItem *items, int nitems, const SchLayer *ly, int l, int64_t *work_end,
                     ProbeEvent *work_ev, KvErr *e)
{
    const Schedule *s = x->s;
    ProbeDev *d = g->dev;
    const ExWeights *W = &x->ws[l % x->n_wsets];
    int D = s->hidden, hq = s->heads, hk = s->kv_heads, dh = s->head_dim, I = s->intermediate;
    int nwork = ly ? ly->nwork : 0;
    int64_t M = 0, B = 0;
    for (int i = 0; i < nitems; i++) {
        M += items[i].tokens;
        if (items[i].kind == SCH_ITEM_DECODE) B++;
    }
    for (int w = 0; w < nwork; w++)
        if (ly->work[w].op == SCH_WORK_RECOMPUTE) M += ly->work[w].tokens;
    int rows = (int)M, qkv_w = (hq + 2 * hk) * dh;
    /* layer l's K and V: its own region of the stage's cache, each item its own rows in it (a model's
     * cache holds every layer's and every request's apart: a layer's attention reads keys that the
     * other layers' weights have pushed out of the CPU's caches, not the ones the layer before read) */
    size_t row_b = (size_t)(hk * dh) * d->elem_bytes, q_row_b = (size_t)(hq * dh) * d->elem_bytes;
    char *kl = (char *)g->k + (size_t)l * (size_t)x->kv_rows * row_b, *vl = (char *)g->v + (size_t)l * (size_t)x->kv_rows * row_b;
    int64_t kv_off = 0, q_off = 0;
    for (int w = 0; w < nwork; w++) {
        const SchWork *wk = &ly->work[w];
        if (wk->op == SCH_WORK_PROJECTION) {
            DEV(d->ops->gemm(d, (int)wk->tokens, 2 * hk * dh, D, g->x_, W->kv, g->kvp, e));
            if (s->rope) DEV(d->ops->rope(d, kl, (int)wk->tokens, hk, dh, e));
        } else if (wk->op == SCH_WORK_DEQUANT) {
            DEV(d->ops->dequant(d, g->qi8, g->scale, g->kvp, (int)(wk->tokens * 2 * hk), dh, e));
        }
    }
    if (work_ev) DEV(probe_cuda_record(g->cs, work_ev, e));
    else *work_end = ex_now(x);
    DEV(d->ops->norm(d, 0, g->x_, x->nw, x->nb, g->xn, rows, D, e));
    DEV(d->ops->gemm(d, rows, qkv_w, D, g->xn, W->qkv, g->qkv, e));
    if (s->rope) {
        DEV(d->ops->rope(d, g->q_, rows, hq, dh, e));
        DEV(d->ops->rope(d, kl, rows, hk, dh, e));
    }
    for (int i = 0; i < nitems; i++) { /* each item its queries, its keys and its output rows */
        const SchItem *m = &items[i];
        if (m->kind == SCH_ITEM_DECODE) continue;
        DEV(d->ops->attn_prefill(d, (char *)g->q_ + (size_t)q_off * q_row_b, kl + (size_t)kv_off * row_b, vl + (size_t)kv_off * row_b,
                                 (char *)g->ao + (size_t)q_off * q_row_b, (int)m->tokens, (int)m->ctx, hq, hk, dh, e));
        q_off += m->tokens;
        kv_off += m->ctx + m->tokens;
    }
    for (int w = 0; w < nwork; w++)
        if (ly->work[w].op == SCH_WORK_RECOMPUTE) {
            const SchWork *wk = &ly->work[w];
            DEV(d->ops->attn_prefill(d, (char *)g->q_ + (size_t)q_off * q_row_b, kl + (size_t)kv_off * row_b, vl + (size_t)kv_off * row_b,
                                     (char *)g->ao + (size_t)q_off * q_row_b, (int)wk->tokens, (int)wk->ctx, hq, hk, dh, e));
            q_off += wk->tokens;
            kv_off += wk->ctx + wk->tokens;
        }
    if (B) { /* the decode sequences after the prefill rows, each its keys (ctx_off from the region's start) */
        int b = 0;
        g->ctx_off[0] = 0;
        for (int i = 0; i < nitems; i++)
            if (items[i].kind == SCH_ITEM_DECODE) {
                g->ctx_off[b + 1] = g->ctx_off[b] + (int)items[i].ctx;
                b++;
            }
        DEV(d->ops->attn_decode(d, (char *)g->q_ + (size_t)q_off * q_row_b, kl + (size_t)kv_off * row_b, vl + (size_t)kv_off * row_b,
                                (char *)g->ao + (size_t)q_off * q_row_b, (int)B, g->ctx_off, hq, hk, dh, e));
    }
    DEV(d->ops->gemm(d, rows, D, hq * dh, g->ao, W->o, g->h, e));
    DEV(d->ops->norm(d, 0, g->h, x->nw, x->nb, g->xn, rows, D, e));
    DEV(d->ops->gemm(d, rows, 2 * I, D, g->xn, W->up, g->gu, e));
    DEV(d->ops->act(d, KACT_SILU, g->gu, g->a, rows, I, e));
    DEV(d->ops->gemm(d, rows, D, I, g->a, W->down, g->x_, e));
    for (int n = 2; n < s->norms_per_layer; n++) DEV(d->ops->norm(d, 0, g->x_, x->nw, x->nb, g->xn, rows, D, e));
    return 0;
}

/* the rows layer l of iteration it runs over (its batch plus layer-wise recompute rows) */
int64_t ex_layer_rows(const SchIter *it, int l)
{
    int64_t M = 0;
    for (int i = 0; i < it->nitems; i++) M += it->items[i].tokens;
    for (int w = 0; w < it->layers[l].nwork; w++)
        if (it->layers[l].work[w].op == SCH_WORK_RECOMPUTE) M += it->layers[l].work[w].tokens;
    return M;
}

int ex_compute_alloc(Ex *x, KvErr *e)
{
    const Schedule *s = x->s;
    ProbeDev *d = &x->dev;
    int64_t D = s->hidden, hq = s->heads, hk = s->kv_heads, dh = s->head_dim, I = s->intermediate;
    for (int k = 0; k < x->r->n_iters; k++) {
        const SchIter *it = &s->iters[x->r->iter_idx[k]];
        int64_t B = 0, dctx = 0;
        for (int i = 0; i < it->nitems; i++) {
            if (it->items[i].kind == SCH_ITEM_DECODE) B++, dctx += it->items[i].ctx;
            else if (it->items[i].ctx + it->items[i].tokens > x->max_kv) x->max_kv = it->items[i].ctx + it->items[i].tokens;
        }
        if (dctx > x->max_kv) x->max_kv = dctx;
        if (B > x->max_batch) x->max_batch = B;
        int64_t items_kv = 0; /* the iteration's items, each its own rows: prefill ctx + tokens, decode ctx */
        for (int i = 0; i < it->nitems; i++)
            items_kv += it->items[i].ctx + (it->items[i].kind == SCH_ITEM_DECODE ? 0 : it->items[i].tokens);
        for (int l = 0; l < s->layers; l++) {
            int64_t layer_kv = items_kv;
            for (int w = 0; w < it->layers[l].nwork; w++) {
                const SchWork *wk = &it->layers[l].work[w];
                if (wk->op == SCH_WORK_RECOMPUTE && wk->ctx + wk->tokens > x->max_kv) x->max_kv = wk->ctx + wk->tokens;
                if (wk->op == SCH_WORK_RECOMPUTE) layer_kv += wk->ctx + wk->tokens;
                if (wk->tokens > x->max_work_tok) x->max_work_tok = wk->tokens;
            }
            if (layer_kv > x->kv_rows) x->kv_rows = layer_kv;
            int64_t rows = ex_layer_rows(it, l);
            if (rows > x->max_rows) x->max_rows = rows;
        }
        for (int j = 0; j < it->nlanes; j++) { /* a lane: one prefill of the history's tokens over its layer */
            const SchLane *ln = &it->lanes[j];
            if (ln->tokens > x->max_rows) x->max_rows = ln->tokens;
            if (ln->ctx + ln->tokens > x->max_kv) x->max_kv = ln->ctx + ln->tokens;
            if (ln->ctx + ln->tokens > x->kv_rows) x->kv_rows = ln->ctx + ln->tokens;
        }
    }
    if (x->race) { /* a race's iterations: every request's chunk (at most a budget's tokens) over its own history */
        const struct ExRace *rc = x->race;
        int64_t rows = 0, kvr = 0;
        for (int k = 0; k < rc->n; k++) {
            const ExRaceReq *a = &rc->rq[k];
            int64_t c = a->N > a->q->nnew ? a->N : a->q->nnew, all = a->N + a->q->nnew + a->q->nout;
            rows += c < rc->token_budget ? c : rc->token_budget;
            kvr += all;
            if (all > x->max_kv) x->max_kv = all;
        }
        if (rows > x->max_rows) x->max_rows = rows;
        if (kvr > x->kv_rows) x->kv_rows = kvr;
    }
    int64_t m = x->max_rows > 0 ? x->max_rows : 1, kv = x->max_kv > m ? x->max_kv : m, wt = x->max_work_tok > 0 ? x->max_work_tok : 1;
    if (wt > m) m = wt;
    size_t eb = d->elem_bytes; /* 4 (cpu fp32) or 2 (cuda fp16): every activation, weight and KV byte count */
    /* each stage's buffers from its own device (cuda: its own ProbeDev; cpu: all the shared one) */
#define ALLOC_ON(dv, p, n) DEV((dv)->ops->alloc((dv), (size_t)(n) * eb, PROBE_FILL_ELEMS, &(p), e))
#define ALLOC(p, n) ALLOC_ON(g->dev, p, n)
    for (int st = 0; st < s->stages; st++) {
        ExStage *g = &x->stage[st];
        ALLOC(g->x_, m * D);
        ALLOC(g->xn, m * D);
        ALLOC(g->h, m * D);
        ALLOC(g->qkv, m * (hq + 2 * hk) * dh);
        ALLOC(g->q_, m * hq * dh);
        ALLOC(g->ao, m * hq * dh);
        if (x->kv_rows < kv) x->kv_rows = kv;
        ALLOC(g->k, x->kv_rows * s->layers * hk * dh); /* per layer its own region (ex_layer_run) */
        ALLOC(g->v, x->kv_rows * s->layers * hk * dh);
        ALLOC(g->gu, m * 2 * I);
        ALLOC(g->a, m * I);
        ALLOC(g->kvp, wt * 2 * hk * dh);
        DEV(g->dev->ops->alloc(g->dev, (size_t)(wt * 2 * hk * dh), PROBE_FILL_I8, &g->qi8, e));
        DEV(g->dev->ops->alloc(g->dev, (size_t)(wt * 2 * hk) * sizeof(float), PROBE_FILL_SCALE, &g->scale, e));
        g->ctx_off = calloc((size_t)(x->max_batch + 2), sizeof *g->ctx_off);
        if (!g->ctx_off) return kv_err(e, "execute: out of memory");
        if (x->cuda) { /* where the stage's h2d copies land: device memory (bytes as the schedule has them) */
            void *db = NULL;
            DEV(g->dev->ops->alloc(g->dev, (size_t)(x->dev_bytes > 0 ? x->dev_bytes : 1), PROBE_FILL_I8, &db, e));
            g->dev_buf = db;
            continue;
        }
        g->dev_buf = malloc((size_t)(x->dev_bytes > 0 ? x->dev_bytes : 1));
        if (!g->dev_buf) return kv_err(e, "execute: out of memory");
        memset(g->dev_buf, 1, (size_t)(x->dev_bytes > 0 ? x->dev_bytes : 1));
    }
    int64_t per = ((hq + 2 * hk) * dh * D + D * hq * dh + 3 * I * D + 2 * hk * dh * D) * (int64_t)eb;
    int64_t nset = per > 0 ? EX_WEIGHT_CAP_BYTES / per : 1;
    x->n_wsets = (int)(nset < 1 ? 1 : (nset < s->layers ? nset : s->layers));
    x->ws = calloc((size_t)x->n_wsets, sizeof *x->ws);
    if (!x->ws) return kv_err(e, "execute: out of memory");
    for (int i = 0; i < x->n_wsets; i++) { /* shared by the stages (cuda: one device, every stream reads them) */
        ALLOC_ON(d, x->ws[i].qkv, (hq + 2 * hk) * dh * D);
        ALLOC_ON(d, x->ws[i].o, D * hq * dh);
        ALLOC_ON(d, x->ws[i].up, 2 * I * D);
        ALLOC_ON(d, x->ws[i].down, D * I);
        ALLOC_ON(d, x->ws[i].kv, 2 * hk * dh * D);
    }
    ALLOC_ON(d, x->nw, D);
    ALLOC_ON(d, x->nb, D);
#undef ALLOC
#undef ALLOC_ON
    return 0;
}
