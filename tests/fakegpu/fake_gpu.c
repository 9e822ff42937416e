/* fake_gpu.c — a host-only stand-in for kernels/gpu.h with CUDA's stream and event semantics, so
 * that the cuda replay (calibrate/execute.c, kvcal execute --backend cuda) runs and is checked on
 * machines without a GPU (make test-fakegpu links it in place of kernels/gpu_stub.o).
 *
 * Emulates (CUDA runtime documentation, cudaEventRecord / cudaStreamWaitEvent /
 * cudaEventSynchronize / cudaEventElapsedTime / cudaMemcpyAsync):
 *  - one device (0) named FAKEGPU_DEVICE_NAME; a context is a stream: a worker thread running the
 *    operations enqueued on it strictly in FIFO order, asynchronously to the host;
 *  - kernels: no arithmetic — a kernel sleeps for the kernel time on its stream; outputs are not
 *    computed (device buffers keep what copies and memsets put there), so nothing that reads
 *    results can be checked with it, only ordering and timing;
 *  - copies and memsets do move the bytes (memcpy/memset on the worker, so ASan sees their bounds),
 *    then take their modelled time; an h2d copy from pageable memory reads the source at the call
 *    (the driver's staging), a d2h copy to pageable memory returns only once done, copies from
 *    or to page-locked memory (kgpu_host_alloc pinned, kgpu_host_register) are asynchronous;
 *  - events: each cudaEventRecord is a record of its own that captures the work enqueued before it
 *    on its stream and completes (taking its timestamp, CLOCK_MONOTONIC) when the stream reaches it;
 *    recording again replaces the event's record (later calls see only the newest); a stream wait
 *    captures the event's record as of the call (later records do not move it; a never-recorded
 *    event is no wait); cudaEventSynchronize waits for the record as of the call (none: returns);
 *    elapsed time between the two events' latest records: cudaErrorInvalidResourceHandle when
 *    either was never recorded, cudaErrorNotReady when either is not complete, negative when `to`
 *    completed first; destroying an event with a pending record is legal (the record lives on);
 *  - kgpu_free, kgpu_host_free(pinned) and kgpu_host_unregister wait for every stream first (as
 *    cudaFree synchronises the device), so no queued copy touches released memory.
 * Not emulated: kernels' results, several devices, the default stream's implicit synchronisation,
 *   device memory limits, cuBLAS, launch errors, graphs; kgpu_set_attn_splits is ignored.
 * Diagnostics beyond CUDA (counters in fake_gpu.h, for tests): live contexts, events, device and
 *   pinned buffers; stream waits on never-recorded events; and "unawaited" h2d copies — an
 *   asynchronous h2d copy that no other stream waited on and the host did not event-synchronise on
 *   (through an event recorded after it on its stream) before its stream was synchronised: its
 *   landing was never a dependency of anything (the replay records each copy's landing event on
 *   the copy's stream and makes the compute stream wait for it).
 * Invariants: one mutex (g_mu) guards every queue, record, event field and counter; workers run
 *   copies and kernels with it released; every host-side wait is a condition variable wait bounded
 *   by FAKE_WAIT_S (an error, never a hang); a worker's device-side wait ends because a record a
 *   wait captured was enqueued before the wait (so waits cannot form a cycle, as on CUDA). Records
 *   are reference counted (event, queued op, stream's list, a host waiter).
 * Complexity: O(1) per call and per operation, plus the copy/memset bytes; memory: one small node
 *   per queued operation and per record since its stream's last synchronisation.
 */
#include "tests/fakegpu/fake_gpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "kernels/gpu.h"

#define FAKE_WAIT_S 60 /* the bound on any host-side wait */

enum { OP_KERNEL, OP_COPY, OP_SET0, OP_REC, OP_WAIT };

typedef struct FakeRec { /* one cudaEventRecord: the work enqueued before it on its stream */
    int done;
    int64_t t_ns;
    int refs;
    int stream_id;
    long h2d_seq; /* its stream's asynchronous h2d copies enqueued before it */
    int observed; /* waited on by another stream, or event-synchronised on by the host */
} FakeRec;

typedef struct FakeOp {
    int kind;
    void *dst;
    const void *src;
    size_t bytes;
    void *owned; /* a staging copy of a pageable source, freed with the op */
    int64_t ns;  /* modelled duration */
    FakeRec *rec;
    struct FakeOp *next;
} FakeOp;

struct KgpuEvent {
    FakeRec *last; /* the newest record; NULL: never recorded */
};

struct KgpuCtx {
    int id, device;
    pthread_t th;
    pthread_cond_t cv; /* work arrived, or stop */
    FakeOp *head, *tail;
    long sub, comp; /* operations enqueued / completed */
    int stop;
    long h2d_seq, h2d_accounted;
    FakeRec **recs; /* records on this stream since its last synchronisation */
    int nrec, caprec;
    KgpuEvent *t0, *t1;
    int timer_started;
    struct KgpuCtx *next_live;
};

typedef struct PinnedRange {
    char *p;
    size_t bytes;
    int registered;
} PinnedRange;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER; /* an operation completed */
static FakegpuStats g_st;
static KgpuCtx *g_live;
static int g_next_id = 1;
static PinnedRange *g_pin;
static int g_npin, g_cappin;
static int64_t g_kernel_ns = 20000, g_h2d_fixed_ns = 500000;
static double g_h2d_ns_per_byte = 0.5;
static __thread int g_cur_dev;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* caller holds g_mu; an error CUDA would return too (counted as misuse) */
static int misuse(KvErr *e, const char *fn, const char *what)
{
    g_st.misuse++;
    return kv_err(e, "%s: %s", fn, what);
}

#define NEED_CTX(fn)                                                                                                   \
    do {                                                                                                               \
        if (!ctx) {                                                                                                    \
            pthread_mutex_lock(&g_mu);                                                                                 \
            misuse(e, fn, "NULL context");                                                                   \
            pthread_mutex_unlock(&g_mu);                                                                               \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* wait on g_done (g_mu held) until ready(arg); an error after FAKE_WAIT_S */
static int host_wait(int (*ready)(void *), void *arg, const char *fn, KvErr *e)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += FAKE_WAIT_S;
    while (!ready(arg))
        if (pthread_cond_timedwait(&g_done, &g_mu, &dl) == ETIMEDOUT && !ready(arg))
            return kv_err(e, "fakegpu: %s: not done after %d s (a stream waiting on work that never completes)", fn, FAKE_WAIT_S);
    return 0;
}

static void rec_release(FakeRec *r) /* g_mu held */
{
    if (r && --r->refs == 0) free(r);
}

typedef struct {
    KgpuCtx *c;
    long upto;
} Drain;

static int drained(void *p)
{
    Drain *d = p;
    return d->c->comp >= d->upto;
}

static int rec_done(void *p) { return ((FakeRec *)p)->done; }

/* ---- the stream's worker ---- */

static void run_op(const FakeOp *o)
{
    int64_t t0 = now_ns();
    if (o->kind == OP_COPY) memcpy(o->dst, o->owned ? o->owned : o->src, o->bytes);
    else if (o->kind == OP_SET0) memset(o->dst, 0, o->bytes);
    if (o->ns > 0) sleep_until(t0 + o->ns);
}

static void *worker(void *p)
{
    KgpuCtx *c = p;
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* sleeps of tens of us, not the default 50 us slack */
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!c->head && !c->stop) pthread_cond_wait(&c->cv, &g_mu);
        if (!c->head) break;
        FakeOp *o = c->head;
        if (o->kind == OP_WAIT) {
            while (!o->rec->done) pthread_cond_wait(&g_done, &g_mu);
        } else if (o->kind == OP_REC) {
            o->rec->t_ns = now_ns();
            o->rec->done = 1;
        } else {
            pthread_mutex_unlock(&g_mu);
            run_op(o);
            pthread_mutex_lock(&g_mu);
        }
        c->head = o->next;
        if (!c->head) c->tail = NULL;
        c->comp++;
        rec_release(o->rec);
        free(o->owned);
        free(o);
        pthread_cond_broadcast(&g_done);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* enqueue a copy of *op on c (g_mu held); its position (c->sub after it), or -1 */
static long enqueue(KgpuCtx *c, FakeOp op, KvErr *e)
{
    FakeOp *n = malloc(sizeof *n);
    if (!n) {
        free(op.owned);
        return kv_err(e, "fakegpu: out of memory");
    }
    *n = op;
    n->next = NULL;
    if (c->tail) c->tail->next = n;
    else c->head = n;
    c->tail = n;
    c->sub++;
    g_st.ops++;
    pthread_cond_signal(&c->cv);
    return c->sub;
}

static int enqueue_locked(KgpuCtx *c, FakeOp op, KvErr *e)
{
    pthread_mutex_lock(&g_mu);
    long rc = enqueue(c, op, e);
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? -1 : 0;
}

/* the asynchronous h2d copies of c since its last synchronisation that nothing awaited (g_mu held;
 * everything enqueued on c has completed) */
static void account_sync(KgpuCtx *c)
{
    long covered = c->h2d_accounted;
    for (int i = 0; i < c->nrec; i++) {
        if (c->recs[i]->observed && c->recs[i]->h2d_seq > covered) covered = c->recs[i]->h2d_seq;
        rec_release(c->recs[i]);
    }
    c->nrec = 0;
    if (c->h2d_seq > covered) g_st.h2d_unawaited += c->h2d_seq - covered;
    c->h2d_accounted = c->h2d_seq;
}

/* every stream idle (g_mu held): what cudaFree and friends wait for */
static int device_sync(const char *fn, KvErr *e)
{
    for (KgpuCtx *c = g_live; c; c = c->next_live) {
        Drain d = {c, c->sub};
        if (host_wait(drained, &d, fn, e) != 0) return -1;
    }
    return 0;
}

static int is_pinned(const void *p, size_t bytes) /* g_mu held */
{
    const char *q = p;
    for (int i = 0; i < g_npin; i++)
        if (q >= g_pin[i].p && q + bytes <= g_pin[i].p + g_pin[i].bytes) return 1;
    return 0;
}

static int64_t h2d_ns(size_t bytes) { return g_h2d_fixed_ns + (int64_t)((double)bytes * g_h2d_ns_per_byte); }
static int64_t d2d_ns(size_t bytes) { return 2000 + (int64_t)((double)bytes * 0.01); }

/* ---- test controls (fake_gpu.h) ---- */

void fakegpu_set_timing(int64_t kernel_ns, int64_t h2d_fixed_ns, double h2d_ns_per_byte)
{
    pthread_mutex_lock(&g_mu);
    if (kernel_ns >= 0) g_kernel_ns = kernel_ns;
    if (h2d_fixed_ns >= 0) g_h2d_fixed_ns = h2d_fixed_ns;
    if (h2d_ns_per_byte >= 0) g_h2d_ns_per_byte = h2d_ns_per_byte;
    pthread_mutex_unlock(&g_mu);
}

void fakegpu_stats(FakegpuStats *s)
{
    pthread_mutex_lock(&g_mu);
    *s = g_st;
    pthread_mutex_unlock(&g_mu);
}

/* ---- gpu.h: device, contexts ---- */

const char *kgpu_dtype_name(KgpuDtype dt) { return dt == KGPU_F16 ? "fp16" : dt == KGPU_BF16 ? "bf16" : NULL; }

int kgpu_device_count(KvErr *e) { return 1; }

int kgpu_device_info(char *name, int len, char *driver, int dlen, char *cuda, int clen, KvErr *e)
{
    if (name && len > 0) snprintf(name, (size_t)len, "%s", FAKEGPU_DEVICE_NAME);
    if (driver && dlen > 0) snprintf(driver, (size_t)dlen, "0.0");
    if (cuda && clen > 0) snprintf(cuda, (size_t)clen, "0.0");
    return 0;
}

KgpuCtx *kgpu_ctx_create(int device, KvErr *e)
{
    if (device != 0) {
        kv_err(e, "kgpu_ctx_create: device %d: expected 0..0", device);
        return NULL;
    }
    KgpuCtx *c = calloc(1, sizeof *c);
    if (!c) {
        kv_err(e, "kgpu_ctx_create: out of memory");
        return NULL;
    }
    pthread_cond_init(&c->cv, NULL);
    int rc = kgpu_event_create(c, &c->t0, e);
    if (rc == 0) rc = kgpu_event_create(c, &c->t1, e);
    if (rc == 0 && pthread_create(&c->th, NULL, worker, c) != 0) rc = kv_err(e, "kgpu_ctx_create: cannot start the stream's thread");
    if (rc != 0) {
        kgpu_event_destroy(c->t0);
        kgpu_event_destroy(c->t1);
        pthread_cond_destroy(&c->cv);
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    c->id = g_next_id++;
    c->next_live = g_live;
    g_live = c;
    g_st.ctx_live++;
    pthread_mutex_unlock(&g_mu);
    return c;
}

int kgpu_sync(KgpuCtx *ctx, KvErr *e)
{
    NEED_CTX("kgpu_sync");
    pthread_mutex_lock(&g_mu);
    Drain d = {ctx, ctx->sub};
    int rc = host_wait(drained, &d, "kgpu_sync", e);
    if (rc == 0) account_sync(ctx);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

void kgpu_ctx_destroy(KgpuCtx *c)
{
    if (!c) return;
    KvErr e2;
    (void)kgpu_sync(c, &e2);
    pthread_mutex_lock(&g_mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(c->th, NULL);
    pthread_mutex_lock(&g_mu);
    account_sync(c);
    for (KgpuCtx **pp = &g_live; *pp; pp = &(*pp)->next_live)
        if (*pp == c) {
            *pp = c->next_live;
            break;
        }
    g_st.ctx_live--;
    pthread_mutex_unlock(&g_mu);
    kgpu_event_destroy(c->t0);
    kgpu_event_destroy(c->t1);
    free(c->recs);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int kgpu_sm_count(const KgpuCtx *ctx) { return ctx ? 132 : 0; }
void kgpu_set_attn_splits(KgpuCtx *ctx, int n) {}

int kgpu_ctx_bind(KgpuCtx *ctx, KvErr *e)
{
    NEED_CTX("kgpu_ctx_bind");
    g_cur_dev = ctx->device;
    return 0;
}

/* ---- memory ---- */

int kgpu_malloc(KgpuCtx *ctx, size_t bytes, void **dptr, KvErr *e)
{
    *dptr = NULL;
    NEED_CTX("kgpu_malloc");
    if (!(*dptr = malloc(bytes ? bytes : 1))) return kv_err(e, "kgpu_malloc: out of memory for %zu bytes", bytes);
    pthread_mutex_lock(&g_mu);
    g_st.dev_allocs_live++;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int kgpu_free(KgpuCtx *ctx, void *dptr, KvErr *e)
{
    NEED_CTX("kgpu_free");
    if (!dptr) return 0;
    pthread_mutex_lock(&g_mu);
    int rc = device_sync("kgpu_free", e);
    if (rc == 0) {
        free(dptr);
        g_st.dev_allocs_live--;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int kgpu_memset0(KgpuCtx *ctx, void *dptr, size_t bytes, KvErr *e)
{
    NEED_CTX("kgpu_memset0");
    if (!bytes) return 0;
    return enqueue_locked(ctx, (FakeOp){.kind = OP_SET0, .dst = dptr, .bytes = bytes, .ns = d2d_ns(bytes)}, e);
}

static int pin_add(void *p, size_t bytes, int registered, KvErr *e) /* g_mu held */
{
    if (g_npin == g_cappin) {
        int cap = g_cappin ? 2 * g_cappin : 16;
        PinnedRange *n = realloc(g_pin, (size_t)cap * sizeof *n);
        if (!n) return kv_err(e, "fakegpu: out of memory");
        g_pin = n;
        g_cappin = cap;
    }
    g_pin[g_npin++] = (PinnedRange){p, bytes, registered};
    g_st.pinned_live++;
    return 0;
}

static int pin_remove(void *p, int registered) /* g_mu held; 0: found and removed */
{
    for (int i = 0; i < g_npin; i++)
        if (g_pin[i].p == p && g_pin[i].registered == registered) {
            g_pin[i] = g_pin[--g_npin];
            g_st.pinned_live--;
            return 0;
        }
    g_st.misuse++;
    return -1;
}

int kgpu_host_alloc(size_t bytes, int pinned, void **hptr, KvErr *e)
{
    *hptr = NULL;
    if (!pinned) {
        if (!(*hptr = malloc(bytes ? bytes : 1))) return kv_err(e, "kgpu_host_alloc: out of memory for %zu bytes", bytes);
        return 0;
    }
    /* cudaMallocHost memory is page-aligned in practice */
    if (posix_memalign(hptr, 4096, bytes ? bytes : 1) != 0) {
        *hptr = NULL;
        return kv_err(e, "kgpu_host_alloc: out of memory for %zu bytes", bytes);
    }
    pthread_mutex_lock(&g_mu);
    int rc = pin_add(*hptr, bytes ? bytes : 1, 0, e);
    pthread_mutex_unlock(&g_mu);
    if (rc != 0) {
        free(*hptr);
        *hptr = NULL;
    }
    return rc;
}

void kgpu_host_free(void *hptr, int pinned)
{
    if (!hptr) return;
    if (pinned) {
        KvErr e2;
        pthread_mutex_lock(&g_mu);
        (void)device_sync("kgpu_host_free", &e2);
        (void)pin_remove(hptr, 0);
        pthread_mutex_unlock(&g_mu);
    }
    free(hptr);
}

int kgpu_host_register(void *hptr, size_t bytes, KvErr *e)
{
    if (!hptr || !bytes) return kv_err(e, "kgpu_host_register: %s", !hptr ? "NULL pointer" : "0 bytes");
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    for (int i = 0; i < g_npin && rc == 0; i++)
        if ((char *)hptr < g_pin[i].p + g_pin[i].bytes && g_pin[i].p < (char *)hptr + bytes)
            rc = misuse(e, "kgpu_host_register", "part of the range is already page-locked (cudaErrorHostMemoryAlreadyRegistered)");
    if (rc == 0) rc = pin_add(hptr, bytes, 1, e);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

void kgpu_host_unregister(void *hptr)
{
    if (!hptr) return;
    KvErr e2;
    pthread_mutex_lock(&g_mu);
    (void)device_sync("kgpu_host_unregister", &e2);
    (void)pin_remove(hptr, 1); /* not registered: cudaErrorHostMemoryNotRegistered, counted */
    pthread_mutex_unlock(&g_mu);
}

/* ---- copies ---- */

int kgpu_copy_h2d(KgpuCtx *ctx, void *dst_dev, const void *src_host, size_t bytes, KvErr *e)
{
    NEED_CTX("kgpu_copy_h2d");
    if (!bytes) return 0;
    pthread_mutex_lock(&g_mu);
    FakeOp op = {.kind = OP_COPY, .dst = dst_dev, .src = src_host, .bytes = bytes, .ns = h2d_ns(bytes)};
    if (is_pinned(src_host, bytes)) {
        ctx->h2d_seq++;
        g_st.h2d_async++;
    } else { /* pageable: the driver stages the source before the call returns */
        if (!(op.owned = malloc(bytes))) {
            pthread_mutex_unlock(&g_mu);
            return kv_err(e, "fakegpu: out of memory");
        }
        memcpy(op.owned, src_host, bytes);
    }
    long rc = enqueue(ctx, op, e);
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? -1 : 0;
}

int kgpu_copy_d2h(KgpuCtx *ctx, void *dst_host, const void *src_dev, size_t bytes, KvErr *e)
{
    NEED_CTX("kgpu_copy_d2h");
    if (!bytes) return 0;
    pthread_mutex_lock(&g_mu);
    long pos = enqueue(ctx, (FakeOp){.kind = OP_COPY, .dst = dst_host, .src = src_dev, .bytes = bytes, .ns = h2d_ns(bytes)}, e);
    int rc = pos < 0 ? -1 : 0;
    if (rc == 0 && !is_pinned(dst_host, bytes)) { /* pageable: returns once the copy is done */
        Drain d = {ctx, pos};
        rc = host_wait(drained, &d, "kgpu_copy_d2h", e);
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int kgpu_copy_d2d(KgpuCtx *ctx, void *dst_dev, const void *src_dev, size_t bytes, KvErr *e)
{
    NEED_CTX("kgpu_copy_d2d");
    if (!bytes) return 0;
    return enqueue_locked(ctx, (FakeOp){.kind = OP_COPY, .dst = dst_dev, .src = src_dev, .bytes = bytes, .ns = d2d_ns(bytes)}, e);
}

int kgpu_upload_f32(KgpuCtx *ctx, KgpuDtype dt, void *dst_dev, const float *src_host, size_t n, KvErr *e)
{
    NEED_CTX("kgpu_upload_f32");
    if (dt != KGPU_F16 && dt != KGPU_BF16) return kv_err(e, "kgpu_upload_f32: dtype %d: expected KGPU_F16 or KGPU_BF16", (int)dt);
    if (n == 0) return 0;
    uint16_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return kv_err(e, "kgpu_upload_f32: out of memory for %zu values", n);
    kref_f32_to_half_n(src_host, tmp, n, dt == KGPU_BF16);
    int rc = kgpu_copy_h2d(ctx, dst_dev, tmp, n * sizeof *tmp, e);
    if (rc == 0) rc = kgpu_sync(ctx, e);
    free(tmp);
    return rc;
}

int kgpu_download_f32(KgpuCtx *ctx, KgpuDtype dt, float *dst_host, const void *src_dev, size_t n, KvErr *e)
{
    NEED_CTX("kgpu_download_f32");
    if (dt != KGPU_F16 && dt != KGPU_BF16) return kv_err(e, "kgpu_download_f32: dtype %d: expected KGPU_F16 or KGPU_BF16", (int)dt);
    if (n == 0) return 0;
    uint16_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return kv_err(e, "kgpu_download_f32: out of memory for %zu values", n);
    int rc = kgpu_copy_d2h(ctx, tmp, src_dev, n * sizeof *tmp, e);
    if (rc == 0) kref_half_to_f32_n(tmp, dst_host, n, dt == KGPU_BF16);
    free(tmp);
    return rc;
}

/* ---- events ---- */

int kgpu_event_create(KgpuCtx *ctx, KgpuEvent **ev, KvErr *e)
{
    *ev = NULL;
    NEED_CTX("kgpu_event_create");
    if (!(*ev = calloc(1, sizeof **ev))) return kv_err(e, "kgpu_event_create: out of memory");
    pthread_mutex_lock(&g_mu);
    g_st.events_live++;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

void kgpu_event_destroy(KgpuEvent *ev)
{
    if (!ev) return;
    pthread_mutex_lock(&g_mu);
    if (ev->last && !ev->last->done) g_st.destroyed_pending++;
    rec_release(ev->last);
    g_st.events_live--;
    pthread_mutex_unlock(&g_mu);
    free(ev);
}

int kgpu_event_record(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e)
{
    NEED_CTX("kgpu_event_record");
    if (!ev) return kv_err(e, "kgpu_event_record: NULL event");
    FakeRec *r = calloc(1, sizeof *r);
    if (!r) return kv_err(e, "fakegpu: out of memory");
    pthread_mutex_lock(&g_mu);
    if (ctx->nrec == ctx->caprec) {
        int cap = ctx->caprec ? 2 * ctx->caprec : 64;
        FakeRec **n = realloc(ctx->recs, (size_t)cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_mu);
            free(r);
            return kv_err(e, "fakegpu: out of memory");
        }
        ctx->recs = n;
        ctx->caprec = cap;
    }
    r->refs = 3; /* the event, the queued op, the stream's list */
    r->stream_id = ctx->id;
    r->h2d_seq = ctx->h2d_seq;
    rec_release(ev->last);
    ev->last = r;
    ctx->recs[ctx->nrec++] = r;
    g_st.records++;
    long rc = enqueue(ctx, (FakeOp){.kind = OP_REC, .rec = r}, e);
    if (rc < 0) r->done = 1, r->refs--; /* never enqueued: complete, so nothing waits on it forever */
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? -1 : 0;
}

int kgpu_stream_wait_event(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e)
{
    NEED_CTX("kgpu_stream_wait_event");
    if (!ev) return kv_err(e, "kgpu_stream_wait_event: NULL event");
    pthread_mutex_lock(&g_mu);
    g_st.waits++;
    FakeRec *r = ev->last;
    long rc = 0;
    if (!r) {
        g_st.waits_unrecorded++; /* an empty set of work: no wait */
    } else {
        if (r->stream_id != ctx->id) r->observed = 1;
        if (!r->done) { /* a done record is no wait either */
            r->refs++;
            rc = enqueue(ctx, (FakeOp){.kind = OP_WAIT, .rec = r}, e);
            if (rc < 0) r->refs--;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? -1 : 0;
}

int kgpu_event_sync(KgpuEvent *ev, KvErr *e)
{
    if (!ev) return kv_err(e, "kgpu_event_sync: NULL event");
    pthread_mutex_lock(&g_mu);
    FakeRec *r = ev->last;
    int rc = 0;
    if (r) { /* never recorded: returns at once */
        r->observed = 1;
        r->refs++;
        rc = host_wait(rec_done, r, "kgpu_event_sync", e);
        rec_release(r);
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int kgpu_event_elapsed_ms(KgpuEvent *from, KgpuEvent *to, float *ms, KvErr *e)
{
    if (!from || !to) return kv_err(e, "kgpu_event_elapsed_ms: NULL event");
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    if (!from->last || !to->last)
        rc = misuse(e, "fakegpu: cudaEventElapsedTime", "an event was never recorded (cudaErrorInvalidResourceHandle)");
    else if (!from->last->done || !to->last->done)
        rc = misuse(e, "fakegpu: cudaEventElapsedTime", "an event has not completed (cudaErrorNotReady)");
    else
        *ms = (float)((double)(to->last->t_ns - from->last->t_ns) / 1e6);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int kgpu_timer_start(KgpuCtx *ctx, KvErr *e)
{
    NEED_CTX("kgpu_timer_start");
    if (kgpu_event_record(ctx, ctx->t0, e) != 0) return -1;
    ctx->timer_started = 1;
    return 0;
}

int kgpu_timer_stop(KgpuCtx *ctx, float *ms, KvErr *e)
{
    NEED_CTX("kgpu_timer_stop");
    if (!ctx->timer_started) return kv_err(e, "kgpu_timer_stop: kgpu_timer_start was not called");
    ctx->timer_started = 0;
    if (kgpu_event_record(ctx, ctx->t1, e) != 0 || kgpu_event_sync(ctx->t1, e) != 0) return -1;
    return kgpu_event_elapsed_ms(ctx->t0, ctx->t1, ms, e);
}

/* ---- kernels: checked like gpu.cu's, then a timed no-op on the stream ---- */

static int kernel(KgpuCtx *ctx, KgpuDtype dt, int sizes_ok, const char *fn, KvErr *e)
{
    NEED_CTX(fn);
    if (dt != KGPU_F16 && dt != KGPU_BF16) return kv_err(e, "%s: dtype %d: expected KGPU_F16 or KGPU_BF16", fn, (int)dt);
    if (!sizes_ok) return kv_err(e, "%s: bad sizes", fn);
    pthread_mutex_lock(&g_mu);
    long rc = enqueue(ctx, (FakeOp){.kind = OP_KERNEL, .ns = g_kernel_ns}, e);
    pthread_mutex_unlock(&g_mu);
    return rc < 0 ? -1 : 0;
}

int kgpu_gemm(KgpuCtx *ctx, KgpuDtype dt, int m, int n, int k, const void *a, const void *b, void *c, KvErr *e)
{
    return kernel(ctx, dt, m >= 0 && n >= 0 && k >= 0, "kgpu_gemm", e);
}

int kgpu_attn_prefill(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int n_new, int n_ctx, int h,
                      int h_kv, int d, KvErr *e)
{
    int ok = n_new >= 0 && n_ctx >= 0 && h > 0 && h_kv > 0 && h % h_kv == 0 && d > 0 && d <= KGPU_MAX_HEAD_DIM;
    return kernel(ctx, dt, ok, "kgpu_attn_prefill", e);
}

int kgpu_attn_decode(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int batch, const int *ctx_off_host,
                     int h, int h_kv, int d, KvErr *e)
{
    int ok = batch >= 0 && ctx_off_host && h > 0 && h_kv > 0 && h % h_kv == 0 && d > 0 && d <= KGPU_MAX_HEAD_DIM;
    for (int i = 0; ok && i < batch; i++) /* the host offsets are read at the call (as gpu.cu uploads them) */
        if (ctx_off_host[i + 1] < ctx_off_host[i]) ok = 0;
    return kernel(ctx, dt, ok, "kgpu_attn_decode", e);
}

int kgpu_rmsnorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, void *y, int rows, int dim, float eps, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && dim > 0, "kgpu_rmsnorm", e);
}

int kgpu_layernorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, const void *b, void *y, int rows, int dim, float eps, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && dim > 0, "kgpu_layernorm", e);
}

int kgpu_gated_act(KgpuCtx *ctx, KgpuDtype dt, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && f > 0, "kgpu_gated_act", e);
}

int kgpu_rope(KgpuCtx *ctx, KgpuDtype dt, void *x, int n_tokens, int n_heads, int d, int pos0, float theta, KvErr *e)
{
    return kernel(ctx, dt, n_tokens >= 0 && n_heads > 0 && d > 0 && d % 2 == 0, "kgpu_rope", e);
}

int kgpu_quant_i8(KgpuCtx *ctx, KgpuDtype dt, const void *x, int8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && group > 0, "kgpu_quant_i8", e);
}

int kgpu_dequant_i8(KgpuCtx *ctx, KgpuDtype dt, const int8_t *q, const float *scale, void *x, int rows, int group, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && group > 0, "kgpu_dequant_i8", e);
}

int kgpu_quant_i4(KgpuCtx *ctx, KgpuDtype dt, const void *x, uint8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && group > 0 && group % 2 == 0, "kgpu_quant_i4", e);
}

int kgpu_dequant_i4(KgpuCtx *ctx, KgpuDtype dt, const uint8_t *q, const float *scale, void *x, int rows, int group, KvErr *e)
{
    return kernel(ctx, dt, rows >= 0 && group > 0 && group % 2 == 0, "kgpu_dequant_i4", e);
}
