/* test_ablations.c — the ablation properties of the hybrid policies, on the engine:
 *   - HCache's scheduler only removes bubbles: hcache <= hcache-noschd on every isolated request, and
 *     hcache <= naive-hybrid where hidden states are smaller than the KV (MHA) — with the KV of the
 *     last layers saved where restoration is compute-bound; where hidden states are larger (GQA, MoE
 *     with GQA attention: hidden/KV = 2) the inversion is the stored form's, named below;
 *   - CacheFlow's axes only add options: cacheflow with an axis on <= the same axis off, per isolated
 *     request (token, layer, gpu, batch), on a shared NIC, per-stage links and an SSD array;
 *   - CacheFlow's batch-aware scheduling: its gain over Cake's FIFO two pointers does not fall as 1,
 *     2, 4, 8 requests restore at once.
 * (recompute.token_budget=0's one iteration is in test_iteration.c, SAVE_DIRECT's TBT cost in
 * test_tier.c.)
 * Isolated request: one session prefills the history, its next turn comes 10 s later with its KV
 * evicted (tests/simtest.h), so nothing queues. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/simtest.h"

typedef struct Iso {
    const char *platform, *model, *store;
    int tp, pp;
    int64_t n0, n1;
} Iso;

/* TTFT (ns) of the isolated turn under `policy`, with up to two extra settings; -1 on failure.
 * *from receives where the state came from (the tier the test meant to exercise). */
static double iso_ttft(TestCtx *t, const Iso *x, const char *policy, const char *k1, const char *v1, const char *k2,
                       const char *v2, char *from, size_t from_len)
{
    SimConfig c;
    simtest_iso_config(t, &c, x->n0, x->n1, x->platform, x->model);
    simtest_set(t, &c, "store", x->store);
    if (!strcmp(x->store, "dram+ssd")) c.dram_bytes = 1; /* every save spills to the SSD array */
    c.tp = x->tp;
    c.pp = x->pp;
    if (k1) simtest_set(t, &c, k1, v1);
    if (k2) simtest_set(t, &c, k2, v2);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, policy, &w, &rows, &res) != 0) return -1;
    double v = rows.n == 2 ? (double)rows.rows[1].ttft_ns : -1;
    if (from && rows.n == 2) snprintf(from, from_len, "%s", rows.rows[1].restore_from);
    CHECK_MSG(rows.n == 2, "%s on %s/%s: %d rows", policy, x->platform, x->model, rows.n);
    sim_result_free(&res);
    sim_world_close(&w);
    return v;
}

static const char *g_tier_want[] = {"dram", "ssd", "remote"};
static const char *g_stores[] = {"dram", "dram+ssd", "remote"};

/* hcache <= hcache-noschd always; hcache <= naive-hybrid unless hidden states outweigh the KV */
TEST(ablation_hcache_scheduler_only_removes_bubbles)
{
    const char *models[] = {"Llama-2-7B", "Llama-3.1-8B", "Qwen3-30B-A3B"}; /* MHA, GQA, MoE (GQA attention) */
    const double hid_over_kv[] = {0.5, 2.0, 2.0};                           /* catalog: KV/hid 2.0, 0.5, 0.5 */
    const int64_t lens[] = {3000, 20000};
    int checked = 0, inversions = 0, compute_bound = 0;
    for (int m = 0; m < 3; m++)
        for (int s = 0; s < 3; s++)
            for (int lay = 0; lay < 4; lay++)
                for (int li = 0; li < 2; li++) {
                    if (li == 1 && (lay == 1 || lay == 2)) continue; /* long histories: S,T in {1,1},{2,2} */
                    Iso x = {"h200", models[m], g_stores[s], 1 + (lay & 1), 1 + (lay >> 1), lens[li], 64};
                    char from[16] = "";
                    double h = iso_ttft(t, &x, "hcache", NULL, NULL, NULL, NULL, from, sizeof from);
                    double ns = iso_ttft(t, &x, "hcache-noschd", NULL, NULL, NULL, NULL, NULL, 0);
                    double nv = iso_ttft(t, &x, "naive-hybrid", NULL, NULL, NULL, NULL, NULL, 0);
                    if (h < 0 || ns < 0 || nv < 0) return;
                    CHECK_STR(from, g_tier_want[s]);
                    CHECK_MSG(h <= ns * (1 + 1e-6), "%s %s tp %d pp %d N %lld: hcache %.3f ms > hcache-noschd %.3f ms",
                              x.model, x.store, x.tp, x.pp, (long long)x.n0, h / 1e6, ns / 1e6);
                    if (hid_over_kv[m] < 1 && h > nv * (1 + 1e-6)) {
                        /* the real reason: restoration is compute-bound here (fast links for the GPU),
                         * projecting hidden states costs more than loading the KV, and the default
                         * stored form (hidden states only) has no KV to load instead; with the KV of
                         * the last layers saved as the solver needs (hcache.kv_layers=-1) hcache wins */
                        double hk = iso_ttft(t, &x, "hcache", "hcache.kv_layers", "-1", NULL, NULL, NULL, 0);
                        CHECK_MSG(hk >= 0 && hk <= nv * (1 + 1e-6),
                                  "%s %s tp %d pp %d N %lld: hcache %.3f ms (kv_layers=-1: %.3f ms) > naive-hybrid %.3f ms",
                                  x.model, x.store, x.tp, x.pp, (long long)x.n0, h / 1e6, hk / 1e6, nv / 1e6);
                        compute_bound++;
                    } else if (hid_over_kv[m] > 1 && h > nv * (1 + 1e-6)) {
                        /* the real reason: HCache stores hidden states, which for a GQA model are
                         * hid/KV = 2x the bytes of the KV naive-hybrid loads; its scheduler cannot
                         * plan around bytes it did not save */
                        inversions++;
                    }
                    checked++;
                }
    CHECK_EQ_I(checked, 54);
    /* the inversion exists (so the reason above is not hypothetical) */
    CHECK_MSG(inversions > 0, "no GQA case where naive-hybrid beats hcache: the stated reason would be stale");
    CHECK_MSG(compute_bound > 0, "no compute-bound MHA case: the stated reason would be stale");
}

/* one case of an axis: default cacheflow vs the same axis off */
static void cf_axis_case(TestCtx *t, const Iso *x, const char *axis, int *worse)
{
    char key[32];
    snprintf(key, sizeof key, "cacheflow.%s", axis);
    double on = iso_ttft(t, x, "cacheflow", NULL, NULL, NULL, NULL, NULL, 0);
    double off = iso_ttft(t, x, "cacheflow", key, "0", NULL, NULL, NULL, 0);
    if (on < 0 || off < 0) return;
    /* the estimate that picks the option is the engine's walk for layer-wise plans and a replay of
     * the two pointers for token-wise ones: 1 % covers the token-wise race's chunk granularity */
    if (on > off * 1.01) {
        (*worse)++;
        CHECK_MSG(0, "%s %s tp %d pp %d N %lld: cacheflow %.3f ms with %s on > %.3f ms off", x->platform, x->model, x->tp,
                  x->pp, (long long)x->n0, on / 1e6, axis, off / 1e6);
    }
}

TEST(ablation_cacheflow_axis_on_never_loses)
{
    const Iso cases[] = {
        {"cacheflow-h100-10g", "Llama-3.1-8B", "remote", 1, 1, 6000, 50},
        {"cacheflow-h100-10g", "Llama-3.1-8B", "remote", 1, 2, 6000, 50},
        {"cacheflow-h100-10g", "Llama-3.1-8B", "remote", 1, 2, 30000, 50},
        {"cacheflow-a100-40g", "Qwen3-8B", "remote", 2, 1, 16000, 50},
        {"h200", "Llama-3.1-8B", "dram", 1, 2, 12000, 50},
        {"h200", "Qwen3-30B-A3B", "dram+ssd", 2, 2, 8000, 50},
        {"hcache-a100", "Llama-2-7B", "dram+ssd", 1, 1, 2000, 50},
        {"hcache-a100", "Llama-2-7B", "dram+ssd", 1, 1, 24000, 50},
    };
    const char *axes[] = {"token", "layer", "gpu", "batch"};
    int worse = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++)
        for (int a = 0; a < 4; a++) {
            if (a == 2 && cases[i].pp == 1) continue; /* the GPU axis needs stages */
            cf_axis_case(t, &cases[i], axes[a], &worse);
        }
    CHECK_EQ_I(worse, 0);
}

/* B sessions of H tokens whose next turns arrive at the same instant; mean TTFT (ns) of those turns */
static double batch_ttft(TestCtx *t, const char *policy, int B, int64_t H)
{
    char *csv = malloc(64 * 1024);
    if (!csv) return -1;
    int n = snprintf(csv, 64 * 1024, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 0; i < B; i++) n += snprintf(csv + n, (size_t)(64 * 1024 - n), "s%d,0,0,%lld,1,0\n", i, (long long)H);
    for (int i = 0; i < B; i++)
        n += snprintf(csv + n, (size_t)(64 * 1024 - n), "s%d,1,1000,50,12,%lld\n", i, (long long)(H + 1));
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "batch.csv", csv));
    free(csv);
    snprintf(c.platform, sizeof c.platform, "cacheflow-h100-40g");
    snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
    simtest_set(t, &c, "store", "remote");
    c.evict_each_turn = 1;
    c.quiet = 1;
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, policy, &w, &rows, &res) != 0) return -1;
    double sum = 0;
    int k = 0;
    for (int i = 0; i < rows.n; i++)
        if (rows.rows[i].turn == 1) {
            sum += (double)rows.rows[i].ttft_ns;
            k++;
        }
    CHECK_EQ_I(k, B);
    sim_result_free(&res);
    sim_world_close(&w);
    return k ? sum / k : -1;
}

/* CacheFlow's gain over Cake (FIFO-ordered two pointers per request) grows with contention */
TEST(ablation_cacheflow_batch_gain_does_not_fall)
{
    double prev = 0;
    for (int B = 1; B <= 8; B *= 2) {
        double cf = batch_ttft(t, "cacheflow", B, 12288), cake = batch_ttft(t, "cake", B, 12288);
        if (cf <= 0 || cake <= 0) return;
        double gain = cake / cf;
        CHECK_MSG(gain > 1, "B=%d: cacheflow %.1f ms vs cake %.1f ms", B, cf / 1e6, cake / 1e6);
        CHECK_MSG(gain >= prev * 0.995, "B=%d: gain %.3f fell from %.3f (cacheflow %.1f ms, cake %.1f ms)", B, gain, prev,
                  cf / 1e6, cake / 1e6);
        prev = gain;
    }
}
