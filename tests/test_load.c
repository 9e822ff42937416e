/* test_load.c — the load modes and what is reported about the load (docs/load-modes.md):
 * arrivals=trace (the same arrival times for every policy, turns waiting for their previous turn),
 * concurrency=N (never more than N requests in flight; N = 1 is batch 1), request_rate with
 * burstiness (the gamma process's mean rate and dispersion), warm-up / cool-down trimming (counts
 * exactly as documented, TBT samples of kept requests only), the overloaded flag and the steady-state
 * test (an overloaded config is flagged, a light one is not), and the settings' rules.
 * Every check compares with a count or a bound computed here from the rows, not with the engine's
 * own numbers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"
#include "traces/trace.h"

/* every row of a run, in completion order */
typedef struct {
    SimRequestRow *r;
    size_t n, cap;
} AllRows;

static int keep_all(void *ctx, const SimRequestRow *row, KvErr *e)
{
    AllRows *a = ctx;
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 256;
        SimRequestRow *nr = realloc(a->r, nc * sizeof *nr);
        if (!nr) return kv_err(e, "out of memory");
        a->r = nr;
        a->cap = nc;
    }
    a->r[a->n] = *row;
    a->r[a->n].session_id = NULL; /* valid during the call only */
    a->n++;
    return 0;
}

static void base_config(SimConfig *c, const char *trace, int64_t requests)
{
    sim_config_defaults(c);
    snprintf(c->trace, sizeof c->trace, "%s", trace);
    c->requests = requests;
    c->evict_each_turn = 1;
    c->max_context = 16384;
    c->quiet = 1;
}

/* run `policy`; rows (may be NULL) get every row */
static int run(TestCtx *t, const SimConfig *c, const char *policy, AllRows *rows, SimResult *res)
{
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    int rc = sim_run(&w, policy, rows ? keep_all : NULL, rows, NULL, NULL, res, &e);
    if (rc != 0) CHECK_MSG(0, "%s: %s", policy, e.msg);
    sim_world_close(&w);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* the most requests in flight at once: [release, done] intervals swept in time order */
static int max_in_flight(const AllRows *a)
{
    size_t n = a->n;
    uint64_t *ev = malloc(2 * n * sizeof *ev);
    if (!ev) return -1;
    /* an end sorts before a start at the same time (a client sends its next request as the previous ends) */
    for (size_t i = 0; i < n; i++) {
        ev[2 * i] = (uint64_t)a->r[i].arrival_ns * 2 + 1;
        ev[2 * i + 1] = (uint64_t)a->r[i].done_ns * 2;
    }
    qsort(ev, 2 * n, sizeof *ev, cmp_u64);
    int cur = 0, best = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        cur += (ev[i] & 1) ? 1 : -1;
        if (cur > best) best = cur;
    }
    free(ev);
    return best;
}

TEST(load_concurrency_one_never_two_in_flight)
{
    SimConfig c;
    base_config(&c, "leval", 60);
    simtest_set(t, &c, "concurrency", "1");
    AllRows a = {0};
    SimResult res;
    if (run(t, &c, "recompute", &a, &res) == 0) {
        CHECK_EQ_U(a.n, 60);
        CHECK_EQ_I(max_in_flight(&a), 1);
        /* batch 1: the clock never idles between a request's end and the next release (leval: think 0) */
        int64_t first = INT64_MAX;
        for (size_t i = 0; i < a.n; i++)
            if (a.r[i].arrival_ns < first) first = a.r[i].arrival_ns;
        CHECK_EQ_I(first, 0);
        for (size_t i = 0; i < a.n; i++) CHECK_EQ_I(a.r[i].session_wait_ns, 0);
        CHECK(!res.load.overloaded);
    }
    sim_result_free(&res);
    free(a.r);
    /* and four clients do reach four in flight, never five */
    base_config(&c, "sharegpt4", 200);
    simtest_set(t, &c, "concurrency", "4");
    memset(&a, 0, sizeof a);
    if (run(t, &c, "recompute", &a, &res) == 0) {
        CHECK_EQ_U(a.n, 200);
        CHECK_EQ_I(max_in_flight(&a), 4);
    }
    sim_result_free(&res);
    free(a.r);
}

static int by_id(const void *a, const void *b)
{
    const SimRequestRow *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* arrivals=trace: every policy sees the same arrival times; a turn that arrives while its previous
 * turn runs waits, and TTFT counts from the release (arrival + wait) */
TEST(load_trace_arrivals_same_for_every_policy)
{
    SimConfig c;
    base_config(&c, "sharegpt4", 300);
    simtest_set(t, &c, "arrivals", "trace");
    simtest_set(t, &c, "think", "2 s"); /* shorter than a turn's decode: later turns often wait */
    simtest_set(t, &c, "session_rate", "0.2");
    const char *pol[2] = {"recompute", "ideal"};
    AllRows a[2] = {{0}, {0}};
    SimResult res[2];
    int ok = 1;
    for (int p = 0; p < 2; p++) ok &= run(t, &c, pol[p], &a[p], &res[p]) == 0;
    if (ok) {
        CHECK_EQ_U(a[0].n, a[1].n);
        qsort(a[0].r, a[0].n, sizeof *a[0].r, by_id);
        qsort(a[1].r, a[1].n, sizeof *a[1].r, by_id);
        int waited = 0, release_differs = 0;
        for (size_t i = 0; i < a[0].n && i < a[1].n; i++) {
            CHECK_EQ_U(a[0].r[i].id, a[1].r[i].id);
            CHECK_EQ_I(a[0].r[i].offered_ns, a[1].r[i].offered_ns);
            for (int p = 0; p < 2; p++) {
                CHECK(a[p].r[i].session_wait_ns >= 0);
                CHECK_EQ_I(a[p].r[i].arrival_ns, a[p].r[i].offered_ns + a[p].r[i].session_wait_ns);
            }
            waited += a[0].r[i].session_wait_ns > 0;
            release_differs += a[0].r[i].arrival_ns != a[1].r[i].arrival_ns;
        }
        CHECK_MSG(waited > 0, "no turn waited for its previous turn: the test does not exercise the wait");
        CHECK(release_differs > 0); /* the policies do differ, their arrivals do not */
        CHECK_EQ_U(res[0].load.waited, (uint64_t)waited);
    }
    for (int p = 0; p < 2; p++) {
        sim_result_free(&res[p]);
        free(a[p].r);
    }
    /* under arrivals=session the same trace's later turns follow each policy's own completions */
    simtest_set(t, &c, "arrivals", "session");
    AllRows b[2] = {{0}, {0}};
    ok = 1;
    for (int p = 0; p < 2; p++) ok &= run(t, &c, pol[p], &b[p], &res[p]) == 0;
    if (ok) {
        qsort(b[0].r, b[0].n, sizeof *b[0].r, by_id);
        qsort(b[1].r, b[1].n, sizeof *b[1].r, by_id);
        int differ = 0;
        for (size_t i = 0; i < b[0].n && i < b[1].n; i++) differ += b[0].r[i].offered_ns != b[1].r[i].offered_ns;
        CHECK(differ > 0);
    }
    for (int p = 0; p < 2; p++) {
        sim_result_free(&res[p]);
        free(b[p].r);
    }
}

/* E2E (summary.json e2e_s): each kept request's last token − its release, where its TTFT starts
 * (under arrivals=trace the release is after the session wait, not the load process's arrival) */
TEST(load_e2e_is_done_minus_release)
{
    SimConfig c;
    base_config(&c, "sharegpt4", 200);
    simtest_set(t, &c, "arrivals", "trace");
    simtest_set(t, &c, "think", "2 s");
    simtest_set(t, &c, "session_rate", "0.2");
    AllRows a = {0};
    SimResult res;
    if (run(t, &c, "kv-offload", &a, &res) == 0) {
        double sum = 0;
        int64_t mx = 0;
        int waited = 0;
        for (size_t i = 0; i < a.n; i++) {
            int64_t e2e = a.r[i].done_ns - a.r[i].arrival_ns;
            CHECK(e2e >= a.r[i].ttft_ns);
            sum += (double)e2e;
            if (e2e > mx) mx = e2e;
            waited += a.r[i].session_wait_ns > 0;
        }
        CHECK(waited > 0);
        CHECK_EQ_U(res.e2e.n, (uint64_t)a.n);
        CHECK(a.n > 0 && fabs(hist_mean(&res.e2e) - sum / (double)a.n) <= 1e-9 * sum / (double)a.n);
        CHECK(hist_max(&res.e2e) == (double)mx);
        sim_result_free(&res);
    }
    free(a.r);
}

/* request_rate: the gamma process's mean rate, and its dispersion (CV = 1/sqrt(burstiness)) */
TEST(load_request_rate_mean_and_burstiness)
{
    const double rates[2] = {4.0, 0.5}, shapes[2] = {1.0, 0.25};
    for (int k = 0; k < 2; k++) {
        TraceOptions o;
        memset(&o, 0, sizeof o);
        o.source = "sharegpt4";
        o.seed = 7;
        o.max_requests = 20000;
        o.request_rate_per_s = rates[k];
        o.burstiness = shapes[k];
        KvErr e;
        TraceSource *s = trace_open(&o, &e);
        if (!s) {
            CHECK_MSG(0, "%s", e.msg);
            continue;
        }
        TraceRequest r;
        int64_t prev = 0, n = 0;
        double sum = 0, sum2 = 0;
        while (trace_next(s, &r, &e) == 1) {
            CHECK(r.arrival_ns >= prev);
            CHECK_EQ_I(r.think_ns, 0);
            double g = (double)(r.arrival_ns - prev) / 1e9;
            sum += g, sum2 += g * g;
            prev = r.arrival_ns;
            n++;
        }
        CHECK_EQ_I(n, 20000);
        double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
        /* 20,000 gaps: the mean within 3 % (about 4 standard errors at CV 2), the CV within 10 % */
        CHECK_NEAR(1.0 / mean, rates[k], 0.03, 0);
        CHECK_NEAR(sqrt(var) / mean, 1.0 / sqrt(shapes[k]), 0.10, 0);
        CHECK_CONTAINS(trace_describe(s), "gamma process");
        trace_close(s);
    }
    /* through the simulator: the rows' arrivals have the requested mean rate */
    SimConfig c;
    base_config(&c, "leval", 400);
    simtest_set(t, &c, "request_rate", "0.05");
    AllRows a = {0};
    SimResult res;
    if (run(t, &c, "ideal", &a, &res) == 0) {
        int64_t lo = INT64_MAX, hi = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (a.r[i].offered_ns < lo) lo = a.r[i].offered_ns;
            if (a.r[i].offered_ns > hi) hi = a.r[i].offered_ns;
        }
        CHECK_NEAR((double)(a.n - 1) / ((double)(hi - lo) / 1e9), 0.05, 0.15, 0);
    }
    sim_result_free(&res);
    free(a.r);
}

/* warmup / cooldown: by requests, the first and last N of the stream; by time, the requests whose
 * arrival is within T of the first / the last arrival. Only kept requests enter the metrics. */
TEST(load_trimming_counts_as_documented)
{
    SimConfig c;
    base_config(&c, "sharegpt4", 300);
    AllRows full = {0};
    SimResult r0;
    int ok0 = run(t, &c, "recompute", &full, &r0) == 0;
    simtest_set(t, &c, "warmup", "50");
    simtest_set(t, &c, "cooldown", "30");
    AllRows a = {0};
    SimResult res;
    if (ok0 && run(t, &c, "recompute", &a, &res) == 0) {
        CHECK_EQ_U(a.n, full.n); /* every request keeps its row */
        CHECK_EQ_U(res.load.trimmed_warmup, 50);
        CHECK_EQ_U(res.load.trimmed_cooldown, 30);
        CHECK_EQ_U(res.requests, r0.requests - 80);
        CHECK_EQ_U(res.ttft.n, r0.requests - 80);
        /* TBT samples: every gap of the kept requests (ids 50..269), none of the others */
        uint64_t gaps = 0;
        for (size_t i = 0; i < a.n; i++)
            if (a.r[i].id >= 50 && a.r[i].id < 270) gaps += (uint64_t)(a.r[i].output_tokens - 1);
        CHECK_EQ_U(res.tbt.n, gaps);
    }
    sim_result_free(&res);
    free(a.r);
    /* by time */
    simtest_set(t, &c, "warmup", "300 s");
    simtest_set(t, &c, "cooldown", "200 s");
    memset(&a, 0, sizeof a);
    if (ok0 && run(t, &c, "recompute", &a, &res) == 0) {
        int64_t lo = INT64_MAX, hi = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (a.r[i].offered_ns < lo) lo = a.r[i].offered_ns;
            if (a.r[i].offered_ns > hi) hi = a.r[i].offered_ns;
        }
        uint64_t warm = 0, cool = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (a.r[i].offered_ns - lo < 300000000000LL) warm++;
            else if (a.r[i].offered_ns > hi - 200000000000LL) cool++;
        }
        CHECK(warm > 0 && cool > 0);
        CHECK_EQ_U(res.load.trimmed_warmup, warm);
        CHECK_EQ_U(res.load.trimmed_cooldown, cool);
        CHECK_EQ_U(res.requests, a.n - warm - cool);
    }
    sim_result_free(&res);
    sim_result_free(&r0);
    free(a.r);
    free(full.r);
}

/* a light load is neither overloaded nor flagged; sessions arriving far faster than the GPU serves
 * them are flagged, with the evidence */
TEST(load_overloaded_flag)
{
    SimConfig c;
    base_config(&c, "sharegpt4", 400);
    simtest_set(t, &c, "session_rate", "0.02");
    SimResult res;
    if (run(t, &c, "ideal", NULL, &res) == 0) {
        CHECK_MSG(!res.load.overloaded, "light load flagged: served %g of %g /s, growth %g s (t %g)", res.load.served_per_s,
                  res.load.offered_per_s, res.load.growth_s, res.load.slope_t);
        CHECK(res.load.served_per_s > 0.9 * res.load.offered_per_s);
    }
    sim_result_free(&res);
    /* 1 conversation/s: the queue built while sessions start is still served long after */
    base_config(&c, "sharegpt4", 1000);
    simtest_set(t, &c, "session_rate", "1");
    if (run(t, &c, "recompute", NULL, &res) == 0) {
        CHECK(res.load.overloaded);
        CHECK_MSG(res.load.backlog_s > res.load.overload_growth_s, "backlog %g s", res.load.backlog_s);
    }
    sim_result_free(&res);
    /* open loop past capacity: requests arrive faster than they are done */
    base_config(&c, "leval", 300);
    simtest_set(t, &c, "request_rate", "5");
    if (run(t, &c, "recompute", NULL, &res) == 0) {
        CHECK(res.load.overloaded);
        CHECK(res.load.served_per_s < 0.9 * res.load.offered_per_s);
    }
    sim_result_free(&res);
}

TEST(load_settings_rules)
{
    SimConfig c;
    KvErr e;
    sim_config_defaults(&c);
    CHECK_EQ_I(sim_load_mode(&c), SIM_LOAD_SESSION);
    CHECK_EQ_I(sim_config_check(&c, &e), 0);
    simtest_set(t, &c, "arrivals", "trace");
    CHECK_EQ_I(sim_load_mode(&c), SIM_LOAD_TRACE);
    simtest_set(t, &c, "concurrency", "2");
    CHECK(sim_config_check(&c, &e) != 0);
    CHECK_CONTAINS(e.msg, "arrivals=trace");
    simtest_set(t, &c, "arrivals", "session");
    CHECK_EQ_I(sim_load_mode(&c), SIM_LOAD_CONCURRENCY);
    CHECK_EQ_I(sim_config_check(&c, &e), 0);
    simtest_set(t, &c, "request_rate", "3");
    CHECK(sim_config_check(&c, &e) != 0);
    CHECK_CONTAINS(e.msg, "request_rate");
    simtest_set(t, &c, "concurrency", "0");
    CHECK_EQ_I(sim_load_mode(&c), SIM_LOAD_TRACE); /* request_rate is open loop */
    CHECK_EQ_I(sim_config_check(&c, &e), 0);
    simtest_set(t, &c, "request_rate", "0");
    simtest_set(t, &c, "burstiness", "0.5");
    CHECK(sim_config_check(&c, &e) != 0);
    CHECK_CONTAINS(e.msg, "burstiness");
    CHECK(sim_config_set(&c, "burstiness", "0", &e) != 0);
    CHECK(sim_config_set(&c, "concurrency", "-1", &e) != 0);
    /* warmup: a count or a duration, round trip through the JSON record */
    simtest_set(t, &c, "burstiness", "1");
    simtest_set(t, &c, "warmup", "200");
    CHECK_EQ_I(c.warmup.n, 200);
    CHECK_EQ_I(c.warmup.by_time, 0);
    simtest_set(t, &c, "cooldown", "5 min");
    CHECK_EQ_I(c.cooldown.n, 300000000000LL);
    CHECK_EQ_I(c.cooldown.by_time, 1);
    CHECK(sim_config_set(&c, "warmup", "soon", &e) != 0);
    CHECK_CONTAINS(e.msg, "warmup");
    CHECK(sim_config_set(&c, "warmup", "-3", &e) != 0);
    CHECK_EQ_I(c.warmup.n, 200); /* unchanged on error */
}

/* A turn read from the trace and not admitted yet costs a compact Turn (≤ 64 bytes), not a
 * full request. One session with 100,000 closed-loop turns: all of its later turns are read ahead
 * into the session's pending list at once, and the engine's count of the bytes those turns hold
 * (SimResult.waiting_peak_bytes, which also counts the session and the FIFO's slots: a few KiB here)
 * must stay at ≤ 64 bytes per turn. */
TEST(load_pending_turns_are_compact)
{
    enum { TURNS = 100000 };
    char path[4096];
    snprintf(path, sizeof path, "%s/one-session.csv", test_tmpdir(t));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 0; i < TURNS; i++) fprintf(f, "s,%d,%s,1,1,0\n", i, i ? "" : "0");
    CHECK(fclose(f) == 0);
    SimConfig c;
    base_config(&c, path, TURNS);
    c.evict_each_turn = 0;
    SimResult res;
    if (run(t, &c, "recompute", NULL, &res) != 0) return;
    CHECK_EQ_U(res.requests, TURNS);
    /* the pending list held every later turn at once */
    CHECK_MSG(res.waiting_peak_bytes >= (uint64_t)(TURNS - 1) * 32, "peak %llu bytes", (unsigned long long)res.waiting_peak_bytes);
    CHECK_MSG(res.waiting_peak_bytes <= (uint64_t)TURNS * 64 + 4096, "%.1f bytes per waiting turn (at most 64)",
              (double)res.waiting_peak_bytes / TURNS);
    sim_result_free(&res);
}
