/* schedule.h — reading a schedule written by kvsim run --emit-schedule (JSON lines; the format is
 * docs/formats.md "Schedule") into arrays that kvcal execute replays.
 *
 * Responsible for: parsing every record (header, request, unit, iter, done, end), checking each
 * field's presence, type and range and the references between records (a unit's request, an
 * iteration's items, lanes and waits, "after" causes naming a unit or an iteration that exists; the
 * header's stage_layers adding up to its layers, each lane on its layer's stage), with a message
 * naming the file, the line and the field, the value and what was expected.
 * Not responsible for: running anything (execute.c), writing schedules (sim/engine/schedule_out.c).
 * Invariants: units[k].id == k + 1 (sorted: the file has them in landing order, ids in issue order)
 * and iters[k].id == k + 1 (the emitter's numbering, checked);
 * every id a record names is in range; a loaded schedule owns all its memory (schedule_free).
 * Complexity: O(bytes of the file) + O(references) to check them.
 */
#ifndef KV_SCHEDULE_H
#define KV_SCHEDULE_H

#include <stdint.h>

#include "sim/base/util.h"

enum { SCH_CAUSE_AT = 0, SCH_CAUSE_UNIT, SCH_CAUSE_ITER };
enum { SCH_CH_SSD = 0, SCH_CH_H2D, SCH_CH_NIC, SCH_CH_COUNT };
enum { SCH_TIER_DRAM = 0, SCH_TIER_SSD, SCH_TIER_REMOTE };
enum { SCH_STATE_KV = 0, SCH_STATE_HIDDEN, SCH_STATE_KV_TOK };
enum { SCH_ITEM_DECODE = 0, SCH_ITEM_RECOMPUTE, SCH_ITEM_PREFILL };
enum { SCH_WORK_RECOMPUTE = 0, SCH_WORK_PROJECTION, SCH_WORK_DEQUANT };
#define SCH_MAX_HOPS 3
#define SCH_MAX_STAGES 16

typedef struct SchCause {
    int kind;        /* SCH_CAUSE_* */
    uint64_t id;     /* unit or iteration id */
    int64_t at_ns;   /* SCH_CAUSE_AT: the instant */
} SchCause;

typedef struct SchHop {
    int ch;          /* SCH_CH_* */
    int64_t bytes, start_ns, end_ns;
} SchHop;

typedef struct SchUnit {
    uint64_t id, req, session;
    int tokwise, layer, stage, state, tier;
    int64_t tok_lo, tok_hi, offset, bytes, issue_ns;
    char file[64];
    SchCause after;
    int nhops;
    SchHop hop[SCH_MAX_HOPS];
} SchUnit;

typedef struct SchItem {
    uint64_t req;
    int kind, lw;
    int64_t tokens, ctx;
} SchItem;

typedef struct SchWork {
    uint64_t req;
    int op;          /* SCH_WORK_* */
    int64_t tokens, ctx;
} SchWork;

/* a stage-parallel restoration's recompute of one layer for the history, on that layer's stage */
typedef struct SchLane {
    uint64_t req;
    int stage, layer;
    int64_t tokens, ctx;
} SchLane;

typedef struct SchLayer {
    int64_t start_ns, end_ns, ns;
    int nwork, nwaits;
    SchWork *work;
    uint64_t *waits;
} SchLayer;

typedef struct SchIter {
    uint64_t id;
    int replica;
    int64_t start_ns, end_ns, overhead_ns, pre_ns;
    SchCause after;
    int nafter, nitems, nlanes;
    uint64_t *after_units;
    SchItem *items;
    SchLane *lanes;   /* nlanes of them, in the file's order (item order, then layer order) */
    SchLayer *layers; /* header.layers of them */
} SchIter;

typedef struct SchReq {
    uint64_t id, session;
    int turn, done;
    int replica;     /* the replica the router sent it to (0 when the record has none) */
    int64_t hist, nnew, nout, release_ns, admit_ns;
    char restore[16];
    /* restore "tokenwise": the two pointers' rules (0 when the record has none: an older kvsim) — IO
     * chunks of io_chunk tokens, at most io_depth in flight; compute chunks of at most comp_budget
     * tokens (comp_chunk when > 0 and smaller) */
    int64_t io_chunk, comp_chunk, io_depth, comp_budget;
    int low_prio, has_low_prio; /* its restoration compute after every new input (Cake); has_: the record says */
    /* the done record (done = 1) */
    int64_t restored_ns, first_ns, last_ns, ttft_ns, restore_ns, meet_tokens;
} SchReq;

typedef struct Schedule {
    char model[64], policy[32];
    int layers, stages, tp, replicas, hidden, heads, kv_heads, head_dim, intermediate, norms_per_layer, rope;
    int nic_per_stage;   /* header nic_per_stage: each stage its own NIC to the remote store (0: one per replica) */
    int64_t kv_bytes_per_token_layer, hidden_bytes_per_token_layer, iter_overhead_ns;
    int64_t token_budget; /* header token_budget: the tokens of one iteration (0: an older kvsim's schedule) */
    char io_order[16];    /* header io_order: "fifo", "oldest" or "policy" ("": an older kvsim's schedule) */
    int stage_first[SCH_MAX_STAGES + 1]; /* header stage_layers: stage st holds layers [stage_first[st], stage_first[st + 1]) */
    SchReq *reqs;
    SchUnit *units;
    SchIter *iters;
    int n_reqs, n_units, n_iters, ended;
} Schedule;

/* Read `path`. -1 with "PATH: line N: field F: expected …, got …" (or the JSON error) on bad input. */
int schedule_load(Schedule *s, const char *path, KvErr *e);
void schedule_free(Schedule *s);
/* the pipeline stage holding `layer` (header stage_layers) */
int schedule_stage_of(const Schedule *s, int layer);
/* the request with this id, or NULL */
const SchReq *schedule_req(const Schedule *s, uint64_t id);

#endif
