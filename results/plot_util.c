/* plot_util.c — see plot_util.h. */
#include "results/plot_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

void plot_util_csv_header(FILE *f, int seed_col)
{
    fputs(seed_col ? "seed," : "", f);
    fputs("policy,resource,window_start_s,window_end_s,utilisation\n", f);
}

/* each row formatted in a buffer (kv_app_*: the text "%llu", "%.9f" and "%.6f" print) and written
 * at once; the policy and resource names are short, a longer one goes out on its own */
void plot_util_csv_rows(FILE *f, const SimUtilSeries *u, const char *policy, int seed_col, uint64_t seed)
{
    char lead[64], *l = lead; /* the seed column */
    if (seed_col) {
        l = kv_app_u64(l, seed);
        *l++ = ',';
    }
    size_t nl = (size_t)(l - lead);
    for (int r = 0; r < u->n_res; r++) {
        size_t rl = strlen(u->names[r]);
        for (int k = 0; k < u->n_windows; k++) {
            int64_t a = (int64_t)k * u->window_ns, b = a + u->window_ns < u->end_ns ? a + u->window_ns : u->end_ns;
            char buf[1100], *p = buf;
            fwrite(lead, 1, nl, f);
            kv_csv_field(f, policy);
            *p++ = ',';
            if (rl > 256) {
                fwrite(buf, 1, 1, f);
                fputs(u->names[r], f);
                p = buf;
            } else {
                memcpy(p, u->names[r], rl);
                p += rl;
            }
            *p++ = ',';
            p = kv_app_fixed(p, (double)a / 1e9, 9);
            *p++ = ',';
            p = kv_app_fixed(p, (double)b / 1e9, 9);
            *p++ = ',';
            p = kv_app_fixed(p, u->util[(size_t)r * u->n_windows + k], 6);
            *p++ = '\n';
            fwrite(buf, 1, (size_t)(p - buf), f);
        }
    }
}

#define MAXN 64

typedef struct UtilRow {
    int pol, res;      /* indices into the figure's policies and resources; -1: another seed's row */
    double mid, u;     /* the window's middle (s) and its utilisation */
} UtilRow;

/* the index of s in list (appended when new and there is room); -1 when full */
static int intern(const char **list, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(list[i], s)) return i;
    if (*n == MAXN) return -1;
    list[*n] = s;
    return (*n)++;
}

int plot_util_svg(const char *path, const char *csv, const char *title, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, csv, e) != 0) return -1;
    static const char *const need[] = {"policy", "resource", "window_start_s", "window_end_s", "utilisation"};
    int c[5], cs = pcsv_col(&t, "seed");
    const char *pols[MAXN], *ress[MAXN];
    int np = 0, nr = 0, rc = -1;
    double tmax = 0;
    /* each row read once: its series (policy and resource indices; -1: not drawn) and its point */
    UtilRow *row = NULL;
    if (pcsv_cols(&t, need, 5, c, e) != 0) goto done;
    if (!(row = malloc(sizeof *row * (size_t)(t.nrows > 0 ? t.nrows : 1)))) {
        kv_err(e, "%s: out of memory", csv);
        goto done;
    }
    const char *seed0 = cs >= 0 && t.nrows ? pcsv_cell(&t, 0, cs) : NULL;
    for (int r = 0; r < t.nrows; r++) {
        row[r].pol = row[r].res = -1;
        if (seed0 && strcmp(pcsv_cell(&t, r, cs), seed0)) continue;
        double a, b, u;
        if (pcsv_num(&t, r, c[2], &a, e) || pcsv_num(&t, r, c[3], &b, e) || pcsv_num(&t, r, c[4], &u, e)) goto done;
        if (!isfinite(a) || !isfinite(b)) {
            kv_err(e, "%s: row %d: window %s to %s, expected two finite times in seconds", csv, r + 2, pcsv_cell(&t, r, c[2]),
                   pcsv_cell(&t, r, c[3]));
            goto done;
        }
        if (!(u >= 0 && u <= 1)) {
            kv_err(e, "%s: row %d: utilisation %g, expected a value in [0, 1]", csv, r + 2, u);
            goto done;
        }
        if (b > tmax) tmax = b;
        row[r].pol = intern(pols, &np, pcsv_cell(&t, r, c[0]));
        row[r].res = intern(ress, &nr, pcsv_cell(&t, r, c[1]));
        row[r].mid = (a + b) / 2;
        row[r].u = u;
    }
    int ml = 72, pw = 508, mt = 44, ph = 96, gap = 34;
    int H = mt + nr * (ph + gap) + 30;
    if (nr == 0) H = mt + ph + 60;
    PlotLegend lg; /* beside the panels, in as many columns as their height needs */
    psvg_legend_fit(&lg, np, pols, 0, H - mt - 40);
    int W = ml + pw + 12 + lg.w + 8;
    PlotAxis x, y;
    psvg_axis_linear(&x, 0, tmax > 0 ? tmax : 1, 6, NULL);
    psvg_axis_linear(&y, 0, 1, 2, "busy (0–1)");
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) goto done;
    FILE *f = af.f;
    char full[600];
    snprintf(full, sizeof full, "Utilisation over time — %s%s", title, seed0 ? " (first seed)" : "");
    psvg_begin(f, W, H, full);
    for (int k = 0; k < nr; k++) {
        PlotPanel p;
        x.label = k == nr - 1 ? "simulated time (s)" : NULL;
        psvg_panel(&p, f, ml, mt + k * (ph + gap), pw, ph, &x, &y);
        psvg_axes(&p);
        char lab[64];
        snprintf(lab, sizeof lab, "%s busy share", ress[k]);
        psvg_label(f, ml, p.y0 - 6, "start", "panel", "font-weight=\"bold\"", lab);
        for (int pi = 0; pi < np; pi++) {
            int open = 0;
            for (int r = 0; r < t.nrows; r++) {
                if (row[r].pol != pi || row[r].res != k) continue;
                if (!open) {
                    char nm[200];
                    snprintf(nm, sizeof nm, "%s/%s", pols[pi], ress[k]);
                    psvg_polyline_open(f, "util", nm, pi, 1.6);
                    open = 1;
                }
                psvg_point(f, psvg_x(&p, row[r].mid), psvg_y(&p, row[r].u));
            }
            if (open) psvg_polyline_close(f);
        }
    }
    if (nr == 0) psvg_label(f, ml, mt + 40, "start", NULL, "", "no resource was recorded");
    psvg_legend_draw(f, &lg, ml + pw + 12, mt + 10, pols);
    psvg_end(f);
    rc = kv_atomic_commit(&af, e);
done:
    free(row);
    pcsv_free(&t);
    return rc;
}
