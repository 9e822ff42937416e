/* policy.h — the restoration-policy plug-in interface (docs/model.md "Policies").
 *
 * A policy is a const KvPolicyOps: a name, a one-line summary and callbacks the core calls at its
 * decision points. Policies decide, the core executes: a policy returns a RestorePlan (what to
 * recompute, which layers to load and in what form, when the request may join an iteration) and
 * the number of bytes it saves per token; the core moves the bytes, runs the iterations and keeps
 * the clock. Per-run state lives behind the void* that init returns, never in the ops struct.
 *
 * Slots: name, summary, plan_restore and saved_bytes_per_token are required; init, fini, io_pick,
 * io_order, notes and knobs are optional. policy_registry_check() rejects missing required slots, duplicate
 * names and malformed knob tables (sim_world_open runs it over the built-in table at startup).
 *
 * Knobs: a policy owns its settings (like a kernel module's module_param). Each row of its knob
 * table names one number (bool, int or real) with a default, an inclusive range and optionally a
 * short list of allowed values; the user sets it with --set <policy>.<knob>=VALUE (an `alias` keeps
 * an older global spelling such as cf_gpu working). The configuration stores the values (defaults
 * unless set, always validated against the table); the policy reads them through
 * policy_knob(env, "name"). The results list every knob's value under the policy's own entry.
 */
#ifndef KV_POLICY_H
#define KV_POLICY_H

#include <stdint.h>

#include "sim/cost/cost.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/limits.h"
#include "sim/base/memdev.h"
#include "sim/base/util.h"

/* How the state of one layer of the (non-token-recomputed part of the) history comes back. */
typedef enum LayerMode {
    LM_NONE = 0,     /* nothing to restore at this layer */
    LM_LOAD_KV,      /* load the layer's KV */
    LM_LOAD_HIDDEN,  /* load the layer's input hidden state, then project K and V (+RoPE) */
    LM_RECOMPUTE,    /* recompute the layer for these tokens (valid only for a prefix of layers) */
} LayerMode;

/* The places saved state lives below HBM, in the order results list them (restore_from, bytes,
 * peak occupancy): host DRAM, the memory devices (sim/base/memdev.h's rows), the SSD array, the
 * remote store. A tier's engine row is sim/engine/tier.c's tier_table; its name is here so that
 * policies, the engine and every output spell it the same way. */
#define TIER_MEMDEV_ENUM_(ID, KEY, WHAT, WHATS) TIER_##ID,
typedef enum Tier { TIER_NONE = 0, TIER_DRAM, KV_MEMDEV_ROWS(TIER_MEMDEV_ENUM_) TIER_SSD, TIER_REMOTE, TIER_COUNT } Tier;
/* the memory device of tier t (its MEMDEV_ index), -1 for another tier */
static inline int tier_memdev(Tier t)
{
    return t > TIER_DRAM && t < TIER_DRAM + 1 + KV_MEMDEVS ? (int)t - (TIER_DRAM + 1) : -1;
}
static inline Tier tier_of_memdev(int m) { return (Tier)(TIER_DRAM + 1 + m); }
static inline const char *tier_name(Tier t)
{
    static const char *const names[TIER_COUNT] = {[TIER_NONE] = "none", [TIER_DRAM] = "dram", [TIER_SSD] = "ssd", [TIER_REMOTE] = "remote"};
    if (tier_memdev(t) >= 0) return kv_memdev_row(tier_memdev(t))->key;
    return t >= TIER_NONE && t < TIER_COUNT ? names[t] : "?";
}

/* What the core tells a policy about a request to restore. */
typedef struct RestoreQuery {
    int64_t history_tokens;  /* N: tokens to bring back */
    int64_t new_tokens;      /* n: new input to prefill after them */
    Tier saved_tier;         /* where the saved state is (TIER_NONE: nothing saved) */
    int64_t saved_tokens;    /* tokens covered by the saved state */
    uint64_t request_id;     /* the engine's id of the request (what io_pick's IoChoice names) */
    /* the batch it joins: requests of the same replica admitted before it whose restoration is
     * still in progress */
    int restoring_before;
} RestoreQuery;

typedef struct RestorePlan {
    int no_restore;            /* the state is already on the GPU (the Ideal reference): nothing to do */
    int64_t recompute_tokens;  /* history tokens [0, recompute_tokens) recomputed in chunks through all layers */
    uint8_t layer_mode[KV_MAX_LAYERS];   /* per layer (LayerMode), for history tokens [recompute_tokens, N) */
    int early_layers;          /* join the iteration once the first k layers' state arrived; -1: all */
    /* token-wise two pointers (Cake, CacheFlow token-wise): recompute forward from token 0 in
     * token-budget chunks while KV is loaded backward from the end in io_chunk_tokens chunks (all
     * layers); they meet at run time. Excludes recompute_tokens and layer_mode. */
    int tokenwise;
    int64_t io_chunk_tokens;
    /* with tokenwise: no compute pointer — the whole history is loaded in io_chunk_tokens chunks
     * (all layers each) before the request's new input is prefilled (whole-request onboarding: vLLM's
     * OffloadingConnector, LMCache with use_layerwise false); with kv_bytes_scale in (0, 1) the
     * loaded KV is dequantized in the iteration that prefills the new input, at every layer */
    int whole;
    int64_t comp_chunk_tokens; /* 0: whatever the token budget leaves */
    /* token-prefix recompute (recompute_tokens): tokens per iteration; 0: the engine's token budget,
     * -1: unchunked (the whole history and the new input in one iteration, as vLLM without chunked
     * prefill) */
    int64_t recompute_chunk_tokens;
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
    /* per layer, the stored form's bytes as a share of its full-precision size (quantized KV or
     * hidden states: bits/16 + the scales' share); 0: as kv_bytes_scale says (KV) or full (hidden).
     * A layer loaded with a share in (0, 1) pays a dequantize of its tokens in the iteration (hidden
     * states: the op scaled to D/T elements per token instead of the KV's 2·h_kv·d_h/T). Overrides
     * kv_bytes_scale on that layer; ignored on recomputed layers and boundary activations. */
    float layer_bytes_scale[KV_MAX_LAYERS];
} RestorePlan;

/* How a policy's saved state is written while the session runs. */
typedef enum SaveMode {
    SAVE_TURN_END = 0,  /* after the turn, asynchronously (AttentionStore) */
    SAVE_PER_ITERATION, /* two-stage: each iteration's new state is snapshotted to DRAM (D2H, background,
                           in 64-token pieces per session) and flushed to its tier in the background */
    SAVE_DIRECT,        /* written from the critical path: the iteration waits for the writes */
} SaveMode;

/* One setting owned by a policy. Values are held as doubles (bools 0/1, ints exact). */
typedef enum PolicyKnobType { KNOB_BOOL = 0, KNOB_INT, KNOB_REAL } PolicyKnobType;

#define POLICY_MAX_KNOBS 12      /* rows in one policy's knob table */
#define POLICY_MAX_REGISTERED 32 /* policies in the registry */
#define POLICY_KNOB_MAX_CHOICES 4

typedef struct PolicyKnob {
    const char *name;    /* [a-z0-9_]+, unique within the policy: --set <policy>.<name>=VALUE */
    PolicyKnobType type;
    double def;          /* default; within [min, max] and among the choices */
    double min, max;     /* inclusive range (bools: 0, 1) */
    int n_choices;       /* 0: any value in range; else the value must be one of choices[] */
    double choices[POLICY_KNOB_MAX_CHOICES];
    const char *alias;   /* an older global spelling accepted by --set (e.g. "cf_gpu"), or NULL */
    const char *help;    /* one line */
} PolicyKnob;

/* What a policy may read and ask: the resolved world, its knobs and estimates from the cost model. */
typedef struct PolicyEnv {
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
    /* the same load as its two hops, for pipelined estimates: *hop_ns on the tier's own channel (the
     * SSD array or the NIC: one per host, shared by every pipeline stage and every request; 0 for
     * DRAM) with the layout's chunk of chunk_tokens tokens (0: the platform's stripe), and *h2d_ns
     * on the stage's own H2D link (one per stage); with nic_per_stage the remote store's NIC is one per
     * stage instead (IoFlow.hop_per_stage in split.h). Each includes its per-transfer latency. May be
     * NULL (tests' stub environments): split.c then treats est_load_layer_ns as a single hop. */
    void (*est_load_hops_ns)(void *core, Tier tier, int64_t tokens, double bytes_per_token_layer,
                             double bytes_per_token_layer_gpu, int64_t chunk_tokens, double *hop_ns, double *h2d_ns);
    /* the tier saved state goes to first after DRAM spills, as the storage configuration resolved it
     * (SSD array, remote store, or DRAM alone) */
    Tier save_tier;
    /* the remote store's NIC is one per pipeline stage (config nic_per_stage), not one per host */
    int nic_per_stage;
    const struct KvPolicyOps *ops; /* the policy being run: whose knob table `knobs` follows */
    const double *knobs;           /* ops->n_knobs validated values, in table order */
} PolicyEnv;

/* A transfer unit waiting on a channel, as a policy sees it when choosing the order. */
typedef struct IoChoice {
    uint64_t request_id;
    int64_t remaining_restore_tokens; /* of that request */
    int layer;
    uint64_t bytes;
    int64_t enqueued_ns;
    /* the request's history length, its arrival and the time of the choice (for orders that look at
     * a request's class or its wait: cacheflow.io_order) */
    int64_t history_tokens;
    int64_t arrival_ns;
    int64_t now_ns;
} IoChoice;

/* What a policy is to a comparison: its verdict and compact table (results/verdict.h) group
 * ablations and variants under the policy they change and never name a reference the winner. */
typedef enum PolicyRole {
    PR_OWN = 0,   /* a restoration approach of its own */
    PR_ABLATION,  /* `varies` with a part taken away */
    PR_VARIANT,   /* `varies` with something changed or added */
    PR_REFERENCE, /* a bound (nothing to restore), not an approach */
} PolicyRole;

typedef struct KvPolicyOps {
    const char *name;
    const char *summary;
    PolicyRole role;
    const char *varies; /* PR_ABLATION / PR_VARIANT: the policy it changes */
    int (*init)(const PolicyEnv *env, void **state, KvErr *e);
    void (*fini)(void *state);
    /* required: fill plan for q (plan is zeroed, early_layers = -1, on entry) */
    int (*plan_restore)(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e);
    /* required: bytes saved per context token, whole model (all layers, all GPUs); 0: saves nothing */
    double (*saved_bytes_per_token)(void *state, const PolicyEnv *env);
    /* optional: index of the unit to serve next among n waiting restoration units (default FIFO: 0) */
    int (*io_pick)(void *state, const IoChoice *units, int n);
    /* optional, with io_pick: the order io_pick serves in this run, by name, for a replay that must
     * follow it (kvcal execute --race): "fifo" (the queue's order), "oldest" (the unit of the
     * smallest request id first, ties in queue order); NULL: another order (not replayable) */
    const char *(*io_order)(void *state);
    /* optional: policy facts for the results, as a JSON object text ("{\"split\": 12}") */
    void (*notes)(void *state, char *buf, int len);
    /* how state is saved (default SAVE_TURN_END); may be overridden per run with --set save_mode= */
    SaveMode save_mode;
    /* optional: the policy's settings (see "Knobs" above) */
    const PolicyKnob *knobs;
    int n_knobs;
} KvPolicyOps;

/* The dequantize of `tokens` hidden states as the cost model's dequant op sees it (an op over
 * 2·h_kv·d_h KV elements per token on one GPU): the token count scaled to D/T elements per token,
 * rounded up. Used alike by the policies' estimates and the engine's iteration. */
static inline int64_t policy_dequant_hidden_tokens(int64_t tokens, double hid_bytes_layer_gpu, double kv_bytes_layer_gpu)
{
    double x = (double)tokens * hid_bytes_layer_gpu / kv_bytes_layer_gpu;
    int64_t k = (int64_t)x;
    return (double)k < x ? k + 1 : k;
}

/* The registry of built-in policies. */
int policy_count(void);
const KvPolicyOps *policy_at(int i);
/* Case-sensitive name; on failure the message lists the known names. */
const KvPolicyOps *policy_find(const char *name, KvErr *e);
/* Validate a table of ops: required slots present, names unique, knob tables well formed (names
 * unique and [a-z0-9_]+, min <= default <= max, finite, default among the choices, bools 0..1,
 * integers integral, aliases unique across the table). */
int policy_registry_check(const KvPolicyOps *const *ops, int n, KvErr *e);
/* policy_registry_check over the built-in table (run at startup by sim_world_open). */
int policy_registry_check_builtin(KvErr *e);

/* Index of knob `name` in ops' table, or -1. */
int policy_knob_index(const KvPolicyOps *ops, const char *name);
/* Check v against knob k (range, integrality, choices); the message names "<policy>.<knob>", the
 * value and what is allowed. */
int policy_knob_check(const KvPolicyOps *ops, const PolicyKnob *k, double v, KvErr *e);
/* The value of the running policy's knob `name` (its env->knobs entry). A name missing from the
 * policy's own table is a programming error: NaN is returned so that tests catch it. */
double policy_knob(const PolicyEnv *env, const char *name);

#endif
