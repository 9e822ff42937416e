/* test_model.c — sim/catalog/model.c and model_arch.c: the catalog (configs/models.json) against the reference numbers of
 * shared/reference/models.json and docs/REFERENCE.md §A/§A2 (hard-coded here), derived bytes per
 * token, weight bytes per GPU, layouts, FLOPs/bytes/shapes of the ops on hand-computed cases, and
 * every error path of the parser and the layout check.
 */
#include <stdlib.h>

#include "tests/harness.h"
#include "sim/catalog/model.h"

/* Reference values: params_total_computed, kv_bytes_per_token_fp16, hidden_bytes_per_token_fp16. */
static const struct {
    const char *name;
    int64_t params;
    uint64_t kv_bytes;
    uint64_t hidden_bytes;
} g_ref[] = {
    {"Llama-2-7B", 6738415616LL, 524288, 262144},
    {"Llama-2-13B", 13015864320LL, 819200, 409600},
    {"OPT-30B", 29974540288LL, 1376256, 688128},
    {"Llama-3.1-8B", 8030261248LL, 131072, 262144},
    {"Llama-3.1-70B", 70553706496LL, 327680, 1310720},
    {"Llama-3.1-405B", 405853388800LL, 516096, 4128768},
    {"Qwen3-8B", 8190735360LL, 147456, 294912},
    {"Qwen3-30B-A3B", 30532122624LL, 98304, 196608},
    {"Qwen2.5-7B", 7615616512LL, 57344, 200704},
    {"Mistral-7B-v0.3", 7248023552LL, 131072, 262144},
    {"Gemma-2-9B", 9241705984LL, 344064, 301056},
    {"Tiny-Llama-V", 56893952LL, 4096, 8192}, /* kvsim's validation model (docs/validation.md) */
};

static const ModelSpec *find_or_fail(TestCtx *t, const ModelCatalog *c, const char *name)
{
    KvErr e = {{0}};
    const ModelSpec *m = model_find(c, name, &e);
    CHECK_MSG(m != NULL, "model_find(%s): %s", name, e.msg);
    return m;
}

/* A tiny valid model object: D 64, 2 layers, 4 heads, 2 KV heads, d_h 16, I 128, vocab 100. */
static void tiny(char *buf, size_t n, const char *name, const char *extra)
{
    snprintf(buf, n,
             "{\"name\": \"%s\", \"hf_id\": \"test/tiny\", \"arch\": \"dense\", \"hidden_size\": 64,\n"
             " \"num_layers\": 2, \"num_heads\": 4, \"num_kv_heads\": 2, \"head_dim\": 16,\n"
             " \"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 512,\n"
             " \"ffn\": \"gated\", \"norm\": \"rmsnorm\", \"positional\": \"rope\",\n"
             " \"tie_word_embeddings\": false, \"source\": \"hand-made for tests\"%s}",
             name, extra ? extra : "");
}

/* Parse a one-model catalog built from tiny() + extra keys; returns the parse status. */
static int parse_tiny(ModelCatalog *c, const char *extra, KvErr *e)
{
    char obj[2048], doc[2200];
    tiny(obj, sizeof obj, "Tiny", extra);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    return model_catalog_parse(c, doc, "tiny.json", e);
}

TEST(model_dtype_parse_and_bytes)
{
    KvErr e = {{0}};
    KvDtype d;
    CHECK(kv_dtype_parse("fp16", &d, &e) == 0 && d == KV_DT_FP16);
    CHECK(kv_dtype_parse("BF16", &d, &e) == 0 && d == KV_DT_BF16);
    CHECK(kv_dtype_parse("int4", &d, &e) == 0 && d == KV_DT_INT4);
    CHECK(kv_dtype_bytes(KV_DT_FP32) == 4.0);
    CHECK(kv_dtype_bytes(KV_DT_FP16) == 2.0);
    CHECK(kv_dtype_bytes(KV_DT_BF16) == 2.0);
    CHECK(kv_dtype_bytes(KV_DT_FP8) == 1.0);
    CHECK(kv_dtype_bytes(KV_DT_INT8) == 1.0);
    CHECK(kv_dtype_bytes(KV_DT_INT4) == 0.5);
    for (int i = 0; i < KV_DT_COUNT; i++) {
        CHECK(kv_dtype_parse(kv_dtype_name((KvDtype)i), &d, &e) == 0);
        CHECK_EQ_I(d, i);
    }
    CHECK(kv_dtype_name(KV_DT_COUNT) == NULL);
    CHECK(kv_dtype_parse("fp12", &d, &e) == -1);
    CHECK_CONTAINS(e.msg, "fp12");
    CHECK_CONTAINS(e.msg, "int4");
}

TEST(model_catalog_has_every_reference_model)
{
    ModelCatalog c;
    KvErr e = {{0}};
    CHECK_MSG(model_catalog_load(&c, NULL, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(c.n, (int)KV_ARRAY_LEN(g_ref));
    for (size_t i = 0; i < KV_ARRAY_LEN(g_ref); i++) find_or_fail(t, &c, g_ref[i].name);
    /* case-insensitive lookup */
    const ModelSpec *m = model_find(&c, "llama-3.1-8b", &e);
    CHECK(m != NULL && strcmp(m->name, "Llama-3.1-8B") == 0);
    model_catalog_free(&c);
    CHECK(c.models == NULL && c.n == 0);
}

TEST(model_catalog_file_in_tree_parses)
{
    ModelCatalog c;
    KvErr e = {{0}};
    const char *path = test_path("configs/models.json");
    CHECK_MSG(model_catalog_load(&c, path, &e) == 0, "%s", e.msg);
    CHECK_STR(c.origin, path);
    CHECK_EQ_I(c.n, (int)KV_ARRAY_LEN(g_ref));
    model_catalog_free(&c);
}

TEST(model_params_match_reference)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    for (size_t i = 0; i < KV_ARRAY_LEN(g_ref); i++) {
        const ModelSpec *m = find_or_fail(t, &c, g_ref[i].name);
        if (!m) continue;
        int64_t p = model_params_total(m);
        CHECK_MSG(p == g_ref[i].params, "%s: params %lld, reference %lld", m->name, (long long)p,
                  (long long)g_ref[i].params);
        /* and the published headline figure, which is rounded (Qwen3-30B-A3B active 3.35 vs 3.3) */
        CHECK_MSG(m->published_params > 0, "%s: no published_params", m->name);
        CHECK_NEAR(p, m->published_params, 0.02, 0);
        if (m->arch == MODEL_DENSE) CHECK_EQ_I(model_params_active(m), p);
    }
    model_catalog_free(&c);
}

TEST(model_bytes_per_token_match_reference)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    for (size_t i = 0; i < KV_ARRAY_LEN(g_ref); i++) {
        const ModelSpec *m = find_or_fail(t, &c, g_ref[i].name);
        if (!m) continue;
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        uint64_t kv = model_kv_bytes_per_token(&ly), hid = model_hidden_bytes_per_token(&ly);
        CHECK_MSG(kv == g_ref[i].kv_bytes, "%s: KV %llu B/token, reference %llu", m->name,
                  (unsigned long long)kv, (unsigned long long)g_ref[i].kv_bytes);
        CHECK_MSG(hid == g_ref[i].hidden_bytes, "%s: hidden %llu B/token, reference %llu", m->name,
                  (unsigned long long)hid, (unsigned long long)g_ref[i].hidden_bytes);
        CHECK_EQ_U(model_boundary_bytes_per_token(&ly), (uint64_t)m->hidden * 2);
        /* bf16 = fp16, fp32 doubles, int4 quarters */
        ly.dtype = KV_DT_BF16;
        CHECK_EQ_U(model_kv_bytes_per_token(&ly), g_ref[i].kv_bytes);
        ly.dtype = KV_DT_FP32;
        CHECK_EQ_U(model_kv_bytes_per_token(&ly), 2 * g_ref[i].kv_bytes);
        ly.dtype = KV_DT_INT4;
        CHECK_EQ_U(model_kv_bytes_per_token(&ly), g_ref[i].kv_bytes / 4);
    }
    model_catalog_free(&c);
}

TEST(model_llama2_7b_hand_values)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Llama-2-7B");
    if (m) {
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        /* 2 (K,V) · 32 layers · 32 heads · 128 · 2 B */
        CHECK_EQ_U(model_kv_bytes_per_token(&ly), 524288);
        CHECK_EQ_U(model_hidden_bytes_per_token(&ly), 262144); /* 32 · 4096 · 2 */
        CHECK_EQ_U(model_kv_bytes_per_token_layer(&ly), 16384);
        CHECK_EQ_U(model_hidden_bytes_per_token_layer(&ly), 8192);
        CHECK_EQ_U(model_kv_bytes_per_token_layer_gpu(&ly), 16384);
        ly.tp = 2;
        CHECK_EQ_U(model_kv_bytes_per_token_layer_gpu(&ly), 8192);
        CHECK_EQ_U(model_kv_bytes_per_token_layer(&ly), 16384); /* whole layer unchanged */
        /* per layer: 4·D² attention + 3·D·I FFN + 2·D norms */
        CHECK_EQ_I(model_layer_params(m, 0), 4LL * 4096 * 4096 + 3LL * 4096 * 11008 + 2 * 4096);
        CHECK_EQ_I(model_layer_params(m, 32), 0); /* out of range */
    }
    model_catalog_free(&c);
}

TEST(model_gqa_kv_is_half_of_hidden_llama31_8b)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Llama-3.1-8B");
    if (m) {
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        double ratio = (double)model_kv_bytes_per_token(&ly) / (double)model_hidden_bytes_per_token(&ly);
        CHECK(ratio == 0.5);
    }
    model_catalog_free(&c);
}

TEST(model_qwen3_moe_total_vs_active)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Qwen3-30B-A3B");
    if (m) {
        CHECK(m->arch == MODEL_MOE);
        CHECK_EQ_I(model_params_total(m), 30532122624LL);
        CHECK_EQ_I(model_params_active(m), 3353032704LL);
        CHECK_NEAR(model_params_active(m), m->published_active_params, 0.02, 0);
        /* one layer: attention 2048·(32+8)·128 + 4096·2048, norms 2·2048 + q/k norms 2·128,
         * router 2048·128, experts 3·2048·768 each (128 stored, 8 active) */
        int64_t attn = 2048LL * 40 * 128 + 4096LL * 2048, norms = 2 * 2048 + 2 * 128, router = 2048 * 128;
        int64_t expert = 3LL * 2048 * 768;
        CHECK_EQ_I(model_layer_params(m, 5), attn + norms + router + 128 * expert);
        CHECK_EQ_I(model_layer_params_active(m, 5), attn + norms + router + 8 * expert);
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        CHECK_EQ_U(model_kv_bytes_per_token(&ly), 98304); /* 2·48·4·128·2 */
        /* MoE up GEMM for 16 tokens: router 2·16·2048·128 + 8 experts · 2·16·2048·(2·768) */
        CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_UP, 16, 0), 2.0 * 16 * 2048 * 128 + 8 * 2.0 * 16 * 2048 * 1536,
                   1e-12, 0);
        CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_DOWN, 16, 0), 8 * 2.0 * 16 * 768 * 2048, 1e-12, 0);
        int64_t M, N, K;
        CHECK(model_gemm_shape(&ly, OP_GEMM_FFN_UP, 64, &M, &N, &K) == 1);
        CHECK_EQ_I(M, 4); /* 64 tokens · 8 / 128 experts */
        CHECK_EQ_I(N, 1536);
        CHECK_EQ_I(K, 2048);
        /* all 128 experts' weights are read once for a large batch, only a few for one token */
        double big = model_op_bytes(&ly, OP_GEMM_FFN_DOWN, 4096, 0);
        double one = model_op_bytes(&ly, OP_GEMM_FFN_DOWN, 1, 0);
        CHECK(big > 128 * 768.0 * 2048 * 2 * 0.99);
        CHECK(one < 9 * 768.0 * 2048 * 2);
    }
    model_catalog_free(&c);
}

TEST(model_gqa_tp8_and_tp16_replicate_kv_heads)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m8 = find_or_fail(t, &c, "Llama-3.1-8B");
    const ModelSpec *m70 = find_or_fail(t, &c, "Llama-3.1-70B");
    if (m8 && m70) {
        ModelLayout ly = {m8, KV_DT_FP16, 8, 1};
        CHECK_MSG(model_layout_check(&ly, &e) == 0, "%s", e.msg);
        CHECK_EQ_I(model_kv_heads_per_gpu(&ly), 1);
        CHECK_EQ_U(model_kv_bytes_per_token_layer_gpu(&ly), 2 * 1 * 128 * 2);
        ly.tp = 4;
        CHECK_EQ_I(model_kv_heads_per_gpu(&ly), 2);

        ModelLayout l70 = {m70, KV_DT_FP16, 16, 1};
        CHECK_MSG(model_layout_check(&l70, &e) == 0, "%s", e.msg);
        CHECK_EQ_I(model_kv_heads_per_gpu(&l70), 1); /* max(1, 8/16) */
        CHECK_EQ_U(model_kv_bytes_per_token_layer_gpu(&l70), 512);
        CHECK_EQ_U(model_kv_bytes_per_token_layer(&l70), 2 * 8 * 128 * 2); /* replicas counted once */
        CHECK_EQ_U(model_kv_bytes_per_token(&l70), 327680);
        /* Q: 64/16 = 4 heads, K and V one head each: 2·t·D·(4 + 2)·128 for t = 1 */
        CHECK_NEAR(model_op_flops(&l70, OP_GEMM_QKV, 1, 0), 2.0 * 8192 * 6 * 128, 1e-12, 0);
        int64_t M, N, K;
        CHECK(model_gemm_shape(&l70, OP_GEMM_QKV, 32, &M, &N, &K) == 1);
        CHECK(M == 32 && N == 6 * 128 && K == 8192);
        CHECK(model_gemm_shape(&l70, OP_GEMM_KV_PROJ, 32, &M, &N, &K) == 1);
        CHECK(M == 32 && N == 2 * 128 && K == 8192);
        CHECK(model_gemm_shape(&l70, OP_GEMM_O, 32, &M, &N, &K) == 1);
        CHECK(M == 32 && N == 8192 && K == 4 * 128);
        CHECK(model_gemm_shape(&l70, OP_ATTN_PREFILL, 32, &M, &N, &K) == 0);
    }
    model_catalog_free(&c);
}

TEST(model_pp_stage_layer_split)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.layers = 40;
    ModelLayout ly = {&m, KV_DT_FP16, 1, 3};
    int first, count;
    model_stage_layers(&ly, 0, &first, &count);
    CHECK(first == 0 && count == 14);
    model_stage_layers(&ly, 1, &first, &count);
    CHECK(first == 14 && count == 13);
    model_stage_layers(&ly, 2, &first, &count);
    CHECK(first == 27 && count == 13);
    /* every split covers all layers exactly once, counts differ by at most one */
    for (int S = 1; S <= 40; S++) {
        ly.pp = S;
        int next = 0, lo = 1 << 30, hi = 0;
        for (int s = 0; s < S; s++) {
            model_stage_layers(&ly, s, &first, &count);
            CHECK_EQ_I(first, next);
            next = first + count;
            if (count < lo) lo = count;
            if (count > hi) hi = count;
        }
        CHECK_EQ_I(next, 40);
        CHECK(hi - lo <= 1 && lo >= 1);
    }
}

TEST(model_weight_bytes_per_gpu)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Llama-2-7B");
    const ModelSpec *g = find_or_fail(t, &c, "Gemma-2-9B");
    if (m && g) {
        ModelLayout ly = {m, KV_DT_FP16, 1, 1};
        CHECK_EQ_U(model_weight_bytes_per_gpu(&ly), 2ull * 6738415616ULL);
        /* TP 2: matrices and vocab-parallel embedding/lm_head halved, the 65 RMSNorm weight
         * vectors (2 per layer + final) replicated: (P + 65·4096)/2 params, 2 B each */
        ly.tp = 2;
        CHECK_EQ_U(model_weight_bytes_per_gpu(&ly), 6738415616ULL + 65ULL * 4096);
        CHECK_NEAR(model_weight_bytes_per_gpu(&ly), 6738415616.0, 1e-4, 0);
        /* PP 2: stage 0 = 16 layers + embedding, stage 1 = 16 layers + final norm + lm_head */
        ly.tp = 1;
        ly.pp = 2;
        uint64_t layer = 2ull * 202383360ULL, emb = 2ull * 32000 * 4096;
        CHECK_EQ_U(model_stage_weight_bytes_per_gpu(&ly, 0), 16 * layer + emb);
        CHECK_EQ_U(model_stage_weight_bytes_per_gpu(&ly, 1), 16 * layer + emb + 2 * 4096);
        CHECK_EQ_U(model_weight_bytes_per_gpu(&ly), 16 * layer + emb + 2 * 4096);
        CHECK_EQ_U(model_stage_weight_bytes_per_gpu(&ly, 2), 0);
        /* int4 weights: a quarter of fp16 */
        ly.pp = 1;
        ly.dtype = KV_DT_INT4;
        CHECK_EQ_U(model_weight_bytes_per_gpu(&ly), 6738415616ULL / 2);

        /* tied embeddings: counted once on one stage, but both ends hold a copy with S = 2 */
        ModelLayout lg = {g, KV_DT_BF16, 1, 1};
        CHECK_EQ_U(model_weight_bytes_per_gpu(&lg), 2ull * 9241705984ULL);
        lg.pp = 2;
        uint64_t sum = model_stage_weight_bytes_per_gpu(&lg, 0) + model_stage_weight_bytes_per_gpu(&lg, 1);
        CHECK_EQ_U(sum, 2ull * 9241705984ULL + 2ull * 256000 * 3584);
    }
    model_catalog_free(&c);
}

TEST(model_op_flops_small_hand_case)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (parse_tiny(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    ModelLayout ly = {&c.models[0], KV_DT_FP16, 1, 1};
    CHECK_MSG(model_layout_check(&ly, &e) == 0, "%s", e.msg);
    /* D 64, h 4, h_kv 2, d_h 16, I 128; t = 10 */
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_QKV, 10, 0), 2.0 * 10 * 64 * (4 + 4) * 16, 1e-12, 0); /* 163840 */
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_O, 10, 0), 2.0 * 10 * 64 * 64, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_UP, 10, 0), 2.0 * 10 * 64 * 256, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_DOWN, 10, 0), 2.0 * 10 * 128 * 64, 1e-12, 0);
    /* K,V GEMM 2·10·64·64 = 81920 plus RoPE on K: 3·10·2·16 = 960 */
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_KV_PROJ, 10, 0), 81920.0 + 960.0, 1e-12, 0);
    /* 8 new after 4 cached: pairs 8·4 + 8·9/2 = 68; 4·4·16·68 = 17408 */
    CHECK_NEAR(model_op_flops(&ly, OP_ATTN_PREFILL, 8, 4), 17408.0, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ATTN_PREFILL, 1, 0), 4.0 * 4 * 16, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ATTN_DECODE, 3, 100), 4.0 * 4 * 16 * 100, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ROPE, 10, 0), 3.0 * 10 * (4 + 2) * 16, 1e-12, 0);
    CHECK(model_op_flops(&ly, OP_H2D, 1 << 20, 0) == 0);
    CHECK(model_op_flops(&ly, OP_SSD_READ, 1 << 20, 8) == 0);
    CHECK(model_op_flops(&ly, OP_ALLREDUCE, 10, 0) == 0); /* T = 1 */
    CHECK(model_op_flops(&ly, OP_GEMM_QKV, -5, 0) == 0);
    /* one RMSNorm: 4 FLOPs per element of t·D; SwiGLU: 5 per element of t·I */
    CHECK_NEAR(model_op_flops(&ly, OP_NORM, 8, 0), 4.0 * 8 * 64, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ACT, 8, 0), 5.0 * 8 * 128, 1e-12, 0);
    /* the layer = its GEMMs + attention + 2 norms + activation + RoPE + 2 residual adds (2·t·D) */
    double parts = 0;
    const CostOp ops[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_NORM, OP_NORM, OP_ACT, OP_ROPE};
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) parts += model_op_flops(&ly, ops[i], 8, 0);
    parts += model_op_flops(&ly, OP_ATTN_PREFILL, 8, 4) + 2.0 * 8 * 64;
    CHECK_NEAR(model_op_flops(&ly, OP_LAYER_PREFILL, 8, 4), parts, 1e-12, 0);
    CHECK_NEAR(model_layer_prefill_flops(&ly, 0, 8, 4), parts, 1e-12, 0);
    CHECK_NEAR(model_prefill_flops(&ly, 8, 4), 2 * parts, 1e-12, 0);
    /* bytes of one norm: read and write t·D, weights D (fp16) */
    CHECK_NEAR(model_op_bytes(&ly, OP_NORM, 8, 0), 2.0 * (2 * 8 * 64 + 64), 1e-12, 0);
    double bparts = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) bparts += model_op_bytes(&ly, ops[i], 8, 0);
    bparts += model_op_bytes(&ly, OP_ATTN_PREFILL, 8, 4) + 2.0 * 2 * 3 * 8 * 64;
    CHECK_NEAR(model_op_bytes(&ly, OP_LAYER_PREFILL, 8, 4), bparts, 1e-12, 0);

    /* bytes, fp16: weights N·K + input M·K + output M·N, 2 B each */
    CHECK_NEAR(model_op_bytes(&ly, OP_GEMM_QKV, 10, 0), 2.0 * (128 * 64 + 10 * 64 + 10 * 128), 1e-12, 0);
    /* decode: KV of 100 tokens (2·2·16 elements each) + Q and O of 3 requests (4·16 each) */
    CHECK_NEAR(model_op_bytes(&ly, OP_ATTN_DECODE, 3, 100), 2.0 * (100 * 64 + 2 * 3 * 64), 1e-12, 0);
    /* prefill attention: Q and O of 8 rows, K and V of 12 tokens */
    CHECK_NEAR(model_op_bytes(&ly, OP_ATTN_PREFILL, 8, 4), 2.0 * (2 * 8 * 64 + 12 * 64), 1e-12, 0);
    CHECK(model_op_bytes(&ly, OP_H2D, 4096, 0) == 0);
    int64_t M, N, K;
    CHECK(model_gemm_shape(&ly, OP_GEMM_QKV, 10, &M, &N, &K) == 1 && M == 10 && N == 128 && K == 64);
    CHECK(model_gemm_shape(&ly, OP_GEMM_FFN_UP, 10, &M, &N, &K) == 1 && N == 256 && K == 64);
    CHECK(model_gemm_shape(&ly, OP_GEMM_FFN_DOWN, 10, &M, &N, &K) == 1 && N == 64 && K == 128);

    /* TP 2: 2 query heads, 1 KV head per GPU */
    ly.tp = 2;
    CHECK_MSG(model_layout_check(&ly, &e) == 0, "%s", e.msg);
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_QKV, 10, 0), 2.0 * 10 * 64 * (2 + 2) * 16, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ATTN_PREFILL, 8, 4), 17408.0 / 2, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_UP, 10, 0), 2.0 * 10 * 64 * 128, 1e-12, 0);
    CHECK_NEAR(model_op_flops(&ly, OP_ALLREDUCE, 10, 0), 2.0 * 10 * 64 / 2, 1e-12, 0);
    CHECK_NEAR(model_op_bytes(&ly, OP_ALLGATHER, 10, 0), 10.0 * 64 * 2 / 2, 1e-12, 0);
    model_catalog_free(&c);
}

TEST(model_op_flops_bias_window_moe_variants)
{
    ModelCatalog c;
    KvErr e = {{0}};
    /* q,k,v biases add one FLOP per output element */
    if (parse_tiny(&c, ", \"attn_bias\": true", &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    ModelLayout ly = {&c.models[0], KV_DT_FP16, 1, 1};
    CHECK_NEAR(model_op_flops(&ly, OP_GEMM_QKV, 10, 0), 163840.0 + 10 * 128, 1e-12, 0);
    CHECK_EQ_I(model_layer_params(&c.models[0], 0), 64LL * 128 + 64 * 64 + 128 + 2 * 64 + 3LL * 64 * 128);
    model_catalog_free(&c);

    /* Gemma-2 style window 4: layer 0 local, layer 1 global; 8 new tokens from 0:
     * pairs 1+2+3+4+4·4 = 26 vs 36 */
    CHECK(parse_tiny(&c, ", \"sliding_window\": 4", &e) == 0);
    ly.m = &c.models[0];
    double d01 = model_layer_prefill_flops(&ly, 0, 8, 0) - model_layer_prefill_flops(&ly, 1, 8, 0);
    CHECK_NEAR(d01, 4.0 * 4 * 16 * (26 - 36), 1e-12, 0);
    /* cached prefix past the window: every new token sees 4 keys */
    d01 = model_layer_prefill_flops(&ly, 0, 8, 100) - model_layer_prefill_flops(&ly, 1, 8, 100);
    CHECK_NEAR(d01, 4.0 * 4 * 16 * (8 * 4 - (8 * 100 + 36)), 1e-12, 0);
    /* the op functions describe the last layer (global) */
    CHECK_NEAR(model_op_flops(&ly, OP_ATTN_PREFILL, 8, 0), 4.0 * 4 * 16 * 36, 1e-12, 0);
    CHECK(model_layer_prefill_flops(&ly, 2, 8, 0) == 0);
    model_catalog_free(&c);

    /* MoE: 4 experts of width 32, 2 per token; first layer dense */
    char doc[2400], obj[2048];
    tiny(obj, sizeof obj, "TinyMoE", ", \"num_experts\": 4, \"experts_per_tok\": 2, \"moe_intermediate_size\": 32,"
                                     " \"dense_layers\": 1");
    char *arch = strstr(obj, "\"dense\"");
    memcpy(arch, "\"moe\"  ", 7);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK_MSG(model_catalog_parse(&c, doc, "moe.json", &e) == 0, "%s", e.msg);
    if (c.n == 1) {
        const ModelSpec *m = &c.models[0];
        ly.m = m;
        /* router 2·10·64·4 + 2 experts · 2·10·64·(2·32) */
        CHECK_NEAR(model_op_flops(&ly, OP_GEMM_FFN_UP, 10, 0), 5120.0 + 2 * 81920.0, 1e-12, 0);
        int64_t M, N, K;
        CHECK(model_gemm_shape(&ly, OP_GEMM_FFN_DOWN, 10, &M, &N, &K) == 1 && M == 5 && N == 64 && K == 32);
        int64_t attn = 64LL * 128 + 64 * 64, norms = 2 * 64;
        CHECK_EQ_I(model_layer_params(m, 0), attn + norms + 3LL * 64 * 128);            /* dense */
        CHECK_EQ_I(model_layer_params(m, 1), attn + norms + 64 * 4 + 4 * 3LL * 64 * 32); /* MoE */
        CHECK_EQ_I(model_layer_params_active(m, 1), attn + norms + 64 * 4 + 2 * 3LL * 64 * 32);
        CHECK_EQ_I(model_layer_params_active(m, 0), model_layer_params(m, 0));
    }
    model_catalog_free(&c);
}

TEST(model_prefill_flops_llama31_8b_4096)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Llama-3.1-8B");
    if (m) {
        int64_t in_layers = 0;
        for (int l = 0; l < m->layers; l++) in_layers += model_layer_params(m, l);
        CHECK_EQ_I(in_layers, 6979584000LL);
        double n = 4096;
        double attn = 32.0 * 4 * 32 * 128 * (n * (n + 1) / 2); /* L · 4·h·d_h · n(n+1)/2 */
        double expect = 2.0 * (double)in_layers * n + attn;
        ModelLayout ly = {m, KV_DT_BF16, 1, 1};
        double f = model_prefill_flops(&ly, 4096, 0);
        CHECK_NEAR(f, expect, 0.01, 0);
        CHECK_NEAR(f, 61.6e12, 0.01, 0); /* REFERENCE.md worked example: 57.2 + ~4.4 TFLOP */
        /* independent of S; TP 2 only adds the replicated norm work */
        ly.pp = 4;
        CHECK(model_prefill_flops(&ly, 4096, 0) == f);
        ly.pp = 1;
        ly.tp = 2;
        CHECK_NEAR(model_prefill_flops(&ly, 4096, 0), f, 1e-3, 0);
        /* a cached prefix adds only attention: n·c more pairs per head */
        ly.tp = 1;
        double more = model_prefill_flops(&ly, 4096, 1000) - f;
        CHECK_NEAR(more, 32.0 * 4 * 32 * 128 * 4096 * 1000, 1e-9, 0);
    }
    model_catalog_free(&c);
}

/* ---- error paths ---- */

TEST(model_error_malformed_json_names_file_and_line)
{
    ModelCatalog c;
    KvErr e = {{0}};
    const char *path = test_write_file(t, "bad.json", "{\n  \"models\": [\n    {\"name\": \"x\",,}\n  ]\n}\n");
    CHECK(model_catalog_load(&c, path, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "bad.json:3:19: malformed JSON near \"}\""); /* hw.c's format (json_msg.h) */
    CHECK(c.n == 0 && c.models == NULL);
    CHECK(model_catalog_parse(&c, "", "empty.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "empty.json:1:1: malformed JSON");
    CHECK(model_catalog_parse(&c, NULL, "null.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "null.json: no text to parse"); /* as hw.c says it */
}

TEST(model_error_missing_override_file)
{
    ModelCatalog c;
    KvErr e = {{0}};
    CHECK(model_catalog_load(&c, "/no/such/models.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "/no/such/models.json");
}

TEST(model_error_top_level_shape)
{
    ModelCatalog c;
    KvErr e = {{0}};
    CHECK(model_catalog_parse(&c, "[]", "a.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "a.json: expected an object");
    CHECK(model_catalog_parse(&c, "{}", "a.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "a.json: models: missing");
    CHECK(model_catalog_parse(&c, "{\"models\": []}", "a.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "non-empty array");
    CHECK(model_catalog_parse(&c, "{\"models\": [], \"extra\": 1}", "a.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "a.json: extra: unknown key");
    CHECK(model_catalog_parse(&c, "{\"models\": [3]}", "a.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "a.json: models[0]: expected an object, got 3");
}

TEST(model_error_missing_field)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char obj[2048], doc[2300];
    tiny(obj, sizeof obj, "Tiny", NULL);
    char *p = strstr(obj, "\"head_dim\": 16,");
    memmove(p, p + strlen("\"head_dim\": 16,"), strlen(p + strlen("\"head_dim\": 16,")) + 1);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    const char *path = test_write_file(t, "missing.json", doc);
    CHECK(model_catalog_load(&c, path, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "models[0].head_dim: missing (expected a positive integer)");
    /* a missing string and a missing choice */
    tiny(obj, sizeof obj, "Tiny", NULL);
    p = strstr(obj, "\"ffn\": \"gated\",");
    memmove(p, p + strlen("\"ffn\": \"gated\","), strlen(p + strlen("\"ffn\": \"gated\",")) + 1);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].ffn: missing (expected \"gated\" or \"plain\")");
    tiny(obj, sizeof obj, "Tiny", NULL);
    p = strstr(obj, ", \"source\"");
    snprintf(p, 4, "}");
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].source: missing");
    /* MoE without its fields */
    tiny(obj, sizeof obj, "Tiny", NULL);
    memcpy(strstr(obj, "\"dense\""), "\"moe\"  ", 7);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].num_experts: missing");
}

TEST(model_error_wrong_types)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char obj[2048], obj2[2048], fixed[2100], doc[4300];
    /* a good first model, then hidden_size "abc" in the second */
    tiny(obj, sizeof obj, "Tiny", NULL);
    tiny(obj2, sizeof obj2, "Tiny2", NULL);
    char *p = strstr(obj2, "64,");
    snprintf(fixed, sizeof fixed, "%.*s\"abc\"%s", (int)(p - obj2), obj2, p + 2);
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", obj, fixed);
    CHECK(model_catalog_parse(&c, doc, "configs/models.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "configs/models.json: models[1].hidden_size: expected a positive integer, got \"abc\"");
    CHECK(c.n == 0 && c.models == NULL);
    CHECK(parse_tiny(&c, ", \"norms_per_layer\": 2.5", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].norms_per_layer: expected a positive integer, got 2.5");
    CHECK(parse_tiny(&c, ", \"qk_norm\": 1", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].qk_norm: expected true or false, got 1");
    CHECK(parse_tiny(&c, ", \"note\": 7", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].note: expected a non-empty string, got 7");
    CHECK(parse_tiny(&c, ", \"sliding_window\": -1", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].sliding_window: expected a non-negative integer, got -1");
    CHECK(parse_tiny(&c, ", \"sliding_window\": 1e12", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].sliding_window: 1000000000000 is out of the plausible range [0, 268435456]");
    CHECK(parse_tiny(&c, ", \"published_params\": [1]", &e) == -1);
    CHECK_CONTAINS(e.msg, "published_params: expected a non-negative integer, got an array");
    /* bad choice */
    tiny(obj, sizeof obj, "Tiny", NULL);
    p = strstr(obj, "\"rmsnorm\"");
    snprintf(fixed, sizeof fixed, "%.*s\"batchnorm\"%s", (int)(p - obj), obj, p + strlen("\"rmsnorm\""));
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", fixed);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].norm: expected \"rmsnorm\" or \"layernorm\", got \"batchnorm\"");
    /* a name too long for the struct */
    char longname[100];
    memset(longname, 'x', 80);
    longname[80] = '\0';
    tiny(obj, sizeof obj, longname, NULL);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].name: longer than 63 characters");
}

TEST(model_error_zero_heads_and_kv_not_dividing)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char obj[2048], doc[2300], fixed[2100];
    tiny(obj, sizeof obj, "Tiny", NULL);
    char *p = strstr(obj, "\"num_heads\": 4");
    snprintf(fixed, sizeof fixed, "%.*s\"num_heads\": 0%s", (int)(p - obj), obj, p + strlen("\"num_heads\": 4"));
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", fixed);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].num_heads: expected a positive integer, got 0");
    p = strstr(obj, "\"num_kv_heads\": 2");
    snprintf(fixed, sizeof fixed, "%.*s\"num_kv_heads\": 3%s", (int)(p - obj), obj, p + strlen("\"num_kv_heads\": 2"));
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", fixed);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].num_kv_heads: 3 does not divide num_heads 4");
}

TEST(model_error_cross_field_rules)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char obj[2048], doc[2300];
    tiny(obj, sizeof obj, "TinyMoE", ", \"num_experts\": 4, \"experts_per_tok\": 5, \"moe_intermediate_size\": 32");
    memcpy(strstr(obj, "\"dense\""), "\"moe\"  ", 7);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].experts_per_tok: 5 exceeds num_experts 4");
    tiny(obj, sizeof obj, "TinyMoE",
         ", \"num_experts\": 4, \"experts_per_tok\": 2, \"moe_intermediate_size\": 32, \"dense_layers\": 2");
    memcpy(strstr(obj, "\"dense\""), "\"moe\"  ", 7);
    snprintf(doc, sizeof doc, "{\"models\": [%s]}", obj);
    CHECK(model_catalog_parse(&c, doc, "m.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].dense_layers: 2 leaves no MoE layer");
    CHECK(parse_tiny(&c, ", \"num_experts\": 4", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].num_experts: only valid when arch is \"moe\"");
    CHECK(parse_tiny(&c, ", \"position_offset\": 2", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].position_offset: only valid with");
    CHECK(parse_tiny(&c, ", \"norms_per_layer\": 9", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].norms_per_layer: expected 1..8, got 9");
    CHECK(parse_tiny(&c, ", \"hiden_size\": 64", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].hiden_size: unknown key");
    CHECK(parse_tiny(&c, ", \"head_dim\": 16", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].head_dim: given twice");
}

TEST(model_error_duplicate_name)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char a[2048], b[2048], doc[4300];
    tiny(a, sizeof a, "Tiny", NULL);
    tiny(b, sizeof b, "TINY", NULL);
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", a, b);
    CHECK(model_catalog_parse(&c, doc, "dup.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "dup.json: models[1].name: \"TINY\" already used by models[0]");
    CHECK(c.n == 0 && c.models == NULL);
}

TEST(model_error_unknown_name_lists_known)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    CHECK(model_find(&c, "Llama-9-1T", &e) == NULL);
    CHECK_CONTAINS(e.msg, "Llama-9-1T");
    for (size_t i = 0; i < KV_ARRAY_LEN(g_ref); i++) CHECK_CONTAINS(e.msg, g_ref[i].name);
    CHECK(model_find(&c, NULL, &e) == NULL);
    model_catalog_free(&c);
}

TEST(model_error_bad_layout)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    const ModelSpec *m = find_or_fail(t, &c, "Llama-2-7B");
    const ModelSpec *q = find_or_fail(t, &c, "Qwen2.5-7B"); /* 28 heads, 4 KV heads */
    if (m && q) {
        ModelLayout ly = {m, KV_DT_FP16, 3, 1};
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "tp 3 does not divide the 32 query heads");
        ly.tp = 64;
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "tp 64");
        ly.tp = 0;
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "tp 0");
        ly.tp = 1;
        ly.pp = 33;
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "pp 33 exceeds the 32 layers");
        ly.pp = 0;
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "pp 0");
        ly.pp = 32;
        CHECK(model_layout_check(&ly, &e) == 0);
        ly.dtype = KV_DT_COUNT;
        CHECK(model_layout_check(&ly, &e) == -1);
        CHECK_CONTAINS(e.msg, "dtype");
        /* 28 heads allow tp 14, but 14 and 4 KV heads divide neither way */
        ModelLayout lq = {q, KV_DT_FP16, 14, 1};
        CHECK(model_layout_check(&lq, &e) == -1);
        CHECK_CONTAINS(e.msg, "4 KV heads");
        lq.tp = 28;
        CHECK(model_layout_check(&lq, &e) == 0);
        CHECK_EQ_I(model_kv_heads_per_gpu(&lq), 1);
        ModelLayout none = {NULL, KV_DT_FP16, 1, 1};
        CHECK(model_layout_check(&none, &e) == -1);
    }
    model_catalog_free(&c);
}

/* tiny() with one "key": value pair replaced (the pair as written in tiny()). */
static void tiny_sub(char *buf, size_t n, const char *from, const char *to)
{
    char obj[2048];
    tiny(obj, sizeof obj, "Tiny", NULL);
    char *p = strstr(obj, from);
    if (!p) {
        snprintf(buf, n, "{}");
        return;
    }
    snprintf(buf, n, "{\"models\": [%.*s%s%s]}", (int)(p - obj), obj, to, p + strlen(from));
}

/* Reproducer (hardening issue): vocab and hidden near 2^31 overflowed the parameter and weight-byte
 * products; every field has a plausible range and the parameter count is bounded. */
TEST(model_field_ranges_and_products_checked)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char doc[2300], doc2[2400];
    tiny_sub(doc, sizeof doc, "\"hidden_size\": 64", "\"hidden_size\": 2147483647");
    tiny_sub(doc2, sizeof doc2, "\"vocab_size\": 100", "\"vocab_size\": 2147483600");
    CHECK(model_catalog_parse(&c, doc, "big.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "big.json: models[0].hidden_size: 2147483647 is out of the plausible range [1, 131072]");
    CHECK(model_catalog_parse(&c, doc2, "big.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "big.json: models[0].vocab_size: 2147483600 is out of the plausible range [1, 16777216]");
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"\"num_layers\": 2", "\"num_layers\": 5000", "num_layers: 5000 is out of the plausible range [1, 4096]"},
        {"\"num_heads\": 4", "\"num_heads\": 8192", "num_heads: 8192 is out of the plausible range [1, 4096]"},
        {"\"head_dim\": 16", "\"head_dim\": 1e6", "head_dim: 1000000 is out of the plausible range [1, 4096]"},
        {"\"intermediate_size\": 128", "\"intermediate_size\": 4194304",
         "intermediate_size: 4194304 is out of the plausible range [1, 1048576]"},
        {"\"max_position_embeddings\": 512", "\"max_position_embeddings\": 2147483647",
         "max_position_embeddings: 2147483647 is out of the plausible range [1, 268435456]"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(bad); i++) {
        tiny_sub(doc, sizeof doc, bad[i].from, bad[i].to);
        CHECK_MSG(model_catalog_parse(&c, doc, "r.json", &e) == -1, "%s accepted", bad[i].to);
        CHECK_CONTAINS(e.msg, bad[i].msg);
    }
    /* each field in range, the product not: 4096 layers of 3·131072·1048576 FFN weights */
    char obj[2048];
    snprintf(obj, sizeof obj,
             "{\"models\": [{\"name\": \"Huge\", \"hf_id\": \"t/h\", \"arch\": \"dense\", \"hidden_size\": 131072, "
             "\"num_layers\": 4096, \"num_heads\": 64, \"num_kv_heads\": 8, \"head_dim\": 128, "
             "\"intermediate_size\": 1048576, \"vocab_size\": 16777216, \"max_position_embeddings\": 8192, "
             "\"ffn\": \"gated\", \"norm\": \"rmsnorm\", \"positional\": \"rope\", \"tie_word_embeddings\": false, "
             "\"source\": \"t\"}]}");
    CHECK(model_catalog_parse(&c, obj, "huge.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "huge.json: models[0]: about 1.");
    CHECK_CONTAINS(e.msg, "parameters");
    CHECK_CONTAINS(e.msg, "out of the plausible range [1, 1e+15]");
    /* the largest model the ranges admit still has exact 64-bit products */
    snprintf(obj, sizeof obj,
             "{\"models\": [{\"name\": \"Big\", \"hf_id\": \"t/b\", \"arch\": \"dense\", \"hidden_size\": 65536, "
             "\"num_layers\": 1024, \"num_heads\": 512, \"num_kv_heads\": 512, \"head_dim\": 128, "
             "\"intermediate_size\": 262144, \"vocab_size\": 16777216, \"max_position_embeddings\": 268435456, "
             "\"ffn\": \"gated\", \"norm\": \"rmsnorm\", \"positional\": \"rope\", \"tie_word_embeddings\": false, "
             "\"source\": \"t\"}]}");
    if (model_catalog_parse(&c, obj, "big.json", &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    ModelLayout ly = {&c.models[0], KV_DT_FP32, 1, 1};
    CHECK(model_params_total(&c.models[0]) > 0);
    CHECK(model_weight_bytes_per_gpu(&ly) > (uint64_t)model_params_total(&c.models[0]));
    CHECK_EQ_U(model_kv_bytes_per_token(&ly), 2ull * 512 * 128 * 4 * 1024);
    model_catalog_free(&c);
}
/* ---------------------------------------------------------------- Hugging Face ids and aliases */

TEST(model_find_by_hf_id_and_alias)
{
    ModelCatalog c;
    KvErr e = {{0}};
    if (model_catalog_load(&c, NULL, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    struct { const char *id, *name; } k[] = {
        {"meta-llama/Llama-2-7b-hf", "Llama-2-7B"},        {"META-LLAMA/llama-2-7B-HF", "Llama-2-7B"},
        {"meta-llama/Llama-2-7b-chat-hf", "Llama-2-7B"},   {"meta-llama/Llama-3.1-8B", "Llama-3.1-8B"},
        {"meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"}, {"meta-llama/Meta-Llama-3.1-70B", "Llama-3.1-70B"},
        {"Qwen/Qwen3-8B", "Qwen3-8B"},                     {"Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B"},
        {"mistralai/Mistral-7B-Instruct-v0.3", "Mistral-7B-v0.3"}, {"google/gemma-2-9b-it", "Gemma-2-9B"},
        {"facebook/opt-30b", "OPT-30B"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(k); i++) {
        const ModelSpec *m = model_find(&c, k[i].id, &e);
        CHECK_MSG(m && !strcmp(m->name, k[i].name), "%s → %s (%s)", k[i].id, m ? m->name : "NULL", m ? "" : e.msg);
    }
    /* every catalogued model answers to its own hf_id and aliases */
    for (int i = 0; i < c.n; i++) {
        CHECK(model_find(&c, c.models[i].hf_id, &e) == &c.models[i]);
        for (int a = 0; a < c.models[i].n_aliases; a++) CHECK(model_find(&c, c.models[i].aliases[a], &e) == &c.models[i]);
    }
    /* a prefix is not a match */
    CHECK(model_find(&c, "meta-llama/Llama-2-7b", &e) == NULL);
    CHECK_CONTAINS(e.msg, "Hugging Face id");
    model_catalog_free(&c);
}

TEST(model_error_aliases)
{
    ModelCatalog c;
    KvErr e = {{0}};
    CHECK(parse_tiny(&c, ", \"aliases\": [\"test/tiny-chat\", \"tiny-it\"]", &e) == 0);
    if (c.n == 1) {
        CHECK_EQ_I(c.models[0].n_aliases, 2);
        CHECK(model_find(&c, "TINY-IT", &e) == &c.models[0]);
        CHECK(model_find(&c, "test/tiny", &e) == &c.models[0]);
        model_catalog_free(&c);
    }
    CHECK(parse_tiny(&c, ", \"aliases\": \"test/tiny-chat\"", &e) == -1);
    CHECK_CONTAINS(e.msg, "tiny.json: models[0].aliases: expected an array of names, got \"test/tiny-chat\"");
    CHECK(parse_tiny(&c, ", \"aliases\": [\"ok\", 7]", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[0].aliases: [1]: expected a non-empty string, got 7");
    CHECK(parse_tiny(&c, ", \"aliases\": [\"\"]", &e) == -1);
    CHECK_CONTAINS(e.msg, "[0]: expected a non-empty string");
    CHECK(parse_tiny(&c, ", \"aliases\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\"]", &e) == -1);
    CHECK_CONTAINS(e.msg, "9 names: at most 8 allowed");
    CHECK(parse_tiny(&c, ", \"aliases\": [\"x\", \"X\"]", &e) == -1);
    CHECK_CONTAINS(e.msg, "\"X\" given twice");
    CHECK(parse_tiny(&c, ", \"aliases\": [\"Test/Tiny\"]", &e) == -1);
    CHECK_CONTAINS(e.msg, "given twice");
    CHECK(c.n == 0 && c.models == NULL);
    /* a name that would find two models is refused, whichever field it sits in */
    char a[2048], b[2048], doc[4400];
    tiny(a, sizeof a, "Tiny", ", \"aliases\": [\"shared/name\"]");
    tiny(b, sizeof b, "Other", NULL);
    char *hf = strstr(b, "test/tiny");
    memcpy(hf, "test/othr", 9);
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", a, b);
    CHECK_MSG(model_catalog_parse(&c, doc, "two.json", &e) == 0, "%s", e.msg);
    model_catalog_free(&c);
    tiny(b, sizeof b, "Shared/Name", NULL);
    memcpy(strstr(b, "test/tiny"), "test/othr", 9);
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", a, b);
    CHECK(model_catalog_parse(&c, doc, "two.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "two.json: models[1].name: \"Shared/Name\" already names models[0] (Tiny)");
    tiny(b, sizeof b, "Other", ", \"aliases\": [\"TEST/TINY\"]");
    memcpy(strstr(b, "test/tiny"), "test/othr", 9);
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", a, b);
    CHECK(model_catalog_parse(&c, doc, "two.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[1].aliases: \"TEST/TINY\" already names models[0] (Tiny)");
    tiny(b, sizeof b, "Other", NULL); /* same hf_id test/tiny */
    snprintf(doc, sizeof doc, "{\"models\": [%s, %s]}", a, b);
    CHECK(model_catalog_parse(&c, doc, "two.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "models[1].hf_id: \"test/tiny\" already names models[0] (Tiny)");
    CHECK(c.n == 0 && c.models == NULL);
}

/* n tiny models M0000.. (hf_id test/m0000, alias test/m0000-chat) and `extra` after them (caller frees) */
static char *many_models(int n, const char *extra)
{
    size_t cap = (size_t)(n + 1) * 1024 + 4096, used = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    used += (size_t)snprintf(s + used, cap - used, "{\"models\": [");
    for (int i = 0; i < n; i++) {
        char name[16], alias[64], obj[2048];
        snprintf(name, sizeof name, "M%04d", i);
        snprintf(alias, sizeof alias, ", \"aliases\": [\"test/m%04d-chat\"]", i);
        tiny(obj, sizeof obj, name, alias);
        char *hf = strstr(obj, "test/tiny");
        char id[10];
        snprintf(id, sizeof id, "test/%04d", i); /* (9 characters, as "test/tiny") */
        memcpy(hf, id, 9);
        used += (size_t)snprintf(s + used, cap - used, "%s%s", i ? ", " : "", obj);
    }
    if (extra) used += (size_t)snprintf(s + used, cap - used, ", %s", extra);
    snprintf(s + used, cap - used, "]}");
    return s;
}

TEST(model_duplicate_among_thousands_found_and_named)
{
    ModelCatalog c;
    KvErr e = {{0}};
    char *doc = many_models(3000, NULL);
    if (!doc) return;
    CHECK_MSG(model_catalog_parse(&c, doc, "many.json", &e) == 0, "%s", e.msg);
    CHECK_EQ_I(c.n, 3000);
    const ModelSpec *m = model_find(&c, "TEST/M2999-CHAT", &e);
    CHECK(m && strcmp(m->name, "M2999") == 0);
    model_catalog_free(&c);
    free(doc);
    /* the same name, in each field, among thousands: found, named with the model it clashes with */
    static const struct {
        const char *name, *extra, *want;
    } cases[] = {
        {"m1234", NULL, "many.json: models[3000].name: \"m1234\" already used by models[1234]"},
        {"New", ", \"aliases\": [\"TEST/M2345-CHAT\"]", "many.json: models[3000].aliases: \"TEST/M2345-CHAT\" already names models[2345] (M2345)"},
        {"test/m0007-chat", NULL, "many.json: models[3000].name: \"test/m0007-chat\" already names models[7] (M0007)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char obj[2048];
        tiny(obj, sizeof obj, cases[k].name, cases[k].extra);
        memcpy(strstr(obj, "test/tiny"), "test/NEW1", 9);
        doc = many_models(3000, obj);
        if (!doc) return;
        memset(&e, 0, sizeof e);
        CHECK(model_catalog_parse(&c, doc, "many.json", &e) == -1);
        CHECK_CONTAINS(e.msg, cases[k].want);
        free(doc);
    }
    /* an overlay of thousands over the catalog: a hf_id the catalog's Qwen3-8B answers to is refused */
    ModelCatalog mc;
    CHECK_MSG(model_catalog_load(&mc, NULL, &e) == 0, "%s", e.msg);
    char obj[2048];
    tiny(obj, sizeof obj, "Mine", NULL);
    char *at = strstr(obj, "\"test/tiny\"");
    char fixed[2100];
    snprintf(fixed, sizeof fixed, "%.*s\"qwen/QWEN3-8b\"%s", (int)(at - obj), obj, at + strlen("\"test/tiny\""));
    doc = many_models(3000, fixed);
    if (doc) {
        int n = mc.n;
        CHECK(model_catalog_overlay(&mc, doc, "ov.json", &e) == -1);
        CHECK_CONTAINS(e.msg, "ov.json: models[3000].hf_id: \"qwen/QWEN3-8b\" already names");
        CHECK_CONTAINS(e.msg, "model Qwen3-8B");
        CHECK_EQ_I(mc.n, n);
        free(doc);
    }
    model_catalog_free(&mc);
}
