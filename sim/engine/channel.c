/* channel.c — IO channels and transfer units (the model is described in channel.h).
 *
 * Responsible for: the channel table (kind → name, one per stage or one per replica), queueing,
 * picking the next unit (stalled load, else the policy's io_pick, else FIFO; loads before saves),
 * service at the unit's rate (SSD striping and mixing, both-ways slowdown), re-arming on rate changes, moving
 * a unit to its next hop and calling its done callback after the last; the unit free list.
 * Not responsible for: what a unit is for (its creator's callback), result counters (metrics.c).
 * Invariants (SIM_CHECK): a unit starts only from US_QUEUED at the channel of its current hop and
 * only on an idle channel; a completion event that matches the armed sequence finds a unit in
 * service; a unit is enqueued only new or after a hop, freed only after its last hop (served once).
 * A run (ch_extend_run) is one queue entry for several consecutive layers of a request's part, all
 * alike but for the layer: pick_load serves its first layer as a unit of its own (a copy) and
 * leaves the rest in place, so the FIFO order, the counts and the stalled-load scan (the same
 * request for the whole run) are those of the units it stands for.
 * Complexity: O(1) per operation, O(min(waiting entries, 64)) to pick among waiting loads.
 */
#include "sim/engine/channel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

const SimChannelRow sim_channel_rows[CH_COUNT] = {
    [CH_H2D] = {"h2d", 1, "h2d", NULL},
    [CH_D2H] = {"d2h", 1, "d2h", NULL},
    [CH_SSD] = {"ssd", 0, "ssd_read", "ssd_write"},
    [CH_NIC_IN] = {"nic_in", 0, "net_in", NULL},
    [CH_NIC_OUT] = {"nic_out", 0, "net_out", NULL},
#define CH_MEMDEV_ROW_(ID, KEY, WHAT, WHATS) [CH_##ID] = {KEY, 0, KEY "_read", KEY "_write"},
    KV_MEMDEV_ROWS(CH_MEMDEV_ROW_)
};

void ch_init(Channel *c, int kind, int stage, double rate_bytes_per_s, double bidir_bytes_per_s, int64_t latency_ns)
{
    memset(c, 0, sizeof *c);
    c->name = ch_kind_name(kind);
    c->kind = kind;
    c->stage = stage;
    c->rate = rate_bytes_per_s / 1e9;
    c->rate_bidir = (bidir_bytes_per_s > 0 ? bidir_bytes_per_s : rate_bytes_per_s) / 1e9;
    c->rate_write = c->rate;
    c->mixed_eff = 1;
    c->latency_ns = c->latency_write_ns = latency_ns;
}

static int is_load(const Unit *u) { return u->kind == U_LOAD || u->kind == U_LOAD_TOK; }

int64_t ch_unit_latency_ns(const Channel *c, const Unit *u) { return ch_unit_reads(u) ? c->latency_ns : c->latency_write_ns; }

/* whether a unit of the other direction than u (u reads: a write; u writes: a read) waits in c's queues */
static int other_direction_waits(const Channel *c, const Unit *u)
{
    return ch_unit_reads(u) ? c->nlo > c->nlo_read : c->nhi + c->nlo_read > 0;
}

static double unit_rate(const Channel *c, const Unit *u)
{
    if (c->n_drives > 0) {
        /* a transfer smaller than n stripes keeps only some drives busy */
        double r = ch_unit_reads(u) ? c->rate : c->rate_write;
        double pieces = ceil(u->bytes[u->hop] / (u->stripe_bytes > 0 ? u->stripe_bytes : c->stripe_bytes));
        if (pieces < c->n_drives) r = r * pieces / c->n_drives;
        /* reads and writes mixed on the drives: the measured share of taking turns' throughput */
        if (c->mixed_eff < 1 && other_direction_waits(c, u)) r *= c->mixed_eff;
        return r;
    }
    if (c->peer && c->peer->cur) return c->rate_bidir;
    return c->rate;
}

/* arm c's completion for the unit in flight (inline in start and rerate: its body is shorter than
 * a call's register saves) */
static inline __attribute__((always_inline)) void schedule(Sim *sm, Channel *c)
{
    double t = c->cur_left / c->cur_rate;
    int64_t dt = t < 0x1p62 ? (int64_t)ceil(t - 1e-9) : INT64_MAX; /* (past the clock's limit: refused) */
    if (dt < 0) dt = 0;
    if (sm->ref_off & SIM_REF_LAZY_REARM) c->ev_seq = sim_push(sm, t_add(sim_now(sm), dt), EV_UNIT_DONE, c, 0); /* tests' reference */
    else c->ev_seq = sim_arm(sm, &c->tm, t_add(sim_now(sm), dt), EV_UNIT_DONE, c);
}

/* the rate of the unit in flight changes (the other direction started or stopped) */
static void rerate(Sim *sm, Channel *c)
{
    if (!c->cur) return;
    int64_t now = sim_now(sm);
    c->cur_left -= (double)(now - c->cur_since) * c->cur_rate;
    if (c->cur_left < 0) c->cur_left = 0;
    c->cur_since = now;
    double nr = unit_rate(c, c->cur);
    if (nr == c->cur_rate) return;
    c->cur_rate = nr;
    schedule(sm, c);
}

/* a layer load joins (+1) or leaves (-1) a load queue: its request's hi_loads, and the Sim's count of
 * those whose request is in an iteration (what lets pick_load skip its scan) */
static void hi_load_count(Sim *sm, const Unit *u, int d)
{
    u->r->hi_loads += d;
    if (u->r->in_iter) sm->hi_loads_in_iter += d;
}

static Unit *unit_alloc(Sim *sm);

/* the policy's choice among the first 64 queued loads (>= 2 of them): the unit, *prev the one
 * before it (NULL: the head). Apart from pick_load: its 4 KiB frame stays off the common path. */
static __attribute__((noinline)) Unit *pick_policy(Sim *sm, Channel *c, Unit **prev)
{
    IoChoice ch[64]; /* io_pick reads the first n (>= 2): not zeroed (4 KiB at every start) */
    Unit *us[64];
    int n = 0;
    ch[0] = (IoChoice){0};
    for (Unit *x = c->hi_head; x && n < 64; x = x->next) {
        us[n] = x;
        ch[n] = (IoChoice){x->r ? x->r->id : 0, x->r ? rq_remaining_restore_tokens(x->r) : 0, x->layer,
                           (uint64_t)x->bytes[x->hop], x->enq_ns, x->r ? x->r->hist : 0,
                           x->r ? x->r->arrival_ns : 0, sim_now(sm)};
        n++;
    }
    int k = sm->pol->io_pick(sm->pstate, ch, n);
    if (k < 0 || k >= n) k = 0;
    *prev = k ? us[k - 1] : NULL;
    return us[k];
}

/* the next load to serve: one an iteration in flight waits for (the GPU is stalled on it), else the
 * policy's choice among the first 64 (default FIFO); unlinked from the queue */
static inline Unit *pick_load(Sim *sm, Channel *c)
{
    Unit *prev = NULL, *u = c->hi_head;
    Unit *bp = NULL, *bu = NULL;
    if (sm->hi_loads_in_iter > 0) /* else no queued layer load, here or elsewhere, is one an iteration waits for */
        for (bu = c->hi_head; bu && !(bu->kind == U_LOAD && bu->r->in_iter); bu = bu->next) bp = bu;
    if (bu) {
        u = bu;
        prev = bp;
    } else if (sm->pol->io_pick && c->nhi > 1) {
        u = pick_policy(sm, c, &prev);
    }
    if (u->run_left > 0) { /* a run: its first layer served as a unit of its own, the rest stays in place */
        Unit *v = unit_alloc(sm);
        if (!v) return NULL;
        *v = *u;
        v->run_left = 0;
        u->layer++;
        u->run_left--;
        u = v;
    } else {
        if (prev) prev->next = u->next;
        else c->hi_head = u->next;
        if (c->hi_tail == u) c->hi_tail = prev;
    }
    c->nhi--;
    if (u->kind == U_LOAD) hi_load_count(sm, u, -1);
    return u;
}

static void start(Sim *sm, Channel *c)
{
    if (c->cur) return;
    Unit *u;
    if (c->hi_head) {
        if (!(u = pick_load(sm, c))) return; /* (out of memory splitting a run: the Sim failed) */
    } else if (c->lo_head) {
        u = c->lo_head;
        c->lo_head = u->next;
        if (!c->lo_head) c->lo_tail = NULL;
        c->nlo--;
        if (ch_unit_reads(u)) c->nlo_read--;
    } else {
        return;
    }
    SIM_CHECK(sm, u->state == US_QUEUED && u->chain[u->hop] == c); /* served once, by its own channel */
    u->state = US_SERVING;
    u->next = NULL;
    c->cur = u;
    c->cur_since = sim_now(sm);
    c->busy_since = c->cur_since;
    c->cur_rate = unit_rate(c, u);
    c->cur_left = u->bytes[u->hop] + (double)ch_unit_latency_ns(c, u) * c->cur_rate;
    schedule(sm, c);
    if (c->peer) rerate(sm, c->peer);
}

void ch_enqueue(Sim *sm, Unit *u)
{
    SIM_CHECK(sm, (u->state == US_NEW || u->state == US_SERVING) && u->hop < u->nhops && u->chain[u->hop]);
    if (sm->failed) return;
    Channel *c = u->chain[u->hop];
    u->state = US_QUEUED;
    u->enq_ns = sim_now(sm);
    u->next = NULL;
    if (is_load(u)) {
        if (c->hi_tail) c->hi_tail->next = u;
        else c->hi_head = u;
        c->hi_tail = u;
        c->nhi++;
        if (u->kind == U_LOAD) hi_load_count(sm, u, 1);
    } else {
        if (c->lo_tail) c->lo_tail->next = u;
        else c->lo_head = u;
        c->lo_tail = u;
        c->nlo++;
        if (ch_unit_reads(u)) c->nlo_read++;
    }
    if (c->cur) { /* busy: a unit of the other direction now waiting slows the one in flight (mixing) */
        if (c->mixed_eff < 1) rerate(sm, c);
        return;
    }
    start(sm, c);
}

int ch_run_open(const Sim *sm, const Unit *u, int layer)
{
    const Channel *c = u->chain[u->hop];
    /* (no io_pick to show the queue's units to, no schedule listing each unit as it is made; a
     * queued unit on a busy channel: ch_enqueue's start would do nothing; at the tail, enqueued at
     * this instant: the unit appended would follow u's last layer with u's enq_ns) */
    return !sm->failed && !sm->pol->io_pick && !sm->observer && u->state == US_QUEUED && u->kind == U_LOAD && c->hi_tail == u &&
           c->cur && u->enq_ns == sim_now(sm) && u->layer + u->run_left + 1 == layer;
}

void ch_run_extend(Sim *sm, Unit *u, int n)
{
    u->run_left += n;
    sm->load_runs += (uint64_t)n;
    u->chain[u->hop]->nhi += n;
    hi_load_count(sm, u, n);
}

int ch_extend_run(Sim *sm, Unit *u, int layer)
{
    if (!ch_run_open(sm, u, layer)) return 0;
    ch_run_extend(sm, u, 1);
    return 1;
}

void ch_on_event(Sim *sm, Channel *c, uint64_t seq)
{
    if (seq != c->ev_seq) { /* a re-armed timer's older event is cancelled, never delivered */
        SIM_CHECK(sm, sm->ref_off & SIM_REF_LAZY_REARM); /* (the tests' reference: popped and ignored) */
        return;
    }
    Unit *u = c->cur;
    SIM_CHECK(sm, u && u->state == US_SERVING); /* one unit at a time: the one this event was armed for */
    if (sm->failed) return;
    int64_t now = sim_now(sm);
    c->cur = NULL;
    c->busy_ns += (double)(now - c->busy_since);
    c->bytes += u->bytes[u->hop];
    metrics_on_unit(sm, c, u);
    if (sm->observer) sm->observer->hop(sm, c, u);
    if (c->peer) rerate(sm, c->peer);
    u->hop++;
    if (u->hop < u->nhops) ch_enqueue(sm, u);
    else u->done(sm, u);
    start(sm, c);
}

void ch_free_units(Channel *c)
{
    Unit *lists[3] = {c->hi_head, c->lo_head, c->cur};
    for (int j = 0; j < 3; j++) {
        Unit *u = lists[j];
        while (u) {
            Unit *nx = j < 2 ? u->next : NULL;
            free(u);
            u = nx;
        }
    }
    c->hi_head = c->hi_tail = c->lo_head = c->lo_tail = c->cur = NULL;
}

/* a unit from the free list, or a new one (NULL, the Sim failed: out of memory) */
static Unit *unit_alloc(Sim *sm)
{
    Unit *u = sm->free_units;
    if (u) sm->free_units = u->next;
    else u = malloc(sizeof *u);
    if (!u) sim_fail(sm, "out of memory");
    return u;
}

Unit *unit_new(Sim *sm)
{
    Unit *u = unit_alloc(sm);
    if (!u) return NULL;
    memset(u, 0, sizeof *u);
    u->state = US_NEW;
    return u;
}

Unit *unit_new_from(Sim *sm, const Unit *tmpl)
{
    Unit *u = unit_alloc(sm);
    if (!u) return NULL;
    *u = *tmpl;
    u->next = NULL;
    u->state = US_NEW;
    return u;
}

void unit_free(Sim *sm, Unit *u)
{
    SIM_CHECK(sm, u->state == US_SERVING && u->hop == u->nhops); /* done once, after its last hop */
    u->state = US_FREE;
    u->next = sm->free_units;
    sm->free_units = u;
}
