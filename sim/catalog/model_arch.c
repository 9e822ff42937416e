/* model_arch.c — every quantity derived from a model's architecture: dtypes, layout checks (TP × PP
 * against the model), parameter counts, bytes of state per token, weight bytes per GPU, FLOPs,
 * bytes moved and GEMM shapes of the cost-model ops (ops.h). The contract and the shared
 * conventions are in model.h; this file documents each formula where it is computed. The catalog
 * these functions read is parsed and bounded by model.c.
 *
 * Not responsible for: reading the catalog (model.c), time (cost.c, spec.c), hardware (hw.c).
 *
 * Conventions used by the arithmetic (beyond model.h):
 *  - Sizes split over T use the largest shard, ceil(x / T) (I, the vocabulary, expert widths).
 *  - Under TP the embedding and the lm_head are split by vocabulary rows (vocab-parallel, as vLLM
 *    and Megatron do); norms, the o/down biases, the MoE router and OPT's learned positions are
 *    replicated on every GPU of the group.
 *  - Weights and the KV cache are stored in the layout's dtype; activations are 16-bit unless the
 *    dtype is fp32 (W4A16/W8A16, fp8 KV with 16-bit compute).
 *  - The per-layer op functions (model_op_flops, model_op_bytes, model_gemm_shape) describe the
 *    model's last layer, which is an MoE layer in MoE models (dense layers come first) and a global
 *    attention layer in Gemma-2 (local layers are the even ones). model_layer_prefill_flops and
 *    model_prefill_flops are exact per layer.
 *  - OP_NORM is one norm application over t·D (a layer runs norms_per_layer of them); OP_ACT is the
 *    layer's activation; OP_ROPE rotates Q and K; OP_ALLREDUCE is the layer's two TP all-reduces.
 *    OP_LAYER_PREFILL adds what no op covers (residual adds, Qwen3's q/k norms) and excludes TP
 *    communication.
 *  - sliding_window > 0 means Gemma-2 style alternation: even layers (0, 2, ...) attend to at most
 *    `sliding_window` keys, odd layers attend globally.
 * Invariants: every function is pure and never fails; the catalog's bounds (model.c) keep every
 * product inside int64.
 */
#include "sim/catalog/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    int bits;
} g_dtypes[KV_DT_COUNT] = {
    [KV_DT_FP32] = {"fp32", 32}, [KV_DT_FP16] = {"fp16", 16}, [KV_DT_BF16] = {"bf16", 16},
    [KV_DT_FP8] = {"fp8", 8},    [KV_DT_INT8] = {"int8", 8},  [KV_DT_INT4] = {"int4", 4},
};

const char *kv_dtype_name(KvDtype d) { return (unsigned)d < KV_DT_COUNT ? g_dtypes[d].name : NULL; }

int kv_dtype_parse(const char *s, KvDtype *out, KvErr *e)
{
    for (int i = 0; s && i < KV_DT_COUNT; i++) {
        if (strcasecmp(s, g_dtypes[i].name) == 0) {
            *out = (KvDtype)i;
            return 0;
        }
    }
    char known[128] = "";
    for (int i = 0; i < KV_DT_COUNT; i++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", g_dtypes[i].name);
    }
    return kv_err(e, "unknown dtype '%s' (known: %s)", s ? s : "(null)", known);
}

double kv_dtype_bytes(KvDtype d) { return (unsigned)d < KV_DT_COUNT ? g_dtypes[d].bits / 8.0 : 0.0; }

static int dtype_bits(KvDtype d) { return (unsigned)d < KV_DT_COUNT ? g_dtypes[d].bits : 16; }

/* Bytes of `elems` elements of `bits` bits, rounded up to whole bytes. */
static uint64_t elems_bytes(uint64_t elems, int bits) { return (elems * (uint64_t)bits + 7) / 8; }

/* ---------------------------------------------------------------- layouts */

int model_layout_check(const ModelLayout *ly, KvErr *e)
{
    if (!ly || !ly->m) return kv_err(e, "layout: no model");
    const ModelSpec *m = ly->m;
    if ((unsigned)ly->dtype >= KV_DT_COUNT) return kv_err(e, "model %s: invalid dtype %d", m->name, (int)ly->dtype);
    if (ly->tp < 1) return kv_err(e, "model %s: tp %d: expected a positive integer", m->name, ly->tp);
    if (ly->pp < 1) return kv_err(e, "model %s: pp %d: expected a positive integer", m->name, ly->pp);
    if (ly->pp > m->layers)
        return kv_err(e, "model %s: pp %d exceeds the %d layers (each stage needs at least one layer)", m->name,
                      ly->pp, m->layers);
    if (ly->tp > m->heads || m->heads % ly->tp != 0)
        return kv_err(e, "model %s: tp %d does not divide the %d query heads", m->name, ly->tp, m->heads);
    /* KV heads are split when T <= h_kv and replicated when T > h_kv; either way the division must
     * be exact so every GPU holds whole heads (as vLLM requires). */
    if (ly->tp <= m->kv_heads ? m->kv_heads % ly->tp != 0 : ly->tp % m->kv_heads != 0)
        return kv_err(e, "model %s: tp %d and the %d KV heads: one must divide the other", m->name, ly->tp,
                      m->kv_heads);
    return 0;
}

void model_stage_layers(const ModelLayout *ly, int stage, int *first, int *count)
{
    int L = ly->m->layers, S = ly->pp < 1 ? 1 : ly->pp;
    int base = L / S, rem = L % S;
    /* earlier stages take one extra layer each until the remainder is used up */
    *first = stage * base + (stage < rem ? stage : rem);
    *count = base + (stage < rem ? 1 : 0);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int layout_tp(const ModelLayout *ly) { return ly->tp < 1 ? 1 : ly->tp; }

/* KV heads on one GPU of a TP group of T: h_kv/T, at least 1 (replicated when T > h_kv). */
static int64_t kv_heads_gpu(const ModelSpec *m, int T) { return m->kv_heads >= T ? ceil_div(m->kv_heads, T) : 1; }

int model_kv_heads_per_gpu(const ModelLayout *ly) { return (int)kv_heads_gpu(ly->m, layout_tp(ly)); }

/* ---------------------------------------------------------------- parameters */

static int layer_is_moe(const ModelSpec *m, int layer) { return m->arch == MODEL_MOE && layer >= m->dense_layers; }
static int layer_is_local(const ModelSpec *m, int layer) { return m->sliding_window > 0 && layer % 2 == 0; }
static int64_t norm_params(const ModelSpec *m) { return (m->norm == NORM_LAYER ? 2 : 1) * (int64_t)m->hidden; }

/* Parameters of layer `layer` held by one GPU of a TP group of T, counting `routed` routed experts
 * (all of them for storage, experts_per_tok for the active count).
 *   attention: W_q D·(h/T)·d_h, W_k and W_v D·kvh·d_h each, W_o (h/T)·d_h·D;
 *              q,k,v biases (h/T + 2·kvh)·d_h; o bias D (replicated); Qwen3 q_norm/k_norm 2·d_h;
 *   norms:     norms_per_layer × (D for RMSNorm, 2·D for LayerNorm with bias);
 *   FFN:       (gate+1)·D·I/T with gate = 2 for gated (gate and up), 1 for plain; biases gate·I/T + D;
 *   MoE:       router D·E (replicated) + (routed + shared) experts of width I_moe/T. */
static int64_t layer_params_gpu(const ModelSpec *m, int layer, int T, int64_t routed)
{
    int64_t D = m->hidden, dh = m->head_dim;
    int64_t hq = ceil_div(m->heads, T), hk = kv_heads_gpu(m, T);
    int64_t p = D * (hq + 2 * hk) * dh + hq * dh * D;
    if (m->attn_bias) p += (hq + 2 * hk) * dh;
    if (m->attn_out_bias) p += D;
    if (m->qk_norm) p += 2 * dh;
    p += m->norms_per_layer * norm_params(m);
    int64_t gate = m->gated_ffn ? 2 : 1;
    if (layer_is_moe(m, layer)) {
        int64_t ie = ceil_div(m->moe_intermediate, T);
        int64_t expert = (gate + 1) * D * ie + (m->ffn_bias ? gate * ie + D : 0);
        p += D * m->n_experts + (routed + m->shared_experts) * expert;
    } else {
        int64_t ig = ceil_div(m->intermediate, T);
        p += (gate + 1) * D * ig + (m->ffn_bias ? gate * ig + D : 0);
    }
    return p;
}

/* Input embedding on one GPU: vocabulary rows split over T; learned positions replicated
 * (OPT: max_pos + 2 rows). */
static int64_t embed_params_gpu(const ModelSpec *m, int T)
{
    int64_t p = ceil_div(m->vocab, T) * (int64_t)m->hidden;
    if (m->pos == POS_LEARNED) p += ((int64_t)m->max_pos + m->pos_offset) * m->hidden;
    return p;
}

static int64_t lm_head_params_gpu(const ModelSpec *m, int T) { return ceil_div(m->vocab, T) * (int64_t)m->hidden; }

int64_t model_layer_params(const ModelSpec *m, int layer)
{
    if (layer < 0 || layer >= m->layers) return 0;
    return layer_params_gpu(m, layer, 1, m->n_experts);
}

int64_t model_layer_params_active(const ModelSpec *m, int layer)
{
    if (layer < 0 || layer >= m->layers) return 0;
    return layer_params_gpu(m, layer, 1, m->experts_per_tok);
}

/* embedding (+ learned positions) + layers + final norm + lm_head unless tied */
static int64_t params_sum(const ModelSpec *m, int active)
{
    int64_t p = embed_params_gpu(m, 1) + norm_params(m);
    if (!m->tied_embeddings) p += lm_head_params_gpu(m, 1);
    for (int l = 0; l < m->layers; l++) p += active ? model_layer_params_active(m, l) : model_layer_params(m, l);
    return p;
}

int64_t model_params_total(const ModelSpec *m) { return params_sum(m, 0); }
int64_t model_params_active(const ModelSpec *m) { return params_sum(m, 1); }

/* ---------------------------------------------------------------- bytes per token */

/* KV per token per layer, whole layer: 2·h_kv·d_h elements (replicas under TP counted once). */
uint64_t model_kv_bytes_per_token_layer(const ModelLayout *ly)
{
    return elems_bytes(2ull * (uint64_t)ly->m->kv_heads * (uint64_t)ly->m->head_dim, dtype_bits(ly->dtype));
}

uint64_t model_kv_bytes_per_token(const ModelLayout *ly)
{
    return (uint64_t)ly->m->layers * model_kv_bytes_per_token_layer(ly);
}

/* One layer's input hidden state: D elements. */
uint64_t model_hidden_bytes_per_token_layer(const ModelLayout *ly)
{
    return elems_bytes((uint64_t)ly->m->hidden, dtype_bits(ly->dtype));
}

uint64_t model_hidden_bytes_per_token(const ModelLayout *ly)
{
    return (uint64_t)ly->m->layers * model_hidden_bytes_per_token_layer(ly);
}

/* One GPU's share: 2·max(1, h_kv/T)·d_h elements. */
uint64_t model_kv_bytes_per_token_layer_gpu(const ModelLayout *ly)
{
    uint64_t hk = (uint64_t)kv_heads_gpu(ly->m, layout_tp(ly));
    return elems_bytes(2ull * hk * (uint64_t)ly->m->head_dim, dtype_bits(ly->dtype));
}

uint64_t model_boundary_bytes_per_token(const ModelLayout *ly) { return model_hidden_bytes_per_token_layer(ly); }

/* ---------------------------------------------------------------- weights per GPU */

uint64_t model_stage_weight_bytes_per_gpu(const ModelLayout *ly, int stage)
{
    const ModelSpec *m = ly->m;
    int T = layout_tp(ly), S = ly->pp < 1 ? 1 : ly->pp;
    if (stage < 0 || stage >= S) return 0;
    int first, count;
    model_stage_layers(ly, stage, &first, &count);
    int64_t p = 0;
    for (int l = first; l < first + count; l++) p += layer_params_gpu(m, l, T, m->n_experts);
    if (stage == 0) p += embed_params_gpu(m, T);
    if (stage == S - 1) {
        p += norm_params(m); /* final norm, replicated */
        /* a tied lm_head reuses the embedding when both live on the same GPU (S == 1); otherwise
         * the last stage holds its own copy */
        if (!m->tied_embeddings || S > 1) p += lm_head_params_gpu(m, T);
    }
    return elems_bytes((uint64_t)p, dtype_bits(ly->dtype));
}

uint64_t model_weight_bytes_per_gpu(const ModelLayout *ly)
{
    uint64_t best = 0;
    int S = ly->pp < 1 ? 1 : ly->pp;
    for (int s = 0; s < S; s++) {
        uint64_t b = model_stage_weight_bytes_per_gpu(ly, s);
        if (b > best) best = b;
    }
    return best;
}

/* ---------------------------------------------------------------- FLOPs, bytes, shapes */

/* Elementwise FLOP counts per element (documented estimates; small next to the GEMMs):
 *  RMSNorm 4 (square, accumulate, scale by 1/rms, weight); LayerNorm 7 (mean, subtract, square,
 *  accumulate, scale, weight, bias); residual add 1; SwiGLU 5 per intermediate element (SiLU ≈ 4:
 *  negate, exp, add, divide; times up 1); ReLU 1; RoPE 3 per rotated element (2 multiplies, 1 add);
 *  router softmax 3 per expert score; quantize 4 per element (scale, round, clamp, store with the
 *  min/max reduction), dequantize 2 (multiply, add). Bias add 1 per output element. */
enum { FL_RMS = 4, FL_LAYERNORM = 7, FL_SWIGLU = 5, FL_RELU = 1, FL_ROPE = 3, FL_SOFTMAX = 3, FL_QUANT = 4,
       FL_DEQUANT = 2 };

/* Per-GPU sizes of one layer under the layout (doubles: they feed FLOP and byte formulas). */
typedef struct Dims {
    double D, dh, hq, hk; /* hidden, head dim, query and KV heads on this GPU */
    double I;             /* FFN width on this GPU: dense I/T, MoE per-expert I_moe/T */
    double gate;          /* 2 gated, 1 plain */
    int moe;
    double E, k, shared;  /* MoE: routed experts, routed per token, shared experts */
    double bw, bkv, ba;   /* bytes per element: weights, KV cache, activations */
    int T;
    int64_t window;       /* 0: global attention */
} Dims;

static Dims dims_of(const ModelLayout *ly, int layer)
{
    const ModelSpec *m = ly->m;
    Dims d;
    memset(&d, 0, sizeof d);
    d.T = layout_tp(ly);
    d.D = m->hidden;
    d.dh = m->head_dim;
    d.hq = (double)ceil_div(m->heads, d.T);
    d.hk = (double)kv_heads_gpu(m, d.T);
    d.gate = m->gated_ffn ? 2 : 1;
    d.moe = layer_is_moe(m, layer);
    if (d.moe) {
        d.I = (double)ceil_div(m->moe_intermediate, d.T);
        d.E = m->n_experts;
        d.k = m->experts_per_tok;
        d.shared = m->shared_experts;
    } else {
        d.I = (double)ceil_div(m->intermediate, d.T);
    }
    int bits = dtype_bits(ly->dtype);
    d.bw = d.bkv = bits / 8.0;
    d.ba = bits >= 16 ? bits / 8.0 : 2.0;
    d.window = layer_is_local(m, layer) ? m->sliding_window : 0;
    return d;
}

/* Query-key pairs of causal attention for n new tokens after c cached ones: new token at 1-based
 * position q (c < q <= c+n) sees min(q, W) keys (W = window, or all when there is none).
 * Without a window: n·c + n(n+1)/2. */
static double attn_pairs(int64_t n, int64_t c, int64_t window)
{
    if (n <= 0) return 0;
    double lo = (double)c + 1, hi = (double)(c + n);
    if (window <= 0 || hi <= (double)window) return (lo + hi) * (double)n / 2.0;
    double W = (double)window;
    double pairs = 0;
    if (lo <= W) pairs += (lo + W) * (W - lo + 1) / 2.0; /* positions c+1..W see all keys */
    double over = hi - (lo > W ? lo : W + 1) + 1;        /* positions past the window see W keys */
    return pairs + over * W;
}

/* Expected number of distinct routed experts hit by t tokens choosing k of E each:
 * E·(1 − (1 − k/E)^t). */
static double experts_touched(const Dims *d, double t)
{
    if (t <= 0 || d->E <= 0) return 0;
    return d->E * (1.0 - pow(1.0 - d->k / d->E, t));
}

/* Elementwise work of a layer that no op of ops.h covers: the two residual adds (t·D each) and
 * Qwen3's per-head q/k RMSNorms. Part of OP_LAYER_PREFILL only. */
static double layer_other_flops(const ModelLayout *ly, const Dims *d, double t)
{
    return 2 * t * d->D + (ly->m->qk_norm ? FL_RMS * t * (d->hq + d->hk) * d->dh : 0);
}

/* residual adds read two t·D tensors and write one; q/k norms read and write Q and K */
static double layer_other_bytes(const ModelLayout *ly, const Dims *d, double t)
{
    return 2 * 3 * t * d->D * d->ba + (ly->m->qk_norm ? 2 * t * (d->hq + d->hk) * d->dh * d->ba : 0);
}

static double layer_op_flops(const ModelLayout *ly, const Dims *d, CostOp op, double p1, double p2)
{
    const ModelSpec *m = ly->m;
    double t = p1;
    double qkv_n = (d->hq + 2 * d->hk) * d->dh;
    switch (op) {
    case OP_GEMM_QKV: /* 2·t·D·(h/T + 2·kvh)·d_h, + bias adds */
        return 2 * t * d->D * qkv_n + (m->attn_bias ? t * qkv_n : 0);
    case OP_GEMM_O: /* 2·t·(h/T)·d_h·D, + bias add */
        return 2 * t * d->hq * d->dh * d->D + (m->attn_out_bias ? t * d->D : 0);
    case OP_GEMM_FFN_UP:
        if (d->moe) /* router 2·t·D·E + (k + shared) experts of 2·t·D·gate·I_moe/T */
            return 2 * t * d->D * d->E + (d->k + d->shared) * t * d->gate * d->I * (2 * d->D + (m->ffn_bias ? 1 : 0));
        return t * d->gate * d->I * (2 * d->D + (m->ffn_bias ? 1 : 0)); /* 2·t·D·gate·I/T */
    case OP_GEMM_FFN_DOWN: {
        double experts = d->moe ? d->k + d->shared : 1; /* (k + shared)·2·t·I_moe/T·D, dense 2·t·I/T·D */
        return experts * t * d->D * (2 * d->I + (m->ffn_bias ? 1 : 0));
    }
    case OP_GEMM_KV_PROJ: /* 2·t·D·2·kvh·d_h (+ k,v bias) + RoPE on K: 3 per element */
        return 2 * t * d->D * 2 * d->hk * d->dh + (m->attn_bias ? t * 2 * d->hk * d->dh : 0) +
               (m->pos == POS_ROPE ? FL_ROPE * t * d->hk * d->dh : 0);
    case OP_ATTN_PREFILL: /* 4·(h/T)·d_h per query-key pair (QKᵀ and AV) */
        return 4 * d->hq * d->dh * attn_pairs((int64_t)p1, (int64_t)p2, d->window);
    case OP_ATTN_DECODE: /* one query per request over total_ctx keys in all: 4·(h/T)·d_h·total_ctx */
        return 4 * d->hq * d->dh * p2;
    case OP_NORM: /* one norm over the full D (every GPU of the group normalises its replica) */
        return (m->norm == NORM_LAYER ? FL_LAYERNORM : FL_RMS) * t * d->D;
    case OP_ACT: { /* activation on the FFN width; MoE: every used expert + router softmax */
        double per = m->gated_ffn ? FL_SWIGLU : FL_RELU;
        if (d->moe) return (d->k + d->shared) * per * t * d->I + FL_SOFTMAX * t * d->E;
        return per * t * d->I;
    }
    case OP_ROPE: /* rotate Q and K: 3·t·(h/T + kvh)·d_h; learned positions are added at the embedding */
        return m->pos == POS_ROPE ? FL_ROPE * t * (d->hq + d->hk) * d->dh : 0;
    case OP_QUANT: /* KV of t tokens on this GPU: 2·kvh·d_h elements each */
        return FL_QUANT * t * 2 * d->hk * d->dh;
    case OP_DEQUANT:
        return FL_DEQUANT * t * 2 * d->hk * d->dh;
    case OP_ALLREDUCE: /* two ring all-reduces (after o and after down): (T−1)/T·t·D adds each */
        return d->T > 1 ? 2 * t * d->D * (d->T - 1) / d->T : 0;
    case OP_LAYER_PREFILL: /* the layer's compute ops; TP communication is a separate op */
        return layer_op_flops(ly, d, OP_GEMM_QKV, p1, 0) + layer_op_flops(ly, d, OP_GEMM_O, p1, 0) +
               layer_op_flops(ly, d, OP_GEMM_FFN_UP, p1, 0) + layer_op_flops(ly, d, OP_GEMM_FFN_DOWN, p1, 0) +
               layer_op_flops(ly, d, OP_ATTN_PREFILL, p1, p2) +
               m->norms_per_layer * layer_op_flops(ly, d, OP_NORM, p1, 0) + layer_op_flops(ly, d, OP_ACT, p1, 0) +
               layer_op_flops(ly, d, OP_ROPE, p1, 0) + layer_other_flops(ly, d, p1);
    default: /* IO ops and the all-gather: no arithmetic */
        return 0;
    }
}

/* A GEMM of M×N×K: weights N·K, input M·K, output M·N (+ a bias of N). */
static double gemm_bytes(const Dims *d, double M, double N, double K, int bias)
{
    return N * K * d->bw + (bias ? N * d->bw : 0) + M * K * d->ba + M * N * d->ba;
}

static double layer_op_bytes(const ModelLayout *ly, const Dims *d, CostOp op, double p1, double p2)
{
    const ModelSpec *m = ly->m;
    double t = p1;
    switch (op) {
    case OP_GEMM_QKV:
        return gemm_bytes(d, t, (d->hq + 2 * d->hk) * d->dh, d->D, m->attn_bias);
    case OP_GEMM_O:
        return gemm_bytes(d, t, d->D, d->hq * d->dh, m->attn_out_bias);
    case OP_GEMM_KV_PROJ: /* GEMM + RoPE on K in place (read and write K) */
        return gemm_bytes(d, t, 2 * d->hk * d->dh, d->D, m->attn_bias) +
               (m->pos == POS_ROPE ? 2 * t * d->hk * d->dh * d->ba : 0);
    case OP_GEMM_FFN_UP:
        if (d->moe) {
            /* router weights and scores; the experts the batch touches are read once each; every
             * token's input goes to k routed + shared experts, each writes gate·I_moe/T outputs */
            double used = experts_touched(d, t) + d->shared;
            double rows = t * (d->k + d->shared);
            return gemm_bytes(d, t, d->E, d->D, 0) + used * d->gate * d->I * d->D * d->bw +
                   rows * (d->D + d->gate * d->I) * d->ba;
        }
        return gemm_bytes(d, t, d->gate * d->I, d->D, m->ffn_bias);
    case OP_GEMM_FFN_DOWN:
        if (d->moe) {
            double used = experts_touched(d, t) + d->shared;
            double rows = t * (d->k + d->shared);
            return used * d->I * d->D * d->bw + rows * (d->I + d->D) * d->ba;
        }
        return gemm_bytes(d, t, d->D, d->I, m->ffn_bias);
    case OP_ATTN_PREFILL: { /* read Q (n rows) and K,V of context+new (once), write O */
        double keys = p1 + p2;
        if (d->window > 0 && keys > (double)d->window + p1) keys = (double)d->window + p1;
        return 2 * p1 * d->hq * d->dh * d->ba + keys * 2 * d->hk * d->dh * d->bkv;
    }
    case OP_ATTN_DECODE: /* the batch's KV (total_ctx tokens) + one Q and one O row per request */
        return p2 * 2 * d->hk * d->dh * d->bkv + 2 * p1 * d->hq * d->dh * d->ba;
    case OP_NORM: /* one norm: read and write t·D, read its weights */
        return 2 * t * d->D * d->ba + (m->norm == NORM_LAYER ? 2 : 1) * d->D * d->bw;
    case OP_ACT: { /* read gate (and up), write the product */
        double experts = d->moe ? d->k + d->shared : 1;
        return experts * t * d->I * (d->gate + 1) * d->ba;
    }
    case OP_ROPE: /* Q and K read and written */
        return m->pos == POS_ROPE ? 2 * t * (d->hq + d->hk) * d->dh * d->ba : 0;
    case OP_QUANT: /* 16-bit K,V in, dtype out */
        return t * 2 * d->hk * d->dh * (2.0 + d->bkv);
    case OP_DEQUANT:
        return t * 2 * d->hk * d->dh * (d->bkv + 2.0);
    case OP_ALLREDUCE: /* bytes each GPU sends: two ring all-reduces of t·D, 2·(T−1)/T of it each */
        return d->T > 1 ? 2 * 2 * t * d->D * d->ba * (d->T - 1) / d->T : 0;
    case OP_ALLGATHER: /* bytes each GPU receives to assemble one t·D hidden state */
        return d->T > 1 ? t * d->D * d->ba * (d->T - 1) / d->T : 0;
    case OP_LAYER_PREFILL: /* device-memory traffic of the compute ops (no TP communication) */
        return layer_op_bytes(ly, d, OP_GEMM_QKV, p1, 0) + layer_op_bytes(ly, d, OP_GEMM_O, p1, 0) +
               layer_op_bytes(ly, d, OP_GEMM_FFN_UP, p1, 0) + layer_op_bytes(ly, d, OP_GEMM_FFN_DOWN, p1, 0) +
               layer_op_bytes(ly, d, OP_ATTN_PREFILL, p1, p2) +
               m->norms_per_layer * layer_op_bytes(ly, d, OP_NORM, p1, 0) + layer_op_bytes(ly, d, OP_ACT, p1, 0) +
               layer_op_bytes(ly, d, OP_ROPE, p1, 0) + layer_other_bytes(ly, d, p1);
    default: /* IO ops: their cost depends on the bytes parameter and the machine only */
        return 0;
    }
}

static double clamp0(int64_t v) { return v > 0 ? (double)v : 0.0; }

double model_op_flops(const ModelLayout *ly, CostOp op, int64_t p1, int64_t p2)
{
    if (!ly || !ly->m || cost_op_is_io(op)) return 0;
    Dims d = dims_of(ly, ly->m->layers - 1);
    return layer_op_flops(ly, &d, op, clamp0(p1), clamp0(p2));
}

double model_op_bytes(const ModelLayout *ly, CostOp op, int64_t p1, int64_t p2)
{
    if (!ly || !ly->m || cost_op_is_io(op)) return 0;
    Dims d = dims_of(ly, ly->m->layers - 1);
    return layer_op_bytes(ly, &d, op, clamp0(p1), clamp0(p2));
}

int model_gemm_shape(const ModelLayout *ly, CostOp op, int64_t tokens, int64_t *M, int64_t *N, int64_t *K)
{
    if (!ly || !ly->m) return 0;
    const ModelSpec *m = ly->m;
    int T = layout_tp(ly);
    int64_t hq = ceil_div(m->heads, T), hk = kv_heads_gpu(m, T), dh = m->head_dim, D = m->hidden;
    int moe = layer_is_moe(m, m->layers - 1);
    int64_t width = moe ? ceil_div(m->moe_intermediate, T) : ceil_div(m->intermediate, T);
    int64_t gate = m->gated_ffn ? 2 : 1;
    int64_t rows = tokens < 0 ? 0 : tokens;
    if (moe && (op == OP_GEMM_FFN_UP || op == OP_GEMM_FFN_DOWN)) /* average rows per expert, rounded up */
        rows = ceil_div(rows * m->experts_per_tok, m->n_experts);
    switch (op) {
    case OP_GEMM_QKV: *N = (hq + 2 * hk) * dh; *K = D; break;
    case OP_GEMM_O: *N = D; *K = hq * dh; break;
    case OP_GEMM_FFN_UP: *N = gate * width; *K = D; break;
    case OP_GEMM_FFN_DOWN: *N = D; *K = width; break;
    case OP_GEMM_KV_PROJ: *N = 2 * hk * dh; *K = D; break;
    default: return 0;
    }
    *M = rows;
    return 1;
}

double model_layer_prefill_flops(const ModelLayout *ly, int layer, int64_t n, int64_t c)
{
    if (!ly || !ly->m || layer < 0 || layer >= ly->m->layers) return 0;
    Dims d = dims_of(ly, layer);
    return layer_op_flops(ly, &d, OP_LAYER_PREFILL, clamp0(n), clamp0(c));
}

/* Σ over layers of one GPU's FLOPs, times T (replicated KV-head work included: it is executed). */
double model_prefill_flops(const ModelLayout *ly, int64_t n, int64_t c)
{
    if (!ly || !ly->m) return 0;
    double sum = 0;
    for (int l = 0; l < ly->m->layers; l++) sum += model_layer_prefill_flops(ly, l, n, c);
    return sum * layout_tp(ly);
}
