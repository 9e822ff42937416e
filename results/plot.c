/* plot.c — see plot.h. Curves are drawn from each policy's TTFT histogram at 200 quantiles (the CDF)
 * or at 200 tail probabilities spaced evenly on the log axis (the CCDF); the split from the means
 * of the queue, restore and prefill histograms (they add up to the TTFT mean, metrics.c). Axes,
 * styles and the legend come from plot_svg. */
#include "results/plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "results/plot_svg.h"

#define H 460
#define ML 72 /* margins */
#define MT 40
#define MB 52
#define PW 508 /* the data area */
#define PH (H - MT - MB)
#define CURVE_POINTS 200

const char *plot_file_list(void) { return "ttft_cdf.svg, ttft_ccdf.svg, ttft_split.svg"; }

void plot_style(int i, const char **color, char *dash, size_t dash_len) { psvg_style(i, color, dash, dash_len); }
void plot_tick_label(char *buf, size_t len, double v) { psvg_tick_label(buf, len, v); }

/* The time axis: whole decades of ms covering every policy's TTFT and the SLO. */
static void time_axis(PlotAxis *a, const SimResult *res, int n, int64_t slo_ttft_ns)
{
    double lo = 1e300, hi = 0;
    for (int i = 0; i < n; i++) {
        if (!res[i].ttft.n) continue;
        double x = (double)res[i].ttft.min / 1e6, y = (double)res[i].ttft.max / 1e6;
        if (x < lo) lo = x;
        if (y > hi) hi = y;
    }
    if (hi <= 0) lo = 1, hi = 10;
    if (slo_ttft_ns > 0) {
        double s = (double)slo_ttft_ns / 1e6;
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    psvg_axis_log(a, lo, hi, 0.01, "TTFT (ms, log scale)");
    a->minor_labels = 1;
}

static void slo_line(const PlotPanel *p, int64_t slo_ttft_ns, int label_y)
{
    if (slo_ttft_ns <= 0) return;
    char lab[48], ms[32];
    psvg_ms_label(ms, sizeof ms, (double)slo_ttft_ns / 1e6);
    snprintf(lab, sizeof lab, "TTFT SLO %s", ms);
    psvg_refline(p, 1, (double)slo_ttft_ns / 1e6, lab, label_y, NULL);
}

/* The legend beside the data area, in as many columns as the policies need; the canvas is as wide
 * as the data area and the legend. */
typedef struct Legend {
    char names[64][48];
    const char *ptr[64];
    PlotLegend L;
    int width; /* the canvas */
} Legend;

static void legend_fit(Legend *lg, const SimResult *res, int n)
{
    int m = n < 64 ? n : 64;
    for (int i = 0; i < m; i++) {
        snprintf(lg->names[i], sizeof lg->names[i], "%s%s", res[i].policy, res[i].ttft.n ? "" : " (no requests)");
        lg->ptr[i] = lg->names[i];
    }
    psvg_legend_fit(&lg->L, m, lg->ptr, 0, PH - 10);
    lg->width = ML + PW + 12 + lg->L.w + 8;
}

static void legend(FILE *f, const Legend *lg) { psvg_legend_draw(f, &lg->L, ML + PW + 12, MT + 10, lg->ptr); }

int plot_ttft_cdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    PlotAxis x, y;
    time_axis(&x, res, n, slo_ttft_ns);
    psvg_axis_linear(&y, 0, 1, 4, "fraction of requests with TTFT ≤ x");
    Legend lg;
    legend_fit(&lg, res, n);
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    char full[512];
    snprintf(full, sizeof full, "TTFT CDF — %s", title);
    PlotPanel p;
    psvg_begin(f, lg.width, H, full);
    psvg_panel(&p, f, ML, MT, PW, PH, &x, &y);
    psvg_axes(&p);
    slo_line(&p, slo_ttft_ns, MT + PH - 8);
    for (int i = 0; i < n; i++) {
        if (!res[i].ttft.n) continue;
        psvg_polyline_open(f, "policy", res[i].policy, i, 2);
        double q[CURVE_POINTS + 1], v[CURVE_POINTS + 1];
        for (int k = 0; k <= CURVE_POINTS; k++) q[k] = (double)k / CURVE_POINTS;
        hist_percentiles(&res[i].ttft, q, CURVE_POINTS + 1, v);
        for (int k = 0; k <= CURVE_POINTS; k++) psvg_point(f, psvg_x(&p, v[k] / 1e6), psvg_y(&p, q[k]));
        psvg_polyline_close(f);
    }
    legend(f, &lg);
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

int plot_ttft_ccdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    PlotAxis x, y;
    time_axis(&x, res, n, slo_ttft_ns);
    /* the tail axis: 1 − F from 1 down to the decade below one request of the largest run (≤ 10^-6) */
    uint64_t nmax = 1;
    for (int i = 0; i < n; i++)
        if (res[i].ttft.n > nmax) nmax = res[i].ttft.n;
    int K = (int)ceil(log10((double)nmax));
    if (K < 1) K = 1;
    if (K > 6) K = 6;
    psvg_axis_log(&y, pow(10, -K), 1, 0, "fraction of requests with TTFT > x (log scale)");
    Legend lg;
    legend_fit(&lg, res, n);
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    char full[512];
    snprintf(full, sizeof full, "TTFT tail (1 − CDF) — %s", title);
    PlotPanel p;
    psvg_begin(f, lg.width, H, full);
    psvg_panel(&p, f, ML, MT, PW, PH, &x, &y);
    psvg_axes(&p);
    for (int d = 1; d <= K; d++) { /* the percentile each tail share marks: p90, p99, p99.9 */
        char pl[32];
        snprintf(pl, sizeof pl, "p%.*f", d > 2 ? d - 2 : 0, 100.0 - 100.0 * pow(10, -d));
        fprintf(f, "<text class=\"pctl\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\" fill=\"#777\">%s</text>\n",
                ML + PW - 4, psvg_y(&p, pow(10, -d)) - 3, pl);
    }
    slo_line(&p, slo_ttft_ns, MT + 12);
    for (int i = 0; i < n; i++) {
        const Hist *h = &res[i].ttft;
        if (!h->n) continue;
        psvg_polyline_open(f, "policy", res[i].policy, i, 2);
        double last = 1.0 / (double)h->n; /* the smallest tail a run of n requests resolves */
        double tail[CURVE_POINTS + 1], q[CURVE_POINTS + 1], v[CURVE_POINTS + 1];
        int m = 0;
        for (int k = 0; k <= CURVE_POINTS; k++) {
            tail[m] = pow(10, -(double)K * k / CURVE_POINTS);
            if (tail[m] < last) tail[m] = last;
            q[m] = 1 - tail[m];
            if (tail[m++] <= last) break;
        }
        hist_percentiles(h, q, m, v);
        for (int k = 0; k < m; k++) psvg_point(f, psvg_x(&p, v[k] / 1e6), psvg_y(&p, tail[k]));
        /* the slowest request: the step down to the tail of one request */
        psvg_point(f, psvg_x(&p, (double)h->max / 1e6), psvg_y(&p, last));
        psvg_polyline_close(f);
    }
    legend(f, &lg);
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

int plot_ttft_split_svg(const char *path, const SimResult *res, int n, const char *title, KvErr *e)
{
    static const char *const parts[] = {"queue", "restore", "prefill"};
    double maxv = 0;
    for (int i = 0; i < n; i++) {
        double t = hist_mean(&res[i].queue) + hist_mean(&res[i].restore) + hist_mean(&res[i].prefill);
        if (t / 1e6 > maxv) maxv = t / 1e6;
    }
    int bar = 22, gap = 10, ml = 150, mt = 48, pw = 570;
    for (int i = 0; i < n; i++) { /* room for the longest policy name left of the bars */
        int w = 16 + (int)ceil(psvg_text_width(res[i].policy, 12)) + 8;
        if (w > ml) ml = w;
    }
    int ph = n * (bar + gap) + gap, h = mt + ph + 56;
    PlotAxis x, y;
    psvg_axis_linear(&x, 0, maxv > 0 ? maxv * 1.12 : 1, 5, "mean time to first token (ms): queue + restore + prefill");
    psvg_axis_linear(&y, 0, 1, 1, NULL);
    y.no_ticks = 1; /* the bars are labelled by policy */
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    char full[512];
    snprintf(full, sizeof full, "Mean TTFT split — %s", title);
    PlotPanel p;
    psvg_begin(f, ml + pw + 40, h, full);
    psvg_panel(&p, f, ml, mt, pw, ph, &x, &y);
    psvg_axes(&p);
    for (int k = 0; k < 3; k++) { /* the legend on one row above the bars */
        psvg_swatch(f, ml + k * 110, 35, psvg_fill(k), parts[k]);
    }
    for (int i = 0; i < n; i++) {
        double v[3] = {hist_mean(&res[i].queue) / 1e6, hist_mean(&res[i].restore) / 1e6, hist_mean(&res[i].prefill) / 1e6};
        double y0 = mt + gap + i * (bar + gap), acc = 0;
        psvg_label(f, ml - 8, y0 + bar / 2.0 + 4, "end", "bar-label", "", res[i].policy);
        if (!res[i].queue.n) continue; /* no request measured: no bar (its means are absent) */
        for (int k = 0; k < 3; k++) {
            double xa = psvg_x(&p, acc), xb = psvg_x(&p, acc + v[k]);
            fprintf(f, "<rect class=\"split\" data-policy=\"");
            psvg_text(f, res[i].policy);
            fprintf(f, "\" data-part=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", parts[k], xa, y0,
                    xb - xa, bar, psvg_fill(k));
            acc += v[k];
        }
        char lab[48];
        psvg_ms_label(lab, sizeof lab, acc);
        psvg_label(f, psvg_x(&p, acc) + 4, y0 + bar / 2.0 + 4, "start", "bar-total", "font-size=\"11\"", res[i].ttft.n ? lab : "no requests");
    }
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

int plot_write_figures(const char *dir, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/ttft_cdf.svg", dir);
    if (plot_ttft_cdf_svg(path, res, n, title, slo_ttft_ns, e) != 0) return -1;
    snprintf(path, sizeof path, "%s/ttft_ccdf.svg", dir);
    if (plot_ttft_ccdf_svg(path, res, n, title, slo_ttft_ns, e) != 0) return -1;
    snprintf(path, sizeof path, "%s/ttft_split.svg", dir);
    return plot_ttft_split_svg(path, res, n, title, e);
}
