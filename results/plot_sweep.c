/* plot_sweep.c — see plot_sweep.h. */
#include "results/plot_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

#define MAXV 64 /* distinct values of an axis, series */

typedef struct Vals {
    const char *v[MAXV];
    int n, numeric;
} Vals;

static int vals_add(Vals *a, const char *s)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], s)) return i;
    if (a->n == MAXV) return -1;
    a->v[a->n] = s;
    return a->n++;
}

static int is_num(const char *s)
{
    char *end;
    if (!*s) return 0;
    strtod(s, &end);
    return !*end;
}

static int cmp_num(const void *a, const void *b)
{
    double x = strtod(*(const char *const *)a, NULL), y = strtod(*(const char *const *)b, NULL);
    return x < y ? -1 : x > y;
}

static void vals_sort(Vals *a)
{
    a->numeric = a->n > 0;
    for (int i = 0; i < a->n; i++) a->numeric &= is_num(a->v[i]);
    if (a->numeric) qsort(a->v, (size_t)a->n, sizeof a->v[0], cmp_num);
}

static int vals_find(const Vals *a, const char *s)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], s)) return i;
    return -1;
}

/* "ttft_s.p99" matches "ttft_s.p99" and "ttft_p99" */
static int metric_match(const char *have, const char *want)
{
    if (!strcmp(have, want)) return 1;
    char norm[128];
    size_t k = 0;
    for (const char *p = have; *p && k < sizeof norm - 1; p++) {
        if (!strncmp(p, "_s.", 3)) {
            norm[k++] = '_';
            p += 2;
        } else norm[k++] = *p == '.' ? '_' : *p;
    }
    norm[k] = '\0';
    return !strcmp(norm, want);
}

typedef struct Data {
    PlotCsv t;
    int c_pol, c_metric, c_value, c_x, c_y;
    int other[32], n_other; /* setting columns that vary, besides x and y */
} Data;

static void series_name(const Data *d, int r, char *buf, size_t n)
{
    size_t l = (size_t)snprintf(buf, n, "%s", pcsv_cell(&d->t, r, d->c_pol));
    if (d->c_y >= 0) l += (size_t)snprintf(buf + l, n - l, ", %s=%s", d->t.cells[d->c_y], pcsv_cell(&d->t, r, d->c_y));
    for (int i = 0; i < d->n_other && l < n; i++)
        l += (size_t)snprintf(buf + l, n - l, ", %s=%s", d->t.cells[d->other[i]], pcsv_cell(&d->t, r, d->other[i]));
}

/* metric against x, a line per series */
static int lines_svg(const char *path, Data *d, const char *metric, const char *ylabel, int unit_range, const char *title, KvErr *e)
{
    Vals xs = {{0}, 0, 0};
    char names[MAXV][160];
    int ns = 0;
    double lo = 1e300, hi = -1e300;
    for (int r = 0; r < d->t.nrows; r++) {
        if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric)) continue;
        vals_add(&xs, pcsv_cell(&d->t, r, d->c_x));
        char nm[160];
        series_name(d, r, nm, sizeof nm);
        int k = 0;
        while (k < ns && strcmp(names[k], nm)) k++;
        if (k == ns && ns < MAXV) snprintf(names[ns++], sizeof names[0], "%s", nm);
        double v;
        if (pcsv_num(&d->t, r, d->c_value, &v, e) != 0) return -1;
        if (isfinite(v)) {
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    if (xs.n == 0) return kv_err(e, "%s: no rows of metric '%s'", d->t.path, metric);
    vals_sort(&xs);
    PlotAxis x, y;
    if (xs.numeric) psvg_axis_linear(&x, strtod(xs.v[0], NULL), strtod(xs.v[xs.n - 1], NULL), 6, d->t.cells[d->c_x]);
    else {
        psvg_axis_linear(&x, -0.5, xs.n - 0.5, xs.n, d->t.cells[d->c_x]);
        x.no_ticks = 1;
    }
    if (unit_range) {
        psvg_axis_linear(&y, 0, 1, 4, ylabel);
        y.hi = 1.04; /* a line at 1 stays off the frame */
    }
    else psvg_axis_linear(&y, lo < 0 ? lo : 0, hi > lo ? hi : lo + 1, 5, ylabel);
    int W = 820, ml = 76, mr = 240, mt = 44, H = 440, ph = H - mt - 56;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    PlotPanel p;
    psvg_begin(f, W, H, title);
    psvg_panel(&p, f, ml, mt, W - ml - mr, ph, &x, &y);
    psvg_axes(&p);
    if (!xs.numeric)
        for (int i = 0; i < xs.n; i++) psvg_label(f, psvg_x(&p, i), mt + ph + 16, "middle", "xtick", "", xs.v[i]);
    const char *ptr[MAXV];
    for (int k = 0; k < ns; k++) {
        ptr[k] = names[k];
        psvg_polyline_open(f, "series", names[k], k, 2);
        for (int i = 0; i < xs.n; i++) { /* the series' value at each x (the first row that has it) */
            for (int r = 0; r < d->t.nrows; r++) {
                if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric) || strcmp(pcsv_cell(&d->t, r, d->c_x), xs.v[i])) continue;
                char nm[160];
                series_name(d, r, nm, sizeof nm);
                if (strcmp(nm, names[k])) continue;
                double v = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
                if (isfinite(v)) psvg_point(f, psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, v));
                break;
            }
        }
        psvg_polyline_close(f);
        const char *col; /* a marker at each point */
        char dash[32];
        psvg_style(k, &col, dash, sizeof dash);
        for (int i = 0; i < xs.n; i++) {
            for (int r = 0; r < d->t.nrows; r++) {
                if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric) || strcmp(pcsv_cell(&d->t, r, d->c_x), xs.v[i])) continue;
                char nm[160];
                series_name(d, r, nm, sizeof nm);
                if (strcmp(nm, names[k])) continue;
                double v = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
                if (isfinite(v))
                    fprintf(f, "<circle class=\"marker\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                            psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, v), col);
                break;
            }
        }
    }
    psvg_legend(f, W - mr + 12, mt + 10, ns, ptr, 0);
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

/* a colour on a 5-stop blue → yellow scale at u in [0, 1] */
static void scale_color(double u, char *buf, size_t n)
{
    static const int stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    if (!(u >= 0)) u = 0;
    if (u > 1) u = 1;
    double s = u * 4;
    int i = (int)s;
    if (i > 3) i = 3;
    double fr = s - i;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)lround(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * fr);
    snprintf(buf, n, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static int heatmap_svg(const char *path, Data *d, const char *metric, const char *title, KvErr *e)
{
    Vals xs = {{0}, 0, 0}, ys = {{0}, 0, 0}, ps = {{0}, 0, 0};
    double lo = 1e300, hi = -1e300;
    for (int r = 0; r < d->t.nrows; r++) {
        if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric)) continue;
        vals_add(&xs, pcsv_cell(&d->t, r, d->c_x));
        vals_add(&ys, pcsv_cell(&d->t, r, d->c_y));
        vals_add(&ps, pcsv_cell(&d->t, r, d->c_pol));
        double v = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
        if (isfinite(v)) {
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    vals_sort(&xs);
    vals_sort(&ys);
    static double sum[MAXV][MAXV][MAXV];
    static int cnt[MAXV][MAXV][MAXV];
    memset(cnt, 0, sizeof cnt);
    memset(sum, 0, sizeof sum);
    for (int r = 0; r < d->t.nrows; r++) {
        if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric)) continue;
        int i = vals_find(&xs, pcsv_cell(&d->t, r, d->c_x)), j = vals_find(&ys, pcsv_cell(&d->t, r, d->c_y)),
            k = vals_find(&ps, pcsv_cell(&d->t, r, d->c_pol));
        double v = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
        if (i < 0 || j < 0 || k < 0 || !isfinite(v)) continue;
        sum[k][i][j] += v;
        cnt[k][i][j]++;
    }
    int cw = xs.n > 0 && 480 / xs.n < 90 ? 480 / xs.n : 90, ch = ys.n > 0 && 300 / ys.n < 44 ? 300 / ys.n : 44;
    if (cw < 14) cw = 14;
    if (ch < 10) ch = 10;
    int ml = 90, mt = 60, pw = cw * xs.n, ph = ch * ys.n, ppanel = ph + 80;
    int W = ml + pw + 150, H = mt + ps.n * ppanel + 10;
    if (W < 520) W = 520;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    psvg_begin(f, W, H, title);
    char sub[200];
    snprintf(sub, sizeof sub, "%s by %s × %s%s", metric, d->t.cells[d->c_x], d->t.cells[d->c_y],
             d->n_other ? " (mean over the other settings)" : "");
    psvg_label(f, 16, 40, "start", "subtitle", "font-size=\"11\" fill=\"#555\"", sub);
    for (int k = 0; k < ps.n; k++) {
        int y0 = mt + k * ppanel + 20;
        psvg_label(f, ml, y0 - 6, "start", "panel", "font-weight=\"bold\"", ps.v[k]);
        for (int i = 0; i < xs.n; i++)
            for (int j = 0; j < ys.n; j++) {
                int x = ml + i * cw, y = y0 + (ys.n - 1 - j) * ch;
                if (!cnt[k][i][j]) {
                    fprintf(f, "<rect class=\"cell-empty\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\" stroke=\"white\"/>\n", x, y, cw, ch);
                    continue;
                }
                double v = sum[k][i][j] / cnt[k][i][j];
                char col[16], lab[32];
                scale_color(hi > lo ? (v - lo) / (hi - lo) : 0.5, col, sizeof col);
                fprintf(f, "<rect class=\"cell\" data-value=\"%.6g\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"white\"/>\n", v, x,
                        y, cw, ch, col);
                psvg_tick_label(lab, sizeof lab, fabs(v) >= 100 ? round(v) : round(v * 1000) / 1000);
                if (cw >= 34 && ch >= 14)
                    psvg_label(f, x + cw / 2.0, y + ch / 2.0 + 4, "middle", "cell-label",
                               (hi > lo ? (v - lo) / (hi - lo) : 0.5) > 0.6 ? "font-size=\"10\"" : "font-size=\"10\" fill=\"white\"", lab);
            }
        for (int i = 0; i < xs.n; i++) psvg_label(f, ml + i * cw + cw / 2.0, y0 + ph + 14, "middle", "xtick", "font-size=\"10\"", xs.v[i]);
        for (int j = 0; j < ys.n; j++) psvg_label(f, ml - 6, y0 + (ys.n - 1 - j) * ch + ch / 2.0 + 4, "end", "ytick", "font-size=\"10\"", ys.v[j]);
        psvg_label(f, ml + pw / 2.0, y0 + ph + 32, "middle", "xlabel", "", d->t.cells[d->c_x]);
        char tr[96];
        snprintf(tr, sizeof tr, "transform=\"rotate(-90 %d %.1f)\"", ml - 56, y0 + ph / 2.0);
        psvg_label(f, ml - 56, y0 + ph / 2.0, "middle", "ylabel", tr, d->t.cells[d->c_y]);
    }
    /* the colour scale */
    int bx = ml + pw + 30, by = mt + 20, bh = 160;
    for (int s = 0; s < 20; s++) {
        char col[16];
        scale_color(1 - s / 19.0, col, sizeof col);
        fprintf(f, "<rect class=\"scale\" x=\"%d\" y=\"%.1f\" width=\"16\" height=\"%.1f\" fill=\"%s\"/>\n", bx, by + s * bh / 20.0, bh / 20.0 + 0.5, col);
    }
    char a[32], b[32];
    psvg_tick_label(a, sizeof a, hi > -1e300 ? hi : 0);
    psvg_tick_label(b, sizeof b, lo < 1e300 ? lo : 0);
    psvg_label(f, bx + 22, by + 10, "start", NULL, "", a);
    psvg_label(f, bx + 22, by + bh, "start", NULL, "", b);
    psvg_label(f, bx, by - 8, "start", NULL, "font-size=\"11\"", metric);
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

int plot_sweep(const PlotSweepSpec *s, char *written, size_t wlen, KvErr *e)
{
    Data d;
    memset(&d, 0, sizeof d);
    written[0] = '\0';
    if (pcsv_read(&d.t, s->csv, e) != 0) return -1;
    int rc = -1;
    static const char *const need[] = {"point", "policy", "metric", "value"};
    int c[4];
    if (pcsv_cols(&d.t, need, 4, c, e) != 0) goto done;
    d.c_pol = c[1];
    d.c_metric = c[2];
    d.c_value = c[3];
    d.c_x = pcsv_col(&d.t, s->x);
    d.c_y = s->y ? pcsv_col(&d.t, s->y) : -1;
    if (d.c_x < 0 || (s->y && d.c_y < 0) || d.c_x == c[0] || d.c_x >= c[1] || (s->y && (d.c_y == c[0] || d.c_y >= c[1]))) {
        char cols[600] = "";
        size_t l = 0;
        for (int k = c[0] + 1; k < c[1] && l < sizeof cols - 60; k++) l += (size_t)snprintf(cols + l, sizeof cols - l, "%s%s", l ? ", " : "", d.t.cells[k]);
        kv_err(e, "%s: --%s %s is not a setting of the sweep (its settings: %s)", s->csv, d.c_x < 0 ? "x" : "y",
               d.c_x < 0 ? s->x : s->y, cols[0] ? cols : "none");
        goto done;
    }
    for (int k = c[0] + 1; k < c[1]; k++) { /* the other settings that take more than one value */
        if (k == d.c_x || k == d.c_y || !strcmp(d.t.cells[k], "policies")) continue; /* (the policy column says it) */
        int varies = 0;
        for (int r = 1; r < d.t.nrows && !varies; r++) varies = strcmp(pcsv_cell(&d.t, r, k), pcsv_cell(&d.t, 0, k)) != 0;
        if (varies && d.n_other < 32) d.other[d.n_other++] = k;
    }
    const char *metric = s->metric ? s->metric : "slo_attainment";
    int found = 0;
    char ylabel[160] = "";
    for (int r = 0; r < d.t.nrows && !found; r++)
        if ((found = metric_match(pcsv_cell(&d.t, r, d.c_metric), metric)))
            snprintf(ylabel, sizeof ylabel, "%s%s", pcsv_cell(&d.t, r, d.c_metric), strstr(pcsv_cell(&d.t, r, d.c_metric), "_s.") ? " (s)" : "");
    if (!found) {
        kv_err(e, "%s: no metric '%s' (e.g. slo_attainment, ttft_s.p99, ttft_s.mean, requests_per_s)", s->csv, metric);
        goto done;
    }
    const char *title = s->title ? s->title : "sweep";
    char path[4400], t2[600];
    size_t wl = 0;
    snprintf(t2, sizeof t2, "%s — SLO attainment against %s", title, s->x);
    snprintf(path, sizeof path, "%s/slo_vs_load.svg", s->out_dir);
    if (lines_svg(path, &d, "slo_attainment", "SLO attainment (share of requests within the SLO)", 1, t2, e) != 0) goto done;
    wl += (size_t)snprintf(written + wl, wlen - wl, "slo_vs_load.svg");
    if (strcmp(metric, "slo_attainment")) {
        snprintf(t2, sizeof t2, "%s — %s against %s", title, metric, s->x);
        snprintf(path, sizeof path, "%s/metric_vs_load.svg", s->out_dir);
        if (lines_svg(path, &d, metric, ylabel, 0, t2, e) != 0) goto done;
        wl += (size_t)snprintf(written + wl, wlen - wl, ", metric_vs_load.svg");
    }
    if (s->y) {
        snprintf(t2, sizeof t2, "%s — %s", title, metric);
        snprintf(path, sizeof path, "%s/heatmap.svg", s->out_dir);
        if (heatmap_svg(path, &d, metric, t2, e) != 0) goto done;
        wl += (size_t)snprintf(written + wl, wlen - wl, ", heatmap.svg");
    }
    rc = 0;
done:
    pcsv_free(&d.t);
    return rc;
}
