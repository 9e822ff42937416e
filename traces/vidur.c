/* vidur.c — Vidur/Splitwise request traces: CSV with arrived_at (seconds), num_prefill_tokens,
 * num_decode_tokens (extra columns ignored, any order).
 *
 * Responsible for: reading such a file as a stream of single-turn sessions: every row is its own
 * session (turn 0, history 0, new input = the whole prefill); arrivals from arrived_at × time_scale,
 * or, for length-only files without an arrived_at column, Poisson at session_rate_per_s.
 * Not responsible for: the order machinery (trace_io.c) or truncation (trace.c).
 * Invariants: session ids are 0, 1, 2, ... in stream order (one per request).
 */
#include <stdlib.h>
#include <string.h>

#include "traces/trace_int.h"

enum { VID_ARRIVED, VID_PREFILL, VID_DECODE, VID_NCOL };
static const char *const vid_col_names[VID_NCOL] = {"arrived_at", "num_prefill_tokens", "num_decode_tokens"};

typedef struct VidurTrace {
    TraceSource *src;
    const char *path;
    TraceLines lines;
    TraceOrder order;
    int col[VID_NCOL];
    int ncols;
    char **fields;
    TracePoisson poisson;
    double rate_per_s;
    double arrived_s;
    int64_t prefill, decode;
    uint64_t next_session;
    char session_id[24]; /* the last request's 0-based data row (line - 2), handed out as its session id */
} VidurTrace;

static int vid_parse(void *ctx, char *line, int64_t line_no, KvErr *e)
{
    VidurTrace *v = ctx;
    if (trace_is_blank(line)) return 0;
    int n = trace_csv_split(line, v->fields, v->ncols);
    if (n < 0) return kv_err(e, "%s: line %lld: unterminated quoted field", v->path, (long long)line_no);
    if (n != v->ncols)
        return kv_err(e, "%s: line %lld: expected %d columns as in the header, got %d", v->path, (long long)line_no,
                      v->ncols, n);
    const char *f;
    if (v->col[VID_ARRIVED] >= 0) {
        f = v->fields[v->col[VID_ARRIVED]];
        if (trace_parse_seconds(f, &v->arrived_s) != 0)
            return kv_err(e, "%s: line %lld: column arrived_at: expected a non-negative number of seconds, got \"%.60s\"",
                          v->path, (long long)line_no, f);
        if (v->arrived_s > TRACE_MAX_TIME_NS / 1e9)
            return trace_err_range(e, v->path, line_no, "column arrived_at", v->arrived_s, 0, TRACE_MAX_TIME_NS / 1e9);
    }
    int64_t *dst[2] = {&v->prefill, &v->decode};
    for (int k = 0; k < 2; k++) {
        f = v->fields[v->col[VID_PREFILL + k]];
        if (trace_parse_count(f, dst[k]) != 0)
            return kv_err(e, "%s: line %lld: column %s: expected a non-negative integer, got \"%.60s\"", v->path,
                          (long long)line_no, vid_col_names[VID_PREFILL + k], f);
    }
    static const char *const tok_names[3] = {"num_prefill_tokens", "num_decode_tokens", NULL};
    const int64_t toks[3] = {v->prefill, v->decode, 0};
    if (trace_check_tokens(e, v->path, line_no, "column", tok_names, toks) != 0) return -1;
    return 1;
}

static int vid_step(void *ctx, int64_t line_no, int64_t *key_ns, int *timed, KvErr *e)
{
    VidurTrace *v = ctx;
    double t_s = v->col[VID_ARRIVED] >= 0 ? v->arrived_s : trace_poisson_next_s(&v->poisson);
    *key_ns = trace_ns_from_s(t_s, v->src->opt.time_scale);
    if (*key_ns < 0)
        return kv_err(e, "%s: line %lld: %s: value %.10g s × time_scale %g is out of range [0, %.10g] s", v->path,
                      (long long)line_no, v->col[VID_ARRIVED] >= 0 ? "column arrived_at" : "Poisson arrival", t_s,
                      v->src->opt.time_scale, TRACE_MAX_TIME_NS / 1e9);
    *timed = 1;
    return 0;
}

static void vid_reset(void *ctx)
{
    VidurTrace *v = ctx;
    trace_poisson_init(&v->poisson, v->src->opt.seed, v->rate_per_s);
}

static const TraceOrderOps vid_order_ops = {vid_parse, vid_step, vid_reset};

static int vid_next(void *impl, TraceRequest *out, KvErr *e)
{
    VidurTrace *v = impl;
    int64_t key, line_no;
    int timed;
    int r = trace_order_next(&v->order, &key, &timed, &line_no, e);
    if (r <= 0) return r;
    out->session = v->next_session++;
    snprintf(v->session_id, sizeof v->session_id, "%lld", (long long)(line_no - 2));
    out->session_id = v->session_id;
    out->turn = 0;
    out->arrival_ns = key;
    out->think_ns = 0;
    out->new_input_tokens = v->prefill > 0 ? v->prefill : 1;
    out->output_tokens = v->decode > 0 ? v->decode : 1;
    out->history_tokens = 0;
    return 1;
}

static void vid_close(void *impl)
{
    VidurTrace *v = impl;
    trace_order_free(&v->order);
    trace_lines_close(&v->lines);
    free(v->fields);
    free(v);
}

static const TraceBackend vid_backend = {"vidur", vid_next, vid_close};

int trace_vidur_open(TraceSource *s, KvErr *e)
{
    VidurTrace *v = calloc(1, sizeof *v);
    if (!v) return kv_err(e, "%s: out of memory", s->opt.source);
    v->src = s;
    v->path = s->opt.source;
    s->be = &vid_backend;
    s->impl = v;
    v->rate_per_s = s->opt.session_rate_per_s > 0 ? s->opt.session_rate_per_s : TRACE_DEFAULT_SESSION_RATE_PER_S;
    if (trace_lines_open(&v->lines, v->path, e) != 0) return -1;
    char *line = NULL;
    int r = trace_lines_read(&v->lines, &line, e);
    if (r < 0) return -1;
    if (r == 0 || trace_is_blank(line))
        return kv_err(e, "%s: line 1: empty, expected a header row (arrived_at,num_prefill_tokens,num_decode_tokens)", v->path);
    char *copy = strdup(line);
    if (!copy) return kv_err(e, "%s: out of memory", v->path);
    int n = trace_csv_split(copy, NULL, 0);
    free(copy);
    if (n < 0) return kv_err(e, "%s: line 1: unterminated quoted field in the header", v->path);
    v->ncols = n;
    v->fields = calloc((size_t)n + 1, sizeof *v->fields);
    if (!v->fields) return kv_err(e, "%s: out of memory", v->path);
    trace_csv_split(line, v->fields, n);
    for (int k = 0; k < VID_NCOL; k++) {
        v->col[k] = trace_csv_column(v->fields, n, vid_col_names[k]);
        if (v->col[k] == -2) return kv_err(e, "%s: line 1: column %s appears twice in the header", v->path, vid_col_names[k]);
        if (v->col[k] < 0 && k != VID_ARRIVED)
            return kv_err(e, "%s: line 1: the header has no column %s (vidur format: arrived_at, num_prefill_tokens, "
                          "num_decode_tokens)", v->path, vid_col_names[k]);
    }
    if (trace_order_start(&v->order, &v->lines, &vid_order_ops, v, e) != 0) return -1;
    char arrivals[96];
    if (v->col[VID_ARRIVED] >= 0)
        snprintf(arrivals, sizeof arrivals, "arrivals from arrived_at");
    else
        snprintf(arrivals, sizeof arrivals, "Poisson arrivals %g/s (seed %llu)", v->rate_per_s, (unsigned long long)s->opt.seed);
    s->timed_rows = v->order.rows; /* every row carries its arrival */
    snprintf(s->describe, sizeof s->describe, "vidur %s: %lld requests, one session each, history 0; %s; %s; time_scale %g",
             v->path, (long long)v->order.rows, arrivals,
             v->order.indexed ? "indexed (out of time order)" : "streamed in file order", s->opt.time_scale);
    return 0;
}
