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
#include <string.h>

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

void metrics_on_setup(Sim *sm)
{
    sm->res->pool_tokens = (uint64_t)sm->rep[0].pool_cap;
}

void metrics_on_event(Sim *sm) { sm->res->events++; }

void metrics_on_iteration(Sim *sm) { sm->res->iterations++; }

/* bytes of one hop, on the link it crossed: loads read, saves and spills write (SSD counts both) */
void metrics_on_unit(Sim *sm, const Channel *c, const Unit *u)
{
    int load = u->kind == U_LOAD || u->kind == U_LOAD_TOK;
    *res_double(sm->res, load ? ch_fields[c->kind].load : ch_fields[c->kind].other) += u->bytes[u->hop];
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
    case MS_TIER: sm->tiers[t].hits++; break;
    case MS_RECOMPUTE: sm->res->misses++; break;
    }
}

/* HBM peak: the most KV tokens in use on one replica */
void metrics_on_pool(Sim *sm, const Replica *rp)
{
    if ((uint64_t)rp->pool_used > sm->res->hbm_peak_tokens) sm->res->hbm_peak_tokens = (uint64_t)rp->pool_used;
}

/* a tier's peak: the most bytes held at one place (one replica's DRAM or SSD, the remote store) */
void metrics_on_tier_bytes(Sim *sm, Tier t, double used_bytes)
{
    TierRun *tr = &sm->tiers[t];
    if (used_bytes > (double)tr->peak_bytes) tr->peak_bytes = (uint64_t)used_bytes;
}

void metrics_on_drop(Sim *sm) { sm->res->dropped++; }

/* a decode token `gap_ns` after the previous one (time between tokens) */
void metrics_on_token(Sim *sm, Request *r, int64_t gap_ns)
{
    hist_add(&sm->res->tbt, (uint64_t)gap_ns);
    r->tbt_sum += (double)gap_ns;
    if (gap_ns > r->tbt_max) r->tbt_max = gap_ns;
}

void metrics_on_tokens_n(Sim *sm, int64_t gap_ns, uint64_t n) { hist_add_n(&sm->res->tbt, (uint64_t)gap_ns, n); }

void metrics_on_request_tokens(Request *r, int64_t sum_ns, int64_t max_ns)
{
    r->tbt_sum += (double)sum_ns;
    if (max_ns > r->tbt_max) r->tbt_max = max_ns;
}

void metrics_on_iterations_folded(Sim *sm, uint64_t k)
{
    sm->res->iterations += k;
    sm->res->events += k;
}

static int hist_class(const Sim *sm, int64_t hist)
{
    if (hist < sm->cfg->class_edges[0]) return 0;
    if (hist < sm->cfg->class_edges[1]) return 1;
    return 2;
}

/* TTFT = first token − release; queue = admission − release; restore = restored − admission
 * (0 when nothing was restored); prefill = the rest of TTFT. SLO: TTFT and mean TBT within bounds. */
void metrics_on_request_done(Sim *sm, Request *r)
{
    SimResult *res = sm->res;
    int64_t ttft = r->t_first - r->arrival_ns;
    int64_t queue = r->t_admit - r->arrival_ns;
    int64_t restore = r->t_restored > r->t_admit ? r->t_restored - r->t_admit : 0;
    int64_t prefill = ttft - queue - restore;
    if (prefill < 0) prefill = 0;
    hist_add(&res->ttft, (uint64_t)ttft);
    hist_add(&res->queue, (uint64_t)queue);
    hist_add(&res->restore, (uint64_t)restore);
    hist_add(&res->prefill, (uint64_t)prefill);
    double tbt_mean = r->out_done > 1 ? r->tbt_sum / (double)(r->out_done - 1) : 0;
    int slo = ttft <= sm->cfg->slo_ttft_ns && (r->out_done <= 1 || tbt_mean <= (double)sm->cfg->slo_tbt_ns);
    res->slo_met += (uint64_t)slo;
    int c = hist_class(sm, r->hist);
    hist_add(&res->cls[c].ttft, (uint64_t)ttft);
    hist_add(&res->cls[c].restore, (uint64_t)restore);
    res->cls[c].n++;
    res->cls[c].slo_met += (uint64_t)slo;
    if (restore > 0) {
        res->restored_tokens += (uint64_t)r->hist;
        res->restore_busy_ns += (double)restore;
        if (r->lb_ns > 0) hist_add(&res->lb_ratio, (uint64_t)llround(1000.0 * (double)restore / r->lb_ns));
    }
    res->requests++;
    if (sm->row_fn) {
        /* recomputed: token-wise prefix + whole-model recompute + layer-wise recompute (counted once per
         * token even if only some layers were recomputed); loaded: tokens whose state came from a tier */
        int64_t recomputed = r->tw_comp + r->recompute_total, loaded = r->tw_landed;
        if (r->mode && r->mode[0] == LM_RECOMPUTE) recomputed += r->lw_tokens;
        if (r->mode && r->src != TIER_NONE) loaded += r->lw_tokens;
        SimRequestRow row = {r->id, r->s->id, r->turn, r->replica, r->arrival_ns, r->hist, r->nnew, r->nout,
                             r->from, recomputed, loaded, queue, restore, prefill, ttft, r->t_last_tok,
                             tbt_mean, r->tbt_max, r->lb_ns, r->s->name ? r->s->name : ""};
        if (sm->row_fn(sm->row_ctx, &row, sm->e) != 0) sm->failed = 1;
    }
}

/* utilisation = busy time / (simulated time × replicas), per stage for the GPU and its links */
void metrics_on_run_end(Sim *sm)
{
    SimResult *out = sm->res;
    SimWorld *w = sm->w;
    out->sim_end_ns = sim_now(sm);
    out->sessions = sm->sessions_seen;
    out->truncated = (uint64_t)trace_truncated_count(sm->trace);
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
        out->util_nic_in += sm->rep[i].ch[CH_NIC_IN][0].busy_ns / (T * sm->R);
        out->util_nic_out += sm->rep[i].ch[CH_NIC_OUT][0].busy_ns / (T * sm->R);
    }
    out->extrapolations = cost_extrapolations_total(&w->cost);
    memcpy(out->extrapolations_op, w->cost.extrapolations, sizeof out->extrapolations_op);
    if (sm->pol->notes) sm->pol->notes(sm->pstate, out->policy_notes, sizeof out->policy_notes);
}
