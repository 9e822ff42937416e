/* sim.h — the simulator's configuration, its run-time objects and the public entry point.
 *
 * A run replays one trace against one policy on one modelled cluster and fills a SimResult.
 * SimConfig is validated once (sim_config_check, then sim_config_resolve against the catalogs in
 * sim_world_open) and is const during the run; all run state lives in the Sim object
 * (sim/engine/engine_int.h, one per sim_run call), so runs of several policies over the same config
 * are independent. The engine's modules and the request lifecycle are listed in engine_int.h.
 *
 * Modelling choices that a user must know (docs/reference.md "What is modelled", docs/model.md):
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
 *  - KV pool in HBM = capacity × mem_util − weights, in blocks. alloc=ondemand (default, vLLM):
 *    admission takes the blocks of history + new input while block_watermark of the pool stays free,
 *    decode takes a block when a context crosses a block boundary, and when none is left the most
 *    recently admitted decoding request is preempted (preempt=recompute: its blocks are freed and it
 *    re-prefills its context when re-admitted at the head of the queue; swap: its KV goes to host DRAM
 *    and back). alloc=reserve takes the whole turn (history + new + output) at admission. Idle
 *    sessions' KV stays resident until LRU eviction needs the space (before any preemption).
 *  - Saved state lives in host DRAM, then the SSD array (LRU spill), or a remote store; it is
 *    dropped when the last tier is full (LRU) or when unused for state_ttl (1 h by default, as
 *    AttentionStore). A restoration reads each part of the state from where its bytes are at that
 *    instant (a tier, the DRAM copy of a save still being flushed, or — waiting for it — a save
 *    still crossing D2H); a session whose saved state is gone, or never existed, recomputes.
 *  - A turn is released at max(its arrival, the end of the session's previous turn). Its arrival is
 *    the trace's timestamp or request_rate's gamma process; without one (arrivals=session) it is its
 *    think time after that end; with arrivals=trace, its think time after the previous turn's
 *    arrival, fixed before the run; under concurrency=N, N clients each run whole sessions, a turn
 *    its think time after the previous one ended. TTFT counts from the release; the wait between
 *    arrival and release is the session wait (docs/load-modes.md).
 */
#ifndef KV_SIM_H
#define KV_SIM_H

#include <stdint.h>

#include "sim/cost/cost.h"
#include "sim/base/hist.h"
#include "sim/base/limits.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/util.h"
#include "policies/policy.h"
#include "sim/cost/spec.h"
#include "traces/trace.h"
#include "sim/engine/settings.h"
#include "sim/engine/counters.h"

#define SIM_MAX_LAYERS KV_MAX_LAYERS
#define SIM_MAX_STAGES KV_MAX_STAGES
/* The simulated clock is int64 nanoseconds; a run whose next event would fall past 2^62 ns (about
 * 146 years) fails with a message naming the limit instead of wrapping (trace arrivals stop at 4e18
 * ns, below it). Time sums saturate rather than wrap, so the check sees every overrun. */
#define SIM_TIME_MAX_NS ((int64_t)1 << 62)
#define SIM_CLASSES 3

/* Enum-like settings, parsed once by sim_config_set (names in config.c's table). */
typedef enum SimEngine { SIM_ENGINE_VLLM = 0, SIM_ENGINE_SGLANG, SIM_ENGINE_MII, SIM_ENGINE_NONE } SimEngine;
typedef enum SimTraceFormat { SIM_TRACE_AUTO = 0, SIM_TRACE_CSV, SIM_TRACE_MOONCAKE, SIM_TRACE_VIDUR } SimTraceFormat;
/* the tiers a result reports, indexed by policy.h's Tier (TIER_NONE's entry stays 0) */
#define SIM_TIERS TIER_COUNT

/* Transfer channels, one row each (sim_channel_rows): per-stage links between host and GPUs, and
 * the host's links to the tiers below DRAM (a memory device's: CH_ID, one per sim/base/memdev.h
 * row, after the others). Results keep their bytes and busy shares per kind. */
#define CH_MEMDEV_ENUM_(ID, KEY, WHAT, WHATS) CH_##ID,
enum { CH_H2D, CH_D2H, CH_SSD, CH_NIC_IN, CH_NIC_OUT, KV_MEMDEV_ROWS(CH_MEMDEV_ENUM_) CH_COUNT };
/* the channel of memory device m */
#define CH_MEMDEV(m) (CH_NIC_OUT + 1 + (m))
_Static_assert(CH_COUNT == CH_NIC_OUT + 1 + KV_MEMDEVS, "a memory device's channel is CH_MEMDEV(its index)");
typedef struct SimChannelRow {
    const char *name;       /* "h2d", "nic_in": utilisation keys, timelines, traces */
    int per_stage;          /* one per pipeline stage (each stage's GPUs have their own link) */
    const char *bytes_key;  /* summary.json bytes.KEY: what it moved ("net_in"; a two-way one's reads: "ssd_read") */
    const char *write_key;  /* a link that also writes (saves, spills) at its own rate: that direction's key, else NULL */
} SimChannelRow;
extern const SimChannelRow sim_channel_rows[CH_COUNT];
/* SimResult.ch_bytes' second index: a transfer that reads (loads, a spill's hop out of a tier) or
 * writes (saves, spills into a tier; counted apart only on a channel with a write_key) */
enum { CH_READ = 0, CH_WRITE = 1 };

/* saved-state tiers: a chain, each tier's LRU victims demoted to the next, the last one's dropped
 * (sim_store_chain). Every sequence of distinct tiers with host DRAM, where it is one, first; named
 * by the tiers' names joined by '+' (sim_store_name; config.c enumerates them from policy.h's tier
 * names). AUTO (0) is resolved by sim_world_open from the platform (never seen by the engine). */
typedef int SimStore;
#define SIM_STORE_AUTO 0
#define SIM_STORE_MAX_TIERS (SIM_TIERS - 1)
/* the stores there are (SimStore 1 .. count) */
int sim_store_count(void);
/* the tiers of store s in chain order (s resolved: not AUTO); returns their count */
int sim_store_chain(SimStore s, Tier out[SIM_STORE_MAX_TIERS]);
/* the store made of the chain's n tiers; -1 when it is not a store */
SimStore sim_store_of(const Tier *chain, int n);
/* whether store s has tier t */
int sim_store_has(SimStore s, Tier t);
/* How later turns of a session are timed (docs/load-modes.md): SESSION releases a turn without a
 * timestamp `think` after its session's previous turn ended (each session is a closed loop; the
 * default); TRACE gives it a time fixed in advance (the previous turn's arrival + think), the same
 * for every policy (open loop) */
typedef enum SimArrivals { SIM_ARRIVALS_SESSION = 0, SIM_ARRIVALS_TRACE } SimArrivals;
/* warm-up / cool-down trimming: the first (last) `n` requests, or the requests arriving in the
 * first (last) `n` ns of the arrivals when by_time; n = 0: none */
typedef struct SimTrim {
    int64_t n;
    int by_time;
} SimTrim;
/* the resolved load mode (sim_load_mode) */
typedef enum SimLoadMode { SIM_LOAD_SESSION = 0, SIM_LOAD_TRACE, SIM_LOAD_CONCURRENCY } SimLoadMode;

/* KV block allocation (docs/reference.md "What is modelled", docs/model.md "KV blocks"): RESERVE takes the whole
 * turn's blocks (history + new + output) at admission; ONDEMAND takes history + new input (+ the
 * first output token) with a watermark of free blocks kept, grows a request's blocks as its context
 * crosses block boundaries during decode and preempts when the pool runs out (vLLM's block manager) */
typedef enum SimAlloc { SIM_ALLOC_ONDEMAND = 0, SIM_ALLOC_RESERVE } SimAlloc;
/* where a new session goes (it stays there): the replica with the fewest requests, or the one whose
 * prefix cache holds the longest prefix of its first request (ties: the fewest requests) */
typedef enum SimRouter { SIM_ROUTER_LEAST_LOADED = 0, SIM_ROUTER_PREFIX } SimRouter;
/* what a preempted request's KV becomes: RECOMPUTE frees it (the request re-prefills its whole
 * context when re-admitted; vLLM v1's only mode), SWAP copies it to host DRAM over D2H and back over H2D */
typedef enum SimPreempt { SIM_PREEMPT_RECOMPUTE = 0, SIM_PREEMPT_SWAP } SimPreempt;

/* POLICY: each policy's own SaveMode (KvPolicyOps.save_mode); else forced for every policy */
typedef enum SimSaveMode { SIM_SAVE_POLICY = 0, SIM_SAVE_TURN, SIM_SAVE_ITERATION, SIM_SAVE_DIRECT } SimSaveMode;

/* The settings of a run. ONE table in config.c lists every key (its --set name, type, unit,
 * default, range, help) and generates the defaults, the parser, --help, sim_config_check and the
 * JSON record; a new setting is a field here plus a row there. Values marked "derived" hold a
 * sentinel until sim_world_open resolves them (SimWorld.cfg points at the resolved copy). */
/* Each setting's field, from its row in settings.h. */
#define SIM_FIELD_(KIND, ...) SIM_FIELD_##KIND(__VA_ARGS__)
#define SIM_FIELD_STR(key, field, size, ...) char field[size];
#define SIM_FIELD_NUM(key, ct, type, field, ...) type field;
#define SIM_FIELD_ENUM(key, type, field, ...) type field;
#define SIM_FIELD_NUM_AT(...)
#define SIM_FIELD_DECL(type, decl) type decl;
#define SIM_FIELD_MEMDEVS(size) char memdev[KV_MEMDEVS][size]; int n_memdev[KV_MEMDEVS];
typedef struct SimConfig {
    /* the settings (settings.h: what each means, its default; derived ones resolved by sim_world_open) */
    SIM_SETTING_ROWS(SIM_FIELD_)
    /* policies' knobs, by registry index (policy_at) and knob-table order; defaults unless set */
    double knobs[POLICY_MAX_REGISTERED][POLICY_MAX_KNOBS];
    /* run options, not settings of the experiment (not in the table) */
    char policy[32];
    int quiet;
} SimConfig;

void sim_config_defaults(SimConfig *c);
/* key=value (the --set syntax; config files go through it too). Keys are the table's names, or
 * <policy>.<knob> for a policy's knob (or the knob's alias, e.g. cf_gpu). The value is parsed by
 * the key's type and unit and checked against its range; on error the message names the key, the
 * value and what is allowed (unknown keys list the known ones), and *c is unchanged. */
int sim_config_set(SimConfig *c, const char *key, const char *value, KvErr *e);
/* Every rule that needs no catalog: each key's range (also for fields set directly in C), the
 * knobs, and the cross-field rules (restore_share × token_budget >= 1, class_short <= class_long,
 * no trace_format for a generator, a known dtype). The catalog-dependent rules (a replica's
 * tp × pp GPUs fit one node of the platform, the model fits, the store's tiers exist) run in
 * sim_world_open. */
int sim_config_check(const SimConfig *c, KvErr *e);
/* The table itself: every default parses and passes its range, keys are unique, no knob alias
 * shadows a setting (sim_world_open runs it with policy_registry_check). */
int sim_config_table_check(KvErr *e);
/* keys, defaults, ranges and one-line help, for --help; then every policy's knobs */
void sim_config_print_keys(FILE *out);
/* one policy's knobs (for kvsim list policies), each line prefixed by indent */
void sim_config_print_knobs(FILE *out, const KvPolicyOps *ops, const char *indent);
/* The settings as a JSON object under the names --set accepts, values in the syntax it accepts
 * ("2 ms", "256 GB", enum names, numbers, booleans); knobs as "<policy>.<knob>". Applied back
 * through sim_config_set it gives the same SimConfig. Give it SimWorld.cfg to record resolved
 * values. NULL when out of memory. */
struct cJSON *sim_config_json(const SimConfig *c);
/* Whether key is a setting or a policy knob (its --set name or an alias). */
int sim_config_known(const char *key);
/* What a JSON object of settings carries besides settings (each pointer may be NULL). */
typedef struct SimJsonOut {
    char *policies; size_t plen;   /* "policies": the policies the file names */
    char *desc; size_t dlen;       /* "description" */
    char *unknown; size_t ulen;    /* set: an unknown key is not an error: it is returned here, with 1 */
} SimJsonOut;
/* Apply a JSON object of settings (a --config file, a scenario, a sweep point, a claim): each
 * member's value — a string, number or boolean — through sim_config_set. "scenario" (for the caller
 * to resolve first) and "measures" (a scenario's text) are skipped; "policies" and "description"
 * go to out. 0, 1 for an unknown key when out->unknown is set, else -1 naming origin and key. */
int sim_config_apply_json(SimConfig *c, const struct cJSON *obj, const char *origin, SimJsonOut *out, KvErr *e);
/* The policy's knob values in table order (NULL when ops is not a registered policy). */
const double *sim_config_knobs(const SimConfig *c, const KvPolicyOps *ops);
/* The save mode a run of ops uses under c. */
SaveMode sim_config_save_mode(const SimConfig *c, const KvPolicyOps *ops);
const char *sim_save_mode_name(SaveMode m);         /* "turn", "iteration", "direct" */
const char *sim_store_name(SimStore s);             /* "auto", "dram", "dram+ssd", ..., "remote+ssd" */
const char *sim_trace_format_name(SimTraceFormat f); /* "auto", "csv", ... (TraceOptions.format) */
/* The load mode c resolves to: CONCURRENCY when concurrency > 0, else TRACE when request_rate > 0
 * (every request timed in advance) or arrivals=trace, else SESSION. */
SimLoadMode sim_load_mode(const SimConfig *c);
const char *sim_load_mode_name(SimLoadMode m);      /* "session", "trace", "concurrency" */
/* The engine profile's per-iteration host overhead. */
int64_t sim_engine_overhead_ns(SimEngine engine);
/* Resolve the derived values against the catalogs (out = in with every sentinel replaced: profile
 * overhead, n_ssd, nic, store tiers, DRAM, max_context, cost device) and check what needs them: a
 * replica's tp × pp GPUs fit one node (each replica has its own host: DRAM, SSDs, NIC), the SSDs
 * and NIC the store needs exist. *nic: the remote
 * store's NIC or NULL. Messages name the key, the value and the platform. */
int sim_config_resolve(SimConfig *out, const SimConfig *in, const HwCatalog *hw, const PlatformSpec *p,
                       const ModelSpec *m, const NicSpec **nic, KvErr *e);
/* The model and hardware catalogs with c's overlays (hardware_overlay, models_overlay) laid over
 * them (hw_catalog_overlay, model_catalog_overlay); both or neither are open afterwards. */
int sim_catalogs_open(const SimConfig *c, ModelCatalog *mc, HwCatalog *hw, KvErr *e);
/* Replace the parts of platform p (an entry of hw, which is changed) named by c's gpu, host_link
 * ssd and cxl settings with those catalog entries; before sim_config_resolve. Messages name the key,
 * the value and the known names. */
int sim_config_apply_parts(const SimConfig *c, HwCatalog *hw, const PlatformSpec *p, KvErr *e);

typedef struct SimClassStats {
    Hist ttft, restore;
    uint64_t n;
    uint64_t slo_met;
} SimClassStats;

/* The load a run saw and what it served (metrics_trim.c; docs/load-modes.md, docs/formats.md "load"). Every
 * request figure is over the kept requests (after warm-up and cool-down trimming). */
typedef struct SimLoad {
    uint64_t kept, trimmed_warmup, trimmed_cooldown;
    int64_t first_arrival_ns, last_arrival_ns, last_done_ns; /* arrival: the load process's time */
    double input_tokens, new_input_tokens, output_tokens;    /* input = history + new (the full prompt) */
    uint64_t good;                                            /* kept requests within the SLO */
    uint64_t waited;                                          /* turns that waited for their previous turn */
    double wait_sum_ns;
    int64_t wait_max_ns;
    /* the load window (metrics_trim.c): first kept arrival → the last arrival the load process made on its
     * own; offered / served = kept requests arriving / done in it per second */
    int64_t window_start_ns, window_end_ns;
    uint64_t window_requests;
    double offered_per_s, served_per_s;
    double throughput_per_s;      /* kept / (last done − first arrival), vLLM's request throughput */
    /* steady state: least squares of (session wait + TTFT) on arrival time over batch means of the
     * kept requests arriving in the second half of the window */
    uint64_t half_n;
    int batches;                  /* non-empty batches of the last half (the test needs 5) */
    double slope, slope_t, t_crit, growth_s, threshold_s, delay_first_half_s, delay_last_half_s;
    double overload_growth_s;     /* max(slo_ttft, threshold_s) */
    uint64_t after_n;             /* kept requests arriving after the window (the drain) */
    double delay_after_s;         /* their mean session wait + TTFT */
    double backlog_s;             /* delay_after_s − the window's mean (after_n >= 10; else 0) */
    int steady;      /* no significant growth (slope_t <= t_crit, or growth_s <= threshold_s) */
    int overloaded;  /* !steady with growth_s > overload_growth_s, served < 0.9 × offered over the window,
                        or backlog_s > overload_growth_s */
} SimLoad;

typedef struct SimResult {
    char policy[32];
    uint64_t requests, sessions, truncated, dropped;
    int64_t sim_end_ns;
    Hist ttft, queue, restore, prefill, tbt, lb_ratio;
    Hist e2e;                     /* release (where TTFT starts) to the last output token */
    double tbt_mean_ns;
    uint64_t tbt_n;
    SimClassStats cls[SIM_CLASSES];
    uint64_t slo_met;
    uint64_t restored_tokens;
    double restore_busy_ns;       /* sum over requests of restoration time */
    uint64_t hits_resident, misses, no_history;
    uint64_t hits_tier[SIM_TIERS];    /* restorations that loaded all of the history from that tier */
    uint64_t hits_mixed;          /* restorations that loaded parts of the history from more than one place */
    uint64_t restore_waits;       /* restorations with a load that waited for a save in flight to cross D2H */
    double restore_wait_ns;       /* sum over those of the longest wait of one of their loads */
    uint64_t fallbacks;           /* restorations of a saving policy that recomputed everything (misses) */
    uint64_t fallback_uncovered;  /* of those: no saved state, or less than the history (see lost) */
    uint64_t fallback_slower;     /* of those: waiting for the save in flight was estimated slower */
    uint64_t state_lost_ttl, state_lost_capacity; /* sessions whose saved state was dropped (state_ttl; full tiers) */
    /* the counts of counters.h's rows */
#define SIM_COUNTER_FIELD_(field, path, help) uint64_t field;
    SIM_COUNTER_ROWS(SIM_COUNTER_FIELD_)
    /* the HBM prefix cache (prefix_cache=true and a trace that names blocks; else all 0 and
     * prefix_named 0): requests whose context named blocks, restorations whose whole history was
     * found there (hits_prefix), requests that took a cached prefix and the context tokens they did not
     * compute (prefix_hit_requests, prefix_hit_tokens), and the caches' block counts summed over
     * replicas: looked up, found, made resident, inserted again (deduplicated), evicted */
    uint64_t prefix_named, hits_prefix, prefix_hit_requests, prefix_hit_tokens;
    uint64_t prefix_borrowed;     /* restorations that loaded another session's saved copy of the same blocks */
    uint64_t prefix_lookups, prefix_hits, prefix_inserted, prefix_deduplicated, prefix_evicted;
    int64_t prefix_block_tokens;
    uint64_t prefix_rep_lookups[64], prefix_rep_hits[64]; /* per replica (replicas <= 64): blocks looked up, found */
    /* the tiers' block stores (saving policies; summed over places): the named blocks of saved states
     * stored, stored once for several states (deduplicated), gone with the last state holding them
     * (dropped: TTL, capacity; moved: spilled or promoted elsewhere), the bytes saves did not write
     * because the tier held the block; the named history blocks restorations looked for below HBM
     * (prefix_tier_asked) and those found in each tier (its state, or another session's, was read) */
    uint64_t prefix_tier_stored[SIM_TIERS], prefix_tier_dedup[SIM_TIERS], prefix_tier_dropped[SIM_TIERS];
    uint64_t prefix_tier_moved[SIM_TIERS], prefix_tier_found[SIM_TIERS], prefix_tier_asked;
    double prefix_tier_unwritten[SIM_TIERS];
    /* restoration windows: time with >= 1 restoration in progress (RQ_RESTORING) summed over replicas,
     * and each resource's busy share inside them */
    double win_ns;
    double win_util_gpu[SIM_MAX_STAGES];
    double win_util_ch[CH_COUNT][SIM_MAX_STAGES]; /* per stage for per-stage channels; else [0] (per-stage NICs: their mean) */
    double ch_bytes[CH_COUNT][2];     /* bytes each kind of channel moved, [CH_READ] and [CH_WRITE] (only with a write_key) */
    double saved_bytes_per_token;
    uint64_t tier_peak_bytes[SIM_TIERS]; /* the most saved bytes held at once (summed over places) */
    uint64_t hbm_peak_tokens;
    /* SSD wear (a store with an SSD tier; else NAN): bytes written per drive per simulated day over
     * the drive's capacity, and the years until the drive's rated endurance (dwpd × warranty years
     * of full-drive writes) is written at that rate (NAN when the catalog rates no endurance or
     * nothing was written) */
    double ssd_dwpd, ssd_life_years;
    /* bytes written into each tier (saves, demotions, write-through copies, promotions, prefetches; NAN for a tier
     * that is off), the bytes the policy saved (saves and direct saves), and each tier's write
     * amplification: written ÷ saved (NAN where off or nothing was saved) */
    double tier_written_bytes[SIM_TIERS];
    double policy_saved_bytes;
    double write_amp[SIM_TIERS];
    uint64_t pool_tokens;         /* KV pool capacity per replica */
    double util_gpu[SIM_MAX_STAGES];
    double util_ch[CH_COUNT][SIM_MAX_STAGES]; /* busy shares, laid out as win_util_ch */
    /* alloc=ondemand: decode steps that found no free block preempted a request (blocks.c) */
    uint64_t preemptions;         /* preemptions (a request may be preempted more than once) */
    uint64_t preempted_requests;  /* requests preempted at least once */
    uint64_t preempt_recomputed_tokens; /* context tokens re-prefilled after preempt=recompute */
    double swap_out_bytes, swap_in_bytes; /* preempt=swap: KV bytes copied to host DRAM and back */
    uint64_t iterations, events;  /* events: as if every iteration were one event: queue_events + decode_steps +
                                     cancelled_timers (the same for any engine shortcut) */
    uint64_t queue_events;        /* the events the queue actually delivered (not a result: speed only) */
    uint64_t decode_steps;        /* decode steps inside decode runs, each standing for an iteration-end event
                                     never queued (metrics_on_decode_steps; speed only) */
    uint64_t cancelled_timers;    /* events of timers re-armed before they were delivered (evq; speed only) */
    uint64_t load_runs;           /* layer loads queued as the next layer of a run, not as entries of their own
                                     (channel.h, ch_extend_run; not a result: speed only) */
    uint64_t waiting_peak_bytes;  /* the most bytes held in memory at once by turns read and not admitted, the
                                     sessions and the admission FIFOs' slots (not a result; a FIFO's middle is
                                     in a spill file) */
    uint64_t extrapolations;
    uint64_t extrapolations_op[OP_COUNT];
    double wall_s;
    char policy_notes[1024];      /* policy-specific facts (its split, thresholds) as JSON text */
    SimLoad load;
} SimResult;

void sim_result_free(SimResult *r);

/* Everything a run needs, resolved once (catalog entries, cost model, the derived settings). */
typedef struct SimWorld {
    const SimConfig *cfg;       /* = &resolved */
    SimConfig resolved;         /* the caller's config with every derived value resolved */
    const NicSpec *nic;         /* the remote store's NIC, or NULL */
    Tier save_tier;             /* where saved state goes after DRAM spills (PolicyEnv.save_tier) */
    ModelCatalog models;
    HwCatalog hw;
    const ModelSpec *model;
    const PlatformSpec *platform;
    ModelLayout ly;
    CostModel cost;
    char cost_source[512];
} SimWorld;

/* Checks the policy registry and cfg (sim_config_check) before opening anything, then loads the
 * catalogs, resolves cfg (sim_config_resolve) and builds the cost model. w may not be copied. */
int sim_world_open(SimWorld *w, const SimConfig *cfg, KvErr *e);
void sim_world_close(SimWorld *w);

/* What one GPU of a replica holds (the rule sim_setup applies): weights of the stage with the most,
 * usable = HBM × mem_util − weights, the KV pool in whole blocks of the stage with the most layers, or
 * num_gpu_blocks × block_tokens when that is set (fits: when its KV fits in usable). */
typedef struct SimCapacity {
    uint64_t hbm_bytes;             /* per GPU */
    uint64_t weight_bytes_per_gpu;
    double usable_bytes;            /* HBM × mem_util − weights (may be negative) */
    double kv_bytes_per_token_gpu;  /* all layers of the largest stage, this GPU's heads */
    int64_t pool_tokens;            /* per replica (0 when it does not fit) */
    int fits;                       /* usable holds at least 1024 tokens of KV */
} SimCapacity;
void sim_world_capacity(const SimWorld *w, SimCapacity *out);

/* Per-request rows: called as each request completes (results writer streams them). */
typedef struct SimRequestRow {
    uint64_t id, session;
    int turn, replica;
    int64_t arrival_ns, history_tokens, new_tokens, output_tokens;
    const char *restore_from;     /* resident, ideal, recompute, none, dropped, or the places loaded from
                                     joined by '+' (dram, ssd, remote, in-flight: waited for a save) */
    int64_t recomputed_tokens, loaded_tokens;
    int64_t queue_ns, restore_ns, prefill_ns, ttft_ns, done_ns;
    double tbt_mean_ns;
    int64_t tbt_max_ns;
    double lb_restore_ns;
    const char *session_id;       /* the trace's own session id (TraceRequest.session_id); valid during the call */
    int64_t offered_ns;           /* the load process's arrival (trace mode: fixed in advance); else = arrival_ns */
    int64_t session_wait_ns;      /* release − offered: waiting for the session's previous turn */
    int preemptions;              /* times the request was preempted (alloc=ondemand) */
    int64_t prefix_hit_tokens;    /* context tokens found in the HBM prefix cache, neither computed nor loaded */
} SimRequestRow;
typedef int (*SimRowFn)(void *ctx, const SimRequestRow *row, KvErr *e);

/* progress: called about every second of wall time with the fraction done */
typedef void (*SimProgressFn)(void *ctx, double frac, uint64_t requests_done, int64_t sim_ns);

/* ---- what a run records beyond its results, only when asked (sim_run_ex; results/plot*.c draw it) ---- */

/* Utilisation over time: the run [0, end) cut into windows of window_ns (the last one may be
 * shorter); util[r * n_windows + k] = busy time of resource r in window k / (window length ×
 * replicas), in [0, 1]. Resources: "gpu", "h2d", "d2h" per pipeline stage (stage s > 0 named
 * "gpu_s1", ...), then "ssd", "nic_in", "nic_out" where the platform has them. The GPU's busy time
 * of an iteration is spread evenly over the iteration (as the restoration windows take it). */
#define SIM_UTIL_MAX_RES (3 * SIM_MAX_STAGES + 3)
typedef struct SimUtilSeries {
    int64_t window_ns, end_ns;
    int n_windows, n_res;
    char names[SIM_UTIL_MAX_RES][16];
    double *util;
} SimUtilSeries;
void sim_util_free(SimUtilSeries *u);

/* One request's restoration as spans (sim_run_ex with SimRunOpts.timeline): lane "gpu" (the layer
 * of an iteration carrying its restoration compute or prefill; layer -1: every layer, e.g. the
 * stage-parallel lanes before the walk) or a channel ("h2d", "ssd", ...: one hop of one of its
 * loads; layer -1: a token-wise chunk of every layer). what: "recompute", "prefill",
 * "recompute+prefill", "kv", "hidden", "tokens". */
typedef struct SimTlSpan {
    const char *lane, *what;
    int layer, stage;
    int64_t t0_ns, t1_ns;
} SimTlSpan;
typedef struct SimTimeline {
    int found;                      /* a request was recorded (0: no such request / nothing restored) */
    uint64_t request;
    int replica, layers;
    int64_t arrival_ns, admit_ns, restored_ns, first_ns, history_tokens, new_tokens;
    int truncated;                  /* more than SIM_TL_MAX_SPANS spans: the rest were not kept */
    SimTlSpan *spans;
    int n, cap;
} SimTimeline;
#define SIM_TL_MAX_SPANS 200000
void sim_timeline_free(SimTimeline *t);

/* Trace events as they happen (Chrome trace export): a span when it ends, a counter when it changes. */
typedef enum SimSpanKind { SIM_SPAN_ITERATION, SIM_SPAN_TRANSFER } SimSpanKind;
typedef struct SimSpan {
    SimSpanKind kind;
    int replica;
    int64_t t0_ns, t1_ns;
    /* iterations: the decode steps the span stands for (1 today), its items and tokens */
    int steps, items;
    int64_t tokens;
    /* transfers: the channel ("h2d", "d2h", "ssd", "nic_in", "nic_out"), its stage, the unit's class
     * ("load", "load_tok", "save", "spill"), the restoring request (loads; else 0), layer, bytes */
    const char *channel, *unit;
    int stage, layer;
    uint64_t request;
    double bytes;
} SimSpan;
typedef struct SimEventSink {
    void *ctx;
    void (*span)(void *ctx, const SimSpan *s);
    /* name: "queue depth", "restoring", "kv pool tokens" */
    void (*counter)(void *ctx, int replica, const char *name, int64_t t_ns, double value);
} SimEventSink;

/* The trace reader's options for c's workload, contexts cut at max_context tokens (as the engine
 * opens it; the CLI's checks open it the same way). */
void sim_trace_options(const SimConfig *c, int64_t max_context, TraceOptions *to);

typedef struct SimRunOpts {
    SimRowFn row_fn;
    void *row_ctx;
    SimProgressFn prog;
    void *prog_ctx;
    SimUtilSeries *util;        /* filled at the end of the run when not NULL (free: sim_util_free) */
    int64_t util_window_ns;     /* its window; 0: about 200-400 windows over the run (doubling) */
    SimTimeline *timeline;      /* filled at the end when not NULL (free: sim_timeline_free) */
    int64_t timeline_request;   /* the request recorded; -1: the slowest restoration of the run */
    const SimEventSink *sink;   /* NULL: no trace events */
} SimRunOpts;
/* sim_run with the recordings above; none of them changes a result. */
int sim_run_ex(SimWorld *w, const char *policy, const SimRunOpts *opts, SimResult *out, KvErr *e);

/* Run one policy. progress: called about every second of wall time with the fraction done (or NULL). */
int sim_run(SimWorld *w, const char *policy, SimRowFn row_fn, void *row_ctx, SimProgressFn prog, void *prog_ctx,
            SimResult *out, KvErr *e);

/* The file the runs of this process write their schedule to, as JSON lines (kvsim run
 * --emit-schedule; docs/formats.md "Schedule"; sim/engine/schedule_out.c); NULL or "": none (the
 * default). Process-wide, like sim_test_set_hook: set it before sim_run, from one thread. Returns 0. */
int sim_schedule_set_path(const char *path);

/* The trace-level oracle bound (sim/engine/oracle.c; docs/model.md "Oracle bound"): a lower bound on
 * the mean and the p99 TTFT of the world's trace that no policy of the engine's class beats on its
 * platform, computed offline with the whole trace known. Depends on the trace and the settings, not
 * on a policy. NAN figures (and the reason in basis) when it is not computed: warmup/cooldown trim
 * requests out of the figures it would bound. */
typedef struct SimOracle {
    uint64_t requests;        /* requests the TTFT figures count (every policy drops the same ones) */
    uint64_t dropped;         /* turns no KV pool can hold */
    uint64_t candidates;      /* requests that keeping their history resident across their gap would speed up */
    uint64_t kept;            /* of those, the ones the LP keeps (part of) resident: fewer when the KV pools bind */
    uint64_t pool_tokens;     /* the KV pools of all replicas, what kept histories may occupy at once */
    double ttft_mean_s, ttft_p99_s;
    /* the same bound for the class without prefetch (every built-in policy: a restoration starts
     * at admission), at least the one above */
    double noprefetch_mean_s, noprefetch_p99_s;
    char basis[256];
} SimOracle;
int sim_oracle(SimWorld *w, SimOracle *out, KvErr *e);

/* The oracle's keep LP, exactly: maximise Σ w_i·x_i over integers 0 <= x_i <= cap_i with, at every
 * time t, Σ of x_i over the intervals with t0_i <= t < t1_i at most pool (an interval with t1 <= t0
 * constrains nothing and is taken whole; w_i <= 0 or cap_i <= 0: x_i = 0). A min-cost flow on the
 * timeline (successive shortest paths); the constraint matrix has consecutive ones, so the integral
 * optimum is the LP's. x: n values out. 0, or -1 (out of memory). */
typedef struct SimOracleInterval {
    int64_t t0, t1, cap, w;
} SimOracleInterval;
int sim_oracle_keep_lp(const SimOracleInterval *iv, size_t n, int64_t pool, int64_t *x, KvErr *e);

#endif
