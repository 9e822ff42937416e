/* test_sim.c — whole runs of the simulator: the policy registry, conservation (every request once,
 * bytes adding up), determinism, layouts and replicas, the shipped traces, the clock's limit, tiny
 * max_context. The closed forms of one module's rule on isolated requests (one session, turn 0 fills
 * the history, turn 1 restores it after a long think time) are in that module's file:
 * test_iteration.c, test_restore.c, test_tier.c, test_lifecycle.c, test_setup.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/simtest.h"

#define keep_row simtest_keep_row
#define iso_config simtest_iso_config
#define lin simtest_lin

TEST(sim_policy_registry_valid)
{
    const KvPolicyOps *ops[32];
    int n = policy_count();
    for (int i = 0; i < n; i++) ops[i] = policy_at(i);
    KvErr e;
    CHECK_MSG(policy_registry_check(ops, n, &e) == 0, "%s", e.msg);
    /* a duplicate and a missing slot are refused */
    const KvPolicyOps *dup[2] = {policy_at(0), policy_at(0)};
    CHECK(policy_registry_check(dup, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "registered twice");
    KvPolicyOps broken = *policy_at(0);
    broken.plan_restore = NULL;
    const KvPolicyOps *b1[1] = {&broken};
    CHECK(policy_registry_check(b1, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "plan_restore");
    CHECK(policy_find("no-such", &e) == NULL);
    CHECK_CONTAINS(e.msg, "kv-offload");
}

/* ---- conservation and replay ---- */

typedef struct {
    uint64_t n, loaded_tokens, max_id, dup;
    uint8_t *seen;
    int64_t ttft_sum_ns, split_bad, negative;
} Tally;

static int tally_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    Tally *t = ctx;
    t->n++;
    if (r->id < 1u << 20) {
        if (t->seen[r->id]) t->dup++;
        t->seen[r->id] = 1;
    }
    t->loaded_tokens += (uint64_t)r->loaded_tokens;
    if (r->queue_ns + r->restore_ns + r->prefill_ns != r->ttft_ns) t->split_bad++;
    if (r->ttft_ns < 0 || r->queue_ns < 0 || r->restore_ns < 0 || r->prefill_ns < 0 || r->done_ns < r->arrival_ns) t->negative++;
    return 0;
}

static void run_tally(TestCtx *t, SimConfig *c, const char *policy, Tally *tl, SimResult *res, SimWorld *w)
{
    KvErr e;
    memset(tl, 0, sizeof *tl);
    tl->seen = calloc(1u << 20, 1);
    CHECK_MSG(sim_world_open(w, c, &e) == 0, "%s", e.msg);
    CHECK_MSG(sim_run(w, policy, tally_row, tl, NULL, NULL, res, &e) == 0, "%s: %s", policy, e.msg);
}

TEST(sim_conservation_every_request_once_bytes_add_up)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.requests = 1500;
    c.session_rate = 0.05;
    c.evict_each_turn = 1;
    c.max_context = 16384;
    simtest_set(t, &c, "store", "dram");
    Tally tl;
    SimResult res;
    SimWorld w;
    run_tally(t, &c, "kv-offload", &tl, &res, &w);
    CHECK_EQ_U(tl.n, 1500);
    CHECK_EQ_U(res.requests, 1500);
    CHECK_EQ_U(tl.dup, 0);
    CHECK_EQ_I(tl.split_bad, 0);
    CHECK_EQ_I(tl.negative, 0);
    /* every loaded token crossed H2D once, all layers (tp 1) */
    double want = (double)tl.loaded_tokens * (double)model_kv_bytes_per_token(&w.ly);
    CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], want, 1e-9, 1);
    CHECK(res.hits_tier[TIER_DRAM] > 0);
    CHECK_EQ_U(res.hits_tier[TIER_DRAM] + res.hits_tier[TIER_SSD] + res.hits_tier[TIER_REMOTE] + res.hits_resident + res.misses + res.no_history, res.requests);
    /* classes partition the requests */
    CHECK_EQ_U(res.cls[0].n + res.cls[1].n + res.cls[2].n, res.requests);
    CHECK(res.tbt.n > 0 && res.ttft.n == res.requests);
    CHECK(res.util_gpu[0] > 0 && res.util_gpu[0] <= 1.0 + 1e-9);
    CHECK(res.util_ch[CH_H2D][0] > 0 && res.util_ch[CH_H2D][0] <= 1.0 + 1e-9);
    free(tl.seen);
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(sim_recompute_never_moves_state)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.requests = 500;
    c.evict_each_turn = 1;
    Tally tl;
    SimResult res;
    SimWorld w;
    run_tally(t, &c, "recompute", &tl, &res, &w);
    CHECK_EQ_U(tl.n, 500);
    CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ] + res.ch_bytes[CH_D2H][CH_READ] + res.ch_bytes[CH_SSD][CH_READ] + res.ch_bytes[CH_SSD][CH_WRITE], 0, 0, 0);
    CHECK_EQ_U(tl.loaded_tokens, 0);
    free(tl.seen);
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(sim_multi_replica_tp_pp_runs)
{
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.model, sizeof c.model, "Llama-3.1-70B");
    snprintf(c.platform, sizeof c.platform, "h200");
    c.tp = 4;
    c.pp = 2;
    c.replicas = 2;
    c.requests = 400;
    c.session_rate = 0.5;
    c.evict_each_turn = 1;
    Tally tl;
    SimResult res;
    SimWorld w;
    run_tally(t, &c, "kv-offload", &tl, &res, &w);
    CHECK_EQ_U(tl.n, 400);
    CHECK_EQ_I(tl.split_bad, 0);
    CHECK(res.util_gpu[0] > 0 && res.util_gpu[1] > 0);
    /* each GPU moves its shard of its stage's layers: per-GPU bytes = tokens · kv/token/layer/gpu · layers */
    double want = (double)tl.loaded_tokens * (double)model_kv_bytes_per_token_layer_gpu(&w.ly) * w.model->layers;
    CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], want, 1e-9, 1);
    free(tl.seen);
    sim_result_free(&res);
    sim_world_close(&w);
}

static void replay_file(TestCtx *t, const char *rel, int64_t expect_rows, int replicas)
{
    const char *path = test_path(rel);
    FILE *f = fopen(path, "r");
    if (!f) SKIP("%s not present", path);
    fclose(f);
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.trace, sizeof c.trace, "%s", path);
    snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
    snprintf(c.platform, sizeof c.platform, "cacheflow-h100-40g");
    c.replicas = replicas;
    c.max_context = 131072;
    Tally tl;
    SimResult res;
    SimWorld w;
    run_tally(t, &c, "kv-offload", &tl, &res, &w);
    CHECK_EQ_I((int64_t)tl.n, expect_rows);
    CHECK_EQ_U(tl.dup, 0);
    CHECK_EQ_I(tl.split_bad, 0);
    CHECK_EQ_I(tl.negative, 0);
    free(tl.seen);
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(sim_replays_leval) { replay_file(t, "traces/data/leval.csv", 2074, 1); }
TEST(sim_replays_swebench) { replay_file(t, "traces/data/swebench.csv", 20163, 4); }
TEST(sim_replays_mooncake_multi_replica) { replay_file(t, "traces/data/mooncake_conversation.csv", 12031, 8); }

/* In-range extremes end in a result or a refusal, never a wrapped clock: iter_overhead at its
 * maximum (10^6 s) over 100 requests needs more than the clock's 2^62 ns, with and without the
 * utilisation windows (whose doubling width once overflowed and looped for ever). */
TEST(sim_clock_limit_refused_not_wrapped)
{
    for (int util = 0; util < 2; util++) {
        SimConfig c;
        sim_config_defaults(&c);
        c.requests = 100;
        c.quiet = 1;
        simtest_set(t, &c, "iter_overhead", "1000000s");
        SimWorld w;
        KvErr e;
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        SimUtilSeries u;
        memset(&u, 0, sizeof u);
        SimRunOpts o = {0};
        if (util) o.util = &u;
        SimResult res;
        memset(&e, 0, sizeof e);
        int rc = sim_run_ex(&w, "kv-offload", &o, &res, &e);
        CHECK_MSG(rc != 0, "util %d: a run past the clock's limit gave a result", util);
        CHECK_MSG(strstr(e.msg, "2^62 ns") != NULL, "util %d: %s", util, e.msg);
        CHECK_MSG(strstr(e.msg, "internal") == NULL, "util %d: %s", util, e.msg);
        sim_result_free(&res);
        sim_util_free(&u);
        sim_world_close(&w);
    }
}

/* max_context below a KV block (1..14 tokens, block_tokens 16), with and without the whole turn
 * reserved, the KV evicted at each turn's end or kept: every policy ends with every request done, the
 * cut ones counted as truncated (the stale KV of a turn whose history was cut once stayed counted in
 * the pool, which then filled and ended in "internal ... (deadlock)" on the swebench generator) */
TEST(sim_tiny_max_context_every_policy_completes)
{
    static const char *const alloc[] = {"ondemand", "reserve"};
    for (int cell = 0; cell < 4 * 14; cell++) {
        int a = cell / 28, ev = cell / 14 % 2, n = cell % 14 + 1;
        SimConfig c;
        sim_config_defaults(&c);
        c.requests = 150;
        c.quiet = 1;
        char v[8];
        snprintf(v, sizeof v, "%d", n);
        simtest_set(t, &c, "max_context", v);
        simtest_set(t, &c, "alloc", alloc[a]);
        simtest_set(t, &c, "evict_each_turn", ev ? "true" : "false");
        SimWorld w;
        KvErr e;
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        for (int p = 0; p < policy_count(); p++) {
            const char *name = policy_at(p)->name;
            SimResult res;
            int rc = sim_run(&w, name, NULL, NULL, NULL, NULL, &res, &e);
            CHECK_MSG(rc == 0, "max_context %d, alloc %s, evict %d, %s: %s", n, alloc[a], ev, name, e.msg);
            if (rc == 0)
                CHECK_MSG(res.requests == 150 && res.truncated > 100, "max_context %d, alloc %s, evict %d, %s: %llu requests, %llu truncated",
                          n, alloc[a], ev, name, (unsigned long long)res.requests, (unsigned long long)res.truncated);
            sim_result_free(&res);
        }
        sim_world_close(&w);
    }
}
