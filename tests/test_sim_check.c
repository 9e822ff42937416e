/* test_sim_check.c — the engine's checks: the accounting walker (sim_check) finds nothing wrong in
 * real runs of every policy over tiers that spill, and reports a corrupted counter (pool, tier
 * bytes, channel queue) naming it; the always-on SIM_CHECK and the lifecycle table end a run whose
 * state was corrupted, with the file and line. Corruption goes through the engine's test hook
 * (sim_test_set_hook: called at every iteration boundary, engine_int.h). */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "tests/harness.h"

typedef struct {
    int boundaries;    /* iteration boundaries seen */
    int at;            /* corrupt at this boundary (0: never) */
    int what;          /* which counter */
    int done;
    int evict_each_turn; /* the run's evict_each_turn */
} Hook;

enum { C_POOL, C_TIER, C_CHANNEL, C_POOL_ZERO, C_STATE };

static void hook(Sim *sm, void *ctx)
{
    Hook *h = ctx;
    h->boundaries++;
    if (!h->at || h->done || h->boundaries < h->at) return;
    Replica *rp = &sm->rep[0];
    switch (h->what) {
    case C_POOL: rp->pool_used += 16; h->done = 1; break;
    case C_TIER:
        if (rp->tier[TIER_DRAM].head) {
            rp->tier[TIER_DRAM].used_bytes += 1e6;
            h->done = 1;
        }
        break;
    case C_CHANNEL: rp->ch[CH_H2D][0].nhi++; h->done = 1; break;
    case C_POOL_ZERO:
        if (rp->n_active) {
            rp->pool_used = 0;
            h->done = 1;
        }
        break;
    case C_STATE: /* a request still restoring or prefilling marked done */
        for (int i = 0; i < rp->n_active && !h->done; i++)
            if (rp->active[i]->state == RQ_RESTORING || rp->active[i]->state == RQ_PREFILL) {
                rp->active[i]->state = RQ_DONE;
                h->done = 1;
            }
        break;
    }
}

static void check_config(SimConfig *c)
{
    sim_config_defaults(c);
    KvErr e;
    sim_config_set(c, "platform", "hcache-a100", &e);
    sim_config_set(c, "model", "Llama-2-7B", &e);
    sim_config_set(c, "store", "dram+ssd", &e);
    sim_config_set(c, "dram", "2GB", &e); /* DRAM spills to the SSDs */
    c->requests = 120;
    c->quiet = 1;
}

/* run `policy` with the hook (and the walker when check); returns sim_run's status, e the error */
static int run_hooked(TestCtx *t, const char *policy, Hook *h, int check, KvErr *e)
{
    SimConfig c;
    check_config(&c);
    c.evict_each_turn = h->evict_each_turn;
    SimWorld w;
    if (sim_world_open(&w, &c, e) != 0) {
        CHECK_MSG(0, "%s", e->msg);
        return -2;
    }
    SimResult res;
    sim_test_set_hook(hook, h, check);
    int rc = sim_run(&w, policy, NULL, NULL, NULL, NULL, &res, e);
    sim_test_set_hook(NULL, NULL, 0);
    sim_result_free(&res);
    sim_world_close(&w);
    return rc;
}

TEST(sim_check_walker_finds_nothing_in_real_runs)
{
    static const char *pols[] = {"recompute", "kv-offload", "hcache", "naive-hybrid", "cake", "cacheflow", "kv-quant", "ideal"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        Hook h = {0};
        KvErr e = {{0}};
        int rc = run_hooked(t, pols[i], &h, 1, &e);
        CHECK_MSG(rc == 0, "%s: %s", pols[i], e.msg);
        CHECK_MSG(h.boundaries > 10, "%s: %d iteration boundaries", pols[i], h.boundaries);
    }
}

TEST(sim_check_walker_reports_a_corrupted_pool)
{
    Hook h = {.at = 5, .what = C_POOL};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: replica 0: KV pool");
    CHECK_CONTAINS(e.msg, "admitted reservations and idle resident sessions account for");
}

TEST(sim_check_walker_reports_corrupted_tier_bytes)
{
    Hook h = {.at = 1, .what = C_TIER};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: tier dram (replica 0)");
    CHECK_CONTAINS(e.msg, "bytes counted in use");
}

TEST(sim_check_walker_reports_a_corrupted_channel_count)
{
    Hook h = {.at = 3, .what = C_CHANNEL};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "hcache", &h, 1, &e), -1);
    CHECK_CONTAINS(e.msg, "channel h2d/0: load queue counts");
}

TEST(sim_check_walker_off_misses_what_it_would_report)
{
    /* the same corruption of the tier bytes without the walker goes unnoticed (the run completes):
     * what the walker adds over the always-on checks */
    Hook h = {.at = 1, .what = C_TIER};
    KvErr e = {{0}};
#ifdef KV_DEBUG
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 0, &e), -1); /* debug builds always walk */
#else
    if (getenv("KVSIM_CHECK")) {
        SKIP("KVSIM_CHECK is set: the walker is on");
    }
    CHECK_MSG(run_hooked(t, "kv-offload", &h, 0, &e) == 0, "%s", e.msg);
#endif
    CHECK(h.done);
}

/* the walker forced on for the whole suite (make check-long, DEBUG=1) reports corruption first */
static int walker_forced(void)
{
#ifdef KV_DEBUG
    return 1;
#else
    const char *v = getenv("KVSIM_CHECK");
    return v && *v && strcmp(v, "0") != 0;
#endif
}

TEST(sim_check_always_on_pool_check_names_file_and_line)
{
    /* the pool emptied under admitted requests: their release at turn end drives it negative */
    Hook h = {.at = 2, .what = C_POOL_ZERO, .evict_each_turn = 1};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "recompute", &h, 0, &e), -1);
    CHECK(h.done);
    if (walker_forced() && strstr(e.msg, "sim_check: ")) { /* the walker may see it first */
        CHECK_CONTAINS(e.msg, "sim_check: replica 0: KV pool 0 tokens in use");
        return;
    }
    CHECK_CONTAINS(e.msg, "internal: sim/engine/session.c:");
    CHECK_CONTAINS(e.msg, "rp->pool_used >= 0");
}

TEST(sim_check_lifecycle_table_refuses_moves_out_of_done)
{
    Hook h = {.at = 2, .what = C_STATE};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "recompute", &h, 0, &e), -1);
    CHECK(h.done);
    if (walker_forced() && strstr(e.msg, "sim_check: ")) { /* the walker may see it first */
        CHECK_CONTAINS(e.msg, "is done");
        return;
    }
    CHECK_CONTAINS(e.msg, "lifecycle move done -> ");
    CHECK_CONTAINS(e.msg, "is not in the table");
}
