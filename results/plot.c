/* plot.c — see plot.h. Curves are drawn from each policy's TTFT histogram at 200 quantiles (the CDF)
 * or at 200 tail probabilities spaced evenly on the log axis (the CCDF). */
#include "results/plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 760
#define H 460
#define ML 72 /* margins */
#define MR 180
#define MT 40
#define MB 52
#define PW (W - ML - MR)
#define PH (H - MT - MB)
#define CURVE_POINTS 200

static const char *g_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
#define N_COLORS ((int)KV_ARRAY_LEN(g_colors))

const char *plot_file_list(void) { return "ttft_cdf.svg, ttft_ccdf.svg"; }

void plot_style(int i, const char **color, char *dash, size_t dash_len)
{
    if (i < 0) i = 0;
    *color = g_colors[i % N_COLORS];
    int round = i / N_COLORS; /* every colour once per round; each round its own dash pattern */
    if (round == 0) snprintf(dash, dash_len, "%s", "");
    else if (round == 1) snprintf(dash, dash_len, "%s", "7,4");
    else if (round == 2) snprintf(dash, dash_len, "%s", "2,3");
    else if (round == 3) snprintf(dash, dash_len, "%s", "9,3,2,3");
    else snprintf(dash, dash_len, "%d,4,2,4", 6 + round); /* >= 10: unlike every pattern above */
}

void plot_tick_label(char *buf, size_t len, double v)
{
    static const char *si[] = {"", "k", "M", "G", "T", "P"};
    if (!(v > 0)) {
        snprintf(buf, len, "0");
        return;
    }
    if (v >= 1) {
        int u = 0;
        while (v >= 999.5 && u < (int)KV_ARRAY_LEN(si) - 1) v /= 1000, u++;
        snprintf(buf, len, "%.3g%s", v, si[u]);
        return;
    }
    /* below one: plain decimals (0.5, 0.05, 0.001), never an exponent */
    int digits = (int)ceil(-log10(v)) + 2;
    if (digits > 12) digits = 12;
    snprintf(buf, len, "%.*f", digits, v);
    char *p = buf + strlen(buf) - 1;
    while (p > buf && *p == '0') *p-- = '\0';
    if (*p == '.') *p = '\0';
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* The time axis: whole decades of ms covering every policy's TTFT and the SLO. */
typedef struct Axis {
    double d0, d1; /* log10 of the ends (ms) */
} Axis;

static Axis time_axis(const SimResult *res, int n, int64_t slo_ttft_ns)
{
    double lo = 1e300, hi = 0;
    for (int i = 0; i < n; i++) {
        if (!res[i].ttft.n) continue;
        double a = (double)res[i].ttft.min / 1e6, b = (double)res[i].ttft.max / 1e6;
        if (a < lo) lo = a;
        if (b > hi) hi = b;
    }
    if (hi <= 0) lo = 1, hi = 10;
    if (slo_ttft_ns > 0) {
        double s = (double)slo_ttft_ns / 1e6;
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    if (lo < 0.01) lo = 0.01;
    Axis a = {floor(log10(lo)), ceil(log10(hi))};
    if (a.d1 <= a.d0) a.d1 = a.d0 + 1;
    return a;
}

static double x_of(const Axis *a, double ms)
{
    if (ms < pow(10, a->d0)) ms = pow(10, a->d0);
    return ML + (log10(ms) - a->d0) / (a->d1 - a->d0) * PW;
}

static void header(FILE *f, const char *title, const char *ylabel)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"14\">", ML);
    xml_text(f, title);
    fputs("</text>\n", f);
    fprintf(f, "<text class=\"xlabel\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">TTFT (ms, log scale)</text>\n", ML + PW / 2, H - 10);
    fprintf(f, "<text class=\"ylabel\" x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">", MT + PH / 2, MT + PH / 2);
    xml_text(f, ylabel);
    fputs("</text>\n", f);
}

static void x_ticks(FILE *f, const Axis *a)
{
    char lab[32];
    int decades = (int)(a->d1 - a->d0);
    for (double d = a->d0; d <= a->d1 + 1e-9; d++) {
        double x = x_of(a, pow(10, d));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ccc\"/>\n", x, MT, x, MT + PH);
        plot_tick_label(lab, sizeof lab, pow(10, d));
        fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, MT + PH + 16, lab);
        if (d >= a->d1) break;
        /* minor lines at 2..9 × the decade; labelled at 2 and 5 when there are few decades */
        for (int m = 2; m <= 9; m++) {
            double v = m * pow(10, d), xm = x_of(a, v);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", xm, MT, xm, MT + PH);
            if (decades <= 3 && (m == 2 || m == 5)) {
                plot_tick_label(lab, sizeof lab, v);
                fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", xm,
                        MT + PH + 16, lab);
            }
        }
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", ML, MT, PW, PH);
}

/* label_y: where the label goes (the figure's empty corner: the bottom for the CDF, the top for the tail) */
static void slo_line(FILE *f, const Axis *a, int64_t slo_ttft_ns, int label_y)
{
    if (slo_ttft_ns <= 0) return;
    double ms = (double)slo_ttft_ns / 1e6, x = x_of(a, ms);
    char lab[32];
    if (ms >= 1000) {
        plot_tick_label(lab, sizeof lab, ms / 1000);
        strcat(lab, " s");
    } else {
        plot_tick_label(lab, sizeof lab, ms);
        strcat(lab, " ms");
    }
    fprintf(f, "<line class=\"slo\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n",
            x, MT, x, MT + PH);
    fprintf(f, "<text class=\"slo\" x=\"%.1f\" y=\"%d\" font-size=\"11\" paint-order=\"stroke\" stroke=\"white\" stroke-width=\"3\">TTFT SLO %s</text>\n",
            x + 4, label_y, lab);
}

static void curve_open(FILE *f, int i, const char *policy)
{
    const char *col;
    char dash[32];
    plot_style(i, &col, dash, sizeof dash);
    fprintf(f, "<polyline class=\"policy\" data-policy=\"");
    xml_text(f, policy);
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"", col);
    if (dash[0]) fprintf(f, " stroke-dasharray=\"%s\"", dash);
    fputs(" points=\"", f);
}

static void legend(FILE *f, const SimResult *res, int n)
{
    for (int i = 0; i < n; i++) {
        const char *col;
        char dash[32];
        plot_style(i, &col, dash, sizeof dash);
        double ly = MT + 10 + i * 18;
        fprintf(f, "<line class=\"legend\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"", ML + PW + 12,
                ly, ML + PW + 44, ly, col);
        if (dash[0]) fprintf(f, " stroke-dasharray=\"%s\"", dash);
        fputs("/>\n", f);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">", ML + PW + 50, ly + 4);
        xml_text(f, res[i].policy);
        if (!res[i].ttft.n) fputs(" (no requests)", f);
        fputs("</text>\n", f);
    }
}

int plot_ttft_cdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    Axis a = time_axis(res, n, slo_ttft_ns);
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    header(f, title, "fraction of requests with TTFT ≤ x");
    x_ticks(f, &a);
    char lab[32];
    for (int q = 0; q <= 4; q++) {
        double y = MT + PH - q / 4.0 * PH;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ccc\"/>\n", ML, y, ML + PW, y);
        plot_tick_label(lab, sizeof lab, q / 4.0);
        fprintf(f, "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6, y + 4, lab);
    }
    slo_line(f, &a, slo_ttft_ns, MT + PH - 8);
    for (int i = 0; i < n; i++) {
        if (!res[i].ttft.n) continue;
        curve_open(f, i, res[i].policy);
        for (int k = 0; k <= CURVE_POINTS; k++) {
            double p = (double)k / CURVE_POINTS;
            double x = x_of(&a, hist_percentile(&res[i].ttft, p) / 1e6), y = MT + PH - p * PH;
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fputs("\"/>\n", f);
    }
    legend(f, res, n);
    fputs("</svg>\n", f);
    return kv_atomic_commit(&af, e);
}

int plot_ttft_ccdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    Axis a = time_axis(res, n, slo_ttft_ns);
    /* the tail axis: 1 − F from 1 down to the decade below one request of the largest run (≤ 10^-6) */
    uint64_t nmax = 1;
    for (int i = 0; i < n; i++)
        if (res[i].ttft.n > nmax) nmax = res[i].ttft.n;
    int K = (int)ceil(log10((double)nmax));
    if (K < 1) K = 1;
    if (K > 6) K = 6;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    char full[512];
    snprintf(full, sizeof full, "%s — tail", title);
    header(f, full, "fraction of requests with TTFT > x (log scale)");
    x_ticks(f, &a);
    char lab[32];
    for (int d = 0; d <= K; d++) {
        double y = MT + (double)d / K * PH;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ccc\"/>\n", ML, y, ML + PW, y);
        plot_tick_label(lab, sizeof lab, pow(10, -d));
        fprintf(f, "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ML - 6, y + 4, lab);
        if (d > 0) { /* the percentile that tail share marks: p90, p99, p99.9 */
            char pl[32];
            snprintf(pl, sizeof pl, "p%.*f", d > 2 ? d - 2 : 0, 100.0 - 100.0 * pow(10, -d));
            fprintf(f, "<text class=\"pctl\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\" fill=\"#777\">%s</text>\n",
                    ML + PW - 4, y - 3, pl);
        }
    }
    slo_line(f, &a, slo_ttft_ns, MT + 12);
    for (int i = 0; i < n; i++) {
        const Hist *h = &res[i].ttft;
        if (!h->n) continue;
        curve_open(f, i, res[i].policy);
        double last = 1.0 / (double)h->n; /* the smallest tail a run of n requests resolves */
        for (int k = 0; k <= CURVE_POINTS; k++) {
            double tail = pow(10, -(double)K * k / CURVE_POINTS);
            if (tail < last) tail = last;
            double x = x_of(&a, hist_percentile(h, 1 - tail) / 1e6), y = MT + (-log10(tail)) / K * PH;
            fprintf(f, "%.1f,%.1f ", x, y);
            if (tail <= last) break;
        }
        /* the slowest request: the step down to the tail of one request */
        fprintf(f, "%.1f,%.1f", x_of(&a, (double)h->max / 1e6), MT + (-log10(last)) / K * PH);
        fputs("\"/>\n", f);
    }
    legend(f, res, n);
    fputs("</svg>\n", f);
    return kv_atomic_commit(&af, e);
}

int plot_write_figures(const char *dir, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/ttft_cdf.svg", dir);
    if (plot_ttft_cdf_svg(path, res, n, title, slo_ttft_ns, e) != 0) return -1;
    snprintf(path, sizeof path, "%s/ttft_ccdf.svg", dir);
    return plot_ttft_ccdf_svg(path, res, n, title, slo_ttft_ns, e);
}
