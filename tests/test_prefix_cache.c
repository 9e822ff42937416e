/* test_prefix_cache.c — the HBM prefix cache in the engine (lifecycle.c admission, restore.c,
 * session.c eviction, check.c's walker): requests whose contexts name the same blocks.
 *  - closed form: N requests sharing a P-token prefix, one after another, pool large: the first
 *    computes everything; every later one takes the prefix from HBM and its TTFT is exactly that of a
 *    request whose history of P tokens is resident (the ideal policy with the cache off); it
 *    recomputes nothing; the counters: N named, N − 1 hits of P tokens, blocks inserted once each,
 *    none computed twice;
 *  - the same trace with the prefix as the requests' history (restore_from "prefix");
 *  - a shared prefix never makes an isolated request slower than without sharing, for every
 *    policy; overlapping requests hold their blocks while in use; the accounting walker runs at every
 *    iteration boundary (pool = reservations + idle resident KV +
 *    cached blocks; reference counts = holders);
 *  - LRU under a pool that holds one chain: A, A, B, B hits the whole prefix on the second of each
 *    pair; A, B, A, B finds only the leading blocks that survived the other chain's admission
 *    (eviction takes a chain's tail first);
 *  - a trace that names no blocks is unaffected by the setting;
 *  - a history whose leading blocks are cached and whose session has a saved copy: the cached prefix
 *    is taken, only the rest is loaded (its bytes over H2D exactly), nothing recomputed, and no
 *    policy is slower for it than with the cache off nor faster than the history resident;
 *    loaded whole and quantized (kv-quant.layerwise=false), only that rest is dequantized;
 *  - a chat generator's shared system prompt: the first session computes it, the first turn of every
 *    later session takes it from the cache (TTFT of its question alone over a resident prompt); the
 *    settings' rules (which generators take system_prompt_tokens, prompt_groups).
 */
#include <stdlib.h>
#include <string.h>

#include "calibrate/schedule.h"
#include "policies/policy.h"
#include "tests/simtest.h"

#define PB 512 /* the CSV's hash_ids blocks */

/* one request per session, `n` of them `gap_s` apart; request i's context names chain[i] (a letter:
 * 'A', 'B': shared blocks 0..k-1 of that chain) then one private block; hist: how many of the
 * shared blocks are given as history (0: all of the context is new input) */
static const char *chain_trace(TestCtx *t, const char *name, const char *chains, int k, int hist_blocks, double gap_s)
{
    size_t cap = 64 + strlen(chains) * (size_t)(k + 2) * 12 + 256;
    char *text = malloc(cap);
    if (!text) return NULL;
    size_t o = (size_t)snprintf(text, cap, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens,hash_ids\n");
    for (int i = 0; chains[i]; i++) {
        int base = (chains[i] - 'A') * 1000;
        int64_t ctx = (int64_t)(k + 1) * PB, hist = (int64_t)hist_blocks * PB;
        o += (size_t)snprintf(text + o, cap - o, "s%d,0,%.3f,%lld,8,%lld,", i, gap_s * i, (long long)(ctx - hist), (long long)hist);
        for (int b = 0; b < k; b++) o += (size_t)snprintf(text + o, cap - o, "%d ", base + b);
        o += (size_t)snprintf(text + o, cap - o, "%d\n", 100000 + i);
    }
    const char *path = test_write_file(t, name, text);
    free(text);
    return path;
}

static void chain_config(TestCtx *t, SimConfig *c, const char *trace, const char *cache, const char *mem_util)
{
    sim_config_defaults(c);
    snprintf(c->trace, sizeof c->trace, "%s", trace);
    simtest_set(t, c, "platform", "hcache-a100");
    simtest_set(t, c, "model", "Llama-3.1-8B");
    simtest_set(t, c, "evict_each_turn", "true");
    simtest_set(t, c, "prefix_cache", cache);
    if (mem_util) simtest_set(t, c, "mem_util", mem_util);
    c->quiet = 1;
}

/* run with the walker at every iteration boundary */
static int run_checked(TestCtx *t, const SimConfig *c, const char *policy, Rows *rows, SimResult *res)
{
    const char *had = getenv("KVSIM_CHECK");
    char saved[32] = "";
    if (had) snprintf(saved, sizeof saved, "%s", had);
    setenv("KVSIM_CHECK", "1", 1);
    SimWorld w;
    int rc = simtest_run(t, c, policy, &w, rows, res);
    if (rc == 0) sim_world_close(&w);
    if (had) setenv("KVSIM_CHECK", saved, 1);
    else unsetenv("KVSIM_CHECK");
    return rc;
}

/* the shared blocks k of a chain whose k + 1 blocks fit the pool at mem_util 0.45 when two chains do
 * not; -1 (a failed check) when the pool is too small for such cases */
static int one_chain_blocks(TestCtx *t)
{
    SimConfig c;
    SimWorld w;
    KvErr e;
    chain_config(t, &c, chain_trace(t, "probe.csv", "A", 1, 0, 1), "true", "0.45");
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    SimCapacity cap;
    sim_world_capacity(&w, &cap);
    sim_world_close(&w);
    int k = (int)(cap.pool_tokens * 6 / 10 / PB) - 1;
    CHECK_MSG(k >= 4, "pool of %lld tokens: too small for the case", (long long)cap.pool_tokens);
    if (k < 4) return -1;
    CHECK((int64_t)(k + 2) * PB <= cap.pool_tokens && (int64_t)(2 * k + 1) * PB > cap.pool_tokens);
    return k;
}

TEST(prefix_cache_shared_prefix_closed_form)
{
    const int N = 5, K = 16;
    for (int as_hist = 0; as_hist < 2; as_hist++) {
        const char *tr = chain_trace(t, as_hist ? "shared_hist.csv" : "shared_new.csv", "AAAAA", K, as_hist ? K : 0, 20);
        /* the reference: the prefix as resident history (ideal) with the cache off */
        const char *ref = chain_trace(t, "shared_ref.csv", "AAAAA", K, K, 20);
        SimConfig c;
        Rows on, off, ideal;
        SimResult ron, roff, rid;
        chain_config(t, &c, tr, "true", NULL);
        if (run_checked(t, &c, "recompute", &on, &ron) != 0) return;
        chain_config(t, &c, tr, "false", NULL);
        if (run_checked(t, &c, "recompute", &off, &roff) != 0) return;
        chain_config(t, &c, ref, "false", NULL);
        if (run_checked(t, &c, "ideal", &ideal, &rid) != 0) return;
        CHECK_EQ_I(on.n, N);
        CHECK_EQ_I(off.n, N);
        /* the first request finds nothing */
        CHECK_EQ_I(on.rows[0].ttft_ns, off.rows[0].ttft_ns);
        for (int i = 1; i < N && i < on.n; i++) {
            CHECK_MSG(on.rows[i].ttft_ns == ideal.rows[i].ttft_ns, "hist %d row %d: TTFT %lld ns, resident prefix %lld ns", as_hist,
                      i, (long long)on.rows[i].ttft_ns, (long long)ideal.rows[i].ttft_ns);
            CHECK_EQ_I(on.rows[i].recomputed_tokens, 0);
            CHECK(on.rows[i].ttft_ns < off.rows[i].ttft_ns);
            if (as_hist) CHECK_STR(on.rows[i].restore_from, "prefix");
        }
        CHECK_EQ_U(ron.prefix_named, (uint64_t)N);
        CHECK_EQ_U(ron.prefix_hit_requests, (uint64_t)(N - 1));
        CHECK_EQ_U(ron.prefix_hit_tokens, (uint64_t)((N - 1) * K * PB));
        CHECK_EQ_U(ron.hits_prefix, as_hist ? (uint64_t)(N - 1) : 0);
        CHECK_EQ_U(ron.prefix_inserted, (uint64_t)(K + N)); /* the shared blocks once, a private block each */
        CHECK_EQ_U(ron.prefix_deduplicated, 0); /* nothing computed twice: each later request took the prefix */
        CHECK_EQ_I(ron.prefix_block_tokens, PB);
        /* off: nothing counted */
        CHECK_EQ_U(roff.prefix_named, 0);
        CHECK_EQ_U(roff.prefix_inserted, 0);
        sim_result_free(&ron);
        sim_result_free(&roff);
        sim_result_free(&rid);
    }
}

TEST(prefix_cache_never_slower_for_any_policy)
{
    /* isolated requests (30 s apart): a cached prefix never makes one slower */
    const char *iso = chain_trace(t, "never_slower.csv", "AABABBA", 12, 8, 30);
    /* overlapping requests (0.5 s apart): blocks held while in use, the walker at every boundary */
    const char *busy = chain_trace(t, "overlapping.csv", "AABABBAAB", 12, 8, 0.5);
    for (int p = 0; p < policy_count(); p++) {
        const char *pol = policy_at(p)->name;
        SimConfig c;
        Rows on, off;
        SimResult ron, roff;
        chain_config(t, &c, iso, "true", NULL);
        if (run_checked(t, &c, pol, &on, &ron) != 0) return;
        chain_config(t, &c, iso, "false", NULL);
        if (run_checked(t, &c, pol, &off, &roff) != 0) return;
        CHECK_EQ_I(on.n, off.n);
        for (int i = 0; i < on.n && i < off.n; i++)
            CHECK_MSG(on.rows[i].ttft_ns <= off.rows[i].ttft_ns, "%s row %d: TTFT %lld ns with the cache, %lld without", pol, i,
                      (long long)on.rows[i].ttft_ns, (long long)off.rows[i].ttft_ns);
        CHECK_MSG(ron.prefix_hit_requests == 5, "%s: %llu requests took a cached prefix, expected 5", pol,
                  (unsigned long long)ron.prefix_hit_requests);
        sim_result_free(&ron);
        sim_result_free(&roff);
        chain_config(t, &c, busy, "true", NULL);
        if (run_checked(t, &c, pol, &on, &ron) != 0) return;
        CHECK_EQ_I(on.n, 9);
        CHECK_MSG(ron.prefix_hit_requests > 0, "%s: no request took a cached prefix (the case tests nothing)", pol);
        sim_result_free(&ron);
    }
}

TEST(prefix_cache_lru_textbook_sequences)
{
    SimConfig c;
    int k = one_chain_blocks(t);
    if (k < 0) return;
    /* AABB: the second of each pair finds its whole prefix; ABAB: each admission evicts the other
     * chain's blocks it needs room for, tail first (vLLM's order), so A and B find only the
     * leading blocks that survived */
    const char *seqs[2] = {"AABB", "ABAB"};
    for (int i = 0; i < 2; i++) {
        Rows rows;
        SimResult res;
        chain_config(t, &c, chain_trace(t, "lru.csv", seqs[i], k, 0, 30), "true", "0.45");
        if (run_checked(t, &c, "recompute", &rows, &res) != 0) return;
        CHECK_EQ_U(res.prefix_hit_requests, 2);
        if (i == 0) {
            CHECK_EQ_U(res.prefix_hit_tokens, (uint64_t)(2 * k * PB));
            CHECK(rows.rows[1].ttft_ns < rows.rows[0].ttft_ns / 2 && rows.rows[3].ttft_ns < rows.rows[2].ttft_ns / 2);
        } else {
            CHECK_MSG(res.prefix_hit_tokens > 0 && res.prefix_hit_tokens < (uint64_t)(2 * k * PB), "ABAB: %llu tokens hit",
                      (unsigned long long)res.prefix_hit_tokens);
            CHECK(res.prefix_evicted > 0);
            CHECK(rows.rows[2].ttft_ns > rows.rows[1].ttft_ns / 4); /* a partial hit: much of A is computed again */
        }
        sim_result_free(&res);
    }
}

TEST(prefix_cache_unnamed_trace_is_unaffected)
{
    SimConfig c;
    Rows on, off;
    SimResult ron, roff;
    const char *tr = test_write_file(t, "unnamed.csv",
                                     "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                                     "a,0,0,3000,20,0\nb,0,0.1,3000,20,0\na,1,5,400,20,3020\nb,1,5.2,300,30,3020\n");
    chain_config(t, &c, tr, "true", NULL);
    if (run_checked(t, &c, "kv-offload", &on, &ron) != 0) return;
    chain_config(t, &c, tr, "false", NULL);
    if (run_checked(t, &c, "kv-offload", &off, &roff) != 0) return;
    CHECK_EQ_I(on.n, 4);
    for (int i = 0; i < on.n; i++) {
        CHECK_EQ_I(on.rows[i].ttft_ns, off.rows[i].ttft_ns);
        CHECK_EQ_I(on.rows[i].done_ns, off.rows[i].done_ns);
    }
    CHECK_EQ_U(ron.prefix_named, 0);
    CHECK_EQ_I(ron.prefix_block_tokens, 0);
    sim_result_free(&ron);
    sim_result_free(&roff);
}

TEST(prefix_cache_block_size_must_divide)
{
    SimConfig c;
    Rows rows;
    SimResult res;
    SimWorld w;
    KvErr e;
    chain_config(t, &c, chain_trace(t, "bs.csv", "AA", 2, 0, 1), "true", NULL);
    simtest_set(t, &c, "block_tokens", "48");
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    memset(&rows, 0, sizeof rows);
    CHECK(sim_run(&w, "recompute", simtest_keep_row, &rows, NULL, NULL, &res, &e) != 0);
    CHECK_CONTAINS(e.msg, "512 tokens");
    CHECK_CONTAINS(e.msg, "block_tokens=48");
    sim_world_close(&w);
}

/* router=prefix sends a new session to the replica whose cache holds its prefix; least-loaded to the
 * replica with the fewest requests (here: away from the one that has it) */
TEST(prefix_cache_router_prefix_follows_the_cache)
{
    char text[4096];
    size_t o = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens,hash_ids\n");
    const char *chains = "AABB";
    for (int i = 0; chains[i]; i++) { /* long outputs: each request still decodes when the next arrives */
        o += (size_t)snprintf(text + o, sizeof text - o, "s%d,0,%d,%d,400,0,", i, i, 9 * PB);
        for (int b = 0; b < 8; b++) o += (size_t)snprintf(text + o, sizeof text - o, "%d ", (chains[i] - 'A') * 1000 + b);
        o += (size_t)snprintf(text + o, sizeof text - o, "%d\n", 100000 + i);
    }
    const char *tr = test_write_file(t, "router.csv", text);
    const char *routers[2] = {"least-loaded", "prefix"};
    const uint64_t want[2] = {0, 2};
    for (int k = 0; k < 2; k++) {
        SimConfig c;
        Rows rows;
        SimResult res;
        chain_config(t, &c, tr, "true", NULL);
        simtest_set(t, &c, "replicas", "2");
        simtest_set(t, &c, "router", routers[k]);
        if (run_checked(t, &c, "recompute", &rows, &res) != 0) return;
        CHECK_MSG(res.prefix_hit_requests == want[k], "router=%s: %llu requests hit, expected %llu", routers[k],
                  (unsigned long long)res.prefix_hit_requests, (unsigned long long)want[k]);
        if (k == 1) { /* each chain on its own replica */
            CHECK_EQ_I(rows.rows[0].replica, rows.rows[1].replica);
            CHECK_EQ_I(rows.rows[2].replica, rows.rows[3].replica);
            CHECK(rows.rows[0].replica != rows.rows[2].replica);
            CHECK_EQ_U(res.prefix_rep_hits[0] + res.prefix_rep_hits[1], res.prefix_hits);
        }
        sim_result_free(&res);
    }
}

/* A pool that holds one chain, A B A B with the prefix as history: the second A and B find only part
 * of their prefix in HBM; a saving policy takes that part and loads the rest from the first A's (B's)
 * saved copy in DRAM, as its own session's saved state would be read; recompute computes what HBM lost */
TEST(prefix_cache_history_loaded_from_another_sessions_copy)
{
    SimConfig c;
    int k = one_chain_blocks(t);
    if (k < 0) return;
    const char *tr = chain_trace(t, "abab_hist.csv", "ABAB", k, k, 30);
    Rows kv, rc;
    SimResult rkv, rrc;
    chain_config(t, &c, tr, "true", "0.45");
    if (run_checked(t, &c, "kv-offload", &kv, &rkv) != 0) return;
    chain_config(t, &c, tr, "true", "0.45");
    if (run_checked(t, &c, "recompute", &rc, &rrc) != 0) return;
    CHECK_EQ_U(rkv.prefix_borrowed, 2);
    CHECK_EQ_U(rrc.prefix_borrowed, 0);
    for (int i = 2; i < 4 && i < kv.n && i < rc.n; i++) {
        CHECK_STR(kv.rows[i].restore_from, "dram");
        CHECK(kv.rows[i].prefix_hit_tokens > 0);
        CHECK_EQ_I(kv.rows[i].loaded_tokens + kv.rows[i].prefix_hit_tokens, (int64_t)k * PB);
        CHECK_EQ_I(kv.rows[i].recomputed_tokens, 0);
        CHECK(rc.rows[i].recomputed_tokens > 0 && rc.rows[i].recomputed_tokens < (int64_t)k * PB); /* a partial HBM hit */
        CHECK(kv.rows[i].ttft_ns < kv.rows[0].ttft_ns);
    }
    sim_result_free(&rkv);
    sim_result_free(&rrc);
}

/* kv-quant.layerwise=false on the same A B A B: the second A and B take their cached prefix and load
 * the rest whole; the iteration of their new input dequantizes exactly the tokens loaded (the
 * schedule's dequantize work, at every layer), not the cached prefix */
TEST(prefix_cache_whole_request_dequantizes_only_the_rest)
{
    SimConfig c;
    int k = one_chain_blocks(t);
    if (k < 0) return;
    const char *tr = chain_trace(t, "abab_whole.csv", "ABAB", k, k, 30);
    chain_config(t, &c, tr, "true", "0.45");
    simtest_set(t, &c, "kv-quant.layerwise", "false");
    char path[600];
    snprintf(path, sizeof path, "%s/whole.jsonl", test_tmpdir(t));
    Rows rows;
    SimResult res;
    SimWorld w;
    sim_schedule_set_path(path);
    int rc = simtest_run(t, &c, "kv-quant", &w, &rows, &res);
    sim_schedule_set_path(NULL);
    if (rc != 0) return;
    sim_world_close(&w);
    sim_result_free(&res);
    Schedule s;
    KvErr e;
    if (schedule_load(&s, path, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    CHECK_EQ_I(rows.n, 4);
    for (int i = 2; i < 4 && i < rows.n; i++) {
        const SimRequestRow *r = &rows.rows[i];
        CHECK(r->prefix_hit_tokens > 0 && r->loaded_tokens > 0);
        CHECK_EQ_I(r->loaded_tokens + r->prefix_hit_tokens, (int64_t)k * PB);
        int layers = 0;
        for (int j = 0; j < s.n_iters; j++)
            for (int l = 0; l < s.layers; l++)
                for (int x = 0; x < s.iters[j].layers[l].nwork; x++) {
                    const SchWork *wk = &s.iters[j].layers[l].work[x];
                    if (wk->req != r->id || wk->op != SCH_WORK_DEQUANT) continue;
                    layers++;
                    CHECK_MSG(wk->tokens == r->loaded_tokens, "request %llu: %lld tokens dequantized, %lld loaded",
                              (unsigned long long)r->id, (long long)wk->tokens, (long long)r->loaded_tokens);
                }
        CHECK_EQ_I(layers, s.layers);
    }
    schedule_free(&s);
}

/* a resident session whose next turn's names were cut with its context (max_context): the session's
 * cached blocks stay cached, unreferenced, and the pool's accounting holds (the walker runs) */
TEST(prefix_cache_resident_session_with_names_cut)
{
    const char *tr = test_write_file(t, "cut.csv",
                                     "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens,hash_ids\n"
                                     "s0,0,0,1024,8,0,1 2\ns0,1,,600,8,1032,1 2 3\ns1,0,5,1024,8,0,1 2\n");
    SimConfig c;
    Rows rows;
    SimResult res;
    chain_config(t, &c, tr, "true", NULL);
    simtest_set(t, &c, "evict_each_turn", "false");
    simtest_set(t, &c, "max_context", "1500");
    if (run_checked(t, &c, "kv-offload", &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 3);
    CHECK_EQ_U(res.truncated, 1);
    CHECK_EQ_U(res.prefix_named, 2);      /* the cut turn names nothing */
    CHECK_EQ_U(res.prefix_hit_requests, 1); /* s1 finds s0's first block (its second holds s1's last token) */
    sim_result_free(&res);
}

/* one SSD as the store: loading the whole history takes longer than the prefill it overlaps */
static void rest_config(TestCtx *t, SimConfig *c, const char *trace, const char *cache)
{
    chain_config(t, c, trace, cache, NULL);
    simtest_set(t, c, "store", "ssd");
    simtest_set(t, c, "n_ssd", "1");
}

/* Session A (a shared prefix of K blocks, then its own block), session B (the same prefix, its own
 * block), then A's next turn: its history is A's first context, saved on the SSD and evicted from HBM,
 * whose first K blocks B kept cached. Its restoration takes the K cached blocks and loads the rest:
 * exactly (N − K·PB) tokens' KV crosses H2D for it. */
TEST(prefix_cache_cached_prefix_then_the_rest_loaded)
{
    enum { K = 16 };
    char text[1024];
    size_t o = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens,hash_ids\n");
    const char *rows3[3] = {"A,0,0,%d,8,0,", "B,0,5,%d,8,0,", "A,1,60,512,8,%d,"};
    const int N = (K + 1) * PB + 8; /* A's first context: its second turn's history */
    for (int i = 0; i < 3; i++) {
        o += (size_t)snprintf(text + o, sizeof text - o, rows3[i], i < 2 ? (K + 1) * PB : N);
        for (int b = 0; b < K; b++) o += (size_t)snprintf(text + o, sizeof text - o, "%d ", b);
        o += (size_t)snprintf(text + o, sizeof text - o, i == 0 ? "100\n" : i == 1 ? "200\n" : "300 301\n");
    }
    const char *tr = test_write_file(t, "rest_loaded.csv", text);
    /* the reference: A's second turn with its history resident (ideal), the cache off */
    SimConfig c;
    Rows id;
    SimResult rid;
    rest_config(t, &c, tr, "false");
    if (run_checked(t, &c, "ideal", &id, &rid) != 0) return;
    sim_result_free(&rid);
    CHECK_EQ_I(id.n, 3);
    for (int p = 0; p < policy_count(); p++) {
        const char *pol = policy_at(p)->name;
        Rows on, off;
        SimResult ron, roff;
        rest_config(t, &c, tr, "true");
        if (run_checked(t, &c, pol, &on, &ron) != 0) return;
        rest_config(t, &c, tr, "false");
        if (run_checked(t, &c, pol, &off, &roff) != 0) return;
        CHECK_EQ_I(on.n, 3);
        CHECK_EQ_I(off.n, 3);
        if (on.n != 3 || off.n != 3 || id.n != 3) return;
        const SimRequestRow *a = &on.rows[2], *b = &off.rows[2];
        CHECK_MSG(a->ttft_ns <= b->ttft_ns, "%s: TTFT %lld ns with the cache, %lld without", pol, (long long)a->ttft_ns,
                  (long long)b->ttft_ns);
        CHECK_MSG(a->ttft_ns >= id.rows[2].ttft_ns, "%s: TTFT %lld ns below the resident history's %lld", pol,
                  (long long)a->ttft_ns, (long long)id.rows[2].ttft_ns);
        if (!strcmp(pol, "ideal")) goto next;
        CHECK_MSG(a->prefix_hit_tokens == (int64_t)K * PB, "%s: %lld tokens from the prefix cache", pol, (long long)a->prefix_hit_tokens);
        CHECK_MSG(a->recomputed_tokens + a->loaded_tokens <= N - (int64_t)K * PB, "%s: %lld recomputed + %lld loaded of %d", pol,
                  (long long)a->recomputed_tokens, (long long)a->loaded_tokens, N - K * PB);
        if (!strcmp(pol, "kv-offload")) {
            CHECK_STR(a->restore_from, "ssd");
            CHECK_EQ_I(a->loaded_tokens, N - (int64_t)K * PB);
            CHECK_EQ_I(a->recomputed_tokens, 0);
            CHECK(a->ttft_ns < b->ttft_ns);
            /* H2D carried the cached prefix's KV fewer bytes, exactly */
            double saved = (roff.ch_bytes[CH_H2D][CH_READ] + roff.ch_bytes[CH_H2D][CH_WRITE]) -
                           (ron.ch_bytes[CH_H2D][CH_READ] + ron.ch_bytes[CH_H2D][CH_WRITE]);
            CHECK_MSG(saved == (double)K * PB * ron.saved_bytes_per_token, "H2D: %.0f bytes fewer, expected %.0f", saved,
                      (double)K * PB * ron.saved_bytes_per_token);
        }
    next:
        sim_result_free(&ron);
        sim_result_free(&roff);
    }
}

/* A chat generator's shared system prompt (multiturn, system_prompt_tokens=P, one group), sessions
 * far apart, pool large: the first session's first turn computes P + its question; the first turn of
 * every later session takes the P tokens from the prefix cache and its TTFT is that of its question
 * over a resident history of P tokens (the ideal policy, cache off), below the TTFT without the cache */
TEST(prefix_cache_chat_system_prompt_closed_form)
{
    const int64_t P = 512;
    SimConfig c;
    Rows on, off, ref;
    SimResult ron, roff, rref;
    for (int cache = 1; cache >= 0; cache--) {
        chain_config(t, &c, "multiturn", cache ? "true" : "false", NULL);
        simtest_set(t, &c, "requests", "50");
        simtest_set(t, &c, "session_rate", "0.001");
        simtest_set(t, &c, "system_prompt_tokens", "512");
        if (run_checked(t, &c, "recompute", cache ? &on : &off, cache ? &ron : &roff) != 0) return;
    }
    CHECK_EQ_I(on.n, 50);
    CHECK_EQ_I(off.n, on.n);
    /* the first turns, in order; each session ends before the next begins */
    int first[64], nf = 0;
    int64_t last_done = -1;
    for (int i = 0; i < on.n; i++) {
        if (on.rows[i].turn == 0) {
            CHECK_MSG(on.rows[i].arrival_ns > last_done, "session %llu arrives at %lld ns, before %lld ns: the sessions overlap",
                      (unsigned long long)on.rows[i].session, (long long)on.rows[i].arrival_ns, (long long)last_done);
            first[nf++] = i;
        }
        if (on.rows[i].done_ns > last_done) last_done = on.rows[i].done_ns;
        CHECK(on.rows[i].session == off.rows[i].session && on.rows[i].turn == off.rows[i].turn);
    }
    CHECK_MSG(nf >= 3, "%d sessions", nf);
    char text[4096];
    size_t o = (size_t)snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int j = 0; j < nf; j++) {
        const SimRequestRow *r = &on.rows[first[j]];
        CHECK(r->new_tokens > P);
        o += (size_t)snprintf(text + o, sizeof text - o, "s%d,0,%lld.%09lld,%lld,%lld,%lld\n", j, (long long)(r->arrival_ns / 1000000000),
                              (long long)(r->arrival_ns % 1000000000), (long long)(r->new_tokens - P), (long long)r->output_tokens,
                              (long long)P);
    }
    chain_config(t, &c, test_write_file(t, "sysprompt_ref.csv", text), "false", NULL);
    if (run_checked(t, &c, "ideal", &ref, &rref) != 0) return;
    CHECK_EQ_I(ref.n, nf);
    const SimRequestRow *s0 = &on.rows[first[0]];
    CHECK_EQ_I(s0->prefix_hit_tokens, 0);
    CHECK_EQ_I(s0->ttft_ns, off.rows[first[0]].ttft_ns);
    for (int j = 1; j < nf && j < ref.n; j++) {
        const SimRequestRow *r = &on.rows[first[j]];
        CHECK_EQ_I(r->prefix_hit_tokens, P);
        CHECK_EQ_I(r->recomputed_tokens, 0);
        CHECK_MSG(r->ttft_ns == ref.rows[j].ttft_ns, "session %d: TTFT %lld ns, its question over a resident prompt %lld ns", j,
                  (long long)r->ttft_ns, (long long)ref.rows[j].ttft_ns);
        CHECK(r->ttft_ns < off.rows[first[j]].ttft_ns);
    }
    CHECK_EQ_U(roff.prefix_named, 0);
    sim_result_free(&ron);
    sim_result_free(&roff);
    sim_result_free(&rref);
}

/* system_prompt_tokens and prompt_groups: on the generators that build a system prompt; a chat
 * generator's groups need a prompt (it has none by default) */
TEST(prefix_cache_system_prompt_settings_rules)
{
    static const struct {
        const char *trace, *tokens, *groups, *err; /* err NULL: accepted */
    } cases[] = {{"sharegpt4", "256", "8", NULL},         {"multiturn", "256", "0", NULL},
                 {"shared-prefix", "0", "8", NULL},       {"swebench", "200", "0", NULL},
                 {"sharegpt4", "0", "8", "prompt_groups"}, {"leval", "256", "0", "system_prompt_tokens"},
                 {"swebench", "200", "4", "prompt_groups"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        SimConfig c;
        KvErr e;
        sim_config_defaults(&c);
        snprintf(c.trace, sizeof c.trace, "%s", cases[k].trace);
        simtest_set(t, &c, "system_prompt_tokens", cases[k].tokens);
        simtest_set(t, &c, "prompt_groups", cases[k].groups);
        int rc = sim_config_check(&c, &e);
        if (!cases[k].err) {
            CHECK_MSG(rc == 0, "%s: %s", cases[k].trace, e.msg);
        } else {
            CHECK_MSG(rc != 0, "%s accepted system_prompt_tokens=%s prompt_groups=%s", cases[k].trace, cases[k].tokens, cases[k].groups);
            if (rc != 0) {
                CHECK_CONTAINS(e.msg, cases[k].err);
                CHECK_CONTAINS(e.msg, cases[k].trace);
            }
        }
    }
}

/* Sessions A and B (K shared blocks, then one block of their own; 8 output tokens), 20 s apart, kv-offload
 * saving into DRAM of `dram` bytes ("" : the platform's), the cache on or off */
static int two_states(TestCtx *t, const char *cache, const char *dram, SimResult *res)
{
    enum { K = 16 };
    SimConfig c;
    Rows rows;
    chain_config(t, &c, chain_trace(t, "two_states.csv", "AA", K, 0, 20), cache, NULL);
    simtest_set(t, &c, "store", "dram");
    if (*dram) simtest_set(t, &c, "dram", dram);
    return run_checked(t, &c, "kv-offload", &rows, res);
}

/* The tiers store a named block once: A's state is saved whole; B's save skips the K blocks DRAM
 * holds already (they never cross D2H) and its state adds only its own block; the store holds K + 2
 * blocks, K stored once for both states; DRAM's peak is the two contexts less the shared prefix. The
 * cache off (no names): both states whole. */
TEST(prefix_cache_tier_stores_a_shared_block_once)
{
    enum { K = 16 };
    const double ctx = (K + 1) * PB + 8, shared = (double)K * PB;
    SimResult on, off;
    if (two_states(t, "true", "", &on) != 0) return;
    if (two_states(t, "false", "", &off) != 0) return;
    double bpt = on.saved_bytes_per_token;
    CHECK(bpt > 0);
    CHECK_EQ_U(on.prefix_tier_stored[TIER_DRAM], K + 2);
    CHECK_EQ_U(on.prefix_tier_dedup[TIER_DRAM], K);
    CHECK_EQ_U(on.prefix_tier_dropped[TIER_DRAM], 0);
    CHECK_NEAR(on.prefix_tier_unwritten[TIER_DRAM], shared * bpt, 0, 0);
    CHECK_NEAR((double)on.tier_peak_bytes[TIER_DRAM], (2 * ctx - shared) * bpt, 0, 0);
    CHECK_NEAR((double)off.tier_peak_bytes[TIER_DRAM], 2 * ctx * bpt, 0, 0);
    double d2h_on = on.ch_bytes[CH_D2H][CH_READ] + on.ch_bytes[CH_D2H][CH_WRITE];
    double d2h_off = off.ch_bytes[CH_D2H][CH_READ] + off.ch_bytes[CH_D2H][CH_WRITE];
    CHECK_MSG(d2h_off - d2h_on == shared * bpt, "D2H: %.0f bytes fewer, expected %.0f", d2h_off - d2h_on, shared * bpt);
    CHECK_EQ_U(off.prefix_tier_stored[TIER_DRAM] + off.prefix_tier_dedup[TIER_DRAM], 0);
    sim_result_free(&on);
    sim_result_free(&off);
}

/* Capacity counts a shared block once: DRAM between the deduplicated and the whole size of the two
 * states keeps both with the cache on and drops A's without names. DRAM for one state: B's save
 * drops A's (least recently used); of A's blocks only its own is dropped — B holds the K shared. */
TEST(prefix_cache_tier_capacity_counts_a_shared_block_once)
{
    enum { K = 16 };
    const double ctx = (K + 1) * PB + 8, shared = (double)K * PB;
    SimResult probe;
    if (two_states(t, "true", "", &probe) != 0) return;
    double bpt = probe.saved_bytes_per_token;
    sim_result_free(&probe);
    char between[64], one[64];
    snprintf(between, sizeof between, "%.0f B", (2 * ctx - shared / 2) * bpt);
    snprintf(one, sizeof one, "%.0f B", (ctx + 1) * bpt);
    SimResult on, off, small;
    if (two_states(t, "true", between, &on) != 0) return;
    if (two_states(t, "false", between, &off) != 0) return;
    if (two_states(t, "true", one, &small) != 0) return;
    CHECK_EQ_U(on.state_lost_capacity, 0);
    CHECK_EQ_U(off.state_lost_capacity, 1);
    CHECK_EQ_U(small.state_lost_capacity, 1);
    CHECK_EQ_U(small.prefix_tier_dropped[TIER_DRAM], 1);
    CHECK_EQ_U(small.prefix_tier_dedup[TIER_DRAM], K);
    sim_result_free(&on);
    sim_result_free(&off);
    sim_result_free(&small);
}
