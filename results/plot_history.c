/* plot_history.c — see plot_history.h. The quantile of a bin is its sorted sample's value at rank
 * floor(q × (n − 1)) (the nearest-rank convention of a box plot, no interpolation). */
#include "results/plot_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

#define MAXP PLOT_HISTORY_MAXP
#define MAXB 40

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void phist_free(PlotHistSamples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

int phist_policy(PlotHistSamples *s, const char *policy)
{
    int pi = 0;
    while (pi < s->np && strcmp(s->pols[pi], policy)) pi++;
    if (pi == s->np) {
        if (s->np == PLOT_HISTORY_MAXP) return -1;
        s->pols[s->np++] = policy;
    }
    return pi;
}

int phist_push(PlotHistSamples *s, int pi, double history_tokens, double ttft_s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4096;
        PlotHistSample *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (PlotHistSample){pi, history_tokens, ttft_s};
    return 0;
}

int plot_history_svg(const char *path, const char *requests_csv, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, requests_csv, e) != 0) return -1;
    static const char *const need[] = {"policy", "history_tokens", "ttft_s"};
    int c[3], rc = -1;
    PlotHistSamples s;
    memset(&s, 0, sizeof s);
    if (pcsv_cols(&t, need, 3, c, e) != 0) goto done;
    for (int r = 0; r < t.nrows; r++) {
        double h, ttft;
        if (pcsv_num(&t, r, c[1], &h, e) || pcsv_num(&t, r, c[2], &ttft, e)) goto done;
        int pi = phist_policy(&s, pcsv_cell(&t, r, c[0]));
        if (pi >= 0 && phist_push(&s, pi, h, ttft) != 0) {
            kv_err(e, "%s: out of memory", requests_csv);
            goto done;
        }
    }
    rc = plot_history_svg_of(path, &s, title, slo_ttft_ns, e);
done:
    phist_free(&s);
    pcsv_free(&t);
    return rc;
}

int plot_history_svg_of(const char *path, const PlotHistSamples *hs, const char *title, int64_t slo_ttft_ns, KvErr *e)
{
    int rc = -1, np = hs->np;
    uint64_t no_hist = 0;
    const char *const *pols = hs->pols;
    /* the samples grouped by (policy, bin) with a counting sort, each group then sorted by TTFT:
     * key[r] is sample r's group (-1: not shown) */
    int *key = NULL;
    double *s = NULL;
    int start[MAXP * MAXB + 1];
    double med[MAXP][MAXB], p90[MAXP][MAXB];
    size_t nr = hs->n > 0 ? hs->n : 1;
    key = malloc(sizeof *key * nr), s = malloc(sizeof *s * nr);
    if (!key || !s) {
        kv_err(e, "out of memory");
        goto done;
    }
    memset(start, 0, sizeof start);
    double ymin = 1e300, ymax = 0;
    int bmax = 0;
    for (size_t r = 0; r < hs->n; r++) {
        double h = hs->v[r].hist;
        key[r] = -1;
        if (!(h >= 1)) {
            no_hist++;
            continue;
        }
        int b = (int)floor(log2(h));
        if (b >= MAXB) b = MAXB - 1;
        if (b > bmax) bmax = b;
        key[r] = hs->v[r].pol * MAXB + b;
        start[key[r] + 1]++;
    }
    for (int g = 0; g < MAXP * MAXB; g++) start[g + 1] += start[g];
    for (size_t r = 0; r < hs->n; r++) /* each group's samples in order; start[g] then ends group g */
        if (key[r] >= 0) s[start[key[r]]++] = hs->v[r].ttft_s * 1e3;
    int bmin = MAXB;
    for (int p = 0; p < np; p++)
        for (int b = 0; b < MAXB; b++) med[p][b] = p90[p][b] = -1;
    for (int g = 0, i = 0; g < MAXP * MAXB; g++) {
        int n = start[g] - i, pi = g / MAXB, b = g % MAXB;
        if (n >= PLOT_HISTORY_MIN) {
            qsort(s + i, (size_t)n, sizeof *s, cmp_double);
            med[pi][b] = s[i + (int)floor(0.5 * (n - 1))];
            p90[pi][b] = s[i + (int)floor(0.9 * (n - 1))];
            if (med[pi][b] < ymin) ymin = med[pi][b];
            if (p90[pi][b] > ymax) ymax = p90[pi][b];
            if (b < bmin) bmin = b;
        }
        i = start[g];
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
    int ml = 76, mt = 56, gap = 40, H = 430, ph = H - mt - 58, pw = 307;
    PlotLegend lg; /* beside the two panels, in as many columns as their height needs */
    psvg_legend_fit(&lg, np, pols, 0, ph - 18);
    int W = ml + 2 * pw + gap + 12 + lg.w + 8;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) goto done;
    FILE *f = af.f;
    char full[700];
    snprintf(full, sizeof full, "TTFT against history — %s", title);
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
    psvg_legend_draw(f, &lg, ml + 2 * pw + gap + 12, mt + 18, pols);
    psvg_end(f);
    rc = kv_atomic_commit(&af, e);
done:
    free(key);
    free(s);
    return rc;
}
