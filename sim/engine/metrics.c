/* metrics.c — the metrics_on_* hooks (definitions in metrics.h and next to each hook).
 *
 * Responsible for: the two field tables (per tier: its hits and peak in SimResult; per channel
 * kind: the byte counters of loads and of writes) and every write into SimResult and the rows.
 * Not responsible for: decisions; formatting (results/).
 * Invariants: each counter has one writer (this file); floating-point sums are accumulated in event
 * order, as the engine always did (results are compared byte for byte).
 * Complexity: O(1) per hook; the end of a run O(replicas × stages).
 */
#include "sim/engine/metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/stats.h"

/* SimResult fields per tier row (hits, peak) and per channel kind (bytes read by loads, written) */
static const struct {
    size_t hits, peak;
} tier_fields[SIM_TIERS] = {
    [TIER_DRAM] = {offsetof(SimResult, hits_dram), offsetof(SimResult, dram_peak_bytes)},
    [TIER_SSD] = {offsetof(SimResult, hits_ssd), offsetof(SimResult, ssd_peak_bytes)},
    [TIER_REMOTE] = {offsetof(SimResult, hits_remote), offsetof(SimResult, remote_peak_bytes)},
};
static const struct {
    size_t load, other;
} ch_fields[CH_COUNT] = {
    [CH_H2D] = {offsetof(SimResult, bytes_h2d), offsetof(SimResult, bytes_h2d)},
    [CH_D2H] = {offsetof(SimResult, bytes_d2h), offsetof(SimResult, bytes_d2h)},
    [CH_SSD] = {offsetof(SimResult, bytes_ssd_read), offsetof(SimResult, bytes_ssd_write)},
    [CH_NIC_IN] = {offsetof(SimResult, bytes_net_in), offsetof(SimResult, bytes_net_in)},
    [CH_NIC_OUT] = {offsetof(SimResult, bytes_net_out), offsetof(SimResult, bytes_net_out)},
};

static double *res_double(SimResult *r, size_t off) { return (double *)(void *)((char *)r + off); }
static uint64_t *res_u64(SimResult *r, size_t off) { return (uint64_t *)(void *)((char *)r + off); }

/* ---- recordings asked for through SimRunOpts (none of them touches a result) ----
 * Utilisation windows: per resource (the GPU of each stage, each channel kind per stage) the busy
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

static void obs_free(Sim *sm)
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

void metrics_on_setup(Sim *sm)
{
    sm->res->pool_tokens = (uint64_t)sm->rep[0].pool_cap;
    sm->load.bin_ns = 1000000; /* 1 ms, doubled as the run grows */
    sm->load.t0_ns = sm->load.max_arrival_ns = sm->load.exo_last_ns = -1;
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

static void counter(Sim *sm, int replica, const char *name, double v)
{
    const SimEventSink *k = obs_of(sm)->sink;
    if (k && k->counter) k->counter(k->ctx, replica, name, sim_now(sm), v);
}

void metrics_on_event(Sim *sm) { sm->res->events++; }

/* ---- restoration windows ---- */

/* the window time of rp so far, open window included */
static double win_time(const Sim *sm, const Replica *rp)
{
    return rp->win_ns + (rp->n_restoring > 0 ? (double)(sim_now(sm) - rp->win_since) : 0);
}

/* a channel's busy time up to now (the unit in service counted up to now) */
static double ch_busy_now(const Sim *sm, const Channel *c)
{
    return c->busy_ns + (c->cur ? (double)(sim_now(sm) - c->busy_since) : 0);
}

/* the channels of kind k rp has: stages 0 .. this − 1 (0: none) */
static int rep_has_n(const Sim *sm, const Replica *rp, int k)
{
    int n = rp->has_ch[k] ? rep_ch_count(rp, k, sm->S) : 0;
    return n < SIM_MAX_STAGES ? n : SIM_MAX_STAGES;
}

void metrics_on_restoring(Sim *sm, Replica *rp, int delta)
{
    int was = rp->n_restoring;
    rp->n_restoring += delta;
    SIM_CHECK(sm, rp->n_restoring >= 0);
    if (was == 0 && rp->n_restoring > 0) {
        rp->win_since = sim_now(sm);
        for (int k = 0; k < CH_COUNT; k++)
            for (int st = 0, n = rep_has_n(sm, rp, k); st < n; st++) rp->win_ch_base[k][st] = ch_busy_now(sm, &rp->ch[k][st]);
    } else if (was > 0 && rp->n_restoring == 0) {
        rp->win_ns += (double)(sim_now(sm) - rp->win_since);
        for (int k = 0; k < CH_COUNT; k++)
            for (int st = 0, n = rep_has_n(sm, rp, k); st < n; st++)
                rp->win_ch_ns[k][st] += ch_busy_now(sm, &rp->ch[k][st]) - rp->win_ch_base[k][st];
    }
    if (obs_of(sm)->sink && delta) counter(sm, rp->id, "restoring", rp->n_restoring);
}

void metrics_on_iteration(Sim *sm, Replica *rp)
{
    sm->res->iterations++;
    rp->iter_win0_ns = win_time(sm, rp);
    for (int st = 0; st < sm->S; st++) rp->iter_busy0[st] = rp->busy_stage_ns[st];
}

/* The iteration in flight ended (now): the one place where an iteration, or a decode run of
 * rp->run_steps steps from rp->run_start_ns whose last step is this one (from rp->iter_start_ns), is
 * reported whole. GPU busy inside windows, per iteration: its busy time × the share of its span
 * inside a window (within an iteration the GPU's busy layers are taken as spread evenly); a run's
 * earlier steps had no window open (metrics_on_decode_steps). */
void metrics_on_iteration_done(Sim *sm, Replica *rp)
{
    double span = (double)(sim_now(sm) - rp->iter_start_ns);
    double in = win_time(sm, rp) - rp->iter_win0_ns;
    if (span <= 0 || in <= 0) return;
    double f = in >= span ? 1 : in / span;
    for (int st = 0; st < sm->S; st++) rp->win_gpu_ns[st] += (rp->busy_stage_ns[st] - rp->iter_busy0[st]) * f;
}

void metrics_on_fallback(Sim *sm, int slower)
{
    sm->res->fallbacks++;
    if (slower) sm->res->fallback_slower++;
    else sm->res->fallback_uncovered++;
}

void metrics_on_state_lost(Sim *sm, int why)
{
    if (why == LOST_TTL) sm->res->state_lost_ttl++;
    else sm->res->state_lost_capacity++;
}

/* restore_from for every combination of places, in the order dram, ssd, remote, in-flight */
static const char *const g_source_names[SRC_MASKS] = {
    "recompute", "dram", "ssd", "dram+ssd", "remote", "dram+remote", "ssd+remote", "dram+ssd+remote",
    "in-flight", "dram+in-flight", "ssd+in-flight", "dram+ssd+in-flight", "remote+in-flight",
    "dram+remote+in-flight", "ssd+remote+in-flight", "dram+ssd+remote+in-flight",
};

const char *metrics_source_name(int mask) { return g_source_names[mask & (SRC_MASKS - 1)]; }

/* bytes of one hop, on the link it crossed: loads read, saves and spills write (SSD counts both) */
void metrics_on_unit(Sim *sm, const Channel *c, const Unit *u)
{
    int load = u->kind == U_LOAD || u->kind == U_LOAD_TOK;
    *res_double(sm->res, load ? ch_fields[c->kind].load : ch_fields[c->kind].other) += u->bytes[u->hop];
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

/* SAVE_DIRECT: the iteration wrote `bytes` over D2H and on to the tier's own link (if any) */
void metrics_on_direct_save(Sim *sm, Tier t, double bytes)
{
    sm->res->bytes_d2h += bytes;
    int hop = tier_table[t].out_hop;
    if (hop >= 0) *res_double(sm->res, ch_fields[hop].other) += bytes;
}

void metrics_on_admit(Sim *sm, MetricSource src, Tier t)
{
    switch (src) {
    case MS_NO_HISTORY: sm->res->no_history++; break;
    case MS_RESIDENT: sm->res->hits_resident++; break;
    case MS_TIER: sm->tiers[t].hits++; break; /* (loads are counted when the request is done) */
    case MS_RECOMPUTE: sm->res->misses++; break;
    case MS_PREFIX: sm->res->hits_prefix++; break;
    }
}

/* a request whose context names blocks, admitted: what it took from the prefix cache */
void metrics_on_prefix(Sim *sm, const Request *r)
{
    sm->res->prefix_named++;
    if (r->pfx_hit <= 0) return;
    sm->res->prefix_hit_requests++;
    sm->res->prefix_hit_tokens += (uint64_t)r->pfx_hit;
}

/* HBM peak: the most KV tokens in use on one replica */
void metrics_on_pool(Sim *sm, const Replica *rp)
{
    if ((uint64_t)rp->pool_used > sm->res->hbm_peak_tokens) sm->res->hbm_peak_tokens = (uint64_t)rp->pool_used;
    if (obs_of(sm)->sink) { /* (called at each admission, after the request left the queue) */
        counter(sm, rp->id, "queue depth", (double)rp->q_len);
        counter(sm, rp->id, "kv pool tokens", (double)rp->pool_used);
    }
}

/* a tier's peak: the most bytes held at one place (one replica's DRAM or SSD, the remote store) */
void metrics_on_tier_bytes(Sim *sm, Tier t, double used_bytes)
{
    TierRun *tr = &sm->tiers[t];
    if (used_bytes > (double)tr->peak_bytes) tr->peak_bytes = (uint64_t)used_bytes;
}

void metrics_on_drop(Sim *sm) { sm->res->dropped++; }

static int trim_on(const Sim *sm) { return sm->cfg->warmup.n > 0 || sm->cfg->cooldown.n > 0; }

/* a request's own TBT statistics for one gap; with trimming on, the gaps of a request wait in it
 * until it is known to be kept (a warm-up request's are not kept at all) */
/* room in r's held-back gaps for `need` more (capacity doubling from 64); -1: out of memory (failed) */
static int gaps_room(Sim *sm, Request *r, int64_t need)
{
    if (r->n_gaps + need <= r->cap_gaps) return 0;
    int64_t nc = r->cap_gaps ? r->cap_gaps : 64;
    while (nc < r->n_gaps + need) nc *= 2;
    int64_t *ng = realloc(r->gaps, (size_t)nc * sizeof *ng);
    if (!ng) {
        sim_fail(sm, "out of memory");
        return -1;
    }
    r->gaps = ng;
    r->cap_gaps = nc;
    return 0;
}

static void request_gap(Sim *sm, Request *r, int64_t gap_ns, int trim)
{
    if (trim && !r->trim) {
        if (gaps_room(sm, r, 1) != 0) return;
        r->gaps[r->n_gaps++] = gap_ns;
    }
    r->tbt_sum += (double)gap_ns;
    if (gap_ns > r->tbt_max) r->tbt_max = gap_ns;
}

/* a decode token `gap_ns` after the previous one (time between tokens) */
void metrics_on_token(Sim *sm, Request *r, int64_t gap_ns)
{
    int trim = trim_on(sm);
    if (!trim) hist_add(&sm->res->tbt, (uint64_t)gap_ns);
    request_gap(sm, r, gap_ns, trim);
}

/* request_gap for a request's gaps g[0..n-1] (g[0] = first, then later[0..n-2], their sum `total`):
 * the same appends and maximum, and the same running sum — in one addition when that is exact (the
 * sum is an integer below 2^53 now and with the total added, every gap >= 0: each of the n additions
 * request_gap makes is exact, so they give the integer sum), else one by one */
static void request_gaps(Sim *sm, Request *r, int64_t first, const uint64_t *later, int64_t n, int64_t total,
                         int64_t later_max, int trim)
{
    if (trim && !r->trim) {
        if (gaps_room(sm, r, n) != 0) return;
        r->gaps[r->n_gaps++] = first;
        for (int64_t j = 0; j + 1 < n; j++) r->gaps[r->n_gaps++] = (int64_t)later[j];
    }
    const double lim = 9007199254740992.0; /* 2^53 */
    double s = r->tbt_sum;
    if (first >= 0 && s >= 0 && s < lim && s == (double)(int64_t)s && total < (int64_t)lim && s + (double)total < lim) {
        r->tbt_sum = s + (double)total;
    } else {
        r->tbt_sum += (double)first;
        for (int64_t j = 0; j + 1 < n; j++) r->tbt_sum += (double)later[j];
    }
    if (first > r->tbt_max) r->tbt_max = first;
    if (n > 1 && later_max > r->tbt_max) r->tbt_max = later_max;
}

/* The n steps of a decode run before its last, when the run is formed (every item of rp's batch
 * IT_DECODE; nothing else happens until they end): step 1 ends at start_ns + gaps[0], step j + 1
 * gaps[j] after step j; each item's first token comes end_1 − its t_last_tok after its previous one,
 * its later ones gaps[1..n-1] after each other. The same updates as their own iterations and
 * iteration-end events would have made — the counters, and metrics_on_token per item and step: the
 * TBT histogram gets step 1's gaps in item order (consecutive equal ones as one weighted add), then
 * each later step's gap once per item (hist_add_each_n: exactly those adds, in step order); each
 * request's own statistics get its gaps in step order (request_gaps), requests taken one after the
 * other (what one request's statistics hold does not depend on another's). O(n + items). */
void metrics_on_decode_steps(Sim *sm, Replica *rp, int64_t start_ns, const uint64_t *gaps, int64_t n)
{
    sm->res->iterations += (uint64_t)n;
    sm->res->events += (uint64_t)n; /* the iteration-end events these steps stand for */
    int trim = trim_on(sm);
    int64_t end1 = start_ns + (int64_t)gaps[0], later_sum = 0, later_max = 0;
    for (int64_t j = 1; j < n; j++) {
        later_sum += (int64_t)gaps[j]; /* (≤ the run's span: no overflow) */
        if ((int64_t)gaps[j] > later_max) later_max = (int64_t)gaps[j];
    }
    int64_t run_gap = 0;
    uint64_t run_n = 0;
    for (int i = 0; i < rp->n_items; i++) {
        Request *r = rp->items[i].r;
        int64_t gap = end1 - r->t_last_tok;
        if (!trim) {
            if (run_n && gap != run_gap) {
                hist_add_n(&sm->res->tbt, (uint64_t)run_gap, run_n);
                run_n = 0;
            }
            run_gap = gap;
            run_n++;
        }
        request_gaps(sm, r, gap, gaps + 1, n, gap + later_sum, later_max, trim);
    }
    if (run_n) hist_add_n(&sm->res->tbt, (uint64_t)run_gap, run_n);
    if (!trim) hist_add_each_n(&sm->res->tbt, gaps + 1, (size_t)(n - 1), (uint64_t)rp->n_items);
}

/* A request's arrival is the load process's time (offered_ns). Warm-up is decided here: the first
 * `warmup` requests of the stream, or those arriving less than `warmup` after the run's first arrival. */
void metrics_on_exogenous(Sim *sm, int64_t t_ns)
{
    if (t_ns > sm->load.exo_last_ns) sm->load.exo_last_ns = t_ns;
}

void metrics_on_release(Sim *sm, Turn *r)
{
    LoadAcc *L = &sm->load;
    if (L->t0_ns < 0 || r->offered_ns < L->t0_ns) L->t0_ns = r->offered_ns;
    if (r->offered_ns > L->max_arrival_ns) L->max_arrival_ns = r->offered_ns;
    const SimTrim *w = &sm->cfg->warmup;
    if (w->n > 0) r->trim = w->by_time ? r->offered_ns - L->t0_ns < w->n : r->id < (uint64_t)w->n;
    if (obs_of(sm)->sink) counter(sm, r->s->replica, "queue depth", (double)sm->rep[r->s->replica].q_len + 1); /* it joins the queue */
}


/* what a completed request contributes to the reported metrics */
typedef struct ReqSample {
    uint64_t id;
    int64_t offered, done, wait, ttft, queue, restore, prefill, hist, nnew, nout, out_done;
    double lb_ns;
    int slo;
} ReqSample;

struct TrimPending {
    ReqSample x;
    int64_t *gaps;
    int64_t n_gaps;
};

/* the time series: whole bins from t = 0, merged pairwise (width doubled) when t passes the last bin */
static void series_cover(LoadAcc *L, int64_t t_ns)
{
    while (t_ns / LOAD_BINS >= L->bin_ns) {
        for (int i = 0; i < LOAD_BINS / 2; i++) {
            LoadBin *a = &L->bin[2 * i], *b = &L->bin[2 * i + 1];
            LoadBin m = {a->n + b->n, a->st + b->st, a->sy + b->sy, a->stt + b->stt, a->sty + b->sty, a->syy + b->syy,
                         a->nd + b->nd};
            L->bin[i] = m;
        }
        memset(&L->bin[LOAD_BINS / 2], 0, sizeof L->bin[0] * (LOAD_BINS / 2));
        L->bin_ns *= 2;
    }
}

/* a kept request: its arrival with y = session wait + TTFT (arrival to first token), and its completion */
static void series_add(LoadAcc *L, int64_t t_ns, double y_s, int64_t done_ns)
{
    series_cover(L, t_ns > done_ns ? t_ns : done_ns);
    LoadBin *b = &L->bin[t_ns / L->bin_ns];
    double t = (double)t_ns / 1e9;
    b->n += 1;
    b->st += t;
    b->sy += y_s;
    b->stt += t * t;
    b->sty += t * y_s;
    b->syy += y_s * y_s;
    L->bin[done_ns / L->bin_ns].nd += 1;
}

static int hist_class(const Sim *sm, int64_t hist)
{
    if (hist < sm->cfg->class_edges[0]) return 0;
    if (hist < sm->cfg->class_edges[1]) return 1;
    return 2;
}

/* a kept request into every reported metric (gaps: its TBT gaps when trimming held them back) */
static void sample_add(Sim *sm, const ReqSample *x, const int64_t *gaps, int64_t n_gaps)
{
    SimResult *res = sm->res;
    hist_add(&res->ttft, (uint64_t)x->ttft);
    hist_add(&res->queue, (uint64_t)x->queue);
    hist_add(&res->restore, (uint64_t)x->restore);
    hist_add(&res->prefill, (uint64_t)x->prefill);
    for (int64_t i = 0; i < n_gaps; i++) hist_add(&res->tbt, (uint64_t)gaps[i]);
    res->slo_met += (uint64_t)x->slo;
    int c = hist_class(sm, x->hist);
    hist_add(&res->cls[c].ttft, (uint64_t)x->ttft);
    hist_add(&res->cls[c].restore, (uint64_t)x->restore);
    res->cls[c].n++;
    res->cls[c].slo_met += (uint64_t)x->slo;
    if (x->restore > 0) {
        res->restored_tokens += (uint64_t)x->hist;
        res->restore_busy_ns += (double)x->restore;
        if (x->lb_ns > 0) hist_add(&res->lb_ratio, (uint64_t)llround(1000.0 * (double)x->restore / x->lb_ns));
    }
    res->requests++;
    /* the load window */
    SimLoad *ld = &res->load;
    if (ld->kept == 0 || x->offered < ld->first_arrival_ns) ld->first_arrival_ns = x->offered;
    if (ld->kept == 0 || x->offered > ld->last_arrival_ns) ld->last_arrival_ns = x->offered;
    if (x->done > ld->last_done_ns) ld->last_done_ns = x->done;
    ld->kept++;
    ld->input_tokens += (double)(x->hist + x->nnew);
    ld->new_input_tokens += (double)x->nnew;
    ld->output_tokens += (double)x->out_done;
    ld->good += (uint64_t)x->slo;
    if (x->wait > 0) {
        ld->waited++;
        ld->wait_sum_ns += (double)x->wait;
        if (x->wait > ld->wait_max_ns) ld->wait_max_ns = x->wait;
    }
    series_add(&sm->load, x->offered, (double)(x->wait + x->ttft) / 1e9, x->done);
}

/* cool-down: 1 left out, 0 kept, -1 not known yet (final: at the end of the run, always known) */
static int cooldown_state(const Sim *sm, const ReqSample *x, int final)
{
    const SimTrim *c = &sm->cfg->cooldown;
    if (c->n <= 0) return 0;
    if (!c->by_time) { /* the last n of the stream: id >= total − n, total = next_req_id at the end */
        if (x->id + (uint64_t)c->n < sm->next_req_id) return 0;
        return final || sm->trace_done ? 1 : -1;
    }
    /* arriving in the last n of the arrivals: offered > last arrival − n (the latest so far only grows) */
    if (x->offered + c->n <= sm->load.max_arrival_ns) return 0;
    return final ? 1 : -1;
}

/* decide the held-back requests that can be decided (all of them when final) */
static void trim_scan(Sim *sm, int final)
{
    LoadAcc *L = &sm->load;
    size_t k = 0;
    for (size_t i = 0; i < L->n_pend; i++) {
        TrimPending *p = &L->pend[i];
        int st = cooldown_state(sm, &p->x, final);
        if (st < 0) {
            L->pend[k++] = *p;
            continue;
        }
        if (st == 0) sample_add(sm, &p->x, p->gaps, p->n_gaps);
        else sm->res->load.trimmed_cooldown++;
        free(p->gaps);
    }
    L->n_pend = k;
    L->scan_at = k * 2 > 64 ? k * 2 : 64; /* amortised O(1) per request */
}

/* TTFT = first token − release; queue = admission − release; restore = restored − admission
 * (0 when nothing was restored; capped at the first token); prefill = the rest of TTFT, so that
 * queue + restore + prefill = TTFT for every request. SLO: TTFT and mean TBT within bounds.
 * With warmup/cooldown set, only kept requests enter these metrics (every request gets its row). */
void metrics_on_request_done(Sim *sm, Request *r)
{
    SimResult *res = sm->res;
    int64_t ttft = r->t_first - r->arrival_ns;
    int64_t queue = r->t_admit - r->arrival_ns;
    /* restore ends when the last restored state is in place — its arrival and the compute that turns
     * it into KV (t_restored) — and never after the first token, so that the split adds up exactly */
    int64_t t_rest = r->t_restored < r->t_first ? r->t_restored : r->t_first;
    int64_t restore = t_rest > r->t_admit ? t_rest - r->t_admit : 0;
    int64_t prefill = ttft - queue - restore;
    SIM_CHECK(sm, queue >= 0 && prefill >= 0);
    const char *from = r->from;
    if (r->src_mask) { /* loaded: one place (a save's DRAM copy counts as DRAM), or a mix */
        from = metrics_source_name(r->src_mask);
        int m = r->src_mask & (SRC_DRAM | SRC_SSD | SRC_REMOTE);
        if (r->src_mask & SRC_INFLIGHT) m |= SRC_DRAM;
        if (m == SRC_DRAM) sm->tiers[TIER_DRAM].hits++;
        else if (m == SRC_SSD) sm->tiers[TIER_SSD].hits++;
        else if (m == SRC_REMOTE) sm->tiers[TIER_REMOTE].hits++;
        else res->hits_mixed++;
        if (r->src_mask & SRC_INFLIGHT) {
            res->restore_waits++;
            res->restore_wait_ns += (double)r->wait_max_ns;
        }
    }
    double tbt_mean = r->out_done > 1 ? r->tbt_sum / (double)(r->out_done - 1) : 0;
    int slo = ttft <= sm->cfg->slo_ttft_ns && (r->out_done <= 1 || tbt_mean <= (double)sm->cfg->slo_tbt_ns);
    int64_t offered = r->offered_ns >= 0 && r->offered_ns <= r->arrival_ns ? r->offered_ns : r->arrival_ns;
    ReqSample x = {r->id, offered, r->t_last_tok, r->arrival_ns - offered, ttft, queue, restore, prefill, r->hist,
                   r->nnew, r->nout, r->out_done, r->lb_ns, slo};
    if (!trim_on(sm)) {
        sample_add(sm, &x, NULL, 0);
    } else if (r->trim) {
        res->load.trimmed_warmup++;
    } else {
        int st = cooldown_state(sm, &x, 0);
        if (st == 0) {
            sample_add(sm, &x, r->gaps, r->n_gaps);
        } else if (st > 0) {
            res->load.trimmed_cooldown++;
        } else {
            LoadAcc *L = &sm->load;
            if (L->n_pend == L->cap_pend) {
                size_t nc = L->cap_pend ? 2 * L->cap_pend : 64;
                TrimPending *np = realloc(L->pend, nc * sizeof *np);
                if (!np) {
                    sim_fail(sm, "out of memory");
                    return;
                }
                L->pend = np;
                L->cap_pend = nc;
            }
            L->pend[L->n_pend++] = (TrimPending){x, r->gaps, r->n_gaps};
            r->gaps = NULL;
            r->n_gaps = r->cap_gaps = 0;
            if (L->n_pend >= L->scan_at) trim_scan(sm, 0);
        }
    }
    if (r->tl) tl_done(sm, r, restore, t_rest);
    if (sm->row_fn) {
        /* recomputed: token-wise prefix + whole-model recompute + layer-wise recompute (counted once per
         * token even if only some layers were recomputed); loaded: tokens whose state came from a tier */
        int64_t recomputed = r->tw_comp + r->recompute_total, loaded = r->tw_landed;
        if (r->mode && r->mode[0] == LM_RECOMPUTE) recomputed += r->lw_tokens;
        if (r->mode && r->src != TIER_NONE) loaded += r->lw_tokens;
        SimRequestRow row = {r->id, r->s->id, r->turn, r->replica, r->arrival_ns, r->hist, r->nnew, r->nout,
                             from, recomputed, loaded, queue, restore, prefill, ttft, r->t_last_tok,
                             tbt_mean, r->tbt_max, r->lb_ns, r->s->name ? r->s->name : "", offered,
                             r->arrival_ns - offered, r->preempts, r->pfx_hit};
        if (sm->row_fn(sm->row_ctx, &row, sm->e) != 0) sm->failed = 1;
    }
}

/* The load window is [first kept arrival, the last arrival the load process made on its own]: after
 * it no new session starts and the run drains (the late turns of the last sessions), which is not
 * the load under test. Over the window: offered = kept requests arriving in it / its length; served
 * = kept requests done in it / its length. Steady-state test: least squares of y = session wait +
 * TTFT (arrival to first token) on the arrival time, by batch means: the second half of the window
 * cut into LOAD_BATCHES batches of arrival time, each batch's mean arrival and mean delay one point
 * (the turns of a session are correlated; batch means are nearly independent); not steady when the
 * slope is positive at the 99.5 % one-sided level (Student t, batches − 2 df) AND the fitted growth over that half passes max(1 ms, 10 % of slo_ttft) (a workload
 * whose mix drifts, e.g. histories still growing, fails it too). Overloaded: queues build up — not
 * steady with a growth above max(slo_ttft, that threshold) — or (at least 20 requests in the
 * window) served below 90 % of offered, or the backlog spilled past the window: the requests arriving
 * after it (at least 10: the last turns of the sessions started in it) waited on average more than
 * max(slo_ttft, threshold) longer than those arriving in it. Bins are whole
 * (the window's ends are rounded to the bin width, at most 1/128 of the run's span). */
static void load_finish(Sim *sm)
{
    SimLoad *ld = &sm->res->load;
    LoadAcc *L = &sm->load;
    ld->threshold_s = fmax(0.001, 0.1 * (double)sm->cfg->slo_ttft_ns / 1e9);
    ld->steady = 1;
    ld->window_start_ns = ld->first_arrival_ns;
    ld->window_end_ns = L->exo_last_ns > ld->first_arrival_ns ? L->exo_last_ns : ld->last_arrival_ns;
    double run_s = (double)(ld->last_done_ns - ld->first_arrival_ns) / 1e9;
    ld->throughput_per_s = run_s > 0 && ld->kept ? (double)ld->kept / run_s : NAN; /* absent: no request measured */
    if (ld->kept == 0 || ld->window_end_ns <= ld->window_start_ns) return;
    int64_t mid_ns = ld->window_start_ns + (ld->window_end_ns - ld->window_start_ns) / 2;
    /* batch means over the last half (turns of one session are correlated; batches of arrival time
     * make the points nearly independent): LOAD_BATCHES batches of equal width, each its mean arrival
     * and mean delay */
    double bn[LOAD_BATCHES] = {0}, bt[LOAD_BATCHES] = {0}, by[LOAD_BATCHES] = {0};
    double arrived = 0, done = 0, fn = 0, fy = 0, an = 0, ay = 0, dn = 0, dy = 0;
    for (int i = 0; i < LOAD_BINS; i++) {
        LoadBin *b = &L->bin[i];
        int64_t start = (int64_t)i * L->bin_ns;
        if (start > ld->window_end_ns) {
            dn += b->n, dy += b->sy;
            continue;
        }
        arrived += b->n;
        done += b->nd;
        if (start < mid_ns) {
            fn += b->n, fy += b->sy;
            continue;
        }
        an += b->n, ay += b->sy;
        int k = (int)((double)(start - mid_ns) * LOAD_BATCHES / (double)(ld->window_end_ns - mid_ns + 1));
        if (k >= LOAD_BATCHES) k = LOAD_BATCHES - 1;
        bn[k] += b->n, bt[k] += b->st, by[k] += b->sy;
    }
    double span_s = (double)(ld->window_end_ns - ld->window_start_ns) / 1e9;
    ld->window_requests = (uint64_t)arrived;
    ld->offered_per_s = arrived / span_s;
    ld->served_per_s = done / span_s;
    ld->half_n = (uint64_t)an;
    ld->delay_first_half_s = fn > 0 ? fy / fn : 0;
    ld->delay_last_half_s = an > 0 ? ay / an : 0;
    ld->after_n = (uint64_t)dn;
    ld->delay_after_s = dn > 0 ? dy / dn : 0;
    double wmean = fn + an > 0 ? (fy + ay) / (fn + an) : 0;
    double k = 0, st = 0, sy = 0, stt = 0, sty = 0, syy = 0;
    for (int b = 0; b < LOAD_BATCHES; b++) {
        if (bn[b] <= 0) continue;
        double t = bt[b] / bn[b], y = by[b] / bn[b];
        k += 1, st += t, sy += y, stt += t * t, sty += t * y, syy += y * y;
    }
    ld->batches = (int)k;
    if (k >= 5 && an >= 10) {
        double sxx = stt - st * st / k, sxy = sty - st * sy / k, syy_c = syy - sy * sy / k;
        if (sxx > 0) {
            ld->slope = sxy / sxx;
            double resid = (syy_c - ld->slope * sxy) / (k - 2);
            double se = resid > 0 ? sqrt(resid / sxx) : 0;
            ld->slope_t = se > 0 ? ld->slope / se : ld->slope > 0 ? 1e9 : 0;
            if (ld->slope_t > 1e9) ld->slope_t = 1e9;
            KvErr e;
            if (stats_t_quantile(k - 2, 0.995, &ld->t_crit, &e) != 0) ld->t_crit = 3.0;
            ld->growth_s = ld->slope * (double)(ld->window_end_ns - mid_ns) / 1e9;
            ld->steady = !(ld->slope_t > ld->t_crit && ld->growth_s > ld->threshold_s);
        }
    }
    ld->overload_growth_s = (double)sm->cfg->slo_ttft_ns / 1e9;
    if (ld->overload_growth_s < ld->threshold_s) ld->overload_growth_s = ld->threshold_s;
    ld->backlog_s = dn >= 10 ? ld->delay_after_s - wmean : 0;
    ld->overloaded = (!ld->steady && ld->growth_s > ld->overload_growth_s) ||
                     (arrived >= 20 && ld->served_per_s < 0.9 * ld->offered_per_s) || ld->backlog_s > ld->overload_growth_s;
}

void metrics_free(Sim *sm)
{
    LoadAcc *L = &sm->load;
    for (size_t i = 0; i < L->n_pend; i++) free(L->pend[i].gaps);
    free(L->pend);
    L->pend = NULL;
    L->n_pend = L->cap_pend = 0;
    obs_free(sm);
}

/* utilisation = busy time / (simulated time × replicas), per stage for the GPU and its links */
void metrics_on_run_end(Sim *sm)
{
    SimResult *out = sm->res;
    SimWorld *w = sm->w;
    out->sim_end_ns = sim_now(sm); /* (evq: a cancelled event's time included, as its pop would have) */
    out->queue_events = sm->q.popped;
    out->load_runs = sm->load_runs;
    out->events += sm->q.cancelled; /* a re-armed channel's cancelled events: counted as the pops they replace */
    out->waiting_peak_bytes = sm->waiting_peak;
    out->sessions = sm->sessions_seen;
    out->truncated = (uint64_t)trace_truncated_count(sm->trace);
    out->prefix_block_tokens = sm->pfx_B;
    for (int i = 0; i < sm->R; i++) {
        const PrefixStats *ps = &sm->rep[i].pfx.st;
        out->prefix_lookups += (uint64_t)ps->lookups;
        out->prefix_hits += (uint64_t)ps->hits;
        out->prefix_inserted += (uint64_t)ps->inserted;
        out->prefix_deduplicated += (uint64_t)ps->deduplicated;
        out->prefix_evicted += (uint64_t)ps->evicted;
    }
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
        *res_u64(out, tier_fields[t].hits) = sm->tiers[t].hits;
        *res_u64(out, tier_fields[t].peak) = sm->tiers[t].peak_bytes;
    }
    double T = (double)(out->sim_end_ns > 0 ? out->sim_end_ns : 1);
    for (int s = 0; s < sm->S; s++) {
        double g = 0, h = 0, d = 0;
        for (int i = 0; i < sm->R; i++) {
            g += sm->rep[i].busy_stage_ns[s];
            h += sm->rep[i].ch[CH_H2D][s].busy_ns;
            d += sm->rep[i].ch[CH_D2H][s].busy_ns;
        }
        out->util_gpu[s] = g / (T * sm->R);
        out->util_h2d[s] = h / (T * sm->R);
        out->util_d2h[s] = d / (T * sm->R);
    }
    for (int i = 0; i < sm->R; i++) {
        out->util_ssd += sm->rep[i].ch[CH_SSD][0].busy_ns / (T * sm->R);
        int nn = rep_ch_count(&sm->rep[i], CH_NIC_IN, sm->S); /* per-stage NICs: their mean */
        for (int st = 0; st < nn; st++) {
            out->util_nic_in += sm->rep[i].ch[CH_NIC_IN][st].busy_ns / (T * sm->R * nn);
            out->util_nic_out += sm->rep[i].ch[CH_NIC_OUT][st].busy_ns / (T * sm->R * nn);
        }
    }
    /* inside restoration windows: busy time in windows / window time, summed over replicas */
    double win = 0, ssd = 0, nin = 0, nout = 0;
    for (int i = 0; i < sm->R; i++) {
        Replica *rp = &sm->rep[i];
        if (rp->n_restoring > 0) { /* (a failed run may end inside one) */
            rp->n_restoring = 1;
            metrics_on_restoring(sm, rp, -1);
        }
        win += rp->win_ns;
        ssd += rp->win_ch_ns[CH_SSD][0];
        int nn = rep_ch_count(rp, CH_NIC_IN, sm->S); /* per-stage NICs: their mean */
        for (int st = 0; st < nn; st++) {
            nin += rp->win_ch_ns[CH_NIC_IN][st] / nn;
            nout += rp->win_ch_ns[CH_NIC_OUT][st] / nn;
        }
    }
    out->win_ns = win;
    if (win > 0) {
        for (int s = 0; s < sm->S; s++) {
            double g = 0, h = 0, d = 0;
            for (int i = 0; i < sm->R; i++) {
                g += sm->rep[i].win_gpu_ns[s];
                h += sm->rep[i].win_ch_ns[CH_H2D][s];
                d += sm->rep[i].win_ch_ns[CH_D2H][s];
            }
            out->win_util_gpu[s] = g / win;
            out->win_util_h2d[s] = h / win;
            out->win_util_d2h[s] = d / win;
        }
        out->win_util_ssd = ssd / win;
        out->win_util_nic_in = nin / win;
        out->win_util_nic_out = nout / win;
    }
    trim_scan(sm, 1);
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
    metrics_free(sm);
    load_finish(sm);
    out->extrapolations = cost_extrapolations_total(&w->cost);
    memcpy(out->extrapolations_op, w->cost.extrapolations, sizeof out->extrapolations_op);
    if (sm->pol->notes) sm->pol->notes(sm->pstate, out->policy_notes, sizeof out->policy_notes);
}
