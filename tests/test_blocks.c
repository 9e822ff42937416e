/* test_blocks.c — KV blocks on demand with preemption (sim/engine/blocks.c, alloc=ondemand):
 *  - closed form: two requests whose whole turns each take 2/3 of the pool decode side by side; the
 *    later-admitted one is preempted exactly once, at the first decode step where both contexts
 *    need more than the pool, and (recompute) re-prefills exactly its context so far, or (swap)
 *    copies exactly its blocks out and back; alloc=reserve runs them one after the other instead;
 *  - under a pool too small for the load (every policy, recompute and swap, one and two stages):
 *    the pool never exceeds its capacity and the accounting walker holds at every iteration
 *    boundary and at the end (pool used = admitted requests' blocks + idle sessions' resident KV),
 *    every request is delivered with all its tokens (the TBT gaps add up to output − 1 per
 *    request), swap-out bytes = swap-in bytes;
 *  - with a pool that holds every turn at once nothing is preempted and every row equals
 *    alloc=reserve's exactly; an isolated request's rows are unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "tests/simtest.h"

/* every row: counts and sums, and the first 64 rows kept */
typedef struct {
    Rows keep;
    uint64_t n;
    int64_t gaps;         /* sum of output − 1 */
    int64_t blocks_ctx;   /* sum of the turns' whole-context blocks */
    int64_t preemptions;
} Agg;

static int agg_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    Agg *a = ctx;
    simtest_keep_row(&a->keep, r, e);
    a->n++;
    a->gaps += r->output_tokens - 1;
    a->blocks_ctx += (r->history_tokens + r->new_tokens + r->output_tokens + 15) / 16 * 16;
    a->preemptions += r->preemptions;
    return 0;
}

/* the test hook: the pool within capacity at every boundary (the walker runs too: check = 1) */
typedef struct {
    int boundaries, over;
} PoolHook;

static void pool_hook(Sim *sm, void *ctx)
{
    PoolHook *h = ctx;
    h->boundaries++;
    for (int i = 0; i < sm->R; i++)
        if (sm->rep[i].pool_used < 0 || sm->rep[i].pool_used > sm->rep[i].pool_cap) h->over++;
}

static int run_agg(TestCtx *t, SimWorld *w, const char *policy, Agg *a, SimResult *res)
{
    KvErr e;
    memset(a, 0, sizeof *a);
    if (sim_run(w, policy, agg_row, a, NULL, NULL, res, &e) != 0) {
        CHECK_MSG(0, "%s: %s", policy, e.msg);
        return -1;
    }
    return 0;
}

static int64_t blk(int64_t tokens) { return (tokens + 15) / 16 * 16; }

/* two sessions of one turn each, both arriving at t = 0: nnew tokens in, nout out */
static void two_config(TestCtx *t, SimConfig *c, int64_t nnew, int64_t nout, const char *mem_util)
{
    sim_config_defaults(c);
    char text[256];
    snprintf(text, sizeof text,
             "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
             "a,0,0,%lld,%lld,0\nb,0,0,%lld,%lld,0\n",
             (long long)nnew, (long long)nout, (long long)nnew, (long long)nout);
    snprintf(c->trace, sizeof c->trace, "%s", test_write_file(t, "two.csv", text));
    simtest_set(t, c, "platform", "hcache-a100");
    simtest_set(t, c, "model", "Llama-2-7B");
    simtest_set(t, c, "mem_util", mem_util);
    simtest_set(t, c, "max_context", "65536");
    c->quiet = 1;
}

TEST(blocks_two_long_outputs_preempt_once_closed_form)
{
    SimConfig c;
    SimWorld w;
    KvErr e;
    const int64_t nnew = 16;
    two_config(t, &c, nnew, 100, "0.45");
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    SimCapacity cap;
    sim_world_capacity(&w, &cap);
    int64_t P = cap.pool_tokens;
    sim_world_close(&w);
    CHECK(P > 2000);
    /* each turn's whole context takes 2/3 of the pool: the pool holds one and a half */
    int64_t nout = P * 2 / 3 - nnew;
    /* the decode step (out_done = j before it) where both need more than the pool: the first j
     * with 2 · blocks(nnew + j + 1) > P; the earlier-admitted request takes the block, the later
     * one is preempted holding blocks(nnew + j) */
    int64_t j = 0;
    while (2 * blk(nnew + j + 1) <= P) j++;
    const char *modes[2] = {"recompute", "swap"};
    for (int m = 0; m < 2; m++) {
        two_config(t, &c, nnew, nout, "0.45");
        simtest_set(t, &c, "preempt", modes[m]);
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        Agg a;
        SimResult res;
        if (run_agg(t, &w, "recompute", &a, &res) == 0) {
            CHECK_EQ_U(a.n, 2);
            CHECK_EQ_U(res.preemptions, 1);
            CHECK_EQ_U(res.preempted_requests, 1);
            CHECK_EQ_I(a.preemptions, 1);
            CHECK_EQ_I((int64_t)res.tbt.n, a.gaps); /* every token of both delivered */
            /* the preempted one is the later-admitted b: a finishes first */
            CHECK(a.keep.rows[0].preemptions == 0 && a.keep.rows[1].preemptions == 1);
            double kv = (double)model_kv_bytes_per_token(&w.ly);
            if (m == 0) {
                CHECK_EQ_U(res.preempt_recomputed_tokens, (uint64_t)(nnew + j));
                CHECK(res.swap_out_bytes == 0 && res.swap_in_bytes == 0);
            } else {
                CHECK_EQ_U(res.preempt_recomputed_tokens, 0);
                CHECK_NEAR(res.swap_out_bytes, (double)blk(nnew + j) * kv, 1e-12, 0);
                CHECK_NEAR(res.swap_in_bytes, res.swap_out_bytes, 1e-12, 0);
            }
            /* the preempted request's largest gap spans the other's remaining decode */
            CHECK(a.keep.rows[1].tbt_max_ns > 100 * (int64_t)(a.keep.rows[1].tbt_mean_ns));
            sim_result_free(&res);
        }
        sim_world_close(&w);
    }
    /* alloc=reserve: the second waits for the first (never preempted); its queue time is the first's run */
    two_config(t, &c, nnew, nout, "0.45");
    simtest_set(t, &c, "alloc", "reserve");
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    Agg a;
    SimResult res;
    if (run_agg(t, &w, "recompute", &a, &res) == 0) {
        CHECK_EQ_U(res.preemptions, 0);
        CHECK_EQ_U(a.n, 2);
        CHECK(a.keep.rows[1].queue_ns >= a.keep.rows[0].done_ns - a.keep.rows[0].arrival_ns - 1000);
        sim_result_free(&res);
    }
    sim_world_close(&w);
}

/* many sessions with long outputs on a small pool */
static const char *stress_trace(TestCtx *t)
{
    static char buf[16384];
    char *p = buf;
    p += sprintf(p, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 1; i <= 40; i++) p += sprintf(p, "s%d,0,%d,%d,%d,0\n", i, i / 10, 200 + (i * 37) % 900, 300 + (i * 53) % 700);
    for (int i = 1; i <= 40; i++)
        p += sprintf(p, "s%d,1,%d,50,%d,%d\n", i, 20 + i / 10, 200 + (i * 31) % 500, 1200 + (i * 37) % 900);
    return test_write_file(t, "stress.csv", buf);
}

TEST(blocks_small_pool_every_policy_conserves_and_delivers)
{
    const char *trace = stress_trace(t);
    const char *policies[] = {"recompute", "kv-offload", "hcache", "cake", "cacheflow", "ideal"};
    int preempted_runs = 0;
    for (int m = 0; m < 2; m++)
        for (int pp = 1; pp <= 2; pp++) {
            SimConfig c;
            sim_config_defaults(&c);
            snprintf(c.trace, sizeof c.trace, "%s", trace);
            simtest_set(t, &c, "platform", "hcache-a100");
            simtest_set(t, &c, "model", "Llama-2-7B");
            simtest_set(t, &c, "mem_util", "0.42");
            simtest_set(t, &c, "preempt", m ? "swap" : "recompute");
            c.pp = pp;
            c.quiet = 1;
            SimWorld w;
            KvErr e;
            if (sim_world_open(&w, &c, &e) != 0) {
                CHECK_MSG(0, "%s", e.msg);
                return;
            }
            for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
                PoolHook h = {0, 0};
                sim_test_set_hook(pool_hook, &h, 1);
                Agg a;
                SimResult res;
                int rc = run_agg(t, &w, policies[k], &a, &res);
                sim_test_set_hook(NULL, NULL, 0);
                if (rc != 0) continue;
                CHECK_MSG(h.over == 0, "%s preempt=%s pp=%d: the pool went past its capacity at %d boundaries", policies[k],
                          m ? "swap" : "recompute", pp, h.over);
                CHECK(h.boundaries > 0);
                CHECK_EQ_U(a.n + res.dropped, 80);
                CHECK_EQ_I((int64_t)res.tbt.n, a.gaps);
                CHECK_EQ_I(a.preemptions, (int64_t)res.preemptions);
                CHECK(res.hbm_peak_tokens <= res.pool_tokens);
                CHECK_NEAR(res.swap_out_bytes, res.swap_in_bytes, 1e-12, 0);
                if (m == 0) CHECK(res.swap_out_bytes == 0);
                else CHECK(res.preempt_recomputed_tokens == 0);
                preempted_runs += res.preemptions > 0;
                sim_result_free(&res);
            }
            sim_world_close(&w);
        }
    CHECK(preempted_runs >= 20); /* the pool is small enough that preemption is exercised */
}

static int rows_equal(const SimRequestRow *x, const SimRequestRow *y)
{
    return x->id == y->id && x->arrival_ns == y->arrival_ns && x->queue_ns == y->queue_ns && x->restore_ns == y->restore_ns &&
           x->prefill_ns == y->prefill_ns && x->ttft_ns == y->ttft_ns && x->done_ns == y->done_ns &&
           x->tbt_mean_ns == y->tbt_mean_ns && x->tbt_max_ns == y->tbt_max_ns && x->recomputed_tokens == y->recomputed_tokens &&
           x->loaded_tokens == y->loaded_tokens && !strcmp(x->restore_from, y->restore_from) && x->preemptions == y->preemptions;
}

TEST(blocks_large_pool_equals_reserve_exactly)
{
    const char *policies[] = {"recompute", "kv-offload", "hcache", "cacheflow"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        Agg a[2];
        SimResult res[2];
        int ok = 1;
        for (int alloc = 0; alloc < 2; alloc++) {
            SimConfig c;
            sim_config_defaults(&c);
            simtest_set(t, &c, "platform", "h200");
            simtest_set(t, &c, "model", "Llama-2-7B");
            simtest_set(t, &c, "requests", "60");
            simtest_set(t, &c, "alloc", alloc ? "reserve" : "ondemand");
            c.quiet = 1;
            SimWorld w;
            KvErr e;
            if (sim_world_open(&w, &c, &e) != 0) {
                CHECK_MSG(0, "%s", e.msg);
                return;
            }
            ok &= run_agg(t, &w, policies[k], &a[alloc], &res[alloc]) == 0;
            sim_world_close(&w);
        }
        if (!ok) continue;
        /* every turn's whole context at once fits: no eviction, no preemption in either mode */
        CHECK_MSG(a[0].blocks_ctx < (int64_t)res[0].pool_tokens, "the pool (%llu) must hold every turn (%lld)",
                  (unsigned long long)res[0].pool_tokens, (long long)a[0].blocks_ctx);
        CHECK_EQ_U(res[0].preemptions, 0);
        CHECK_EQ_U(a[0].n, a[1].n);
        CHECK(a[0].n > 0);
        for (int i = 0; i < a[0].keep.n && i < a[1].keep.n; i++)
            CHECK_MSG(rows_equal(&a[0].keep.rows[i], &a[1].keep.rows[i]), "%s: row %d differs between alloc=ondemand and reserve",
                      policies[k], i);
        CHECK_EQ_I(res[0].ttft.n, res[1].ttft.n);
        CHECK(hist_mean(&res[0].ttft) == hist_mean(&res[1].ttft) && hist_mean(&res[0].tbt) == hist_mean(&res[1].tbt));
        CHECK(res[0].sim_end_ns == res[1].sim_end_ns);
        /* on demand never holds more at its peak */
        CHECK(res[0].hbm_peak_tokens <= res[1].hbm_peak_tokens);
        sim_result_free(&res[0]);
        sim_result_free(&res[1]);
    }
}

TEST(blocks_isolated_request_unchanged)
{
    const char *policies[] = {"recompute", "kv-offload", "hcache", "cake", "cacheflow", "ideal"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        Rows r[2];
        for (int alloc = 0; alloc < 2; alloc++) {
            SimConfig c;
            SimWorld w;
            SimResult res;
            simtest_iso_config(t, &c, 8192, 16, "hcache-a100", "Llama-2-7B");
            simtest_set(t, &c, "alloc", alloc ? "reserve" : "ondemand");
            if (simtest_run(t, &c, policies[k], &w, &r[alloc], &res) != 0) return;
            CHECK_EQ_U(res.preemptions, 0);
            sim_result_free(&res);
            sim_world_close(&w);
        }
        CHECK_EQ_I(r[0].n, 2);
        CHECK_EQ_I(r[1].n, 2);
        for (int i = 0; i < r[0].n && i < r[1].n; i++) {
            CHECK_EQ_I(r[0].rows[i].ttft_ns, r[1].rows[i].ttft_ns);
            CHECK_MSG(rows_equal(&r[0].rows[i], &r[1].rows[i]), "%s: isolated row %d differs", policies[k], i);
        }
    }
}

TEST(blocks_settings_parse_and_refuse)
{
    SimConfig c;
    KvErr e;
    sim_config_defaults(&c);
    CHECK_EQ_I(c.alloc, SIM_ALLOC_ONDEMAND);
    CHECK_EQ_I(c.preempt, SIM_PREEMPT_RECOMPUTE);
    CHECK_NEAR(c.block_watermark, 0.01, 0, 1e-15);
    CHECK(sim_config_set(&c, "preemption_mode", "swap", &e) == 0 && c.preempt == SIM_PREEMPT_SWAP);
    CHECK(sim_config_set(&c, "alloc", "lazy", &e) != 0);
    CHECK_CONTAINS(e.msg, "alloc");
    CHECK(sim_config_set(&c, "block_watermark", "0.9", &e) != 0);
    CHECK_CONTAINS(e.msg, "block_watermark");
}
