/* model.c — the model catalog (configs/models.json) and every quantity derived from an
 * architecture: parameter counts, bytes of state per token, weight bytes per GPU, FLOPs, bytes moved
 * and GEMM shapes of the cost-model ops (ops.h). The contract and the shared conventions are in
 * model.h; this file documents each formula where it is computed.
 *
 * Responsible for: parsing and validating the catalog (every field: type, range, cross-field rules),
 * name lookup, layout checks (TP × PP against the model), the arithmetic above.
 * Not responsible for: time (cost.c, spec.c), hardware (hw.c), simulated state.
 *
 * Catalog format: {"comment": "...", "models": [ {model}, ... ]}. Keys of a model object:
 *   required: name, hf_id, arch ("dense"|"moe"), hidden_size, num_layers, num_heads, num_kv_heads,
 *             head_dim, intermediate_size, vocab_size, max_position_embeddings, ffn ("gated"|"plain"),
 *             norm ("rmsnorm"|"layernorm"), positional ("rope"|"learned"), tie_word_embeddings, source
 *   optional: norms_per_layer (2), qk_norm (false), position_offset (0; learned positions only),
 *             attn_bias (false; q,k,v), attn_out_bias (false; o), ffn_bias (false),
 *             sliding_window (0), published_params (0), published_active_params (0), note,
             aliases (an array of at most MODEL_MAX_ALIASES other names, e.g. Hugging Face ids of
             variants with the same architecture; names, hf_ids and aliases are unique over the catalog)
 *   MoE (required when arch is "moe", refused otherwise): num_experts, experts_per_tok,
 *             moe_intermediate_size; optional shared_experts (0), dense_layers (0).
 * Unknown keys and keys given twice are refused (they are usually typos). Names shared by two models
 * are found through a name index (sim/base/nameidx.h): O(models) expected, for a catalog of any size.
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
 * Invariants: a ModelCatalog that parsed is fully validated and const afterwards; on failure it is
 * left empty (n == 0, models == NULL). All arithmetic functions are pure and never fail.
 */
#include "sim/catalog/model.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/base/nameidx.h"

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

/* ---------------------------------------------------------------- catalog parsing */

typedef struct ParseCtx {
    const char *origin;
    int idx;  /* index in "models", -1 at the top level */
    KvErr *e;
} ParseCtx;

/* "origin: models[3].key: message" (key may be NULL for the model object itself). */
static int perr(const ParseCtx *pc, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(const ParseCtx *pc, const char *key, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (pc->idx < 0)
        return kv_err(pc->e, "%s: %s%s%s", pc->origin, key ? key : "", key ? ": " : "", what);
    return kv_err(pc->e, "%s: models[%d]%s%s: %s", pc->origin, pc->idx, key ? "." : "", key ? key : "", what);
}

/* A short rendering of a JSON value for error messages: "abc" (quoted), 4.5, true, null, an array. */
static void describe(const cJSON *v, char *buf, size_t n)
{
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (strlen(s) > 40) snprintf(buf, n, "\"%.40s...\"", s);
        else snprintf(buf, n, "\"%s\"", s);
    } else if (cJSON_IsNumber(v)) {
        snprintf(buf, n, "%.17g", v->valuedouble);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        snprintf(buf, n, "null");
    } else if (cJSON_IsArray(v)) {
        snprintf(buf, n, "an array");
    } else if (cJSON_IsObject(v)) {
        snprintf(buf, n, "an object");
    } else {
        snprintf(buf, n, "an invalid value");
    }
}

/* Line and column (1-based) of byte offset `off` in text. */
static void line_col(const char *text, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

typedef enum KeyKind { KEY_REQUIRED, KEY_OPTIONAL, KEY_MOE_REQUIRED, KEY_MOE_OPTIONAL } KeyKind;

static const struct {
    const char *key;
    KeyKind kind;
} g_keys[] = {
    {"name", KEY_REQUIRED},
    {"hf_id", KEY_REQUIRED},
    {"arch", KEY_REQUIRED},
    {"hidden_size", KEY_REQUIRED},
    {"num_layers", KEY_REQUIRED},
    {"num_heads", KEY_REQUIRED},
    {"num_kv_heads", KEY_REQUIRED},
    {"head_dim", KEY_REQUIRED},
    {"intermediate_size", KEY_REQUIRED},
    {"vocab_size", KEY_REQUIRED},
    {"max_position_embeddings", KEY_REQUIRED},
    {"ffn", KEY_REQUIRED},
    {"norm", KEY_REQUIRED},
    {"positional", KEY_REQUIRED},
    {"tie_word_embeddings", KEY_REQUIRED},
    {"source", KEY_REQUIRED},
    {"norms_per_layer", KEY_OPTIONAL},
    {"qk_norm", KEY_OPTIONAL},
    {"position_offset", KEY_OPTIONAL},
    {"attn_bias", KEY_OPTIONAL},
    {"attn_out_bias", KEY_OPTIONAL},
    {"ffn_bias", KEY_OPTIONAL},
    {"sliding_window", KEY_OPTIONAL},
    {"published_params", KEY_OPTIONAL},
    {"published_active_params", KEY_OPTIONAL},
    {"note", KEY_OPTIONAL},
    {"aliases", KEY_OPTIONAL},
    {"num_experts", KEY_MOE_REQUIRED},
    {"experts_per_tok", KEY_MOE_REQUIRED},
    {"moe_intermediate_size", KEY_MOE_REQUIRED},
    {"shared_experts", KEY_MOE_OPTIONAL},
    {"dense_layers", KEY_MOE_OPTIONAL},
};

/* Integer field in [min, max]; absent: error when required, else *out = dflt. */
static int get_i64(const ParseCtx *pc, const cJSON *obj, const char *key, int required, int64_t min,
                   int64_t max, int64_t dflt, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    const char *want = min > 0 ? "a positive integer" : "a non-negative integer";
    if (!v) {
        if (required) return perr(pc, key, "missing (expected %s)", want);
        *out = dflt;
        return 0;
    }
    char got[80];
    describe(v, got, sizeof got);
    if (!cJSON_IsNumber(v)) return perr(pc, key, "expected %s, got %s", want, got);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return perr(pc, key, "expected %s, got %s", want, got);
    if (d < (double)min) return perr(pc, key, "expected %s, got %s", want, got);
    if (d > (double)max)
        return perr(pc, key, "%s is out of the plausible range [%lld, %lld]", got, (long long)min, (long long)max);
    *out = (int64_t)d;
    return 0;
}

static int get_int(const ParseCtx *pc, const cJSON *obj, const char *key, int required, int min, int max, int dflt,
                   int *out)
{
    int64_t v;
    if (get_i64(pc, obj, key, required, min, max, dflt, &v)) return -1;
    *out = (int)v;
    return 0;
}

static int get_bool(const ParseCtx *pc, const cJSON *obj, const char *key, int required, int dflt, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required) return perr(pc, key, "missing (expected true or false)");
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        char got[80];
        describe(v, got, sizeof got);
        return perr(pc, key, "expected true or false, got %s", got);
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

/* Non-empty string that fits in cap bytes (buf may be NULL to only validate). */
static int get_str(const ParseCtx *pc, const cJSON *obj, const char *key, int required, char *buf, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required) return perr(pc, key, "missing (expected a non-empty string)");
        if (buf) buf[0] = '\0';
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        char got[80];
        describe(v, got, sizeof got);
        return perr(pc, key, "expected a non-empty string, got %s", got);
    }
    if (buf) {
        if (strlen(v->valuestring) >= cap)
            return perr(pc, key, "longer than %zu characters", cap - 1);
        snprintf(buf, cap, "%s", v->valuestring);
    }
    return 0;
}

/* "aliases": absent, or an array of non-empty strings that fit ModelSpec.aliases. */
static int get_aliases(const ParseCtx *pc, const cJSON *obj, ModelSpec *m)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "aliases");
    m->n_aliases = 0;
    if (!v) return 0;
    char got[80];
    if (!cJSON_IsArray(v)) {
        describe(v, got, sizeof got);
        return perr(pc, "aliases", "expected an array of names, got %s", got);
    }
    if (cJSON_GetArraySize(v) > MODEL_MAX_ALIASES)
        return perr(pc, "aliases", "%d names: at most %d allowed", cJSON_GetArraySize(v), MODEL_MAX_ALIASES);
    int k = 0;
    for (const cJSON *it = v->child; it; it = it->next, k++) {
        if (!cJSON_IsString(it) || !it->valuestring[0]) {
            describe(it, got, sizeof got);
            return perr(pc, "aliases", "[%d]: expected a non-empty string, got %s", k, got);
        }
        if (strlen(it->valuestring) >= sizeof m->aliases[0])
            return perr(pc, "aliases", "[%d]: longer than %zu characters", k, sizeof m->aliases[0] - 1);
        snprintf(m->aliases[k], sizeof m->aliases[k], "%s", it->valuestring);
    }
    m->n_aliases = k;
    return 0;
}

/* Whether s names model m (name, hf_id or an alias; case-insensitive). */
static int model_answers_to(const ModelSpec *m, const char *s)
{
    if (strcasecmp(m->name, s) == 0 || strcasecmp(m->hf_id, s) == 0) return 1;
    for (int k = 0; k < m->n_aliases; k++)
        if (strcasecmp(m->aliases[k], s) == 0) return 1;
    return 0;
}

/* A string that names both a and b (name, hf_id or alias of b that a answers to), or NULL. */
static const char *model_shared_name(const ModelSpec *a, const ModelSpec *b)
{
    if (model_answers_to(a, b->name)) return b->name;
    if (model_answers_to(a, b->hf_id)) return b->hf_id;
    for (int k = 0; k < b->n_aliases; k++)
        if (model_answers_to(a, b->aliases[k])) return b->aliases[k];
    return NULL;
}

/* every name a look-up accepts for m (name, hf_id, aliases) into x with value v; -1 out of memory */
static int model_names_add(KvNameIdx *x, const ModelSpec *m, int v)
{
    if (kv_nameidx_add(x, m->name, v) || kv_nameidx_add(x, m->hf_id, v)) return -1;
    for (int k = 0; k < m->n_aliases; k++)
        if (kv_nameidx_add(x, m->aliases[k], v)) return -1;
    return 0;
}

/* The smallest model index of x that answers to one of m's names, skipping `skip` and the models
 * marked in `gone` (may be NULL); -1 when none (x maps each name to the one model it names). */
static int model_names_clash(const KvNameIdx *x, const ModelSpec *m, int skip, const unsigned char *gone)
{
    int best = -1;
    const char *names[2 + MODEL_MAX_ALIASES] = {m->name, m->hf_id};
    for (int k = 0; k < m->n_aliases; k++) names[2 + k] = m->aliases[k];
    for (int k = 0; k < 2 + m->n_aliases; k++) {
        int j = kv_nameidx_find(x, names[k]);
        if (j >= 0 && j != skip && !(gone && gone[j]) && (best < 0 || j < best)) best = j;
    }
    return best;
}

/* One of two names (all our enumerations have two values). */
static int get_choice(const ParseCtx *pc, const cJSON *obj, const char *key, const char *a, const char *b,
                      int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return perr(pc, key, "missing (expected \"%s\" or \"%s\")", a, b);
    if (cJSON_IsString(v)) {
        if (strcasecmp(v->valuestring, a) == 0) {
            *out = 0;
            return 0;
        }
        if (strcasecmp(v->valuestring, b) == 0) {
            *out = 1;
            return 0;
        }
    }
    char got[80];
    describe(v, got, sizeof got);
    return perr(pc, key, "expected \"%s\" or \"%s\", got %s", a, b, got);
}

/* Unknown and repeated keys; MoE keys on a dense model. */
static int check_keys(const ParseCtx *pc, const cJSON *obj, int is_moe)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int found = -1;
        for (size_t k = 0; k < KV_ARRAY_LEN(g_keys); k++)
            if (strcmp(it->string, g_keys[k].key) == 0) found = (int)k;
        if (found < 0) return perr(pc, it->string, "unknown key (see the key list in sim/catalog/model.c)");
        for (const cJSON *jt = obj->child; jt != it; jt = jt->next)
            if (strcmp(jt->string, it->string) == 0) return perr(pc, it->string, "given twice");
        KeyKind kind = g_keys[found].kind;
        if (!is_moe && (kind == KEY_MOE_REQUIRED || kind == KEY_MOE_OPTIONAL))
            return perr(pc, it->string, "only valid when arch is \"moe\"");
    }
    return 0;
}

/* An upper bound of the parameter count in double (never overflows): attention at most 4·D·h·d_h
 * (q, o and k, v with h_kv <= h), the FFN or all experts with their gates, biases, norms, the router,
 * embedding, lm_head and learned positions. */
static double params_upper_estimate(const ModelSpec *m)
{
    double D = m->hidden, dh = m->head_dim, h = m->heads;
    double ffn = 3.0 * D * m->intermediate + 4.0 * m->intermediate + D;
    double moe = m->arch == MODEL_MOE ? D * m->n_experts + ((double)m->n_experts + m->shared_experts) *
                                                               (3.0 * D * m->moe_intermediate + 4.0 * m->moe_intermediate + D)
                                      : 0;
    double layer = 4.0 * D * h * dh + 3.0 * h * dh + D + 2.0 * dh + 2.0 * D * m->norms_per_layer + (ffn > moe ? ffn : moe);
    return (double)m->layers * layer + 2.0 * D * m->vocab + ((double)m->max_pos + m->pos_offset) * D + 2.0 * D;
}

static int parse_model(const ParseCtx *pc, const cJSON *obj, ModelSpec *m)
{
    if (!cJSON_IsObject(obj)) {
        char got[80];
        describe(obj, got, sizeof got);
        return perr(pc, NULL, "expected an object, got %s", got);
    }
    memset(m, 0, sizeof *m);
    int moe = 0, plain = 0, layer_norm = 0, learned = 0;
    /* arch first: it decides which keys are allowed */
    if (get_choice(pc, obj, "arch", "dense", "moe", &moe)) return -1;
    if (check_keys(pc, obj, moe)) return -1;
    if (get_str(pc, obj, "name", 1, m->name, sizeof m->name)) return -1;
    if (get_str(pc, obj, "hf_id", 1, m->hf_id, sizeof m->hf_id)) return -1;
    if (get_str(pc, obj, "source", 1, NULL, 0)) return -1;
    if (get_str(pc, obj, "note", 0, NULL, 0)) return -1;
    if (get_aliases(pc, obj, m)) return -1;
    m->arch = moe ? MODEL_MOE : MODEL_DENSE;
    if (get_int(pc, obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, 0, &m->hidden) ||
        get_int(pc, obj, "num_layers", 1, 1, MODEL_MAX_LAYERS, 0, &m->layers) ||
        get_int(pc, obj, "num_heads", 1, 1, MODEL_MAX_HEADS, 0, &m->heads) ||
        get_int(pc, obj, "num_kv_heads", 1, 1, MODEL_MAX_HEADS, 0, &m->kv_heads) ||
        get_int(pc, obj, "head_dim", 1, 1, MODEL_MAX_HEAD_DIM, 0, &m->head_dim) ||
        get_int(pc, obj, "intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE, 0, &m->intermediate) ||
        get_int(pc, obj, "vocab_size", 1, 1, MODEL_MAX_VOCAB, 0, &m->vocab) ||
        get_int(pc, obj, "max_position_embeddings", 1, 1, MODEL_MAX_POSITIONS, 0, &m->max_pos))
        return -1;
    if (get_choice(pc, obj, "ffn", "gated", "plain", &plain) ||
        get_choice(pc, obj, "norm", "rmsnorm", "layernorm", &layer_norm) ||
        get_choice(pc, obj, "positional", "rope", "learned", &learned))
        return -1;
    m->gated_ffn = !plain;
    m->norm = layer_norm ? NORM_LAYER : NORM_RMS;
    m->pos = learned ? POS_LEARNED : POS_ROPE;
    if (get_bool(pc, obj, "tie_word_embeddings", 1, 0, &m->tied_embeddings) ||
        get_bool(pc, obj, "qk_norm", 0, 0, &m->qk_norm) ||
        get_bool(pc, obj, "attn_bias", 0, 0, &m->attn_bias) ||
        get_bool(pc, obj, "attn_out_bias", 0, 0, &m->attn_out_bias) ||
        get_bool(pc, obj, "ffn_bias", 0, 0, &m->ffn_bias))
        return -1;
    if (get_int(pc, obj, "norms_per_layer", 0, 1, INT_MAX, 2, &m->norms_per_layer) ||
        get_int(pc, obj, "position_offset", 0, 0, MODEL_MAX_POS_OFFSET, 0, &m->pos_offset) ||
        get_int(pc, obj, "sliding_window", 0, 0, MODEL_MAX_POSITIONS, 0, &m->sliding_window) ||
        get_i64(pc, obj, "published_params", 0, 0, (int64_t)MODEL_MAX_PARAMS, 0, &m->published_params) ||
        get_i64(pc, obj, "published_active_params", 0, 0, (int64_t)MODEL_MAX_PARAMS, 0, &m->published_active_params))
        return -1;
    if (moe) {
        if (get_int(pc, obj, "num_experts", 1, 1, MODEL_MAX_EXPERTS, 0, &m->n_experts) ||
            get_int(pc, obj, "experts_per_tok", 1, 1, MODEL_MAX_EXPERTS, 0, &m->experts_per_tok) ||
            get_int(pc, obj, "moe_intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE, 0, &m->moe_intermediate) ||
            get_int(pc, obj, "shared_experts", 0, 0, MODEL_MAX_EXPERTS, 0, &m->shared_experts) ||
            get_int(pc, obj, "dense_layers", 0, 0, MODEL_MAX_LAYERS, 0, &m->dense_layers))
            return -1;
    }

    /* cross-field rules */
    if (m->heads % m->kv_heads != 0)
        return perr(pc, "num_kv_heads", "%d does not divide num_heads %d", m->kv_heads, m->heads);
    if (m->norms_per_layer > 8)
        return perr(pc, "norms_per_layer", "expected 1..8, got %d", m->norms_per_layer);
    if (m->pos_offset > 0 && m->pos != POS_LEARNED)
        return perr(pc, "position_offset", "only valid with \"positional\": \"learned\"");
    if (moe) {
        if (m->experts_per_tok > m->n_experts)
            return perr(pc, "experts_per_tok", "%d exceeds num_experts %d", m->experts_per_tok, m->n_experts);
        if (m->dense_layers >= m->layers)
            return perr(pc, "dense_layers", "%d leaves no MoE layer among num_layers %d", m->dense_layers,
                        m->layers);
    }
    /* The products: every count, byte size and FLOP figure derived from the model is computed in
     * 64-bit integers or doubles; bounding the parameter count (an upper estimate in double, so it
     * cannot overflow itself) keeps weight bytes (<= 4 bytes each) and every intermediate product far
     * inside int64. KV bytes per token are bounded by the field ranges (2·4096·4096·4 B·4096 layers). */
    double est = params_upper_estimate(m);
    if (!(est <= MODEL_MAX_PARAMS))
        return perr(pc, NULL,
                    "about %.3g parameters (hidden_size %d, num_layers %d, intermediate_size %d, vocab_size %d%s), "
                    "out of the plausible range [1, %.0e]",
                    est, m->hidden, m->layers, m->intermediate, m->vocab, moe ? ", experts" : "", MODEL_MAX_PARAMS);
    return 0;
}

int model_catalog_parse(ModelCatalog *c, const char *json_text, const char *origin, KvErr *e)
{
    memset(c, 0, sizeof *c);
    if (!origin) origin = "(catalog)";
    snprintf(c->origin, sizeof c->origin, "%s", origin);
    if (!json_text) return kv_err(e, "%s: no text", origin);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json_text, &end, 1);
    if (!root) {
        int line, col;
        size_t off = end && end >= json_text ? (size_t)(end - json_text) : 0;
        line_col(json_text, off, &line, &col);
        const char *near = end ? end : "";
        int near_len = (int)strcspn(near, "\r\n");
        if (near_len > 20) near_len = 20;
        return kv_err(e, "%s: line %d, column %d: malformed JSON near '%.*s'", origin, line, col, near_len, near);
    }
    ParseCtx pc = {origin, -1, e};
    int rc = -1;
    const cJSON *models = NULL;
    KvNameIdx by_name = {0}, by_any = {0};
    if (!cJSON_IsObject(root)) {
        char got[80];
        describe(root, got, sizeof got);
        perr(&pc, NULL, "expected an object {\"models\": [...]}, got %s", got);
        goto done;
    }
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "models") != 0 && strcmp(it->string, "comment") != 0) {
            perr(&pc, it->string, "unknown key (expected \"models\" and optionally \"comment\")");
            goto done;
        }
    }
    models = cJSON_GetObjectItemCaseSensitive(root, "models");
    if (!models) {
        perr(&pc, "models", "missing (expected a non-empty array of models)");
        goto done;
    }
    if (!cJSON_IsArray(models) || cJSON_GetArraySize(models) == 0) {
        char got[80];
        describe(models, got, sizeof got);
        perr(&pc, "models", "expected a non-empty array of models, got %s", got);
        goto done;
    }
    int n = cJSON_GetArraySize(models);
    c->models = calloc((size_t)n, sizeof *c->models);
    if (!c->models) {
        kv_err(e, "%s: out of memory", origin);
        goto done;
    }
    /* the names of the models read so far: the "name" fields, and every name a look-up accepts
     * (the same checks as a scan of every earlier model, in O(1) expected per name) */
    if (kv_nameidx_init(&by_name, (size_t)n) != 0 || kv_nameidx_init(&by_any, (size_t)n * 2) != 0) {
        kv_err(e, "%s: out of memory", origin);
        goto done;
    }
    int i = 0;
    for (const cJSON *it = models->child; it; it = it->next, i++) {
        pc.idx = i;
        if (parse_model(&pc, it, &c->models[i])) goto done;
        int same = kv_nameidx_find(&by_name, c->models[i].name);
        if (same >= 0) {
            perr(&pc, "name", "\"%s\" already used by models[%d]", c->models[i].name, same);
            goto done;
        }
        /* every name a lookup accepts (name, hf_id, aliases) must name one model only */
        const ModelSpec *mi = &c->models[i];
        for (int k = 0; k < mi->n_aliases; k++) {
            int dup = strcasecmp(mi->aliases[k], mi->name) == 0 || strcasecmp(mi->aliases[k], mi->hf_id) == 0;
            for (int q = 0; q < k; q++) dup |= strcasecmp(mi->aliases[k], mi->aliases[q]) == 0;
            if (dup) {
                perr(&pc, "aliases", "\"%s\" given twice (already a name of this model)", mi->aliases[k]);
                goto done;
            }
        }
        int j = model_names_clash(&by_any, mi, -1, NULL);
        const char *dup = j >= 0 ? model_shared_name(&c->models[j], mi) : NULL;
        if (dup) {
            const char *key = strcasecmp(dup, mi->name) == 0 ? "name" : strcasecmp(dup, mi->hf_id) == 0 ? "hf_id" : "aliases";
            perr(&pc, key, "\"%s\" already names models[%d] (%s)", dup, j, c->models[j].name);
            goto done;
        }
        if (kv_nameidx_add(&by_name, mi->name, i) || model_names_add(&by_any, mi, i)) {
            kv_err(e, "%s: out of memory", origin);
            goto done;
        }
    }
    c->n = n;
    rc = 0;
done:
    kv_nameidx_free(&by_name);
    kv_nameidx_free(&by_any);
    cJSON_Delete(root);
    if (rc != 0) {
        free(c->models);
        c->models = NULL;
        c->n = 0;
    }
    return rc;
}

int model_catalog_load(ModelCatalog *c, const char *override_path, KvErr *e)
{
    memset(c, 0, sizeof *c);
    char origin[512];
    char *text = kv_catalog_text("configs/models.json", override_path, origin, sizeof origin, e);
    if (!text) return -1;
    int rc = model_catalog_parse(c, text, origin, e);
    free(text);
    return rc;
}

int model_catalog_overlay(ModelCatalog *c, const char *json_text, const char *origin, KvErr *e)
{
    if (!origin) origin = "(overlay)";
    ModelCatalog ov;
    if (model_catalog_parse(&ov, json_text, origin, e) != 0) return -1;
    ModelSpec *out = calloc((size_t)(c->n + ov.n), sizeof *out);
    if (!out) {
        model_catalog_free(&ov);
        return kv_err(e, "%s: out of memory", origin);
    }
    if (c->n) memcpy(out, c->models, (size_t)c->n * sizeof *out);
    int n = c->n;
    ParseCtx pc = {origin, -1, e};
    /* the base's names ("name" fields; every name a look-up accepts) and which base models an
     * earlier overlay model replaced (their names are the overlay's own, checked by the parse) */
    KvNameIdx by_name = {0}, by_any = {0};
    unsigned char *gone = calloc((size_t)c->n + 1, 1);
    int oom = !gone || kv_nameidx_init(&by_name, (size_t)c->n) || kv_nameidx_init(&by_any, (size_t)c->n * 2);
    for (int j = 0; j < c->n && !oom; j++)
        oom = kv_nameidx_add(&by_name, c->models[j].name, j) || model_names_add(&by_any, &c->models[j], j);
    int rc = oom ? kv_err(e, "%s: out of memory", origin) : 0;
    for (int i = 0; i < ov.n && rc == 0; i++) {
        const ModelSpec *mi = &ov.models[i];
        int k = kv_nameidx_find(&by_name, mi->name); /* the base model this one replaces: same name */
        /* every name a lookup accepts must still name one model: check against the base models it
         * does not replace (the overlay's own names were checked by model_catalog_parse) */
        int j = model_names_clash(&by_any, mi, k, gone);
        const char *dup = j >= 0 ? model_shared_name(&out[j], mi) : NULL;
        if (dup) {
            pc.idx = i;
            const char *key = strcasecmp(dup, mi->name) == 0 ? "name" : strcasecmp(dup, mi->hf_id) == 0 ? "hf_id" : "aliases";
            rc = perr(&pc, key, "\"%s\" already names %s's model %s (an overlay model replaces a catalog model of the same "
                      "name only)", dup, c->origin, out[j].name);
            break;
        }
        if (k >= 0) gone[k] = 1;
        out[k >= 0 ? k : n++] = *mi;
    }
    kv_nameidx_free(&by_name);
    kv_nameidx_free(&by_any);
    free(gone);
    if (rc != 0) {
        free(out);
        model_catalog_free(&ov);
        return -1;
    }
    model_catalog_free(&ov);
    free(c->models);
    c->models = out;
    c->n = n;
    char both[sizeof c->origin];
    snprintf(both, sizeof both, "%s + %s", c->origin, origin);
    memcpy(c->origin, both, sizeof both);
    return 0;
}

int model_catalog_overlay_file(ModelCatalog *c, const char *path, KvErr *e)
{
    char *text = kv_read_file(path, NULL, e);
    if (!text) return kv_err_prefix(e, "models overlay: ");
    int rc = model_catalog_overlay(c, text, path, e);
    free(text);
    return rc;
}

void model_catalog_free(ModelCatalog *c)
{
    if (!c) return;
    free(c->models);
    c->models = NULL;
    c->n = 0;
}

const ModelSpec *model_find(const ModelCatalog *c, const char *name, KvErr *e)
{
    for (int i = 0; name && i < c->n; i++)
        if (model_answers_to(&c->models[i], name)) return &c->models[i];
    char known[900] = "";
    for (int i = 0; i < c->n; i++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", c->models[i].name);
    }
    kv_err(e, "unknown model '%s' in %s (known: %s; or a Hugging Face id that `kvsim list models` shows)",
           name ? name : "(null)", c->origin, known);
    return NULL;
}

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
