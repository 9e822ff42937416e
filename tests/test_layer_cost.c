/* test_layer_cost.c — sim/cost/layer_cost: the per-layer composition against hand-computed sums,
 * its floating-point order, optional ops, TP, the per-term breakdown and its lookup counts; and the
 * spec backend's layer_prefill equal to it bit for bit. */
#include <string.h>

#include "sim/cost/layer_cost.h"
#include "sim/cost/spec.h"
#include "tests/harness.h"

static ModelSpec lc_model(void)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "lc");
    m.arch = MODEL_DENSE;
    m.hidden = 64;
    m.layers = 2;
    m.heads = 4;
    m.kv_heads = 2;
    m.head_dim = 16;
    m.intermediate = 96;
    m.norms_per_layer = 2;
    m.pos = POS_ROPE;
    return m;
}

/* y = slope · tokens (exact at integer tokens in [1, 1000]) */
static void lc_linear(CostModel *cm, CostOp op, double slope)
{
    CostPoint p[2] = {{op, {1, 0, 0}, slope}, {op, {1000, 0, 0}, 1000 * slope}};
    KvErr e;
    cost_model_set_op(cm, op, p, 2, 0, "test", &e);
}

/* slopes: qkv 10, o 20, up 30, down 40, norm 5, act 6, rope 7, allreduce 9; attn 50·n + 1·c */
static void lc_cost_model(CostModel *cm)
{
    cost_model_init(cm, "cpu", "lc", "fp16", 2);
    lc_linear(cm, OP_GEMM_QKV, 10);
    lc_linear(cm, OP_GEMM_O, 20);
    lc_linear(cm, OP_GEMM_FFN_UP, 30);
    lc_linear(cm, OP_GEMM_FFN_DOWN, 40);
    lc_linear(cm, OP_NORM, 5);
    lc_linear(cm, OP_ACT, 6);
    lc_linear(cm, OP_ROPE, 7);
    lc_linear(cm, OP_ALLREDUCE, 9);
    CostPoint a[4] = {{OP_ATTN_PREFILL, {1, 0, 0}, 50},
                      {OP_ATTN_PREFILL, {1, 1000, 0}, 1050},
                      {OP_ATTN_PREFILL, {1000, 0, 0}, 50000},
                      {OP_ATTN_PREFILL, {1000, 1000, 0}, 51000}};
    KvErr e;
    cost_model_set_op(cm, OP_ATTN_PREFILL, a, 4, 0, "test", &e);
}

TEST(layer_cost_matches_hand_composition)
{
    ModelSpec m = lc_model();
    CostModel cm;
    lc_cost_model(&cm);
    LayerOps ops = layer_ops_of_model(&cm);
    ModelLayout tp2 = {&m, KV_DT_FP16, 2, 1}, tp1 = {&m, KV_DT_FP16, 1, 1};
    /* M = 8, tp 2: 8·(10+20+30+40) + 2·8·5 + 8·6 + 8·7 + 8·9 = 800 + 80 + 48 + 56 + 72 = 1056 */
    CHECK_NEAR(layer_cost_linear_ns(&ops, &tp2, 8, NULL), 1056, 0, 1e-9);
    /* tp 1: no all-reduce even though the curve exists */
    CHECK_NEAR(layer_cost_linear_ns(&ops, &tp1, 8, NULL), 984, 0, 1e-9);
    /* prefill of 8 new after 100: linear + attn (50·8 + 100 = 500) */
    CHECK_NEAR(layer_cost_prefill_ns(&ops, &tp2, 8, 100, NULL), 1556, 0, 1e-9);
    /* the terms as added: norm × norms_per_layer; ops not in the layer stay untouched */
    double terms[OP_COUNT];
    for (int i = 0; i < OP_COUNT; i++) terms[i] = -1;
    memset(cm.lookups, 0, sizeof cm.lookups);
    layer_cost_prefill_ns(&ops, &tp2, 8, 100, terms);
    CHECK_NEAR(terms[OP_GEMM_QKV], 80, 0, 1e-9);
    CHECK_NEAR(terms[OP_GEMM_FFN_DOWN], 320, 0, 1e-9);
    CHECK_NEAR(terms[OP_NORM], 80, 0, 1e-9);
    CHECK_NEAR(terms[OP_ACT], 48, 0, 1e-9);
    CHECK_NEAR(terms[OP_ROPE], 56, 0, 1e-9);
    CHECK_NEAR(terms[OP_ALLREDUCE], 72, 0, 1e-9);
    CHECK_NEAR(terms[OP_ATTN_PREFILL], 500, 0, 1e-9);
    CHECK_NEAR(terms[OP_GEMM_KV_PROJ], -1, 0, 0);
    CHECK_NEAR(terms[OP_ATTN_DECODE], -1, 0, 0);
    /* one lookup per op of the layer, none of the others */
    CHECK_EQ_U(cm.lookups[OP_GEMM_QKV], 1);
    CHECK_EQ_U(cm.lookups[OP_NORM], 1);
    CHECK_EQ_U(cm.lookups[OP_ATTN_PREFILL], 1);
    CHECK_EQ_U(cm.lookups[OP_GEMM_KV_PROJ], 0);
    /* learned positions: no rope */
    m.pos = POS_LEARNED;
    CHECK_NEAR(layer_cost_linear_ns(&ops, &tp2, 8, NULL), 1000, 0, 1e-9);
    cost_model_free(&cm);
}

/* a source of fixed values per op, some absent */
typedef struct {
    double v[OP_COUNT];
    int present[OP_COUNT];
} Fixed;
static double fixed_ns(void *ctx, CostOp op, int64_t p1, int64_t p2) { return ((Fixed *)ctx)->v[op]; }
static int fixed_has(void *ctx, CostOp op) { return ((Fixed *)ctx)->present[op]; }

TEST(layer_cost_order_and_optional_ops)
{
    ModelSpec m = lc_model();
    m.norms_per_layer = 1;
    ModelLayout ly = {&m, KV_DT_FP16, 2, 1};
    Fixed f;
    memset(&f, 0, sizeof f);
    static const CostOp all[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM,
                                 OP_ACT,      OP_ROPE,   OP_ALLREDUCE,   OP_ATTN_PREFILL};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        f.v[all[i]] = 1;
        f.present[all[i]] = 1;
    }
    LayerOps ops = {fixed_ns, fixed_has, &f};
    /* left to right from the QKV GEMM: at 2^53 every later +1 rounds away (ties to even), so the sum
     * stays 2^53 exactly; summing the eight small terms first would give 2^53 + 8 */
    double big = 9007199254740992.0;
    f.v[OP_GEMM_QKV] = big;
    CHECK(layer_cost_prefill_ns(&ops, &ly, 4, 0, NULL) == big);
    /* attention is added last, after the whole linear part (8), so 2^53 + 8 exactly; added after the
     * four GEMMs (the spec backend's former order) the later +1s would round away: 2^53 + 4 */
    f.v[OP_GEMM_QKV] = 1;
    f.v[OP_ATTN_PREFILL] = big;
    CHECK(layer_cost_prefill_ns(&ops, &ly, 4, 0, NULL) == big + 8);
    f.v[OP_ATTN_PREFILL] = 1;
    /* absent optional ops are skipped: gemms 4 + attention 1 */
    f.present[OP_NORM] = f.present[OP_ACT] = f.present[OP_ROPE] = f.present[OP_ALLREDUCE] = 0;
    CHECK_NEAR(layer_cost_prefill_ns(&ops, &ly, 4, 0, NULL), 5, 0, 0);
}

TEST(layer_cost_spec_layer_prefill_is_the_composition)
{
    ModelCatalog mc;
    HwCatalog hw;
    KvErr e;
    if (spec_catalogs_load(&mc, &hw, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = model_find(&mc, "Llama-3.1-70B", &e);
    const PlatformSpec *p = hw_find_platform(&hw, "h200", &e);
    CHECK(m && p);
    if (m && p) {
        ModelLayout ly = {m, KV_DT_FP16, 8, 1};
        SpecInputs in;
        spec_inputs_from_platform(&in, &hw, p, &ly);
        /* the same parts through the spec roofline: bit for bit */
        double parts = 0;
        static const CostOp lin[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN};
        for (size_t i = 0; i < 4; i++) parts += spec_op_ns(&in, lin[i], 2048, 0, 0);
        parts += m->norms_per_layer * spec_op_ns(&in, OP_NORM, 2048, 0, 0);
        parts += spec_op_ns(&in, OP_ACT, 2048, 0, 0);
        parts += spec_op_ns(&in, OP_ROPE, 2048, 0, 0);
        parts += spec_op_ns(&in, OP_ALLREDUCE, 2048, 0, 0);
        parts += spec_op_ns(&in, OP_ATTN_PREFILL, 2048, 4096, 0);
        CHECK(spec_op_ns(&in, OP_LAYER_PREFILL, 2048, 4096, 0) == parts);
    }
    model_catalog_free(&mc);
    hw_catalog_free(&hw);
}
