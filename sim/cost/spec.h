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

/* The serving stack's attention kernels (efficiency is a property of GPU × stack): AUTO is
 * FlashAttention-3 on Hopper and FlashAttention-2 elsewhere (a current vLLM); FA2 is the vLLM 0.6
 * generation on every GPU; FA3 exists on Hopper only. The order is the names' ("auto", "fa2", "fa3"). */
typedef enum SpecStack { SPEC_STACK_AUTO = 0, SPEC_STACK_FA2, SPEC_STACK_FA3 } SpecStack;
const char *spec_stack_name(SpecStack s);
/* AUTO resolved for a GPU; other values returned as they are. */
SpecStack spec_stack_resolve(const GpuSpec *gpu, SpecStack s);
/* 0, or -1 naming the GPU when the stack cannot run on it (FA3 off Hopper). */
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
