/* trace.h — workload traces: one stream of requests (turns of sessions) from a real trace file or a
 * synthetic generator, in release order, with the arrival process attached.
 *
 * Responsible for: opening a source by path or generator name, reading it as a stream (files are
 * streamed line by line when already in release order, else through a compact offset index; the
 * generators are O(1) memory), the arrival process (file timestamps, or Poisson sessions with closed-
 * loop turns), the time scale, context truncation, and naming everything in trace_describe().
 * Not responsible for: simulating what happens to a request (sim/), or when a closed-loop turn is
 * actually released — the simulator releases it think_ns after the session's previous turn finished.
 *
 * Sources:
 *   canonical CSV  (traces/data/NAME.csv; header row; columns by name: session_id, turn,
 *                   arrival_s (optional column, empty cells allowed), new_input_tokens, output_tokens,
 *                   history_tokens; other columns ignored; quoted fields and CRLF accepted)
 *   mooncake JSONL ({"timestamp": ms, "input_length", "output_length", "hash_ids": [...]} per line;
 *                   history = longest prefix of 512-token blocks already seen, below input_length;
 *                   every request its own session)
 *   vidur CSV      (arrived_at [s, optional column], num_prefill_tokens, num_decode_tokens; every
 *                   request its own session, history 0)
 *   generators     "sharegpt4", "leval", "swebench" (parameters and how they were fitted: FITS.md)
 *
 * Arrival process: with request_rate_per_s > 0 every request is timed by a gamma process of
 * requests (below). Otherwise a row with a timestamp arrives at it (× time_scale). A session's turn 0 without a
 * timestamp arrives by a Poisson process of sessions (session_rate_per_s, first arrival after one
 * exponential gap); a later turn without a timestamp is closed loop: arrival_ns = -1 and it arrives
 * think_ns after the session's previous turn finished. time_scale multiplies every time the stream
 * carries (timestamps, Poisson arrivals, think times): the stream at scale s is the stream at scale 1
 * with each arrival_ns and think_ns times s (rounded to the nanosecond).
 *
 * Order contract (release order); trace_next() checks the arrival part and the token invariants on
 * every request (O(1)), the loaders guarantee the per-session part (tests check it over whole streams):
 *   - requests with arrival_ns >= 0 come in non-decreasing arrival_ns;
 *   - a request of turn k > 0 comes after a request of turn k-1 of the same session (the "previous
 *     turn"); a closed-loop request comes after it, right after or later. Normally a session's turns
 *     come 0, 1, 2, ...; a file may repeat a turn number (a branch: two requests continuing the same
 *     earlier turn, as the Mooncake conversation trace does), never skip one.
 *   - sessions are numbered densely 0, 1, ... in order of first appearance in the stream.
 * Token invariants after loading: new_input_tokens >= 1 (a 0 in a file becomes 1 and history shrinks
 * by one, so the full prompt keeps its length), output_tokens >= 1, history_tokens >= 0.
 *
 * Memory: files: O(distinct sessions) (names and per-session state), plus 24 bytes per row when the
 * file is out of release order (the index), plus one line buffer (at most TRACE_MAX_LINE_BYTES);
 * mooncake adds a hash set of the block ids seen. (A consumer that reads ahead to the next timed
 * arrival, as sim/engine does, holds the closed-loop requests in between itself.)
 * Generators: O(1) (a session's turns come back to back). Errors: every failing call returns -1 or
 * NULL and leaves "FILE: line N: column X: expected ..., got ..." (or the generator/option at fault)
 * in the KvErr.
 */
#ifndef KV_TRACE_H
#define KV_TRACE_H

#include <stdint.h>

#include "sim/base/util.h"

typedef struct TraceRequest {
    uint64_t session;        /* dense id, 0.. in order of first appearance in the stream */
    int32_t turn;            /* 0-based within the session */
    int64_t arrival_ns;      /* >= 0: absolute arrival; -1: closed loop, arrives think_ns after
                                the session's previous turn finished */
    int64_t think_ns;        /* closed-loop gap (used when arrival_ns == -1) */
    int64_t new_input_tokens;  /* >= 1 after loading (0 in a file becomes 1, as traces/data/README.md says) */
    int64_t output_tokens;     /* >= 1 */
    int64_t history_tokens;    /* reusable prefix from earlier turns */
    const char *session_id;    /* the trace's own name of the session: a canonical CSV's session_id as
                                  written; Mooncake and Vidur files (one session per request): the
                                  request's 0-based line (Mooncake) or data row (Vidur) in the file;
                                  generators: "NAME-N" with N the dense session id. Valid until the
                                  next trace_next or trace_close (copy it to keep it). */
    /* The names (sim/base/blockhash.h) of the leading whole blocks of the request's context (history
     * then new input) that requests of any session may share, prefix_block_tokens tokens each:
     * Mooncake's hash_ids of the whole 512-token blocks of the input. n_prefix_blocks × block tokens
     * <= history + new input; 0 blocks (and NULL) when the source names none or max_context_tokens
     * cut the history (the context no longer starts with those blocks). Valid until the next
     * trace_next or trace_close. */
    const uint64_t *prefix_blocks;
    int32_t n_prefix_blocks;
    int32_t prefix_block_tokens;
} TraceRequest;

typedef struct TraceOptions {
    const char *source;      /* a path, or a generator name: "sharegpt4", "leval", "swebench" */
    const char *format;      /* "auto" (default: by extension/header), "csv", "mooncake", "vidur" */
    uint64_t seed;
    double session_rate_per_s; /* Poisson session arrivals for sources without timestamps and for
                                  generators (0 = default of the generator/trace) */
    double time_scale;         /* multiply every trace timestamp and think time by this (1 = as is) */
    int64_t think_ns;          /* think time between turns of sources without per-turn timestamps
                                  (0 = source default, e.g. 30 s for sharegpt4 as in HCache) */
    int64_t max_requests;      /* stop after this many requests (0 = no limit; generators: required
                                  or default 1000) */
    int64_t max_context_tokens;/* 0 = none; else history+new truncated to this (drop oldest history:
                                  history = max(0, max_ctx - new); new capped at max_ctx) and counted */
    double request_rate_per_s; /* > 0: every request (any turn) arrives by a gamma renewal process of
                                  this mean rate, in stream order, replacing the source's timestamps,
                                  session arrivals and think times (vLLM's --request-rate); not
                                  multiplied by time_scale. 0 = off */
    double burstiness;         /* the gamma shape of request_rate's gaps (vLLM's --burstiness): 1 =
                                  Poisson, < 1 burstier, > 1 more regular (CV = 1/sqrt(burstiness));
                                  0 = 1 */
    int64_t system_prompt_tokens; /* shared-prefix: each group's system prompt (0: 2048); swebench: the shared one (0: 129);
                                     sharegpt4, multiturn: each session's group's, added to its first turn (0: none) */
    int prompt_groups;         /* distinct system prompts: shared-prefix (0: 64); sharegpt4, multiturn (0: 1) */
    int rounds;                /* the multiturn generator: rounds per session (0: 10) */
    int64_t round_tokens;      /* the multiturn generator: new input tokens per round (0: 2048) */
    int64_t round_output_tokens; /* the multiturn generator: output tokens per round (0: 16) */
} TraceOptions;

/* Limits on what a trace may carry, checked where each value enters (the file's line and column in
 * the message) and again on every request leaving trace_next (generators included):
 *  - tokens: each of history, new input and output in [0, TRACE_MAX_TOKENS], and so is their sum, so
 *    the simulator's token arithmetic (sums, products with bytes per token) stays far inside int64;
 *  - times: every arrival in [0, TRACE_MAX_TIME_NS] after time_scale (file timestamps in seconds:
 *    [0, TRACE_MAX_TIME_NS / 1e9]); every think time in [0, TRACE_MAX_THINK_NS]; and the latest
 *    arrival plus all the think time emitted so far stays below TRACE_MAX_TIME_NS (a closed-loop
 *    session's release time is bounded by it), leaving over half of the int64 range of simulated
 *    nanoseconds to the simulation itself;
 *  - lines: at most TRACE_MAX_LINE_BYTES bytes ("FILE: line N: longer than 1 MiB"), no NUL bytes;
 *    the file must be a regular file (not a device, FIFO or directory: they could not be re-read and
 *    /dev/zero would never end a line). */
#define TRACE_MAX_TOKENS 2147483647LL        /* 2^31 - 1 */
#define TRACE_MAX_TIME_NS 4000000000000000000LL /* 4e18 ns, about 127 years */
#define TRACE_MAX_THINK_NS 100000000000000000LL /* 1e17 ns, about 3 years */
#define TRACE_MAX_LINE_BYTES (1 << 20)       /* 1 MiB */

/* Defaults that the options' zeros stand for. */
#define TRACE_DEFAULT_SESSION_RATE_PER_S 1.0 /* files without timestamps */
#define TRACE_DEFAULT_GEN_REQUESTS 1000      /* generators with max_requests == 0 */
#define TRACE_MOONCAKE_BLOCK_TOKENS 512      /* tokens per hash id in the Mooncake traces */

typedef struct TraceSource TraceSource;

/* Open a source. A file is read once up front to validate it and to learn whether it is in release
 * order (O(rows) time; a file out of order is read a second time to build its index). Options are
 * validated (negative rates, scales, counts → error naming the option). NULL + message on failure. */
TraceSource *trace_open(const TraceOptions *o, KvErr *e);
/* The next request in release order. 1: got one, 0: end (also after max_requests), -1: error
 * (a malformed line, an I/O error, or a broken order contract). O(1) amortised; a file out of
 * order costs one seek per request. */
int trace_next(TraceSource *s, TraceRequest *out, KvErr *e);
/* Close and free; NULL is allowed. */
void trace_close(TraceSource *s);
/* The format names TraceOptions.format takes ("auto" first, then the file formats; NULL-ended): the
 * trace_format setting's values, by index. */
extern const char *const trace_format_names[];

/* One line: source, format, parameters, seed (valid until trace_close). */
const char *trace_describe(const TraceSource *s);
/* Rows of a file that carry their own arrival time (0 for a generator): a load mode that replaces
 * them (concurrency, request_rate) discards that timing. */
int64_t trace_timed_rows(const TraceSource *s);
/* Requests whose context was cut so far (by max_context_tokens or a generator's own history cap). */
int64_t trace_truncated_count(const TraceSource *s);
/* Requests returned so far. */
int64_t trace_emitted_count(const TraceSource *s);

/* names and one-line descriptions of the built-in generators, for `kvsim list traces` */
int trace_generator_count(void);
const char *trace_generator_name(int i);   /* NULL when i is out of range */
const char *trace_generator_summary(int i); /* NULL when i is out of range */

#endif
