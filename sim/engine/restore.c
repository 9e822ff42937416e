/* restore.c — admission-time restoration of a request's history.
 *
 * Responsible for: asking the policy for a RestorePlan when a request with history is admitted
 * (unless its KV is resident), validating the plan, the restoration lower bound (lb_ns), and
 * executing the plan's IO: layer-wise loads (per layer from the tier over its channel then H2D;
 * boundary activations of stage-parallel restorations first) with the arrival bookkeeping that
 * lets an iteration's layer walk continue, and the token-wise two pointers (compute forward from
 * token 0 in the iterations, load backward from the end in io_chunk_tokens chunks, at most
 * TW_DEPTH chunks in flight, until they meet). Moves RQ_QUEUED → RQ_RESTORING / RQ_PREFILL at
 * admission and RQ_RESTORING → RQ_PREFILL when nothing of the restoration is left.
 * Not responsible for: the compute part of restoration (iteration.c puts recompute chunks in
 * batches), the admission decision (lifecycle.c: pool, batch slots), where state is (tier.c).
 * Invariants: loads_left counts the plan's loads not yet arrived and the session's `loading` is
 * held exactly while some are in flight; arrived_prefix is the longest prefix of arrived layers;
 * the two pointers never cross (tw_io_issued >= tw_comp + tw_comp_inflight).
 * Complexity: admission O(L) (+ the policy); per arrived unit O(1) amortised (the prefix pointer
 * only moves forward).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

#define TW_DEPTH 2

int restore_is_boundary(const Sim *sm, const Request *r, int l)
{
    return r->stage_par && r->mode[l] == LM_RECOMPUTE && sm->stage_of[l] > 0 && (l == 0 || sm->stage_of[l - 1] != sm->stage_of[l]);
}

void restore_progress(Sim *sm, Request *r)
{
    if (r->state == RQ_RESTORING && !r->tw && r->recompute_left == 0 && !r->lw_pending) rq_set_state(sm, r, RQ_PREFILL);
}

/* ---- layer-wise ---- */

/* layer `layer` of r's state arrived (-1: only recompute the prefix count) */
static void lw_arrived(Sim *sm, Request *r, int layer)
{
    int64_t now = sim_now(sm);
    if (layer >= 0) {
        if (restore_is_boundary(sm, r, layer)) r->bnd_left--;
        r->arrived[layer] = 1;
        if (now > r->t_restored) r->t_restored = now;
        if (--r->loads_left == 0) r->s->loading--;
    }
    while (r->arrived_prefix < sm->L && r->arrived[r->arrived_prefix]) r->arrived_prefix++;
    Replica *rp = &sm->rep[r->replica];
    if (rp->iterating && rp->wait_r == r && rp->wait_layer == layer) {
        rp->wait_r = NULL;
        if (rp->cursor_ns < now) rp->cursor_ns = now;
        iter_advance(sm, rp);
    } else if (!rp->iterating && (r->stage_par ? r->bnd_left == 0 : r->arrived_prefix >= r->early_layers)) {
        sim_kick(sm, rp);
    }
}

static void layer_loaded(Sim *sm, Unit *u)
{
    lw_arrived(sm, u->r, u->layer);
    unit_free(sm, u);
}

static int issue_one_load(Sim *sm, Request *r, int l, int hidden)
{
    /* KV: each GPU its heads; hidden states (and boundary activations): token-sharded over the TP
     * group, all-gathered per layer (the all-gather is compute-side, in the iteration) */
    double per_gpu = hidden ? sm->hid_tok_layer / sm->T : sm->kv_tok_layer_gpu * r->kv_scale;
    double per_layer = hidden ? sm->hid_tok_layer : sm->kv_tok_layer * r->kv_scale;
    Unit *u = unit_new(sm);
    if (!u) return -1;
    u->r = r;
    u->kind = U_LOAD;
    u->done = layer_loaded;
    u->layer = l;
    u->stage = sm->stage_of[l];
    u->stripe_bytes = (double)r->chunk_tokens * per_layer;
    tier_load_chain(sm, u, &sm->rep[r->replica], r->src, u->stage, (double)r->lw_tokens * per_layer,
                    (double)r->lw_tokens * per_gpu);
    ch_enqueue(sm, u);
    return 0;
}

/* issue the layer-wise loads of r's plan (per layer: from the tier, then H2D); boundary activations
 * of stage-parallel restorations go first */
static int issue_layer_loads(Sim *sm, Request *r)
{
    for (int l = 0; l < sm->L; l++)
        if (restore_is_boundary(sm, r, l) && issue_one_load(sm, r, l, 1) != 0) return -1;
    for (int l = 0; l < sm->L; l++) {
        int m = r->mode[l];
        if ((m == LM_LOAD_KV || m == LM_LOAD_HIDDEN) && issue_one_load(sm, r, l, m == LM_LOAD_HIDDEN) != 0) return -1;
    }
    return 0;
}

/* ---- token-wise two pointers: compute forward from token 0, load backward from the end ---- */

static void tok_loaded(Sim *sm, Unit *u);

void restore_tw_issue(Sim *sm, Request *r)
{
    Replica *rp = &sm->rep[r->replica];
    while (r->tw && r->tw_ck_n < TW_DEPTH) {
        int64_t lower = r->tw_comp + r->tw_comp_inflight;
        if (r->tw_io_issued <= lower) return;
        int64_t c = r->tw_io_issued - lower;
        if (c > r->tw_io_chunk) c = r->tw_io_chunk;
        int slot = r->tw_ck_units[0] ? 1 : 0;
        r->tw_io_issued -= c;
        r->tw_ck_tokens[slot] = c;
        r->tw_ck_units[slot] = sm->S;
        r->tw_ck_n++;
        for (int st = 0; st < sm->S; st++) {
            Unit *u = unit_new(sm);
            if (!u) return;
            u->r = r;
            u->kind = U_LOAD_TOK;
            u->done = tok_loaded;
            u->layer = -1;
            u->upto = slot;
            u->stage = st;
            double layers = sm->stage_layers[st];
            tier_load_chain(sm, u, rp, r->src, st, (double)c * sm->kv_tok_layer * layers * r->kv_scale,
                            (double)c * sm->kv_tok_layer_gpu * layers * r->kv_scale);
            ch_enqueue(sm, u);
        }
    }
}

void restore_tw_check_done(Sim *sm, Request *r)
{
    if (!r->tw || r->tw_ck_n || r->tw_comp_inflight) return;
    if (r->tw_comp + r->tw_landed < r->hist) return;
    r->tw = 0;
    int64_t now = sim_now(sm);
    if (now > r->t_restored) r->t_restored = now;
    if (r->loads_left) {
        r->loads_left = 0;
        r->s->loading--;
    }
    restore_progress(sm, r);
    sim_kick(sm, &sm->rep[r->replica]);
}

/* one stage's part of a token-wise chunk landed; the chunk counts once all stages' have */
static void tok_loaded(Sim *sm, Unit *u)
{
    Request *r = u->r;
    int slot = (int)u->upto;
    unit_free(sm, u);
    if (--r->tw_ck_units[slot] > 0) return;
    r->tw_landed += r->tw_ck_tokens[slot];
    r->tw_ck_tokens[slot] = 0;
    r->tw_ck_n--;
    int64_t now = sim_now(sm);
    if (now > r->t_restored) r->t_restored = now;
    restore_tw_issue(sm, r);
    restore_tw_check_done(sm, r);
}

/* ---- admission ---- */

/* the plan's layer-wise part: validate the modes, count the loads, issue them */
static int start_layerwise(Sim *sm, Request *r, const RestorePlan *plan)
{
    Session *s = r->s;
    r->mode = malloc((size_t)sm->L);
    r->arrived = calloc((size_t)sm->L, 1);
    if (!r->mode || !r->arrived) return sim_fail(sm, "out of memory");
    memcpy(r->mode, plan->layer_mode, (size_t)sm->L);
    r->lw_pending = 1;
    r->early_layers = plan->early_layers < 0 || plan->early_layers > sm->L ? sm->L : plan->early_layers;
    r->stage_par = plan->stage_parallel && sm->S > 1;
    int seen_other = 0;
    for (int l = 0; l < sm->L; l++) {
        int m = r->mode[l];
        if (m > LM_RECOMPUTE) return sim_fail(sm, "policy %s: unknown layer mode", sm->pol->name);
        if (r->stage_par && l > 0 && sm->stage_of[l] != sm->stage_of[l - 1]) seen_other = 0;
        if (m == LM_RECOMPUTE && seen_other)
            return sim_fail(sm, "policy %s: LM_RECOMPUTE layers must be a prefix of the layers (of each stage)", sm->pol->name);
        if (m != LM_RECOMPUTE) seen_other = 1;
        if (m == LM_LOAD_KV || m == LM_LOAD_HIDDEN) r->loads_left++;
        if (restore_is_boundary(sm, r, l)) {
            r->loads_left++;
            r->bnd_left++;
        }
    }
    if (r->loads_left) {
        s->loading++;
        tier_touch(sm, s);
        if (issue_layer_loads(sm, r) != 0) return -1;
    }
    for (int l = 0; l < sm->L; l++) /* layers without IO count as arrived */
        if (r->mode[l] != LM_LOAD_KV && r->mode[l] != LM_LOAD_HIDDEN && !restore_is_boundary(sm, r, l)) r->arrived[l] = 1;
    return 0;
}

/* r's history of N tokens is not resident: plan its restoration and start it. *ideal: the plan said
 * the state is on the GPU already (the Ideal reference). */
static int plan_and_start(Sim *sm, Replica *rp, Request *r, int64_t N, int *ideal)
{
    Session *s = r->s;
    RestoreQuery q = {N, r->nnew, s->tier, s->saved_tokens, r->id, 0};
    /* the batch the request joins: restorations admitted before it and still in progress (O(active),
     * at admission only) */
    for (int i = 0; i < rp->n_active; i++)
        if (rp->active[i]->state == RQ_RESTORING) q.restoring_before++;
    if (s->saved_tokens < N || s->tier == TIER_NONE) {
        q.saved_tier = TIER_NONE;
        q.saved_tokens = 0;
    }
    RestorePlan plan;
    memset(&plan, 0, sizeof plan);
    plan.early_layers = -1;
    if (sm->pol->plan_restore(sm->pstate, &sm->env, &q, &plan, sm->e) != 0) return sm->failed = 1, -1;
    /* resident tokens that do not cover the history are dropped */
    if (s->resident_tokens > 0) sess_drop_resident(sm, rp, s);
    /* lower bound on restoration: all compute and IO used perfectly (harmonic mean of recomputing
     * everything and loading everything), with the smaller of the two state forms (KV or hidden
     * states) so that the bound holds for every policy */
    double t_comp = (double)sm->L * est_layer_ns(sm, N, 0);
    if (q.saved_tier != TIER_NONE) {
        double t_kv = (double)sm->L * est_load_layer_ns(sm, q.saved_tier, N, sm->kv_tok_layer, sm->kv_tok_layer_gpu);
        double t_hid = (double)sm->L * est_load_layer_ns(sm, q.saved_tier, N, sm->hid_tok_layer, sm->hid_tok_layer / sm->T);
        double t_io = t_kv < t_hid ? t_kv : t_hid;
        r->lb_ns = t_comp * t_io / (t_comp + t_io);
    } else {
        r->lb_ns = t_comp;
    }
    if (plan.no_restore) {
        *ideal = 1;
        return 0;
    }
    if (q.saved_tier == TIER_NONE) { /* nothing to load: recompute, whatever the policy said */
        int64_t chunk = plan.recompute_chunk_tokens; /* in the policy's chunks */
        memset(&plan, 0, sizeof plan);
        plan.recompute_tokens = N;
        plan.recompute_chunk_tokens = chunk;
    }
    r->low_prio = plan.low_priority;
    r->chunk_tokens = plan.chunk_tokens > 0 ? plan.chunk_tokens : 0;
    r->kv_scale = plan.kv_bytes_scale > 0 && plan.kv_bytes_scale < 1 ? plan.kv_bytes_scale : 1;
    r->src = q.saved_tier;
    if (plan.tokenwise) {
        if (plan.io_chunk_tokens < 1) return sim_fail(sm, "policy %s: token-wise plan without an IO chunk size", sm->pol->name);
        r->tw = 1;
        r->tw_io_issued = N;
        r->tw_io_chunk = plan.io_chunk_tokens;
        r->tw_comp_chunk = plan.comp_chunk_tokens;
        r->loads_left = 1; /* the session's state is read until the pointers meet */
        s->loading++;
        tier_touch(sm, s);
        restore_tw_issue(sm, r);
    } else {
        if (plan.recompute_tokens < 0 || plan.recompute_tokens > N)
            return sim_fail(sm, "policy %s: recompute_tokens out of range", sm->pol->name);
        r->recompute_left = r->recompute_total = plan.recompute_tokens;
        r->recompute_chunk = plan.recompute_chunk_tokens;
        r->lw_tokens = N - plan.recompute_tokens;
        if (r->lw_tokens > 0 && start_layerwise(sm, r, &plan) != 0) return -1;
    }
    if (r->loads_left) {
        r->from = tier_table[q.saved_tier].name;
        metrics_on_admit(sm, MS_TIER, q.saved_tier);
    } else {
        r->from = "recompute";
        metrics_on_admit(sm, MS_RECOMPUTE, TIER_NONE);
    }
    return 0;
}

/* r was admitted (its turn's KV reserved): start whatever its history needs and enlist it */
int restore_admit(Sim *sm, Replica *rp, Request *r)
{
    Session *s = r->s;
    int64_t now = sim_now(sm);
    r->t_admit = now;
    r->t_restored = now;
    r->new_left = r->nnew;
    r->from = "none";
    r->src = TIER_NONE;
    int64_t N = r->hist;
    if (N > 0 && s->resident_tokens >= N) {
        r->from = "resident";
        metrics_on_admit(sm, MS_RESIDENT, TIER_NONE);
    } else if (N > 0) {
        int ideal = 0;
        if (plan_and_start(sm, rp, r, N, &ideal) != 0) return -1;
        if (ideal) {
            r->from = "ideal";
            metrics_on_admit(sm, MS_RESIDENT, TIER_NONE);
        }
    } else {
        metrics_on_admit(sm, MS_NO_HISTORY, TIER_NONE);
    }
    if (rp->n_active == rp->cap_active) {
        int nc = rp->cap_active ? rp->cap_active * 2 : 64;
        Request **na = realloc(rp->active, (size_t)nc * sizeof *na);
        if (!na) return sim_fail(sm, "out of memory");
        rp->active = na;
        rp->cap_active = nc;
    }
    rp->active[rp->n_active++] = r;
    rq_set_state(sm, r, r->tw || r->recompute_left > 0 || r->lw_pending ? RQ_RESTORING : RQ_PREFILL);
    if (r->lw_tokens > 0) lw_arrived(sm, r, -1);
    return 0;
}
