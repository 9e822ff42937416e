/* engine_int.h — the simulator's run-time objects and the internal API between its modules.
 * Private to sim/engine (and to the tests of its modules); the public API is sim.h.
 *
 * Modules, lowest first. A module calls only functions of the modules listed before it (calls run
 * downward only); tools/lint_layers.sh reads this table and fails on a call of a module listed after
 * the caller (an upward call), naming the file, line, caller and callee. The inline functions of
 * the engine's headers are checked as engine_int.h's row.
 *   evq.c         the event queue (evq.h)
 *   core.c        the run's error, pushing events, the lifecycle table
 *   batch.c       the batching rule: what joins the next iteration (batch.h; kvcal execute --race too)
 *   engine_int.h  the structs, the request lifecycle, SIM_CHECK, event helpers (inline)
 *   config.c      the settings table, --set parsing, the stores, the JSON record
 *   config_resolve.c  a configuration resolved against the catalogs (parts, store, NIC, derived values)
 *   sweepspec.c   a sweep's grid of settings (sweepspec.h)
 *   prefix.c      a content-addressed block store (prefix.h): the HBM prefix cache, the names of turns not admitted
 *   metrics_rec.c   the recordings asked for through SimRunOpts: utilisation, timeline, trace events
 *   metrics_trim.c  warm-up/cool-down trimming, what a kept request adds, the load (SimLoad)
 *   metrics.c     every other update of the run's SimResult (metrics_on_*; metrics_int.h)
 *   channel.c     IO channels and transfer units (channel.h)
 *   session.c     the session map, turns not admitted, the HBM LRU of idle resident sessions, the KV pool
 *   tier.c        the tier table: DRAM / SSD / remote lists, saves, spills, TTL, capacities, loads
 *                 parked on a save in flight
 *   waitq.c       a replica's admission FIFO in bounded memory (its middle in a spill file)
 *   blocks.c      KV blocks of admitted requests: the admitted list, what admission takes, decode
 *                 growth, preemption (the preempted list)
 *   costtab.c     the run's cost table: linear cost per token count memoised, attention lookup hints
 *   estimate.c    per-layer compute and load estimates (for policies and bounds; sim/cost/layer_cost)
 *   walk.c        the layer walk of an iteration in flight
 *   check.c       sim_check, the accounting walker (iteration boundaries, when enabled)
 *   restore.c     admission-time restoration: plans, layer-wise loads, token-wise two pointers
 *   lifecycle.c   release, arrival, the admission queue, request done
 *   iteration.c   forming an iteration (the batch, its per-layer costs), iteration done
 *   setup.c       sim_world_open/close, sim_setup/teardown (channels, tiers, pool from the catalogs)
 *   schedule_out.c  the schedule written as the run goes: an observer (Sim.observer, SimObserver)
 *   engine.c      sim_run: the event loop
 *   oracle.c      the trace-level oracle bound on TTFT (sim_oracle): the requests' costs alone, the keep LP
 * What happens below reaches a module above only through a pointer that module set: a unit's done
 * callback (channel.c), the run's observer (Sim.observer), Sim.state_dropped (tier.c's drops, waitq.c's).
 *
 * The request lifecycle (Request.state, moved only by rq_set_state, which checks this table):
 *
 *   RQ_ARRIVED   read from the trace, waiting for its release time or its session's previous turn
 *      └ release_request ───────────────▶ RQ_QUEUED
 *   RQ_QUEUED    in its replica's admission FIFO; its session's resident KV (if any) in the qkv
 *                list, kept for it unless the head of the queue finds nothing admitted and no room
 *                (until admission a turn is a compact Turn, ≤ 64 bytes; its Request is made at
 *                admission, in RQ_QUEUED)
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
 *      ├ request_done (last output token) ─▶ RQ_DONE
 *      └ blocks_grow (alloc=ondemand: no block for its next token; preempted) ─▶ RQ_QUEUED (at the head)
 *   A preempted request is re-admitted by blocks_readmit into RQ_PREFILL (re-prefilling its context,
 *   IT_RESUME items, or waiting for its swapped KV to come back) and returns to RQ_DECODE.
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

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/engine/batch.h"
#include "sim/engine/channel.h"
#include "sim/engine/evq.h"
#include "sim/engine/prefix.h"
#include "sim/engine/sim.h"
#include "traces/trace.h"

enum { EV_UNIT_DONE = 1, EV_ITER_RESUME, EV_ITER_DONE, EV_ARRIVAL, EV_RELEASE, EV_FORM, EV_PREFETCH };
/* the kinds of an iteration's items (IT_DECODE, IT_RECOMP, IT_NEW, IT_RESUME) are batch.h's */

/* the request lifecycle (see the table above) */
typedef enum RqState { RQ_ARRIVED = 0, RQ_QUEUED, RQ_RESTORING, RQ_PREFILL, RQ_DECODE, RQ_DONE, RQ_NSTATES } RqState;

/* why a session's saved state was dropped (Session.lost) */
enum { LOST_NONE = 0, LOST_TTL, LOST_CAPACITY };
/* the places a restoration's loads came from (Request.src_mask), in restore_from's order: a bit per
 * tier in tier order, then a save in flight (waited for, then read from DRAM) */
#define SRC_TIER(t) (1 << ((t) - 1))
enum { SRC_DRAM = SRC_TIER(TIER_DRAM), SRC_TIERS = (1 << (SIM_TIERS - 1)) - 1, SRC_INFLIGHT = 1 << (SIM_TIERS - 1),
       SRC_MASKS = 1 << SIM_TIERS };

/* tiers are policy.h's Tier; one row each here (SIM_TIERS, sim.h) */

typedef struct Session Session;
typedef struct Request Request;
typedef struct Turn Turn;
typedef struct Replica Replica;
typedef struct Sim Sim;
struct StatePart;

/* One row per tier (tier.c): adding a tier is a row here plus its channel and hardware entry. */
typedef struct TierInfo {
    int shared;         /* one store for all replicas (the remote store) or one per replica */
    int in_hop;         /* loads: the channel before H2D (-1: straight H2D) */
    int out_hop;        /* saves and spills into it: the channel after D2H (-1: D2H only) */
} TierInfo;
extern const TierInfo tier_table[SIM_TIERS];

/* a tier's LRU list of sessions at one place (a replica's DRAM, the shared remote store) */
typedef struct TierList {
    Session *head, *tail;   /* least recently used at the head */
    double used_bytes;      /* sum of the sessions' private bytes (tier_private: saved_bytes less their named blocks here) */
    double spilling_bytes;  /* of the bytes held here, those being spilled to the next tier */
    /* the named blocks (traces that name blocks) of the states held here, each stored once however
     * many sessions' states hold it: reference counts in a block store, blk_bytes = its blocks' bytes */
    PrefixStore blk;
    double blk_bytes;
    Session *chead, *ctail; /* write_through=true: sessions with a whole copy here (held above), LRU first */
    double copy_bytes;      /* the sum of those copies' bytes */
} TierList;

/* write_through=true: the copies of a session's state in the tiers below the one that holds it
 * (allocated with its first copy, freed when its state is dropped) */
typedef struct SessCopies {
    Session *prev[SIM_TIERS], *next[SIM_TIERS]; /* each tier's copy list (TierList.chead) */
    double bytes[SIM_TIERS];  /* landed in each tier (0: no copy there, and not listed) */
    double issued[SIM_TIERS]; /* issued to each tier, landed or not: equal to saved_bytes while the copy keeps up */
    int inflight;             /* copy units not landed yet (the session's state stays where it is meanwhile) */
    int chk_inflight;         /* sim_check's scratch: copy units found */
} SessCopies;

/* Blocks a write in flight skipped because its destination tier held them: pinned there (a
 * reference each) until the write lands, so that they cannot go meanwhile (tier.c). */
typedef struct BlockPins {
    uint64_t *h;
    int32_t n, cap;
    Tier tier;                 /* the tier whose store at the session's place holds the pins */
} BlockPins;

/* The named blocks of a session's saved state (traces that name blocks, saving policies; tier.c):
 * names[0, known) the chain of its context's blocks, of which names[0, n) are held in the block
 * store of the session's tier (TierList.blk; n × Sim.pfx_B <= saved_tokens); the pins of its saves
 * in flight (in save_dest's store, their bytes in `skip`) and of its spill in flight (in the spill
 * target's store). */
typedef struct SessBlocks {
    uint64_t *names;
    int32_t known, n;
    BlockPins save, spill;
    double skip;
} SessBlocks;

/* A cold session (sess_is_cold) spilled by waitq.c is copied byte for byte: a new pointer field must
 * be NULL whenever sess_is_cold holds (add it to that test). */
struct Session {
    uint64_t id;
    char *name;                /* the trace's own session id (TraceRequest.session_id), for requests.csv */
    int replica;
    int busy;                  /* a turn admitted or waiting */
    int refs;                  /* requests that point to this session (pulled, not yet freed) */
    uint32_t pend_side_n;      /* waitq.c: of its pending turns, those in its replica's side file (pend_side) */
    Turn *pend_head, *pend_tail;  /* its later turns read from the trace, not released yet, in trace order */
    int64_t resident_tokens;   /* KV tokens in HBM (idle or in use) */
    int16_t in_hbm_lru;
    int16_t in_qkv;            /* in its replica's qkv list: resident KV kept for its queued turn */
    int32_t pfx_n;             /* (pfx_names below; kept here, where it packs with the flags) */
    Session *hbm_prev, *hbm_next; /* the HBM LRU's links, or the qkv list's */
    Tier tier;
    int lost;                  /* its saved state was dropped: LOST_TTL or LOST_CAPACITY (0: not) */
    int64_t saved_tokens;      /* context positions [0, saved_tokens) whose state is in `tier` (linked) */
    double saved_bytes;
    int saving, spilling, loading;
    int prefetching;           /* prefetch=true: its state is being moved up to the first tier (loads wait for it) */
    double save_acc;           /* bytes of the save in flight, summed over its units */
    double spill_bytes;        /* bytes counted in its list's spilling_bytes while spilling */
    int64_t issued_pos;        /* context positions whose save has been issued */
    Tier save_dest;            /* where the saves in flight go (constant while saving > 0) */
    int d2h_inflight;          /* save units still in their D2H hop */
    Unit *parked;              /* restoration loads waiting for a save of this session to cross D2H */
    /* the named blocks of its resident KV that it holds in its replica's prefix cache: pfx_names[0, pfx_n)
     * (owned; NULL whenever resident_tokens is 0), the context's first pfx_n × Sim.pfx_B tokens */
    uint64_t *pfx_names;
    SessBlocks *tb;            /* the named blocks of its saved state (NULL: none; always NULL when cold) */
    Session *t_prev, *t_next;  /* tier LRU */
    SessCopies *cp;            /* write_through=true: its copies below `tier` (NULL: none; always NULL when tier is TIER_NONE) */
    int64_t last_use_ns;
    int chk_saving;             /* sim_check's scratch: save units, an admitted turn, requests reading its state */
    int16_t chk_active, chk_loading;
    /* concurrency=N (lifecycle.c): seen in the stream, held by a client, next in the FIFO of
     * sessions read and not yet given a client */
    int conc_seen, conc_client;
    Session *conc_next;
    uint64_t spill_rec;        /* waitq.c: its queued turn's WR_WARM record in its replica's spill file (index + 1; 0: none) */
    uint64_t pend_side;        /* waitq.c: the newest of its pending turns in the side file (record index + 1; 0: none);
                                * those are older than the ones in pend_head's list, linked newest to oldest */
    /* the saves in flight (saving > 0), per pipeline stage (each stage saves its own layers): the
     * positions whose state crossed D2H (now in host DRAM: the staging copy, or the DRAM tier) and
     * those that reached the destination tier; saved_tokens <= land_pos <= d2h_pos <= issued_pos.
     * 2 × S words allocated with the session (sess_size): pos[0, S) the d2h positions (sess_d2h),
     * pos[S, 2S) the land positions (sess_land); part of the session's image in a spill file */
    int64_t pos[];
};
_Static_assert(offsetof(Session, pos) == sizeof(Session), "a Session's positions follow its fixed part");

/* A turn read from the trace and not admitted yet (RQ_ARRIVED: pending in its session or waiting for
 * its arrival event; RQ_QUEUED: in its replica's admission FIFO): what admission makes its Request
 * from, in 64 bytes (token counts fit 31 bits: the trace reader caps them at TRACE_MAX_TOKENS). */
struct Turn {
    uint64_t id;
    Session *s;
    Turn *next;                 /* its session's pending list */
    int64_t offered_ns;         /* the load process's arrival (-1 until known: then the release) */
    int64_t when_ns;            /* RQ_ARRIVED: the trace's arrival (-1: none); RQ_QUEUED: its release */
    int64_t think_ns;
    uint32_t hist : 31, queued : 1;     /* queued: RQ_QUEUED (else RQ_ARRIVED) */
    uint32_t nnew : 31, trim : 1;       /* trim: metrics, left out as warm-up (decided at release) */
    uint32_t nout : 31, pulls_trace : 1; /* its arrival reads the trace on to the next timed arrival */
    int32_t turn;
};

/* a ring of Turn pointers (waitq.c) */
typedef struct TurnRing {
    Turn **v;
    size_t head, n, cap;
} TurnRing;
static inline Turn *turn_ring_at(const TurnRing *q, size_t k) { return q->v[(q->head + k) % q->cap]; }

#define WR_NAME 36       /* a cold session spilled with its name: at most this many bytes of it */
#define WAITQ_RDBUF 256  /* records per read of the spill file */
#define WAITQ_PATCHES 4096 /* spill-file record rewrites buffered before they are written */
/* a replica's spill file (waitq.c): records [rd, wr) not read back yet, holding n FIFO entries */
typedef struct WaitSpill {
    FILE *f;             /* NULL: not opened yet */
    FILE *side;          /* the images of sessions that went cold after their turn was spilled (NULL: none yet) */
    uint64_t side_wr;    /* records in it, written or in sbuf (reset with the spill file's offsets) */
    void *sbuf;          /* its last records, not written yet: [side_wr - sbuf_n, side_wr) */
    uint64_t sbuf_n;
    void *rbuf;          /* its records read ahead: [rbuf_base, rbuf_base + rbuf_n) */
    uint64_t rbuf_base, rbuf_n, rbuf_cap;
    void *tbuf;          /* its records read ahead for pending-turn runs (WAITQ_RDBUF): [tbuf_base, tbuf_base + tbuf_n) */
    uint64_t tbuf_base, tbuf_n;
    /* disk space given back (waitq.c: holes punched where everything was read): the spill file below
     * `punched`; per side-file region of WAITQ_REGION records, its groups not read yet */
    uint64_t punched;
    uint32_t *side_live;
    size_t side_regions;
    int off;             /* no temporary file, or a write failed: no more spilling */
    uint64_t rd, wr, n;
    void *buf;           /* WAITQ_RDBUF records read ahead: [buf_base, buf_base + buf_n) */
    uint64_t buf_base, buf_n;
    /* records of the spill file rewritten (WR_WARM → WR_SREF) but not written yet: WAITQ_PATCHES at
     * most, all at or after buf_base + buf_n; pmin the lowest (waitq.c writes them before a read
     * that reaches it, or when the buffer is full) */
    void *pbuf;
    size_t pn;
    uint64_t pmin;
} WaitSpill;

/* token-wise two pointers: IO chunks a restoring request keeps in flight (restore.c; written in
 * the schedule's request record, io_depth, for kvcal execute --race) */
#define TW_DEPTH 2

struct Request {
    uint64_t id;
    Session *s;
    int turn, replica;
    RqState state;
    int64_t arrival_ns;
    int64_t hist, nnew, nout;
    int64_t reserved_tokens;    /* KV pool tokens (whole blocks) it holds while admitted, beyond its held blocks */
    /* the blocks its context names (owned; trace order) and, of those, the first `held` it holds in
     * its replica's prefix cache (they are not in reserved_tokens); pfx_hit: context tokens it found
     * there at admission and did not compute (metrics) */
    uint64_t *names;
    int32_t n_names, held;
    int64_t pfx_hit;
    Session *donor;             /* the session whose saved copy its restoration reads (NULL: its own; only
                                   dereferenced while loads_left > 0, which keeps the donor's state) */
    /* preemption (blocks.c): times preempted; a preempted request's pending re-admission (1), the
     * context tokens it re-prefills (recompute), its swap units in flight out / in (swap) */
    int preempts, preempted;
    int64_t resume_left, resume_done, swap_tokens;
    int swap_out_left, swap_in_left, swap_in_wait;
    /* restoration */
    const char *from;
    int64_t recompute_left, recompute_done, recompute_total;
    int64_t recompute_chunk;    /* the plan's recompute_chunk_tokens: 0 the budget, -1 unchunked */
    int64_t lw_tokens;          /* history tokens restored layer-wise */
    int lw_pending;             /* layer-wise work not yet executed in an iteration */
    int early_layers, arrived_prefix, loads_left;
    uint8_t *mode, *arrived;
    uint8_t *layer_units;       /* per layer: its load units not yet arrived (one per place its bytes are) */
    int src_mask;               /* SRC_*: where the loads issued so far read from */
    int parked_units;           /* loads parked on the session (waiting for a save to cross D2H) */
    int64_t wait_max_ns;        /* the longest one of its loads waited for a save */
    /* the last layer whose restoration has compute after its arrival (hidden-state projection,
     * dequantize, all-gather): its index (-1: none) and the end of that work from the layer's start */
    int rc_layer;
    double rc_off_ns;
    /* token-wise two pointers; tw_whole: loads only (RestorePlan.whole), the compute pointer stays at 0 */
    int tw, tw_whole, low_prio;
    int stage_par, bnd_left;   /* stage-parallel restoration: boundary activations still in flight */
    int64_t bnd_ns[SIM_MAX_STAGES];   /* stage-parallel: when each stage's boundary activation arrived */
    double lane_ns[SIM_MAX_STAGES];   /* stage-parallel: each stage's recompute lane in the iteration in flight */
    int64_t chunk_tokens;      /* storage layout chunk (0: the array's stripe) */
    double kv_scale;           /* compressed KV: bytes scale (1 plain) */
    float *lscale;             /* per layer: the plan's layer_bytes_scale (NULL: none set) */
    int64_t tw_comp, tw_comp_inflight, tw_io_issued, tw_landed, tw_io_chunk, tw_comp_chunk;
    int64_t tw_base; /* where the compute pointer started: the history's tokens in the prefix cache */
    /* IO chunks in flight (TW_DEPTH at most, so that one always waits at the channel and the IO order
     * among requests is a real choice): tokens and units left per slot */
    int64_t tw_ck_tokens[TW_DEPTH];
    int tw_ck_units[TW_DEPTH];
    int tw_ck_n;
    Tier src;
    int64_t t_admit, t_restored, t_first, t_last_tok;
    /* where the history's bytes were at admission: per stage up to RESTORE_MAX_PARTS token ranges,
     * each with its place (restore.c) */
    struct StatePart *parts;
    int nparts[SIM_MAX_STAGES];
    int64_t new_left, new_done, out_done;
    double tbt_sum;
    int64_t tbt_max;
    double lb_ns;
    int in_iter;                /* in the replica's iteration in flight (set and cleared by rq_set_in_iter) */
    int hi_loads;               /* its layer loads (U_LOAD) waiting in channels' load queues (channel.c) */
    /* load (lifecycle.c sets, metrics.c reads) */
    int64_t offered_ns;         /* the load process's arrival */
    int trim;                   /* metrics: left out as warm-up (decided at release) */
    int64_t *gaps;              /* metrics with trimming on: its TBT gaps until its trim is decided */
    int64_t n_gaps, cap_gaps;
    struct TlRec *tl;           /* metrics_rec.c: its restoration timeline while recorded (else NULL) */
};

typedef struct IterItem {
    Request *r;
    int type;
    int lw;                     /* carries layer-wise restoration */
    int64_t tokens, ctx;
} IterItem;

/* iteration.c: a decode run's on-demand blocks by phase (see run_take_phase) */
typedef struct RunBlocks {
    int on;          /* the phases are built */
    int64_t b;       /* block_tokens */
    int64_t ph;      /* (adv − 1) mod b of the next call: the caller calls at every later step, in order */
    int cross_next;  /* requests may take a block at the next call (the last one found them needing one) */
} RunBlocks;

/* iteration.c: the decode run a replica's iteration in flight is the last step of (decode_run).
 * While `on`, the run's items lag behind it by n steps (their tokens, contexts and own TBT
 * statistics are applied when the run ends: run_settle); the step in flight starts at t. */
typedef struct DecodeRun {
    int on;
    int stop;              /* the step in flight is the run's last: RUN_STOP_STEPS (kmax), RUN_STOP_BLOCKS (no free block for the next) */
    int64_t B;             /* the batch (its items, all decoding) */
    int64_t kmax;          /* the run's steps at most (its first completion or save) */
    int64_t kdone;         /* the step that completes a request (≥ kmax) */
    int64_t n;             /* steps taken before the one in flight (not yet applied to the items) */
    int64_t t0, t;         /* the first step's start; the step in flight's */
    int64_t dctx;          /* Σ of the items' contexts at the step in flight */
    int64_t slack, need;   /* on-demand blocks: steps with no block to take; run_need(n), or -1 */
    uint64_t drops;        /* Sim.state_drops when the run was formed */
    double lin, base;      /* the batch's linear cost; the step in flight's per-layer time */
    CostLine line;         /* the decode attention after the first step */
    int line_on;
    RunBlocks rb;
    uint64_t *gaps;        /* the n steps' durations */
    int64_t cap_gaps;
    /* run_take_phase's phases: per item its threshold and the next item of its phase; per phase
     * its first item (-1: none); kept between runs */
    int64_t *rb_c;
    int *rb_next, *rb_head;
    int64_t rb_cap_items, rb_cap_phases;
} DecodeRun;
enum { RUN_STOP_STEPS = 1, RUN_STOP_BLOCKS };

struct Replica {
    int id;
    Channel ch[CH_COUNT][SIM_MAX_STAGES]; /* [kind][stage]; kinds not per stage use [kind][0] */
    int has_ch[CH_COUNT];
    uint8_t ch_per_stage[CH_COUNT];       /* kind has one channel per stage (H2D, D2H; NICs with nic_per_stage) */
    int64_t pool_cap, pool_used;          /* tokens */
    /* the admission FIFO (waitq.c): qh, then the spill file, then qt; q_len turns in all */
    TurnRing qh, qt;
    WaitSpill sp;
    size_t q_len, q_bound;
    Request **pre;                        /* alloc=ondemand: preempted requests waiting, admitted before the FIFO (last pushed first) */
    int pre_n, pre_cap;
    Request **active;                     /* admitted, admission order */
    int n_active, cap_active;
    Session *lru_head, *lru_tail;         /* idle resident sessions, least recent at head */
    Session *qkv_head, *qkv_tail;         /* sessions with a turn queued and resident KV, in release order */
    int form_pending;
    /* iteration */
    int iterating;
    IterItem *items;
    int n_items, cap_items;
    double *layer_ns;           /* per layer of the iteration in flight; without layer-wise work (!any_lw,
                                   every layer the same) only [0] is set, unless an observer is set (Sim.observer) */
    int layer;
    int64_t cursor_ns, iter_start_ns;
    /* the iteration in flight is the last step of a decode run of run_steps steps (1: an ordinary
     * iteration) that started at run_start_ns; the earlier steps were accounted when it was formed */
    int64_t run_start_ns, run_steps;
    double run_busy0[SIM_MAX_STAGES];     /* busy_stage_ns when the run (or iteration) was formed */
    DecodeRun dr;                         /* iteration.c: the decode run of the iteration in flight */
    uint64_t iter_seq;
    Request *wait_r;
    int wait_layer;
    double busy_stage_ns[SIM_MAX_STAGES];
    double direct_save_ns;                /* SAVE_DIRECT: writes the iteration waits for */
    int any_lw;                           /* the batch waits on layer-wise state (else one event) */
    int *lw_idx;                          /* the indices of its layer-wise items, in item order */
    int n_lw, cap_lw;
    TierList tier[SIM_TIERS];             /* this replica's host tiers (rows not shared) */
    PrefixStore pfx;                      /* the HBM prefix cache: named blocks, each Sim.pfx_B pool tokens */
    /* restoration windows (metrics.c): while >= 1 request of this replica is RQ_RESTORING */
    int n_restoring;
    int64_t win_since;                    /* the open window's start */
    double win_ns;                        /* window time so far (closed windows) */
    double win_ch_base[CH_COUNT][SIM_MAX_STAGES]; /* each channel's busy time when the window opened */
    double win_ch_ns[CH_COUNT][SIM_MAX_STAGES];   /* each channel's busy time inside windows */
    double win_gpu_ns[SIM_MAX_STAGES];    /* GPU busy time inside windows (per iteration, pro rata) */
    double iter_win0_ns;                  /* window time at the start of the iteration in flight */
    double iter_busy0[SIM_MAX_STAGES];    /* busy_stage_ns at the start of the iteration in flight */
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
    /* its block stores (summed over places; the stores count blocks stored and stored once): blocks
     * gone with the last state holding them (dropped: TTL, capacity, or a save's pin; moved: the
     * state spilled or promoted elsewhere), named history blocks restorations found here */
    uint64_t blk_dropped, blk_moved, blk_found;
    double skip_bytes;      /* bytes saves did not write: named blocks the tier held already */
} TierRun;

/* Load accumulators of a run (metrics_trim.c owns them): the kept requests' window and tokens, an
 * adaptive time series of (arrival, delay) moments for the steady-state test, and the trimming
 * state. LOAD_BINS bins of width bin_ns from t = 0; when an arrival passes the last bin, pairs
 * merge and the width doubles (O(1) memory, exact least squares over whole bins). */
#define LOAD_BINS 256
#define LOAD_BATCHES 10 /* batch means of the steady-state test */
typedef struct LoadBin {
    double n, st, sy, stt, sty, syy; /* requests arriving in the bin: moments of (arrival, delay) in seconds */
    double nd;                       /* requests done in the bin */
} LoadBin;
typedef struct TrimPending TrimPending;
typedef struct LoadAcc {
    int64_t bin_ns;
    LoadBin bin[LOAD_BINS];
    int64_t t0_ns;                 /* the first arrival of the run (-1: none yet) */
    int64_t max_arrival_ns;        /* the latest arrival released so far */
    int64_t exo_last_ns;           /* the latest arrival the load process made on its own (a timestamp,
                                      a session start, a client given a session): after it the run drains */
    TrimPending *pend;             /* completed requests whose cool-down trim is not decided yet */
    size_t n_pend, cap_pend, scan_at;
} LoadAcc;

typedef void (*SimTestHook)(Sim *sm, void *ctx);

/* What the engine's modules tell an observer of the run (the schedule written by schedule_out.c):
 * set by the module that observes (Sim.observer; NULL: none), so that the modules below it never call it
 * by name. An observer only reads: the run is the same with it or without it. */
typedef struct SimObserver {
    void (*load)(Sim *sm, Unit *u, int64_t lo, int64_t hi, int hidden); /* restore.c: a load unit made, about to be sent or parked */
    void (*admit)(Sim *sm, const Request *r);                           /* restore.c: r admitted, its plan started */
    void (*hop)(Sim *sm, const Channel *c, const Unit *u);              /* channel.c: u's hop on c ended */
    void (*kick)(Sim *sm, const Replica *rp);                           /* sim_kick: rp will form an iteration */
    void (*iter_formed)(Sim *sm, const Replica *rp);                    /* iteration.c: rp formed an iteration */
    void (*layer)(Sim *sm, const Replica *rp, int l, int64_t start_ns, int64_t end_ns); /* walk.c: a layer ran */
    void (*iter_done)(Sim *sm, const Replica *rp);                      /* iteration.c: rp's iteration ends now */
    void (*request_done)(Sim *sm, const Request *r);                    /* lifecycle.c: r produced its last token */
} SimObserver;

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
    PrefixNames names;                    /* the block names of turns not admitted yet, by request id */
    PrefixOwners owners;                  /* a named block -> the session that saved it last (saving policies) */
    int64_t pfx_B;                        /* tokens per named block (0: the trace named none so far) */
    uint64_t tb_asked;                    /* named history blocks restorations looked for below HBM */
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
    const SsdSpec *ssd;                   /* the array's drive (n_ssd > 0), for its wear */
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
    /* load (lifecycle.c): trace mode: the offered arrival of each dense session's last turn read
     * (-1: none); concurrency: idle clients and the FIFO of sessions waiting for one */
    int64_t *sess_last_ns;
    size_t sess_last_cap;
    int conc_started, clients_idle;
    Session *wait_head, *wait_tail;
    LoadAcc load;                         /* metrics_trim.c */
    /* memory of what waits (SimResult.waiting_peak_bytes: the peak of the sum): the Turns alive (read,
     * not admitted), the sessions in memory (Session and name), the admission FIFOs' slots */
    uint64_t turn_bytes, sess_bytes, ring_bytes, waiting_peak;
    /* session.c: sessions spilled with a queued turn (waitq.c), one bit per dense session id */
    uint64_t *spilled_bits;
    size_t spilled_words;
    const SimRunOpts *opts;               /* metrics_rec.c: the recordings asked for (sim_run_ex) */
    struct MetricsObs *obs;               /* metrics_rec.c: utilisation windows, timeline, trace sink */
    CostTab ctab;                         /* costtab.c */
    int run_on;                           /* iteration.c: decode runs go on across their boundaries (run_go_on) */
    uint64_t state_drops;                 /* tier.c: saved states dropped so far (tier_drop) */
    int64_t hi_loads_in_iter;             /* Σ hi_loads of the requests in_iter: 0 ⇒ no queued load stalls an iteration */
    uint64_t load_runs;                   /* layer loads queued inside a run (ch_extend_run) */
    unsigned ref_off;                     /* tests: SIM_REF_* shortcuts off (sim_test_set_reference) */
    double *lb_layer_ns;                  /* restore.c: est_layer_ns(k, 0) for the lower bound (NaN: not yet) */
    int64_t lb_layer_n;
    struct SchedOut *sched;               /* schedule_out.c: the schedule written (NULL: off) */
    const SimObserver *observer;          /* the run's observer (schedule_out.c's while it writes; NULL: none) */
    /* iteration.c's scratch for the batching rule: the admitted requests as rows, the items */
    BatchReq *batch_rq;
    BatchItem *batch_it;
    int batch_cap;
    /* tier.c calls it after dropping a session's saved state (TTL, capacity): the session may be
     * freed or leave memory then (setup.c sets waitq.c's; NULL: sess_maybe_free) */
    void (*state_dropped)(Sim *sm, Session *s);
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

/* n zeroed bytes (NULL: out of memory): calloc(1, n) for the run's per-turn and per-request objects.
 * glibc's calloc never takes a chunk from the thread cache (it always runs _int_malloc), and the
 * frees that then find the cache full run _int_free's bins; malloc and memset reuse the cached chunks */
static inline void *sim_zalloc(size_t n)
{
    void *p = malloc(n);
    if (p) memset(p, 0, n);
    return p;
}
/* llround(x) (iteration.c, walk.c, metrics_rec.c: every step and layer time in ns) without the library call, bit for bit for every finite x of int64 range: the cast
 * truncates toward zero, x − trunc(x) is exact, and halves round away from zero */
static inline int64_t round_ns(double x)
{
    if (!(x < 0x1p63)) return INT64_MAX; /* (a cast out of range is undefined; sim_push refuses the time) */
    if (x < -0x1p63) return INT64_MIN;
    int64_t i = (int64_t)x;
    double f = x - (double)i;
    if (f >= 0.5) i++;
    else if (f <= -0.5) i--;
    return i;
}

/* a session's bytes (its fixed part and its 2 × S save positions) and those positions per stage */
static inline size_t sess_size(const Sim *sm) { return sizeof(Session) + 2 * (size_t)sm->S * sizeof(int64_t); }
static inline int64_t *sess_d2h(Session *s) { return s->pos; }
static inline int64_t *sess_land(const Sim *sm, Session *s) { return s->pos + sm->S; }

/* after the memory of what waits grew: its peak */
static inline void sim_note_waiting(Sim *sm)
{
    uint64_t m = sm->turn_bytes + sm->sess_bytes + sm->ring_bytes;
    if (m > sm->waiting_peak) sm->waiting_peak = m;
}

/* t + d and d × k on the simulated clock (t, d, k >= 0), saturating at INT64_MAX instead of
 * wrapping: a saturated time is past SIM_TIME_MAX_NS, which sim_push and sim_arm refuse */
static inline int64_t t_add(int64_t t, int64_t d)
{
    int64_t s;
    return __builtin_add_overflow(t, d, &s) ? INT64_MAX : s;
}
static inline int64_t t_mul(int64_t d, int64_t k)
{
    int64_t p;
    return __builtin_mul_overflow(d, k, &p) ? INT64_MAX : p;
}

/* Push an event at t; 0 (the run failed, with the message) when t is in the past or past SIM_TIME_MAX_NS. */
uint64_t sim_push(Sim *sm, int64_t t, int kind, void *obj, int64_t arg);
/* the run's failure for an event at t past SIM_TIME_MAX_NS (core.c); returns 0 */
uint64_t sim_time_overrun(Sim *sm, int64_t t);
/* the same-instant order of the event kinds (core.c) */
extern const uint32_t sim_ev_rank[];
/* (re-)arm an owner's timer with an event of `kind` at t (evq_arm: the event it held is cancelled) */
static inline uint64_t sim_arm(Sim *sm, EvTimer *tm, int64_t t, int kind, void *obj)
{
    if (t > SIM_TIME_MAX_NS) return sim_time_overrun(sm, t);
    uint64_t seq = evq_arm(&sm->q, tm, t, sim_ev_rank[kind], (uint32_t)kind, obj, sm->e);
    if (!seq) sm->failed = 1;
    return seq;
}

/* schedule admission (always) and, when the replica is idle, the next iteration */
static inline void sim_kick(Sim *sm, Replica *rp)
{
    if (sm->observer) sm->observer->kick(sm, rp);
    if (rp->form_pending) return;
    rp->form_pending = 1;
    sim_push(sm, sim_now(sm), EV_FORM, rp, 0);
}

static inline int64_t blocks_tokens(const Sim *sm, int64_t tokens)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16;
    return (tokens + b - 1) / b * b;
}

/* the session whose saved state r's restoration reads */
static inline Session *rq_src(const Request *r) { return r->donor ? r->donor : r->s; }

/* pool tokens of a context of `tokens` whose first `held` named blocks are in the prefix cache (the
 * cache holds those, each pfx_B tokens, once for every holder) */
static inline int64_t blocks_private(const Sim *sm, int64_t tokens, int64_t held)
{
    return blocks_tokens(sm, tokens - held * sm->pfx_B);
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
    return &rp->ch[kind][rp->ch_per_stage[kind] ? stage : 0];
}

/* how many channels of kind `kind` replica rp has (S: the pipeline stages) */
static inline int rep_ch_count(const Replica *rp, int kind, int S) { return rp->ch_per_stage[kind] ? S : 1; }

/* the lifecycle move of r to `to`, checked against the table above (a move it does not list ends
 * the run with an error naming the file and line of the move) */
void rq_move(Sim *sm, Request *r, RqState to, const char *file, int line);
#define rq_set_state(sm, r, to) rq_move((sm), (r), (to), __FILE__, __LINE__)
const char *rq_state_name(RqState s);
/* r joins (1) or leaves (0) its replica's iteration in flight; keeps sm->hi_loads_in_iter */
static inline void rq_set_in_iter(Sim *sm, Request *r, int on)
{
    if (r->in_iter == on) return;
    r->in_iter = on;
    sm->hi_loads_in_iter += on ? r->hi_loads : -r->hi_loads;
}

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
Session *sess_peek(Sim *sm, uint64_t id); /* NULL when not in memory */
void sess_maybe_free(Sim *sm, Session *s);
/* the named blocks of s's saved state (tier.c fills them) freed; s->tb NULL */
void sess_blocks_free(Session *s);
/* at teardown: every session and the turns pending in them */
void sess_free_all(Sim *sm);
/* a turn not admitted (teardown, or made into its Request): freed, its reference on its session dropped */
void turn_free(Sim *sm, Turn *t);
void hbm_lru_remove(Replica *rp, Session *s);
void hbm_lru_add(Replica *rp, Session *s);
int hbm_evict_one(Sim *sm, Replica *rp);
/* s's turn joins the queue: s leaves the HBM LRU, its resident KV (if any) is kept for the turn in
 * the qkv list; qkv_remove: the turn is admitted */
void qkv_add(Replica *rp, Session *s);
void qkv_remove(Replica *rp, Session *s);
/* evict the resident KV of the qkv list's newest session other than keep; 0 when there is none */
int hbm_evict_queued(Sim *sm, Replica *rp, const Session *keep);
void pool_reserve(Sim *sm, Replica *rp, int64_t tokens);
void pool_release(Sim *sm, Replica *rp, int64_t tokens);
/* drop a session's resident KV (not in use) from the pool (and s from the qkv list) */
void sess_drop_resident(Sim *sm, Replica *rp, Session *s);
/* s->name = a copy of name (counted in sm->sess_bytes); -1 when out of memory */
int sess_set_name(Sim *sm, Session *s, const char *name);
/* Spilling a session with its queued turn (waitq.c). sess_is_cold: nothing refers to s but its turns
 * — one queued plus *pending in its pending list or, spilled as runs, in the side file (pend_side_n) —
 * and no pointer of it is set but its name (at most
 * WR_NAME bytes) and that list: nothing resident, saved or in flight, in no list; its bytes then
 * are a faithful image of it (scalars only). sess_spill_reserve: room in the spilled bitmap for id
 * (-1: out of memory). sess_detach: s leaves the map and is freed, its id marked spilled (its turns
 * are the caller's). While marked, sess_get of the id makes a "ghost" (busy, not counted as a new
 * session) that gathers the turns the trace adds. sess_reattach: the session made again from its
 * image (img's fixed part and its 2 × S save positions `pos`; the ghost keeps its name, pending
 * turns and references; a new one is not counted), its name `name` when it has none; NULL after
 * sim_fail. */
int sess_is_cold(const Sim *sm, const Session *s, size_t *pending);
int sess_spill_reserve(Sim *sm, uint64_t id);
void sess_detach(Sim *sm, Session *s);
Session *sess_reattach(Sim *sm, const Session *img, const int64_t *pos, const char *name);

/* ------------------------------------------------------------------ waitq.c */

void waitq_init(Sim *sm, Replica *rp);
/* append t (released, queued) to rp's FIFO; -1 after sim_fail */
int waitq_push(Sim *sm, Replica *rp, Turn *t);
/* the FIFO's head, in memory (read back from the file when needed); NULL when empty or failed */
Turn *waitq_head(Sim *sm, Replica *rp);
/* remove the head waitq_head returned */
void waitq_pop(Replica *rp);
/* Sim.state_dropped: s's saved state was dropped. When its queued turn is spilled (WR_WARM:
 * s->spill_rec) and s is cold now, s goes to the spill file's side file too and leaves memory; else
 * it is freed if nothing holds it. Either way the caller must not touch s afterwards. */
void waitq_state_dropped(Sim *sm, Session *s);
/* t, a pending turn of s (appended after its others): while s's queued turn is in the spill file
 * (s->spill_rec) and s holds no pending turn in memory, t goes to the side file (its memory freed,
 * its reference on s kept; read back, ahead of those in memory, with the queued turn): 1; else 0 */
int waitq_pend_add(Sim *sm, Session *s, Turn *t);
/* teardown: the turns in memory freed, the file closed */
void waitq_free(Sim *sm, Replica *rp);
/* tests: the FIFO's in-memory bound in turns (0: the default, 256); process-wide, set before sim_run */
void sim_test_set_queue_bound(size_t entries);

/* ------------------------------------------------------------------ blocks.c */

/* append r to rp->active (admission order); -1 after sim_fail */
int active_push(Sim *sm, Replica *rp, Request *r);
/* a preempted request waits in rp->pre, admitted before the FIFO (the last pushed first); -1 after sim_fail */
int queue_push_front(Sim *sm, Replica *rp, Request *r);

/* the KV pool tokens r needs when (re-)admitted: alloc=reserve the whole turn; ondemand the context
 * it holds through its next produced token (history + new + 1, or after a preemption its context so
 * far, + 1 when it recomputes) */
int64_t blocks_turn_need(const Sim *sm, int64_t hist, int64_t nnew, int64_t nout, int64_t held); /* a turn not yet admitted, holding `held` cached blocks */
int64_t blocks_admit_need(const Sim *sm, const Request *r);
/* tokens of rp's pool admission must leave free (the watermark; 0 when nothing is admitted) */
int64_t blocks_admit_headroom(const Sim *sm, const Replica *rp);
/* before rp forms a batch: every decoding request gets the block its next token needs, evicting
 * idle sessions' KV (LRU) and then preempting the most recently admitted decoding request */
int blocks_grow(Sim *sm, Replica *rp);
/* a preempted request at the head of the queue was given its blocks: back into the batch */
int blocks_readmit(Sim *sm, Replica *rp, Request *r);
/* r's context is computed up to its named blocks: they go into the prefix cache, held by r */
int blocks_publish(Sim *sm, Replica *rp, Request *r);
/* an IT_RESUME chunk of r's re-prefill ended at now */
void blocks_resume_done(Sim *sm, Request *r, int64_t tokens);

/* ------------------------------------------------------------------ tier.c */

TierList *tier_list(Sim *sm, int replica, Tier t);
/* the chain of named blocks of s's context (a turn admitted; saving policies): what its saved state's
 * named blocks are (an extension of the chain known; another chain adds no block); -1: out of memory */
int tier_names_set(Sim *sm, Session *s, const uint64_t *names, int32_t n);
void tier_touch(Sim *sm, Session *s);
void tier_promote(Sim *sm, Session *s);
/* prefetch=true: s's next turn arrives at t_ns (known now): its state, if below the first tier then,
 * starts moving up prefetch_lead before (EV_PREFETCH, the session's id) */
void tier_prefetch_plan(Sim *sm, Session *s, int64_t t_ns);
void tier_prefetch_fire(Sim *sm, uint64_t session_id);
/* a restoration's load parked until s's prefetch has landed (tier_park's third kind) */
#define TIER_WAIT_PREFETCH 2
void tier_enforce_capacity(Sim *sm, Replica *rp);
/* drop s's saved state if it was unused for state_ttl (counted as lost) */
void tier_expire_session(Sim *sm, Session *s);
void tier_save_range(Sim *sm, Session *s, int64_t upto);
void tier_direct_saved(Sim *sm, Session *s, int64_t upto);
double tier_direct_save_ns(Sim *sm, int64_t tokens, int64_t pieces);
/* the chain of a load of `src` state into stage st's GPU: fills u->chain / u->bytes, sets nhops */
void tier_load_chain(Sim *sm, Unit *u, Replica *rp, Tier src, int stage, double tier_bytes, double gpu_bytes);
/* u, a load of r's (its chain set), waits on r's session until the session's stage u->stage save has
 * crossed D2H (land: landed) up to `upto`; the save's progress sends it (in park order) */
void tier_park(Sim *sm, Request *r, Unit *u, int64_t upto, int land);

/* ------------------------------------------------------------------ costtab.c */

/* the per-layer linear cost of M tokens: exactly layer_cost_linear_ns(M), memoised */
double ctab_linear_ns(Sim *sm, int64_t M);
/* n more lookups of M after one ctab_linear_ns(sm, M): the counters as n calls would leave them */
void ctab_linear_count(Sim *sm, int64_t M, uint64_t n);
/* a CostLine of the decode attention at `batch` with the run's hint (cost_line_end when done) */
void ctab_attn_decode_line(Sim *sm, CostLine *ln, int64_t batch);
/* attention lookups with the run's segment hints: exactly cost_lookup_ns's values */
double ctab_attn_decode_ns(Sim *sm, int64_t batch, int64_t ctx_tokens);
double ctab_attn_prefill_ns(Sim *sm, int64_t tokens, int64_t ctx_tokens);
void ctab_free(Sim *sm);

/* ------------------------------------------------------------------ estimate.c */

double est_linear_ns(Sim *sm, int64_t M);
double est_layer_ns(void *core, int64_t new_tokens, int64_t ctx_tokens);
double est_load_layer_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu);
void est_load_hops_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu, int64_t chunk_tokens,
                      double *hop_ns, double *h2d_ns);

/* ------------------------------------------------------------------ walk.c */

void iter_advance(Sim *sm, Replica *rp);

/* ------------------------------------------------------------------ restore.c */

int restore_admit(Sim *sm, Replica *rp, Request *r);
int restore_is_boundary(const Sim *sm, const Request *r, int l);
void restore_tw_issue(Sim *sm, Request *r);
void restore_tw_check_done(Sim *sm, Request *r);
/* after r's restoration work changed: RQ_RESTORING ends once nothing of it is left */
void restore_progress(Sim *sm, Request *r);
/* the restoration lower bound (restore/bound's denominator) of N tokens whose state is in `fastest`
 * (TIER_NONE: nothing saved, recompute only); the cost lookups it makes are not counted */
double restore_bound_ns(Sim *sm, int64_t N, Tier fastest);

/* ------------------------------------------------------------------ lifecycle.c */

void request_free(Request *r);
void release_request(Sim *sm, Turn *t);
int pull_trace(Sim *sm);
void on_arrival(Sim *sm, Turn *t);
void admit_queue(Sim *sm, Replica *rp);
void request_done(Sim *sm, Replica *rp, Request *r);
/* the run's load state (sess_last_ns), at teardown */
void lifecycle_free(Sim *sm);

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
/* tests: the engine's shortcuts turned off (the reference each is compared with; 0: all on):
 * SIM_REF_LAZY_REARM: a channel's re-armed completion is a new event, the old one popped and
 * ignored (no timer); SIM_REF_NO_TEMPLATES: every layer's load units made afresh (restore.c);
 * SIM_REF_NO_LB_MEMO: the lower bound's estimates computed at every call; SIM_REF_CHECK_PHASES (a
 * check, not a shortcut off): every step of a decode run's on-demand blocks by phase (iteration.c)
 * is checked against the full pass it replaces; SIM_REF_NO_RUNS: every layer load its own
 * queue entry, no run (restore.c, ch_extend_run). Not thread-safe. */
enum { SIM_REF_LAZY_REARM = 1, SIM_REF_NO_TEMPLATES = 2, SIM_REF_NO_LB_MEMO = 4, SIM_REF_CHECK_PHASES = 8, SIM_REF_NO_RUNS = 16 };
void sim_test_set_reference(unsigned flags);

/* ------------------------------------------------------------------ oracle.c */

/* one request as the oracle bound counts it (for the tests' exhaustive search): its bound with
 * nothing kept (base, ns; after its prefetch), what keeping its history can still save (save, ns),
 * at rho ns per token kept, up to keep_cap tokens over [keep_t0, keep_t1) on the nominal timeline
 * (0: no keeping); keeping the rest of its history whole occupies keep_tokens */
typedef struct OracleRow {
    double base, save, rho;
    int64_t keep_t0, keep_t1, keep_cap, keep_tokens;
} OracleRow;
/* sim_oracle, and its requests in trace order (*rows: out->requests of them, malloc'd; NULL: none) */
int oracle_rows(SimWorld *w, SimOracle *out, OracleRow **rows, KvErr *e);

#endif
