/* simtest.h — helpers shared by the simulator tests: an isolated-request trace (one session, turn 0
 * fills the history, turn 1 restores it after a long think time with the KV evicted), row capture,
 * and the engine's per-layer cost composition recomputed from the cost model for closed forms. */
#ifndef KV_SIMTEST_H
#define KV_SIMTEST_H

#include "tests/harness.h"
#include "sim/engine/sim.h"

typedef struct {
    SimRequestRow rows[64];
    int n;
} Rows;

int simtest_keep_row(void *ctx, const SimRequestRow *r, KvErr *e);
/* turn 0: n0 new tokens, 1 output; turn 1: n1 new tokens over n0 + 1 history */
void simtest_iso_config(TestCtx *t, SimConfig *c, int64_t n0, int64_t n1, const char *platform, const char *model);
/* sim_config_set that must succeed (a failure is a test failure naming the key) */
void simtest_set(TestCtx *t, SimConfig *c, const char *key, const char *value);
/* per-layer linear part of an iteration of M tokens: sim/cost/layer_cost, the engine's composition
 * (test_layer_cost checks it against hand-computed sums) */
double simtest_lin(SimWorld *w, int64_t M);
/* run `policy` on the config; fills rows and res; returns 0 on success */
int simtest_run(TestCtx *t, const SimConfig *c, const char *policy, SimWorld *w, Rows *rows, SimResult *res);

#endif
