/* calib_diff.c — the headline summary of a stored run and the diff of two runs; see calib_diff.h.
 * Library code: never prints, never exits.
 */
#include "calibrate/calib_diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/calib_plan.h"

/* ==================================================================== summary */

/* a run's points in memory */
typedef StorePointList PointBuf;

static int load_points(CostStore *st, int64_t run, PointBuf *b, KvErr *e) { return store_points_all(st, run, -1, b, e); }

static const StorePoint *find_point(const PointBuf *b, CostOp op, int64_t p1, int64_t p2, int64_t p3)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].op == op && b->v[i].p1 == p1 && b->v[i].p2 == p2 && b->v[i].p3 == p3) return &b->v[i];
    return NULL;
}

/* distinct values of parameter d of op's points, ascending; returns the count (<= max) */
static int op_axis(const PointBuf *b, CostOp op, int d, int64_t *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i].op != op) continue;
        int64_t v = d == 0 ? b->v[i].p1 : d == 1 ? b->v[i].p2 : b->v[i].p3;
        int k = 0;
        while (k < n && out[k] < v) k++;
        if (k < n && out[k] == v) continue;
        if (n == max) continue;
        memmove(out + k + 1, out + k, (size_t)(n - k) * sizeof *out);
        out[k] = v;
        n++;
    }
    return n;
}

static const char *fmt_bytes(int64_t b, char *s, size_t len)
{
    if (b >= ((int64_t)1 << 30) && b % ((int64_t)1 << 30) == 0) snprintf(s, len, "%lld GiB", (long long)(b >> 30));
    else if (b >= (1 << 20) && b % (1 << 20) == 0) snprintf(s, len, "%lld MiB", (long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0) snprintf(s, len, "%lld KiB", (long long)(b >> 10));
    else snprintf(s, len, "%lld B", (long long)b);
    return s;
}

int calib_summary(CostStore *st, int64_t run_id, const ModelSpec *m, char *buf, size_t len, KvErr *e)
{
    if (len) buf[0] = '\0';
    StoreRunMeta meta;
    if (store_get_run(st, run_id, &meta, e) != 0) return -1;
    KvDtype dt;
    if (kv_dtype_parse(meta.dtype, &dt, e) != 0) return -1;
    ModelLayout ly = {m, dt, meta.tp < 1 ? 1 : meta.tp, 1};
    PointBuf b;
    if (load_points(st, run_id, &b, e) != 0) return -1;
    int cpu = !strcmp(meta.backend, "cpu");
    double unit = cpu ? 1e9 : 1e12;
    const char *uname = cpu ? "GFLOP/s" : "TFLOP/s";
    int64_t ax1[CALIB_MAX_AXIS * 4], ax2[CALIB_MAX_AXIS * 4], ax3[CALIB_MAX_AXIS * 4];
    int n1, n2, n3;

    static const CostOp gemm_ops[] = {OP_GEMM_FFN_UP, OP_GEMM_QKV};
    for (size_t g = 0; g < KV_ARRAY_LEN(gemm_ops); g++) {
        CostOp op = gemm_ops[g];
        if (!(n1 = op_axis(&b, op, 0, ax1, (int)KV_ARRAY_LEN(ax1)))) continue;
        kv_catf(buf, len, "%s %s by tokens:", cost_op_name(op), uname);
        for (int i = 0; i < n1; i++) {
            const StorePoint *p = find_point(&b, op, ax1[i], 0, 0);
            if (p && p->median_ns > 0)
                kv_catf(buf, len, " %lld: %.3g", (long long)ax1[i], model_op_flops(&ly, op, ax1[i], 0) / (p->median_ns * 1e-9) / unit);
        }
        kv_catf(buf, len, "\n");
    }
    if ((n1 = op_axis(&b, OP_ATTN_PREFILL, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_ATTN_PREFILL, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        /* a mid-size and the largest new-token count, without context and at the largest context */
        int mid = 0;
        for (int i = 0; i < n1; i++)
            if (llabs(ax1[i] - 512) < llabs(ax1[mid] - 512)) mid = i;
        int64_t shapes[4][2] = {{ax1[mid], ax2[0]}, {ax1[n1 - 1], ax2[0]}, {ax1[mid], ax2[n2 - 1]}, {ax1[n1 - 1], ax2[n2 - 1]}};
        kv_catf(buf, len, "attn_prefill %s (new, context):", uname);
        for (int i = 0; i < 4; i++) {
            int dup = 0;
            for (int j = 0; j < i; j++) dup |= shapes[j][0] == shapes[i][0] && shapes[j][1] == shapes[i][1];
            const StorePoint *p = dup ? NULL : find_point(&b, OP_ATTN_PREFILL, shapes[i][0], shapes[i][1], 0);
            if (p && p->median_ns > 0)
                kv_catf(buf, len, " (%lld, %lld): %.3g", (long long)shapes[i][0], (long long)shapes[i][1],
                        model_op_flops(&ly, OP_ATTN_PREFILL, shapes[i][0], shapes[i][1]) / (p->median_ns * 1e-9) / unit);
        }
        kv_catf(buf, len, "\n");
    }
    if ((n1 = op_axis(&b, OP_ATTN_DECODE, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_ATTN_DECODE, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        kv_catf(buf, len, "attn_decode GB/s (KV read, batch x total context):");
        int64_t bs[2] = {ax1[0], ax1[n1 - 1]};
        for (int i = 0; i < (n1 > 1 ? 2 : 1); i++) {
            const StorePoint *p = find_point(&b, OP_ATTN_DECODE, bs[i], ax2[n2 - 1], 0);
            if (p && p->median_ns > 0)
                kv_catf(buf, len, " %lld x %lld: %.3g", (long long)bs[i], (long long)ax2[n2 - 1],
                        model_op_bytes(&ly, OP_ATTN_DECODE, bs[i], ax2[n2 - 1]) / (p->median_ns * 1e-9) * 1e-9);
        }
        kv_catf(buf, len, "\n");
    }
    /* the layer against the sum of its parts, where every part has the point */
    if ((n1 = op_axis(&b, OP_LAYER_PREFILL, 0, ax1, (int)KV_ARRAY_LEN(ax1))) &&
        (n2 = op_axis(&b, OP_LAYER_PREFILL, 1, ax2, (int)KV_ARRAY_LEN(ax2)))) {
        int shown = 0;
        for (int i = 0; i < n1; i++)
            for (int j = 0; j < n2; j++) {
                int64_t n = ax1[i], c = ax2[j];
                const StorePoint *lp = find_point(&b, OP_LAYER_PREFILL, n, c, 0);
                const StorePoint *parts[] = {find_point(&b, OP_GEMM_QKV, n, 0, 0), find_point(&b, OP_GEMM_O, n, 0, 0),
                                             find_point(&b, OP_GEMM_FFN_UP, n, 0, 0), find_point(&b, OP_GEMM_FFN_DOWN, n, 0, 0),
                                             find_point(&b, OP_ATTN_PREFILL, n, c, 0), find_point(&b, OP_NORM, n, 0, 0),
                                             find_point(&b, OP_ACT, n, 0, 0)};
                const StorePoint *rope = find_point(&b, OP_ROPE, n, 0, 0);
                int ok = lp != NULL;
                double sum = 0;
                for (size_t k = 0; k < KV_ARRAY_LEN(parts) && ok; k++) {
                    ok = parts[k] != NULL;
                    if (ok) sum += parts[k]->median_ns * (k == 5 ? (m->norms_per_layer < 1 ? 1 : m->norms_per_layer) : 1);
                }
                if (!ok || sum <= 0) continue;
                if (m->pos == POS_ROPE && rope) sum += rope->median_ns;
                if (!shown++) kv_catf(buf, len, "layer_prefill / sum of its parts (new, context):");
                kv_catf(buf, len, " (%lld, %lld): %.2f", (long long)n, (long long)c, lp->median_ns / sum);
            }
        if (shown) kv_catf(buf, len, "\n");
    }
    static const CostOp links[] = {OP_H2D, OP_D2H, OP_H2D_BIDIR, OP_D2H_BIDIR};
    int shown = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(links); i++) {
        if (!(n1 = op_axis(&b, links[i], 0, ax1, (int)KV_ARRAY_LEN(ax1)))) continue;
        const StorePoint *p = find_point(&b, links[i], ax1[n1 - 1], 0, 0);
        char s[32];
        if (!p || p->median_ns <= 0) continue;
        if (!shown++) kv_catf(buf, len, "copies GB/s%s:", cpu ? " (host memcpy)" : " (pinned)");
        kv_catf(buf, len, " %s %.1f at %s", cost_op_name(links[i]), (double)ax1[n1 - 1] / p->median_ns,
                fmt_bytes(ax1[n1 - 1], s, sizeof s));
    }
    if (shown) kv_catf(buf, len, "\n");
    for (int op = OP_SSD_READ; op <= OP_SSD_WRITE; op++) {
        if (!(n1 = op_axis(&b, (CostOp)op, 0, ax1, (int)KV_ARRAY_LEN(ax1))) ||
            !(n2 = op_axis(&b, (CostOp)op, 1, ax2, (int)KV_ARRAY_LEN(ax2))) ||
            !(n3 = op_axis(&b, (CostOp)op, 2, ax3, (int)KV_ARRAY_LEN(ax3))))
            continue;
        char s[32];
        const StorePoint *lo = find_point(&b, (CostOp)op, ax1[n1 - 1], ax2[0], ax3[0]);
        const StorePoint *hi = find_point(&b, (CostOp)op, ax1[n1 - 1], ax2[n2 - 1], ax3[n3 - 1]);
        kv_catf(buf, len, "%s GB/s at %s:", cost_op_name((CostOp)op), fmt_bytes(ax1[n1 - 1], s, sizeof s));
        if (lo && lo->median_ns > 0)
            kv_catf(buf, len, " qd %lld x %lld file%s %.2f", (long long)ax2[0], (long long)ax3[0], ax3[0] > 1 ? "s" : "",
                    (double)ax1[n1 - 1] / lo->median_ns);
        if (hi && hi != lo && hi->median_ns > 0)
            kv_catf(buf, len, ", qd %lld x %lld files %.2f", (long long)ax2[n2 - 1], (long long)ax3[n3 - 1],
                    (double)ax1[n1 - 1] / hi->median_ns);
        kv_catf(buf, len, "\n");
    }
    free(b.v);
    return 0;
}

/* ==================================================================== diff */

static int cmp_point_key(const StorePoint *a, const StorePoint *b)
{
    int c = strcmp(cost_op_name(a->op), cost_op_name(b->op));
    if (!c) c = strcmp(a->model, b->model);
    if (!c) c = strcmp(a->dtype, b->dtype);
    if (!c) c = (a->tp > b->tp) - (a->tp < b->tp);
    if (!c) c = (a->p1 > b->p1) - (a->p1 < b->p1);
    if (!c) c = (a->p2 > b->p2) - (a->p2 < b->p2);
    if (!c) c = (a->p3 > b->p3) - (a->p3 < b->p3);
    return c;
}

static int cmp_point_qsort(const void *a, const void *b) { return cmp_point_key(a, b); }

static int same_curve(const CalibDiffCurve *c, const StorePoint *p)
{
    return c->op == p->op && !strcmp(c->model, p->model) && !strcmp(c->dtype, p->dtype) && c->tp == p->tp;
}

/* The curve of p: the last one when it matches (points arrive in key order), else a new one. */
static CalibDiffCurve *curve_of(CalibDiff *d, const StorePoint *p, int *cap)
{
    for (int i = d->n_curves - 1; i >= 0; i--)
        if (same_curve(&d->curves[i], p)) return &d->curves[i];
    if (d->n_curves == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        CalibDiffCurve *n = realloc(d->curves, (size_t)nc * sizeof *n);
        if (!n) return NULL;
        d->curves = n;
        *cap = nc;
    }
    CalibDiffCurve *c = &d->curves[d->n_curves++];
    memset(c, 0, sizeof *c);
    c->op = p->op;
    snprintf(c->model, sizeof c->model, "%s", p->model);
    snprintf(c->dtype, sizeof c->dtype, "%s", p->dtype);
    c->tp = p->tp;
    return c;
}

static int cmp_curve(const void *x, const void *y)
{
    const CalibDiffCurve *a = x, *b = y;
    int c = strcmp(cost_op_name(a->op), cost_op_name(b->op));
    if (!c) c = strcmp(a->model, b->model);
    if (!c) c = strcmp(a->dtype, b->dtype);
    if (!c) c = (a->tp > b->tp) - (a->tp < b->tp);
    return c;
}

void calib_diff_free(CalibDiff *d)
{
    free(d->curves);
    memset(d, 0, sizeof *d);
}

int calib_diff(CostStore *st, int64_t run_a, int64_t run_b, double tolerance, CalibDiff *d, KvErr *e)
{
    return calib_diff_stores(st, run_a, st, run_b, tolerance, d, e);
}

int calib_diff_stores(CostStore *sa, int64_t run_a, CostStore *sb, int64_t run_b, double tolerance, CalibDiff *d, KvErr *e)
{
    memset(d, 0, sizeof *d);
    if (!(tolerance >= 0)) return kv_err(e, "diff: tolerance %g: expected >= 0", tolerance);
    StoreRunMeta ma, mb;
    if (store_get_run(sa, run_a, &ma, e) != 0 || store_get_run(sb, run_b, &mb, e) != 0) return -1;
    PointBuf a, b;
    if (load_points(sa, run_a, &a, e) != 0) return -1;
    if (load_points(sb, run_b, &b, e) != 0) {
        free(a.v);
        return -1;
    }
    if (a.n) qsort(a.v, a.n, sizeof *a.v, cmp_point_qsort);
    if (b.n) qsort(b.v, b.n, sizeof *b.v, cmp_point_qsort);
    int cap = 0, rc = 0;
    size_t i = 0, j = 0;
    while (i < a.n || j < b.n) {
        int c = i >= a.n ? 1 : j >= b.n ? -1 : cmp_point_key(&a.v[i], &b.v[j]);
        const StorePoint *p = c <= 0 ? &a.v[i] : &b.v[j];
        CalibDiffCurve *cv = curve_of(d, p, &cap);
        if (!cv) {
            rc = kv_err(e, "diff: out of memory");
            break;
        }
        if (c < 0) {
            cv->only_a++, d->only_a++, i++;
            continue;
        }
        if (c > 0) {
            cv->only_b++, d->only_b++, j++;
            continue;
        }
        double va = a.v[i].median_ns, vb = b.v[j].median_ns;
        double rel = va > 0 ? (vb - va) / va : (vb > 0 ? INFINITY : 0);
        cv->common++, d->common++;
        if (fabs(rel) > tolerance) cv->beyond++, d->beyond++;
        if (cv->common == 1 || fabs(rel) > fabs(cv->worst_rel)) {
            cv->worst_rel = rel;
            cv->worst_p[0] = p->p1, cv->worst_p[1] = p->p2, cv->worst_p[2] = p->p3;
            cv->worst_a_ns = va, cv->worst_b_ns = vb;
        }
        i++, j++;
    }
    free(a.v);
    free(b.v);
    if (rc != 0) {
        calib_diff_free(d);
        return -1;
    }
    if (d->n_curves > 1) qsort(d->curves, (size_t)d->n_curves, sizeof *d->curves, cmp_curve);
    for (int k = 0; k < d->n_curves; k++) d->drifted += d->curves[k].beyond > 0;
    return 0;
}

int calib_parse_tolerance(const char *s, double *out, KvErr *e)
{
    if (!s || !*s) return kv_err(e, "tolerance: empty; expected a percentage such as 5%% or a fraction such as 0.05");
    char tmp[64];
    size_t n = strlen(s);
    if (n >= sizeof tmp) return kv_err(e, "tolerance '%s': too long", s);
    int pct = s[n - 1] == '%';
    memcpy(tmp, s, n + 1);
    if (pct) tmp[n - 1] = '\0';
    char *end;
    double v = strtod(tmp, &end);
    if (end == tmp || *end || !isfinite(v) || v < 0)
        return kv_err(e, "tolerance '%s': expected a percentage such as 5%% or a fraction such as 0.05", s);
    if (pct) v /= 100.0;
    else if (v >= 1)
        return kv_err(e, "tolerance '%s': a plain number is a fraction and must be below 1 (write %g%% for a percentage)", s, v);
    if (v >= 10) return kv_err(e, "tolerance '%s': expected below 1000%%", s);
    *out = v;
    return 0;
}
