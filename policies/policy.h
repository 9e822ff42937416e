/* policy.h — the restoration-policy plug-in interface (docs/model.md "Policies").
 *
 * A policy is a const KvPolicyOps: a name, a one-line summary and callbacks the core calls at its
 * decision points. Policies decide, the core executes: a policy returns a RestorePlan (what to
 * recompute, which layers to load and in what form, when the request may join an iteration) and
 * the number of bytes it saves per token; the core moves the bytes, runs the iterations and keeps
 * the clock. Per-run state lives behind the void* that init returns, never in the ops struct.
 *
 * Slots: name, summary, plan_restore and saved_bytes_per_token are required; init, fini, io_pick
 * and notes are optional. policy_registry_check() rejects missing required slots and duplicate
 * names (the test suite runs it over the built-in table).
 */
#ifndef KV_POLICY_H
#define KV_POLICY_H

#include <stdint.h>

#include "sim/cost/cost.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/util.h"

struct SimConfig;

/* How the state of one layer of the (non-token-recomputed part of the) history comes back. */
typedef enum LayerMode {
    LM_NONE = 0,     /* nothing to restore at this layer */
    LM_LOAD_KV,      /* load the layer's KV */
    LM_LOAD_HIDDEN,  /* load the layer's input hidden state, then project K and V (+RoPE) */
    LM_RECOMPUTE,    /* recompute the layer for these tokens (valid only for a prefix of layers) */
} LayerMode;

typedef enum Tier { TIER_NONE = 0, TIER_DRAM, TIER_SSD, TIER_REMOTE } Tier;

/* What the core tells a policy about a request to restore. */
typedef struct RestoreQuery {
    int64_t history_tokens;  /* N: tokens to bring back */
    int64_t new_tokens;      /* n: new input to prefill after them */
    Tier saved_tier;         /* where the saved state is (TIER_NONE: nothing saved) */
    int64_t saved_tokens;    /* tokens covered by the saved state */
} RestoreQuery;

typedef struct RestorePlan {
    int no_restore;            /* the state is already on the GPU (the Ideal reference): nothing to do */
    int64_t recompute_tokens;  /* history tokens [0, recompute_tokens) recomputed in chunks through all layers */
    uint8_t layer_mode[256];   /* per layer (LayerMode), for history tokens [recompute_tokens, N) */
    int early_layers;          /* join the iteration once the first k layers' state arrived; -1: all */
    /* token-wise two pointers (Cake, CacheFlow token-wise): recompute forward from token 0 in
     * token-budget chunks while KV is loaded backward from the end in io_chunk_tokens chunks (all
     * layers); they meet at run time. Excludes recompute_tokens and layer_mode. */
    int tokenwise;
    int64_t io_chunk_tokens;
    int64_t comp_chunk_tokens; /* 0: whatever the token budget leaves */
    int low_priority;          /* restoration compute gets the budget after ordinary prefill (Cake) */
    /* pipeline stages restore their own layers concurrently (CacheFlow's GPU axis): LM_RECOMPUTE
     * may then be a prefix of each stage's layers; a stage s > 0 whose first layer is recomputed
     * first loads the activation entering it (the boundary activation, one hidden state per token) */
    int stage_parallel;
    /* storage layout: the saved state is cut into chunks of this many tokens per layer, placed
     * round-robin over the SSDs (HCache: 64), so a layer's read keeps min(n, chunks) drives busy;
     * 0: the platform's stripe size */
    int64_t chunk_tokens;
    /* KV stored compressed (quantized): loaded KV bytes are scaled by this (0 or 1: plain) and every
     * KV-loaded layer pays a dequantize of its tokens in the iteration */
    double kv_bytes_scale;
} RestorePlan;

/* How a policy's saved state is written while the session runs. */
typedef enum SaveMode {
    SAVE_TURN_END = 0,  /* after the turn, asynchronously (AttentionStore) */
    SAVE_PER_ITERATION, /* two-stage: each iteration's new state is snapshotted to DRAM (D2H, background,
                           in 64-token pieces per session) and flushed to its tier in the background */
    SAVE_DIRECT,        /* written from the critical path: the iteration waits for the writes */
} SaveMode;

/* What a policy may read and ask: the resolved world and estimates from the cost model. */
typedef struct PolicyEnv {
    const struct SimConfig *cfg;
    const ModelLayout *ly;
    const HwCatalog *hw;
    const PlatformSpec *platform;
    CostModel *cost;
    int64_t iter_overhead_ns; /* the engine profile's fixed cost per iteration */
    int64_t token_budget;
    void *core; /* opaque, for the estimate functions */
    /* per-layer compute time of an iteration that prefills `new_tokens` after `ctx_tokens` */
    double (*est_layer_ns)(void *core, int64_t new_tokens, int64_t ctx_tokens);
    /* per-layer time to bring `tokens` tokens of state (bytes_per_token_layer_gpu per GPU, whole
     * layer bytes_per_token_layer across the TP group) from a tier into HBM, at the bottleneck hop */
    double (*est_load_layer_ns)(void *core, Tier tier, int64_t tokens, double bytes_per_token_layer,
                                double bytes_per_token_layer_gpu);
} PolicyEnv;

/* A transfer unit waiting on a channel, as a policy sees it when choosing the order. */
typedef struct IoChoice {
    uint64_t request_id;
    int64_t remaining_restore_tokens; /* of that request */
    int layer;
    uint64_t bytes;
    int64_t enqueued_ns;
} IoChoice;

typedef struct KvPolicyOps {
    const char *name;
    const char *summary;
    int (*init)(const PolicyEnv *env, void **state, KvErr *e);
    void (*fini)(void *state);
    /* required: fill plan for q (plan is zeroed, early_layers = -1, on entry) */
    int (*plan_restore)(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e);
    /* required: bytes saved per context token, whole model (all layers, all GPUs); 0: saves nothing */
    double (*saved_bytes_per_token)(void *state, const PolicyEnv *env);
    /* optional: index of the unit to serve next among n waiting restoration units (default FIFO: 0) */
    int (*io_pick)(void *state, const IoChoice *units, int n);
    /* optional: policy facts for the results, as a JSON object text ("{\"split\": 12}") */
    void (*notes)(void *state, char *buf, int len);
    /* how state is saved (default SAVE_TURN_END); may be overridden per run with --set save_mode= */
    SaveMode save_mode;
} KvPolicyOps;

/* The registry of built-in policies. */
int policy_count(void);
const KvPolicyOps *policy_at(int i);
/* Case-sensitive name; on failure the message lists the known names. */
const KvPolicyOps *policy_find(const char *name, KvErr *e);
/* Validate a table of ops: required slots present, names unique. */
int policy_registry_check(const KvPolicyOps *const *ops, int n, KvErr *e);

#endif
