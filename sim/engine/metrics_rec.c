/* metrics_rec.c — the recordings a caller asks for through SimRunOpts: utilisation windows, the
 * timeline of one request (or of the slowest restoration), trace events. None of them touches a
 * result; metrics.c calls in here from its hooks (metrics_int.h).
 *
 * Responsible for: MetricsObs (sm->obs) from metrics_on_setup to metrics_free, the utilisation
 * series and the timeline handed to the caller at the end of a run.
 * Not responsible for: SimResult (metrics.c, metrics_trim.c); formatting (results/).
 * Invariants: a run without a MetricsObs (out of memory, or a Sim set up without metrics_on_setup)
 * records nothing through g_obs_none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/metrics_int.h"

/* Utilisation windows: per resource (the GPU of each stage, each channel kind per stage) the busy
 * time of each window, summed over replicas; an interval [a, b) busy for `busy` ns adds
 * busy × overlap / (b − a) to each window it overlaps (channels: busy = b − a; an iteration: its
 * stage's layer time spread over the iteration). Without util_window_ns the windows start at 100 µs
 * and pairs merge (width doubles) when an interval ends past the last of UTIL_BINS: 200–400
 * windows over a run longer than 20 ms. O(windows overlapped) per interval, O(resources ×
 * UTIL_BINS) per doubling (at most log2(run / 100 µs) of them).
 * Timeline: the spans of one request (SimRunOpts.timeline_request) or, for the slowest restoration,
 * of every request while it restores (the slowest one done so far is kept, the others freed when
 * they are done): O(1) per span; per iteration O(items × layers) for the iterations that carry a
 * recorded request. Trace events: one sink call per span or counter change. */
#define UTIL_BINS 400
#define UTIL_FIRST_WIDTH_NS 100000
#define UTIL_MAX_WINDOWS (1 << 21)

typedef struct TlRec {
    SimTimeline t;
    struct TlRec *prev, *next; /* the records of requests not done yet */
} TlRec;

typedef struct MetricsObs {
    /* utilisation (util on) */
    int util_on, fixed, n_res;
    int res_gpu[SIM_MAX_STAGES];
    int res_ch[CH_COUNT][SIM_MAX_STAGES]; /* -1: the platform has no such channel */
    char names[SIM_UTIL_MAX_RES][16];
    int64_t width_ns, cap;                /* window width, windows allocated */
    int64_t span_ns;                      /* width_ns × cap, the time the windows cover (saturated, never wrapped) */
    double *bins;                         /* [window × n_res + resource] */
    /* timeline (tl_on) */
    int tl_on;
    int64_t tl_id;                        /* -1: the slowest restoration */
    TlRec *live, *best;
    int64_t best_restore_ns;
    int64_t *layer_t0, *layer_t1;         /* [replica × L]: layers walked in the iteration in flight */
    const SimEventSink *sink;
} MetricsObs;

static MetricsObs g_obs_none; /* what a run records when its MetricsObs could not be allocated */
/* the recordings of sm (none for a Sim set up without metrics_on_setup: the channel tests' benches) */
static MetricsObs *obs_of(const Sim *sm) { return sm->obs ? sm->obs : &g_obs_none; }

static int util_setup(Sim *sm, MetricsObs *o)
{
    for (int k = 0; k < CH_COUNT; k++)
        for (int st = 0; st < SIM_MAX_STAGES; st++) o->res_ch[k][st] = -1;
    for (int st = 0; st < sm->S; st++) {
        o->res_gpu[st] = o->n_res;
        snprintf(o->names[o->n_res++], sizeof o->names[0], st ? "gpu_s%d" : "gpu", st);
    }
    for (int k = 0; k < CH_COUNT; k++) {
        if (!sm->rep[0].has_ch[k]) continue;
        for (int st = 0; st < rep_ch_count(&sm->rep[0], k, sm->S); st++) {
            o->res_ch[k][st] = o->n_res;
            if (st) snprintf(o->names[o->n_res++], sizeof o->names[0], "%s_s%d", ch_kind_name(k), st);
            else snprintf(o->names[o->n_res++], sizeof o->names[0], "%s", ch_kind_name(k));
        }
    }
    o->fixed = sm->opts->util_window_ns > 0;
    o->width_ns = o->fixed ? sm->opts->util_window_ns : UTIL_FIRST_WIDTH_NS;
    o->cap = UTIL_BINS;
    o->span_ns = t_mul(o->width_ns, o->cap);
    o->bins = calloc((size_t)(o->cap * o->n_res), sizeof *o->bins);
    return o->bins ? 0 : -1;
}

/* windows up to t_ns: more of them (fixed width) or pairs merged (doubling). span_ns saturates
 * where width × cap would pass INT64_MAX (a wrapped product once made this loop endless). */
static int util_cover(Sim *sm, MetricsObs *o, int64_t t_ns)
{
    while (t_ns > o->span_ns) {
        int R = o->n_res;
        if (!o->fixed) {
            for (int64_t i = 0; i < o->cap / 2; i++)
                for (int r = 0; r < R; r++) o->bins[i * R + r] = o->bins[2 * i * R + r] + o->bins[(2 * i + 1) * R + r];
            memset(o->bins + o->cap / 2 * R, 0, sizeof *o->bins * (size_t)(o->cap / 2 * R));
            o->width_ns *= 2; /* (width_ns <= span_ns / cap < INT64_MAX / 400: no overflow) */
            o->span_ns = t_mul(o->width_ns, o->cap);
            continue;
        }
        int64_t nc = o->cap * 2;
        if (nc > UTIL_MAX_WINDOWS)
            return sim_fail(sm, "util_window %lld ns: the run needs more than %d utilisation windows; give a wider window",
                            (long long)o->width_ns, UTIL_MAX_WINDOWS);
        double *nb = realloc(o->bins, (size_t)(nc * R) * sizeof *nb);
        if (!nb) return sim_fail(sm, "out of memory");
        memset(nb + o->cap * R, 0, sizeof *nb * (size_t)((nc - o->cap) * R));
        o->bins = nb;
        o->cap = nc;
        o->span_ns = t_mul(o->width_ns, o->cap);
    }
    return 0;
}

static void util_add(Sim *sm, MetricsObs *o, int res, int64_t a, int64_t b, double busy)
{
    if (res < 0 || busy <= 0 || b <= a) return;
    if (b > SIM_TIME_MAX_NS) return; /* past the clock's limit: the run fails at its push (sim_push) */
    if (b > o->span_ns && util_cover(sm, o, b) != 0) return; /* (util_cover's own test, inline) */
    double dens = busy / (double)(b - a);
    int64_t W = o->width_ns, k = a / W;
    if (b <= (k + 1) * W) { /* within one window (most spans): the loop's one step, s0 = a, s1 = b */
        o->bins[k * o->n_res + res] += dens * (double)(b - a);
        return;
    }
    for (; k * W < b; k++) {
        int64_t s0 = a > k * W ? a : k * W, s1 = b < (k + 1) * W ? b : (k + 1) * W;
        o->bins[k * o->n_res + res] += dens * (double)(s1 - s0);
    }
}

static void util_export(Sim *sm, SimUtilSeries *u)
{
    MetricsObs *o = obs_of(sm);
    memset(u, 0, sizeof *u);
    int64_t end = sim_now(sm) > 0 ? sim_now(sm) : 1;
    if (util_cover(sm, o, end) != 0) return;
    int64_t W = o->width_ns, nw = (end + W - 1) / W;
    u->util = calloc((size_t)(nw * o->n_res), sizeof *u->util);
    if (!u->util) {
        sim_fail(sm, "out of memory");
        return;
    }
    u->window_ns = W;
    u->end_ns = end;
    u->n_windows = (int)nw;
    u->n_res = o->n_res;
    memcpy(u->names, o->names, sizeof u->names);
    for (int r = 0; r < o->n_res; r++)
        for (int64_t k = 0; k < nw; k++) {
            int64_t len = (k + 1) * W < end ? W : end - k * W;
            double v = o->bins[k * o->n_res + r] / ((double)len * sm->R);
            u->util[r * nw + k] = v > 1 ? 1 : v; /* (rounding of the spread) */
        }
}

void sim_util_free(SimUtilSeries *u)
{
    free(u->util);
    memset(u, 0, sizeof *u);
}

void sim_timeline_free(SimTimeline *t)
{
    free(t->spans);
    memset(t, 0, sizeof *t);
}

static void tl_rec_free(TlRec *x)
{
    if (!x) return;
    sim_timeline_free(&x->t);
    free(x);
}

/* r's record, created when r is the request asked for or (slowest mode) when `restoring` */
static TlRec *tl_rec(Sim *sm, Request *r, int restoring)
{
    MetricsObs *o = obs_of(sm);
    if (r->tl) return r->tl;
    if (o->tl_id >= 0 ? r->id != (uint64_t)o->tl_id : !restoring) return NULL;
    TlRec *x = calloc(1, sizeof *x);
    if (!x) {
        sim_fail(sm, "out of memory");
        return NULL;
    }
    x->next = o->live;
    if (o->live) o->live->prev = x;
    o->live = x;
    r->tl = x;
    return x;
}

static void tl_span(Sim *sm, TlRec *x, const char *lane, const char *what, int layer, int stage, int64_t t0, int64_t t1)
{
    SimTimeline *t = &x->t;
    if (t->n >= SIM_TL_MAX_SPANS) {
        t->truncated = 1;
        return;
    }
    if (t->n == t->cap) {
        int nc = t->cap ? 2 * t->cap : 256;
        SimTlSpan *ns = realloc(t->spans, (size_t)nc * sizeof *ns);
        if (!ns) {
            sim_fail(sm, "out of memory");
            return;
        }
        t->spans = ns;
        t->cap = nc;
    }
    t->spans[t->n++] = (SimTlSpan){lane, what, layer, stage, t0, t1};
}

static void tl_unlink(MetricsObs *o, TlRec *x)
{
    if (x->prev) x->prev->next = x->next;
    else o->live = x->next;
    if (x->next) x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

/* r is done: its record becomes the timeline (the request asked for, or the slowest so far) */
static void tl_done(Sim *sm, Request *r, int64_t restore_ns, int64_t restored_at)
{
    MetricsObs *o = obs_of(sm);
    TlRec *x = r->tl;
    r->tl = NULL;
    tl_unlink(o, x);
    if (o->tl_id < 0 && o->best && restore_ns <= o->best_restore_ns) {
        tl_rec_free(x);
        return;
    }
    SimTimeline *t = &x->t;
    t->found = 1;
    t->request = r->id;
    t->replica = r->replica;
    t->layers = sm->L;
    t->arrival_ns = r->arrival_ns;
    t->admit_ns = r->t_admit;
    t->restored_ns = restored_at;
    t->first_ns = r->t_first;
    t->history_tokens = r->hist;
    t->new_tokens = r->nnew;
    tl_rec_free(o->best);
    o->best = x;
    o->best_restore_ns = restore_ns;
}

/* the compute spans of the iteration just ended for every recorded request in it */
static void tl_iteration(Sim *sm, Replica *rp)
{
    MetricsObs *o = obs_of(sm);
    int64_t base = rp->iter_start_ns + sm->overhead_ns;
    int64_t walk0 = base, d = round_ns(rp->layer_ns[0]);
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        Request *r = it->r;
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) dup = rp->items[j].r == r;
        if (dup || it->type == IT_DECODE) continue;
        int recomp = 0, prefill = 0, stage_par = 0, lw = 0;
        for (int j = i; j < rp->n_items; j++) {
            if (rp->items[j].r != r) continue;
            if (rp->items[j].type == IT_RECOMP) recomp = 1;
            if (rp->items[j].type == IT_NEW) prefill = 1;
            if (rp->items[j].lw) {
                lw = recomp = 1;
                stage_par |= r->stage_par;
            }
        }
        TlRec *x = tl_rec(sm, r, recomp);
        if (!x) continue;
        const char *what = recomp && prefill ? "recompute+prefill" : recomp ? "recompute" : "prefill";
        if (stage_par) /* each stage's recompute lane, from its boundary activation's arrival (walk.c stage_lanes) */
            for (int st = 0; st < sm->S; st++)
                if (r->lane_ns[st] > 0) {
                    int64_t t0 = st > 0 && r->bnd_ns[st] > base ? r->bnd_ns[st] : base;
                    tl_span(sm, x, "gpu", "recompute", -1, st, t0, t0 + (int64_t)llround(r->lane_ns[st]));
                }
        for (int l = 0; l < sm->L; l++) {
            int64_t t0 = rp->any_lw ? o->layer_t0[(size_t)rp->id * sm->L + l] : walk0 + l * d;
            int64_t t1 = rp->any_lw ? o->layer_t1[(size_t)rp->id * sm->L + l] : walk0 + (l + 1) * d;
            const char *wl = what; /* layer-wise work: what this layer does for its state */
            if (lw && r->mode)
                wl = r->mode[l] == LM_RECOMPUTE ? (prefill ? "recompute+prefill" : "recompute")
                     : r->mode[l] == LM_LOAD_HIDDEN ? "projection+prefill" : "prefill";
            tl_span(sm, x, "gpu", wl, l, sm->stage_of[l], t0, t1);
        }
    }
}

void metrics_on_layer_walked(Sim *sm, Replica *rp, int l, int64_t t0_ns, int64_t t1_ns)
{
    MetricsObs *o = obs_of(sm);
    if (!o->tl_on) return;
    o->layer_t0[(size_t)rp->id * sm->L + l] = t0_ns;
    o->layer_t1[(size_t)rp->id * sm->L + l] = t1_ns;
}

void metrics_rec_free(Sim *sm)
{
    MetricsObs *o = sm->obs;
    if (!o || o == &g_obs_none) return;
    while (o->live) {
        TlRec *x = o->live;
        tl_unlink(o, x);
        tl_rec_free(x);
    }
    tl_rec_free(o->best);
    free(o->layer_t0);
    free(o->layer_t1);
    free(o->bins);
    free(o);
    sm->obs = NULL;
}

void metrics_rec_setup(Sim *sm)
{
    MetricsObs *o = sm->obs = calloc(1, sizeof *sm->obs);
    if (!o) {
        sm->obs = &g_obs_none; /* records nothing; the run fails at its first event */
        sim_fail(sm, "out of memory");
        return;
    }
    const SimRunOpts *op = sm->opts;
    if (!op) return;
    o->sink = op->sink;
    if (op->util && util_setup(sm, o) != 0) {
        sim_fail(sm, "out of memory");
        return;
    }
    o->util_on = op->util != NULL;
    if (op->timeline) {
        o->tl_on = 1;
        o->tl_id = op->timeline_request;
        o->layer_t0 = calloc((size_t)sm->R * (size_t)sm->L, sizeof *o->layer_t0);
        o->layer_t1 = calloc((size_t)sm->R * (size_t)sm->L, sizeof *o->layer_t1);
        if (!o->layer_t0 || !o->layer_t1) sim_fail(sm, "out of memory");
    }
}

/* an iteration of rp ran from t0 to t1 and stood for `steps` decode steps (a decode run: its steps
 * back to back from rp->run_start_ns; the GPU busy time is the run's, counted from rp->run_busy0; the
 * trace shows a run as one event with its step count) */
void metrics_on_iteration_span(Sim *sm, Replica *rp, int64_t t0_ns, int64_t t1_ns, int steps)
{
    MetricsObs *o = obs_of(sm);
    if (o->util_on)
        for (int st = 0; st < sm->S; st++) util_add(sm, o, o->res_gpu[st], t0_ns, t1_ns, rp->busy_stage_ns[st] - rp->run_busy0[st]);
    if (o->tl_on) tl_iteration(sm, rp);
    if (o->sink && o->sink->span) {
        int64_t tokens = 0;
        for (int i = 0; i < rp->n_items; i++) tokens += rp->items[i].tokens;
        SimSpan sp = {SIM_SPAN_ITERATION, rp->id, t0_ns, t1_ns, steps, rp->n_items, tokens, NULL, NULL, 0, -1, 0, 0};
        o->sink->span(o->sink->ctx, &sp);
    }
}

void metrics_rec_counter(Sim *sm, int replica, const char *name, double v)
{
    const SimEventSink *k = obs_of(sm)->sink;
    if (k && k->counter) k->counter(k->ctx, replica, name, sim_now(sm), v);
}

void metrics_rec_unit(Sim *sm, const Channel *c, const Unit *u, int load)
{
    MetricsObs *o = obs_of(sm);
    int64_t now = sim_now(sm);
    if (o->util_on) util_add(sm, o, o->res_ch[c->kind][c->stage], c->busy_since, now, (double)(now - c->busy_since));
    if (o->tl_on && load && u->r) {
        TlRec *x = tl_rec(sm, u->r, 1);
        const char *what = u->kind == U_LOAD_TOK ? "tokens" : u->r->mode && u->layer >= 0 && u->r->mode[u->layer] == LM_LOAD_HIDDEN ? "hidden" : "kv";
        if (x) tl_span(sm, x, c->name, what, u->layer, c->stage, c->busy_since, now);
    }
    if (o->sink && o->sink->span) {
        static const char *const unit_names[] = {"load", "load_tok", "save", "spill"};
        SimSpan sp = {SIM_SPAN_TRANSFER, -1, c->busy_since, now, 0, 0, 0, c->name,
                      unit_names[u->kind >= 0 && u->kind < 4 ? u->kind : 0], c->stage, u->layer,
                      load && u->r ? u->r->id : 0, u->bytes[u->hop]};
        sp.replica = load && u->r ? u->r->replica : u->s ? u->s->replica : 0;
        o->sink->span(o->sink->ctx, &sp);
    }
}

void metrics_rec_request_done(Sim *sm, Request *r, int64_t restore_ns, int64_t restored_at)
{
    if (r->tl) tl_done(sm, r, restore_ns, restored_at);
}

int metrics_rec_traced(const Sim *sm) { return obs_of(sm)->sink != NULL; }

int metrics_rec_reads_items(const Sim *sm)
{
    const MetricsObs *o = obs_of(sm);
    return o->tl_on || o->sink != NULL;
}

void metrics_rec_run_end(Sim *sm)
{
    if (obs_of(sm)->util_on) util_export(sm, sm->opts->util);
    if (obs_of(sm)->tl_on) { /* the timeline moves to the caller */
        SimTimeline *t = sm->opts->timeline;
        if (obs_of(sm)->best) {
            *t = obs_of(sm)->best->t;
            memset(&obs_of(sm)->best->t, 0, sizeof obs_of(sm)->best->t);
        } else {
            memset(t, 0, sizeof *t);
        }
    }
}
