/* test_channel.c — sim/engine/channel.c on its own, without a simulation: service times (bytes /
 * rate + latency), loads before saves, FIFO within a class, the both-ways slowdown of a link, the
 * unit's own done callback after its last hop, the always-on checks (a unit enqueued while
 * queued, a unit freed before its last hop), runs of layer loads (ch_extend_run), and reads and
 * writes sharing one SSD (taking turns, or slowed by the drive's mixing share). */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "tests/harness.h"

typedef struct {
    Sim sm;
    SimResult res;
    KvPolicyOps pol;
    KvErr e;
    int order[8];
    int64_t at[8];
    int n;
} Bench;

static Bench *g_bench;
static Request g_req; /* the restoring request of U_LOAD units (not in an iteration) */

static void done_cb(Sim *sm, Unit *u)
{
    g_bench->order[g_bench->n] = u->layer;
    g_bench->at[g_bench->n++] = sim_now(sm);
    unit_free(sm, u);
}

static void bench_init(Bench *b)
{
    memset(b, 0, sizeof *b);
    b->pol.name = "test";
    b->sm.pol = &b->pol;
    b->sm.res = &b->res;
    b->sm.e = &b->e;
    evq_init(&b->sm.q, &b->e);
    g_bench = b;
}

static void bench_run(Bench *b)
{
    Event ev;
    while (!b->sm.failed && evq_pop(&b->sm.q, &ev, &b->e) == 1)
        if (ev.kind == EV_UNIT_DONE) ch_on_event(&b->sm, ev.obj, ev.seq);
}

static void bench_free(Bench *b)
{
    while (b->sm.free_units) {
        Unit *nx = b->sm.free_units->next;
        free(b->sm.free_units);
        b->sm.free_units = nx;
    }
    evq_free(&b->sm.q);
}

static Unit *mk(Bench *b, Channel *c, int kind, int id, double bytes)
{
    Unit *u = unit_new(&b->sm);
    u->kind = kind;
    u->layer = id;
    u->done = done_cb;
    u->chain[0] = c;
    u->bytes[0] = bytes;
    u->nhops = 1;
    if (kind == U_LOAD) u->r = &g_req;
    return u;
}

TEST(channel_serves_loads_first_fifo_with_latency)
{
    Bench b;
    bench_init(&b);
    Channel c;
    ch_init(&c, CH_H2D, 0, 1e9, 0, 100); /* 1 byte/ns, 100 ns latency */
    /* a save starts at once (the channel is idle); then two loads and another save wait */
    ch_enqueue(&b.sm, mk(&b, &c, U_SAVE, 0, 1000));
    ch_enqueue(&b.sm, mk(&b, &c, U_SAVE, 1, 1000));
    ch_enqueue(&b.sm, mk(&b, &c, U_LOAD_TOK, 2, 500));
    ch_enqueue(&b.sm, mk(&b, &c, U_LOAD_TOK, 3, 500));
    CHECK_EQ_I(c.nhi, 2);
    CHECK_EQ_I(c.nlo, 1);
    bench_run(&b);
    CHECK_MSG(!b.sm.failed, "%s", b.e.msg);
    CHECK_EQ_I(b.n, 4);
    int want[4] = {0, 2, 3, 1};
    int64_t at[4] = {1100, 1700, 2300, 3400};
    for (int i = 0; i < 4 && i < b.n; i++) {
        CHECK_EQ_I(b.order[i], want[i]);
        CHECK_EQ_I(b.at[i], at[i]);
    }
    CHECK_NEAR(b.res.ch_bytes[CH_H2D][CH_READ], 3000, 0, 0);
    CHECK_NEAR(c.busy_ns, 3400, 0, 0);
    bench_free(&b);
}

TEST(channel_both_ways_rates_and_chains)
{
    Bench b;
    bench_init(&b);
    Channel h, d, ssd;
    ch_init(&h, CH_H2D, 0, 2e9, 1e9, 0); /* 2 bytes/ns alone, 1 while the other direction is busy */
    ch_init(&d, CH_D2H, 0, 2e9, 1e9, 0);
    h.peer = &d;
    d.peer = &h;
    /* H2D alone for 1000 bytes: 500 ns; a D2H unit of 1000 bytes starts with it and both slow down */
    ch_enqueue(&b.sm, mk(&b, &h, U_LOAD, 0, 1000));
    ch_enqueue(&b.sm, mk(&b, &d, U_SAVE, 1, 1000));
    bench_run(&b);
    CHECK_EQ_I(b.n, 2);
    CHECK_EQ_I(b.at[0], 1000);
    CHECK_EQ_I(b.at[1], 1000);
    /* a two-hop chain: the SSD array (4 drives, 1 byte/ns, striped 100 bytes: a 200-byte read uses
     * 2 drives, half the rate), then H2D; done once, after the last hop */
    ch_init(&ssd, CH_SSD, 0, 1e9, 0, 0);
    ssd.n_drives = 4;
    ssd.stripe_bytes = 100;
    Unit *u = mk(&b, &ssd, U_LOAD, 2, 200);
    u->chain[1] = &h;
    u->bytes[1] = 200;
    u->nhops = 2;
    ch_enqueue(&b.sm, u);
    bench_run(&b);
    CHECK_EQ_I(b.n, 3);
    CHECK_EQ_I(b.at[2], 1000 + 400 + 100);
    CHECK_NEAR(b.res.ch_bytes[CH_SSD][CH_READ], 200, 0, 0);
    bench_free(&b);
}

/* One drive (read 2 B/ns + 80 ns, write 1 B/ns + 20 ns) and a unit that reaches it at 300 ns
 * (a first hop of 300 bytes at 1 B/ns on another channel) while another is in flight there. */
typedef struct {
    Bench b;
    Channel ssd, delay;
} MixBench;

static void mix_init(MixBench *m, double mixed_eff)
{
    bench_init(&m->b);
    ch_init(&m->ssd, CH_SSD, 0, 2e9, 0, 80);
    m->ssd.rate_write = 1;
    m->ssd.latency_write_ns = 20;
    m->ssd.n_drives = 1;
    m->ssd.stripe_bytes = 1e12;
    m->ssd.mixed_eff = mixed_eff;
    ch_init(&m->delay, CH_D2H, 0, 1e9, 0, 0);
}

/* a unit of `kind` whose hop on the drive (of `bytes`) comes after 300 ns on the delay channel */
static Unit *mk_late(MixBench *m, int kind, int id, double bytes)
{
    Unit *u = mk(&m->b, &m->delay, kind, id, 300);
    u->chain[1] = &m->ssd;
    u->bytes[1] = bytes;
    u->nhops = 2;
    return u;
}

/* Reads and writes on one SSD, closed forms to the ns (each hop's completion is rounded up to a
 * whole ns: within 2 ns). Taking turns (mixed_eff 1): a load that arrives while a save flushes
 * waits for it and then runs at the read rate. With the drive's mixing share e, the transfer in
 * flight runs at e of its rate from the moment one of the other direction waits: the save's work
 * left at the load's arrival takes 1/e as long, and so the load completes that much later. Two
 * reads (a load in flight, a spill reading out of the tier) do not mix. */
TEST(channel_ssd_reads_and_writes_share_the_drive)
{
    const double e = 0.85, save = 6000 + 20 * 1.0, load = 4000 + 80 * 2.0; /* bytes, plus latency × rate */
    for (int k = 0; k < 2; k++) {
        const double eff = k ? e : 1;
        /* a save flushing; a load arrives at 300 ns */
        MixBench m;
        mix_init(&m, eff);
        ch_enqueue(&m.b.sm, mk(&m.b, &m.ssd, U_SAVE, 0, 6000));
        ch_enqueue(&m.b.sm, mk_late(&m, U_LOAD_TOK, 1, 4000));
        bench_run(&m.b);
        CHECK_MSG(!m.b.sm.failed, "%s", m.b.e.msg);
        CHECK_EQ_I(m.b.n, 2);
        const double save_end = 300 + (save - 300 * 1.0) / (eff * 1.0), load_end = save_end + load / 2.0;
        if (m.b.n == 2) {
            CHECK_EQ_I(m.b.order[0], 0);
            CHECK_NEAR((double)m.b.at[0], save_end, 0, 2);
            CHECK_NEAR((double)m.b.at[1], load_end, 0, 2);
        }
        /* the load's delay from the mixing: (1/e - 1) × the save's work left at its arrival */
        if (k) CHECK_NEAR((double)m.b.at[1] - (save + load / 2.0), (1 / e - 1) * (save - 300), 0, 2);
        bench_free(&m.b);

        /* a load reading; a save arrives at 300 ns: the load slows, the save then runs alone */
        mix_init(&m, eff);
        ch_enqueue(&m.b.sm, mk(&m.b, &m.ssd, U_LOAD_TOK, 0, 4000));
        ch_enqueue(&m.b.sm, mk_late(&m, U_SAVE, 1, 6000));
        bench_run(&m.b);
        CHECK_EQ_I(m.b.n, 2);
        const double read_end = 300 + (load - 300 * 2.0) / (eff * 2.0);
        if (m.b.n == 2) {
            CHECK_NEAR((double)m.b.at[0], read_end, 0, 2);
            CHECK_NEAR((double)m.b.at[1], read_end + save / 1.0, 0, 2);
        }
        bench_free(&m.b);

        /* a load reading; a spill out of the tier (its hop here reads) arrives: no mixing */
        mix_init(&m, eff);
        ch_enqueue(&m.b.sm, mk(&m.b, &m.ssd, U_LOAD_TOK, 0, 4000));
        Unit *sp = mk_late(&m, U_SPILL, 1, 6000);
        sp->read_hops = 2;
        ch_enqueue(&m.b.sm, sp);
        CHECK_EQ_I(m.ssd.nlo_read, 0); /* still on its first hop */
        bench_run(&m.b);
        CHECK_EQ_I(m.b.n, 2);
        if (m.b.n == 2) {
            CHECK_NEAR((double)m.b.at[0], load / 2.0, 0, 1);
            CHECK_NEAR((double)m.b.at[1], load / 2.0 + 6000 / 2.0 + 80, 0, 2);
        }
        CHECK_EQ_I(m.ssd.nlo_read, 0);
        bench_free(&m.b);
    }
}

TEST(channel_checks_units_served_once)
{
    Bench b;
    bench_init(&b);
    Channel c;
    ch_init(&c, CH_D2H, 0, 1e9, 0, 0);
    Unit *u = mk(&b, &c, U_SAVE, 0, 100);
    Unit *v = mk(&b, &c, U_SAVE, 1, 100);
    ch_enqueue(&b.sm, u);
    ch_enqueue(&b.sm, v);
    ch_enqueue(&b.sm, v); /* already queued */
    CHECK(b.sm.failed);
    CHECK_CONTAINS(b.e.msg, "internal: sim/engine/channel.c:");
    CHECK_CONTAINS(b.e.msg, "u->state == US_NEW");
    /* freeing a unit that was never served */
    Bench b2;
    bench_init(&b2);
    Unit *w = unit_new(&b2.sm);
    w->nhops = 1;
    unit_free(&b2.sm, w);
    CHECK(b2.sm.failed);
    CHECK_CONTAINS(b2.e.msg, "u->state == US_SERVING && u->hop == u->nhops");
    bench_free(&b2);
    g_bench = &b;
    bench_run(&b); /* failed: serves nothing more */
    ch_free_units(&c);
    bench_free(&b);
}

/* A run: one queue entry for a request's consecutive layers, extended only at the tail of its queue
 * by the next layer, served layer by layer in FIFO order as the units it stands for (an in-iteration
 * request's load behind it still goes first), counted in nhi and the request's hi_loads. */
TEST(channel_runs_of_layer_loads)
{
    Bench b;
    bench_init(&b);
    memset(&g_req, 0, sizeof g_req);
    Request r2;
    memset(&r2, 0, sizeof r2);
    Channel c;
    ch_init(&c, CH_H2D, 0, 1e9, 0, 0); /* 1 byte/ns */
    ch_enqueue(&b.sm, mk(&b, &c, U_LOAD, 0, 100)); /* starts at once: no run to extend */
    Unit *a = c.cur;
    CHECK(!ch_extend_run(&b.sm, a, 1));
    Unit *u = mk(&b, &c, U_LOAD, 1, 100);
    ch_enqueue(&b.sm, u);
    CHECK(ch_extend_run(&b.sm, u, 2));
    CHECK(ch_extend_run(&b.sm, u, 3));
    CHECK(!ch_extend_run(&b.sm, u, 5)); /* not its next layer */
    CHECK_EQ_I(c.nhi, 3);
    CHECK_EQ_I(g_req.hi_loads, 3);
    Unit *x = mk(&b, &c, U_LOAD, 6, 100);
    x->r = &r2;
    ch_enqueue(&b.sm, x);
    CHECK(!ch_extend_run(&b.sm, u, 4)); /* no longer the tail: layer 4 would follow x */
    CHECK_EQ_I(c.nhi, 4);
    CHECK_EQ_U(b.sm.load_runs, 2);
    rq_set_in_iter(&b.sm, &r2, 1); /* x's request is in the iteration: x is served next */
    bench_run(&b);
    CHECK_MSG(!b.sm.failed, "%s", b.e.msg);
    CHECK_EQ_I(b.n, 5);
    int want[5] = {0, 6, 1, 2, 3};
    for (int i = 0; i < 5 && i < b.n; i++) {
        CHECK_EQ_I(b.order[i], want[i]);
        CHECK_EQ_I(b.at[i], 100 * (i + 1));
    }
    CHECK_EQ_I(c.nhi, 0);
    CHECK(!c.hi_head && !c.hi_tail);
    CHECK_EQ_I(g_req.hi_loads, 0);
    CHECK_EQ_I(r2.hi_loads, 0);
    CHECK_EQ_I(b.sm.hi_loads_in_iter, 0);
    CHECK_NEAR(b.res.ch_bytes[CH_H2D][CH_READ], 500, 0, 0);
    bench_free(&b);
}
