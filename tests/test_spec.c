/* test_spec.c — the spec backend: its efficiencies reproduce the measurements they were fitted to,
 * its roofline gives the hand-computed times, and its grid forms full tables for cost.c. */
#include <math.h>
#include <string.h>

#include "tests/harness.h"
#include "sim/cost/spec.h"

typedef struct {
    ModelCatalog mc;
    HwCatalog hw;
    const ModelSpec *m;
    const PlatformSpec *p;
    ModelLayout ly;
    SpecInputs in;
} Fix;

static int fix_open(TestCtx *t, Fix *f, const char *model, const char *platform, int tp)
{
    KvErr e;
    memset(f, 0, sizeof *f);
    if (model_catalog_load(&f->mc, NULL, &e) != 0 || hw_catalog_load(&f->hw, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    f->m = model_find(&f->mc, model, &e);
    f->p = hw_find_platform(&f->hw, platform, &e);
    CHECK(f->m && f->p);
    if (!f->m || !f->p) return -1;
    f->ly = (ModelLayout){f->m, KV_DT_FP16, tp, 1};
    spec_inputs_from_platform(&f->in, &f->hw, f->p, &f->ly);
    return 0;
}

static void fix_close(Fix *f)
{
    model_catalog_free(&f->mc);
    hw_catalog_free(&f->hw);
}

TEST(spec_gemm_efficiency_reproduces_xla_h100_table)
{
    Fix f;
    if (fix_open(t, &f, "Llama-3.1-8B", "cacheflow-h100-10g", 1) != 0) return;
    const GpuSpec *g = f.in.gpu;
    /* REFERENCE.md C1: H100 bf16, N = K = 4096 */
    CHECK_NEAR(spec_gemm_efficiency(g, 256), 0.417, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 512), 0.651, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 1024), 0.747, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 2048), 0.762, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 4096), 0.792, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 65536), 0.792, 1e-9, 0);
    /* below the table: M = 256's efficiency down to the 64-row tile, then proportional to M */
    CHECK_NEAR(spec_gemm_efficiency(g, 128), 0.417, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 64), 0.417, 1e-9, 0);
    CHECK_NEAR(spec_gemm_efficiency(g, 16), 0.417 / 4, 1e-9, 0);
    /* monotone in M */
    double prev = 0;
    for (int64_t m = 1; m <= 65536; m *= 2) {
        CHECK(spec_gemm_efficiency(g, m) >= prev);
        prev = spec_gemm_efficiency(g, m);
    }
    /* the roofline at M = 4096 gives the measured 783 TFLOP/s on the H100 (±1 % with launch overhead) */
    double flops = 2.0 * 4096 * 4096 * 4096;
    double tc = flops / (g->fp16_flops * spec_gemm_efficiency(g, 4096));
    CHECK_NEAR(flops / tc / 1e12, 783.33, 0.01, 0);
    fix_close(&f);
}

TEST(spec_a100_scaled_by_mamf)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    /* A100 SXM max achievable 271.2 of 312 TFLOP/s = 0.869 at large M */
    CHECK_NEAR(spec_gemm_efficiency(f.in.gpu, 8192), 0.869 * 0.792 / 0.803, 1e-9, 0);
    CHECK(spec_gemm_efficiency(f.in.gpu, 8192) <= 0.869);
    fix_close(&f);
}

TEST(spec_io_matches_catalog_bandwidths)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    const LinkSpec *l = f.in.link;
    int64_t b = 1LL << 30;
    CHECK_NEAR(spec_op_ns(&f.in, OP_H2D, b, 0, 0), (double)l->latency_ns + (double)b / 25.5e9 * 1e9, 1e-12, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_H2D_BIDIR, b, 0, 0), (double)l->latency_ns + (double)b / 12.5e9 * 1e9, 1e-12, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_D2H, b, 0, 0), (double)l->latency_ns + (double)b / 26.0e9 * 1e9, 1e-12, 0);
    /* 4 PM9A3 striped, deep queue: close to 4 × the drive's sequential read */
    const SsdSpec *s = f.in.ssd;
    double t64 = spec_op_ns(&f.in, OP_SSD_READ, b, 64, 4) - (double)s->read_latency_ns;
    CHECK_NEAR((double)b / t64, 4 * s->read_bytes_per_s / 1e9 * 64.0 / 65.0, 1e-9, 0);
    /* queue depth 1 reaches half */
    double t1 = spec_op_ns(&f.in, OP_SSD_READ, b, 1, 4) - (double)s->read_latency_ns;
    CHECK_NEAR(t1 / t64, (64.0 / 65.0) / 0.5, 1e-9, 0);
    fix_close(&f);
}

TEST(spec_decode_is_memory_bound)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    /* one decode step over 64K context tokens reads their KV: 64Ki · 2·32·128·2 B per layer */
    double bytes = model_op_bytes(&f.ly, OP_ATTN_DECODE, 8, 65536);
    CHECK(bytes >= 65536.0 * 16384);
    double want = bytes / (f.in.gpu->mem_bw_bytes_per_s * 0.69) * 1e9; /* no launch added: a floor */
    CHECK_NEAR(spec_op_ns(&f.in, OP_ATTN_DECODE, 8, 65536, 0), want, 1e-9, 0);
    fix_close(&f);
}

TEST(spec_grid_builds_full_tables_and_tp_collectives)
{
    Fix f;
    if (fix_open(t, &f, "Llama-3.1-70B", "h200", 8) != 0) return;
    CostModel cm;
    KvErr e;
    CHECK_MSG(spec_cost_model(&cm, &f.in, &e) == 0, "%s", e.msg);
    static const CostOp must[] = {OP_GEMM_QKV, OP_GEMM_O,   OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                  OP_ATTN_PREFILL, OP_ATTN_DECODE, OP_LAYER_PREFILL, OP_H2D, OP_D2H,
                                  OP_SSD_READ, OP_SSD_WRITE, OP_NET, OP_ALLREDUCE, OP_ALLGATHER};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) CHECK_MSG(cost_has(&cm, must[i]), "op %s", cost_op_name(must[i]));
    CHECK_EQ_U(cm.monotone_fixes, 0);
    /* TP 8: the all-reduce is real; at TP 1 it is absent */
    CHECK(cost_lookup_ns(&cm, OP_ALLREDUCE, 4096, 0, 0) > 20000);
    /* layer_prefill = the sum of the parts at a grid point */
    double parts = 0;
    CostOp p[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN};
    for (int i = 0; i < 4; i++) parts += cost_lookup_ns(&cm, p[i], 2048, 0, 0);
    parts += cost_lookup_ns(&cm, OP_ATTN_PREFILL, 2048, 4096, 0) + cost_lookup_ns(&cm, OP_ALLREDUCE, 2048, 0, 0);
    parts += f.m->norms_per_layer * cost_lookup_ns(&cm, OP_NORM, 2048, 0, 0) + cost_lookup_ns(&cm, OP_ACT, 2048, 0, 0) +
             cost_lookup_ns(&cm, OP_ROPE, 2048, 0, 0);
    CHECK_NEAR(cost_lookup_ns(&cm, OP_LAYER_PREFILL, 2048, 4096, 0), parts, 1e-9, 0);
    CHECK_EQ_U(cost_extrapolations_total(&cm), 0);
    cost_model_free(&cm);
    fix_close(&f);
}

TEST(spec_refuses_bad_layout)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    f.ly.tp = 3; /* 32 heads are not divisible by 3 */
    CostModel cm;
    KvErr e = {{0}};
    CHECK(spec_cost_model(&cm, &f.in, &e) == -1);
    CHECK(e.msg[0] != '\0');
    fix_close(&f);
}

/* `kvcal spec --explain` prints these tables: every number has a source, every catalogued GPU has a
 * row, and the numbers printed are the numbers the model uses */
TEST(spec_constants_have_sources_and_are_used)
{
    Fix f;
    if (fix_open(t, &f, "Llama-3.1-8B", "cacheflow-h100-10g", 1) != 0) return;
    int rows = 0;
    for (int i = 0; spec_gpu_row(i); i++, rows++) {
        const SpecGpuRow *r = spec_gpu_row(i);
        CHECK(r->match != NULL && r->source != NULL && strlen(r->source) > 10);
        CHECK(r->mamf > 0 && r->mamf <= 1 && r->attn_fa2 > 0 && r->attn_fa2 <= 1 && r->attn_fa3 >= 0 && r->attn_fa3 <= 1);
    }
    CHECK(rows >= 2);
    CHECK_STR(spec_gpu_row(rows - 1)->match, ""); /* the default comes last */
    for (int g = 0; g < f.hw.n_gpus; g++) {
        const SpecGpuRow *r = spec_gpu_row_for(&f.hw.gpus[g]);
        CHECK_MSG(r->match[0] != '\0', "GPU %s falls to the default row", f.hw.gpus[g].name);
        CHECK_NEAR(spec_gemm_efficiency(&f.hw.gpus[g], 1 << 20), r->mamf * 0.792 / 0.803, 1e-9, 0);
        CHECK_NEAR(spec_attn_efficiency(&f.hw.gpus[g], SPEC_STACK_FA2, 1 << 30), r->attn_fa2, 1e-6, 0);
        if (r->attn_fa3 > 0) CHECK_NEAR(spec_attn_efficiency(&f.hw.gpus[g], SPEC_STACK_FA3, 1 << 30), r->attn_fa3, 1e-6, 0);
    }
    int n = 0, seen_mem = 0, seen_4096 = 0;
    for (int i = 0; spec_constant(i); i++, n++) {
        const SpecConstant *c = spec_constant(i);
        CHECK(c->name && c->unit && c->source && strlen(c->source) > 10);
        if (strstr(c->name, "HBM bandwidth")) {
            seen_mem = 1;
            CHECK_NEAR(c->value, spec_mem_efficiency(f.in.gpu), 0, 0);
        }
        if (strstr(c->name, "M = 4096")) {
            seen_4096 = 1;
            CHECK_NEAR(c->value, spec_gemm_efficiency(f.in.gpu, 4096), 1e-12, 0);
        }
        if (strstr(c->name, "attention ramp"))
            CHECK_NEAR(spec_attn_efficiency(f.in.gpu, SPEC_STACK_FA3, (int64_t)c->value), 0.60 / 2, 1e-12, 0);
    }
    CHECK(n >= 8 && seen_mem && seen_4096);
    CHECK(spec_constant(n) == NULL && spec_constant(-1) == NULL && spec_gpu_row(-1) == NULL);
    fix_close(&f);
}

/* Decode-sized GEMMs are bound by streaming their weights on every catalogued GPU: from M = 1 to 64
 * rows the spec time of each projection equals its bytes over the achieved HBM bandwidth. */
TEST(spec_small_m_gemms_stream_their_weights)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    static const CostOp gemms[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN};
    for (int g = 0; g < f.hw.n_gpus; g++) {
        f.in.gpu = &f.hw.gpus[g];
        for (int64_t M = 1; M <= 64; M *= 2)
            for (size_t k = 0; k < KV_ARRAY_LEN(gemms); k++) {
                double tm = model_op_bytes(&f.ly, gemms[k], M, 0) / (f.in.gpu->mem_bw_bytes_per_s * spec_mem_efficiency(f.in.gpu)) * 1e9;
                double got = spec_op_ns(&f.in, gemms[k], M, 0, 0);
                CHECK_MSG(fabs(got - tm) <= 1e-9 * tm, "%s %s M=%lld: %.0f ns, weight streaming %.0f ns", f.in.gpu->name,
                          cost_op_name(gemms[k]), (long long)M, got, tm);
            }
    }
    fix_close(&f);
}

/* One request decoding alone: a decode step of Llama-2-7B (batch 1, short context) costs what
 * streaming its weights at the achieved bandwidth costs, within 15 %, on every catalogued GPU.
 * The step is the engine's composition per layer (projections, norms, activation, RoPE, decode
 * attention) over all layers; the weights are the whole model's (embeddings and LM head
 * included, which the engine's layer walk does not run: about 2 % of Llama-2-7B). */
TEST(spec_single_request_decode_streams_the_weights)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    const ModelSpec *m = f.m;
    for (int g = 0; g < f.hw.n_gpus; g++) {
        f.in.gpu = &f.hw.gpus[g];
        for (int st = SPEC_STACK_FA2; st <= SPEC_STACK_FA3; st++) {
            if (spec_stack_check(f.in.gpu, (SpecStack)st, NULL) != 0) continue;
            f.in.stack = (SpecStack)st;
            double layer = 0;
            static const CostOp gemms[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN};
            for (size_t k = 0; k < KV_ARRAY_LEN(gemms); k++) layer += spec_op_ns(&f.in, gemms[k], 1, 0, 0);
            layer += m->norms_per_layer * spec_op_ns(&f.in, OP_NORM, 1, 0, 0) + spec_op_ns(&f.in, OP_ACT, 1, 0, 0) +
                     spec_op_ns(&f.in, OP_ROPE, 1, 0, 0) + spec_op_ns(&f.in, OP_ATTN_DECODE, 1, 216, 0);
            double step = layer * m->layers;
            double want = (double)model_weight_bytes_per_gpu(&f.ly) / (f.in.gpu->mem_bw_bytes_per_s * spec_mem_efficiency(f.in.gpu)) * 1e9;
            CHECK_MSG(step >= 0.85 * want && step <= 1.15 * want, "%s %s: decode step %.2f ms, weights over achieved bandwidth %.2f ms",
                      f.in.gpu->name, spec_stack_name((SpecStack)st), step / 1e6, want / 1e6);
        }
    }
    fix_close(&f);
}

/* The serving stack sets attention's efficiency: FlashAttention-2 on Hopper is FA3 × 0.61; off
 * Hopper there is no FA3 and auto means FA2. */
TEST(spec_attention_by_stack)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "cake-h100", 1) != 0) return;
    const GpuSpec *h = f.in.gpu;
    CHECK_NEAR(spec_attn_efficiency(h, SPEC_STACK_FA2, 1 << 20) / spec_attn_efficiency(h, SPEC_STACK_FA3, 1 << 20), 0.61, 1e-3, 0);
    CHECK(spec_stack_resolve(h, SPEC_STACK_AUTO) == SPEC_STACK_FA3);
    f.in.stack = SPEC_STACK_FA2;
    double fa2 = spec_op_ns(&f.in, OP_ATTN_PREFILL, 512, 16384, 0);
    f.in.stack = SPEC_STACK_FA3;
    double fa3 = spec_op_ns(&f.in, OP_ATTN_PREFILL, 512, 16384, 0);
    CHECK_NEAR(fa2 / fa3, 1 / 0.61, 1e-3, 0);
    KvErr e;
    const GpuSpec *a = hw_find_gpu(&f.hw, "A100-40GB", &e);
    CHECK(a != NULL);
    if (a) {
        CHECK(spec_stack_resolve(a, SPEC_STACK_AUTO) == SPEC_STACK_FA2);
        CHECK(spec_stack_check(a, SPEC_STACK_FA3, &e) == -1);
        CHECK(strstr(e.msg, "Hopper") != NULL);
    }
    fix_close(&f);
}

/* The fitted stacks: named, refused on a GPU they have no row for (naming it and the GPUs they
 * have), and on their GPUs the costs follow SpecFitRow's formulas with the row's constants. */
TEST(spec_fitted_stacks_by_gpu)
{
    Fix f;
    if (fix_open(t, &f, "Llama-2-7B", "hcache-a100", 1) != 0) return;
    KvErr e;
    for (int s = 0; s < SPEC_STACK_COUNT; s++) {
        SpecStack back;
        CHECK(spec_stack_parse(spec_stack_name((SpecStack)s), &back, &e) == 0 && back == (SpecStack)s);
    }
    SpecStack st;
    CHECK(spec_stack_parse("vllm", &st, &e) == -1);
    CHECK(strstr(e.msg, "'vllm'") && strstr(e.msg, "vllm-0.19") && strstr(e.msg, "vidur"));
    /* Vidur measured an A100 80GB; the platform's A100-40GB has no row */
    CHECK(spec_stack_check(f.in.gpu, SPEC_STACK_VIDUR, &e) == -1 && strstr(e.msg, "A100-40GB"));
    const GpuSpec *a100 = hw_find_gpu(&f.hw, "A100-80GB", &e), *h100 = hw_find_gpu(&f.hw, "H100-SXM", &e);
    const GpuSpec *l40s = hw_find_gpu(&f.hw, "L40S", &e);
    CHECK(a100 && h100 && l40s);
    if (!a100 || !h100 || !l40s) return fix_close(&f);
    f.in.gpu = a100;
    CHECK(spec_stack_check(a100, SPEC_STACK_VLLM019, &e) == -1);
    CHECK_MSG(strstr(e.msg, "A100-80GB") && strstr(e.msg, "RTXPRO6000, RTX4090"), "%s", e.msg);
    CHECK(spec_stack_check(l40s, SPEC_STACK_VIDUR, &e) == -1);
    CHECK_MSG(strstr(e.msg, "L40S") && strstr(e.msg, "A100-80GB, H100-SXM"), "%s", e.msg);
    CHECK(spec_stack_check(a100, SPEC_STACK_VIDUR, &e) == 0 && spec_stack_check(h100, SPEC_STACK_VIDUR, &e) == 0);
    CHECK(spec_stack_resolve(a100, SPEC_STACK_VIDUR) == SPEC_STACK_VIDUR);

    const SpecFitRow *r = spec_fit_row_for(a100, SPEC_STACK_VIDUR);
    CHECK(r != NULL && spec_fit_row_for(a100, SPEC_STACK_VLLM019) == NULL);
    if (!r) return fix_close(&f);
    f.in.stack = SPEC_STACK_VIDUR;
    double bw = a100->mem_bw_bytes_per_s, peak = a100->fp16_flops;
    /* a GEMM at M = 4096: compute-bound at the row's ceiling */
    double fl = model_op_flops(&f.ly, OP_GEMM_FFN_UP, 4096, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_GEMM_FFN_UP, 4096, 0, 0), fl / (peak * r->gemm_ceiling) * 1e9, 1e-9, 0);
    /* one token: the weights stream at gemm_bw */
    double by = model_op_bytes(&f.ly, OP_GEMM_FFN_UP, 1, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_GEMM_FFN_UP, 1, 0, 0), by / (bw * r->gemm_bw) * 1e9, 1e-9, 0);
    /* each elementwise op at its own fraction, never under the minimum kernel time */
    by = model_op_bytes(&f.ly, OP_ACT, 8192, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_ACT, 8192, 0, 0), by / (bw * r->act_bw) * 1e9, 1e-9, 0);
    by = model_op_bytes(&f.ly, OP_ROPE, 8192, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_ROPE, 8192, 0, 0), by / (bw * r->rope_bw) * 1e9, 1e-9, 0);
    CHECK_NEAR(spec_op_ns(&f.in, OP_NORM, 1, 0, 0), r->min_kernel_ns, 1e-9, 0);
    /* prefill: chunk 16 over 16K context is one wave of 32 thread blocks walking 16,400 keys */
    CHECK_NEAR(spec_op_ns(&f.in, OP_ATTN_PREFILL, 16, 16384, 0), r->prefill_floor_ns + 16400 * r->prefill_key_ns, 1e-6, 0);
    /* Vidur's A100 profile has no decode rows: decode costs as under fa2 */
    double dec = spec_op_ns(&f.in, OP_ATTN_DECODE, 8, 65536, 0);
    f.in.stack = SPEC_STACK_FA2;
    CHECK_NEAR(dec, spec_op_ns(&f.in, OP_ATTN_DECODE, 8, 65536, 0), 1e-12, 0);
    /* vLLM 0.19 on the RTX 4090: decode = floor + batch x per-request time + the KV read */
    const GpuSpec *rtx = hw_find_gpu(&f.hw, "RTX4090", &e);
    const SpecFitRow *rv = rtx ? spec_fit_row_for(rtx, SPEC_STACK_VLLM019) : NULL;
    CHECK(rv != NULL && rv->decode_bw > 0 && rv->decode_seq_ns > 0);
    if (rv) {
        f.in.gpu = rtx;
        f.in.stack = SPEC_STACK_VLLM019;
        double kv = model_op_bytes(&f.ly, OP_ATTN_DECODE, 64, 64 * 4096);
        CHECK_NEAR(spec_op_ns(&f.in, OP_ATTN_DECODE, 64, 64 * 4096, 0),
                   rv->decode_floor_ns + 64 * rv->decode_seq_ns + kv / (rtx->mem_bw_bytes_per_s * rv->decode_bw) * 1e9, 1e-6, 0);
        f.in.gpu = a100;
        f.in.stack = SPEC_STACK_FA2;
    }
    /* the IO ops are the catalog's whatever the stack */
    double h2d = spec_op_ns(&f.in, OP_H2D, 1 << 30, 0, 0);
    f.in.stack = SPEC_STACK_VIDUR;
    CHECK_NEAR(spec_op_ns(&f.in, OP_H2D, 1 << 30, 0, 0), h2d, 1e-12, 0);
    fix_close(&f);
}
