/* test_policies.c — restoration policies on isolated requests against their closed forms, the
 * storage accounting, the batch-aware IO order, and every policy × trace × model running. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/simtest.h"
#include "policies/split.h"

static cJSON *notes_of(const SimResult *r) { return cJSON_Parse(r->policy_notes); }

/* A PolicyEnv over an open world, for calling the split arithmetic the way the engine does. The
 * estimates need the engine's core, so the test recomputes them from the cost model the same way. */
static double est_layer(SimWorld *w, int64_t n, int64_t c)
{
    if (n < 1) n = 1;
    return simtest_lin(w, n) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n, c, 0);
}

static double link_ns(SimWorld *w, double bytes)
{
    const LinkSpec *l = &w->hw.links[w->platform->link];
    return (double)l->latency_ns + bytes / l->h2d_bytes_per_s * 1e9;
}

/* the engine's walk of an isolated hcache restoration from DRAM, by hand: layer l starts when layer
 * l−1 is done and its hidden state has arrived (loads one after another on the H2D link); the first
 * `lo` layers are recomputed for the history inside the iteration */
static double hcache_walk_by_hand(SimWorld *w, int64_t N, int64_t n1, int lo)
{
    double cursor = 2e6, arrive = 0, hid = (double)model_hidden_bytes_per_token_layer(&w->ly);
    for (int l = 0; l < w->model->layers; l++) {
        double tl;
        if (l < lo) {
            tl = simtest_lin(w, n1 + N) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n1, N, 0) +
                 cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, N, 0, 0);
        } else {
            arrive += link_ns(w, (double)N * hid);
            tl = simtest_lin(w, n1) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n1, N, 0) +
                 cost_lookup_ns(&w->cost, OP_GEMM_KV_PROJ, N, 0, 0);
            if (arrive > cursor) cursor = arrive;
        }
        cursor += tl;
    }
    return cursor;
}

/* The split is solved per request (its N, its tier, its new input): the chosen split is the one
 * whose walk, recomputed by hand here, finishes first, and the engine's TTFT is that walk. Hidden
 * states only (hcache.kv_layers=0): the IO-bound direction, recompute the first layers. */
TEST(policy_hcache_split_is_minmax_and_isolated_time_matches)
{
    const int64_t n0s[2] = {8000, 1500};
    for (int i = 0; i < 2; i++) {
        SimConfig c;
        int64_t n0 = n0s[i], n1 = 100, N = n0 + 1;
        simtest_iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram");
        simtest_set(t, &c, "hcache.kv_layers", "0");
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "hcache", &w, &rows, &res) != 0) return;
        cJSON *nt = notes_of(&res);
        cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
        CHECK(pl != NULL);
        if (!pl) {
            cJSON_Delete(nt);
            sim_result_free(&res);
            sim_world_close(&w);
            return;
        }
        int L = w.model->layers, lo = (int)cJSON_GetObjectItem(pl, "split_min")->valuedouble;
        CHECK_EQ_I(lo, (int)cJSON_GetObjectItem(pl, "split_max")->valuedouble);
        CHECK_EQ_I((int)cJSON_GetObjectItem(pl, "requests")->valuedouble, 1);
        CHECK_EQ_I((int)cJSON_GetObjectItem(pl, "compute")->valuedouble, 0); /* no KV saved: no KV suffix */
        double mine = hcache_walk_by_hand(&w, N, n1, lo);
        for (int k = 0; k <= L; k++) {
            double v = hcache_walk_by_hand(&w, N, n1, k);
            CHECK_MSG(v >= mine * (1 - 1e-9), "N=%lld: split %d finishes at %.3f ms, before the chosen %d (%.3f ms)",
                      (long long)N, k, v / 1e6, lo, mine / 1e6);
        }
        /* hidden states of every layer are saved: each request may choose its own split */
        CHECK_NEAR(res.saved_bytes_per_token, (double)L * (double)model_hidden_bytes_per_token_layer(&w.ly), 1e-12, 0);
        CHECK_EQ_I(rows.n, 2);
        if (rows.n == 2) {
            SimRequestRow *r = &rows.rows[1];
            CHECK_NEAR((double)r->ttft_ns, mine, 0.01, 0);
            CHECK_STR(r->restore_from, "dram");
            CHECK_EQ_I(r->loaded_tokens, lo < L ? N : 0);
        }
        cJSON_Delete(nt);
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* From DRAM on the A100 box a short history is compute-bound (projecting 1.5K hidden states and the
 * new input cost more per layer than loading the hidden states): the stored form adds the KV of the
 * last layers and the plan loads them instead of projecting, faster than hidden states alone */
TEST(policy_hcache_compute_bound_loads_kv_for_the_last_layers)
{
    double ttft[2] = {0, 0};
    for (int kv = 0; kv < 2; kv++) {
        SimConfig c;
        simtest_iso_config(t, &c, 1500, 100, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram");
        simtest_set(t, &c, "hcache.kv_layers", kv ? "-1" : "0");
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "hcache", &w, &rows, &res) != 0) return;
        cJSON *nt = notes_of(&res);
        cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
        CHECK(pl != NULL);
        int L = w.model->layers, k = pl ? (int)cJSON_GetObjectItem(pl, "split_min")->valuedouble : -1;
        if (kv && pl) {
            CHECK_EQ_I((int)cJSON_GetObjectItem(pl, "compute")->valuedouble, 1);
            CHECK(k > 0 && k < L);
            /* saved: every layer's hidden state and at least the loaded layers' KV */
            CHECK(res.saved_bytes_per_token >= L * (double)model_hidden_bytes_per_token_layer(&w.ly) +
                                                   k * (double)model_kv_bytes_per_token_layer(&w.ly));
            /* loaded: L − k hidden states and k layers' KV */
            double want = 1501.0 * ((L - k) * (double)model_hidden_bytes_per_token_layer(&w.ly) +
                                    k * (double)model_kv_bytes_per_token_layer(&w.ly));
            CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], want, 1e-9, 0);
        }
        if (rows.n == 2) ttft[kv] = (double)rows.rows[1].ttft_ns;
        cJSON_Delete(nt);
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK_MSG(ttft[1] < ttft[0], "TTFT %.3f ms with a KV suffix vs %.3f ms hidden states only", ttft[1] / 1e6, ttft[0] / 1e6);
}

TEST(policy_hcache_gqa_hidden_larger_than_kv_is_reported)
{
    SimConfig c;
    simtest_iso_config(t, &c, 4000, 100, "cacheflow-h100-10g", "Llama-3.1-8B");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "hcache", &w, &rows, &res) != 0) return;
    cJSON *nt = notes_of(&res);
    CHECK(nt != NULL);
    CHECK_NEAR(cJSON_GetObjectItem(nt, "hidden_over_kv_bytes")->valuedouble, 2.0, 1e-9, 0);
    CHECK(cJSON_GetObjectItem(nt, "warning") != NULL);
    CHECK_CONTAINS(cJSON_GetObjectItem(nt, "warning")->valuestring, "GQA");
    cJSON_Delete(nt);
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(policy_hcache_noschd_and_naive_hybrid_store_what_they_load)
{
    SimConfig c;
    simtest_iso_config(t, &c, 6000, 100, "hcache-a100", "Llama-2-13B");
    simtest_set(t, &c, "store", "dram");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "hcache-noschd", &w, &rows, &res) != 0) return;
    CHECK_NEAR(res.saved_bytes_per_token, (double)model_hidden_bytes_per_token(&w.ly), 1e-12, 0);
    /* every layer's hidden state crossed H2D: N · D · 2 B · L */
    CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], 6001.0 * (double)model_hidden_bytes_per_token(&w.ly), 1e-9, 0);
    sim_result_free(&res);
    Rows rows2;
    memset(&rows2, 0, sizeof rows2);
    SimResult res2;
    KvErr e;
    CHECK_MSG(sim_run(&w, "naive-hybrid", simtest_keep_row, &rows2, NULL, NULL, &res2, &e) == 0, "%s", e.msg);
    cJSON *nt = notes_of(&res2);
    cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
    int lo = pl ? (int)cJSON_GetObjectItem(pl, "split_min")->valuedouble : -1, L = w.model->layers;
    CHECK(lo > 0 && lo < L);
    /* the KV of every layer is saved (each request chooses its split); the loads are the plan's */
    CHECK_NEAR(res2.saved_bytes_per_token, (double)L * (double)model_kv_bytes_per_token_layer(&w.ly), 1e-12, 0);
    CHECK_NEAR(res2.ch_bytes[CH_H2D][CH_READ], 6001.0 * (L - lo) * (double)model_kv_bytes_per_token_layer(&w.ly), 1e-9, 0);
    cJSON_Delete(nt);
    sim_result_free(&res2);
    sim_world_close(&w);
}

/* one isolated CacheFlow restoration of Llama-3.1-8B from cacheflow-a100-10g's remote store, with
 * one knob set */
static int cf_remote_iso(TestCtx *t, int64_t n0, int64_t n1, const char *knob, const char *value, SimWorld *w, Rows *rows,
                         SimResult *res)
{
    SimConfig c;
    simtest_iso_config(t, &c, n0, n1, "cacheflow-a100-10g", "Llama-3.1-8B");
    simtest_set(t, &c, knob, value);
    simtest_set(t, &c, "store", "remote");
    return simtest_run(t, &c, "cacheflow", w, rows, res);
}

TEST(policy_cacheflow_layerwise_split_and_harmonic_time)
{
    int64_t n0 = 6000, n1 = 16;
    SimWorld w;
    Rows rows;
    SimResult res;
    if (cf_remote_iso(t, n0, n1, "cacheflow.token", "0", &w, &rows, &res) != 0) return; /* layer axis only */
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        SimRequestRow *r = &rows.rows[1];
        int64_t N = n0 + 1;
        int L = w.model->layers;
        double t_re = est_layer(&w, N, 0);
        const NicSpec *nic = &w.hw.nics[w.platform->nic];
        double kv_l = (double)model_kv_bytes_per_token_layer(&w.ly);
        double t_net = (double)nic->latency_ns + (double)N * kv_l / nic->bytes_per_s * 1e9;
        double t_h2d = link_ns(&w, (double)N * (double)model_kv_bytes_per_token_layer_gpu(&w.ly));
        double t_kv = t_net > t_h2d ? t_net : t_h2d;
        double Tc = L * t_re, Tio = L * t_kv, Tstar = Tc * Tio / (Tc + Tio);
        double ell_star = L * Tio / (Tc + Tio);
        /* the split: recomputed tokens are reported per token; layer count from the bytes moved */
        double layers_loaded = res.ch_bytes[CH_NIC_IN][CH_READ] / ((double)N * kv_l);
        double ell = L - layers_loaded;
        CHECK_MSG(fabs(ell - ell_star) <= 1.0 + 1e-9, "split %.2f layers vs l* = %.2f", ell, ell_star);
        /* restoration time within one layer (+ the iteration's host overhead) of T* */
        double slack = 2e6 + 1.1 * (t_re > t_kv ? t_re : t_kv);
        CHECK_MSG(fabs((double)r->restore_ns - Tstar) <= slack, "restore %.3f ms vs T* %.3f ms (slack %.3f)",
                  r->restore_ns / 1e6, Tstar / 1e6, slack / 1e6);
        CHECK_STR(r->restore_from, "remote");
    }
    sim_result_free(&res);
    sim_world_close(&w);
}

/* cacheflow.split=K: every restoration layer-wise with the first K layers recomputed (the bytes
 * moved are the other L - K layers', K past L capped), and no forced split restores faster than the
 * planner's own choice (an ablation never beats its policy); K = the planner's split gives its time */
TEST(policy_cacheflow_forced_split_is_an_ablation)
{
    int64_t n0 = 6000, n1 = 16, planned = 0;
    double planned_layers = -1;
    int L = 0;
    for (int K = -1; K <= 40; K++) {
        if (K > 4 && K < 28 && K % 4) continue; /* Llama-3.1-8B: 32 layers; a few splits, 40 past the end */
        char v[16];
        snprintf(v, sizeof v, "%d", K);
        SimWorld w;
        Rows rows;
        SimResult res;
        if (cf_remote_iso(t, n0, n1, "cacheflow.split", v, &w, &rows, &res) != 0) return;
        CHECK_EQ_I(rows.n, 2);
        if (rows.n == 2) {
            L = w.model->layers;
            double kv_l = (double)model_kv_bytes_per_token_layer(&w.ly), N = (double)(n0 + 1);
            double layers_loaded = res.ch_bytes[CH_NIC_IN][CH_READ] / (N * kv_l);
            int64_t restore = rows.rows[1].restore_ns;
            if (K < 0) {
                planned = restore;
                planned_layers = layers_loaded;
            } else {
                int k = K < L ? K : L;
                CHECK_MSG(fabs(layers_loaded - (L - k)) < 1e-6, "split %d: %.3f layers loaded, expected %d", K, layers_loaded, L - k);
                CHECK_MSG(restore >= planned, "split %d restores in %.3f ms, the planner's split (%.0f layers loaded) in %.3f ms", K,
                          restore / 1e6, planned_layers, planned / 1e6);
                if (fabs(layers_loaded - planned_layers) < 1e-6) CHECK_EQ_I(restore, planned);
            }
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK(L == 32 && planned > 0);
}

/* Cake's two pointers replayed by hand: compute chunks of the token budget (one iteration each, with
 * the engine's overhead), IO chunks of 128 tokens backward, one in flight; both stop when they meet */
TEST(policy_cake_meet_point_within_one_chunk)
{
    SimConfig c;
    int64_t n0 = 12000, n1 = 64;
    simtest_iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
    simtest_set(t, &c, "store", "dram");
    c.token_budget = 512;
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "cake", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        SimRequestRow *r = &rows.rows[1];
        int64_t N = n0 + 1, comp = 0, issued = N, inflight = 0, landed = 0, io_chunk = 0;
        int L = w.model->layers;
        double now = 0, comp_end = -1, io_end = -1, O = 2e6;
        double kv_gpu = (double)model_kv_bytes_per_token_layer_gpu(&w.ly) * L;
        /* admission: IO first, then the first iteration */
        io_chunk = issued - comp < 128 ? issued - comp : 128;
        issued -= io_chunk;
        io_end = link_ns(&w, (double)io_chunk * kv_gpu);
        inflight = issued - comp < 512 ? issued - comp : 512;
        comp_end = O + L * est_layer(&w, inflight, comp);
        while (comp + landed < N) {
            if (io_end >= 0 && (comp_end < 0 || io_end <= comp_end)) {
                now = io_end;
                landed += io_chunk;
                io_end = -1;
                int64_t lower = comp + inflight;
                if (issued > lower) {
                    io_chunk = issued - lower < 128 ? issued - lower : 128;
                    issued -= io_chunk;
                    io_end = now + link_ns(&w, (double)io_chunk * kv_gpu);
                }
                if (comp_end < 0 && issued > comp) { /* compute was idle: a new iteration */
                    inflight = issued - comp < 512 ? issued - comp : 512;
                    comp_end = now + O + L * est_layer(&w, inflight, comp);
                }
            } else if (comp_end >= 0) {
                now = comp_end;
                comp += inflight;
                inflight = 0;
                comp_end = -1;
                if (io_end < 0 && issued > comp) {
                    io_chunk = issued - comp < 128 ? issued - comp : 128;
                    issued -= io_chunk;
                    io_end = now + link_ns(&w, (double)io_chunk * kv_gpu);
                }
                if (issued > comp) {
                    inflight = issued - comp < 512 ? issued - comp : 512;
                    comp_end = now + O + L * est_layer(&w, inflight, comp);
                }
            } else {
                break;
            }
        }
        CHECK_MSG(llabs(r->recomputed_tokens - comp) <= 512, "meet at %lld, by hand %lld", (long long)r->recomputed_tokens,
                  (long long)comp);
        CHECK_EQ_I(r->recomputed_tokens + r->loaded_tokens, N);
        CHECK(r->recomputed_tokens > 0 && r->loaded_tokens > 0);
        CHECK_NEAR((double)r->restore_ns, now, 0.02, 0);
    }
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(policy_ideal_restores_nothing)
{
    SimConfig c;
    simtest_iso_config(t, &c, 8000, 100, "hcache-a100", "Llama-2-7B");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "ideal", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        CHECK_STR(rows.rows[1].restore_from, "ideal");
        CHECK_EQ_I(rows.rows[1].restore_ns, 0);
        /* one iteration: the new input over the full context */
        double want = 2e6 + w.model->layers * est_layer(&w, 100, 8001);
        CHECK_NEAR((double)rows.rows[1].ttft_ns, want, 0.01, 0);
    }
    CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ] + res.ch_bytes[CH_D2H][CH_READ], 0, 0, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

static double stub_layer(void *core, int64_t n, int64_t c)
{
    return 1000.0 * (double)n + (double)c;
}

static double stub_load(void *core, Tier t, int64_t n, double a, double b)
{
    return 500.0 * (double)n;
}

/* cacheflow on cacheflow-a100-10g / Llama-3.1-8B with the stub estimates: the world opened, the
 * policy found and its environment (knobs read from *c itself, so that a knob set in *c later is
 * seen by the next init); -1 (reported) when the world does not open */
static int cf_env_open(TestCtx *t, SimConfig *c, SimWorld *w, const KvPolicyOps **cf, PolicyEnv *env, KvErr *e)
{
    sim_config_defaults(c);
    snprintf(c->platform, sizeof c->platform, "cacheflow-a100-10g");
    snprintf(c->model, sizeof c->model, "Llama-3.1-8B");
    if (sim_world_open(w, c, e) != 0) {
        CHECK_MSG(0, "%s", e->msg);
        return -1;
    }
    *cf = policy_find("cacheflow", e);
    *env = (PolicyEnv){.ly = &w->ly, .hw = &w->hw, .platform = w->platform, .cost = &w->cost, .iter_overhead_ns = 2000000,
                       .token_budget = 512, .est_layer_ns = stub_layer, .est_load_layer_ns = stub_load,
                       .save_tier = w->save_tier, .ops = *cf, .knobs = sim_config_knobs(c, *cf)};
    return 0;
}

/* the rule itself (Algorithm 1's global IO scheduler), re-ranked at every chunk; batch=0: FIFO */
TEST(policy_cacheflow_io_pick_oldest_restoration_first)
{
    SimConfig c;
    SimWorld w;
    KvErr e;
    const KvPolicyOps *cf;
    /* knobs read from c itself, so that setting one below is seen by the next init */
    PolicyEnv env;
    if (cf_env_open(t, &c, &w, &cf, &env, &e) != 0) return;
    void *st = NULL;
    CHECK(cf && cf->init(&env, &st, &e) == 0);
    /* the oldest restoring request (lowest id: compute runs in admission order, so its recomputation
     * delays every restoration behind it) gets the next chunk, whatever is left to restore */
    IoChoice u[4] = {{7, 300, 0, 1, 0, 0, 0, 0}, {5, 900, 0, 1, 1, 0, 0, 0}, {5, 900, 0, 1, 2, 0, 0, 0}, {6, 10, 0, 1, 3, 0, 0, 0}};
    CHECK_EQ_I(cf->io_pick(st, u, 4), 1); /* request 5, its first unit (units of one request: FIFO) */
    u[1].request_id = 8;                  /* re-ranked at every chunk */
    CHECK_EQ_I(cf->io_pick(st, u, 4), 2);
    cf->fini(st);
    simtest_set(t, &c, "cacheflow.batch", "0");
    CHECK(cf->init(&env, &st, &e) == 0);
    CHECK_EQ_I(cf->io_pick(st, u, 4), 0);
    cf->fini(st);
    sim_world_close(&w);
}

/* In the engine: two requests restore token-wise over one remote link; B (longer history) arrives
 * just after A. With the batch-aware order A's chunks (A is computed first) take the link first, so
 * A's pointers meet sooner than with FIFO (A finishes well before), B is no worse off, and the mean
 * TTFT of the two is lower. */
TEST(policy_cacheflow_batch_aware_io_order)
{
    const char *csv = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                      "a,0,0,3000,1,0\n"
                      "b,0,0.5,12000,1,0\n"
                      "a,1,100.000,16,1,3001\n"
                      "b,1,100.001,16,1,12001\n";
    double loaded[2][2], ttft[2] = {0, 0}, ttft_a[2] = {0, 0};
    for (int batch = 0; batch < 2; batch++) {
        SimConfig c;
        sim_config_defaults(&c);
        snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "two.csv", csv));
        snprintf(c.platform, sizeof c.platform, "cacheflow-a100-10g");
        snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
        c.evict_each_turn = 1;
        simtest_set(t, &c, "cacheflow.layer", "0"); /* token-wise: IO chunks of both requests wait on the link together */
        simtest_set(t, &c, "cacheflow.batch", batch ? "1" : "0");
        simtest_set(t, &c, "store", "remote");
        c.quiet = 1;
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "cacheflow", &w, &rows, &res) != 0) return;
        CHECK_EQ_I(rows.n, 4);
        for (int i = 0; i < rows.n; i++)
            if (rows.rows[i].turn == 1) {
                loaded[batch][rows.rows[i].history_tokens > 5000] = (double)rows.rows[i].loaded_tokens;
                ttft[batch] += (double)rows.rows[i].ttft_ns / 2;
                if (rows.rows[i].history_tokens < 5000) ttft_a[batch] = (double)rows.rows[i].ttft_ns;
            }
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK_MSG(loaded[1][0] >= loaded[0][0], "A loaded %.0f tokens with batch-aware order vs %.0f FIFO", loaded[1][0], loaded[0][0]);
    CHECK_MSG(loaded[1][1] <= loaded[0][1], "B loaded %.0f tokens with batch-aware order vs %.0f FIFO", loaded[1][1], loaded[0][1]);
    CHECK_MSG(ttft_a[1] < 0.9 * ttft_a[0], "A's TTFT %.3f ms batch-aware vs %.3f ms FIFO", ttft_a[1] / 1e6, ttft_a[0] / 1e6);
    CHECK_MSG(ttft[1] < ttft[0], "mean TTFT %.3f ms batch-aware vs %.3f ms FIFO", ttft[1] / 1e6, ttft[0] / 1e6);
}

TEST(policy_cacheflow_accounts_boundary_activations)
{
    SimConfig c;
    simtest_iso_config(t, &c, 2000, 16, "h200", "Llama-3.1-70B");
    c.tp = 2;
    c.pp = 4;
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "cacheflow", &w, &rows, &res) != 0) return;
    double want = (double)model_kv_bytes_per_token(&w.ly) + 3.0 * (double)model_boundary_bytes_per_token(&w.ly);
    CHECK_NEAR(res.saved_bytes_per_token, want, 1e-12, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* every policy on every trace source and every catalogued model, small runs */
TEST(policy_every_policy_trace_model_runs)
{
    ModelCatalog mc;
    KvErr e;
    if (model_catalog_load(&mc, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const char *traces[] = {"sharegpt4", "leval", "swebench", "shared-prefix", "traces/data/leval.csv",
                            "traces/data/swebench.csv", "traces/data/mooncake_conversation.csv"};
    int runs = 0, failures = 0;
    for (int m = 0; m < mc.n; m++) {
        const ModelSpec *ms = &mc.models[m];
        SimConfig c;
        sim_config_defaults(&c);
        snprintf(c.model, sizeof c.model, "%s", ms->name);
        snprintf(c.platform, sizeof c.platform, "h200");
        int64_t params = model_params_total(ms);
        c.tp = params > 200e9 ? 8 : params > 40e9 ? 2 : 1;
        if (c.tp > 1 && ms->kv_heads % c.tp && c.tp % ms->kv_heads) c.tp = 1;
        c.requests = 25;
        c.evict_each_turn = 1;
        c.max_context = 32768;
        for (size_t k = 0; k < sizeof traces / sizeof traces[0]; k++) {
            const char *src = traces[k];
            if (strchr(src, '/')) {
                src = test_path(src);
                FILE *f = fopen(src, "r");
                if (!f) continue;
                fclose(f);
            }
            snprintf(c.trace, sizeof c.trace, "%s", src);
            SimWorld w;
            if (sim_world_open(&w, &c, &e) != 0) {
                CHECK_MSG(0, "%s: %s", ms->name, e.msg);
                failures++;
                continue;
            }
            for (int p = 0; p < policy_count(); p++) {
                SimResult res;
                Rows rows;
                memset(&rows, 0, sizeof rows);
                runs++;
                if (sim_run(&w, policy_at(p)->name, simtest_keep_row, &rows, NULL, NULL, &res, &e) != 0 || res.requests != 25) {
                    CHECK_MSG(0, "%s × %s × %s: %s", policy_at(p)->name, traces[k], ms->name, e.msg);
                    failures++;
                }
                sim_result_free(&res);
            }
            sim_world_close(&w);
        }
    }
    CHECK(runs >= 11 * 3 * 8);
    CHECK_EQ_I(failures, 0);
    model_catalog_free(&mc);
}

/* The GPU axis on h200 from DRAM: every stage has its own H2D link, so stage-parallel restoration can
 * reach T* over S (+ the boundary activation and the overhead). The per-request plan takes whatever is
 * fastest there (with a link per stage, loading KV over all of them often is), so the restoration is
 * never slower than that closed form, nor than the same run with the axis off. On one shared 10 Gbps
 * NIC (CacheFlow-like node) the lanes' parallel recompute is what pays: there the stage-parallel plan
 * is chosen and beats the axis off. */
TEST(policy_cacheflow_stage_parallel_t_star_over_s)
{
    int64_t n0 = 8000, N = n0 + 1;
    double tstar = 0, t_re = 0, t_kv = 0;
    for (int S = 1; S <= 8; S *= 2) {
        double restore[2] = {0, 0};
        for (int gpu = 1; gpu >= 0; gpu--) {
            SimConfig c;
            simtest_iso_config(t, &c, n0, 16, "h200", "Llama-3.1-8B");
            simtest_set(t, &c, "store", "dram");
            c.pp = S;
            simtest_set(t, &c, "cacheflow.token", "0");
            simtest_set(t, &c, "cacheflow.gpu", gpu ? "1" : "0");
            SimWorld w;
            Rows rows;
            SimResult res;
            if (simtest_run(t, &c, "cacheflow", &w, &rows, &res) != 0) return;
            CHECK_EQ_I(rows.n, 2);
            int L = w.model->layers;
            if (rows.n == 2) restore[gpu] = (double)rows.rows[1].ttft_ns;
            if (S == 1) {
                t_re = est_layer(&w, N, 0);
                t_kv = link_ns(&w, (double)N * (double)model_kv_bytes_per_token_layer_gpu(&w.ly));
                double Tc = L * t_re, Tio = L * t_kv;
                tstar = Tc * Tio / (Tc + Tio);
            } else if (rows.n == 2 && gpu) {
                double t_bnd = link_ns(&w, (double)N * (double)model_hidden_bytes_per_token_layer(&w.ly));
                double want = tstar / S + t_bnd + 2e6;
                double slack = 1.05 * (t_re > t_kv ? t_re : t_kv);
                CHECK_MSG((double)rows.rows[1].restore_ns <= want + slack,
                          "S=%d: restore %.3f ms vs T*/S + boundary + overhead = %.3f ms (one layer %.3f ms)", S,
                          rows.rows[1].restore_ns / 1e6, want / 1e6, slack / 1e6);
            }
            sim_result_free(&res);
            sim_world_close(&w);
        }
        CHECK_MSG(restore[1] <= restore[0] * (1 + 1e-9), "S=%d: TTFT %.3f ms with the GPU axis vs %.3f ms without", S,
                  restore[1] / 1e6, restore[0] / 1e6);
    }
    /* one shared NIC: the lanes pay, boundary activations cross the links */
    double ttft[2] = {0, 0};
    for (int gpu = 1; gpu >= 0; gpu--) {
        SimConfig c;
        simtest_iso_config(t, &c, 20000, 50, "cacheflow-h100-10g", "Llama-3.1-8B");
        simtest_set(t, &c, "store", "remote");
        c.pp = 2;
        simtest_set(t, &c, "cacheflow.gpu", gpu ? "1" : "0");
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "cacheflow", &w, &rows, &res) != 0) return;
        if (rows.n == 2) ttft[gpu] = (double)rows.rows[1].ttft_ns;
        if (gpu) {
            cJSON *nt = cJSON_Parse(res.policy_notes);
            cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
            CHECK(pl && cJSON_GetObjectItem(pl, "stage_parallel")->valuedouble == 1);
            CHECK(res.ch_bytes[CH_H2D][CH_READ] >= 20001.0 * (double)model_hidden_bytes_per_token_layer(&w.ly));
            cJSON_Delete(nt);
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK_MSG(ttft[1] < ttft[0], "shared NIC: TTFT %.3f ms with the GPU axis vs %.3f ms without", ttft[1] / 1e6, ttft[0] / 1e6);
}

/* every policy with S, T > 1 on an MHA, a GQA and an MoE model (pipeline stages, tensor parallelism) */
TEST(policy_every_policy_with_stages_and_tp)
{
    const char *models[] = {"Llama-2-7B", "Llama-3.1-8B", "Qwen3-30B-A3B"};
    const int layouts[][2] = {{2, 2}, {1, 4}, {4, 2}};
    const char *stores[] = {"dram", "dram+ssd", "remote"};
    KvErr e;
    int failures = 0;
    for (size_t m = 0; m < 3; m++)
        for (size_t k = 0; k < 3; k++) {
            SimConfig c;
            sim_config_defaults(&c);
            snprintf(c.model, sizeof c.model, "%s", models[m]);
            snprintf(c.platform, sizeof c.platform, "h200");
            simtest_set(t, &c, "store", stores[k]);
            c.tp = layouts[k][0];
            c.pp = layouts[k][1];
            c.requests = 60;
            c.session_rate = 2;
            c.evict_each_turn = 1;
            SimWorld w;
            if (sim_world_open(&w, &c, &e) != 0) {
                CHECK_MSG(0, "%s tp %d pp %d: %s", models[m], c.tp, c.pp, e.msg);
                continue;
            }
            for (int p = 0; p < policy_count(); p++) {
                SimResult res;
                Rows rows;
                memset(&rows, 0, sizeof rows);
                if (sim_run(&w, policy_at(p)->name, simtest_keep_row, &rows, NULL, NULL, &res, &e) != 0 || res.requests != 60) {
                    CHECK_MSG(0, "%s × %s tp %d pp %d %s: %s", policy_at(p)->name, models[m], c.tp, c.pp, stores[k], e.msg);
                    failures++;
                }
                sim_result_free(&res);
            }
            sim_world_close(&w);
        }
    CHECK_EQ_I(failures, 0);
}

/* HCache's storage manager: 64-token chunks round-robin over the SSDs. A 64-token history is one
 * chunk per layer, read from one drive; the per-layer loads from the SSD array set the arrivals.
 * The restoration ends when the last layer's hidden states are projected to KV: at the head of the
 * last layer of the iteration's walk, which starts when that layer's state has arrived and the
 * layer before is done (each layer prefills the new input and projects the history). */
TEST(policy_hcache_chunks_striped_over_ssds)
{
    for (int chunks = 1; chunks <= 4; chunks *= 4) {
        SimConfig c;
        int64_t N = 64 * chunks;
        simtest_iso_config(t, &c, N - 1, 16, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram+ssd");
        c.dram_bytes = 1; /* every save spills to the SSD array */
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "hcache-noschd", &w, &rows, &res) != 0) return;
        CHECK_EQ_I(rows.n, 2);
        if (rows.n == 2) {
            CHECK_STR(rows.rows[1].restore_from, "ssd");
            const SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
            double bytes = (double)N * (double)model_hidden_bytes_per_token_layer(&w.ly);
            int drives = chunks < w.platform->n_ssd ? chunks : w.platform->n_ssd;
            double t_ssd = (double)sd->read_latency_ns + bytes / (sd->read_bytes_per_s * drives) * 1e9;
            double t_h2d = link_ns(&w, bytes);
            CHECK_MSG(t_ssd > t_h2d, "the SSD should set the pace of the arrivals here");
            int L = w.model->layers;
            double proj = cost_lookup_ns(&w.cost, OP_GEMM_KV_PROJ, N, 0, 0);
            double tl = simtest_lin(&w, 16) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, 16, N, 0) + proj;
            double cursor = 2e6, start = 0; /* the engine profile's host overhead first */
            for (int l = 0; l < L; l++) {
                double arrive = (l + 1) * t_ssd + t_h2d; /* SSD reads one after another, then H2D */
                start = cursor > arrive ? cursor : arrive;
                cursor = start + tl;
            }
            CHECK_NEAR((double)rows.rows[1].restore_ns, start + proj, 0.02, 0);
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* Cake's GPU-availability emulation: less of the token budget for restoration moves the meet point
 * toward IO (more loaded, less recomputed) and makes the restoration slower */
TEST(policy_cake_restore_share_moves_meet_point)
{
    int64_t loaded[2] = {0}, restore[2] = {0};
    const double share[2] = {1.0, 0.25};
    for (int k = 0; k < 2; k++) {
        SimConfig c;
        simtest_iso_config(t, &c, 8000, 16, "cake-a100", "Llama-2-13B");
        simtest_set(t, &c, "store", "remote");
        c.token_budget = 512;
        c.restore_share = share[k];
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "cake", &w, &rows, &res) != 0) return;
        CHECK_EQ_I(rows.n, 2);
        loaded[k] = rows.rows[1].loaded_tokens;
        restore[k] = rows.rows[1].restore_ns;
        CHECK_EQ_I(rows.rows[1].loaded_tokens + rows.rows[1].recomputed_tokens, 8001);
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK_MSG(loaded[1] > loaded[0], "loaded %lld at share 0.25 vs %lld at 1", (long long)loaded[1], (long long)loaded[0]);
    CHECK(restore[1] > restore[0]);
}

/* kv-quant: the two-stage pipeline of kv-offload with bytes scaled to bits/16 + 1/d_h and a
 * dequantize per layer in the compute stage */
TEST(policy_kv_quant_isolated_pipeline)
{
    for (int bits = 4; bits <= 8; bits += 4) {
        SimConfig c;
        int64_t n0 = 8000, n1 = 200, H = n0 + 1;
        simtest_iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram");
        simtest_set(t, &c, "kv-quant.bits", bits == 4 ? "4" : "8");
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "kv-quant", &w, &rows, &res) != 0) return;
        double scale = bits / 16.0 + 1.0 / w.model->head_dim;
        CHECK_NEAR(res.saved_bytes_per_token, (double)model_kv_bytes_per_token(&w.ly) * scale, 1e-12, 0);
        CHECK_EQ_I(rows.n, 2);
        if (rows.n == 2) {
            double L = w.model->layers;
            double t_io = link_ns(&w, (double)H * (double)model_kv_bytes_per_token_layer_gpu(&w.ly) * scale);
            double t_c = est_layer(&w, n1, H) + cost_lookup_ns(&w.cost, OP_DEQUANT, H, 0, 0);
            int k = t_io > t_c ? (int)ceil(L * (1 - t_c / t_io) - 1e-9) : 0;
            double pipe = t_io > t_c ? L * t_io + t_c : t_io + L * t_c;
            double start = k * t_io + 2e6 + L * t_c;
            CHECK_NEAR((double)rows.rows[1].ttft_ns, pipe > start ? pipe : start, 0.01, 0);
            CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], (double)H * (double)model_kv_bytes_per_token(&w.ly) * scale, 1e-9, 0);
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* The GPU axis as planned is the GPU axis as run: on an isolated request whose plan is stage-parallel,
 * the planner's estimate (admission → first token: each stage's lane from its own boundary
 * activation's arrival, overlapping the earlier stages, then the walk) is the engine's TTFT within
 * the per-layer rounding of the walk and the channels' whole-nanosecond events. */
TEST(policy_cacheflow_stage_parallel_planner_matches_engine)
{
    const struct {
        const char *platform, *store;
        int64_t n0;
        int S;
    } cases[] = {{"cacheflow-h100-10g", "remote", 20000, 2}, {"cacheflow-h100-10g", "remote", 8000, 4},
                 {"cacheflow-h100-10g", "remote", 30000, 2}, {"cacheflow-h100-10g", "remote", 12000, 2},
                 {"h200", "dram", 16000, 2}};
    int stage_plans = 0;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        SimConfig c;
        simtest_iso_config(t, &c, cases[k].n0, 50, cases[k].platform, "Llama-3.1-8B");
        simtest_set(t, &c, "store", cases[k].store);
        simtest_set(t, &c, "cacheflow.token", "0");
        c.pp = cases[k].S;
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "cacheflow", &w, &rows, &res) != 0) return;
        cJSON *nt = cJSON_Parse(res.policy_notes);
        cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
        cJSON *est = nt ? cJSON_GetObjectItem(nt, "last_plan_est_s") : NULL;
        CHECK(pl && est && rows.n == 2);
        if (pl && est && rows.n == 2 && cJSON_GetObjectItem(pl, "stage_parallel")->valuedouble == 1) {
            stage_plans++;
            double want = est->valuedouble * 1e9, got = (double)rows.rows[1].ttft_ns;
            CHECK_MSG(fabs(got - want) <= 1e-4 * want + 2000.0 * w.model->layers,
                      "%s %s N=%lld S=%d: engine TTFT %.4f ms, planner %.4f ms", cases[k].platform, cases[k].store,
                      (long long)cases[k].n0, cases[k].S, got / 1e6, want / 1e6);
        }
        cJSON_Delete(nt);
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK(stage_plans >= 2);
}

/* ---- beyond the papers: adaptive and hcache-quant ---- */

/* one isolated run: the restoring turn's row (rows[1]) and the notes; 0 on success */
static int iso_run(TestCtx *t, const char *platform, const char *model, const char *store, int64_t n0, const char *policy,
                   const char *const *sets, SimRequestRow *row, SimResult *res_out, SimWorld *w_out)
{
    SimConfig c;
    simtest_iso_config(t, &c, n0, 64, platform, model);
    if (store && !strcmp(store, "ssd")) { /* every save spills to the SSD array */
        simtest_set(t, &c, "store", "dram+ssd");
        c.dram_bytes = 1;
    } else if (store) {
        simtest_set(t, &c, "store", store);
    }
    for (int i = 0; sets && sets[i]; i += 2) simtest_set(t, &c, sets[i], sets[i + 1]);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, policy, &w, &rows, &res) != 0) return -1;
    CHECK_EQ_I(rows.n, 2);
    int ok = rows.n == 2;
    if (ok) *row = rows.rows[1];
    if (res_out) *res_out = res;
    else sim_result_free(&res);
    if (w_out) *w_out = w;
    else sim_world_close(&w);
    return ok ? 0 : -1;
}

/* adaptive on an isolated request: never slower than any single form it stored (each run by its own
 * policy: kv-offload, hcache-noschd, kv-quant, hcache-quant; recompute is always possible), never
 * faster than ideal, and its TTFT split (queue + restore + prefill) adds up; over MHA, GQA-4 and a
 * GQA MoE model, from DRAM and from the SSD array, lossless and with quantized forms admitted. */
TEST(policy_adaptive_isolated_never_slower_than_a_stored_single_form)
{
    static const struct {
        const char *platform, *model, *store;
        int64_t n0;
    } cases[] = {
        {"hcache-a100", "Llama-2-7B", "dram", 8000},   {"hcache-a100", "Llama-2-7B", "ssd", 8000},
        {"hcache-a100", "Llama-2-7B", "dram", 1500},   {"hcache-a100", "Llama-3.1-8B", "ssd", 12000},
        {"hcache-a100", "Llama-3.1-8B", "dram", 3000}, {"h200", "Qwen3-30B-A3B", "ssd", 12000},
        {"h200", "Llama-3.1-8B", "dram", 6000},
    };
    static const char *const budgets[][6] = {
        {"adaptive.storage_budget", "1", NULL},
        {"adaptive.storage_budget", "0.5", "adaptive.min_bits", "4", NULL},
        {"adaptive.storage_budget", "3", "adaptive.min_bits", "8", NULL},
    };
    int compared = 0;
    for (size_t ci = 0; ci < KV_ARRAY_LEN(cases); ci++) {
        for (size_t bi = 0; bi < KV_ARRAY_LEN(budgets); bi++) {
            SimRequestRow ra, ri, rs;
            SimResult res;
            SimWorld w;
            if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, "adaptive", budgets[bi], &ra,
                        &res, &w) != 0)
                return;
            cJSON *nt = notes_of(&res);
            cJSON *lay = nt ? cJSON_GetObjectItem(nt, "stored_layout") : NULL;
            CHECK(lay != NULL);
            const char *P = lay ? cJSON_GetObjectItem(lay, "primary")->valuestring : "rec";
            const char *Q = lay ? cJSON_GetObjectItem(lay, "secondary")->valuestring : "rec";
            int j = lay ? (int)cJSON_GetObjectItem(lay, "secondary_last_layers")->valuedouble : 0, L = w.model->layers;
            double kvb = (double)model_kv_bytes_per_token(&w.ly);
            double budget = atof(budgets[bi][1]);
            CHECK_MSG(res.saved_bytes_per_token <= budget * kvb * (1 + 1e-9), "%s: stores %.0f B/token over the budget %.0f",
                      cases[ci].model, res.saved_bytes_per_token, budget * kvb);
            CHECK_EQ_I((int)(ra.queue_ns + ra.restore_ns + ra.prefill_ns), (int)ra.ttft_ns);
            /* the single forms stored on every layer, and the policy that restores exactly that form */
            static const struct {
                const char *form, *policy, *k, *v;
            } singles[] = {
                {"rec", "recompute", NULL, NULL},        {"kv16", "kv-offload", NULL, NULL},
                {"h16", "hcache-noschd", NULL, NULL},    {"kv8", "kv-quant", "kv-quant.bits", "8"},
                {"kv4", "kv-quant", "kv-quant.bits", "4"}, {"h8", "hcache-quant", "hcache-quant.bits", "8"},
                {"h4", "hcache-quant", "hcache-quant.bits", "4"},
            };
            for (size_t s = 0; s < KV_ARRAY_LEN(singles); s++) {
                int stored = !strcmp(singles[s].form, "rec") || !strcmp(P, singles[s].form) || (j == L && !strcmp(Q, singles[s].form));
                if (!stored) continue;
                const char *sets[] = {singles[s].k, singles[s].v, NULL};
                if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, singles[s].policy,
                            singles[s].k ? sets : NULL, &rs, NULL, NULL) != 0)
                    continue;
                compared++;
                /* within the discretisation: hcache-quant may split off a recompute prefix (only
                 * faster); 0.5 % or 0.1 ms for the layouts' and plans' integer grids */
                CHECK_MSG((double)ra.ttft_ns <= (double)rs.ttft_ns * 1.005 + 1e5,
                          "%s on %s from %s, N=%lld, budget %s: adaptive %.3f ms, %s (%s everywhere) %.3f ms", cases[ci].model,
                          cases[ci].platform, cases[ci].store, (long long)cases[ci].n0, budgets[bi][1], ra.ttft_ns / 1e6,
                          singles[s].policy, singles[s].form, rs.ttft_ns / 1e6);
            }
            if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, "ideal", NULL, &ri, NULL, NULL) == 0)
                CHECK_MSG(ra.ttft_ns >= ri.ttft_ns, "adaptive %.3f ms beats ideal %.3f ms", ra.ttft_ns / 1e6, ri.ttft_ns / 1e6);
            cJSON_Delete(nt);
            sim_result_free(&res);
            sim_world_close(&w);
        }
    }
    CHECK(compared >= 30);
}

/* hcache-quant: stores L·D·(bits/16 + 1/d_h) fp16-equivalent bytes per token, loads that share of
 * the hidden states, and pays a dequantize on top of each projection: with the split off (a single
 * layer walk of hidden states only, from DRAM) its TTFT follows the engine's walk by hand */
TEST(policy_hcache_quant_stores_and_loads_the_quantized_share)
{
    for (int bits = 4; bits <= 8; bits += 4) {
        const char *sets[] = {"hcache-quant.bits", bits == 4 ? "4" : "8", NULL};
        SimRequestRow r;
        SimResult res;
        SimWorld w;
        if (iso_run(t, "hcache-a100", "Llama-2-7B", "dram", 8000, "hcache-quant", sets, &r, &res, &w) != 0) return;
        int L = w.model->layers;
        double share = bits / 16.0 + 1.0 / w.model->head_dim, hid = (double)model_hidden_bytes_per_token_layer(&w.ly);
        CHECK_NEAR(res.saved_bytes_per_token, L * hid * share, 1e-9, 0);
        cJSON *nt = notes_of(&res);
        cJSON *pl = nt ? cJSON_GetObjectItem(nt, "plans") : NULL;
        int lo = pl ? (int)cJSON_GetObjectItem(pl, "split_min")->valuedouble : -1;
        CHECK(lo >= 0 && lo < L);
        int64_t N = 8001;
        /* loaded: the quantized hidden states of the L − lo layers not recomputed (float share) */
        CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], (double)N * (L - lo) * hid * (float)share, 1e-6, 0);
        /* the walk: hidden layers cost plain + projection + dequantize of D elements per token */
        double cursor = 2e6, arrive = 0;
        for (int l = 0; l < L; l++) {
            double tl;
            if (l < lo) {
                tl = simtest_lin(&w, 64 + N) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, 64, N, 0) +
                     cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, N, 0, 0);
            } else {
                arrive += link_ns(&w, (double)N * hid * (float)share);
                int64_t dq = policy_dequant_hidden_tokens(N, hid, (double)model_kv_bytes_per_token_layer_gpu(&w.ly));
                tl = simtest_lin(&w, 64) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, 64, N, 0) +
                     cost_lookup_ns(&w.cost, OP_GEMM_KV_PROJ, N, 0, 0) + cost_lookup_ns(&w.cost, OP_DEQUANT, dq, 0, 0);
                if (arrive > cursor) cursor = arrive;
            }
            cursor += tl;
        }
        CHECK_NEAR((double)r.ttft_ns, cursor, 0.01, 0);
        cJSON_Delete(nt);
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* cacheflow.io_order: each order's rule on one set of waiting units (re-ranked at every call) */
TEST(policy_cacheflow_io_orders)
{
    SimConfig c;
    SimWorld w;
    KvErr e;
    const KvPolicyOps *cf;
    PolicyEnv env;
    if (cf_env_open(t, &c, &w, &cf, &env, &e) != 0) return;
    /* {id, remaining, layer, bytes, enqueued, history, arrival, now}: a long history (id 3) arrived
     * first; two short ones (ids 5, 4) later, 4 arriving before 5 but queued after it */
    const int64_t ms = 1000000;
    IoChoice u[3] = {{5, 900, 0, 1, 10 * ms, 1000, 9 * ms, 150 * ms},
                     {3, 30000, 0, 1, 11 * ms, 40000, 0, 150 * ms},
                     {4, 600, 0, 1, 12 * ms, 800, 5 * ms, 150 * ms}};
    static const struct {
        const char *order;
        int want;
    } cases[] = {{"0", 1}, {"1", 1}, {"2", 0}, {"3", 2}, {"4", 1}};
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        simtest_set(t, &c, "cacheflow.io_order", cases[i].order);
        void *st = NULL;
        CHECK(cf && cf->init(&env, &st, &e) == 0);
        CHECK_MSG(cf->io_pick(st, u, 3) == cases[i].want, "io_order %s: picked %d, want %d", cases[i].order,
                  cf->io_pick(st, u, 3), cases[i].want);
        if (!strcmp(cases[i].order, "4")) { /* aging: past its 200 ms target, the short request goes first */
            IoChoice v[3];
            memcpy(v, u, sizeof v);
            for (int k = 0; k < 3; k++) v[k].now_ns = 206 * ms;
            CHECK_EQ_I(cf->io_pick(st, v, 3), 2); /* 4's deadline 205 ms passed, 5's (209 ms) not yet */
            for (int k = 0; k < 3; k++) v[k].now_ns = 300 * ms;
            CHECK_EQ_I(cf->io_pick(st, v, 3), 2); /* both late: the earlier deadline */
        }
        if (!strcmp(cases[i].order, "3")) { /* EDF: a long class's target is later (1 s by default) */
            simtest_set(t, &c, "cacheflow.slo_long_ms", "1");
            cf->fini(st);
            CHECK(cf->init(&env, &st, &e) == 0);
            CHECK_EQ_I(cf->io_pick(st, u, 3), 1); /* now the long request's deadline (1 ms) is first */
            simtest_set(t, &c, "cacheflow.slo_long_ms", "1000");
        }
        cf->fini(st);
    }
    sim_world_close(&w);
}

/* hcache-cf (one tier) on isolated requests: never beats ideal, its TTFT split adds up, it stores
 * exactly HCache's hidden states (L·2D bytes per token: the boundary activations are among them) and
 * says so, and with one stage it is HCache's IO-bound split (the same TTFT as hcache's); over a
 * GQA-4 and an MHA model, S = 1, 4, 8, a shared NIC and a NIC per stage */
TEST(policy_hcache_cf_one_tier_properties)
{
    static const struct {
        const char *platform, *model, *pp, *nps;
        int64_t n0;
    } cases[] = {
        {"cacheflow-h100-10g", "Llama-3.1-8B", "1", "false", 8000}, {"cacheflow-h100-10g", "Llama-3.1-8B", "4", "false", 8000},
        {"cacheflow-h100-10g", "Llama-3.1-8B", "4", "true", 8000},  {"cacheflow-h100-80g", "Llama-2-7B", "1", "false", 12000},
        {"cacheflow-h100-80g", "Llama-2-7B", "8", "true", 12000},   {"cacheflow-h100-80g", "Qwen3-8B", "8", "false", 6000},
    };
    for (size_t ci = 0; ci < KV_ARRAY_LEN(cases); ci++) {
        const char *sets[] = {"pp", cases[ci].pp, "nic_per_stage", cases[ci].nps, NULL};
        SimRequestRow r, ri, rh;
        SimResult res;
        SimWorld w;
        if (iso_run(t, cases[ci].platform, cases[ci].model, "remote", cases[ci].n0, "hcache-cf", sets, &r, &res, &w) != 0) return;
        int S = atoi(cases[ci].pp);
        CHECK_EQ_I((int)(r.queue_ns + r.restore_ns + r.prefill_ns), (int)r.ttft_ns);
        CHECK(r.restore_ns > 0);
        CHECK_NEAR(res.saved_bytes_per_token, (double)model_hidden_bytes_per_token(&w.ly), 0, 0);
        cJSON *nt = notes_of(&res);
        cJSON *b = nt ? cJSON_GetObjectItem(nt, "boundary_activations_from_hidden_states") : NULL;
        CHECK(b != NULL && (int)b->valuedouble == S - 1);
        cJSON_Delete(nt);
        if (iso_run(t, cases[ci].platform, cases[ci].model, "remote", cases[ci].n0, "ideal", sets, &ri, NULL, NULL) == 0)
            CHECK_MSG(r.ttft_ns >= ri.ttft_ns, "%s pp %d: hcache-cf %.3f ms beats ideal %.3f ms", cases[ci].model, S,
                      r.ttft_ns / 1e6, ri.ttft_ns / 1e6);
        if (S == 1 && iso_run(t, cases[ci].platform, cases[ci].model, "remote", cases[ci].n0, "hcache", sets, &rh, NULL, NULL) == 0)
            CHECK_MSG(r.ttft_ns == rh.ttft_ns, "%s: one stage: hcache-cf %.3f ms, hcache %.3f ms", cases[ci].model, r.ttft_ns / 1e6,
                      rh.ttft_ns / 1e6);
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* kv-quant.adaptive (CacheGen's per-chunk level) on isolated requests: stores both levels (and says
 * which share of the layers took which), its TTFT split adds up, never beats ideal and is never
 * slower than the fixed level beyond the grids' 0.5 % + 0.1 ms; off, it is the fixed level (no notes) */
TEST(policy_kv_quant_adaptive_levels)
{
    static const struct {
        const char *platform, *model, *store;
        int64_t n0;
    } cases[] = {
        {"cacheflow-h100-10g", "Llama-3.1-8B", "remote", 8000}, {"hcache-a100", "Llama-2-7B", "ssd", 8000},
        {"h200", "Llama-3.1-8B", "dram", 6000},                 {"cacheflow-h100-80g", "Qwen3-8B", "remote", 3000},
    };
    for (size_t ci = 0; ci < KV_ARRAY_LEN(cases); ci++)
        for (int bits = 4; bits <= 8; bits += 4) {
            const char *on[] = {"kv-quant.adaptive", "true", "kv-quant.bits", bits == 4 ? "4" : "8", NULL};
            const char *off[] = {"kv-quant.bits", bits == 4 ? "4" : "8", NULL};
            SimRequestRow ra, rf, ri;
            SimResult res, resf;
            SimWorld w;
            if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, "kv-quant", on, &ra, &res, &w) != 0)
                return;
            if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, "kv-quant", off, &rf, &resf, NULL) != 0)
                return;
            double q4 = 4 / 16.0 + 1.0 / w.model->head_dim, qb = bits / 16.0 + 1.0 / w.model->head_dim;
            double kvb = (double)model_kv_bytes_per_token(&w.ly);
            CHECK_NEAR(res.saved_bytes_per_token, kvb * (bits > 4 ? qb + q4 : q4), 1e-12, 0);
            CHECK_NEAR(resf.saved_bytes_per_token, kvb * qb, 1e-12, 0);
            CHECK(resf.policy_notes[0] == 0);
            cJSON *nt = notes_of(&res);
            cJSON *sh = nt ? cJSON_GetObjectItem(nt, "layer_share") : NULL;
            CHECK(sh != NULL);
            if (sh) {
                double tot = 0;
                for (cJSON *x = sh->child; x; x = x->next) tot += x->valuedouble;
                CHECK_NEAR(tot, 1.0, 1e-3, 0);
            }
            cJSON_Delete(nt);
            CHECK_EQ_I((int)(ra.queue_ns + ra.restore_ns + ra.prefill_ns), (int)ra.ttft_ns);
            CHECK_MSG((double)ra.ttft_ns <= (double)rf.ttft_ns * 1.005 + 1e5, "%s on %s, %d bit: adaptive %.3f ms, fixed %.3f ms",
                      cases[ci].model, cases[ci].platform, bits, ra.ttft_ns / 1e6, rf.ttft_ns / 1e6);
            if (iso_run(t, cases[ci].platform, cases[ci].model, cases[ci].store, cases[ci].n0, "ideal", NULL, &ri, NULL, NULL) == 0)
                CHECK(ra.ttft_ns >= ri.ttft_ns);
            sim_result_free(&res);
            sim_result_free(&resf);
            sim_world_close(&w);
        }
}

/* nic_per_stage: a NIC per pipeline stage; off, the stages share one (every earlier number). KV
 * offload of one isolated request from the remote store over 10 GbE at 4 stages: each stage's
 * layers cross its own NIC, so the restoration is well under half of the shared NIC's; with one
 * stage the setting changes nothing */
TEST(config_nic_per_stage_gives_each_stage_its_nic)
{
    SimRequestRow a, b, c, d;
    const char *sh4[] = {"pp", "4", NULL}, *ps4[] = {"pp", "4", "nic_per_stage", "true", NULL};
    const char *sh1[] = {"pp", "1", NULL}, *ps1[] = {"pp", "1", "nic_per_stage", "true", NULL};
    if (iso_run(t, "cacheflow-h100-10g", "Llama-3.1-8B", "remote", 8000, "kv-offload", sh4, &a, NULL, NULL) != 0) return;
    if (iso_run(t, "cacheflow-h100-10g", "Llama-3.1-8B", "remote", 8000, "kv-offload", ps4, &b, NULL, NULL) != 0) return;
    CHECK_MSG(b.restore_ns * 2 < a.restore_ns, "per-stage NICs %.3f ms, shared %.3f ms", b.restore_ns / 1e6, a.restore_ns / 1e6);
    if (iso_run(t, "cacheflow-h100-10g", "Llama-3.1-8B", "remote", 8000, "kv-offload", sh1, &c, NULL, NULL) != 0) return;
    if (iso_run(t, "cacheflow-h100-10g", "Llama-3.1-8B", "remote", 8000, "kv-offload", ps1, &d, NULL, NULL) != 0) return;
    CHECK_EQ_I((int)c.ttft_ns, (int)d.ttft_ns);
}
