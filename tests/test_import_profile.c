/* test_import_profile.c — kvcal import-profile's readers (calibrate/import_profile.c): the mapping of
 * Vidur's and LLMServingSim's CSVs onto kvsim's ops and units, the grids (decode resampled onto total
 * context, prefill cut to its largest full grid), the runs written (measured + the catalog's spec run
 * for the rest, loadable by kvsim's cost reader), and bad input refused by file, line, column, value.
 */
#include <stdlib.h>
#include <string.h>

#include "calibrate/import_profile.h"
#include "sim/cost/cost.h"
#include "sim/cost/spec.h"
#include "tests/harness.h"

static ProfileManifest manifest(ProfileFormat f, const char *model, int tp)
{
    ProfileManifest m;
    memset(&m, 0, sizeof m);
    m.format = f;
    snprintf(m.device, sizeof m.device, "RTX4090");
    snprintf(m.model, sizeof m.model, "%s", model);
    snprintf(m.dtype, sizeof m.dtype, "bf16");
    m.tp = tp;
    m.repetitions = 3;
    return m;
}

static const StorePoint *find(const ProfilePoints *pp, CostOp op, int64_t p1, int64_t p2)
{
    for (size_t i = 0; i < pp->n; i++)
        if (pp->v[i].op == op && pp->v[i].p1 == p1 && pp->v[i].p2 == p2) return &pp->v[i];
    return NULL;
}

static const char k_lss_dense[] = "layer,tokens,time_us\n"
                                  "qkv_proj,1,35.5\nqkv_proj,16,37\n"
                                  "o_proj,1,25.5\no_proj,16,26\n"
                                  "gate_up_proj,1,159\r\ngate_up_proj,16,160\n"
                                  "down_proj,1,85\ndown_proj,16,82\n"
                                  "embedding,1,3\nfinal_layernorm,1,2.4\n";

/* decode: batches 1 and 2 at 16 and 32 tokens per request; prefill: chunks 16 and 32 at contexts 0
 * and 16, plus chunk 24 at context 0 only (off the full grid); one mixed row (skipped) */
static const char k_lss_attn[] = "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n"
                                 "0,0,1,16,10\n0,0,1,32,12\n0,0,2,16,11\n0,0,2,32,15\n"
                                 "16,0,0,0,20\n16,16,0,0,22\n32,0,0,0,30\n32,16,0,0,33\n24,0,0,0,25\n"
                                 "16,0,4,64,40\n";

TEST(import_profile_llmservingsim_maps_ops_units_and_grids)
{
    ModelCatalog mc;
    HwCatalog hw;
    KvErr e;
    CHECK(spec_catalogs_load(&mc, &hw, &e) == 0);
    const ModelSpec *model = model_find(&mc, "Llama-3.1-8B", &e);
    CHECK(model != NULL);
    ProfileManifest m = manifest(PROFILE_LLMSERVINGSIM, "Llama-3.1-8B", 1);
    ProfilePoints pp = {0};
    CHECK_MSG(profile_read_csv(&m, model, k_lss_dense, "dense.csv", &pp, &e) == 0, "%s", e.msg);
    CHECK_MSG(profile_read_csv(&m, model, k_lss_attn, "attention.csv", &pp, &e) == 0, "%s", e.msg);
    CHECK_EQ_U(pp.rows, 20);
    CHECK_EQ_U(pp.skipped_rows, 3);
    CHECK_STR(pp.skipped, "embedding, final_layernorm, mixed prefill+decode batches");
    CHECK(profile_finish(&m, &pp, &e) == 0);
    const StorePoint *q = find(&pp, OP_GEMM_QKV, 1, 0);
    CHECK(q && q->median_ns == 35500 && q->p10_ns == 35500 && q->p90_ns == 35500 && q->n == 3 && q->tp == 1);
    CHECK(q && !strcmp(q->model, "Llama-3.1-8B") && !strcmp(q->dtype, "bf16"));
    q = find(&pp, OP_GEMM_FFN_UP, 16, 0); /* a CRLF line end */
    CHECK(q && q->median_ns == 160000);
    /* prefill: the 2x2 grid kept, chunk 24 left out */
    CHECK(find(&pp, OP_ATTN_PREFILL, 32, 16) && find(&pp, OP_ATTN_PREFILL, 32, 16)->median_ns == 33000);
    CHECK(find(&pp, OP_ATTN_PREFILL, 24, 0) == NULL);
    CHECK_EQ_U(pp.off_grid, 1);
    /* decode on total context: union of batch x context = {16, 32, 64}; batch 1 at 64 extrapolates
     * (12 + 32 x 2/16 = 16 us), batch 2 at 16 (8 per request) takes the 16-token time */
    q = find(&pp, OP_ATTN_DECODE, 1, 32);
    CHECK(q && q->median_ns == 12000);
    q = find(&pp, OP_ATTN_DECODE, 1, 64);
    CHECK(q && fabs(q->median_ns - 16000) < 1e-6);
    q = find(&pp, OP_ATTN_DECODE, 2, 16);
    CHECK(q && q->median_ns == 11000);
    q = find(&pp, OP_ATTN_DECODE, 2, 32);
    CHECK(q && q->median_ns == 11000); /* 16 per request */
    q = find(&pp, OP_ATTN_DECODE, 2, 64);
    CHECK(q && q->median_ns == 15000);
    CHECK_EQ_U(pp.decode_below, 1);
    CHECK_EQ_U(pp.decode_beyond, 1);
    /* the points form full grids: kvsim's cost reader takes every op */
    CostModel cm;
    cost_model_init(&cm, "RTX4090", "Llama-3.1-8B", "bf16", 1);
    for (int op = 0; op < OP_COUNT; op++) {
        CostPoint pts[64];
        size_t n = 0;
        for (size_t i = 0; i < pp.n && n < 64; i++)
            if ((int)pp.v[i].op == op) pts[n++] = (CostPoint){pp.v[i].op, {pp.v[i].p1, pp.v[i].p2, 0}, pp.v[i].median_ns};
        if (n) CHECK_MSG(cost_model_set_op(&cm, (CostOp)op, pts, n, 1, "measured", &e) == 0, "%s", e.msg);
    }
    cost_model_free(&cm);
    profile_points_free(&pp);
    /* inside the measured range: linear in the context per request (batch 1 at 32: halfway 16 .. 48) */
    static const char interp[] = "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,10\n0,0,1,48,14\n0,0,2,16,11\n0,0,2,48,19\n";
    CHECK(profile_read_csv(&m, model, interp, "attention.csv", &pp, &e) == 0 && profile_finish(&m, &pp, &e) == 0);
    q = find(&pp, OP_ATTN_DECODE, 1, 32);
    CHECK(q && fabs(q->median_ns - 12000) < 1e-6);
    q = find(&pp, OP_ATTN_DECODE, 2, 48); /* 24 per request: a quarter of 11 .. 19 */
    CHECK(q && fabs(q->median_ns - 13000) < 1e-6);
    profile_points_free(&pp);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
}

static const char k_vidur_mlp_hdr[] =
    "time_stats.attn_pre_proj.median,time_stats.attn_post_proj.median,time_stats.mlp_up_proj.median,"
    "time_stats.mlp_down_proj.median,time_stats.mlp_act.median,time_stats.input_layernorm.median,time_stats.attn_rope.median,"
    "n_head,n_kv_head,n_embd,n_expanded_embd,num_tokens,num_tensor_parallel_workers\n";

TEST(import_profile_vidur_mlp_and_attention)
{
    ModelCatalog mc;
    HwCatalog hw;
    KvErr e;
    CHECK(spec_catalogs_load(&mc, &hw, &e) == 0);
    const ModelSpec *model = model_find(&mc, "Llama-2-7B", &e);
    ProfileManifest m = manifest(PROFILE_VIDUR, "Llama-2-7B", 1);
    ProfilePoints pp = {0};
    char mlp[2048];
    /* two rows of 4096 tokens (folded: their median), one of tp 2 (skipped) */
    snprintf(mlp, sizeof mlp,
             "%s1.9,0.6,3.3,1.6,0.26,0.1,0.15,32,32,4096,11008,4096,1\n"
             "1.7,0.6,3.3,1.6,0.26,0.1,0.15,32,32,4096,11008,4096,1\n"
             "1.0,0.3,1.7,0.8,0.13,0.1,0.15,32,32,4096,11008,4096,2\n",
             k_vidur_mlp_hdr);
    CHECK_MSG(profile_read_csv(&m, model, mlp, "mlp.csv", &pp, &e) == 0, "%s", e.msg);
    static const char attn[] = "time_stats.attn_decode.median,time_stats.attn_prefill.median,n_embd,n_q_head,n_kv_head,"
                               "num_tensor_parallel_workers,batch_size,prefill_chunk_size,kv_cache_size,is_prefill,attention_backend\n"
                               "0.009,,4096,32,32,1,1,0,32,False,AttentionBackend.FLASH_ATTENTION\n"
                               ",0.05,4096,32,32,1,1,512,0,True,AttentionBackend.FLASH_ATTENTION\n";
    CHECK_MSG(profile_read_csv(&m, model, attn, "attention.csv", &pp, &e) == 0, "%s", e.msg);
    CHECK(profile_finish(&m, &pp, &e) == 0);
    const StorePoint *q = find(&pp, OP_GEMM_QKV, 4096, 0);
    CHECK(q && fabs(q->median_ns - 1.8e6) < 1e-3 && q->n == 6);
    CHECK(find(&pp, OP_NORM, 4096, 0) && find(&pp, OP_ROPE, 4096, 0) && find(&pp, OP_ACT, 4096, 0));
    CHECK_EQ_U(pp.skipped_rows, 1);
    q = find(&pp, OP_ATTN_DECODE, 1, 32);
    CHECK(q && fabs(q->median_ns - 9000) < 1e-6);
    q = find(&pp, OP_ATTN_PREFILL, 512, 0);
    CHECK(q && fabs(q->median_ns - 50000) < 1e-6);
    /* a profile of another model is refused by its dimensions */
    const ModelSpec *other = model_find(&mc, "Llama-2-13B", &e);
    ProfilePoints p2 = {0};
    CHECK(profile_read_csv(&m, other, mlp, "mlp.csv", &p2, &e) != 0);
    CHECK_CONTAINS(e.msg, "mlp.csv: line 2: column n_embd: 4096, but Llama-2-13B has hidden size 5120");
    profile_points_free(&p2);
    profile_points_free(&pp);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
}

TEST(import_profile_refuses_bad_csv_by_line_and_column)
{
    ModelCatalog mc;
    HwCatalog hw;
    KvErr e;
    CHECK(spec_catalogs_load(&mc, &hw, &e) == 0);
    const ModelSpec *model = model_find(&mc, "Llama-3.1-8B", &e);
    ProfileManifest m = manifest(PROFILE_LLMSERVINGSIM, "Llama-3.1-8B", 1);
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"layer,tokens,time_us\nqkv_proj,1,35\nqkv_proj,2,abc\n", "d.csv: line 3: column time_us: expected a number >= 1e-06, got 'abc'"},
        {"layer,tokens,time_us\nqkv_proj,-4,35\n", "d.csv: line 2: column tokens: expected an integer >= 1, got '-4'"},
        {"layer,tokens,time_us\nqkv_proj,1\n", "d.csv: line 2: 2 fields, expected 3 (as the header)"},
        {"layer,tokens,time_us\nlm_head,1,700\n", "d.csv: line 2: column layer: unknown layer 'lm_head'"},
        {"layer,tokens,time_us\nqkv_proj,1,0\n", "d.csv: line 2: column time_us: expected a number >= 1e-06, got '0'"},
        {"layer,tokens,time_us\n", "d.csv: no data rows after the header"},
        {"", "d.csv: empty file, expected a header row"},
        {"a,b\n1,2\n", "d.csv: line 1: neither an LLMServingSim dense.csv"},
        {"prefill_chunk,kv_prefill,n_decode,time_us\n0,0,1,4\n", "d.csv: line 1: column kv_decode: missing from the header"},
        {"prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,0,0,4\n",
         "d.csv: line 2: columns prefill_chunk and n_decode: both 0"},
        {"prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,2,0,4\n",
         "d.csv: line 2: column kv_decode: expected >= 1 in a decode row, got '0'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ProfilePoints pp = {0};
        e.msg[0] = 0;
        CHECK_MSG(profile_read_csv(&m, model, cases[i].text, "d.csv", &pp, &e) != 0, "case %zu accepted", i);
        CHECK_CONTAINS(e.msg, cases[i].want);
        profile_points_free(&pp);
    }
    ProfileManifest v = manifest(PROFILE_VIDUR, "Llama-3.1-8B", 1);
    ProfilePoints pp = {0};
    static const char bad_prefill[] = "time_stats.attn_decode.median,time_stats.attn_prefill.median,batch_size,prefill_chunk_size,"
                                      "kv_cache_size,is_prefill,num_tensor_parallel_workers\n,0.05,1,512,0,Maybe,1\n";
    CHECK(profile_read_csv(&v, model, bad_prefill, "a.csv", &pp, &e) != 0);
    CHECK_CONTAINS(e.msg, "a.csv: line 2: column is_prefill: expected True or False, got 'Maybe'");
    profile_points_free(&pp);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
}

TEST(import_profile_manifest_errors_name_the_key)
{
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"{\"format\": \"sglang\"}", "key \"format\": 'sglang', expected vidur or llmservingsim"},
        {"{\"format\": \"vidur\", \"device\": \"A100-80GB\", \"model\": \"Llama-2-7B\", \"dtype\": \"fp16\", \"tp\": 0}",
         "key \"tp\": expected an integer in 1..1024"},
        {"{\"format\": \"vidur\", \"device\": \"A100-80GB\", \"model\": \"Llama-2-7B\", \"dtype\": \"fp16\", \"tp\": 1, "
         "\"repetitions\": 1, \"measured_at\": \"2024-05-14\"}",
         "key \"measured_at\": '2024-05-14', expected YYYY-MM-DDTHH:MM:SSZ"},
        {"{\"format\": \"vidur\", \"device\": \"A100-80GB\", \"model\": \"Llama-2-7B\", \"dtype\": \"fp16\", \"tp\": 1, "
         "\"repetitions\": 1, \"measured_at\": \"2024-05-14T00:00:00Z\", \"source\": {\"repo\": \"microsoft/vidur\", \"commit\": "
         "\"abc\", \"path\": \"p\", \"licence\": \"MIT\"}, \"files\": [\"mlp.csv\"]}",
         "source: key \"commit\": 'abc', expected 40 hexadecimal digits"},
        {"{\"format\": \"vidur\", \"device\": \"A100-80GB\", \"model\": \"Llama-2-7B\", \"dtype\": \"fp16\", \"tp\": 1, "
         "\"repetitions\": 1, \"measured_at\": \"2024-05-14T00:00:00Z\", \"source\": {\"repo\": \"microsoft/vidur\", \"commit\": "
         "\"7d47513363ec447a741ac5e47241580b47724fbf\", \"path\": \"p\", \"licence\": \"MIT\"}, \"files\": []}",
         "key \"files\": expected an array of 1..4 file names"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = test_write_file(t, "profile.json", cases[i].json);
        ProfileManifest m;
        KvErr e;
        e.msg[0] = 0;
        CHECK_MSG(profile_manifest_read(path, &m, &e) != 0, "case %zu accepted", i);
        CHECK_CONTAINS(e.msg, cases[i].want);
        CHECK_CONTAINS(e.msg, "profile.json");
    }
}

/* The committed fixture bundle end to end: a measured run with the source in its notes, a spec run
 * of the rest marked as such, and kvsim's reader taking measured ops from the first. */
TEST(import_profile_fixture_writes_measured_and_catalog_runs)
{
    ModelCatalog mc;
    HwCatalog hw;
    KvErr e;
    CHECK(spec_catalogs_load(&mc, &hw, &e) == 0);
    ProfileManifest m;
    CHECK_MSG(profile_manifest_read(test_path("tests/fixtures/profiles/lss/profile.json"), &m, &e) == 0, "%s", e.msg);
    const char *db = test_write_file(t, "x", "");
    char dbp[512];
    snprintf(dbp, sizeof dbp, "%s.db", db);
    CostStore st = {0};
    CHECK(store_open(&st, dbp, STORE_OPEN_CREATE, &e) == 0);
    ProfileImportStats s;
    CHECK_MSG(profile_import(&st, &m, &mc, &hw, &s, &e) == 0, "%s", e.msg);
    CHECK(s.measured_run > 0 && s.spec_run > s.measured_run);
    StoreRunMeta r;
    CHECK(store_get_run(&st, s.measured_run, &r, &e) == 0);
    CHECK_STR(r.backend, "measured");
    CHECK_CONTAINS(r.notes, "casys-kaist/LLMServingSim at 5daddb21a545658d5150b535712d0494584b5278");
    CHECK_CONTAINS(r.notes, "licence MIT");
    CHECK_STR(r.started_at, "2026-04-24T12:44:27Z");
    CHECK(store_get_run(&st, s.spec_run, &r, &e) == 0);
    CHECK_STR(r.backend, "spec");
    CHECK_CONTAINS(r.notes, "not measured by casys-kaist/LLMServingSim");
    CHECK_CONTAINS(r.notes, "h2d");
    int64_t n = 0;
    CHECK(store_count_points(&st, s.spec_run, OP_GEMM_QKV, &n, &e) == 0 && n == 0);
    CHECK(store_count_points(&st, s.spec_run, OP_H2D, &n, &e) == 0 && n > 0);
    /* importing the same profile again adds nothing */
    ProfileImportStats s2;
    CHECK_MSG(profile_import(&st, &m, &mc, &hw, &s2, &e) == 0, "%s", e.msg);
    CHECK(s2.already == s.measured_run);
    StoreRunList runs = {0};
    CHECK(store_runs_all(&st, 0, &runs, &e) == 0 && runs.n == 2);
    free(runs.v);
    store_close(&st);
    CostModel cm;
    CHECK_MSG(cost_model_load_db(&cm, dbp, "RTX4090", "Llama-3.1-8B", "bf16", 1, &e) == 0, "%s", e.msg);
    CHECK_STR(cm.c[OP_GEMM_QKV].backend, "measured");
    CHECK_STR(cm.c[OP_ATTN_DECODE].backend, "measured");
    CHECK_STR(cm.c[OP_H2D].backend, "spec");
    CHECK_NEAR(cost_lookup_ns(&cm, OP_GEMM_QKV, 1, 0, 0), 35500, 1e-12, 0);
    cost_model_free(&cm);
    hw_catalog_free(&hw);
    model_catalog_free(&mc);
}
