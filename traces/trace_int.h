/* trace_int.h — internals shared by the trace loaders and generators (not a public API).
 *
 * Responsible for: the TraceSource object and its backend slots; a deterministic random stream
 * (xoshiro256** seeded by splitmix64) with samplers built only from IEEE-exact operations (+ - * /,
 * sqrt, floor, frexp, ldexp) and our own ln/exp, so the same seed gives the same stream on every
 * machine and libm; a line reader that knows each line's byte offset; a CSV field splitter and strict
 * number parsers; a name → dense index map; and TraceOrder, which turns a row file into a stream in
 * release order (streamed when the file already is, else via an offset index).
 * Not responsible for: any format's columns or fields (csv.c, vidur.c, mooncake.c) or generator
 * parameters (gen.c).
 * Invariants: TraceOrder returns each data row exactly once; in indexed mode in (key, byte offset)
 * order, in stream mode in file order after the scan proved the timed keys non-decreasing.
 */
#ifndef KV_TRACE_INT_H
#define KV_TRACE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "traces/trace.h"

/* ---- deterministic random numbers ---- */
/* Mooncake's hash ids already name a block with everything before it: named as the content of a
 * chain of one under this parent (sim/base/blockhash.h), the JSONL and the CSV hash_ids column give
 * the same names, and they cannot meet a chain another source builds */
#define TRACE_HASH_ID_SPACE 0x4D4F4F4E43414B45ull /* "MOONCAKE" */

typedef struct TraceRng {
    uint64_t s[4];
    int has_spare;
    double spare;
} TraceRng;

/* Seed one stream; different `stream` values give independent streams from one seed. */
void trace_rng_seed(TraceRng *r, uint64_t seed, uint64_t stream);
uint64_t trace_rng_u64(TraceRng *r);
double trace_rng_uniform(TraceRng *r);                 /* in (0, 1), 53-bit */
double trace_rng_normal(TraceRng *r);                  /* standard normal (Marsaglia polar) */
double trace_rng_exponential(TraceRng *r, double rate); /* mean 1/rate */
double trace_rng_lognormal(TraceRng *r, double mu, double sigma); /* exp(mu + sigma·N) */
/* ln and exp from + - * / only (within a few ulp of libm; identical everywhere). */
double trace_ln(double x);
double trace_exp(double x);
/* A sampled real rounded to a token count in [lo, hi] (NaN and below lo give lo). */
int64_t trace_tokens(double x, int64_t lo, int64_t hi);
/* seconds × time_scale → ns, rounded; -1 if negative, not finite or past TRACE_MAX_TIME_NS. */
int64_t trace_ns_from_s(double s, double time_scale);
/* ns × time_scale (exact when time_scale == 1); -1 past TRACE_MAX_TIME_NS. */
int64_t trace_scale_ns(int64_t ns, double time_scale);

/* A Poisson process of session starts, in seconds from 0 (first start after one gap). */
typedef struct TracePoisson {
    TraceRng rng;
    double rate_per_s;
    double t_s;
} TracePoisson;
void trace_poisson_init(TracePoisson *p, uint64_t seed, double rate_per_s);
double trace_poisson_next_s(TracePoisson *p);

/* A gamma renewal process of requests, in seconds from 0 (first arrival after one gap): gaps are
 * Gamma(shape k, scale 1/(rate·k)), mean 1/rate, coefficient of variation 1/sqrt(k); k = 1 is the
 * Poisson process (exactly trace_rng_exponential's stream). */
typedef struct TraceGamma {
    TraceRng rng;
    double rate_per_s, shape;
    double t_s;
} TraceGamma;
void trace_gamma_init(TraceGamma *g, uint64_t seed, double rate_per_s, double shape);
double trace_gamma_next_s(TraceGamma *g);
/* Gamma(shape, 1) by Marsaglia and Tsang (shape < 1: Gamma(shape + 1)·U^(1/shape)) */
double trace_rng_gamma(TraceRng *r, double shape);

/* ---- the source object ---- */
typedef struct TraceBackend {
    const char *format; /* "csv", "mooncake", "vidur", "generator" */
    int (*next)(void *impl, TraceRequest *out, KvErr *e); /* 1, 0 (end), -1 */
    void (*close)(void *impl);
} TraceBackend;

struct TraceSource {
    TraceOptions opt;         /* validated copy: time_scale > 0; source/format point at copies */
    char *source_copy;
    char *format_copy;
    const TraceBackend *be;
    void *impl;
    char describe[1024];
    int64_t max_requests;     /* effective limit (0 = none) */
    int64_t emitted;
    int64_t truncated;        /* requests cut by max_context or a generator's own cap */
    int64_t timed_rows;       /* rows whose arrival time the file itself gives (backends set it at open; generators 0) */
    int backend_cut;          /* set by a backend when the request it just returned was cut */
    int64_t last_arrival_ns;  /* for the order check */
    int64_t think_total_ns;   /* think time of every closed-loop request so far (the time bound) */
    int failed;               /* sticky: after an error every call fails again */
    TraceGamma req_arrivals;  /* request_rate_per_s > 0: the requests' arrival process */
    KvErr err;
};

/* Backend constructors: fill s->be, s->impl and s->describe; -1 + message on failure (the file
 * formats' trace_NAME_open are declared by their rows in trace.c). */
int trace_gen_open(TraceSource *s, int gen_index, KvErr *e);
int trace_gen_find(const char *name); /* index or -1 */

/* ---- lines with offsets ---- */
typedef struct TraceLines {
    FILE *f;
    const char *path;   /* borrowed, for messages */
    char *buf;
    size_t cap;
    int64_t line_no;    /* of the line last read (1-based) */
    int64_t line_off;   /* byte offset where that line starts */
    int64_t next_off;   /* byte offset after it */
} TraceLines;
/* Refuses anything but a regular file (devices, FIFOs, directories), without blocking on a FIFO. */
int trace_lines_open(TraceLines *l, const char *path, KvErr *e);
/* 1: *line is the next line without its "\n" / "\r\n" (NUL-terminated, writable, valid until the
 * next call); 0: end of file; -1: read error, a line over TRACE_MAX_LINE_BYTES, or a NUL byte. */
int trace_lines_read(TraceLines *l, char **line, KvErr *e);
/* Position so that the next read returns the line starting at off, numbered line_no. */
int trace_lines_seek(TraceLines *l, int64_t off, int64_t line_no, KvErr *e);
void trace_lines_close(TraceLines *l);

/* "PATH: line N: WHAT: value V out of range [LO, HI]" (WHAT: "column new_input_tokens", "field
 * timestamp"); returns -1. */
int trace_err_range(KvErr *e, const char *path, int64_t line_no, const char *what, double v, double lo, double hi);
int trace_err_range_i64(KvErr *e, const char *path, int64_t line_no, const char *what, int64_t v, int64_t lo, int64_t hi);
/* Token counts of one row (new input, output, history): each and their sum in [0, TRACE_MAX_TOKENS];
 * names[] are the columns/fields as the file calls them. 0 ok, -1 + message. */
int trace_check_tokens(KvErr *e, const char *path, int64_t line_no, const char *kind, const char *const names[3],
                       const int64_t v[3]);

/* ---- CSV fields and numbers ---- */
/* Split line in place at commas (RFC 4180 quotes, "" inside quotes). Stores up to max_fields
 * pointers; returns the number of fields found (may exceed max_fields), -1 on an unterminated quote.
 * Unquoted fields are trimmed of spaces and tabs. */
int trace_csv_split(char *line, char **fields, int max_fields);
int trace_is_blank(const char *s);
/* Strict non-negative decimal integer (surrounding spaces allowed); 0 ok, -1 bad. */
int trace_parse_count(const char *s, int64_t *out);
/* Non-negative finite decimal number; 0 ok, -1 bad. */
int trace_parse_seconds(const char *s, double *out);
/* Header lookup: index of the column named `name` (exact, after trimming), -1 if absent, -2 if it
 * appears twice. */
int trace_csv_column(char **fields, int n, const char *name);

/* ---- names → dense indices (open addressing, O(1) expected) ---- */
typedef struct TraceNames {
    char **names;      /* by index */
    int64_t *slots;    /* index + 1, 0 = empty */
    size_t n, names_cap, slots_cap;
} TraceNames;
/* Index of name, adding it if new (*is_new set); -1 on out of memory. */
int64_t trace_names_intern(TraceNames *m, const char *name, int *is_new);
void trace_names_free(TraceNames *m);

/* ---- a row file in release order ---- */
typedef struct TraceOrderOps {
    /* Parse one data line into the backend's current row. 1: a row, 0: not a row (blank), -1: error. */
    int (*parse)(void *ctx, char *line, int64_t line_no, KvErr *e);
    /* Advance the ordering state with the row just parsed: its release key (ns) and whether it is
     * timed (its own arrival) or closed loop (key = its predecessor's key, ordering only). */
    int (*step)(void *ctx, int64_t line_no, int64_t *key_ns, int *timed, KvErr *e);
    /* Back to the state before the first row (sessions, random streams). */
    void (*reset)(void *ctx);
} TraceOrderOps;

typedef struct TraceOrderEntry {
    int64_t key_ns;
    int64_t offset;
    int64_t line_timed; /* line_no * 2 + timed */
} TraceOrderEntry;

typedef struct TraceOrder {
    TraceLines *lines;
    const TraceOrderOps *ops;
    void *ctx;
    int64_t data_off, data_line; /* where the data rows start (after the header) */
    int64_t rows;                /* data rows in the file */
    int64_t first_unsorted_line; /* 0 when in release order */
    int indexed;
    TraceOrderEntry *ent;
    size_t n, cap, pos;
} TraceOrder;

/* Scan the rows after the lines' current position (validating all of them, O(rows)); build the index
 * when the timed keys are not in order; leave the order ready for trace_order_next. */
int trace_order_start(TraceOrder *o, TraceLines *l, const TraceOrderOps *ops, void *ctx, KvErr *e);
/* Next row in release order, parsed into the backend's row. 1, 0 (end), -1. */
int trace_order_next(TraceOrder *o, int64_t *key_ns, int *timed, int64_t *line_no, KvErr *e);
void trace_order_free(TraceOrder *o);

#endif
