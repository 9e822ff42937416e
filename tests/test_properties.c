/* test_properties.c — properties every policy must keep on isolated requests (tests/simtest.h: one
 * session, turn 0 fills H tokens, turn 1 after a think time with the KV evicted), over the model
 * families (MHA Llama-2-7B, GQA Llama-3.1-8B, MoE Qwen3-30B-A3B), pipeline × tensor layouts
 * (S, T) ∈ {1, 2}² and every tier (dram, ssd, remote) on the h200 platform, which has all three:
 *   - the TTFT split adds up exactly: queue + restore + prefill = TTFT, for every row;
 *   - ideal (the state already on the GPU) is at most every policy's TTFT when the arrivals match;
 *   - a restoration takes at least its policy-independent lower bound (restore_lower_bound_s);
 *   - a saving policy whose state was written, or is still being written, never recomputes it.
 * A violation names the policy, the setting and the numbers. Each world is opened once and runs
 * every policy (two requests each), so the whole file takes a few seconds.
 */
#include <string.h>

#include "tests/simtest.h"

static const char *const k_models[] = {"Llama-2-7B", "Llama-3.1-8B", "Qwen3-30B-A3B"};
static const int k_layouts[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}}; /* (S, T) */
/* store setting, DRAM bytes (1: every save spills to the next tier), what restore_from must name */
static const struct {
    const char *store;
    uint64_t dram;
    const char *tier;
} k_stores[] = {{"dram", 0, "dram"}, {"dram+ssd", 1, "ssd"}, {"remote", 0, "remote"}};

typedef struct {
    int64_t ttft, arrival;
    int have;
} IdealRef;

static int policy_saves(const SimResult *res) { return res->saved_bytes_per_token > 0; }

/* every property over one world: returns the number of violations (each already reported) */
static int check_world(TestCtx *t, SimWorld *w, const char *what, const char *tier, int in_flight)
{
    int bad = 0;
    IdealRef ideal = {0, 0, 0};
    KvErr e;
    /* ideal first: the reference for the others */
    int order[POLICY_MAX_REGISTERED], n = 0;
    for (int p = 0; p < policy_count(); p++)
        if (!strcmp(policy_at(p)->name, "ideal")) order[n++] = p;
    for (int p = 0; p < policy_count(); p++)
        if (strcmp(policy_at(p)->name, "ideal")) order[n++] = p;
    for (int k = 0; k < n; k++) {
        const char *pol = policy_at(order[k])->name;
        Rows rows;
        SimResult res;
        memset(&rows, 0, sizeof rows);
        if (sim_run(w, pol, simtest_keep_row, &rows, NULL, NULL, &res, &e) != 0) {
            CHECK_MSG(0, "%s %s: %s", what, pol, e.msg);
            bad++;
            continue;
        }
        if (rows.n != 2) {
            CHECK_MSG(0, "%s %s: %d rows, want 2", what, pol, rows.n);
            bad++;
        }
        for (int i = 0; i < rows.n; i++) {
            const SimRequestRow *r = &rows.rows[i];
            if (r->queue_ns + r->restore_ns + r->prefill_ns != r->ttft_ns || r->queue_ns < 0 || r->prefill_ns < 0) {
                CHECK_MSG(0, "%s %s turn %d: queue %lld + restore %lld + prefill %lld != TTFT %lld", what, pol, r->turn,
                          (long long)r->queue_ns, (long long)r->restore_ns, (long long)r->prefill_ns, (long long)r->ttft_ns);
                bad++;
            }
        }
        if (rows.n == 2) {
            const SimRequestRow *r = &rows.rows[1];
            if (!strcmp(pol, "ideal")) {
                ideal = (IdealRef){r->ttft_ns, r->arrival_ns, 1};
            } else if (ideal.have && r->arrival_ns == ideal.arrival && r->ttft_ns < ideal.ttft) {
                CHECK_MSG(0, "%s %s: TTFT %.3f ms below ideal's %.3f ms (same arrival)", what, pol, r->ttft_ns / 1e6,
                          ideal.ttft / 1e6);
                bad++;
            }
            int restored = strcmp(r->restore_from, "ideal") && strcmp(r->restore_from, "resident") && strcmp(r->restore_from, "none");
            if (restored && (double)r->restore_ns < r->lb_restore_ns * (1 - 1e-9)) {
                CHECK_MSG(0, "%s %s: restore %.3f ms below its lower bound %.3f ms (from %s)", what, pol, r->restore_ns / 1e6,
                          r->lb_restore_ns / 1e6, r->restore_from);
                bad++;
            }
            if (restored && r->lb_restore_ns <= 0) {
                CHECK_MSG(0, "%s %s: a restoration from %s without a lower bound", what, pol, r->restore_from);
                bad++;
            }
            /* a store without a DRAM tier has no host copy to read a save in flight from: the turn waits for
             * the save to land, or recomputes when that wait is estimated slower (counted as such) */
            int no_host_copy = in_flight && !strcmp(tier, "remote");
            if (policy_saves(&res) && no_host_copy && !strcmp(r->restore_from, "recompute")) {
                if (res.fallbacks != 1 || res.fallback_slower != 1) {
                    CHECK_MSG(0, "%s %s: recomputed a save in flight without the wait estimated slower (%llu fallbacks, %llu slower)",
                              what, pol, (unsigned long long)res.fallbacks, (unsigned long long)res.fallback_slower);
                    bad++;
                }
            } else if (policy_saves(&res)) {
                /* the state exists (written long before, or in flight): loaded, never recomputed */
                if (!strcmp(r->restore_from, "recompute") || r->loaded_tokens <= 0) {
                    CHECK_MSG(0, "%s %s: restore_from %s, %lld tokens loaded, although its state %s", what, pol, r->restore_from,
                              (long long)r->loaded_tokens, in_flight ? "is being written" : "was written");
                    bad++;
                } else if (!in_flight && !strstr(r->restore_from, tier)) {
                    CHECK_MSG(0, "%s %s: restore_from %s, want %s", what, pol, r->restore_from, tier);
                    bad++;
                }
                if (in_flight && res.fallbacks) {
                    CHECK_MSG(0, "%s %s: %llu fallbacks to recompute with the state in flight", what, pol,
                              (unsigned long long)res.fallbacks);
                    bad++;
                }
            }
        }
        sim_result_free(&res);
    }
    return bad;
}

static int run_grid(TestCtx *t, int64_t H, int64_t think_ns, int in_flight, int only_11)
{
    int bad = 0;
    for (size_t m = 0; m < KV_ARRAY_LEN(k_models); m++)
        for (size_t k = 0; k < KV_ARRAY_LEN(k_layouts); k++)
            for (size_t st = 0; st < KV_ARRAY_LEN(k_stores); st++) {
                if (only_11 && k > 0) continue;
                SimConfig c;
                simtest_iso_config(t, &c, H - 1, 32, "h200", k_models[m]);
                c.pp = k_layouts[k][0];
                c.tp = k_layouts[k][1];
                c.think_ns = think_ns;
                simtest_set(t, &c, "store", k_stores[st].store);
                if (k_stores[st].dram) c.dram_bytes = k_stores[st].dram;
                char what[160];
                snprintf(what, sizeof what, "%s S=%d T=%d store=%s H=%lld think=%lld ns", k_models[m], c.pp, c.tp,
                         k_stores[st].store, (long long)H, (long long)think_ns);
                SimWorld w;
                KvErr e;
                if (sim_world_open(&w, &c, &e) != 0) {
                    CHECK_MSG(0, "%s: %s", what, e.msg);
                    bad++;
                    continue;
                }
                bad += check_world(t, &w, what, k_stores[st].tier, in_flight);
                sim_world_close(&w);
            }
    return bad;
}

/* saves long finished (10 s think): every property, every family, layout and tier, H = 2K */
TEST(prop_isolated_requests_saved_state)
{
    CHECK_EQ_I(run_grid(t, 2048, 10000000000LL, 0, 0), 0);
}

/* a longer history where it is cheap (S = T = 1): the bound and the ordering at 16K tokens */
TEST(prop_isolated_requests_long_history)
{
    CHECK_EQ_I(run_grid(t, 16384, 10000000000LL, 0, 1), 0);
}

/* no think time: turn 1 is released while turn 0's save still crosses D2H (or is being flushed):
 * the restoration reads what is there and waits for the rest, it never recomputes */
TEST(prop_isolated_requests_state_in_flight)
{
    CHECK_EQ_I(run_grid(t, 4096, 0, 1, 0), 0);
}
