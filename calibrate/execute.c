/* execute.c — kvcal execute: a kvsim schedule replayed on real kernels and real reads; see
 * execute.h for what is replayed, how, and the invariants.
 *
 * Threads: one compute thread per pipeline stage (stage 0: the caller; stage st > 0 its own thread,
 * pinned to CPU st when there are several stages), one IO thread per channel (the shared ssd, each
 * stage's own h2d, as the engine's channel table has them). They share one mutex and one condition
 * variable: every landing, lane, layer hand-off or iteration start and end is broadcast (replays
 * are small: tens to thousands of events). Times: CLOCK_MONOTONIC, in ns since the replay's start.
 * cuda (execute.h "Backend cuda"): the same threads and waits, but they wait only until what a layer
 * needs has been enqueued (u_issued, ly_issued), then make the stage's stream wait for its events;
 * device times come from events after the replay (cuda_collect), against ev0, recorded and waited
 * for right before t0 is read. The host learns a landing or a layer's end only where it must decide
 * on it (resolve_landing, the iteration's end).
 * Library code: never prints (calibrate/cli/execute_cmd.c does).
 */
#include "calibrate/execute.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibrate/probe.h"
#include "calibrate/remote_store.h"
#include "sim/engine/batch.h"

#define EX_ALIGN 4096
#define EX_IO_BYTES (1 << 20)

typedef struct ExFile {
    char name[64];
    int tier;
    int64_t bytes;
    int64_t rbase; /* remote tier: where the file starts in the remote store */
    char path[4200];
    int fd;
    unsigned char *host; /* dram tier: the state in host memory (cuda: pinned, in pin) */
    ProbePinned pin;
} ExFile;

typedef struct ExHopRef {
    int u, h;          /* replayed unit index, hop */
    int64_t pred_start;
} ExHopRef;

typedef struct ExWeights {
    void *qkv, *o, *up, *down, *kv;
} ExWeights;

#define EX_WEIGHT_CAP_BYTES ((int64_t)1 << 30) /* all layers' weights beyond this: sets reused */

/* IO queues: the ssd (shared, as the engine's CH_SSD), then each stage's own h2d (CH_H2D is one
 * per stage: each stage's GPUs have their own link), then the NICs to the remote store (CH_NIC_IN:
 * one, or one per stage with the header's nic_per_stage), each its own connection to it */
#define EX_Q_SSD 0
#define EX_Q_H2D(st) (1 + (st))
#define EX_Q_NIC(k) (1 + SCH_MAX_STAGES + (k))
#define EX_NQ (1 + 2 * SCH_MAX_STAGES)

typedef struct Ex Ex;

/* one pipeline stage's compute: its thread's activation buffers (a stage's lanes run while the
 * stage before it computes: separate buffers) and its "device" buffer, where its h2d copies land */
typedef struct ExStage {
    Ex *x;
    int st;
    int cpu; /* the CPU it is pinned to, -1: not pinned */
    ProbeDev *dev;     /* its kernels: cpu: the shared x->dev; cuda: stage 0 x->dev, stage st > 0 its own (own) */
    ProbeDev own;
    int own_open;
    ProbeStream *cs;   /* cuda: dev's compute stream */
    ProbeStream *copy; /* cuda: the stage's h2d stream (its own), where its units' copies land */
    void *x_, *xn, *qkv, *q_, *k, *v, *ao, *h, *gu, *a, *kvp, *qi8, *scale;
    int *ctx_off;
    unsigned char *dev_buf; /* cpu: malloc'd; cuda: device memory of dev (released with it) */
} ExStage;

struct Ex {
    const Schedule *s;
    ExecResult *r;
    ProbeDev dev;
    int dev_open;
    ExFile *files;
    int n_files;
    int o_direct;
    /* per replayed unit */
    int *u_file;
    unsigned char **staging;
    int64_t *u_start, *u_len; /* aligned read range */
    int64_t (*hop_end)[SCH_MAX_HOPS], (*hop_start)[SCH_MAX_HOPS];
    int64_t *u_done;          /* landing time (-1: not yet) */
    int64_t *it_done;         /* per replayed iteration */
    int64_t *it_start;
    /* per replayed iteration × layer */
    int64_t *ly_end;          /* the end of its restoration work */
    int64_t *ly_done;         /* the end of the layer (-1: not yet) */
    /* per replayed lane (lane_off[k] + j: lane j of replayed iteration k) */
    int *lane_off;
    int64_t *lane_start, *lane_end;
    int *unit_of_id, *iter_of_id; /* schedule id − 1 → replayed index (-1: not replayed) */
    int64_t dev_bytes;
    ExHopRef *q[EX_NQ];
    int nq[EX_NQ];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t t0;
    int failed, pin, io_cpu;
    int spin; /* stage threads wait spinning (ExecWait), not asleep on cv */
    double io_rate;        /* ExecOptions.io_rate: bytes per second an ssd hop takes at most (0: unlimited) */
    double net_rate;       /* ExecOptions.net_rate: the same for a nic hop (0: the loopback's own speed) */
    int64_t net_lat_ns;    /* ExecOptions.net_latency_ns: and at least this long */
    RemoteStore rstore;    /* the remote tier's server processes (rstore.n: connections, 0 when no remote unit) */
    int n_nics;            /* NIC queues (and connections): 1, or the stages with nic_per_stage */
    struct ExRace *race;   /* ExecOptions.race: the race's state */
    KvErr err;
    ExStage stage[SCH_MAX_STAGES];
    void *nw, *nb; /* norm weights (read only, shared) */
    /* the projection weights of each layer (a real model's layers have their own: a small model's
     * one set would sit in the CPU's caches); layer l uses set l % n_wsets; read only, shared */
    ExWeights *ws;
    int n_wsets;
    int64_t max_rows, max_kv, max_batch, max_work_tok;
    int64_t kv_rows; /* rows of one layer's K (and V) region: the most one iteration's items, work and lanes
                      * hold at once (each its own rows; every layer its own region, as a model's cache) */
    /* cuda only */
    int cuda;
    ProbePinned stage_pin; /* every ssd unit's staging buffer: one pinned allocation, each 4 KiB aligned */
    ProbeEvent *ev0;       /* the replay's start: recorded and waited for right before t0 */
    ProbeEvent **u_ev;     /* per replayed unit: its landing (recorded on its stage's copy stream after the copy) */
    ProbeEvent **ly_ev;    /* per replayed iteration × layer, 3 each: start (after its waits), restoration work end, end */
    ProbeEvent **lane_ev;  /* per lane, 2 each: start, end */
    int *u_issued;         /* the unit's landing copy enqueued and u_ev recorded (this replay) */
    int *ly_issued;        /* the layer enqueued and its end event recorded (this replay) */
    int64_t *ly_start;     /* per iteration × layer: its start on the device */
};

#define RACE_MAX_DEPTH 8

/* one raced request (execute.h "Race"): its token-wise file, kvsim's rules, its pointers and its
 * progress (under x->mu) */
typedef struct ExRaceReq {
    const SchReq *q;
    int file;         /* its token-wise state file (x->files; -1: no history) */
    int64_t bpt;      /* bytes per token, every layer */
    int64_t N, io_chunk, depth, comp_chunk; /* comp_chunk 0: as much as the budgets allow */
    int low;          /* its restoration compute is low-priority (after every new input: Cake) */
    /* under mu */
    int admitted, tw; /* tw: restoring (its two pointers have not met, or a claimed chunk is in flight) */
    int64_t io_issued, comp, comp_inflight, landed, n_flight;
    int64_t restored, first, new_done, out_done; /* replay times (-1: not yet), tokens */
} ExRaceReq;

/* a race's state: the requests in admission order, the budgets, the IO side's claims of every
 * request in claim order (the one channel serves them first come, first served) */
typedef struct ExRace {
    ExRaceReq *rq;
    int n;
    int64_t token_budget, rbudget; /* per iteration: every item's tokens, the restoration compute's */
    int oldest;       /* the IO side serves the oldest request's claim first (header io_order "oldest"), else in claim order */
    unsigned char *buf; /* the IO side's read buffer: the largest chunk, 4 KiB aligned at both ends */
    /* under mu */
    int *qreq;
    int64_t *qlo, *qhi; /* claimed, not yet begun by the IO thread (FIFO of qcap) */
    int qhead, qn, qcap, done;
    ExecChunk *log;
    int n_log, cap_log;
} ExRace;

#define EX_EV_START 0
#define EX_EV_WORK 1
#define EX_EV_END 2
/* event timestamps have about 0.5 us resolution: the device-side dependency check allows this much */
#define EX_CUDA_TOL_NS 1000
#define EX_CUDA_DEVICE 0 /* the device every stage runs on (CUDA_VISIBLE_DEVICES picks another) */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ex_now(const Ex *x) { return mono_ns() - x->t0; }

/* sim time → replay time (ns since the start) */
static int64_t rel(const Ex *x, int64_t sim_ns) { return sim_ns - x->r->origin_ns; }

/* the first failure wins (caller holds mu) */
static void fail_locked(Ex *x, const KvErr *e)
{
    if (!x->failed) x->err = *e;
    x->failed = 1;
    pthread_cond_broadcast(&x->cv);
}

static void fail(Ex *x, KvErr *e)
{
    pthread_mutex_lock(&x->mu);
    fail_locked(x, e);
    pthread_mutex_unlock(&x->mu);
}

/* has replayed unit k landed, as far as the host knows (caller holds mu)? cuda: *resolve = k when its
 * copy is enqueued but its landing not yet known on the host (resolve_landing learns it) */
static int unit_landed(const Ex *x, int k, int *resolve)
{
    if (k < 0 || x->u_done[k] >= 0) return 1;
    if (x->cuda && x->u_issued[k]) *resolve = k;
    return 0;
}

/* cuda: wait on the host for replayed unit k's landing event (mu released meanwhile) and publish
 * its time; caller holds mu */
static void resolve_landing(Ex *x, int k)
{
    ProbeEvent *ev = x->u_ev[k];
    pthread_mutex_unlock(&x->mu);
    KvErr e;
    int64_t t = -1;
    int rc = probe_cuda_event_sync(ev, &e) == 0 ? probe_cuda_elapsed_ns(x->ev0, ev, &t, &e) : -1;
    pthread_mutex_lock(&x->mu);
    if (rc != 0) {
        kv_err_prefix(&e, "execute: the landing of unit %llu: ", (unsigned long long)x->s->units[x->r->unit_idx[k]].id);
        fail_locked(x, &e);
        return;
    }
    if (x->u_done[k] < 0) {
        x->u_done[k] = t;
        pthread_cond_broadcast(&x->cv);
    }
}

/* is the cause satisfied (caller holds mu)? *at: the instant to wait for (-1: none); *resolve: a
 * unit whose landing the host must learn first (cuda; -1: none) */
static int cause_ok(const Ex *x, const SchCause *c, int64_t *at, int *resolve)
{
    *at = -1;
    *resolve = -1;
    if (c->kind == SCH_CAUSE_UNIT) return unit_landed(x, x->unit_of_id[c->id - 1], resolve);
    if (c->kind == SCH_CAUSE_ITER) {
        int k = x->iter_of_id[c->id - 1];
        return k < 0 || x->it_done[k] >= 0;
    }
    int64_t t = rel(x, c->at_ns);
    if (t <= ex_now(x)) return 1;
    *at = t;
    return 0;
}

/* wait (holding mu) until cond() or failure; sleeps until `at` when the only thing missing is time */
static void wait_until_time(Ex *x, int64_t at)
{
    int64_t d = at - ex_now(x);
    if (d <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_unlock(&x->mu);
    if (d > 200000) {
        struct timespec sl = {(time_t)((d - 100000) / 1000000000), (long)((d - 100000) % 1000000000)};
        nanosleep(&sl, NULL);
    }
    while (ex_now(x) < at) {
    }
    pthread_mutex_lock(&x->mu);
}

/* an emulated link (ExecOptions.io_rate for ssd hops; net_rate and net_latency_ns for nic hops): a
 * hop of `bytes` begun at t (replay time) ends no earlier than t + lat + bytes / rate (sleeping the
 * rest; nothing when the transfer took longer) */
static void io_throttle(const Ex *x, int64_t t, int64_t bytes, double rate, int64_t lat)
{
    if (rate <= 0 && lat <= 0) return;
    int64_t end = t + lat + (rate > 0 ? (int64_t)llround((double)bytes / rate * 1e9) : 0), d = end - ex_now(x);
    if (d <= 0) return;
    struct timespec sl = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
    while (nanosleep(&sl, &sl) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ IO */

/* read [off, off + left) of f (4 KiB aligned for O_DIRECT) into dst, at most 1 MiB per call */
static int pread_all(const ExFile *f, unsigned char *dst, int64_t off, int64_t left, KvErr *e)
{
    while (left > 0) {
        size_t n = (size_t)(left < EX_IO_BYTES ? left : EX_IO_BYTES);
        ssize_t got = pread(f->fd, dst, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return kv_err(e, "%s: read of %zu bytes at %lld failed: %s", f->path, n, (long long)off, strerror(errno));
        }
        if (got == 0) return kv_err(e, "%s: short read at %lld", f->path, (long long)off);
        dst += got;
        off += got;
        left -= got;
    }
    return 0;
}

static int read_range(Ex *x, int u, KvErr *e) { return pread_all(&x->files[x->u_file[u]], x->staging[u], x->u_start[u], x->u_len[u], e); }

/* a remote unit's bytes fetched from the remote store over NIC connection `conn` into its staging
 * buffer (at the unit's offset within its aligned range, as a read leaves them) */
static int fetch_unit(Ex *x, int conn, int u, const SchUnit *su, KvErr *e)
{
    const ExFile *f = &x->files[x->u_file[u]];
    return rstore_fetch(&x->rstore, conn, f->rbase + su->offset, su->bytes, x->staging[u] + (su->offset - x->u_start[u]), e);
}

typedef struct ChanArg {
    Ex *x;
    int q; /* EX_Q_SSD, EX_Q_H2D(stage) or EX_Q_NIC(k) */
} ChanArg;

/* pin the calling thread to `cpu` (-1: leave it); 0 when pinned or left, -1 when refused */
static int pin_to(int cpu)
{
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? 0 : -1;
}

static void *chan_main(void *p)
{
    ChanArg *ca = p;
    Ex *x = ca->x;
    (void)pin_to(x->io_cpu); /* refused (a restricted container): the thread runs unpinned */
    const Schedule *s = x->s;
    KvErr e;
    if (x->cuda && probe_cuda_bind(&x->dev, &e) != 0) {
        fail(x, &e);
        return NULL;
    }
    for (int i = 0; i < x->nq[ca->q]; i++) {
        ExHopRef *hr = &x->q[ca->q][i];
        const SchUnit *su = &s->units[x->r->unit_idx[hr->u]];
        pthread_mutex_lock(&x->mu);
        for (;;) {
            if (x->failed) break;
            int64_t at = -1;
            int res = -1;
            int ready = hr->h > 0 ? x->hop_end[hr->u][hr->h - 1] >= 0 : cause_ok(x, &su->after, &at, &res);
            if (ready) break;
            if (res >= 0) resolve_landing(x, res);
            else if (at >= 0) wait_until_time(x, at);
            else pthread_cond_wait(&x->cv, &x->mu);
        }
        int stop = x->failed;
        pthread_mutex_unlock(&x->mu);
        if (stop) break;
        int64_t t = ex_now(x);
        int rc = 0, last = hr->h == su->nhops - 1, device_copy = 0;
        if (ca->q == EX_Q_SSD) {
            rc = read_range(x, hr->u, &e);
            if (rc == 0) io_throttle(x, t, su->hop[hr->h].bytes, x->io_rate, 0);
        } else if (ca->q >= EX_Q_NIC(0)) {
            rc = fetch_unit(x, ca->q - EX_Q_NIC(0), hr->u, su, &e);
            if (rc == 0) io_throttle(x, t, su->hop[hr->h].bytes, x->net_rate, x->net_lat_ns);
        } else { /* h2d: from the staging copy (read from SSD, fetched from the remote store) or the DRAM tier's host copy, into the unit's stage */
            const unsigned char *src = su->tier != SCH_TIER_DRAM ? x->staging[hr->u] + (su->offset - x->u_start[hr->u])
                                                                : x->files[x->u_file[hr->u]].host + su->offset;
            size_t n = (size_t)su->hop[hr->h].bytes <= (size_t)x->dev_bytes ? (size_t)su->hop[hr->h].bytes : (size_t)x->dev_bytes;
            ExStage *ug = &x->stage[su->stage];
            if (x->cuda) { /* enqueued on the stage's copy stream, from pinned memory; the landing is an event */
                device_copy = 1;
                rc = probe_cuda_copy(ug->copy, ug->dev_buf, src, n, 1, &e);
                if (rc == 0) rc = probe_cuda_record(ug->copy, x->u_ev[hr->u], &e);
                /* a later hop of the unit starts once this one ended: the host must see that end */
                if (rc == 0 && !last) rc = probe_cuda_event_sync(x->u_ev[hr->u], &e);
                if (rc != 0) kv_err_prefix(&e, "execute: the h2d copy of unit %llu: ", (unsigned long long)su->id);
            } else {
                memcpy(ug->dev_buf, src, n);
            }
        }
        if (rc != 0) {
            fail(x, &e);
            break;
        }
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        x->hop_start[hr->u][hr->h] = t; /* cuda h2d: when the host enqueued it (the device times are the events') */
        x->hop_end[hr->u][hr->h] = t1;
        if (last && device_copy) x->u_issued[hr->u] = 1; /* landed: the event's time (resolve_landing, cuda_collect) */
        else if (last) x->u_done[hr->u] = t1;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
    }
    return NULL;
}

/* ------------------------------------------------------------------ compute */

#define DEV(call)                                                                                                      \
    do {                                                                                                               \
        if ((call) != 0) return -1;                                                                                    \
    } while (0)

/* layer l on stage g's buffers, over `items` (the iteration's batch, or one lane's history as a
 * prefill): first its restoration work `ly` (NULL: none; projections, dequantizations: what turns
 * loaded state into KV, at the head of the layer as iteration.c costs it; *work_end: when that is
 * done; cuda: work_ev, when not NULL, recorded on the stage's stream there instead), then the
 * layer over the batch. cuda: everything enqueued on the stage's stream, nothing waited for */
static int layer_run(Ex *x, ExStage *g, const SchItem *items, int nitems, const SchLayer *ly, int l, int64_t *work_end,
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
static int64_t layer_rows(const SchIter *it, int l)
{
    int64_t M = 0;
    for (int i = 0; i < it->nitems; i++) M += it->items[i].tokens;
    for (int w = 0; w < it->layers[l].nwork; w++)
        if (it->layers[l].work[w].op == SCH_WORK_RECOMPUTE) M += it->layers[l].work[w].tokens;
    return M;
}

static int compute_alloc(Ex *x, KvErr *e)
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
            int64_t rows = layer_rows(it, l);
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
        ALLOC(g->k, x->kv_rows * s->layers * hk * dh); /* per layer its own region (layer_run) */
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

/* ------------------------------------------------------------------ preparation */

static int file_of(Ex *x, const SchUnit *u, KvErr *e)
{
    for (int i = 0; i < x->n_files; i++)
        if (!strcmp(x->files[i].name, u->file) && x->files[i].tier == u->tier) return i;
    ExFile *nf = realloc(x->files, (size_t)(x->n_files + 1) * sizeof *nf);
    if (!nf) return kv_err(e, "execute: out of memory");
    x->files = nf;
    ExFile *f = &x->files[x->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", u->file);
    f->tier = u->tier;
    f->fd = -1;
    return x->n_files++;
}

static int write_file(ExFile *f, const char *dir, KvErr *e)
{
    snprintf(f->path, sizeof f->path, "%s/kvcal-exec.%d.%s", dir, (int)getpid(), f->name);
    int fd = open(f->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) return kv_err(e, "%s: cannot create (%s)", f->path, strerror(errno));
    unsigned char *buf = malloc(EX_IO_BYTES);
    if (!buf) {
        close(fd);
        return kv_err(e, "execute: out of memory");
    }
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < EX_IO_BYTES; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        buf[i] = (unsigned char)st;
    }
    int64_t left = f->bytes;
    while (left > 0) {
        size_t n = (size_t)(left < EX_IO_BYTES ? left : EX_IO_BYTES);
        if (write(fd, buf, n) != (ssize_t)n) {
            free(buf);
            close(fd);
            return kv_err(e, "%s: write failed (%s)", f->path, strerror(errno));
        }
        left -= (int64_t)n;
    }
    free(buf);
    if (fdatasync(fd) != 0 || close(fd) != 0) return kv_err(e, "%s: sync failed (%s)", f->path, strerror(errno));
    return 0;
}

static int open_for_read(ExFile *f, int *o_direct, KvErr *e)
{
    f->fd = open(f->path, O_RDONLY | O_DIRECT);
    if (f->fd >= 0) return 0;
    *o_direct = 0;
    f->fd = open(f->path, O_RDONLY);
    if (f->fd < 0) return kv_err(e, "%s: cannot open (%s)", f->path, strerror(errno));
    return 0;
}

static int cmp_hop(const void *a, const void *b)
{
    const ExHopRef *p = a, *q = b;
    if (p->pred_start != q->pred_start) return p->pred_start < q->pred_start ? -1 : 1;
    return p->u - q->u;
}

/* cuda: the events (created once, recorded again in every replay) and the issue flags */
static int cuda_prepare(Ex *x, KvErr *e)
{
    const ExecResult *r = x->r;
    size_t nu = (size_t)(r->n_units > 0 ? r->n_units : 1), nkl = (size_t)(r->n_iters > 0 ? r->n_iters : 1) * (size_t)x->s->layers,
           nl = (size_t)(r->n_lanes > 0 ? r->n_lanes : 1);
    x->u_ev = calloc(nu, sizeof *x->u_ev);
    x->ly_ev = calloc(3 * nkl, sizeof *x->ly_ev);
    x->lane_ev = calloc(2 * nl, sizeof *x->lane_ev);
    x->u_issued = calloc(nu, sizeof *x->u_issued);
    x->ly_issued = calloc(nkl, sizeof *x->ly_issued);
    x->ly_start = calloc(nkl, sizeof *x->ly_start);
    if (!x->u_ev || !x->ly_ev || !x->lane_ev || !x->u_issued || !x->ly_issued || !x->ly_start) return kv_err(e, "execute: out of memory");
    if (!(x->ev0 = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (int k = 0; k < r->n_units; k++)
        if (!(x->u_ev[k] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (size_t k = 0; k < 3 * (size_t)r->n_iters * (size_t)x->s->layers; k++)
        if (!(x->ly_ev[k] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (int j = 0; j < 2 * r->n_lanes; j++)
        if (!(x->lane_ev[j] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    return 0;
}

/* cuda, at the end (also after a failure half-way): every stream drained and closed before its
 * events and the pinned memory its copies read go; the stages' own devices closed (stage 0's,
 * x->dev, holds the shared weights: closed last, by exec_run). CUDA errors here are not reported
 * (the result, or the first error, is already decided). */
static void cuda_teardown(Ex *x)
{
    KvErr e2;
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        ExStage *g = &x->stage[st];
        probe_cuda_stream_close(g->copy); /* waits for its copies */
        g->copy = NULL;
        if (g->cs) (void)probe_cuda_sync(g->cs, &e2);
    }
    probe_cuda_event_free(x->ev0);
    x->ev0 = NULL;
    if (x->u_ev)
        for (int k = 0; k < x->r->n_units; k++) probe_cuda_event_free(x->u_ev[k]);
    if (x->ly_ev)
        for (size_t k = 0; k < 3 * (size_t)x->r->n_iters * (size_t)x->s->layers; k++) probe_cuda_event_free(x->ly_ev[k]);
    if (x->lane_ev)
        for (int j = 0; j < 2 * x->r->n_lanes; j++) probe_cuda_event_free(x->lane_ev[j]);
    free(x->u_ev);
    free(x->ly_ev);
    free(x->lane_ev);
    free(x->u_issued);
    free(x->ly_issued);
    free(x->ly_start);
    x->u_ev = x->ly_ev = x->lane_ev = NULL;
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        ExStage *g = &x->stage[st];
        if (g->own_open) probe_close(&g->own); /* its buffers, its stream, its cuBLAS handle */
        g->own_open = 0;
        g->cs = NULL;
    }
}

static int race_setup(Ex *x, KvErr *e);

static int prepare(Ex *x, const ExecOptions *o, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    /* the origin: the first release of a request with history */
    r->origin_ns = -1;
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].hist > 0 && (r->origin_ns < 0 || s->reqs[i].release_ns < r->origin_ns)) r->origin_ns = s->reqs[i].release_ns;
    if (r->origin_ns < 0) r->origin_ns = 0;
    r->unit_idx = calloc((size_t)s->n_units + 1, sizeof(int));
    r->iter_idx = calloc((size_t)s->n_iters + 1, sizeof(int));
    r->req_idx = calloc((size_t)s->n_reqs + 1, sizeof(int));
    x->unit_of_id = calloc((size_t)s->n_units + 1, sizeof(int));
    x->iter_of_id = calloc((size_t)s->n_iters + 1, sizeof(int));
    if (!r->unit_idx || !r->iter_idx || !r->req_idx || !x->unit_of_id || !x->iter_of_id) return kv_err(e, "execute: out of memory");
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].release_ns >= r->origin_ns) r->req_idx[r->n_reqs++] = i;
    for (int i = 0; i < s->n_units; i++) {
        x->unit_of_id[i] = -1;
        if (s->units[i].issue_ns < r->origin_ns) continue;
        x->unit_of_id[i] = r->n_units;
        r->unit_idx[r->n_units++] = i;
    }
    for (int i = 0; i < s->n_iters; i++) {
        x->iter_of_id[i] = -1;
        if (s->iters[i].start_ns < r->origin_ns) continue;
        x->iter_of_id[i] = r->n_iters;
        r->iter_idx[r->n_iters++] = i;
    }
    int nu = r->n_units > 0 ? r->n_units : 1, ni = r->n_iters > 0 ? r->n_iters : 1;
    x->u_file = calloc((size_t)nu, sizeof *x->u_file);
    x->staging = calloc((size_t)nu, sizeof *x->staging);
    x->u_start = calloc((size_t)nu, sizeof *x->u_start);
    x->u_len = calloc((size_t)nu, sizeof *x->u_len);
    x->hop_end = calloc((size_t)nu, sizeof *x->hop_end);
    x->hop_start = calloc((size_t)nu, sizeof *x->hop_start);
    x->u_done = calloc((size_t)nu, sizeof *x->u_done);
    x->it_done = calloc((size_t)ni, sizeof *x->it_done);
    x->it_start = calloc((size_t)ni, sizeof *x->it_start);
    x->ly_end = calloc((size_t)ni * (size_t)s->layers, sizeof *x->ly_end);
    x->ly_done = calloc((size_t)ni * (size_t)s->layers, sizeof *x->ly_done);
    r->layer_stage = calloc((size_t)ni * (size_t)s->layers, sizeof *r->layer_stage);
    r->layer_cpu = calloc((size_t)ni * (size_t)s->layers, sizeof *r->layer_cpu);
    x->lane_off = calloc((size_t)ni + 1, sizeof *x->lane_off);
    if (!x->u_file || !x->staging || !x->u_start || !x->u_len || !x->hop_end || !x->hop_start || !x->u_done || !x->it_done ||
        !x->it_start || !x->ly_end || !x->ly_done || !r->layer_stage || !r->layer_cpu || !x->lane_off)
        return kv_err(e, "execute: out of memory");
    for (int q = 0; q < EX_NQ; q++) {
        x->q[q] = calloc((size_t)nu * SCH_MAX_HOPS, sizeof **x->q);
        if (!x->q[q]) return kv_err(e, "execute: out of memory");
    }
    for (int k = 0; k < r->n_iters; k++) x->lane_off[k + 1] = x->lane_off[k] + s->iters[r->iter_idx[k]].nlanes;
    r->n_lanes = x->lane_off[r->n_iters];
    int nl = r->n_lanes > 0 ? r->n_lanes : 1;
    x->lane_start = calloc((size_t)nl, sizeof *x->lane_start);
    x->lane_end = calloc((size_t)nl, sizeof *x->lane_end);
    r->lane_ns = calloc((size_t)nl, sizeof *r->lane_ns);
    r->lane_end_ns = calloc((size_t)nl, sizeof *r->lane_end_ns);
    if (!x->lane_start || !x->lane_end || !r->lane_ns || !r->lane_end_ns) return kv_err(e, "execute: out of memory");
    for (int k = 0; k < r->n_units; k++) {
        const SchUnit *u = &s->units[r->unit_idx[k]];
        int fi = file_of(x, u, e);
        if (fi < 0) return -1;
        x->u_file[k] = fi;
        int64_t end = u->offset + u->bytes;
        if (end > x->files[fi].bytes) x->files[fi].bytes = end;
        x->u_start[k] = u->offset / EX_ALIGN * EX_ALIGN;
        x->u_len[k] = (end + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN - x->u_start[k];
        if (u->tier != SCH_TIER_DRAM && !x->cuda) { /* read or fetched here, then copied */
            if (posix_memalign((void **)&x->staging[k], EX_ALIGN, (size_t)x->u_len[k]) != 0) return kv_err(e, "execute: out of memory");
            memset(x->staging[k], 0, (size_t)x->u_len[k]);
        }
        static const char *const tier_name[] = {"dram", "ssd", "remote"}, *const ch_name[] = {"ssd", "h2d", "nic_in"};
        static const int first_ch[] = {SCH_CH_H2D, SCH_CH_SSD, SCH_CH_NIC}; /* a tier's own link comes first */
        if (u->nhops < 1 || u->hop[0].ch != first_ch[u->tier])
            return kv_err(e, "execute: unit %llu: a %s-tier unit whose first hop is %s: expected %s", (unsigned long long)u->id,
                          tier_name[u->tier], u->nhops < 1 ? "missing" : ch_name[u->hop[0].ch], ch_name[first_ch[u->tier]]);
        for (int h = 0; h < u->nhops; h++) {
            int c = u->hop[h].ch;
            if ((c == SCH_CH_SSD && u->tier != SCH_TIER_SSD) || (c == SCH_CH_NIC && u->tier != SCH_TIER_REMOTE))
                return kv_err(e, "execute: unit %llu: an %s hop on a %s-tier unit", (unsigned long long)u->id, ch_name[c], tier_name[u->tier]);
            /* h2d: the unit's stage's own link; nic: the one NIC, or the unit's stage's (nic_per_stage) */
            int q = c == SCH_CH_SSD ? EX_Q_SSD : c == SCH_CH_NIC ? EX_Q_NIC(s->nic_per_stage ? u->stage : 0) : EX_Q_H2D(u->stage);
            x->q[q][x->nq[q]++] = (ExHopRef){k, h, u->hop[h].start_ns};
            if (u->hop[h].bytes > x->dev_bytes) x->dev_bytes = u->hop[h].bytes;
        }
    }
    if (o->race && race_setup(x, e) != 0) return -1; /* the files known, not yet written */
    if (x->cuda) { /* the staging buffers: pinned (the h2d copies are DMA from them), one allocation cut at 4 KiB multiples */
        size_t total = 0;
        for (int k = 0; k < r->n_units; k++)
            if (s->units[r->unit_idx[k]].tier != SCH_TIER_DRAM) total += (size_t)x->u_len[k];
        if (total > 0) {
            if (probe_cuda_pinned_alloc(&x->stage_pin, total, EX_ALIGN, e) != 0) return kv_err_prefix(e, "execute: staging buffers: ");
            memset(x->stage_pin.p, 0, total);
            size_t off = 0;
            for (int k = 0; k < r->n_units; k++)
                if (s->units[r->unit_idx[k]].tier != SCH_TIER_DRAM) {
                    x->staging[k] = (unsigned char *)x->stage_pin.p + off; /* u_len[k] is a multiple of EX_ALIGN */
                    off += (size_t)x->u_len[k];
                }
        }
    }
    for (int q = 0; q < EX_NQ; q++) qsort(x->q[q], (size_t)x->nq[q], sizeof *x->q[q], cmp_hop);
    const char *dir = o->scratch_dir && *o->scratch_dir ? o->scratch_dir : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    x->o_direct = 1;
    int64_t remote_bytes = 0;
    for (int i = 0; i < x->n_files; i++) {
        ExFile *f = &x->files[i];
        f->bytes = (f->bytes + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN;
        if (f->tier == SCH_TIER_REMOTE) { /* in the remote store's memory, one file after another */
            f->rbase = remote_bytes;
            remote_bytes += f->bytes;
            continue;
        }
        if (f->tier == SCH_TIER_DRAM) {
            if (x->cuda) { /* cuda: the DRAM tier is pinned host memory (the engine's h2d link rate is pinned's) */
                if (probe_cuda_pinned_alloc(&f->pin, (size_t)f->bytes, EX_ALIGN, e) != 0) return kv_err_prefix(e, "execute: DRAM tier %s: ", f->name);
                f->host = f->pin.p;
            } else {
                f->host = malloc((size_t)f->bytes);
            }
            if (!f->host) return kv_err(e, "execute: out of memory");
            memset(f->host, 7, (size_t)f->bytes);
            continue;
        }
        if (write_file(f, dir, e) != 0 || open_for_read(f, &x->o_direct, e) != 0) return -1;
    }
    /* the remote store: its server processes started before any thread of the replay (and before the
     * kernels' buffers: a fork copies the page tables) */
    if (remote_bytes > 0) {
        x->n_nics = s->nic_per_stage ? s->stages : 1;
        if (rstore_open(&x->rstore, remote_bytes, x->n_nics, e) != 0) return kv_err_prefix(e, "execute: the remote tier: ");
    }
    if (compute_alloc(x, e) != 0) return -1;
    return x->cuda ? cuda_prepare(x, e) : 0;
}

static void drop_caches(Ex *x)
{
    if (x->o_direct) return;
    for (int i = 0; i < x->n_files; i++)
        if (x->files[i].fd >= 0) posix_fadvise(x->files[i].fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* ------------------------------------------------------------------ one replay */

typedef struct RepOut {
    int64_t *iter_start, *iter_end, *unit_end;
} RepOut;

/* have the units of replayed iteration `it`'s layer l that belong to request `req` (0: all) landed
 * (caller holds mu)? by: the time they all landed by (-1 when one has not) */
static int layer_units_landed(const Ex *x, const SchIter *it, int l, uint64_t req, int64_t *by)
{
    const SchLayer *ly = &it->layers[l];
    *by = 0;
    for (int j = 0; j < ly->nwaits; j++) {
        int u = x->unit_of_id[ly->waits[j] - 1];
        if (u < 0 || (req && x->s->units[x->r->unit_idx[u]].req != req)) continue;
        if (x->u_done[u] < 0) {
            *by = -1;
            return 0;
        }
        if (x->u_done[u] > *by) *by = x->u_done[u];
    }
    return 1;
}

/* block (holding mu) until pred(x, arg) or failure */
#define WAIT_FOR(x, cond)                                                                                              \
    do {                                                                                                               \
        while (!(x)->failed && !(cond)) pthread_cond_wait(&(x)->cv, &(x)->mu);                                         \
    } while (0)

/* a stage thread's wait (caller holds mu): asleep on cv, or with x->spin (ExecWait) spinning —
 * mu released and the CPU yielded between two checks — so that the stage's CPU stays busy, as a
 * GPU stays ready for its next kernel; on this kind of machine a core left idle for one stage's
 * layers comes back slower (a two-stage replay on two CPUs ran its decode steps ~20 % slower than
 * the same schedule on one CPU, where the stages never idle a core: docs/validation.md) */
static void stage_wait_once(Ex *x)
{
    if (x->spin) {
        pthread_mutex_unlock(&x->mu);
        sched_yield();
        pthread_mutex_lock(&x->mu);
    } else {
        pthread_cond_wait(&x->cv, &x->mu);
    }
}
#define STAGE_WAIT_FOR(x, cond)                                   \
    do {                                                          \
        while (!(x)->failed && !(cond)) stage_wait_once(x);      \
    } while (0)

/* stage g's part of replayed iteration k, the iteration already started (it_start[k] set): its
 * lanes, then its layers (walk.c: a stage's lanes from the later of the iteration's start and their
 * boundary activation's arrival, in item order; layer l after layer l − 1 of the same iteration, on
 * whichever stage, after the units it waits for landed and after the stage's own lanes) */
/* replayed iteration k's record, once its overhead has been spun from its start (both backends) */
static const SchIter *iter_after_overhead(Ex *x, int k)
{
    const SchIter *it = &x->s->iters[x->r->iter_idx[k]];
    while (ex_now(x) < x->it_start[k] + it->overhead_ns) {
    }
    return it;
}

static int stage_iter(ExStage *g, int k, KvErr *e)
{
    Ex *x = g->x;
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    const SchIter *it = iter_after_overhead(x, k);
    int st = g->st, lo = s->stage_first[st], hi = s->stage_first[st + 1], L = s->layers;
    for (int j = 0; j < it->nlanes; j++) {
        const SchLane *ln = &it->lanes[j];
        if (ln->stage != st) continue;
        int64_t by = 0;
        if (st > 0) { /* from its boundary activation: the units of the stage's first layer that are the lane's request's */
            pthread_mutex_lock(&x->mu);
            STAGE_WAIT_FOR(x, layer_units_landed(x, it, lo, ln->req, &by));
            pthread_mutex_unlock(&x->mu);
            if (x->failed) return 0;
        }
        int64_t t = ex_now(x), we;
        SchItem one = {ln->req, SCH_ITEM_PREFILL, 0, ln->tokens, ln->ctx};
        if (layer_run(x, g, &one, 1, NULL, ln->layer, &we, NULL, e) != 0) return -1;
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        x->lane_start[x->lane_off[k] + j] = t;
        x->lane_end[x->lane_off[k] + j] = t1;
        if (by > t) r->deps_ok = 0;
        pthread_mutex_unlock(&x->mu);
    }
    for (int l = lo; l < hi; l++) {
        const SchLayer *ly = &it->layers[l];
        int64_t by = 0;
        if (ly->nwaits || (l == lo && l > 0)) {
            pthread_mutex_lock(&x->mu);
            STAGE_WAIT_FOR(x, (l == 0 || x->ly_done[(size_t)k * L + l - 1] >= 0) && layer_units_landed(x, it, l, 0, &by));
            pthread_mutex_unlock(&x->mu);
            if (x->failed) return 0;
        }
        int64_t ls = ex_now(x), we;
        if (l == lo && l > 0) { /* the activations from the stage before: a copy between the stages' buffers */
            const ExStage *pg = &x->stage[st - 1];
            memcpy(g->x_, pg->x_, (size_t)layer_rows(it, l - 1) * (size_t)s->hidden * x->dev.elem_bytes);
        }
        if (layer_run(x, g, it->items, it->nitems, ly, l, &we, NULL, e) != 0) return -1;
        int64_t le = ex_now(x);
        size_t kl = (size_t)k * L + l;
        x->ly_end[kl] = we;
        r->layer_stage[kl] = st;
        r->layer_cpu[kl] = sched_getcpu();
        pthread_mutex_lock(&x->mu);
        /* dependency check: the units this layer waits for landed and the layer before ended before it started */
        if (by > ls || (l > 0 && !(x->ly_done[kl - 1] >= 0 && x->ly_done[kl - 1] <= ls))) r->deps_ok = 0;
        x->ly_done[kl] = le;
        if (l == L - 1) x->it_done[k] = le;
        if (l == hi - 1) pthread_cond_broadcast(&x->cv); /* the next stage's layer, or the next iteration */
        pthread_mutex_unlock(&x->mu);
    }
    return 0;
}

/* cuda: have the copies of the units of iteration `it`'s layer l that belong to request `req`
 * (0: all) been enqueued (or landed, as the host knows) (caller holds mu)? */
static int layer_units_issued(const Ex *x, const SchIter *it, int l, uint64_t req)
{
    const SchLayer *ly = &it->layers[l];
    for (int j = 0; j < ly->nwaits; j++) {
        int u = x->unit_of_id[ly->waits[j] - 1];
        if (u < 0 || (req && x->s->units[x->r->unit_idx[u]].req != req)) continue;
        if (x->u_done[u] < 0 && !x->u_issued[u]) return 0;
    }
    return 1;
}

/* cuda: a dependency found broken: deps_ok = 0, the first one said in deps_why */
static void deps_broken(ExecResult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deps_broken(ExecResult *r, const char *fmt, ...)
{
    if (r->deps_ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->deps_why, sizeof r->deps_why, fmt, ap);
        va_end(ap);
    }
    r->deps_ok = 0;
}

/* cuda: stage g's stream waits, on the device, for the landing events of those units (caller holds
 * mu, after layer_units_issued; a landing the host already saw needs no wait: what follows is
 * enqueued after it). A unit neither enqueued nor landed here would be a broken dependency: deps_ok = 0. */
static int stream_wait_units(Ex *x, ExStage *g, const SchIter *it, int l, uint64_t req, KvErr *e)
{
    const SchLayer *ly = &it->layers[l];
    for (int j = 0; j < ly->nwaits; j++) {
        int u = x->unit_of_id[ly->waits[j] - 1];
        if (u < 0 || (req && x->s->units[x->r->unit_idx[u]].req != req)) continue;
        if (x->u_issued[u]) {
            if (probe_cuda_wait(g->cs, x->u_ev[u], e) != 0) return -1;
        } else if (x->u_done[u] < 0) {
            deps_broken(x->r, "layer %d: unit %llu neither enqueued nor landed when the stream wait was issued", l,
                        (unsigned long long)x->s->units[x->r->unit_idx[u]].id);
        }
    }
    return 0;
}

/* cuda: stage_iter with the GPU waiting instead of the host. The stage's thread waits (condvar) only
 * until what a lane or layer needs has been enqueued — its units' copies, the layer before it on the
 * stage before (the hand-off) — then makes its stream wait for their events and enqueues the work
 * between a start and an end event (a layer also an event after its restoration work). The layer
 * that ends the iteration is waited for on the host: the next iteration starts after it, and
 * "after" causes may name it. */
static int stage_iter_cuda(ExStage *g, int k, KvErr *e)
{
    Ex *x = g->x;
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    const SchIter *it = iter_after_overhead(x, k);
    int st = g->st, lo = s->stage_first[st], hi = s->stage_first[st + 1], L = s->layers;
    for (int j = 0; j < it->nlanes; j++) {
        const SchLane *ln = &it->lanes[j];
        if (ln->stage != st) continue;
        size_t lj = (size_t)x->lane_off[k] + (size_t)j;
        int rc = 0;
        if (st > 0) { /* from its boundary activation: the units of the stage's first layer that are the lane's request's */
            pthread_mutex_lock(&x->mu);
            WAIT_FOR(x, layer_units_issued(x, it, lo, ln->req));
            int stop = x->failed;
            if (!stop) rc = stream_wait_units(x, g, it, lo, ln->req, e);
            pthread_mutex_unlock(&x->mu);
            if (stop) return 0;
            if (rc != 0) return -1;
        }
        SchItem one = {ln->req, SCH_ITEM_PREFILL, 0, ln->tokens, ln->ctx};
        int64_t we;
        if (probe_cuda_record(g->cs, x->lane_ev[2 * lj], e) != 0 || layer_run(x, g, &one, 1, NULL, ln->layer, &we, NULL, e) != 0 ||
            probe_cuda_record(g->cs, x->lane_ev[2 * lj + 1], e) != 0)
            return -1;
    }
    for (int l = lo; l < hi; l++) {
        const SchLayer *ly = &it->layers[l];
        size_t kl = (size_t)k * L + l;
        int handoff = l == lo && l > 0, rc = 0;
        /* the layer before on this stage: enqueued before on the same stream (stream order) */
        pthread_mutex_lock(&x->mu);
        WAIT_FOR(x, (!handoff || x->ly_issued[kl - 1]) && layer_units_issued(x, it, l, 0));
        int stop = x->failed;
        if (!stop && handoff) rc = probe_cuda_wait(g->cs, x->ly_ev[3 * (kl - 1) + EX_EV_END], e);
        if (!stop && rc == 0) rc = stream_wait_units(x, g, it, l, 0, e);
        pthread_mutex_unlock(&x->mu);
        if (stop) return 0;
        if (rc != 0) return -1;
        ProbeEvent **ev = &x->ly_ev[3 * kl];
        if (probe_cuda_record(g->cs, ev[EX_EV_START], e) != 0) return -1;
        if (handoff) { /* the activations from the stage before: a device copy, after its layer's end event */
            const ExStage *pg = &x->stage[st - 1];
            if (probe_cuda_copy(g->cs, g->x_, pg->x_, (size_t)layer_rows(it, l - 1) * (size_t)s->hidden * g->dev->elem_bytes, 0, e) != 0)
                return -1;
        }
        int64_t we;
        if (layer_run(x, g, it->items, it->nitems, ly, l, &we, ev[EX_EV_WORK], e) != 0 || probe_cuda_record(g->cs, ev[EX_EV_END], e) != 0)
            return -1;
        r->layer_stage[kl] = st;
        r->layer_cpu[kl] = sched_getcpu();
        int64_t end = -1;
        if (l == L - 1 && (probe_cuda_event_sync(ev[EX_EV_END], e) != 0 || probe_cuda_elapsed_ns(x->ev0, ev[EX_EV_END], &end, e) != 0))
            return kv_err_prefix(e, "execute: the end of iteration %llu: ", (unsigned long long)it->id);
        pthread_mutex_lock(&x->mu);
        x->ly_issued[kl] = 1;
        if (l == L - 1) x->ly_done[kl] = x->it_done[k] = end;
        if (l == hi - 1) pthread_cond_broadcast(&x->cv); /* the next stage's layer, or the next iteration */
        pthread_mutex_unlock(&x->mu);
    }
    return 0;
}

/* stage g's compute over the replay: stage 0 starts each iteration once the previous one ended and
 * its "after" cause and after_units happened; every stage then runs its part of it */
static void stage_run(ExStage *g)
{
    Ex *x = g->x;
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    for (int k = 0; k < r->n_iters; k++) {
        const SchIter *it = &s->iters[r->iter_idx[k]];
        pthread_mutex_lock(&x->mu);
        if (g->st == 0) {
            for (;;) {
                if (x->failed) break;
                int64_t at = -1;
                int res = -1; /* cuda: a unit landing the host must learn first */
                int ok = (k == 0 || x->it_done[k - 1] >= 0) && cause_ok(x, &it->after, &at, &res);
                for (int j = 0; ok && j < it->nafter; j++)
                    if (!unit_landed(x, x->unit_of_id[it->after_units[j] - 1], &res)) ok = 0;
                if (ok) break;
                if (res >= 0) resolve_landing(x, res);
                else if (at >= 0) wait_until_time(x, at);
                else stage_wait_once(x);
            }
            if (!x->failed) {
                x->it_start[k] = ex_now(x);
                pthread_cond_broadcast(&x->cv);
            }
        } else {
            STAGE_WAIT_FOR(x, x->it_start[k] >= 0);
        }
        int stop = x->failed;
        pthread_mutex_unlock(&x->mu);
        if (stop) return;
        KvErr le;
        if ((x->cuda ? stage_iter_cuda(g, k, &le) : stage_iter(g, k, &le)) != 0) {
            if (x->cuda) kv_err_prefix(&le, "execute: stage %d, iteration %llu: ", g->st, (unsigned long long)it->id);
            fail(x, &le);
            return;
        }
    }
}

static void *stage_main(void *p)
{
    ExStage *g = p;
    if (pin_to(g->cpu) != 0) g->cpu = -1; /* refused: unpinned, and the note and cpu_ok say so (read after the join) */
    KvErr e;
    if (g->x->cuda && probe_cuda_bind(g->dev, &e) != 0) {
        fail(g->x, &e);
        return NULL;
    }
    stage_run(g);
    return NULL;
}

/* cuda, after a replay's threads joined: wait for every stream, then every event's time in the
 * replay's frame (ns from ev0) into the arrays the cpu replay fills with host times, and the
 * device-side dependency check: each layer started (its start event, recorded after its stream
 * waits) no earlier than the landing of every unit it waits for and the end of the layer before it,
 * each lane of a stage st > 0 no earlier than its boundary activation's landing — within
 * EX_CUDA_TOL_NS (the events' resolution); otherwise deps_ok = 0 */
static int cuda_collect(Ex *x, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    int L = s->layers;
    for (int st = 0; st < s->stages; st++)
        if (probe_cuda_sync(x->stage[st].copy, e) != 0 || probe_cuda_sync(x->stage[st].cs, e) != 0)
            return kv_err_prefix(e, "execute: the end of the replay (stage %d): ", st);
    for (int k = 0; k < r->n_units; k++)
        if (x->u_issued[k] && probe_cuda_elapsed_ns(x->ev0, x->u_ev[k], &x->u_done[k], e) != 0)
            return kv_err_prefix(e, "execute: the landing of unit %llu: ", (unsigned long long)s->units[r->unit_idx[k]].id);
    for (int k = 0; k < r->n_iters; k++) {
        for (int l = 0; l < L; l++) {
            size_t kl = (size_t)k * L + l;
            ProbeEvent **ev = &x->ly_ev[3 * kl];
            if (!x->ly_issued[kl]) return kv_err(e, "execute: iteration %d layer %d never enqueued (internal)", k, l);
            if (probe_cuda_elapsed_ns(x->ev0, ev[EX_EV_START], &x->ly_start[kl], e) != 0 ||
                probe_cuda_elapsed_ns(x->ev0, ev[EX_EV_WORK], &x->ly_end[kl], e) != 0 ||
                probe_cuda_elapsed_ns(x->ev0, ev[EX_EV_END], &x->ly_done[kl], e) != 0)
                return kv_err_prefix(e, "execute: the times of iteration %d layer %d: ", k, l);
        }
        x->it_done[k] = x->ly_done[(size_t)k * L + L - 1];
    }
    for (int j = 0; j < r->n_lanes; j++)
        if (probe_cuda_elapsed_ns(x->ev0, x->lane_ev[2 * j], &x->lane_start[j], e) != 0 ||
            probe_cuda_elapsed_ns(x->ev0, x->lane_ev[2 * j + 1], &x->lane_end[j], e) != 0)
            return kv_err_prefix(e, "execute: the times of lane %d: ", j);
    for (int k = 0; k < r->n_iters; k++) {
        const SchIter *it = &s->iters[r->iter_idx[k]];
        for (int l = 0; l < L; l++) {
            size_t kl = (size_t)k * L + l;
            int64_t by = 0;
            (void)layer_units_landed(x, it, l, 0, &by); /* every unit landed by now (replay checks) */
            if (by > x->ly_start[kl] + EX_CUDA_TOL_NS)
                deps_broken(r, "iteration %llu layer %d started %lld ns before the last unit it waits for landed", (unsigned long long)it->id,
                            l, (long long)(by - x->ly_start[kl]));
            if (l > 0 && x->ly_done[kl - 1] > x->ly_start[kl] + EX_CUDA_TOL_NS)
                deps_broken(r, "iteration %llu layer %d started %lld ns before layer %d ended", (unsigned long long)it->id, l,
                            (long long)(x->ly_done[kl - 1] - x->ly_start[kl]), l - 1);
        }
        for (int j = 0; j < it->nlanes; j++) {
            const SchLane *ln = &it->lanes[j];
            int64_t by = 0;
            if (ln->stage == 0) continue; /* stage 0 recomputes from the tokens */
            (void)layer_units_landed(x, it, s->stage_first[ln->stage], ln->req, &by);
            if (by > x->lane_start[x->lane_off[k] + j] + EX_CUDA_TOL_NS)
                deps_broken(r, "iteration %llu: the lane of layer %d started %lld ns before its boundary activation landed",
                            (unsigned long long)it->id, ln->layer, (long long)(by - x->lane_start[x->lane_off[k] + j]));
        }
    }
    return 0;
}

/* cuda: before a replay's clock starts: every stream idle, then ev0 recorded on stage 0's stream
 * and waited for, so that t0 (read right after) and ev0 coincide up to the wait's return */
static int cuda_start(Ex *x, KvErr *e)
{
    for (int st = 0; st < x->s->stages; st++)
        if (probe_cuda_sync(x->stage[st].copy, e) != 0 || probe_cuda_sync(x->stage[st].cs, e) != 0) return -1;
    if (probe_cuda_record(x->stage[0].cs, x->ev0, e) != 0 || probe_cuda_event_sync(x->ev0, e) != 0) return -1;
    return 0;
}

static int replay(Ex *x, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    for (int k = 0; k < r->n_units; k++) {
        x->u_done[k] = -1;
        for (int h = 0; h < SCH_MAX_HOPS; h++) x->hop_end[k][h] = x->hop_start[k][h] = -1;
    }
    for (int k = 0; k < r->n_iters; k++) x->it_done[k] = x->it_start[k] = -1;
    for (size_t k = 0; k < (size_t)r->n_iters * (size_t)s->layers; k++) x->ly_done[k] = -1;
    for (int j = 0; j < r->n_lanes; j++) x->lane_start[j] = x->lane_end[j] = -1;
    if (x->cuda) {
        memset(x->u_issued, 0, (size_t)(r->n_units > 0 ? r->n_units : 1) * sizeof *x->u_issued);
        memset(x->ly_issued, 0, (size_t)(r->n_iters > 0 ? r->n_iters : 1) * (size_t)s->layers * sizeof *x->ly_issued);
    }
    x->failed = 0;
    drop_caches(x);
    pthread_t th[EX_NQ], sth[SCH_MAX_STAGES];
    ChanArg ca[EX_NQ];
    int started[EX_NQ] = {0}, sstarted[SCH_MAX_STAGES] = {0};
    if (x->cuda && cuda_start(x, e) != 0) return kv_err_prefix(e, "execute: the start of the replay: ");
    x->t0 = mono_ns();
    for (int q = 0; q < EX_NQ; q++) {
        if (!x->nq[q]) continue;
        ca[q] = (ChanArg){x, q};
        if (pthread_create(&th[q], NULL, chan_main, &ca[q]) != 0) {
            KvErr e2;
            kv_err(&e2, "execute: cannot start an IO thread");
            fail(x, &e2);
            break;
        }
        started[q] = 1;
    }
    /* one stage: the calling thread computes (not pinned, as before stages were replayed); several:
     * each stage its own thread, pinned to its own CPU (exec_run chose them) */
    int first_thread = s->stages > 1 ? 0 : 1;
    for (int st = first_thread; st < s->stages && !x->failed; st++) {
        if (pthread_create(&sth[st], NULL, stage_main, &x->stage[st]) != 0) {
            KvErr e2;
            kv_err(&e2, "execute: cannot start the compute thread of stage %d", st);
            fail(x, &e2);
            break;
        }
        sstarted[st] = 1;
    }
    if (!x->failed && s->stages == 1) stage_run(&x->stage[0]);
    for (int st = 0; st < s->stages; st++)
        if (sstarted[st]) pthread_join(sth[st], NULL);
    for (int q = 0; q < EX_NQ; q++)
        if (started[q]) pthread_join(th[q], NULL);
    if (x->failed) {
        *e = x->err;
        return -1;
    }
    if (x->cuda && cuda_collect(x, e) != 0) return -1;
    for (int k = 0; k < r->n_units; k++)
        if (x->u_done[k] < 0) return kv_err(e, "execute: unit %llu never landed (internal)", (unsigned long long)s->units[r->unit_idx[k]].id);
    return 0;
}

/* ------------------------------------------------------------------ the two pointers raced (--race) */


/* request k's IO side claims chunks backward while fewer than depth are in flight and tokens above
 * its compute side's are left (restore.c restore_tw_issue), each queued behind every claim before it
 * (caller holds mu) */
static void race_claim(ExRace *rc, int k)
{
    ExRaceReq *a = &rc->rq[k];
    while (a->tw && a->n_flight < a->depth && rc->qn < rc->qcap) {
        int64_t lower = a->comp + a->comp_inflight;
        if (a->io_issued <= lower) return;
        int64_t c = a->io_issued - lower;
        if (c > a->io_chunk) c = a->io_chunk;
        int slot = (rc->qhead + rc->qn) % rc->qcap;
        rc->qreq[slot] = k;
        rc->qlo[slot] = a->io_issued - c;
        rc->qhi[slot] = a->io_issued;
        rc->qn++;
        a->io_issued -= c;
        a->n_flight++;
    }
}

/* request k restored at t once every token is computed or landed and nothing is in flight
 * (restore.c restore_tw_check_done; caller holds mu) */
static void race_check_done(ExRace *rc, int k, int64_t t)
{
    ExRaceReq *a = &rc->rq[k];
    if (!a->tw || a->n_flight || a->comp_inflight || a->comp + a->landed < a->N) return;
    a->tw = 0;
    a->restored = t;
}

static void race_log(ExRace *rc, uint64_t req, int io, int64_t lo, int64_t hi, int64_t t, int64_t t1)
{
    if (rc->n_log < rc->cap_log) rc->log[rc->n_log++] = (ExecChunk){io, lo, hi, t, t1, req};
}

/* the chunk [lo, hi) of request a's token-wise file into the race's buffer (4 KiB aligned reads),
 * fetched from the remote store, or from the DRAM tier's host copy; then copied to the stage's
 * "device" buffer */
static int race_load(Ex *x, ExRace *rc, const ExRaceReq *a, int64_t lo, int64_t hi, int64_t t, KvErr *e)
{
    ExFile *f = &x->files[a->file];
    int64_t off = lo * a->bpt, bytes = (hi - lo) * a->bpt;
    const unsigned char *src;
    if (f->tier == SCH_TIER_SSD) {
        int64_t al = off / EX_ALIGN * EX_ALIGN;
        if (pread_all(f, rc->buf, al, (off + bytes + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN - al, e) != 0) return -1;
        io_throttle(x, t, bytes, x->io_rate, 0);
        src = rc->buf + (off - al);
    } else if (f->tier == SCH_TIER_REMOTE) { /* over the one NIC */
        if (rstore_fetch(&x->rstore, 0, f->rbase + off, bytes, rc->buf, e) != 0) return -1;
        io_throttle(x, t, bytes, x->net_rate, x->net_lat_ns);
        src = rc->buf;
    } else {
        src = f->host + off;
    }
    size_t n = (size_t)(bytes < x->dev_bytes ? bytes : x->dev_bytes);
    memcpy(x->stage[0].dev_buf, src, n);
    return 0;
}

/* the IO side: the claims in claim order, one at a time (the engine's ssd or nic channel, then h2d) */
static void *race_io_main(void *p)
{
    Ex *x = p;
    ExRace *rc = x->race;
    (void)pin_to(x->io_cpu);
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->failed && rc->qn == 0 && !rc->done) pthread_cond_wait(&x->cv, &x->mu);
        if (x->failed || rc->qn == 0) break;
        int pick = 0; /* the position in the queue of the claim served next */
        if (rc->oldest) /* the policy's batch-aware order: the smallest request id first, ties in claim order */
            for (int i = 1; i < rc->qn; i++)
                if (rc->rq[rc->qreq[(rc->qhead + i) % rc->qcap]].q->id < rc->rq[rc->qreq[(rc->qhead + pick) % rc->qcap]].q->id) pick = i;
        int at = (rc->qhead + pick) % rc->qcap, k = rc->qreq[at];
        int64_t lo = rc->qlo[at], hi = rc->qhi[at];
        for (int i = pick; i > 0; i--) { /* the claims before it move up one place */
            int to = (rc->qhead + i) % rc->qcap, from = (rc->qhead + i - 1) % rc->qcap;
            rc->qreq[to] = rc->qreq[from];
            rc->qlo[to] = rc->qlo[from];
            rc->qhi[to] = rc->qhi[from];
        }
        rc->qhead = (rc->qhead + 1) % rc->qcap;
        rc->qn--;
        ExRaceReq *a = &rc->rq[k];
        pthread_mutex_unlock(&x->mu);
        KvErr e;
        int64_t t = ex_now(x);
        int bad = race_load(x, rc, a, lo, hi, t, &e);
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        if (bad) {
            fail_locked(x, &e);
            break;
        }
        a->landed += hi - lo;
        a->n_flight--;
        race_log(rc, a->q->id, 1, lo, hi, t, t1);
        race_claim(rc, k);
        race_check_done(rc, k, t1);
        pthread_cond_broadcast(&x->cv);
    }
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* the next iteration's batch by the engine's batching rule (sim/engine/batch.c batch_form) over the
 * admitted requests in admission order (caller holds mu). Returns the items (comp_inflight set for
 * the compute chunks), their request indices in who[]; view and bi: room for n rows and 2 n items */
static int race_form(ExRace *rc, BatchReq *view, int *row_of, BatchItem *bi, SchItem *items, int *who)
{
    int m = 0;
    for (int k = 0; k < rc->n; k++) {
        const ExRaceReq *a = &rc->rq[k];
        if (!a->admitted) continue;
        row_of[m] = k;
        if (a->first >= 0) /* its first token is out: it decodes until its last */
            view[m++] = (BatchReq){.decode = a->out_done < a->q->nout, .low_prio = a->low, .decode_ctx = a->N + a->q->nnew + a->out_done};
        else
            view[m++] = (BatchReq){.low_prio = a->low,
                                   .tw = a->tw,
                                   .tw_busy = a->comp_inflight != 0,
                                   .tw_avail = a->io_issued - a->comp,
                                   .tw_comp = a->comp,
                                   .tw_chunk = a->comp_chunk,
                                   .new_left = a->q->nnew - a->new_done,
                                   .new_ctx = a->N + a->new_done};
    }
    int nb = batch_form(view, m, rc->token_budget, rc->rbudget, bi);
    static const int kind[] = {[IT_DECODE] = SCH_ITEM_DECODE, [IT_RECOMP] = SCH_ITEM_RECOMPUTE, [IT_NEW] = SCH_ITEM_PREFILL};
    int n = 0;
    for (int j = 0; j < nb; j++) {
        int k = row_of[bi[j].req];
        ExRaceReq *a = &rc->rq[k];
        if (bi[j].kind == IT_RECOMP) a->comp_inflight = bi[j].tokens;
        items[n] = (SchItem){a->q->id, kind[bi[j].kind], 0, bi[j].tokens, bi[j].ctx};
        who[n++] = k;
    }
    return n;
}

/* wait on cv until replay time `at` at the latest (caller holds mu) */
static void cv_wait_until(Ex *x, int64_t at)
{
    int64_t abs_ns = x->t0 + at;
    struct timespec ts = {(time_t)(abs_ns / 1000000000), (long)(abs_ns % 1000000000)};
    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
}

/* one race on the calling thread (stage 0 computes, every request's chunks batched into iterations
 * as the engine forms them) with the IO thread beside it, until every request has its first token */
static int race_once(Ex *x, KvErr *e)
{
    ExRace *rc = x->race;
    for (int k = 0; k < rc->n; k++) {
        ExRaceReq *a = &rc->rq[k];
        a->admitted = 0;
        a->tw = a->N > 0;
        a->io_issued = a->N;
        a->comp = a->comp_inflight = a->landed = a->n_flight = a->new_done = a->out_done = 0;
        a->restored = a->first = -1;
    }
    rc->qhead = rc->qn = rc->done = 0;
    rc->n_log = 0;
    x->failed = 0;
    drop_caches(x);
    x->t0 = mono_ns();
    pthread_t th;
    if (pthread_create(&th, NULL, race_io_main, x) != 0) return kv_err(e, "execute: cannot start the IO thread");
    SchItem *items = calloc((size_t)rc->n * 2, sizeof *items);
    int *who = calloc((size_t)rc->n * 2, sizeof *who);
    BatchReq *view = calloc((size_t)rc->n, sizeof *view);
    int *row_of = calloc((size_t)rc->n, sizeof *row_of);
    BatchItem *bi = calloc((size_t)rc->n * 2, sizeof *bi);
    pthread_mutex_lock(&x->mu);
    if (!items || !who || !view || !row_of || !bi) {
        KvErr oe;
        kv_err(&oe, "execute: out of memory");
        fail_locked(x, &oe);
    }
    int firsts = 0;
    while (!x->failed && firsts < rc->n) {
        /* admissions due: the IO side claims first (restore.c), then the iteration forms */
        int64_t now = ex_now(x), next_admit = -1;
        for (int k = 0; k < rc->n; k++) {
            ExRaceReq *a = &rc->rq[k];
            if (a->admitted) continue;
            int64_t at = rel(x, a->q->admit_ns);
            if (at <= now) {
                a->admitted = 1;
                if (a->tw) race_claim(rc, k);
                else a->restored = now;
                pthread_cond_broadcast(&x->cv);
            } else if (next_admit < 0 || at < next_admit) {
                next_admit = at;
            }
        }
        int n = race_form(rc, view, row_of, bi, items, who);
        if (n == 0) { /* nothing runs until a landing or the next admission */
            if (next_admit >= 0) cv_wait_until(x, next_admit);
            else pthread_cond_wait(&x->cv, &x->mu);
            continue;
        }
        pthread_mutex_unlock(&x->mu);
        int64_t t = ex_now(x), we;
        KvErr le;
        int bad = 0;
        for (int l = 0; l < x->s->layers && !bad; l++) bad = layer_run(x, &x->stage[0], items, n, NULL, l, &we, NULL, &le) != 0;
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        if (bad) {
            fail_locked(x, &le);
            break;
        }
        for (int i = 0; i < n; i++) {
            int k = who[i];
            ExRaceReq *a = &rc->rq[k];
            if (items[i].kind == SCH_ITEM_RECOMPUTE) {
                a->comp += items[i].tokens;
                a->comp_inflight = 0;
                race_log(rc, a->q->id, 0, items[i].ctx, items[i].ctx + items[i].tokens, t, t1);
                race_claim(rc, k);
                race_check_done(rc, k, t1);
            } else if (items[i].kind == SCH_ITEM_PREFILL) {
                a->new_done += items[i].tokens;
                if (a->new_done == a->q->nnew) {
                    a->first = t1;
                    a->out_done = 1;
                    firsts++;
                }
            } else {
                a->out_done++;
            }
        }
        pthread_cond_broadcast(&x->cv);
    }
    rc->done = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(th, NULL);
    free(items);
    free(who);
    free(view);
    free(row_of);
    free(bi);
    if (x->failed) {
        *e = x->err;
        return -1;
    }
    return 0;
}

static int race_setup(Ex *x, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    if (x->cuda) return kv_err(e, "execute --race: the cpu backend only");
    if (s->stages != 1) return kv_err(e, "execute --race: a schedule of %d pipeline stages: one expected", s->stages);
    int n_tw = 0;
    for (int i = 0; i < r->n_reqs; i++) {
        const SchReq *q = &s->reqs[r->req_idx[i]];
        if (q->hist == 0) continue;
        if (strcmp(q->restore, "tokenwise"))
            return kv_err(e, "execute --race: request %llu restores '%s': the race is for token-wise two pointers (cake, cacheflow token-wise)",
                          (unsigned long long)q->id, q->restore);
        if (q->io_depth < 1 || q->io_chunk < 1 || q->comp_budget < 1)
            return kv_err(e, "execute --race: request %llu has no io_depth, io_chunk or comp_budget: a schedule from an older kvsim (emit it again)",
                          (unsigned long long)q->id);
        if (q->io_depth > RACE_MAX_DEPTH) return kv_err(e, "execute --race: io_depth %lld: at most %d", (long long)q->io_depth, RACE_MAX_DEPTH);
        n_tw++;
    }
    if (n_tw == 0) return kv_err(e, "execute --race: %d replayed requests, none restoring: nothing to race", r->n_reqs);
    if (r->n_reqs > 1) { /* a batch: the engine's batching rules need the header's budget and each request's priority */
        if (s->token_budget < 1)
            return kv_err(e, "execute --race: a batch of %d requests and no header token_budget: a schedule from an older kvsim (emit it again)",
                          r->n_reqs);
        if (strcmp(s->io_order, "fifo") && strcmp(s->io_order, "oldest"))
            return kv_err(e, "execute --race: a batch of %d requests of %s, whose loads are served in %s order: the race replays "
                          "\"fifo\" and \"oldest\" (one request alone is raced in any)", r->n_reqs, s->policy,
                          s->io_order[0] ? s->io_order : "an unrecorded (a schedule from an older kvsim)");
        for (int i = 0; i < r->n_reqs; i++)
            if (s->reqs[r->req_idx[i]].hist > 0 && !s->reqs[r->req_idx[i]].has_low_prio)
                return kv_err(e, "execute --race: request %llu has no low_prio: a schedule from an older kvsim (emit it again)",
                              (unsigned long long)s->reqs[r->req_idx[i]].id);
    }
    ExRace *rc = calloc(1, sizeof *rc);
    if (!rc) return kv_err(e, "execute: out of memory");
    x->race = rc;
    rc->n = r->n_reqs;
    rc->rq = calloc((size_t)rc->n, sizeof *rc->rq);
    if (!rc->rq) return kv_err(e, "execute: out of memory");
    int64_t max_chunk = 0, cap = 4;
    const SchReq *tw_q = NULL; /* a token-wise request (n_tw >= 1 of them) */
    for (int i = 0; i < rc->n; i++) {
        ExRaceReq *a = &rc->rq[i];
        const SchReq *q = &s->reqs[r->req_idx[i]];
        a->q = q;
        a->file = -1;
        a->N = q->hist;
        if (q->hist == 0) continue;
        for (int j = 0; j < r->n_units && a->file < 0; j++) {
            const SchUnit *u = &s->units[r->unit_idx[j]];
            if (u->req == q->id && u->tokwise && u->tok_hi > u->tok_lo) {
                a->file = x->u_file[j];
                a->bpt = u->bytes / (u->tok_hi - u->tok_lo);
            }
        }
        if (a->file < 0 || a->bpt < 1)
            return kv_err(e, "execute --race: request %llu loads no token-wise unit: nothing tells its file and bytes per token", (unsigned long long)q->id);
        a->io_chunk = q->io_chunk;
        a->depth = q->io_depth;
        a->comp_chunk = q->comp_chunk;
        a->low = q->low_prio;
        ExFile *f = &x->files[a->file];
        if (f->bytes < a->N * a->bpt) f->bytes = a->N * a->bpt; /* the race may load any chunk of the history */
        if (a->io_chunk * a->bpt > max_chunk) max_chunk = a->io_chunk * a->bpt;
        cap += a->N + a->N / a->io_chunk + 4;
        tw_q = q;
    }
    /* the budgets: the restoration's (every token-wise request has the same comp_budget), the
     * header's token budget (one request alone from an older kvsim: enough for its chunk and its new input) */
    rc->rbudget = tw_q->comp_budget;
    rc->token_budget = s->token_budget > 0 ? s->token_budget : kv_max_i64(tw_q->comp_budget, tw_q->nnew);
    rc->qcap = rc->n * RACE_MAX_DEPTH;
    rc->oldest = !strcmp(s->io_order, "oldest");
    rc->qreq = calloc((size_t)rc->qcap, sizeof *rc->qreq);
    rc->qlo = calloc((size_t)rc->qcap, sizeof *rc->qlo);
    rc->qhi = calloc((size_t)rc->qcap, sizeof *rc->qhi);
    size_t buf_bytes = (size_t)((max_chunk + 2 * EX_ALIGN) / EX_ALIGN * EX_ALIGN);
    if (!rc->qreq || !rc->qlo || !rc->qhi || posix_memalign((void **)&rc->buf, EX_ALIGN, buf_bytes) != 0) {
        rc->buf = NULL;
        return kv_err(e, "execute: out of memory");
    }
    memset(rc->buf, 0, buf_bytes);
    if (x->dev_bytes < max_chunk) x->dev_bytes = max_chunk;
    rc->cap_log = (int)cap;
    rc->log = calloc((size_t)rc->cap_log, sizeof *rc->log);
    if (!rc->log) return kv_err(e, "execute: out of memory");
    return 0;
}

static void race_free(Ex *x)
{
    if (!x->race) return;
    free(x->race->rq);
    free(x->race->qreq);
    free(x->race->qlo);
    free(x->race->qhi);
    free(x->race->buf);
    free(x->race->log);
    free(x->race);
    x->race = NULL;
}

static int race_run(Ex *x, const ExecOptions *o, int reps, KvErr *e)
{
    ExecResult *r = x->r;
    ExRace *rc = x->race;
    int n = rc->n;
    int64_t *tt = calloc((size_t)(reps * n), sizeof *tt), *rs = calloc((size_t)(reps * n), sizeof *rs),
            *fs = calloc((size_t)(reps * n), sizeof *fs), *mt = calloc((size_t)(reps * n), sizeof *mt);
    r->race_meets = calloc((size_t)(reps * n), sizeof *r->race_meets);
    r->reqs = calloc((size_t)n, sizeof *r->reqs);
    int rcode = -1;
    if (!tt || !rs || !fs || !mt || !r->race_meets || !r->reqs) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    if (race_once(x, e) != 0) goto out; /* warm-up */
    int64_t o0 = r->origin_ns;
    for (int p = 0; p < reps; p++) {
        if (race_once(x, e) != 0) goto out;
        for (int k = 0; k < n; k++) {
            const ExRaceReq *a = &rc->rq[k];
            const SchReq *q = a->q;
            int64_t restored = a->restored >= 0 ? a->restored : rel(x, q->admit_ns);
            tt[k * reps + p] = a->first + o0 - q->release_ns;
            fs[k * reps + p] = restored + o0;
            rs[k * reps + p] = restored + o0 > q->admit_ns ? restored + o0 - q->admit_ns : 0;
            r->race_meets[p * n + k] = mt[k * reps + p] = a->comp;
        }
    }
    for (int k = 0; k < n; k++) {
        ExecReq *m = &r->reqs[k];
        const SchReq *q = rc->rq[k].q;
        m->id = q->id;
        m->release_ns = q->release_ns;
        m->ttft_ns = (int64_t)llround(exec_summary_ns(tt + k * reps, reps, o->stat));
        m->restore_ns = (int64_t)llround(exec_summary_ns(rs + k * reps, reps, o->stat));
        m->restored_ns = (int64_t)llround(exec_summary_ns(fs + k * reps, reps, o->stat));
        m->first_ns = m->release_ns + m->ttft_ns;
        m->meet = exec_summary_ns(mt + k * reps, reps, EXEC_STAT_MEDIAN); /* the meet: the median (a count, not a time) */
    }
    r->race_meet = r->reqs[0].meet;
    for (int k = 0; k < n; k++)
        if (rc->rq[k].N > 0) {
            r->race_meet = r->reqs[k].meet; /* the first restoring request's */
            break;
        }
    r->race_n = n;
    r->chunks = malloc((size_t)(rc->n_log > 0 ? rc->n_log : 1) * sizeof *r->chunks);
    if (!r->chunks) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    memcpy(r->chunks, rc->log, (size_t)rc->n_log * sizeof *r->chunks);
    r->n_chunks = rc->n_log;
    r->race = 1;
    r->io_rate = x->io_rate;
    r->stage_ok = r->cpu_ok = 1; /* one stage, on the calling thread */
    rcode = 0;
out:
    free(tt);
    free(rs);
    free(fs);
    free(mt);
    return rcode;
}

/* ------------------------------------------------------------------ results */

static int cmp_i64(const void *a, const void *b)
{
    int64_t p = *(const int64_t *)a, q = *(const int64_t *)b;
    return p < q ? -1 : p > q;
}

static double median_i64(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? (double)v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + (double)v[n / 2]);
}

double exec_summary_ns(int64_t *v, int n, int stat)
{
    double m = median_i64(v, n); /* sorts v */
    return stat == EXEC_STAT_MIN ? (double)v[0] : m;
}

/* the measured times of request k of one replay (in the schedule's frame) */
static void req_times(const Ex *x, int k, ExecReq *out)
{
    const Schedule *s = x->s;
    const ExecResult *r = x->r;
    const SchReq *q = &s->reqs[r->req_idx[k]];
    int64_t o = r->origin_ns;
    out->id = q->id;
    out->release_ns = q->release_ns;
    int64_t admit = q->admit_ns, restored = admit, first = -1;
    for (int j = 0; j < r->n_units; j++)
        if (s->units[r->unit_idx[j]].req == q->id && x->u_done[j] + o > restored) restored = x->u_done[j] + o;
    for (int j = 0; j < r->n_iters; j++) {
        const SchIter *it = &s->iters[r->iter_idx[j]];
        int64_t end = x->it_done[j] + o;
        for (int i = 0; i < it->nitems; i++) {
            const SchItem *m = &it->items[i];
            if (m->req != q->id) continue;
            if (m->kind == SCH_ITEM_RECOMPUTE && end > restored) restored = end;
            if (m->kind == SCH_ITEM_PREFILL && m->ctx + m->tokens == q->hist + q->nnew && first < 0) first = end;
        }
        for (int l = 0; l < s->layers; l++) {
            size_t kl = (size_t)j * (size_t)s->layers + (size_t)l;
            for (int w = 0; w < it->layers[l].nwork; w++) {
                const SchWork *wk = &it->layers[l].work[w];
                /* projections / dequantizations: done at the head of the layer; recompute rows: with the layer (walk.c) */
                int64_t le = (wk->op == SCH_WORK_RECOMPUTE ? x->ly_done[kl] : x->ly_end[kl]) + o;
                if (wk->req == q->id && le > restored) restored = le;
            }
        }
        for (int g = 0; g < it->nlanes; g++) /* a stage-parallel restoration: its lanes (walk.c stage_lanes) */
            if (it->lanes[g].req == q->id && x->lane_end[x->lane_off[j] + g] + o > restored) restored = x->lane_end[x->lane_off[j] + g] + o;
    }
    if (first < 0) first = q->first_ns; /* not replayed */
    out->first_ns = first;
    out->ttft_ns = first - q->release_ns;
    int64_t t_rest = restored < first ? restored : first;
    out->restored_ns = t_rest;
    out->restore_ns = t_rest > admit ? t_rest - admit : 0;
}

static int exec_run_one(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    r->deps_ok = 1;
    int cuda = o->backend && !strcmp(o->backend, "cuda");
    if (o->backend && *o->backend && strcmp(o->backend, "cpu") && !cuda)
        return kv_err(e, "execute: backend %s: expected cpu or cuda", o->backend);
    Ex *x = calloc(1, sizeof *x);
    if (!x) return kv_err(e, "execute: out of memory");
    x->s = s;
    x->r = r;
    x->pin = o->pin;
    x->cuda = cuda;
    /* auto: the cpu stages of a several-stage replay spin; one stage (the calling thread, which also
     * waits for the IO threads' reads) and cuda (the host waits for events, the GPU computes) sleep */
    x->spin = o->wait == EXEC_WAIT_SPIN || (o->wait == EXEC_WAIT_AUTO && !cuda && s->stages > 1);
    x->io_rate = o->io_rate > 0 ? o->io_rate : 0;
    x->net_rate = o->net_rate > 0 ? o->net_rate : 0;
    x->net_lat_ns = o->net_latency_ns > 0 ? o->net_latency_ns : 0;
    /* pinning: several stages: stage st on CPU st (each stage's "GPU" its own core), the IO threads on
     * the last CPU when one is left free of stages, else not pinned (the scheduler runs them where a
     * stage waits; on a GPU the copies do not take the compute's cores either). One stage: its compute
     * on the calling thread, not pinned, the IO threads on the last CPU (as before stages were replayed) */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    x->io_cpu = -1;
    for (int st = 0; st < s->stages; st++) {
        x->stage[st] = (ExStage){.x = x, .st = st, .cpu = -1, .dev = &x->dev};
        if (x->pin && s->stages > 1) x->stage[st].cpu = (int)(st % ncpu);
    }
    /* cuda: the IO threads only read and enqueue copies; left to the scheduler (sharing one CPU, a
     * thread spinning in an event wait would delay the other's next copy) */
    if (x->pin && !cuda && ncpu > 1 && (s->stages == 1 || ncpu > s->stages)) x->io_cpu = (int)ncpu - 1;
    r->stages = s->stages;
    pthread_mutex_init(&x->mu, NULL);
    pthread_condattr_t ca_;
    pthread_condattr_init(&ca_);
    pthread_condattr_setclock(&ca_, CLOCK_MONOTONIC); /* cv_wait_until's deadlines are mono_ns times */
    pthread_cond_init(&x->cv, &ca_);
    pthread_condattr_destroy(&ca_);
    int reps = o->reps > 0 ? o->reps : 3, rc = -1;
    int64_t *tt = NULL, *rs = NULL, *fs = NULL, *is = NULL, *id = NULL, *ue = NULL, *lt = NULL, *le = NULL;
    if (cuda) { /* every stage its own ProbeDev (its stream, its cuBLAS handle) and copy stream, on one device */
        if (probe_cuda_open(&x->dev, EX_CUDA_DEVICE, KV_DT_FP16, e) != 0) {
            kv_err_prefix(e, "execute: backend cuda: ");
            goto out;
        }
        x->dev_open = 1;
        for (int st = 0; st < s->stages; st++) {
            ExStage *g = &x->stage[st];
            if (st > 0) {
                if (probe_cuda_open(&g->own, EX_CUDA_DEVICE, KV_DT_FP16, e) != 0) {
                    kv_err_prefix(e, "execute: backend cuda: stage %d: ", st);
                    goto out;
                }
                g->own_open = 1;
                g->dev = &g->own;
            }
            g->cs = probe_cuda_stream(g->dev);
            if (!g->cs || !(g->copy = probe_cuda_stream_open(g->dev, e))) {
                if (!g->cs) kv_err(e, "execute: backend cuda: stage %d: no compute stream (internal)", st);
                goto out;
            }
        }
    } else {
        if (probe_cpu_open(&x->dev, e) != 0) goto out;
        x->dev_open = 1;
    }
    if (prepare(x, o, e) != 0) goto out;
    if (x->race) { /* the two pointers at run time (execute.h "Race"): no schedule iterations or units */
        if (race_run(x, o, reps, e) != 0) goto out;
        goto summarised;
    }
    int nr = r->n_reqs ? r->n_reqs : 1, ni = r->n_iters ? r->n_iters : 1, nu = r->n_units ? r->n_units : 1;
    tt = calloc((size_t)(nr * reps), sizeof *tt);
    rs = calloc((size_t)(nr * reps), sizeof *rs);
    fs = calloc((size_t)(nr * reps), sizeof *fs);
    is = calloc((size_t)(ni * reps), sizeof *is);
    id = calloc((size_t)(ni * reps), sizeof *id);
    ue = calloc((size_t)(nu * reps), sizeof *ue);
    int nl = r->n_lanes ? r->n_lanes : 1;
    lt = calloc((size_t)(nl * reps), sizeof *lt);
    le = calloc((size_t)(nl * reps), sizeof *le);
    r->reqs = calloc((size_t)nr, sizeof *r->reqs);
    r->iter_ns = calloc((size_t)ni, sizeof *r->iter_ns);
    r->iter_start_ns = calloc((size_t)ni, sizeof *r->iter_start_ns);
    r->unit_end_ns = calloc((size_t)nu, sizeof *r->unit_end_ns);
    if (!tt || !rs || !fs || !is || !id || !ue || !lt || !le || !r->reqs || !r->iter_ns || !r->iter_start_ns || !r->unit_end_ns) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    /* one warm-up replay (page faults, OpenBLAS threads), then the timed ones */
    if (replay(x, e) != 0) goto out;
    r->deps_ok = 1;
    r->deps_why[0] = '\0';
    r->stage_ok = 1;
    r->cpu_ok = 1;
    for (int p = 0; p < reps; p++) {
        if (replay(x, e) != 0) goto out;
        /* each layer on its stage's thread (and, pinned, on that stage's CPU) */
        for (int k = 0; k < r->n_iters; k++)
            for (int l = 0; l < s->layers; l++) {
                size_t kl = (size_t)k * (size_t)s->layers + (size_t)l;
                int st = schedule_stage_of(s, l);
                if (r->layer_stage[kl] != st) r->stage_ok = 0;
                if (x->stage[st].cpu >= 0 && r->layer_cpu[kl] != x->stage[st].cpu) r->cpu_ok = 0;
            }
        for (int j = 0; j < r->n_lanes; j++) {
            lt[j * reps + p] = x->lane_end[j] - x->lane_start[j];
            le[j * reps + p] = x->lane_end[j] + r->origin_ns;
        }
        for (int k = 0; k < r->n_reqs; k++) {
            ExecReq q;
            req_times(x, k, &q);
            r->reqs[k] = q;
            tt[k * reps + p] = q.ttft_ns;
            rs[k * reps + p] = q.restore_ns;
            fs[k * reps + p] = q.restored_ns;
        }
        for (int k = 0; k < r->n_iters; k++) {
            is[k * reps + p] = x->it_start[k] + r->origin_ns;
            id[k * reps + p] = x->it_done[k] - x->it_start[k];
        }
        for (int k = 0; k < r->n_units; k++) ue[k * reps + p] = x->u_done[k] + r->origin_ns;
    }
    for (int k = 0; k < r->n_reqs; k++) {
        r->reqs[k].ttft_ns = (int64_t)llround(exec_summary_ns(tt + k * reps, reps, o->stat));
        r->reqs[k].restore_ns = (int64_t)llround(exec_summary_ns(rs + k * reps, reps, o->stat));
        r->reqs[k].restored_ns = (int64_t)llround(exec_summary_ns(fs + k * reps, reps, o->stat));
        r->reqs[k].first_ns = r->reqs[k].release_ns + r->reqs[k].ttft_ns;
    }
    for (int k = 0; k < r->n_iters; k++) {
        r->iter_start_ns[k] = exec_summary_ns(is + k * reps, reps, o->stat);
        r->iter_ns[k] = exec_summary_ns(id + k * reps, reps, o->stat);
    }
    for (int k = 0; k < r->n_units; k++) r->unit_end_ns[k] = exec_summary_ns(ue + k * reps, reps, o->stat);
    for (int j = 0; j < r->n_lanes; j++) {
        r->lane_ns[j] = exec_summary_ns(lt + j * reps, reps, o->stat);
        r->lane_end_ns[j] = exec_summary_ns(le + j * reps, reps, o->stat);
    }
summarised:
    r->stat = o->stat;
    r->reps = reps;
    char stages[320] = "";
    if (x->race) kv_catf(stages, sizeof stages, "; race: the two pointers by kvsim's rules at run time");
    if (x->io_rate > 0) kv_catf(stages, sizeof stages, "; ssd hops at most %.4g MB/s (emulated)", x->io_rate / 1e6);
    if (x->rstore.n > 0) {
        kv_catf(stages, sizeof stages, "; remote tier: a server process per NIC (%d) on the loopback interface (TCP)", x->rstore.n);
        if (x->net_rate > 0 || x->net_lat_ns > 0)
            kv_catf(stages, sizeof stages, ", nic hops at least %.4g us + bytes / %.4g MB/s (emulated)", (double)x->net_lat_ns / 1e3,
                     x->net_rate / 1e6);
    }
    if (x->race) {
    } else if (s->stages > 1 && x->stage[0].cpu >= 0)
        kv_catf(stages, sizeof stages, "; %d stage threads, stage st on CPU st%s%s", s->stages,
                 ncpu < s->stages ? " mod the CPUs (stages share CPUs)" : "", r->cpu_ok ? "" : " (NOT every layer ended there)");
    else if (s->stages > 1)
        kv_catf(stages, sizeof stages, "; %d stage threads, not pinned", s->stages);
    if (x->spin) kv_catf(stages, sizeof stages, "; stage threads wait spinning");
    if (cuda)
        snprintf(r->note, sizeof r->note,
                 "cuda, %s, fp16: per stage a compute and an h2d stream, the GPU waits on events; h2d = cudaMemcpyAsync from "
                 "pinned memory; ssd: %s pread, 1 MiB per call; IO threads %s%s",
                 x->dev.device, x->o_direct ? "O_DIRECT" : "buffered (O_DIRECT refused)",
                 x->io_cpu >= 0 ? "pinned to the last CPU" : "not pinned", stages);
    else
        snprintf(r->note, sizeof r->note, "%s; IO: %s pread (1 MiB per call), h2d = memcpy; IO threads %s%s", x->dev.info,
                 x->o_direct ? "O_DIRECT" : "buffered (O_DIRECT refused; page cache dropped before each replay)",
                 x->io_cpu >= 0 ? "pinned to the last CPU" : x->pin ? "not pinned (no CPU free of a stage)" : "not pinned", stages);
    rc = 0;
out:
    if (cuda) cuda_teardown(x); /* streams drained before the pinned memory and the files go */
    free(tt);
    free(rs);
    free(fs);
    free(is);
    free(id);
    free(ue);
    free(lt);
    free(le);
    for (int i = 0; i < x->n_files; i++) {
        if (x->files[i].fd >= 0) close(x->files[i].fd);
        if (x->files[i].path[0]) unlink(x->files[i].path);
        if (x->files[i].pin.p) probe_cuda_pinned_free(&x->files[i].pin);
        else free(x->files[i].host);
    }
    free(x->files);
    rstore_close(&x->rstore); /* the servers reaped */
    if (x->staging && !cuda)
        for (int k = 0; k < r->n_units; k++) free(x->staging[k]);
    probe_cuda_pinned_free(&x->stage_pin); /* cuda: the staging buffers (a zeroed one on cpu) */
    free(x->staging);
    free(x->u_file);
    free(x->u_start);
    free(x->u_len);
    free(x->hop_end);
    free(x->hop_start);
    free(x->u_done);
    free(x->it_done);
    free(x->it_start);
    free(x->ly_end);
    free(x->ly_done);
    free(x->lane_off);
    free(x->lane_start);
    free(x->lane_end);
    free(x->unit_of_id);
    free(x->iter_of_id);
    for (int q = 0; q < EX_NQ; q++) free(x->q[q]);
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        if (!cuda) free(x->stage[st].dev_buf); /* cuda: device memory, released with its device */
        free(x->stage[st].ctx_off);
    }
    free(x->ws); /* the buffers themselves go with the device */
    race_free(x);
    if (x->dev_open) probe_close(&x->dev);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
    if (rc != 0) exec_result_free(r);
    return rc;
}

/* ------------------------------------------------------------------ several replicas */

/* replica k's part of s as a schedule of its own (one replica): its requests, the units that load
 * for them and its iterations, renumbered 1..n as the reader numbers a file, every reference to a
 * unit or an iteration mapped; *umap / *imap: the part's unit / iteration k → its index in s. The
 * part's arrays are its own, the items, lanes and works they point to are s's. -1 when something
 * of replica k waits for another replica's unit or iteration (replicas share nothing here). */
typedef struct ExPart {
    Schedule s;
    int *umap, *imap, *rmap;
    uint64_t *ids; /* the remapped waits and after_units, one block */
} ExPart;

static void part_free(ExPart *p)
{
    free(p->s.reqs);
    free(p->s.units);
    if (p->s.iters)
        for (int i = 0; i < p->s.n_iters; i++) free(p->s.iters[i].layers);
    free(p->s.iters);
    free(p->umap);
    free(p->imap);
    free(p->rmap);
    free(p->ids);
    memset(p, 0, sizeof *p);
}

static int part_ref(const int *new_of, uint64_t id, int n, uint64_t *out)
{
    if (id < 1 || id > (uint64_t)n || new_of[id - 1] < 0) return -1;
    *out = (uint64_t)new_of[id - 1] + 1;
    return 0;
}

static int part_cause(const int *unit_new, const int *iter_new, const Schedule *s, SchCause *c)
{
    if (c->kind == SCH_CAUSE_UNIT) return part_ref(unit_new, c->id, s->n_units, &c->id);
    if (c->kind == SCH_CAUSE_ITER) return part_ref(iter_new, c->id, s->n_iters, &c->id);
    return 0;
}

static int part_make(const Schedule *s, int k, ExPart *p, KvErr *e)
{
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->s.replicas = 1;
    p->s.reqs = NULL;
    p->s.units = NULL;
    p->s.iters = NULL;
    p->s.n_reqs = p->s.n_units = p->s.n_iters = 0;
    int *unit_new = calloc((size_t)s->n_units + 1, sizeof *unit_new), *iter_new = calloc((size_t)s->n_iters + 1, sizeof *iter_new);
    p->s.reqs = calloc((size_t)s->n_reqs + 1, sizeof *p->s.reqs);
    p->s.units = calloc((size_t)s->n_units + 1, sizeof *p->s.units);
    p->s.iters = calloc((size_t)s->n_iters + 1, sizeof *p->s.iters);
    p->umap = calloc((size_t)s->n_units + 1, sizeof *p->umap);
    p->imap = calloc((size_t)s->n_iters + 1, sizeof *p->imap);
    p->rmap = calloc((size_t)s->n_reqs + 1, sizeof *p->rmap);
    size_t nids = 0;
    for (int i = 0; i < s->n_iters; i++) {
        nids += (size_t)s->iters[i].nafter;
        for (int l = 0; l < s->layers; l++) nids += (size_t)s->iters[i].layers[l].nwaits;
    }
    p->ids = calloc(nids + 1, sizeof *p->ids);
    int rc = -1;
    if (!unit_new || !iter_new || !p->s.reqs || !p->s.units || !p->s.iters || !p->umap || !p->imap || !p->rmap || !p->ids) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].replica == k) {
            p->rmap[p->s.n_reqs] = i;
            p->s.reqs[p->s.n_reqs++] = s->reqs[i];
        }
    for (int i = 0; i < s->n_units; i++) {
        const SchReq *q = schedule_req(s, s->units[i].req);
        unit_new[i] = -1;
        if (!q || q->replica != k) continue;
        unit_new[i] = p->s.n_units;
        p->umap[p->s.n_units++] = i;
    }
    for (int i = 0; i < s->n_iters; i++) {
        iter_new[i] = -1;
        if (s->iters[i].replica != k) continue;
        iter_new[i] = p->s.n_iters;
        p->imap[p->s.n_iters++] = i;
    }
    for (int j = 0; j < p->s.n_units; j++) {
        SchUnit *u = &p->s.units[j];
        *u = s->units[p->umap[j]];
        u->id = (uint64_t)j + 1;
        if (part_cause(unit_new, iter_new, s, &u->after) != 0) {
            kv_err(e, "execute: unit %llu (replica %d) waits for a unit or iteration of another replica: replicas share nothing "
                   "in a replay", (unsigned long long)s->units[p->umap[j]].id, k);
            goto out;
        }
    }
    uint64_t *ids = p->ids;
    for (int j = 0; j < p->s.n_iters; j++) {
        const SchIter *src = &s->iters[p->imap[j]];
        SchIter *it = &p->s.iters[j];
        *it = *src;
        it->id = (uint64_t)j + 1;
        it->layers = NULL;
        int bad = part_cause(unit_new, iter_new, s, &it->after) != 0;
        it->after_units = ids;
        for (int a = 0; a < src->nafter && !bad; a++) bad = part_ref(unit_new, src->after_units[a], s->n_units, ids++) != 0;
        it->layers = calloc((size_t)s->layers, sizeof *it->layers);
        if (!it->layers) {
            kv_err(e, "execute: out of memory");
            goto out;
        }
        for (int l = 0; l < s->layers && !bad; l++) {
            it->layers[l] = src->layers[l];
            it->layers[l].waits = ids;
            for (int w = 0; w < src->layers[l].nwaits && !bad; w++)
                bad = part_ref(unit_new, src->layers[l].waits[w], s->n_units, ids++) != 0;
        }
        if (bad) {
            kv_err(e, "execute: iteration %llu (replica %d) waits for a unit or iteration of another replica: replicas share "
                   "nothing in a replay", (unsigned long long)src->id, k);
            goto out;
        }
    }
    rc = 0;
out:
    free(unit_new);
    free(iter_new);
    if (rc != 0) part_free(p);
    return rc;
}

/* append replica part p's result to r (indices mapped back to s's arrays) */
static int part_merge(ExecResult *r, const ExPart *p, const ExecResult *q, int layers, KvErr *e)
{
#define GROW_CAT(arr, n_old, n_add, src)                                                                                   \
    do {                                                                                                               \
        void *nb_ = realloc((arr), ((size_t)(n_old) + (size_t)(n_add) + 1) * sizeof *(arr));                          \
        if (!nb_) return kv_err(e, "execute: out of memory");                                                          \
        (arr) = nb_;                                                                                                   \
        if ((n_add) > 0) memcpy((arr) + (n_old), (src), (size_t)(n_add) * sizeof *(arr));                              \
    } while (0)
    int nr = r->n_reqs, nu = r->n_units, ni = r->n_iters, nl = r->n_lanes;
    GROW_CAT(r->reqs, nr, q->n_reqs, q->reqs);
    GROW_CAT(r->req_idx, nr, q->n_reqs, q->req_idx);
    GROW_CAT(r->unit_idx, nu, q->n_units, q->unit_idx);
    GROW_CAT(r->unit_end_ns, nu, q->n_units, q->unit_end_ns);
    GROW_CAT(r->iter_idx, ni, q->n_iters, q->iter_idx);
    GROW_CAT(r->iter_ns, ni, q->n_iters, q->iter_ns);
    GROW_CAT(r->iter_start_ns, ni, q->n_iters, q->iter_start_ns);
    GROW_CAT(r->layer_stage, (int64_t)ni * layers, (int64_t)q->n_iters * layers, q->layer_stage);
    GROW_CAT(r->layer_cpu, (int64_t)ni * layers, (int64_t)q->n_iters * layers, q->layer_cpu);
    GROW_CAT(r->lane_ns, nl, q->n_lanes, q->lane_ns);
    GROW_CAT(r->lane_end_ns, nl, q->n_lanes, q->lane_end_ns);
#undef GROW_CAT
    for (int k = 0; k < q->n_reqs; k++) r->req_idx[nr + k] = p->rmap[q->req_idx[k]];
    for (int k = 0; k < q->n_units; k++) r->unit_idx[nu + k] = p->umap[q->unit_idx[k]];
    for (int k = 0; k < q->n_iters; k++) r->iter_idx[ni + k] = p->imap[q->iter_idx[k]];
    r->n_reqs += q->n_reqs;
    r->n_units += q->n_units;
    r->n_iters += q->n_iters;
    r->n_lanes += q->n_lanes;
    return 0;
}

/* Several replicas: each is a machine of its own (its GPUs, its link, its SSD; kvsim's router
 * decided which requests it serves), so each replica's part is replayed on this machine on its own,
 * one after another, and the results put side by side in s's frame (a part's times are its own
 * origin plus wall time, and its origin is its own first restoring release: the replicas' clocks
 * are the schedule's). */
static int exec_run_replicas(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    r->deps_ok = r->stage_ok = r->cpu_ok = 1;
    r->origin_ns = -1;
    int replayed = 0;
    for (int k = 0; k < s->replicas; k++) {
        ExPart p;
        if (part_make(s, k, &p, e) != 0) goto fail;
        if (p.s.n_reqs == 0) { /* the router sent it nothing */
            part_free(&p);
            continue;
        }
        ExecResult q;
        if (exec_run_one(&p.s, o, &q, e) != 0) {
            kv_err_prefix(e, "replica %d: ", k);
            part_free(&p);
            goto fail;
        }
        int rc = part_merge(r, &p, &q, s->layers, e);
        if (rc == 0) {
            if (r->origin_ns < 0 || q.origin_ns < r->origin_ns) r->origin_ns = q.origin_ns;
            r->deps_ok &= q.deps_ok;
            r->stage_ok &= q.stage_ok;
            r->cpu_ok &= q.cpu_ok;
            r->stages = q.stages;
            r->reps = q.reps;
            r->stat = q.stat;
            if (!r->deps_why[0] && q.deps_why[0]) snprintf(r->deps_why, sizeof r->deps_why, "replica %d: %s", k, q.deps_why);
            if (!replayed) snprintf(r->note, sizeof r->note, "%s", q.note);
            replayed++;
        }
        exec_result_free(&q);
        part_free(&p);
        if (rc != 0) goto fail;
    }
    if (r->origin_ns < 0) r->origin_ns = 0;
    {
        char tail[96];
        snprintf(tail, sizeof tail, "; %d of %d replicas replayed one after another", replayed, s->replicas);
        size_t n = strlen(r->note);
        if (n + strlen(tail) < sizeof r->note) memcpy(r->note + n, tail, strlen(tail) + 1);
    }
    return 0;
fail:
    exec_result_free(r);
    return -1;
}

int exec_run(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    if (s->replicas > 1 && o->race) return kv_err(e, "execute --race: a schedule of %d replicas: one expected", s->replicas);
    if (s->replicas > 1) return exec_run_replicas(s, o, r, e);
    return exec_run_one(s, o, r, e);
}

void exec_result_free(ExecResult *r)
{
    free(r->unit_idx);
    free(r->iter_idx);
    free(r->req_idx);
    free(r->reqs);
    free(r->iter_ns);
    free(r->iter_start_ns);
    free(r->unit_end_ns);
    free(r->layer_stage);
    free(r->layer_cpu);
    free(r->lane_ns);
    free(r->lane_end_ns);
    free(r->race_meets);
    free(r->chunks);
    memset(r, 0, sizeof *r);
}

static void pair(FILE *f, const char *key, double measured, double predicted, int comma)
{
    double err = predicted > 0 ? (predicted - measured) / measured : 0;
    fprintf(f, "\"%s\":{\"measured\":%.0f,\"predicted\":%.0f,\"error\":%.6f}%s", key, measured, predicted,
            measured > 0 ? err : 0.0, comma ? "," : "");
}

int exec_write_json(FILE *f, const Schedule *s, const ExecResult *r, const char *schedule_path)
{
    fprintf(f, "{\"schedule\":\"%s\",\"model\":\"%s\",\"policy\":\"%s\",\"origin_ns\":%" PRId64 ",\"reps\":%d,\"stat\":\"%s\",\"deps_ok\":%d,",
            schedule_path, s->model, s->policy, r->origin_ns, r->reps, r->stat == EXEC_STAT_MIN ? "min" : "median", r->deps_ok);
    fprintf(f, "\"stages\":%d,\"stage_ok\":%d,\"lanes\":%d,", r->stages, r->stage_ok, r->n_lanes);
    fprintf(f, "\"units\":%d,\"iterations\":%d,\"note\":\"%s\",\n\"requests\":[", r->n_units, r->n_iters, r->note);
    for (int k = 0; k < r->n_reqs; k++) {
        const SchReq *q = &s->reqs[r->req_idx[k]];
        const ExecReq *m = &r->reqs[k];
        fprintf(f, "%s\n{\"req\":%" PRIu64 ",\"turn\":%d,\"hist\":%" PRId64 ",\"new\":%" PRId64 ",\"restore\":\"%s\",", k ? "," : "",
                q->id, q->turn, q->hist, q->nnew, q->restore);
        pair(f, "ttft_ns", (double)m->ttft_ns, (double)q->ttft_ns, 1);
        pair(f, "restore_ns", (double)m->restore_ns, (double)q->restore_ns, 1);
        if (r->race) { /* its meet (the median over the replays) and each replay's */
            fprintf(f, "\"meet_measured\":%.0f,\"meets_measured\":[", m->meet);
            for (int p = 0; p < r->reps; p++) fprintf(f, "%s%" PRId64, p ? "," : "", r->race_meets[p * r->race_n + k]);
            fputs("],", f);
        }
        fprintf(f, "\"meet_tokens\":%" PRId64 "}", q->meet_tokens);
    }
    if (r->race) { /* the two pointers at run time: each replay's meet, the last replay's chunks */
        fprintf(f, "],\n\"race\":{\"io_rate\":%.0f,\"meets\":[", r->io_rate);
        int k0 = 0; /* the first restoring request's, as before batches were raced */
        while (k0 + 1 < r->n_reqs && s->reqs[r->req_idx[k0]].hist == 0) k0++;
        for (int p = 0; p < r->reps; p++) fprintf(f, "%s%" PRId64, p ? "," : "", r->race_meets[p * r->race_n + k0]);
        fputs("],\"chunks\":[", f);
        for (int k = 0; k < r->n_chunks; k++) {
            const ExecChunk *c = &r->chunks[k];
            fprintf(f, "%s\n{\"req\":%" PRIu64 ",\"side\":\"%s\",\"lo\":%" PRId64 ",\"hi\":%" PRId64 ",\"start_ns\":%" PRId64
                       ",\"end_ns\":%" PRId64 "}",
                    k ? "," : "", c->req, c->io ? "io" : "compute", c->lo, c->hi, c->start_ns, c->end_ns);
        }
        fputs("]},\n\"iterations\":[],\n\"unit_landing\":[]}\n", f);
        return ferror(f) ? -1 : 0;
    }
    fputs("],\n\"iterations\":[", f);
    int lane = 0;
    for (int k = 0; k < r->n_iters; k++) {
        const SchIter *it = &s->iters[r->iter_idx[k]];
        int64_t tok = 0;
        for (int i = 0; i < it->nitems; i++) tok += it->items[i].tokens;
        fprintf(f, "%s\n{\"iter\":%" PRIu64 ",\"items\":%d,\"tokens\":%" PRId64 ",", k ? "," : "", it->id, it->nitems, tok);
        pair(f, "duration_ns", r->iter_ns[k], (double)(it->end_ns - it->start_ns), 1);
        pair(f, "start_ns", r->iter_start_ns[k] - (double)r->origin_ns, (double)(it->start_ns - r->origin_ns), 0);
        if (it->nlanes) { /* the stage-parallel lanes as replayed (the schedule predicts no per-lane times) */
            fputs(",\"lanes\":[", f);
            for (int j = 0; j < it->nlanes; j++, lane++)
                fprintf(f, "%s{\"stage\":%d,\"layer\":%d,\"req\":%" PRIu64 ",\"tokens\":%" PRId64 ",\"measured_ns\":%.0f,\"end_ns\":%.0f}",
                        j ? "," : "", it->lanes[j].stage, it->lanes[j].layer, it->lanes[j].req, it->lanes[j].tokens, r->lane_ns[lane],
                        r->lane_end_ns[lane] - (double)r->origin_ns);
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputs("],\n\"unit_landing\":[", f);
    for (int k = 0; k < r->n_units; k++) {
        const SchUnit *u = &s->units[r->unit_idx[k]];
        fprintf(f, "%s\n{\"unit\":%" PRIu64 ",\"layer\":%d,\"bytes\":%" PRId64 ",", k ? "," : "", u->id, u->layer, u->bytes);
        pair(f, "end_ns", r->unit_end_ns[k] - (double)r->origin_ns, (double)(u->hop[u->nhops - 1].end_ns - r->origin_ns), 0);
        fputc('}', f);
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}
