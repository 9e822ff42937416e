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
 * on it (ex_resolve_landing, the iteration's end).
 * Library code: never prints (calibrate/cli/execute_cmd.c does).
 * Files: this one (time, failures, landings and causes, one replay: the stage threads, their waits,
 * the cuda collection), execute_io.c (reads, the IO threads), execute_compute.c (a layer on the
 * kernels, the buffers), execute_prep.c (state files, kernels, weights), execute_race.c (--race),
 * execute_results.c (per-request times, one replay end to end), execute_replicas.c (one replay per
 * replica, merged; the result's JSON); their shared state in execute_int.h.
 */
#include "calibrate/execute_int.h"

int64_t ex_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ex_now(const Ex *x) { return ex_mono_ns() - x->t0; }

/* sim time → replay time (ns since the start) */
int64_t ex_rel(const Ex *x, int64_t sim_ns) { return sim_ns - x->r->origin_ns; }

/* the first failure wins (caller holds mu) */
void ex_fail_locked(Ex *x, const KvErr *e)
{
    if (!x->failed) x->err = *e;
    x->failed = 1;
    pthread_cond_broadcast(&x->cv);
}

void ex_fail(Ex *x, KvErr *e)
{
    pthread_mutex_lock(&x->mu);
    ex_fail_locked(x, e);
    pthread_mutex_unlock(&x->mu);
}

/* has replayed unit k landed, as far as the host knows (caller holds mu)? cuda: *resolve = k when its
 * copy is enqueued but its landing not yet known on the host (ex_resolve_landing learns it) */
static int unit_landed(const Ex *x, int k, int *resolve)
{
    if (k < 0 || x->u_done[k] >= 0) return 1;
    if (x->cuda && x->u_issued[k]) *resolve = k;
    return 0;
}

/* cuda: wait on the host for replayed unit k's landing event (mu released meanwhile) and publish
 * its time; caller holds mu */
void ex_resolve_landing(Ex *x, int k)
{
    ProbeEvent *ev = x->u_ev[k];
    pthread_mutex_unlock(&x->mu);
    KvErr e;
    int64_t t = -1;
    int rc = probe_cuda_event_sync(ev, &e) == 0 ? probe_cuda_elapsed_ns(x->ev0, ev, &t, &e) : -1;
    pthread_mutex_lock(&x->mu);
    if (rc != 0) {
        kv_err_prefix(&e, "execute: the landing of unit %llu: ", (unsigned long long)x->s->units[x->r->unit_idx[k]].id);
        ex_fail_locked(x, &e);
        return;
    }
    if (x->u_done[k] < 0) {
        x->u_done[k] = t;
        pthread_cond_broadcast(&x->cv);
    }
}

/* is the cause satisfied (caller holds mu)? *at: the instant to wait for (-1: none); *resolve: a
 * unit whose landing the host must learn first (cuda; -1: none) */
int ex_cause_ok(const Ex *x, const SchCause *c, int64_t *at, int *resolve)
{
    *at = -1;
    *resolve = -1;
    if (c->kind == SCH_CAUSE_UNIT) return unit_landed(x, x->unit_of_id[c->id - 1], resolve);
    if (c->kind == SCH_CAUSE_ITER) {
        int k = x->iter_of_id[c->id - 1];
        return k < 0 || x->it_done[k] >= 0;
    }
    int64_t t = ex_rel(x, c->at_ns);
    if (t <= ex_now(x)) return 1;
    *at = t;
    return 0;
}

/* wait (holding mu) until cond() or failure; sleeps until `at` when the only thing missing is time */
void ex_wait_until_time(Ex *x, int64_t at)
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
void ex_io_throttle(const Ex *x, int64_t t, int64_t bytes, double rate, int64_t lat)
{
    if (rate <= 0 && lat <= 0) return;
    int64_t end = t + lat + (rate > 0 ? (int64_t)llround((double)bytes / rate * 1e9) : 0), d = end - ex_now(x);
    if (d <= 0) return;
    struct timespec sl = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
    while (nanosleep(&sl, &sl) != 0 && errno == EINTR) {
    }
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
        if (ex_layer_run(x, g, &one, 1, NULL, ln->layer, &we, NULL, e) != 0) return -1;
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
            memcpy(g->x_, pg->x_, (size_t)ex_layer_rows(it, l - 1) * (size_t)s->hidden * x->dev.elem_bytes);
        }
        if (ex_layer_run(x, g, it->items, it->nitems, ly, l, &we, NULL, e) != 0) return -1;
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
        if (probe_cuda_record(g->cs, x->lane_ev[2 * lj], e) != 0 || ex_layer_run(x, g, &one, 1, NULL, ln->layer, &we, NULL, e) != 0 ||
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
            if (probe_cuda_copy(g->cs, g->x_, pg->x_, (size_t)ex_layer_rows(it, l - 1) * (size_t)s->hidden * g->dev->elem_bytes, 0, e) != 0)
                return -1;
        }
        int64_t we;
        if (ex_layer_run(x, g, it->items, it->nitems, ly, l, &we, ev[EX_EV_WORK], e) != 0 || probe_cuda_record(g->cs, ev[EX_EV_END], e) != 0)
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
                int ok = (k == 0 || x->it_done[k - 1] >= 0) && ex_cause_ok(x, &it->after, &at, &res);
                for (int j = 0; ok && j < it->nafter; j++)
                    if (!unit_landed(x, x->unit_of_id[it->after_units[j] - 1], &res)) ok = 0;
                if (ok) break;
                if (res >= 0) ex_resolve_landing(x, res);
                else if (at >= 0) ex_wait_until_time(x, at);
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
            ex_fail(x, &le);
            return;
        }
    }
}

static void *stage_main(void *p)
{
    ExStage *g = p;
    if (ex_pin_to(g->cpu) != 0) g->cpu = -1; /* refused: unpinned, and the note and cpu_ok say so (read after the join) */
    KvErr e;
    if (g->x->cuda && probe_cuda_bind(g->dev, &e) != 0) {
        ex_fail(g->x, &e);
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

int ex_replay(Ex *x, KvErr *e)
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
    ex_drop_caches(x);
    pthread_t th[EX_NQ], sth[SCH_MAX_STAGES];
    ChanArg ca[EX_NQ];
    int started[EX_NQ] = {0}, sstarted[SCH_MAX_STAGES] = {0};
    if (x->cuda && cuda_start(x, e) != 0) return kv_err_prefix(e, "execute: the start of the replay: ");
    x->t0 = ex_mono_ns();
    for (int q = 0; q < EX_NQ; q++) {
        if (!x->nq[q]) continue;
        ca[q] = (ChanArg){x, q};
        if (pthread_create(&th[q], NULL, ex_chan_main, &ca[q]) != 0) {
            KvErr e2;
            kv_err(&e2, "execute: cannot start an IO thread");
            ex_fail(x, &e2);
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
            ex_fail(x, &e2);
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
