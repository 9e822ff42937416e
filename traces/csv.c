/* csv.c — the canonical trace CSV (traces/data/NAME.csv; columns: docs/formats.md): one row per request.
 *
 * Responsible for: the header (columns found by name, in any order, unknown ones ignored; session_id,
 * turn, new_input_tokens, output_tokens, history_tokens required, arrival_s optional), validating
 * every row (strict non-negative integers, consecutive turns within a session, a session's timestamps
 * never going back), the arrival process (timestamps × time_scale; else Poisson sessions with
 * closed-loop later turns), dense session ids in stream order, and the 0 → 1 token rule.
 * Not responsible for: the order machinery (trace_io.c: streamed when the file is in release order,
 * else read through an offset index) or truncation (trace.c).
 * The optional hash_ids column (Mooncake's convention: space-separated ids, one per 512-token block of
 * the context, an id standing for its block and every block before it) names the context's whole
 * blocks (TraceRequest.prefix_blocks), as the Mooncake reader names them.
 * Invariants: per session, turn 0 comes first and every later turn t satisfies 1 <= t <= (largest
 * turn so far) + 1 in file order — a repeated turn is a branch (the Mooncake trace has 21); a
 * session's release keys never decrease, so sorting by (key, offset) keeps its turns in file order.
 * Memory: O(sessions): the name and 32 bytes of state per session.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/base/blockhash.h"
#include "traces/trace_int.h"

enum { CSV_SESSION, CSV_TURN, CSV_ARRIVAL, CSV_NEW, CSV_OUT, CSV_HIST, CSV_HASH, CSV_NCOL };
static const char *const csv_col_names[CSV_NCOL] = {"session_id", "turn", "arrival_s", "new_input_tokens",
                                                    "output_tokens", "history_tokens", "hash_ids"};

typedef struct CsvSession {
    int64_t last_key_ns; /* release key of the session's latest row (ordering state) */
    int64_t last_line;
    int64_t out_id;      /* dense id in the output stream; -1 until first emitted */
    int32_t max_turn;    /* largest turn so far; -1 before the first row (ordering state) */
} CsvSession;

typedef struct CsvRow {
    int64_t session;     /* index in names */
    int32_t turn;
    int has_arrival;
    double arrival_s;
    int64_t new_tokens, out_tokens, hist_tokens;
    uint64_t *ids;       /* hash_ids of the row (n_ids), named through kv_block_hash at csv_next */
    size_t n_ids, ids_cap;
} CsvRow;

typedef struct CsvTrace {
    TraceSource *src;
    const char *path;
    TraceLines lines;
    TraceOrder order;
    int col[CSV_NCOL];   /* column index of each field; col[CSV_ARRIVAL] may be -1 */
    int ncols;
    char **fields;
    TraceNames names;
    CsvSession *ses;
    size_t ses_cap;
    TracePoisson poisson;
    double rate_per_s;
    int64_t think_ns;    /* scaled */
    int64_t rows_timed, rows_poisson, rows_closed; /* of the pass in progress */
    int64_t scan_timed, scan_poisson, scan_closed; /* of the last whole pass (for describe) */
    int64_t next_out_id;
    CsvRow row;
    uint64_t *blk_names; /* the last request's block names (row.ids_cap of them) */
} CsvTrace;

/* the row's hash_ids: space-separated non-negative integers (none: an empty field) */
static int csv_hash_ids(CsvTrace *c, const char *f, int64_t line_no, KvErr *e)
{
    CsvRow *r = &c->row;
    r->n_ids = 0;
    for (const char *p = f;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return 0;
        const char *q = p;
        uint64_t v = 0;
        while (*q >= '0' && *q <= '9') {
            if (v > (UINT64_MAX - 9) / 10) break;
            v = v * 10 + (uint64_t)(*q++ - '0');
        }
        if (q == p || (*q && *q != ' ' && *q != '\t'))
            return kv_err(e, "%s: line %lld: column hash_ids: expected space-separated non-negative integers, got \"%.60s\"",
                          c->path, (long long)line_no, f);
        if (r->n_ids == r->ids_cap) {
            size_t cap = r->ids_cap ? r->ids_cap * 2 : 64;
            uint64_t *ids = realloc(r->ids, cap * sizeof *ids);
            if (ids) r->ids = ids;
            uint64_t *nm = ids ? realloc(c->blk_names, cap * sizeof *nm) : NULL;
            if (!nm) return kv_err(e, "%s: line %lld: out of memory", c->path, (long long)line_no);
            c->blk_names = nm;
            r->ids_cap = cap;
        }
        r->ids[r->n_ids++] = v;
        p = q;
    }
}

static int csv_bad_field(CsvTrace *c, int64_t line, int col, const char *expected, const char *got, KvErr *e)
{
    return kv_err(e, "%s: line %lld: column %s: expected %s, got \"%.60s\"", c->path, (long long)line,
                  csv_col_names[col], expected, got);
}

static int csv_parse(void *ctx, char *line, int64_t line_no, KvErr *e)
{
    CsvTrace *c = ctx;
    if (trace_is_blank(line)) return 0;
    int n = trace_csv_split(line, c->fields, c->ncols);
    if (n < 0) return kv_err(e, "%s: line %lld: unterminated quoted field", c->path, (long long)line_no);
    if (n != c->ncols)
        return kv_err(e, "%s: line %lld: expected %d columns as in the header, got %d", c->path, (long long)line_no,
                      c->ncols, n);
    CsvRow *r = &c->row;
    const char *sid = c->fields[c->col[CSV_SESSION]];
    if (!*sid) return csv_bad_field(c, line_no, CSV_SESSION, "a session id", sid, e);
    int is_new;
    r->session = trace_names_intern(&c->names, sid, &is_new);
    if (r->session < 0) return kv_err(e, "%s: line %lld: out of memory", c->path, (long long)line_no);
    if (is_new) {
        if ((size_t)r->session >= c->ses_cap) {
            size_t cap = c->ses_cap ? c->ses_cap * 2 : 256;
            CsvSession *ses = realloc(c->ses, cap * sizeof *ses);
            if (!ses) return kv_err(e, "%s: line %lld: out of memory", c->path, (long long)line_no);
            c->ses = ses;
            c->ses_cap = cap;
        }
        c->ses[r->session] = (CsvSession){0, 0, -1, -1};
    }
    int64_t v;
    const char *f = c->fields[c->col[CSV_TURN]];
    if (trace_parse_count(f, &v) != 0 || v > INT32_MAX)
        return csv_bad_field(c, line_no, CSV_TURN, "a non-negative integer", f, e);
    r->turn = (int32_t)v;
    r->has_arrival = 0;
    r->arrival_s = 0.0;
    if (c->col[CSV_ARRIVAL] >= 0) {
        f = c->fields[c->col[CSV_ARRIVAL]];
        if (*f) {
            if (trace_parse_seconds(f, &r->arrival_s) != 0)
                return csv_bad_field(c, line_no, CSV_ARRIVAL, "a non-negative number of seconds or nothing", f, e);
            if (r->arrival_s > TRACE_MAX_TIME_NS / 1e9)
                return trace_err_range(e, c->path, line_no, "column arrival_s", r->arrival_s, 0, TRACE_MAX_TIME_NS / 1e9);
            r->has_arrival = 1;
        }
    }
    int64_t *dst[3] = {&r->new_tokens, &r->out_tokens, &r->hist_tokens};
    for (int k = 0; k < 3; k++) {
        f = c->fields[c->col[CSV_NEW + k]];
        if (trace_parse_count(f, dst[k]) != 0) return csv_bad_field(c, line_no, CSV_NEW + k, "a non-negative integer", f, e);
    }
    static const char *const tok_names[3] = {"new_input_tokens", "output_tokens", "history_tokens"};
    const int64_t toks[3] = {r->new_tokens, r->out_tokens, r->hist_tokens};
    if (trace_check_tokens(e, c->path, line_no, "column", tok_names, toks) != 0) return -1;
    if (c->col[CSV_HASH] >= 0 && csv_hash_ids(c, c->fields[c->col[CSV_HASH]], line_no, e) != 0) return -1;
    return 1;
}

static int csv_step(void *ctx, int64_t line_no, int64_t *key_ns, int *timed, KvErr *e)
{
    CsvTrace *c = ctx;
    const CsvRow *r = &c->row;
    CsvSession *s = &c->ses[r->session];
    const char *name = c->names.names[r->session];
    if (s->max_turn < 0 && r->turn != 0)
        return kv_err(e, "%s: line %lld: session \"%s\" starts with turn %d, expected turn 0", c->path,
                      (long long)line_no, name, r->turn);
    if (s->max_turn >= 0 && r->turn == 0)
        return kv_err(e, "%s: line %lld: session \"%s\" has turn 0 again (already at or before line %lld)", c->path,
                      (long long)line_no, name, (long long)s->last_line);
    if (s->max_turn >= 0 && r->turn > s->max_turn + 1)
        return kv_err(e, "%s: line %lld: session \"%s\" jumps to turn %d after turn %d (line %lld); turns must be consecutive",
                      c->path, (long long)line_no, name, r->turn, s->max_turn, (long long)s->last_line);
    if (r->has_arrival) {
        *key_ns = trace_ns_from_s(r->arrival_s, c->src->opt.time_scale);
        if (*key_ns < 0)
            return kv_err(e, "%s: line %lld: column arrival_s: value %.10g s × time_scale %g is out of range [0, %.10g] s",
                          c->path, (long long)line_no, r->arrival_s, c->src->opt.time_scale, TRACE_MAX_TIME_NS / 1e9);
        if (s->max_turn >= 0 && *key_ns < s->last_key_ns)
            return kv_err(e, "%s: line %lld: session \"%s\" turn %d: arrival_s %g is before the session's previous request (line %lld)",
                          c->path, (long long)line_no, name, r->turn, r->arrival_s, (long long)s->last_line);
        *timed = 1;
        c->rows_timed++;
    } else if (r->turn == 0) {
        *key_ns = trace_ns_from_s(trace_poisson_next_s(&c->poisson), c->src->opt.time_scale);
        if (*key_ns < 0)
            return kv_err(e, "%s: line %lld: Poisson session arrival past the time range", c->path, (long long)line_no);
        *timed = 1;
        c->rows_poisson++;
    } else {
        *key_ns = s->last_key_ns;
        *timed = 0;
        c->rows_closed++;
    }
    if (r->turn > s->max_turn) s->max_turn = r->turn;
    s->last_key_ns = *key_ns;
    s->last_line = line_no;
    return 0;
}

static void csv_reset(void *ctx)
{
    CsvTrace *c = ctx;
    for (size_t i = 0; i < c->names.n; i++) {
        c->ses[i].max_turn = -1;
        c->ses[i].last_key_ns = 0;
        c->ses[i].last_line = 0;
    }
    trace_poisson_init(&c->poisson, c->src->opt.seed, c->rate_per_s);
    if (c->rows_timed + c->rows_poisson + c->rows_closed > 0) { /* keep the last full scan's counts */
        c->scan_timed = c->rows_timed;
        c->scan_poisson = c->rows_poisson;
        c->scan_closed = c->rows_closed;
    }
    c->rows_timed = c->rows_poisson = c->rows_closed = 0;
}

static const TraceOrderOps csv_order_ops = {csv_parse, csv_step, csv_reset};

static int csv_next(void *impl, TraceRequest *out, KvErr *e)
{
    CsvTrace *c = impl;
    int64_t key, line_no;
    int timed;
    int r = trace_order_next(&c->order, &key, &timed, &line_no, e);
    if (r <= 0) return r;
    const CsvRow *row = &c->row;
    CsvSession *s = &c->ses[row->session];
    if (s->out_id < 0) s->out_id = c->next_out_id++;
    out->session = (uint64_t)s->out_id;
    out->session_id = c->names.names[row->session];
    out->turn = row->turn;
    out->arrival_ns = timed ? key : -1;
    out->think_ns = timed ? 0 : c->think_ns;
    out->new_input_tokens = row->new_tokens;
    out->history_tokens = row->hist_tokens;
    if (out->new_input_tokens == 0) { /* prefill at least one token; keep the full prompt's length */
        out->new_input_tokens = 1;
        if (out->history_tokens > 0) out->history_tokens--;
    }
    out->output_tokens = row->out_tokens > 0 ? row->out_tokens : 1;
    size_t whole = (size_t)((out->history_tokens + out->new_input_tokens) / TRACE_MOONCAKE_BLOCK_TOKENS);
    if (whole > row->n_ids) whole = row->n_ids;
    for (size_t i = 0; i < whole; i++) c->blk_names[i] = kv_block_hash(TRACE_HASH_ID_SPACE, row->ids[i]);
    out->prefix_blocks = whole ? c->blk_names : NULL;
    out->n_prefix_blocks = (int32_t)whole;
    out->prefix_block_tokens = TRACE_MOONCAKE_BLOCK_TOKENS;
    return 1;
}

static void csv_close(void *impl)
{
    CsvTrace *c = impl;
    trace_order_free(&c->order);
    trace_lines_close(&c->lines);
    trace_names_free(&c->names);
    free(c->ses);
    free(c->fields);
    free(c->row.ids);
    free(c->blk_names);
    free(c);
}

static const TraceBackend csv_backend = {"csv", csv_next, csv_close};

int trace_csv_open(TraceSource *s, KvErr *e)
{
    CsvTrace *c = calloc(1, sizeof *c);
    if (!c) return kv_err(e, "%s: out of memory", s->opt.source);
    c->src = s;
    c->path = s->opt.source;
    s->be = &csv_backend;
    s->impl = c;
    c->rate_per_s = s->opt.session_rate_per_s > 0 ? s->opt.session_rate_per_s : TRACE_DEFAULT_SESSION_RATE_PER_S;
    c->think_ns = trace_scale_ns(s->opt.think_ns, s->opt.time_scale);
    if (c->think_ns < 0 || c->think_ns > TRACE_MAX_THINK_NS)
        return kv_err(e, "%s: think time %g s × time_scale %g is out of range [0, %g] s", c->path,
                      (double)s->opt.think_ns / 1e9, s->opt.time_scale, TRACE_MAX_THINK_NS / 1e9);
    if (trace_lines_open(&c->lines, c->path, e) != 0) return -1;

    char *line = NULL;
    int r = trace_lines_read(&c->lines, &line, e);
    if (r < 0) return -1;
    if (r == 0 || trace_is_blank(line)) return kv_err(e, "%s: line 1: empty, expected a header row (session_id,turn,...)", c->path);
    /* count the header's fields on a copy, then split for real */
    char *copy = strdup(line);
    if (!copy) return kv_err(e, "%s: out of memory", c->path);
    int n = trace_csv_split(copy, NULL, 0);
    free(copy);
    if (n < 0) return kv_err(e, "%s: line 1: unterminated quoted field in the header", c->path);
    c->ncols = n;
    c->fields = calloc((size_t)n + 1, sizeof *c->fields);
    if (!c->fields) return kv_err(e, "%s: out of memory", c->path);
    trace_csv_split(line, c->fields, n);
    for (int k = 0; k < CSV_NCOL; k++) {
        c->col[k] = trace_csv_column(c->fields, n, csv_col_names[k]);
        if (c->col[k] == -2) return kv_err(e, "%s: line 1: column %s appears twice in the header", c->path, csv_col_names[k]);
        if (c->col[k] < 0 && k != CSV_ARRIVAL && k != CSV_HASH)
            return kv_err(e, "%s: line 1: the header has no column %s (required: session_id, turn, new_input_tokens, "
                          "output_tokens, history_tokens; optional: arrival_s, hash_ids)", c->path, csv_col_names[k]);
    }
    if (trace_order_start(&c->order, &c->lines, &csv_order_ops, c, e) != 0) return -1;

    const TraceOptions *o = &s->opt;
    char order[160];
    if (c->order.indexed)
        snprintf(order, sizeof order, "indexed (out of release order from line %lld)", (long long)c->order.first_unsorted_line);
    else
        snprintf(order, sizeof order, "streamed in file order");
    s->timed_rows = c->scan_timed;
    snprintf(s->describe, sizeof s->describe,
             "csv %s: %lld rows, %zu sessions; %lld timestamped, %lld session starts Poisson %g/s (seed %llu), "
             "%lld closed loop (think %g s); %s; time_scale %g",
             c->path, (long long)c->order.rows, c->names.n, (long long)c->scan_timed, (long long)c->scan_poisson,
             c->rate_per_s, (unsigned long long)o->seed, (long long)c->scan_closed, (double)c->think_ns / 1e9, order,
             o->time_scale);
    return 0;
}
