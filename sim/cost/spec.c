/* spec.c — roofline cost curves from the catalogs; see spec.h.
 *
 * Every op costs max(compute roofline, memory roofline, minimum kernel time): both rooflines always,
 * so a decode-sized GEMM is bound by streaming its weights and decode attention by reading the KV
 * cache, never by a FLOP efficiency extrapolated to small M. Every efficiency below is a fit to a
 * public measurement, named next to the number. Where no measurement exists the number is marked
 * ESTIMATE. The tables g_eff and g_constants carry each number with its source; spec_gpu_row /
 * spec_constant expose them and `kvcal spec --explain` prints them (docs/model.md explains the
 * model for users).
 *
 * GEMM efficiency vs M (rows = tokens): the shape of the curve is the H100 bf16 cuBLAS table of
 * XLA's sm_90 cost model at N = K = 4096 (M 256: 41.7 %, 512: 65.1 %, 1024: 74.7 %, 2048: 76.2 %,
 * 4096: 79.2 % of 989 TFLOP/s), interpolated in log2(M). Per GPU the curve is scaled by the ratio
 * of its maximum achievable matmul FLOP/s (MAMF, ml-engineering's table) to H100's (80.3 %).
 * Below M = 256 the table has no points. ESTIMATE: cuBLAS runs small-M GEMMs on 64-row tiles, so a
 * tile costs what a 64-row tile costs however few rows it holds: the efficiency stays at M = 256's
 * from 64 to 256 rows and falls in proportion to M below 64. It hardly matters: at these M the
 * memory side binds on every catalogued GPU (test spec_small_m_gemms_stream_their_weights).
 * Memory side of GEMMs: weights + activations at HBM bandwidth × 0.69 (H100 fp16 matmuls at
 * M = 1..16, N = K = 8192 reach 2.3–36.7 TFLOP/s, i.e. ~2.3 TB/s of weights, 69 % of 3.35 TB/s;
 * REFERENCE §C1). The same fraction is used for the other memory-bound kernels (norms,
 * activations, decode attention reading the KV cache).
 *
 * Attention depends on the serving stack as much as on the GPU (SpecStack):
 *   FlashAttention-2 (the vLLM 0.6 generation; every GPU): A100: FA2 forward at hd128, 156 TFLOP/s
 *     causal … 187 non-causal of 312 → 0.55; RTX 4090: 151 TFLOP/s causal hd128 against the
 *     165 TFLOP/s fp32-accumulate peak → 0.80 (the kernel uses fp16 accumulation partly; capped);
 *     Hopper: FA2/FA3 = 65.9/107.8 = 0.61 at hd128, causal, seqlen 2048 (H20, Dao-AILab/
 *     flash-attention#1310), so 0.60 × 0.61 = 0.37, in line with FA3's paper putting FA2 at ~35 %
 *     of H100.
 *   FlashAttention-3 (Hopper only): H100: FA3 fp16 forward 661–740 TFLOP/s non-causal of 989,
 *     causal lower → 0.60.
 *   auto: FA3 where the GPU runs it (Hopper), else FA2 — what a current vLLM picks.
 * The ramp n/(n + 64) over new tokens models under-filled query tiles (ESTIMATE: 64 = half a
 * 128-row tile).
 *
 * Minimum kernel time 2 µs (ESTIMATE): kernels are queued asynchronously, so the host's launch cost
 * overlaps the GPU's work; what remains is the GPU-side start-up and tail of a tiny kernel, about
 * 1–2 µs on a busy stream (and less under CUDA graphs, which vLLM uses for decode batches). It is a
 * floor, not an addition: a kernel that streams 30 MB of weights pays nothing extra.
 * TP collectives: ring all-reduce 2·(T−1)/T·bytes over the GPU link per direction + 10 µs each
 * (ESTIMATE for NCCL latency at these sizes); two all-reduces per layer (after attention and FFN).
 * Fitted stacks (vllm-0.19, vidur): per (GPU, stack) rows of constants fitted by tools/fit_spec.py to
 * the public kernel profiles of data/profiles (SpecFitRow in spec.h gives the formulas); they replace
 * the efficiencies above for the compute ops on those GPUs only, and leave IO and collectives alone.
 * Host link: measured pinned bandwidth from the catalog + the link's latency. SSD: per-drive
 * sequential bandwidth × qd/(qd + 1) (ESTIMATE: NVMe reaches its sequential rate at queue depth
 * ≥ 8 with large IOs) striped over n drives, + read latency. Network: NIC goodput + latency.
 */
#include "sim/cost/spec.h"

#include "sim/cost/layer_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SPEC_MIN_KERNEL_NS 2000.0
#define SPEC_COLLECTIVE_LAT_NS 10000.0
#define SPEC_MEM_EFF 0.69

/* MAMF fractions (max achievable bf16 matmul / dense peak) and attention fractions per GPU and stack
 * (SpecGpuRow: match is a case-insensitive prefix of the catalog's GPU name; first match wins). */
/* Hopper FA2 = FA3 × 0.61 (FA2/FA3 at hd128, causal, seqlen 2048: Dao-AILab/flash-attention#1310) */
#define HOPPER_FA2_OVER_FA3 0.61
static const SpecGpuRow g_eff[] = {
    {"A100-40GB", 0.869, 0.55, 0, "MAMF A100 SXM 271.2/312 (ml-engineering); FA2 fwd hd128 156-187 TFLOP/s"},
    {"A100-80GB", 0.869, 0.55, 0, "as A100-40GB (same SXM compute)"},
    {"A100", 0.811, 0.55, 0, "MAMF A100 PCIe 252.9/312"},
    {"H100-PCIe", 0.803, 0.60 * HOPPER_FA2_OVER_FA3, 0.60, "ESTIMATE: H100 SXM's fractions"},
    {"H100", 0.803, 0.60 * HOPPER_FA2_OVER_FA3, 0.60,
     "MAMF H100 SXM 794.5/989; FA3 fp16 fwd 661-740 TFLOP/s (causal lower); FA2 = FA3 x 0.61 (flash-attention#1310)"},
    {"H200", 0.803, 0.60 * HOPPER_FA2_OVER_FA3, 0.60, "H100 compute (H200 = H100 SXM compute, more HBM): H100 SXM fractions"},
    {"B200", 0.776, 0.55, 0, "MAMF B200 1745/2250; attention ESTIMATE (FA3 is Hopper-only)"},
    {"L40S", 0.75, 0.55, 0, "ESTIMATE: no public MAMF/flash figure found"},
    {"RTX4090", 0.80, 0.80, 0, "ESTIMATE MAMF; flash fwd causal hd128 151 TFLOP/s (apache/tvm table)"},
};

static const SpecGpuRow g_eff_default = {"", 0.78, 0.55, 0, "ESTIMATE: unlisted GPU, mid-range fractions"};

static const SpecGpuRow *gpu_eff(const GpuSpec *gpu)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_eff); i++)
        if (strncasecmp(gpu->name, g_eff[i].match, strlen(g_eff[i].match)) == 0) return &g_eff[i];
    return &g_eff_default;
}

const SpecGpuRow *spec_gpu_row(int i)
{
    if (i >= 0 && i < (int)KV_ARRAY_LEN(g_eff)) return &g_eff[i];
    return i == (int)KV_ARRAY_LEN(g_eff) ? &g_eff_default : NULL;
}

const SpecGpuRow *spec_gpu_row_for(const GpuSpec *gpu) { return gpu_eff(gpu); }
static const char *const g_stack_names[] = {"auto", "fa2", "fa3", "vllm-0.19", "vidur"};
_Static_assert(KV_ARRAY_LEN(g_stack_names) == SPEC_STACK_COUNT, "one name per SpecStack");

const char *spec_stack_name(SpecStack s)
{
    return s >= 0 && (size_t)s < KV_ARRAY_LEN(g_stack_names) ? g_stack_names[s] : "?";
}

int spec_stack_parse(const char *name, SpecStack *out, KvErr *e)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_stack_names); i++)
        if (name && !strcmp(name, g_stack_names[i])) {
            *out = (SpecStack)i;
            return 0;
        }
    return kv_err(e, "stack '%s': expected auto, fa2, fa3, vllm-0.19 or vidur", name ? name : "");
}

int spec_stack_is_fitted(SpecStack s) { return s == SPEC_STACK_VLLM019 || s == SPEC_STACK_VIDUR; }

/* ---- the fitted stacks (tools/fit_spec.py prints these rows; its --check compares them) ---- */

#define LSS_SRC "casys-kaist/LLMServingSim 5daddb21a545658d5150b535712d0494584b5278 profiler/perf/"
#define VIDUR_SRC "microsoft/vidur 7d47513363ec447a741ac5e47241580b47724fbf data/profiling/compute/"
/* fit rows: BEGIN (tools/fit_spec.py) */
static const SpecFitRow g_fit[] = {
    {"RTXPRO6000", SPEC_STACK_VLLM019, 0.738, 0.739, 1.163, 2.175, 1.315, 0.801, 12720, 44.6, 0.425, 21.59, 6790, 2610,
     LSS_SRC "RTXPRO6000/meta-llama/Llama-3.1-8B/bf16/tp{1,2}/{dense,attention}.csv",
     "fitted by tools/fit_spec.py on 2936 points (Llama-3.1-8B TP 1 and 2); hold-out: Qwen3-32B TP 1 and 2"},
    {"RTX4090", SPEC_STACK_VLLM019, 1.022, 0.853, 1.151, 1.190, 1.883, 0.918, 12340, 179.8, 0.696, 31.08, 8260, 2390,
     LSS_SRC "RTX4090/meta-llama/Llama-3.1-8B/bf16/tp1/{dense,attention}.csv",
     "fitted by tools/fit_spec.py on 1259 points (Llama-3.1-8B TP 1); hold-out: none (one profile)"},
    {"A100-80GB", SPEC_STACK_VIDUR, 0.731, 0.737, 0.334, 0.480, 0.434, 0.000, 0, 0.0, 0.357, 34.89, 72800, 5000,
     VIDUR_SRC "a100/meta-llama/Llama-2-7b-hf/mlp.csv; attention.csv (chunk-512 TP 1 rows, via sw5sh/cs378-assignment3 7ac2fe9f)",
     "fitted by tools/fit_spec.py on 1901 points (Llama-2-7B TP 1, GEMMs, elementwise and chunk-512 prefill); hold-out: TP 2 and 4"},
    {"H100-SXM", SPEC_STACK_VIDUR, 0.710, 0.748, 0.348, 0.562, 0.470, 0.000, 0, 0.0, 0.000, 0.00, 0, 4000,
     VIDUR_SRC "h100/meta-llama/Llama-2-7b-hf/mlp.csv",
     "fitted by tools/fit_spec.py on 1827 points (Llama-2-7B TP 1, GEMMs and elementwise); hold-out: TP 2 and 4"},
};
/* fit rows: END */

const SpecFitRow *spec_fit_row(int i) { return i >= 0 && i < (int)KV_ARRAY_LEN(g_fit) ? &g_fit[i] : NULL; }

const SpecFitRow *spec_fit_row_for(const GpuSpec *gpu, SpecStack s)
{
    for (size_t i = 0; gpu && i < KV_ARRAY_LEN(g_fit); i++)
        if (g_fit[i].stack == s && !strcasecmp(gpu->name, g_fit[i].gpu)) return &g_fit[i];
    return NULL;
}

SpecStack spec_stack_resolve(const GpuSpec *gpu, SpecStack s)
{
    if (s != SPEC_STACK_AUTO) return s;
    return gpu && gpu_eff(gpu)->attn_fa3 > 0 ? SPEC_STACK_FA3 : SPEC_STACK_FA2;
}

int spec_stack_check(const GpuSpec *gpu, SpecStack s, KvErr *e)
{
    if (spec_stack_is_fitted(s) && gpu && !spec_fit_row_for(gpu, s)) {
        char have[256] = "";
        size_t len = 0;
        for (size_t i = 0; i < KV_ARRAY_LEN(g_fit); i++)
            if (g_fit[i].stack == s && len < sizeof have)
                len += (size_t)snprintf(have + len, sizeof have - len, "%s%s", len ? ", " : "", g_fit[i].gpu);
        return kv_err(e, "stack %s: no fitted row for GPU %s; the profiles it is fitted to measure %s only (use fa2 or auto)",
                      spec_stack_name(s), gpu->name, have);
    }
    if (s == SPEC_STACK_FA3 && gpu && !(gpu_eff(gpu)->attn_fa3 > 0))
        return kv_err(e, "stack fa3: FlashAttention-3 runs on Hopper GPUs only, not on %s (use fa2 or auto)", gpu->name);
    return 0;
}

static double attn_fraction(const GpuSpec *gpu, SpecStack s)
{
    const SpecGpuRow *g = gpu_eff(gpu);
    return spec_stack_resolve(gpu, s) == SPEC_STACK_FA3 && g->attn_fa3 > 0 ? g->attn_fa3 : g->attn_fa2;
}

/* XLA sm_90 table, N = K = 4096: (log2 M, fraction of 989 TFLOP/s) */
#define SPEC_GEMM_TILE_ROWS 64 /* ESTIMATE: cuBLAS's small-M tile height (see the header) */
static const double g_gemm_shape[][2] = {{8, 0.417}, {9, 0.651}, {10, 0.747}, {11, 0.762}, {12, 0.792}};
#define H100_MAMF 0.803
#define SPEC_ATTN_RAMP_TOKENS 64.0
#define SPEC_ATTN_TILE_ROWS 128 /* FlashAttention-2's forward query tile at head dim 128 (fitted stacks) */
#define XLA_SRC "XLA sm_90 cost model, H100 bf16 cuBLAS, N = K = 4096 (fraction of 989 TFLOP/s)"

/* The constants every GPU shares, each with its source (the values are the ones the code uses). */
static const SpecConstant g_constants[] = {
    {"GEMM efficiency at M = 256 (curve shape)", 0.417, "fraction", XLA_SRC},
    {"GEMM efficiency at M = 512", 0.651, "fraction", XLA_SRC},
    {"GEMM efficiency at M = 1024", 0.747, "fraction", XLA_SRC},
    {"GEMM efficiency at M = 2048", 0.762, "fraction", XLA_SRC},
    {"GEMM efficiency at M = 4096 and above", 0.792, "fraction", XLA_SRC},
    {"GEMM efficiency below M = 256: M = 256's down to this many rows, then x M / this", SPEC_GEMM_TILE_ROWS, "rows",
     "ESTIMATE: cuBLAS runs small-M GEMMs on 64-row tiles; at these M the memory side binds on every catalogued GPU"},
    {"reference MAMF the curve is scaled by (H100 SXM)", H100_MAMF, "fraction",
     "ml-engineering MAMF table: H100 SXM 794.5 of 989 TFLOP/s; each GPU's curve is scaled by its MAMF / this"},
    {"HBM bandwidth efficiency (small-M GEMMs, decode attention, elementwise ops)", SPEC_MEM_EFF, "fraction",
     "H100 fp16 matmuls at M = 1..16, N = K = 8192: 2.3-36.7 TFLOP/s, ~2.3 TB/s of weights of 3.35 TB/s"},
    {"attention ramp over new tokens: efficiency x n / (n + this)", SPEC_ATTN_RAMP_TOKENS, "tokens",
     "ESTIMATE: under-filled query tiles, half a 128-row tile"},
    {"minimum kernel time (a floor, not an addition)", SPEC_MIN_KERNEL_NS, "ns",
     "ESTIMATE: GPU-side start-up and tail of a tiny kernel on a busy stream (launches overlap the GPU's work)"},
    {"FlashAttention-2 on Hopper, as a fraction of FlashAttention-3", HOPPER_FA2_OVER_FA3, "fraction",
     "FA2 65.9 vs FA3 107.8 TFLOP/s, hd128, causal, seqlen 2048 (Dao-AILab/flash-attention#1310)"},
    {"fitted stacks: query rows per attention thread block (prefill waves)", SPEC_ATTN_TILE_ROWS, "rows",
     "FlashAttention-2 forward, head dim 128: kBlockM = 128 (Dao-AILab/flash-attention csrc/flash_attn/src/"
     "flash_fwd_launch_template.h, run_mha_fwd_hdim128)"},
    {"TP collective latency (each all-reduce / all-gather)", SPEC_COLLECTIVE_LAT_NS, "ns",
     "ESTIMATE: NCCL latency at these sizes; ring all-reduce moves 2(T-1)/T of the bytes"},
    {"SSD bandwidth at queue depth qd: per-drive rate x qd / (qd + this)", 1, "IOs",
     "ESTIMATE: NVMe reaches its sequential rate at queue depth >= 8 with large IOs"},
};

const SpecConstant *spec_constant(int i)
{
    return i >= 0 && i < (int)KV_ARRAY_LEN(g_constants) ? &g_constants[i] : NULL;
}

double spec_gemm_shape(int64_t M)
{
    if (M < 1) M = 1;
    double lm = log2((double)M), f;
    size_t n = KV_ARRAY_LEN(g_gemm_shape);
    if (lm <= g_gemm_shape[0][0]) {
        f = g_gemm_shape[0][1] * (M < SPEC_GEMM_TILE_ROWS ? (double)M / SPEC_GEMM_TILE_ROWS : 1.0);
    } else if (lm >= g_gemm_shape[n - 1][0]) {
        f = g_gemm_shape[n - 1][1];
    } else {
        size_t i = 0;
        while (lm > g_gemm_shape[i + 1][0]) i++;
        double w = (lm - g_gemm_shape[i][0]) / (g_gemm_shape[i + 1][0] - g_gemm_shape[i][0]);
        f = g_gemm_shape[i][1] + w * (g_gemm_shape[i + 1][1] - g_gemm_shape[i][1]);
    }
    return f;
}

double spec_gemm_efficiency(const GpuSpec *gpu, int64_t M)
{
    double f = spec_gemm_shape(M), mamf = gpu_eff(gpu)->mamf;
    f *= mamf / H100_MAMF;
    return f < mamf ? f : mamf;
}

double spec_attn_efficiency(const GpuSpec *gpu, SpecStack stack, int64_t new_tokens)
{
    double n = (double)(new_tokens < 1 ? 1 : new_tokens);
    return attn_fraction(gpu, stack) * n / (n + SPEC_ATTN_RAMP_TOKENS);
}

double spec_mem_efficiency(const GpuSpec *gpu)
{
    return SPEC_MEM_EFF;
}

static double roofline(const GpuSpec *gpu, double flops, double eff, double bytes)
{
    double tc = flops > 0 ? flops / (gpu->fp16_flops * eff) : 0;
    double tm = bytes > 0 ? bytes / (gpu->mem_bw_bytes_per_s * SPEC_MEM_EFF) : 0;
    double t = (tc > tm ? tc : tm) * 1e9;
    return t > SPEC_MIN_KERNEL_NS ? t : SPEC_MIN_KERNEL_NS;
}

static double gemm_ns(const SpecInputs *in, CostOp op, int64_t tokens)
{
    int64_t M, N, K;
    if (!model_gemm_shape(in->ly, op, tokens, &M, &N, &K)) M = tokens;
    double flops = model_op_flops(in->ly, op, tokens, 0);
    double bytes = model_op_bytes(in->ly, op, tokens, 0);
    return roofline(in->gpu, flops, spec_gemm_efficiency(in->gpu, M), bytes);
}

static double collective_ns(const SpecInputs *in, int64_t tokens, double factor)
{
    int T = in->ly->tp;
    if (T <= 1) return 0;
    double bw = in->gpu->gpu_link_bytes_per_s;
    if (bw <= 0) bw = in->link ? in->link->h2d_bytes_per_s : 25e9; /* no NVLink: over PCIe */
    double bytes = (double)tokens * in->ly->m->hidden * kv_dtype_bytes(in->ly->dtype);
    return factor * (double)(T - 1) / T * bytes / bw * 1e9 + SPEC_COLLECTIVE_LAT_NS;
}

/* An op under a fitted row (SpecFitRow in spec.h gives the formulas); -1 for the ops the row does
 * not fit (the default's then). */
static double fit_op_ns(const SpecInputs *in, const SpecFitRow *r, CostOp op, int64_t p1, int64_t p2)
{
    const GpuSpec *g = in->gpu;
    double peak = g->fp16_flops, bw = g->mem_bw_bytes_per_s, t;
    double flops = model_op_flops(in->ly, op, p1, p2), bytes = model_op_bytes(in->ly, op, p1, p2);
    switch (op) {
    case OP_GEMM_QKV:
    case OP_GEMM_O:
    case OP_GEMM_FFN_UP:
    case OP_GEMM_FFN_DOWN:
    case OP_GEMM_KV_PROJ: {
        int64_t M, N, K;
        if (!model_gemm_shape(in->ly, op, p1, &M, &N, &K)) M = p1;
        double eff = r->gemm_ceiling * spec_gemm_shape(M) / g_gemm_shape[KV_ARRAY_LEN(g_gemm_shape) - 1][1];
        double tc = flops / (peak * eff), tm = bytes / (bw * r->gemm_bw);
        t = (tc > tm ? tc : tm) * 1e9;
        return t > r->min_kernel_ns ? t : r->min_kernel_ns;
    }
    case OP_NORM:
    case OP_ACT:
    case OP_ROPE:
    case OP_QUANT:
    case OP_DEQUANT:
        t = bytes / (bw * (op == OP_ACT ? r->act_bw : op == OP_ROPE ? r->rope_bw : r->norm_bw)) * 1e9;
        return t > r->min_kernel_ns ? t : r->min_kernel_ns;
    case OP_ATTN_DECODE: {
        if (!(r->decode_bw > 0) || !(r->prefill_frac > 0)) return -1;
        double tc = flops / (peak * r->prefill_frac), tm = bytes / (bw * r->decode_bw);
        return r->decode_floor_ns + (double)(p1 < 1 ? 1 : p1) * r->decode_seq_ns + (tc > tm ? tc : tm) * 1e9;
    }
    case OP_ATTN_PREFILL: {
        if (!(r->prefill_frac > 0)) return -1;
        double tc = flops / (peak * r->prefill_frac), tm = bytes / (bw * (r->decode_bw > 0 ? r->decode_bw : SPEC_MEM_EFF));
        t = (tc > tm ? tc : tm) * 1e9;
        if (g->sm_count > 0) {
            int64_t tp = in->ly->tp > 0 ? in->ly->tp : 1, n = p1 < 1 ? 1 : p1;
            int64_t heads = (in->ly->m->heads + tp - 1) / tp, tiles = (n + SPEC_ATTN_TILE_ROWS - 1) / SPEC_ATTN_TILE_ROWS;
            int64_t waves = (heads * tiles + g->sm_count - 1) / g->sm_count;
            double walk = (double)waves * (double)(p2 + n) * r->prefill_key_ns;
            if (walk > t) t = walk;
        }
        return r->prefill_floor_ns + t;
    }
    default:
        return -1;
    }
}

/* the parts of a layer for layer_cost: every compute op exists in the spec backend */
static double layer_part_ns(void *ctx, CostOp op, int64_t p1, int64_t p2) { return spec_op_ns(ctx, op, p1, p2, 0); }
static int layer_part_has(void *ctx, CostOp op) { return 1; }

double spec_op_ns(const SpecInputs *in, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    const GpuSpec *g = in->gpu;
    const SpecFitRow *fit = spec_stack_is_fitted(in->stack) ? spec_fit_row_for(g, in->stack) : NULL;
    if (fit) {
        double t = fit_op_ns(in, fit, op, p1, p2);
        if (t >= 0) return t;
    }
    switch (op) {
    case OP_GEMM_QKV:
    case OP_GEMM_O:
    case OP_GEMM_FFN_UP:
    case OP_GEMM_FFN_DOWN:
    case OP_GEMM_KV_PROJ:
        return gemm_ns(in, op, p1);
    case OP_ATTN_PREFILL:
        return roofline(g, model_op_flops(in->ly, op, p1, p2), spec_attn_efficiency(g, in->stack, p1),
                        model_op_bytes(in->ly, op, p1, p2));
    case OP_ATTN_DECODE:
        /* bound by reading the batch's KV; compute at the attention fraction without ramp */
        return roofline(g, model_op_flops(in->ly, op, p1, p2), attn_fraction(g, in->stack), model_op_bytes(in->ly, op, p1, p2));
    case OP_NORM:
    case OP_ACT:
    case OP_ROPE:
    case OP_QUANT:
    case OP_DEQUANT:
        return roofline(g, 0, 1, model_op_bytes(in->ly, op, p1, p2));
    case OP_ALLREDUCE:
        return 2 * collective_ns(in, p1, 2.0);
    case OP_ALLGATHER:
        return collective_ns(in, p1, 1.0);
    case OP_LAYER_PREFILL: { /* the layer composed from its parts, as the engine composes it */
        LayerOps ops = {layer_part_ns, layer_part_has, (void *)in};
        return layer_cost_prefill_ns(&ops, in->ly, p1, p2, NULL);
    }
    case OP_H2D:
        return in->link ? in->link->latency_ns + (double)p1 / in->link->h2d_bytes_per_s * 1e9 : 0;
    case OP_D2H:
        return in->link ? in->link->latency_ns + (double)p1 / in->link->d2h_bytes_per_s * 1e9 : 0;
    case OP_H2D_BIDIR:
        return in->link ? in->link->latency_ns + (double)p1 / in->link->h2d_bidir_bytes_per_s * 1e9 : 0;
    case OP_D2H_BIDIR:
        return in->link ? in->link->latency_ns + (double)p1 / in->link->d2h_bidir_bytes_per_s * 1e9 : 0;
    case OP_SSD_READ:
    case OP_SSD_WRITE: {
        if (!in->ssd || p3 < 1) return 0;
        double qd = (double)(p2 < 1 ? 1 : p2);
        double bw = (op == OP_SSD_READ ? in->ssd->read_bytes_per_s : in->ssd->write_bytes_per_s) * (double)p3 * qd / (qd + 1);
        int64_t lat = op == OP_SSD_READ ? in->ssd->read_latency_ns : in->ssd->write_latency_ns;
        return (double)lat + (double)p1 / bw * 1e9;
    }
    case OP_NET:
        return in->nic ? in->nic->latency_ns + (double)p1 / in->nic->bytes_per_s * 1e9 : 0;
    case OP_COUNT:
        break;
    }
    return 0;
}

int spec_catalogs_load(ModelCatalog *mc, HwCatalog *hw, KvErr *e)
{
    if (model_catalog_load(mc, NULL, e) != 0) return -1;
    if (hw_catalog_load(hw, NULL, e) != 0) {
        model_catalog_free(mc);
        return -1;
    }
    return 0;
}

void spec_inputs_from_platform(SpecInputs *in, const HwCatalog *hw, const PlatformSpec *p, const ModelLayout *ly)
{
    memset(in, 0, sizeof *in);
    in->ly = ly;
    in->gpu = &hw->gpus[p->gpu];
    in->link = &hw->links[p->link];
    if (p->ssd >= 0 && p->n_ssd > 0) {
        in->ssd = &hw->ssds[p->ssd];
        in->n_ssd = p->n_ssd;
    }
    if (p->nic >= 0) in->nic = &hw->nics[p->nic];
}

/* ---- the grid ---- */

/* tokens: 1, 2, 3, 4, 6, 8, ..., 98304, 131072 (powers of two and 1.5× between) */
static int token_grid(int64_t *out, int64_t lo_min)
{
    int n = 0;
    if (lo_min <= 0) out[n++] = 0;
    out[n++] = 1;
    for (int64_t p = 2; p <= 131072; p *= 2) {
        out[n++] = p;
        if (p >= 2 && p * 3 / 2 <= 131072 && p != 131072) out[n++] = p * 3 / 2;
    }
    return n;
}

static int ctx_grid(int64_t *out)
{
    int n = 0;
    out[n++] = 0;
    for (int64_t p = 256; p <= 131072; p *= 2) {
        out[n++] = p;
        if (p < 131072) out[n++] = p * 3 / 2;
    }
    return n;
}

typedef struct {
    const SpecInputs *in;
    SpecEmitFn emit;
    void *ctx;
    char model[64];
    char dtype[8];
} Gen;

static int put(Gen *g, CostOp op, int64_t p1, int64_t p2, int64_t p3, KvErr *e)
{
    StorePoint p = {.op = op, .tp = cost_op_is_io(op) ? 1 : g->in->ly->tp, .p1 = p1, .p2 = p2, .p3 = p3, .n = 1};
    /* the names as spec_generate wrote them (zero-padded, as p is): copied, not formatted per point */
    _Static_assert(sizeof p.model == sizeof g->model && sizeof p.dtype == sizeof g->dtype, "a point's names are Gen's");
    if (!cost_op_is_io(op)) memcpy(p.model, g->model, sizeof p.model);
    memcpy(p.dtype, g->dtype, sizeof p.dtype);
    p.median_ns = spec_op_ns(g->in, op, p1, p2, p3);
    p.p10_ns = p.p90_ns = p.median_ns;
    return g->emit(g->ctx, &p, e);
}

int spec_generate(const SpecInputs *in, SpecEmitFn emit, void *ctx, KvErr *e)
{
    if (!in->ly || !in->ly->m || !in->gpu) return kv_err(e, "spec: model layout and GPU are required");
    if (model_layout_check(in->ly, e) != 0) return -1;
    Gen g = {.in = in, .emit = emit, .ctx = ctx};
    snprintf(g.model, sizeof g.model, "%s", in->ly->m->name);
    snprintf(g.dtype, sizeof g.dtype, "%s", kv_dtype_name(in->ly->dtype));
    int64_t tok[64], ctxs[64];
    int nt = token_grid(tok, 1), nc = ctx_grid(ctxs);
    static const CostOp one_d[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_GEMM_KV_PROJ,
                                   OP_NORM, OP_ACT, OP_ROPE, OP_QUANT, OP_DEQUANT, OP_ALLREDUCE, OP_ALLGATHER};
    for (size_t k = 0; k < KV_ARRAY_LEN(one_d); k++)
        for (int i = 0; i < nt; i++)
            if (put(&g, one_d[k], tok[i], 0, 0, e) != 0) return -1;
    static const CostOp two_d[] = {OP_ATTN_PREFILL, OP_LAYER_PREFILL};
    for (size_t k = 0; k < KV_ARRAY_LEN(two_d); k++)
        for (int i = 0; i < nt; i++)
            for (int j = 0; j < nc; j++)
                if (put(&g, two_d[k], tok[i], ctxs[j], 0, e) != 0) return -1;
    /* decode: batch 1..512 × total context 1..32Mi tokens */
    static const int64_t small_ctx[] = {1, 16, 64, 256, 512};
    for (int64_t b = 1; b <= 512; b *= 2) {
        for (size_t i = 0; i < KV_ARRAY_LEN(small_ctx); i++)
            if (put(&g, OP_ATTN_DECODE, b, small_ctx[i], 0, e) != 0) return -1;
        for (int64_t c = 1024; c <= (1LL << 25); c *= 2)
            if (put(&g, OP_ATTN_DECODE, b, c, 0, e) != 0) return -1;
    }
    /* IO: 4 KiB .. 64 GiB */
    static const CostOp link_ops[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    if (in->link)
        for (size_t k = 0; k < KV_ARRAY_LEN(link_ops); k++)
            for (int64_t b = 4096; b <= (1LL << 36); b *= 2)
                if (put(&g, link_ops[k], b, 0, 0, e) != 0) return -1;
    if (in->ssd) {
        static const int64_t qds[] = {1, 4, 8, 16, 32, 64};
        for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++)
            for (int64_t b = 4096; b <= (1LL << 36); b *= 2)
                for (size_t q = 0; q < KV_ARRAY_LEN(qds); q++)
                    for (int64_t n = 1; n <= in->n_ssd; n++)
                        if (put(&g, (CostOp)op, b, qds[q], n, e) != 0) return -1;
    }
    if (in->nic)
        for (int64_t b = 4096; b <= (1LL << 36); b *= 2)
            if (put(&g, OP_NET, b, 0, 0, e) != 0) return -1;
    return 0;
}

/* ---- in-memory cost model ---- */

typedef struct {
    CostPoint *pts[OP_COUNT];
    size_t n[OP_COUNT], cap[OP_COUNT];
} Collect;

static int collect(void *ctx, const StorePoint *p, KvErr *e)
{
    Collect *c = ctx;
    int op = p->op;
    if (c->n[op] == c->cap[op]) {
        size_t nc = c->cap[op] ? c->cap[op] * 2 : 64;
        CostPoint *np = realloc(c->pts[op], nc * sizeof *np);
        if (!np) return kv_err(e, "spec: out of memory");
        c->pts[op] = np;
        c->cap[op] = nc;
    }
    c->pts[op][c->n[op]++] = (CostPoint){.op = p->op, .p = {p->p1, p->p2, p->p3}, .median_ns = p->median_ns};
    return 0;
}

int spec_cost_model(CostModel *cm, const SpecInputs *in, KvErr *e)
{
    cost_model_init(cm, in->gpu ? in->gpu->name : "", in->ly && in->ly->m ? in->ly->m->name : "",
                    in->ly ? kv_dtype_name(in->ly->dtype) : "", in->ly ? in->ly->tp : 1);
    Collect c;
    memset(&c, 0, sizeof c);
    int rc = spec_generate(in, collect, &c, e);
    for (int op = 0; op < OP_COUNT && rc == 0; op++)
        if (c.n[op]) rc = cost_model_set_op(cm, (CostOp)op, c.pts[op], c.n[op], 0, "spec", e);
    for (int op = 0; op < OP_COUNT; op++) free(c.pts[op]);
    if (rc != 0) {
        cost_model_free(cm);
        return -1;
    }
    snprintf(cm->source, sizeof cm->source, "spec roofline (in memory): %s, %s %s, tp %d, attention %s", cm->device,
             cm->model, cm->dtype, cm->tp, spec_stack_name(spec_stack_resolve(in->gpu, in->stack)));
    return 0;
}
