/* restore.c — admission-time restoration of a request's history.
 *
 * Responsible for: where the history's bytes are at admission (restore_parts: per pipeline stage,
 * token ranges in a tier, in the DRAM copy of a save still being flushed, or in a save still
 * crossing D2H — nothing else is "saved"; the KV pool's resident copy is the caller's case),
 * asking the policy for a RestorePlan when a request with history is admitted (unless its KV is
 * resident), validating the plan, the policy-independent restoration lower bound (lb_ns), and
 * executing the plan's IO: layer-wise loads (per layer one unit per place its bytes are, from the
 * tier over its channel then H2D; boundary activations of stage-parallel restorations first, each
 * stage's arrival time kept for its recompute lane) with the arrival bookkeeping that lets an
 * iteration's layer walk continue, and the token-wise two
 * pointers (compute forward from token 0 in the iterations, load backward from the end in
 * io_chunk_tokens chunks, at most TW_DEPTH chunks in flight, until they meet; a whole-request load is
 * the loads alone, and quantized KV loaded so is dequantized in its prefill's iteration, per layer,
 * as a layer-wise load's). A load of bytes still
 * crossing D2H is parked on the session (tier_park) and sent (from DRAM) once that save's D2H lands —
 * when the wait is estimated shorter than recomputing the history; else the history is recomputed
 * (counted).
 * Moves RQ_QUEUED → RQ_RESTORING / RQ_PREFILL at admission and RQ_RESTORING → RQ_PREFILL when
 * nothing of the restoration is left (and opens/closes the replica's restoration window).
 * Not responsible for: the compute part of restoration (iteration.c puts recompute chunks in
 * batches), the admission decision (lifecycle.c: pool, batch slots), the tier lists and the loads
 * parked on a save (tier.c).
 * Invariants: loads_left counts the plan's load units not yet arrived (parked ones included) and
 * the session's `loading` is held exactly while some are in flight; a layer has arrived when all
 * its units have (layer_units); arrived_prefix is the longest prefix of arrived layers; the two
 * pointers never cross (tw_io_issued >= tw_comp + tw_comp_inflight); a history that the saved state
 * covers is never recomputed unless the policy plans it or waiting for a save is slower.
 * Complexity: admission O(L × parts) (a layer's units copied from per-stage templates, LayerUnits;
 * + the policy, + the lower bound's O(log N) estimates, memoised per run: lb_layer_ns);
 * per arrived unit O(1) amortised (the prefix pointer only moves forward).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

#define RESTORE_MAX_PARTS 4

/* a token range [lo, hi) of one stage's share of the history, and where its bytes are */
typedef struct StatePart {
    int64_t lo, hi;
    Tier src;  /* the tier to read from (TIER_DRAM for a save's staging copy) */
    int wait;  /* PW_D2H: still crossing D2H, read from DRAM once it has; PW_LAND: read from src once the save has landed there;
                * PW_PREFETCH: on its way up to the first tier (src), read from there once it has arrived */
} StatePart;

static StatePart *stage_parts(Request *r, int st) { return r->parts + (size_t)st * RESTORE_MAX_PARTS; }

enum { PW_D2H = 1, PW_LAND = 2, PW_PREFETCH = 4 }; /* StatePart.wait */

static void part_add(Request *r, int st, int64_t lo, int64_t hi, int64_t N, Tier src, int wait)
{
    if (hi > N) hi = N;
    if (lo >= hi || src == TIER_NONE) return;
    StatePart *p = stage_parts(r, st);
    int n = r->nparts[st];
    if (n > 0 && p[n - 1].src == src && p[n - 1].wait == wait && p[n - 1].hi == lo) {
        p[n - 1].hi = hi;
        return;
    }
    p[n] = (StatePart){lo, hi, src, wait};
    r->nparts[st] = n + 1;
}

/* Where the bytes of r's history [0, N) are now, per stage (r->parts); returns the context positions
 * the saved state covers (0: none). Per stage: [0, saved_tokens) in the session's tier; of the saves
 * in flight, [saved_tokens, land_pos) in their destination, [land_pos, d2h_pos) in host DRAM (the
 * copy a flush to SSD or the remote store reads from), [d2h_pos, issued_pos) still crossing D2H.
 * A store without a DRAM tier has no host copy a restore may read (the flush's staging buffer is
 * not a tier): there [land_pos, issued_pos) is read from the destination once it has landed. */
static int64_t restore_parts(Sim *sm, Request *r, int64_t N)
{
    Session *s = rq_src(r);
    for (int st = 0; st < sm->S; st++) r->nparts[st] = 0;
    if (s->tier == TIER_NONE && !s->saving) return 0;
    int64_t c = s->tier != TIER_NONE ? s->saved_tokens : 0;
    for (int st = 0; st < sm->S; st++) {
        if (s->prefetching) part_add(r, st, 0, c, N, sm->save_first, PW_PREFETCH);
        else part_add(r, st, 0, c, N, s->tier, 0);
        if (!s->saving) continue;
        int64_t land = kv_max_i64(c, sess_land(sm, s)[st]), d2h = kv_max_i64(land, sess_d2h(s)[st]);
        Tier dest = s->save_dest;
        part_add(r, st, c, land, N, dest, 0);
        if (tier_table[dest].out_hop >= 0 && !sm->tiers[TIER_DRAM].on) {
            part_add(r, st, land, s->issued_pos, N, dest, PW_LAND);
            continue;
        }
        part_add(r, st, land, d2h, N, tier_table[dest].out_hop >= 0 ? TIER_DRAM : dest, 0);
        part_add(r, st, d2h, s->issued_pos, N, TIER_DRAM, PW_D2H);
    }
    return s->saving ? s->issued_pos : c;
}

static int src_bit(const StatePart *p)
{
    if (p->wait & (PW_D2H | PW_LAND)) return SRC_INFLIGHT;
    return SRC_TIER(p->src);
}

int restore_is_boundary(const Sim *sm, const Request *r, int l)
{
    return r->stage_par && r->mode[l] == LM_RECOMPUTE && sm->stage_of[l] > 0 && (l == 0 || sm->stage_of[l - 1] != sm->stage_of[l]);
}

void restore_progress(Sim *sm, Request *r)
{
    if (r->state == RQ_RESTORING && !r->tw && r->recompute_left == 0 && !r->lw_pending) {
        rq_set_state(sm, r, RQ_PREFILL);
        metrics_on_restoring(sm, &sm->rep[r->replica], -1);
    }
}

/* ---- loads: one unit per place the bytes of a range are; parked while they still cross D2H ---- */

/* a load of `tokens` × per-token bytes of part p for stage st: chain from p's place, then H2D;
 * enqueued, or parked when its bytes still cross D2H. done: the unit's callback. */
static Unit *load_part(Sim *sm, Request *r, const StatePart *p, int64_t tokens, int stage, double per_tok, double per_tok_gpu)
{
    Unit *u = unit_new(sm);
    if (!u) return NULL;
    u->r = r;
    u->stage = stage;
    tier_load_chain(sm, u, &sm->rep[r->replica], p->src, stage, (double)tokens * per_tok, (double)tokens * per_tok_gpu);
    r->src_mask |= src_bit(p);
    return u;
}

static void send_or_park(Sim *sm, Request *r, Unit *u, const StatePart *p)
{
    if (p->wait == PW_D2H && sess_d2h(rq_src(r))[u->stage] < p->hi) tier_park(sm, r, u, p->hi, 0);
    else if (p->wait == PW_LAND && sess_land(sm, rq_src(r))[u->stage] < p->hi) tier_park(sm, r, u, p->hi, 1);
    else if (p->wait == PW_PREFETCH && rq_src(r)->prefetching) tier_park(sm, r, u, 0, TIER_WAIT_PREFETCH);
    else ch_enqueue(sm, u);
}

/* ---- layer-wise ---- */

/* one unit of layer `layer` of r's state arrived (-1: only recompute the prefix count) */
static void lw_arrived(Sim *sm, Request *r, int layer)
{
    int64_t now = sim_now(sm);
    if (layer >= 0) {
        if (now > r->t_restored) r->t_restored = now;
        if (--r->loads_left == 0 && --rq_src(r)->loading == 0) tier_promote(sm, rq_src(r));
        if (--r->layer_units[layer] > 0) return; /* the layer's other places still to come */
        if (restore_is_boundary(sm, r, layer)) {
            r->bnd_left--;
            r->bnd_ns[sm->stage_of[layer]] = now; /* that stage's lane may start (walk.c) */
        }
        r->arrived[layer] = 1;
    }
    while (r->arrived_prefix < sm->L && r->arrived[r->arrived_prefix]) r->arrived_prefix++;
    Replica *rp = &sm->rep[r->replica];
    if (rp->iterating && rp->wait_r == r && rp->wait_layer == layer) {
        rp->wait_r = NULL;
        if (rp->cursor_ns < now) rp->cursor_ns = now;
        iter_advance(sm, rp);
    } else if (!rp->iterating && (r->stage_par || r->arrived_prefix >= r->early_layers)) {
        sim_kick(sm, rp);
    }
}

static void layer_loaded(Sim *sm, Unit *u)
{
    Request *r = u->r;
    int layer = u->layer;
    unit_free(sm, u);
    lw_arrived(sm, r, layer);
}

/* layer l's own stored form (0: the plan's), the template it takes */
static double layer_scale(const Request *r, int l)
{
    return r->lscale && r->lscale[l] > 0 && r->mode[l] != LM_RECOMPUTE ? r->lscale[l] : 0;
}

/* the number of parts of stage st's state in [from, N): the units each of its layers loads */
static int stage_nparts(const Request *r, int st)
{
    int64_t from = r->hist - r->lw_tokens;
    const StatePart *ps = r->parts + (size_t)st * RESTORE_MAX_PARTS;
    int n = 0;
    for (int k = 0; k < r->nparts[st]; k++) {
        int64_t lo = kv_max_i64(ps[k].lo, from), hi = ps[k].hi < r->hist ? ps[k].hi : r->hist;
        n += hi > lo;
    }
    return n;
}

/* A layer's units, made once for the layers that share them: per part of the stage's state in
 * [from, N), the unit as load_part and layer_parts set it up but for its layer (the same bytes,
 * chain and stripe for every layer of a stage in one form); valid for (st, hidden, sc). */
typedef struct LayerUnits {
    int st, hidden, n;
    double sc;
    int k[RESTORE_MAX_PARTS];
    int64_t lo[RESTORE_MAX_PARTS], hi[RESTORE_MAX_PARTS];
    Unit tmpl[RESTORE_MAX_PARTS];
    Unit *run[RESTORE_MAX_PARTS]; /* the last unit of each template sent to its queue (NULL: none), a run to extend */
} LayerUnits;

/* the parts of layer l's state in [from, N) (KV: each GPU its heads; hidden states and boundary
 * activations: token-sharded over the TP group, all-gathered per layer in the iteration), issued:
 * each a copy of its template in lu (made here when lu was made for another stage, form or scale).
 * Returns 0, -1 when out of memory. */
static int layer_parts(Sim *sm, Request *r, int l, int hidden, LayerUnits *lu)
{
    int st = sm->stage_of[l];
    double sc = layer_scale(r, l);
    if (lu->n < 0 || (sm->ref_off & SIM_REF_NO_TEMPLATES) || lu->st != st || lu->hidden != hidden || lu->sc != sc) {
        double per_gpu = hidden ? sm->hid_tok_layer / sm->T : sm->kv_tok_layer_gpu * r->kv_scale;
        double per_layer = hidden ? sm->hid_tok_layer : sm->kv_tok_layer * r->kv_scale;
        if (sc > 0) {
            per_gpu = hidden ? sm->hid_tok_layer / sm->T * sc : sm->kv_tok_layer_gpu * sc;
            per_layer = hidden ? sm->hid_tok_layer * sc : sm->kv_tok_layer * sc;
        }
        lu->st = st;
        lu->hidden = hidden;
        lu->sc = sc;
        lu->n = 0;
        int64_t from = r->hist - r->lw_tokens;
        const StatePart *ps = stage_parts(r, st);
        for (int k = 0; k < r->nparts[st]; k++) {
            int64_t lo = kv_max_i64(ps[k].lo, from), hi = ps[k].hi < r->hist ? ps[k].hi : r->hist;
            if (hi <= lo) continue;
            int j = lu->n++;
            Unit *t = &lu->tmpl[j];
            memset(t, 0, sizeof *t);
            t->state = US_NEW;
            t->r = r;
            t->stage = st;
            tier_load_chain(sm, t, &sm->rep[r->replica], ps[k].src, st, (double)(hi - lo) * per_layer,
                            (double)(hi - lo) * per_gpu);
            t->kind = U_LOAD;
            t->done = layer_loaded;
            t->stripe_bytes = (double)r->chunk_tokens * per_layer;
            lu->k[j] = k;
            lu->lo[j] = lo;
            lu->hi[j] = hi;
            lu->run[j] = NULL;
        }
    }
    const StatePart *ps = stage_parts(r, st);
    const int runs = !(sm->ref_off & SIM_REF_NO_RUNS);
    for (int j = 0; j < lu->n; j++) {
        const StatePart *p = &ps[lu->k[j]];
        r->src_mask |= src_bit(p);
        /* the unit the template's last one sent would be followed by in its queue: that run's next layer */
        if (lu->run[j] && ch_extend_run(sm, lu->run[j], l)) continue;
        Unit *u = unit_new_from(sm, &lu->tmpl[j]);
        if (!u) return -1;
        u->layer = l;
        if (sm->observer) sm->observer->load(sm, u, lu->lo[j], lu->hi[j], hidden);
        send_or_park(sm, r, u, p);
        lu->run[j] = runs && u->state == US_QUEUED ? u : NULL; /* (parked: US_NEW; started: US_SERVING) */
    }
    return 0;
}

/* layer_parts for the n layers l … l + n − 1, of one stage, mode and stored form (one template),
 * layer by layer until, with the stage's state in one place (one part: the common case), the unit
 * layer l + k sent is a run that can take layer l + k + 1 (ch_run_open); then the run takes the
 * remaining n − k − 1 layers at once — what that many more layer_parts calls would do: each would
 * extend the run (still its queue's tail, queued, the channel busy, the same instant) and do
 * nothing else (src_mask is set already; no schedule is written where runs are made). With several
 * parts, layer by layer (each part's run still extended one layer at a time by layer_parts). */
static int layer_span(Sim *sm, Request *r, int l, int n, int hidden, LayerUnits *lu)
{
    const int bulk = !(sm->ref_off & (SIM_REF_NO_RUNS | SIM_REF_NO_TEMPLATES));
    for (int k = 0; k < n; k++) {
        if (layer_parts(sm, r, l + k, hidden, lu) < 0) return -1;
        if (bulk && k + 1 < n && lu->n == 1 && lu->run[0] && ch_run_open(sm, lu->run[0], l + k + 1)) {
            ch_run_extend(sm, lu->run[0], n - k - 1);
            return 0;
        }
    }
    return 0;
}

/* issue the layer-wise loads of r's plan (per layer: from each place, then H2D); boundary
 * activations of stage-parallel restorations go first */
static int issue_layer_loads(Sim *sm, Request *r)
{
    LayerUnits lu;
    lu.n = -1;
    for (int l = 0; l < sm->L; l++)
        if (restore_is_boundary(sm, r, l) && layer_parts(sm, r, l, 1, &lu) < 0) return -1;
    for (int l = 0; l < sm->L;) {
        int m = r->mode[l];
        if (m != LM_LOAD_KV && m != LM_LOAD_HIDDEN) {
            l++;
            continue;
        }
        /* the layers after l that share its template: same mode, stage and stored form */
        int n = 1, st = sm->stage_of[l];
        double sc = layer_scale(r, l);
        while (l + n < sm->L && r->mode[l + n] == m && sm->stage_of[l + n] == st && layer_scale(r, l + n) == sc) n++;
        if (layer_span(sm, r, l, n, m == LM_LOAD_HIDDEN, &lu) < 0) return -1;
        l += n;
    }
    return 0;
}

/* ---- token-wise two pointers: compute forward from token 0, load backward from the end ---- */

static void tok_loaded(Sim *sm, Unit *u);

void restore_tw_issue(Sim *sm, Request *r)
{
    while (r->tw && r->tw_ck_n < TW_DEPTH) {
        int64_t lower = r->tw_comp + r->tw_comp_inflight;
        if (r->tw_io_issued <= lower) return;
        int64_t c = r->tw_io_issued - lower;
        if (c > r->tw_io_chunk) c = r->tw_io_chunk;
        int slot = r->tw_ck_units[0] ? 1 : 0;
        int64_t hi = r->tw_io_issued, lo = hi - c;
        r->tw_io_issued = lo;
        r->tw_ck_tokens[slot] = c;
        r->tw_ck_units[slot] = 0;
        r->tw_ck_n++;
        /* count the chunk's units first: one that lands at once must not end the slot early */
        for (int st = 0; st < sm->S; st++)
            for (int k = 0; k < r->nparts[st]; k++) {
                const StatePart *p = &stage_parts(r, st)[k];
                if (kv_max_i64(p->lo, lo) < (p->hi < hi ? p->hi : hi)) r->tw_ck_units[slot]++;
            }
        for (int st = 0; st < sm->S; st++) {
            double layers = sm->stage_layers[st];
            for (int k = 0; k < r->nparts[st]; k++) {
                const StatePart *p = &stage_parts(r, st)[k];
                int64_t a = kv_max_i64(p->lo, lo), b = p->hi < hi ? p->hi : hi;
                if (a >= b) continue;
                Unit *u = load_part(sm, r, p, b - a, st, sm->kv_tok_layer * layers * r->kv_scale,
                                    sm->kv_tok_layer_gpu * layers * r->kv_scale);
                if (!u) return;
                u->kind = U_LOAD_TOK;
                u->done = tok_loaded;
                u->layer = -1;
                u->upto = slot;
                if (sm->observer) sm->observer->load(sm, u, a, b, 0);
                send_or_park(sm, r, u, p);
            }
        }
    }
}

/* a whole-request load of quantized KV has landed: its dequantize is GPU work, done in the iteration
 * that prefills the new input as a layer-wise load's is (every layer's state in place: KV to
 * dequantize at the head of each layer), which ends the restoration */
static int whole_dequant(Sim *sm, Request *r)
{
    r->mode = malloc((size_t)sm->L);
    r->arrived = malloc((size_t)sm->L);
    if (!r->mode || !r->arrived) return sim_fail(sm, "out of memory");
    memset(r->mode, LM_LOAD_KV, (size_t)sm->L);
    memset(r->arrived, 1, (size_t)sm->L);
    r->arrived_prefix = sm->L;
    r->early_layers = 0;
    r->lw_tokens = r->tw_landed; /* the history after a cached prefix */
    r->lw_pending = 1;
    return 0;
}

void restore_tw_check_done(Sim *sm, Request *r)
{
    if (!r->tw || r->tw_ck_n || r->tw_comp_inflight) return;
    if (r->tw_comp + r->tw_landed < r->hist) return;
    r->tw = 0;
    if (r->tw_whole && r->kv_scale < 1 && cost_has(&sm->w->cost, OP_DEQUANT) && whole_dequant(sm, r) != 0) return;
    int64_t now = sim_now(sm);
    if (now > r->t_restored) r->t_restored = now;
    if (r->loads_left) {
        r->loads_left = 0;
        if (--rq_src(r)->loading == 0) tier_promote(sm, rq_src(r));
    }
    restore_progress(sm, r);
    sim_kick(sm, &sm->rep[r->replica]);
}

/* one unit of a token-wise chunk landed; the chunk counts once all its units (stages × places) have */
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

/* ---- the lower bound ---- */

/* est_layer_ns(k, 0) for the lower bound's search, memoised for k < 65,536 (a pure function of k:
 * the cost lookups' counters, which the search restores anyway, are all it changes; the segment
 * hints do not change a value) */
#define LB_MEMO_MAX 65536
static double lb_layer_ns(Sim *sm, int64_t k)
{
    if (!sm->lb_layer_ns && sm->lb_layer_n == 0) {
        int64_t n = sm->max_ctx + 1;
        if (n > LB_MEMO_MAX) n = LB_MEMO_MAX;
        if (n < 1) n = 1;
        sm->lb_layer_n = -1; /* tried (no table if out of memory: every call computes) */
        if ((sm->lb_layer_ns = malloc((size_t)n * sizeof *sm->lb_layer_ns))) {
            for (int64_t i = 0; i < n; i++) sm->lb_layer_ns[i] = NAN;
            sm->lb_layer_n = n;
        }
    }
    if (k < 0 || k >= sm->lb_layer_n || (sm->ref_off & SIM_REF_NO_LB_MEMO)) return est_layer_ns(sm, k, 0);
    double *v = &sm->lb_layer_ns[k];
    if (isnan(*v)) *v = est_layer_ns(sm, k, 0);
    return *v;
}

/* Restoring N tokens with every GPU stage and every link used perfectly: a share of the history is
 * recomputed, the rest loaded, both at once. Compute of the first k tokens costs at least
 * min(C(k), k/N·C(N)) with C(k) = L·layer(k tokens from scratch)/S (a token prefix or a share of
 * the layers, on S stages at once); loading m tokens costs m/N·T_io, T_io the history in its
 * smallest form (KV, hidden states, 4-bit KV — the smallest form a built-in policy stores) from
 * the fastest place its bytes are, each stage over its own H2D and the tier's link shared. The
 * bound is min over k of max(compute(k), load(N − k)); T_comp alone when nothing is saved.
 * t_comp_model: L·layer(N) (computed by the caller, counted once as a cost lookup; the search's
 * own lookups are not counted). */
static double lower_bound_ns(Sim *sm, int64_t N, Tier fastest, double t_comp_model)
{
    double S = (double)sm->S, CN = t_comp_model / S;
    if (fastest == TIER_NONE || N < 1) return CN;
    double q4 = 4.0 / 16.0 + 1.0 / (double)sm->w->model->head_dim;
    const double form[3][2] = {{sm->kv_tok_layer, sm->kv_tok_layer_gpu},
                               {sm->hid_tok_layer, sm->hid_tok_layer / sm->T},
                               {sm->kv_tok_layer * q4, sm->kv_tok_layer_gpu * q4}};
    double t_io = -1;
    int in = tier_table[fastest].in_hop;
    for (int f = 0; f < 3; f++) {
        double h2d = (double)sm->L * ((double)N * form[f][1] / sm->rate_h2d + (double)sm->lat_link) / S;
        double hop = 0;
        if (in >= 0 && sm->hop_rate[in] > 0)
            hop = (double)sm->L * ((double)N * form[f][0] / sm->hop_rate[in] + (double)sm->hop_lat[in]);
        if (in == CH_NIC_IN && sm->cfg->nic_per_stage) hop /= S; /* a NIC per stage */
        double t = h2d > hop ? h2d : hop;
        if (t_io < 0 || t < t_io) t_io = t;
    }
    CostModel *cm = &sm->w->cost;
    uint64_t lk[OP_COUNT], ex[OP_COUNT];
    memcpy(lk, cm->lookups, sizeof lk);
    memcpy(ex, cm->extrapolations, sizeof ex);
    /* compute(k) rises with k, load(N − k) falls: bisect for the crossing */
    int64_t a = 0, b = N;
    while (b - a > 1) {
        int64_t k = a + (b - a) / 2;
        double ck = (double)sm->L * lb_layer_ns(sm, k) / S, lin = CN * (double)k / (double)N;
        if (lin < ck) ck = lin;
        if (ck < t_io * (double)(N - k) / (double)N) a = k;
        else b = k;
    }
    double best = -1;
    for (int64_t k = a; k <= b; k++) {
        double ck = k ? (double)sm->L * lb_layer_ns(sm, k) / S : 0, lin = CN * (double)k / (double)N;
        if (lin < ck) ck = lin;
        double io = t_io * (double)(N - k) / (double)N, t = ck > io ? ck : io;
        if (best < 0 || t < best) best = t;
    }
    memcpy(cm->lookups, lk, sizeof lk);
    memcpy(cm->extrapolations, ex, sizeof ex);
    return best;
}

double restore_bound_ns(Sim *sm, int64_t N, Tier fastest)
{
    CostModel *cm = &sm->w->cost;
    uint64_t lk[OP_COUNT], ex[OP_COUNT];
    memcpy(lk, cm->lookups, sizeof lk);
    memcpy(ex, cm->extrapolations, sizeof ex);
    double t_comp = (double)sm->L * est_layer_ns(sm, N, 0);
    memcpy(cm->lookups, lk, sizeof lk);
    memcpy(cm->extrapolations, ex, sizeof ex);
    return lower_bound_ns(sm, N, fastest, t_comp);
}

/* on channel c, the bytes ahead of (and including) s's last save unit, and the bytes of s's save
 * units on c that go on over a next hop afterwards (*onward) */
static double save_mark_bytes(const Channel *c, const Session *s, int64_t now, double *onward)
{
    double bytes = 0, mark = 0;
    if (c->cur) {
        double left = c->cur_left - (double)(now - c->cur_since) * c->cur_rate;
        bytes += left > 0 ? left : 0;
        if (c->cur->kind == U_SAVE && c->cur->s == s) mark = bytes, *onward += c->cur->bytes[1];
    }
    for (const Unit *u = c->lo_head; u; u = u->next) {
        bytes += u->bytes[u->hop] + (double)ch_unit_latency_ns(c, u) * c->rate;
        if (u->kind == U_SAVE && u->s == s) mark = bytes, *onward += u->bytes[1];
    }
    return mark;
}

/* the time until every stage's share of s's saves in flight has crossed D2H (land: and has landed
 * in its tier over the tier's own link): per stage, the bytes ahead of (and including) its last save
 * unit on the D2H channel at that channel's rate, then (land) the same on the tier's link plus the
 * bytes still to come from D2H, at the link's rate */
static double save_wait_ns(Sim *sm, Session *s, int land)
{
    Replica *rp = &sm->rep[s->replica];
    int64_t now = sim_now(sm);
    int out = tier_table[s->save_dest].out_hop;
    double worst = 0;
    for (int st = 0; st < sm->S; st++) {
        double t = 0, onward = 0;
        if (sess_d2h(s)[st] < s->issued_pos) {
            Channel *c = rep_channel(rp, CH_D2H, st);
            t = save_mark_bytes(c, s, now, &onward) / c->rate;
        }
        if (land && out >= 0 && sess_land(sm, s)[st] < s->issued_pos) {
            Channel *c = rep_channel(rp, out, st);
            double ignored = 0;
            t += (save_mark_bytes(c, s, now, &ignored) + onward) / c->rate;
        }
        if (t > worst) worst = t;
    }
    return worst;
}

/* ---- admission ---- */

_Static_assert(sizeof ((RestorePlan *)0)->layer_mode == SIM_MAX_LAYERS && sizeof ((RestorePlan *)0)->layer_bytes_scale ==
                   SIM_MAX_LAYERS * sizeof(float),
               "a plan's per-layer arrays cover every layer a model may have (start_layerwise copies sm->L of them)");

/* the plan's layer-wise part: validate the modes, count the loads, issue them */
static int start_layerwise(Sim *sm, Request *r, const RestorePlan *plan)
{
    Session *s = rq_src(r);
    r->mode = malloc((size_t)sm->L);
    r->arrived = sim_zalloc((size_t)sm->L);
    r->layer_units = sim_zalloc((size_t)sm->L);
    if (!r->mode || !r->arrived || !r->layer_units) return sim_fail(sm, "out of memory");
    memcpy(r->mode, plan->layer_mode, (size_t)sm->L);
    for (int l = 0; l < sm->L && !r->lscale; l++)
        if (plan->layer_bytes_scale[l] > 0) {
            r->lscale = malloc((size_t)sm->L * sizeof *r->lscale);
            if (!r->lscale) return sim_fail(sm, "out of memory");
            memcpy(r->lscale, plan->layer_bytes_scale, (size_t)sm->L * sizeof *r->lscale);
        }
    r->lw_pending = 1;
    r->early_layers = plan->early_layers < 0 || plan->early_layers > sm->L ? sm->L : plan->early_layers;
    r->stage_par = plan->stage_parallel && sm->S > 1;
    int seen_other = 0;
    int nst[SIM_MAX_STAGES]; /* the units of each layer of a stage: the same for all of them */
    for (int st = 0; st < sm->S; st++) nst[st] = stage_nparts(r, st);
    for (int l = 0; l < sm->L; l++) {
        int m = r->mode[l];
        if (m > LM_RECOMPUTE) return sim_fail(sm, "policy %s: unknown layer mode", sm->pol->name);
        if (r->stage_par && l > 0 && sm->stage_of[l] != sm->stage_of[l - 1]) seen_other = 0;
        if (m == LM_RECOMPUTE && seen_other)
            return sim_fail(sm, "policy %s: LM_RECOMPUTE layers must be a prefix of the layers (of each stage)", sm->pol->name);
        if (m != LM_RECOMPUTE) seen_other = 1;
        int n = 0;
        if (m == LM_LOAD_KV || m == LM_LOAD_HIDDEN) n = nst[sm->stage_of[l]];
        else if (restore_is_boundary(sm, r, l)) {
            n = nst[sm->stage_of[l]];
            if (n) r->bnd_left++;
        }
        r->layer_units[l] = (uint8_t)n;
        r->loads_left += n;
    }
    if (r->loads_left) {
        s->loading++;
        tier_touch(sm, s);
        if (issue_layer_loads(sm, r) != 0) return -1;
    }
    for (int l = 0; l < sm->L; l++) /* layers without IO count as arrived */
        if (!r->layer_units[l]) r->arrived[l] = 1;
    return 0;
}

/* r's history of N tokens is not resident: find where its bytes are, plan its restoration and
 * start it. Its first H tokens may be in the prefix cache (r->held blocks): the restoration covers
 * [H, N) — the policy plans that remainder, recomputing from H (after the cached prefix) and loading
 * the rest. *ideal: the plan said the state is on the GPU already (the Ideal reference). */
static int plan_and_start(Sim *sm, Replica *rp, Request *r, int64_t N, int *ideal)
{
    Session *s = rq_src(r); /* its own saved state, or the copy of another session that saved the same blocks */
    int64_t H = (int64_t)r->held * sm->pfx_B, R = N - H; /* H < N: the admission's case otherwise */
    r->parts = malloc((size_t)sm->S * RESTORE_MAX_PARTS * sizeof *r->parts);
    if (!r->parts) return sim_fail(sm, "out of memory");
    tier_expire_session(sm, s);
    int64_t covered = restore_parts(sm, r, N);
    /* tokens × layers per place of [H, N) (a wait reads from DRAM, or from where the save lands); the fastest place for the bound */
    double at[SIM_TIERS] = {0};
    int waits = 0;
    for (int st = 0; st < sm->S; st++)
        for (int k = 0; k < r->nparts[st]; k++) {
            const StatePart *p = &stage_parts(r, st)[k];
            int64_t lo = kv_max_i64(p->lo, H);
            if (p->hi <= lo) continue;
            at[p->src] += (double)(p->hi - lo) * sm->stage_layers[st];
            waits |= p->wait;
        }
    Tier dom = TIER_NONE, fastest = TIER_NONE;
    double best_io = 0;
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
        if (at[t] <= 0) continue;
        if (dom == TIER_NONE || at[t] >= at[dom]) dom = (Tier)t; /* ties: the later (slower) tier */
        double io = est_load_layer_ns(sm, (Tier)t, R, sm->kv_tok_layer, sm->kv_tok_layer_gpu);
        if (fastest == TIER_NONE || io < best_io) fastest = (Tier)t, best_io = io;
    }
    double t_comp = (double)sm->L * est_layer_ns(sm, R, 0);
    int usable = covered >= N && dom != TIER_NONE, slower = 0;
    if (usable && (waits & (PW_D2H | PW_LAND))) { /* wait for the save in flight only when that beats recomputing */
        int land = (waits & PW_LAND) != 0; /* no host copy: wait for it to land, read it from there */
        double t_load = (double)sm->L * est_load_layer_ns(sm, land ? s->save_dest : TIER_DRAM, R, sm->kv_tok_layer, sm->kv_tok_layer_gpu);
        if (save_wait_ns(sm, s, land) + t_load >= t_comp) usable = 0, slower = 1;
    }
    RestoreQuery q = {R, r->nnew, usable ? dom : TIER_NONE, usable ? R : 0, r->id, 0};
    /* the batch the request joins: restorations admitted before it and still in progress (O(active),
     * at admission only) */
    for (int i = 0; i < rp->n_active; i++)
        if (rp->active[i]->state == RQ_RESTORING) q.restoring_before++;
    RestorePlan plan;
    memset(&plan, 0, sizeof plan);
    plan.early_layers = -1;
    if (sm->pol->plan_restore(sm->pstate, &sm->env, &q, &plan, sm->e) != 0) return sm->failed = 1, -1;
    SIM_CHECK(sm, r->s->resident_tokens == 0); /* admission released KV that does not cover the history */
    if (plan.no_restore) { /* the state is on the GPU by assumption: no restoration to bound */
        *ideal = 1;
        r->lb_ns = 0;
        return 0;
    }
    r->lb_ns = lower_bound_ns(sm, R, usable ? fastest : TIER_NONE, t_comp);
    if (!usable) { /* nothing to load: recompute, whatever the policy said */
        int64_t chunk = plan.recompute_chunk_tokens; /* in the policy's chunks */
        memset(&plan, 0, sizeof plan);
        plan.recompute_tokens = R;
        plan.recompute_chunk_tokens = chunk;
        for (int st = 0; st < sm->S; st++) r->nparts[st] = 0;
        if (sm->save_bpt > 0) metrics_on_fallback(sm, slower);
    }
    if (H > 0) r->pfx_hit = H;
    r->low_prio = plan.low_priority;
    r->chunk_tokens = plan.chunk_tokens > 0 ? plan.chunk_tokens : 0;
    r->kv_scale = plan.kv_bytes_scale > 0 && plan.kv_bytes_scale < 1 ? plan.kv_bytes_scale : 1;
    r->src = q.saved_tier;
    if (plan.tokenwise) {
        if (plan.io_chunk_tokens < 1) return sim_fail(sm, "policy %s: token-wise plan without an IO chunk size", sm->pol->name);
        r->tw = 1;
        r->tw_whole = plan.whole;
        r->tw_comp = r->tw_base = H; /* the compute pointer starts after the cached prefix */
        r->tw_io_issued = N;
        r->tw_io_chunk = plan.io_chunk_tokens;
        r->tw_comp_chunk = plan.comp_chunk_tokens;
        r->loads_left = 1; /* the session's state is read until the pointers meet */
        s->loading++;
        tier_touch(sm, s);
        restore_tw_issue(sm, r);
    } else {
        if (plan.whole) return sim_fail(sm, "policy %s: a whole-request load must be a token-wise plan", sm->pol->name);
        if (plan.recompute_tokens < 0 || plan.recompute_tokens > R)
            return sim_fail(sm, "policy %s: recompute_tokens out of range", sm->pol->name);
        r->recompute_left = r->recompute_total = plan.recompute_tokens;
        r->recompute_chunk = plan.recompute_chunk_tokens;
        r->recompute_done = H; /* recomputed after the cached prefix */
        r->lw_tokens = R - plan.recompute_tokens;
        if (r->lw_tokens > 0 && start_layerwise(sm, r, &plan) != 0) return -1;
    }
    if (r->n_names > 0 && sm->save_bpt > 0) { /* its named history blocks below HBM: found where its loads read */
        int64_t named = N / sm->pfx_B < r->n_names ? N / sm->pfx_B : r->n_names, asked = named - r->held;
        if (asked > 0) {
            sm->tb_asked += (uint64_t)asked;
            if (r->loads_left && r->src != TIER_NONE) sm->tiers[r->src].blk_found += (uint64_t)asked;
        }
    }
    if (r->loads_left) {
        r->from = NULL; /* the places its loads read from (src_mask), named when it is done */
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
    r->rc_layer = -1;
    int64_t N = r->hist, H = (int64_t)r->held * sm->pfx_B; /* H: context tokens in the prefix cache */
    if (H > N) { /* the new input's first H − N tokens are cached too: not computed */
        r->new_done = H - N;
        r->new_left = r->nnew - r->new_done;
        r->pfx_hit = H - N;
    }
    if (N > 0 && s->resident_tokens >= N) {
        r->from = "resident";
        metrics_on_admit(sm, MS_RESIDENT, TIER_NONE);
    } else if (N > 0 && H >= N) {
        r->from = "prefix";
        r->pfx_hit = H;
        metrics_on_admit(sm, MS_PREFIX, TIER_NONE);
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
    if (r->n_names > 0) metrics_on_prefix(sm, r);
    if (active_push(sm, rp, r) != 0) return -1;
    int restoring = r->tw || r->recompute_left > 0 || r->lw_pending;
    rq_set_state(sm, r, restoring ? RQ_RESTORING : RQ_PREFILL);
    if (restoring) metrics_on_restoring(sm, rp, +1);
    if (sm->observer) sm->observer->admit(sm, r);
    if (r->lw_tokens > 0) lw_arrived(sm, r, -1);
    return 0;
}
