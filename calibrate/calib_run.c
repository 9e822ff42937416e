/* calib_run.c — the measured run (one store run per call) and the mapping of reported device
 * names to the hardware catalog. See calib_run.h for the semantics.
 * Library code: never prints, never exits (the command line is calibrate/cli/calib_cmds.c).
 */
#include "calibrate/calib_run.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "calibrate/calib_recipe.h"

/* ==================================================================== the run */

typedef struct RunCtx {
    CostStore *st;
    const CalibOptions *o;
    CalibResult *r;
    const CalibPlan *plan;
    ProbeDev *dev;
    CalibShapes s;
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

/* skip_upto >= 0: the points with p1 <= skip_upto are stored already (in sequence) and not timed */
static int measure_compute_op(RunCtx *rc, CostOp op, int64_t skip_upto, KvErr *e)
{
    const CalibOpPlan *op_plan = &rc->plan->op[op];
    const CalibAxis *a1 = &op_plan->ax[0], *a2 = &op_plan->ax[1];
    CalibWork w;
    memset(&w, 0, sizeof w);
    w.d = rc->dev;
    w.s = &rc->s;
    w.op = op;
    w.cold = op_plan->cold_cache;
    w.cold_bytes = rc->o->cold_weights_bytes;
    w.p1_max = a1->v[a1->n - 1];
    w.p2_max = a2->v[a2->n - 1];
    int64_t t0 = timing_now_ns(), npts = (int64_t)a1->n * a2->n, k = 0;
    int first = 0;
    while (first < a1->n && a1->v[first] <= skip_upto) first++;
    if (first == a1->n) return 0;
    npts -= (int64_t)first * a2->n;
    if (calib_work_alloc(&w, e) != 0) {
        calib_work_free(&w);
        return kv_err_prefix(e, "%s: buffers for (%lld, %lld): ", cost_op_name(op), (long long)w.p1_max, (long long)w.p2_max);
    }
    double prev = 0;
    for (int i = first; i < a1->n; i++)
        for (int j = 0; j < a2->n; j++, k++) {
            if (interrupted(rc->o)) {
                calib_work_free(&w);
                return kv_err(e, "interrupted");
            }
            calib_work_set_point(&w, a1->v[i], a2->v[j]);
            TimingCfg cfg = point_cfg(rc, op_plan, prev, t0, npts - k);
            TimingStats ts;
            if (timing_run(&cfg, calib_work_rep, &w, &ts, e) != 0 ||
                store_stats(rc, op, a1->v[i], a2->v[j], 0, &ts, (double)(timing_now_ns() - t0) * 1e-9, e) != 0) {
                calib_work_free(&w);
                return kv_err_prefix(e, "%s (%lld, %lld): ", cost_op_name(op), (long long)a1->v[i], (long long)a2->v[j]);
            }
            prev = ts.median_ns;
        }
    calib_work_free(&w);
    CalibProgress pr = {.ev = CALIB_EV_OP_DONE, .op = op, .op_points = npts, .op_seconds = (double)(timing_now_ns() - t0) * 1e-9};
    progress(rc, &pr);
    return 0;
}

/* In-sequence measurement (CalibOptions.in_sequence): the shapes a layer sequence runs, each
 * timed as one repetition of a whole layer (calib_seq_rep), each op's samples stored at its own
 * points: the linear ops (and attn_prefill at no context) from a prefill layer of t tokens over no
 * context for every t of their grids (without attention above the attention grid's largest new
 * tokens), attn_prefill from a layer of n new over c, attn_decode from a decode layer of b over C. */
static const CostOp k_seq_linear[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM, OP_ACT, OP_ROPE};

/* the largest token count of the plan's enabled GEMM ops (0: none) */
static int64_t seq_gemm_max(const CalibPlan *p)
{
    int64_t m = 0;
    for (size_t i = 0; i < 4; i++) { /* k_seq_linear's GEMMs */
        const CalibOpPlan *o = &p->op[k_seq_linear[i]];
        if (o->enabled) m = kv_max_i64(m, o->ax[0].v[o->ax[0].n - 1]);
    }
    return m;
}

typedef struct SeqCtx {
    CalibWork w;
    double *samples[OP_COUNT]; /* per op the timed repetitions' times of the current shape */
    int n;
    int64_t points[OP_COUNT];  /* stored per op */
} SeqCtx;

static int seq_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    SeqCtx *q = ctx;
    double op_ns[OP_COUNT];
    if (calib_seq_rep(&q->w, op_ns, ns, e) != 0) return -1;
    if (timed && q->n < TIMING_MAX_SAMPLES) {
        for (int op = 0; op < OP_COUNT; op++)
            if (q->samples[op]) q->samples[op][q->n] = op_ns[op];
        q->n++;
    }
    return 0;
}

static int axis_has(const CalibAxis *a, int64_t v)
{
    for (int i = 0; i < a->n; i++)
        if (a->v[i] == v) return 1;
    return 0;
}

/* One shape: time the layer, store op's point (p1, p2) for every op in ops[] (n_ops) whose grid has it. */
static int seq_shape(RunCtx *rc, SeqCtx *q, int attn, int64_t p1, int64_t p2, const CostOp *ops, int n_ops, double *prev,
                     int64_t t0, KvErr *e)
{
    if (interrupted(rc->o)) return kv_err(e, "interrupted");
    calib_seq_set(&q->w, attn, p1, p2);
    TimingCfg cfg = rc->plan->op[OP_LAYER_PREFILL].enabled ? rc->plan->op[OP_LAYER_PREFILL].timing : rc->plan->op[ops[0]].timing;
    cfg.stop = rc->o->stop;
    if (*prev > (double)CALIB_SKIP_WARMUP_NS) cfg.warmup = 0;
    q->n = 0;
    TimingStats layer;
    if (timing_run(&cfg, seq_rep, q, &layer, e) != 0)
        return kv_err_prefix(e, "in sequence (%s %lld, %lld): ", attn == CALIB_SEQ_DECODE ? "decode" : "prefill", (long long)p1,
                             (long long)p2);
    *prev = layer.median_ns;
    for (int i = 0; i < n_ops; i++) {
        const CalibOpPlan *op_plan = &rc->plan->op[ops[i]];
        if (!op_plan->enabled || !axis_has(&op_plan->ax[0], p1) || !axis_has(&op_plan->ax[1], p2)) continue;
        TimingStats ts;
        if (timing_stats(q->samples[ops[i]], q->n, &ts) != 0) return kv_err(e, "in sequence: no samples");
        ts.elapsed_ns = layer.elapsed_ns;
        ts.warmup = layer.warmup;
        if (store_stats(rc, ops[i], p1, p2, 0, &ts, (double)(timing_now_ns() - t0) * 1e-9, e) != 0)
            return kv_err_prefix(e, "%s (%lld, %lld) in sequence: ", cost_op_name(ops[i]), (long long)p1, (long long)p2);
        q->points[ops[i]]++;
    }
    return 0;
}

static int measure_in_sequence(RunCtx *rc, int64_t cold_bytes, KvErr *e)
{
    const CalibPlan *p = rc->plan;
    const CalibOpPlan *pf = &p->op[OP_ATTN_PREFILL], *dd = &p->op[OP_ATTN_DECODE];
    /* the linear ops' token counts, ascending and distinct: the GEMMs' grids, and the elementwise
     * ops' points up to the largest of them (beyond it an elementwise point would cost a whole layer
     * of GEMMs larger than any the plan times: those points are timed alone, measure_compute_op) */
    CalibAxis toks = {0};
    int64_t gemm_max = seq_gemm_max(p);
    for (size_t i = 0; i < KV_ARRAY_LEN(k_seq_linear); i++) {
        const CalibOpPlan *o = &p->op[k_seq_linear[i]];
        for (int j = 0; o->enabled && j < o->ax[0].n; j++) {
            int64_t v = o->ax[0].v[j];
            if (v > gemm_max) break;
            int k = 0;
            while (k < toks.n && toks.v[k] < v) k++;
            if (k < toks.n && toks.v[k] == v) continue;
            if (toks.n >= CALIB_MAX_AXIS) return kv_err(e, "in sequence: more than %d token counts", CALIB_MAX_AXIS);
            memmove(&toks.v[k + 1], &toks.v[k], (size_t)(toks.n - k) * sizeof toks.v[0]);
            toks.v[k] = v;
            toks.n++;
        }
    }
    int64_t an_max = pf->enabled ? pf->ax[0].v[pf->ax[0].n - 1] : 0;
    int64_t t_max = toks.n ? toks.v[toks.n - 1] : 1, ctx_max = 0, b_max = 1;
    if (pf->enabled) {
        t_max = kv_max_i64(t_max, an_max);
        ctx_max = pf->ax[1].v[pf->ax[1].n - 1];
    }
    if (dd->enabled) {
        b_max = dd->ax[0].v[dd->ax[0].n - 1];
        t_max = kv_max_i64(t_max, b_max);
        ctx_max = kv_max_i64(ctx_max, dd->ax[1].v[dd->ax[1].n - 1]);
    }
    SeqCtx q;
    memset(&q, 0, sizeof q);
    q.w.d = rc->dev;
    q.w.s = &rc->s;
    q.w.cold_bytes = cold_bytes;
    int rcode = -1;
    static const CostOp attn_ops[] = {OP_ATTN_PREFILL, OP_ATTN_DECODE};
    const CostOp *all[] = {k_seq_linear, attn_ops};
    size_t n_all[] = {KV_ARRAY_LEN(k_seq_linear), KV_ARRAY_LEN(attn_ops)};
    for (size_t g = 0; g < 2; g++)
        for (size_t i = 0; i < n_all[g]; i++)
            if (!(q.samples[all[g][i]] = malloc(TIMING_MAX_SAMPLES * sizeof(double)))) {
                kv_err(e, "calibration: out of memory");
                goto out;
            }
    if (calib_seq_alloc(&q.w, t_max, ctx_max, b_max, e) != 0) {
        kv_err_prefix(e, "in sequence: buffers for %lld tokens over %lld keys: ", (long long)t_max, (long long)ctx_max);
        goto out;
    }
    int64_t t0 = timing_now_ns();
    double prev = 0;
    static const CostOp lin_pf[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM, OP_ACT, OP_ROPE, OP_ATTN_PREFILL};
    for (int i = 0; i < toks.n; i++) {
        int with_attn = pf->enabled && toks.v[i] <= an_max;
        if (seq_shape(rc, &q, with_attn ? CALIB_SEQ_PREFILL : CALIB_SEQ_NONE, toks.v[i], 0, lin_pf,
                      with_attn ? (int)KV_ARRAY_LEN(lin_pf) : (int)KV_ARRAY_LEN(lin_pf) - 1, &prev, t0, e) != 0)
            goto out;
    }
    for (int i = 0; pf->enabled && i < pf->ax[0].n; i++)
        for (int j = 0; j < pf->ax[1].n; j++) {
            int64_t n = pf->ax[0].v[i], c = pf->ax[1].v[j];
            if (c == 0 && axis_has(&toks, n)) continue; /* stored with the linear ops' layer */
            if (seq_shape(rc, &q, CALIB_SEQ_PREFILL, n, c, &attn_ops[0], 1, &prev, t0, e) != 0) goto out;
        }
    for (int i = 0; dd->enabled && i < dd->ax[0].n; i++)
        for (int j = 0; j < dd->ax[1].n; j++)
            if (seq_shape(rc, &q, CALIB_SEQ_DECODE, dd->ax[0].v[i], dd->ax[1].v[j], &attn_ops[1], 1, &prev, t0, e) != 0) goto out;
    for (int op = 0; op < OP_COUNT; op++) /* one line per op; the seconds are those of all the layers */
        if (q.points[op] > 0) {
            CalibProgress pr = {.ev = CALIB_EV_OP_DONE, .op = (CostOp)op, .op_points = q.points[op],
                                .op_seconds = (double)(timing_now_ns() - t0) * 1e-9};
            progress(rc, &pr);
        }
    rcode = 0;
out:
    calib_work_free(&q.w);
    for (int op = 0; op < OP_COUNT; op++) free(q.samples[op]);
    return rcode;
}

static int measure_io_op(RunCtx *rc, CostOp op, ProbeLink *link, ProbeSsd *ssd, ProbeNet *net, KvErr *e)
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
                        : net ? probe_net_measure(net, a1->v[i], &cfg, &ts, e)
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

/* IO beside compute (CalibOptions.io_beside_compute): while the link and SSD points are timed,
 * a second thread runs layers of the model back to back — a prefill layer of BESIDE_NEW new tokens
 * over BESIDE_CTX keys on the next copy of its weights and KV each time (calib_seq_rep, the
 * in-sequence recipe), as a replay's compute thread runs its iterations while its IO threads read
 * and copy (kvcal execute). On this kind of machine the IO path (the read's system call and its
 * completion, the memcpy standing in for h2d) shares the CPUs and the memory bandwidth with that
 * compute; a read timed alone is faster than the same read inside a replay (docs/validation.md,
 * "Restore times"). The shape is that of make validate's restoring iterations (32 new tokens over
 * histories of up to 512); what matters is that the thread keeps a core busy streaming weights
 * from memory, as a layer does. The calling thread, which runs the IO, is pinned to the last CPU
 * meanwhile (>= 2 CPUs), as kvcal execute pins its IO threads; the compute thread is not, as the
 * replay's is not. Only the compute thread touches the ProbeDev while it runs (the link and SSD
 * probes have their own buffers and clocks). */
#define BESIDE_NEW 32
#define BESIDE_CTX 512

typedef struct Beside {
    CalibWork w;
    pthread_t th;
    atomic_int stop, started;
    int running, pinned, failed;
    cpu_set_t saved; /* the calling thread's affinity before the pin */
    int64_t layers;
    KvErr e;
} Beside;

static void *beside_main(void *p)
{
    Beside *b = p;
    double op_ns[OP_COUNT], ns;
    atomic_store(&b->started, 1);
    do { /* at least one layer: the IO it was started for overlaps some compute */
        if (calib_seq_rep(&b->w, op_ns, &ns, &b->e) != 0) {
            b->failed = 1;
            break;
        }
        b->layers++;
    } while (!atomic_load(&b->stop));
    return NULL;
}

static int beside_start(Beside *b, RunCtx *rc, int64_t cold_bytes, KvErr *e)
{
    memset(b, 0, sizeof *b);
    atomic_init(&b->stop, 0);
    atomic_init(&b->started, 0);
    b->w.d = rc->dev;
    b->w.s = &rc->s;
    b->w.cold_bytes = cold_bytes;
    if (calib_seq_alloc(&b->w, BESIDE_NEW, BESIDE_CTX, 1, e) != 0) {
        calib_work_free(&b->w);
        return kv_err_prefix(e, "io beside compute: buffers for %d tokens over %d keys: ", BESIDE_NEW, BESIDE_CTX);
    }
    calib_seq_set(&b->w, CALIB_SEQ_PREFILL, BESIDE_NEW, BESIDE_CTX);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 1 && pthread_getaffinity_np(pthread_self(), sizeof b->saved, &b->saved) == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)ncpu - 1, &set);
        b->pinned = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0; /* refused: unpinned */
    }
    if (pthread_create(&b->th, NULL, beside_main, b) != 0) {
        if (b->pinned) pthread_setaffinity_np(pthread_self(), sizeof b->saved, &b->saved);
        calib_work_free(&b->w);
        return kv_err(e, "io beside compute: cannot start the compute thread");
    }
    b->running = 1;
    while (!atomic_load(&b->started)) sched_yield(); /* the first IO point is timed beside compute too */
    return 0;
}

/* stop and join the compute thread, unpin; -1 (e set) when it failed, unless e already holds an error */
static int beside_stop(Beside *b, KvErr *e)
{
    if (!b->running) return 0;
    atomic_store(&b->stop, 1);
    pthread_join(b->th, NULL);
    b->running = 0;
    if (b->pinned) pthread_setaffinity_np(pthread_self(), sizeof b->saved, &b->saved);
    calib_work_free(&b->w);
    if (b->failed) return kv_err(e, "io beside compute: the compute thread failed: %s", b->e.msg);
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
    if (cuda && o->in_sequence) return kv_err(e, "calibration: in-sequence timing is for the cpu backend (its kernels are synchronous)");
    if (cuda && o->io_beside_compute)
        return kv_err(e, "calibration: io beside compute is for the cpu backend (a GPU computes on its own; the host's IO does not share it)");
    ModelLayout ly = {o->model, o->dtype, o->tp, 1};
    if (model_layout_check(&ly, e) != 0) return -1;

    RunCtx rc;
    memset(&rc, 0, sizeof rc);
    rc.st = st;
    rc.o = o;
    rc.r = r;
    calib_shapes_of(&rc.s, &ly);
    snprintf(rc.model, sizeof rc.model, "%s", o->model->name);
    snprintf(rc.dtype, sizeof rc.dtype, "%s", kv_dtype_name(o->dtype));

    CalibPlan own_plan;
    if (!o->plan && calib_plan_default(&own_plan, o->backend, o->quick, e) != 0) return -1;
    CalibPlan plan = o->plan ? *o->plan : own_plan;
    if (!rc.s.rope) plan.op[OP_ROPE].enabled = 0;
    /* one device: no collectives; the network link only when the plan asks for it (kvcal run --net:
     * the remote store on the loopback interface) */
    plan.op[OP_ALLREDUCE].enabled = plan.op[OP_ALLGATHER].enabled = 0;
    rc.plan = &plan;

    HwCatalog own_hw;
    memset(&own_hw, 0, sizeof own_hw);
    const HwCatalog *hw = o->hw;
    if (!hw) {
        if (hw_catalog_load(&own_hw, NULL, e) != 0) return -1;
        hw = &own_hw;
    }

    int rcode = -1, run_open = 0;
    Beside beside;
    memset(&beside, 0, sizeof beside);
    ProbeDev dev;
    memset(&dev, 0, sizeof dev);
    ProbeLink *link = NULL;
    ProbeSsd *ssd = NULL;
    ProbeNet *net = NULL;
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
    if (o->cold_weights_bytes > 0)
        note_add(notes, sizeof notes, "cold weights: GEMM/layer weights rotated over copies > %lld MiB",
                 (long long)(o->cold_weights_bytes >> 20));
    if (o->in_sequence)
        note_add(notes, sizeof notes, "in sequence: layer ops timed inside a layer, copies > %lld MiB",
                 (long long)((o->cold_weights_bytes > 0 ? o->cold_weights_bytes : 3 * probe_cpu_llc_bytes()) >> 20));
    if (o->io_beside_compute)
        note_add(notes, sizeof notes, "io beside compute: link, ssd and net points timed while a thread runs prefill layers (%d new over %d keys)",
                 BESIDE_NEW, BESIDE_CTX);
    note_add(notes, sizeof notes, "%s", dev.info);
    if (ly.tp > 1) note_add(notes, sizeof notes, "tp %d: per-GPU shapes timed on one device", ly.tp);
    note_add(tail_notes, sizeof tail_notes, "not measured: allreduce, allgather%s%s", plan.op[OP_NET].enabled ? "" : ", net",
             rc.s.rope ? "" : ", rope (learned positions)");

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

    /* the remote store's NIC: a server process on the loopback interface */
    if (plan.op[OP_NET].enabled) {
        if (!(net = probe_net_open(axis_max(&plan.op[OP_NET], 0), e))) goto out;
        note_add(io_notes, sizeof io_notes, "net = a fetch from a server process over TCP on the loopback interface");
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
        int64_t fit = (int64_t)(calib_expert_cap_bytes(&dev) / (size_t)per);
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
        calib_spec_inputs(&in, hw, &ly, meta.device);
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
    int64_t seq_cold = o->cold_weights_bytes > 0 ? o->cold_weights_bytes : 3 * probe_cpu_llc_bytes();
    if (o->in_sequence && measure_in_sequence(&rc, seq_cold, e) != 0) goto out;
    for (size_t i = 0; i < KV_ARRAY_LEN(compute); i++) {
        int64_t skip = -1; /* the points measured in sequence above: all, or the elementwise ones up to the GEMMs' largest */
        for (size_t j = 0; o->in_sequence && j < KV_ARRAY_LEN(k_seq_linear); j++)
            if (compute[i] == k_seq_linear[j]) skip = j < 4 ? INT64_MAX : seq_gemm_max(&plan);
        if (o->in_sequence && (compute[i] == OP_ATTN_PREFILL || compute[i] == OP_ATTN_DECODE)) skip = INT64_MAX;
        if (plan.op[compute[i]].enabled && measure_compute_op(&rc, compute[i], skip, e) != 0) goto out;
    }
    int any_io = 0;
    for (int op = OP_H2D; op <= OP_SSD_WRITE; op++) any_io |= plan.op[op].enabled;
    any_io |= plan.op[OP_NET].enabled;
    if (o->io_beside_compute && any_io && beside_start(&beside, &rc, seq_cold, e) != 0) goto out;
    for (int op = OP_H2D; op <= OP_D2H_BIDIR; op++)
        if (plan.op[op].enabled && measure_io_op(&rc, (CostOp)op, link, NULL, NULL, e) != 0) goto out;
    for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++)
        if (plan.op[op].enabled && measure_io_op(&rc, (CostOp)op, NULL, ssd, NULL, e) != 0) goto out;
    if (plan.op[OP_NET].enabled && measure_io_op(&rc, OP_NET, NULL, NULL, net, e) != 0) goto out;
    if (beside_stop(&beside, e) != 0) goto out;
    r->beside_layers = beside.layers; /* read after the join */
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
    if (beside.running) {
        KvErr e2;
        beside_stop(&beside, &e2); /* e holds the first error */
    }
    if (run_open) {
        KvErr e2;
        store_end_run(st, meta.id, 0, &e2);
    }
    probe_ssd_close(ssd);
    probe_net_close(net);
    probe_link_close(link);
    probe_close(&dev);
    if (hw == &own_hw) hw_catalog_free(&own_hw);
    r->wall_s = (double)(timing_now_ns() - t_start) * 1e-9;
    return rcode;
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
