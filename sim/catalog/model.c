/* model.c — the model catalog (configs/models.json): parsing and validating it, overlays, name
 * look-ups. The arithmetic derived from an architecture is in model_arch.c; the contract of both
 * is model.h.
 *
 * Responsible for: parsing and validating the catalog (every field: type, range, cross-field rules,
 * a bound on the parameter count that keeps model_arch.c's products in range), overlays, name lookup.
 * Not responsible for: the quantities derived from a model (model_arch.c), time (cost.c, spec.c),
 * hardware (hw.c), simulated state.
 *
 * Catalog format: {"comment": "...", "models": [ {model}, ... ]}. Keys of a model object:
 *   required: name, hf_id, arch ("dense"|"moe"), hidden_size, num_layers, num_heads, num_kv_heads,
 *             head_dim, intermediate_size, vocab_size, max_position_embeddings, ffn ("gated"|"plain"),
 *             norm ("rmsnorm"|"layernorm"), positional ("rope"|"learned"), tie_word_embeddings, source
 *   optional: norms_per_layer (2), qk_norm (false), position_offset (0; learned positions only),
 *             attn_bias (false; q,k,v), attn_out_bias (false; o), ffn_bias (false),
 *             sliding_window (0), published_params (0), published_active_params (0), note,
 *             aliases (an array of at most MODEL_MAX_ALIASES other names, e.g. Hugging Face ids of
 *             variants with the same architecture; names, hf_ids and aliases are unique over the catalog)
 *   MoE (required when arch is "moe", refused otherwise): num_experts, experts_per_tok,
 *             moe_intermediate_size; optional shared_experts (0), dense_layers (0).
 * Unknown keys and keys given twice are refused (they are usually typos). Names shared by two models
 * are found through a name index (sim/base/nameidx.h): O(models) expected, for a catalog of any size.
 * Messages about refused JSON (malformed text, the value found) come from json_msg.h, as hw.c's do.
 * Invariants: a ModelCatalog that parsed is fully validated and const afterwards; on failure it is
 * left empty (n == 0, models == NULL).
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
#include "sim/catalog/json_msg.h"

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
    kv_json_describe(v, got, sizeof got);
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
        kv_json_describe(v, got, sizeof got);
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
        kv_json_describe(v, got, sizeof got);
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
        kv_json_describe(v, got, sizeof got);
        return perr(pc, "aliases", "expected an array of names, got %s", got);
    }
    if (cJSON_GetArraySize(v) > MODEL_MAX_ALIASES)
        return perr(pc, "aliases", "%d names: at most %d allowed", cJSON_GetArraySize(v), MODEL_MAX_ALIASES);
    int k = 0;
    for (const cJSON *it = v->child; it; it = it->next, k++) {
        if (!cJSON_IsString(it) || !it->valuestring[0]) {
            kv_json_describe(it, got, sizeof got);
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
    kv_json_describe(v, got, sizeof got);
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
        kv_json_describe(obj, got, sizeof got);
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
    if (!json_text) return kv_err(e, "%s: no text to parse", origin);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json_text, &end, 1);
    if (!root) return kv_json_syntax_error(e, origin, json_text, end ? end : cJSON_GetErrorPtr());
    ParseCtx pc = {origin, -1, e};
    int rc = -1;
    const cJSON *models = NULL;
    KvNameIdx by_name = {0}, by_any = {0};
    if (!cJSON_IsObject(root)) {
        char got[80];
        kv_json_describe(root, got, sizeof got);
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
        kv_json_describe(models, got, sizeof got);
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
