/* simtest.c — see simtest.h. */
#include "tests/simtest.h"

#include <string.h>

#include "sim/cost/layer_cost.h"

int simtest_keep_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    Rows *rs = ctx;
    if (rs->n < 64) rs->rows[rs->n++] = *r;
    return 0;
}

void simtest_iso_config(TestCtx *t, SimConfig *c, int64_t n0, int64_t n1, const char *platform, const char *model)
{
    sim_config_defaults(c);
    char text[512];
    snprintf(text, sizeof text,
             "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
             "s0,0,,%lld,1,0\n"
             "s0,1,,%lld,2,%lld\n",
             (long long)n0, (long long)n1, (long long)(n0 + 1));
    const char *path = test_write_file(t, "iso.csv", text);
    snprintf(c->trace, sizeof c->trace, "%s", path);
    snprintf(c->platform, sizeof c->platform, "%s", platform);
    snprintf(c->model, sizeof c->model, "%s", model);
    c->think_ns = 10000000000LL; /* 10 s: saves finish long before */
    c->evict_each_turn = 1;
    c->token_budget = 2048; /* the new input of the isolated turn fits one iteration */
    c->max_context = 65536; /* beyond Llama-2's 4K window, as HCache's evaluation did */
    c->quiet = 1;
}

void simtest_set(TestCtx *t, SimConfig *c, const char *key, const char *value)
{
    KvErr e;
    if (sim_config_set(c, key, value, &e) != 0) CHECK_MSG(0, "--set %s=%s: %s", key, value, e.msg);
}

double simtest_lin(SimWorld *w, int64_t M)
{
    LayerOps ops = layer_ops_of_model(&w->cost);
    return layer_cost_linear_ns(&ops, &w->ly, M, NULL);
}

int simtest_run(TestCtx *t, const SimConfig *c, const char *policy, SimWorld *w, Rows *rows, SimResult *res)
{
    KvErr e;
    memset(rows, 0, sizeof *rows);
    if (sim_world_open(w, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    if (sim_run(w, policy, simtest_keep_row, rows, NULL, NULL, res, &e) != 0) {
        CHECK_MSG(0, "%s: %s", policy, e.msg);
        sim_world_close(w);
        return -1;
    }
    return 0;
}
