/* schedule_out.c — the run's schedule as JSON lines (see schedule_out.h; the format is
 * docs/formats.md "Schedule").
 *
 * Responsible for: the records and their fields, unit and iteration ids, the "after" of a unit or
 * an iteration (the cause current when it was issued or kicked: a unit that landed now, an iteration
 * that ended now, else the instant itself, {"at_ns": now}), the file and offset each load reads.
 * File layout of a session's saved state (what kvcal execute writes before replaying):
 *   s<session>.kv, s<session>.hidden   layer-major: layer l's tokens [0, hist) at l × hist × B,
 *                                      token t at + t × B (B: the bytes per token of one layer)
 *   s<session>.kvt<stage>              token-major (token-wise loads: every layer of the stage):
 *                                      token t at t × B_stage
 * Not responsible for: decisions (observer only), saves and spills.
 * Invariants: unit ids index the table (id − 1); a unit's line is written once, after its last hop.
 * Complexity: see schedule_out.h.
 */
#include "sim/engine/schedule_out.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CAUSE_AT = 0, CAUSE_UNIT, CAUSE_ITER };

typedef struct SchedCause {
    int kind;
    uint64_t id;
    int64_t t_ns;
} SchedCause;

typedef struct SchedUnit {
    uint64_t req, session;
    int layer, stage, state; /* state: 0 kv, 1 hidden, 2 kv token-wise */
    int64_t lo, hi, hist, issue_ns;
    SchedCause after;
    int64_t hop_start[3], hop_end[3];
} SchedUnit;

typedef struct SchedIter {
    uint64_t id;
    SchedCause after;
    int64_t start_ns;
    int64_t *l_start, *l_end;
} SchedIter;

struct SchedOut {
    FILE *f;                 /* af.f: the temp file beside the path, renamed into place when the run succeeds */
    KvAtomicFile af;
    SchedUnit *units;
    size_t n_units, cap_units;
    uint64_t next_iter;
    SchedCause cur;          /* what happened last (a unit landed, an iteration ended) */
    SchedCause *kick;        /* per replica: why its next iteration forms */
    SchedIter *it;           /* per replica: the iteration in flight */
};

static char g_path[4096];

int sim_schedule_set_path(const char *path)
{
    snprintf(g_path, sizeof g_path, "%s", path ? path : "");
    return 0;
}

const char *sched_out_path(void) { return g_path; }

static const char *mode_char = "-KHR"; /* LM_NONE, LM_LOAD_KV, LM_LOAD_HIDDEN, LM_RECOMPUTE */

/* the order the restoration loads are served in (policy.h io_order): "fifo" without io_pick, the
 * policy's name for its order, or "policy" (an order a replay cannot follow) */
static const char *io_order_name(const Sim *sm)
{
    if (!sm->pol->io_pick) return "fifo";
    const char *o = sm->pol->io_order ? sm->pol->io_order(sm->pstate) : NULL;
    return o ? o : "policy";
}

/* the hooks (below), called through Sim.observer while the schedule is written */
static void sched_out_load(Sim *sm, Unit *u, int64_t lo, int64_t hi, int hidden);
static void sched_out_admit(Sim *sm, const Request *r);
static void sched_out_hop(Sim *sm, const Channel *c, const Unit *u);
static void sched_out_kick(Sim *sm, const Replica *rp);
static void sched_out_iter_formed(Sim *sm, const Replica *rp);
static void sched_out_layer(Sim *sm, const Replica *rp, int l, int64_t start_ns, int64_t end_ns);
static void sched_out_iter_done(Sim *sm, const Replica *rp);
static void sched_out_request_done(Sim *sm, const Request *r);
static const SimObserver sched_obs = {
    .load = sched_out_load,
    .admit = sched_out_admit,
    .hop = sched_out_hop,
    .kick = sched_out_kick,
    .iter_formed = sched_out_iter_formed,
    .layer = sched_out_layer,
    .iter_done = sched_out_iter_done,
    .request_done = sched_out_request_done,
};

int sched_out_open(Sim *sm)
{
    sm->sched = NULL;
    sm->observer = NULL;
    if (!g_path[0]) return 0;
    SchedOut *so = calloc(1, sizeof *so);
    if (!so) return sim_fail(sm, "out of memory");
    so->kick = calloc((size_t)sm->R, sizeof *so->kick);
    so->it = calloc((size_t)sm->R, sizeof *so->it);
    if (!so->kick || !so->it) {
        free(so->kick);
        free(so->it);
        free(so);
        return sim_fail(sm, "out of memory");
    }
    for (int i = 0; i < sm->R; i++) {
        so->it[i].l_start = calloc((size_t)sm->L, sizeof(int64_t));
        so->it[i].l_end = calloc((size_t)sm->L, sizeof(int64_t));
    }
    sm->sched = so;
    sm->observer = &sched_obs;
    for (int i = 0; i < sm->R; i++)
        if (!so->it[i].l_start || !so->it[i].l_end) return sim_fail(sm, "out of memory");
    KvErr ae;
    if (kv_atomic_open(&so->af, g_path, &ae) != 0) return sim_fail(sm, "--emit-schedule: %s", ae.msg);
    so->f = so->af.f;
    const ModelSpec *m = sm->w->model;
    fprintf(so->f,
            "{\"rec\":\"header\",\"format\":\"kvsim-schedule\",\"version\":1,\"model\":\"%s\",\"policy\":\"%s\","
            "\"layers\":%d,\"stages\":%d,\"tp\":%d,\"replicas\":%d,\"hidden\":%d,\"heads\":%d,\"kv_heads\":%d,"
            "\"head_dim\":%d,\"intermediate\":%d,\"norms_per_layer\":%d,\"rope\":%d,\"stage_layers\":[",
            m->name, sm->pol->name, sm->L, sm->S, sm->T, sm->R, m->hidden, m->heads, m->kv_heads, m->head_dim,
            m->intermediate, m->norms_per_layer, m->pos == POS_ROPE);
    for (int st = 0; st < sm->S; st++) fprintf(so->f, "%s%d", st ? "," : "", sm->stage_layers[st]);
    fprintf(so->f,
            "],\"kv_bytes_per_token_layer\":%.0f,\"hidden_bytes_per_token_layer\":%.0f,\"iter_overhead_ns\":%" PRId64
            ",\"token_budget\":%" PRId64 ",\"nic_per_stage\":%d,\"io_order\":\"%s\"}\n",
            sm->kv_tok_layer, sm->hid_tok_layer, sm->overhead_ns, sm->cfg->token_budget, sm->cfg->nic_per_stage ? 1 : 0,
            io_order_name(sm));
    return 0;
}

int sched_out_close(Sim *sm, int ok)
{
    SchedOut *so = sm->sched;
    if (!so) return 0;
    int rc = 0;
    if (so->f && ok) {
        fprintf(so->f, "{\"rec\":\"end\",\"ok\":%d,\"units\":%zu,\"iterations\":%" PRIu64 "}\n", ok, so->n_units,
                so->next_iter);
        KvErr ae;
        if (kv_atomic_commit(&so->af, &ae) != 0) rc = kv_err(sm->e, "--emit-schedule: %s", ae.msg);
    } else if (so->f) {
        kv_atomic_abort(&so->af); /* a failed run leaves no schedule (nor a part of one) */
    }
    for (int i = 0; i < sm->R; i++) {
        free(so->it[i].l_start);
        free(so->it[i].l_end);
    }
    free(so->it);
    free(so->kick);
    free(so->units);
    free(so);
    sm->sched = NULL;
    sm->observer = NULL;
    return rc;
}

/* the cause of something happening now */
static SchedCause cause_now(const SchedOut *so, int64_t now)
{
    if (so->cur.kind != CAUSE_AT && so->cur.t_ns == now) return so->cur;
    return (SchedCause){CAUSE_AT, 0, now};
}

static void put_cause(FILE *f, const SchedCause *c)
{
    if (c->kind == CAUSE_UNIT) fprintf(f, "{\"unit\":%" PRIu64 "}", c->id);
    else if (c->kind == CAUSE_ITER) fprintf(f, "{\"iter\":%" PRIu64 "}", c->id);
    else fprintf(f, "{\"at_ns\":%" PRId64 "}", c->t_ns);
}

static void sched_out_load(Sim *sm, Unit *u, int64_t lo, int64_t hi, int hidden)
{
    SchedOut *so = sm->sched;
    if (so->n_units == so->cap_units) {
        size_t nc = so->cap_units ? so->cap_units * 2 : 256;
        SchedUnit *nu = realloc(so->units, nc * sizeof *nu);
        if (!nu) {
            sim_fail(sm, "out of memory");
            return;
        }
        so->units = nu;
        so->cap_units = nc;
    }
    int64_t now = sim_now(sm);
    const Request *r = u->r;
    SchedUnit *x = &so->units[so->n_units++];
    memset(x, 0, sizeof *x);
    x->req = r->id;
    x->session = r->s->id;
    x->layer = u->layer;
    x->stage = u->stage;
    x->state = u->kind == U_LOAD_TOK ? 2 : hidden ? 1 : 0;
    x->lo = lo;
    x->hi = hi;
    x->hist = r->hist;
    x->issue_ns = now;
    x->after = cause_now(so, now);
    u->sched_id = so->n_units;
}

static void sched_out_admit(Sim *sm, const Request *r)
{
    SchedOut *so = sm->sched;
    const char *how = r->tw_whole ? "whole" : r->tw ? "tokenwise" : r->lw_tokens > 0 ? "layerwise" : r->recompute_total > 0 ? "recompute" : r->from;
    fprintf(so->f,
            "{\"rec\":\"request\",\"req\":%" PRIu64 ",\"session\":%" PRIu64 ",\"turn\":%d,\"replica\":%d,\"hist\":%" PRId64
            ",\"new\":%" PRId64 ",\"out\":%" PRId64 ",\"release_ns\":%" PRId64 ",\"admit_ns\":%" PRId64
            ",\"restore\":\"%s\",\"recompute_tokens\":%" PRId64 ",\"layerwise_tokens\":%" PRId64,
            r->id, r->s->id, r->turn, r->replica, r->hist, r->nnew, r->nout, r->arrival_ns, r->t_admit, how ? how : "none",
            r->recompute_total, r->lw_tokens);
    if (r->lw_tokens > 0 && r->mode) {
        fputs(",\"modes\":\"", so->f);
        for (int l = 0; l < sm->L; l++) fputc(r->mode[l] <= LM_RECOMPUTE ? mode_char[r->mode[l]] : '?', so->f);
        fprintf(so->f, "\",\"early_layers\":%d,\"stage_parallel\":%d,\"kv_scale\":%.6g", r->early_layers, r->stage_par,
                r->kv_scale);
    }
    if (r->tw) { /* the two pointers' rules (iteration.c, restore.c): what kvcal execute --race runs them by */
        int64_t b = sm->cfg->token_budget, rb = sm->cfg->restore_share >= 1 ? b : (int64_t)(sm->cfg->restore_share * (double)b);
        fprintf(so->f, ",\"io_chunk\":%" PRId64 ",\"comp_chunk\":%" PRId64 ",\"io_depth\":%d,\"comp_budget\":%" PRId64 ",\"low_prio\":%d",
                r->tw_io_chunk, r->tw_comp_chunk, TW_DEPTH, rb < b ? rb : b, r->low_prio ? 1 : 0);
    }
    fputs("}\n", so->f);
}

static const char *state_name(int state) { return state == 2 ? "kv_tok" : state == 1 ? "hidden" : "kv"; }

static void unit_line(Sim *sm, const Unit *u, SchedUnit *x)
{
    SchedOut *so = sm->sched;
    FILE *f = so->f;
    Tier from = TIER_DRAM; /* the tier whose link the load crosses first (H2D alone: DRAM) */
    for (int t = TIER_DRAM; t < SIM_TIERS; t++)
        if (tier_table[t].in_hop == u->chain[0]->kind) from = (Tier)t;
    const char *tier = tier_name(from);
    int64_t tok = x->hi - x->lo;
    int64_t bytes = llround(u->bytes[0]);
    int64_t bpt = tok > 0 ? bytes / tok : 0;
    int64_t off;
    char file[64];
    if (x->state == 2) {
        snprintf(file, sizeof file, "s%" PRIu64 ".kvt%d", x->session, x->stage);
        off = x->lo * bpt;
    } else {
        snprintf(file, sizeof file, "s%" PRIu64 ".%s", x->session, x->state ? "hidden" : "kv");
        off = (int64_t)x->layer * x->hist * bpt + x->lo * bpt;
    }
    fprintf(f,
            "{\"rec\":\"unit\",\"unit\":%" PRIu64 ",\"req\":%" PRIu64 ",\"session\":%" PRIu64 ",\"kind\":\"%s\","
            "\"layer\":%d,\"stage\":%d,\"state\":\"%s\",\"tok_lo\":%" PRId64 ",\"tok_hi\":%" PRId64 ",\"tier\":\"%s\","
            "\"file\":\"%s\",\"offset\":%" PRId64 ",\"bytes\":%" PRId64 ",\"issue_ns\":%" PRId64 ",\"after\":",
            u->sched_id, x->req, x->session, u->kind == U_LOAD_TOK ? "load_tok" : "load", x->layer, x->stage,
            state_name(x->state), x->lo, x->hi, tier, file, off, bytes, x->issue_ns);
    put_cause(f, &x->after);
    fputs(",\"hops\":[", f);
    for (int h = 0; h < u->nhops; h++)
        fprintf(f, "%s{\"ch\":\"%s\",\"bytes\":%" PRId64 ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64 "}", h ? "," : "",
                u->chain[h]->name, (int64_t)llround(u->bytes[h]), x->hop_start[h], x->hop_end[h]);
    fputs("]}\n", f);
}

static void sched_out_hop(Sim *sm, const Channel *c, const Unit *u)
{
    SchedOut *so = sm->sched;
    if (!u->sched_id || u->sched_id > so->n_units) return; /* saves and spills are not recorded */
    SchedUnit *x = &so->units[u->sched_id - 1];
    int64_t now = sim_now(sm);
    x->hop_start[u->hop] = c->busy_since;
    x->hop_end[u->hop] = now;
    if (u->hop + 1 < u->nhops) return;
    unit_line(sm, u, x);
    so->cur = (SchedCause){CAUSE_UNIT, u->sched_id, now};
}

static void sched_out_kick(Sim *sm, const Replica *rp)
{
    SchedOut *so = sm->sched;
    so->kick[rp->id] = cause_now(so, sim_now(sm));
}

static void sched_out_iter_formed(Sim *sm, const Replica *rp)
{
    SchedOut *so = sm->sched;
    SchedIter *it = &so->it[rp->id];
    it->id = ++so->next_iter;
    it->start_ns = sim_now(sm);
    /* the kick that made it form, if it happened now; else (formed at an iteration's end) what happens now */
    it->after = so->kick[rp->id].t_ns == it->start_ns ? so->kick[rp->id] : cause_now(so, it->start_ns);
    for (int l = 0; l < sm->L; l++) it->l_start[l] = it->l_end[l] = -1;
}

static void sched_out_layer(Sim *sm, const Replica *rp, int l, int64_t start_ns, int64_t end_ns)
{
    SchedIter *it = &sm->sched->it[rp->id];
    it->l_start[l] = start_ns;
    it->l_end[l] = end_ns;
}

/* the ids of r's load units of layer l (any layer when l < 0 and below `below`), comma-separated */
static int put_units(FILE *f, const SchedOut *so, uint64_t req, int l, int below, int first)
{
    for (size_t k = 0; k < so->n_units; k++) {
        const SchedUnit *x = &so->units[k];
        if (x->req != req || x->state == 2) continue;
        if (l >= 0 ? x->layer != l : x->layer >= below) continue;
        fprintf(f, "%s%zu", first ? "" : ",", k + 1);
        first = 0;
    }
    return first;
}

static const char *item_kind(int type) { return type == IT_DECODE ? "decode" : type == IT_RECOMP ? "recompute" : "prefill"; }

static void sched_out_iter_done(Sim *sm, const Replica *rp)
{
    SchedOut *so = sm->sched;
    SchedIter *it = &so->it[rp->id];
    FILE *f = so->f;
    int64_t now = sim_now(sm);
    fprintf(f,
            "{\"rec\":\"iter\",\"iter\":%" PRIu64 ",\"replica\":%d,\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
            ",\"overhead_ns\":%" PRId64 ",\"pre_ns\":%" PRId64 ",\"after\":",
            it->id, rp->id, it->start_ns, now, sm->overhead_ns, (int64_t)0 /* stage-parallel lanes run inside the walk (walk.c stage_lanes) */);
    put_cause(f, &it->after);
    /* a layer-wise item joins only once its early layers arrived: those units gate the iteration's
     * start. A stage-parallel one joins at once (iteration.c): its boundary activations gate its
     * stages' lanes (walk.c stage_lanes) and its boundary layers (their waits), not the start */
    fputs(",\"after_units\":[", f);
    int first = 1;
    for (int i = 0; i < rp->n_items; i++) {
        const IterItem *x = &rp->items[i];
        if (x->lw && !x->r->stage_par) first = put_units(f, so, x->r->id, -1, x->r->early_layers, first);
    }
    fputs("],\"items\":[", f);
    for (int i = 0; i < rp->n_items; i++) {
        const IterItem *x = &rp->items[i];
        fprintf(f, "%s{\"req\":%" PRIu64 ",\"kind\":\"%s\",\"tokens\":%" PRId64 ",\"ctx\":%" PRId64 ",\"lw\":%d}", i ? "," : "",
                x->r->id, item_kind(x->type), x->tokens, x->ctx, x->lw);
    }
    fputs("],\"lanes\":[", f);
    first = 1;
    for (int i = 0; i < rp->n_items; i++) {
        const IterItem *x = &rp->items[i];
        if (!x->lw || !x->r->stage_par) continue;
        for (int l = 0; l < sm->L; l++) {
            if (x->r->mode[l] != LM_RECOMPUTE) continue;
            fprintf(f, "%s{\"stage\":%d,\"layer\":%d,\"req\":%" PRIu64 ",\"tokens\":%" PRId64 ",\"ctx\":%" PRId64 "}",
                    first ? "" : ",", sm->stage_of[l], l, x->r->id, x->r->lw_tokens, x->r->recompute_total);
            first = 0;
        }
    }
    fputs("],\"layers\":[", f);
    CostModel *cm = &sm->w->cost;
    for (int l = 0; l < sm->L; l++) {
        fprintf(f, "%s{\"layer\":%d,\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64 ",\"ns\":%" PRId64 ",\"work\":[", l ? "," : "",
                l, it->l_start[l], it->l_end[l], (int64_t)llround(rp->layer_ns[l]));
        int fw = 1;
        for (int i = 0; i < rp->n_items; i++) {
            const IterItem *x = &rp->items[i];
            if (!x->lw) continue;
            const Request *r = x->r;
            const char *op = NULL;
            if (r->mode[l] == LM_RECOMPUTE && !r->stage_par) op = "recompute";
            else if (r->mode[l] == LM_LOAD_HIDDEN) op = "projection";
            else if (r->mode[l] == LM_LOAD_KV && r->kv_scale < 1 && cost_has(cm, OP_DEQUANT)) op = "dequantize";
            if (!op) continue;
            fprintf(f, "%s{\"req\":%" PRIu64 ",\"op\":\"%s\",\"tokens\":%" PRId64 ",\"ctx\":%" PRId64 "}", fw ? "" : ",", r->id,
                    op, r->lw_tokens, op[0] == 'r' ? r->recompute_total : 0);
            fw = 0;
        }
        fputs("],\"waits\":[", f);
        int fu = 1;
        for (int i = 0; i < rp->n_items; i++) {
            const IterItem *x = &rp->items[i];
            if (x->lw) fu = put_units(f, so, x->r->id, l, 0, fu);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
    so->cur = (SchedCause){CAUSE_ITER, it->id, now};
}

static void sched_out_request_done(Sim *sm, const Request *r)
{
    FILE *f = sm->sched->f;
    int64_t now = sim_now(sm);
    int64_t t_rest = r->t_restored < r->t_first ? r->t_restored : r->t_first;
    int64_t restore = t_rest > r->t_admit ? t_rest - r->t_admit : 0;
    fprintf(f,
            "{\"rec\":\"done\",\"req\":%" PRIu64 ",\"release_ns\":%" PRId64 ",\"admit_ns\":%" PRId64 ",\"restored_ns\":%" PRId64
            ",\"first_ns\":%" PRId64 ",\"last_ns\":%" PRId64 ",\"ttft_ns\":%" PRId64 ",\"restore_ns\":%" PRId64
            ",\"meet_tokens\":%" PRId64 "}\n",
            r->id, r->arrival_ns, r->t_admit, r->t_admit + restore, r->t_first, now, r->t_first - r->arrival_ns, restore,
            r->tw_comp);
}
