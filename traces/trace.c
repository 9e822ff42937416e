/* trace.c — the public trace API: options, choosing a backend, and what every request passes
 * through on its way out (max_requests, context truncation, token and order invariants).
 *
 * Responsible for: validating TraceOptions once (then the copy in the source is const), telling a
 * generator name from a path and detecting a file's format, the request_rate arrival process (a
 * gamma process over the stream, replacing the source's times), the context cut of max_context_tokens
 * (and counting it), and checking on every request that arrival_ns never goes back and that the
 * token invariants hold — a violation is a loader bug and fails loudly instead of corrupting a run.
 * Not responsible for: parsing (csv.c, vidur.c, mooncake.c: one row each in k_formats) or
 * sampling (gen.c).
 * Invariants: after trace_next returns -1 the source stays failed (every later call returns -1 with
 * the same message); emitted <= max_requests when a limit is set.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_int.h"

static int trace_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    if (m > n) return 0;
    for (size_t i = 0; i < m; i++)
        if (tolower((unsigned char)s[n - m + i]) != suffix[i]) return 0;
    return 1;
}

static int mooncake_by_path(const char *path) { return trace_has_suffix(path, ".jsonl") || trace_has_suffix(path, ".json"); }
static int mooncake_by_line(const char *line)
{
    while (*line == ' ' || *line == '\t') line++;
    return *line == '{';
}
static int vidur_by_line(const char *line) { return strstr(line, "num_prefill_tokens") || strstr(line, "arrived_at"); }

/* The file formats, one row each: a new format is its reader (NAME.c, defining trace_NAME_open)
 * plus one row here; the trace_format setting's names (trace_format_names) come from the rows.
 * X(NAME, BY_PATH, BY_LINE): BY_PATH claims a file by its name, BY_LINE by its first line (NULL:
 * not recognisable that way). Detection ("auto"): the first row whose BY_PATH claims the file's
 * name, else the first whose BY_LINE claims its first line, else the canonical CSV. */
#define TRACE_FORMAT_ROWS(X)                                                                                           \
    X(csv, NULL, NULL)                                                                                                 \
    X(mooncake, mooncake_by_path, mooncake_by_line)                                                                    \
    X(vidur, NULL, vidur_by_line)
#define TRACE_FALLBACK_FORMAT 0 /* csv */

#define TRACE_FORMAT_OPEN_(N, P, L) int trace_##N##_open(TraceSource *s, KvErr *e);
TRACE_FORMAT_ROWS(TRACE_FORMAT_OPEN_)
typedef struct TraceFormat {
    const char *name;
    int (*open)(TraceSource *s, KvErr *e);
    int (*by_path)(const char *path);  /* NULL: not recognisable by name */
    int (*by_line)(const char *line);  /* NULL: not recognisable by its first line */
} TraceFormat;
#define TRACE_FORMAT_ROW_(N, P, L) {#N, trace_##N##_open, P, L},
static const TraceFormat k_formats[] = {TRACE_FORMAT_ROWS(TRACE_FORMAT_ROW_)};
#define N_FORMATS ((int)KV_ARRAY_LEN(k_formats))
#define TRACE_FORMAT_NAME_(N, P, L) #N,
const char *const trace_format_names[] = {"auto", TRACE_FORMAT_ROWS(TRACE_FORMAT_NAME_) NULL};

static const TraceFormat *trace_format_find(const char *name)
{
    for (int i = 0; i < N_FORMATS; i++)
        if (strcmp(k_formats[i].name, name) == 0) return &k_formats[i];
    return NULL;
}

/* "auto, csv, mooncake or vidur" for messages */
static void trace_format_list(char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "auto");
    for (int i = 0; i < N_FORMATS && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i == N_FORMATS - 1 ? " or " : ", ", k_formats[i].name);
}

/* The format of a file: from its name, else from its first line (see k_formats). */
static int trace_detect_format(const char *path, const char **format, KvErr *e)
{
    for (int i = 0; i < N_FORMATS; i++)
        if (k_formats[i].by_path && k_formats[i].by_path(path)) {
            *format = k_formats[i].name;
            return 0;
        }
    TraceLines l;
    if (trace_lines_open(&l, path, e) != 0) return -1;
    char *line = NULL;
    int r = trace_lines_read(&l, &line, e);
    if (r < 0) {
        trace_lines_close(&l);
        return -1;
    }
    if (r == 0) {
        trace_lines_close(&l);
        return kv_err(e, "%s: line 1: empty file, expected a header row or a JSON object", path);
    }
    *format = k_formats[TRACE_FALLBACK_FORMAT].name;
    for (int i = 0; i < N_FORMATS; i++)
        if (k_formats[i].by_line && k_formats[i].by_line(line)) {
            *format = k_formats[i].name;
            break;
        }
    trace_lines_close(&l);
    return 0;
}

TraceSource *trace_open(const TraceOptions *o, KvErr *e)
{
    if (!o || !o->source || !*o->source) {
        kv_err(e, "trace: no source given (a file path or a generator name)");
        return NULL;
    }
    if (!(o->time_scale >= 0.0) || isinf(o->time_scale)) {
        kv_err(e, "trace: time_scale must be a positive number, got %g", o->time_scale);
        return NULL;
    }
    if (!(o->session_rate_per_s >= 0.0) || isinf(o->session_rate_per_s)) {
        kv_err(e, "trace: session_rate_per_s must be a positive number (0 = default), got %g", o->session_rate_per_s);
        return NULL;
    }
    if (o->think_ns < 0 || o->think_ns > TRACE_MAX_THINK_NS) {
        kv_err(e, "trace: think_ns: value %lld out of range [0, %lld] (0 = default)", (long long)o->think_ns,
               (long long)TRACE_MAX_THINK_NS);
        return NULL;
    }
    if (o->max_requests < 0) {
        kv_err(e, "trace: max_requests must be >= 0 (0 = no limit), got %lld", (long long)o->max_requests);
        return NULL;
    }
    if (!(o->request_rate_per_s >= 0.0) || isinf(o->request_rate_per_s)) {
        kv_err(e, "trace: request_rate_per_s must be a finite number >= 0 (0 = off), got %g", o->request_rate_per_s);
        return NULL;
    }
    if (!(o->burstiness >= 0.0) || isinf(o->burstiness)) {
        kv_err(e, "trace: burstiness must be a finite number > 0 (0 = 1, Poisson), got %g", o->burstiness);
        return NULL;
    }
    if (o->max_context_tokens < 0) {
        kv_err(e, "trace: max_context_tokens must be >= 0 (0 = none), got %lld", (long long)o->max_context_tokens);
        return NULL;
    }
    const char *format = o->format && *o->format ? o->format : "auto";
    if (strcmp(format, "auto") && !trace_format_find(format)) {
        char names[128];
        trace_format_list(names, sizeof names);
        kv_err(e, "trace: unknown format \"%s\" (expected %s)", format, names);
        return NULL;
    }
    int gen = trace_gen_find(o->source);
    if (gen >= 0 && strcmp(format, "auto") != 0) {
        kv_err(e, "trace: \"%s\" is a generator; format \"%s\" applies to files only", o->source, format);
        return NULL;
    }
    if (gen < 0 && strcmp(format, "auto") == 0 && trace_detect_format(o->source, &format, e) != 0) return NULL;

    TraceSource *s = calloc(1, sizeof *s);
    if (!s) {
        kv_err(e, "trace: out of memory");
        return NULL;
    }
    s->opt = *o;
    s->source_copy = strdup(o->source);
    s->format_copy = strdup(gen >= 0 ? "generator" : format);
    if (!s->source_copy || !s->format_copy) {
        trace_close(s);
        kv_err(e, "trace: out of memory");
        return NULL;
    }
    s->opt.source = s->source_copy;
    s->opt.format = s->format_copy;
    if (s->opt.time_scale == 0.0) s->opt.time_scale = 1.0;
    s->max_requests = o->max_requests;
    s->last_arrival_ns = 0;

    int rc = gen >= 0 ? trace_gen_open(s, gen, e) : trace_format_find(format)->open(s, e);
    if (rc != 0) {
        trace_close(s);
        return NULL;
    }
    size_t used = strlen(s->describe);
    if (gen < 0 && s->max_requests > 0)
        used += (size_t)snprintf(s->describe + used, sizeof s->describe - used, "; max_requests %lld", (long long)s->max_requests);
    if (s->opt.request_rate_per_s > 0) {
        trace_gamma_init(&s->req_arrivals, s->opt.seed, s->opt.request_rate_per_s, s->opt.burstiness);
        if (used < sizeof s->describe)
            used += (size_t)snprintf(s->describe + used, sizeof s->describe - used,
                                     "; every request arrives by a gamma process: %g requests/s, burstiness %g "
                                     "(replaces the source's arrival times and think times)",
                                     s->opt.request_rate_per_s, s->req_arrivals.shape);
    }
    if (used < sizeof s->describe) {
        if (s->opt.max_context_tokens > 0)
            snprintf(s->describe + used, sizeof s->describe - used, "; max_context %lld", (long long)s->opt.max_context_tokens);
        else
            snprintf(s->describe + used, sizeof s->describe - used, "; max_context none");
    }
    return s;
}

static int trace_fail(TraceSource *s, KvErr *e)
{
    s->failed = 1;
    if (e && e != &s->err) s->err = *e;
    return -1;
}

int trace_next(TraceSource *s, TraceRequest *out, KvErr *e)
{
    if (s->failed) {
        if (e) *e = s->err;
        return -1;
    }
    if (s->max_requests > 0 && s->emitted >= s->max_requests) return 0;
    KvErr local;
    KvErr *err = e ? e : &local;
    s->backend_cut = 0;
    out->prefix_blocks = NULL; /* a source that names no blocks leaves these */
    out->n_prefix_blocks = 0;
    out->prefix_block_tokens = 0;
    int r = s->be->next(s->impl, out, err);
    if (r < 0) return trace_fail(s, err);
    if (r == 0) return 0;
    if (s->opt.request_rate_per_s > 0) { /* request_rate: the gamma process times every request */
        out->arrival_ns = trace_ns_from_s(trace_gamma_next_s(&s->req_arrivals), 1.0);
        out->think_ns = 0;
        if (out->arrival_ns < 0) {
            kv_err(err, "%s: request %lld: the request_rate arrival passes the time range", s->opt.source, (long long)s->emitted);
            return trace_fail(s, err);
        }
    }

    /* token invariants (backends guarantee them; a failure here is a loader bug) */
    if (out->new_input_tokens < 1 || out->output_tokens < 1 || out->history_tokens < 0 || out->turn < 0) {
        kv_err(err, "%s: request %lld (session %llu turn %d): broken token invariant (new %lld, output %lld, history %lld)",
               s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
               (long long)out->new_input_tokens, (long long)out->output_tokens, (long long)out->history_tokens);
        return trace_fail(s, err);
    }
    /* the limits of trace.h (the loaders check them per line; this catches generators and bugs) */
    int64_t tokens = out->new_input_tokens + out->output_tokens + out->history_tokens;
    if (out->new_input_tokens > TRACE_MAX_TOKENS || out->output_tokens > TRACE_MAX_TOKENS ||
        out->history_tokens > TRACE_MAX_TOKENS || tokens > TRACE_MAX_TOKENS) {
        kv_err(err, "%s: request %lld (session %llu turn %d): tokens (new %lld, output %lld, history %lld) out of range [0, %lld]",
               s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
               (long long)out->new_input_tokens, (long long)out->output_tokens, (long long)out->history_tokens,
               (long long)TRACE_MAX_TOKENS);
        return trace_fail(s, err);
    }
    if (out->arrival_ns > TRACE_MAX_TIME_NS || out->think_ns > TRACE_MAX_THINK_NS) {
        kv_err(err, "%s: request %lld (session %llu turn %d): arrival %lld ns, think time %lld ns: out of range [0, %lld], [0, %lld]",
               s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
               (long long)out->arrival_ns, (long long)out->think_ns, (long long)TRACE_MAX_TIME_NS,
               (long long)TRACE_MAX_THINK_NS);
        return trace_fail(s, err);
    }
    if (out->arrival_ns < 0 && out->think_ns > 0) { /* both <= 1e17 and the sum <= 4e18: no overflow */
        s->think_total_ns += out->think_ns;
        if (s->think_total_ns > TRACE_MAX_TIME_NS - s->last_arrival_ns) {
            kv_err(err, "%s: request %lld (session %llu turn %d): the latest arrival (%.6g s) plus the think times so far "
                   "(%.6g s) pass %.6g s, the limit of simulated time",
                   s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
                   (double)s->last_arrival_ns / 1e9, (double)s->think_total_ns / 1e9, TRACE_MAX_TIME_NS / 1e9);
            return trace_fail(s, err);
        }
    }
    /* release order: timed arrivals never go back; closed loop only after turn 0 */
    if (out->arrival_ns >= 0) {
        if (out->arrival_ns < s->last_arrival_ns) {
            kv_err(err, "%s: request %lld (session %llu turn %d): arrival %lld ns before the previous arrival %lld ns",
                   s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
                   (long long)out->arrival_ns, (long long)s->last_arrival_ns);
            return trace_fail(s, err);
        }
        if (s->think_total_ns > TRACE_MAX_TIME_NS - out->arrival_ns) {
            kv_err(err, "%s: request %lld (session %llu turn %d): arrival %.6g s plus the think times so far (%.6g s) "
                   "pass %.6g s, the limit of simulated time",
                   s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
                   (double)out->arrival_ns / 1e9, (double)s->think_total_ns / 1e9, TRACE_MAX_TIME_NS / 1e9);
            return trace_fail(s, err);
        }
        s->last_arrival_ns = out->arrival_ns;
    } else if (out->arrival_ns != -1 || out->turn == 0 || out->think_ns < 0) {
        kv_err(err, "%s: request %lld (session %llu turn %d): closed-loop request with arrival %lld, think %lld ns",
               s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn,
               (long long)out->arrival_ns, (long long)out->think_ns);
        return trace_fail(s, err);
    }

    int64_t max_ctx = s->opt.max_context_tokens;
    int cut = s->backend_cut;
    if (max_ctx > 0 && out->history_tokens + out->new_input_tokens > max_ctx) {
        if (out->new_input_tokens > max_ctx) out->new_input_tokens = max_ctx;
        out->history_tokens = kv_max_i64(0, max_ctx - out->new_input_tokens);
        cut = 1;
    }
    if (cut) /* the oldest history went: the context no longer begins with the named blocks */
        out->n_prefix_blocks = 0;
    if (out->n_prefix_blocks == 0) {
        out->prefix_blocks = NULL;
        out->prefix_block_tokens = 0;
    }
    if (out->n_prefix_blocks < 0 || (out->n_prefix_blocks > 0 && (out->prefix_block_tokens < 1 || !out->prefix_blocks)) ||
        (int64_t)out->n_prefix_blocks * out->prefix_block_tokens > out->history_tokens + out->new_input_tokens) {
        kv_err(err, "%s: request %lld (session %llu turn %d): %d shared blocks of %d tokens do not fit its context of %lld tokens",
               s->opt.source, (long long)s->emitted, (unsigned long long)out->session, out->turn, out->n_prefix_blocks,
               out->prefix_block_tokens, (long long)(out->history_tokens + out->new_input_tokens));
        return trace_fail(s, err);
    }
    s->truncated += cut;
    s->emitted++;
    return 1;
}

void trace_close(TraceSource *s)
{
    if (!s) return;
    if (s->be && s->impl) s->be->close(s->impl);
    free(s->source_copy);
    free(s->format_copy);
    free(s);
}

const char *trace_describe(const TraceSource *s) { return s->describe; }
int64_t trace_truncated_count(const TraceSource *s) { return s->truncated; }
int64_t trace_timed_rows(const TraceSource *s) { return s->timed_rows; }
int64_t trace_emitted_count(const TraceSource *s) { return s->emitted; }
