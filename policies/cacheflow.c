/* cacheflow.c — CacheFlow (arXiv 2604.25080, April 2026): three axes of restoration plus a
 * batch-aware IO scheduler, each switchable for ablations: knobs cacheflow.token, .layer, .gpu,
 * .batch (--set cacheflow.gpu=0; the older spellings cf_token=0 etc. are aliases).
 *
 *  token axis  — token-wise two pointers with 512-token chunks (FlashAttention blocks): compute
 *                forward, load KV backward, meet at run time.
 *  layer axis  — layer-wise two pointers: the first ℓ layers are recomputed for all N tokens while
 *                the KV of the others is loaded (ideally ℓ* = L·T_io/(T_comp+T_io), the harmonic
 *                bound T* = T_comp·T_io/(T_comp+T_io)); ℓ is the integer split the engine's walk
 *                finishes first (split_walk_ns: the new input's compute shares the walk).
 *  GPU axis    — with S pipeline stages CacheFlow stores the activation entering each stage (S−1
 *                hidden-state vectors per token, saved and accounted) so that every stage restores
 *                its own layers at once: layer-wise two pointers inside each stage (its first ℓ_s
 *                layers recomputed from its boundary activation in a per-stage lane, the others' KV
 *                loaded). The plan uses the bandwidth the stages actually get: every stage has its
 *                own H2D link, but the tier's channel (the NIC to the remote store, the SSD array) is
 *                one per host, so the stages' loads share it (each gets its share); the boundary
 *                activations go first, the request joins an iteration at once and each stage's lane
 *                starts as soon as its own boundary activation has arrived (stages overlap), which
 *                the estimate includes — a split that would hold the iteration longer than it saves
 *                is not chosen.
 *  choice      — per request, every enabled option is costed for its history length, the tier its
 *                state is on and its new input (layer-wise and stage-parallel: the engine's walk;
 *                token-wise: the two pointers' race, chunk by chunk, then the new input's
 *                iteration) and the fastest wins; an axis switched on only adds options, so on an
 *                isolated request it never loses to the same axis off. Plans are memoised per
 *                (tier, N, new-input chunk) in a direct-mapped cache (results do not depend on it).
 *  batch axis  — requests restored together are planned as one batch (Algorithm 1). The oldest
 *                restoration gets the GPU first (compute runs in admission order) and the IO first
 *                (below), so it is planned as if alone; a request admitted while others restore
 *                restores token-wise behind them (per-request compute and IO pointers filling what
 *                the head leaves: a layer-wise restoration rides in its new input's iteration and one
 *                late layer would stall every request sharing it), and a global IO scheduler hands each next chunk to the request whose recomputation
 *                is worth most: compute runs in admission order, so recomputation of the oldest
 *                restoring request delays it and every restoration behind it — its chunk has the
 *                largest marginal reduction (re-ranked at every chunk; request ids are in trace
 *                order, the admission order of a replica's FIFO). cacheflow.batch=0: each request
 *                planned alone, IO in FIFO order.
 *
 * nic_per_stage (a NIC per stage, config): the stages' loads from the remote store are planned on
 * their own NICs (IoFlow.hop_per_stage, the token-wise race likewise). hcache-cf (the end of this
 * file) is the one-tier variant: the same solver over HCache's hidden states.
 *
 * Engine semantics it ran on: CacheFlow is built on vLLM with LMCache-style loading; its layer-wise
 * loads are waited for inside the forward pass, so a late layer stalls the decode tokens that share
 * that iteration (the engine's walk does exactly that); its token-wise chunks never stall one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/split.h"

#define CF_CHUNK 512
#define CF_MEMO 512
#define CF_MAXL KV_MAX_LAYERS
#define CF_MAXS KV_MAX_STAGES

extern const KvPolicyOps policy_hcache_cf;

enum { CF_KV = 0, CF_LAYER, CF_TOKEN, CF_STAGE, CF_NKINDS };
/* IO orders of the shared channel (cacheflow.io_order) */
enum { CF_ORDER_OLDEST = 0, CF_ORDER_MRF, CF_ORDER_FIFO, CF_ORDER_EDF, CF_ORDER_AGING };

typedef struct CfMemo {
    int64_t N, n;
    int tier, valid, kind;
    int k;                 /* layer-wise split */
    int ell[CF_MAXS];      /* stage-parallel splits */
    double est_ns;
} CfMemo;

typedef struct CfState {
    int onetier; /* hcache-cf: HCache's hidden states are the stored form and the boundary activations */
    int token, layer, gpu, batch;
    int io_order;                        /* CF_ORDER_* (cacheflow.io_order) */
    int force_split;                     /* cacheflow.split: K >= 0 recomputes the first K layers and loads the rest, always; -1: planned */
    int64_t slo_short_ns, slo_long_ns, class_tokens; /* per-class TTFT targets (edf, aging) */
    Tier tier;
    int L, S;
    int stage_of[CF_MAXL], st_first[CF_MAXS], st_count[CF_MAXS];
    double kv_l, kv_g, hid_l, T;
    CfMemo memo[CF_MEMO];
    int64_t l_delta; /* notes: first power of two from which token-wise is chosen alone on the save tier */
    uint64_t n_kind[CF_NKINDS], n_joint, memo_hits;
    double last_est_ns; /* notes: the estimate (admission → first token) of the last plan made alone */
} CfState;

/* per-layer KV load hops and the iteration's per-layer costs for N tokens on tier */
typedef struct CfCosts {
    IterCosts ic;
    double kv_hop, kv_h2d;     /* one layer's KV of N tokens (hcache-cf: its hidden states) */
    double load_comp;          /* the iteration's layer time of a loaded layer (KV: plain; hidden: + projection) */
    int hop_per_stage;         /* the tier channel is one per stage (nic_per_stage over the remote store) */
    double bnd_hop, bnd_h2d;   /* one boundary activation of N tokens */
    double ag;                 /* all-gather of N boundary states under TP */
    double start;              /* the iteration's overhead */
} CfCosts;

static void cf_costs(const PolicyEnv *env, const CfState *cf, Tier tier, int64_t N, int64_t n, CfCosts *c)
{
    split_iter_costs(env, N, n, &c->ic);
    if (cf->onetier) { /* hidden states in HCache's 64-token layout, boundary activations among them */
        split_load_hops(env, tier, N, cf->hid_l, cf->hid_l / cf->T, 64, &c->kv_hop, &c->kv_h2d);
        c->bnd_hop = c->kv_hop, c->bnd_h2d = c->kv_h2d;
        c->load_comp = c->ic.hid;
    } else {
        split_load_hops(env, tier, N, cf->kv_l, cf->kv_g, 0, &c->kv_hop, &c->kv_h2d);
        split_load_hops(env, tier, N, cf->hid_l, cf->hid_l / cf->T, 0, &c->bnd_hop, &c->bnd_h2d);
        c->load_comp = c->ic.plain;
    }
    c->hop_per_stage = env->nic_per_stage && tier == TIER_REMOTE;
    c->ag = env->ly->tp > 1 && cost_has(env->cost, OP_ALLGATHER) ? cost_lookup_ns(env->cost, OP_ALLGATHER, N, 0, 0) : 0;
    c->start = (double)env->iter_overhead_ns;
}

/* layer-wise: the first k layers recomputed in the iteration, the others' KV loaded */
static SplitPrefix cf_layer_split(const CfState *cf, const CfCosts *c)
{
    return (SplitPrefix){.L = cf->L, .stage_of = cf->stage_of, .hop_per_stage = c->hop_per_stage, .rec = c->ic.rec,
                         .load = c->load_comp, .hop = c->kv_hop, .h2d = c->kv_h2d, .start = c->start};
}

static double cf_layer_walk(const CfState *cf, const CfCosts *c, int k)
{
    SplitPrefix sp = cf_layer_split(cf, c);
    return split_prefix_walk_ns(&sp, k);
}

static double cf_layer_best(const CfState *cf, const CfCosts *c, int *k)
{
    SplitPrefix sp = cf_layer_split(cf, c);
    return split_prefix_best(&sp, cf->L, k, NULL);
}

/* stage-parallel: stage s recomputes its first ell[s] layers in its lane (stage s > 0 from its
 * boundary activation, loaded first) as the engine runs it (walk.c): the request joins the next
 * iteration at once; stage s's lane starts at the later of the iteration's start and its own
 * boundary's arrival, so the lanes overlap each other and the earlier stages' layers, and stage s's
 * layers start after it; KV of the other layers is loaded in layer order behind the boundaries, all
 * through the shared tier channel and the stages' own H2D links */
static double cf_stage_best(const CfState *cf, const CfCosts *c, int *ell)
{
    SplitStages sp = {.L = cf->L, .S = cf->S, .stage_of = cf->stage_of, .first = cf->st_first, .count = cf->st_count,
                      .hop_per_stage = c->hop_per_stage, .plain = c->ic.plain, .load = c->load_comp,
                      .rec_lane = c->ic.rec_lane, .ag = c->ag, .hop = c->kv_hop, .h2d = c->kv_h2d, .bnd_hop = c->bnd_hop,
                      .bnd_h2d = c->bnd_h2d, .start = c->start};
    return split_stages_best(&sp, ell, NULL);
}

/* token-wise: the race of the two pointers as the engine runs it (one compute chunk per iteration,
 * at most two IO chunks in flight, each chunk one unit per stage through the shared tier channel
 * and the stage's H2D), until they meet; then the new input's iteration */
static double cf_token_ns(const PolicyEnv *env, const CfState *cf, const CfCosts *c, Tier tier, int64_t N)
{
    double hop_lat, h2d_lat; /* latencies: the cost of an empty transfer */
    split_load_hops(env, tier, 0, cf->kv_l, cf->kv_g, 0, &hop_lat, &h2d_lat);
    double per_tok_hop = N > 0 ? (c->kv_hop - hop_lat) / (double)N : 0;
    double per_tok_h2d = N > 0 ? (c->kv_h2d - h2d_lat) / (double)N : 0;
    double hop_free = 0, h2d_free[CF_MAXS] = {0}, hop_free_st[CF_MAXS] = {0};
    double land[2] = {0};
    int64_t ck[2] = {0};
    int nfl = 0;
    int64_t comp = 0, issued = N, landed = 0, comp_fl = 0;
    double now = 0, comp_end = 0;
    int64_t budget = env->token_budget > 0 ? env->token_budget : CF_CHUNK;
    for (int guard = 0; guard < 1 << 20; guard++) {
        while (nfl < 2 && issued > comp + comp_fl) { /* issue IO chunks */
            int64_t ch = issued - comp - comp_fl < CF_CHUNK ? issued - comp - comp_fl : CF_CHUNK;
            issued -= ch;
            double t_last = 0;
            for (int s = 0; s < cf->S; s++) {
                double frac = (double)cf->st_count[s] / cf->L;
                double hop = hop_lat > 0 || per_tok_hop > 0 ? hop_lat + per_tok_hop * (double)ch * frac * cf->L : 0;
                double *hf = c->hop_per_stage ? &hop_free_st[s] : &hop_free; /* nic_per_stage: its own NIC */
                double st = *hf > now ? *hf : now;
                double ready = now;
                if (hop > 0) *hf = st + hop, ready = *hf;
                double d = h2d_lat + per_tok_h2d * (double)ch * frac * cf->L;
                double hs = h2d_free[s] > ready ? h2d_free[s] : ready;
                h2d_free[s] = hs + d;
                if (h2d_free[s] > t_last) t_last = h2d_free[s];
            }
            int slot = ck[0] ? 1 : 0;
            ck[slot] = ch;
            land[slot] = t_last;
            nfl++;
        }
        if (!comp_fl && issued > comp) { /* next compute chunk (an iteration) */
            int64_t ch = issued - comp;
            if (ch > budget) ch = budget;
            if (ch > CF_CHUNK) ch = CF_CHUNK;
            double st = comp_end > now ? comp_end : now;
            comp_end = st + c->start + cf->L * env->est_layer_ns(env->core, ch, comp);
            comp_fl = ch;
        }
        if (!comp_fl && !nfl) break;
        /* the next event */
        int s_io = -1;
        for (int i = 0; i < 2; i++)
            if (ck[i] && (s_io < 0 || land[i] < land[s_io])) s_io = i;
        if (comp_fl && (s_io < 0 || comp_end <= land[s_io])) {
            now = comp_end;
            comp += comp_fl;
            comp_fl = 0;
        } else {
            now = land[s_io];
            landed += ck[s_io];
            ck[s_io] = 0;
            nfl--;
        }
        if (comp + landed >= N && !comp_fl && !nfl) break;
    }
    return now + c->start + cf->L * c->ic.plain;
}

/* the best plan of the enabled axes for (tier, N, n) */
static void cf_solve(const PolicyEnv *env, const CfState *cf, Tier tier, int64_t N, int64_t n, CfMemo *m)
{
    CfCosts c;
    cf_costs(env, cf, tier, N, n, &c);
    m->kind = CF_KV;
    m->k = 0;
    m->est_ns = cf_layer_walk(cf, &c, 0);
    if (cf->force_split >= 0) { /* an ablation: this layer-wise split whatever it costs */
        m->kind = CF_LAYER;
        m->k = cf->force_split < cf->L ? cf->force_split : cf->L;
        m->est_ns = cf_layer_walk(cf, &c, m->k);
        return;
    }
    if (!cf->token && !cf->layer) return; /* both axes off: plain KV load, layer by layer */
    double best = INFINITY;
    if (cf->layer) {
        int k;
        double v = cf_layer_best(cf, &c, &k);
        best = v, m->kind = CF_LAYER, m->k = k;
        if (cf->gpu && cf->S > 1) {
            int ell[CF_MAXS] = {0};
            double vs = cf_stage_best(cf, &c, ell);
            if (vs < best) {
                best = vs;
                m->kind = CF_STAGE;
                memcpy(m->ell, ell, sizeof ell);
            }
        }
    }
    if (cf->token) {
        double v = cf_token_ns(env, cf, &c, tier, N);
        if (v < best) best = v, m->kind = CF_TOKEN;
    }
    m->est_ns = best;
}

static int cf_init(const PolicyEnv *env, void **state, KvErr *e)
{
    CfState *cf = calloc(1, sizeof *cf);
    if (!cf) return kv_err(e, "out of memory");
    const ModelLayout *ly = env->ly;
    cf->onetier = env->ops == &policy_hcache_cf;
    if (cf->onetier) { /* layer axis (HCache's IO-bound split) and the GPU axis; no KV: no token axis */
        cf->layer = 1;
        cf->gpu = policy_knob(env, "gpu") != 0;
    } else {
        cf->token = policy_knob(env, "token") != 0;
        cf->layer = policy_knob(env, "layer") != 0;
        cf->gpu = policy_knob(env, "gpu") != 0;
        cf->batch = policy_knob(env, "batch") != 0;
        cf->io_order = (int)policy_knob(env, "io_order");
        cf->slo_short_ns = (int64_t)(policy_knob(env, "slo_short_ms") * 1e6);
        cf->slo_long_ns = (int64_t)(policy_knob(env, "slo_long_ms") * 1e6);
        cf->class_tokens = (int64_t)policy_knob(env, "class_tokens");
        cf->force_split = (int)policy_knob(env, "split");
    }
    if (cf->onetier) cf->force_split = -1;
    cf->L = ly->m->layers;
    cf->S = ly->pp;
    if (cf->L > CF_MAXL || cf->S > CF_MAXS) {
        free(cf);
        return kv_err(e, "cacheflow: %d layers / %d stages (at most %d / %d)", ly->m->layers, ly->pp, CF_MAXL, CF_MAXS);
    }
    for (int s = 0; s < cf->S; s++) {
        model_stage_layers(ly, s, &cf->st_first[s], &cf->st_count[s]);
        for (int l = cf->st_first[s]; l < cf->st_first[s] + cf->st_count[s]; l++) cf->stage_of[l] = s;
    }
    cf->kv_l = (double)model_kv_bytes_per_token_layer(ly);
    cf->kv_g = (double)model_kv_bytes_per_token_layer_gpu(ly);
    cf->hid_l = (double)model_boundary_bytes_per_token(ly);
    cf->T = ly->tp;
    cf->tier = split_primary_tier(env);
    cf->l_delta = -1;
    if (cf->token && cf->layer)
        for (int64_t N = 128; N <= 262144; N *= 2) {
            CfMemo m;
            cf_solve(env, cf, cf->tier, N, 64, &m);
            if (m.kind == CF_TOKEN) {
                cf->l_delta = N;
                break;
            }
        }
    else if (cf->token)
        cf->l_delta = 0;
    *state = cf;
    return 0;
}

static void cf_fini(void *state) { free(state); }

static int cf_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    CfState *cf = state;
    int64_t N = q->history_tokens, n = q->new_tokens < 1 ? 1 : q->new_tokens;
    if (env->token_budget > 0 && n > env->token_budget) n = env->token_budget;
    Tier tier = q->saved_tier != TIER_NONE ? q->saved_tier : cf->tier;
    CfMemo tmp, *m;
    if (cf->batch && cf->token && cf->force_split < 0 && q->restoring_before > 0) { /* behind another restoration: joint two pointers */
        memset(&tmp, 0, sizeof tmp);
        tmp.kind = CF_TOKEN;
        m = &tmp;
        cf->n_joint++;
    } else {
        uint64_t key = (uint64_t)N * 0x9E3779B97F4A7C15ULL ^ (uint64_t)n * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)tier;
        m = &cf->memo[(key >> 20) % CF_MEMO];
        if (m->valid && m->N == N && m->n == n && m->tier == (int)tier) {
            cf->memo_hits++;
        } else {
            m->valid = 1;
            m->N = N;
            m->n = n;
            m->tier = (int)tier;
            cf_solve(env, cf, tier, N, n, m);
        }
    }
    cf->n_kind[m->kind]++;
    if (m != &tmp) cf->last_est_ns = m->est_ns;
    uint8_t loaded = cf->onetier ? LM_LOAD_HIDDEN : LM_LOAD_KV;
    switch (m->kind) {
    case CF_TOKEN:
        plan->tokenwise = 1;
        plan->io_chunk_tokens = CF_CHUNK;
        plan->comp_chunk_tokens = CF_CHUNK;
        return 0;
    case CF_STAGE:
        plan->stage_parallel = 1;
        for (int s = 0; s < cf->S; s++)
            for (int l = cf->st_first[s]; l < cf->st_first[s] + cf->st_count[s]; l++)
                plan->layer_mode[l] = l < cf->st_first[s] + m->ell[s] ? LM_RECOMPUTE : loaded;
        break;
    default:
        for (int l = 0; l < cf->L; l++) plan->layer_mode[l] = l < m->k ? LM_RECOMPUTE : loaded;
        break;
    }
    plan->early_layers = 0;
    if (cf->onetier) plan->chunk_tokens = 64; /* HCache's storage layout */
    return 0;
}

static double cf_saved(void *state, const PolicyEnv *env)
{
    CfState *cf = state;
    if (cf->onetier) return (double)model_hidden_bytes_per_token(env->ly); /* the boundaries are among them */
    double b = (double)model_kv_bytes_per_token(env->ly);
    if (cf->gpu && cf->S > 1) b += (cf->S - 1) * (double)model_boundary_bytes_per_token(env->ly);
    return b;
}

/* the TTFT deadline of unit u's request: its arrival + its class's target */
static int64_t cf_deadline(const CfState *cf, const IoChoice *u)
{
    return u->arrival_ns + (u->history_tokens < cf->class_tokens ? cf->slo_short_ns : cf->slo_long_ns);
}

/* the other IO orders (cacheflow.io_order != oldest); ties keep queue order (the first wins) */
static int cf_pick_order(const CfState *cf, const IoChoice *u, int n)
{
    int best = 0;
    switch (cf->io_order) {
    case CF_ORDER_MRF: /* most remaining restoration first (the paper's literal rule) */
        for (int i = 1; i < n; i++)
            if (u[i].remaining_restore_tokens > u[best].remaining_restore_tokens) best = i;
        return best;
    case CF_ORDER_EDF: /* earliest TTFT deadline first */
        for (int i = 1; i < n; i++)
            if (cf_deadline(cf, &u[i]) < cf_deadline(cf, &u[best])) best = i;
        return best;
    case CF_ORDER_AGING: { /* most remaining first, but a request past its class's target goes first
                            * (the one with the earliest deadline among them): MRF's wait is bounded */
        int late = -1;
        for (int i = 0; i < n; i++)
            if (u[i].now_ns >= cf_deadline(cf, &u[i]) && (late < 0 || cf_deadline(cf, &u[i]) < cf_deadline(cf, &u[late])))
                late = i;
        if (late >= 0) return late;
        for (int i = 1; i < n; i++)
            if (u[i].remaining_restore_tokens > u[best].remaining_restore_tokens) best = i;
        return best;
    }
    default: /* CF_ORDER_FIFO: the channel's queue order */
        return 0;
    }
}

/* Algorithm 1's global IO scheduler: the oldest restoring request's unit (see the header); ties
 * (units of one request) keep arrival order. batch=0: FIFO. Another cacheflow.io_order replaces it
 * (fairness experiments: docs/findings-method.md). */
static int cf_pick(void *state, const IoChoice *u, int n)
{
    CfState *cf = state;
    if (cf->io_order != CF_ORDER_OLDEST) return cf_pick_order(cf, u, n);
    if (!cf->batch) return 0;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (u[i].request_id < u[best].request_id) best = i;
    return best;
}

/* the order cf_pick serves in, by name (policy.h io_order): the other orders are not replayable */
static const char *cf_io_order(void *state)
{
    const CfState *cf = state;
    if (cf->io_order == CF_ORDER_FIFO || (cf->io_order == CF_ORDER_OLDEST && !cf->batch)) return "fifo";
    return cf->io_order == CF_ORDER_OLDEST ? "oldest" : NULL;
}

static void cf_notes(void *state, char *buf, int len)
{
    CfState *cf = state;
    snprintf(buf, (size_t)len,
             "{\"axes\": {\"token\": %d, \"layer\": %d, \"gpu\": %d, \"batch\": %d}, \"l_delta_tokens\": %lld, "
             "\"plans\": {\"kv\": %llu, \"layerwise\": %llu, \"tokenwise\": %llu, \"stage_parallel\": %llu, "
             "\"joint_batch\": %llu, \"memo_hits\": %llu}, \"layerwise_restores\": %llu, \"tokenwise_restores\": %llu, "
             "\"boundary_activations_saved\": %d, \"last_plan_est_s\": %.9f}",
             cf->token, cf->layer, cf->gpu, cf->batch, (long long)cf->l_delta, (unsigned long long)cf->n_kind[CF_KV],
             (unsigned long long)cf->n_kind[CF_LAYER], (unsigned long long)cf->n_kind[CF_TOKEN],
             (unsigned long long)cf->n_kind[CF_STAGE], (unsigned long long)cf->n_joint, (unsigned long long)cf->memo_hits,
             (unsigned long long)(cf->n_kind[CF_LAYER] + cf->n_kind[CF_STAGE] + cf->n_kind[CF_KV]),
             (unsigned long long)cf->n_kind[CF_TOKEN], cf->gpu && cf->S > 1 ? cf->S - 1 : 0, cf->last_est_ns / 1e9);
}

static const PolicyKnob g_cf_knobs[] = {
    {.name = "token", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_token",
     .help = "token axis: token-wise two pointers (chosen per request when faster)"},
    {.name = "layer", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_layer",
     .help = "layer axis: layer-wise two pointers (chosen per request when faster)"},
    {.name = "gpu", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_gpu",
     .help = "GPU axis: boundary activations, every pipeline stage restores its own layers"},
    {.name = "batch", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_batch",
     .help = "batch axis: batches restored jointly (token-wise, oldest request's IO first; 0: per request, FIFO)"},
    {.name = "io_order", .type = KNOB_INT, .def = 0, .min = 0, .max = 4,
     .help = "IO order of the shared channel: 0 oldest request first (Algorithm 1 as modelled), 1 most remaining first, 2 FIFO, 3 earliest TTFT deadline first, 4 aging (most remaining first, requests past their class target first)"},
    {.name = "slo_short_ms", .type = KNOB_REAL, .def = 200, .min = 1, .max = 1e6,
     .help = "TTFT target of histories shorter than class_tokens (io_order 3 and 4), ms"},
    {.name = "slo_long_ms", .type = KNOB_REAL, .def = 1000, .min = 1, .max = 1e6,
     .help = "TTFT target of longer histories (io_order 3 and 4), ms"},
    {.name = "class_tokens", .type = KNOB_INT, .def = 2048, .min = 1, .max = 1 << 30,
     .help = "history tokens from which a request is in the long class (io_order 3 and 4)"},
    {.name = "split", .type = KNOB_INT, .def = -1, .min = -1, .max = 1 << 20,
     .help = "-1: the planner's choice; K >= 0: every restoration layer-wise, the first K layers recomputed (capped at the model's layers) and the rest loaded — an ablation (make validate replays every K to check the planner's optimum)"},
};

const KvPolicyOps policy_cacheflow = {
    .name = "cacheflow",
    .summary = "per-request choice of token- or layer-wise two pointers (stage-parallel under PP) from the cost model; batches restored jointly",
    .init = cf_init,
    .fini = cf_fini,
    .plan_restore = cf_plan,
    .saved_bytes_per_token = cf_saved,
    .io_pick = cf_pick,
    .io_order = cf_io_order,
    .notes = cf_notes,
    .knobs = g_cf_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_cf_knobs),
};

/* hcache-cf ("one tier"): one stored form, HCache's per-layer hidden states, serving both HCache's
 * restoration (load hidden states, project K and V; the first layers recomputed while they load) and
 * CacheFlow's GPU axis: the hidden state entering a pipeline stage's first layer is that stage's
 * boundary activation, so every stage recomputes its own first ℓ_s layers from it in its lane while
 * the later layers' hidden states load — without storing the boundary activations (or any KV) apart.
 * Per request the fastest of HCache's split and the stage-parallel splits wins (the engine's walk;
 * the same solver as cacheflow's, with hidden-state loads and their projection in place of KV). */
static void hcf_notes(void *state, char *buf, int len)
{
    CfState *cf = state;
    snprintf(buf, (size_t)len,
             "{\"one_tier\": true, \"stored_form\": \"hidden\", \"gpu\": %d, \"plans\": {\"hidden\": %llu, \"layerwise\": %llu, "
             "\"stage_parallel\": %llu, \"memo_hits\": %llu}, \"boundary_activations_from_hidden_states\": %d, "
             "\"last_plan_est_s\": %.9f}",
             cf->gpu, (unsigned long long)cf->n_kind[CF_KV], (unsigned long long)cf->n_kind[CF_LAYER],
             (unsigned long long)cf->n_kind[CF_STAGE], (unsigned long long)cf->memo_hits, cf->gpu && cf->S > 1 ? cf->S - 1 : 0,
             cf->last_est_ns / 1e9);
}

static const PolicyKnob g_hcf_knobs[] = {
    {.name = "gpu", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1,
     .help = "stage-parallel restoration from the stored hidden states at stage boundaries (0: HCache's split only)"},
};

const KvPolicyOps policy_hcache_cf = {
    .name = "hcache-cf",
    .role = PR_VARIANT,
    .varies = "hcache",
    .summary = "one tier: HCache's hidden states double as CacheFlow's boundary activations (stage-parallel restoration without storing them apart)",
    .init = cf_init,
    .fini = cf_fini,
    .plan_restore = cf_plan,
    .saved_bytes_per_token = cf_saved,
    .notes = hcf_notes,
    .save_mode = SAVE_PER_ITERATION,
    .knobs = g_hcf_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_hcf_knobs),
};
