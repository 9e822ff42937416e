/* split.h — shared arithmetic of the hybrid policies: per-layer cost estimates from the cost model
 * and the pipelined walk their split solvers cost each candidate split with.
 *
 * Per-layer estimates for restoring N history tokens (one layer, one GPU of the TP group):
 *   t_re(N)   recompute the layer for N tokens from its input (the engine's layer time at N tokens)
 *   t_proj(N) project K and V from N hidden states (+RoPE), plus the TP all-gather of the states
 *   t_kv(N)   load the layer's KV of N tokens from a tier (bottleneck hop)
 *   t_hid(N)  load the layer's input hidden states of N tokens (token-sharded under TP)
 *
 * Pipelined estimates (what the engine does with a layer-wise plan, for an isolated request): the
 * loads are issued at admission in layer order and flow through the tier's channel (one per host,
 * shared by the stages) then the stage's H2D link (a flow shop: a unit starts a hop when the hop is
 * free and its previous hop is done); the iteration that carries the restoration starts at the same
 * instant, pays the engine's overhead, then walks the layers: layer l starts when layer l−1 is done
 * and its state has arrived, and costs the new input's compute plus the layer's restoration work
 * (recompute rows in the GEMMs and their attention, or the K/V projection of hidden states).
 * split_walk_ns is that walk, exactly, in O(L); the solvers call it once per candidate split.
 */
#ifndef KV_SPLIT_H
#define KV_SPLIT_H

#include "policies/policy.h"

typedef struct LayerCosts {
    double t_re, t_proj, t_kv, t_hid;
} LayerCosts;

void split_layer_costs(const PolicyEnv *env, Tier tier, int64_t N, LayerCosts *c);

/* Per-layer times of the iteration that prefills the first chunk of the new input (n tokens, at most
 * the token budget) after N history tokens, with one layer of restoration work of each kind. */
typedef struct IterCosts {
    double plain;  /* the new input alone (the layer's state was loaded as KV) */
    double rec;    /* + the layer recomputed for the N history tokens (rows in the GEMMs, their attention) */
    double hid;    /* + the K/V projection of N loaded hidden states (+ their all-gather under TP) */
    double rec_lane; /* a stage-parallel lane's recompute of the layer (N tokens from their input, no new input) */
} IterCosts;
void split_iter_costs(const PolicyEnv *env, int64_t N, int64_t new_tokens, IterCosts *c);

/* The load of one layer of `tokens` tokens as two hops (see PolicyEnv.est_load_hops_ns). */
void split_load_hops(const PolicyEnv *env, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu,
                     int64_t chunk_tokens, double *hop_ns, double *h2d_ns);

/* The IO flow shop: the shared tier channel and each stage's H2D link, free from these times on. */
typedef struct IoFlow {
    double hop_free;
    double h2d_free[KV_MAX_STAGES];
    int hop_per_stage;       /* the tier channel is one per stage (nic_per_stage, remote tier): hop_free_st */
    double hop_free_st[KV_MAX_STAGES];
} IoFlow;
/* a unit issued now (after the ones before it) for `stage` (0 <= stage < KV_MAX_STAGES: the engine
 * refuses more stages): its arrival time in HBM */
double split_flow_load(IoFlow *f, int stage, double hop_ns, double h2d_ns);

/* The layer walk: layer l (in order) starts at max(end of layer l−1, arrive[l]) and lasts comp[l];
 * the walk starts at start_ns; returns its end. arrive[l] < 0: nothing to wait for. */
double split_walk_ns(int L, const double *comp, const double *arrive, double start_ns);

/* The prefix split both hcache's IO-bound direction and cacheflow's layer axis search: candidate k
 * recomputes layers [0, k) inside the iteration (rec each, nothing to wait for) and loads layers
 * [k, L) in layer order through the flow shop (hop, h2d each; stage_of[l] the layer's stage, every
 * stage one run of consecutive layers), each loaded layer costing `load` in the walk. */
typedef struct SplitPrefix {
    int L;
    const int *stage_of;
    int hop_per_stage; /* IoFlow.hop_per_stage */
    double rec, load, hop, h2d, start;
} SplitPrefix;
/* candidate k's walk (0 <= k <= L), the arithmetic of split_flow_load and split_walk_ns: O(L) */
double split_prefix_walk_ns(const SplitPrefix *p, int k);
/* the fastest candidate of 0..kmax, ties to the smaller k; *k_out its k, returns its walk. Every
 * candidate is bounded in O(stages) by the walk's closed form in exact arithmetic (constant costs
 * make the flow shop's arrivals and the walk's end piecewise linear in the layer) widened by the
 * rounding error the walk's additions can make; only the candidates whose bound reaches the best
 * upper bound are walked (O(L) each), so the choice and its value are those of the exhaustive
 * search bit for bit. Costs that are negative, subnormal or not finite, or a stage in two runs:
 * the exhaustive search. *walked (may be NULL): how many candidates were walked. */
double split_prefix_best(const SplitPrefix *p, int kmax, int *k_out, int *walked);
/* the exhaustive search: every candidate walked (the reference split_prefix_best is tested against) */
double split_prefix_best_exhaustive(const SplitPrefix *p, int kmax, int *k_out);

/* The stage-parallel split (cacheflow's GPU axis) as the engine runs it: stage s (first[s], count[s]
 * consecutive layers) recomputes its first ell[s] layers in a lane of ell[s]·rec_lane (stage s > 0
 * from its boundary activation, loaded first through the flow shop with bnd_hop / bnd_h2d, + ag)
 * starting at the later of the iteration's start and that arrival; its first layer waits for the
 * lane; those layers cost `plain` in the walk, the others are loaded behind every boundary in layer
 * order (hop / h2d) and cost `load`. */
typedef struct SplitStages {
    int L, S;
    const int *stage_of, *first, *count;
    int hop_per_stage;
    double plain, load, rec_lane, ag, hop, h2d, bnd_hop, bnd_h2d, start;
} SplitStages;
double split_stages_walk_ns(const SplitStages *p, const int *ell);
/* the search cacheflow makes: the same split in every stage (0..the largest stage, ties to the
 * smaller), then twice each stage's own with the others held, a candidate replacing the best only
 * when it walks strictly faster. Exact like split_prefix_best: candidates are bounded in O(S) by
 * the closed form and only those reaching the running best are walked. ell[S] receives the splits;
 * returns the walk; *walked (may be NULL) as above. */
double split_stages_best(const SplitStages *p, int *ell, int *walked);
double split_stages_best_exhaustive(const SplitStages *p, int *ell);

/* Per-layer plans of mixed forms (adaptive, hcache-quant): form f of layer l is costed by comp[f]
 * in the walk and, when loads[f], loaded through the flow shop with hop[f] / h2d[f]; layer l's form
 * is form_of[l]; stage_of[l] its pipeline stage. The engine's walk of that plan for an isolated
 * request (what hcache's solver computes for its two forms), O(L). */
typedef struct FormCosts {
    double comp[8], hop[8], h2d[8];
    int loads[8];
    double start_ns;
} FormCosts;
/* L <= KV_MAX_LAYERS (the engine refuses a larger model before a policy is asked) */
double split_forms_ns(int L, const int *stage_of, const uint8_t *form_of, const FormCosts *fc);

/* Bytes of a quantized stream as a share of fp16: bits/16 plus one fp16 scale per `group` elements
 * (per token and head: group = d_h); bits >= 16: 1. */
double split_quant_share(int bits, int group);
/* Per-layer dequantize of N tokens of KV (hidden = 0) or of hidden states (hidden = 1: the op scaled
 * to D/T elements per token, policy_dequant_hidden_tokens) on one GPU; 0 when the cost model has no
 * dequant op (as the engine charges it). */
double split_dequant_ns(const PolicyEnv *env, int64_t N, int hidden);

/* The tier a policy stores into by default on this platform: SSD array if any, else the remote
 * store if any, else DRAM (what the storage configuration will use after DRAM spills). */
Tier split_primary_tier(const PolicyEnv *env);

#endif
