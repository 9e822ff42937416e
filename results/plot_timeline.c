/* plot_timeline.c — see plot_timeline.h. */
#include "results/plot_timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_csv.h"
#include "results/plot_svg.h"

void plot_timeline_csv_header(FILE *f, int seed_col)
{
    fputs(seed_col ? "seed," : "", f);
    fputs("policy,request,replica,history_tokens,layers,lane,stage,layer,what,start_ms,end_ms\n", f);
}

static void row(FILE *f, const SimTimeline *t, const char *policy, int seed_col, uint64_t seed, const char *lane, int stage,
                int layer, const char *what, int64_t t0, int64_t t1)
{
    if (seed_col) fprintf(f, "%llu,", (unsigned long long)seed);
    kv_csv_field(f, policy);
    fprintf(f, ",%llu,%d,%lld,%d,%s,%d,%d,%s,%.6f,%.6f\n", (unsigned long long)t->request, t->replica, (long long)t->history_tokens,
            t->layers, lane, stage, layer, what, (double)(t0 - t->arrival_ns) / 1e6, (double)(t1 - t->arrival_ns) / 1e6);
}

void plot_timeline_csv_rows(FILE *f, const SimTimeline *t, const char *policy, int seed_col, uint64_t seed)
{
    if (!t->found) return;
    row(f, t, policy, seed_col, seed, "event", 0, -1, "admitted", t->admit_ns, t->admit_ns);
    for (int i = 0; i < t->n; i++) {
        const SimTlSpan *s = &t->spans[i];
        row(f, t, policy, seed_col, seed, s->lane, s->stage, s->layer, s->what, s->t0_ns, s->t1_ns);
    }
    if (t->restored_ns > t->admit_ns) row(f, t, policy, seed_col, seed, "event", 0, -1, "restored", t->restored_ns, t->restored_ns);
    row(f, t, policy, seed_col, seed, "event", 0, -1, "first token", t->first_ns, t->first_ns);
}

/* the colours: IO by channel, GPU by what it computes */
static const struct {
    const char *key, *fill;
} k_colors[] = {
    {"h2d", "#4e79a7"}, {"ssd", "#9c755f"}, {"nic_in", "#e15759"}, {"d2h", "#bab0ac"}, {"nic_out", "#ff9da7"},
    {"recompute", "#f28e2b"}, {"prefill", "#59a14f"}, {"recompute+prefill", "#edc948"}, {"projection+prefill", "#b07aa1"},
};

static const char *color_of(const char *key)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(k_colors); i++)
        if (!strncmp(key, k_colors[i].key, strlen(k_colors[i].key)) &&
            (!key[strlen(k_colors[i].key)] || key[strlen(k_colors[i].key)] == '_'))
            return k_colors[i].fill;
    return "#888";
}

typedef struct Group {
    int first, last; /* rows of one (seed, policy, request) */
    int layers;
    double tmax;
} Group;

int plot_timeline_svg(const char *path, const char *csv, const char *title, KvErr *e)
{
    PlotCsv t;
    if (pcsv_read(&t, csv, e) != 0) return -1;
    static const char *const need[] = {"policy", "request", "layers", "lane", "layer", "what", "start_ms", "end_ms", "history_tokens"};
    enum { C_POL, C_REQ, C_LAYERS, C_LANE, C_LAYER, C_WHAT, C_T0, C_T1, C_HIST };
    int c[9], cs = pcsv_col(&t, "seed"), rc = -1;
    Group g[32];
    int ng = 0;
    if (pcsv_cols(&t, need, 9, c, e) != 0) goto done;
    for (int r = 0; r < t.nrows; r++) {
        double v;
        if (pcsv_num(&t, r, c[C_T0], &v, e) || pcsv_num(&t, r, c[C_T1], &v, e) || pcsv_num(&t, r, c[C_LAYER], &v, e) ||
            pcsv_num(&t, r, c[C_LAYERS], &v, e))
            goto done;
        int same = ng > 0 && !strcmp(pcsv_cell(&t, r, c[C_POL]), pcsv_cell(&t, g[ng - 1].first, c[C_POL])) &&
                   !strcmp(pcsv_cell(&t, r, c[C_REQ]), pcsv_cell(&t, g[ng - 1].first, c[C_REQ])) &&
                   (cs < 0 || !strcmp(pcsv_cell(&t, r, cs), pcsv_cell(&t, g[ng - 1].first, cs)));
        if (!same) {
            if (ng == (int)KV_ARRAY_LEN(g)) break;
            g[ng++] = (Group){r, r, (int)v, 0};
        }
        Group *cur = &g[ng - 1];
        cur->last = r;
        double t1 = strtod(pcsv_cell(&t, r, c[C_T1]), NULL);
        if (t1 > cur->tmax) cur->tmax = t1;
    }
    int W = 900, ml = 72, mr = 170, mt = 40, pw = W - ml - mr;
    int heights[32], H = mt;
    for (int k = 0; k < ng; k++) {
        int L = g[k].layers > 0 ? g[k].layers : 1;
        int rh = 240 / L;
        if (rh < 3) rh = 3;
        if (rh > 10) rh = 10;
        heights[k] = rh;
        H += 28 + 2 * L * rh + 24 + 54;
    }
    if (ng == 0) H += 80;
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) goto done;
    FILE *f = af.f;
    char full[600];
    snprintf(full, sizeof full, "Restoration timeline — %s", title);
    psvg_begin(f, W, H, full);
    if (ng == 0) psvg_label(f, ml, mt + 40, "start", NULL, "", "no request restored anything in this run (no timeline)");
    int y = mt;
    for (int k = 0; k < ng; k++) {
        Group *gr = &g[k];
        int L = gr->layers > 0 ? gr->layers : 1, rh = heights[k], bh = L * rh;
        char head[300];
        char seed[64] = ""; /* under replications a timeline per policy and seed: say which */
        if (cs >= 0) snprintf(seed, sizeof seed, ", seed %s", pcsv_cell(&t, gr->first, cs));
        snprintf(head, sizeof head, "%s%s: request %s, %s history tokens, %d layers", pcsv_cell(&t, gr->first, c[C_POL]), seed,
                 pcsv_cell(&t, gr->first, c[C_REQ]), pcsv_cell(&t, gr->first, c[C_HIST]), L);
        psvg_label(f, ml, y + 18, "start", "panel", "font-weight=\"bold\"", head);
        y += 28;
        PlotAxis x, ya;
        psvg_axis_linear(&x, 0, gr->tmax > 0 ? gr->tmax : 1, 8, NULL);
        psvg_axis_linear(&ya, 0, L, 4, NULL);
        ya.no_ticks = 1;
        PlotPanel io, gpu;
        psvg_panel(&io, f, ml, y, pw, bh, &x, &ya);
        x.label = "time since the request's release (ms)";
        psvg_panel(&gpu, f, ml, y + bh + 24, pw, bh, &x, &ya);
        x.label = NULL;
        io.x.no_tick_labels = 1; /* the GPU block below carries the time labels */
        psvg_axes(&io);
        psvg_axes(&gpu);
        psvg_label(f, ml - 8, y + 10, "end", "lane", "font-size=\"11\"", "IO");
        psvg_label(f, ml - 8, y + 24, "end", "lane", "font-size=\"10\" fill=\"#555\"", "layer 0");
        psvg_label(f, ml - 8, y + bh, "end", "lane", "font-size=\"10\" fill=\"#555\"", "last");
        psvg_label(f, ml - 8, y + bh + 34, "end", "lane", "font-size=\"11\"", "GPU");
        psvg_label(f, ml - 8, y + bh + 48, "end", "lane", "font-size=\"10\" fill=\"#555\"", "layer 0");
        psvg_label(f, ml - 8, y + 2 * bh + 24, "end", "lane", "font-size=\"10\" fill=\"#555\"", "last");
        const char *lanes_seen[16];
        int nl = 0, n_ev = 0;
        for (int r = gr->first; r <= gr->last; r++) {
            const char *lane = pcsv_cell(&t, r, c[C_LANE]), *what = pcsv_cell(&t, r, c[C_WHAT]);
            double t0 = strtod(pcsv_cell(&t, r, c[C_T0]), NULL), t1 = strtod(pcsv_cell(&t, r, c[C_T1]), NULL);
            int layer = atoi(pcsv_cell(&t, r, c[C_LAYER]));
            if (!strcmp(lane, "event")) {
                double ex = psvg_x(&io, t0);
                fprintf(f, "<line class=\"event\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" stroke-dasharray=\"4,3\"/>\n", ex,
                        y, ex, y + 2 * bh + 24);
                psvg_label(f, ex + 3, y + bh + (n_ev++ % 2 ? 22 : 12), "start", "event", /* alternate rows: close events stay legible */ "font-size=\"10\" paint-order=\"stroke\" stroke=\"white\" stroke-width=\"3\"", what);
                continue;
            }
            int is_gpu = !strcmp(lane, "gpu");
            const PlotPanel *p = is_gpu ? &gpu : &io;
            const char *fill = color_of(is_gpu ? what : lane);
            double xa = psvg_x(p, t0), xb = psvg_x(p, t1);
            if (xb - xa < 0.6) xb = xa + 0.6; /* a short span stays visible */
            double ry = layer >= 0 ? p->y0 + layer * rh : p->y0, rhh = layer >= 0 ? rh - (rh > 4 ? 1 : 0) : bh;
            fprintf(f, "<rect class=\"%s\" data-lane=\"%s\" data-what=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s/>\n",
                    is_gpu ? "compute" : "io", lane, what, xa, ry, xb - xa, rhh, fill, layer < 0 ? " fill-opacity=\"0.35\"" : "");
            const char *key = is_gpu ? what : lane;
            int seen = 0;
            for (int i = 0; i < nl && !seen; i++) seen = !strcmp(lanes_seen[i], key);
            if (!seen && nl < 16) lanes_seen[nl++] = key;
        }
        for (int i = 0; i < nl; i++) psvg_swatch(f, ml + pw + 14, y + 8 + i * 18, color_of(lanes_seen[i]), lanes_seen[i]);
        y += 2 * bh + 24 + 54;
    }
    psvg_end(f);
    rc = kv_atomic_commit(&af, e);
done:
    pcsv_free(&t);
    return rc;
}
