/* plot.c — see plot.h. The CDF is drawn from each policy's TTFT histogram at 200 quantiles. */
#include "results/plot.h"

#include <math.h>
#include <string.h>

#define W 720
#define H 440
#define ML 70 /* margins */
#define MR 160
#define MT 40
#define MB 50

static const char *g_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int plot_ttft_cdf_svg(const char *path, const SimResult *res, int n, const char *title, KvErr *e)
{
    /* x range: decades covering every policy's min..max TTFT (ms) */
    double lo = 1e300, hi = 0;
    for (int i = 0; i < n; i++) {
        if (!res[i].ttft.n) continue;
        double a = (double)res[i].ttft.min / 1e6, b = (double)res[i].ttft.max / 1e6;
        if (a < lo) lo = a;
        if (b > hi) hi = b;
    }
    if (hi <= 0) lo = 1, hi = 10;
    if (lo < 0.01) lo = 0.01;
    double d0 = floor(log10(lo)), d1 = ceil(log10(hi));
    if (d1 <= d0) d1 = d0 + 1;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    FILE *f = af.f;
    int pw = W - ML - MR, ph = H - MT - MB;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"14\">", ML);
    xml_text(f, title);
    fputs("</text>\n", f);
    /* axes and grid */
    for (double d = d0; d <= d1 + 1e-9; d++) {
        double x = ML + (d - d0) / (d1 - d0) * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, MT, x, MT + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, MT + ph + 16, pow(10, d));
    }
    for (int q = 0; q <= 4; q++) {
        double y = MT + ph - q / 4.0 * ph;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, y, ML + pw, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", ML - 6, y + 4, q / 4.0);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">TTFT (ms, log scale)</text>\n", ML + pw / 2, H - 10);
    fprintf(f, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">fraction of requests</text>\n",
            MT + ph / 2, MT + ph / 2);
    for (int i = 0; i < n; i++) {
        const char *col = g_colors[i % (int)KV_ARRAY_LEN(g_colors)];
        if (res[i].ttft.n) {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            for (int k = 0; k <= 200; k++) {
                double p = k / 200.0;
                double v = hist_percentile(&res[i].ttft, p) / 1e6;
                if (v < pow(10, d0)) v = pow(10, d0);
                double x = ML + (log10(v) - d0) / (d1 - d0) * pw, y = MT + ph - p * ph;
                fprintf(f, "%.1f,%.1f ", x, y);
            }
            fputs("\"/>\n", f);
        }
        double ly = MT + 10 + i * 18;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", ML + pw + 12, ly,
                ML + pw + 32, ly, col);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">", ML + pw + 38, ly + 4);
        xml_text(f, res[i].policy);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return kv_atomic_commit(&af, e);
}
