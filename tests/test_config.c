/* test_config.c — the settings table (sim/engine/config.c): every rejected value is refused by name
 * with its range, the defaults are the ones the simulator always had, the JSON record reads back to
 * the same configuration, policy knobs parse (and their old spellings), knob tables are checked,
 * and the catalog-dependent rules and resolved values of sim_world_open. */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/simtest.h"

/* --set KEY=VALUE refused; the message contains every one of the fragments (key, range, ...). */
static const struct {
    const char *key, *value, *want1, *want2;
} g_rejected[] = {
    {"token_budget", "0", "token_budget", "1..1048576"},
    {"token_budget", "-5", "token_budget", "1..1048576"},
    {"token_budget", "99999999999999999999", "token_budget", "1..1048576"},
    {"token_budget", "2000000", "token_budget", "1..1048576"},
    {"token_budget", "1.5", "token_budget", "'1.5'"},
    {"token_budget", "nan", "token_budget", "'nan'"},
    {"max_batch", "0", "max_batch", "1..1048576"},
    {"block_tokens", "0", "block_tokens", "1..65536"},
    {"mem_util", "1.5", "mem_util", "(0, 1]"},
    {"mem_util", "0", "mem_util", "(0, 1]"},
    {"mem_util", "-0.1", "mem_util", "(0, 1]"},
    {"mem_util", "nan", "mem_util", "finite"},
    {"mem_util", "inf", "mem_util", "finite"},
    {"restore_share", "0", "restore_share", "(0, 1]"},
    {"restore_share", "1.01", "restore_share", "(0, 1]"},
    {"restore_share", "-inf", "restore_share", "finite"},
    {"time_scale", "0", "time_scale", "(0, 1e+06]"},
    {"time_scale", "-1", "time_scale", "(0, 1e+06]"},
    {"time_scale", "nan", "time_scale", "finite"},
    {"session_rate", "-1", "session_rate", "[0, 1e+06]"},
    {"session_rate", "inf", "session_rate", "finite"},
    {"think", "2000000 s", "think", "0 s..1000000 s"},
    {"think", "5", "think", "unit"},
    {"think", "-1 s", "think", "negative"},
    {"iter_overhead", "300 h", "iter_overhead", "0 s..1000000 s"},
    {"iter_overhead", "nan ms", "iter_overhead", "no number"},
    {"state_ttl", "1000 h", "state_ttl", "0 s..1000000 s"},
    {"slo_ttft", "12 days", "slo_ttft", "unit"},
    {"slo_tbt", "1000001 s", "slo_tbt", "0 s..1000000 s"},
    {"seed", "-1", "seed", "0..18446744073709551615"},
    {"seed", "18446744073709551616", "seed", "0..18446744073709551615"},
    {"seed", "1.5", "seed", "'1.5'"},
    {"requests", "-1", "requests", "0..1000000000000"},
    {"tp", "0", "tp", "1..1024"},
    {"tp", "4294967297", "tp", "1..1024"},
    {"pp", "0", "pp", "1..16"},
    {"pp", "17", "pp", "1..16"},
    {"replicas", "0", "replicas", "1..64"},
    {"n_ssd", "-1", "n_ssd", "0..1024"},
    {"max_context", "-3", "max_context", "0..16777216"},
    {"class_short", "-1", "class_short", "0..1073741824"},
    {"dram", "-2 GB", "dram", "negative"},
    {"dram", "lots", "dram", "no number"},
    {"evict_each_turn", "maybe", "evict_each_turn", "true or false"},
    {"save_mode", "sometimes", "save_mode", "policy, turn, iteration, direct"},
    {"store", "tape", "store", "auto, dram, dram+cxl, dram+cxl+ssd, dram+cxl+ssd+remote, dram+cxl+remote"},
    {"store", "dram,tape", "store", "unknown value 'dram,tape'"},
    {"engine", "tgi", "engine", "vllm, sglang, mii, none"},
    {"trace_format", "parquet", "trace_format", "auto, csv, mooncake, vidur"},
    {"model", "", "model", "empty"},
    {"cacheflow.gpu", "2", "cacheflow.gpu", "true or false"},
    {"cf_gpu", "maybe", "cacheflow.gpu", "true or false"},
    {"kv-quant.bits", "5", "kv-quant.bits", "allowed: 4, 8"},
    {"kv-quant.bits", "16", "kv-quant.bits", "4..8"},
    {"quant_bits", "nan", "kv-quant.bits", "finite"},
    {"kv-quant.bits", "x", "kv-quant.bits", "'x'"},
    {"cacheflow.nope", "1", "unknown setting 'cacheflow.nope'", "cacheflow.gpu"},
    {"nope", "1", "unknown setting 'nope'", "token_budget"},
};

TEST(config_rejects_each_bad_value_by_name_with_range)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_rejected); i++) {
        SimConfig c, before;
        sim_config_defaults(&c);
        before = c;
        KvErr e = {{0}};
        int rc = sim_config_set(&c, g_rejected[i].key, g_rejected[i].value, &e);
        CHECK_MSG(rc != 0, "%s=%s accepted", g_rejected[i].key, g_rejected[i].value);
        if (rc == 0) continue;
        CHECK_CONTAINS(e.msg, g_rejected[i].want1);
        CHECK_CONTAINS(e.msg, g_rejected[i].want2);
        CHECK_MSG(memcmp(&c, &before, sizeof c) == 0, "%s=%s changed the config although refused", g_rejected[i].key,
                  g_rejected[i].value);
    }
}

/* the same ranges apply to fields set directly in C (sim_config_check re-checks every row), and
 * the cross-field rules */
static void d_budget(SimConfig *c) { c->token_budget = 0; }
static void d_batch(SimConfig *c) { c->max_batch = -1; }
static void d_block(SimConfig *c) { c->block_tokens = 0; }
static void d_mem(SimConfig *c) { c->mem_util = 1.5; }
static void d_mem_nan(SimConfig *c) { c->mem_util = NAN; }
static void d_share(SimConfig *c) { c->restore_share = 0; }
static void d_scale(SimConfig *c) { c->time_scale = 0; }
static void d_scale_inf(SimConfig *c) { c->time_scale = INFINITY; }
static void d_rate(SimConfig *c) { c->session_rate = -0.5; }
static void d_think(SimConfig *c) { c->think_ns = INT64_MAX; }
static void d_ttl(SimConfig *c) { c->state_ttl_ns = -5; }
static void d_overhead(SimConfig *c) { c->iter_overhead_ns = -2; }
static void d_tp(SimConfig *c) { c->tp = 0; }
static void d_pp(SimConfig *c) { c->pp = SIM_MAX_STAGES + 1; }
static void d_replicas(SimConfig *c) { c->replicas = 0; }
static void d_requests(SimConfig *c) { c->requests = -1; }
static void d_store(SimConfig *c) { c->store = sim_store_count() + 1; }
static void d_save(SimConfig *c) { c->save_mode = (SimSaveMode)-1; }
static void d_bool(SimConfig *c) { c->evict_each_turn = 2; }
static void d_knob(SimConfig *c) { c->knobs[0][0] = 0; } /* set below to a real knob */
static void d_share_budget(SimConfig *c)
{
    c->token_budget = 512;
    c->restore_share = 0.001; /* 0.5 token per iteration */
}
static void d_classes(SimConfig *c)
{
    c->class_edges[0] = 5000;
    c->class_edges[1] = 4000;
}
static void d_format(SimConfig *c) { c->trace_format = SIM_TRACE_CSV; } /* the default trace is a generator */
static void d_dtype(SimConfig *c) { snprintf(c->dtype, sizeof c->dtype, "fp13"); }

TEST(config_check_rejects_fields_set_directly_and_cross_field_rules)
{
    struct {
        void (*set)(SimConfig *c);
        const char *want1, *want2;
    } cases[] = {
        {d_budget, "token_budget", "1..1048576"},
        {d_batch, "max_batch", "1..1048576"},
        {d_block, "block_tokens", "1..65536"},
        {d_mem, "mem_util", "(0, 1]"},
        {d_mem_nan, "mem_util", "finite"},
        {d_share, "restore_share", "(0, 1]"},
        {d_scale, "time_scale", "(0, 1e+06]"},
        {d_scale_inf, "time_scale", "finite"},
        {d_rate, "session_rate", "[0, 1e+06]"},
        {d_think, "think", "0 s..1000000 s"},
        {d_ttl, "state_ttl", "0 s..1000000 s"},
        {d_overhead, "iter_overhead", "0 s..1000000 s"},
        {d_tp, "tp", "1..1024"},
        {d_pp, "pp", "1..16"},
        {d_replicas, "replicas", "1..64"},
        {d_requests, "requests", "0..1000000000000"},
        {d_store, "store", "invalid"},
        {d_save, "save_mode", "invalid"},
        {d_bool, "evict_each_turn", "true or false"},
        {d_knob, "cacheflow.token", ""},
        {d_share_budget, "restore_share", "1/token_budget"},
        {d_classes, "class_short", "class_long"},
        {d_format, "trace_format", "generator"},
        {d_dtype, "dtype", "fp13"},
    };
    int cf = -1;
    for (int i = 0; i < policy_count(); i++)
        if (!strcmp(policy_at(i)->name, "cacheflow")) cf = i;
    CHECK(cf >= 0);
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        SimConfig c;
        sim_config_defaults(&c);
        KvErr e = {{0}};
        CHECK_MSG(sim_config_check(&c, &e) == 0, "defaults refused: %s", e.msg);
        cases[i].set(&c);
        if (cases[i].set == d_knob) c.knobs[cf][0] = 0.5; /* a bool knob at 0.5 */
        int rc = sim_config_check(&c, &e);
        CHECK_MSG(rc != 0, "case %zu (%s) accepted", i, cases[i].want1);
        if (rc == 0) continue;
        CHECK_CONTAINS(e.msg, cases[i].want1);
        CHECK_CONTAINS(e.msg, cases[i].want2);
    }
}

/* boundary values are accepted */
TEST(config_accepts_the_edges_of_each_range)
{
    static const char *ok[][2] = {
        {"token_budget", "1"},      {"token_budget", "1048576"}, {"mem_util", "1"},        {"mem_util", "1e-9"},
        {"restore_share", "1"},     {"time_scale", "1e-3"},      {"think", "1000000 s"},    {"think", "0"},
        {"seed", "18446744073709551615"}, {"seed", "0"},         {"pp", "16"},              {"n_ssd", "platform"},
        {"n_ssd", "0"},             {"iter_overhead", "profile"}, {"iter_overhead", "0 s"}, {"dram", "0"},
        {"dram", "2GB"},            {"nic", "none"},             {"cacheflow.gpu", "false"}, {"cf_batch", "0"},
        {"kv-quant.bits", "4"},     {"quant_bits", "8"},         {"requests", "2K"},        {"store", "dram+remote"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(ok); i++) {
        SimConfig c;
        sim_config_defaults(&c);
        KvErr e = {{0}};
        CHECK_MSG(sim_config_set(&c, ok[i][0], ok[i][1], &e) == 0, "%s=%s: %s", ok[i][0], ok[i][1], e.msg);
        CHECK_MSG(sim_config_check(&c, &e) == 0, "%s=%s: check: %s", ok[i][0], ok[i][1], e.msg);
    }
    SimConfig c;
    sim_config_defaults(&c);
    KvErr e;
    CHECK(sim_config_set(&c, "restore_share", "0.001953125", &e) == 0); /* exactly 1/512 */
    CHECK(sim_config_check(&c, &e) == 0);
    CHECK(sim_config_set(&c, "seed", "18446744073709551615", &e) == 0);
    CHECK_EQ_U(c.seed, UINT64_MAX);
    CHECK(sim_config_set(&c, "requests", "2K", &e) == 0);
    CHECK_EQ_I(c.requests, 2000);
}

/* the defaults are exactly what SimConfig had before the table generated them */
TEST(config_defaults_are_unchanged)
{
    SimConfig c;
    sim_config_defaults(&c);
    KvErr e = {{0}};
    CHECK_MSG(sim_config_table_check(&e) == 0, "%s", e.msg);
    CHECK_MSG(sim_config_check(&c, &e) == 0, "%s", e.msg);
    CHECK_STR(c.model, "Llama-2-7B");
    CHECK_STR(c.platform, "hcache-a100");
    CHECK_STR(c.dtype, "fp16");
    CHECK(c.tp == 1 && c.pp == 1 && c.replicas == 1);
    CHECK(c.engine == SIM_ENGINE_VLLM);
    CHECK_EQ_I(c.iter_overhead_ns, -1);
    CHECK_EQ_I(sim_engine_overhead_ns(SIM_ENGINE_VLLM), 2000000);
    CHECK_EQ_I(sim_engine_overhead_ns(SIM_ENGINE_SGLANG), 800000);
    CHECK_EQ_I(sim_engine_overhead_ns(SIM_ENGINE_MII), 1200000);
    CHECK_EQ_I(sim_engine_overhead_ns(SIM_ENGINE_NONE), 0);
    CHECK_EQ_I(c.token_budget, 512);
    CHECK_EQ_I(c.max_batch, 256);
    CHECK(c.restore_share == 1 && c.mem_util == 0.9);
    CHECK_EQ_I(c.block_tokens, 16);
    CHECK_STR(c.trace, "sharegpt4");
    CHECK(c.trace_format == SIM_TRACE_AUTO);
    CHECK_EQ_U(c.seed, 1);
    CHECK(c.requests == 0 && c.session_rate == 0 && c.time_scale == 1 && c.think_ns == 0 && c.max_context == 0);
    CHECK_EQ_I(c.evict_each_turn, 0);
    CHECK(c.store == SIM_STORE_AUTO);
    CHECK_EQ_U(c.dram_bytes, 0);
    CHECK_EQ_I(c.n_ssd, -1);
    CHECK_STR(c.nic, "");
    CHECK_EQ_I(c.state_ttl_ns, 3600LL * 1000000000LL);
    CHECK(c.save_mode == SIM_SAVE_POLICY);
    CHECK_EQ_I(c.slo_ttft_ns, 1000000000);
    CHECK_EQ_I(c.slo_tbt_ns, 100000000);
    CHECK(c.class_edges[0] == 2048 && c.class_edges[1] == 16384);
    CHECK_STR(c.costs, "spec");
    CHECK_STR(c.cost_device, "");
    CHECK_STR(c.policy, "recompute");
    /* knobs: CacheFlow's four axes on, kv-quant at 8 bits */
    const double *cf = sim_config_knobs(&c, policy_find("cacheflow", NULL));
    const double *q = sim_config_knobs(&c, policy_find("kv-quant", NULL));
    CHECK(cf && cf[0] == 1 && cf[1] == 1 && cf[2] == 1 && cf[3] == 1);
    CHECK(q && q[0] == 8);
}

/* Apply a JSON object of settings, as --config does. */
static int apply_json(SimConfig *c, cJSON *o, KvErr *e)
{
    for (cJSON *it = o->child; it; it = it->next) {
        char val[4200];
        if (!strcmp(it->string, "policies")) continue;
        if (cJSON_IsString(it)) snprintf(val, sizeof val, "%s", it->valuestring);
        else if (cJSON_IsBool(it)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else snprintf(val, sizeof val, "%.17g", it->valuedouble);
        if (sim_config_set(c, it->string, val, e) != 0) return -1;
    }
    return 0;
}

static char *json_text(const SimConfig *c)
{
    cJSON *o = sim_config_json(c);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

TEST(config_json_round_trip_gives_the_same_config)
{
    static const char *set[][2] = {
        {"model", "Llama-3.1-8B"}, {"tp", "2"},          {"engine", "sglang"},       {"iter_overhead", "1.5 ms"},
        {"token_budget", "1024"},  {"restore_share", "0.3"}, {"mem_util", "0.85"},   {"think", "30 s"},
        {"seed", "18446744073709551615"}, {"session_rate", "0.123456789012345"}, {"time_scale", "0.1"},
        {"store", "dram+remote"},  {"dram", "256 GiB"},  {"n_ssd", "2"},             {"nic", "10GbE"},
        {"state_ttl", "90 min"},   {"save_mode", "direct"}, {"slo_ttft", "200 ms"},  {"slo_tbt", "1500 us"},
        {"class_short", "100"},    {"cf_gpu", "0"},      {"kv-quant.bits", "4"},     {"evict_each_turn", "true"},
        {"trace", "traces/data/x.csv"}, {"trace_format", "vidur"}, {"max_context", "32768"}, {"costs", "a.db"},
    };
    SimConfig a, b;
    sim_config_defaults(&a);
    KvErr e = {{0}};
    for (size_t i = 0; i < KV_ARRAY_LEN(set); i++)
        CHECK_MSG(sim_config_set(&a, set[i][0], set[i][1], &e) == 0, "%s: %s", set[i][0], e.msg);
    cJSON *o = sim_config_json(&a);
    CHECK(o != NULL);
    if (!o) return;
    /* the names are the --set names, values in input syntax */
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "iter_overhead")), "1500 us");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "think")), "30 s");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "state_ttl")), "90 min");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "dram")), "256 GiB");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "save_mode")), "direct");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "store")), "dram+remote");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "seed")), "18446744073709551615"); /* > 2^53: text */
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o, "cacheflow.gpu")));
    CHECK(cJSON_GetObjectItem(o, "kv-quant.bits") && cJSON_GetObjectItem(o, "kv-quant.bits")->valuedouble == 4);
    CHECK(!cJSON_GetObjectItem(o, "iter_overhead_ns") && !cJSON_GetObjectItem(o, "think_ns") &&
          !cJSON_GetObjectItem(o, "cacheflow_axes") && !cJSON_GetObjectItem(o, "quant_bits"));
    sim_config_defaults(&b);
    CHECK_MSG(apply_json(&b, o, &e) == 0, "%s", e.msg);
    cJSON_Delete(o);
    char *ta = json_text(&a), *tb = json_text(&b);
    CHECK_STR(ta, tb);
    free(ta);
    free(tb);
    CHECK(a.session_rate == b.session_rate && a.restore_share == b.restore_share && a.mem_util == b.mem_util);
    CHECK(a.seed == b.seed && a.iter_overhead_ns == b.iter_overhead_ns && a.dram_bytes == b.dram_bytes);
    CHECK(memcmp(a.knobs, b.knobs, sizeof a.knobs) == 0);
    /* sentinels are written as their words and read back as sentinels */
    sim_config_defaults(&a);
    o = sim_config_json(&a);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "iter_overhead")), "profile");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "n_ssd")), "platform");
    sim_config_defaults(&b);
    b.n_ssd = 3;
    CHECK(apply_json(&b, o, &e) == 0);
    CHECK_EQ_I(b.n_ssd, -1);
    cJSON_Delete(o);
}

TEST(config_knobs_parse_with_their_aliases)
{
    SimConfig c;
    sim_config_defaults(&c);
    KvErr e;
    const KvPolicyOps *cf = policy_find("cacheflow", &e), *q = policy_find("kv-quant", &e);
    CHECK(cf && q);
    if (!cf || !q) return;
    const double *v = sim_config_knobs(&c, cf);
    int gpu = policy_knob_index(cf, "gpu"), batch = policy_knob_index(cf, "batch");
    CHECK(gpu >= 0 && batch >= 0 && policy_knob_index(cf, "nope") < 0);
    CHECK(sim_config_set(&c, "cacheflow.gpu", "0", &e) == 0);
    CHECK(v[gpu] == 0 && v[batch] == 1);
    CHECK(sim_config_set(&c, "cacheflow.gpu", "on", &e) == 0);
    CHECK(v[gpu] == 1);
    CHECK(sim_config_set(&c, "cf_batch", "false", &e) == 0); /* the old spelling */
    CHECK(v[batch] == 0);
    CHECK(sim_config_set(&c, "quant_bits", "4", &e) == 0);
    CHECK(sim_config_knobs(&c, q)[0] == 4);
    CHECK(sim_config_set(&c, "kv-quant.bits", "8", &e) == 0);
    CHECK(sim_config_knobs(&c, q)[0] == 8);
    /* a knob of another policy does not exist under this one's name */
    CHECK(sim_config_set(&c, "kv-quant.gpu", "0", &e) != 0);
    CHECK_CONTAINS(e.msg, "unknown setting");
    /* read through PolicyEnv as a policy does */
    PolicyEnv env = {.ops = cf, .knobs = v};
    CHECK(policy_knob(&env, "gpu") == 1 && policy_knob(&env, "batch") == 0);
    CHECK(isnan(policy_knob(&env, "bits")));
    /* the save mode a policy runs with */
    CHECK(sim_config_save_mode(&c, policy_find("hcache", NULL)) == SAVE_PER_ITERATION);
    CHECK(sim_config_save_mode(&c, cf) == SAVE_TURN_END);
    CHECK(sim_config_set(&c, "save_mode", "direct", &e) == 0);
    CHECK(sim_config_save_mode(&c, policy_find("hcache", NULL)) == SAVE_DIRECT);
}

/* knob tables are validated with the registry */
static int dummy_plan(void *s, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *p, KvErr *e) { return 0; }
static double dummy_saved(void *s, const PolicyEnv *env) { return 0; }

TEST(config_registry_check_validates_knob_tables)
{
    KvErr e = {{0}};
    CHECK_MSG(policy_registry_check_builtin(&e) == 0, "%s", e.msg);
    static const PolicyKnob good[] = {{.name = "x", .type = KNOB_INT, .def = 2, .min = 1, .max = 4, .help = "x"}};
    static const PolicyKnob dup[] = {{.name = "x", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .help = "x"},
                                     {.name = "x", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .help = "x"}};
    static const PolicyKnob out[] = {{.name = "x", .type = KNOB_INT, .def = 9, .min = 1, .max = 4, .help = "x"}};
    static const PolicyKnob frac[] = {{.name = "x", .type = KNOB_INT, .def = 1.5, .min = 1, .max = 4, .help = "x"}};
    static const PolicyKnob boolr[] = {{.name = "x", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 2, .help = "x"}};
    static const PolicyKnob badname[] = {{.name = "X.y", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .help = "x"}};
    static const PolicyKnob nohelp[] = {{.name = "x", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1}};
    static const PolicyKnob choice[] = {{.name = "x", .type = KNOB_INT, .def = 3, .min = 1, .max = 4, .n_choices = 2,
                                         .choices = {2, 4}, .help = "x"}};
    static const PolicyKnob nanr[] = {{.name = "x", .type = KNOB_REAL, .def = 0, .min = 0, .max = NAN, .help = "x"}};
    static const PolicyKnob al1[] = {{.name = "x", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "old_x", .help = "x"}};
    static const PolicyKnob al2[] = {{.name = "y", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "old_x", .help = "y"}};
    struct {
        const PolicyKnob *k;
        int n;
        const char *want;
    } cases[] = {
        {dup, 2, "listed twice"},        {out, 1, "out of range"},  {frac, 1, "integer"},
        {boolr, 1, "[0, 1]"},            {badname, 1, "[a-z0-9_]+"}, {nohelp, 1, "help"},
        {choice, 1, "not allowed"},      {nanr, 1, "finite"},       {good, POLICY_MAX_KNOBS + 1, "at most"},
        {NULL, 1, "no knob table"},
    };
    KvPolicyOps base = {.name = "t", .summary = "t", .plan_restore = dummy_plan, .saved_bytes_per_token = dummy_saved,
                        .knobs = good, .n_knobs = 1};
    const KvPolicyOps *one[1] = {&base};
    CHECK_MSG(policy_registry_check(one, 1, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        KvPolicyOps p = base;
        p.knobs = cases[i].k;
        p.n_knobs = cases[i].n;
        const KvPolicyOps *tab[1] = {&p};
        int rc = policy_registry_check(tab, 1, &e);
        CHECK_MSG(rc != 0, "knob case %zu accepted", i);
        if (rc == 0) continue;
        CHECK_CONTAINS(e.msg, cases[i].want);
        CHECK_CONTAINS(e.msg, "'t'");
    }
    /* one alias for two knobs of two policies */
    KvPolicyOps a = base, b = base;
    a.knobs = al1;
    b.name = "u";
    b.knobs = al2;
    const KvPolicyOps *two[2] = {&a, &b};
    CHECK(policy_registry_check(two, 2, &e) != 0);
    CHECK_CONTAINS(e.msg, "old_x");
    /* a policy name with a dot would make knob keys ambiguous */
    KvPolicyOps d = base;
    d.name = "a.b";
    const KvPolicyOps *dot[1] = {&d};
    CHECK(policy_registry_check(dot, 1, &e) != 0);
}

/* the settings are checked before anything is opened: an unknown model is not even looked up */
TEST(config_world_open_checks_settings_first)
{
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.model, sizeof c.model, "no-such-model");
    c.token_budget = 0;
    SimWorld w;
    KvErr e = {{0}};
    CHECK(sim_world_open(&w, &c, &e) != 0);
    CHECK_CONTAINS(e.msg, "token_budget");
}

TEST(config_world_checks_the_platform_and_resolves_derived_values)
{
    SimConfig c;
    KvErr e = {{0}};
    SimWorld w;
    /* tp 16 on the 4-GPU HCache box */
    sim_config_defaults(&c);
    c.tp = 16;
    CHECK(sim_world_open(&w, &c, &e) != 0);
    CHECK_CONTAINS(e.msg, "tp 16");
    CHECK_CONTAINS(e.msg, "hcache-a100");
    CHECK_CONTAINS(e.msg, "allowed tp × pp <= 4");
    c.tp = 2;
    c.pp = 4;
    CHECK(sim_world_open(&w, &c, &e) != 0);
    CHECK_CONTAINS(e.msg, "pp 4");
    /* a store tier the platform lacks */
    sim_config_defaults(&c);
    simtest_set(t, &c, "store", "remote");
    CHECK(sim_world_open(&w, &c, &e) != 0);
    CHECK_CONTAINS(e.msg, "store");
    CHECK_CONTAINS(e.msg, "no NIC");
    simtest_set(t, &c, "nic", "no-such-nic");
    CHECK(sim_world_open(&w, &c, &e) != 0);
    CHECK_CONTAINS(e.msg, "nic");
    /* auto on the HCache box (4 SSDs, no NIC): DRAM + SSD, resolved */
    sim_config_defaults(&c);
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    CHECK(!strcmp(sim_store_name(w.cfg->store), "dram+ssd") && w.save_tier == TIER_SSD);
    CHECK_EQ_I(w.cfg->n_ssd, 4);
    CHECK_STR(w.cfg->nic, "none");
    CHECK(w.nic == NULL);
    CHECK_EQ_I(w.cfg->iter_overhead_ns, 2000000);
    CHECK_EQ_I(w.cfg->max_context, w.model->max_pos);
    CHECK_EQ_U(w.cfg->dram_bytes, w.platform->dram_bytes);
    CHECK_STR(w.cfg->cost_device, w.hw.gpus[w.platform->gpu].name);
    cJSON *o = sim_config_json(w.cfg);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "iter_overhead")), "2 ms");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "store")), "dram+ssd");
    CHECK(cJSON_GetObjectItem(o, "n_ssd") && cJSON_GetObjectItem(o, "n_ssd")->valuedouble == 4);
    cJSON_Delete(o);
    sim_world_close(&w);
    /* without SSDs, with a NIC: DRAM + remote */
    sim_config_defaults(&c);
    snprintf(c.platform, sizeof c.platform, "cacheflow-a100-40g");
    snprintf(c.model, sizeof c.model, "Llama-3.1-8B");
    simtest_set(t, &c, "engine", "none");
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    if (w.platform->ssd < 0 && w.platform->nic >= 0) {
        CHECK(!strcmp(sim_store_name(w.cfg->store), "dram+remote") && w.save_tier == TIER_REMOTE);
        CHECK(w.nic != NULL);
        CHECK_STR(w.cfg->nic, w.hw.nics[w.platform->nic].name);
    }
    CHECK_EQ_I(w.cfg->iter_overhead_ns, 0);
    sim_world_close(&w);
}

/* The stores are every chain of distinct tiers with DRAM only first, named by the tiers' names: with
 * the four tiers below HBM (DRAM, CXL memory, the SSD array, the remote store), 16 orders of the
 * three below DRAM (none, 3 of one, 6 of two, 6 of three), each with DRAM first or without it (but
 * not empty): 31. Each name parses to its chain and back, with '+' or ','. */
TEST(config_stores_are_the_chains_of_the_tier_names)
{
    CHECK_EQ_I(SIM_TIERS, 5);
    CHECK_EQ_I(sim_store_count(), 31);
    const char *want[] = {"dram", "dram+ssd", "dram+ssd+remote", "dram+remote", "dram+remote+ssd", "ssd", "ssd+remote",
                          "remote", "remote+ssd", "dram+cxl+ssd+remote", "cxl", "remote+cxl+ssd"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int found = 0;
        for (int s = 1; s <= sim_store_count(); s++) found += !strcmp(sim_store_name(s), want[k]);
        CHECK_MSG(found == 1, "store %s found %d times", want[k], found);
    }
    for (int s = 1; s <= sim_store_count(); s++) {
        Tier ch[SIM_STORE_MAX_TIERS];
        int n = sim_store_chain(s, ch);
        CHECK(n >= 1);
        CHECK_EQ_I(sim_store_of(ch, n), s);
        for (int i = 1; i < n; i++) CHECK(ch[i] != TIER_DRAM); /* DRAM only first */
        SimConfig c;
        sim_config_defaults(&c);
        char comma[64];
        snprintf(comma, sizeof comma, "%s", sim_store_name(s));
        for (char *q = comma; *q; q++)
            if (*q == '+') *q = ',';
        simtest_set(t, &c, "store", comma);
        CHECK_EQ_I(c.store, s);
    }
    Tier bad[2] = {TIER_SSD, TIER_DRAM};
    CHECK_EQ_I(sim_store_of(bad, 2), -1);
    SimConfig c;
    sim_config_defaults(&c);
    KvErr e;
    CHECK(sim_config_set(&c, "store", "ssd+dram", &e) != 0);
    CHECK_CONTAINS(e.msg, "store");
}
