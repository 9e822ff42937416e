/* engine.c — the discrete-event core: replicas, IO channels, the iteration scheduler, sessions and
 * their saved state, and the metrics of one run. The modelling choices are listed in sim.h.
 *
 * State of a request: ARRIVED (released, waiting admission) → RESTORING (admitted; recompute chunks
 * and/or layer-wise loads in flight) → PREFILL (new input chunks) → DECODE → DONE. RESTORING and
 * PREFILL overlap for layer-wise restoration: the new input's first chunk carries the layer-wise
 * work, and each of its layers waits for that layer's state.
 *
 * Invariants checked always (a violation ends the run with an error, never silently):
 *  - the clock never goes back (evq); no request completes twice; the KV pool never goes negative
 *    nor above capacity; every channel serves one unit at a time; every unit is served once.
 * Complexity per iteration: O(batch + L) plus O(L) cost lookups only when layer-wise work is in the
 * batch; per transfer unit O(1) (+ the policy's io_pick).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/engine/evq.h"
#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "sim/cost/spec.h"
#include "traces/trace.h"

enum { EV_UNIT_DONE = 1, EV_ITER_RESUME, EV_ITER_DONE, EV_ARRIVAL, EV_RELEASE, EV_FORM };
/* same-instant order: completions, then iteration progress, then arrivals, then scheduling */
static const uint32_t g_rank[] = {0, 0, 1, 2, 3, 3, 4};

enum { RS_WAIT = 0, RS_QUEUED, RS_ACTIVE, RS_DONE };
enum { CH_H2D, CH_D2H, CH_SSD, CH_NIC_IN, CH_NIC_OUT };
enum { U_LOAD, U_LOAD_TOK, U_SAVE, U_SPILL };
enum { IT_DECODE, IT_RECOMP, IT_NEW };

typedef struct Session Session;
typedef struct Request Request;
typedef struct Replica Replica;
typedef struct Sim Sim;

typedef struct Channel {
    const char *name;
    int kind, stage;
    double rate, rate_bidir, rate_write; /* bytes per ns */
    int n_drives;                        /* SSD array: drives striped in stripe_bytes pieces */
    double stripe_bytes;
    int64_t latency_ns;
    struct Channel *peer;
    struct Unit *hi_head, *hi_tail, *lo_head, *lo_tail;
    int nhi;
    struct Unit *cur;
    double cur_left, cur_rate;
    int64_t cur_since;
    uint64_t ev_seq;
    double busy_ns, bytes;
    int64_t busy_since;
} Channel;

typedef struct Unit {
    struct Unit *next;
    Request *r;
    Session *s;
    int kind, layer, stage, hop, nhops;
    int64_t upto;              /* saves: context position covered once this unit lands */
    double stripe_bytes;       /* SSD layout of this state (0: the array's stripe) */
    uint8_t chain[3];
    double bytes[3];
    int64_t enq_ns;
} Unit;

struct Session {
    uint64_t id;
    int replica;
    int busy;                  /* a turn admitted or waiting */
    int refs;                  /* requests that point to this session (pulled, not yet freed) */
    Request *pend_head, *pend_tail;
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
};

struct Request {
    uint64_t id;
    Session *s;
    int turn, state, replica;
    int64_t arrival_ns, think_ns, trace_arrival_ns;
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
    Request *next;              /* session pending list */
};

typedef struct IterItem {
    Request *r;
    int type;
    int lw;                     /* carries layer-wise restoration */
    int64_t tokens, ctx;
} IterItem;

struct Replica {
    int id;
    Channel h2d[SIM_MAX_STAGES], d2h[SIM_MAX_STAGES];
    Channel ssd, nic_in, nic_out;
    int has_ssd, has_nic;
    int64_t pool_cap, pool_used;          /* tokens */
    Request **queue;                      /* admission FIFO (ring) */
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
    /* host tiers */
    double dram_used, ssd_used, dram_spilling;
    Session *dram_head, *dram_tail, *ssd_head, *ssd_tail;
    uint64_t active_count;                /* for routing */
};

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
    /* remote tier */
    double remote_used;
    Session *rem_head, *rem_tail;
    uint64_t remote_cap;
    /* derived sizes */
    double kv_tok_layer, kv_tok_layer_gpu, hid_tok_layer, save_bpt;
    SaveMode save_mode;
    double dram_cap, ssd_cap;
    int use_dram, use_ssd, use_remote;
    int64_t overhead_ns, max_ctx;
    double rate_h2d, rate_h2d_bi, rate_d2h, rate_d2h_bi, rate_ssd_r, rate_ssd_w, rate_nic;
    int64_t lat_link, lat_ssd, lat_ssd_w, lat_nic;
    int n_ssd;
    uint64_t next_req_id, done_requests, sessions_seen;
    SimResult *res;
    SimRowFn row_fn;
    void *row_ctx;
    SimProgressFn prog;
    void *prog_ctx;
    KvErr *e;
    int failed;
    Unit *free_units;
};

/* ------------------------------------------------------------------ helpers */

static int fail(Sim *sm, const char *fmt, const char *a)
{
    if (!sm->failed) kv_err(sm->e, fmt, a);
    sm->failed = 1;
    return -1;
}

static uint64_t push(Sim *sm, int64_t t, int kind, void *obj, int64_t arg)
{
    uint64_t seq = evq_push(&sm->q, t, g_rank[kind], (uint32_t)kind, obj, arg, sm->e);
    if (!seq) sm->failed = 1;
    return seq;
}

static int64_t blocks_tokens(const Sim *sm, int64_t tokens)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16;
    return (tokens + b - 1) / b * b;
}

static int hist_class(const Sim *sm, int64_t hist)
{
    if (hist < sm->cfg->class_edges[0]) return 0;
    if (hist < sm->cfg->class_edges[1]) return 1;
    return 2;
}

/* ------------------------------------------------------------------ sessions map */

static size_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static Session *sess_find(Sim *sm, uint64_t id)
{
    size_t m = sm->tab_cap - 1;
    for (size_t i = hash_u64(id) & m;; i = (i + 1) & m) {
        Session *s = sm->tab[i];
        if (!s) return NULL;
        if (s->id == id) return s;
    }
}

static int sess_grow(Sim *sm)
{
    size_t nc = sm->tab_cap * 2;
    Session **nt = calloc(nc, sizeof *nt);
    if (!nt) return -1;
    for (size_t i = 0; i < sm->tab_cap; i++) {
        Session *s = sm->tab[i];
        if (!s) continue;
        size_t j = hash_u64(s->id) & (nc - 1);
        while (nt[j]) j = (j + 1) & (nc - 1);
        nt[j] = s;
    }
    free(sm->tab);
    sm->tab = nt;
    sm->tab_cap = nc;
    return 0;
}

static Session *sess_get(Sim *sm, uint64_t id)
{
    Session *s = sess_find(sm, id);
    if (s) return s;
    if ((sm->tab_n + 1) * 2 > sm->tab_cap && sess_grow(sm) != 0) return NULL;
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    s->replica = -1;
    size_t m = sm->tab_cap - 1, i = hash_u64(id) & m;
    while (sm->tab[i]) i = (i + 1) & m;
    sm->tab[i] = s;
    sm->tab_n++;
    sm->sessions_seen++;
    return s;
}

/* remove with backward-shift deletion (keeps probe chains intact) */
static void sess_remove(Sim *sm, Session *s)
{
    size_t m = sm->tab_cap - 1, i = hash_u64(s->id) & m;
    while (sm->tab[i] != s) i = (i + 1) & m;
    sm->tab[i] = NULL;
    for (size_t j = (i + 1) & m; sm->tab[j]; j = (j + 1) & m) {
        size_t home = hash_u64(sm->tab[j]->id) & m;
        /* move tab[j] to i if its home is not in (i, j] cyclically */
        int between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            sm->tab[i] = sm->tab[j];
            sm->tab[j] = NULL;
            i = j;
        }
    }
    sm->tab_n--;
    free(s);
}

static void sess_maybe_free(Sim *sm, Session *s)
{
    if (!s->busy && !s->pend_head && !s->refs && s->resident_tokens == 0 && s->tier == TIER_NONE && !s->saving && !s->spilling &&
        !s->loading)
        sess_remove(sm, s);
}

/* ------------------------------------------------------------------ LRU lists */

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

static void hbm_lru_remove(Replica *rp, Session *s)
{
    if (!s->in_hbm_lru) return;
    LRU_UNLINK(rp->lru_head, rp->lru_tail, s, hbm_prev, hbm_next);
    s->in_hbm_lru = 0;
}

static void hbm_lru_add(Replica *rp, Session *s)
{
    hbm_lru_remove(rp, s);
    LRU_APPEND(rp->lru_head, rp->lru_tail, s, hbm_prev, hbm_next);
    s->in_hbm_lru = 1;
}

static void pool_release(Sim *sm, Replica *rp, int64_t tokens)
{
    rp->pool_used -= tokens;
    if (rp->pool_used < 0) fail(sm, "internal: KV pool of replica went negative%s", "");
}

/* evict one idle resident session's KV from HBM */
static int hbm_evict_one(Sim *sm, Replica *rp)
{
    Session *s = rp->lru_head;
    if (!s) return 0;
    hbm_lru_remove(rp, s);
    pool_release(sm, rp, blocks_tokens(sm, s->resident_tokens));
    s->resident_tokens = 0;
    sess_maybe_free(sm, s);
    return 1;
}

/* tier lists */
static void tier_unlink(Sim *sm, Session *s)
{
    Replica *rp = &sm->rep[s->replica];
    switch (s->tier) {
    case TIER_DRAM:
        LRU_UNLINK(rp->dram_head, rp->dram_tail, s, t_prev, t_next);
        rp->dram_used -= s->saved_bytes;
        break;
    case TIER_SSD:
        LRU_UNLINK(rp->ssd_head, rp->ssd_tail, s, t_prev, t_next);
        rp->ssd_used -= s->saved_bytes;
        break;
    case TIER_REMOTE:
        LRU_UNLINK(sm->rem_head, sm->rem_tail, s, t_prev, t_next);
        sm->remote_used -= s->saved_bytes;
        break;
    case TIER_NONE:
        break;
    }
}

static void tier_link(Sim *sm, Session *s, Tier t)
{
    Replica *rp = &sm->rep[s->replica];
    s->tier = t;
    s->last_use_ns = evq_now(&sm->q);
    switch (t) {
    case TIER_DRAM:
        LRU_APPEND(rp->dram_head, rp->dram_tail, s, t_prev, t_next);
        rp->dram_used += s->saved_bytes;
        if (rp->dram_used > (double)sm->res->dram_peak_bytes) sm->res->dram_peak_bytes = (uint64_t)rp->dram_used;
        break;
    case TIER_SSD:
        LRU_APPEND(rp->ssd_head, rp->ssd_tail, s, t_prev, t_next);
        rp->ssd_used += s->saved_bytes;
        if (rp->ssd_used > (double)sm->res->ssd_peak_bytes) sm->res->ssd_peak_bytes = (uint64_t)rp->ssd_used;
        break;
    case TIER_REMOTE:
        LRU_APPEND(sm->rem_head, sm->rem_tail, s, t_prev, t_next);
        sm->remote_used += s->saved_bytes;
        if (sm->remote_used > (double)sm->res->remote_peak_bytes) sm->res->remote_peak_bytes = (uint64_t)sm->remote_used;
        break;
    case TIER_NONE:
        break;
    }
}

static void tier_touch(Sim *sm, Session *s)
{
    Tier t = s->tier;
    if (t == TIER_NONE) return;
    tier_unlink(sm, s);
    tier_link(sm, s, t);
}

static void tier_drop(Sim *sm, Session *s)
{
    tier_unlink(sm, s);
    s->tier = TIER_NONE;
    s->saved_tokens = 0;
    s->saved_bytes = 0;
    s->issued_pos = 0; /* never called while a save is in flight */
    sess_maybe_free(sm, s);
}

/* ------------------------------------------------------------------ channels */

static void ch_init(Channel *c, const char *name, int kind, int stage, double rate_bytes_per_s, double bidir_bytes_per_s,
                    int64_t latency_ns)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->kind = kind;
    c->stage = stage;
    c->rate = rate_bytes_per_s / 1e9;
    c->rate_bidir = (bidir_bytes_per_s > 0 ? bidir_bytes_per_s : rate_bytes_per_s) / 1e9;
    c->rate_write = c->rate;
    c->latency_ns = latency_ns;
}

static Channel *unit_channel(Sim *sm, Unit *u)
{
    Replica *rp = &sm->rep[u->r ? u->r->replica : u->s->replica];
    switch (u->chain[u->hop]) {
    case CH_H2D: return &rp->h2d[u->stage];
    case CH_D2H: return &rp->d2h[u->stage];
    case CH_SSD: return &rp->ssd;
    case CH_NIC_IN: return &rp->nic_in;
    default: return &rp->nic_out;
    }
}

static double ch_unit_rate(const Channel *c, const Unit *u)
{
    if (c->kind == CH_SSD) {
        /* a transfer smaller than n stripes keeps only some drives busy */
        double r = u->kind == U_LOAD || u->kind == U_LOAD_TOK ? c->rate : c->rate_write;
        double pieces = ceil(u->bytes[u->hop] / (u->stripe_bytes > 0 ? u->stripe_bytes : c->stripe_bytes));
        return pieces < c->n_drives ? r * pieces / c->n_drives : r;
    }
    if (c->peer && c->peer->cur) return c->rate_bidir;
    return c->rate;
}

static void ch_schedule(Sim *sm, Channel *c)
{
    double t = c->cur_left / c->cur_rate;
    int64_t dt = (int64_t)ceil(t - 1e-9);
    if (dt < 0) dt = 0;
    c->ev_seq = push(sm, evq_now(&sm->q) + dt, EV_UNIT_DONE, c, 0);
}

/* the rate of the unit in flight changes (the other direction started or stopped) */
static void ch_rerate(Sim *sm, Channel *c)
{
    if (!c->cur) return;
    int64_t now = evq_now(&sm->q);
    c->cur_left -= (double)(now - c->cur_since) * c->cur_rate;
    if (c->cur_left < 0) c->cur_left = 0;
    c->cur_since = now;
    double nr = ch_unit_rate(c, c->cur);
    if (nr == c->cur_rate) return;
    c->cur_rate = nr;
    ch_schedule(sm, c);
}

static int64_t remaining_restore_tokens(const Request *r)
{
    if (r->tw) return r->tw_io_issued - r->tw_comp; /* neither loaded nor computed yet */
    return r->recompute_left + (r->lw_pending ? r->lw_tokens : 0);
}

static void ch_start(Sim *sm, Channel *c)
{
    if (c->cur) return;
    Unit *u = NULL;
    if (c->hi_head) {
        Unit *prev = NULL;
        u = c->hi_head;
        /* a unit that an iteration in flight waits for goes first (the GPU is stalled on it);
         * otherwise the policy chooses (default FIFO) */
        Unit *bp = NULL, *bu = c->hi_head;
        while (bu && !(bu->kind == U_LOAD && bu->r->in_iter)) {
            bp = bu;
            bu = bu->next;
        }
        if (bu) {
            u = bu;
            prev = bp;
        } else if (sm->pol->io_pick && c->nhi > 1) {
            IoChoice ch[64] = {{0}};
            Unit *us[64];
            int n = 0;
            for (Unit *x = c->hi_head; x && n < 64; x = x->next) {
                us[n] = x;
                ch[n] = (IoChoice){x->r ? x->r->id : 0, x->r ? remaining_restore_tokens(x->r) : 0, x->layer,
                                   (uint64_t)x->bytes[x->hop], x->enq_ns};
                n++;
            }
            int k = sm->pol->io_pick(sm->pstate, ch, n);
            if (k < 0 || k >= n) k = 0;
            u = us[k];
            prev = k ? us[k - 1] : NULL;
        }
        if (prev) prev->next = u->next;
        else c->hi_head = u->next;
        if (c->hi_tail == u) c->hi_tail = prev;
        c->nhi--;
    } else if (c->lo_head) {
        u = c->lo_head;
        c->lo_head = u->next;
        if (!c->lo_head) c->lo_tail = NULL;
    } else {
        return;
    }
    u->next = NULL;
    c->cur = u;
    c->cur_since = evq_now(&sm->q);
    c->busy_since = c->cur_since;
    c->cur_rate = ch_unit_rate(c, u);
    c->cur_left = u->bytes[u->hop] + (double)c->latency_ns * c->cur_rate;
    ch_schedule(sm, c);
    if (c->peer) ch_rerate(sm, c->peer);
}

static void ch_enqueue(Sim *sm, Unit *u)
{
    Channel *c = unit_channel(sm, u);
    u->enq_ns = evq_now(&sm->q);
    u->next = NULL;
    if (u->kind == U_LOAD || u->kind == U_LOAD_TOK) {
        if (c->hi_tail) c->hi_tail->next = u;
        else c->hi_head = u;
        c->hi_tail = u;
        c->nhi++;
    } else {
        if (c->lo_tail) c->lo_tail->next = u;
        else c->lo_head = u;
        c->lo_tail = u;
    }
    ch_start(sm, c);
}

static Unit *unit_new(Sim *sm)
{
    Unit *u = sm->free_units;
    if (u) sm->free_units = u->next;
    else u = malloc(sizeof *u);
    if (!u) {
        fail(sm, "out of memory%s", "");
        return NULL;
    }
    memset(u, 0, sizeof *u);
    return u;
}

static void account_bytes(Sim *sm, int kind, double b)
{
    SimResult *r = sm->res;
    switch (kind) {
    case CH_H2D: r->bytes_h2d += b; break;
    case CH_D2H: r->bytes_d2h += b; break;
    case CH_NIC_IN: r->bytes_net_in += b; break;
    case CH_NIC_OUT: r->bytes_net_out += b; break;
    default: break;
    }
}

static void unit_finished(Sim *sm, Unit *u);

static void on_unit_done(Sim *sm, Channel *c)
{
    Unit *u = c->cur;
    int64_t now = evq_now(&sm->q);
    c->cur = NULL;
    c->busy_ns += (double)(now - c->busy_since);
    c->bytes += u->bytes[u->hop];
    if (c->kind == CH_SSD) {
        if (u->kind == U_LOAD || u->kind == U_LOAD_TOK) sm->res->bytes_ssd_read += u->bytes[u->hop];
        else sm->res->bytes_ssd_write += u->bytes[u->hop];
    } else {
        account_bytes(sm, c->kind, u->bytes[u->hop]);
    }
    if (c->peer) ch_rerate(sm, c->peer);
    u->hop++;
    if (u->hop < u->nhops) ch_enqueue(sm, u);
    else unit_finished(sm, u);
    ch_start(sm, c);
}

/* ------------------------------------------------------------------ saved state */

static void enforce_capacity(Sim *sm, Replica *rp);

static void spill_done(Sim *sm, Session *s, Tier to)
{
    s->spilling = 0;
    Replica *rp = &sm->rep[s->replica];
    rp->dram_spilling -= s->saved_bytes;
    if (s->tier != TIER_DRAM) { /* dropped meanwhile */
        sess_maybe_free(sm, s);
        return;
    }
    tier_unlink(sm, s);
    tier_link(sm, s, to);
    enforce_capacity(sm, rp);
}

static void save_done(Sim *sm, Session *s, int64_t upto, double bytes)
{
    s->save_acc += bytes;
    if (upto > s->saved_tokens) s->saved_tokens = upto;
    if (--s->saving > 0) return;
    bytes = s->save_acc;
    s->save_acc = 0;
    Tier t = s->tier;
    if (t == TIER_NONE) t = sm->use_dram ? TIER_DRAM : TIER_REMOTE;
    tier_unlink(sm, s);
    s->saved_bytes += bytes;
    tier_link(sm, s, t);
    /* may drop (and free) s itself when the tiers are full: s is not touched after this */
    enforce_capacity(sm, &sm->rep[s->replica]);
}

/* keep DRAM, SSD and remote under their capacities: DRAM spills its LRU sessions to SSD (or the
 * remote store), the SSD and the remote store drop theirs */
static void expire_list(Sim *sm, Session *head, int64_t cutoff)
{
    /* lists are in touch order: expire from the head while entries are older than the TTL */
    for (Session *v = head; v && v->last_use_ns < cutoff;) {
        Session *nx = v->t_next;
        if (!v->spilling && !v->loading && !v->saving) tier_drop(sm, v);
        v = nx;
    }
}

static void enforce_capacity(Sim *sm, Replica *rp)
{
    if (sm->cfg->state_ttl_ns > 0) {
        int64_t cutoff = evq_now(&sm->q) - sm->cfg->state_ttl_ns;
        expire_list(sm, rp->dram_head, cutoff);
        expire_list(sm, rp->ssd_head, cutoff);
        expire_list(sm, sm->rem_head, cutoff);
    }
    while (rp->dram_used - rp->dram_spilling > sm->dram_cap) {
        Session *v = rp->dram_head;
        while (v && (v->spilling || v->loading || v->saving)) v = v->t_next;
        if (!v) break;
        if (sm->use_ssd || sm->use_remote) {
            Unit *u = unit_new(sm);
            if (!u) return;
            u->s = v;
            u->kind = U_SPILL;
            u->nhops = 1;
            u->chain[0] = sm->use_ssd ? CH_SSD : CH_NIC_OUT;
            u->bytes[0] = v->saved_bytes;
            v->spilling = 1;
            rp->dram_spilling += v->saved_bytes;
            ch_enqueue(sm, u);
        } else {
            tier_drop(sm, v);
        }
    }
    while (rp->ssd_used > sm->ssd_cap) {
        Session *v = rp->ssd_head;
        while (v && (v->loading || v->saving)) v = v->t_next;
        if (!v) break;
        tier_drop(sm, v);
    }
    while (sm->remote_cap && sm->remote_used > (double)sm->remote_cap) {
        Session *v = sm->rem_head;
        while (v && (v->loading || v->saving)) v = v->t_next;
        if (!v) break;
        tier_drop(sm, v);
    }
}

/* write the state of context positions [issued_pos, upto) out: D2H per stage (each GPU its shard),
 * then on to the session's tier (DRAM: nothing more; SSD or remote: a second hop) */
static void save_range(Sim *sm, Session *s, int64_t upto)
{
    if (sm->save_bpt <= 0 || upto <= s->issued_pos) return;
    double bytes = (double)(upto - s->issued_pos) * sm->save_bpt;
    s->issued_pos = upto;
    Tier dest = s->tier != TIER_NONE ? s->tier : (sm->use_dram ? TIER_DRAM : TIER_REMOTE);
    for (int st = 0; st < sm->S; st++) {
        Unit *u = unit_new(sm);
        if (!u) return;
        u->s = s;
        u->kind = U_SAVE;
        u->stage = st;
        u->upto = upto;
        double share = bytes * sm->stage_layers[st] / sm->L;
        u->chain[0] = CH_D2H;
        u->bytes[0] = share / sm->T;
        u->nhops = 1;
        if (dest == TIER_SSD) {
            u->chain[1] = CH_SSD;
            u->bytes[1] = share;
            u->nhops = 2;
        } else if (dest == TIER_REMOTE) {
            u->chain[1] = CH_NIC_OUT;
            u->bytes[1] = share;
            u->nhops = 2;
        }
        s->saving++;
        ch_enqueue(sm, u);
    }
}

/* SAVE_DIRECT: the state of [issued_pos, upto) was written by the iteration that just ended */
static void direct_saved(Sim *sm, Session *s, int64_t upto)
{
    if (sm->save_bpt <= 0 || upto <= s->issued_pos) return;
    double bytes = (double)(upto - s->issued_pos) * sm->save_bpt;
    s->issued_pos = upto;
    sm->res->bytes_d2h += bytes;
    Tier t = s->tier != TIER_NONE ? s->tier : (sm->use_ssd ? TIER_SSD : sm->use_dram ? TIER_DRAM : TIER_REMOTE);
    if (t == TIER_SSD) sm->res->bytes_ssd_write += bytes;
    if (t == TIER_REMOTE) sm->res->bytes_net_out += bytes;
    tier_unlink(sm, s);
    s->saved_tokens = upto;
    s->saved_bytes += bytes;
    tier_link(sm, s, t);
    enforce_capacity(sm, &sm->rep[s->replica]);
}

/* SAVE_DIRECT: the iteration itself writes its new state out, in 64-token pieces per layer, and
 * waits for it: D2H of each GPU's shard, then the writes to the SSD array (or DRAM) */
static double direct_save_ns(Sim *sm, int64_t tokens, int64_t pieces)
{
    if (sm->save_bpt <= 0 || tokens <= 0) return 0;
    double bytes = (double)tokens * sm->save_bpt;
    double t = bytes / sm->T / sm->rate_d2h + (double)sm->lat_link;
    if (sm->use_ssd && sm->rate_ssd_w > 0) {
        int n = sm->n_ssd > 0 ? sm->n_ssd : 1;
        t += bytes / sm->rate_ssd_w + (double)pieces * sm->L * (double)sm->lat_ssd_w / n;
    }
    return t;
}

/* ------------------------------------------------------------------ estimates for policies */

static double layer_linear_ns(Sim *sm, int64_t M)
{
    CostModel *cm = &sm->w->cost;
    const ModelSpec *m = sm->w->model;
    double t = cost_lookup_ns(cm, OP_GEMM_QKV, M, 0, 0) + cost_lookup_ns(cm, OP_GEMM_O, M, 0, 0) +
               cost_lookup_ns(cm, OP_GEMM_FFN_UP, M, 0, 0) + cost_lookup_ns(cm, OP_GEMM_FFN_DOWN, M, 0, 0);
    if (cost_has(cm, OP_NORM)) t += m->norms_per_layer * cost_lookup_ns(cm, OP_NORM, M, 0, 0);
    if (cost_has(cm, OP_ACT)) t += cost_lookup_ns(cm, OP_ACT, M, 0, 0);
    if (m->pos == POS_ROPE && cost_has(cm, OP_ROPE)) t += cost_lookup_ns(cm, OP_ROPE, M, 0, 0);
    if (sm->T > 1 && cost_has(cm, OP_ALLREDUCE)) t += cost_lookup_ns(cm, OP_ALLREDUCE, M, 0, 0);
    return t;
}

static double est_layer_ns(void *core, int64_t new_tokens, int64_t ctx_tokens)
{
    Sim *sm = core;
    if (new_tokens < 1) new_tokens = 1;
    return layer_linear_ns(sm, new_tokens) + cost_lookup_ns(&sm->w->cost, OP_ATTN_PREFILL, new_tokens, ctx_tokens, 0);
}

static double est_load_layer_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu)
{
    Sim *sm = core;
    double h2d = (double)tokens * bpt_layer_gpu / sm->rate_h2d + (double)sm->lat_link;
    double hop = 0;
    if (tier == TIER_SSD && sm->rate_ssd_r > 0) hop = (double)tokens * bpt_layer / sm->rate_ssd_r + (double)sm->lat_ssd;
    if (tier == TIER_REMOTE && sm->rate_nic > 0) hop = (double)tokens * bpt_layer / sm->rate_nic + (double)sm->lat_nic;
    return h2d > hop ? h2d : hop;
}

/* ------------------------------------------------------------------ requests */

static void emit_row(Sim *sm, Request *r)
{
    SimResult *res = sm->res;
    int64_t ttft = r->t_first - r->arrival_ns;
    int64_t queue = r->t_admit - r->arrival_ns;
    int64_t restore = r->t_restored > r->t_admit ? r->t_restored - r->t_admit : 0;
    int64_t prefill = ttft - queue - restore;
    if (prefill < 0) prefill = 0;
    hist_add(&res->ttft, (uint64_t)ttft);
    hist_add(&res->queue, (uint64_t)queue);
    hist_add(&res->restore, (uint64_t)restore);
    hist_add(&res->prefill, (uint64_t)prefill);
    double tbt_mean = r->out_done > 1 ? r->tbt_sum / (double)(r->out_done - 1) : 0;
    int slo = ttft <= sm->cfg->slo_ttft_ns && (r->out_done <= 1 || tbt_mean <= (double)sm->cfg->slo_tbt_ns);
    res->slo_met += (uint64_t)slo;
    int c = hist_class(sm, r->hist);
    hist_add(&res->cls[c].ttft, (uint64_t)ttft);
    hist_add(&res->cls[c].restore, (uint64_t)restore);
    res->cls[c].n++;
    res->cls[c].slo_met += (uint64_t)slo;
    if (restore > 0) {
        res->restored_tokens += (uint64_t)r->hist;
        res->restore_busy_ns += (double)restore;
        if (r->lb_ns > 0) hist_add(&res->lb_ratio, (uint64_t)llround(1000.0 * (double)restore / r->lb_ns));
    }
    res->requests++;
    if (sm->row_fn) {
        /* recomputed: token-wise prefix + whole-model recompute + layer-wise recompute (counted once per
         * token even if only some layers were recomputed); loaded: tokens whose state came from a tier */
        int64_t recomputed = r->tw_comp + r->recompute_total, loaded = r->tw_landed;
        if (r->mode && r->mode[0] == LM_RECOMPUTE) recomputed += r->lw_tokens;
        if (r->mode && r->src != TIER_NONE) loaded += r->lw_tokens;
        SimRequestRow row = {r->id, r->s->id, r->turn, r->replica, r->arrival_ns, r->hist, r->nnew, r->nout,
                             r->from, recomputed, loaded, queue, restore, prefill, ttft, r->t_last_tok,
                             tbt_mean, r->tbt_max, r->lb_ns};
        if (sm->row_fn(sm->row_ctx, &row, sm->e) != 0) sm->failed = 1;
    }
}

static void request_free(Request *r)
{
    r->s->refs--;
    free(r->mode);
    free(r->arrived);
    free(r);
}

static void release_request(Sim *sm, Request *r);

static void request_done(Sim *sm, Replica *rp, Request *r)
{
    if (r->state == RS_DONE) {
        fail(sm, "internal: a request completed twice%s", "");
        return;
    }
    r->state = RS_DONE;
    sm->done_requests++;
    emit_row(sm, r);
    Session *s = r->s;
    int64_t ctx = r->hist + r->nnew + r->nout;
    /* the reservation becomes the session's resident KV */
    int64_t keep = blocks_tokens(sm, ctx);
    if (keep < r->reserved_tokens) pool_release(sm, rp, r->reserved_tokens - keep);
    s->resident_tokens = ctx;
    s->last_use_ns = evq_now(&sm->q);
    s->busy = 0;
    if (sm->save_mode != SAVE_DIRECT) save_range(sm, s, ctx); /* the rest of the turn (all of it at turn end) */
    if (sm->cfg->evict_each_turn) {
        pool_release(sm, rp, keep);
        s->resident_tokens = 0;
    } else {
        hbm_lru_add(rp, s);
    }
    rp->active_count--;
    /* remove from active */
    for (int i = 0; i < rp->n_active; i++)
        if (rp->active[i] == r) {
            memmove(&rp->active[i], &rp->active[i + 1], (size_t)(rp->n_active - i - 1) * sizeof *rp->active);
            rp->n_active--;
            break;
        }
    /* the next turn of the session */
    Request *nx = s->pend_head;
    if (nx) {
        s->pend_head = nx->next;
        if (!s->pend_head) s->pend_tail = NULL;
        nx->next = NULL;
        int64_t now = evq_now(&sm->q);
        int64_t t = nx->trace_arrival_ns >= 0 ? kv_max_i64(nx->trace_arrival_ns, now) : now + nx->think_ns;
        s->busy = 1;
        push(sm, t, EV_RELEASE, nx, 0);
    }
    request_free(r);
    sess_maybe_free(sm, s);
}

/* schedule admission (always) and, when the replica is idle, the next iteration */
static void kick(Sim *sm, Replica *rp)
{
    if (rp->form_pending) return;
    rp->form_pending = 1;
    push(sm, evq_now(&sm->q), EV_FORM, rp, 0);
}

static int queue_push(Sim *sm, Replica *rp, Request *r)
{
    if (rp->q_len == rp->q_cap) {
        size_t nc = rp->q_cap ? rp->q_cap * 2 : 64;
        Request **nq = malloc(nc * sizeof *nq);
        if (!nq) return fail(sm, "out of memory%s", "");
        for (size_t i = 0; i < rp->q_len; i++) nq[i] = rp->queue[(rp->q_head + i) % rp->q_cap];
        free(rp->queue);
        rp->queue = nq;
        rp->q_cap = nc;
        rp->q_head = 0;
    }
    rp->queue[(rp->q_head + rp->q_len) % rp->q_cap] = r;
    rp->q_len++;
    return 0;
}

/* a turn is released: it joins its replica's admission queue */
static void release_request(Sim *sm, Request *r)
{
    Session *s = r->s;
    if (s->replica < 0) {
        int best = 0;
        for (int i = 1; i < sm->R; i++)
            if (sm->rep[i].active_count < sm->rep[best].active_count) best = i;
        s->replica = best;
    }
    Replica *rp = &sm->rep[s->replica];
    r->replica = s->replica;
    r->arrival_ns = evq_now(&sm->q);
    r->state = RS_QUEUED;
    rp->active_count++;
    s->busy = 1;
    hbm_lru_remove(rp, s); /* its KV (if any) is about to be used */
    if (queue_push(sm, rp, r) == 0) kick(sm, rp);
}

/* pull trace requests up to the next timed arrival */
static int pull_trace(Sim *sm)
{
    while (!sm->trace_done && !sm->failed) {
        if (!sm->have_next) {
            int rc = trace_next(sm->trace, &sm->next_tr, sm->e);
            if (rc < 0) return sm->failed = 1, -1;
            if (rc == 0) {
                sm->trace_done = 1;
                break;
            }
            sm->have_next = 1;
        }
        TraceRequest *tr = &sm->next_tr;
        Session *s = sess_get(sm, tr->session);
        if (!s) return fail(sm, "out of memory%s", "");
        Request *r = calloc(1, sizeof *r);
        if (!r) return fail(sm, "out of memory%s", "");
        r->id = sm->next_req_id++;
        r->s = s;
        s->refs++;
        r->turn = tr->turn;
        r->hist = tr->history_tokens;
        r->nnew = tr->new_input_tokens < 1 ? 1 : tr->new_input_tokens;
        r->nout = tr->output_tokens < 1 ? 1 : tr->output_tokens;
        r->trace_arrival_ns = tr->arrival_ns;
        r->think_ns = tr->think_ns;
        r->replica = -1;
        sm->have_next = 0;
        if (tr->arrival_ns >= 0) {
            int64_t now = evq_now(&sm->q);
            push(sm, tr->arrival_ns > now ? tr->arrival_ns : now, EV_ARRIVAL, r, 0);
            return 0; /* read more when this one arrives */
        }
        /* closed loop: after the session's previous turn */
        if (!s->busy && !s->pend_head) {
            s->busy = 1;
            push(sm, evq_now(&sm->q) + r->think_ns, EV_RELEASE, r, 0);
        } else {
            if (s->pend_tail) s->pend_tail->next = r;
            else s->pend_head = r;
            s->pend_tail = r;
        }
    }
    return 0;
}

static void on_arrival(Sim *sm, Request *r)
{
    Session *s = r->s;
    if (s->busy || s->pend_head) { /* previous turn still running: wait for it */
        if (s->pend_tail) s->pend_tail->next = r;
        else s->pend_head = r;
        s->pend_tail = r;
    } else {
        release_request(sm, r);
    }
    pull_trace(sm);
}

/* ------------------------------------------------------------------ admission and restoration plans */

static void lw_arrived(Sim *sm, Request *r, int layer);
static void tw_issue(Sim *sm, Request *r);

/* issue the layer-wise loads of r's plan (per layer: from the tier, then H2D) */
static int is_boundary(const Sim *sm, const Request *r, int l)
{
    return r->stage_par && r->mode[l] == LM_RECOMPUTE && sm->stage_of[l] > 0 && (l == 0 || sm->stage_of[l - 1] != sm->stage_of[l]);
}

static int issue_one_load(Sim *sm, Request *r, int l, int hidden)
{
    /* KV: each GPU its heads; hidden states (and boundary activations): token-sharded over the TP
     * group, all-gathered per layer (the all-gather is compute-side, in the iteration) */
    double per_gpu = hidden ? sm->hid_tok_layer / sm->T : sm->kv_tok_layer_gpu * r->kv_scale;
    double per_layer = hidden ? sm->hid_tok_layer : sm->kv_tok_layer * r->kv_scale;
    Unit *u = unit_new(sm);
    if (!u) return -1;
    u->r = r;
    u->kind = U_LOAD;
    u->layer = l;
    u->stage = sm->stage_of[l];
    u->stripe_bytes = (double)r->chunk_tokens * per_layer;
    int h = 0;
    if (r->src == TIER_SSD || r->src == TIER_REMOTE) {
        u->chain[h] = r->src == TIER_SSD ? CH_SSD : CH_NIC_IN;
        u->bytes[h++] = (double)r->lw_tokens * per_layer;
    }
    u->chain[h] = CH_H2D;
    u->bytes[h++] = (double)r->lw_tokens * per_gpu;
    u->nhops = h;
    ch_enqueue(sm, u);
    return 0;
}

/* issue the layer-wise loads of r's plan (per layer: from the tier, then H2D); boundary activations
 * of stage-parallel restorations go first */
static int issue_layer_loads(Sim *sm, Request *r)
{
    for (int l = 0; l < sm->L; l++)
        if (is_boundary(sm, r, l) && issue_one_load(sm, r, l, 1) != 0) return -1;
    for (int l = 0; l < sm->L; l++) {
        int m = r->mode[l];
        if ((m == LM_LOAD_KV || m == LM_LOAD_HIDDEN) && issue_one_load(sm, r, l, m == LM_LOAD_HIDDEN) != 0) return -1;
    }
    return 0;
}

static int admit(Sim *sm, Replica *rp, Request *r)
{
    Session *s = r->s;
    int64_t now = evq_now(&sm->q);
    r->t_admit = now;
    r->t_restored = now;
    r->state = RS_ACTIVE;
    r->new_left = r->nnew;
    r->from = "none";
    r->src = TIER_NONE;
    int64_t N = r->hist;
    if (N > 0 && s->resident_tokens >= N) {
        r->from = "resident";
        sm->res->hits_resident++;
        N = 0;
    } else if (N > 0) {
        RestoreQuery q = {N, r->nnew, s->tier, s->saved_tokens};
        if (s->saved_tokens < N || s->tier == TIER_NONE) {
            q.saved_tier = TIER_NONE;
            q.saved_tokens = 0;
        }
        RestorePlan plan;
        memset(&plan, 0, sizeof plan);
        plan.early_layers = -1;
        if (sm->pol->plan_restore(sm->pstate, &sm->env, &q, &plan, sm->e) != 0) return sm->failed = 1, -1;
        /* resident tokens that do not cover the history are dropped */
        if (s->resident_tokens > 0) {
            pool_release(sm, rp, blocks_tokens(sm, s->resident_tokens));
            s->resident_tokens = 0;
        }
        /* lower bound on restoration: all compute and IO used perfectly (harmonic mean of recomputing
         * everything and loading everything), with the smaller of the two state forms (KV or hidden
         * states) so that the bound holds for every policy */
        double t_comp = (double)sm->L * est_layer_ns(sm, N, 0);
        if (q.saved_tier != TIER_NONE) {
            double t_kv = (double)sm->L * est_load_layer_ns(sm, q.saved_tier, N, sm->kv_tok_layer, sm->kv_tok_layer_gpu);
            double t_hid = (double)sm->L * est_load_layer_ns(sm, q.saved_tier, N, sm->hid_tok_layer, sm->hid_tok_layer / sm->T);
            double t_io = t_kv < t_hid ? t_kv : t_hid;
            r->lb_ns = t_comp * t_io / (t_comp + t_io);
        } else {
            r->lb_ns = t_comp;
        }
        if (plan.no_restore) { /* the Ideal reference: the state is on the GPU already */
            r->from = "ideal";
            sm->res->hits_resident++;
            goto enlist;
        }
        if (q.saved_tier == TIER_NONE) { /* nothing to load: recompute, whatever the policy said */
            memset(&plan, 0, sizeof plan);
            plan.recompute_tokens = N;
        }
        r->low_prio = plan.low_priority;
        r->chunk_tokens = plan.chunk_tokens > 0 ? plan.chunk_tokens : 0;
        r->kv_scale = plan.kv_bytes_scale > 0 && plan.kv_bytes_scale < 1 ? plan.kv_bytes_scale : 1;
        r->src = q.saved_tier;
        if (plan.tokenwise) {
            if (plan.io_chunk_tokens < 1) return fail(sm, "policy %s: token-wise plan without an IO chunk size", sm->pol->name);
            r->tw = 1;
            r->tw_io_issued = N;
            r->tw_io_chunk = plan.io_chunk_tokens;
            r->tw_comp_chunk = plan.comp_chunk_tokens;
            r->loads_left = 1; /* the session's state is read until the pointers meet */
            s->loading++;
            tier_touch(sm, s);
            tw_issue(sm, r);
        } else {
            if (plan.recompute_tokens < 0 || plan.recompute_tokens > N)
                return fail(sm, "policy %s: recompute_tokens out of range", sm->pol->name);
            r->recompute_left = r->recompute_total = plan.recompute_tokens;
            r->lw_tokens = N - plan.recompute_tokens;
            if (r->lw_tokens > 0) {
                r->mode = malloc((size_t)sm->L);
                r->arrived = calloc((size_t)sm->L, 1);
                if (!r->mode || !r->arrived) return fail(sm, "out of memory%s", "");
                memcpy(r->mode, plan.layer_mode, (size_t)sm->L);
                r->lw_pending = 1;
                r->early_layers = plan.early_layers < 0 || plan.early_layers > sm->L ? sm->L : plan.early_layers;
                r->stage_par = plan.stage_parallel && sm->S > 1;
                int seen_other = 0;
                for (int l = 0; l < sm->L; l++) {
                    int m = r->mode[l];
                    if (m > LM_RECOMPUTE) return fail(sm, "policy %s: unknown layer mode", sm->pol->name);
                    if (r->stage_par && l > 0 && sm->stage_of[l] != sm->stage_of[l - 1]) seen_other = 0;
                    if (m == LM_RECOMPUTE && seen_other)
                        return fail(sm, "policy %s: LM_RECOMPUTE layers must be a prefix of the layers (of each stage)",
                                    sm->pol->name);
                    if (m != LM_RECOMPUTE) seen_other = 1;
                    if (m == LM_LOAD_KV || m == LM_LOAD_HIDDEN) r->loads_left++;
                    if (is_boundary(sm, r, l)) {
                        r->loads_left++;
                        r->bnd_left++;
                    }
                }
                if (r->loads_left) {
                    s->loading++;
                    tier_touch(sm, s);
                    if (issue_layer_loads(sm, r) != 0) return -1;
                }
                for (int l = 0; l < sm->L; l++) /* layers without IO count as arrived */
                    if (r->mode[l] != LM_LOAD_KV && r->mode[l] != LM_LOAD_HIDDEN && !is_boundary(sm, r, l)) r->arrived[l] = 1;
            }
        }
        static const char *names[] = {"recompute", "dram", "ssd", "remote"};
        if (r->loads_left) {
            r->from = names[q.saved_tier];
            if (q.saved_tier == TIER_DRAM) sm->res->hits_dram++;
            else if (q.saved_tier == TIER_SSD) sm->res->hits_ssd++;
            else sm->res->hits_remote++;
        } else {
            r->from = "recompute";
            sm->res->misses++;
        }
    } else {
        sm->res->no_history++;
    }
enlist:
    if (rp->n_active == rp->cap_active) {
        int nc = rp->cap_active ? rp->cap_active * 2 : 64;
        Request **na = realloc(rp->active, (size_t)nc * sizeof *na);
        if (!na) return fail(sm, "out of memory%s", "");
        rp->active = na;
        rp->cap_active = nc;
    }
    rp->active[rp->n_active++] = r;
    if (r->lw_tokens > 0) lw_arrived(sm, r, -1);
    return 0;
}

static void iter_advance(Sim *sm, Replica *rp);

/* layer `layer` of r's state arrived (-1: only recompute the prefix count) */
static void lw_arrived(Sim *sm, Request *r, int layer)
{
    int64_t now = evq_now(&sm->q);
    if (layer >= 0) {
        if (is_boundary(sm, r, layer)) r->bnd_left--;
        r->arrived[layer] = 1;
        if (now > r->t_restored) r->t_restored = now;
        if (--r->loads_left == 0) r->s->loading--;
    }
    while (r->arrived_prefix < sm->L && r->arrived[r->arrived_prefix]) r->arrived_prefix++;
    Replica *rp = &sm->rep[r->replica];
    if (rp->iterating && rp->wait_r == r && rp->wait_layer == layer) {
        rp->wait_r = NULL;
        if (rp->cursor_ns < now) rp->cursor_ns = now;
        iter_advance(sm, rp);
    } else if (!rp->iterating && (r->stage_par ? r->bnd_left == 0 : r->arrived_prefix >= r->early_layers)) {
        kick(sm, rp);
    }
}

static void tw_landed(Sim *sm, Request *r, int slot);

static void unit_finished(Sim *sm, Unit *u)
{
    if (u->kind == U_LOAD) {
        lw_arrived(sm, u->r, u->layer);
    } else if (u->kind == U_LOAD_TOK) {
        tw_landed(sm, u->r, (int)u->upto);
    } else if (u->kind == U_SAVE) {
        double bytes = u->nhops == 1 ? u->bytes[0] * sm->T : u->bytes[1];
        save_done(sm, u->s, u->upto, bytes);
    } else {
        spill_done(sm, u->s, u->chain[0] == CH_SSD ? TIER_SSD : TIER_REMOTE);
    }
    u->next = sm->free_units;
    sm->free_units = u;
}

/* ---- token-wise two pointers: compute forward from token 0, load backward from the end ---- */

#define TW_DEPTH 2

static void tw_issue(Sim *sm, Request *r)
{
    while (r->tw && r->tw_ck_n < TW_DEPTH) {
        int64_t lower = r->tw_comp + r->tw_comp_inflight;
        if (r->tw_io_issued <= lower) return;
        int64_t c = r->tw_io_issued - lower;
        if (c > r->tw_io_chunk) c = r->tw_io_chunk;
        int slot = r->tw_ck_units[0] ? 1 : 0;
        r->tw_io_issued -= c;
        r->tw_ck_tokens[slot] = c;
        r->tw_ck_units[slot] = sm->S;
        r->tw_ck_n++;
        for (int st = 0; st < sm->S; st++) {
            Unit *u = unit_new(sm);
            if (!u) return;
            u->r = r;
            u->kind = U_LOAD_TOK;
            u->layer = -1;
            u->upto = slot;
            u->stage = st;
            int h = 0;
            double layers = sm->stage_layers[st];
            if (r->src == TIER_SSD || r->src == TIER_REMOTE) {
                u->chain[h] = r->src == TIER_SSD ? CH_SSD : CH_NIC_IN;
                u->bytes[h++] = (double)c * sm->kv_tok_layer * layers * r->kv_scale;
            }
            u->chain[h] = CH_H2D;
            u->bytes[h++] = (double)c * sm->kv_tok_layer_gpu * layers * r->kv_scale;
            u->nhops = h;
            ch_enqueue(sm, u);
        }
    }
}

static void tw_check_done(Sim *sm, Request *r)
{
    if (!r->tw || r->tw_ck_n || r->tw_comp_inflight) return;
    if (r->tw_comp + r->tw_landed < r->hist) return;
    r->tw = 0;
    int64_t now = evq_now(&sm->q);
    if (now > r->t_restored) r->t_restored = now;
    if (r->loads_left) {
        r->loads_left = 0;
        r->s->loading--;
    }
    kick(sm, &sm->rep[r->replica]);
}

static void tw_landed(Sim *sm, Request *r, int slot)
{
    if (--r->tw_ck_units[slot] > 0) return;
    r->tw_landed += r->tw_ck_tokens[slot];
    r->tw_ck_tokens[slot] = 0;
    r->tw_ck_n--;
    int64_t now = evq_now(&sm->q);
    if (now > r->t_restored) r->t_restored = now;
    tw_issue(sm, r);
    tw_check_done(sm, r);
}

/* ------------------------------------------------------------------ iterations */

static int item_add(Sim *sm, Replica *rp, IterItem it)
{
    if (rp->n_items == rp->cap_items) {
        int nc = rp->cap_items ? rp->cap_items * 2 : 64;
        IterItem *ni = realloc(rp->items, (size_t)nc * sizeof *ni);
        if (!ni) return fail(sm, "out of memory%s", "");
        rp->items = ni;
        rp->cap_items = nc;
    }
    rp->items[rp->n_items++] = it;
    return 0;
}

/* Admission, FIFO, as soon as memory and a batch slot allow — also while an iteration runs, so that
 * a restoration's IO starts at admission and its compute joins the next iteration boundary. */
static void admit_queue(Sim *sm, Replica *rp)
{
    while (rp->q_len && rp->n_active < sm->cfg->max_batch) {
        Request *r = rp->queue[rp->q_head];
        Session *s = r->s;
        int64_t ctx = r->hist + r->nnew + r->nout;
        int64_t need = blocks_tokens(sm, ctx);
        int resident_ok = r->hist > 0 && s->resident_tokens >= r->hist;
        int64_t have = resident_ok ? blocks_tokens(sm, s->resident_tokens) : 0;
        if (need > rp->pool_cap) { /* can never fit: dropped */
            rp->q_head = (rp->q_head + 1) % rp->q_cap;
            rp->q_len--;
            sm->res->dropped++;
            if (s->resident_tokens) {
                pool_release(sm, rp, blocks_tokens(sm, s->resident_tokens));
                s->resident_tokens = 0;
            }
            r->t_admit = r->t_first = r->t_last_tok = evq_now(&sm->q);
            r->state = RS_ACTIVE;
            r->from = "dropped";
            rp->active_count--;
            s->busy = 0;
            r->state = RS_DONE;
            sm->done_requests++;
            Request *nx = s->pend_head;
            if (nx) {
                s->pend_head = nx->next;
                if (!s->pend_head) s->pend_tail = NULL;
                nx->next = NULL;
                s->busy = 1;
                push(sm, evq_now(&sm->q) + (nx->trace_arrival_ns >= 0 ? 0 : nx->think_ns), EV_RELEASE, nx, 0);
            }
            request_free(r);
            sess_maybe_free(sm, s);
            continue;
        }
        int64_t extra = need - have;
        while (rp->pool_used + extra > rp->pool_cap && hbm_evict_one(sm, rp)) {
        }
        if (rp->pool_used + extra > rp->pool_cap) {
            /* the session's own stale KV may be what is in the way */
            if (!resident_ok && s->resident_tokens && rp->pool_used - blocks_tokens(sm, s->resident_tokens) + extra <= rp->pool_cap) {
                pool_release(sm, rp, blocks_tokens(sm, s->resident_tokens));
                s->resident_tokens = 0;
            } else {
                break;
            }
        }
        rp->q_head = (rp->q_head + 1) % rp->q_cap;
        rp->q_len--;
        rp->pool_used += extra;
        r->reserved_tokens = need;
        if ((uint64_t)rp->pool_used > sm->res->hbm_peak_tokens) sm->res->hbm_peak_tokens = (uint64_t)rp->pool_used;
        if (admit(sm, rp, r) != 0) return;
    }
}

static void form_iteration(Sim *sm, Replica *rp)
{
    rp->form_pending = 0;
    if (sm->failed) return;
    admit_queue(sm, rp);
    if (rp->iterating || sm->failed) return;
    /* the batch: decode first; then, in admission order, restoration compute and new input; then
     * low-priority restoration compute (Cake: decode > ordinary prefill > restoration) */
    rp->n_items = 0;
    int64_t budget = sm->cfg->token_budget;
    /* restoration compute may take at most restore_share of the budget (Cake's emulation of GPU
     * availability); 1 = no cap */
    int64_t rbudget = sm->cfg->restore_share >= 1 ? INT64_MAX : (int64_t)(sm->cfg->restore_share * (double)budget);
    int64_t direct_tokens = 0, direct_pieces = 0;
    for (int i = 0; i < rp->n_active; i++) {
        Request *r = rp->active[i];
        if (r->t_first && r->out_done < r->nout && r->new_left == 0) {
            item_add(sm, rp, (IterItem){r, IT_DECODE, 0, 1, r->hist + r->nnew + r->out_done});
            budget--;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rp->n_active && budget > 0; i++) {
            Request *r = rp->active[i];
            if (pass == r->low_prio) { /* restoration compute in its pass */
                if (r->tw) {
                    int64_t avail = r->tw_io_issued - r->tw_comp;
                    if (avail > 0 && !r->tw_comp_inflight && rbudget > 0) {
                        int64_t c = avail < budget ? avail : budget;
                        if (c > rbudget) c = rbudget;
                        if (r->tw_comp_chunk > 0 && c > r->tw_comp_chunk) c = r->tw_comp_chunk;
                        item_add(sm, rp, (IterItem){r, IT_RECOMP, 0, c, r->tw_comp});
                        r->tw_comp_inflight = c;
                        budget -= c;
                        rbudget -= c;
                    }
                    continue;
                }
                if (r->recompute_left > 0) {
                    /* the history is prefilled again as the head of one sequence: its last chunk and
                     * the first chunk of the new input may share an iteration */
                    if (rbudget <= 0) continue;
                    int64_t c = r->recompute_left < budget ? r->recompute_left : budget;
                    if (c > rbudget) c = rbudget;
                    item_add(sm, rp, (IterItem){r, IT_RECOMP, 0, c, r->recompute_done});
                    budget -= c;
                    rbudget -= c;
                    if (c < r->recompute_left || budget == 0 || r->lw_tokens > 0 || pass == 1) continue;
                    goto new_input; /* the history ends in this iteration */
                }
            }
            if (pass == 1 || r->tw || r->recompute_left > 0) continue;
        new_input:
            if (r->new_left > 0) {
                int lw = r->lw_pending;
                if (lw && (r->stage_par ? r->bnd_left > 0 : r->arrived_prefix < r->early_layers)) continue;
                int64_t c = r->new_left < budget ? r->new_left : budget;
                item_add(sm, rp, (IterItem){r, IT_NEW, lw, c, r->hist + r->new_done});
                budget -= c;
            }
        }
    if (sm->save_mode == SAVE_DIRECT)
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (it->type == IT_RECOMP && it->r->tw) continue; /* restored state is saved already */
            direct_tokens += it->tokens;
            direct_pieces += (it->tokens + 63) / 64;
        }
    if (rp->n_items == 0) return;
    /* per-layer durations */
    int64_t M = 0, B = 0, dctx = 0;
    double attn = 0;
    CostModel *cm = &sm->w->cost;
    int any_lw = 0;
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        M += it->tokens;
        if (it->type == IT_DECODE) {
            B++;
            dctx += it->ctx;
        } else {
            attn += cost_lookup_ns(cm, OP_ATTN_PREFILL, it->tokens, it->ctx, 0);
        }
        if (it->lw) any_lw = 1;
        it->r->in_iter = 1;
    }
    if (B) attn += cost_lookup_ns(cm, OP_ATTN_DECODE, B, dctx, 0);
    double base = layer_linear_ns(sm, M) + attn;
    for (int l = 0; l < sm->L; l++) rp->layer_ns[l] = base;
    rp->pre_ns = 0;
    rp->any_lw = any_lw;
    if (any_lw) {
        /* stage-parallel restorations first: every stage recomputes its own prefix layers for the
         * history at once (from its boundary activation), the iteration's walk starts after the
         * slowest stage */
        double lane[SIM_MAX_STAGES] = {0};
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (!it->lw || !it->r->stage_par) continue;
            Request *r = it->r;
            for (int l = 0; l < sm->L; l++) {
                if (r->mode[l] != LM_RECOMPUTE) continue;
                lane[sm->stage_of[l]] += layer_linear_ns(sm, r->lw_tokens) +
                                         cost_lookup_ns(cm, OP_ATTN_PREFILL, r->lw_tokens, r->recompute_total, 0);
                if (is_boundary(sm, r, l) && sm->T > 1 && cost_has(cm, OP_ALLGATHER))
                    lane[sm->stage_of[l]] += cost_lookup_ns(cm, OP_ALLGATHER, r->lw_tokens, 0, 0);
            }
        }
        for (int st = 0; st < sm->S; st++) {
            rp->busy_stage_ns[st] += lane[st];
            if (lane[st] > rp->pre_ns) rp->pre_ns = lane[st];
        }
        /* layer-wise restoration work: recompute rows join the GEMMs, hidden states are projected */
        int64_t prevR = -1;
        double prev_lin = base - attn;
        for (int l = 0; l < sm->L; l++) {
            int64_t R = 0;
            double extra = 0;
            for (int i = 0; i < rp->n_items; i++) {
                IterItem *it = &rp->items[i];
                if (!it->lw) continue;
                Request *r = it->r;
                if (r->mode[l] == LM_RECOMPUTE && r->stage_par) continue; /* done in its stage's lane */
                if (r->mode[l] == LM_RECOMPUTE) {
                    R += r->lw_tokens;
                    extra += cost_lookup_ns(cm, OP_ATTN_PREFILL, r->lw_tokens, r->recompute_total, 0);
                } else if (r->mode[l] == LM_LOAD_HIDDEN) {
                    extra += cost_lookup_ns(cm, OP_GEMM_KV_PROJ, r->lw_tokens, 0, 0);
                    if (sm->T > 1 && cost_has(cm, OP_ALLGATHER)) extra += cost_lookup_ns(cm, OP_ALLGATHER, r->lw_tokens, 0, 0);
                } else if (r->mode[l] == LM_LOAD_KV && r->kv_scale < 1 && cost_has(cm, OP_DEQUANT)) {
                    extra += cost_lookup_ns(cm, OP_DEQUANT, r->lw_tokens, 0, 0);
                }
            }
            if (R != prevR) {
                prev_lin = layer_linear_ns(sm, M + R);
                prevR = R;
            }
            rp->layer_ns[l] = prev_lin + attn + extra;
        }
    }
    rp->direct_save_ns = direct_save_ns(sm, direct_tokens, direct_pieces);
    rp->iterating = 1;
    rp->iter_start_ns = evq_now(&sm->q);
    rp->cursor_ns = rp->iter_start_ns + sm->overhead_ns + (int64_t)llround(rp->pre_ns);
    for (int i = 0; i < rp->n_items; i++) /* stage-parallel recompute is done when the lanes are */
        if (rp->items[i].lw && rp->items[i].r->stage_par && rp->cursor_ns > rp->items[i].r->t_restored)
            rp->items[i].r->t_restored = rp->cursor_ns;
    rp->layer = 0;
    rp->wait_r = NULL;
    sm->res->iterations++;
    iter_advance(sm, rp);
}

/* walk layers from the cursor until one waits on state in flight, or the iteration ends */
static void iter_advance(Sim *sm, Replica *rp)
{
    int64_t now = evq_now(&sm->q);
    if (!rp->any_lw && rp->layer == 0) { /* nothing in flight: every layer costs the same, one event */
        int64_t d = (int64_t)llround(rp->layer_ns[0]);
        for (int st = 0; st < sm->S; st++) rp->busy_stage_ns[st] += (double)d * sm->stage_layers[st];
        rp->cursor_ns += d * sm->L;
        rp->layer = sm->L;
    }
    while (rp->layer < sm->L) {
        int l = rp->layer;
        Request *waiting = NULL;
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (it->lw && !it->r->arrived[l]) {
                waiting = it->r;
                break;
            }
        }
        if (waiting) {
            if (rp->cursor_ns > now) {
                rp->iter_seq = push(sm, rp->cursor_ns, EV_ITER_RESUME, rp, 0);
            } else {
                rp->wait_r = waiting;
                rp->wait_layer = l;
            }
            return;
        }
        int64_t d = (int64_t)llround(rp->layer_ns[l]);
        rp->busy_stage_ns[sm->stage_of[l]] += (double)d;
        rp->cursor_ns += d;
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (it->lw && !it->r->stage_par && it->r->mode[l] == LM_RECOMPUTE && rp->cursor_ns > it->r->t_restored)
                it->r->t_restored = rp->cursor_ns;
        }
        rp->layer++;
    }
    if (rp->direct_save_ns > 0) { /* synchronous writes after the last layer */
        rp->cursor_ns += (int64_t)llround(rp->direct_save_ns);
        rp->direct_save_ns = 0;
    }
    rp->iter_seq = push(sm, rp->cursor_ns, EV_ITER_DONE, rp, 0);
}

static void iter_done(Sim *sm, Replica *rp)
{
    int64_t now = evq_now(&sm->q);
    rp->iterating = 0;
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        Request *r = it->r;
        int64_t pos = 0; /* context positions with KV after this iteration (for saving) */
        switch (it->type) {
        case IT_RECOMP:
            if (now > r->t_restored) r->t_restored = now;
            if (r->tw) {
                r->tw_comp += it->tokens;
                r->tw_comp_inflight = 0;
                tw_issue(sm, r);
                tw_check_done(sm, r);
                continue; /* restored state was saved before */
            }
            r->recompute_left -= it->tokens;
            r->recompute_done += it->tokens;
            pos = r->recompute_done;
            break;
        case IT_NEW:
            if (it->lw) r->lw_pending = 0;
            r->new_left -= it->tokens;
            r->new_done += it->tokens;
            if (r->new_left == 0) {
                r->t_first = r->t_last_tok = now;
                r->out_done = 1;
            }
            pos = r->hist + r->new_done;
            break;
        case IT_DECODE: {
            int64_t gap = now - r->t_last_tok;
            hist_add(&sm->res->tbt, (uint64_t)gap);
            r->tbt_sum += (double)gap;
            if (gap > r->tbt_max) r->tbt_max = gap;
            r->t_last_tok = now;
            r->out_done++;
            pos = r->hist + r->new_done + r->out_done - 1;
            break;
        }
        }
        if (sm->save_mode == SAVE_PER_ITERATION && pos - r->s->issued_pos >= 64) save_range(sm, r->s, pos);
        else if (sm->save_mode == SAVE_DIRECT) direct_saved(sm, r->s, pos);
    }
    /* distinct requests that finished (a request can hold two items: its last history chunk and its
     * first new-input chunk); the items array is free to reuse as scratch now */
    int nd = 0;
    for (int i = 0; i < rp->n_items; i++) {
        Request *r = rp->items[i].r;
        if (!r->in_iter) continue;
        r->in_iter = 0;
        if (r->state != RS_DONE && r->t_first && r->out_done >= r->nout) rp->items[nd++].r = r;
    }
    for (int i = 0; i < nd; i++) request_done(sm, rp, rp->items[i].r);
    rp->n_items = 0;
    form_iteration(sm, rp);
}

/* ------------------------------------------------------------------ world */

int sim_world_open(SimWorld *w, const SimConfig *cfg, KvErr *e)
{
    memset(w, 0, sizeof *w);
    /* the tables first, then the settings: all before any catalog, trace or cost store is opened */
    if (policy_registry_check_builtin(e) != 0 || sim_config_table_check(e) != 0 || sim_config_check(cfg, e) != 0) return -1;
    w->cfg = &w->resolved;
    if (model_catalog_load(&w->models, NULL, e) != 0) return -1;
    if (hw_catalog_load(&w->hw, NULL, e) != 0) goto fail;
    if (!(w->model = model_find(&w->models, cfg->model, e))) goto fail;
    if (!(w->platform = hw_find_platform(&w->hw, cfg->platform, e))) goto fail;
    if (sim_config_resolve(&w->resolved, cfg, &w->hw, w->platform, w->model, &w->nic, e) != 0) goto fail;
    w->save_tier = w->resolved.store == SIM_STORE_DRAM_SSD ? TIER_SSD : w->resolved.store == SIM_STORE_DRAM ? TIER_DRAM : TIER_REMOTE;
    cfg = w->cfg;
    KvDtype dt;
    if (kv_dtype_parse(cfg->dtype, &dt, e) != 0) goto fail;
    w->ly = (ModelLayout){w->model, dt, cfg->tp, cfg->pp};
    if (model_layout_check(&w->ly, e) != 0) goto fail;
    if (cfg->pp > SIM_MAX_STAGES) {
        kv_err(e, "pp %d: at most %d stages", cfg->pp, SIM_MAX_STAGES);
        goto fail;
    }
    if (w->model->layers > SIM_MAX_LAYERS) {
        kv_err(e, "%s: %d layers, the simulator supports %d", w->model->name, w->model->layers, SIM_MAX_LAYERS);
        goto fail;
    }
    if (!cfg->costs[0] || strcmp(cfg->costs, "spec") == 0) {
        SpecInputs in;
        spec_inputs_from_platform(&in, &w->hw, w->platform, &w->ly);
        in.stack = cfg->stack;
        if (spec_cost_model(&w->cost, &in, e) != 0) goto fail;
    } else {
        const char *dev = cfg->cost_device[0] ? cfg->cost_device : w->hw.gpus[w->platform->gpu].name;
        if (cost_model_load_db(&w->cost, cfg->costs, dev, w->model->name, kv_dtype_name(dt), cfg->tp, e) != 0) goto fail;
        static const CostOp need[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_ATTN_PREFILL, OP_ATTN_DECODE};
        for (size_t i = 0; i < KV_ARRAY_LEN(need); i++)
            if (!cost_has(&w->cost, need[i])) {
                kv_err(e, "%s: the cost model of %s / %s lacks op %s", cfg->costs, dev, w->model->name, cost_op_name(need[i]));
                cost_model_free(&w->cost);
                goto fail;
            }
    }
    snprintf(w->cost_source, sizeof w->cost_source, "%s", w->cost.source);
    return 0;
fail:
    sim_world_close(w);
    return -1;
}

void sim_world_close(SimWorld *w)
{
    cost_model_free(&w->cost);
    model_catalog_free(&w->models);
    hw_catalog_free(&w->hw);
}

void sim_result_free(SimResult *r)
{
    hist_free(&r->ttft);
    hist_free(&r->queue);
    hist_free(&r->restore);
    hist_free(&r->prefill);
    hist_free(&r->tbt);
    hist_free(&r->lb_ratio);
    for (int c = 0; c < SIM_CLASSES; c++) {
        hist_free(&r->cls[c].ttft);
        hist_free(&r->cls[c].restore);
    }
}

/* ------------------------------------------------------------------ run */

/* a link's streaming rate from a measured (not spec) cost curve: the slope between 64 MiB and 1 GiB,
 * which removes the per-transfer latency; the catalog's rate otherwise */
static double link_rate(CostModel *cm, CostOp op, double catalog_bytes_per_s)
{
    if (!cost_has(cm, op) || !strcmp(cm->c[op].backend, "spec")) return catalog_bytes_per_s;
    double a = cost_lookup_ns(cm, op, 1LL << 26, 0, 0), b = cost_lookup_ns(cm, op, 1LL << 30, 0, 0);
    cm->lookups[op] -= 2;
    if (!(b > a)) return catalog_bytes_per_s;
    return (double)((1LL << 30) - (1LL << 26)) / ((b - a) / 1e9);
}

static int sim_setup(Sim *sm)
{
    SimWorld *w = sm->w;
    const SimConfig *cfg = sm->cfg;
    const HwCatalog *hw = &w->hw;
    const PlatformSpec *p = w->platform;
    const GpuSpec *gpu = &hw->gpus[p->gpu];
    const LinkSpec *link = &hw->links[p->link];
    sm->L = w->model->layers;
    sm->S = cfg->pp;
    sm->T = cfg->tp;
    sm->R = cfg->replicas < 1 ? 1 : cfg->replicas;
    if ((int64_t)sm->R * sm->S * sm->T > (int64_t)p->gpus_per_node * 64)
        return kv_err(sm->e, "%d replicas × %d stages × %d GPUs exceed what platform %s models (%d GPUs per node, up to 64 nodes)",
                      sm->R, sm->S, sm->T, p->name, p->gpus_per_node);
    for (int s = 0; s < sm->S; s++) {
        int first, count;
        model_stage_layers(&w->ly, s, &first, &count);
        sm->stage_layers[s] = count;
        for (int l = first; l < first + count; l++) sm->stage_of[l] = s;
    }
    sm->kv_tok_layer = (double)model_kv_bytes_per_token_layer(&w->ly);
    sm->kv_tok_layer_gpu = (double)model_kv_bytes_per_token_layer_gpu(&w->ly);
    sm->hid_tok_layer = (double)model_hidden_bytes_per_token_layer(&w->ly);
    sm->overhead_ns = cfg->iter_overhead_ns; /* resolved from the engine profile by sim_world_open */
    sm->max_ctx = cfg->max_context > 0 ? cfg->max_context : w->model->max_pos;
    /* channels' rates */
    /* host-link rates: measured curves of the cost model when it has them, else the catalog */
    double h2d_bps = link_rate(&w->cost, OP_H2D, link->h2d_bytes_per_s);
    double d2h_bps = link_rate(&w->cost, OP_D2H, link->d2h_bytes_per_s);
    double h2d_bi_bps = link_rate(&w->cost, OP_H2D_BIDIR, link->h2d_bidir_bytes_per_s);
    double d2h_bi_bps = link_rate(&w->cost, OP_D2H_BIDIR, link->d2h_bidir_bytes_per_s);
    sm->rate_h2d = h2d_bps / 1e9;
    sm->rate_d2h = d2h_bps / 1e9;
    sm->lat_link = link->latency_ns;
    int n_ssd = cfg->n_ssd; /* n_ssd, nic and store: resolved and checked by sim_world_open */
    const SsdSpec *ssd = p->ssd >= 0 ? &hw->ssds[p->ssd] : (hw->n_ssds ? &hw->ssds[0] : NULL);
    if (n_ssd > 0 && !ssd) return kv_err(sm->e, "n_ssd %d but the catalog has no SSD", n_ssd);
    const NicSpec *nic = w->nic;
    sm->rate_ssd_r = n_ssd > 0 ? ssd->read_bytes_per_s * n_ssd / 1e9 : 0;
    sm->rate_ssd_w = n_ssd > 0 ? ssd->write_bytes_per_s * n_ssd / 1e9 : 0;
    sm->lat_ssd = n_ssd > 0 ? ssd->read_latency_ns : 0;
    sm->lat_ssd_w = n_ssd > 0 ? ssd->write_latency_ns : 0;
    sm->n_ssd = n_ssd;
    sm->rate_nic = nic ? nic->bytes_per_s / 1e9 : 0;
    sm->lat_nic = nic ? nic->latency_ns : 0;
    /* tiers */
    sm->use_dram = cfg->store != SIM_STORE_REMOTE;
    sm->use_ssd = cfg->store == SIM_STORE_DRAM_SSD;
    sm->use_remote = cfg->store == SIM_STORE_DRAM_REMOTE || cfg->store == SIM_STORE_REMOTE;
    sm->dram_cap = sm->use_dram ? (double)(cfg->dram_bytes ? cfg->dram_bytes : p->dram_bytes) : 0;
    sm->ssd_cap = sm->use_ssd ? (double)n_ssd * (double)ssd->capacity_bytes : 0;
    sm->remote_cap = p->remote_bytes;
    /* KV pool */
    uint64_t weights = model_weight_bytes_per_gpu(&w->ly);
    double usable = (double)gpu->mem_bytes * cfg->mem_util - (double)weights;
    int max_stage_layers = 0;
    for (int s = 0; s < sm->S; s++)
        if (sm->stage_layers[s] > max_stage_layers) max_stage_layers = sm->stage_layers[s];
    double per_tok = sm->kv_tok_layer_gpu * max_stage_layers;
    if (usable < per_tok * 1024)
        return kv_err(sm->e, "%s (%s, tp %d, pp %d) does not fit on %s: weights %.1f GB per GPU of %.1f GB × mem_util %.2f",
                      w->model->name, cfg->dtype, sm->T, sm->S, gpu->name, (double)weights / 1e9, (double)gpu->mem_bytes / 1e9,
                      cfg->mem_util);
    sm->rep = calloc((size_t)sm->R, sizeof *sm->rep);
    if (!sm->rep) return kv_err(sm->e, "out of memory");
    for (int i = 0; i < sm->R; i++) {
        Replica *rp = &sm->rep[i];
        rp->id = i;
        rp->pool_cap = (int64_t)(usable / per_tok) / cfg->block_tokens * cfg->block_tokens;
        for (int s = 0; s < sm->S; s++) {
            ch_init(&rp->h2d[s], "h2d", CH_H2D, s, h2d_bps, h2d_bi_bps, link->latency_ns);
            ch_init(&rp->d2h[s], "d2h", CH_D2H, s, d2h_bps, d2h_bi_bps, link->latency_ns);
            rp->h2d[s].peer = &rp->d2h[s];
            rp->d2h[s].peer = &rp->h2d[s];
        }
        if (n_ssd > 0) {
            ch_init(&rp->ssd, "ssd", CH_SSD, 0, ssd->read_bytes_per_s * n_ssd, 0, ssd->read_latency_ns);
            rp->ssd.rate_write = ssd->write_bytes_per_s * n_ssd / 1e9;
            rp->ssd.n_drives = n_ssd;
            rp->ssd.stripe_bytes = p->stripe_chunk_bytes > 0 ? (double)p->stripe_chunk_bytes : 131072.0;
            rp->has_ssd = 1;
        }
        if (nic) {
            ch_init(&rp->nic_in, "nic_in", CH_NIC_IN, 0, nic->bytes_per_s, 0, nic->latency_ns);
            ch_init(&rp->nic_out, "nic_out", CH_NIC_OUT, 0, nic->bytes_per_s, 0, nic->latency_ns);
            rp->has_nic = 1;
        }
        rp->layer_ns = calloc((size_t)sm->L, sizeof *rp->layer_ns);
        if (!rp->layer_ns) return kv_err(sm->e, "out of memory");
    }
    sm->res->pool_tokens = (uint64_t)sm->rep[0].pool_cap;
    sm->tab_cap = 1024;
    sm->tab = calloc(sm->tab_cap, sizeof *sm->tab);
    if (!sm->tab) return kv_err(sm->e, "out of memory");
    return 0;
}

static void sim_teardown(Sim *sm)
{
    if (sm->rep) {
        for (int i = 0; i < sm->R; i++) {
            Replica *rp = &sm->rep[i];
            for (size_t k = 0; k < rp->q_len; k++) request_free(rp->queue[(rp->q_head + k) % rp->q_cap]);
            for (int k = 0; k < rp->n_active; k++) request_free(rp->active[k]);
            free(rp->queue);
            free(rp->active);
            free(rp->items);
            free(rp->layer_ns);
            Channel *chs[2 * SIM_MAX_STAGES + 3];
            int nch = 0;
            for (int s = 0; s < sm->S; s++) {
                chs[nch++] = &rp->h2d[s];
                chs[nch++] = &rp->d2h[s];
            }
            chs[nch++] = &rp->ssd;
            chs[nch++] = &rp->nic_in;
            chs[nch++] = &rp->nic_out;
            for (int k = 0; k < nch; k++) {
                Channel *c = chs[k];
                Unit *lists[3] = {c->hi_head, c->lo_head, c->cur};
                for (int j = 0; j < 3; j++) {
                    Unit *u = lists[j];
                    while (u) {
                        Unit *nx = j < 2 ? u->next : NULL;
                        free(u);
                        u = nx;
                    }
                }
            }
        }
        free(sm->rep);
    }
    /* pending events own requests (arrivals, releases) */
    Event ev;
    KvErr e2;
    while (sm->q.n && evq_pop(&sm->q, &ev, &e2) == 1)
        if (ev.kind == EV_ARRIVAL || ev.kind == EV_RELEASE) request_free(ev.obj);
    if (sm->tab) {
        for (size_t i = 0; i < sm->tab_cap; i++) {
            Session *s = sm->tab[i];
            if (!s) continue;
            Request *r = s->pend_head;
            while (r) {
                Request *nx = r->next;
                request_free(r);
                r = nx;
            }
            free(s);
        }
        free(sm->tab);
    }
    while (sm->free_units) {
        Unit *nx = sm->free_units->next;
        free(sm->free_units);
        sm->free_units = nx;
    }
    evq_free(&sm->q);
    if (sm->trace) trace_close(sm->trace);
    if (sm->pol && sm->pol->fini) sm->pol->fini(sm->pstate);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sim_run(SimWorld *w, const char *policy, SimRowFn row_fn, void *row_ctx, SimProgressFn prog, void *prog_ctx,
            SimResult *out, KvErr *e)
{
    memset(out, 0, sizeof *out);
    const KvPolicyOps *pol = policy_find(policy, e);
    if (!pol) return -1;
    snprintf(out->policy, sizeof out->policy, "%s", pol->name);
    Sim sm_;
    Sim *sm = &sm_;
    memset(sm, 0, sizeof *sm);
    sm->w = w;
    sm->cfg = w->cfg;
    sm->pol = pol;
    sm->res = out;
    sm->e = e;
    sm->row_fn = row_fn;
    sm->row_ctx = row_ctx;
    sm->prog = prog;
    sm->prog_ctx = prog_ctx;
    double t0 = wall_now();
    int rc = -1;
    memset(w->cost.lookups, 0, sizeof w->cost.lookups);
    memset(w->cost.extrapolations, 0, sizeof w->cost.extrapolations);
    if (evq_init(&sm->q, e) != 0) return -1;
    if (sim_setup(sm) != 0) goto done;
    sm->env = (PolicyEnv){.ly = &w->ly, .hw = &w->hw, .platform = w->platform, .cost = &w->cost,
                          .iter_overhead_ns = sm->overhead_ns, .token_budget = sm->cfg->token_budget, .core = sm,
                          .est_layer_ns = est_layer_ns, .est_load_layer_ns = est_load_layer_ns,
                          .save_tier = w->save_tier, .ops = pol, .knobs = sim_config_knobs(sm->cfg, pol)};
    if (pol->init && pol->init(&sm->env, &sm->pstate, e) != 0) goto done;
    sm->save_bpt = pol->saved_bytes_per_token(sm->pstate, &sm->env);
    sm->save_mode = sim_config_save_mode(sm->cfg, pol);
    out->saved_bytes_per_token = sm->save_bpt;
    if (sm->save_bpt > 0 && !sm->use_dram && !sm->use_ssd && !sm->use_remote) {
        kv_err(e, "policy %s saves state but no tier is configured", pol->name);
        goto done;
    }
    TraceOptions to = {0};
    to.source = sm->cfg->trace;
    to.format = sim_trace_format_name(sm->cfg->trace_format);
    to.seed = sm->cfg->seed;
    to.session_rate_per_s = sm->cfg->session_rate;
    to.time_scale = sm->cfg->time_scale > 0 ? sm->cfg->time_scale : 1;
    to.think_ns = sm->cfg->think_ns;
    to.max_requests = sm->cfg->requests;
    to.max_context_tokens = sm->max_ctx;
    if (!(sm->trace = trace_open(&to, e))) goto done;
    if (pull_trace(sm) != 0) goto done;
    double next_prog = t0 + 1.0;
    Event ev;
    while (!sm->failed) {
        int prc = evq_pop(&sm->q, &ev, e);
        if (prc < 0) {
            sm->failed = 1;
            break;
        }
        if (prc == 0) break;
        out->events++;
        switch (ev.kind) {
        case EV_UNIT_DONE: {
            Channel *c = ev.obj;
            if (ev.seq == c->ev_seq) on_unit_done(sm, c);
            break;
        }
        case EV_ITER_RESUME: {
            Replica *rp = ev.obj;
            if (ev.seq == rp->iter_seq) iter_advance(sm, rp);
            break;
        }
        case EV_ITER_DONE: {
            Replica *rp = ev.obj;
            if (ev.seq == rp->iter_seq) iter_done(sm, rp);
            break;
        }
        case EV_ARRIVAL:
            on_arrival(sm, ev.obj);
            break;
        case EV_RELEASE:
            release_request(sm, ev.obj);
            break;
        case EV_FORM:
            form_iteration(sm, ev.obj);
            break;
        }
        if (prog && (out->events & 4095) == 0) {
            double now = wall_now();
            if (now >= next_prog) {
                next_prog = now + 1.0;
                double frac = sm->cfg->requests > 0 ? (double)sm->done_requests / (double)sm->cfg->requests : -1;
                prog(prog_ctx, frac, sm->done_requests, evq_now(&sm->q));
            }
        }
    }
    if (sm->failed) goto done;
    /* everything released must have finished */
    for (int i = 0; i < sm->R; i++)
        if (sm->rep[i].q_len || sm->rep[i].n_active) {
            kv_err(e, "internal: replica %d ended with %zu queued and %d active requests (deadlock)", i, sm->rep[i].q_len,
                   sm->rep[i].n_active);
            goto done;
        }
    out->sim_end_ns = evq_now(&sm->q);
    out->sessions = sm->sessions_seen;
    out->truncated = (uint64_t)trace_truncated_count(sm->trace);
    double T = (double)(out->sim_end_ns > 0 ? out->sim_end_ns : 1);
    for (int s = 0; s < sm->S; s++) {
        double g = 0, h = 0, d = 0;
        for (int i = 0; i < sm->R; i++) {
            g += sm->rep[i].busy_stage_ns[s];
            h += sm->rep[i].h2d[s].busy_ns;
            d += sm->rep[i].d2h[s].busy_ns;
        }
        out->util_gpu[s] = g / (T * sm->R);
        out->util_h2d[s] = h / (T * sm->R);
        out->util_d2h[s] = d / (T * sm->R);
    }
    for (int i = 0; i < sm->R; i++) {
        out->util_ssd += sm->rep[i].ssd.busy_ns / (T * sm->R);
        out->util_nic_in += sm->rep[i].nic_in.busy_ns / (T * sm->R);
        out->util_nic_out += sm->rep[i].nic_out.busy_ns / (T * sm->R);
    }
    out->extrapolations = cost_extrapolations_total(&w->cost);
    memcpy(out->extrapolations_op, w->cost.extrapolations, sizeof out->extrapolations_op);
    if (pol->notes) pol->notes(sm->pstate, out->policy_notes, sizeof out->policy_notes);
    rc = 0;
done:
    sim_teardown(sm);
    out->wall_s = wall_now() - t0;
    return rc;
}
