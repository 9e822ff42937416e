/* spec.h — the spec backend: cost curves derived from datasheets with a roofline,
 *   t = max(flops / (peak · eff_compute(shape, stack)), bytes / (bw · eff_mem), minimum kernel time),
 * whose efficiency curves are fitted to public measurements (each constant in spec.c sits next to
 * its source). It fills the same op tables as the measured backends, so any catalogued GPU can be
 * simulated without owning one; measured runs always win over spec runs when both are stored.
 *
 * Not responsible for: storing (store.c) or reading (cost.c) the points.
 */
#ifndef KV_SPEC_H
#define KV_SPEC_H

#include "sim/cost/cost.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cost/store.h"

/* The serving stack's kernels (efficiency is a property of GPU × stack): AUTO is
 * FlashAttention-3 on Hopper and FlashAttention-2 elsewhere (a current vLLM); FA2 is the vLLM 0.6
 * generation on every GPU; FA3 exists on Hopper only. These three change the attention fraction only.
 * The fitted stacks replace the roofline's efficiencies with constants fitted to one source's
 * measured kernels (SpecFitRow, tools/fit_spec.py), on the GPUs that source measured only:
 * VLLM019 is vLLM 0.19 (LLMServingSim's profiles), VIDUR the 2024 PyTorch + FlashAttention-2 kernels
 * of Vidur's profiles. The order is the names' ("auto", "fa2", "fa3", "vllm-0.19", "vidur"). */
typedef enum SpecStack { SPEC_STACK_AUTO = 0, SPEC_STACK_FA2, SPEC_STACK_FA3, SPEC_STACK_VLLM019, SPEC_STACK_VIDUR, SPEC_STACK_COUNT } SpecStack;
const char *spec_stack_name(SpecStack s);
/* The stack of a name; -1 naming the value and the names when it is none. */
int spec_stack_parse(const char *name, SpecStack *out, KvErr *e);
/* 1 for a stack of fitted rows (VLLM019, VIDUR). */
int spec_stack_is_fitted(SpecStack s);
/* AUTO resolved for a GPU; other values returned as they are. */
SpecStack spec_stack_resolve(const GpuSpec *gpu, SpecStack s);
/* 0, or -1 naming the GPU when the stack cannot run on it (FA3 off Hopper; a fitted stack on a GPU
 * it has no row for: the error lists the GPUs it has). */
int spec_stack_check(const GpuSpec *gpu, SpecStack s, KvErr *e);

typedef struct SpecInputs {
    const ModelLayout *ly;
    const GpuSpec *gpu;
    const LinkSpec *link; /* host link; NULL: no h2d/d2h curves */
    const SsdSpec *ssd;   /* NULL: no ssd curves */
    int n_ssd;
    const NicSpec *nic;   /* NULL: no net curve */
    SpecStack stack;      /* attention kernels (0: AUTO) */
} SpecInputs;

/* Fill inputs from a platform (its GPU, link, SSD array, NIC) and a layout. */
void spec_inputs_from_platform(SpecInputs *in, const HwCatalog *hw, const PlatformSpec *p, const ModelLayout *ly);

/* Load the model and hardware catalogs together (both or neither: on failure nothing is left to free). */
int spec_catalogs_load(ModelCatalog *mc, HwCatalog *hw, KvErr *e);

typedef int (*SpecEmitFn)(void *ctx, const StorePoint *p, KvErr *e);
/* Emit every point of every op on the spec grid, in a fixed order (deterministic). */
int spec_generate(const SpecInputs *in, SpecEmitFn emit, void *ctx, KvErr *e);
/* The same points straight into an in-memory cost model (the embedded default of kvsim). */
int spec_cost_model(CostModel *cm, const SpecInputs *in, KvErr *e);

/* The numbers of the spec model with their sources, for `kvcal spec --explain` and tests.
 * SpecGpuRow: the per-GPU fractions; spec_gpu_row(i) for i = 0.. lists the table, the last row (match
 * "") being the default for GPUs no row matches, then NULL; spec_gpu_row_for gives the row that
 * applies to a catalogued GPU. SpecConstant: the numbers every GPU shares; spec_constant(i) for
 * i = 0.. until NULL. Every source names a public measurement or starts with "ESTIMATE". */
typedef struct SpecGpuRow {
    const char *match;   /* case-insensitive prefix of the GPU's catalog name ("" = every other GPU) */
    double mamf;         /* max achievable dense fp16/bf16 matmul, fraction of peak */
    double attn_fa2;     /* FlashAttention-2 at long sequences, fraction of peak */
    double attn_fa3;     /* FlashAttention-3, fraction of peak; 0: the GPU does not run it (not Hopper) */
    const char *source;
} SpecGpuRow;
typedef struct SpecConstant {
    const char *name;
    double value;
    const char *unit;
    const char *source;
} SpecConstant;
/* A fitted row: one GPU under one fitted stack, each constant fitted by tools/fit_spec.py to the
 * measured rows of the profiles named in source (its --check mode is part of the suite). The model:
 *   GEMM          max(flops / (peak · gemm_ceiling · shape(M) / shape(4096)), bytes / (HBM · gemm_bw), min_kernel)
 *   norm/act/rope max(bytes / (HBM · norm_bw | act_bw | rope_bw), min_kernel); quant/dequant at norm_bw
 *   decode attn   decode_floor + batch · decode_seq + max(flops / (peak · prefill_frac), bytes / (HBM · decode_bw))
 *   prefill attn  prefill_floor + max(flops / (peak · prefill_frac), bytes / (HBM · decode_bw),
 *                                     waves · (context + chunk) · prefill_key_ns)
 * shape(M) is the shared GEMM curve (spec_gemm_shape). waves = ceil(heads per GPU · ceil(chunk / 128)
 * / SMs): the attention kernel gives each (head, 128-query tile) one thread block, which walks every
 * key in turn, so a short chunk over a long context is as slow as one block's walk however few FLOPs
 * it has. A 0 in decode_bw or prefill_frac: the source does not measure that attention op on this
 * GPU, which then costs as under fa2 (prefill's memory side then at the default HBM fraction). */
typedef struct SpecFitRow {
    const char *gpu; /* the GPU's catalog name (case-insensitive) */
    SpecStack stack;
    double gemm_ceiling, gemm_bw, norm_bw, act_bw, rope_bw;
    double decode_bw, decode_floor_ns, decode_seq_ns;
    double prefill_frac, prefill_key_ns, prefill_floor_ns;
    double min_kernel_ns;
    const char *source; /* the profiles: repository, commit, files */
    const char *fit;    /* what it was fitted on, and the hold-out */
} SpecFitRow;
/* spec_fit_row(i) for i = 0.. until NULL; spec_fit_row_for: the row of a GPU and stack, or NULL. */
const SpecFitRow *spec_fit_row(int i);
const SpecFitRow *spec_fit_row_for(const GpuSpec *gpu, SpecStack s);
/* The GEMM efficiency curve's shape at M rows (the XLA table below 1, with the small-M tile rule). */
double spec_gemm_shape(int64_t M);

const SpecGpuRow *spec_gpu_row(int i);
const SpecGpuRow *spec_gpu_row_for(const GpuSpec *gpu);
const SpecConstant *spec_constant(int i);

/* The fitted curves, exposed for tests and for `kvcal spec --explain`. */
double spec_gemm_efficiency(const GpuSpec *gpu, int64_t M);
double spec_attn_efficiency(const GpuSpec *gpu, SpecStack stack, int64_t new_tokens);
double spec_mem_efficiency(const GpuSpec *gpu);
/* Time of one op at one shape (what spec_generate samples). */
double spec_op_ns(const SpecInputs *in, CostOp op, int64_t p1, int64_t p2, int64_t p3);

#endif
