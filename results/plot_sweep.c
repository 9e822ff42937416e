/* plot_sweep.c — see plot_sweep.h. */
#include "results/plot_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"
#include "sim/base/stats.h"

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

/* The unit of a setting that reads as a number, for its axis label ("" when unknown or unitless). */
static const char *setting_unit(const char *name)
{
    static const struct {
        const char *name, *unit;
    } u[] = {{"session_rate", "sessions/s"}, {"request_rate", "requests/s"}, {"n_ssd", "SSDs"},
             {"requests", "requests"},       {"concurrency", "clients"},      {"replicas", "replicas"},
             {"token_budget", "tokens"},     {"max_batch", "requests"},       {"max_context", "tokens"},
             {"block_tokens", "tokens"},     {"tp", "GPUs"},                  {"pp", "stages"},
             {"restore_share", "share of the token budget"}, {"mem_util", "share of HBM"},
             {"time_scale", "× the trace's times"},          {"burstiness", "gamma shape"},
             {"system_prompt_tokens", "tokens"},             {"prompt_groups", "groups"},
             {"seed", "seed"}};
    for (size_t i = 0; i < KV_ARRAY_LEN(u); i++)
        if (!strcmp(u[i].name, name)) return u[i].unit;
    return "";
}

/* An axis label of setting `name`: "session_rate (sessions/s)"; its values name the unit otherwise
 * ("10GbE", "256GB") or are categories. */
static void setting_label(char *buf, size_t n, const char *name)
{
    const char *u = setting_unit(name);
    if (*u && strcmp(u, name)) snprintf(buf, n, "%s (%s)", name, u);
    else snprintf(buf, n, "%s", name);
}

/* A metric's label with its unit, from its name in the CSV: "ttft_s.p99 (s)". */
static void metric_label(char *buf, size_t n, const char *m)
{
    size_t l = strlen(m);
    const char *u = "";
    if (!strcmp(m, "slo_attainment")) u = "share of requests within the SLO, 0–1";
    else if (strstr(m, "_per_s")) u = strstr(m, "tokens") ? "tokens/s" : "requests/s";
    else if (strstr(m, "_s.") || (l > 2 && !strcmp(m + l - 2, "_s"))) u = "s";
    else if (!strncmp(m, "bytes.", 6) || strstr(m, "_bytes")) u = "bytes";
    else if (!strncmp(m, "utilisation.", 12)) u = "busy share, 0–1";
    else if (strstr(m, "_share.")) u = "share, 0–1";
    else if (strstr(m, "tokens")) u = "tokens";
    else if (!strncmp(m, "load.", 5) || !strcmp(m, "nothing_restored")) u = "1 yes, 0 no";
    else if (!strcmp(m, "requests") || !strcmp(m, "sessions") || !strcmp(m, "dropped") || !strcmp(m, "truncated") ||
             !strcmp(m, "events") || !strcmp(m, "iterations"))
        u = "count";
    if (*u) snprintf(buf, n, "%s (%s)", m, u);
    else snprintf(buf, n, "%s", m);
}

typedef struct Data {
    PlotCsv t;
    int c_pol, c_metric, c_value, c_x, c_y;
    int c_seed;             /* the seed setting when it varies: lines are the mean over seeds (-1: none) */
    int other[32], n_other; /* setting columns that vary, besides x, y and the seed */
} Data;

static void series_name(const Data *d, int r, char *buf, size_t n)
{
    size_t l = (size_t)snprintf(buf, n, "%s", pcsv_cell(&d->t, r, d->c_pol));
    if (d->c_y >= 0) l += (size_t)snprintf(buf + l, n - l, ", %s=%s", d->t.cells[d->c_y], pcsv_cell(&d->t, r, d->c_y));
    for (int i = 0; i < d->n_other && l < n; i++)
        l += (size_t)snprintf(buf + l, n - l, ", %s=%s", d->t.cells[d->other[i]], pcsv_cell(&d->t, r, d->other[i]));
}

/* The mean of one series at one x over the seeds (every matching row), and the half-width of its
 * 95 % confidence interval (Student t; 0 with one seed). Returns the number of values. */
static int series_point(const Data *d, const char *metric, const char *name, const char *x, double *mean, double *hw)
{
    double v[256];
    int n = 0;
    for (int r = 0; r < d->t.nrows && n < (int)KV_ARRAY_LEN(v); r++) {
        if (!metric_match(pcsv_cell(&d->t, r, d->c_metric), metric) || strcmp(pcsv_cell(&d->t, r, d->c_x), x)) continue;
        char nm[160];
        series_name(d, r, nm, sizeof nm);
        if (strcmp(nm, name)) continue;
        double val = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
        if (isfinite(val)) v[n++] = val;
        if (d->c_seed < 0) break; /* without seeds: the first row that has it */
    }
    *mean = *hw = 0;
    if (n == 0) return 0;
    KvErr e;
    if (n >= 2 && stats_mean_ci(v, (size_t)n, 0.95, mean, hw, &e) == 0) return n;
    *hw = 0;
    for (int i = 0; i < n; i++) *mean += v[i] / n;
    return n;
}

/* metric against x, a line per series; over seeds the mean with its 95 % interval as a band */
static int lines_svg(const char *path, Data *d, const char *metric, const char *ylabel, int unit_range, const char *title, KvErr *e)
{
    Vals xs = {{0}, 0, 0};
    static char names[MAXV][160];
    static double mean[MAXV][MAXV], hw[MAXV][MAXV], lower[MAXV][MAXV], upper[MAXV][MAXV];
    static int cnt[MAXV][MAXV];
    int ns = 0;
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
    }
    if (xs.n == 0) return kv_err(e, "%s: no rows of metric '%s'", d->t.path, metric);
    vals_sort(&xs);
    /* a colour per policy and a dash pattern per combination of the other settings (psvg_style's
     * index policy + 8 × combination), the series ordered by policy, then combination */
    static int style[MAXV], pol_of[MAXV], combo_of[MAXV];
    {
        const char *pols[MAXV], *combos[MAXV];
        size_t plen[MAXV];
        int npol = 0, ncombo = 0;
        for (int k = 0; k < ns; k++) {
            const char *comma = strchr(names[k], ',');
            size_t pl = comma ? (size_t)(comma - names[k]) : strlen(names[k]);
            int a = 0, b = 0;
            while (a < npol && (plen[a] != pl || strncmp(pols[a], names[k], pl))) a++;
            if (a == npol) pols[npol] = names[k], plen[npol++] = pl; /* the policy: the name up to its first comma */
            const char *rest = comma ? comma : "";
            while (b < ncombo && strcmp(combos[b], rest)) b++;
            if (b == ncombo) combos[ncombo++] = rest;
            pol_of[k] = a, combo_of[k] = b;
        }
        for (int k = 1; k < ns; k++) /* insertion sort: stable, few series */
            for (int j = k; j > 0 && (pol_of[j] < pol_of[j - 1] || (pol_of[j] == pol_of[j - 1] && combo_of[j] < combo_of[j - 1])); j--) {
                char tmp[160];
                snprintf(tmp, sizeof tmp, "%s", names[j]);
                snprintf(names[j], sizeof names[j], "%s", names[j - 1]);
                snprintf(names[j - 1], sizeof names[j - 1], "%s", tmp);
                int t = pol_of[j];
                pol_of[j] = pol_of[j - 1], pol_of[j - 1] = t;
                t = combo_of[j];
                combo_of[j] = combo_of[j - 1], combo_of[j - 1] = t;
            }
        for (int k = 0; k < ns; k++) style[k] = npol <= 8 ? pol_of[k] + 8 * combo_of[k] : k;
    }
    double lo = 1e300, hi = -1e300, vmin = 1e300;
    int max_n = 0;
    for (int r = 0; r < d->t.nrows; r++) { /* a metric never negative keeps its bands above 0 */
        double v = strtod(pcsv_cell(&d->t, r, d->c_value), NULL);
        if (metric_match(pcsv_cell(&d->t, r, d->c_metric), metric) && isfinite(v) && v < vmin) vmin = v;
    }
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < xs.n; i++) {
            cnt[k][i] = series_point(d, metric, names[k], xs.v[i], &mean[k][i], &hw[k][i]);
            if (!cnt[k][i]) continue;
            double floor_v = vmin >= 0 ? 0 : -1e300, ceil_v = unit_range ? 1 : 1e300;
            lower[k][i] = mean[k][i] - hw[k][i] < floor_v ? floor_v : mean[k][i] - hw[k][i];
            upper[k][i] = mean[k][i] + hw[k][i] > ceil_v ? ceil_v : mean[k][i] + hw[k][i];
            if (cnt[k][i] > max_n) max_n = cnt[k][i];
            if (lower[k][i] < lo) lo = lower[k][i];
            if (upper[k][i] > hi) hi = upper[k][i];
        }
    char xlabel[160];
    setting_label(xlabel, sizeof xlabel, d->t.cells[d->c_x]);
    PlotAxis x, y;
    if (xs.numeric) psvg_axis_linear(&x, strtod(xs.v[0], NULL), strtod(xs.v[xs.n - 1], NULL), 6, xlabel);
    else {
        psvg_axis_linear(&x, -0.5, xs.n - 0.5, xs.n, xlabel);
        x.no_ticks = 1;
    }
    if (unit_range) {
        psvg_axis_linear(&y, 0, 1, 4, ylabel);
        y.hi = 1.04; /* a line at 1 stays off the frame */
    } else psvg_axis_linear(&y, lo < 0 ? lo : 0, hi > lo ? hi : lo + 1, 5, ylabel);
    const char *ptr[MAXV];
    for (int k = 0; k < ns; k++) ptr[k] = names[k];
    int ml = 76, pw = 504, mt = 60, H = 456, ph = H - mt - 56;
    PlotLegend lg; /* beside the data, in as many columns as the series need */
    psvg_legend_fit(&lg, ns, ptr, 0, ph - 10);
    lg.style = style;
    int W = ml + pw + 12 + lg.w + 8;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    PlotPanel p;
    psvg_begin(f, W, H, title);
    char sub[200];
    if (d->c_seed >= 0)
        snprintf(sub, sizeof sub, "each point the mean over %d seeds (%s), the band its 95 %% confidence interval (Student t; cut at the metric's range)", max_n,
                 d->t.cells[d->c_seed]);
    else snprintf(sub, sizeof sub, "one run per point");
    psvg_label(f, 16, 40, "start", "subtitle", "font-size=\"11\" fill=\"#555\"", sub);
    psvg_panel(&p, f, ml, mt, pw, ph, &x, &y);
    psvg_axes(&p);
    if (!xs.numeric)
        for (int i = 0; i < xs.n; i++) psvg_label(f, psvg_x(&p, i), mt + ph + 16, "middle", "xtick", "", xs.v[i]);
    for (int k = 0; k < ns; k++) {
        const char *col;
        char dash[32];
        psvg_style(style[k], &col, dash, sizeof dash);
        int band = 0;
        for (int i = 0; i < xs.n; i++) band |= cnt[k][i] >= 2 && hw[k][i] > 0;
        if (band) { /* upper edge left to right, lower edge back */
            fprintf(f, "<polygon class=\"band\" data-series=\"");
            psvg_text(f, names[k]);
            fprintf(f, "\" fill=\"%s\" fill-opacity=\"0.1\" stroke=\"none\" points=\"", col);
            for (int i = 0; i < xs.n; i++)
                if (cnt[k][i]) psvg_point(f, psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, upper[k][i]));
            for (int i = xs.n - 1; i >= 0; i--)
                if (cnt[k][i]) psvg_point(f, psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, lower[k][i]));
            fputs("\"/>\n", f);
        }
        psvg_polyline_open(f, "series", names[k], style[k], 2);
        for (int i = 0; i < xs.n; i++)
            if (cnt[k][i]) psvg_point(f, psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, mean[k][i]));
        psvg_polyline_close(f);
        for (int i = 0; i < xs.n; i++) /* a marker at each point */
            if (cnt[k][i])
                fprintf(f, "<circle class=\"marker\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                        psvg_x(&p, xs.numeric ? strtod(xs.v[i], NULL) : i), psvg_y(&p, mean[k][i]), col);
    }
    psvg_legend_draw(f, &lg, ml + pw + 12, mt + 10, ptr);
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
    char mlab[200], unit[160] = "", xlabel[160], ylabel[160];
    metric_label(mlab, sizeof mlab, metric);
    for (int r = 0; r < d->t.nrows; r++) /* the unit from the metric's name in the CSV ("ttft_s.p99") */
        if (metric_match(pcsv_cell(&d->t, r, d->c_metric), metric)) {
            metric_label(mlab, sizeof mlab, pcsv_cell(&d->t, r, d->c_metric));
            break;
        }
    const char *open = strchr(mlab, '(');
    if (open) snprintf(unit, sizeof unit, "%s", open); /* "(s)" */
    setting_label(xlabel, sizeof xlabel, d->t.cells[d->c_x]);
    setting_label(ylabel, sizeof ylabel, d->t.cells[d->c_y]);
    int ml = 90, mt = 60, pw = cw * xs.n, ph = ch * ys.n, ppanel = ph + 80;
    int W = ml + pw + 30 + 16 + 8 + (int)ceil(psvg_text_width(unit, 11) > psvg_text_width(metric, 11) ? psvg_text_width(unit, 11)
                                                                                                       : psvg_text_width(metric, 11));
    int H = mt + ps.n * ppanel + 10;
    if (W < ml + pw + 150) W = ml + pw + 150;
    if (W < 520) W = 520;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    psvg_begin(f, W, H, title);
    char sub[200];
    snprintf(sub, sizeof sub, "%s by %s × %s%s", metric, d->t.cells[d->c_x], d->t.cells[d->c_y],
             d->n_other && d->c_seed >= 0 ? " (mean over the seeds and the other settings)"
             : d->n_other               ? " (mean over the other settings)"
             : d->c_seed >= 0           ? " (mean over the seeds)"
                                        : "");
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
        psvg_label(f, ml + pw / 2.0, y0 + ph + 32, "middle", "xlabel", "", xlabel);
        char tr[96];
        snprintf(tr, sizeof tr, "transform=\"rotate(-90 %d %.1f)\"", ml - 56, y0 + ph / 2.0);
        psvg_label(f, ml - 56, y0 + ph / 2.0, "middle", "ylabel", tr, ylabel);
    }
    /* the colour scale: its metric and unit above, five values along it */
    int bx = ml + pw + 30, by = mt + 34, bh = 160;
    for (int s = 0; s < 20; s++) {
        char col[16];
        scale_color(1 - s / 19.0, col, sizeof col);
        fprintf(f, "<rect class=\"scale\" x=\"%d\" y=\"%.1f\" width=\"16\" height=\"%.1f\" fill=\"%s\"/>\n", bx, by + s * bh / 20.0, bh / 20.0 + 0.5, col);
    }
    double slo = lo < 1e300 ? lo : 0, shi = hi > -1e300 ? hi : 0;
    for (int k = 0; k <= 4; k++) {
        char a[32];
        double v = shi - (shi - slo) * k / 4;
        psvg_tick_label(a, sizeof a, fabs(v) >= 100 ? round(v) : round(v * 1000) / 1000);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", bx + 16, by + bh * k / 4.0, bx + 20,
                by + bh * k / 4.0);
        psvg_label(f, bx + 23, by + bh * k / 4.0 + 4, "start", "scale-tick", "font-size=\"11\"", a);
    }
    psvg_label(f, bx, by - 20, "start", "scale-label", "font-size=\"11\"", metric);
    psvg_label(f, bx, by - 8, "start", "scale-unit", "font-size=\"11\" fill=\"#555\"", unit[0] ? unit : "(no unit)");
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
    d.c_seed = -1;
    for (int k = c[0] + 1; k < c[1]; k++) { /* the other settings that take more than one value */
        if (k == d.c_x || k == d.c_y || !strcmp(d.t.cells[k], "policies")) continue; /* (the policy column says it) */
        int varies = 0;
        for (int r = 1; r < d.t.nrows && !varies; r++) varies = strcmp(pcsv_cell(&d.t, r, k), pcsv_cell(&d.t, 0, k)) != 0;
        if (varies && !strcmp(d.t.cells[k], "seed")) d.c_seed = k; /* replications: averaged, not a series */
        else if (varies && d.n_other < 32) d.other[d.n_other++] = k;
    }
    const char *metric = s->metric ? s->metric : "slo_attainment";
    int found = 0;
    char ylabel[160] = "";
    for (int r = 0; r < d.t.nrows && !found; r++)
        if ((found = metric_match(pcsv_cell(&d.t, r, d.c_metric), metric)))
            metric_label(ylabel, sizeof ylabel, pcsv_cell(&d.t, r, d.c_metric));
    if (!found) {
        kv_err(e, "%s: no metric '%s' (e.g. slo_attainment, ttft_s.p99, ttft_s.mean, requests_per_s)", s->csv, metric);
        goto done;
    }
    const char *title = s->title ? s->title : "sweep";
    char path[4400], t2[600];
    size_t wl = 0;
    snprintf(t2, sizeof t2, "%s — SLO attainment against %s", title, s->x);
    snprintf(path, sizeof path, "%s/slo_vs_load.svg", s->out_dir);
    if (lines_svg(path, &d, "slo_attainment", "SLO attainment (share of requests within the SLO, 0–1)", 1, t2, e) != 0) goto done;
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
