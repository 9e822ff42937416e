/* cost.c — dense cost tables: grid validation, monotone envelope, multilinear interpolation and
 * counted linear extrapolation. See cost.h for the rules. Loading from a store opens it
 * read-only and validates every point of every run it reads (store_check_run), so a store edited
 * by hand is refused with the file, run, op and field rather than read as something else. */
#include "sim/cost/cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost/store.h"

void cost_model_init(CostModel *cm, const char *device, const char *model, const char *dtype, int tp)
{
    memset(cm, 0, sizeof *cm);
    snprintf(cm->device, sizeof cm->device, "%s", device ? device : "");
    snprintf(cm->model, sizeof cm->model, "%s", model ? model : "");
    snprintf(cm->dtype, sizeof cm->dtype, "%s", dtype ? dtype : "");
    cm->tp = tp;
}

static void curve_free(CostCurve *c)
{
    for (int d = 0; d < COST_MAX_DIM; d++) free(c->axis[d]);
    free(c->y);
    memset(c, 0, sizeof *c);
}

void cost_model_free(CostModel *cm)
{
    for (int i = 0; i < OP_COUNT; i++) curve_free(&cm->c[i]);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* sorted unique values of parameter d over the points; returns count. A grid repeats a few values
 * many times: each is looked up in the sorted values found so far (inserted when new), a sort of
 * every point's value only when the values found pass 256 */
static int unique_axis(const CostPoint *pts, size_t n, int d, int64_t **out)
{
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return -1;
    size_t k = 0, i = 0;
    for (; i < n && k <= 256; i++) {
        int64_t x = pts[i].p[d];
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (v[mid] < x) lo = mid + 1;
            else hi = mid;
        }
        if (lo < k && v[lo] == x) continue;
        memmove(v + lo + 1, v + lo, (k - lo) * sizeof *v);
        v[lo] = x;
        k++;
    }
    if (i < n) { /* many distinct values: sort them all */
        for (i = 0; i < n; i++) v[i] = pts[i].p[d];
        qsort(v, n, sizeof *v, cmp_i64);
        k = 0;
        for (i = 0; i < n; i++)
            if (k == 0 || v[k - 1] != v[i]) v[k++] = v[i];
    }
    *out = v;
    return (int)k;
}

static int axis_index(const int64_t *ax, int n, int64_t x)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (ax[mid] == x) return mid;
        if (ax[mid] < x) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int cost_model_set_op(CostModel *cm, CostOp op, const CostPoint *pts, size_t n, int64_t run_id,
                      const char *backend, KvErr *e)
{
    if ((unsigned)op >= OP_COUNT) return kv_err(e, "cost model: op %d out of range", (int)op);
    const char *name = cost_op_name(op);
    if (n == 0) return kv_err(e, "cost model: op %s: no points", name);
    CostCurve c = {0};
    c.ndim = cost_op_nparams(op);
    size_t cells = 1;
    for (int d = 0; d < COST_MAX_DIM; d++) {
        if (d < c.ndim) {
            c.n[d] = unique_axis(pts, n, d, &c.axis[d]);
            if (c.n[d] < 0) {
                curve_free(&c);
                return kv_err(e, "cost model: out of memory");
            }
        } else {
            c.n[d] = 1;
            c.axis[d] = calloc(1, sizeof(int64_t));
        }
        cells *= (size_t)c.n[d];
    }
    c.y = malloc(cells * sizeof *c.y);
    char *seen = calloc(cells, 1);
    if (!c.y || !seen) {
        free(seen);
        curve_free(&c);
        return kv_err(e, "cost model: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t idx = 0;
        for (int d = 0; d < COST_MAX_DIM; d++) {
            int k = d < c.ndim ? axis_index(c.axis[d], c.n[d], pts[i].p[d]) : 0;
            idx = idx * (size_t)c.n[d] + (size_t)k;
        }
        if (seen[idx]) {
            free(seen);
            curve_free(&c);
            return kv_err(e, "cost model: op %s: duplicate point (%lld, %lld, %lld)", name,
                          (long long)pts[i].p[0], (long long)pts[i].p[1], (long long)pts[i].p[2]);
        }
        if (!(pts[i].median_ns >= 0)) {
            free(seen);
            curve_free(&c);
            return kv_err(e, "cost model: op %s: point (%lld, %lld, %lld) has invalid time %g ns", name,
                          (long long)pts[i].p[0], (long long)pts[i].p[1], (long long)pts[i].p[2], pts[i].median_ns);
        }
        seen[idx] = 1;
        c.y[idx] = pts[i].median_ns;
    }
    for (size_t idx = 0; idx < cells; idx++)
        if (!seen[idx]) {
            size_t r = idx;
            int64_t coord[COST_MAX_DIM];
            for (int d = COST_MAX_DIM - 1; d >= 0; d--) {
                coord[d] = c.axis[d][r % (size_t)c.n[d]];
                r /= (size_t)c.n[d];
            }
            free(seen);
            curve_free(&c);
            return kv_err(e, "cost model: op %s: points do not form a full grid: (%lld, %lld, %lld) is missing", name,
                          (long long)coord[0], (long long)coord[1], (long long)coord[2]);
        }
    free(seen);
    /* monotone envelope: running max along each axis */
    size_t stride[COST_MAX_DIM];
    stride[COST_MAX_DIM - 1] = 1;
    for (int d = COST_MAX_DIM - 2; d >= 0; d--) stride[d] = stride[d + 1] * (size_t)c.n[d + 1];
    int mono = cost_op_monotone_axes(op);
    for (int d = 0; d < c.ndim; d++)
        for (size_t idx = 0; idx < cells && (mono >> d & 1); idx++) {
            size_t k = (idx / stride[d]) % (size_t)c.n[d];
            if (k == 0) continue;
            double prev = c.y[idx - stride[d]];
            if (c.y[idx] < prev) {
                c.y[idx] = prev;
                cm->monotone_fixes++;
            }
        }
    c.present = 1;
    c.run_id = run_id;
    snprintf(c.backend, sizeof c.backend, "%s", backend ? backend : "");
    curve_free(&cm->c[op]);
    cm->c[op] = c;
    return 0;
}

/* bracket x on an axis: lower index i and weight w so value = (1-w)·y[i] + w·y[i+1];
 * with a single point, i = 0 and w = 0. Returns 1 when x is outside the axis. */
static int bracket(const int64_t *ax, int n, int64_t x, int *i, double *w)
{
    if (n == 1) {
        *i = 0;
        *w = 0;
        return x != ax[0];
    }
    int out = 0, lo;
    if (x <= ax[0]) {
        lo = 0;
        out = x < ax[0];
    } else if (x >= ax[n - 1]) {
        lo = n - 2;
        out = x > ax[n - 1];
    } else {
        int a = 0, b = n - 1; /* ax[a] < x < ax[b] */
        while (b - a > 1) {
            int m = (a + b) / 2;
            if (ax[m] <= x) a = m;
            else b = m;
        }
        lo = a;
    }
    *i = lo;
    *w = (double)(x - ax[lo]) / (double)(ax[lo + 1] - ax[lo]);
    return out;
}

/* the reference lookup: binary search on every axis and the generic loop over the 2^nd corners (the
 * fast path below must return the same double; tests compare them) */
double cost_lookup_ref_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    CostCurve *c = &cm->c[op];
    cm->lookups[op]++;
    if (!c->present) return 0;
    int64_t x[COST_MAX_DIM] = {p1, p2, p3};
    int lo[COST_MAX_DIM] = {0};
    double w[COST_MAX_DIM] = {0};
    int out = 0, nd = c->ndim;
    for (int d = 0; d < nd; d++) out |= bracket(c->axis[d], c->n[d], x[d], &lo[d], &w[d]);
    if (out) cm->extrapolations[op]++;
    /* multilinear over the 2^nd corners */
    double sum = 0;
    for (int corner = 0; corner < (1 << nd); corner++) {
        double wt = 1;
        size_t idx = 0;
        for (int d = 0; d < COST_MAX_DIM; d++) {
            int k = 0;
            if (d < nd && c->n[d] > 1) {
                int up = (corner >> d) & 1;
                k = lo[d] + up;
                wt *= up ? w[d] : 1 - w[d];
            } else if (d < nd && ((corner >> d) & 1)) {
                wt = 0; /* single-point axis: only the lower corner counts */
            }
            idx = idx * (size_t)c->n[d] + (size_t)k;
        }
        if (wt != 0) sum += wt * c->y[idx];
    }
    return sum > 0 ? sum : 0;
}


/* bracket() with a remembered segment: *lo holds the caller's last segment on this axis; when x is
 * still inside it the binary search is skipped. Same lower index and weight as bracket(). */
static inline int bracket_hint(const int64_t *ax, int n, int64_t x, int *lo, double *w)
{
    if (n == 1) {
        *lo = 0;
        *w = 0;
        return x != ax[0];
    }
    int out = 0, i;
    if (x <= ax[0]) {
        i = 0;
        out = x < ax[0];
    } else if (x >= ax[n - 1]) {
        i = n - 2;
        out = x > ax[n - 1];
    } else {
        i = *lo;
        if (i < 0 || i > n - 2 || ax[i] > x || x >= ax[i + 1]) {
            int a = 0, b = n - 1; /* ax[a] < x < ax[b] */
            while (b - a > 1) {
                int m = (a + b) / 2;
                if (ax[m] <= x) a = m;
                else b = m;
            }
            i = a;
        }
    }
    *lo = i;
    *w = (double)(x - ax[i]) / (double)(ax[i + 1] - ax[i]);
    return out;
}

/* The same sum as cost_lookup_ref_ns, term by term: a corner's weight is the product, left to
 * right over the axes, of w or 1 − w on each axis with more than one point (a factor 1 elsewhere,
 * which changes no bit), corners above a single-point axis skipped, corners added in the same
 * order, zero weights skipped. */
double cost_lookup_hint_ns(CostModel *cm, CostOp op, CostHint *h, int64_t p1, int64_t p2, int64_t p3)
{
    CostCurve *c = &cm->c[op];
    cm->lookups[op]++;
    if (!c->present) return 0;
    CostHint local = {{0, 0, 0}};
    if (!h) h = &local;
    if (c->ndim == 1) {
        double w;
        if (bracket_hint(c->axis[0], c->n[0], p1, &h->lo[0], &w)) cm->extrapolations[op]++;
        int lo = h->lo[0];
        double sum = 0;
        if (c->n[0] == 1) {
            sum += c->y[0];
        } else {
            double a = 1 - w;
            if (a != 0) sum += a * c->y[lo];
            if (w != 0) sum += w * c->y[lo + 1];
        }
        return sum > 0 ? sum : 0;
    }
    if (c->ndim == 2) { /* the four corners written out (the third axis has one point: factor 1) */
        double w0, w1;
        int out2 = bracket_hint(c->axis[0], c->n[0], p1, &h->lo[0], &w0);
        out2 |= bracket_hint(c->axis[1], c->n[1], p2, &h->lo[1], &w1);
        h->lo[2] = 0;
        if (out2) cm->extrapolations[op]++;
        size_t n1 = (size_t)c->n[1];
        const double *y = c->y + (size_t)h->lo[0] * n1 + (size_t)h->lo[1];
        return cost_corners2(y, n1, c->n[0] > 1, c->n[1] > 1, w0, w1);
    }
    int64_t x[COST_MAX_DIM] = {p1, p2, p3};
    double f[COST_MAX_DIM][2];
    int m[COST_MAX_DIM], out = 0, nd = c->ndim;
    for (int d = 0; d < COST_MAX_DIM; d++) {
        double w = 0;
        if (d < nd) out |= bracket_hint(c->axis[d], c->n[d], x[d], &h->lo[d], &w);
        else h->lo[d] = 0;
        m[d] = d < nd && c->n[d] > 1 ? 2 : 1;
        f[d][0] = m[d] == 2 ? 1 - w : 1;
        f[d][1] = w;
    }
    if (out) cm->extrapolations[op]++;
    size_t n1 = (size_t)c->n[1], n2 = (size_t)c->n[2];
    double sum = 0;
    for (int corner = 0; corner < (1 << nd); corner++) {
        int u0 = corner & 1, u1 = corner >> 1 & 1, u2 = corner >> 2 & 1;
        if (u0 >= m[0] || u1 >= m[1] || u2 >= m[2]) continue;
        double wt = f[0][u0] * f[1][u1] * f[2][u2];
        size_t idx = ((size_t)(h->lo[0] + u0) * n1 + (size_t)(h->lo[1] + u1)) * n2 + (size_t)(h->lo[2] + u2);
        if (wt != 0) sum += wt * c->y[idx];
    }
    return sum > 0 ? sum : 0;
}

void cost_line_begin(CostLine *ln, CostModel *cm, CostOp op, CostHint *h, int64_t p1)
{
    CostCurve *c = &cm->c[op];
    *ln = (CostLine){.cm = cm, .op = op, .h = h, .p1 = p1, .x_lo = 1, .x_hi = 0};
    if (!c->present) return; /* mode 0: counted, 0 ns (as the lookup) */
    if (c->ndim != 2) {
        ln->mode = 2;
        return;
    }
    ln->mode = 1; /* (modes 0 and 2 keep the empty p2 range: every call takes cost_line_slow_ns) */
    int lo0 = h ? h->lo[0] : 0;
    ln->out0 = bracket_hint(c->axis[0], c->n[0], p1, &lo0, &ln->w0);
    if (h) h->lo[0] = lo0;
    ln->m0 = c->n[0] > 1;
    ln->m1 = c->n[1] > 1;
    ln->n1 = (size_t)c->n[1];
    ln->row = ln->y = c->y + (size_t)lo0 * ln->n1; /* axis 1's segment: line_seek */
    /* the p2 range stays empty: the first call seeks */
}

/* bracket_hint on axis 1 and the range of p2 that gives the same segment and extrapolation flag:
 * below the first point (extrapolating), [ax[i], ax[i+1]) for an inner segment, [ax[n-2], ax[n-1]]
 * for the last, above the last point (extrapolating); one point: below, at, above it */
static void line_seek(CostLine *ln, int64_t p2)
{
    CostCurve *c = &ln->cm->c[ln->op];
    const int64_t *ax = c->axis[1];
    int n = c->n[1], lo1 = ln->h ? ln->h->lo[1] : 0;
    double w;
    int out1 = bracket_hint(ax, n, p2, &lo1, &w);
    if (ln->h) ln->h->lo[1] = lo1;
    ln->y = ln->row + lo1;
    ln->out = ln->out0 | out1;
    ln->a1 = ax[lo1];
    ln->den1 = ln->m1 ? (double)(ax[lo1 + 1] - ax[lo1]) : 1;
    ln->fast = 0;
    if (ln->m0 && ln->m1) {
        const double *y = ln->y;
        ln->f00 = 1 - ln->w0;
        ln->c00 = y[0];
        ln->c10 = y[ln->n1];
        ln->c01 = y[1];
        ln->c11 = y[ln->n1 + 1];
        ln->fast = isfinite(ln->c00) && isfinite(ln->c10) && isfinite(ln->c01) && isfinite(ln->c11);
    }
    int64_t first = ax[0], last = ax[n - 1];
    if (p2 < first) {
        ln->x_lo = INT64_MIN;
        ln->x_hi = first - 1;
    } else if (p2 > last) {
        ln->x_lo = last + 1;
        ln->x_hi = INT64_MAX;
    } else if (n == 1) {
        ln->x_lo = ln->x_hi = first;
    } else {
        ln->x_lo = ax[lo1];
        ln->x_hi = lo1 == n - 2 ? last : ax[lo1 + 1] - 1;
    }
}

double cost_line_slow_ns(CostLine *ln, int64_t p2)
{
    if (ln->mode == 2) return cost_lookup_hint_ns(ln->cm, ln->op, ln->h, ln->p1, p2, 0);
    if (ln->mode == 0) {
        ln->lookups++;
        return 0;
    }
    line_seek(ln, p2);
    return cost_line_seg_ns(ln, p2);
}

void cost_line_end(CostLine *ln)
{
    ln->cm->lookups[ln->op] += ln->lookups;
    ln->cm->extrapolations[ln->op] += ln->extrapolations;
    ln->lookups = ln->extrapolations = 0;
    if (ln->h && ln->mode == 1) ln->h->lo[2] = 0;
}

double cost_lookup_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    return cost_lookup_hint_ns(cm, op, NULL, p1, p2, p3);
}

double cost_probe_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    uint64_t lookups = cm->lookups[op], extrapolations = cm->extrapolations[op];
    double v = cost_lookup_ns(cm, op, p1, p2, p3);
    cm->lookups[op] = lookups;
    cm->extrapolations[op] = extrapolations;
    return v;
}

uint64_t cost_extrapolations_total(const CostModel *cm)
{
    uint64_t s = 0;
    for (int i = 0; i < OP_COUNT; i++) s += cm->extrapolations[i];
    return s;
}

/* ---- loading from a store ---- */

typedef struct {
    char *buf;
    size_t len, cap;
} StrBuf;

static int list_run(void *ctx, const StoreRunMeta *r)
{
    StrBuf *s = ctx;
    char line[400];
    int k = snprintf(line, sizeof line, "\n  run %lld: %s %s %s tp%d (%s)", (long long)r->id, r->device,
                     r->model[0] ? r->model : "(io)", r->dtype, r->tp, r->backend);
    if (s->len + (size_t)k + 1 < s->cap) {
        memcpy(s->buf + s->len, line, (size_t)k + 1);
        s->len += (size_t)k;
    }
    return 0;
}

int cost_model_load_db(CostModel *cm, const char *db_path, const char *device, const char *model,
                       const char *dtype, int tp, KvErr *e)
{
    cost_model_init(cm, device, model, dtype, tp);
    CostStore st;
    if (store_open_costs(&st, db_path, e) != 0) return -1;
    int found = 0;
    int64_t runs[OP_COUNT];
    int nruns = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        int io = cost_op_is_io((CostOp)op);
        int64_t run = 0;
        if (store_pick_run(&st, device, io ? "" : model, dtype, io ? 1 : tp, (CostOp)op, &run, e) != 0) goto fail;
        if (!run) continue;
        int seen = 0;
        for (int i = 0; i < nruns; i++) seen |= runs[i] == run;
        /* every point of a run we read is validated as import validates it, whatever its op */
        if (!seen && store_check_run(&st, run, e) != 0) goto fail;
        StorePointList sp;
        if (store_points_all(&st, run, op, &sp, e) != 0) goto fail;
        CostPoint *pts = malloc((sp.n ? sp.n : 1) * sizeof *pts);
        if (!pts) {
            free(sp.v);
            kv_err(e, "%s: out of memory reading points", db_path);
            goto fail;
        }
        for (size_t i = 0; i < sp.n; i++)
            pts[i] = (CostPoint){.op = sp.v[i].op, .p = {sp.v[i].p1, sp.v[i].p2, sp.v[i].p3}, .median_ns = sp.v[i].median_ns};
        size_t npts = sp.n;
        free(sp.v);
        StoreRunMeta meta;
        if (store_get_run(&st, run, &meta, e) != 0) {
            free(pts);
            goto fail;
        }
        int rc = cost_model_set_op(cm, (CostOp)op, pts, npts, run, meta.backend, e);
        free(pts);
        if (rc != 0) {
            kv_err_prefix(e, "%s: run %lld: ", db_path, (long long)run);
            goto fail;
        }
        found += !cost_op_is_io((CostOp)op);
        int dup = 0;
        for (int i = 0; i < nruns; i++) dup |= runs[i] == run;
        if (!dup && nruns < OP_COUNT) runs[nruns++] = run;
    }
    if (!found) {
        char list[4096];
        StrBuf sb = {list, 0, sizeof list};
        list[0] = '\0';
        KvErr e2;
        store_list_runs(&st, list_run, &sb, &e2);
        kv_err(e, "%s: no cost curves for device '%s', model '%s', %s, tp %d; the store has:%s", db_path,
               device, model, dtype, tp, sb.len ? list : " no complete runs");
        goto fail;
    }
    int len = snprintf(cm->source, sizeof cm->source, "%s (run%s", db_path, nruns > 1 ? "s" : "");
    for (int i = 0; i < nruns && len < (int)sizeof cm->source - 24; i++)
        len += snprintf(cm->source + len, sizeof cm->source - (size_t)len, "%s %lld", i ? "," : "", (long long)runs[i]);
    snprintf(cm->source + len, sizeof cm->source - (size_t)len, ")");
    store_close(&st);
    return 0;
fail:
    store_close(&st);
    cost_model_free(cm);
    return -1;
}
