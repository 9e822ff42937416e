/* metrics.c — the metrics_on_* hooks that write SimResult (definitions in metrics.h and next to
 * each hook), a request's row, and the end of a run. The recordings asked for through SimRunOpts
 * are in metrics_rec.c; warm-up/cool-down trimming, the samples of kept requests and the load in
 * metrics_trim.c (both called from here through metrics_int.h).
 *
 * Responsible for: the two field tables (per tier: its hits and peak in SimResult; per channel
 * kind: the byte counters of loads and of writes), the restoration windows, the counters, a
 * request's latency split, restore sources and row, the utilisations at the end of a run.
 * Not responsible for: decisions; formatting (results/).
 * Invariants: each counter has one writer (this module); floating-point sums are accumulated in
 * event order, as the engine always did (results are compared byte for byte).
 * Complexity: O(1) per hook; the end of a run O(replicas × stages).
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "sim/engine/metrics_int.h"

/* SSD wear: the bytes the saves and spills wrote per drive, as drive writes per simulated day, and
 * the years the drive's rated writes (dwpd × capacity × 365 days × warranty years) last at that
 * rate. T: the simulated time (ns). */
static void metrics_ssd_wear(const Sim *sm, SimResult *out, double T)
{
    out->ssd_dwpd = out->ssd_life_years = NAN;
    if (!sm->ssd || !sm->tiers[TIER_SSD].on) return;
    double per_drive_day = out->ch_bytes[CH_SSD][CH_WRITE] / ((double)sm->R * sm->n_ssd) * (86400e9 / T);
    out->ssd_dwpd = per_drive_day / (double)sm->ssd->capacity_bytes;
    if (sm->ssd->dwpd > 0 && sm->ssd->warranty_years > 0 && out->ssd_dwpd > 0)
        out->ssd_life_years = sm->ssd->warranty_years * sm->ssd->dwpd / out->ssd_dwpd;
}

/* where a hop's bytes count: a link that writes at its own rate counts its writes apart */
static double *ch_bytes_at(SimResult *r, int kind, int reads)
{
    return &r->ch_bytes[kind][!reads && sim_channel_rows[kind].write_key ? CH_WRITE : CH_READ];
}

void metrics_on_setup(Sim *sm)
{
    sm->res->pool_tokens = (uint64_t)sm->rep[0].pool_cap;
    sm->load.bin_ns = 1000000; /* 1 ms, doubled as the run grows */
    sm->load.t0_ns = sm->load.max_arrival_ns = sm->load.exo_last_ns = -1;
    metrics_rec_setup(sm);
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
    if (metrics_rec_traced(sm) && delta) metrics_rec_counter(sm, rp->id, "restoring", rp->n_restoring);
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

/* restore_from for every combination of places: the tiers' names in tier order, then in-flight,
 * joined by '+' ("recompute" for none); built once from the tier names */
static char g_source_text[SRC_MASKS][SIM_TIERS * 12];

static void source_names_init(void)
{
    for (int m = 0; m < SRC_MASKS; m++) {
        char *b = g_source_text[m];
        size_t n = 0, cap = sizeof g_source_text[m];
        for (int t = TIER_DRAM; t < SIM_TIERS; t++)
            if (m & SRC_TIER(t)) n += (size_t)snprintf(b + n, cap - n, "%s%s", n ? "+" : "", tier_name((Tier)t));
        if (m & SRC_INFLIGHT) n += (size_t)snprintf(b + n, cap - n, "%sin-flight", n ? "+" : "");
        if (!n) snprintf(b, cap, "recompute");
    }
}

const char *metrics_source_name(int mask)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, source_names_init);
    return g_source_text[mask & (SRC_MASKS - 1)];
}

/* bytes of one hop, on the link it crossed: loads read, saves and spills write, a spill out of the
 * SSD array reads there first (SSD counts both) */
void metrics_on_unit(Sim *sm, const Channel *c, const Unit *u)
{
    int load = ch_unit_reads(u);
    *ch_bytes_at(sm->res, c->kind, load) += u->bytes[u->hop];
    metrics_rec_unit(sm, c, u, load);
}

/* SAVE_DIRECT: the iteration wrote `bytes` over D2H and on to the tier's own link (if any) */
void metrics_on_direct_save(Sim *sm, Tier t, double bytes)
{
    sm->res->ch_bytes[CH_D2H][CH_READ] += bytes;
    int hop = tier_table[t].out_hop;
    if (hop >= 0) *ch_bytes_at(sm->res, hop, 0) += bytes;
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
    if (r->donor && r->loads_left > 0) sm->res->prefix_borrowed++;
    if (r->pfx_hit <= 0) return;
    sm->res->prefix_hit_requests++;
    sm->res->prefix_hit_tokens += (uint64_t)r->pfx_hit;
}

/* HBM peak: the most KV tokens in use on one replica */
void metrics_on_pool(Sim *sm, const Replica *rp)
{
    if ((uint64_t)rp->pool_used > sm->res->hbm_peak_tokens) sm->res->hbm_peak_tokens = (uint64_t)rp->pool_used;
    if (metrics_rec_traced(sm)) { /* (called at each admission, after the request left the queue) */
        metrics_rec_counter(sm, rp->id, "queue depth", (double)rp->q_len);
        metrics_rec_counter(sm, rp->id, "kv pool tokens", (double)rp->pool_used);
    }
}

/* a tier's peak: the most bytes held at one place (one replica's DRAM or SSD, the remote store) */
void metrics_on_tier_bytes(Sim *sm, Tier t, double used_bytes)
{
    TierRun *tr = &sm->tiers[t];
    if (used_bytes > (double)tr->peak_bytes) tr->peak_bytes = (uint64_t)used_bytes;
}

void metrics_on_tier_written(Sim *sm, Tier t, double bytes) { sm->res->tier_written_bytes[t] += bytes; }
void metrics_on_policy_saved(Sim *sm, double bytes) { sm->res->policy_saved_bytes += bytes; }

/* written ÷ saved per tier that is on; NAN (absent) for a tier that is off or when nothing was saved
 * (never a 0 from nothing) */
static void metrics_write_amp(const Sim *sm, SimResult *out)
{
    for (int t = 0; t < SIM_TIERS; t++) {
        int on = t != TIER_NONE && sm->tiers[t].on;
        if (!on) out->tier_written_bytes[t] = NAN;
        out->write_amp[t] = on && out->policy_saved_bytes > 0 ? out->tier_written_bytes[t] / out->policy_saved_bytes : NAN;
    }
}

void metrics_on_drop(Sim *sm) { sm->res->dropped++; }

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
        int m = r->src_mask & SRC_TIERS;
        if (r->src_mask & SRC_INFLIGHT) m |= SRC_DRAM;
        int one = TIER_NONE; /* the one tier it all came from, if one */
        for (int t = TIER_DRAM; t < SIM_TIERS; t++)
            if (m == SRC_TIER(t)) one = t;
        if (one != TIER_NONE) sm->tiers[one].hits++;
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
    if (metrics_trim_sample(sm, r, &x) != 0) return;
    metrics_rec_request_done(sm, r, restore, t_rest);
    if (sm->row_fn) {
        /* recomputed: token-wise prefix + whole-model recompute + layer-wise recompute (counted once per
         * token even if only some layers were recomputed); loaded: tokens whose state came from a tier */
        int64_t recomputed = r->tw_comp - r->tw_base + r->recompute_total, loaded = r->tw_landed;
        if (r->mode && r->mode[0] == LM_RECOMPUTE) recomputed += r->lw_tokens;
        if (r->mode && r->src != TIER_NONE && !r->tw_whole) loaded += r->lw_tokens; /* (whole: in tw_landed) */
        SimRequestRow row = {r->id, r->s->id, r->turn, r->replica, r->arrival_ns, r->hist, r->nnew, r->nout,
                             from, recomputed, loaded, queue, restore, prefill, ttft, r->t_last_tok,
                             tbt_mean, r->tbt_max, r->lb_ns, r->s->name ? r->s->name : "", offered,
                             r->arrival_ns - offered, r->preempts, r->pfx_hit};
        if (sm->row_fn(sm->row_ctx, &row, sm->e) != 0) sm->failed = 1;
    }
}

void metrics_free(Sim *sm)
{
    metrics_trim_free(sm);
    metrics_rec_free(sm);
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
    out->cancelled_timers = sm->q.cancelled;
    out->waiting_peak_bytes = sm->waiting_peak;
    out->sessions = sm->sessions_seen;
    out->truncated = (uint64_t)trace_truncated_count(sm->trace);
    out->prefix_block_tokens = sm->pfx_B;
    for (int i = 0; i < sm->R; i++) {
        const PrefixStats *ps = &sm->rep[i].pfx.st;
        out->prefix_lookups += (uint64_t)ps->lookups;
        out->prefix_rep_lookups[i] = (uint64_t)ps->lookups;
        out->prefix_rep_hits[i] = (uint64_t)ps->hits;
        out->prefix_hits += (uint64_t)ps->hits;
        out->prefix_inserted += (uint64_t)ps->inserted;
        out->prefix_deduplicated += (uint64_t)ps->deduplicated;
        out->prefix_evicted += (uint64_t)ps->evicted;
    }
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
        out->hits_tier[t] = sm->tiers[t].hits;
        out->tier_peak_bytes[t] = sm->tiers[t].peak_bytes;
        const TierRun *tr = &sm->tiers[t];
        for (int i = 0; i <= sm->R; i++) {
            if (i == sm->R ? !tier_table[t].shared : tier_table[t].shared) continue;
            const PrefixStats *bs = &(i == sm->R ? &sm->shared[t] : &sm->rep[i].tier[t])->blk.st;
            out->prefix_tier_stored[t] += (uint64_t)bs->inserted;
            out->prefix_tier_dedup[t] += (uint64_t)bs->deduplicated;
        }
        out->prefix_tier_dropped[t] = tr->blk_dropped;
        out->prefix_tier_moved[t] = tr->blk_moved;
        out->prefix_tier_found[t] = tr->blk_found;
        out->prefix_tier_unwritten[t] = tr->skip_bytes;
    }
    out->prefix_tier_asked = sm->tb_asked;
    double T = (double)(out->sim_end_ns > 0 ? out->sim_end_ns : 1);
    for (int s = 0; s < sm->S; s++) {
        double g = 0;
        for (int i = 0; i < sm->R; i++) g += sm->rep[i].busy_stage_ns[s];
        out->util_gpu[s] = g / (T * sm->R);
    }
    for (int k = 0; k < CH_COUNT; k++) {
        if (sim_channel_rows[k].per_stage) { /* each stage's link */
            for (int s = 0; s < sm->S; s++) {
                double b = 0;
                for (int i = 0; i < sm->R; i++) b += sm->rep[i].ch[k][s].busy_ns;
                out->util_ch[k][s] = b / (T * sm->R);
            }
            continue;
        }
        for (int i = 0; i < sm->R; i++) {
            int nn = rep_ch_count(&sm->rep[i], k, sm->S); /* per-stage NICs: their mean */
            for (int st = 0; st < nn; st++) out->util_ch[k][0] += sm->rep[i].ch[k][st].busy_ns / (T * sm->R * nn);
        }
    }
    metrics_ssd_wear(sm, out, T);
    metrics_write_amp(sm, out);
    /* inside restoration windows: busy time in windows / window time, summed over replicas */
    double win = 0, host[CH_COUNT] = {0};
    for (int i = 0; i < sm->R; i++) {
        Replica *rp = &sm->rep[i];
        if (rp->n_restoring > 0) { /* (a failed run may end inside one) */
            rp->n_restoring = 1;
            metrics_on_restoring(sm, rp, -1);
        }
        win += rp->win_ns;
        for (int k = 0; k < CH_COUNT; k++) {
            if (sim_channel_rows[k].per_stage) continue;
            int nn = rep_ch_count(rp, k, sm->S); /* per-stage NICs: their mean */
            for (int st = 0; st < nn; st++) host[k] += rp->win_ch_ns[k][st] / nn;
        }
    }
    out->win_ns = win;
    if (win > 0) {
        for (int s = 0; s < sm->S; s++) {
            double g = 0;
            for (int i = 0; i < sm->R; i++) g += sm->rep[i].win_gpu_ns[s];
            out->win_util_gpu[s] = g / win;
        }
        for (int k = 0; k < CH_COUNT; k++) {
            if (!sim_channel_rows[k].per_stage) {
                out->win_util_ch[k][0] = host[k] / win;
                continue;
            }
            for (int s = 0; s < sm->S; s++) {
                double b = 0;
                for (int i = 0; i < sm->R; i++) b += sm->rep[i].win_ch_ns[k][s];
                out->win_util_ch[k][s] = b / win;
            }
        }
    }
    metrics_trim_scan(sm, 1);
    metrics_rec_run_end(sm);
    metrics_free(sm);
    metrics_load_finish(sm);
    out->extrapolations = cost_extrapolations_total(&w->cost);
    memcpy(out->extrapolations_op, w->cost.extrapolations, sizeof out->extrapolations_op);
    if (sm->pol->notes) sm->pol->notes(sm->pstate, out->policy_notes, sizeof out->policy_notes);
}
