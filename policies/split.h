/* split.h — shared arithmetic of the hybrid policies: per-layer cost estimates from the cost model
 * and the min–max layer split solver.
 *
 * Per-layer estimates for restoring N history tokens (one layer, one GPU of the TP group):
 *   t_re(N)   recompute the layer for N tokens from its input (the engine's layer time at N tokens)
 *   t_proj(N) project K and V from N hidden states (+RoPE), plus the TP all-gather of the states
 *   t_kv(N)   load the layer's KV of N tokens from a tier (bottleneck hop)
 *   t_hid(N)  load the layer's input hidden states of N tokens (token-sharded under TP)
 */
#ifndef KV_SPLIT_H
#define KV_SPLIT_H

#include "policies/policy.h"

typedef struct LayerCosts {
    double t_re, t_proj, t_kv, t_hid;
} LayerCosts;

void split_layer_costs(const PolicyEnv *env, Tier tier, int64_t N, LayerCosts *c);

/* argmin over k in [0, L] of f(k); ties go to the smaller k. *best_ns receives the minimum. */
int split_argmin(int L, double (*f)(int k, const void *ctx), const void *ctx, double *best_ns);

/* Layer-wise two pointers over n layers: recompute the first k (t_re each) while loading the others'
 * KV (t_kv each); returns the k minimising max(k·t_re, (n−k)·t_kv), the time in *ns. */
int split_layerwise(int n, double t_re, double t_kv, double *ns);

/* The tier a policy stores into by default on this platform: SSD array if any, else the remote
 * store if any, else DRAM (what the storage configuration will use after DRAM spills). */
Tier split_primary_tier(const PolicyEnv *env);

#endif
