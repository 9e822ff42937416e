/* test_calib.c — the measured calibration (calibrate/timing.c, probe_*.c, calib_run.c): statistics,
 * the timing loop on a fake clock, plans and their estimate, device names, a small real cpu run
 * read back by the cost reader, the SSD and link probes with their fallbacks, rollback on errors
 * and interrupts, the diff, and the CLI's exit codes. GPU-only tests SKIP without a device.
 * Run: make build/kvtest && KVSIM_ROOT=$PWD build/kvtest calib_
 */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate/calib_diff.h"
#include "calibrate/calib_recipe.h"
#include "calibrate/calib_run.h"
#include "sim/cost/cost.h"
#include "kernels/gpu.h"
#include "tests/harness.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "calibrate/probe.h"
#include "sim/cost/store.h"
#include "calibrate/timing.h"

static int run_cli(const char *args, char *out, size_t len);

/* ---------------------------------------------------------------- statistics */

TEST(calib_stats_median_p10_p90_of_known_samples)
{
    double s[] = {5, 1, 4, 2, 3};
    TimingStats st;
    CHECK_EQ_I(timing_stats(s, 5, &st), 0);
    CHECK_EQ_I(st.n, 5);
    CHECK_NEAR(st.median_ns, 3, 0, 1e-12);
    CHECK_NEAR(st.p10_ns, 1.4, 0, 1e-12); /* rank 0.1·4 = 0.4 between 1 and 2 */
    CHECK_NEAR(st.p90_ns, 4.6, 0, 1e-12); /* rank 3.6 between 4 and 5 */
    CHECK_NEAR(st.min_ns, 1, 0, 0);
    CHECK_NEAR(st.max_ns, 5, 0, 0);
    CHECK_NEAR(st.mean_ns, 3, 0, 1e-12);
    CHECK(s[0] == 5 && s[1] == 1); /* the caller's order is kept */

    double even[] = {40, 10, 30, 20};
    CHECK_EQ_I(timing_stats(even, 4, &st), 0);
    CHECK_NEAR(st.median_ns, 25, 0, 1e-12); /* mean of the middle two */
    CHECK_NEAR(st.p10_ns, 13, 0, 1e-12);    /* rank 0.3 */
    CHECK_NEAR(st.p90_ns, 37, 0, 1e-12);    /* rank 2.7 */

    double one[] = {7};
    CHECK_EQ_I(timing_stats(one, 1, &st), 0);
    CHECK(st.median_ns == 7 && st.p10_ns == 7 && st.p90_ns == 7);
    CHECK_EQ_I(timing_stats(one, 0, &st), -1);
    CHECK_EQ_I(timing_stats(one, TIMING_MAX_SAMPLES + 1, &st), -1);

    double sorted[] = {1, 2, 3, 4};
    CHECK_NEAR(timing_quantile_sorted(sorted, 4, 0), 1, 0, 0);
    CHECK_NEAR(timing_quantile_sorted(sorted, 4, 1), 4, 0, 0);
    CHECK_NEAR(timing_quantile_sorted(sorted, 4, 0.5), 2.5, 0, 1e-12);
    CHECK_NEAR(timing_quantile_sorted(sorted, 4, 2.0), 4, 0, 0);
}

/* ---------------------------------------------------------------- the timing loop on a fake clock */

typedef struct Fake {
    int64_t now;          /* the fake clock, ns */
    double sample;        /* what each iteration reports */
    int64_t overhead;     /* untimed clock time per iteration */
    int calls, warm_calls;
    int fail_at;          /* timed call number that fails (0: none) */
    const double *seq;    /* optional sequence of samples */
    int nseq;
} Fake;

static int64_t fake_clock(void *ctx) { return ((Fake *)ctx)->now; }

static int fake_work(void *ctx, int timed, double *ns, KvErr *e)
{
    Fake *f = ctx;
    f->calls++;
    if (!timed) f->warm_calls++;
    int k = f->calls - f->warm_calls;
    if (timed && f->fail_at && k == f->fail_at) return kv_err(e, "fake failure");
    double s = f->seq && timed ? f->seq[(k - 1) % f->nseq] : f->sample;
    *ns = s;
    f->now += (int64_t)s + f->overhead;
    return 0;
}

TEST(calib_timing_loop_rules_on_fake_workload)
{
    KvErr e;
    TimingStats st;
    /* count and time: samples of 300 ns, min 3 reps and 1000 ns of samples → 4 reps */
    Fake f = {.sample = 300, .overhead = 50};
    TimingCfg c = {.warmup = 2, .min_reps = 3, .max_reps = 100, .min_time_ns = 1000, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), 0);
    CHECK_EQ_I(st.n, 4);
    CHECK_EQ_I(st.warmup, 2);
    CHECK_EQ_I(f.warm_calls, 2);
    CHECK_NEAR(st.median_ns, 300, 0, 0);
    CHECK_NEAR(st.elapsed_ns, 6 * 350, 0, 0);

    /* max_reps bounds a min_time that is never reached */
    f = (Fake){.sample = 10};
    c = (TimingCfg){.warmup = 0, .min_reps = 1, .max_reps = 3, .min_time_ns = 1000000, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), 0);
    CHECK_EQ_I(st.n, 3);
    CHECK_EQ_I(st.warmup, 0);

    /* the budget stops before min_reps: iterations cost 500 ns, budget 2000 → 1 warm-up + 3 reps */
    f = (Fake){.sample = 400, .overhead = 100};
    c = (TimingCfg){.warmup = 1, .min_reps = 100, .max_reps = 1000, .budget_ns = 2000, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), 0);
    CHECK_EQ_I(st.n, 3);
    CHECK_EQ_I(st.warmup, 1);

    /* warmup_max: no new warm-up past 1000 ns → 2 of 5 */
    f = (Fake){.sample = 400, .overhead = 100};
    c = (TimingCfg){.warmup = 5, .warmup_max_ns = 1000, .min_reps = 1, .max_reps = 1, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), 0);
    CHECK_EQ_I(st.warmup, 2);
    CHECK_EQ_I(st.n, 1);

    /* statistics of a sequence */
    static const double seq[] = {300, 100, 200};
    f = (Fake){.seq = seq, .nseq = 3};
    c = (TimingCfg){.warmup = 1, .min_reps = 3, .max_reps = 3, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), 0);
    CHECK_NEAR(st.median_ns, 200, 0, 0);
    CHECK_NEAR(st.min_ns, 100, 0, 0);
    CHECK_NEAR(st.p90_ns, 280, 0, 1e-9); /* rank 1.8 between 200 and 300 */

    /* errors: the workload's, a negative sample, a bad config, the stop flag */
    f = (Fake){.sample = 10, .fail_at = 2};
    c = (TimingCfg){.warmup = 1, .min_reps = 5, .max_reps = 5, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "repetition 2: fake failure");
    f = (Fake){.sample = -1};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "expected a finite time >= 0");
    c.min_reps = 0;
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "min_reps 0");
    c = (TimingCfg){.min_reps = 2, .max_reps = 1};
    CHECK_EQ_I(timing_cfg_check(&c, &e), -1);
    CHECK_CONTAINS(e.msg, "max_reps 1");
    volatile sig_atomic_t stop = 1;
    f = (Fake){.sample = 10};
    c = (TimingCfg){.warmup = 1, .min_reps = 1, .max_reps = 1, .stop = &stop, .clock_ns = fake_clock, .clock_ctx = &f};
    CHECK_EQ_I(timing_run(&c, fake_work, &f, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "interrupted");
    CHECK_EQ_I(f.calls, 0);
    /* the real monotonic clock moves forward */
    int64_t t0 = timing_now_ns(), t1 = timing_now_ns();
    CHECK(t0 > 0 && t1 >= t0);
}

/* ---------------------------------------------------------------- plans and estimate */

static int axis_subset(const CalibAxis *a, const CalibAxis *b)
{
    for (int i = 0; i < a->n; i++) {
        int found = 0;
        for (int j = 0; j < b->n; j++) found |= a->v[i] == b->v[j];
        if (!found) return 0;
    }
    return 1;
}

TEST(calib_plan_defaults_are_full_grids_with_consistent_axes)
{
    KvErr e;
    CalibPlan p;
    static const char *backends[] = {"cpu", "cuda"};
    for (int b = 0; b < 2; b++)
        for (int quick = 0; quick < 2; quick++) {
            CHECK_MSG(calib_plan_default(&p, backends[b], quick, &e) == 0, "%s", e.msg);
            for (int op = 0; op < OP_COUNT; op++) {
                const CalibOpPlan *o = &p.op[op];
                if (!o->enabled) continue;
                for (int d = cost_op_nparams((CostOp)op); d < 3; d++) CHECK(o->ax[d].n == 1 && o->ax[d].v[0] == 0);
                CHECK(o->timing.min_reps >= 1 && o->timing.max_reps >= o->timing.min_reps);
            }
            /* the layer's axes are among its parts' axes (calib_summary compares them) */
            const CalibOpPlan *l = &p.op[OP_LAYER_PREFILL];
            CHECK_MSG(axis_subset(&l->ax[0], &p.op[OP_GEMM_QKV].ax[0]) && axis_subset(&l->ax[0], &p.op[OP_NORM].ax[0]) &&
                          axis_subset(&l->ax[0], &p.op[OP_ATTN_PREFILL].ax[0]) &&
                          axis_subset(&l->ax[1], &p.op[OP_ATTN_PREFILL].ax[1]),
                      "%s quick=%d: layer axes not within the parts'", backends[b], quick);
            CHECK(!p.op[OP_ALLREDUCE].enabled && !p.op[OP_NET].enabled);
        }
    /* cuda full: tokens 1..64K with multiples of 64, contexts to 128K, decode batch 1..256 */
    CHECK(calib_plan_default(&p, "cuda", 0, &e) == 0);
    const CalibAxis *tk = &p.op[OP_GEMM_FFN_UP].ax[0];
    CHECK_EQ_I(tk->v[0], 1);
    CHECK_EQ_I(tk->v[tk->n - 1], 65536);
    int m64 = 0;
    for (int i = 0; i < tk->n; i++) m64 += tk->v[i] == 192 || tk->v[i] == 3072;
    CHECK_EQ_I(m64, 2);
    CHECK_EQ_I(p.op[OP_ATTN_PREFILL].ax[1].v[p.op[OP_ATTN_PREFILL].ax[1].n - 1], 131072);
    CHECK_EQ_I(p.op[OP_ATTN_DECODE].ax[0].v[p.op[OP_ATTN_DECODE].ax[0].n - 1], 256);
    /* cpu full: the GEMMs at every row count 1..16 (a BLAS is not linear between powers of two there) */
    CHECK(calib_plan_default(&p, "cpu", 0, &e) == 0);
    const CalibAxis *cg = &p.op[OP_GEMM_QKV].ax[0];
    for (int i = 0; i < 16; i++) CHECK_EQ_I(cg->v[i], i + 1);
    CHECK_EQ_I(cg->v[16], 32);
    CHECK_EQ_I(cg->v[cg->n - 1], 2048);
    CHECK_EQ_I(p.op[OP_NORM].ax[0].v[2], 4); /* elementwise ops stay on their doubling grid */
    /* cpu quick: M = 512 is measured (the headline GEMM figure) */
    CHECK(calib_plan_default(&p, "cpu", 1, &e) == 0);
    CHECK_EQ_I(p.op[OP_GEMM_FFN_UP].ax[0].v[p.op[OP_GEMM_FFN_UP].ax[0].n - 1], 512);
    CHECK_EQ_I(calib_plan_op_points(&p, OP_ATTN_PREFILL), 9);
    /* --points small: the small-iteration shapes merged into the axes, sorted and distinct */
    int64_t gemm_before = calib_plan_op_points(&p, OP_GEMM_QKV), ssd_before = calib_plan_op_points(&p, OP_SSD_READ);
    int64_t ssd_w_before = calib_plan_op_points(&p, OP_SSD_WRITE);
    p.op[OP_QUANT].enabled = 0;
    CHECK_MSG(calib_plan_add_small(&p, &e) == 0, "%s", e.msg);
    /* a layer's state of a short history: 64..512 KiB reads at every queue depth and file count; writes unchanged */
    const CalibOpPlan *sr = &p.op[OP_SSD_READ];
    CHECK_EQ_I(calib_plan_op_points(&p, OP_SSD_READ), ssd_before + 4 * sr->ax[1].n * sr->ax[2].n);
    CHECK_EQ_I(sr->ax[0].v[0], 65536);
    CHECK_EQ_I(sr->ax[0].v[3], 524288);
    CHECK_EQ_I(sr->ax[0].v[4], 1048576);
    CHECK_EQ_I(calib_plan_op_points(&p, OP_SSD_WRITE), ssd_w_before);
    const CalibAxis *sg = &p.op[OP_GEMM_QKV].ax[0];
    CHECK_EQ_I(calib_plan_op_points(&p, OP_GEMM_QKV), gemm_before + 19);
    for (int i = 0; i < 16; i++) CHECK_EQ_I(sg->v[i], i + 1); /* every decode batch up to 16 */
    CHECK_EQ_I(sg->v[16], 32);
    CHECK_EQ_I(sg->v[17], 64);
    for (int i = 1; i < sg->n; i++) CHECK(sg->v[i] > sg->v[i - 1]);
    CHECK_EQ_I(p.op[OP_ATTN_DECODE].ax[0].v[2], 3);
    CHECK_EQ_I(p.op[OP_ATTN_DECODE].ax[1].v[0], 128);
    CHECK_EQ_I(p.op[OP_ATTN_PREFILL].ax[0].v[p.op[OP_ATTN_PREFILL].ax[0].n - 1], 1024); /* a 1024-token layer-wise recompute's */
    CHECK_EQ_I(p.op[OP_ATTN_PREFILL].ax[0].v[p.op[OP_ATTN_PREFILL].ax[0].n - 2], 512);  /* a full chunk's attention */
    CHECK_EQ_I(sg->v[sg->n - 1], 1024);
    CHECK_EQ_I(p.op[OP_ATTN_PREFILL].ax[1].n, 5);
    CHECK(!p.op[OP_QUANT].enabled);
    CHECK_CONTAINS(p.caps, "small points");
    CHECK(calib_plan_add_small(&p, &e) == 0); /* twice: nothing new */
    CHECK_EQ_I(calib_plan_op_points(&p, OP_GEMM_QKV), gemm_before + 19);
    CHECK_EQ_I(calib_plan_op_points(&p, OP_SSD_READ), ssd_before + 4 * sr->ax[1].n * sr->ax[2].n);
    p.op[OP_NORM].ax[0].n = CALIB_MAX_AXIS; /* a full axis: refused, naming the op */
    for (int i = 0; i < CALIB_MAX_AXIS; i++) p.op[OP_NORM].ax[0].v[i] = 1000 + i;
    CHECK_EQ_I(calib_plan_add_small(&p, &e), -1);
    CHECK_CONTAINS(e.msg, "norm");

    CHECK_EQ_I(calib_plan_default(&p, "tpu", 0, &e), -1);
    CHECK_CONTAINS(e.msg, "unknown backend 'tpu'");
    /* calib_plan_set refuses bad axes */
    calib_plan_clear(&p);
    TimingCfg tc = {.warmup = 0, .min_reps = 1, .max_reps = 1};
    int64_t bad[] = {4, 2}, ok[] = {1, 2}, zero[] = {0};
    CHECK_EQ_I(calib_plan_set(&p, OP_NORM, bad, 2, NULL, 0, NULL, 0, &tc, 0, &e), -1);
    CHECK_CONTAINS(e.msg, "ascending");
    CHECK_EQ_I(calib_plan_set(&p, OP_NORM, ok, 2, ok, 2, NULL, 0, &tc, 0, &e), -1);
    CHECK_CONTAINS(e.msg, "p2 must be unset");
    CHECK_EQ_I(calib_plan_set(&p, OP_NORM, ok, 2, zero, 1, NULL, 0, &tc, 0, &e), 0);
    CHECK_EQ_I(calib_plan_set(&p, OP_ATTN_PREFILL, ok, 2, NULL, 0, NULL, 0, &tc, 0, &e), -1);
    CHECK_CONTAINS(e.msg, "p2 needs at least one value");
    CHECK_EQ_I(calib_plan_set(&p, OP_NORM, ok, CALIB_MAX_AXIS + 1, NULL, 0, NULL, 0, &tc, 0, &e), -1);
    TimingCfg badt = {.min_reps = 0, .max_reps = 1};
    CHECK_EQ_I(calib_plan_set(&p, OP_NORM, ok, 2, NULL, 0, NULL, 0, &badt, 0, &e), -1);
    CHECK_CONTAINS(e.msg, "plan: norm: timing: min_reps 0");
    CHECK_EQ_I(calib_plan_points(&p), 2);
    CHECK(p.op[OP_NORM].cold_cache == 0);
}

static int load_catalogs(TestCtx *t, ModelCatalog *mc, HwCatalog *hw)
{
    KvErr e;
    if (model_catalog_load(mc, NULL, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "models: %s", e.msg);
        return -1;
    }
    if (hw_catalog_load(hw, NULL, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "hardware: %s", e.msg);
        model_catalog_free(mc);
        return -1;
    }
    return 0;
}

TEST(calib_estimate_full_cuda_run_fits_three_minutes_on_h200)
{
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    KvErr e;
    static const char *models[] = {"Llama-2-7B", "Llama-2-13B", "Llama-3.1-8B"};
    for (size_t i = 0; i < KV_ARRAY_LEN(models); i++) {
        const ModelSpec *m = model_find(&mc, models[i], &e);
        CHECK(m != NULL);
        if (!m) continue;
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        SpecInputs in = {.ly = &ly, .gpu = hw_find_gpu(&hw, "H200", &e)};
        in.link = hw_find_link(&hw, in.gpu->pcie, &e);
        CalibPlan p;
        CHECK(calib_plan_default(&p, "cuda", 0, &e) == 0);
        p.op[OP_SSD_READ].enabled = p.op[OP_SSD_WRITE].enabled = 0;
        CalibEstimate est;
        calib_estimate(&p, &in, 1, &est);
        CHECK_EQ_I(est.points, calib_plan_points(&p));
        CHECK(est.reps >= est.points * 1 && est.launches >= est.reps);
        CHECK_MSG(est.seconds > 10 && est.seconds < 180, "%s: predicted %.0f s", models[i], est.seconds);
    }
    /* the MoE recipe: router + shared + touched experts per repetition. Tiny MoE: E = 8, k = 2,
     * 1 shared; t = 1 touches round(8·(1 − 0.75)) = 2 experts → 4 GEMMs; t = 64 touches all 8 → 10 */
    ModelSpec tiny = {.name = "tiny-moe", .arch = MODEL_MOE, .hidden = 256, .layers = 2, .heads = 4, .kv_heads = 2,
                      .head_dim = 64, .intermediate = 512, .vocab = 1000, .max_pos = 4096, .gated_ffn = 1,
                      .norm = NORM_RMS, .norms_per_layer = 2, .pos = POS_ROPE, .n_experts = 8, .experts_per_tok = 2,
                      .moe_intermediate = 128, .shared_experts = 1, .dense_layers = 1};
    ModelLayout ly = {&tiny, KV_DT_FP16, 1, 1};
    CHECK_MSG(model_layout_check(&ly, &e) == 0, "%s", e.msg);
    SpecInputs in = {.ly = &ly, .gpu = hw_find_gpu(&hw, "H200", &e)};
    TimingCfg one = {.warmup = 0, .min_reps = 1, .max_reps = 1};
    int64_t t1[] = {1}, t64[] = {64};
    CalibPlan p;
    CalibEstimate est;
    calib_plan_clear(&p);
    CHECK(calib_plan_set(&p, OP_GEMM_FFN_UP, t1, 1, NULL, 0, NULL, 0, &one, 0, &e) == 0);
    calib_estimate(&p, &in, 1, &est);
    CHECK_EQ_I(est.launches, 4);
    calib_plan_clear(&p);
    CHECK(calib_plan_set(&p, OP_GEMM_FFN_UP, t64, 1, NULL, 0, NULL, 0, &one, 0, &e) == 0);
    CHECK(calib_plan_set(&p, OP_GEMM_FFN_DOWN, t64, 1, NULL, 0, NULL, 0, &one, 0, &e) == 0);
    calib_estimate(&p, &in, 1, &est);
    CHECK_EQ_I(est.launches, 10 + 9); /* down has no router */
    /* the layer at t = 1: 2 norms, qkv, RoPE on Q and K, attention, o, act, ffn_up 4, ffn_down 3 */
    int64_t c0[] = {0};
    calib_plan_clear(&p);
    CHECK(calib_plan_set(&p, OP_LAYER_PREFILL, t1, 1, c0, 1, NULL, 0, &one, 0, &e) == 0);
    calib_estimate(&p, &in, 1, &est);
    CHECK_EQ_I(est.launches, 2 + 1 + 2 + 1 + 1 + 1 + 4 + 3);
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

TEST(calib_device_key_maps_reported_names_to_the_catalog)
{
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    char out[128];
    static const struct {
        const char *reported, *key;
        int mapped;
    } cases[] = {
        {"NVIDIA H200", "H200", 1},
        {"NVIDIA H100 80GB HBM3", "H100-SXM", 1},
        {"NVIDIA H100 PCIe", "H100-PCIe", 1},
        {"NVIDIA A100-SXM4-40GB", "A100-40GB", 1},
        {"NVIDIA A100-SXM4-80GB", "A100-80GB", 1},
        {"NVIDIA GeForce RTX 4090", "RTX4090", 1},
        {"NVIDIA L40S", "L40S", 1},
        {"NVIDIA B200", "B200", 1},
        {"NVIDIA GH200 480GB", "NVIDIA GH200 480GB", 0}, /* not an H200 */
        {"Tesla T4", "Tesla T4", 0},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        int r = calib_device_key(&hw, cases[i].reported, out, sizeof out);
        CHECK_MSG(r == cases[i].mapped && !strcmp(out, cases[i].key), "'%s' -> '%s' (%d), expected '%s'", cases[i].reported,
                  out, r, cases[i].key);
    }
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

/* ---------------------------------------------------------------- real cpu runs */

typedef struct RunCount {
    int n;
    int64_t last;
} RunCount;

static int count_run(void *ctx, const StoreRunMeta *r)
{
    RunCount *c = ctx;
    c->n++;
    c->last = r->id;
    return 0;
}

static int store_runs(TestCtx *t, const char *db)
{
    CostStore st;
    KvErr e;
    if (store_open(&st, db, 0, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "%s", e.msg);
        return -1;
    }
    RunCount c = {0};
    store_list_runs(&st, count_run, &c, &e);
    store_close(&st);
    return c.n;
}

static const TimingCfg g_fast = {.warmup = 1, .min_reps = 1, .max_reps = 2, .min_time_ns = 1000000};

/* gemm_o at 3 token counts, attention 2×2, norm, h2d of Llama-2-7B: a few seconds on 2 cores */
static void small_plan(TestCtx *t, CalibPlan *p)
{
    KvErr e;
    static const int64_t tok[] = {1, 128, 512}, an[] = {1, 64}, ac[] = {0, 256}, bytes[] = {4096, 1 << 20};
    calib_plan_clear(p);
    CHECK(calib_plan_set(p, OP_GEMM_O, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(p, OP_ATTN_PREFILL, an, 2, ac, 2, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(p, OP_NORM, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(p, OP_H2D, bytes, 2, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
}

typedef struct Seen {
    int start, points, ops;
} Seen;

static void seen_progress(void *ctx, const CalibProgress *pr)
{
    Seen *s = ctx;
    s->start += pr->ev == CALIB_EV_START;
    s->points += pr->ev == CALIB_EV_POINT;
    s->ops += pr->ev == CALIB_EV_OP_DONE;
}

TEST(calib_cpu_run_small_grid_is_read_back_by_the_cost_model)
{
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    KvErr e;
    const ModelSpec *m = model_find(&mc, "Llama-2-7B", &e);
    CalibPlan plan;
    small_plan(t, &plan);
    char db[4200];
    snprintf(db, sizeof db, "%s/cpu.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    Seen seen = {0};
    CalibOptions o = {.backend = "cpu", .model = m, .dtype = KV_DT_FP16, .tp = 1, .plan = &plan, .hw = &hw,
                      .progress = seen_progress, .progress_ctx = &seen};
    CalibResult r;
    int rc = calib_run(&st, &o, &r, &e);
    CHECK_MSG(rc == 0, "calib_run: %s", e.msg);
    CHECK_EQ_I(r.points, 3 + 4 + 3 + 2);
    CHECK_EQ_I(seen.start, 1);
    CHECK_EQ_I(seen.points, 12);
    CHECK_EQ_I(seen.ops, 4);
    CHECK_STR(r.meta.backend, "cpu");
    CHECK_STR(r.meta.device, "cpu");
    CHECK_STR(r.meta.model, "Llama-2-7B");
    CHECK_STR(r.meta.dtype, "fp16");
    CHECK_EQ_I(r.meta.tp, 1);
    CHECK_EQ_I(r.meta.complete, 1);
    CHECK(r.meta.git_rev[0] != '\0' && r.meta.host[0] != '\0' && r.meta.started_at[0] && r.meta.finished_at[0]);
    CHECK_CONTAINS(r.meta.notes, "fp32 arithmetic");
    CHECK(strstr(r.meta.notes, "ssd") == NULL); /* the plan has no SSD op */
    CHECK_CONTAINS(r.meta.notes, "h2d/d2h = host memcpy");
    CHECK_STR(r.warnings, "");
    int64_t n = 0;
    CHECK(store_count_points(&st, r.run_id, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 12);
    char sum[2048];
    CHECK_MSG(calib_summary(&st, r.run_id, m, sum, sizeof sum, &e) == 0, "%s", e.msg);
    CHECK_CONTAINS(sum, "attn_prefill GFLOP/s (new, context): (64, 0):");
    CHECK_CONTAINS(sum, "copies GB/s (host memcpy): h2d");
    store_close(&st);

    /* the simulator's reader: the plan's grids, every time positive and finite. (Not that more
     * tokens cost more: two measured CPU timings keep no order on a loaded machine.) */
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, db, "cpu", "Llama-2-7B", "fp16", 1, &e) == 0, "%s", e.msg);
    CHECK(cost_has(&cm, OP_GEMM_O) && cost_has(&cm, OP_ATTN_PREFILL) && cost_has(&cm, OP_NORM) && cost_has(&cm, OP_H2D));
    CHECK(!cost_has(&cm, OP_GEMM_QKV));
    static const struct {
        CostOp op;
        int n0, n1;
        int64_t first0, last0, first1, last1;
    } grid[] = {{OP_GEMM_O, 3, 1, 1, 512, 0, 0}, {OP_NORM, 3, 1, 1, 512, 0, 0}, {OP_ATTN_PREFILL, 2, 2, 1, 64, 0, 256},
                {OP_H2D, 2, 1, 4096, 1 << 20, 0, 0}};
    for (size_t i = 0; i < KV_ARRAY_LEN(grid); i++) {
        const CostCurve *cv = &cm.c[grid[i].op];
        if (!cv->present) continue;
        int n1 = cv->ndim > 1 ? cv->n[1] : 1;
        CHECK_MSG(cv->n[0] == grid[i].n0 && n1 == grid[i].n1, "%s: a %d x %d grid, the plan's is %d x %d",
                  cost_op_name(grid[i].op), cv->n[0], n1, grid[i].n0, grid[i].n1);
        if (cv->n[0] != grid[i].n0 || n1 != grid[i].n1) continue;
        CHECK(cv->axis[0][0] == grid[i].first0 && cv->axis[0][cv->n[0] - 1] == grid[i].last0);
        if (cv->ndim > 1) CHECK(cv->axis[1][0] == grid[i].first1 && cv->axis[1][n1 - 1] == grid[i].last1);
        for (int k = 0; k < cv->n[0] * n1; k++)
            CHECK_MSG(cv->y[k] > 0 && isfinite(cv->y[k]), "%s: point %d: %g ns", cost_op_name(grid[i].op), k, cv->y[k]);
    }
    double g512 = cost_lookup_ns(&cm, OP_GEMM_O, 512, 0, 0), a1 = cost_lookup_ns(&cm, OP_ATTN_PREFILL, 64, 256, 0);
    CHECK(g512 > 0 && isfinite(g512) && a1 > 0 && isfinite(a1));
    CHECK_EQ_U(cost_extrapolations_total(&cm), 0);
    cost_model_free(&cm);
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

/* A tiny MoE model exercises the expert recipe (router, shared and routed experts), the layer and
 * TP > 1 shapes at little cost. */
static const ModelSpec g_tiny_moe = {.name = "tiny-moe", .arch = MODEL_MOE, .hidden = 256, .layers = 2, .heads = 4,
                                     .kv_heads = 2, .head_dim = 64, .intermediate = 512, .vocab = 1000, .max_pos = 4096,
                                     .gated_ffn = 1, .norm = NORM_RMS, .norms_per_layer = 2, .pos = POS_ROPE,
                                     .n_experts = 8, .experts_per_tok = 2, .moe_intermediate = 128, .shared_experts = 1,
                                     .dense_layers = 1};

TEST(calib_cpu_run_tiny_moe_with_tp2_covers_every_compute_recipe)
{
    KvErr e;
    CalibPlan plan;
    static const int64_t tok[] = {1, 8, 64}, an[] = {1, 8}, ac[] = {0, 32}, db_[] = {1, 4}, dc[] = {16, 64};
    calib_plan_clear(&plan);
    static const CostOp one_d[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                   OP_NORM, OP_ACT, OP_ROPE, OP_QUANT, OP_DEQUANT};
    for (size_t i = 0; i < KV_ARRAY_LEN(one_d); i++) CHECK(calib_plan_set(&plan, one_d[i], tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ATTN_PREFILL, an, 2, ac, 2, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_LAYER_PREFILL, an, 2, ac, 2, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ATTN_DECODE, db_, 2, dc, 2, NULL, 0, &g_fast, 5000000000LL, &e) == 0);
    char db[4200];
    snprintf(db, sizeof db, "%s/moe.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = &g_tiny_moe, .dtype = KV_DT_BF16, .tp = 2, .plan = &plan,
                      .device_name = "my-box"};
    CalibResult r;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "calib_run: %s", e.msg);
    CHECK_EQ_I(r.points, 10 * 3 + 3 * 4);
    CHECK_STR(r.meta.device, "my-box");
    CHECK_STR(r.meta.dtype, "bf16");
    CHECK_EQ_I(r.meta.tp, 2);
    CHECK_CONTAINS(r.meta.notes, "tp 2: per-GPU shapes timed on one device");
    char sum[2048];
    CHECK(calib_summary(&st, r.run_id, &g_tiny_moe, sum, sizeof sum, &e) == 0);
    CHECK_CONTAINS(sum, "gemm_ffn_up GFLOP/s by tokens: 1:");
    CHECK_CONTAINS(sum, "layer_prefill / sum of its parts (new, context): (1, 0):");
    store_close(&st);
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, db, "my-box", "tiny-moe", "bf16", 2, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < KV_ARRAY_LEN(one_d); i++) CHECK(cost_has(&cm, one_d[i]));
    CHECK(cost_has(&cm, OP_LAYER_PREFILL) && cost_has(&cm, OP_ATTN_DECODE));
    CHECK(cost_lookup_ns(&cm, OP_LAYER_PREFILL, 8, 32, 0) > 0);
    cost_model_free(&cm);
    /* learned positions: no rope points even when the plan asks */
    ModelSpec opt = g_tiny_moe;
    snprintf(opt.name, sizeof opt.name, "tiny-learned");
    opt.pos = POS_LEARNED;
    opt.n_experts = 0, opt.experts_per_tok = 0, opt.moe_intermediate = 0, opt.shared_experts = 0, opt.dense_layers = 0;
    opt.arch = MODEL_DENSE, opt.gated_ffn = 0, opt.norm = NORM_LAYER;
    calib_plan_clear(&plan);
    CHECK(calib_plan_set(&plan, OP_ROPE, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ACT, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_NORM, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    o.model = &opt;
    o.tp = 1;
    CHECK(store_open(&st, db, 0, &e) == 0);
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.points, 6);
    CHECK_CONTAINS(r.meta.notes, "rope (learned positions)");
    store_close(&st);
}

/* --cold-weights: each GEMM/layer op holds enough copies of its weights that one rotation exceeds
 * cold_bytes, every repetition reads the next one (copy wraps), and a cold run measures every recipe
 * (the MoE's experts and router too) and says so in its notes; 0 keeps one copy. */
TEST(calib_cold_weights_rotate_over_copies_beyond_the_budget)
{
    KvErr e;
    CHECK(probe_cpu_llc_bytes() >= 1 << 20);
    ModelLayout ly = {&g_tiny_moe, KV_DT_BF16, 1, 1};
    CalibShapes s;
    calib_shapes_of(&s, &ly);
    ProbeDev d;
    CHECK_MSG(probe_cpu_open(&d, &e) == 0, "%s", e.msg);
    static const CostOp ops[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ, OP_LAYER_PREFILL, OP_NORM};
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++)
        for (int cold = 0; cold < 2; cold++) {
            CalibWork w;
            memset(&w, 0, sizeof w);
            w.d = &d, w.s = &s, w.op = ops[i], w.p1_max = 8, w.p2_max = 32;
            w.cold_bytes = cold ? (int64_t)4 << 20 : 0;
            size_t before = d.bytes_in_use;
            CHECK_MSG(calib_work_alloc(&w, &e) == 0, "%s: %s", cost_op_name(ops[i]), e.msg);
            size_t held = d.bytes_in_use - before;
            if (!cold || ops[i] == OP_NORM) {
                CHECK_EQ_I(w.copies, 1);
            } else { /* one rotation exceeds the budget (one copy when the weights alone do) */
                CHECK_MSG(held > (size_t)4 << 20, "%s: %d copies, %zu bytes", cost_op_name(ops[i]), w.copies, held);
                CHECK(ops[i] == OP_LAYER_PREFILL || w.copies > 1);
            }
            calib_work_set_point(&w, 8, 32);
            double ns = 0;
            for (int r = 0; r < w.copies + 2; r++) CHECK_MSG(calib_work_rep(&w, 1, &ns, &e) == 0, "%s", e.msg);
            CHECK(ns > 0);
            CHECK_EQ_I(w.copy, w.copies > 1 ? 2 % w.copies : 0);
            calib_work_free(&w);
            CHECK_EQ_U(d.bytes_in_use, before);
        }
    probe_close(&d);
    CalibPlan plan;
    static const int64_t tok[] = {1, 8}, an[] = {1, 8}, ac[] = {0, 32};
    calib_plan_clear(&plan);
    CHECK(calib_plan_set(&plan, OP_GEMM_FFN_UP, tok, 2, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_LAYER_PREFILL, an, 2, ac, 2, NULL, 0, &g_fast, 0, &e) == 0);
    char db[4200];
    snprintf(db, sizeof db, "%s/cold.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = &g_tiny_moe, .dtype = KV_DT_BF16, .tp = 1, .plan = &plan,
                      .cold_weights_bytes = (int64_t)8 << 20};
    CalibResult r;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "calib_run: %s", e.msg);
    CHECK_EQ_I(r.points, 2 + 4);
    CHECK_CONTAINS(r.meta.notes, "cold weights: GEMM/layer weights rotated over copies > 8 MiB");
    store_close(&st);
}

/* --in-sequence: one repetition runs a whole layer on the next copy of its weights and KV and times
 * each op between the others: every op the layer runs has a time, the ops it does not run none, the
 * parts add up to the layer, K and V hold a copy per weight copy; a run stores exactly the plan's
 * points (the in-sequence ops from the layers, the rest as before), says so, and reads back. */
TEST(calib_in_sequence_times_each_op_inside_the_layer)
{
    KvErr e;
    ModelLayout ly = {&g_tiny_moe, KV_DT_BF16, 1, 1};
    CalibShapes s;
    calib_shapes_of(&s, &ly);
    ProbeDev d;
    CHECK_MSG(probe_cpu_open(&d, &e) == 0, "%s", e.msg);
    size_t before = d.bytes_in_use;
    CalibWork plain;
    memset(&plain, 0, sizeof plain);
    plain.d = &d, plain.s = &s, plain.op = OP_LAYER_PREFILL, plain.p1_max = 8, plain.p2_max = 64;
    plain.cold_bytes = (int64_t)16 << 20;
    CHECK_MSG(calib_work_alloc(&plain, &e) == 0, "%s", e.msg);
    size_t plain_bytes = d.bytes_in_use - before;
    int copies = plain.copies;
    calib_work_free(&plain);
    CalibWork w;
    memset(&w, 0, sizeof w);
    w.d = &d, w.s = &s, w.cold_bytes = (int64_t)16 << 20;
    CHECK_MSG(calib_seq_alloc(&w, 8, 64, 4, &e) == 0, "%s", e.msg);
    CHECK(copies > 1 && w.copies == copies);
    size_t kv_copy = (size_t)(64 + 8) * (size_t)(s.hk * s.dh) * d.elem_bytes; /* K (or V) of one copy */
    CHECK_EQ_U(d.bytes_in_use - before, plain_bytes + 2 * (size_t)(copies - 1) * kv_copy);
    static const int kinds[] = {CALIB_SEQ_PREFILL, CALIB_SEQ_DECODE, CALIB_SEQ_NONE};
    static const CostOp always[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM, OP_ACT, OP_ROPE};
    for (size_t k = 0; k < KV_ARRAY_LEN(kinds); k++) {
        calib_seq_set(&w, kinds[k], kinds[k] == CALIB_SEQ_DECODE ? 4 : 8, kinds[k] == CALIB_SEQ_NONE ? 0 : 64);
        int copy0 = w.copy;
        double op_ns[OP_COUNT], layer = 0;
        CHECK_MSG(calib_seq_rep(&w, op_ns, &layer, &e) == 0, "%s", e.msg);
        CHECK_EQ_I(w.copy, (copy0 + 1) % copies); /* the next layer's weights */
        double sum = 0;
        for (size_t i = 0; i < KV_ARRAY_LEN(always); i++) CHECK_MSG(op_ns[always[i]] > 0, "%s: 0 ns", cost_op_name(always[i]));
        CHECK((op_ns[OP_ATTN_PREFILL] > 0) == (kinds[k] == CALIB_SEQ_PREFILL));
        CHECK((op_ns[OP_ATTN_DECODE] > 0) == (kinds[k] == CALIB_SEQ_DECODE));
        CHECK(op_ns[OP_GEMM_KV_PROJ] == 0 && op_ns[OP_QUANT] == 0 && op_ns[OP_LAYER_PREFILL] == 0);
        for (int op = 0; op < OP_COUNT; op++) sum += op == OP_NORM ? 2 * op_ns[op] : op_ns[op]; /* two norm calls */
        CHECK_MSG(fabs(sum - layer) <= 1e-6 * layer, "parts %g ns, layer %g ns", sum, layer);
    }
    calib_work_free(&w);
    CHECK_EQ_U(d.bytes_in_use, before);
    probe_close(&d);

    CalibPlan plan;
    static const int64_t tok[] = {1, 8}, ew[] = {1, 8, 16}, an[] = {1, 8}, ac[] = {0, 32}, db_[] = {1, 4}, dc[] = {16, 64};
    calib_plan_clear(&plan);
    static const CostOp lin[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ};
    for (size_t i = 0; i < KV_ARRAY_LEN(lin); i++) CHECK(calib_plan_set(&plan, lin[i], tok, 2, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_NORM, ew, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0); /* 16: past the GEMMs' 8, timed alone */
    CHECK(calib_plan_set(&plan, OP_ATTN_PREFILL, an, 2, ac, 2, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ATTN_DECODE, db_, 2, dc, 2, NULL, 0, &g_fast, 0, &e) == 0);
    char dbp[4200];
    snprintf(dbp, sizeof dbp, "%s/seq.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, dbp, 1, &e) == 0, "%s", e.msg);
    Seen seen = {0};
    CalibOptions o = {.backend = "cpu", .model = &g_tiny_moe, .dtype = KV_DT_BF16, .tp = 1, .plan = &plan,
                      .cold_weights_bytes = (int64_t)4 << 20, .in_sequence = 1, .progress = seen_progress, .progress_ctx = &seen};
    CalibResult r;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "calib_run: %s", e.msg);
    CHECK_EQ_I(r.points, 5 * 2 + 3 + 4 + 4);
    CHECK_EQ_I(seen.points, r.points);
    CHECK_EQ_I(seen.ops, 9); /* a line per op, and norm's point past the GEMMs' grid timed alone */
    CHECK_CONTAINS(r.meta.notes, "in sequence: layer ops timed inside a layer, copies > 4 MiB");
    store_close(&st);
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, dbp, "cpu", "tiny-moe", "bf16", 1, &e) == 0, "%s", e.msg);
    CHECK(cost_lookup_ns(&cm, OP_NORM, 16, 0, 0) > 0 && cost_lookup_ns(&cm, OP_ATTN_DECODE, 4, 64, 0) > 0);
    CHECK(cost_lookup_ns(&cm, OP_ATTN_PREFILL, 8, 32, 0) > 0 && cost_lookup_ns(&cm, OP_GEMM_FFN_DOWN, 8, 0, 0) > 0);
    CHECK_EQ_U(cost_extrapolations_total(&cm), 0);
    cost_model_free(&cm);
    /* the cuda backend's kernels are asynchronous: refused before any device is opened */
    o.backend = "cuda";
    CHECK(store_open(&st, dbp, 0, &e) == 0);
    CHECK(calib_run(&st, &o, &r, &e) != 0);
    CHECK_CONTAINS(e.msg, "in-sequence timing is for the cpu backend");
    store_close(&st);
}

TEST(calib_failed_or_interrupted_run_leaves_no_trace)
{
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    KvErr e;
    CalibPlan plan;
    static const int64_t tok[] = {1, 8, 64};
    calib_plan_clear(&plan);
    CHECK(calib_plan_set(&plan, OP_NORM, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ACT, tok, 3, NULL, 0, NULL, 0, &g_fast, 0, &e) == 0);
    char db[4200];
    snprintf(db, sizeof db, "%s/fail.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = model_find(&mc, "Llama-2-7B", &e), .dtype = KV_DT_FP16, .tp = 1,
                      .plan = &plan, .hw = &hw};
    CalibResult r;
    /* one good run first: it must survive the failures below */
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    o.fail_after_points = 4; /* an error in the middle of the second op */
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "simulated failure after 4 points");
    CHECK_CONTAINS(e.msg, "act (1, 0)"); /* names the op and the point */
    o.fail_after_points = 0;
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "interrupted");
    /* options refused before anything is written */
    o.stop = NULL;
    o.backend = "tpu";
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "backend 'tpu': expected cpu or cuda");
    o.backend = "cpu";
    o.dtype = KV_DT_INT8;
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "dtype int8: expected fp16 or bf16");
    o.dtype = KV_DT_FP16;
    o.tp = 3; /* 32 heads are not divisible by 3 */
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    o.tp = 1;
    calib_plan_clear(&plan);
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "no point to measure");
    store_close(&st);
    CHECK_EQ_I(store_runs(t, db), 1);
    CHECK(store_open(&st, db, 0, &e) == 0);
    int64_t n = -1;
    CHECK(store_count_points(&st, 2, -1, &n, &e) == 0);
    CHECK_EQ_I(n, 0);
    store_close(&st);
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

/* ---------------------------------------------------------------- IO probes */

/* The probe files of a kvcal that died (SIGKILL: its close never ran) are removed; those of live
 * processes (this one, pid 1) and files that are not the probe's stay. */
TEST(calib_ssd_probe_removes_files_of_dead_runs)
{
    KvErr e;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/stale-scratch", test_tmpdir(t));
    mkdir(dir, 0755);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0); /* a pid no process has now */
    char names[6][80];
    snprintf(names[0], sizeof names[0], "kvcal-ssd-%ld-0.tmp", (long)dead);
    snprintf(names[1], sizeof names[1], "kvcal-ssd-%ld-1.tmp", (long)dead);
    snprintf(names[2], sizeof names[2], "kvcal-ssd-%ld-0.tmp", (long)getpid());
    snprintf(names[3], sizeof names[3], "kvcal-ssd-1-0.tmp");
    snprintf(names[4], sizeof names[4], "kvcal-ssd-%ld-0.tmp.keep", (long)dead);
    snprintf(names[5], sizeof names[5], "mine-%ld-0.tmp", (long)dead);
    for (int i = 0; i < 6; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        FILE *f = fopen(p, "w");
        CHECK(f != NULL);
        if (f) fclose(f);
    }
    int removed = -1;
    char list[512];
    CHECK_MSG(probe_ssd_remove_stale(dir, &removed, list, sizeof list, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(removed, 2);
    CHECK_CONTAINS(list, names[0]);
    for (int i = 0; i < 6; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        CHECK_MSG((access(p, F_OK) == 0) == (i >= 2), "%s: %s", names[i], i >= 2 ? "removed" : "left");
        unlink(p);
    }
    CHECK(probe_ssd_remove_stale("/no/such/scratch", &removed, list, sizeof list, &e) == -1);
    CHECK_CONTAINS(e.msg, "/no/such/scratch");
}

TEST(calib_ssd_probe_direct_threads_tmpfs_and_errors)
{
    KvErr e;
    const char *dir = test_tmpdir(t);
    const char *dirs[] = {dir};
    ProbeSsd *s = probe_ssd_open(dirs, 1, 2, 1 << 20, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(probe_ssd_note(s), "2 files of 1 MiB");
    TimingCfg c = {.warmup = 1, .min_reps = 2, .max_reps = 2};
    TimingStats st;
    CHECK_MSG(probe_ssd_measure(s, OP_SSD_WRITE, 256 << 10, 4, 2, &c, &st, &e) == 0, "%s", e.msg);
    CHECK(st.n == 2 && st.median_ns > 0);
    CHECK_MSG(probe_ssd_measure(s, OP_SSD_READ, 512 << 10, 1, 1, &c, &st, &e) == 0, "%s", e.msg);
    CHECK(st.median_ns > 0);
    probe_ssd_use_threads(s);
    CHECK_CONTAINS(probe_ssd_note(s), "threads");
    CHECK_MSG(probe_ssd_measure(s, OP_SSD_READ, 256 << 10, 4, 2, &c, &st, &e) == 0, "%s", e.msg);
    CHECK(st.median_ns > 0);
    CHECK_MSG(probe_ssd_measure(s, OP_SSD_WRITE, 8192, 2, 2, &c, &st, &e) == 0, "%s", e.msg);
    /* errors name what was expected */
    CHECK_EQ_I(probe_ssd_measure(s, OP_SSD_READ, 4 << 20, 1, 1, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "the files hold 524288 per repetition");
    CHECK_EQ_I(probe_ssd_measure(s, OP_SSD_READ, 4096, 1, 3, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "3 files: expected 1..2");
    CHECK_EQ_I(probe_ssd_measure(s, OP_H2D, 4096, 1, 1, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "not an SSD op");
    CHECK_EQ_I(probe_ssd_measure(s, OP_SSD_READ, 4096, 0, 1, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "queue depth 0");
    probe_ssd_close(s);
    /* files are removed by close */
    char path[4200];
    snprintf(path, sizeof path, "%s/kvcal-ssd-%ld-0.tmp", dir, (long)getpid());
    CHECK(access(path, F_OK) != 0);

    /* tmpfs: measured, but named as memory */
    struct stat sb;
    if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0) {
        const char *shm[] = {"/dev/shm"};
        s = probe_ssd_open(shm, 1, 1, 64 << 10, &e);
        CHECK_MSG(s != NULL, "%s", e.msg);
        if (s) {
            CHECK_CONTAINS(probe_ssd_note(s), "tmpfs");
            CHECK(probe_ssd_measure(s, OP_SSD_READ, 16 << 10, 2, 1, &c, &st, &e) == 0);
            probe_ssd_close(s);
        }
    }
    /* unusable scratch: a path below a regular file; too little space */
    char file[4200], below[4300];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(below, sizeof below, "%s/sub", file);
    const char *bad[] = {below};
    CHECK(probe_ssd_open(bad, 1, 1, 1 << 20, &e) == NULL);
    CHECK_CONTAINS(e.msg, "scratch ");
    CHECK_CONTAINS(e.msg, "expected a writable directory");
    CHECK(probe_ssd_open(dirs, 1, 1, (int64_t)1 << 55, &e) == NULL);
    CHECK_CONTAINS(e.msg, "MiB free, the SSD probes need");
    CHECK(probe_ssd_open(dirs, 0, 1, 1 << 20, &e) == NULL);
    CHECK_CONTAINS(e.msg, "0 scratch directories");
}

TEST(calib_link_probe_cpu_memcpy_and_errors)
{
    KvErr e;
    ProbeLink *l = probe_link_open(0, 0, 1 << 20, &e);
    CHECK_MSG(l != NULL, "%s", e.msg);
    if (!l) return;
    TimingCfg c = {.warmup = 1, .min_reps = 3, .max_reps = 3};
    TimingStats st;
    static const CostOp ops[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) {
        CHECK_MSG(probe_link_measure(l, ops[i], 1 << 20, &c, &st, &e) == 0, "%s", e.msg);
        CHECK(st.n == 3 && st.median_ns > 0);
    }
    double h2d = 0, d2h = 0;
    CHECK(probe_link_pageable(l, 1 << 20, &h2d, &d2h, &e) == 0);
    CHECK(h2d > 0 && isfinite(h2d) && d2h > 0 && isfinite(d2h)); /* (measured: no bound a loaded machine keeps) */
    CHECK_EQ_I(probe_link_measure(l, OP_H2D, (1 << 20) + 1, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "expected 1..1048576");
    CHECK_EQ_I(probe_link_measure(l, OP_SSD_READ, 4096, &c, &st, &e), -1);
    CHECK_CONTAINS(e.msg, "not a host link op");
    probe_link_close(l);
}

TEST(calib_run_with_scratch_measures_ssd_grid_or_explains_why_not)
{
    KvErr e;
    CalibPlan plan;
    static const int64_t tok[] = {1, 8}, bytes[] = {65536, 262144}, qd[] = {1, 4}, nf[] = {1, 2};
    TimingCfg c = {.warmup = 1, .min_reps = 1, .max_reps = 2};
    calib_plan_clear(&plan);
    CHECK(calib_plan_set(&plan, OP_NORM, tok, 2, NULL, 0, NULL, 0, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_SSD_READ, bytes, 2, qd, 2, nf, 2, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_SSD_WRITE, bytes, 2, qd, 2, nf, 2, &c, 0, &e) == 0);
    char db[4200], scratch[4200];
    snprintf(db, sizeof db, "%s/ssd.db", test_tmpdir(t));
    snprintf(scratch, sizeof scratch, "%s/scratch", test_tmpdir(t));
    mkdir(scratch, 0777); /* probes never create their scratch directory */
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = &g_tiny_moe, .dtype = KV_DT_FP16, .tp = 1, .plan = &plan,
                      .scratch = scratch, .ssd_threads = 1};
    CalibResult r;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.points, 2 + 16);
    CHECK_CONTAINS(r.meta.notes, "ssd: 2 files of 512 KiB in"); /* 2 × 256 KiB per file */
    CHECK_CONTAINS(r.meta.notes, "threads (forced)");
    char sum[2048];
    CHECK(calib_summary(&st, r.run_id, &g_tiny_moe, sum, sizeof sum, &e) == 0);
    CHECK_CONTAINS(sum, "ssd_read GB/s at 256 KiB: qd 1 x 1 file");
    /* the reader takes the SSD curves as a full 3-D grid */
    store_close(&st);
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, db, "cpu", "tiny-moe", "fp16", 1, &e) == 0, "%s", e.msg);
    CHECK(cost_has(&cm, OP_SSD_READ) && cost_has(&cm, OP_SSD_WRITE));
    CHECK(cost_lookup_ns(&cm, OP_SSD_READ, 262144, 4, 2) > 0);
    cost_model_free(&cm);

    /* an unusable scratch: the run goes on without SSD points and says why */
    char file[4200], below[4300];
    snprintf(file, sizeof file, "%s/notadir", test_tmpdir(t));
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(below, sizeof below, "%s/x", file);
    o.scratch = below;
    CHECK(store_open(&st, db, 0, &e) == 0);
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.points, 2);
    CHECK_CONTAINS(r.warnings, "ssd probes skipped: scratch ");
    CHECK_CONTAINS(r.warnings, "expected a writable directory that exists");
    CHECK_CONTAINS(r.meta.notes, "ssd probes skipped");
    o.scratch = ",";
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_CONTAINS(r.warnings, "no directory given");
    store_close(&st);
}

TEST(calib_io_beside_compute_times_the_io_while_layers_run)
{
    KvErr e;
    CalibPlan plan;
    static const int64_t bytes[] = {65536, 262144}, one[] = {1}, lb[] = {4096, 262144};
    TimingCfg c = {.warmup = 1, .min_reps = 2, .max_reps = 4, .min_time_ns = 5000000};
    calib_plan_clear(&plan);
    CHECK(calib_plan_set(&plan, OP_H2D, lb, 2, NULL, 0, NULL, 0, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_SSD_READ, bytes, 2, one, 1, one, 1, &c, 0, &e) == 0);
    char db[4200], scratch[4200];
    snprintf(db, sizeof db, "%s/beside.db", test_tmpdir(t));
    snprintf(scratch, sizeof scratch, "%s/scratch", test_tmpdir(t));
    mkdir(scratch, 0777);
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = &g_tiny_moe, .dtype = KV_DT_FP16, .tp = 1, .plan = &plan,
                      .scratch = scratch, .ssd_threads = 1, .cold_weights_bytes = (int64_t)1 << 20, .io_beside_compute = 1};
    CalibResult r;
    cpu_set_t before, after;
    CHECK(pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0);
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.points, 4);
    CHECK_MSG(r.beside_layers >= 1, "%lld layers beside the IO", (long long)r.beside_layers);
    CHECK_CONTAINS(r.meta.notes, "io beside compute: link, ssd and net points timed while a thread runs prefill layers");
    CHECK(pthread_getaffinity_np(pthread_self(), sizeof after, &after) == 0);
    CHECK(CPU_EQUAL(&before, &after)); /* the calling thread's pin is undone */
    /* without it: no compute thread, nothing in the notes */
    o.io_beside_compute = 0;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.beside_layers, 0);
    CHECK(!strstr(r.meta.notes, "io beside compute"));
    /* a plan without IO points starts no thread */
    CalibPlan no_io;
    static const int64_t tok[] = {1, 8};
    calib_plan_clear(&no_io);
    CHECK(calib_plan_set(&no_io, OP_NORM, tok, 2, NULL, 0, NULL, 0, &c, 0, &e) == 0);
    o.plan = &no_io;
    o.io_beside_compute = 1;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(r.beside_layers, 0);
    /* cuda: refused, naming why */
    o.backend = "cuda";
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "io beside compute is for the cpu backend");
    store_close(&st);
}

/* ---------------------------------------------------------------- CUDA */

TEST(calib_cuda_without_device_is_a_clear_error)
{
    KvErr e = {{0}};
    int n = kgpu_device_count(&e);
    if (n > 0) SKIP("a CUDA device is present (the no-device path is not reachable)");
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    char db[4200];
    snprintf(db, sizeof db, "%s/cuda.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cuda", .model = model_find(&mc, "Llama-2-7B", &e), .dtype = KV_DT_FP16, .tp = 1, .hw = &hw};
    CalibResult r;
    CHECK_EQ_I(calib_run(&st, &o, &r, &e), -1);
    CHECK_MSG(strncmp(e.msg, "no CUDA device: ", 16) == 0, "message: %s", e.msg);
    ProbeDev d;
    CHECK_EQ_I(probe_cuda_open(&d, 0, KV_DT_FP16, &e), -1);
    CHECK_CONTAINS(e.msg, "no CUDA device: ");
    CHECK_EQ_I(probe_cuda_open(&d, 0, KV_DT_INT8, &e), -1);
    CHECK_CONTAINS(e.msg, "expected fp16 or bf16");
    CHECK(probe_link_open(1, 0, 4096, &e) == NULL);
    store_close(&st);
    CHECK_EQ_I(store_runs(t, db), 0);

    /* the CLI: "kvcal run: no CUDA device: ..." and exit 1 */
    const char *kvcal = test_path("bin/kvcal");
    if (access(kvcal, X_OK) != 0) {
        model_catalog_free(&mc);
        hw_catalog_free(&hw);
        SKIP("%s not built", kvcal);
    }
    char args[4400], out[4096] = "";
    snprintf(args, sizeof args, "run --backend cuda --model Llama-2-7B --db '%s'", db);
    int code = run_cli(args, out, sizeof out);
    CHECK_MSG(code == 1, "exit code %d: %s", code, out);
    CHECK_CONTAINS(out, "kvcal run: no CUDA device: ");
    CHECK_EQ_I(store_runs(t, db), 0);
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

/* With a GPU: a small cuda run of every op through the real kernels, read back. */
TEST(calib_cuda_small_run_every_op)
{
    KvErr e = {{0}};
    int n = kgpu_device_count(&e);
    if (n == 0) SKIP("%s", e.msg);
    if (n < 0) SKIP("no CUDA device: %s", e.msg);
    ModelCatalog mc;
    HwCatalog hw;
    if (load_catalogs(t, &mc, &hw) != 0) return;
    const ModelSpec *m = model_find(&mc, "Llama-3.1-8B", &e);
    CalibPlan plan;
    static const int64_t tok[] = {1, 64, 512}, an[] = {1, 64}, ac[] = {0, 1024}, db_[] = {1, 8}, dc[] = {256, 4096},
                         bytes[] = {4096, 1 << 20};
    TimingCfg c = {.warmup = 2, .min_reps = 3, .max_reps = 5};
    calib_plan_clear(&plan);
    static const CostOp one_d[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                   OP_NORM, OP_ACT, OP_ROPE, OP_QUANT, OP_DEQUANT};
    for (size_t i = 0; i < KV_ARRAY_LEN(one_d); i++) CHECK(calib_plan_set(&plan, one_d[i], tok, 3, NULL, 0, NULL, 0, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ATTN_PREFILL, an, 2, ac, 2, NULL, 0, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_LAYER_PREFILL, an, 2, ac, 2, NULL, 0, &c, 0, &e) == 0);
    CHECK(calib_plan_set(&plan, OP_ATTN_DECODE, db_, 2, dc, 2, NULL, 0, &c, 0, &e) == 0);
    for (int op = OP_H2D; op <= OP_D2H_BIDIR; op++) CHECK(calib_plan_set(&plan, (CostOp)op, bytes, 2, NULL, 0, NULL, 0, &c, 0, &e) == 0);
    char db[4200];
    snprintf(db, sizeof db, "%s/gpu.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cuda", .model = m, .dtype = KV_DT_BF16, .tp = 1, .plan = &plan, .hw = &hw};
    CalibResult r;
    CHECK_MSG(calib_run(&st, &o, &r, &e) == 0, "cuda run: %s", e.msg);
    CHECK_EQ_I(r.points, 10 * 3 + 3 * 4 + 4 * 2);
    CHECK_STR(r.meta.backend, "cuda");
    CHECK(r.meta.driver[0] && r.meta.cuda[0]);
    CHECK(r.estimate.points == r.points);
    char sum[4096];
    CHECK(calib_summary(&st, r.run_id, m, sum, sizeof sum, &e) == 0);
    printf("      %s: %s\n", r.meta.device, sum);
    store_close(&st);
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, db, r.meta.device, m->name, "bf16", 1, &e) == 0, "%s", e.msg);
    /* measured: positive and finite (two timings keep no order on a busy device) */
    double up512 = cost_lookup_ns(&cm, OP_GEMM_FFN_UP, 512, 0, 0), h2d = cost_lookup_ns(&cm, OP_H2D, 1 << 20, 0, 0);
    CHECK(up512 > 0 && isfinite(up512) && h2d > 0 && isfinite(h2d));
    cost_model_free(&cm);
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}

/* ---------------------------------------------------------------- diff */

static int64_t put_run(TestCtx *t, CostStore *st, const char *device, double scale_at_p1_4, int drop_4096, int extra)
{
    KvErr e;
    StoreRunMeta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.backend, sizeof meta.backend, "cuda");
    snprintf(meta.device, sizeof meta.device, "%s", device);
    snprintf(meta.model, sizeof meta.model, "Llama-2-7B");
    snprintf(meta.dtype, sizeof meta.dtype, "fp16");
    meta.tp = 1;
    if (store_begin_run(st, &meta, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "%s", e.msg);
        return 0;
    }
    static const int64_t tok[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        double v = 1000.0 * (double)tok[i] * (tok[i] == 4 ? scale_at_p1_4 : 1.0);
        StorePoint p = {.op = OP_GEMM_QKV, .tp = 1, .p1 = tok[i], .n = 5, .median_ns = v, .p10_ns = v * 0.9, .p90_ns = v * 1.1};
        snprintf(p.model, sizeof p.model, "Llama-2-7B");
        snprintf(p.dtype, sizeof p.dtype, "fp16");
        CHECK_MSG(store_add_point(st, meta.id, &p, &e) == 0, "%s", e.msg);
    }
    int64_t bytes[] = {4096, 8192};
    for (int i = drop_4096 ? 1 : 0; i < (extra ? 2 : 1); i++) {
        StorePoint p = {.op = OP_H2D, .tp = 1, .p1 = bytes[i], .n = 5, .median_ns = 5000, .p10_ns = 5000, .p90_ns = 5000};
        snprintf(p.dtype, sizeof p.dtype, "fp16");
        CHECK_MSG(store_add_point(st, meta.id, &p, &e) == 0, "%s", e.msg);
    }
    CHECK_MSG(store_end_run(st, meta.id, 1, &e) == 0, "%s", e.msg);
    return meta.id;
}

/* Run bin/kvcal with args; its exit code, output in out. Exit 126 (the binary is being relinked by
 * a concurrent make in the shared tree) is retried a few times. */
static int run_cli(const char *args, char *out, size_t len)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", test_path("bin/kvcal"), args);
    int code = -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        FILE *p = popen(cmd, "r");
        if (!p) return -1;
        size_t k = fread(out, 1, len - 1, p);
        out[k] = '\0';
        int status = pclose(p);
        code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code != 126) break;
        sleep(1);
    }
    return code;
}

TEST(calib_diff_finds_drift_beyond_tolerance_and_one_sided_points)
{
    KvErr e;
    char db[4200];
    snprintf(db, sizeof db, "%s/diff.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    int64_t a = put_run(t, &st, "H200", 1.0, 0, 0), b = put_run(t, &st, "H200", 1.0, 0, 0);
    int64_t c = put_run(t, &st, "H200", 1.2, 0, 0), d = put_run(t, &st, "H200", 1.0, 1, 1);
    CalibDiff df;
    CHECK_MSG(calib_diff(&st, a, b, 0.05, &df, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(df.common, 4);
    CHECK_EQ_I(df.beyond, 0);
    CHECK_EQ_I(df.drifted, 0);
    CHECK_EQ_I(df.only_a + df.only_b, 0);
    CHECK_EQ_I(df.n_curves, 2);
    calib_diff_free(&df);

    CHECK(calib_diff(&st, a, c, 0.05, &df, &e) == 0);
    CHECK_EQ_I(df.beyond, 1);
    CHECK_EQ_I(df.drifted, 1);
    CHECK(df.curves[0].op == OP_GEMM_QKV); /* "gemm_qkv" sorts before "h2d" */
    CHECK_NEAR(df.curves[0].worst_rel, 0.2, 1e-9, 0);
    CHECK_EQ_I(df.curves[0].worst_p[0], 4);
    CHECK_NEAR(df.curves[0].worst_a_ns, 4000, 1e-12, 0);
    CHECK_NEAR(df.curves[0].worst_b_ns, 4800, 1e-9, 0);
    calib_diff_free(&df);
    CHECK(calib_diff(&st, a, c, 0.25, &df, &e) == 0);
    CHECK_EQ_I(df.beyond, 0);
    CHECK_EQ_I(df.drifted, 0);
    calib_diff_free(&df);
    /* the other direction: -16.7 % */
    CHECK(calib_diff(&st, c, a, 0.05, &df, &e) == 0);
    CHECK_NEAR(df.curves[0].worst_rel, 1.0 / 1.2 - 1.0, 1e-9, 0);
    calib_diff_free(&df);

    CHECK(calib_diff(&st, a, d, 0.05, &df, &e) == 0);
    CHECK_EQ_I(df.common, 3);
    CHECK_EQ_I(df.only_a, 1);
    CHECK_EQ_I(df.only_b, 1);
    CHECK_EQ_I(df.drifted, 0);
    calib_diff_free(&df);
    CHECK_EQ_I(calib_diff(&st, a, 99, 0.05, &df, &e), -1);
    CHECK_CONTAINS(e.msg, "99");
    CHECK_EQ_I(calib_diff(&st, a, b, -1, &df, &e), -1);
    store_close(&st);

    double tol = 0;
    CHECK(calib_parse_tolerance("5%", &tol, &e) == 0 && fabs(tol - 0.05) < 1e-12);
    CHECK(calib_parse_tolerance("0.25", &tol, &e) == 0 && fabs(tol - 0.25) < 1e-12);
    CHECK(calib_parse_tolerance("0%", &tol, &e) == 0 && tol == 0);
    CHECK_EQ_I(calib_parse_tolerance("5", &tol, &e), -1);
    CHECK_CONTAINS(e.msg, "write 5%");
    CHECK_EQ_I(calib_parse_tolerance("abc", &tol, &e), -1);
    CHECK_EQ_I(calib_parse_tolerance("-1%", &tol, &e), -1);
    CHECK_EQ_I(calib_parse_tolerance("2000%", &tol, &e), -1);
    CHECK_EQ_I(calib_parse_tolerance("", &tol, &e), -1);

    /* the CLI's exit codes */
    if (access(test_path("bin/kvcal"), X_OK) != 0) SKIP("bin/kvcal not built");
    char args[4400], out[8192];
    snprintf(args, sizeof args, "diff --db '%s' %lld %lld", db, (long long)a, (long long)b);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 0);
    CHECK_CONTAINS(out, "no drift beyond 5%");
    snprintf(args, sizeof args, "diff --db '%s' %lld %lld", db, (long long)a, (long long)c);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "gemm_qkv");
    CHECK_CONTAINS(out, "+20.0%");
    CHECK_CONTAINS(out, "drift: 1 curve with 1 point beyond 5%");
    snprintf(args, sizeof args, "diff --db '%s' %lld %lld --tolerance 25%%", db, (long long)a, (long long)c);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "diff --db '%s' %lld %lld", db, (long long)a, (long long)d);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 0);
    CHECK_CONTAINS(out, "only in run 1: 1 points (h2d 1)");
    snprintf(args, sizeof args, "diff --db '%s' %lld %lld --tolerance 5", db, (long long)a, (long long)c);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "diff --db '%s' %lld 77", db, (long long)a); /* a run that is not there: an error, not a drift */
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "77");
    snprintf(args, sizeof args, "diff --db '%s' %lld", db, (long long)a);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "diff --db '%s' x 1", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
}

TEST(calib_cli_run_usage_errors_and_dry_run)
{
    if (access(test_path("bin/kvcal"), X_OK) != 0) SKIP("bin/kvcal not built");
    char out[16384], args[4400];
    const char *db = "/nonexistent-dir/x.db";
    CHECK_EQ_I(run_cli("run", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--backend is required");
    CHECK_EQ_I(run_cli("run --backend gpu --model Llama-2-7B --db x.db", out, sizeof out), 2);
    CHECK_EQ_I(run_cli("run --backend cpu --db x.db", out, sizeof out), 2);
    snprintf(args, sizeof args, "run --backend cpu --model Nope-7B --db %s", db); /* not in the catalog: failure */
    CHECK_EQ_I(run_cli(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "Nope-7B");
    snprintf(args, sizeof args, "run --backend cpu --model Llama-2-7B --dtype fp8 --db %s", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "expected fp16 or bf16");
    snprintf(args, sizeof args, "run --backend cpu --model Llama-2-7B --tp 0 --db %s", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "run --backend cpu --model Llama-2-7B --frob --db %s", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown option '--frob'");
    snprintf(args, sizeof args, "run --backend cpu --quick --quick --model Llama-2-7B --db %s", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 2);
    CHECK_EQ_I(run_cli("run --help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "--scratch");
    /* an unwritable database: failure (1), not a usage error */
    snprintf(args, sizeof args, "run --backend cpu --quick --model Llama-2-7B --db %s", db);
    CHECK_EQ_I(run_cli(args, out, sizeof out), 1);
    /* the plan and the prediction, without a device */
    CHECK_EQ_I(run_cli("run --backend cuda --model Llama-2-7B --dry-run", out, sizeof out), 0);
    CHECK_CONTAINS(out, "timed repetitions");
    CHECK_CONTAINS(out, "on H200");
    CHECK_CONTAINS(out, "attn_prefill");
    CHECK_EQ_I(run_cli("run --backend cuda --model Llama-2-7B --dry-run --device-name A100-40GB", out, sizeof out), 0);
    CHECK_CONTAINS(out, "on A100-40GB");
    CHECK_EQ_I(run_cli("run --backend cuda --model Llama-2-7B --dry-run --device-name NoSuchGPU", out, sizeof out), 1);
    CHECK_EQ_I(run_cli("run --backend cpu --quick --model Llama-2-7B --dry-run", out, sizeof out), 0);
    CHECK_CONTAINS(out, "total: 73 points");
}
