/* metrics_trim.c — warm-up/cool-down trimming and what a kept request adds to the results: the TBT
 * gaps (held back in the request until it is known to be kept), its latency split, SLO and class
 * into the histograms, and the load (SimLoad: the load window, throughput, the session wait, the
 * steady-state test and the overloaded flag). metrics.c calls in here from its hooks (metrics_int.h).
 *
 * Responsible for: sm->load (LoadAcc) and the SimResult fields a kept request adds to.
 * Not responsible for: a request's row and restore sources (metrics.c, metrics_on_request_done).
 * Invariants: with trimming off every sample enters the metrics in completion order, the same
 * order as without this file's hold-back (results are compared byte for byte).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/stats.h"
#include "sim/engine/metrics_int.h"

static int trim_on(const Sim *sm) { return sm->cfg->warmup.n > 0 || sm->cfg->cooldown.n > 0; }

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

/* a request's own TBT statistics for one gap; with trimming on, the gaps of a request wait in it
 * until it is known to be kept (a warm-up request's are not kept at all) */
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

/* The n steps of a decode run before its last, when they are taken (every item of rp's batch
 * IT_DECODE; nothing else happens until they end): step 1 ends at start_ns + gaps[0], step j + 1
 * gaps[j] after step j; each item's first token comes end_1 − its last token's time after its
 * previous one (last_tok_ns, or when it is -1 each item's t_last_tok), its later ones gaps[1..n-1]
 * after each other. The run-wide updates their own iterations and iteration-end events would have
 * made — the counters, and the TBT histogram's share of metrics_on_token per item and step: step
 * 1's gaps in item order (consecutive equal ones as one weighted add), then each later step's gap
 * once per item (hist_add_each_n: exactly those adds, in step order). Each request's own
 * statistics: metrics_on_decode_tokens. O(n + items). */
void metrics_on_decode_steps(Sim *sm, Replica *rp, int64_t start_ns, int64_t last_tok_ns, const uint64_t *gaps, int64_t n)
{
    sm->res->iterations += (uint64_t)n;
    sm->res->events += (uint64_t)n; /* the iteration-end events these steps stand for */
    sm->res->decode_steps += (uint64_t)n;
    if (trim_on(sm)) return;
    int64_t end1 = start_ns + (int64_t)gaps[0];
    if (last_tok_ns >= 0) {
        hist_add_n(&sm->res->tbt, (uint64_t)(end1 - last_tok_ns), (uint64_t)rp->n_items);
    } else {
        int64_t run_gap = 0;
        uint64_t run_n = 0;
        for (int i = 0; i < rp->n_items; i++) {
            int64_t gap = end1 - rp->items[i].r->t_last_tok;
            if (run_n && gap != run_gap) {
                hist_add_n(&sm->res->tbt, (uint64_t)run_gap, run_n);
                run_n = 0;
            }
            run_gap = gap;
            run_n++;
        }
        if (run_n) hist_add_n(&sm->res->tbt, (uint64_t)run_gap, run_n);
    }
    hist_add_each_n(&sm->res->tbt, gaps + 1, (size_t)(n - 1), (uint64_t)rp->n_items);
}

/* The TBT histogram's share of metrics_on_token for the tokens of a step of rp's decode batch that
 * ends now: each item's gap since its last token (last_tok_ns, or when it is -1 each item's
 * t_last_tok), in item order; one weighted add when they are all the same. O(1) or O(items). */
void metrics_on_step_tokens(Sim *sm, Replica *rp, int64_t last_tok_ns)
{
    if (trim_on(sm)) return;
    int64_t now = sim_now(sm);
    if (last_tok_ns >= 0) {
        hist_add_n(&sm->res->tbt, (uint64_t)(now - last_tok_ns), (uint64_t)rp->n_items);
        return;
    }
    for (int i = 0; i < rp->n_items; i++) hist_add(&sm->res->tbt, (uint64_t)(now - rp->items[i].r->t_last_tok));
}

/* Each request's own share of metrics_on_token for n steps of a decode run (as
 * metrics_on_decode_steps describes them; the items' t_last_tok still that of before the steps):
 * its gaps in step order (request_gaps), requests taken one after the other (what one request's
 * statistics hold does not depend on another's). O(items), O(n) per request on the inexact path. */
void metrics_on_decode_tokens(Sim *sm, Replica *rp, int64_t start_ns, const uint64_t *gaps, int64_t n)
{
    int trim = trim_on(sm);
    int64_t end1 = start_ns + (int64_t)gaps[0], later_sum = 0, later_max = 0;
    for (int64_t j = 1; j < n; j++) {
        later_sum += (int64_t)gaps[j]; /* (≤ the run's span: no overflow) */
        if ((int64_t)gaps[j] > later_max) later_max = (int64_t)gaps[j];
    }
    for (int i = 0; i < rp->n_items; i++) {
        Request *r = rp->items[i].r;
        int64_t gap = end1 - r->t_last_tok;
        request_gaps(sm, r, gap, gaps + 1, n, gap + later_sum, later_max, trim);
    }
}

void metrics_on_exogenous(Sim *sm, int64_t t_ns)
{
    if (t_ns > sm->load.exo_last_ns) sm->load.exo_last_ns = t_ns;
}

/* A request's arrival is the load process's time (offered_ns). Warm-up is decided here: the first
 * `warmup` requests of the stream, or those arriving less than `warmup` after the run's first arrival. */
void metrics_on_release(Sim *sm, Turn *r)
{
    LoadAcc *L = &sm->load;
    if (L->t0_ns < 0 || r->offered_ns < L->t0_ns) L->t0_ns = r->offered_ns;
    if (r->offered_ns > L->max_arrival_ns) L->max_arrival_ns = r->offered_ns;
    const SimTrim *w = &sm->cfg->warmup;
    if (w->n > 0) r->trim = w->by_time ? r->offered_ns - L->t0_ns < w->n : r->id < (uint64_t)w->n;
    if (metrics_rec_traced(sm)) metrics_rec_counter(sm, r->s->replica, "queue depth", (double)sm->rep[r->s->replica].q_len + 1); /* it joins the queue */
}

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
    hist_add(&res->e2e, (uint64_t)(x->done - (x->offered + x->wait))); /* offered + wait: the release */
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
void metrics_trim_scan(Sim *sm, int final)
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

/* a completed request's sample x: into the metrics now (trimming off, or kept), left out (warm-up,
 * cool-down), or held back with its gaps until its cool-down is decided; -1: out of memory (failed) */
int metrics_trim_sample(Sim *sm, Request *r, const ReqSample *x)
{
    SimResult *res = sm->res;
    if (!trim_on(sm)) {
        sample_add(sm, x, NULL, 0);
    } else if (r->trim) {
        res->load.trimmed_warmup++;
    } else {
        int st = cooldown_state(sm, x, 0);
        if (st == 0) {
            sample_add(sm, x, r->gaps, r->n_gaps);
        } else if (st > 0) {
            res->load.trimmed_cooldown++;
        } else {
            LoadAcc *L = &sm->load;
            if (L->n_pend == L->cap_pend) {
                size_t nc = L->cap_pend ? 2 * L->cap_pend : 64;
                TrimPending *np = realloc(L->pend, nc * sizeof *np);
                if (!np) return sim_fail(sm, "out of memory");
                L->pend = np;
                L->cap_pend = nc;
            }
            L->pend[L->n_pend++] = (TrimPending){*x, r->gaps, r->n_gaps};
            r->gaps = NULL;
            r->n_gaps = r->cap_gaps = 0;
            if (L->n_pend >= L->scan_at) metrics_trim_scan(sm, 0);
        }
    }
    return 0;
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
void metrics_load_finish(Sim *sm)
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

void metrics_trim_free(Sim *sm)
{
    LoadAcc *L = &sm->load;
    for (size_t i = 0; i < L->n_pend; i++) free(L->pend[i].gaps);
    free(L->pend);
    L->pend = NULL;
    L->n_pend = L->cap_pend = 0;
}
