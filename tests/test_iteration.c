/* test_iteration.c — iteration.c's rules on isolated requests (tests/simtest.h): a recomputed
 * history and its new input prefilled as one sequence in token-budget chunks (the TTFT is the sum of
 * the chunks' iterations), and the policy's unchunked prefill as one iteration. */
#include <math.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"

#define keep_row simtest_keep_row
#define iso_config simtest_iso_config
#define lin simtest_lin

TEST(iteration_recompute_chunks_closed_form)
{
    SimConfig c;
    int64_t n0 = 5000, n1 = 300;
    iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
    snprintf(c.policy, sizeof c.policy, "recompute");
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    Rows rows = {0};
    SimResult res;
    CHECK_MSG(sim_run(&w, "recompute", keep_row, &rows, NULL, NULL, &res, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        SimRequestRow *r = &rows.rows[1];
        int64_t H = n0 + 1, C = c.token_budget;
        double O = 2e6, L = w.model->layers, want = 0;
        /* chunks of C over history + new as one sequence */
        int64_t done = 0, total = H + n1;
        while (done < total) {
            int64_t chunk = total - done < C ? total - done : C;
            /* the engine splits a chunk that straddles history/new into two items */
            int64_t hpart = done < H ? (H - done < chunk ? H - done : chunk) : 0, npart = chunk - hpart;
            double attn = 0;
            if (hpart) attn += cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, hpart, done, 0);
            if (npart) attn += cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, npart, done + hpart, 0);
            want += O + L * (lin(&w, chunk) + attn);
            done += chunk;
        }
        CHECK_NEAR((double)r->ttft_ns, want, 0.01, 0);
        CHECK_STR(r->restore_from, "recompute");
        CHECK_EQ_I(r->recomputed_tokens, H);
        CHECK_EQ_I(r->queue_ns, 0);
        CHECK_EQ_I(r->queue_ns + r->restore_ns + r->prefill_ns, r->ttft_ns);
    }
    CHECK_EQ_U(res.requests, 2);
    CHECK_NEAR(res.saved_bytes_per_token, 0, 0, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* recompute.token_budget=0: vLLM without chunked prefill — history and new input in one iteration,
 * whatever the engine's budget */
TEST(iteration_recompute_unchunked_is_one_iteration)
{
    SimConfig c;
    int64_t n0 = 6000, n1 = 100, N = n0 + 1;
    simtest_iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
    c.token_budget = 512;
    simtest_set(t, &c, "recompute.token_budget", "0");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "recompute", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        /* one iteration: overhead + L × (linear(N + n) + attention of the history + of the new input) */
        double layer = simtest_lin(&w, N + n1) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, N, 0, 0) +
                       cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, n1, N, 0);
        double want = 2e6 + w.model->layers * layer;
        CHECK_NEAR((double)rows.rows[1].ttft_ns, want, 1e-3, 1e3);
        CHECK_EQ_I(rows.rows[1].recomputed_tokens, N);
    }
    sim_result_free(&res);
    /* the default (-1) is the engine's chunked prefill: 12 iterations of 512, slower here */
    Rows rows2;
    memset(&rows2, 0, sizeof rows2);
    SimResult res2;
    KvErr e;
    SimConfig c2 = c;
    simtest_set(t, &c2, "recompute.token_budget", "-1");
    sim_world_close(&w);
    if (simtest_run(t, &c2, "recompute", &w, &rows2, &res2) != 0) return;
    if (rows.n == 2 && rows2.n == 2) CHECK(rows2.rows[1].ttft_ns > rows.rows[1].ttft_ns);
    sim_result_free(&res2);
    sim_world_close(&w);
    SimConfig c3 = c;
    CHECK(sim_config_set(&c3, "recompute.token_budget", "-2", &e) != 0);
    CHECK_CONTAINS(e.msg, "recompute.token_budget");
}
