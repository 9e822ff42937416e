/* engine_int.h — the simulator's run-time objects and the internal API between its modules.
 * Private to sim/engine (and to the tests of its modules); the public API is sim.h.
 *
 * Modules, lowest first; a module calls only modules below it (calls run downward only):
 *   engine_int.h  the structs, the request lifecycle, SIM_CHECK, event helpers (inline)
 *   metrics.c     every update of the run's SimResult (metrics_on_*)
 *   channel.c     IO channels and transfer units (channel.h)
 *   session.c     the session map, the HBM LRU of idle resident sessions, the KV pool
 *   tier.c        the tier table: DRAM / SSD / remote lists, saves, spills, TTL, capacities
 *   costtab.c     the run's cost table: linear cost per token count memoised, attention lookup hints
 *   estimate.c    per-layer compute and load estimates (for policies and bounds; sim/cost/layer_cost)
 *   walk.c        the layer walk of an iteration in flight
 *   restore.c     admission-time restoration: plans, layer-wise loads, token-wise two pointers
 *   turn.c        the compact Turn of a request not admitted yet, and its pool
 *   lifecycle.c   release, arrival, the admission queue, request done
 *   iteration.c   forming an iteration (the batch, its per-layer costs), iteration done
 *   check.c       sim_check, the accounting walker (iteration boundaries, when enabled)
 *   setup.c       sim_world_open/close, sim_setup/teardown (channels, tiers, pool from the catalogs)
 *   engine.c      sim_run: the event loop
 * Event-driven up-calls go through callbacks (a unit's done), never through a call upward.
 *
 * The request lifecycle (Request.state, moved only by rq_set_state, which checks this table):
 *
 *   RQ_ARRIVED   read from the trace, waiting for its release time or its session's previous turn
 *      └ release_request ───────────────▶ RQ_QUEUED
 *   RQ_QUEUED    in its replica's admission FIFO
 *                (ARRIVED and QUEUED turns are compact Turns, turn.c: the full Request is made at
 *                admission, in RQ_QUEUED, and moved on at once)
 *      ├ restore_admit (history to restore) ─────▶ RQ_RESTORING
 *      ├ restore_admit (none: resident, Ideal, no history) ─▶ RQ_PREFILL
 *      └ admit_queue → drop_head (never fits the pool: dropped) ─▶ RQ_DONE
 *   RQ_RESTORING admitted; recompute chunks, layer-wise loads or token-wise chunks in flight. For
 *                layer-wise restoration RESTORING overlaps prefill: the first new-input chunk
 *                carries the layer-wise work and each of its layers waits for that layer's state.
 *      └ restore_progress (no recompute left, no layer-wise work pending, two pointers met) ─▶ RQ_PREFILL
 *   RQ_PREFILL   new-input chunks
 *      └ iter_done (last new-input chunk: the first output token) ─▶ RQ_DECODE
 *   RQ_DECODE    one token per iteration
 *      └ request_done (last output token) ─▶ RQ_DONE
 *   RQ_DONE      final (its row is emitted, the request freed); a request completes once.
 *
 * Invariants checked always (SIM_CHECK: a violation ends the run with an error naming the file and
 * line, never silently): the clock never goes back (evq); lifecycle moves follow the table above
 * (so no request completes twice); the KV pool never goes negative nor above capacity (at every
 * pool_reserve and pool_release, session.c); every channel serves one unit at a time and every unit is served once per hop
 * (channel.c). The accounting walker sim_check (check.c) verifies the sums behind the counters.
 */
#ifndef KV_ENGINE_INT_H
#define KV_ENGINE_INT_H

#include <stdint.h>

#include "policies/policy.h"
#include "sim/engine/channel.h"
#include "sim/engine/evq.h"
#include "sim/engine/sim.h"
#include "traces/trace.h"

enum { EV_UNIT_DONE = 1, EV_ITER_RESUME, EV_ITER_DONE, EV_ARRIVAL, EV_RELEASE, EV_FORM };
enum { IT_DECODE, IT_RECOMP, IT_NEW };

/* the request lifecycle (see the table above) */
typedef enum RqState { RQ_ARRIVED = 0, RQ_QUEUED, RQ_RESTORING, RQ_PREFILL, RQ_DECODE, RQ_DONE, RQ_NSTATES } RqState;

/* tiers are policy.h's Tier (TIER_NONE, TIER_DRAM, TIER_SSD, TIER_REMOTE); one row each here */
#define SIM_TIERS (TIER_REMOTE + 1)

typedef struct Session Session;
typedef struct Request Request;
typedef struct Turn Turn;
typedef struct Replica Replica;
typedef struct Sim Sim;

/* One row per tier (tier.c): adding a tier is a row here plus its channel and hardware entry. */
typedef struct TierInfo {
    const char *name;   /* as in restore_from ("dram") */
    int shared;         /* one store for all replicas (the remote store) or one per replica */
    int in_hop;         /* loads: the channel before H2D (-1: straight H2D) */
    int out_hop;        /* saves and spills into it: the channel after D2H (-1: D2H only) */
} TierInfo;
extern const TierInfo tier_table[SIM_TIERS];

/* a tier's LRU list of sessions at one place (a replica's DRAM, the shared remote store) */
typedef struct TierList {
    Session *head, *tail;   /* least recently used at the head */
    double used_bytes;      /* sum of the sessions' saved_bytes */
    double spilling_bytes;  /* of those, the ones being spilled to the next tier */
} TierList;

struct Session {
    uint64_t id;
    char *name;                /* the trace's own session id (TraceRequest.session_id), for requests.csv */
    int replica;
    int busy;                  /* a turn admitted or waiting */
    int refs;                  /* requests that point to this session (pulled, not yet freed) */
    Turn *pend_head, *pend_tail;  /* its later turns read from the trace, in trace order */
    int64_t resident_tokens;   /* KV tokens in HBM (idle or in use) */
    int in_hbm_lru;
    Session *hbm_prev, *hbm_next;
    Tier tier;
    int64_t saved_tokens;
    double saved_bytes;
    int saving, spilling, loading;
    double save_acc;           /* bytes of the save in flight, summed over its units */
    int64_t issued_pos;        /* context positions whose save has been issued */
    Session *t_prev, *t_next;  /* tier LRU */
    int64_t last_use_ns;
    int chk_saving, chk_active; /* sim_check's scratch */
};

struct Request {
    uint64_t id;
    Session *s;
    int turn, replica;
    RqState state;
    int64_t arrival_ns, think_ns;
    int64_t hist, nnew, nout;
    int64_t reserved_tokens;
    /* restoration */
    const char *from;
    int64_t recompute_left, recompute_done, recompute_total;
    int64_t lw_tokens;          /* history tokens restored layer-wise */
    int lw_pending;             /* layer-wise work not yet executed in an iteration */
    int early_layers, arrived_prefix, loads_left;
    uint8_t *mode, *arrived;
    /* token-wise two pointers */
    int tw, low_prio;
    int stage_par, bnd_left;   /* stage-parallel restoration: boundary activations still in flight */
    int64_t chunk_tokens;      /* storage layout chunk (0: the array's stripe) */
    double kv_scale;           /* compressed KV: bytes scale (1 plain) */
    int64_t tw_comp, tw_comp_inflight, tw_io_issued, tw_landed, tw_io_chunk, tw_comp_chunk;
    /* IO chunks in flight (TW_DEPTH at most, so that one always waits at the channel and the IO order
     * among requests is a real choice): tokens and units left per slot */
    int64_t tw_ck_tokens[2];
    int tw_ck_units[2];
    int tw_ck_n;
    Tier src;
    int64_t t_admit, t_restored, t_first, t_last_tok;
    int64_t new_left, new_done, out_done;
    double tbt_sum;
    int64_t tbt_max;
    double lb_ns;
    int in_iter;
};

/* A request before admission (turn.c): read from the trace and waiting for its arrival, its
 * session's previous turn or its release, or queued for admission. 56 bytes. */
struct Turn {
    uint64_t id;                /* the request id (trace order) */
    Session *s;                 /* holds one of s->refs */
    int64_t t_ns;               /* until released: the trace's arrival (-1: closed loop); queued: the release time */
    int64_t think_ns;           /* closed loop: released this long after the session's previous turn ended */
    int32_t turn, hist, nnew, nout; /* tokens fit: a trace's are at most TRACE_MAX_TOKENS (2^31 - 1) */
    Turn *next;                 /* the session's pending list; the pool's free list */
};

typedef struct IterItem {
    Request *r;
    int type;
    int lw;                     /* carries layer-wise restoration */
    int64_t tokens, ctx;
} IterItem;

struct Replica {
    int id;
    Channel ch[CH_COUNT][SIM_MAX_STAGES]; /* [kind][stage]; kinds not per stage use [kind][0] */
    int has_ch[CH_COUNT];
    int64_t pool_cap, pool_used;          /* tokens */
    Turn **queue;                         /* admission FIFO (ring) */
    size_t q_head, q_len, q_cap;
    Request **active;                     /* admitted, admission order */
    int n_active, cap_active;
    Session *lru_head, *lru_tail;         /* idle resident sessions, least recent at head */
    int form_pending;
    /* iteration */
    int iterating;
    IterItem *items;
    int n_items, cap_items;
    double *layer_ns;
    int layer;
    int64_t cursor_ns, iter_start_ns;
    uint64_t iter_seq;
    Request *wait_r;
    int wait_layer;
    double busy_stage_ns[SIM_MAX_STAGES];
    double direct_save_ns;                /* SAVE_DIRECT: writes the iteration waits for */
    double pre_ns;                        /* stage-parallel restoration before the layer walk */
    int any_lw;                           /* the batch waits on layer-wise state (else one event) */
    TierList tier[SIM_TIERS];             /* this replica's host tiers (rows not shared) */
    uint64_t active_count;                /* released and not done, for routing */
};

/* a tier's setting and counters for the run */
typedef struct TierRun {
    int on;                 /* configured (store=) */
    int capped;             /* cap_bytes applies (the remote store: when the platform gives one) */
    double cap_bytes;       /* per place: per replica, or the shared store */
    Tier spill_to;          /* where LRU victims go when over capacity (TIER_NONE: dropped) */
    uint64_t hits;          /* restorations that loaded from it */
    uint64_t peak_bytes;    /* most used at one place */
} TierRun;

typedef void (*SimTestHook)(Sim *sm, void *ctx);

/* costtab.c's state: the linear cost per token count M (0 <= M < n), filled on first use */
typedef struct CostTab {
    int tried;              /* the table was allocated (or its allocation failed: n = 0) */
    int64_t n;
    double *lin_ns;
    uint32_t *lin_state;    /* 0: not computed yet; else bit 31 and the ops that extrapolated */
    uint32_t lin_lookups;   /* the ops one composition looks up */
    uint64_t hits;          /* table hits (their lookups are counted at ctab_free) */
    CostHint h_decode, h_prefill;
} CostTab;

struct Sim {
    SimWorld *w;
    const SimConfig *cfg;
    const KvPolicyOps *pol;
    void *pstate;
    PolicyEnv env;
    EventQueue q;
    TraceSource *trace;
    TraceRequest next_tr;
    int have_next, trace_done;
    Replica *rep;
    int R, S, L, T;
    int stage_of[SIM_MAX_LAYERS];
    int stage_layers[SIM_MAX_STAGES];
    /* sessions: open addressing */
    Session **tab;
    size_t tab_cap, tab_n;
    /* tiers */
    TierRun tiers[SIM_TIERS];
    TierList shared[SIM_TIERS];           /* the lists of shared rows (the remote store) */
    Tier save_first;                      /* where a session's first save goes (background saves) */
    Tier direct_first;                    /* the same for SAVE_DIRECT */
    /* derived sizes */
    double kv_tok_layer, kv_tok_layer_gpu, hid_tok_layer, save_bpt;
    SaveMode save_mode;
    int64_t overhead_ns, max_ctx;
    double rate_h2d, rate_d2h, rate_ssd_w;
    double hop_rate[CH_COUNT];            /* loads: read rate per channel kind (bytes per ns; 0: none) */
    int64_t hop_lat[CH_COUNT];
    int64_t lat_link, lat_ssd_w;
    int n_ssd;
    uint64_t next_req_id, done_requests, sessions_seen;
    SimResult *res;
    SimRowFn row_fn;
    void *row_ctx;
    SimProgressFn prog;
    void *prog_ctx;
    KvErr *e;
    int failed;
    int check;                            /* run sim_check every `check` iteration boundaries (0: never) */
    uint64_t check_n;                     /* boundaries seen */
    SimTestHook test_hook;                /* tests: called at iteration boundaries, before the walker */
    void *test_ctx;
    Unit *free_units;
    CostTab ctab;
    struct TurnSlab *turn_slabs;          /* turn.c's pool */
    Turn *turn_free;
};

/* ------------------------------------------------------------------ errors and checks */

/* record the run's first error (later ones are dropped) and mark it failed; returns -1 */
int sim_fail(Sim *sm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_check_failed(Sim *sm, const char *file, int line, const char *cond);
/* an invariant, always on: on violation the run ends with "internal: FILE:LINE: check COND failed" */
#define SIM_CHECK(sm, cond)                                                                                            \
    do {                                                                                                               \
        if (!(cond)) sim_check_failed((sm), __FILE__, __LINE__, #cond);                                                \
    } while (0)

/* ------------------------------------------------------------------ events and small helpers */

static inline int64_t sim_now(const Sim *sm) { return evq_now(&sm->q); }

uint64_t sim_push(Sim *sm, int64_t t, int kind, void *obj, int64_t arg);

/* schedule admission (always) and, when the replica is idle, the next iteration */
static inline void sim_kick(Sim *sm, Replica *rp)
{
    if (rp->form_pending) return;
    rp->form_pending = 1;
    sim_push(sm, sim_now(sm), EV_FORM, rp, 0);
}

static inline int64_t blocks_tokens(const Sim *sm, int64_t tokens)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16;
    return (tokens + b - 1) / b * b;
}

/* history tokens of r neither loaded nor computed yet (what io_pick sees) */
static inline int64_t rq_remaining_restore_tokens(const Request *r)
{
    if (r->tw) return r->tw_io_issued - r->tw_comp;
    return r->recompute_left + (r->lw_pending ? r->lw_tokens : 0);
}

/* the channel of kind `kind` that serves stage `stage` of replica rp */
static inline Channel *rep_channel(Replica *rp, int kind, int stage)
{
    return &rp->ch[kind][ch_kind_per_stage(kind) ? stage : 0];
}

/* the lifecycle move of r to `to`, checked against the table above (a move it does not list ends
 * the run with an error naming the file and line of the move) */
void rq_move(Sim *sm, Request *r, RqState to, const char *file, int line);
#define rq_set_state(sm, r, to) rq_move((sm), (r), (to), __FILE__, __LINE__)
const char *rq_state_name(RqState s);

/* intrusive doubly linked LRU lists: append at the tail (most recent), unlink anywhere; O(1) */
#define LRU_UNLINK(head, tail, s, prev, next)                                                                          \
    do {                                                                                                               \
        if ((s)->prev) (s)->prev->next = (s)->next;                                                                    \
        else (head) = (s)->next;                                                                                       \
        if ((s)->next) (s)->next->prev = (s)->prev;                                                                    \
        else (tail) = (s)->prev;                                                                                       \
        (s)->prev = (s)->next = NULL;                                                                                  \
    } while (0)
#define LRU_APPEND(head, tail, s, prev, next)                                                                          \
    do {                                                                                                               \
        (s)->prev = (tail);                                                                                            \
        (s)->next = NULL;                                                                                              \
        if (tail) (tail)->next = (s);                                                                                  \
        else (head) = (s);                                                                                             \
        (tail) = (s);                                                                                                  \
    } while (0)

/* ------------------------------------------------------------------ session.c */

Session *sess_get(Sim *sm, uint64_t id);
void sess_maybe_free(Sim *sm, Session *s);
/* free every session (their pending turns belong to the turn pool, freed with it) */
void sess_free_all(Sim *sm);
void hbm_lru_remove(Replica *rp, Session *s);
void hbm_lru_add(Replica *rp, Session *s);
int hbm_evict_one(Sim *sm, Replica *rp);
void pool_reserve(Sim *sm, Replica *rp, int64_t tokens);
void pool_release(Sim *sm, Replica *rp, int64_t tokens);
/* drop a session's resident KV (not in use) from the pool */
void sess_drop_resident(Sim *sm, Replica *rp, Session *s);

/* ------------------------------------------------------------------ tier.c */

TierList *tier_list(Sim *sm, int replica, Tier t);
void tier_touch(Sim *sm, Session *s);
void tier_enforce_capacity(Sim *sm, Replica *rp);
void tier_save_range(Sim *sm, Session *s, int64_t upto);
void tier_direct_saved(Sim *sm, Session *s, int64_t upto);
double tier_direct_save_ns(Sim *sm, int64_t tokens, int64_t pieces);
/* the chain of a load of `src` state into stage st's GPU: fills u->chain / u->bytes, sets nhops */
void tier_load_chain(Sim *sm, Unit *u, Replica *rp, Tier src, int stage, double tier_bytes, double gpu_bytes);

/* ------------------------------------------------------------------ costtab.c */

/* the per-layer linear cost of M tokens: exactly layer_cost_linear_ns(M), memoised */
double ctab_linear_ns(Sim *sm, int64_t M);
/* attention lookups with the run's segment hints: exactly cost_lookup_ns's values */
double ctab_attn_decode_ns(Sim *sm, int64_t batch, int64_t ctx_tokens);
double ctab_attn_prefill_ns(Sim *sm, int64_t tokens, int64_t ctx_tokens);
void ctab_free(Sim *sm);

/* ------------------------------------------------------------------ estimate.c */

double est_linear_ns(Sim *sm, int64_t M);
double est_layer_ns(void *core, int64_t new_tokens, int64_t ctx_tokens);
double est_load_layer_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu);

/* ------------------------------------------------------------------ walk.c */

void iter_advance(Sim *sm, Replica *rp);

/* ------------------------------------------------------------------ restore.c */

int restore_admit(Sim *sm, Replica *rp, Request *r);
int restore_is_boundary(const Sim *sm, const Request *r, int l);
void restore_tw_issue(Sim *sm, Request *r);
void restore_tw_check_done(Sim *sm, Request *r);
/* after r's restoration work changed: RQ_RESTORING ends once nothing of it is left */
void restore_progress(Sim *sm, Request *r);

/* ------------------------------------------------------------------ turn.c */

/* a Turn from the pool (NULL: out of memory, the run failed) */
Turn *turn_alloc(Sim *sm);
void turn_free(Sim *sm, Turn *t);
/* every Turn of the run, wherever it is (end of run) */
void turn_pool_free(Sim *sm);

/* ------------------------------------------------------------------ lifecycle.c */

void request_free(Request *r);
void release_request(Sim *sm, Turn *t);
int pull_trace(Sim *sm);
void on_arrival(Sim *sm, Turn *t);
void admit_queue(Sim *sm, Replica *rp);
void request_done(Sim *sm, Replica *rp, Request *r);

/* ------------------------------------------------------------------ iteration.c */

void form_iteration(Sim *sm, Replica *rp);
void iter_done(Sim *sm, Replica *rp);

/* ------------------------------------------------------------------ check.c */

/* Walk the run's structures and compare every counter with what it counts: per replica the pool's
 * tokens in use vs the active reservations plus the idle sessions' resident blocks, the HBM LRU vs
 * the sessions in it (none with a turn queued or admitted), the routing count vs queued plus
 * active requests; per tier list its bytes vs the sum of its sessions' saved bytes and its length vs the sessions in that tier; per
 * channel its queue counts vs its lists and every unit's place; per session its saves in flight vs
 * its save units. Returns 0, or -1 with the first violation as the run's error. O(sessions + units). */
int sim_check(Sim *sm);

/* ------------------------------------------------------------------ setup.c */

int sim_setup(Sim *sm);
void sim_teardown(Sim *sm);

/* tests: a hook called at every iteration boundary (before the walker); NULL to remove. Not thread-safe. */
void sim_test_set_hook(SimTestHook fn, void *ctx, int check);

#endif
