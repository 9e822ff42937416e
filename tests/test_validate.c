/* test_validate.c — kvcal validate (calibrate/validate.c): the prediction arithmetic against
 * hand-computed sums of lookups, a real (tiny) restoration measured on this CPU, and every error
 * path (missing store, store without the model, missing curves, bad scratch, bad options, MoE).
 * The cost models are built in memory with linear curves y = a·tokens, so lookups at N are a·N.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/cost/cost.h"
#include "tests/harness.h"
#include "sim/cost/store.h"
#include "calibrate/validate.h"
#include "calibrate/cli/validate_cmd.h"

#define TINY_N 64

static ModelSpec tiny_model(void)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny");
    m.arch = MODEL_DENSE;
    m.hidden = 64;
    m.layers = 2;
    m.heads = 4;
    m.kv_heads = 2;
    m.head_dim = 16;
    m.intermediate = 96;
    m.vocab = 100;
    m.max_pos = 4096;
    m.gated_ffn = 1;
    m.norm = NORM_RMS;
    m.norms_per_layer = 2;
    m.pos = POS_ROPE;
    return m;
}

/* y = slope · tokens at tokens {1, 100} (exact at any N in between) */
static int set_linear(CostModel *cm, CostOp op, double slope)
{
    CostPoint p[2] = {{op, {1, 0, 0}, slope}, {op, {100, 0, 0}, 100 * slope}};
    KvErr e;
    return cost_model_set_op(cm, op, p, 2, 0, "test", &e);
}

/* slopes: qkv 10, o 20, up 30, down 40, attn 50 (+1 per context token), norm 5, act 6, rope 7, kv_proj 8 */
static void tiny_cost_model(CostModel *cm, int with_rope)
{
    cost_model_init(cm, "cpu", "tiny", "fp16", 1);
    set_linear(cm, OP_GEMM_QKV, 10);
    set_linear(cm, OP_GEMM_O, 20);
    set_linear(cm, OP_GEMM_FFN_UP, 30);
    set_linear(cm, OP_GEMM_FFN_DOWN, 40);
    set_linear(cm, OP_NORM, 5);
    set_linear(cm, OP_ACT, 6);
    if (with_rope) set_linear(cm, OP_ROPE, 7);
    set_linear(cm, OP_GEMM_KV_PROJ, 8);
    CostPoint a[4] = {{OP_ATTN_PREFILL, {1, 0, 0}, 50},
                      {OP_ATTN_PREFILL, {1, 1000, 0}, 1050},
                      {OP_ATTN_PREFILL, {100, 0, 0}, 5000},
                      {OP_ATTN_PREFILL, {100, 1000, 0}, 6000}};
    KvErr e;
    cost_model_set_op(cm, OP_ATTN_PREFILL, a, 4, 0, "test", &e);
}

TEST(validate_names_and_bytes)
{
    CHECK_STR(validate_what_name(VALIDATE_RECOMPUTE), "recompute");
    CHECK_STR(validate_what_name(VALIDATE_KV_LOAD), "kv_load");
    CHECK_STR(validate_what_name(VALIDATE_HIDDEN_LOAD), "hidden_load");
    CHECK(validate_what_name(VALIDATE_N_ROWS) == NULL);
    ModelSpec m = tiny_model();
    /* 2 layers · 64 tokens · 2 (K,V) · 2 heads · 16 · 4 bytes; 2 · 64 · 64 · 4 */
    CHECK_EQ_U(validate_kv_bytes(&m, 2, 64), 32768);
    CHECK_EQ_U(validate_kv_bytes(&m, 3, 10), 7680);
    CHECK_EQ_U(validate_hidden_bytes(&m, 2, 64), 32768);
}

TEST(validate_ratio_ok_bounds)
{
    CHECK(validate_ratio_ok(150, 100, 0.5));
    CHECK(!validate_ratio_ok(151, 100, 0.5));
    CHECK(validate_ratio_ok(66.7, 100, 0.5));   /* 1/1.5 = 0.6667 */
    CHECK(!validate_ratio_ok(66.6, 100, 0.5));
    CHECK(!validate_ratio_ok(100, 0, 0.5));
    CHECK(!validate_ratio_ok(NAN, 100, 0.5));
    CHECK(!validate_ratio_ok(INFINITY, 100, 0.5));
}

TEST(validate_predict_is_sum_of_lookups)
{
    ModelSpec m = tiny_model();
    CostModel cm;
    tiny_cost_model(&cm, 1);
    ValidatePrediction p;
    KvErr e = {{0}};
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 1e9, &p, &e), 0);
    /* per layer at N=64: 640 + 1280 + 1920 + 2560 + attn 3200 + 2·320 + 384 + 448 = 11072 */
    CHECK_NEAR(p.layer_ns, 11072, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_RECOMPUTE], 22144, 1e-12, 1e-9);
    CHECK_NEAR(p.layer_op_ns[OP_NORM], 640, 1e-12, 1e-9); /* × norms_per_layer */
    CHECK_NEAR(p.layer_op_ns[OP_ATTN_PREFILL], 3200, 1e-12, 1e-9);
    CHECK_NEAR(p.layer_op_ns[OP_ROPE], 448, 1e-12, 1e-9);
    CHECK_NEAR(p.layer_op_ns[OP_GEMM_KV_PROJ], 0, 0, 0); /* not a recompute term */
    /* reads at 1 GB/s: 32768 B → 32768 ns (KV and hidden alike here); + 2 · kv_proj 512 */
    CHECK_NEAR(p.ns[VALIDATE_KV_LOAD], 32768, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_HIDDEN_READ], 32768, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_HIDDEN_PROJ], 1024, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_HIDDEN_LOAD], 33792, 1e-12, 1e-9);
    CHECK_EQ_U(p.extrapolations, 0);
    /* 3 layers at N = 200 (beyond the points: extrapolated, counted): layer 200·(10+20+30+40+50+2·5+6+7) */
    CHECK_EQ_I(validate_predict(&cm, &m, 3, 200, 2e9, &p, &e), 0);
    CHECK_NEAR(p.ns[VALIDATE_RECOMPUTE], 3.0 * 200 * 173, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_KV_LOAD], 3.0 * 200 * 256 / 2, 1e-12, 1e-9);
    CHECK(p.extrapolations >= 9);

    /* ssd_read curve instead of a rate: y = bytes / 2 at (bytes, qd 1, 1 drive) */
    CostPoint s[2] = {{OP_SSD_READ, {4096, 1, 1}, 2048}, {OP_SSD_READ, {1 << 20, 1, 1}, 1 << 19}};
    CHECK_EQ_I(cost_model_set_op(&cm, OP_SSD_READ, s, 2, 0, "test", &e), 0);
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 0, &p, &e), 0);
    CHECK_NEAR(p.ns[VALIDATE_KV_LOAD], 16384, 1e-12, 1e-9);
    CHECK_NEAR(p.ns[VALIDATE_HIDDEN_LOAD], 16384 + 1024, 1e-12, 1e-9);
    cost_model_free(&cm);

    /* learned positions: no rope lookup (and none needed) */
    m.pos = POS_LEARNED;
    tiny_cost_model(&cm, 0);
    CHECK_EQ_I(validate_predict(&cm, &m, 1, TINY_N, 1e9, &p, &e), 0);
    CHECK_NEAR(p.ns[VALIDATE_RECOMPUTE], 11072 - 448, 1e-12, 1e-9);
    cost_model_free(&cm);
}

TEST(validate_predict_errors)
{
    ModelSpec m = tiny_model();
    CostModel cm;
    ValidatePrediction p;
    KvErr e = {{0}};
    tiny_cost_model(&cm, 0); /* RoPE model, no rope curve */
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, "no rope curve");
    CHECK_CONTAINS(e.msg, "recompute");
    cost_model_free(&cm);
    tiny_cost_model(&cm, 1);
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 0, &p, &e), -1); /* no rate, no ssd_read */
    CHECK_CONTAINS(e.msg, "no ssd_read curve");
    CHECK_EQ_I(validate_predict(&cm, &m, 0, TINY_N, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, "layers and tokens must be >= 1");
    CHECK_EQ_I(validate_predict(&cm, &m, 1, 0, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, "layers and tokens must be >= 1");
    cost_model_free(&cm);
    cost_model_init(&cm, "cpu", "tiny", "fp16", 1); /* nothing but gemm_qkv */
    set_linear(&cm, OP_GEMM_QKV, 1);
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, "no gemm_o curve");
    cost_model_free(&cm);
    /* everything but kv_proj */
    cost_model_init(&cm, "cpu", "tiny", "fp16", 1);
    static const CostOp ops[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM, OP_ACT, OP_ROPE};
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) set_linear(&cm, ops[i], 1);
    CostPoint a[1] = {{OP_ATTN_PREFILL, {1, 0, 0}, 1}};
    CHECK_EQ_I(cost_model_set_op(&cm, OP_ATTN_PREFILL, a, 1, 0, "test", &e), 0);
    CHECK_EQ_I(validate_predict(&cm, &m, 2, TINY_N, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, "no gemm_kv_proj curve");
    CHECK_CONTAINS(e.msg, "hidden-state load");
    cost_model_free(&cm);
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void check_run(TestCtx *t, const ModelSpec *m, CostModel *cm, int layers, ValidateResult *out)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/scratch-%s", test_tmpdir(t), m->name);
    ValidateOptions o = {.model = m, .layers = layers, .tokens = TINY_N, .scratch_dir = dir, .reps = 3,
                         .calib_read_bytes = 1 << 20};
    ValidateResult r;
    KvErr e = {{0}};
    int rc = validate_run(cm, &o, &r, &e);
    CHECK_MSG(rc == 0, "validate_run: %s", e.msg);
    if (rc != 0) return;
    for (int w = 0; w < VALIDATE_N_ROWS; w++) {
        CHECK_MSG(r.measured_ns[w] > 0 && isfinite(r.measured_ns[w]), "row %d measured %g", w, r.measured_ns[w]);
        CHECK_MSG(r.pred.ns[w] > 0 && isfinite(r.pred.ns[w]), "row %d predicted %g", w, r.pred.ns[w]);
    }
    /* (the parts of hidden_load are medians of their own timings: no order between them and the
     * total that a loaded machine keeps; each is positive and finite above) */
    CHECK(r.read_bytes_per_s > 0 && isfinite(r.read_bytes_per_s));
    static const CostOp parts[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_ATTN_PREFILL, OP_NORM, OP_ACT};
    for (size_t i = 0; i < KV_ARRAY_LEN(parts); i++)
        CHECK_MSG(r.recompute_op_ns[parts[i]] > 0, "op %s measured %g", cost_op_name(parts[i]), r.recompute_op_ns[parts[i]]);
    CHECK(r.recompute_other_ns > 0);
    CHECK(m->pos == POS_ROPE ? r.recompute_op_ns[OP_ROPE] > 0 : 1);
    CHECK_EQ_I(r.layers, layers);
    CHECK_EQ_I(r.tokens, TINY_N);
    CHECK_EQ_U(r.kv_bytes, validate_kv_bytes(m, layers, TINY_N));
    CHECK_CONTAINS(r.io_note, r.o_direct ? "O_DIRECT" : "buffered");
    CHECK_CONTAINS(r.read_source, "measured in this run");
    /* the prediction is the arithmetic with the run's own read rate */
    ValidatePrediction p;
    CHECK_EQ_I(validate_predict(cm, m, layers, TINY_N, r.read_bytes_per_s, &p, &e), 0);
    for (int w = 0; w < VALIDATE_N_ROWS; w++) CHECK_NEAR(r.pred.ns[w], p.ns[w], 1e-12, 1e-9);
    CHECK_NEAR(r.pred.ns[VALIDATE_KV_LOAD], (double)r.kv_bytes / r.read_bytes_per_s * 1e9, 1e-9, 1e-9);
    /* the scratch files are gone, the given directory stays */
    CHECK_EQ_I(dir_entries(dir), 0);
    *out = r;
}

TEST(validate_run_tiny_real_restoration)
{
    ModelSpec m = tiny_model();
    CostModel cm;
    tiny_cost_model(&cm, 1);
    ValidateResult r;
    memset(&r, 0, sizeof r);
    check_run(t, &m, &cm, 2, &r);
    CHECK_NEAR(r.pred.ns[VALIDATE_RECOMPUTE], 22144, 1e-12, 1e-9); /* hand sum, see predict test */
    cost_model_free(&cm);
}

TEST(validate_run_plain_ffn_layernorm_learned)
{
    ModelSpec m = tiny_model();
    snprintf(m.name, sizeof m.name, "tiny-opt");
    m.gated_ffn = 0;
    m.norm = NORM_LAYER;
    m.pos = POS_LEARNED;
    m.norms_per_layer = 4;
    m.kv_heads = 4; /* MHA */
    CostModel cm;
    tiny_cost_model(&cm, 0);
    ValidateResult r;
    memset(&r, 0, sizeof r);
    check_run(t, &m, &cm, 1, &r);
    /* no rope, 4 norms: 11072 - 448 + 2 · 320 per layer */
    CHECK_NEAR(r.pred.ns[VALIDATE_RECOMPUTE], 11264, 1e-12, 1e-9);
    cost_model_free(&cm);
}

TEST(validate_run_default_scratch_is_removed)
{
    ModelSpec m = tiny_model();
    CostModel cm;
    tiny_cost_model(&cm, 1);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/tmpdir", test_tmpdir(t));
    mkdir(tmp, 0777);
    const char *old = getenv("TMPDIR");
    char saved[4200];
    snprintf(saved, sizeof saved, "%s", old ? old : "");
    setenv("TMPDIR", tmp, 1);
    ValidateOptions o = {.model = &m, .layers = 1, .tokens = 16, .reps = 1, .calib_read_bytes = 4096};
    ValidateResult r;
    KvErr e = {{0}};
    int rc = validate_run(&cm, &o, &r, &e);
    if (old) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    CHECK_MSG(rc == 0, "validate_run: %s", e.msg);
    CHECK_CONTAINS(r.io_note, "kvcal-validate.");
    CHECK_EQ_I(dir_entries(tmp), 0);
    cost_model_free(&cm);
}

TEST(validate_run_errors)
{
    ModelSpec m = tiny_model();
    CostModel cm;
    tiny_cost_model(&cm, 1);
    ValidateResult r;
    KvErr e = {{0}};
    /* scratch under a regular file, and a scratch that is a file */
    const char *file = test_write_file(t, "plain", "x");
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/sub", file);
    ValidateOptions o = {.model = &m, .layers = 1, .tokens = 8, .scratch_dir = bad, .reps = 1, .calib_read_bytes = 4096};
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "scratch directory");
    CHECK_CONTAINS(e.msg, bad);
    o.scratch_dir = file;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "is not a directory");
    CHECK_CONTAINS(e.msg, file);
    o.scratch_dir = NULL;
    /* options */
    o.layers = -1;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "--layers");
    o.layers = 1;
    o.tokens = -5;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "--tokens");
    o.tokens = 8;
    o.reps = -1;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "--reps");
    o.reps = 1;
    o.calib_read_bytes = -1;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "calibration read");
    o.calib_read_bytes = 4096;
    o.model = NULL;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "no model");
    /* MoE refused */
    ModelSpec moe = m;
    moe.arch = MODEL_MOE;
    moe.n_experts = 8;
    moe.experts_per_tok = 2;
    moe.moe_intermediate = 32;
    o.model = &moe;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "mixture of experts");
    /* a cost model missing a curve is refused before measuring */
    cost_model_free(&cm);
    tiny_cost_model(&cm, 0);
    o.model = &m;
    CHECK_EQ_I(validate_run(&cm, &o, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "no rope curve");
    cost_model_free(&cm);
}

TEST(validate_load_cost_model_errors)
{
    CostModel cm;
    KvErr e = {{0}};
    char path[4200];
    snprintf(path, sizeof path, "%s/absent.db", test_tmpdir(t));
    CHECK_EQ_I(validate_load_cost_model(&cm, path, "cpu", "Llama-2-7B", &e), -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "no such cost store");
    CHECK_CONTAINS(e.msg, "kvcal run --backend cpu --quick --model Llama-2-7B");
    CHECK_EQ_I(validate_load_cost_model(&cm, "", "cpu", "x", &e), -1);
    CHECK_CONTAINS(e.msg, "--db");
    /* a store that exists but has no run for the model */
    snprintf(path, sizeof path, "%s/empty.db", test_tmpdir(t));
    CostStore st;
    CHECK_EQ_I(store_open(&st, path, 1, &e), 0);
    store_close(&st);
    CHECK_EQ_I(validate_load_cost_model(&cm, path, "cpu", "Llama-2-7B", &e), -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "no cost curves");
    /* one that has it: a tiny stored run is loaded */
    StoreRunMeta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.backend, sizeof meta.backend, "cpu");
    snprintf(meta.device, sizeof meta.device, "cpu");
    snprintf(meta.model, sizeof meta.model, "tiny");
    snprintf(meta.dtype, sizeof meta.dtype, "fp16");
    meta.tp = 1;
    CHECK_EQ_I(store_open(&st, path, 1, &e), 0);
    CHECK_EQ_I(store_begin_run(&st, &meta, &e), 0);
    StorePoint sp = {.op = OP_GEMM_QKV, .tp = 1, .p1 = 64, .n = 1, .median_ns = 640, .p10_ns = 640, .p90_ns = 640};
    snprintf(sp.model, sizeof sp.model, "tiny");
    snprintf(sp.dtype, sizeof sp.dtype, "fp16");
    CHECK_EQ_I(store_add_point(&st, meta.id, &sp, &e), 0);
    CHECK_EQ_I(store_end_run(&st, meta.id, 1, &e), 0);
    store_close(&st);
    CHECK_MSG(validate_load_cost_model(&cm, path, NULL, "tiny", &e) == 0, "%s", e.msg);
    CHECK(cost_has(&cm, OP_GEMM_QKV));
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 64, 0, 0), 640, 1e-12, 0);
    /* ...and validate refuses it for lack of curves, naming the store */
    ModelSpec m = tiny_model();
    ValidatePrediction p;
    CHECK_EQ_I(validate_predict(&cm, &m, 1, 64, 1e9, &p, &e), -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "no gemm_o curve");
    cost_model_free(&cm);
}

TEST(validate_cli_usage_errors)
{
    char *a1[] = {"validate", "--model", "Llama-2-7B"};
    CHECK_EQ_I(kvcal_cmd_validate(3, a1), 2);
    char *a2[] = {"validate", "--db", "/nonexistent/x.db", "--model", "Llama-2-7B", "--tokens", "zero"};
    CHECK_EQ_I(kvcal_cmd_validate(7, a2), 2);
    char *a3[] = {"validate", "--db", "/nonexistent/x.db", "--model", "Llama-2-7B"};
    CHECK_EQ_I(kvcal_cmd_validate(5, a3), 1);
    char *a4[] = {"validate", "--db", "/nonexistent/x.db", "--model", "Llama-2-7B", "--max-error", "lots"};
    CHECK_EQ_I(kvcal_cmd_validate(7, a4), 2);
    char *a5[] = {"validate", "--bogus", "1"};
    CHECK_EQ_I(kvcal_cmd_validate(3, a5), 2);
    char *a6[] = {"validate", "--db"};
    CHECK_EQ_I(kvcal_cmd_validate(2, a6), 2);
}
