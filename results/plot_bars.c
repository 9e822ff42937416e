/* plot_bars.c — grouped bars with whiskers; see plot_bars.h. */
#include "results/plot_bars.h"

#include <math.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

/* index of s in names[0..*n), appended when absent; -1 when full */
static int name_index(const char **names, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], s)) return i;
    if (*n >= PLOT_BARS_MAX) return -1;
    names[*n] = s;
    return (*n)++;
}

int plot_bars(const char *csv, const char *svg_path, const char *title, const char *ylabel, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, csv, e) != 0) return -1;
    static const char *const need[] = {"group", "series", "value", "halfwidth"};
    int c[4], rc = -1;
    const char *groups[PLOT_BARS_MAX], *series[PLOT_BARS_MAX];
    int ng = 0, ns = 0;
    static double val[PLOT_BARS_MAX][PLOT_BARS_MAX], hw[PLOT_BARS_MAX][PLOT_BARS_MAX];
    static int have[PLOT_BARS_MAX][PLOT_BARS_MAX];
    memset(have, 0, sizeof have);
    double hi = 0;
    if (pcsv_cols(&t, need, 4, c, e) != 0) goto done;
    if (t.nrows == 0) {
        kv_err(e, "%s: no rows after the header", csv);
        goto done;
    }
    for (int r = 0; r < t.nrows; r++) {
        int g = name_index(groups, &ng, pcsv_cell(&t, r, c[0])), s = name_index(series, &ns, pcsv_cell(&t, r, c[1]));
        if (g < 0 || s < 0) {
            kv_err(e, "%s: line %d: more than %d groups or series", csv, r + 2, PLOT_BARS_MAX);
            goto done;
        }
        double v, h;
        if (pcsv_num(&t, r, c[2], &v, e) != 0 || pcsv_num(&t, r, c[3], &h, e) != 0) goto done;
        if (!isfinite(v)) {
            kv_err(e, "%s: line %d: value: expected a number, got '%s'", csv, r + 2, pcsv_cell(&t, r, c[2]));
            goto done;
        }
        if (!isfinite(h) || h < 0) h = 0;
        val[g][s] = v;
        hw[g][s] = h;
        have[g][s] = 1;
        if (v + h > hi) hi = v + h;
    }
    PlotAxis x, y;
    memset(&x, 0, sizeof x);
    x.lo = 0, x.hi = ng, x.no_ticks = 1, x.label = "";
    psvg_axis_linear(&y, 0, hi > 0 ? hi : 1, 5, ylabel ? ylabel : "value");
    int ml = 76, mr = 170, mt = 44, gw = 40 + 22 * ns, pw = ng * gw, ph = 300;
    int W = ml + pw + mr, H = mt + ph + 60;
    KvAtomicFile af;
    if (kv_atomic_open(&af, svg_path, e) != 0) goto done;
    FILE *f = af.f;
    PlotPanel p;
    psvg_begin(f, W, H, title ? title : "");
    psvg_panel(&p, f, ml, mt, pw, ph, &x, &y);
    psvg_axes(&p);
    double y0 = psvg_y(&p, 0);
    for (int g = 0; g < ng; g++) {
        double gx = ml + g * gw + 20;
        psvg_label(f, ml + g * gw + gw / 2.0, mt + ph + 18, "middle", "xtick", "", groups[g]);
        for (int s = 0; s < ns; s++) {
            if (!have[g][s]) continue;
            double bx = gx + 22 * s, yv = psvg_y(&p, val[g][s]);
            fprintf(f, "<rect class=\"bar\" data-group=\"");
            psvg_text(f, groups[g]);
            fprintf(f, "\" data-series=\"");
            psvg_text(f, series[s]);
            fprintf(f, "\" data-value=\"%.3f\" x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"%.1f\" fill=\"%s\"/>\n", val[g][s], bx, yv,
                    y0 - yv, psvg_fill(s));
            if (hw[g][s] > 0) {
                double ya = psvg_y(&p, val[g][s] - hw[g][s]), yb = psvg_y(&p, val[g][s] + hw[g][s]);
                fprintf(f, "<path class=\"ci\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke=\"#000\" fill=\"none\"/>\n",
                        bx + 9, ya, yb, bx + 5, ya, bx + 13, bx + 5, yb, bx + 13);
            }
        }
    }
    psvg_legend(f, ml + pw + 16, mt + 10, ns, series, 1);
    psvg_end(f);
    if (kv_atomic_commit(&af, e) != 0) goto done;
    rc = 0;
done:
    pcsv_free(&t);
    return rc;
}
