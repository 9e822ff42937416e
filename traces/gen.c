/* gen.c — synthetic workload generators fitted to real traces: "sharegpt4" (multi-round chat, from
 * HCache's published figures), "leval" (long-document QA, fitted to leval.csv), "swebench" (agent
 * sessions, fitted to swebench.csv). Parameters and how they were fitted: traces/FITS.md (produced by
 * tools/fit_traces.py, which runs a Monte Carlo of exactly this model). And "shared-prefix", SGLang's
 * generated-shared-prefix benchmark (bench_serving --dataset-name generated-shared-prefix, its
 * defaults: 64 groups, a 2,048-token system prompt per group, 128-token questions, 256 output
 * tokens; lengths exact, range ratio 1): one request per session, its group drawn uniformly (SGLang
 * shuffles the groups' prompts), its context naming the group's system prompt block by block
 * (SHARED_BLOCK_TOKENS, vLLM's default block size) so that requests of a group share them.
 * sharegpt4 and multiturn take an optional system prompt (system_prompt_tokens, prompt_groups; off by
 * default): it opens each session's first turn and its blocks are named the same way (CHAT_NAME_SPACE).
 *
 * Responsible for: sessions arriving by a Poisson process; each session's turns emitted back to back
 * (turn 0 at its arrival, later turns closed loop with the think time), so memory is O(1); the token
 * counts of each turn; history_tokens of turn k = sum over turns j < k of (new input + output) — the
 * saved context is always a prefix of what the previous turn ended with — with sharegpt4's own 16K
 * cap (counted as a truncation).
 * Not responsible for: max_context_tokens or max_requests (trace.c applies them).
 * Determinism: independent random streams per seed (tokens, think times, session arrivals, and the
 * sessions' system-prompt groups; trace_rng.c, identical on every machine), so changing the rate, the
 * think time or the groups never changes the token counts. Samples: x = exp(mu + sigma·N(0,1))
 * rounded to the nearest integer and clamped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/blockhash.h"
#include "traces/trace_int.h"

enum { GEN_SHAREGPT4, GEN_LEVAL, GEN_SWEBENCH, GEN_SHARED, GEN_MULTITURN, GEN_COUNT };

typedef struct GenSpec {
    const char *name;
    const char *summary;
    double rate_per_s;  /* default session arrival rate */
    int64_t think_ns;   /* default think time; -1 = sampled per turn */
} GenSpec;

static const GenSpec gen_specs[GEN_COUNT] = {
    {"sharegpt4", "multi-round chat fitted to HCache's ShareGPT4 figures: ~67 input / ~359 output tokens per round, "
                  "median 7 rounds, half the conversations past 2,500 history tokens, 30 s think, history cap 16K",
     0.5, 30000000000LL},
    {"leval", "long-document QA fitted to leval.csv: document ~8K tokens (lognormal), ~7 questions per document "
              "back to back, short answers with a per-document (task) scale",
     0.1, 0},
    {"swebench", "SWE-bench agent sessions fitted to swebench.csv: ~40 calls per session, history grows by each call's "
                 "input and output, think time lognormal (median 4 s, p90 13 s); every call's context starts with the "
                 "harness's 129-token system prompt, shared by all sessions (system_prompt_tokens)",
     0.080225, -1},
    {"shared-prefix", "SGLang's generated-shared-prefix benchmark: 64 groups, each with its own 2,048-token system "
                      "prompt (system_prompt_tokens, prompt_groups), a 128-token question and 256 output tokens per "
                      "request; one request per session, its group drawn uniformly; the prompt's blocks shared by its group",
     2.0, 0},
    {"multiturn", "SGLang's HiCache multi-turn benchmark (bench_multiturn.py as Mooncake's HiCache benchmark runs it): "
                  "each client a session of 10 rounds, each round 2,048 new tokens after the whole conversation so far "
                  "and 16 output tokens; clients start by a Poisson process at 20/s and send each round as the last "
                  "one ends (think 0; its --max-parallel 4 is the engine's max_batch); rounds, round_tokens and "
                  "round_output_tokens set the shape",
     20.0, 0},
};

/* multiturn: the A10 cluster command of Mooncake's "SGLang HiCache with Mooncake Backend
 * Benchmark" (--num-clients 20 --num-rounds 10 --request-length 2048 --output-length 16
 * --request-rate 20 --max-parallel 4); the clients are the sessions (requests / rounds of them);
 * the settings rounds, round_tokens and round_output_tokens replace the three */
#define MT_ROUNDS 10
#define MT_REQUEST_TOKENS 2048
#define MT_OUTPUT_TOKENS 16

/* shared-prefix: SGLang bench_serving's defaults (gsp_num_groups, gsp_system_prompt_len,
 * gsp_question_len, gsp_output_len) and vLLM's default KV block size for the names */
#define SHARED_GROUPS 64
#define SHARED_PROMPT_TOKENS 2048
#define SHARED_QUESTION_TOKENS 128
#define SHARED_OUTPUT_TOKENS 256
#define SHARED_BLOCK_TOKENS 16
#define SHARED_NAME_SPACE 0x5348415245445052ull /* keeps these names apart from a trace's hash ids */

/* ---- fitted parameters: see traces/FITS.md (tools/fit_traces.py) ---- */
/* sharegpt4: means from HCache; shapes (sigmas) assumed; rounds_mu fitted to "half past 2,500" */
#define SG_IN_MU 3.704693
#define SG_IN_SIGMA 1.0
#define SG_OUT_MU 5.563322
#define SG_OUT_SIGMA 0.8
#define SG_ROUNDS_MU 1.947454
#define SG_ROUNDS_SIGMA 0.6
#define SG_HISTORY_CAP 16384
/* leval: mean-and-median lognormals, per-document/per-question split of the log variance, rho fitted
 * to the file's mean history */
#define LE_DOC_MU 8.987197
#define LE_DOC_SIGMA 0.763289
#define LE_N_MU 1.573257
#define LE_N_SIGMA 0.888846
#define LE_RHO (-0.244941)
#define LE_Q_MU 3.784190
#define LE_Q_SIGMA_DOC 0.472962
#define LE_Q_SIGMA_TURN 0.224825
#define LE_OUT_MU 2.484907
#define LE_OUT_SIGMA_DOC 1.603076
#define LE_OUT_SIGMA_TURN 0.465136
/* swebench: first call, second call, calls 2..9, later calls; outputs of call 0 and later; think time
 * through the median and p90 of the gaps between a session's calls */
#define SW_CALLS_MU 3.600917
#define SW_CALLS_SIGMA 0.423055
#define SW_FIRST_MU 7.317212
#define SW_FIRST_SIGMA 0.436808
#define SW_SECOND_MU 6.645091
#define SW_SECOND_SIGMA 0.739471
#define SW_EARLY_MU 4.406719
#define SW_EARLY_SIGMA 1.670752
#define SW_LATE_MU 4.343805
#define SW_LATE_SIGMA 1.443531
#define SW_LATE_FROM 10
#define SW_OUT0_MU 3.784190
#define SW_OUT0_SIGMA 0.371986
#define SW_OUT_MU 4.317488
#define SW_OUT_SIGMA 1.523814
#define SW_THINK_MU 1.386294
#define SW_THINK_SIGMA 0.919709
#define SW_THINK_MAX_S 600.0
/* swebench: the prefix every session's first call starts with, hence every call's context: the harness's
 * system message (542 characters, the same in every trajectory) and the user message's opening
 * "<pr_description>\n" (17) — mini-swe-agent's SWE-bench template, read from the 60 first trajectories
 * of the source of swebench.csv (traces/data/README.md) — at the file's own 4.35 characters per token
 * (the median over those sessions' first calls of characters ÷ new_input_tokens): 559 / 4.35 = 129.
 * The rest of the first call (the task, then the template's instructions) differs per session. */
#define SW_SYSTEM_PROMPT_TOKENS 129
#define SW_NAME_SPACE 0x5357454245484e43ull /* keeps these names apart from other generators' and traces' */
/* sharegpt4, multiturn with system_prompt_tokens: as inference-perf's shared_prefix data with
 * enable_multi_turn_chat (the load of llm-d-benchmark's shared-prefix profiles), a session's context
 * starts with its group's system prompt, sent in front of the first question: the prompt's tokens are
 * added to the first turn's new input and are part of every later turn's history; the names' space
 * keeps them apart from other generators' and traces' */
#define CHAT_NAME_SPACE 0x4348415450524f4dull

typedef struct Gen {
    TraceSource *src;
    int kind;
    TraceRng tok, think;
    TraceRng grp;           /* chat_prompt: each session's group, apart from the other draws */
    TracePoisson arrivals;
    int64_t think_const_ns; /* scaled; -1 = sample per turn */
    int started;
    uint64_t session;
    int32_t turn, nturns;
    int64_t arrival_ns;
    int64_t history;
    int history_cut;        /* the history of the next turn was capped */
    double le_out_mu, le_q_mu;
    int64_t le_doc_tokens;
    int64_t prompt_tokens;  /* shared-prefix, swebench, chat_prompt: the system prompt's tokens; its */
    int groups, group;      /* groups, the group of the current request; the prompt's block names */
    int chat_prompt;        /* sharegpt4, multiturn: a system prompt (prompt_tokens > 0) opens each session */
    uint64_t *names;
    char session_id[48];    /* "NAME-N" of the current session, handed out with each of its turns */
    uint64_t id_of;         /* the session session_id names, plus 1 (0: none yet): formatted once per session */
} Gen;

int trace_generator_count(void) { return GEN_COUNT; }
const char *trace_generator_name(int i) { return i >= 0 && i < GEN_COUNT ? gen_specs[i].name : NULL; }
const char *trace_generator_summary(int i) { return i >= 0 && i < GEN_COUNT ? gen_specs[i].summary : NULL; }

int trace_gen_find(const char *name)
{
    for (int i = 0; i < GEN_COUNT; i++)
        if (strcmp(name, gen_specs[i].name) == 0) return i;
    return -1;
}

static int64_t gen_ln(Gen *g, double mu, double sigma, int64_t hi)
{
    return trace_tokens(trace_rng_lognormal(&g->tok, mu, sigma), 1, hi);
}

static int gen_begin_session(Gen *g, KvErr *e)
{
    if (g->started) g->session++;
    g->started = 1;
    g->turn = 0;
    g->history = 0;
    g->history_cut = 0;
    g->arrival_ns = trace_ns_from_s(trace_poisson_next_s(&g->arrivals), g->src->opt.time_scale);
    if (g->arrival_ns < 0) return kv_err(e, "generator %s: session %llu arrives past the time range", gen_specs[g->kind].name,
                                         (unsigned long long)g->session);
    switch (g->kind) {
    case GEN_SHAREGPT4:
        g->nturns = (int32_t)gen_ln(g, SG_ROUNDS_MU, SG_ROUNDS_SIGMA, 256);
        break;
    case GEN_LEVAL: {
        double z1 = trace_rng_normal(&g->tok), z2 = trace_rng_normal(&g->tok);
        g->le_doc_tokens = trace_tokens(trace_exp(LE_DOC_MU + LE_DOC_SIGMA * z1), 1, 200000);
        double zn = LE_RHO * z1 + sqrt(1.0 - LE_RHO * LE_RHO) * z2;
        g->nturns = (int32_t)trace_tokens(trace_exp(LE_N_MU + LE_N_SIGMA * zn), 1, 200);
        g->le_out_mu = LE_OUT_MU + LE_OUT_SIGMA_DOC * trace_rng_normal(&g->tok);
        g->le_q_mu = LE_Q_MU + LE_Q_SIGMA_DOC * trace_rng_normal(&g->tok);
        break;
    }
    case GEN_MULTITURN:
        g->nturns = g->src->opt.rounds > 0 ? g->src->opt.rounds : MT_ROUNDS;
        break;
    case GEN_SHARED:
        g->nturns = 1;
        g->group = (int)(trace_rng_uniform(&g->tok) * g->groups);
        if (g->group >= g->groups) g->group = g->groups - 1;
        break;
    default:
        g->nturns = (int32_t)gen_ln(g, SW_CALLS_MU, SW_CALLS_SIGMA, 1000);
        break;
    }
    if (g->chat_prompt) {
        g->group = (int)(trace_rng_uniform(&g->grp) * g->groups);
        if (g->group >= g->groups) g->group = g->groups - 1;
    }
    return 0;
}

/* the block names of group's system prompt, chained: equal within a group, none shared across groups;
 * the whole blocks of the prompt that fit in a context of ctx tokens */
static void shared_names(Gen *g, TraceRequest *out, uint64_t space, int64_t ctx)
{
    int64_t n = (g->prompt_tokens < ctx ? g->prompt_tokens : ctx) / SHARED_BLOCK_TOKENS;
    uint64_t h = kv_block_hash(space, (uint64_t)g->group);
    for (int64_t i = 0; i < n; i++) g->names[i] = h = kv_block_hash(h, (uint64_t)i);
    out->prefix_blocks = n ? g->names : NULL;
    out->n_prefix_blocks = (int32_t)n;
    out->prefix_block_tokens = SHARED_BLOCK_TOKENS;
}

static int gen_next(void *impl, TraceRequest *out, KvErr *e)
{
    Gen *g = impl;
    if (!g->started || g->turn == g->nturns)
        if (gen_begin_session(g, e) != 0) return -1;
    int32_t k = g->turn;
    int64_t new_tokens, out_tokens, think_ns = 0;
    switch (g->kind) {
    case GEN_SHAREGPT4:
        new_tokens = gen_ln(g, SG_IN_MU, SG_IN_SIGMA, 16384);
        out_tokens = gen_ln(g, SG_OUT_MU, SG_OUT_SIGMA, 8192);
        break;
    case GEN_LEVAL:
        new_tokens = k == 0 ? g->le_doc_tokens : gen_ln(g, g->le_q_mu, LE_Q_SIGMA_TURN, 16384);
        out_tokens = gen_ln(g, g->le_out_mu, LE_OUT_SIGMA_TURN, 4096);
        break;
    case GEN_MULTITURN:
        new_tokens = g->src->opt.round_tokens > 0 ? g->src->opt.round_tokens : MT_REQUEST_TOKENS;
        out_tokens = g->src->opt.round_output_tokens > 0 ? g->src->opt.round_output_tokens : MT_OUTPUT_TOKENS;
        break;
    case GEN_SHARED:
        new_tokens = g->prompt_tokens + SHARED_QUESTION_TOKENS;
        out_tokens = SHARED_OUTPUT_TOKENS;
        shared_names(g, out, SHARED_NAME_SPACE, new_tokens);
        break;
    default:
        if (k == 0)
            new_tokens = gen_ln(g, SW_FIRST_MU, SW_FIRST_SIGMA, 131072);
        else if (k == 1)
            new_tokens = gen_ln(g, SW_SECOND_MU, SW_SECOND_SIGMA, 131072);
        else if (k < SW_LATE_FROM)
            new_tokens = gen_ln(g, SW_EARLY_MU, SW_EARLY_SIGMA, 131072);
        else
            new_tokens = gen_ln(g, SW_LATE_MU, SW_LATE_SIGMA, 131072);
        if (k > 0 && g->think_const_ns < 0) {
            double s = fmin(SW_THINK_MAX_S, trace_rng_lognormal(&g->think, SW_THINK_MU, SW_THINK_SIGMA));
            think_ns = trace_ns_from_s(s, g->src->opt.time_scale);
            if (think_ns < 0 || think_ns > TRACE_MAX_THINK_NS)
                return kv_err(e, "generator %s: session %llu turn %d: think time %g s × time_scale is out of range [0, 1e8] s",
                              gen_specs[g->kind].name, (unsigned long long)g->session, k, s);
        }
        out_tokens = gen_ln(g, k == 0 ? SW_OUT0_MU : SW_OUT_MU, k == 0 ? SW_OUT0_SIGMA : SW_OUT_SIGMA, 65536);
        shared_names(g, out, SW_NAME_SPACE, g->history + new_tokens);
        break;
    }
    if (g->chat_prompt) {
        if (k == 0) new_tokens += g->prompt_tokens;
        shared_names(g, out, CHAT_NAME_SPACE, g->history + new_tokens);
    }
    if (k > 0 && g->think_const_ns >= 0) think_ns = g->think_const_ns;
    out->session = g->session;
    if (g->id_of != g->session + 1) { /* a session's turns share its name: one snprintf per session */
        snprintf(g->session_id, sizeof g->session_id, "%s-%llu", gen_specs[g->kind].name, (unsigned long long)g->session);
        g->id_of = g->session + 1;
    }
    out->session_id = g->session_id;
    out->turn = k;
    out->arrival_ns = k == 0 ? g->arrival_ns : -1;
    out->think_ns = k == 0 ? 0 : think_ns;
    out->new_input_tokens = new_tokens;
    out->output_tokens = out_tokens;
    out->history_tokens = g->history;
    g->src->backend_cut = g->history_cut;
    /* the next turn restores everything this one ends with */
    g->history += new_tokens + out_tokens;
    g->history_cut = 0;
    if (g->kind == GEN_SHAREGPT4 && g->history > SG_HISTORY_CAP) {
        g->history = SG_HISTORY_CAP;
        g->history_cut = 1;
    }
    g->turn++;
    return 1;
}

static void gen_close(void *impl)
{
    Gen *g = impl;
    free(g->names);
    free(g);
}

static const TraceBackend gen_backend = {"generator", gen_next, gen_close};

int trace_gen_open(TraceSource *s, int gen_index, KvErr *e)
{
    const GenSpec *sp = &gen_specs[gen_index];
    Gen *g = calloc(1, sizeof *g);
    if (!g) return kv_err(e, "generator %s: out of memory", sp->name);
    s->be = &gen_backend;
    s->impl = g;
    g->src = s;
    g->kind = gen_index;
    const TraceOptions *o = &s->opt;
    double rate = o->session_rate_per_s > 0 ? o->session_rate_per_s : sp->rate_per_s;
    trace_rng_seed(&g->tok, o->seed, 1);
    trace_rng_seed(&g->think, o->seed, 2);
    trace_poisson_init(&g->arrivals, o->seed, rate);
    int64_t think = o->think_ns > 0 ? o->think_ns : sp->think_ns;
    g->think_const_ns = think >= 0 ? trace_scale_ns(think, o->time_scale) : -1;
    if (think >= 0 && (g->think_const_ns < 0 || g->think_const_ns > TRACE_MAX_THINK_NS))
        return kv_err(e, "generator %s: think time %g s × time_scale %g is out of range [0, %g] s", sp->name,
                      (double)think / 1e9, o->time_scale, TRACE_MAX_THINK_NS / 1e9);
    if (s->max_requests == 0) s->max_requests = TRACE_DEFAULT_GEN_REQUESTS;
    if (gen_index == GEN_SWEBENCH) { /* one system prompt for every session (group 0) */
        g->prompt_tokens = o->system_prompt_tokens > 0 ? o->system_prompt_tokens : SW_SYSTEM_PROMPT_TOKENS;
        g->groups = 1;
        g->names = malloc((size_t)(g->prompt_tokens / SHARED_BLOCK_TOKENS + 1) * sizeof *g->names);
        if (!g->names) return kv_err(e, "generator %s: out of memory", sp->name);
    }
    if ((gen_index == GEN_SHAREGPT4 || gen_index == GEN_MULTITURN) && o->system_prompt_tokens > 0) {
        g->chat_prompt = 1;
        g->prompt_tokens = o->system_prompt_tokens;
        g->groups = o->prompt_groups > 0 ? o->prompt_groups : 1;
        trace_rng_seed(&g->grp, o->seed, 3);
        g->names = malloc((size_t)(g->prompt_tokens / SHARED_BLOCK_TOKENS + 1) * sizeof *g->names);
        if (!g->names) return kv_err(e, "generator %s: out of memory", sp->name);
    }
    if (gen_index == GEN_SHARED) {
        g->prompt_tokens = o->system_prompt_tokens > 0 ? o->system_prompt_tokens : SHARED_PROMPT_TOKENS;
        g->groups = o->prompt_groups > 0 ? o->prompt_groups : SHARED_GROUPS;
        g->names = malloc((size_t)(g->prompt_tokens / SHARED_BLOCK_TOKENS + 1) * sizeof *g->names);
        if (!g->names) return kv_err(e, "generator %s: out of memory", sp->name);
        snprintf(s->describe, sizeof s->describe,
                 "generator %s: seed %llu, requests Poisson %g/s, %d groups of a %lld-token system prompt + %d-token "
                 "question, %d output tokens, %lld requests, time_scale %g",
                 sp->name, (unsigned long long)o->seed, rate, g->groups, (long long)g->prompt_tokens, SHARED_QUESTION_TOKENS,
                 SHARED_OUTPUT_TOKENS, (long long)s->max_requests, o->time_scale);
        return 0;
    }
    char think_s[64];
    if (think >= 0)
        snprintf(think_s, sizeof think_s, "think %g s", (double)think / 1e9);
    else
        snprintf(think_s, sizeof think_s, "think lognormal(%g, %g) s", SW_THINK_MU, SW_THINK_SIGMA);
    char prompt_s[192] = "";
    if (gen_index == GEN_SWEBENCH) snprintf(prompt_s, sizeof prompt_s, ", a %lld-token system prompt shared", (long long)g->prompt_tokens);
    if (gen_index == GEN_MULTITURN)
        snprintf(prompt_s, sizeof prompt_s, ", %d rounds of %lld new + %lld output tokens", o->rounds > 0 ? o->rounds : MT_ROUNDS,
                 (long long)(o->round_tokens > 0 ? o->round_tokens : MT_REQUEST_TOKENS),
                 (long long)(o->round_output_tokens > 0 ? o->round_output_tokens : MT_OUTPUT_TOKENS));
    if (g->chat_prompt) { /* appended to any text before it */
        size_t u = strlen(prompt_s);
        snprintf(prompt_s + u, sizeof prompt_s - u, ", a %lld-token system prompt opening each session (%d group%s)",
                 (long long)g->prompt_tokens, g->groups, g->groups == 1 ? "" : "s");
    }
    snprintf(s->describe, sizeof s->describe,
             "generator %s: seed %llu, sessions Poisson %g/s, %s%s, %lld requests, time_scale %g (parameters: traces/FITS.md)",
             sp->name, (unsigned long long)o->seed, rate, think_s, prompt_s, (long long)s->max_requests, o->time_scale);
    return 0;
}
