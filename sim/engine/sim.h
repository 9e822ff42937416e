/* sim.h — the simulator's configuration, its run-time objects and the public entry point.
 *
 * A run replays one trace against one policy on one modelled cluster and fills a SimResult.
 * SimConfig is validated once (sim_config_check) and is const during the run; all run state lives
 * in the Sim object (sim/engine/engine_int.h, one per sim_run call), so runs of several policies
 * over the same config are independent. The engine's modules and the request lifecycle are listed
 * in engine_int.h.
 *
 * Modelling choices that a user must know (README "Model"):
 *  - A replica has S pipeline stages of T tensor-parallel GPUs. The T GPUs of a stage work in
 *    lockstep (costs are per GPU, each GPU moves its own shard on its own link), so a stage has one
 *    compute server, one H2D and one D2H channel. An iteration walks the layers stage after stage
 *    (no micro-batch pipelining across stages).
 *  - Iterations: continuous batching with a token budget and a max batch; decode tokens first, then
 *    chunks of restoration recompute and new-input prefill in admission order (chunked prefill).
 *    An iteration pays the engine profile's fixed host overhead, then its layers. A layer starts when
 *    the previous one is done and every state it needs (the KV or hidden state of that layer of a
 *    restoring request in the batch) has arrived; iterations with nothing in flight are one event.
 *  - IO channels (per stage H2D and D2H, the host's SSD array, the NIC to the remote store) serve
 *    transfer units one at a time, restoration loads before background saves, FIFO within a class
 *    (a policy may choose the order). H2D and D2H of one link slow down to the catalog's both-ways
 *    rates while the other direction is busy (fluid model: the rate of an in-flight unit changes).
 *  - KV pool in HBM = capacity × mem_util − weights, in blocks; admission reserves the whole turn
 *    (history + new + output); idle sessions' KV stays resident until LRU eviction needs the space.
 *  - Saved state lives in host DRAM, then the SSD array (LRU spill), or a remote store; it is
 *    dropped when the last tier is full (LRU) or when unused for state_ttl (1 h by default, as
 *    AttentionStore). A session whose saved state is gone, or never existed, restores by recomputing.
 *  - A turn is released at max(its trace arrival, the end of the session's previous turn) — or its
 *    think time after that end, for closed-loop traces. TTFT counts from the release.
 */
#ifndef KV_SIM_H
#define KV_SIM_H

#include <stdint.h>

#include "sim/cost/cost.h"
#include "sim/base/hist.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/util.h"

#define SIM_MAX_LAYERS 256
#define SIM_MAX_STAGES 16
#define SIM_CLASSES 3

typedef struct SimConfig {
    /* the system */
    char model[64];
    char platform[64];
    char dtype[8];
    int tp, pp, replicas;
    /* engine */
    char engine[16];            /* profile name: vllm, sglang, mii */
    int64_t iter_overhead_ns;   /* per-iteration host overhead (from the profile unless set) */
    int64_t token_budget;       /* tokens per iteration (decode + prefill + restoration compute) */
    double restore_share;       /* at most this share of the budget for restoration compute (1: no cap) */
    int max_batch;
    double mem_util;            /* share of HBM the engine may use (weights + KV pool) */
    int block_tokens;
    /* workload */
    char trace[4096];           /* generator name or path */
    char trace_format[16];
    uint64_t seed;
    int64_t requests;           /* max requests (0: whole trace; generators: 1000) */
    double session_rate;        /* sessions per second where the trace has no timestamps */
    double time_scale;
    int64_t think_ns;
    int64_t max_context;        /* 0: the model's max_position_embeddings */
    int evict_each_turn;
    /* storage */
    char store[16];             /* "auto" | "dram" | "dram+ssd" | "dram+remote" | "remote" */
    uint64_t dram_bytes;        /* 0: platform */
    int n_ssd;                  /* -1: platform */
    char nic[64];               /* "": platform */
    int64_t state_ttl_ns;
    char save_mode[16];
    /* CacheFlow's axes, for ablations */
    int cf_token, cf_layer, cf_gpu, cf_batch;
    int quant_bits;             /* kv-quant: bits per KV element (8 or 4) */         /* "policy" (its own), "turn", "iteration", "direct" */       /* saved state unused this long is dropped (AttentionStore: 1 h); 0: never */
    /* SLOs and classes */
    int64_t slo_ttft_ns;
    int64_t slo_tbt_ns;
    int64_t class_edges[SIM_CLASSES - 1]; /* history tokens: short < e0 <= medium < e1 <= long */
    /* cost model */
    char costs[4096];           /* "" or "spec": in-memory spec model; else a store path */
    char cost_device[128];      /* device name in the store ("": the platform's GPU) */
    /* run */
    char policy[32];
    int quiet;
} SimConfig;

void sim_config_defaults(SimConfig *c);
/* key=value (the --set syntax); errors list the known keys */
int sim_config_set(SimConfig *c, const char *key, const char *value, KvErr *e);
/* keys and one-line help, for --help */
void sim_config_print_keys(FILE *out);

typedef struct SimClassStats {
    Hist ttft, restore;
    uint64_t n;
    uint64_t slo_met;
} SimClassStats;

typedef struct SimResult {
    char policy[32];
    uint64_t requests, sessions, truncated, dropped;
    int64_t sim_end_ns;
    Hist ttft, queue, restore, prefill, tbt, lb_ratio;
    double tbt_mean_ns;
    uint64_t tbt_n;
    SimClassStats cls[SIM_CLASSES];
    uint64_t slo_met;
    uint64_t restored_tokens;
    double restore_busy_ns;       /* sum over requests of restoration time */
    uint64_t hits_resident, hits_dram, hits_ssd, hits_remote, misses, no_history;
    double bytes_h2d, bytes_d2h, bytes_ssd_read, bytes_ssd_write, bytes_net_in, bytes_net_out;
    double saved_bytes_per_token;
    uint64_t dram_peak_bytes, ssd_peak_bytes, remote_peak_bytes, hbm_peak_tokens;
    uint64_t pool_tokens;         /* KV pool capacity per replica */
    double util_gpu[SIM_MAX_STAGES];
    double util_h2d[SIM_MAX_STAGES], util_d2h[SIM_MAX_STAGES], util_ssd, util_nic_in, util_nic_out;
    uint64_t iterations, events;
    uint64_t extrapolations;
    uint64_t extrapolations_op[OP_COUNT];
    double wall_s;
    char policy_notes[1024];      /* policy-specific facts (its split, thresholds) as JSON text */
} SimResult;

void sim_result_free(SimResult *r);

/* Everything a run needs, resolved once (catalog entries, cost model). */
typedef struct SimWorld {
    const SimConfig *cfg;
    ModelCatalog models;
    HwCatalog hw;
    const ModelSpec *model;
    const PlatformSpec *platform;
    ModelLayout ly;
    CostModel cost;
    char cost_source[512];
} SimWorld;

int sim_world_open(SimWorld *w, const SimConfig *cfg, KvErr *e);
void sim_world_close(SimWorld *w);

/* Per-request rows: called as each request completes (results writer streams them). */
typedef struct SimRequestRow {
    uint64_t id, session;
    int turn, replica;
    int64_t arrival_ns, history_tokens, new_tokens, output_tokens;
    const char *restore_from;     /* resident, dram, ssd, remote, recompute, none */
    int64_t recomputed_tokens, loaded_tokens;
    int64_t queue_ns, restore_ns, prefill_ns, ttft_ns, done_ns;
    double tbt_mean_ns;
    int64_t tbt_max_ns;
    double lb_restore_ns;
} SimRequestRow;
typedef int (*SimRowFn)(void *ctx, const SimRequestRow *row, KvErr *e);

/* Run one policy. progress: called about every second of wall time with the fraction done (or NULL). */
typedef void (*SimProgressFn)(void *ctx, double frac, uint64_t requests_done, int64_t sim_ns);
int sim_run(SimWorld *w, const char *policy, SimRowFn row_fn, void *row_ctx, SimProgressFn prog, void *prog_ctx,
            SimResult *out, KvErr *e);

#endif
