/* config.c — SimConfig defaults, the key=value setter behind --set and config files, and the
 * engine profiles. Validation of values that depend on catalogs happens in sim_world_open. */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/sim.h"
#include "sim/base/units.h"

/* Engine profiles: fixed host-side overhead per iteration (scheduling, input preparation, sampling,
 * output processing). ESTIMATES in the range Vidur profiles for these engines; settable with
 * --set iter_overhead=..., and reported in the TTFT split (it is part of prefill and queueing). */
static const struct {
    const char *name;
    int64_t overhead_ns;
} g_profiles[] = {
    {"vllm", 2000000},
    {"sglang", 800000},
    {"mii", 1200000},
    {"none", 0},
};

void sim_config_defaults(SimConfig *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "Llama-2-7B");
    snprintf(c->platform, sizeof c->platform, "hcache-a100");
    snprintf(c->dtype, sizeof c->dtype, "fp16");
    c->tp = c->pp = c->replicas = 1;
    snprintf(c->engine, sizeof c->engine, "vllm");
    c->iter_overhead_ns = -1; /* from the profile */
    c->token_budget = 512; /* vLLM's chunked-prefill default (max_num_batched_tokens) */
    c->max_batch = 256;
    c->restore_share = 1;
    c->mem_util = 0.9;
    c->block_tokens = 16;
    snprintf(c->trace, sizeof c->trace, "sharegpt4");
    snprintf(c->trace_format, sizeof c->trace_format, "auto");
    c->seed = 1;
    c->requests = 0;
    c->session_rate = 0;
    c->time_scale = 1;
    c->think_ns = 0;
    c->max_context = 0;
    snprintf(c->store, sizeof c->store, "auto");
    c->n_ssd = -1;
    c->state_ttl_ns = 3600LL * 1000000000LL;
    snprintf(c->save_mode, sizeof c->save_mode, "policy");
    c->cf_token = c->cf_layer = c->cf_gpu = c->cf_batch = 1;
    c->quant_bits = 8;
    c->slo_ttft_ns = 1000000000;
    c->slo_tbt_ns = 100000000;
    c->class_edges[0] = 2048;
    c->class_edges[1] = 16384;
    snprintf(c->policy, sizeof c->policy, "recompute");
}

int64_t sim_profile_overhead_ns(const char *engine, KvErr *e);
int64_t sim_profile_overhead_ns(const char *engine, KvErr *e)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_profiles); i++)
        if (strcmp(g_profiles[i].name, engine) == 0) return g_profiles[i].overhead_ns;
    kv_err(e, "unknown engine profile '%s' (known: vllm, sglang, mii, none)", engine);
    return -1;
}

typedef enum { K_STR, K_INT, K_U64, K_DBL, K_DUR, K_SIZE, K_BOOL } KeyType;
typedef struct {
    const char *key;
    KeyType type;
    size_t off;
    size_t len; /* for strings */
    const char *help;
} KeyDef;

#define STR(f, h) {#f, K_STR, offsetof(SimConfig, f), sizeof(((SimConfig *)0)->f), h}
#define FLD(k, t, f, h) {k, t, offsetof(SimConfig, f), 0, h}

static const KeyDef g_keys[] = {
    STR(model, "model name from the catalog (kvsim list models)"),
    STR(platform, "platform name from the catalog (kvsim list platforms)"),
    STR(dtype, "weights/KV dtype: fp16, bf16, fp8, ..."),
    FLD("tp", K_INT, tp, "tensor-parallel GPUs per stage"),
    FLD("pp", K_INT, pp, "pipeline stages per replica"),
    FLD("replicas", K_INT, replicas, "model replicas (sessions pinned to one)"),
    STR(engine, "engine profile: vllm, sglang, mii, none"),
    FLD("iter_overhead", K_DUR, iter_overhead_ns, "host overhead per iteration, e.g. 2 ms (default: profile)"),
    FLD("token_budget", K_INT, token_budget, "tokens per iteration (chunked prefill)"),
    FLD("max_batch", K_INT, max_batch, "max requests in an iteration"),
    FLD("restore_share", K_DBL, restore_share, "share of the token budget restoration compute may use (Cake's GPU availability)"),
    FLD("mem_util", K_DBL, mem_util, "share of HBM used for weights + KV pool"),
    FLD("block_tokens", K_INT, block_tokens, "KV block size in tokens"),
    STR(trace, "generator name (sharegpt4, leval, swebench) or trace file"),
    STR(trace_format, "auto, csv, mooncake, vidur"),
    FLD("seed", K_U64, seed, "random seed"),
    FLD("requests", K_INT, requests, "stop after this many requests (0: all / 1000 for generators)"),
    FLD("session_rate", K_DBL, session_rate, "sessions per second where the trace has no timestamps"),
    FLD("time_scale", K_DBL, time_scale, "multiply trace timestamps and think times"),
    FLD("think", K_DUR, think_ns, "think time between turns without timestamps (0: trace default)"),
    FLD("max_context", K_INT, max_context, "truncate history+new to this many tokens (0: model max)"),
    FLD("evict_each_turn", K_BOOL, evict_each_turn, "drop every session's KV from HBM when its turn ends"),
    STR(store, "saved-state tiers: auto, dram, dram+ssd, dram+remote, remote"),
    FLD("dram", K_SIZE, dram_bytes, "host DRAM for saved state, e.g. 256 GB (default: platform)"),
    FLD("n_ssd", K_INT, n_ssd, "SSDs in the array (default: platform)"),
    STR(nic, "NIC to the remote store, e.g. 10GbE (default: platform)"),
    STR(save_mode, "how state is saved: policy (its default), turn, iteration (two-stage), direct"),
    FLD("cf_token", K_BOOL, cf_token, "cacheflow: token-wise two pointers"),
    FLD("cf_layer", K_BOOL, cf_layer, "cacheflow: layer-wise two pointers"),
    FLD("cf_gpu", K_BOOL, cf_gpu, "cacheflow: boundary activations for stage-parallel restore"),
    FLD("cf_batch", K_BOOL, cf_batch, "cacheflow: most-remaining-first IO order"),
    FLD("quant_bits", K_INT, quant_bits, "kv-quant: bits per KV element, 8 or 4"),
    FLD("state_ttl", K_DUR, state_ttl_ns, "drop saved state unused this long, e.g. 1 h (0: never)"),
    FLD("slo_ttft", K_DUR, slo_ttft_ns, "TTFT objective, e.g. 200 ms"),
    FLD("slo_tbt", K_DUR, slo_tbt_ns, "mean TBT objective per request"),
    FLD("class_short", K_INT, class_edges[0], "history tokens below which a request is 'short'"),
    FLD("class_long", K_INT, class_edges[1], "history tokens from which a request is 'long'"),
    STR(costs, "cost model: 'spec' (roofline from the catalog, default) or a cost store file"),
    STR(cost_device, "device name to read from the cost store (default: the platform's GPU)"),
};

int sim_config_set(SimConfig *c, const char *key, const char *value, KvErr *e)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) {
        const KeyDef *k = &g_keys[i];
        if (strcmp(k->key, key) != 0) continue;
        void *p = (char *)c + k->off;
        int64_t iv;
        double dv;
        uint64_t sz;
        switch (k->type) {
        case K_STR:
            if (strlen(value) >= k->len) return kv_err(e, "%s: value too long (max %zu characters)", key, k->len - 1);
            memcpy(p, value, strlen(value) + 1);
            return 0;
        case K_INT:
            if (kv_parse_i64(value, &iv, e) != 0) return kv_err_prefix(e, "%s: ", key);
            if (iv < 0) return kv_err(e, "%s: expected a non-negative integer, got '%s'", key, value);
            if (k->off == offsetof(SimConfig, tp) || k->off == offsetof(SimConfig, pp) ||
                k->off == offsetof(SimConfig, replicas) || k->off == offsetof(SimConfig, max_batch) ||
                k->off == offsetof(SimConfig, block_tokens) || k->off == offsetof(SimConfig, n_ssd) ||
                k->off == offsetof(SimConfig, quant_bits)) {
                if (k->off == offsetof(SimConfig, quant_bits) && iv != 4 && iv != 8)
                    return kv_err(e, "%s: expected 4 or 8, got '%s'", key, value);
                if (iv > 1000000) return kv_err(e, "%s: %s is too large", key, value);
                *(int *)p = (int)iv;
            } else {
                *(int64_t *)p = iv;
            }
            return 0;
        case K_U64:
            if (kv_parse_i64(value, &iv, e) != 0 || iv < 0) return kv_err(e, "%s: expected a non-negative integer, got '%s'", key, value);
            *(uint64_t *)p = (uint64_t)iv;
            return 0;
        case K_DBL:
            if (kv_parse_double(value, &dv, e) != 0) return kv_err_prefix(e, "%s: ", key);
            if (dv < 0) return kv_err(e, "%s: expected a non-negative number, got '%s'", key, value);
            *(double *)p = dv;
            return 0;
        case K_DUR:
            if (kv_parse_duration(value, &iv, e) != 0) return kv_err_prefix(e, "%s: ", key);
            *(int64_t *)p = iv;
            return 0;
        case K_SIZE:
            if (kv_parse_size(value, &sz, e) != 0) return kv_err_prefix(e, "%s: ", key);
            *(uint64_t *)p = sz;
            return 0;
        case K_BOOL:
            if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "on")) *(int *)p = 1;
            else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "off")) *(int *)p = 0;
            else return kv_err(e, "%s: expected true or false, got '%s'", key, value);
            return 0;
        }
    }
    char list[2048];
    size_t len = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", g_keys[i].key);
    return kv_err(e, "unknown setting '%s' (known: %s)", key, list);
}

void sim_config_print_keys(FILE *out)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) fprintf(out, "  %-16s %s\n", g_keys[i].key, g_keys[i].help);
}
