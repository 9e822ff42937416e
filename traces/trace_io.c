/* trace_io.c — reading trace files: lines with byte offsets, CSV fields, strict numbers, a name map,
 * and TraceOrder, which delivers a row file in release order.
 *
 * Responsible for: the mechanics every file loader shares. TraceOrder makes one validating pass over
 * the data rows (the backend's parse + step callbacks see every row, so malformed rows fail at open);
 * if the timed keys are non-decreasing in file order it rewinds and streams the file (O(1) extra
 * memory), otherwise it makes a second pass that records (key, byte offset, line) per row — 24 bytes,
 * no row text — sorts by (key, offset) and reads each row back by offset (fseeko).
 * Not responsible for: what a row means (csv.c, vidur.c, mooncake.c).
 * Invariants: a closed-loop row's key is its predecessor's key and its offset is larger, so sorting by
 * (key, offset) keeps it after its predecessor; rows of equal key keep file order (the sort is total).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traces/trace_int.h"

/* ---------------------------------------------------------------- lines */

int trace_lines_open(TraceLines *l, const char *path, KvErr *e)
{
    memset(l, 0, sizeof *l);
    l->path = path;
    /* a FIFO, device or directory is refused at once (a trace is read twice and by offset: trace.h) */
    l->f = kv_fopen_regular(path, e);
    if (!l->f) return -1;
    return 0;
}

/* One line into l->buf (without the newline; grown as needed, at most TRACE_MAX_LINE_BYTES + 1).
 * Byte by byte from stdio's buffer, so that a line's length is known exactly even with NUL bytes. */
int trace_lines_read(TraceLines *l, char **line, KvErr *e)
{
    l->line_off = l->next_off;
    size_t n = 0, consumed = 0;
    int c = EOF, saw_nul = 0, over = 0, oom = 0;
    flockfile(l->f);
    for (;;) {
        c = getc_unlocked(l->f);
        if (c == EOF) break;
        consumed++;
        if (c == '\n') break;
        if (n == (size_t)TRACE_MAX_LINE_BYTES) {
            over = 1;
            break;
        }
        if (n + 2 > l->cap) { /* room for this byte and the NUL */
            size_t cap = l->cap ? l->cap * 2 : 4096;
            if (cap > (size_t)TRACE_MAX_LINE_BYTES + 1) cap = (size_t)TRACE_MAX_LINE_BYTES + 1;
            char *buf = realloc(l->buf, cap);
            if (!buf) {
                oom = 1;
                break;
            }
            l->buf = buf;
            l->cap = cap;
        }
        l->buf[n++] = (char)c;
        saw_nul |= c == '\0';
    }
    funlockfile(l->f);
    long long no = (long long)l->line_no + 1;
    if (oom) return kv_err(e, "%s: line %lld: out of memory", l->path, no);
    if (over) return kv_err(e, "%s: line %lld: longer than %d MiB (is it a trace file?)", l->path, no, TRACE_MAX_LINE_BYTES >> 20);
    if (c == EOF && ferror(l->f)) return kv_err(e, "%s: line %lld: read error: %s", l->path, no, strerror(errno));
    if (consumed == 0) return 0;
    if (!l->buf) {
        l->buf = malloc(64);
        if (!l->buf) return kv_err(e, "%s: line %lld: out of memory", l->path, no);
        l->cap = 64;
    }
    l->next_off += (int64_t)consumed;
    l->line_no++;
    if (saw_nul)
        return kv_err(e, "%s: line %lld: column %zu: a NUL byte (a trace is text)", l->path, no,
                      (size_t)((const char *)memchr(l->buf, '\0', n) - l->buf) + 1);
    while (n > 0 && l->buf[n - 1] == '\r') n--;
    l->buf[n] = '\0';
    *line = l->buf;
    return 1;
}

int trace_lines_seek(TraceLines *l, int64_t off, int64_t line_no, KvErr *e)
{
    if (fseeko(l->f, (off_t)off, SEEK_SET) != 0)
        return kv_err(e, "%s: cannot seek to byte %lld: %s", l->path, (long long)off, strerror(errno));
    l->next_off = off;
    l->line_no = line_no - 1;
    return 0;
}

void trace_lines_close(TraceLines *l)
{
    if (l->f) fclose(l->f);
    free(l->buf);
    memset(l, 0, sizeof *l);
}

int trace_err_range_i64(KvErr *e, const char *path, int64_t line_no, const char *what, int64_t v, int64_t lo, int64_t hi)
{
    return kv_err(e, "%s: line %lld: %s: value %lld out of range [%lld, %lld]", path, (long long)line_no, what,
                  (long long)v, (long long)lo, (long long)hi);
}

int trace_err_range(KvErr *e, const char *path, int64_t line_no, const char *what, double v, double lo, double hi)
{
    return kv_err(e, "%s: line %lld: %s: value %.10g out of range [%.10g, %.10g]", path, (long long)line_no, what, v, lo, hi);
}

int trace_check_tokens(KvErr *e, const char *path, int64_t line_no, const char *kind, const char *const names[3],
                       const int64_t v[3])
{
    char what[96];
    for (int k = 0; k < 3; k++) {
        if (!names[k] || (v[k] >= 0 && v[k] <= TRACE_MAX_TOKENS)) continue;
        snprintf(what, sizeof what, "%s %s", kind, names[k]);
        return trace_err_range_i64(e, path, line_no, what, v[k], 0, TRACE_MAX_TOKENS);
    }
    int64_t sum = v[0] + v[1] + v[2]; /* each <= 2^31: no overflow */
    if (sum <= TRACE_MAX_TOKENS) return 0;
    snprintf(what, sizeof what, "%s%s%s%s%s", names[0] ? names[0] : "", names[1] ? " + " : "", names[1] ? names[1] : "",
             names[2] ? " + " : "", names[2] ? names[2] : "");
    return trace_err_range_i64(e, path, line_no, what, sum, 0, TRACE_MAX_TOKENS);
}

/* ---------------------------------------------------------------- CSV fields, numbers */

static char *io_trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

int trace_csv_split(char *line, char **fields, int max_fields)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *start = p, *w = p;
        int quoted = 0;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '"') {
            quoted = 1;
            p++;
            start = w = p;
            for (;;) {
                if (*p == '\0') return -1;
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p == ' ' || *p == '\t') p++;
            if (*p != ',' && *p != '\0') return -1; /* text after a closing quote */
        } else {
            p = start;
            while (*p != ',' && *p != '\0') p++;
            w = p;
        }
        char sep = *p;
        *w = '\0';
        if (n < max_fields) fields[n] = quoted ? start : io_trim(start);
        n++;
        if (sep == '\0') break;
        p++;
    }
    return n;
}

int trace_is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

int trace_parse_count(const char *s, int64_t *out)
{
    while (*s == ' ' || *s == '\t') s++;
    if (*s < '0' || *s > '9') return -1;
    int64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    while (*s == ' ' || *s == '\t') s++;
    if (*s) return -1;
    *out = v;
    return 0;
}

int trace_parse_seconds(const char *s, double *out)
{
    while (*s == ' ' || *s == '\t') s++;
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return -1; /* no sign, no "inf"/"nan" words */
    for (const char *p = s; *p; p++) /* decimal only: strtod would also take hex ("0x10") */
        if (*p == 'x' || *p == 'X' || *p == 'p' || *p == 'P') return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !(v >= 0.0) || !isfinite(v)) return -1; /* the range: the caller */
    while (*end == ' ' || *end == '\t') end++;
    if (*end) return -1;
    *out = v;
    return 0;
}

int trace_csv_column(char **fields, int n, const char *name)
{
    int at = -1;
    for (int i = 0; i < n; i++) {
        const char *f = fields[i];
        if (i == 0 && (unsigned char)f[0] == 0xEF && (unsigned char)f[1] == 0xBB && (unsigned char)f[2] == 0xBF)
            f += 3; /* UTF-8 byte order mark */
        if (strcmp(f, name) == 0) {
            if (at >= 0) return -2;
            at = i;
        }
    }
    return at;
}

/* ---------------------------------------------------------------- names */

static uint64_t io_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int io_names_grow(TraceNames *m)
{
    size_t cap = m->slots_cap ? m->slots_cap * 2 : 64;
    int64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->n; i++) {
        size_t j = io_hash(m->names[i]) & (cap - 1);
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = (int64_t)i + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->slots_cap = cap;
    return 0;
}

int64_t trace_names_intern(TraceNames *m, const char *name, int *is_new)
{
    *is_new = 0;
    if ((m->n + 1) * 2 > m->slots_cap && io_names_grow(m) != 0) return -1;
    size_t j = io_hash(name) & (m->slots_cap - 1);
    while (m->slots[j]) {
        int64_t idx = m->slots[j] - 1;
        if (strcmp(m->names[idx], name) == 0) return idx;
        j = (j + 1) & (m->slots_cap - 1);
    }
    if (m->n == m->names_cap) {
        size_t cap = m->names_cap ? m->names_cap * 2 : 64;
        char **names = realloc(m->names, cap * sizeof *names);
        if (!names) return -1;
        m->names = names;
        m->names_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    m->names[m->n] = copy;
    m->slots[j] = (int64_t)m->n + 1;
    *is_new = 1;
    return (int64_t)m->n++;
}

void trace_names_free(TraceNames *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->names[i]);
    free(m->names);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- release order */

static int io_entry_cmp(const void *a, const void *b)
{
    const TraceOrderEntry *x = a, *y = b;
    if (x->key_ns != y->key_ns) return x->key_ns < y->key_ns ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* One pass over all data rows: parse + step each; note the first row whose timed key goes back;
 * with build, record an index entry per row. */
static int io_order_scan(TraceOrder *o, int build, KvErr *e)
{
    o->ops->reset(o->ctx);
    if (trace_lines_seek(o->lines, o->data_off, o->data_line, e) != 0) return -1;
    o->rows = 0;
    o->first_unsorted_line = 0;
    o->n = 0;
    int64_t last_timed = INT64_MIN;
    for (;;) {
        char *line;
        int r = trace_lines_read(o->lines, &line, e);
        if (r < 0) return -1;
        if (r == 0) break;
        int64_t line_no = o->lines->line_no, off = o->lines->line_off;
        r = o->ops->parse(o->ctx, line, line_no, e);
        if (r < 0) return -1;
        if (r == 0) continue;
        int64_t key;
        int timed;
        if (o->ops->step(o->ctx, line_no, &key, &timed, e) != 0) return -1;
        o->rows++;
        if (timed) {
            if (key < last_timed && !o->first_unsorted_line) o->first_unsorted_line = line_no;
            last_timed = key;
        }
        if (build) {
            if (o->n == o->cap) {
                size_t cap = o->cap ? o->cap * 2 : 1024;
                TraceOrderEntry *ent = realloc(o->ent, cap * sizeof *ent);
                if (!ent) return kv_err(e, "%s: out of memory indexing %zu rows", o->lines->path, o->n);
                o->ent = ent;
                o->cap = cap;
            }
            o->ent[o->n++] = (TraceOrderEntry){key, off, line_no * 2 + (timed ? 1 : 0)};
        }
    }
    return 0;
}

int trace_order_start(TraceOrder *o, TraceLines *l, const TraceOrderOps *ops, void *ctx, KvErr *e)
{
    memset(o, 0, sizeof *o);
    o->lines = l;
    o->ops = ops;
    o->ctx = ctx;
    o->data_off = l->next_off;
    o->data_line = l->line_no + 1;
    if (io_order_scan(o, 0, e) != 0) return -1;
    if (o->first_unsorted_line) {
        int64_t first = o->first_unsorted_line;
        if (io_order_scan(o, 1, e) != 0) return -1;
        o->first_unsorted_line = first;
        qsort(o->ent, o->n, sizeof *o->ent, io_entry_cmp);
        o->indexed = 1;
    }
    o->ops->reset(o->ctx);
    return trace_lines_seek(l, o->data_off, o->data_line, e);
}

int trace_order_next(TraceOrder *o, int64_t *key_ns, int *timed, int64_t *line_no, KvErr *e)
{
    char *line;
    if (!o->indexed) {
        for (;;) {
            int r = trace_lines_read(o->lines, &line, e);
            if (r <= 0) return r;
            r = o->ops->parse(o->ctx, line, o->lines->line_no, e);
            if (r < 0) return -1;
            if (r == 0) continue;
            *line_no = o->lines->line_no;
            return o->ops->step(o->ctx, *line_no, key_ns, timed, e) == 0 ? 1 : -1;
        }
    }
    if (o->pos == o->n) return 0;
    const TraceOrderEntry *en = &o->ent[o->pos++];
    *key_ns = en->key_ns;
    *timed = (int)(en->line_timed & 1);
    *line_no = en->line_timed >> 1;
    if (trace_lines_seek(o->lines, en->offset, *line_no, e) != 0) return -1;
    int r = trace_lines_read(o->lines, &line, e);
    if (r < 0) return -1;
    if (r == 0) return kv_err(e, "%s: line %lld: the file changed while it was being read", o->lines->path, (long long)*line_no);
    r = o->ops->parse(o->ctx, line, *line_no, e);
    if (r < 0) return -1;
    if (r == 0) return kv_err(e, "%s: line %lld: the file changed while it was being read", o->lines->path, (long long)*line_no);
    return 1;
}

void trace_order_free(TraceOrder *o)
{
    free(o->ent);
    o->ent = NULL;
    o->n = o->cap = o->pos = 0;
}
