/* test_waitq.c — the admission FIFO in bounded memory (sim/engine/waitq.c): the turns beyond its
 * in-memory bound, and the sessions that hold nothing but those turns, go to a spill file and come
 * back in order. Checked: every row and count of a run is the same with a tiny bound (4: almost
 * every turn spilled, sessions made again from their images, "ghosts" for sessions a trace names
 * while spilled, sessions that go cold while their turn is in the file) as with a bound so large
 * that nothing is spilled, with the accounting walker at every iteration boundary; and the memory
 * the engine counts for what waits (SimResult.waiting_peak_bytes: turns, sessions, FIFO slots) stays
 * flat while the queue grows fourfold under overload (counters, not RSS or wall time); and a
 * session whose turn is in the file while its saved state lives (it stays in memory) holds none of
 * its pending turns in memory (they are in the side file), with the same rows as without spilling.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "tests/harness.h"
#include "tests/simtest.h"

/* every row folded into a hash (FNV-1a over its fields and its strings), and the count */
typedef struct {
    uint64_t h, n;
} RowHash;

static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 1099511628211ull;
}

static void fnv_i64(uint64_t *h, int64_t v) { fnv(h, &v, sizeof v); }

/* field by field (a struct's padding is not part of its value) */
static int hash_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    RowHash *a = ctx;
    uint64_t *h = &a->h;
    int64_t ints[] = {(int64_t)r->id, (int64_t)r->session, r->turn, r->replica, r->arrival_ns, r->history_tokens,
                      r->new_tokens, r->output_tokens, r->recomputed_tokens, r->loaded_tokens, r->queue_ns,
                      r->restore_ns, r->prefill_ns, r->ttft_ns, r->done_ns, r->tbt_max_ns, r->offered_ns,
                      r->session_wait_ns, r->preemptions};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) fnv_i64(h, ints[i]);
    fnv(h, &r->tbt_mean_ns, sizeof r->tbt_mean_ns);
    fnv(h, &r->lb_restore_ns, sizeof r->lb_restore_ns);
    if (r->restore_from) fnv(h, r->restore_from, strlen(r->restore_from) + 1);
    if (r->session_id) fnv(h, r->session_id, strlen(r->session_id) + 1);
    a->n++;
    return 0;
}

/* the largest admission FIFO seen at an iteration boundary */
static void q_peak_hook(Sim *sm, void *ctx)
{
    size_t *peak = ctx;
    for (int i = 0; i < sm->R; i++)
        if (sm->rep[i].q_len > *peak) *peak = sm->rep[i].q_len;
}

typedef struct {
    RowHash rows;
    SimResult res;
    size_t q_peak;
} Outcome;

/* run `policy` with the FIFO's in-memory bound `bound` (0: default); check: the walker at every boundary */
static int run_bound(TestCtx *t, const SimConfig *c, const char *policy, size_t bound, int check, Outcome *o)
{
    memset(o, 0, sizeof *o);
    o->rows.h = 1469598103934665603ull;
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    sim_test_set_queue_bound(bound);
    sim_test_set_hook(q_peak_hook, &o->q_peak, check);
    int rc = sim_run(&w, policy, hash_row, &o->rows, NULL, NULL, &o->res, &e);
    sim_test_set_hook(NULL, NULL, 0);
    sim_test_set_queue_bound(0);
    if (rc != 0) CHECK_MSG(0, "%s (bound %zu): %s", policy, bound, e.msg);
    sim_world_close(&w);
    return rc;
}

static void sharegpt_overloaded(TestCtx *t, SimConfig *c, int64_t requests)
{
    sim_config_defaults(c);
    simtest_set(t, c, "trace", "sharegpt4");
    simtest_set(t, c, "model", "Llama-2-13B");
    simtest_set(t, c, "platform", "hcache-a100");
    simtest_set(t, c, "session_rate", "2");
    c->requests = requests;
    c->quiet = 1;
}

/* both runs: the same rows, the same counts */
static void same_outcome(TestCtx *t, const char *what, const Outcome *a, const Outcome *b)
{
    CHECK_MSG(a->rows.n == b->rows.n && a->rows.h == b->rows.h, "%s: %llu rows (hash %016llx) vs %llu (hash %016llx)", what,
              (unsigned long long)a->rows.n, (unsigned long long)a->rows.h, (unsigned long long)b->rows.n,
              (unsigned long long)b->rows.h);
    CHECK_EQ_U(a->res.requests, b->res.requests);
    CHECK_EQ_U(a->res.sessions, b->res.sessions);
    CHECK_EQ_U(a->res.dropped, b->res.dropped);
    CHECK_EQ_U(a->res.iterations, b->res.iterations);
}

/* ShareGPT4 overloaded: kv-offload (sessions whose saved state expires while their turn waits in the
 * file: they go there whole later) and recompute; a tiny bound vs none, the walker on */
TEST(waitq_spill_identical_sharegpt)
{
    const char *pols[] = {"kv-offload", "recompute"};
    for (int p = 0; p < 2; p++) {
        SimConfig c;
        sharegpt_overloaded(t, &c, 1500);
        Outcome a, b;
        if (run_bound(t, &c, pols[p], 4, 1, &a) != 0) return;
        if (run_bound(t, &c, pols[p], (size_t)1 << 40, 0, &b) != 0) return;
        CHECK_MSG(a.q_peak >= 100, "%s: the queue peaked at %zu turns: not overloaded enough to spill", pols[p], a.q_peak);
        same_outcome(t, pols[p], &a, &b);
        /* with bound 4 at most ~12 turns and their sessions are in memory */
        CHECK_MSG(a.res.waiting_peak_bytes < b.res.waiting_peak_bytes, "%s: %llu bytes waiting with spilling, %llu without",
                  pols[p], (unsigned long long)a.res.waiting_peak_bytes, (unsigned long long)b.res.waiting_peak_bytes);
        sim_result_free(&a.res);
        sim_result_free(&b.res);
    }
}

/* A file whose sessions interleave: a later turn of a session is read while that session's queued
 * turn is in the spill file (a ghost gathers it); arrivals=session and arrivals=trace. */
TEST(waitq_spill_identical_interleaved)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/interleaved.csv", test_tmpdir(t));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    enum { SESS = 300, TURNS = 3 };
    /* turn 0 of every session at 20 ms steps, then the later turns (closed loop), session by session
     * in rounds: each later turn is read long after its session was queued */
    for (int k = 0; k < TURNS; k++)
        for (int s = 0; s < SESS; s++) {
            int hist = k * 700;
            if (k == 0) fprintf(f, "sess-%d,0,%.3f,%d,%d,0\n", s, s * 0.02, 600 + (s * 37) % 400, 64 + (s * 13) % 64);
            else fprintf(f, "sess-%d,%d,,%d,%d,%d\n", s, k, 500 + (s * 53) % 300, 64 + (s * 7) % 64, hist);
        }
    CHECK(fclose(f) == 0);
    const char *modes[] = {"session", "trace"};
    for (int m = 0; m < 2; m++) {
        SimConfig c;
        sim_config_defaults(&c);
        snprintf(c.trace, sizeof c.trace, "%s", path);
        simtest_set(t, &c, "model", "Llama-2-13B");
        simtest_set(t, &c, "platform", "hcache-a100");
        simtest_set(t, &c, "arrivals", modes[m]);
        c.requests = SESS * TURNS;
        c.max_context = 16384;
        c.quiet = 1;
        Outcome a, b;
        if (run_bound(t, &c, "kv-offload", 4, 1, &a) != 0) return;
        if (run_bound(t, &c, "kv-offload", (size_t)1 << 40, 0, &b) != 0) return;
        CHECK_MSG(a.q_peak >= 50, "arrivals=%s: the queue peaked at %zu turns", modes[m], a.q_peak);
        CHECK_EQ_U(a.rows.n, (uint64_t)SESS * TURNS);
        same_outcome(t, modes[m], &a, &b);
        sim_result_free(&a.res);
        sim_result_free(&b.res);
    }
}

/* Flat memory under overload, by the engine's own counters: four times the requests, the queue four
 * times as long (or more), the bytes held for what waits (turns, sessions, FIFO slots) at most 1.25×
 * (without the spill file they grew with the queue: ~900 bytes per queued turn). A session whose
 * saved state is alive stays in memory (it is in its tier's list): a short state_ttl keeps those few. */
TEST(waitq_memory_flat_under_overload)
{
    SimConfig c;
    Outcome small, big;
    sharegpt_overloaded(t, &c, 3000);
    simtest_set(t, &c, "state_ttl", "60 s");
    if (run_bound(t, &c, "kv-offload", 32, 0, &small) != 0) return;
    c.requests = 12000;
    if (run_bound(t, &c, "kv-offload", 32, 0, &big) != 0) return;
    CHECK_MSG(big.q_peak >= 3 * small.q_peak && small.q_peak >= 250, "queue peaks %zu and %zu turns: not overloaded",
              small.q_peak, big.q_peak);
    double per_turn = (double)big.res.waiting_peak_bytes / (double)big.q_peak;
    CHECK_MSG(big.res.waiting_peak_bytes <= small.res.waiting_peak_bytes * 5 / 4 + 16384,
              "%llu bytes waiting at %zu queued turns, %llu at %zu (%.1f bytes per queued turn)",
              (unsigned long long)big.res.waiting_peak_bytes, big.q_peak, (unsigned long long)small.res.waiting_peak_bytes,
              small.q_peak, per_turn);
    CHECK_MSG(per_turn <= 200, "%.1f bytes in memory per queued turn at the peak (%zu turns)", per_turn, big.q_peak);
    sim_result_free(&small.res);
    sim_result_free(&big.res);
}

/* sessions whose queued turn waits in the spill file while their saved state lives (they stay in
 * memory): their pending turns are in the side file, none in memory (waitq.c), at every boundary */
typedef struct {
    size_t live_spilled_max, in_memory, side_max;
} PendScan;

static void pend_scan_hook(Sim *sm, void *ctx)
{
    PendScan *ps = ctx;
    size_t live = 0, side = 0;
    for (size_t i = 0; i < sm->tab_cap; i++) {
        const Session *s = sm->tab[i];
        if (!s || !s->spill_rec) continue;
        if (s->tier != TIER_NONE) live++;
        if (s->pend_head) ps->in_memory++;
        side += s->pend_side_n;
    }
    if (live > ps->live_spilled_max) ps->live_spilled_max = live;
    if (side > ps->side_max) ps->side_max = side;
}

TEST(waitq_pending_turns_of_live_sessions_spilled)
{
    SimConfig c;
    sharegpt_overloaded(t, &c, 1500);
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    PendScan ps = {0, 0, 0};
    RowHash rows = {1469598103934665603ull, 0};
    SimResult res;
    memset(&res, 0, sizeof res);
    sim_test_set_queue_bound(4);
    sim_test_set_hook(pend_scan_hook, &ps, 1);
    int rc = sim_run(&w, "kv-offload", hash_row, &rows, NULL, NULL, &res, &e);
    sim_test_set_hook(NULL, NULL, 0);
    sim_test_set_queue_bound(0);
    sim_world_close(&w);
    CHECK_MSG(rc == 0, "%s", rc ? e.msg : "");
    CHECK_MSG(ps.live_spilled_max >= 20, "at most %zu sessions with saved state had their turn in the spill file", ps.live_spilled_max);
    CHECK_MSG(ps.side_max >= 20, "at most %zu pending turns were in the side file", ps.side_max);
    CHECK_MSG(ps.in_memory == 0, "%zu times a session with its turn in the spill file held pending turns in memory", ps.in_memory);
    /* and the same rows as with nothing spilled */
    Outcome b;
    if (run_bound(t, &c, "kv-offload", (size_t)1 << 40, 0, &b) != 0) return;
    CHECK_MSG(rows.n == b.rows.n && rows.h == b.rows.h, "%llu rows (hash %016llx) vs %llu (hash %016llx)", (unsigned long long)rows.n,
              (unsigned long long)rows.h, (unsigned long long)b.rows.n, (unsigned long long)b.rows.h);
    CHECK_EQ_U(res.iterations, b.res.iterations);
    sim_result_free(&res);
    sim_result_free(&b.res);
}
