/* test_sim_check.c — the engine's checks: the accounting walker (sim_check) finds nothing wrong in
 * real runs of every policy over tiers that spill, and reports a corrupted counter (pool, tier
 * bytes, channel queue) naming it; the always-on SIM_CHECK and the lifecycle table end a run whose
 * state was corrupted, with the file and line. Corruption goes through the engine's test hook
 * (sim_test_set_hook: called at every iteration boundary, engine_int.h). */
#include <stdlib.h>
#include <string.h>

#include "sim/cost/layer_cost.h"
#include "sim/engine/engine_int.h"
#include "tests/harness.h"
#include "tests/simtest.h"

typedef struct {
    int boundaries;    /* iteration boundaries seen */
    int at;            /* corrupt at this boundary (0: never) */
    int what;          /* which counter */
    int done;
    int evict_each_turn; /* the run's evict_each_turn */
    int write_through;   /* the run's write_through */
    int prefetch;        /* the run's prefetch */
    int whole;           /* whole-request loading: the policy's layerwise=false */
    const char *trace;   /* the run's trace (NULL: the default generator) */
    uint64_t requests, restored; /* requests the run finished, history tokens restored (set by run_hooked) */
} Hook;

enum { C_POOL, C_TIER, C_CHANNEL, C_POOL_ZERO, C_STATE, C_LOADS, C_COPY, C_CHANNEL_READS, C_BLOCK_REFS };

static void hook(Sim *sm, void *ctx)
{
    Hook *h = ctx;
    h->boundaries++;
    if (!h->at || h->done || h->boundaries < h->at) return;
    Replica *rp = &sm->rep[0];
    switch (h->what) {
    case C_POOL: rp->pool_used += 16; h->done = 1; break;
    case C_TIER:
        if (rp->tier[TIER_DRAM].head) {
            rp->tier[TIER_DRAM].used_bytes += 1e6;
            h->done = 1;
        }
        break;
    case C_CHANNEL: rp->ch[CH_H2D][0].nhi++; h->done = 1; break;
    case C_BLOCK_REFS: /* a named block of a state in DRAM referenced once more than its holders */
        for (Session *s = rp->tier[TIER_DRAM].head; s && !h->done; s = s->t_next)
            if (s->tb && s->tb->n > 0) {
                prefix_acquire(&rp->tier[TIER_DRAM].blk, s->tb->names, 1);
                h->done = 1;
            }
        break;
    case C_CHANNEL_READS: rp->ch[CH_SSD][0].nlo_read++; h->done = 1; break; /* a save counted as a read */
    case C_COPY: /* a write-through copy's bytes miscounted */
        if (rp->tier[TIER_SSD].chead) {
            rp->tier[TIER_SSD].copy_bytes += 1e6;
            h->done = 1;
        }
        break;
    case C_POOL_ZERO:
        if (rp->n_active) {
            rp->pool_used = 0;
            h->done = 1;
        }
        break;
    case C_LOADS: /* an admitted request counts a queued layer load it does not have */
        if (rp->n_active) {
            rp->active[0]->hi_loads++;
            h->done = 1;
        }
        break;
    case C_STATE: /* a request still restoring or prefilling marked done */
        for (int i = 0; i < rp->n_active && !h->done; i++)
            if (rp->active[i]->state == RQ_RESTORING || rp->active[i]->state == RQ_PREFILL) {
                rp->active[i]->state = RQ_DONE;
                h->done = 1;
            }
        break;
    }
}

static void check_config(SimConfig *c)
{
    sim_config_defaults(c);
    KvErr e;
    sim_config_set(c, "platform", "hcache-a100", &e);
    sim_config_set(c, "model", "Llama-2-7B", &e);
    sim_config_set(c, "store", "dram+ssd", &e);
    sim_config_set(c, "dram", "2GB", &e); /* DRAM spills to the SSDs */
    c->requests = 120;
    c->quiet = 1;
}

/* run `policy` with the hook (and the walker when check); returns sim_run's status, e the error */
static int run_hooked(TestCtx *t, const char *policy, Hook *h, int check, KvErr *e)
{
    SimConfig c;
    check_config(&c);
    c.evict_each_turn = h->evict_each_turn;
    c.write_through = h->write_through;
    c.prefetch = h->prefetch;
    if (h->trace) snprintf(c.trace, sizeof c.trace, "%s", test_path(h->trace));
    if (h->whole) {
        char key[64];
        snprintf(key, sizeof key, "%s.layerwise", policy);
        simtest_set(t, &c, key, "false");
    }
    SimWorld w;
    if (sim_world_open(&w, &c, e) != 0) {
        CHECK_MSG(0, "%s", e->msg);
        return -2;
    }
    SimResult res;
    sim_test_set_hook(hook, h, check);
    int rc = sim_run(&w, policy, NULL, NULL, NULL, NULL, &res, e);
    sim_test_set_hook(NULL, NULL, 0);
    if (rc == 0) h->requests = res.requests, h->restored = res.restored_tokens;
    sim_result_free(&res);
    sim_world_close(&w);
    return rc;
}

TEST(sim_check_walker_finds_nothing_in_real_runs)
{
    static const char *pols[] = {"recompute", "kv-offload", "hcache", "naive-hybrid", "cake", "cacheflow", "kv-quant", "ideal"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        Hook h = {0};
        KvErr e = {{0}};
        int rc = run_hooked(t, pols[i], &h, 1, &e);
        CHECK_MSG(rc == 0, "%s: %s", pols[i], e.msg);
        CHECK_MSG(h.boundaries > 10, "%s: %d iteration boundaries", pols[i], h.boundaries);
    }
}

/* write-through copies in the SSD tier below DRAM, demotions onto them; prefetches up to DRAM (alone
 * and with write-through: the state left below stays as a copy) */
TEST(sim_check_walker_finds_nothing_in_write_through_and_prefetch_runs)
{
    static const char *pols[] = {"kv-offload", "hcache", "cake", "cacheflow", "kv-quant"};
    for (size_t i = 0; i < 3 * sizeof pols / sizeof pols[0]; i++) {
        int k = (int)(i / (sizeof pols / sizeof pols[0]));
        Hook h = {.write_through = k != 1, .prefetch = k >= 1};
        KvErr e = {{0}};
        const char *pol = pols[i % (sizeof pols / sizeof pols[0])];
        int rc = run_hooked(t, pol, &h, 1, &e);
        CHECK_MSG(rc == 0, "%s (write_through %d, prefetch %d): %s", pol, h.write_through, h.prefetch, e.msg);
        CHECK_MSG(h.boundaries > 10, "%s: %d iteration boundaries", pol, h.boundaries);
    }
}

/* whole-request loading (kv-offload's and kv-quant's layerwise=false): the loads without a compute
 * pointer, quantized KV's dequantize in the prefill's iteration, over DRAM spilling to the SSDs */
TEST(sim_check_walker_finds_nothing_in_whole_request_runs)
{
    static const char *pols[] = {"kv-offload", "kv-quant"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        Hook h = {.whole = 1, .evict_each_turn = 1}; /* every later turn loads its history */
        KvErr e = {{0}};
        int rc = run_hooked(t, pols[i], &h, 1, &e);
        CHECK_MSG(rc == 0, "%s (layerwise=false): %s", pols[i], e.msg);
        CHECK_MSG(h.requests == 120, "%s (layerwise=false): %llu requests finished of 120", pols[i], (unsigned long long)h.requests);
        CHECK_MSG(h.restored > 0, "%s (layerwise=false): nothing restored", pols[i]);
        CHECK_MSG(h.boundaries > 10, "%s: %d iteration boundaries", pols[i], h.boundaries);
    }
}

TEST(sim_check_walker_reports_corrupted_copy_bytes)
{
    Hook h = {.at = 1, .what = C_COPY, .write_through = 1};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: tier ssd (replica 0)");
    CHECK_CONTAINS(e.msg, "bytes of copies counted");
}

TEST(sim_check_walker_reports_a_corrupted_pool)
{
    Hook h = {.at = 5, .what = C_POOL};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: replica 0: KV pool");
    CHECK_CONTAINS(e.msg, "admitted reservations, idle resident sessions and cached blocks account for");
}

TEST(sim_check_walker_reports_corrupted_tier_bytes)
{
    Hook h = {.at = 1, .what = C_TIER};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: tier dram (replica 0)");
    CHECK_CONTAINS(e.msg, "bytes counted in use");
}

/* the tiers' block stores on a trace that names its blocks: clean, then a reference too many */
TEST(sim_check_walker_reports_a_corrupted_tier_block_store)
{
    Hook clean = {.trace = "traces/data/mooncake_conversation.csv"};
    KvErr e = {{0}};
    CHECK_MSG(run_hooked(t, "kv-offload", &clean, 1, &e) == 0, "%s", e.msg);
    CHECK(clean.restored > 0);
    Hook h = {.at = 1, .what = C_BLOCK_REFS, .trace = "traces/data/mooncake_conversation.csv"};
    e.msg[0] = 0;
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: tier dram (replica 0): its block store counts");
}

TEST(sim_check_walker_reports_a_corrupted_channel_count)
{
    Hook h = {.at = 3, .what = C_CHANNEL};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "hcache", &h, 1, &e), -1);
    CHECK_CONTAINS(e.msg, "channel h2d/0: load queue counts");
}

TEST(sim_check_walker_reports_a_corrupted_count_of_queued_reads)
{
    /* the save queue's reads (what the SSD array's mixing looks at) against its units */
    Hook h = {.at = 3, .what = C_CHANNEL_READS};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "channel ssd/0: save queue counts ");
    CHECK_CONTAINS(e.msg, " reading units, its list holds ");
}

TEST(sim_check_walker_reports_a_corrupted_queued_load_count)
{
    /* the counts that let pick_load skip its scan (hi_loads, hi_loads_in_iter) against the queues */
    Hook h = {.at = 4, .what = C_LOADS};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 1, &e), -1);
    CHECK(h.done);
    CHECK_CONTAINS(e.msg, "sim_check: ");
    CHECK_CONTAINS(e.msg, "layer loads wait in load queues");
}

TEST(sim_check_walker_off_misses_what_it_would_report)
{
    /* the same corruption of the tier bytes without the walker goes unnoticed (the run completes):
     * what the walker adds over the always-on checks */
    Hook h = {.at = 1, .what = C_TIER};
    KvErr e = {{0}};
#ifdef KV_DEBUG
    CHECK_EQ_I(run_hooked(t, "kv-offload", &h, 0, &e), -1); /* debug builds always walk */
#else
    if (getenv("KVSIM_CHECK")) {
        SKIP("KVSIM_CHECK is set: the walker is on");
    }
    CHECK_MSG(run_hooked(t, "kv-offload", &h, 0, &e) == 0, "%s", e.msg);
#endif
    CHECK(h.done);
}

/* the walker forced on for the whole suite (make check-long, DEBUG=1) reports corruption first */
static int walker_forced(void)
{
#ifdef KV_DEBUG
    return 1;
#else
    const char *v = getenv("KVSIM_CHECK");
    return v && *v && strcmp(v, "0") != 0;
#endif
}

TEST(sim_check_always_on_pool_check_names_file_and_line)
{
    /* the pool emptied under admitted requests: their release at turn end drives it negative */
    Hook h = {.at = 2, .what = C_POOL_ZERO, .evict_each_turn = 1};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "recompute", &h, 0, &e), -1);
    CHECK(h.done);
    if (walker_forced() && strstr(e.msg, "sim_check: ")) { /* the walker may see it first */
        CHECK_CONTAINS(e.msg, "sim_check: replica 0: KV pool 0 tokens in use");
        return;
    }
    CHECK_CONTAINS(e.msg, "internal: sim/engine/session.c:");
    CHECK_CONTAINS(e.msg, "rp->pool_used >= 0");
}

TEST(sim_check_lifecycle_table_refuses_moves_out_of_done)
{
    Hook h = {.at = 2, .what = C_STATE};
    KvErr e = {{0}};
    CHECK_EQ_I(run_hooked(t, "recompute", &h, 0, &e), -1);
    CHECK(h.done);
    if (walker_forced() && strstr(e.msg, "sim_check: ")) { /* the walker may see it first */
        CHECK_CONTAINS(e.msg, "is done");
        return;
    }
    CHECK_CONTAINS(e.msg, "lifecycle move done -> ");
    CHECK_CONTAINS(e.msg, "is not in the table");
}

/* ---- multi-step decode: the same results as one event per step ---- */

/* FNV-1a over every field of the rows, in row order */
static int hash_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    uint64_t *h = ctx;
    int64_t v[] = {(int64_t)r->id, (int64_t)r->session, r->turn, r->replica, r->arrival_ns, r->history_tokens,
                   r->new_tokens, r->output_tokens, r->recomputed_tokens, r->loaded_tokens, r->queue_ns, r->restore_ns,
                   r->prefill_ns, r->ttft_ns, r->done_ns, r->tbt_max_ns, r->offered_ns};
    double d[] = {r->tbt_mean_ns, r->lb_restore_ns};
    const unsigned char *p[] = {(const void *)v, (const void *)d, (const void *)r->restore_from};
    size_t n[] = {sizeof v, sizeof d, strlen(r->restore_from)};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < n[k]; i++) *h = (*h ^ p[k][i]) * 1099511628211ULL;
    return 0;
}

static void noop_hook(Sim *sm, void *ctx) {}

/* one run: with a test hook at iteration boundaries the engine forms every decode step as its own
 * iteration (the reference); without, decode-only batches advance several steps per event */
static int run_steps(TestCtx *t, SimConfig *c, const char *policy, int single, uint64_t *rows, SimResult *res)
{
    KvErr e = {{0}};
    SimWorld w;
    CHECK_MSG(sim_world_open(&w, c, &e) == 0, "%s", e.msg);
    *rows = 1469598103934665603ULL;
    if (single) { /* the reference engine: also every re-armed completion an event of its own */
        sim_test_set_hook(noop_hook, NULL, 0);
        sim_test_set_reference(SIM_REF_LAZY_REARM);
    } else { /* the runs' on-demand blocks by phase checked against the full pass at every step */
        sim_test_set_reference(SIM_REF_CHECK_PHASES);
    }
    int rc = sim_run(&w, policy, hash_row, rows, NULL, NULL, res, &e);
    sim_test_set_hook(NULL, NULL, 0);
    sim_test_set_reference(0);
    CHECK_MSG(rc == 0, "%s: %s", policy, e.msg);
    sim_world_close(&w);
    return rc;
}

static int same_hist(const Hist *a, const Hist *b)
{
    if (a->n != b->n || a->min != b->min || a->max != b->max || memcmp(&a->sum, &b->sum, sizeof a->sum)) return 0;
    return !a->n || memcmp(a->b, b->b, HIST_BUCKETS * sizeof *a->b) == 0;
}

/* ShareGPT4 on Llama-2-13B / hcache-a100, the shortcut tests' common workload */
static void sharegpt_13b_config(TestCtx *t, SimConfig *c, int64_t requests, int replicas)
{
    sim_config_defaults(c);
    simtest_set(t, c, "trace", "sharegpt4");
    simtest_set(t, c, "model", "Llama-2-13B");
    simtest_set(t, c, "platform", "hcache-a100");
    c->requests = requests;
    c->replicas = replicas;
}

TEST(sim_multi_step_decode_matches_single_steps)
{
    static const struct {
        const char *policy, *k1, *v1, *k2, *v2;
        int replicas;
    } cases[] = {
        {"recompute", "session_rate", "0.005", NULL, NULL, 1},          /* decode-bound: long runs */
        {"kv-offload", "warmup", "100", "cooldown", "100", 1},          /* overloaded, trimming holds gaps back */
        {"hcache", "session_rate", "0.01", NULL, NULL, 1},              /* saves every 64 positions end runs */
        {"cacheflow", "session_rate", "0.5", NULL, NULL, 2},            /* other replicas' events end runs */
        {"kv-offload", "arrivals", "trace", "request_rate", "0.3", 1},  /* timed arrivals end runs */
        {"kv-offload", "mem_util", "0.75", "session_rate", "0.5", 1},   /* on-demand blocks: growth inside runs, preemptions */
        {"recompute", "mem_util", "0.75", "preempt", "swap", 1},        /* preempted by swapping */
        {"recompute", "concurrency", "1", NULL, NULL, 1},               /* closed loop, one client: runs of a lone request */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SimConfig c;
        sharegpt_13b_config(t, &c, 600, cases[i].replicas);
        simtest_set(t, &c, cases[i].k1, cases[i].v1);
        if (cases[i].k2) simtest_set(t, &c, cases[i].k2, cases[i].v2);
        uint64_t ha, hb;
        SimResult a, b;
        if (run_steps(t, &c, cases[i].policy, 1, &ha, &a) != 0) return;
        if (run_steps(t, &c, cases[i].policy, 0, &hb, &b) != 0) return;
        CHECK_MSG(ha == hb, "case %zu (%s): requests rows differ", i, cases[i].policy);
        CHECK_EQ_U(a.requests, b.requests);
        CHECK_EQ_U(a.iterations, b.iterations);
        CHECK_EQ_U(a.events, b.events); /* a run's steps count as the events they stand for */
        CHECK_EQ_I(a.sim_end_ns, b.sim_end_ns);
        CHECK_MSG(same_hist(&a.tbt, &b.tbt) && same_hist(&a.ttft, &b.ttft), "case %zu: TBT/TTFT histograms differ", i);
        CHECK_MSG(memcmp(a.util_gpu, b.util_gpu, sizeof a.util_gpu) == 0 &&
                      memcmp(a.win_util_gpu, b.win_util_gpu, sizeof a.win_util_gpu) == 0 && a.ch_bytes[CH_D2H][CH_READ] == b.ch_bytes[CH_D2H][CH_READ],
                  "case %zu: utilisation or bytes differ", i);
        CHECK_EQ_U(a.extrapolations, b.extrapolations);
        CHECK_MSG(memcmp(a.extrapolations_op, b.extrapolations_op, sizeof a.extrapolations_op) == 0,
                  "case %zu: extrapolation counts per op differ", i);
        CHECK_EQ_U(a.preemptions, b.preemptions);
        CHECK_EQ_U(a.hbm_peak_tokens, b.hbm_peak_tokens);
        CHECK_MSG(a.swap_out_bytes == b.swap_out_bytes, "case %zu: swap bytes differ", i);
        if (i == 5) CHECK_MSG(a.preemptions > 0, "case %zu: the small pool preempts nothing (the case tests nothing)", i);
        CHECK_EQ_U(a.queue_events, a.events); /* the reference is one event per step */
        CHECK_EQ_U(a.decode_steps, 0);
        if (i == 0) CHECK_MSG(b.queue_events * 10 < b.events, "decode-bound run: %llu queue events for %llu steps",
                              (unsigned long long)b.queue_events, (unsigned long long)b.events);
        /* the events split honestly: delivered, stood for by a run's steps, cancelled */
        CHECK_EQ_U(b.queue_events + b.decode_steps + b.cancelled_timers, b.events);
        if (i == 0) CHECK(b.decode_steps * 2 > b.events);
        sim_result_free(&a);
        sim_result_free(&b);
    }
}

/* ---- the engine's shortcuts: the same results as the engine without them ---- */

/* one run with the SIM_REF_* shortcuts in `off` turned off (the walker on at every boundary) */
static int run_ref(TestCtx *t, SimConfig *c, const char *policy, unsigned off, uint64_t *rows, SimResult *res)
{
    KvErr e = {{0}};
    SimWorld w;
    CHECK_MSG(sim_world_open(&w, c, &e) == 0, "%s", e.msg);
    *rows = 1469598103934665603ULL;
    sim_test_set_reference(off);
    int rc = sim_run(&w, policy, hash_row, rows, NULL, NULL, res, &e);
    sim_test_set_reference(0);
    CHECK_MSG(rc == 0, "%s: %s", policy, e.msg);
    sim_world_close(&w);
    return rc;
}

/* the outputs two runs of one case must share: histograms, bytes, channel utilisation, restore/bound ratios */
static void same_outputs(TestCtx *t, size_t i, const SimResult *a, const SimResult *b)
{
    CHECK_MSG(same_hist(&a->tbt, &b->tbt) && same_hist(&a->ttft, &b->ttft) && same_hist(&a->restore, &b->restore),
              "case %zu: histograms differ", i);
    CHECK_MSG(a->ch_bytes[CH_H2D][CH_READ] == b->ch_bytes[CH_H2D][CH_READ] && a->ch_bytes[CH_D2H][CH_READ] == b->ch_bytes[CH_D2H][CH_READ] && a->ch_bytes[CH_SSD][CH_READ] == b->ch_bytes[CH_SSD][CH_READ] &&
                  a->ch_bytes[CH_SSD][CH_WRITE] == b->ch_bytes[CH_SSD][CH_WRITE],
              "case %zu: bytes differ", i);
    CHECK_MSG(memcmp(a->util_ch[CH_H2D], b->util_ch[CH_H2D], sizeof a->util_ch[CH_H2D]) == 0 && memcmp(a->util_ch[CH_D2H], b->util_ch[CH_D2H], sizeof a->util_ch[CH_D2H]) == 0 &&
                  a->util_ch[CH_SSD][0] == b->util_ch[CH_SSD][0] && memcmp(a->win_util_ch[CH_H2D], b->win_util_ch[CH_H2D], sizeof a->win_util_ch[CH_H2D]) == 0,
              "case %zu: channel utilisation differs", i);
    CHECK_MSG(same_hist(&a->lb_ratio, &b->lb_ratio), "case %zu: restore/lower-bound ratios differ", i);
}

/* A channel's re-armed completion as a timer (evq_arm: the old event cancelled, counted as the pop
 * it replaces, its time kept for the clock), the layer loads copied from per-stage templates, and
 * the lower bound's memoised estimates give every row, counter and byte of the engine without
 * them: loads from SSD and DRAM with the other direction busy (overloaded kv-offload), KV and
 * hidden-state layers of one request (hcache), per-layer stored forms (adaptive), pipeline stages
 * and boundary activations (hcache and cacheflow at pp 2), two replicas, token-wise loads. */
TEST(sim_shortcuts_match_the_reference_engine)
{
    static const struct {
        const char *policy, *k1, *v1, *k2, *v2;
        int pp, replicas;
    } cases[] = {
        {"kv-offload", NULL, NULL, NULL, NULL, 1, 1},                   /* overloaded: SSD, DRAM, saves both ways */
        {"hcache", "session_rate", "0.05", "hcache.kv_layers", "10", 1, 1}, /* hidden and KV layers */
        {"adaptive", "adaptive.storage_budget", "0.5", NULL, NULL, 1, 1},        /* per-layer stored forms */
        {"hcache", "session_rate", "0.05", NULL, NULL, 2, 1},           /* stages, boundary activations */
        {"cacheflow", "session_rate", "0.5", NULL, NULL, 2, 2},         /* token-wise, two replicas */
        {"kv-offload", "store", "dram+ssd", "dram", "2GB", 1, 1},       /* spills, mixed places */
    };
    int rearmed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SimConfig c;
        sharegpt_13b_config(t, &c, 500, cases[i].replicas);
        c.pp = cases[i].pp;
        if (cases[i].k1) simtest_set(t, &c, cases[i].k1, cases[i].v1);
        if (cases[i].k2) simtest_set(t, &c, cases[i].k2, cases[i].v2);
        uint64_t ha, hb;
        SimResult a, b;
        if (run_ref(t, &c, cases[i].policy, SIM_REF_LAZY_REARM | SIM_REF_NO_TEMPLATES | SIM_REF_NO_LB_MEMO | SIM_REF_NO_RUNS, &ha, &a) != 0)
            return;
        if (run_ref(t, &c, cases[i].policy, 0, &hb, &b) != 0) return;
        CHECK_MSG(ha == hb, "case %zu (%s): requests rows differ", i, cases[i].policy);
        CHECK_EQ_U(a.requests, b.requests);
        CHECK_EQ_U(a.iterations, b.iterations);
        CHECK_EQ_U(a.events, b.events); /* cancelled events count as the pops they replace */
        CHECK_EQ_I(a.sim_end_ns, b.sim_end_ns);
        same_outputs(t, i, &a, &b);
        CHECK_EQ_U(a.extrapolations, b.extrapolations);
        /* the reference delivers every re-armed event; the timers deliver fewer */
        CHECK(b.queue_events <= a.queue_events);
        if (b.queue_events < a.queue_events) rearmed++;
        CHECK_EQ_U(a.cancelled_timers, 0); /* the reference delivers the re-armed events: nothing cancelled */
        CHECK_EQ_U(b.queue_events + b.decode_steps + b.cancelled_timers, b.events);
        sim_result_free(&a);
        sim_result_free(&b);
    }
    CHECK_MSG(rearmed >= 2, "only %d cases re-armed a completion (the cases test little)", rearmed);
}

/* A layer load queued as the next layer of a run (ch_extend_run: one queue entry for a
 * part's consecutive layers, its first split off when picked) gives every row, counter, byte and
 * event of the engine with each layer load an entry of its own — with the walker at every iteration
 * boundary counting a run as the units it stands for. Loads from SSD and DRAM (overloaded
 * kv-offload, preemptions with a small pool), hidden and KV layers of one request (the template
 * switching), per-layer stored forms, pipeline stages with boundary activations, mixed places (two
 * runs per layer's parts, on two channels); CacheFlow's io_pick sees the queue's units: no runs. */
TEST(sim_load_runs_match_one_entry_per_layer)
{
    static const struct {
        const char *policy, *k1, *v1, *k2, *v2;
        int pp;
        int runs; /* the case makes runs (else: none may be made) */
    } cases[] = {
        {"kv-offload", NULL, NULL, NULL, NULL, 1, 1},
        {"kv-offload", "mem_util", "0.75", "session_rate", "0.5", 1, 1},
        {"hcache", "session_rate", "0.05", "hcache.kv_layers", "10", 1, 1},
        {"adaptive", "adaptive.storage_budget", "0.5", NULL, NULL, 1, 1},
        {"hcache", "session_rate", "0.5", NULL, NULL, 2, 1},
        {"kv-offload", "store", "dram+ssd", "dram", "2GB", 1, 1},
        {"cacheflow", "session_rate", "0.5", NULL, NULL, 2, 0},
    };
    const char *had = getenv("KVSIM_CHECK");
    char saved[32] = "";
    if (had) snprintf(saved, sizeof saved, "%s", had);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SimConfig c;
        sharegpt_13b_config(t, &c, 400, 1);
        c.pp = cases[i].pp;
        if (cases[i].k1) simtest_set(t, &c, cases[i].k1, cases[i].v1);
        if (cases[i].k2) simtest_set(t, &c, cases[i].k2, cases[i].v2);
        uint64_t ha, hb;
        SimResult a, b;
        setenv("KVSIM_CHECK", "1", 1); /* the walker at every iteration boundary, both runs */
        int rc = run_ref(t, &c, cases[i].policy, SIM_REF_NO_RUNS, &ha, &a);
        if (rc == 0 && run_ref(t, &c, cases[i].policy, 0, &hb, &b) != 0) {
            sim_result_free(&a);
            rc = -1;
        }
        if (had) setenv("KVSIM_CHECK", saved, 1);
        else unsetenv("KVSIM_CHECK");
        if (rc != 0) return;
        CHECK_MSG(ha == hb, "case %zu (%s): requests rows differ", i, cases[i].policy);
        CHECK_EQ_U(a.requests, b.requests);
        CHECK_EQ_U(a.iterations, b.iterations);
        CHECK_EQ_U(a.events, b.events);
        CHECK_EQ_U(a.queue_events, b.queue_events); /* the same events: a run changes the queues, not the events */
        CHECK_EQ_I(a.sim_end_ns, b.sim_end_ns);
        same_outputs(t, i, &a, &b);
        CHECK_EQ_U(a.preemptions, b.preemptions);
        CHECK_EQ_U(a.load_runs, 0); /* the reference makes none */
        if (cases[i].runs)
            CHECK_MSG(b.load_runs > 0, "case %zu (%s): no layer load queued in a run (the case tests nothing)", i, cases[i].policy);
        else
            CHECK_MSG(b.load_runs == 0, "case %zu (%s): %llu loads in runs with a policy's io_pick", i, cases[i].policy,
                      (unsigned long long)b.load_runs);
        sim_result_free(&a);
        sim_result_free(&b);
    }
}

/* ---- the run's linear-cost table (costtab.c) ---- */

typedef struct {
    int done, bad, covered;
    int64_t bad_m;
} CtabProbe;

/* at the first boundary: the table's answer for M up to the context — a fill, then a hit — is the
 * composition's own double, and the table covers the context (the policies' whole-history estimates) */
static void ctab_hook(Sim *sm, void *ctx)
{
    CtabProbe *p = ctx;
    if (p->done) return;
    p->done = 1;
    LayerOps ops = layer_ops_of_model(&sm->w->cost);
    int64_t ms[] = {1, 7, sm->cfg->token_budget + sm->cfg->max_batch + 3, sm->max_ctx / 2 + 1, sm->max_ctx - 1, sm->max_ctx};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        int64_t m = ms[i];
        double direct = layer_cost_linear_ns(&ops, &sm->w->ly, m, NULL);
        double a = ctab_linear_ns(sm, m), b = ctab_linear_ns(sm, m);
        if (memcmp(&a, &direct, sizeof a) != 0 || memcmp(&b, &direct, sizeof b) != 0) {
            p->bad++;
            p->bad_m = m;
        }
    }
    p->covered = sm->ctab.n > sm->max_ctx;
}

TEST(sim_cost_table_memo_is_the_composition_up_to_the_context)
{
    SimConfig c;
    sharegpt_13b_config(t, &c, 50, 1);
    KvErr e = {{0}};
    SimWorld w;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    SimResult res;
    CtabProbe p = {0, 0, 0, 0};
    sim_test_set_hook(ctab_hook, &p, 0);
    int rc = sim_run(&w, "kv-offload", NULL, NULL, NULL, NULL, &res, &e);
    sim_test_set_hook(NULL, NULL, 0);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK(p.done);
    CHECK_MSG(!p.bad, "%d table answers differ from the composition (last at M = %lld)", p.bad, (long long)p.bad_m);
    CHECK_MSG(p.covered, "the linear-cost table stops below the context");
    if (rc == 0) sim_result_free(&res);
    sim_world_close(&w);
}

TEST(sim_check_turn_past_max_context_releases_its_stale_kv)
{
    /* Turn 1's new input alone exceeds max_context: its history is dropped (the trace cuts the
     * prompt to max_context new tokens, history 0), and turn 0's KV, still resident, is of no use.
     * Closed form: the pool's peak is turn 1's own blocks, blocks(4096 + 10) = 4112 tokens of
     * 16-token blocks; counting turn 0's 112 tokens on top of it (4224) is the leak the walker
     * reports. */
    SimConfig c;
    sim_config_defaults(&c);
    const char *path = test_write_file(t, "past_max_context.csv",
                                       "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                                       "a,0,0,100,10,0\n"
                                       "a,1,1,5000,10,110\n");
    snprintf(c.trace, sizeof c.trace, "%s", path);
    c.quiet = 1;
    simtest_set(t, &c, "max_context", "4096");
    simtest_set(t, &c, "block_tokens", "16");
    Hook h = {0};
    sim_test_set_hook(hook, &h, 1); /* the walker at every iteration boundary */
    SimWorld w;
    Rows rows = {0};
    SimResult res;
    int rc = simtest_run(t, &c, "kv-offload", &w, &rows, &res);
    sim_test_set_hook(NULL, NULL, 0);
    if (rc != 0) return;
    CHECK(h.boundaries > 0);
    CHECK_EQ_U(res.requests, 2);
    CHECK_EQ_U(res.truncated, 1);
    CHECK_EQ_I(rows.n, 2);
    CHECK_EQ_I(rows.rows[1].history_tokens, 0);
    CHECK_EQ_I(rows.rows[1].new_tokens, 4096);
    CHECK_EQ_I(rows.rows[1].loaded_tokens, 0);
    CHECK_EQ_U(res.hbm_peak_tokens, 4112);
    sim_result_free(&res);
    sim_world_close(&w);
}
