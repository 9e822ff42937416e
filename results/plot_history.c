/* plot_history.c — see plot_history.h. The quantile of a bin is its sorted sample's value at rank
 * floor(q × (n − 1)) (the nearest-rank convention of a box plot, no interpolation). */
#include "results/plot_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

#define MAXP 64
#define MAXB 40

typedef struct Sample {
    int policy, bin;
    double ttft_ms;
} Sample;

static int cmp_sample(const void *a, const void *b)
{
    const Sample *x = a, *y = b;
    if (x->policy != y->policy) return x->policy - y->policy;
    if (x->bin != y->bin) return x->bin - y->bin;
    return x->ttft_ms < y->ttft_ms ? -1 : x->ttft_ms > y->ttft_ms;
}

int plot_history_svg(const char *path, const char *requests_csv, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, requests_csv, e) != 0) return -1;
    static const char *const need[] = {"policy", "history_tokens", "ttft_s"};
    int c[3], rc = -1, np = 0, ns = 0;
    uint64_t no_hist = 0;
    const char *pols[MAXP];
    Sample *s = NULL;
    double med[MAXP][MAXB], p90[MAXP][MAXB];
    if (pcsv_cols(&t, need, 3, c, e) != 0) goto done;
    s = malloc(sizeof *s * (size_t)(t.nrows > 0 ? t.nrows : 1));
    if (!s) {
        kv_err(e, "out of memory");
        goto done;
    }
    double ymin = 1e300, ymax = 0;
    int bmax = 0;
    for (int r = 0; r < t.nrows; r++) {
        double h, ttft;
        if (pcsv_num(&t, r, c[1], &h, e) || pcsv_num(&t, r, c[2], &ttft, e)) goto done;
        const char *pol = pcsv_cell(&t, r, c[0]);
        int pi = 0;
        while (pi < np && strcmp(pols[pi], pol)) pi++;
        if (pi == np) {
            if (np == MAXP) continue;
            pols[np++] = pol;
        }
        if (!(h >= 1)) {
            no_hist++;
            continue;
        }
        int b = (int)floor(log2(h));
        if (b >= MAXB) b = MAXB - 1;
        if (b > bmax) bmax = b;
        s[ns++] = (Sample){pi, b, ttft * 1e3};
    }
    qsort(s, (size_t)ns, sizeof *s, cmp_sample);
    int bmin = MAXB;
    for (int p = 0; p < np; p++)
        for (int b = 0; b < MAXB; b++) med[p][b] = p90[p][b] = -1;
    for (int i = 0; i < ns;) {
        int j = i;
        while (j < ns && s[j].policy == s[i].policy && s[j].bin == s[i].bin) j++;
        int n = j - i;
        if (n >= PLOT_HISTORY_MIN) {
            med[s[i].policy][s[i].bin] = s[i + (int)floor(0.5 * (n - 1))].ttft_ms;
            p90[s[i].policy][s[i].bin] = s[i + (int)floor(0.9 * (n - 1))].ttft_ms;
            double lo = med[s[i].policy][s[i].bin], hi = p90[s[i].policy][s[i].bin];
            if (lo < ymin) ymin = lo;
            if (hi > ymax) ymax = hi;
            if (s[i].bin < bmin) bmin = s[i].bin;
        }
        i = j;
    }
    if (ymax <= 0) ymin = 1, ymax = 10, bmin = 0, bmax = 10;
    if (slo_ttft_ns > 0) {
        double v = (double)slo_ttft_ns / 1e6;
        if (v < ymin) ymin = v;
        if (v > ymax) ymax = v;
    }
    PlotAxis x, y;
    psvg_axis_log(&x, pow(2, bmin), pow(2, bmax + 1), 1, "history (tokens, log scale)");
    psvg_axis_log(&y, ymin, ymax, 0.01, "TTFT (ms, log scale)");
    int W = 900, ml = 76, mr = 170, mt = 56, gap = 40, H = 430, ph = H - mt - 58;
    int pw = (W - ml - mr - gap) / 2;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) goto done;
    FILE *f = af.f;
    char full[700];
    snprintf(full, sizeof full, "%s — TTFT against history", title);
    psvg_begin(f, W, H, full);
    char sub[200];
    snprintf(sub, sizeof sub, "bins of a factor of 2 in history tokens, each with at least %d requests; %llu requests without history not shown",
             PLOT_HISTORY_MIN, (unsigned long long)no_hist);
    psvg_label(f, 16, 40, "start", "subtitle", "font-size=\"11\" fill=\"#555\"", sub);
    for (int k = 0; k < 2; k++) {
        PlotPanel p;
        PlotAxis yy = y;
        if (k == 1) yy.label = NULL;
        psvg_panel(&p, f, ml + k * (pw + gap), mt + 8, pw, ph, &x, &yy);
        psvg_axes(&p);
        psvg_label(f, p.x0 + 4, p.y0 + 14, "start", "panel", "font-weight=\"bold\" paint-order=\"stroke\" stroke=\"white\" stroke-width=\"3\"",
                   k == 0 ? "median" : "p90");
        if (slo_ttft_ns > 0) {
            char lab[48], ms[32];
            psvg_ms_label(ms, sizeof ms, (double)slo_ttft_ns / 1e6);
            snprintf(lab, sizeof lab, "TTFT SLO %s", ms);
            psvg_refline(&p, 0, (double)slo_ttft_ns / 1e6, lab, p.x0 + 4, NULL);
        }
        for (int pi = 0; pi < np; pi++) {
            int open = 0;
            for (int b = 0; b < MAXB; b++) {
                double v = k == 0 ? med[pi][b] : p90[pi][b];
                if (v < 0) continue;
                if (!open) {
                    psvg_polyline_open(f, k == 0 ? "median" : "p90", pols[pi], pi, 2);
                    open = 1;
                }
                psvg_point(f, psvg_x(&p, pow(2, b + 0.5)), psvg_y(&p, v));
            }
            if (open) psvg_polyline_close(f);
        }
    }
    psvg_legend(f, W - mr + 12, mt + 18, np, pols, 0);
    psvg_end(f);
    rc = kv_atomic_commit(&af, e);
done:
    free(s);
    pcsv_free(&t);
    return rc;
}
