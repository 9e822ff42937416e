/* test_sim.c — whole runs of the simulator: the policy registry, conservation (every request once,
 * bytes adding up), determinism, layouts and replicas, the shipped traces, measured link curves, the
 * clock's limit, what does not fit. The closed forms of one module's rule on isolated requests (one
 * session, turn 0 fills the history, turn 1 restores it after a long think time) are in that
 * module's file: test_iteration.c, test_restore.c, test_tier.c, test_lifecycle.c. */
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
    (void)e;
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
    CHECK_NEAR(res.bytes_h2d, want, 1e-9, 1);
    CHECK(res.hits_dram > 0);
    CHECK_EQ_U(res.hits_dram + res.hits_ssd + res.hits_remote + res.hits_resident + res.misses + res.no_history, res.requests);
    /* classes partition the requests */
    CHECK_EQ_U(res.cls[0].n + res.cls[1].n + res.cls[2].n, res.requests);
    CHECK(res.tbt.n > 0 && res.ttft.n == res.requests);
    CHECK(res.util_gpu[0] > 0 && res.util_gpu[0] <= 1.0 + 1e-9);
    CHECK(res.util_h2d[0] > 0 && res.util_h2d[0] <= 1.0 + 1e-9);
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
    CHECK_NEAR(res.bytes_h2d + res.bytes_d2h + res.bytes_ssd_read + res.bytes_ssd_write, 0, 0, 0);
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
    CHECK_NEAR(res.bytes_h2d, want, 1e-9, 1);
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

/* a measured host-link curve in the cost store replaces the catalog's bandwidth */
#include "sim/cost/spec.h"
#include "sim/cost/store.h"

static int spec_emit(void *ctx, const StorePoint *p, KvErr *e) { return store_add_point(ctx, ((CostStore *)ctx)->run_id, p, e); }

/* The isolated 8000-token restoration on HCache's box (store=dram) in c, and db (a file `name` in
 * the test's directory): a cost store holding the spec run of its GPU and model and an open "cpu" run
 * (m2) for the caller's link points; w0 is open on c. 0, or -1 (reported) */
static int store_with_link_run(TestCtx *t, const char *name, char *db, size_t dbn, SimConfig *c, SimWorld *w0, CostStore *st,
                               StoreRunMeta *m2)
{
    KvErr e;
    snprintf(db, dbn, "%s/%s", test_tmpdir(t), name);
    simtest_iso_config(t, c, 8000, 200, "hcache-a100", "Llama-2-7B");
    simtest_set(t, c, "store", "dram");
    if (sim_world_open(w0, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    if (store_open(st, db, 1, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        sim_world_close(w0);
        return -1;
    }
    StoreRunMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.backend, sizeof m.backend, "spec");
    snprintf(m.device, sizeof m.device, "A100-40GB");
    snprintf(m.model, sizeof m.model, "Llama-2-7B");
    snprintf(m.dtype, sizeof m.dtype, "fp16");
    m.tp = 1;
    CHECK(store_begin_run(st, &m, &e) == 0);
    SpecInputs in;
    spec_inputs_from_platform(&in, &w0->hw, w0->platform, &w0->ly);
    CHECK_MSG(spec_generate(&in, spec_emit, st, &e) == 0, "%s", e.msg);
    CHECK(store_end_run(st, m.id, 1, &e) == 0);
    memset(m2, 0, sizeof *m2);
    snprintf(m2->backend, sizeof m2->backend, "cpu");
    snprintf(m2->device, sizeof m2->device, "A100-40GB");
    snprintf(m2->dtype, sizeof m2->dtype, "fp16");
    m2->tp = 1;
    CHECK(store_begin_run(st, m2, &e) == 0);
    return 0;
}

/* points of op from 4 KiB to top bytes (×4) at 10 us + bytes / rate, into the open run m2 */
static void link_points(TestCtx *t, CostStore *st, const StoreRunMeta *m2, CostOp op, int64_t top, double rate)
{
    KvErr e;
    for (int64_t b = 4096; b <= top; b *= 4) {
        StorePoint p = {.op = op, .tp = 1, .p1 = b, .n = 5};
        snprintf(p.dtype, sizeof p.dtype, "fp16");
        p.median_ns = p.p10_ns = p.p90_ns = 10000.0 + (double)b / rate * 1e9;
        CHECK_MSG(store_add_point(st, m2->id, &p, &e) == 0, "%s", e.msg);
    }
}

/* the run m2 ended, the store closed, w0 closed; then kv-offload on c with db as its costs */
static int run_on_store(TestCtx *t, const char *db, SimConfig *c, SimWorld *w0, CostStore *st, const StoreRunMeta *m2, SimWorld *w,
                        Rows *rows, SimResult *res)
{
    KvErr e;
    CHECK(store_end_run(st, m2->id, 1, &e) == 0);
    store_close(st);
    sim_world_close(w0);
    snprintf(c->costs, sizeof c->costs, "%s", db);
    return simtest_run(t, c, "kv-offload", w, rows, res);
}

TEST(sim_measured_link_curve_sets_the_h2d_rate)
{
    char db[4200];
    SimConfig c;
    /* spec run for the compute ops, then a "measured" run of h2d at half the catalog's rate */
    SimWorld w0;
    CostStore st;
    StoreRunMeta m2;
    if (store_with_link_run(t, "costs.db", db, sizeof db, &c, &w0, &st, &m2) != 0) return;
    double half = w0.hw.links[w0.platform->link].h2d_bytes_per_s / 2;
    link_points(t, &st, &m2, OP_H2D, 1LL << 32, half);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (run_on_store(t, db, &c, &w0, &st, &m2, &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        int64_t H = 8001;
        double L = w.model->layers;
        double t_io = 10000.0 + (double)H * (double)model_kv_bytes_per_token_layer_gpu(&w.ly) / half * 1e9;
        double t_c = lin(&w, 200) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, 200, H, 0);
        int k = t_io > t_c ? (int)ceil(L * (1 - t_c / t_io) - 1e-9) : 0;
        double pipe = t_io > t_c ? L * t_io + t_c : t_io + L * t_c;
        double start = k * t_io + 2e6 + L * t_c;
        CHECK_NEAR((double)rows.rows[1].ttft_ns, pipe > start ? pipe : start, 0.01, 0);
    }
    sim_result_free(&res);
    sim_world_close(&w);
}

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

/* a store whose link curves stop at 64 MiB (a calibration of smaller transfers): the engine reads
 * each link's streaming rate off its curve (probes at 64 MiB and 1 GiB) without counting the probes
 * as the run's extrapolations (they once gave "4 cost lookups ... extrapolated" on every run); a
 * lookup past the range is still counted */
TEST(sim_link_rate_probes_are_not_extrapolations)
{
    char db[4200];
    SimConfig c;
    SimWorld w0;
    CostStore st;
    StoreRunMeta m2;
    if (store_with_link_run(t, "links64m.db", db, sizeof db, &c, &w0, &st, &m2) != 0) return;
    double rate = w0.hw.links[w0.platform->link].h2d_bytes_per_s / 2;
    const CostOp links[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) link_points(t, &st, &m2, links[k], 1LL << 26, rate);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (run_on_store(t, db, &c, &w0, &st, &m2, &w, &rows, &res) != 0) return;
    CHECK_EQ_U(res.extrapolations, 0);
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) CHECK_EQ_U(res.extrapolations_op[links[k]], 0);
    /* the rate is still the curve's slope (extrapolated past 64 MiB): the restoration's loads at it */
    CHECK(rows.n == 2 && res.bytes_h2d > 0);
    /* a lookup past the sampled range counts; a probe does not */
    uint64_t before = w.cost.extrapolations[OP_H2D];
    double probe = cost_probe_ns(&w.cost, OP_H2D, 1LL << 30, 0, 0);
    CHECK_EQ_U(w.cost.extrapolations[OP_H2D], before);
    CHECK(cost_lookup_ns(&w.cost, OP_H2D, 1LL << 30, 0, 0) == probe);
    CHECK_EQ_U(w.cost.extrapolations[OP_H2D], before + 1);
    CHECK_NEAR(probe, 10000.0 + (double)(1LL << 30) / rate * 1e9, 1e-9, 0);
    sim_result_free(&res);
    sim_world_close(&w);
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

/* a GPU too small says which part does not fit: the weights (mem_util 0.30: 12 GB for 13.5 GB of
 * Llama-2-7B) or the KV cache left beside them (0.35: 14 GB holds the weights, not 1024 tokens of
 * KV); the second once read "weights 13.5 GB per GPU of 40.0 GB × mem_util 0.35", as if they did not */
TEST(sim_does_not_fit_names_the_part_that_does_not)
{
    static const struct {
        const char *mem_util, *want;
    } cases[] = {{"0.30", "weights 13.5 GB per GPU, more than 40.0 GB × mem_util 0.30 = 12.00 GB"},
                 {"0.35", "weights 13.48 GB per GPU leave 0.52 GB of 40.0 GB × mem_util 0.35 for the KV cache, less than 1024 tokens"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        SimConfig c;
        sim_config_defaults(&c);
        c.requests = 5;
        c.quiet = 1;
        simtest_set(t, &c, "mem_util", cases[k].mem_util);
        SimWorld w;
        KvErr e = {{0}};
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        SimResult res;
        CHECK(sim_run(&w, "recompute", NULL, NULL, NULL, NULL, &res, &e) != 0);
        CHECK_CONTAINS(e.msg, cases[k].want);
        sim_result_free(&res);
        sim_world_close(&w);
    }
}
