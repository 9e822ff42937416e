/* plot_csv.c — see plot_csv.h. The file is read once and split in place: each cell points into
 * the text (quoted cells are unquoted where they lie, the result is never longer). */
#include "results/plot_csv.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void pcsv_free(PlotCsv *t)
{
    free(t->text);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

/* one field starting at *p; returns it (NUL-terminated in place); *end_line set at the line's end */
static char *field(char **p, int *end_line)
{
    char *s = *p, *out = s, *start = s;
    *end_line = 0;
    if (*s != '"') { /* unquoted (nearly every cell): nothing moves, the delimiter is found by strcspn */
        s += strcspn(s, ",\n\r");
        if (*s == '\r') *s++ = '\0';
        if (*s == '\n' || !*s) *end_line = 1;
        if (*s) *s++ = '\0';
        *p = s;
        return start;
    }
    {
        s++;
        for (;;) {
            if (!*s) break;
            if (*s == '"') {
                if (s[1] == '"') {
                    *out++ = '"';
                    s += 2;
                    continue;
                }
                s++;
                break;
            }
            *out++ = *s++;
        }
    }
    while (*s && *s != ',' && *s != '\n' && *s != '\r') *out++ = *s++;
    if (*s == '\r') *s++ = '\0';
    if (*s == '\n' || !*s) *end_line = 1;
    if (*s) s++;
    *out = '\0';
    *p = s;
    return start;
}

int pcsv_read(PlotCsv *t, const char *path, KvErr *e)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    size_t len = 0;
    t->text = kv_read_file(path, &len, e);
    if (!t->text) return -1;
    size_t cap = 1024, n = 0;
    t->cells = malloc(cap * sizeof *t->cells);
    if (!t->cells) goto oom;
    char *p = t->text;
    int line = 0, w = 0;
    while (*p) {
        line++;
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) { /* an empty line: skipped */
            p += *p == '\r' ? 2 : 1;
            continue;
        }
        int k = 0, end = 0;
        while (!end) {
            if (n == cap) {
                cap *= 2;
                char **nc = realloc(t->cells, cap * sizeof *nc);
                if (!nc) goto oom;
                t->cells = nc;
            }
            t->cells[n++] = field(&p, &end);
            k++;
        }
        if (line == 1) w = k;
        else if (k != w) {
            kv_err(e, "%s: line %d: %d fields, the header has %d", path, line, k, w);
            pcsv_free(t);
            return -1;
        }
    }
    if (w == 0) {
        kv_err(e, "%s: empty (expected a header line)", path);
        pcsv_free(t);
        return -1;
    }
    t->ncols = w;
    t->nrows = (int)(n / (size_t)w) - 1;
    return 0;
oom:
    pcsv_free(t);
    return kv_err(e, "%s: out of memory", path);
}

int pcsv_col(const PlotCsv *t, const char *name)
{
    for (int c = 0; c < t->ncols; c++)
        if (!strcmp(t->cells[c], name)) return c;
    return -1;
}

int pcsv_cols(const PlotCsv *t, const char *const *names, int n, int *cols, KvErr *e)
{
    for (int i = 0; i < n; i++)
        if ((cols[i] = pcsv_col(t, names[i])) < 0) {
            char hdr[512] = "";
            size_t l = 0;
            for (int c = 0; c < t->ncols && l < sizeof hdr - 40; c++)
                l += (size_t)snprintf(hdr + l, sizeof hdr - l, "%s%s", c ? "," : "", t->cells[c]);
            return kv_err(e, "%s: no column '%s' (the header is %s)", t->path, names[i], hdr);
        }
    return 0;
}

const char *pcsv_cell(const PlotCsv *t, int r, int c) { return t->cells[(size_t)(r + 1) * (size_t)t->ncols + (size_t)c]; }

/* A plain decimal ([-]digits[.digits], the form the result files write) of at most 2^53 in its
 * digits read as the integer N over 10^f: both are exact doubles, so the one division is
 * correctly rounded — the value strtod returns for the same text. Anything else (an exponent, a
 * sign '+', inf, nan, too many digits): 0, and strtod reads it. */
static int exact_decimal(const char *s, double *v)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int neg = *s == '-', f = 0, digits = 0;
    s += neg;
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (n > (UINT64_C(1) << 53) / 10) return 0;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    if (!digits) return 0;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, f++) {
            if (n > (UINT64_C(1) << 53) / 10 || f == 22) return 0;
            n = n * 10 + (uint64_t)(*s - '0');
        }
        if (!f) return 0;
    }
    if (*s || n > (UINT64_C(1) << 53)) return 0;
    double x = (double)n / p10[f];
    *v = neg ? -x : x;
    return 1;
}

int pcsv_num(const PlotCsv *t, int r, int c, double *v, KvErr *e)
{
    const char *s = pcsv_cell(t, r, c);
    if (!*s) {
        *v = NAN;
        return 0;
    }
    if (exact_decimal(s, v)) return 0;
    char *end;
    *v = strtod(s, &end);
    if (*end || end == s)
        return kv_err(e, "%s: row %d, column %s: '%s' is not a number", t->path, r + 2, t->cells[c], s);
    return 0;
}
