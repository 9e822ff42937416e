/* test_setup.c — setup.c's rules: the channels' rates read off a measured link curve in the cost
 * store (its streaming slope between 64 MiB and 1 GiB replaces the catalog's bandwidth; the probes
 * are not counted as the run's extrapolations), and a model that does not fit its GPUs refused
 * naming the part that does not (the weights, or the KV cache left beside them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost/spec.h"
#include "sim/cost/store.h"
#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"

static int spec_emit(void *ctx, const StorePoint *p, KvErr *e) { return store_add_point(ctx, ((CostStore *)ctx)->run_id, p, e); }

/* The isolated 8000-token restoration on HCache's box (store=dram) in c, and db (a file `name` in
 * the test's directory): a cost store holding the spec run of its GPU and model and an open "cpu" run
 * (m2) for the caller's link points; w0 is open on c. 0, or -1 (reported) */
static int store_with_link_run(TestCtx *t, const char *name, char *db, size_t dbn, SimConfig *c, SimWorld *w0, CostStore *st,
                               StoreRunMeta *m2)
{
    KvErr e;
    snprintf(db, dbn, "%s/%s", test_tmpdir(t), name);
    simtest_iso_config(t, c, 8000, 200, "hcache-a100", "Llama-2-7B");
    simtest_set(t, c, "store", "dram");
    if (sim_world_open(w0, c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    if (store_open(st, db, 1, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        sim_world_close(w0);
        return -1;
    }
    StoreRunMeta m;
    memset(&m, 0, sizeof m);
    snprintf(m.backend, sizeof m.backend, "spec");
    snprintf(m.device, sizeof m.device, "A100-40GB");
    snprintf(m.model, sizeof m.model, "Llama-2-7B");
    snprintf(m.dtype, sizeof m.dtype, "fp16");
    m.tp = 1;
    CHECK(store_begin_run(st, &m, &e) == 0);
    SpecInputs in;
    spec_inputs_from_platform(&in, &w0->hw, w0->platform, &w0->ly);
    CHECK_MSG(spec_generate(&in, spec_emit, st, &e) == 0, "%s", e.msg);
    CHECK(store_end_run(st, m.id, 1, &e) == 0);
    memset(m2, 0, sizeof *m2);
    snprintf(m2->backend, sizeof m2->backend, "cpu");
    snprintf(m2->device, sizeof m2->device, "A100-40GB");
    snprintf(m2->dtype, sizeof m2->dtype, "fp16");
    m2->tp = 1;
    CHECK(store_begin_run(st, m2, &e) == 0);
    return 0;
}

/* points of op from 4 KiB to top bytes (×4) at 10 us + bytes / rate, into the open run m2 */
static void link_points(TestCtx *t, CostStore *st, const StoreRunMeta *m2, CostOp op, int64_t top, double rate)
{
    KvErr e;
    for (int64_t b = 4096; b <= top; b *= 4) {
        StorePoint p = {.op = op, .tp = 1, .p1 = b, .n = 5};
        snprintf(p.dtype, sizeof p.dtype, "fp16");
        p.median_ns = p.p10_ns = p.p90_ns = 10000.0 + (double)b / rate * 1e9;
        CHECK_MSG(store_add_point(st, m2->id, &p, &e) == 0, "%s", e.msg);
    }
}

/* the run m2 ended, the store closed, w0 closed; then kv-offload on c with db as its costs */
static int run_on_store(TestCtx *t, const char *db, SimConfig *c, SimWorld *w0, CostStore *st, const StoreRunMeta *m2, SimWorld *w,
                        Rows *rows, SimResult *res)
{
    KvErr e;
    CHECK(store_end_run(st, m2->id, 1, &e) == 0);
    store_close(st);
    sim_world_close(w0);
    snprintf(c->costs, sizeof c->costs, "%s", db);
    return simtest_run(t, c, "kv-offload", w, rows, res);
}

TEST(setup_measured_link_curve_sets_the_h2d_rate)
{
    char db[4200];
    SimConfig c;
    /* spec run for the compute ops, then a "measured" run of h2d at half the catalog's rate */
    SimWorld w0;
    CostStore st;
    StoreRunMeta m2;
    if (store_with_link_run(t, "costs.db", db, sizeof db, &c, &w0, &st, &m2) != 0) return;
    double half = w0.hw.links[w0.platform->link].h2d_bytes_per_s / 2;
    link_points(t, &st, &m2, OP_H2D, 1LL << 32, half);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (run_on_store(t, db, &c, &w0, &st, &m2, &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        int64_t H = 8001;
        double L = w.model->layers;
        double t_io = 10000.0 + (double)H * (double)model_kv_bytes_per_token_layer_gpu(&w.ly) / half * 1e9;
        double t_c = simtest_lin(&w, 200) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, 200, H, 0);
        int k = t_io > t_c ? (int)ceil(L * (1 - t_c / t_io) - 1e-9) : 0;
        double pipe = t_io > t_c ? L * t_io + t_c : t_io + L * t_c;
        double start = k * t_io + 2e6 + L * t_c;
        CHECK_NEAR((double)rows.rows[1].ttft_ns, pipe > start ? pipe : start, 0.01, 0);
    }
    sim_result_free(&res);
    sim_world_close(&w);
}

/* a store whose link curves stop at 64 MiB (a calibration of smaller transfers): the engine reads
 * each link's streaming rate off its curve (probes at 64 MiB and 1 GiB) without counting the probes
 * as the run's extrapolations (they once gave "4 cost lookups ... extrapolated" on every run); a
 * lookup past the range is still counted */
TEST(setup_link_rate_probes_are_not_extrapolations)
{
    char db[4200];
    SimConfig c;
    SimWorld w0;
    CostStore st;
    StoreRunMeta m2;
    if (store_with_link_run(t, "links64m.db", db, sizeof db, &c, &w0, &st, &m2) != 0) return;
    double rate = w0.hw.links[w0.platform->link].h2d_bytes_per_s / 2;
    const CostOp links[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) link_points(t, &st, &m2, links[k], 1LL << 26, rate);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (run_on_store(t, db, &c, &w0, &st, &m2, &w, &rows, &res) != 0) return;
    CHECK_EQ_U(res.extrapolations, 0);
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) CHECK_EQ_U(res.extrapolations_op[links[k]], 0);
    /* the rate is still the curve's slope (extrapolated past 64 MiB): the restoration's loads at it */
    CHECK(rows.n == 2 && res.ch_bytes[CH_H2D][CH_READ] > 0);
    /* a lookup past the sampled range counts; a probe does not */
    uint64_t before = w.cost.extrapolations[OP_H2D];
    double probe = cost_probe_ns(&w.cost, OP_H2D, 1LL << 30, 0, 0);
    CHECK_EQ_U(w.cost.extrapolations[OP_H2D], before);
    CHECK(cost_lookup_ns(&w.cost, OP_H2D, 1LL << 30, 0, 0) == probe);
    CHECK_EQ_U(w.cost.extrapolations[OP_H2D], before + 1);
    CHECK_NEAR(probe, 10000.0 + (double)(1LL << 30) / rate * 1e9, 1e-9, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* a GPU too small says which part does not fit: the weights (mem_util 0.30: 12 GB for 13.5 GB of
 * Llama-2-7B) or the KV cache left beside them (0.35: 14 GB holds the weights, not 1024 tokens of
 * KV); the second once read "weights 13.5 GB per GPU of 40.0 GB × mem_util 0.35", as if they did not */
TEST(setup_does_not_fit_names_the_part_that_does_not)
{
    static const struct {
        const char *mem_util, *want;
    } cases[] = {{"0.30", "weights 13.5 GB per GPU, more than 40.0 GB × mem_util 0.30 = 12.00 GB"},
                 {"0.35", "weights 13.48 GB per GPU leave 0.52 GB of 40.0 GB × mem_util 0.35 for the KV cache, less than 1024 tokens"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        SimConfig c;
        sim_config_defaults(&c);
        c.requests = 5;
        c.quiet = 1;
        simtest_set(t, &c, "mem_util", cases[k].mem_util);
        SimWorld w;
        KvErr e = {{0}};
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        SimResult res;
        CHECK(sim_run(&w, "recompute", NULL, NULL, NULL, NULL, &res, &e) != 0);
        CHECK_CONTAINS(e.msg, cases[k].want);
        sim_result_free(&res);
        sim_world_close(&w);
    }
}
