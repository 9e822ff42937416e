/* config.c — the one table of simulator settings and everything generated from it: the defaults,
 * the key=value parser behind --set and config files, --help, sim_config_check, the JSON record
 * in summary.json; the policies' knobs (their tables live in the policies, their values here); the
 * stores (every chain of tier names); the engine profiles. The resolution of derived settings
 * against the catalogs (sim_config_resolve, called by sim_world_open) is config_resolve.c's.
 *
 * Not responsible for: the catalogs' own validation (hw.c, model.c), whether the model fits in
 * HBM (the engine's setup, which knows the KV pool), what a trace file contains (traces/).
 *
 * Invariants: every key is one row of g_keys; a row's default is written in the input syntax and
 * goes through the same parser and range check as user input (a test checks that the defaults
 * pass sim_config_check); sim_config_set leaves the config unchanged on error; sim_config_json
 * writes every row in a syntax sim_config_set reads back to the same value (durations and sizes
 * exactly, reals with 17 significant digits). Bounds keep simulated time far from int64 overflow:
 * every duration is at most 10^6 s (10^15 ns, also exact in a JSON double).
 * Complexity: a key lookup is linear in the table (about 40 rows + knobs).
 */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/sim.h"
#include "sim/base/units.h"
#include "traces/trace.h"

/* ------------------------------------------------------------------ enum names */

/* Engine profiles: fixed host-side overhead per iteration (scheduling, input preparation, sampling,
 * output processing). ESTIMATES in the range Vidur profiles for these engines; settable with
 * --set iter_overhead=..., and reported in the TTFT split (it is part of prefill and queueing). */
static const char *const g_engine_names[] = {"vllm", "sglang", "mii", "none", NULL};
static const int64_t g_engine_overhead_ns[] = {2000000, 800000, 1200000, 0};
/* The stores: every chain of distinct tiers with host DRAM, where it is one, first (a chain may also
 * be spelled with commas: dram,ssd,remote), enumerated once from policy.h's tiers depth first in
 * tier order, the chains that start with DRAM first; SimStore is the index ("auto" is 0). */
#define MAX_STORES 128
static const char *g_store_names[MAX_STORES + 2] = {"auto"};
static char g_store_text[MAX_STORES + 1][SIM_TIERS * 12];
static Tier g_store_chains[MAX_STORES + 1][SIM_STORE_MAX_TIERS];
static int g_store_len[MAX_STORES + 1];
static int g_n_stores = 1;

static void store_add(const Tier *chain, int n)
{
    if (g_n_stores > MAX_STORES) return; /* (more tiers than this table was sized for: the test of the count fails) */
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        g_store_chains[g_n_stores][i] = chain[i];
        len += (size_t)snprintf(g_store_text[g_n_stores] + len, sizeof g_store_text[0] - len, "%s%s", i ? "+" : "", tier_name(chain[i]));
    }
    g_store_len[g_n_stores] = n;
    g_store_names[g_n_stores] = g_store_text[g_n_stores];
    g_n_stores++;
}

/* chain[0..n) so far; every extension by a tier below DRAM not yet in it */
static void store_extend(Tier *chain, int n)
{
    for (int t = TIER_DRAM + 1; t < SIM_TIERS; t++) {
        int used = 0;
        for (int i = 0; i < n; i++) used |= chain[i] == (Tier)t;
        if (used) continue;
        chain[n] = (Tier)t;
        store_add(chain, n + 1);
        store_extend(chain, n + 1);
    }
}

static void stores_init(void)
{
    Tier chain[SIM_STORE_MAX_TIERS] = {TIER_DRAM};
    store_add(chain, 1);
    store_extend(chain, 1);
    store_extend(chain, 0);
    g_store_names[g_n_stores] = NULL;
}

static void stores_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, stores_init);
}

int sim_store_count(void)
{
    stores_ready();
    return g_n_stores - 1;
}

int sim_store_chain(SimStore s, Tier out[SIM_STORE_MAX_TIERS])
{
    stores_ready();
    if (s <= SIM_STORE_AUTO || s >= g_n_stores) return 0;
    for (int i = 0; i < g_store_len[s]; i++) out[i] = g_store_chains[s][i];
    return g_store_len[s];
}

SimStore sim_store_of(const Tier *chain, int n)
{
    stores_ready();
    for (int s = 1; s < g_n_stores; s++)
        if (g_store_len[s] == n && !memcmp(g_store_chains[s], chain, (size_t)n * sizeof *chain)) return s;
    return -1;
}

int sim_store_has(SimStore s, Tier t)
{
    Tier ch[SIM_STORE_MAX_TIERS];
    int n = sim_store_chain(s, ch);
    for (int i = 0; i < n; i++)
        if (ch[i] == t) return 1;
    return 0;
}
static const char *const g_save_names[] = {"policy", "turn", "iteration", "direct", NULL};
static const char *const g_stack_names[] = {"auto", "fa2", "fa3", "vllm-0.19", "vidur", NULL}; /* SpecStack order */
static const char *const g_arrival_names[] = {"session", "trace", NULL};   /* SimArrivals order */
static const char *const g_alloc_names[] = {"ondemand", "reserve", NULL};   /* SimAlloc order */
static const char *const g_router_names[] = {"least-loaded", "prefix", NULL}; /* SimRouter order */
static const char *const g_preempt_names[] = {"recompute", "swap", NULL};   /* SimPreempt order */

SimLoadMode sim_load_mode(const SimConfig *c)
{
    if (c->concurrency > 0) return SIM_LOAD_CONCURRENCY;
    if (c->request_rate > 0) return SIM_LOAD_TRACE; /* every request timed in advance: open loop */
    return c->arrivals == SIM_ARRIVALS_TRACE ? SIM_LOAD_TRACE : SIM_LOAD_SESSION;
}

const char *sim_load_mode_name(SimLoadMode m)
{
    switch (m) {
    case SIM_LOAD_TRACE: return "trace";
    case SIM_LOAD_CONCURRENCY: return "concurrency";
    case SIM_LOAD_SESSION: break;
    }
    return "session";
}

int64_t sim_engine_overhead_ns(SimEngine engine)
{
    return engine >= 0 && (size_t)engine < KV_ARRAY_LEN(g_engine_overhead_ns) ? g_engine_overhead_ns[engine] : 0;
}

const char *sim_trace_format_name(SimTraceFormat f)
{
    for (int i = 0; trace_format_names[i]; i++)
        if (i == (int)f) return trace_format_names[i];
    return "auto";
}

const char *sim_store_name(SimStore s)
{
    stores_ready();
    return s >= SIM_STORE_AUTO && s < g_n_stores ? g_store_names[s] : "?";
}

const char *sim_save_mode_name(SaveMode m)
{
    switch (m) {
    case SAVE_TURN_END: return "turn";
    case SAVE_PER_ITERATION: return "iteration";
    case SAVE_DIRECT: return "direct";
    }
    return "turn";
}

SaveMode sim_config_save_mode(const SimConfig *c, const KvPolicyOps *ops)
{
    switch (c->save_mode) {
    case SIM_SAVE_TURN: return SAVE_TURN_END;
    case SIM_SAVE_ITERATION: return SAVE_PER_ITERATION;
    case SIM_SAVE_DIRECT: return SAVE_DIRECT;
    case SIM_SAVE_POLICY: break;
    }
    return ops ? ops->save_mode : SAVE_TURN_END;
}

/* ------------------------------------------------------------------ the table */

typedef enum {
    CT_STR,  /* char[size] */
    CT_INT,  /* int */
    CT_I64,  /* int64_t, plain count */
    CT_U64,  /* uint64_t, any value (seeds) */
    CT_REAL, /* double, finite */
    CT_DUR,  /* int64_t ns, written "2 ms" */
    CT_SIZE, /* uint64_t bytes, written "256 GB" */
    CT_BOOL, /* int 0/1 */
    CT_ENUM, /* int index into names */
    CT_TRIM, /* SimTrim: a request count ("200") or a duration ("60 s"); range: count in [min, max], time <= MAX_DUR */
} CfgType;

enum {
    KF_MIN_OPEN = 1,  /* the value must be > min (not >= min) */
    KF_NONEMPTY = 2,  /* strings: may not be empty */
};

typedef struct CfgKey {
    const char *key;           /* the --set name, also the JSON name */
    CfgType type;
    size_t off, size;          /* the field in SimConfig */
    const char *def;           /* the default, in input syntax */
    double min, max;           /* numbers: allowed range (durations in ns, sizes in bytes) */
    unsigned flags;
    const char *auto_word;     /* input standing for "derived by sim_world_open" (stores -1 or ""), or NULL */
    const char *const *names;  /* CT_ENUM: the accepted names, NULL-terminated */
    const char *help;
} CfgKey;

#define SEC 1e9
#define MAX_DUR (1e6 * SEC) /* 10^6 s: simulated times stay far below INT64_MAX ns */
#define F(f) offsetof(SimConfig, f), sizeof(((SimConfig *)0)->f)
#define STRK(k, f, d, fl, aw, h) {k, CT_STR, F(f), d, 0, 0, fl, aw, NULL, h}
#define NUMK(k, t, f, d, lo, hi, fl, aw, h) {k, t, F(f), d, lo, hi, fl, aw, NULL, h}
#define ENUMK(k, f, d, names, h) {k, CT_ENUM, F(f), d, 0, 0, 0, NULL, names, h}

#define MEMDEV_KEYS_(ID, KEY, WHAT, WHATS)                                                                                 \
    STRK(KEY, memdev[MEMDEV_##ID], "platform", 0, "platform", WHAT " (kvsim list " KEY "; 'platform': the platform's)"),      \
        NUMK("n_" KEY, CT_INT, n_memdev[MEMDEV_##ID], "platform", 0, 1024, 0, "platform",                                   \
             WHATS " per host, the " KEY " tier of a store ('platform': the platform's; 0: none)"),
/* settings.h's rows */
#define CFG_ROW_(KIND, ...) CFG_ROW_##KIND(__VA_ARGS__)
#define CFG_ROW_STR(k, f, size, d, fl, aw, h) STRK(k, f, d, fl, aw, h),
#define CFG_ROW_NUM(k, t, type, f, d, lo, hi, fl, aw, h) NUMK(k, t, f, d, lo, hi, fl, aw, h),
#define CFG_ROW_ENUM(k, type, f, d, names, h) ENUMK(k, f, d, names, h),
#define CFG_ROW_NUM_AT(k, t, f, d, lo, hi, fl, aw, h) NUMK(k, t, f, d, lo, hi, fl, aw, h),
#define CFG_ROW_DECL(type, decl)
#define CFG_ROW_MEMDEVS(size) KV_MEMDEV_ROWS(MEMDEV_KEYS_)
static const CfgKey g_keys[] = {SIM_SETTING_ROWS(CFG_ROW_)
};

/* Other spellings of a setting (vLLM's engine arguments; docs/vllm-lmcache.md): accepted by
 * sim_config_set and config files, listed by --help; summary.json records the setting's own name. */
static const struct {
    const char *alias, *key;
} g_key_aliases[] = {
    {"max_num_batched_tokens", "token_budget"},
    {"max_num_seqs", "max_batch"},
    {"gpu_memory_utilization", "mem_util"},
    {"preemption_mode", "preempt"},
};

static void *field(SimConfig *c, const CfgKey *k) { return (char *)c + k->off; }
static const void *cfield(const SimConfig *c, const CfgKey *k) { return (const char *)c + k->off; }

static const CfgKey *find_key(const char *key)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++)
        if (!strcmp(g_keys[i].key, key)) return &g_keys[i];
    for (size_t i = 0; i < KV_ARRAY_LEN(g_key_aliases); i++)
        if (!strcmp(g_key_aliases[i].alias, key)) return find_key(g_key_aliases[i].key);
    return NULL;
}

/* ------------------------------------------------------------------ exact text of values */

/* The largest unit that divides v exactly: "2 ms", "1 h", "1500 ns". */
static void fmt_dur_exact(char *b, size_t n, int64_t ns)
{
    static const struct { const char *u; int64_t f; } u[] = {
        {"h", 3600000000000LL}, {"min", 60000000000LL}, {"s", 1000000000LL}, {"ms", 1000000}, {"us", 1000}, {"ns", 1}};
    for (size_t i = 0; i < KV_ARRAY_LEN(u); i++)
        if (ns != 0 && ns % u[i].f == 0) {
            snprintf(b, n, "%lld %s", (long long)(ns / u[i].f), u[i].u);
            return;
        }
    snprintf(b, n, ns == 0 ? "0 s" : "%lld ns", (long long)ns);
}

static void fmt_size_exact(char *b, size_t n, uint64_t bytes)
{
    static const struct { const char *u; uint64_t f; } u[] = {
        {"TB", 1000000000000ULL}, {"TiB", 1ULL << 40}, {"GB", 1000000000ULL}, {"GiB", 1ULL << 30},
        {"MB", 1000000ULL}, {"MiB", 1ULL << 20}, {"KB", 1000}, {"KiB", 1024}, {"B", 1}};
    for (size_t i = 0; i < KV_ARRAY_LEN(u); i++)
        if (bytes != 0 && bytes % u[i].f == 0) {
            snprintf(b, n, "%llu %s", (unsigned long long)(bytes / u[i].f), u[i].u);
            return;
        }
    snprintf(b, n, "0 B");
}

/* A number of the row's type as the user writes it (for messages and --help). */
static void fmt_num(char *b, size_t n, const CfgKey *k, double v)
{
    if (k->type == CT_DUR) fmt_dur_exact(b, n, (int64_t)v);
    else if (k->type == CT_SIZE) fmt_size_exact(b, n, (uint64_t)v);
    else if (k->type == CT_REAL) snprintf(b, n, "%g", v);
    else snprintf(b, n, "%.0f", v);
}

static void fmt_range(char *b, size_t n, const CfgKey *k)
{
    char lo[48], hi[48];
    fmt_num(lo, sizeof lo, k, k->min);
    fmt_num(hi, sizeof hi, k, k->max);
    if (k->type == CT_REAL) snprintf(b, n, "%s%s, %s]", k->flags & KF_MIN_OPEN ? "(" : "[", lo, hi);
    else snprintf(b, n, "%s..%s", lo, hi);
}

/* The field's current value, in input syntax. */
static void fmt_value(char *b, size_t n, const SimConfig *c, const CfgKey *k)
{
    const void *p = cfield(c, k);
    switch (k->type) {
    case CT_STR: snprintf(b, n, "%s", (const char *)p); break;
    case CT_INT: snprintf(b, n, "%d", *(const int *)p); break;
    case CT_I64: snprintf(b, n, "%lld", (long long)*(const int64_t *)p); break;
    case CT_U64: snprintf(b, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case CT_REAL: snprintf(b, n, "%.17g", *(const double *)p); break;
    case CT_DUR: fmt_dur_exact(b, n, *(const int64_t *)p); break;
    case CT_SIZE: fmt_size_exact(b, n, *(const uint64_t *)p); break;
    case CT_BOOL: snprintf(b, n, "%s", *(const int *)p ? "true" : "false"); break;
    case CT_TRIM: {
        const SimTrim *tr = p;
        if (tr->by_time) fmt_dur_exact(b, n, tr->n);
        else snprintf(b, n, "%lld", (long long)tr->n);
        break;
    }
    case CT_ENUM: {
        stores_ready(); /* (the store names are made on first use) */
        int v = *(const int *)p, m = 0;
        while (k->names[m]) m++;
        snprintf(b, n, "%s", v >= 0 && v < m ? k->names[v] : "?");
        break;
    }
    }
}

static int is_auto(const CfgKey *k, const SimConfig *c)
{
    if (!k->auto_word) return 0;
    const void *p = cfield(c, k);
    if (k->type == CT_STR) return ((const char *)p)[0] == '\0';
    if (k->type == CT_INT) return *(const int *)p == -1;
    return *(const int64_t *)p == -1;
}

/* ------------------------------------------------------------------ checking one row */

static int row_check(const SimConfig *c, const CfgKey *k, KvErr *e)
{
    const void *p = cfield(c, k);
    double v;
    switch (k->type) {
    case CT_STR: {
        const char *s = p;
        if (strnlen(s, k->size) >= k->size) return kv_err(e, "%s: not a terminated string", k->key);
        if ((k->flags & KF_NONEMPTY) && !*s) return kv_err(e, "%s: may not be empty", k->key);
        return 0;
    }
    case CT_ENUM: {
        stores_ready(); /* (the store names are made on first use) */
        int m = 0, x = *(const int *)p;
        while (k->names[m]) m++;
        if (x < 0 || x >= m) return kv_err(e, "%s: invalid value %d", k->key, x);
        return 0;
    }
    case CT_BOOL: {
        int x = *(const int *)p;
        if (x != 0 && x != 1) return kv_err(e, "%s: expected true or false, got %d", k->key, x);
        return 0;
    }
    case CT_INT: v = *(const int *)p; break;
    case CT_I64:
    case CT_DUR: v = (double)*(const int64_t *)p; break;
    case CT_U64: return 0; /* any 64-bit value */
    case CT_TRIM: {
        const SimTrim *tr = p;
        char vs[64], rs[128];
        fmt_value(vs, sizeof vs, c, k);
        if (tr->by_time != 0 && tr->by_time != 1) return kv_err(e, "%s: invalid value", k->key);
        if (tr->by_time && (tr->n < 0 || (double)tr->n > MAX_DUR))
            return kv_err(e, "%s: %s is out of range (allowed 0 s..1000000 s)", k->key, vs);
        fmt_range(rs, sizeof rs, k);
        if (!tr->by_time && ((double)tr->n < k->min || (double)tr->n > k->max))
            return kv_err(e, "%s: %s is out of range (allowed %s requests, or a duration)", k->key, vs, rs);
        return 0;
    }
    case CT_SIZE: v = (double)*(const uint64_t *)p; break;
    case CT_REAL: v = *(const double *)p; break;
    default: return kv_err(e, "%s: bad table row", k->key);
    }
    if (is_auto(k, c)) return 0;
    char vs[64], rs[128];
    fmt_range(rs, sizeof rs, k);
    if (k->type == CT_REAL && !isfinite(v)) return kv_err(e, "%s: %g is not a finite number (allowed %s)", k->key, v, rs);
    if (v < k->min || v > k->max || ((k->flags & KF_MIN_OPEN) && v == k->min)) {
        if (k->type == CT_REAL) snprintf(vs, sizeof vs, "%g", v);
        else fmt_value(vs, sizeof vs, c, k);
        return kv_err(e, "%s: %s is out of range (allowed %s)", k->key, vs, rs);
    }
    return 0;
}

/* ------------------------------------------------------------------ parsing */

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) *out = 1;
    else if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) *out = 0;
    else return -1;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s) return -1;
    for (const char *q = s; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno) return -1;
    *out = v;
    return 0;
}

/* Parse value into the row's field of c (no range check). */
static int row_parse(SimConfig *c, const CfgKey *k, const char *value, KvErr *e)
{
    void *p = field(c, k);
    if (k->auto_word && !strcmp(value, k->auto_word)) {
        if (k->type == CT_STR) ((char *)p)[0] = '\0';
        else if (k->type == CT_INT) *(int *)p = -1;
        else *(int64_t *)p = -1;
        return 0;
    }
    int64_t iv;
    double dv;
    uint64_t uv;
    char rs[128];
    switch (k->type) {
    case CT_STR:
        if (strlen(value) >= k->size) return kv_err(e, "%s: value too long (max %zu characters)", k->key, k->size - 1);
        memcpy(p, value, strlen(value) + 1);
        return 0;
    case CT_INT:
    case CT_I64:
        if (kv_parse_i64(value, &iv, e) != 0) {
            fmt_range(rs, sizeof rs, k);
            return kv_err(e, "%s: expected an integer in %s, got '%s'", k->key, rs, value);
        }
        if ((double)iv < k->min || (double)iv > k->max) {
            fmt_range(rs, sizeof rs, k);
            return kv_err(e, "%s: %s is out of range (allowed %s)", k->key, value, rs);
        }
        if (k->type == CT_INT) *(int *)p = (int)iv;
        else *(int64_t *)p = iv;
        return 0;
    case CT_U64:
        if (parse_u64(value, &uv) != 0)
            return kv_err(e, "%s: expected an integer in 0..18446744073709551615, got '%s'", k->key, value);
        *(uint64_t *)p = uv;
        return 0;
    case CT_REAL:
        if (kv_parse_double(value, &dv, e) != 0 || !isfinite(dv)) {
            fmt_range(rs, sizeof rs, k);
            return kv_err(e, "%s: expected a finite number in %s, got '%s'", k->key, rs, value);
        }
        *(double *)p = dv;
        return 0;
    case CT_DUR:
        if (!strcmp(value, "0")) iv = 0;
        else if (kv_parse_duration(value, &iv, e) != 0) return kv_err_prefix(e, "%s: ", k->key);
        *(int64_t *)p = iv;
        return 0;
    case CT_SIZE:
        if (!strcmp(value, "0")) uv = 0;
        else if (kv_parse_size(value, &uv, e) != 0) return kv_err_prefix(e, "%s: ", k->key);
        *(uint64_t *)p = uv;
        return 0;
    case CT_TRIM: {
        SimTrim *tr = p;
        KvErr e2;
        if (kv_parse_i64(value, &iv, &e2) == 0) {
            tr->n = iv;
            tr->by_time = 0;
            return 0;
        }
        if (kv_parse_duration(value, &iv, &e2) != 0)
            return kv_err(e, "%s: expected a request count (e.g. 200) or a duration (e.g. '300 s'), got '%s'", k->key, value);
        tr->n = iv;
        tr->by_time = 1;
        return 0;
    }
    case CT_BOOL:
        if (parse_bool(value, (int *)p) != 0) return kv_err(e, "%s: expected true or false, got '%s'", k->key, value);
        return 0;
    case CT_ENUM: {
        stores_ready(); /* (the store names are made on first use) */
        char list[1024] = "", v[64];
        size_t len = 0;
        /* a chain of names may be spelled with commas ("dram,ssd" is "dram+ssd"; no name has a comma) */
        snprintf(v, sizeof v, "%s", value);
        for (char *q = v; *q; q++)
            if (*q == ',') *q = '+';
        for (int i = 0; k->names[i]; i++) {
            if (!strcmp(k->names[i], v)) {
                *(int *)p = i;
                return 0;
            }
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", k->names[i]);
        }
        return kv_err(e, "%s: unknown value '%s' (allowed: %s)", k->key, value, list);
    }
    }
    return kv_err(e, "%s: bad table row", k->key);
}

/* ------------------------------------------------------------------ knobs */

static int policy_index(const KvPolicyOps *ops)
{
    for (int i = 0; i < policy_count() && i < POLICY_MAX_REGISTERED; i++)
        if (policy_at(i) == ops) return i;
    return -1;
}

const double *sim_config_knobs(const SimConfig *c, const KvPolicyOps *ops)
{
    int i = policy_index(ops);
    return i >= 0 ? c->knobs[i] : NULL;
}

/* The knob named by key: "<policy>.<knob>" or a knob's alias. *pi: registry index, *ki: knob index. */
static int find_knob(const char *key, int *pi, int *ki)
{
    const char *dot = strrchr(key, '.');
    for (int i = 0; i < policy_count() && i < POLICY_MAX_REGISTERED; i++) {
        const KvPolicyOps *ops = policy_at(i);
        for (int j = 0; j < ops->n_knobs; j++) {
            const PolicyKnob *k = &ops->knobs[j];
            int hit = dot ? (strlen(ops->name) == (size_t)(dot - key) && !strncmp(ops->name, key, (size_t)(dot - key)) &&
                             !strcmp(k->name, dot + 1))
                          : (k->alias && !strcmp(k->alias, key));
            if (hit) {
                *pi = i;
                *ki = j;
                return 1;
            }
        }
    }
    return 0;
}

static int knob_set(SimConfig *c, int pi, int ki, const char *value, KvErr *e)
{
    const KvPolicyOps *ops = policy_at(pi);
    const PolicyKnob *k = &ops->knobs[ki];
    double v;
    int b;
    if (k->type == KNOB_BOOL) {
        if (parse_bool(value, &b) != 0) return kv_err(e, "%s.%s: expected true or false, got '%s'", ops->name, k->name, value);
        v = b;
    } else if (kv_parse_double(value, &v, e) != 0) {
        return kv_err(e, "%s.%s: expected a number in %g..%g, got '%s'", ops->name, k->name, k->min, k->max, value);
    }
    if (policy_knob_check(ops, k, v, e) != 0) return -1;
    c->knobs[pi][ki] = v;
    return 0;
}

static void knob_text(char *b, size_t n, const PolicyKnob *k, double v)
{
    if (k->type == KNOB_BOOL) snprintf(b, n, "%s", v != 0 ? "true" : "false");
    else snprintf(b, n, "%.17g", v);
}

/* ------------------------------------------------------------------ public */

void sim_config_defaults(SimConfig *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) {
        KvErr e;
        (void)row_parse(c, &g_keys[i], g_keys[i].def, &e); /* sim_config_table_check proves every default parses */
    }
    for (int i = 0; i < policy_count() && i < POLICY_MAX_REGISTERED; i++) {
        const KvPolicyOps *ops = policy_at(i);
        for (int j = 0; j < ops->n_knobs && j < POLICY_MAX_KNOBS; j++) c->knobs[i][j] = ops->knobs[j].def;
    }
    snprintf(c->policy, sizeof c->policy, "recompute");
}

int sim_config_table_check(KvErr *e)
{
    SimConfig c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) {
        const CfgKey *k = &g_keys[i];
        if (row_parse(&c, k, k->def, e) != 0 || row_check(&c, k, e) != 0) return kv_err_prefix(e, "default of ");
        for (size_t j = 0; j < i; j++)
            if (!strcmp(g_keys[j].key, k->key)) return kv_err(e, "setting '%s' is listed twice", k->key);
        if (strchr(k->key, '.')) return kv_err(e, "setting '%s': a '.' marks a policy knob", k->key);
    }
    for (size_t i = 0; i < KV_ARRAY_LEN(g_key_aliases); i++) {
        const char *al = g_key_aliases[i].alias, *to = g_key_aliases[i].key;
        int pi, ki;
        for (size_t j = 0; j < KV_ARRAY_LEN(g_keys); j++)
            if (!strcmp(g_keys[j].key, al)) return kv_err(e, "alias '%s' is also a setting", al);
        if (find_knob(al, &pi, &ki)) return kv_err(e, "alias '%s' is also a policy knob's alias", al);
        if (!find_key(to) || strcmp(find_key(to)->key, to) != 0) return kv_err(e, "alias '%s' names no setting ('%s')", al, to);
    }
    for (int i = 0; i < policy_count(); i++) {
        const KvPolicyOps *ops = policy_at(i);
        for (int j = 0; j < ops->n_knobs; j++)
            if (ops->knobs[j].alias && find_key(ops->knobs[j].alias))
                return kv_err(e, "%s.%s: alias '%s' is also a setting", ops->name, ops->knobs[j].name, ops->knobs[j].alias);
    }
    return 0;
}

int sim_config_set(SimConfig *c, const char *key, const char *value, KvErr *e)
{
    const CfgKey *k = find_key(key);
    if (k) {
        unsigned char old[sizeof c->trace];
        _Static_assert(sizeof c->trace >= sizeof c->costs && sizeof c->trace >= sizeof c->hardware_overlay &&
                           sizeof c->trace >= sizeof c->models_overlay,
                       "the largest field");
        memcpy(old, field(c, k), k->size);
        if (row_parse(c, k, value, e) == 0 && row_check(c, k, e) == 0) return 0;
        memcpy(field(c, k), old, k->size);
        return -1;
    }
    int pi, ki;
    if (find_knob(key, &pi, &ki)) return knob_set(c, pi, ki, value, e);
    char list[4096];
    size_t len = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", g_keys[i].key);
    for (int i = 0; i < policy_count(); i++)
        for (int j = 0; j < policy_at(i)->n_knobs; j++)
            len += (size_t)snprintf(list + len, sizeof list - len, ", %s.%s", policy_at(i)->name, policy_at(i)->knobs[j].name);
    return kv_err(e, "unknown setting '%s' (known: %s)", key, list);
}

int sim_config_known(const char *key)
{
    int pi, ki;
    return find_key(key) != NULL || find_knob(key, &pi, &ki);
}

int sim_config_apply_json(SimConfig *c, const cJSON *obj, const char *origin, SimJsonOut *out, KvErr *e)
{
    if (!cJSON_IsObject(obj)) return kv_err(e, "%s: expected a JSON object of settings", origin);
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (!strcmp(it->string, "scenario") || !strcmp(it->string, "measures")) continue; /* the caller's, and text */
        char val[4200];
        if (cJSON_IsString(it)) snprintf(val, sizeof val, "%s", it->valuestring);
        else if (cJSON_IsBool(it)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(it) ? "true" : "false");
        else if (cJSON_IsNumber(it)) snprintf(val, sizeof val, "%.17g", it->valuedouble);
        else return kv_err(e, "%s: \"%s\": expected a string, number or boolean", origin, it->string);
        if (!strcmp(it->string, "policies")) {
            if (out && out->policies) snprintf(out->policies, out->plen, "%s", val);
            continue;
        }
        if (!strcmp(it->string, "description")) {
            if (out && out->desc) snprintf(out->desc, out->dlen, "%s", val);
            continue;
        }
        if (out && out->unknown && !sim_config_known(it->string)) {
            snprintf(out->unknown, out->ulen, "%s", it->string);
            return 1;
        }
        if (sim_config_set(c, it->string, val, e) != 0) return kv_err_prefix(e, "%s: \"%s\": ", origin, it->string);
    }
    return 0;
}

static int is_generator(const char *name)
{
    for (int i = 0; i < trace_generator_count(); i++)
        if (!strcmp(trace_generator_name(i), name)) return 1;
    return 0;
}

int sim_config_check(const SimConfig *c, KvErr *e)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++)
        if (row_check(c, &g_keys[i], e) != 0) return -1;
    for (int i = 0; i < policy_count() && i < POLICY_MAX_REGISTERED; i++) {
        const KvPolicyOps *ops = policy_at(i);
        for (int j = 0; j < ops->n_knobs; j++)
            if (policy_knob_check(ops, &ops->knobs[j], c->knobs[i][j], e) != 0) return -1;
    }
    /* cross-field rules */
    if (c->restore_share * (double)c->token_budget < 1)
        return kv_err(e, "restore_share: %g × token_budget %lld leaves less than one token per iteration for restoration "
                      "(allowed [1/token_budget = %g, 1])",
                      c->restore_share, (long long)c->token_budget, 1.0 / (double)c->token_budget);
    if (c->class_edges[0] > c->class_edges[1])
        return kv_err(e, "class_short: %lld is above class_long %lld (allowed class_short <= class_long)",
                      (long long)c->class_edges[0], (long long)c->class_edges[1]);
    if (c->trace_format != SIM_TRACE_AUTO && is_generator(c->trace))
        return kv_err(e, "trace_format: %s does not apply to the generator '%s' (allowed: auto)",
                      sim_trace_format_name(c->trace_format), c->trace);
    if (c->concurrency > 0 && c->arrivals == SIM_ARRIVALS_TRACE)
        return kv_err(e, "concurrency: %d clients are a closed loop, but arrivals=trace asks for an open loop "
                      "(allowed: concurrency=0 with arrivals=trace, or concurrency > 0 with arrivals=session)", c->concurrency);
    if (c->concurrency > 0 && c->request_rate > 0)
        return kv_err(e, "concurrency: %d clients send when their previous request ends, but request_rate %g times every "
                      "request in advance (allowed: one of them)", c->concurrency, c->request_rate);
    int chat = strcmp(c->trace, "sharegpt4") == 0 || strcmp(c->trace, "multiturn") == 0;
    if (c->system_prompt_tokens && !chat && strcmp(c->trace, "shared-prefix") != 0 && strcmp(c->trace, "swebench") != 0)
        return kv_err(e, "system_prompt_tokens: %lld applies to the shared-prefix, swebench, sharegpt4 and multiturn generators "
                      "only, not to the trace '%s' (allowed: 0, or one of those traces)", (long long)c->system_prompt_tokens, c->trace);
    if (c->prompt_groups && !chat && strcmp(c->trace, "shared-prefix") != 0)
        return kv_err(e, "prompt_groups: %d applies to the shared-prefix, sharegpt4 and multiturn generators only, not to the "
                      "trace '%s' (allowed: 0, or one of those traces)", c->prompt_groups, c->trace);
    if (c->prompt_groups && chat && c->system_prompt_tokens == 0)
        return kv_err(e, "prompt_groups: %d groups of a system prompt, but the %s generator has none by default (allowed: 0, or "
                      "set system_prompt_tokens > 0)", c->prompt_groups, c->trace);
    if (strcmp(c->trace, "multiturn") != 0) {
        const char *key = c->rounds ? "rounds" : c->round_tokens ? "round_tokens" : c->round_output_tokens ? "round_output_tokens" : NULL;
        long long v = c->rounds ? c->rounds : c->round_tokens ? c->round_tokens : c->round_output_tokens;
        if (key)
            return kv_err(e, "%s: %lld applies to the multiturn generator only, not to the trace '%s' (allowed: 0, or "
                          "trace=multiturn)", key, v, c->trace);
    }
    if (c->burstiness != 1 && c->request_rate == 0)
        return kv_err(e, "burstiness: %g applies to request_rate, which is 0 (allowed: burstiness 1, or set request_rate)",
                      c->burstiness);
    KvDtype dt;
    if (kv_dtype_parse(c->dtype, &dt, e) != 0) return kv_err_prefix(e, "dtype: ");
    if (!policy_find(c->policy, e)) return kv_err_prefix(e, "policy: ");
    return 0;
}

void sim_config_print_knobs(FILE *out, const KvPolicyOps *ops, const char *indent)
{
    for (int j = 0; j < ops->n_knobs; j++) {
        const PolicyKnob *k = &ops->knobs[j];
        char key[96], def[32], allowed[96];
        snprintf(key, sizeof key, "%s.%s", ops->name, k->name);
        knob_text(def, sizeof def, k, k->def);
        if (k->type == KNOB_BOOL) snprintf(allowed, sizeof allowed, "true|false");
        else if (k->n_choices) {
            size_t len = 0;
            for (int i = 0; i < k->n_choices; i++)
                len += (size_t)snprintf(allowed + len, sizeof allowed - len, "%s%g", i ? "|" : "", k->choices[i]);
        } else {
            snprintf(allowed, sizeof allowed, "%g..%g", k->min, k->max);
        }
        fprintf(out, "%s%-22s %s (default %s; %s%s%s)\n", indent, key, k->help, def, allowed, k->alias ? "; alias " : "",
                k->alias ? k->alias : "");
    }
}

void sim_config_print_keys(FILE *out)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) {
        const CfgKey *k = &g_keys[i];
        char allowed[1024] = "";
        if (k->type == CT_ENUM) {
            stores_ready();
            size_t len = 0;
            for (int j = 0; k->names[j]; j++) len += (size_t)snprintf(allowed + len, sizeof allowed - len, "%s%s", j ? "|" : "", k->names[j]);
        } else if (k->type == CT_BOOL) {
            snprintf(allowed, sizeof allowed, "true|false");
        } else if (k->type == CT_TRIM) {
            snprintf(allowed, sizeof allowed, "a count 0..1e12 or a duration 0 s..1000000 s");
        } else if (k->type != CT_STR && k->type != CT_U64) {
            fmt_range(allowed, sizeof allowed, k);
        }
        char aka[128] = "";
        for (size_t j = 0, len = 0; j < KV_ARRAY_LEN(g_key_aliases); j++)
            if (!strcmp(g_key_aliases[j].key, k->key))
                len += (size_t)snprintf(aka + len, sizeof aka - len, "%s%s", len ? ", " : " [also: ", g_key_aliases[j].alias);
        if (aka[0]) snprintf(aka + strlen(aka), sizeof aka - strlen(aka), "]");
        fprintf(out, "  %-16s %s (default %s%s%s)%s\n", k->key, k->help, k->def, allowed[0] ? "; " : "", allowed, aka);
    }
    fprintf(out, "\npolicy knobs (--set POLICY.KNOB=VALUE):\n");
    for (int i = 0; i < policy_count(); i++) sim_config_print_knobs(out, policy_at(i), "  ");
}

cJSON *sim_config_json(const SimConfig *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t i = 0; i < KV_ARRAY_LEN(g_keys); i++) {
        const CfgKey *k = &g_keys[i];
        const void *p = cfield(c, k);
        char b[4200];
        if (is_auto(k, c)) {
            cJSON_AddStringToObject(o, k->key, k->auto_word);
            continue;
        }
        switch (k->type) {
        case CT_INT: cJSON_AddNumberToObject(o, k->key, *(const int *)p); break;
        case CT_I64: cJSON_AddNumberToObject(o, k->key, (double)*(const int64_t *)p); break;
        case CT_REAL: cJSON_AddNumberToObject(o, k->key, *(const double *)p); break;
        case CT_BOOL: cJSON_AddBoolToObject(o, k->key, *(const int *)p); break;
        case CT_TRIM:
            if (!((const SimTrim *)p)->by_time) {
                cJSON_AddNumberToObject(o, k->key, (double)((const SimTrim *)p)->n);
                break;
            }
            fmt_value(b, sizeof b, c, k);
            cJSON_AddStringToObject(o, k->key, b);
            break;
        case CT_U64: /* exact in a JSON double only up to 2^53 */
            if (*(const uint64_t *)p <= (1ULL << 53)) {
                cJSON_AddNumberToObject(o, k->key, (double)*(const uint64_t *)p);
                break;
            }
            /* fall through */
        default:
            fmt_value(b, sizeof b, c, k);
            cJSON_AddStringToObject(o, k->key, b);
        }
    }
    for (int i = 0; i < policy_count() && i < POLICY_MAX_REGISTERED; i++) {
        const KvPolicyOps *ops = policy_at(i);
        for (int j = 0; j < ops->n_knobs; j++) {
            char key[96];
            snprintf(key, sizeof key, "%s.%s", ops->name, ops->knobs[j].name);
            if (ops->knobs[j].type == KNOB_BOOL) cJSON_AddBoolToObject(o, key, c->knobs[i][j] != 0);
            else cJSON_AddNumberToObject(o, key, c->knobs[i][j]);
        }
    }
    return o;
}
