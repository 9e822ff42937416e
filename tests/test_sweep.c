/* test_sweep.c — capacity planning: catalog overlays (hw.c, model.c: add, replace by name, refuse
 * naming the overlay file and key, leave the catalog unchanged on failure), the platform part
 * settings (gpu, host_link, ssd) and their record, the capacity rule of --dry-run against a run,
 * sweep specs (parse, --set lists, enumeration order, refusals), point results as text, and the
 * sweep database's identity (what is not one is refused by what it is, untouched). */
#include <cJSON.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cli/point.h"
#include "sim/cli/sweep.h"
#include "sim/cost/store.h"
#include "sim/engine/sim.h"

#define MI300X_J                                                                                                    \
    "{\"name\": \"MI300X\", \"full_name\": \"AMD Instinct MI300X\", \"fp16\": \"1307 TFLOP/s\", \"fp32\": \"163 TFLOP/s\", " \
    "\"mem\": \"192 GB\", \"mem_bw\": \"5.3 TB/s\", \"pcie\": \"pcie5\", \"basis\": \"vendor_spec\", \"source\": \"t\"}"
#define BOX_J(GPU)                                                                                                   \
    "{\"name\": \"mybox\", \"description\": \"t\", \"gpu\": \"" GPU "\", \"gpus_per_node\": 8, \"link\": \"pcie5\", "     \
    "\"ssd\": \"PM9A3\", \"n_ssd\": 2, \"stripe_chunk\": \"128 KiB\", \"dram\": \"1 TB\", \"source\": \"t\"}"

static int load_hw(TestCtx *t, HwCatalog *hw)
{
    KvErr e;
    int rc = hw_catalog_load(hw, NULL, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return rc;
}

TEST(overlay_hw_adds_gpu_and_platform)
{
    HwCatalog hw;
    if (load_hw(t, &hw) != 0) return;
    int ng = hw.n_gpus, np = hw.n_platforms;
    KvErr e;
    int rc = hw_catalog_overlay(&hw, "{\"gpus\": [" MI300X_J "], \"platforms\": [" BOX_J("mi300x") "]}", "ov.json", &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK_EQ_I(hw.n_gpus, ng + 1);
    CHECK_EQ_I(hw.n_platforms, np + 1);
    const PlatformSpec *p = hw_find_platform(&hw, "mybox", &e);
    CHECK(p != NULL);
    if (p) {
        CHECK_STR(hw.gpus[p->gpu].name, "MI300X");
        CHECK_EQ_U(hw.gpus[p->gpu].mem_bytes, 192000000000ULL);
        CHECK_STR(hw.ssds[p->ssd].name, "PM9A3");
        CHECK_EQ_I(p->n_ssd, 2);
    }
    /* the catalog's own platforms are untouched */
    p = hw_find_platform(&hw, "hcache-a100", &e);
    CHECK(p && !strcmp(hw.gpus[p->gpu].name, "A100-40GB"));
    CHECK_CONTAINS(hw.origin, "+ ov.json");
    hw_catalog_free(&hw);
}

TEST(overlay_hw_replaces_by_name)
{
    HwCatalog hw;
    if (load_hw(t, &hw) != 0) return;
    int ng = hw.n_gpus;
    KvErr e;
    /* the same name in another case replaces the entry in place: platforms that use it get it */
    const char *ov = "{\"gpus\": [{\"name\": \"a100-40gb\", \"full_name\": \"A100 with more HBM\", \"fp16\": \"312 TFLOP/s\", "
                     "\"fp32\": \"19.5 TFLOP/s\", \"mem\": \"48 GB\", \"mem_bw\": \"1555 GB/s\", \"pcie\": \"pcie4\", "
                     "\"basis\": \"estimate\", \"source\": \"t\"}]}";
    CHECK_MSG(hw_catalog_overlay(&hw, ov, "more.json", &e) == 0, "%s", e.msg);
    CHECK_EQ_I(hw.n_gpus, ng);
    const PlatformSpec *p = hw_find_platform(&hw, "hcache-a100", &e);
    CHECK(p && hw.gpus[p->gpu].mem_bytes == 48000000000ULL);
    hw_catalog_free(&hw);
}

TEST(overlay_hw_refusals_name_the_file_and_key)
{
    HwCatalog hw;
    if (load_hw(t, &hw) != 0) return;
    int ng = hw.n_gpus;
    KvErr e;
    /* a size without its unit */
    const char *bad_mem = "{\"gpus\": [{\"name\": \"X\", \"full_name\": \"x\", \"fp16\": \"100 TFLOP/s\", \"fp32\": \"10 TFLOP/s\", "
                          "\"mem\": \"80\", \"mem_bw\": \"2 TB/s\", \"pcie\": \"pcie4\", \"basis\": \"t\", \"source\": \"t\"}]}";
    CHECK(hw_catalog_overlay(&hw, bad_mem, "mine.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "mine.json: gpus[0].mem");
    /* out of the plausible range: the catalog's own ranges apply */
    const char *huge = "{\"ssds\": [{\"name\": \"Z\", \"read\": \"5000 TB/s\", \"write\": \"1 GB/s\", \"read_latency\": \"80 us\", "
                       "\"write_latency\": \"20 us\", \"capacity\": \"1 TB\", \"basis\": \"t\", \"source\": \"t\"}]}";
    CHECK(hw_catalog_overlay(&hw, huge, "mine.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "mine.json: ssds[0].read");
    CHECK_CONTAINS(e.msg, "plausible range");
    /* a platform naming a GPU that neither the catalog nor the overlay has */
    CHECK(hw_catalog_overlay(&hw, "{\"platforms\": [" BOX_J("NoSuchGPU") "]}", "mine.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "mine.json: platforms[0].gpu");
    CHECK_CONTAINS(e.msg, "NoSuchGPU");
    /* unknown top-level key, malformed JSON */
    CHECK(hw_catalog_overlay(&hw, "{\"gpu\": []}", "mine.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "mine.json: unknown top-level key \"gpu\"");
    CHECK(hw_catalog_overlay(&hw, "{\"gpus\": [", "mine.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "mine.json:1:");
    /* a failed overlay leaves the catalog as it was */
    CHECK_EQ_I(hw.n_gpus, ng);
    CHECK(hw_find_gpu(&hw, "A100-40GB", &e) != NULL);
    CHECK(hw_catalog_overlay_file(&hw, "/nonexistent/ov.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "/nonexistent/ov.json");
    hw_catalog_free(&hw);
}

#define MODEL_J(NAME, HF, LAYERS)                                                                                       \
    "{\"name\": \"" NAME "\", \"hf_id\": \"" HF "\", \"arch\": \"dense\", \"hidden_size\": 4096, \"num_layers\": " LAYERS \
    ", \"num_heads\": 32, \"num_kv_heads\": 8, \"head_dim\": 128, \"intermediate_size\": 14336, \"vocab_size\": 32000, "  \
    "\"max_position_embeddings\": 8192, \"ffn\": \"gated\", \"norm\": \"rmsnorm\", \"positional\": \"rope\", "             \
    "\"tie_word_embeddings\": false, \"source\": \"t\"}"

TEST(overlay_models_add_replace_refuse)
{
    ModelCatalog mc;
    KvErr e;
    CHECK_MSG(model_catalog_load(&mc, NULL, &e) == 0, "%s", e.msg);
    int n = mc.n;
    CHECK_MSG(model_catalog_overlay(&mc, "{\"models\": [" MODEL_J("Mine-8B", "me/mine-8b", "40") ", "
                                         MODEL_J("llama-2-7b", "meta-llama/Llama-2-7b-hf", "33") "]}", "m.json", &e) == 0,
              "%s", e.msg);
    CHECK_EQ_I(mc.n, n + 1);
    const ModelSpec *m = model_find(&mc, "me/mine-8b", &e);
    CHECK(m && m->layers == 40);
    m = model_find(&mc, "Llama-2-7B", &e);
    CHECK(m && m->layers == 33);
    /* a new model may not take a name another model answers to */
    CHECK(model_catalog_overlay(&mc, "{\"models\": [" MODEL_J("Other", "Qwen/Qwen3-8B", "36") "]}", "m2.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "m2.json: models[0].hf_id");
    CHECK_EQ_I(mc.n, n + 1);
    /* the catalog's own validation */
    CHECK(model_catalog_overlay(&mc, "{\"models\": [" MODEL_J("Bad", "x/bad", "0") "]}", "m3.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "m3.json: models[0].num_layers");
    model_catalog_free(&mc);
}

static void set(TestCtx *t, SimConfig *c, const char *k, const char *v)
{
    KvErr e;
    CHECK_MSG(sim_config_set(c, k, v, &e) == 0, "%s=%s: %s", k, v, e.msg);
}

TEST(parts_replace_the_platforms_and_are_recorded)
{
    SimConfig c;
    sim_config_defaults(&c);
    set(t, &c, "platform", "hcache-a100");
    set(t, &c, "gpu", "H100-SXM");
    set(t, &c, "host_link", "pcie5");
    set(t, &c, "ssd", "CM7");
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    CHECK_STR(w.hw.gpus[w.platform->gpu].name, "H100-SXM");
    CHECK_STR(w.hw.links[w.platform->link].name, "pcie5");
    CHECK_STR(w.hw.ssds[w.platform->ssd].name, "CM7");
    CHECK_STR(w.cfg->cost_device, "H100-SXM");
    cJSON *j = sim_config_json(w.cfg);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "gpu")), "H100-SXM");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "ssd")), "CM7");
    cJSON_Delete(j);
    sim_world_close(&w);
    /* defaults record the platform's own parts */
    sim_config_defaults(&c);
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    CHECK_STR(w.cfg->gpu, "A100-40GB");
    CHECK_STR(w.cfg->host_link, "pcie4");
    CHECK_STR(w.cfg->ssd, "PM9A3");
    sim_world_close(&w);
    /* refusals name the key and the known names */
    sim_config_defaults(&c);
    set(t, &c, "gpu", "H900");
    CHECK(sim_world_open(&w, &c, &e) == -1);
    CHECK_CONTAINS(e.msg, "gpu: ");
    CHECK_CONTAINS(e.msg, "H900");
    CHECK_CONTAINS(e.msg, "A100-40GB");
    sim_config_defaults(&c);
    set(t, &c, "platform", "cake-a100");
    set(t, &c, "ssd", "PM9A3");
    CHECK(sim_world_open(&w, &c, &e) == -1); /* cake-a100 has no SSD array to replace */
    CHECK_CONTAINS(e.msg, "set n_ssd too");
    set(t, &c, "n_ssd", "2");
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    CHECK_EQ_I(w.cfg->n_ssd, 2);
    CHECK_STR(w.hw.ssds[w.platform->ssd].name, "PM9A3");
    sim_world_close(&w);
}

TEST(capacity_is_the_runs_pool)
{
    SimConfig c;
    sim_config_defaults(&c);
    set(t, &c, "requests", "20");
    set(t, &c, "model", "Llama-2-13B");
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    SimCapacity cap;
    sim_world_capacity(&w, &cap);
    CHECK(cap.fits);
    CHECK(cap.pool_tokens > 1024 && cap.pool_tokens % c.block_tokens == 0);
    SimResult res;
    memset(&res, 0, sizeof res);
    CHECK_MSG(sim_run(&w, "recompute", NULL, NULL, NULL, NULL, &res, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(res.pool_tokens, cap.pool_tokens);
    sim_result_free(&res);
    sim_world_close(&w);
    /* a model that does not fit: fits 0, and the run refuses */
    set(t, &c, "gpu", "RTX4090");
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    sim_world_capacity(&w, &cap);
    CHECK(!cap.fits && cap.pool_tokens == 0);
    CHECK(sim_run(&w, "recompute", NULL, NULL, NULL, NULL, &res, &e) == -1);
    CHECK_CONTAINS(e.msg, "does not fit");
    sim_result_free(&res);
    sim_world_close(&w);
}

static const char *param(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

TEST(sweep_spec_enumerates_in_order)
{
    SweepSpec s;
    sweep_spec_init(&s);
    s.check = sweep_check_value;
    KvErr e;
    const char *spec = "{\"description\": \"d\", \"base\": {\"requests\": 100, \"policies\": \"recompute,kv-offload\", "
                       "\"mem_util\": 0.85}, \"axes\": {\"n_ssd\": [1, 2, 4], \"nic\": [\"10GbE\", \"40GbE\"]}}";
    CHECK_MSG(sweep_spec_parse(&s, spec, "g.json", &e) == 0, "%s", e.msg);
    CHECK_MSG(sweep_spec_set(&s, "seed=1,2", &e) == 0, "%s", e.msg);
    CHECK_MSG(sweep_spec_set(&s, "nic=25GbE", &e) == 0, "%s", e.msg); /* one value: base, the axis goes */
    cJSON **pts;
    int n;
    CHECK_MSG(sweep_points(&s, &pts, &n, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(n, 6);
    if (n == 6) {
        CHECK_STR(param(pts[0], "requests"), "100");
        CHECK_STR(param(pts[0], "mem_util"), "0.85");
        CHECK_STR(param(pts[0], "nic"), "25GbE");
        CHECK_STR(param(pts[0], "n_ssd"), "1");
        CHECK_STR(param(pts[0], "seed"), "1");
        CHECK_STR(param(pts[1], "seed"), "2"); /* the last axis varies fastest */
        CHECK_STR(param(pts[1], "n_ssd"), "1");
        CHECK_STR(param(pts[5], "n_ssd"), "4");
        char *txt = cJSON_PrintUnformatted(pts[0]);
        CHECK_STR(txt, "{\"requests\":\"100\",\"policies\":\"recompute,kv-offload\",\"mem_util\":\"0.85\",\"nic\":\"25GbE\","
                       "\"n_ssd\":\"1\",\"seed\":\"1\"}");
        cJSON_free(txt);
        SimConfig c;
        char pol[600];
        CHECK_MSG(point_config(&c, pts[5], "p", pol, sizeof pol, &e) == 0, "%s", e.msg);
        CHECK_EQ_I(c.n_ssd, 4);
        CHECK_EQ_I(c.seed, 2);
        CHECK_STR(pol, "recompute,kv-offload");
    }
    sweep_points_free(pts, n);
    sweep_spec_free(&s);
}

/* the library's own checker (no I/O): settings and policies checked, scenarios only named */
TEST(sweep_spec_default_checker)
{
    static const struct {
        const char *spec, *want; /* want NULL: accepted */
    } cases[] = {
        {"{\"base\": {\"scenario\": \"no-such-scenario\"}, \"axes\": {\"n_ssd\": [1, 2]}}", NULL},
        {"{\"base\": {\"scenario\": \"\"}}", "g.json: base.scenario: expected a scenario name"},
        {"{\"base\": {\"policies\": \"recompute,nope\"}}", "g.json: base.policies: policies: "},
        {"{\"base\": {\"policies\": \"recompute,\"}}", "is not a policy name"},
        {"{\"base\": {\"policies\": \"all\"}}", NULL},
        {"{\"axes\": {\"mem_util\": [0.5, \"nan\"]}}", "g.json: axes.mem_util[1]: "},
        {"{\"axes\": {\"n_ssd\": [1, true]}}", "g.json: axes.n_ssd[1]: "},
        {"{\"axes\": {\"n_ssd\": [1, [2]]}}", "expected a string, number or boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SweepSpec s;
        sweep_spec_init(&s); /* check NULL: sweep_spec_check_default */
        KvErr e = {{0}};
        int rc = sweep_spec_parse(&s, cases[i].spec, "g.json", &e);
        if (cases[i].want) {
            CHECK_MSG(rc == -1, "accepted: %s", cases[i].spec);
            CHECK_CONTAINS(e.msg, cases[i].want);
        } else {
            CHECK_MSG(rc == 0, "%s: %s", cases[i].spec, e.msg);
        }
        sweep_spec_free(&s);
    }
    /* 20 axes of two values: 2^20 points, refused by the count before any point is built */
    static const char *const keys[] = {"tp", "pp", "replicas", "seed", "requests", "token_budget", "max_batch",
                                       "block_tokens", "session_rate", "time_scale", "burstiness", "max_context",
                                       "class_short", "class_long", "n_ssd", "concurrency", "request_rate",
                                       "recompute.token_budget", "warmup", "cooldown"};
    SweepSpec s;
    sweep_spec_init(&s);
    KvErr e;
    for (size_t a = 0; a < sizeof keys / sizeof keys[0]; a++) {
        char kv[96];
        snprintf(kv, sizeof kv, "%s=1,2", keys[a]);
        CHECK_MSG(sweep_spec_set(&s, kv, &e) == 0, "%s: %s", kv, e.msg);
    }
    CHECK_EQ_I(s.n_axes, 20);
    cJSON **pts = NULL;
    int n = -1;
    CHECK(sweep_points(&s, &pts, &n, &e) == -1);
    CHECK_CONTAINS(e.msg, "1048576 points; at most 1000000");
    CHECK(pts == NULL && n == 0);
    /* the first repeat in list order is named, whatever the sort order of the values */
    CHECK(sweep_spec_set(&s, "seed=9,2,3,2,9", &e) == -1);
    CHECK_CONTAINS(e.msg, "--set seed: '2' is listed twice");
    CHECK(sweep_spec_set(&s, "seed=1,1,x", &e) == -1);
    CHECK_CONTAINS(e.msg, "'1' is listed twice");
    CHECK(sweep_spec_set(&s, "seed=1,x,1", &e) == -1); /* the bad value comes first */
    CHECK_CONTAINS(e.msg, "--set seed: ");
    CHECK(strstr(e.msg, "twice") == NULL);
    sweep_spec_free(&s);
    sweep_spec_init(&s);
    CHECK(sweep_spec_parse(&s, "{\"axes\": {\"seed\": [5, 4, 3, 4, 5]}}", "g.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "g.json: axes.seed[3]: \"4\" is already axes.seed[1]");
    sweep_spec_free(&s);
}

TEST(sweep_spec_refusals)
{
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"{\"axes\": {\"n_ssd\": [1, \"x\"]}}", "g.json: axes.n_ssd[1]"},
        {"{\"axes\": {\"n_ssdd\": [1, 2]}}", "unknown setting 'n_ssdd'"},
        {"{\"axes\": {\"seed\": []}}", "axes.seed: expected a non-empty array"},
        {"{\"axes\": {\"seed\": [1, 1]}}", "is already axes.seed[0]"},
        {"{\"base\": {\"policies\": \"recompute,nope\"}}", "g.json: base.policies"},
        {"{\"base\": {\"scenario\": \"no-such-scenario\"}}", "unknown scenario"},
        {"{\"grid\": {}}", "unknown key \"grid\""},
        {"[1]", "expected a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        SweepSpec s;
        sweep_spec_init(&s);
        s.check = sweep_check_value;
        KvErr e = {{0}};
        CHECK_MSG(sweep_spec_parse(&s, cases[i].spec, "g.json", &e) == -1, "accepted: %s", cases[i].spec);
        CHECK_CONTAINS(e.msg, cases[i].want);
        sweep_spec_free(&s);
    }
    SweepSpec s;
    sweep_spec_init(&s);
    s.check = sweep_check_value;
    KvErr e;
    CHECK(sweep_spec_set(&s, "n_ssd=1,,2", &e) == -1);
    CHECK_CONTAINS(e.msg, "empty value");
    CHECK(sweep_spec_set(&s, "n_ssd", &e) == -1);
    CHECK(sweep_spec_set(&s, "tp=1,0", &e) == -1);
    CHECK_CONTAINS(e.msg, "tp");
    sweep_spec_free(&s);
}

TEST(point_result_text_round_trip)
{
    PointResult r;
    memset(&r, 0, sizeof r);
    SimConfig c;
    KvErr e;
    char pol[600];
    cJSON *o = cJSON_Parse("{\"requests\": 30, \"policies\": \"recompute,kv-offload\"}");
    CHECK_MSG(point_config(&c, o, "p", pol, sizeof pol, &e) == 0, "%s", e.msg);
    cJSON_Delete(o);
    CHECK_MSG(point_run(&c, pol, &r, &e) == 0, "%s", e.msg);
    int per = 0;
    while (point_metric_name(per)) per++;
    CHECK_EQ_I(r.n, 2 * per);
    size_t len;
    char *text = point_result_text(&r, &len);
    PointResult back;
    CHECK_MSG(point_result_parse(&back, text, len, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(back.n, r.n);
    for (int i = 0; i < r.n && i < back.n; i++) {
        CHECK_STR(back.m[i].policy, r.m[i].policy);
        CHECK_STR(back.m[i].name, r.m[i].name);
        CHECK(back.m[i].value == r.m[i].value || (isnan(back.m[i].value) && isnan(r.m[i].value))); /* absent stays absent */
    }
    point_result_free(&back);
    /* a worker that died mid-write: no END line */
    CHECK(point_result_parse(&back, text, len / 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "ends early");
    free(text);
    point_result_free(&r);
    /* a failing point: the error travels, no metrics */
    o = cJSON_Parse("{\"model\": \"Llama-2-13B\", \"gpu\": \"RTX4090\", \"requests\": 5, \"policies\": \"recompute\"}");
    CHECK_MSG(point_config(&c, o, "p", pol, sizeof pol, &e) == 0, "%s", e.msg);
    cJSON_Delete(o);
    CHECK(point_run(&c, pol, &r, &e) == -1);
    CHECK_CONTAINS(r.error, "does not fit");
    text = point_result_text(&r, &len);
    CHECK_MSG(point_result_parse(&back, text, len, &e) == 0, "%s", e.msg);
    CHECK_STR(back.error, r.error);
    CHECK_EQ_I(back.n, 0);
    free(text);
    point_result_free(&back);
    point_result_free(&r);
}

/* ---------------------------------------------------------------- the sweep database's identity */

static const char *sweep_tmp(TestCtx *t, const char *name)
{
    static char buf[4][4200];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", test_tmpdir(t), name);
    unlink(b);
    return b;
}

/* a database made by sqlite directly: sql run in it */
static void make_db(TestCtx *t, const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    char *msg = NULL;
    CHECK_MSG(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

static char *file_bytes(const char *path, size_t *n)
{
    KvErr e;
    return kv_read_file(path, n, &e);
}

/* the tables a sweep database had before it carried its application id */
#define SWEEP_TABLES_V0                                                                                              \
    "CREATE TABLE point(id INTEGER PRIMARY KEY, params TEXT NOT NULL UNIQUE,"                                       \
    " status TEXT NOT NULL CHECK(status IN ('pending','done','failed')));"                                          \
    "CREATE TABLE metric(point_id INTEGER NOT NULL REFERENCES point(id), policy TEXT NOT NULL,"                     \
    " name TEXT NOT NULL, value REAL, PRIMARY KEY(point_id, policy, name));"                                        \
    "CREATE TABLE failure(point_id INTEGER PRIMARY KEY REFERENCES point(id), message TEXT NOT NULL);"

/* Reading a file that is not a sweep database (plot --sweep) is refused, naming what it is, and
 * leaves its bytes as they were. */
TEST(sweep_db_refuses_what_is_not_a_sweep_database)
{
    static const struct {
        const char *name, *sql, *text, *expect;
    } cases[] = {
        {"store.db", NULL, NULL, "a kvsim cost store, not a sweep database"},
        {"other.db", "PRAGMA application_id = 1234; CREATE TABLE t(x);", NULL,
         "another application's database (application_id 0x000004d2)"},
        {"plain.db", "CREATE TABLE t(x); INSERT INTO t VALUES (1);", NULL,
         "another application's database (application_id 0x00000000"},
        {"mixed.db", SWEEP_TABLES_V0 "CREATE TABLE t(x);", NULL, "table 't'"},
        {"newer.db", SWEEP_TABLES_V0 "PRAGMA application_id = 1263948631; PRAGMA user_version = 2;", NULL,
         "a sweep database of a newer kvsim (schema 2"},
        {"text.db", NULL, "point,policy,metric,value\n", "not an SQLite database"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        const char *db = sweep_tmp(t, cases[i].name), *csv = sweep_tmp(t, "out.csv");
        KvErr e = {{0}};
        if (i == 0) {
            CostStore st;
            CHECK_MSG(store_open(&st, db, STORE_OPEN_CREATE, &e) == 0, "%s", e.msg);
            store_close(&st);
        } else if (cases[i].sql) {
            make_db(t, db, cases[i].sql);
        } else {
            CHECK(kv_write_atomic(db, cases[i].text, strlen(cases[i].text), &e) == 0);
        }
        size_t n0 = 0, n1 = 0;
        char *before = file_bytes(db, &n0);
        CHECK_MSG(sweep_export_csv(db, csv, &e) == -1, "%s was read as a sweep database", cases[i].name);
        CHECK_CONTAINS(e.msg, db);
        CHECK_CONTAINS(e.msg, cases[i].expect);
        char *after = file_bytes(db, &n1);
        CHECK_MSG(before && after && n0 == n1 && !memcmp(before, after, n0), "%s changed", cases[i].name);
        CHECK(access(csv, F_OK) != 0);
        free(before);
        free(after);
    }
}

/* A sweep database written before databases carried their id (exactly our tables) is read as one;
 * reading it writes nothing into it. */
TEST(sweep_db_reads_one_made_before_the_id)
{
    const char *db = sweep_tmp(t, "v0.db"), *csv = sweep_tmp(t, "v0.csv");
    make_db(t, db, SWEEP_TABLES_V0 "INSERT INTO point VALUES (1, '{\"seed\":\"1\"}', 'done');"
                   "INSERT INTO metric VALUES (1, 'recompute', 'ttft_s.p99', 0.5);");
    KvErr e = {{0}};
    CHECK_MSG(sweep_export_csv(db, csv, &e) == 0, "%s", e.msg);
    char *text = file_bytes(csv, NULL);
    CHECK(text != NULL);
    if (text) CHECK_CONTAINS(text, "1,1,recompute,ttft_s.p99,0.5");
    free(text);
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(h, "PRAGMA application_id", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW);
    CHECK_EQ_I(sqlite3_column_int64(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* an empty database and a missing file are not sweep databases to read */
    const char *empty = sweep_tmp(t, "empty.db");
    CHECK(kv_write_atomic(empty, "", 0, &e) == 0);
    CHECK(sweep_export_csv(empty, csv, &e) == -1);
    CHECK_CONTAINS(e.msg, "an empty database");
    CHECK(sweep_export_csv(sweep_tmp(t, "none.db"), csv, &e) == -1);
    CHECK_CONTAINS(e.msg, "no such sweep database");
    CHECK(access(sweep_tmp(t, "none.db"), F_OK) != 0);
}
