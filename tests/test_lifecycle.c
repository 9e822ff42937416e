/* test_lifecycle.c — lifecycle.c's rules on small traces: a session's next turn is released its
 * think time after its previous turn ended (arrivals=session); a new session goes to the replica
 * with the fewest requests in flight; a later turn of a session waits in its pending list while the
 * previous one runs (arrivals=trace), its TTFT counted from its release; admission never stalls on
 * KV kept for turns queued behind the head: a trace whose every turn fits the pool on its own runs
 * to the end under every policy, with the accounting walker at every iteration boundary (a fixed
 * trace whose head once waited forever on such KV, and seeded random small traces). */
#include <stdio.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"

static int run_csv(TestCtx *t, const char *name, const char *csv, SimConfig *c, Rows *rows, SimResult *res)
{
    snprintf(c->trace, sizeof c->trace, "%s", test_write_file(t, name, csv));
    c->quiet = 1;
    SimWorld w;
    int rc = simtest_run(t, c, "recompute", &w, rows, res);
    if (rc == 0) sim_world_close(&w);
    return rc;
}

/* the row of session s's turn k (NULL: none) */
static const SimRequestRow *row_of(const Rows *rows, uint64_t s, int k)
{
    for (int i = 0; i < rows->n; i++)
        if (rows->rows[i].session == s && rows->rows[i].turn == k) return &rows->rows[i];
    return NULL;
}

/* arrivals=session: turn 1 (no timestamp) is released 3 s after turn 0 ended, turn 2 3 s after turn 1 */
TEST(lifecycle_next_turn_after_think_time)
{
    SimConfig c;
    sim_config_defaults(&c);
    simtest_set(t, &c, "think", "3 s");
    Rows rows = {0};
    SimResult res;
    if (run_csv(t, "think.csv",
                "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                "a,0,0,100,5,0\n"
                "a,1,,20,5,105\n"
                "a,2,,20,5,130\n",
                &c, &rows, &res) != 0)
        return;
    CHECK_EQ_I(rows.n, 3);
    for (int k = 1; k < 3 && rows.n == 3; k++) {
        const SimRequestRow *p = row_of(&rows, rows.rows[0].session, k - 1), *r = row_of(&rows, rows.rows[0].session, k);
        CHECK(p && r);
        if (p && r) CHECK_MSG(r->arrival_ns == p->done_ns + 3000000000LL, "turn %d: arrival %lld, previous done %lld", k,
                              (long long)r->arrival_ns, (long long)p->done_ns);
    }
    sim_result_free(&res);
}

/* two replicas, three sessions arriving together: the first two go to replicas 0 and 1 (the fewest
 * in flight, ties to the lowest), the third to replica 0 again; a session's later turn stays on its
 * replica */
TEST(lifecycle_new_session_to_the_least_loaded_replica)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.replicas = 2;
    Rows rows = {0};
    SimResult res;
    if (run_csv(t, "route.csv",
                "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                "a,0,0,100,50,0\n"
                "b,0,0,100,50,0\n"
                "c,0,0,100,50,0\n"
                "b,1,,10,2,150\n",
                &c, &rows, &res) != 0)
        return;
    CHECK_EQ_I(rows.n, 4);
    int rep[4] = {-1, -1, -1, -1}, turn1 = -1;
    for (int i = 0; i < rows.n; i++) {
        const SimRequestRow *r = &rows.rows[i];
        if (r->turn == 0 && r->session < 4) rep[r->session] = r->replica;
        if (r->turn == 1) turn1 = r->replica;
    }
    /* sessions are numbered in first-appearance order */
    CHECK_MSG(rep[0] == 0 && rep[1] == 1 && rep[2] == 0, "replicas %d %d %d", rep[0], rep[1], rep[2]);
    CHECK_EQ_I(turn1, rep[1]);
    sim_result_free(&res);
}

/* arrivals=trace: turn 1 arrives at 0.001 s while turn 0 still runs; it waits in the pending list,
 * is released when turn 0 ends, and its TTFT counts from that release */
TEST(lifecycle_trace_arrival_waits_for_the_previous_turn)
{
    SimConfig c;
    sim_config_defaults(&c);
    simtest_set(t, &c, "arrivals", "trace");
    Rows rows = {0};
    SimResult res;
    if (run_csv(t, "overlap.csv",
                "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                "a,0,0,1000,20,0\n"
                "a,1,0.001,10,2,1020\n",
                &c, &rows, &res) != 0)
        return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        const SimRequestRow *p = row_of(&rows, rows.rows[0].session, 0), *r = row_of(&rows, rows.rows[0].session, 1);
        CHECK(p && r);
        if (p && r) {
            CHECK_EQ_I(r->offered_ns, 1000000);
            CHECK_EQ_I(r->arrival_ns, p->done_ns); /* released when turn 0 ended */
            CHECK_MSG(r->session_wait_ns == p->done_ns - 1000000, "waited %lld, previous done %lld", (long long)r->session_wait_ns,
                      (long long)p->done_ns);
            CHECK_EQ_I(r->queue_ns + r->restore_ns + r->prefill_ns, r->ttft_ns);
        }
    }
    sim_result_free(&res);
}

/* every row: counted, its TTFT split checked, the restoration of one (session, turn) kept */
typedef struct {
    uint64_t n;
    int split_bad;
    const char *want_sid;
    int want_turn;
    char want_from[32];
    int64_t want_recomputed;
} FitRows;

static int fit_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    (void)e;
    FitRows *a = ctx;
    a->n++;
    if (r->queue_ns < 0 || r->restore_ns < 0 || r->prefill_ns < 0 || r->queue_ns + r->restore_ns + r->prefill_ns != r->ttft_ns)
        a->split_bad++;
    if (a->want_sid && r->session_id && strcmp(r->session_id, a->want_sid) == 0 && r->turn == a->want_turn) {
        snprintf(a->want_from, sizeof a->want_from, "%s", r->restore_from);
        a->want_recomputed = r->recomputed_tokens;
    }
    return 0;
}

/* at every iteration boundary: a run still going after an hour of simulated time (these traces end
 * within seconds) is failed instead of running on */
static void fit_hook(Sim *sm, void *ctx)
{
    (void)ctx;
    if (sim_now(sm) > 3600 * 1000000000LL) sim_fail(sm, "still running after an hour of simulated time");
}

/* run policy on trace with the walker at every boundary: rows + dropped = turns, nothing dropped,
 * every TTFT split exact; 0 when it ran */
static int fit_run(TestCtx *t, SimConfig *c, const char *policy, uint64_t turns, FitRows *a, const char *what)
{
    SimWorld w;
    KvErr e;
    SimResult res;
    if (sim_world_open(&w, c, &e) != 0) {
        CHECK_MSG(0, "%s: %s", what, e.msg);
        return -1;
    }
    sim_test_set_hook(fit_hook, NULL, 1);
    int rc = sim_run(&w, policy, fit_row, a, NULL, NULL, &res, &e);
    sim_test_set_hook(NULL, NULL, 0);
    sim_world_close(&w);
    if (rc != 0) {
        CHECK_MSG(0, "%s, %s: %s", what, policy, e.msg);
        return -1;
    }
    CHECK_MSG(a->n == turns && res.dropped == 0 && res.truncated == 0, "%s, %s: %llu rows, %llu dropped and %llu truncated of %llu turns",
              what, policy, (unsigned long long)a->n, (unsigned long long)res.dropped, (unsigned long long)res.truncated,
              (unsigned long long)turns);
    CHECK_MSG(res.pool_tokens == 4800, "%s: a pool of %llu tokens, not 4,800", what, (unsigned long long)res.pool_tokens);
    CHECK_MSG(a->split_bad == 0, "%s, %s: %d rows whose queue + restore + prefill is not their TTFT", what, policy, a->split_bad);
    sim_result_free(&res);
    return 0;
}

/* The pool holds 4,800 tokens (A100-40GB, Llama-2-7B, mem_util 0.4), the largest turn 3,332. s1's
 * turn 2 is preempted while s2's turn 2 is queued holding s2's 1,624 resident tokens; with nothing
 * admitted the preempted turn needs 3,280 + 16 of the 3,168 left: it takes s2's kept KV (s2's turn
 * then recomputes its history) instead of waiting forever for it. */
TEST(lifecycle_head_takes_kv_kept_for_queued_turns_when_nothing_is_admitted)
{
    static const char csv[] = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                              "s0,0,1.062,978,5,0\ns0,1,,14,24,983\ns0,2,,794,10,1021\n"
                              "s1,0,1.743,784,3,0\ns1,1,,1432,58,787\ns1,2,,858,35,2277\ns1,3,,102,60,3170\n"
                              "s2,0,2.115,468,42,0\ns2,1,,1103,11,510\ns2,2,,1095,36,1624\ns2,3,,1212,55,2755\n"
                              "s3,0,2.163,146,6,0\n";
    const char *trace = test_write_file(t, "kept.csv", csv);
    const char *policies[] = {"recompute", "kv-offload", "hcache", "cake", "cacheflow", "kv-quant", "ideal", "adaptive"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        SimConfig c;
        sim_config_defaults(&c);
        snprintf(c.trace, sizeof c.trace, "%s", trace);
        simtest_set(t, &c, "platform", "hcache-a100");
        simtest_set(t, &c, "model", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram");
        simtest_set(t, &c, "mem_util", "0.4");
        simtest_set(t, &c, "think", "0s");
        c.quiet = 1;
        FitRows a = {.want_sid = "s2", .want_turn = 2};
        if (fit_run(t, &c, policies[k], 12, &a, "the kept-KV trace") != 0) continue;
        if (strcmp(policies[k], "recompute") == 0) { /* its resident KV went to the preempted head */
            CHECK_STR(a.want_from, "recompute");
            CHECK_EQ_I(a.want_recomputed, 1624);
        }
    }
}

static uint64_t fit_rand(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Seeded small traces (3-8 sessions of 1-4 turns, arrivals 0-0.3 s apart, contexts up to the pool
 * of 4,800 tokens less a block) on a pool that holds about one long turn: whatever the policy, the KV
 * allocation, the preemption mode and the think time, every turn fits the pool on its own, so every
 * run completes with every turn delivered. A run that stalls ends in the engine's deadlock error; one
 * that loops through iterations past an hour of simulated time in fit_hook's; a request that preempts
 * itself without ever forming an iteration (seed 814 with blocks.c's growth rule undone) is seen by
 * neither: the test then does not end. */
TEST(lifecycle_turns_that_fit_the_pool_never_stall)
{
    const char *policies[] = {"recompute", "kv-offload", "hcache", "cacheflow"};
    const int64_t P = 4800, maxctx = P - 16;
    for (uint64_t seed = 1; seed <= 1000; seed++) {
        uint64_t x = seed * 0x9e3779b97f4a7c15ULL;
        char buf[8192], name[32], what[64];
        char *p = buf;
        p += sprintf(p, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
        int ns = 3 + (int)(fit_rand(&x) % 6);
        uint64_t turns = 0;
        double at = 0;
        for (int i = 0; i < ns; i++) {
            at += (double)(fit_rand(&x) % 300) / 1000.0;
            int nt = 1 + (int)(fit_rand(&x) % 4);
            int64_t hist = 0;
            for (int k = 0; k < nt; k++) {
                int64_t nnew = 1 + (int64_t)(fit_rand(&x) % 2400), nout = 1 + (int64_t)(fit_rand(&x) % 96);
                if (hist + nnew + nout > maxctx) break;
                if (k == 0) p += sprintf(p, "f%d,0,%.3f,%lld,%lld,0\n", i, at, (long long)nnew, (long long)nout);
                else p += sprintf(p, "f%d,%d,,%lld,%lld,%lld\n", i, k, (long long)nnew, (long long)nout, (long long)hist);
                hist += nnew + nout;
                turns++;
            }
        }
        snprintf(name, sizeof name, "fit%llu.csv", (unsigned long long)seed);
        SimConfig c;
        sim_config_defaults(&c);
        snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, name, buf));
        simtest_set(t, &c, "platform", "hcache-a100");
        simtest_set(t, &c, "model", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram");
        simtest_set(t, &c, "mem_util", "0.4");
        simtest_set(t, &c, "think", seed % 3 ? "0s" : "50ms");
        simtest_set(t, &c, "alloc", seed % 4 == 3 ? "reserve" : "ondemand");
        simtest_set(t, &c, "preempt", seed % 2 ? "recompute" : "swap");
        simtest_set(t, &c, "max_context", "65536"); /* contexts up to the pool, none cut */
        c.quiet = 1;
        const char *policy = policies[seed % (sizeof policies / sizeof *policies)];
        snprintf(what, sizeof what, "seed %llu", (unsigned long long)seed);
        FitRows a = {0};
        fit_run(t, &c, policy, turns, &a, what);
    }
}
