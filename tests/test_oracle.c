/* test_oracle.c — the trace-level oracle bound (sim/engine/oracle.c): its keep LP against brute force
 * (every integer allocation, and every keep/evict decision), the degenerate pools, a single request
 * against the ideal policy, and no policy below the bound on fuzzed small traces. */
#include <stdlib.h>

#include "sim/engine/engine_int.h"
#include "tests/simtest.h"

/* ---- the keep LP ---- */

#define T_SPAN 8 /* brute-force instances live on the integer times [0, T_SPAN) */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int lp_feasible(const SimOracleInterval *iv, int n, int64_t pool, const int64_t *x)
{
    for (int i = 0; i < n; i++)
        if (x[i] < 0 || x[i] > (iv[i].cap > 0 ? iv[i].cap : 0)) return 0;
    for (int64_t t = 0; t < T_SPAN; t++) {
        int64_t used = 0;
        for (int i = 0; i < n; i++)
            if (iv[i].t0 <= t && t < iv[i].t1) used += x[i];
        if (used > pool) return 0;
    }
    return 1;
}

static int64_t lp_value(const SimOracleInterval *iv, int n, const int64_t *x)
{
    int64_t v = 0;
    for (int i = 0; i < n; i++) v += iv[i].w * x[i];
    return v;
}

/* the best value over x_i in {0, ..., cap_i} (all_or_none: {0, cap_i}, the keep/evict decisions) */
static int64_t brute(const SimOracleInterval *iv, int n, int64_t pool, int all_or_none, int64_t *x, int i)
{
    if (i == n) return lp_feasible(iv, n, pool, x) ? lp_value(iv, n, x) : -1;
    int64_t best = -1, cap = iv[i].cap > 0 ? iv[i].cap : 0;
    for (int64_t v = 0; v <= cap; v += all_or_none && cap > 0 ? cap : 1) {
        x[i] = v;
        int64_t b = brute(iv, n, pool, all_or_none, x, i + 1);
        if (b > best) best = b;
    }
    x[i] = 0;
    return best;
}

static void random_instance(uint64_t *s, SimOracleInterval *iv, int n, int64_t *pool, int unit)
{
    for (int i = 0; i < n; i++) {
        int64_t a = (int64_t)(rng_next(s) % T_SPAN), b = (int64_t)(rng_next(s) % (T_SPAN + 1));
        if (rng_next(s) % 5 == 0) b = a; /* no length: constrains nothing */
        else if (b < a) { int64_t t = a; a = b; b = t; }
        iv[i] = (SimOracleInterval){a, b, unit ? 1 : (int64_t)(rng_next(s) % 4), 1 + (int64_t)(rng_next(s) % 20)};
        if (rng_next(s) % 9 == 0) iv[i].w = 0;
    }
    *pool = (int64_t)(rng_next(s) % 6);
}

/* The LP's constraint matrix (intervals × time points) has consecutive ones, hence is totally
 * unimodular: with integer caps and pool its optimum is attained at an integer point, so the best
 * integer allocation IS the LP's optimum — brute force over those is a brute-force LP. */
TEST(oracle_keep_lp_matches_brute_force)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (int rep = 0; rep < 20000; rep++) { /* (a flow without reverse edges fails a few in 20,000) */
        SimOracleInterval iv[6];
        int64_t pool, x[6], bx[6] = {0};
        int n = 1 + (int)(rng_next(&s) % 6);
        random_instance(&s, iv, n, &pool, 0);
        KvErr e;
        CHECK(sim_oracle_keep_lp(iv, (size_t)n, pool, x, &e) == 0);
        int64_t want = brute(iv, n, pool, 0, bx, 0);
        CHECK_MSG(lp_feasible(iv, n, pool, x), "instance %d: the flow's allocation breaks a constraint", rep);
        CHECK_MSG(lp_value(iv, n, x) == want, "instance %d (n %d, pool %lld): flow %lld, brute force %lld", rep, n, (long long)pool,
                  (long long)lp_value(iv, n, x), (long long)want);
    }
}

/* keep/evict, integral: the LP never gains less than the best whole-history decisions (so the bound
 * it gives is at most theirs), and gains the same when its own solution keeps each history whole or
 * not at all; unit histories: always the same */
TEST(oracle_keep_lp_bounds_exhaustive_keep_evict)
{
    uint64_t s = 12345;
    int integral_seen = 0, fractional_seen = 0;
    for (int rep = 0; rep < 4000; rep++) {
        SimOracleInterval iv[6];
        int64_t pool, x[6], bx[6] = {0};
        int n = 1 + (int)(rng_next(&s) % 6), unit = rep % 2;
        random_instance(&s, iv, n, &pool, unit);
        KvErr e;
        CHECK(sim_oracle_keep_lp(iv, (size_t)n, pool, x, &e) == 0);
        int64_t lp = lp_value(iv, n, x), ex = brute(iv, n, pool, 1, bx, 0);
        CHECK_MSG(lp >= ex, "instance %d: the LP gains %lld, keep/evict %lld", rep, (long long)lp, (long long)ex);
        int whole = 1;
        for (int i = 0; i < n; i++)
            if (x[i] != 0 && x[i] != iv[i].cap) whole = 0;
        if (whole || unit) CHECK_MSG(lp == ex, "instance %d: integral LP %lld, keep/evict %lld", rep, (long long)lp, (long long)ex);
        if (whole) integral_seen++;
        else fractional_seen++;
    }
    CHECK(integral_seen > 0 && fractional_seen > 0); /* both cases were exercised */
}

TEST(oracle_keep_lp_degenerate_pools)
{
    KvErr e;
    SimOracleInterval iv[4] = {{0, 10, 5, 3}, {5, 15, 7, 2}, {10, 10, 4, 9}, {2, 8, 3, 0}};
    int64_t x[4];
    CHECK(sim_oracle_keep_lp(iv, 4, 0, x, &e) == 0); /* zero pool: nothing with a length is kept */
    CHECK_EQ_I(x[0], 0);
    CHECK_EQ_I(x[1], 0);
    CHECK_EQ_I(x[2], 4); /* no length: constrains nothing */
    CHECK_EQ_I(x[3], 0); /* no gain */
    CHECK(sim_oracle_keep_lp(iv, 4, 1000, x, &e) == 0); /* all fits */
    CHECK_EQ_I(x[0], 5);
    CHECK_EQ_I(x[1], 7);
    CHECK_EQ_I(x[2], 4);
    CHECK_EQ_I(x[3], 0);
    CHECK(sim_oracle_keep_lp(iv, 4, 9, x, &e) == 0); /* [5, 10) holds 9: the heavier interval first */
    CHECK_EQ_I(x[0], 5);
    CHECK_EQ_I(x[1], 4);
    CHECK(sim_oracle_keep_lp(iv, 0, 9, x, &e) == 0);
}

/* ---- the bound on traces ---- */

static int oracle_of(TestCtx *t, const SimConfig *c, SimOracle *o)
{
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    int rc = sim_oracle(&w, o, &e);
    if (rc != 0) CHECK_MSG(0, "oracle: %s", e.msg);
    sim_world_close(&w);
    return rc;
}

/* one request alone, no history: the bound is the ideal policy's TTFT exactly (its prefill in
 * token-budget chunks, the engine's own iteration costs); the same for a restoring turn whose
 * history a long think time lets the link bring in before it */
TEST(oracle_single_request_equals_ideal)
{
    static const int64_t news[] = {100, 512, 1300};
    for (size_t k = 0; k < KV_ARRAY_LEN(news); k++) {
        SimConfig c;
        sim_config_defaults(&c);
        char text[256];
        snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\ns0,0,0,%lld,3,0\n",
                 (long long)news[k]);
        snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "one.csv", text));
        c.quiet = 1;
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, &c, "ideal", &w, &rows, &res) != 0) return;
        SimOracle o;
        KvErr e;
        CHECK(sim_oracle(&w, &o, &e) == 0);
        CHECK_EQ_I(o.requests, 1);
        CHECK_EQ_I(rows.n, 1);
        CHECK_MSG(llround(o.ttft_mean_s * 1e9) == rows.rows[0].ttft_ns, "%lld new tokens: oracle %.9f s, ideal %.9f s",
                  (long long)news[k], o.ttft_mean_s, (double)rows.rows[0].ttft_ns / 1e9);
        CHECK(o.ttft_p99_s == hist_percentile(&res.ttft, 0.99) / 1e9);
        sim_result_free(&res);
        sim_world_close(&w);
    }
    /* turn 1 restores 2,001 tokens 10 s after turn 0: prefetched whole, nothing left to restore */
    SimConfig c;
    simtest_iso_config(t, &c, 2000, 300, "hcache-a100", "Llama-2-7B");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "ideal", &w, &rows, &res) != 0) return;
    SimOracle o;
    KvErr e;
    CHECK(sim_oracle(&w, &o, &e) == 0);
    CHECK_EQ_I(o.requests, 2);
    CHECK_NEAR(o.ttft_mean_s, hist_mean(&res.ttft) / 1e9, 1e-12, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* a random small trace (dense: sessions and turns close together): sessions of 1-4 turns, each turn timed (open loop) or after its think time
 * (closed loop), histories that are the session's context so far; rows in release order */
typedef struct FuzzRow {
    int session, turn;
    double at; /* < 0: closed loop */
    int64_t nnew, nout, hist;
} FuzzRow;

static int fuzz_cmp(const void *a, const void *b)
{
    const FuzzRow *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    return x->session != y->session ? x->session - y->session : x->turn - y->turn;
}

static void fuzz_trace(TestCtx *t, uint64_t *s, int dense, char *path, size_t cap)
{
    FuzzRow rows[32];
    int n = 0, sessions = 2 + (int)(rng_next(s) % 4), timed = (int)(rng_next(s) % 2);
    double start = 0;
    for (int k = 0; k < sessions; k++) {
        start += (double)(rng_next(s) % (dense ? 30 : 2000)) / 1000.0;
        int64_t hist = 0;
        int turns = 1 + (int)(rng_next(s) % 4);
        double at = start;
        for (int j = 0; j < turns; j++) {
            int64_t nnew = 1 + (int64_t)(rng_next(s) % 1500), nout = 1 + (int64_t)(rng_next(s) % 60);
            rows[n++] = (FuzzRow){k, j, j == 0 || timed ? at : -1, nnew, nout, hist};
            hist += nnew + nout;
            at += (double)(rng_next(s) % (dense ? 150 : 600)) / 1000.0;
        }
    }
    /* timed: by arrival; closed loop: session after session, each turn 0 timed in increasing order */
    if (timed) qsort(rows, (size_t)n, sizeof *rows, fuzz_cmp);
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 0; i < n; i++) {
        char arr[32] = "";
        if (rows[i].at >= 0) snprintf(arr, sizeof arr, "%.3f", rows[i].at);
        len += (size_t)snprintf(text + len, sizeof text - len, "s%d,%d,%s,%lld,%lld,%lld\n", rows[i].session, rows[i].turn, arr,
                                (long long)rows[i].nnew, (long long)rows[i].nout, (long long)rows[i].hist);
    }
    snprintf(path, cap, "%s", test_write_file(t, "fuzz.csv", text));
}

static const char *const k_pols[] = {"recompute", "kv-offload", "hcache", "hcache-noschd", "naive-hybrid", "cake", "cacheflow",
                                     "kv-quant", "hcache-quant", "adaptive", "hcache-cf"};

/* every policy but ideal (which ignores the KV pool's capacity) at or above the bound */
static int no_policy_beats(TestCtx *t, const SimConfig *c, const SimOracle *o, const char *what)
{
    /* (the LP's gains are rounded up to the picosecond per token: the two may differ by that much) */
    CHECK_MSG(o->noprefetch_mean_s >= o->ttft_mean_s * (1 - 1e-9) && o->noprefetch_p99_s >= o->ttft_p99_s,
              "%s: the bound without prefetch (%.9f s, %.9f s) below the one with it (%.9f s, %.9f s)", what, o->noprefetch_mean_s,
              o->noprefetch_p99_s, o->ttft_mean_s, o->ttft_p99_s);
    for (size_t p = 0; p < KV_ARRAY_LEN(k_pols); p++) {
        SimWorld w;
        Rows rows;
        SimResult res;
        if (simtest_run(t, c, k_pols[p], &w, &rows, &res) != 0) return -1;
        double mean = hist_mean(&res.ttft) / 1e9, p99 = hist_percentile(&res.ttft, 0.99) / 1e9;
        CHECK_MSG(mean >= o->ttft_mean_s, "%s, %s: mean TTFT %.9f s below the oracle's %.9f s", what, k_pols[p], mean, o->ttft_mean_s);
        CHECK_MSG(p99 >= o->ttft_p99_s, "%s, %s: p99 TTFT %.9f s below the oracle's %.9f s", what, k_pols[p], p99, o->ttft_p99_s);
        /* no built-in policy prefetches: the bound without prefetch holds for each of them too */
        CHECK_MSG(mean >= o->noprefetch_mean_s, "%s, %s: mean TTFT %.9f s below the oracle's without prefetch %.9f s", what, k_pols[p],
                  mean, o->noprefetch_mean_s);
        CHECK_MSG(p99 >= o->noprefetch_p99_s, "%s, %s: p99 TTFT %.9f s below the oracle's without prefetch %.9f s", what, k_pols[p], p99,
                  o->noprefetch_p99_s);
        sim_result_free(&res);
        sim_world_close(&w);
    }
    return 0;
}

/* eight sessions alike, starting together, each turn 1 restoring 3,000 tokens 20 ms after turn 0
 * ended: the link prefetches ~770 of them in the gap, keeping the rest of all eight needs more than
 * the 12.5K-token pool, so the LP keeps only part of them: a higher bound than with a pool that
 * holds them all */
TEST(oracle_pool_binds_and_no_policy_beats_the_bound)
{
    char text[2048];
    size_t len = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int k = 0; k < 8; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "s%d,0,0.00%d,2990,10,0\n", k, k);
    for (int k = 0; k < 8; k++) len += (size_t)snprintf(text + len, sizeof text - len, "s%d,1,,200,5,3000\n", k);
    SimConfig c;
    sim_config_defaults(&c);
    c.quiet = 1;
    snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "bind.csv", text));
    snprintf(c.platform, sizeof c.platform, "cacheflow-h100-10g");
    snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
    simtest_set(t, &c, "store", "remote");
    simtest_set(t, &c, "mem_util", "0.22");
    simtest_set(t, &c, "think", "20 ms");
    SimOracle o;
    if (oracle_of(t, &c, &o) != 0) return;
    CHECK_EQ_I(o.requests, 16);
    CHECK_EQ_I(o.candidates, 8);
    CHECK(o.kept > 0);
    no_policy_beats(t, &c, &o, "eight sessions alike");
    /* the same with the pool that holds them all: every candidate kept, a lower bound */
    simtest_set(t, &c, "mem_util", "0.5");
    SimOracle big;
    if (oracle_of(t, &c, &big) != 0) return;
    CHECK_EQ_I(big.kept, big.candidates);
    CHECK_MSG(big.ttft_mean_s < o.ttft_mean_s, "the small pool binds: mean %.9f s, with room for all %.9f s", o.ttft_mean_s,
              big.ttft_mean_s);
}

TEST(oracle_no_policy_beats_the_bound_fuzzed)
{
    static const struct {
        const char *platform, *model, *store, *mem_util;
    } setups[] = {{"hcache-a100", "Llama-2-7B", "dram+ssd", "0.5"},
                  {"cacheflow-h100-10g", "Llama-3.1-8B", "remote", "0.22"},
                  {"hcache-a100", "Llama-2-7B", "dram", "0.45"}};
    static const char *const thinks[] = {"0 s", "20 ms", "2 s"};
    uint64_t s = 777;
    int kept = 0;
    for (int rep = 0; rep < 18; rep++) {
        SimConfig c;
        sim_config_defaults(&c);
        c.quiet = 1;
        fuzz_trace(t, &s, rep % 2 == 0, c.trace, sizeof c.trace);
        int k = rep % 3;
        snprintf(c.platform, sizeof c.platform, "%s", setups[k].platform);
        snprintf(c.model, sizeof c.model, "%s", setups[k].model);
        simtest_set(t, &c, "store", setups[k].store);
        simtest_set(t, &c, "mem_util", setups[k].mem_util);
        simtest_set(t, &c, "evict_each_turn", rep % 4 == 3 ? "true" : "false");
        simtest_set(t, &c, "think", thinks[(rep / 3) % 3]);
        if (rep % 5 == 4) simtest_set(t, &c, "arrivals", "trace");
        SimOracle o;
        if (oracle_of(t, &c, &o) != 0) return;
        if (o.kept > 0) kept++;
        char what[32];
        snprintf(what, sizeof what, "fuzzed trace %d", rep);
        if (no_policy_beats(t, &c, &o, what) != 0) return;
    }
    CHECK_MSG(kept > 0, "no fuzzed trace kept a history across a gap: the keep LP was not exercised");
}

/* traces of at most 6 requests: every keep/evict decision (whole histories, on the same nominal
 * timeline and pools, with the same per-request costs) gives a total at least the oracle's */
TEST(oracle_exhaustive_keep_evict_on_small_traces)
{
    uint64_t s = 4242;
    int binding = 0;
    for (int rep = 0; rep < 40; rep++) {
        char text[1024];
        size_t len = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
        int sessions = rep % 2 ? 3 : 1 + (int)(rng_next(&s) % 3);
        int64_t hist[3], common = 2000 + (int64_t)(rng_next(&s) % 1500);
        for (int k = 0; k < sessions; k++) {
            hist[k] = rep % 2 ? common : 1 + (int64_t)(rng_next(&s) % 3500); /* alike: gaps that overlap */
            len += (size_t)snprintf(text + len, sizeof text - len, "s%d,0,0.00%d,%lld,%d,0\n", k, k, (long long)hist[k] - 1, 1);
        }
        for (int k = 0; k < sessions; k++)
            len += (size_t)snprintf(text + len, sizeof text - len, "s%d,1,,%d,3,%lld\n", k, 1 + (int)(rng_next(&s) % 300),
                                    (long long)hist[k]);
        SimConfig c;
        sim_config_defaults(&c);
        c.quiet = 1;
        snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "small.csv", text));
        snprintf(c.platform, sizeof c.platform, "cacheflow-h100-10g");
        snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
        simtest_set(t, &c, "store", "remote");
        simtest_set(t, &c, "mem_util", rep % 2 ? "0.21" : "0.3");
        simtest_set(t, &c, "think", rep % 3 ? "10 ms" : "40 ms");
        SimWorld w;
        KvErr e;
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        SimOracle o;
        OracleRow *r = NULL;
        CHECK(oracle_rows(&w, &o, &r, &e) == 0);
        sim_world_close(&w);
        if (!r) return;
        int n = (int)o.requests, cand[6], nc = 0;
        CHECK(n <= 6);
        double base = 0;
        for (int i = 0; i < n && i < 6; i++) {
            base += r[i].base;
            if (r[i].keep_cap > 0) cand[nc++] = i;
        }
        double best = INFINITY;
        int refused = 0;
        for (unsigned mask = 0; mask < 1u << nc; mask++) {
            int ok = 1;
            for (int a = 0; a < nc && ok; a++) { /* the pool at each kept interval's start */
                if (!(mask >> a & 1)) continue;
                const OracleRow *x = &r[cand[a]];
                if (x->keep_t1 <= x->keep_t0) continue;
                int64_t used = 0;
                for (int b = 0; b < nc; b++) {
                    const OracleRow *y = &r[cand[b]];
                    if ((mask >> b & 1) && y->keep_t0 <= x->keep_t0 && x->keep_t0 < y->keep_t1) used += y->keep_tokens;
                }
                if (used > (int64_t)o.pool_tokens) ok = 0;
            }
            if (!ok) {
                refused = 1;
                continue;
            }
            double total = base;
            for (int a = 0; a < nc; a++)
                if (mask >> a & 1) {
                    const OracleRow *x = &r[cand[a]];
                    double g = x->rho * (double)x->keep_tokens;
                    total -= g < x->save ? g : x->save;
                }
            if (total < best) best = total;
        }
        binding += refused;
        double lp = o.ttft_mean_s * 1e9 * (double)n;
        CHECK_MSG(lp <= best * (1 + 1e-12), "trace %d (%d candidates, pool %llu): oracle total %.3f ns, best keep/evict %.3f ns", rep,
                  nc, (unsigned long long)o.pool_tokens, lp, best);
        free(r);
    }
    CHECK_MSG(binding > 0, "no small trace had its pool refuse a whole history: the search was not exercised");
}
