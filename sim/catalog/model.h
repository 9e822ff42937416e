/* model.h — the model catalog (configs/models.json) and everything derived from an architecture:
 * bytes of state per token (KV, hidden states, stage-boundary activations), weight bytes per GPU,
 * FLOPs and bytes moved of every op of ops.h, for a dtype and a TP × PP layout.
 *
 * Implemented by model.c (the catalog: parsing, overlays, look-ups) and model_arch.c (dtypes, layouts
 * and every derived quantity).
 * Not responsible for: timing (cost.c, spec.c) or hardware (hw.c).
 *
 * Conventions (POLICIES.md "Shared arithmetic"): D hidden, L layers, h query heads, h_kv KV heads,
 * d_h head dim, I FFN intermediate, b bytes per element.
 *  - KV bytes per token per layer = 2·h_kv·d_h·b; hidden-state bytes per token per layer = D·b.
 *  - Under TP = T: query heads h/T per GPU; KV heads max(1, h_kv/T) per GPU (replicated when
 *    T > h_kv); FFN intermediate I/T; MoE experts keep their count, each expert's intermediate /T.
 *  - Under PP = S: layers split as evenly as possible, earlier stages take the remainder
 *    (stage s holds layers [first, first+count)).
 *  - FLOPs count a multiply-add as 2. Causal attention of n new tokens after c cached ones:
 *    QKᵀ and AV over sum_{i=1..n} (c+i) keys = n·c + n(n+1)/2 pairs, each 2·d_h FLOPs per head
 *    per matrix → 4·h·d_h·(n·c + n(n+1)/2).
 * All functions are pure; a ModelSpec is const after loading.
 */
#ifndef KV_MODEL_H
#define KV_MODEL_H

#include <stdint.h>

#include "sim/base/ops.h"
#include "sim/base/util.h"

typedef enum KvDtype { KV_DT_FP32, KV_DT_FP16, KV_DT_BF16, KV_DT_FP8, KV_DT_INT8, KV_DT_INT4, KV_DT_COUNT } KvDtype;

const char *kv_dtype_name(KvDtype d);          /* "fp16", ... */
int kv_dtype_parse(const char *s, KvDtype *out, KvErr *e); /* lists the known names on error */
double kv_dtype_bytes(KvDtype d);              /* 4, 2, 2, 1, 1, 0.5 */

typedef enum ModelArch { MODEL_DENSE, MODEL_MOE } ModelArch;
typedef enum ModelNorm { NORM_RMS, NORM_LAYER } ModelNorm;
typedef enum ModelPos { POS_ROPE, POS_LEARNED } ModelPos;

#define MODEL_MAX_ALIASES 8

typedef struct ModelSpec {
    char name[64];
    char hf_id[128];
    ModelArch arch;
    int hidden;          /* D */
    int layers;          /* L */
    int heads;           /* h */
    int kv_heads;        /* h_kv */
    int head_dim;        /* d_h (may differ from D/h, e.g. Qwen3-30B-A3B, Gemma-2) */
    int intermediate;    /* I of dense FFN layers */
    int vocab;
    int max_pos;
    int gated_ffn;       /* 1: SwiGLU/GeGLU (3 matrices), 0: 2 matrices (OPT) */
    ModelNorm norm;
    int norms_per_layer; /* 2 pre-norm; Gemma-2 has 4 */
    ModelPos pos;
    int tied_embeddings;
    int attn_bias;       /* biases on q,k,v */
    int ffn_bias;        /* biases on the FFN matrices (OPT) */
    int n_experts;       /* MoE: routed experts (0 for dense) */
    int experts_per_tok;
    int moe_intermediate;
    int shared_experts;
    int dense_layers;    /* MoE models: first k layers dense */
    int sliding_window;  /* 0 none; Gemma-2 alternates local (window) and global layers */
    int64_t published_params; /* from the catalog, for checks (0 if not given) */
    int64_t published_active_params;
    int attn_out_bias;   /* bias on the output projection o (OPT yes; Qwen2.5 has q,k,v biases only) */
    int qk_norm;         /* per-head RMSNorm on q and k (Qwen3): 2·d_h parameters per layer */
    int pos_offset;      /* learned positions: extra table rows beyond max_pos (OPT: 2) */
    /* other names model_find accepts besides name and hf_id (Hugging Face ids of variants with the
     * same architecture, e.g. the chat/instruct fine-tunes): "aliases" in the catalog */
    char aliases[MODEL_MAX_ALIASES][128];
    int n_aliases;
} ModelSpec;

/* Plausible ranges of the catalog's fields (inclusive; the catalog refuses values outside them with
 * the key, the value and the range). Real models are one to two orders of magnitude inside every
 * bound; the bounds keep every derived product (parameters, weight and KV bytes, FLOPs) in range. */
#define MODEL_MAX_HIDDEN 131072
#define MODEL_MAX_LAYERS 4096
#define MODEL_MAX_HEADS 4096
#define MODEL_MAX_HEAD_DIM 4096
#define MODEL_MAX_INTERMEDIATE 1048576
#define MODEL_MAX_VOCAB 16777216
#define MODEL_MAX_POSITIONS 268435456 /* also the largest sliding_window */
#define MODEL_MAX_POS_OFFSET 65536
#define MODEL_MAX_EXPERTS 4096
#define MODEL_MAX_PARAMS 1e15         /* parameters of the whole model (all experts) */

typedef struct ModelCatalog {
    ModelSpec *models;
    int n;
    char origin[512]; /* file path or "embedded" */
} ModelCatalog;

/* Parse a catalog from JSON text (origin names it in errors: "configs/models.json: models[3].hidden_size:
 * expected a positive integer"). Validates every field (positive sizes within MODEL_MAX_*, heads
 * divisible by kv_heads, experts_per_tok <= n_experts, ...) and bounds the parameter count by
 * MODEL_MAX_PARAMS, so every function below computes without overflow. */
int model_catalog_parse(ModelCatalog *c, const char *json_text, const char *origin, KvErr *e);
/* Load from override path, $KVSIM_CONFIG_DIR/models.json or the embedded default. */
int model_catalog_load(ModelCatalog *c, const char *override_path, KvErr *e);
/* Lay an overlay (same format; `kvsim --models FILE`) over c: a model whose name (without case) is
 * in c replaces it, the others are added after c's. Overlay models are validated as a catalog's;
 * a name, hf_id or alias that would also name another (not replaced) model is refused naming the
 * overlay's origin and key ("mine.json: models[0].hf_id: ..."). On failure c is unchanged. */
int model_catalog_overlay(ModelCatalog *c, const char *json_text, const char *origin, KvErr *e);
int model_catalog_overlay_file(ModelCatalog *c, const char *path, KvErr *e);
void model_catalog_free(ModelCatalog *c);
/* By catalog name, Hugging Face id (hf_id) or one of the model's aliases, each matched exactly but
 * case-insensitively ("meta-llama/Llama-2-7b-hf" finds Llama-2-7B); on failure the message lists every
 * known name. The catalog guarantees that no string names two models. */
const ModelSpec *model_find(const ModelCatalog *c, const char *name, KvErr *e);

typedef struct ModelLayout {
    const ModelSpec *m;
    KvDtype dtype;
    int tp; /* T >= 1 */
    int pp; /* S >= 1, S <= L */
} ModelLayout;

/* Checks T, S against the model (S <= L, T <= h, h % T == 0). */
int model_layout_check(const ModelLayout *ly, KvErr *e);

/* Layers held by stage s: first layer index and count. */
void model_stage_layers(const ModelLayout *ly, int stage, int *first, int *count);

/* KV heads held by one GPU of the TP group: h_kv/T, or 1 when T > h_kv (replicated). */
int model_kv_heads_per_gpu(const ModelLayout *ly);

/* Parameter counts (whole model, dtype-independent). */
int64_t model_params_total(const ModelSpec *m);
int64_t model_params_active(const ModelSpec *m);      /* MoE: routed experts_per_tok only */
int64_t model_layer_params(const ModelSpec *m, int layer);        /* all experts */
int64_t model_layer_params_active(const ModelSpec *m, int layer);

/* Bytes of state per token, for the whole model (all layers, all GPUs). */
uint64_t model_kv_bytes_per_token(const ModelLayout *ly);
uint64_t model_hidden_bytes_per_token(const ModelLayout *ly);
/* Per layer (whole layer, summed over the TP group; KV heads replicated under TP are counted once). */
uint64_t model_kv_bytes_per_token_layer(const ModelLayout *ly);
uint64_t model_hidden_bytes_per_token_layer(const ModelLayout *ly);
/* Per layer and per GPU of the TP group (KV: its heads; hidden: the full D, every GPU needs it). */
uint64_t model_kv_bytes_per_token_layer_gpu(const ModelLayout *ly);
/* The activation entering one pipeline stage (= one hidden-state vector per token). */
uint64_t model_boundary_bytes_per_token(const ModelLayout *ly);

/* Weight bytes held by one GPU: its stage's layers / T (+ embedding on the first stage, lm_head on
 * the last; tied embeddings counted once when S == 1). The maximum over stages. */
uint64_t model_weight_bytes_per_gpu(const ModelLayout *ly);
/* The same for one stage (0 <= stage < S). */
uint64_t model_stage_weight_bytes_per_gpu(const ModelLayout *ly, int stage);

/* FLOPs of one op for one layer on one GPU of the TP group (ops.h parameters: p1, p2).
 * IO ops return 0. OP_LAYER_PREFILL = sum of the layer's ops. */
double model_op_flops(const ModelLayout *ly, CostOp op, int64_t p1, int64_t p2);
/* Bytes the op reads + writes in device memory (weights + activations + KV), for the roofline. */
double model_op_bytes(const ModelLayout *ly, CostOp op, int64_t p1, int64_t p2);
/* GEMM shape (M×N×K) of a projection op for `tokens` rows, per GPU; MoE up/down use per-expert
 * N/K with M = tokens·experts_per_tok/n_experts rows on average. Returns 0 for non-GEMM ops. */
int model_gemm_shape(const ModelLayout *ly, CostOp op, int64_t tokens, int64_t *M, int64_t *N, int64_t *K);

/* FLOPs of layer `layer` (0-based) on one GPU to prefill n new tokens after c cached ones: like
 * OP_LAYER_PREFILL but exact for that layer (dense vs MoE layers, Gemma-2's sliding-window layers). */
double model_layer_prefill_flops(const ModelLayout *ly, int layer, int64_t n, int64_t c);

/* Whole-model FLOPs to prefill n new tokens after c cached ones (all layers, all GPUs, no lm_head). */
double model_prefill_flops(const ModelLayout *ly, int64_t n, int64_t c);

#endif
