/* kv_load.h — how the KV-loading policies (kv-offload, kv-quant) bring a saved history back: layer
 * by layer with an early start (kv_offload_plan_scaled), or, with their knob layerwise=false, the
 * whole history first in chunks of chunk_size tokens of every layer, then the prefill (whole-request
 * onboarding: vLLM's OffloadingConnector, LMCache with use_layerwise false). kv_offload.c defines
 * them; the two knobs are declared once here so that both policies take the same ones. */
#ifndef KV_LOAD_H
#define KV_LOAD_H

#include "policies/policy.h"

typedef struct KvLoad {
    int layerwise;
    int64_t chunk; /* tokens per whole-request load */
} KvLoad;

/* the knob table entries `layerwise` and `chunk_size` */
#define KV_LOAD_KNOBS                                                                                                   \
    {.name = "layerwise", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1,                                             \
     .help = "load layer by layer, pipelined with the prefill (false: the whole history first, then the prefill)"},    \
    {                                                                                                                   \
        .name = "chunk_size", .type = KNOB_INT, .def = 256, .min = 16, .max = 1 << 20,                                  \
        .help = "layerwise=false: tokens per load of every layer (LMCache's chunk_size)"                               \
    }

/* the two knobs of `policy` (its name, for the refusal of a chunk_size without layerwise=false) */
int kv_load_init(const PolicyEnv *env, const char *policy, KvLoad *ld, KvErr *e);

/* the layer-wise plan with the early start, for KV stored at `scale` of its fp16 size (1: plain) */
int kv_offload_plan_scaled(const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, double scale);

/* the plan ld asks for: layer-wise (kv_offload_plan_scaled) or the whole history in ld->chunk-token
 * loads before the prefill, its bytes at `scale` */
int kv_load_plan(const KvLoad *ld, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, double scale);

#endif
