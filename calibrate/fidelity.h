/* fidelity.h — the spec roofline (sim/cost/spec.h) against public measurements: for each profile
 * (import_profile.h manifests), every measured row is compared with spec_op_ns at the same GPU,
 * model, dtype, TP and shape, and the relative errors are summarised per op family.
 *
 * Error of one point: spec / measured - 1 (signed; negative: the spec model is faster than the
 * GPU). Per family: the number of points, the median and the 90th percentile of |error| and the
 * median signed error. Percentiles: the nearest rank (sorted value at index ceil(q·n) - 1).
 * Families: gemm_small (the four GEMMs at <= 64 tokens), gemm (above 64 tokens), elementwise
 * (norm, act, rope), attn_prefill, attn_decode. Rows are the source's own (before the grids of
 * import_profile: no resampled or left-out point), so decode is compared at the measured
 * (batch, context per request).
 * Not responsible for: printing (kvcal fidelity, calibrate/cli/profile_cmds.c).
 */
#ifndef KV_FIDELITY_H
#define KV_FIDELITY_H

#include <stddef.h>

#include "calibrate/import_profile.h"
#include "sim/cost/spec.h"

enum { FID_GEMM_SMALL = 0, FID_GEMM, FID_ELEMENTWISE, FID_ATTN_PREFILL, FID_ATTN_DECODE, FID_FAMILIES };
#define FID_SMALL_M 64

const char *fidelity_family_name(int f);

typedef struct FidelityRow {
    char device[128];
    char model[64];
    char dtype[8];
    int tp;
    char source[128]; /* repository */
    int family;
    SpecStack stack;  /* the spec model's stack compared (spec_stack_resolve'd per GPU when auto) */
    size_t n;         /* 0: the profile does not measure this family */
    double median_abs, p90_abs, median_signed;
} FidelityRow;

/* One measured row of a profile with what the spec model (the given stack) makes of it: p1, p2 as
 * spec_op_ns takes them (decode: batch, total context), the op's FLOPs and bytes (model_op_*), and
 * for GEMMs the shape of the efficiency curve at the GEMM's M (spec_gemm_shape). */
typedef struct FidelityPoint {
    CostOp op;
    int family;
    int64_t p1, p2;
    double measured_ns, spec_ns;
    double flops, bytes, gemm_shape;
    int heads; /* query heads per GPU */
    const GpuSpec *gpu;
} FidelityPoint;
typedef int (*FidelityPointFn)(void *ctx, const FidelityPoint *p, KvErr *e);
/* Every measured row of the profile, in the source's order, to fn; -1 (naming the manifest) when
 * the stack has no fitted row for the profile's GPU (spec_stack_check). */
int fidelity_points(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, SpecStack stack, FidelityPointFn fn,
                    void *ctx, KvErr *e);

/* The FID_FAMILIES rows of one profile into rows[0..FID_FAMILIES), the spec model at the given stack. */
int fidelity_profile(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, SpecStack stack, FidelityRow *rows,
                     KvErr *e);

#endif
