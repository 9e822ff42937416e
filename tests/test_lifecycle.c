/* test_lifecycle.c — lifecycle.c's rules on small traces: a session's next turn is released its
 * think time after its previous turn ended (arrivals=session); a new session goes to the replica
 * with the fewest requests in flight; a later turn of a session waits in its pending list while the
 * previous one runs (arrivals=trace), its TTFT counted from its release. */
#include <string.h>

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
