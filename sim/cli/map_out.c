/* map_out.c — what `kvsim map` shows and writes: the table (text and Markdown), the break-even
 * lines, map.json, map.csv, map.md and the heat map (map.svg); see map.h and docs/formats.md. */
#include "sim/cli/map.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/plot_svg.h"
#include "sim/cli/map_int.h"

static void fmt_ms(char *buf, size_t n, double s)
{
    double ms = s * 1e3, a = fabs(ms);
    if (!isfinite(ms)) snprintf(buf, n, "–");
    else if (a >= 100) snprintf(buf, n, "%.0f", ms);
    else if (a >= 10) snprintf(buf, n, "%.1f", ms);
    else snprintf(buf, n, "%.2f", ms);
}

static void cell_text(const MapCtx *x, const Cell *c, char *buf, size_t n)
{
    char m[32], ci[32], fl[32];
    fmt_ms(m, sizeof m, c->margin);
    if (isfinite(c->ci)) fmt_ms(ci, sizeof ci, c->ci);
    else snprintf(ci, sizeof ci, "–");
    if (isfinite(c->flip)) snprintf(fl, sizeof fl, "%.0f%%", 100 * c->flip);
    else snprintf(fl, sizeof fl, "–");
    char w[200] = "";
    for (int i = 0; i < c->ntied; i++) kv_catf(w, sizeof w, "%s%s", i ? "=" : "", x->pol[c->tied[i]]);
    snprintf(buf, n, "%s > %s +%s±%s ms flip %s", w, x->pol[c->run], m, ci, fl);
}

static void load_text(double l, char *buf, size_t n)
{
    if (l > 0) snprintf(buf, n, "%g sessions/s", l);
    else snprintf(buf, n, "isolated");
}

void map_print_table(FILE *f, const MapCtx *x, const Cell *cells, int md)
{
    for (int li = 0; li < x->nl; li++) {
        char lt[64];
        load_text(x->load[li], lt, sizeof lt);
        int wid[MAP_MAX_V];
        for (int v = 0; v < x->nv; v++) { /* a column as wide as its widest cell (bytes) */
            char t[256];
            snprintf(t, sizeof t, "%s=%s", x->axis, x->val[v]);
            wid[v] = (int)strlen(t);
            for (int hi = 0; hi < x->nh; hi++) {
                cell_text(x, &cells[(li * x->nh + hi) * x->nv + v], t, sizeof t);
                if ((int)strlen(t) > wid[v]) wid[v] = (int)strlen(t);
            }
        }
        if (md) {
            fprintf(f, "\n### Load: %s\n\n| history |", lt);
            for (int v = 0; v < x->nv; v++) fprintf(f, " %s=%s |", x->axis, x->val[v]);
            fprintf(f, "\n|---|");
            for (int v = 0; v < x->nv; v++) fprintf(f, "---|");
            fputc('\n', f);
        } else {
            fprintf(f, "\nload: %s (cell: fastest > runner-up, margin ± 95%% interval over seeds, flip probability)\n", lt);
            fprintf(f, "%-8s", "history");
            for (int v = 0; v < x->nv; v++) {
                char h[160];
                snprintf(h, sizeof h, "%s=%s", x->axis, x->val[v]);
                if (v + 1 < x->nv) fprintf(f, "  %-*s", wid[v], h);
                else fprintf(f, "  %s", h);
            }
            fputc('\n', f);
        }
        for (int hi = 0; hi < x->nh; hi++) {
            char h[32];
            map_fmt_tokens(h, sizeof h, x->hist[hi]);
            fprintf(f, md ? "| %s |" : "%-8s", h);
            for (int v = 0; v < x->nv; v++) {
                char t[256];
                cell_text(x, &cells[(li * x->nh + hi) * x->nv + v], t, sizeof t);
                /* ± is two bytes, one column: the padding counts bytes, so every cell is off by the same one */
                if (md) fprintf(f, " %s |", t);
                else if (v + 1 < x->nv) fprintf(f, "  %-*s", wid[v], t);
                else fprintf(f, "  %s", t);
            }
            fputc('\n', f);
        }
    }
}

static void be_text(const MapCtx *x, const BeLine *be, int v, const BePoint *p, char *buf, size_t n)
{
    (void)be;
    char h[32];
    map_fmt_tokens(h, sizeof h, p->at);
    snprintf(buf, n, "%s=%s: break-even %s|%s at %s tokens (%s faster below)", x->axis, x->val[v], map_family_name(p->fa),
             map_family_name(p->fb), h, map_family_name(p->lower));
}

void map_print_be(FILE *f, const MapCtx *x, const BeLine *be, int md)
{
    char h0[32], h1[32];
    map_fmt_tokens(h0, sizeof h0, 64);
    map_fmt_tokens(h1, sizeof h1, x->be_max);
    fprintf(f, md ? "\n### Break-even lines\n\n" : "\n");
    fprintf(f, "break-even history lengths between the families (the fastest member of each; one isolated request, new input %lld "
               "tokens, searched over %s..%s):\n",
            (long long)x->new_tokens, h0, h1);
    if (md) fputc('\n', f);
    for (int v = 0; v < x->nv; v++) {
        int any = 0;
        for (int i = 0; i < be[v].n; i++) {
            char t[300];
            be_text(x, &be[v], v, &be[v].p[i], t, sizeof t);
            fprintf(f, md ? "- %s\n" : "  %s\n", t);
            any = 1;
        }
        if (!any) fprintf(f, md ? "- %s=%s: no break-even in range (the order of the families does not change)\n"
                                : "  %s=%s: no break-even in range (the order of the families does not change)\n",
                          x->axis, x->val[v]);
        if (be[v].reach > 0) {
            char r[32];
            map_fmt_tokens(r, sizeof r, be[v].reach);
            fprintf(f, md ? "- %s=%s: searched up to %s only: a longer history does not fit the KV pool (its request is dropped)\n"
                          : "  %s=%s: searched up to %s only: a longer history does not fit the KV pool (its request is dropped)\n",
                    x->axis, x->val[v], r);
        }
    }
}

/* ---------------------------------------------------------------- files */

int map_write_json(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *model, const char *platform,
                      const char *spread, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "kvsim map");
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "platform", platform);
    cJSON_AddStringToObject(o, "store", x->store[0] ? x->store : "as configured");
    cJSON *ax = cJSON_AddObjectToObject(o, "vary");
    cJSON_AddStringToObject(ax, "key", x->axis);
    cJSON *vals = cJSON_AddArrayToObject(ax, "values"), *set = cJSON_AddArrayToObject(ax, "set");
    for (int v = 0; v < x->nv; v++) {
        cJSON_AddItemToArray(vals, cJSON_CreateString(x->val[v]));
        cJSON_AddItemToArray(set, cJSON_CreateString(x->res[v]));
    }
    cJSON *hs = cJSON_AddArrayToObject(o, "history_tokens");
    for (int h = 0; h < x->nh; h++) cJSON_AddItemToArray(hs, cJSON_CreateNumber((double)x->hist[h]));
    cJSON *ls = cJSON_AddArrayToObject(o, "loads");
    for (int l = 0; l < x->nl; l++) cJSON_AddItemToArray(ls, cJSON_CreateNumber(x->load[l]));
    cJSON *ps = cJSON_AddArrayToObject(o, "policies");
    for (int i = 0; i < x->np; i++) cJSON_AddItemToArray(ps, cJSON_CreateString(x->pol[i]));
    cJSON_AddNumberToObject(o, "seeds", x->seeds);
    cJSON_AddNumberToObject(o, "seed", (double)x->seed_base);
    cJSON_AddNumberToObject(o, "requests", x->requests);
    cJSON_AddNumberToObject(o, "requests_under_load", x->requests_load);
    cJSON_AddNumberToObject(o, "new_input_tokens", (double)x->new_tokens);
    cJSON_AddNumberToObject(o, "draws", x->draws);
    cJSON_AddNumberToObject(o, "band", x->spread_store ? 0 : x->band);
    cJSON_AddStringToObject(o, "cost_uncertainty", spread);
    cJSON *cs = cJSON_AddArrayToObject(o, "cells");
    for (int li = 0; li < x->nl; li++)
        for (int hi = 0; hi < x->nh; hi++)
            for (int v = 0; v < x->nv; v++) {
                const Cell *c = &cells[(li * x->nh + hi) * x->nv + v];
                cJSON *j = cJSON_CreateObject();
                cJSON_AddNumberToObject(j, "history_tokens", (double)x->hist[hi]);
                cJSON_AddStringToObject(j, "value", x->val[v]);
                cJSON_AddNumberToObject(j, "load", x->load[li]);
                cJSON_AddStringToObject(j, "winner", x->pol[c->win]);
                cJSON *tj = cJSON_AddArrayToObject(j, "tied_with_winner");
                for (int i = 1; i < c->ntied; i++) cJSON_AddItemToArray(tj, cJSON_CreateString(x->pol[c->tied[i]]));
                if (c->run >= 0) cJSON_AddStringToObject(j, "runner_up", x->pol[c->run]);
                else cJSON_AddNullToObject(j, "runner_up");
                if (isfinite(c->margin)) cJSON_AddNumberToObject(j, "margin_s", c->margin);
                else cJSON_AddNullToObject(j, "margin_s");
                if (isfinite(c->ci)) cJSON_AddNumberToObject(j, "margin_ci95_s", c->ci);
                else cJSON_AddNullToObject(j, "margin_ci95_s");
                if (isfinite(c->flip)) cJSON_AddNumberToObject(j, "flip_probability", c->flip);
                else cJSON_AddNullToObject(j, "flip_probability");
                cJSON *t = cJSON_AddObjectToObject(j, "ttft_mean_s");
                for (int i = 0; i < x->np; i++) cJSON_AddNumberToObject(t, x->pol[i], c->mean[i]);
                cJSON_AddItemToArray(cs, j);
            }
    cJSON *bs = cJSON_AddArrayToObject(o, "break_even");
    for (int v = 0; v < x->nv; v++)
        for (int i = 0; i < be[v].n; i++) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "value", x->val[v]);
            cJSON_AddStringToObject(j, "a", map_family_name(be[v].p[i].fa));
            cJSON_AddStringToObject(j, "b", map_family_name(be[v].p[i].fb));
            cJSON_AddNumberToObject(j, "history_tokens", (double)be[v].p[i].at);
            cJSON_AddStringToObject(j, "faster_below", map_family_name(be[v].p[i].lower));
            cJSON_AddItemToArray(bs, j);
        }
    cJSON *reach = cJSON_AddObjectToObject(o, "break_even_searched_up_to");
    for (int v = 0; v < x->nv; v++) cJSON_AddNumberToObject(reach, x->val[v], (double)(be[v].reach > 0 ? be[v].reach : x->be_max));
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return kv_err(e, "out of memory");
    char path[4400];
    snprintf(path, sizeof path, "%s/map.json", dir);
    size_t len = strlen(text);
    char *t2 = realloc(text, len + 2);
    if (!t2) {
        free(text);
        return kv_err(e, "out of memory");
    }
    t2[len] = '\n';
    t2[len + 1] = '\0';
    int rc = kv_write_atomic(path, t2, len + 1, e);
    free(t2);
    return rc;
}

/* DIR/NAME opened aside (kv_atomic_open), renamed into place by kv_atomic_commit */
static int open_aside(KvAtomicFile *af, const char *dir, const char *name, KvErr *e)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return kv_atomic_open(af, path, e);
}

int map_write_csv(const char *dir, const MapCtx *x, const Cell *cells, KvErr *e)
{
    KvAtomicFile af;
    if (open_aside(&af, dir, "map.csv", e) != 0) return -1;
    FILE *f = af.f;
    fprintf(f, "history_tokens,value,load,winner,runner_up,margin_s,margin_ci95_s,flip_probability");
    for (int i = 0; i < x->np; i++) fprintf(f, ",ttft_mean_s.%s", x->pol[i]);
    fputc('\n', f);
    for (int li = 0; li < x->nl; li++)
        for (int hi = 0; hi < x->nh; hi++)
            for (int v = 0; v < x->nv; v++) {
                const Cell *c = &cells[(li * x->nh + hi) * x->nv + v];
                fprintf(f, "%lld,", (long long)x->hist[hi]);
                kv_csv_field(f, x->val[v]);
                fprintf(f, ",%.17g,%s,%s,", x->load[li], x->pol[c->win], c->run >= 0 ? x->pol[c->run] : "");
                if (isfinite(c->margin)) fprintf(f, "%.9f", c->margin);
                fputc(',', f);
                if (isfinite(c->ci)) fprintf(f, "%.9f", c->ci);
                fputc(',', f);
                if (isfinite(c->flip)) fprintf(f, "%.4f", c->flip);
                for (int i = 0; i < x->np; i++) fprintf(f, ",%.9f", c->mean[i]);
                fputc('\n', f);
            }
    return kv_atomic_commit(&af, e);
}

/* the heat map: per load a panel, rows the histories (log scale), columns the resource values, a
 * cell's colour its fastest policy, its text the margin; the break-even points of each column as
 * short horizontal lines at their history length, labelled with the two families */
int map_write_svg(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *title, KvErr *e)
{
    KvAtomicFile af;
    if (open_aside(&af, dir, "map.svg", e) != 0) return -1;
    FILE *f = af.f;
    const int cw = 150, ch = 34, left = 90, top = 60;
    int pw = cw * x->nv, ph = ch * x->nh;
    /* the legend's entries: a policy that wins somewhere, with those tied with it wherever it wins
     * (identical runs) */
    char legend[MAP_MAX_POL][300];
    double legend_w = 160;
    for (int i = 0; i < x->np; i++) {
        legend[i][0] = '\0';
        int wins = 0;
        for (int c = 0; c < n_cells(x); c++) wins += cells[c].win == i;
        if (!wins) continue;
        snprintf(legend[i], sizeof legend[i], "%s", x->pol[i]);
        for (int j = 0; j < x->np; j++) {
            int always = j != i;
            for (int c = 0; always && c < n_cells(x); c++) {
                if (cells[c].win != i) continue;
                int in = 0;
                for (int k = 0; k < cells[c].ntied; k++) in |= cells[c].tied[k] == j;
                always = in;
            }
            if (always) kv_catf(legend[i], sizeof legend[i], " = %s", x->pol[j]);
        }
        double lw = 40 + psvg_text_width(legend[i], 12);
        if (lw > legend_w) legend_w = lw;
    }
    int width = left + pw + (int)legend_w + 20, height = top + x->nl * (ph + 60) + 16 * (x->nv + 1) + 20;
    psvg_begin(f, width, height, title);
    for (int li = 0; li < x->nl; li++) {
        int y0 = top + li * (ph + 60);
        char lt[64], head[96];
        load_text(x->load[li], lt, sizeof lt);
        snprintf(head, sizeof head, "load: %s", lt);
        psvg_label(f, left, y0 - 8, "start", NULL, "", head);
        for (int hi = 0; hi < x->nh; hi++) {
            double yy = y0 + ph - (hi + 1) * ch; /* the shortest history at the bottom */
            char h[32];
            map_fmt_tokens(h, sizeof h, x->hist[hi]);
            psvg_label(f, left - 6, yy + ch / 2.0 + 4, "end", NULL, "", h);
            for (int v = 0; v < x->nv; v++) {
                const Cell *c = &cells[(li * x->nh + hi) * x->nv + v];
                double xx = left + v * cw;
                fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\"/>\n", (int)xx, yy, cw, ch,
                        psvg_fill(c->win));
                char m[32], t[64];
                fmt_ms(m, sizeof m, c->margin);
                if (isfinite(c->flip)) snprintf(t, sizeof t, "+%s ms, flip %.0f%%", m, 100 * c->flip);
                else snprintf(t, sizeof t, "+%s ms", m);
                psvg_label(f, xx + cw / 2.0, yy + ch / 2.0 + 4, "middle", NULL, "font-size=\"11\"", t);
            }
        }
        for (int v = 0; v < x->nv; v++) {
            char t[160];
            snprintf(t, sizeof t, "%s=%s", x->axis, x->val[v]);
            psvg_label(f, left + v * cw + cw / 2.0, y0 + ph + 16, "middle", NULL, "", t);
            /* break-even lines (isolated requests: drawn on the isolated panels), inside the grid's
             * histories: the row position interpolated in log history between rows */
            for (int i = 0; x->load[li] == 0 && i < be[v].n; i++) {
                int64_t at = be[v].p[i].at;
                if (at < x->hist[0] || at > x->hist[x->nh - 1]) continue;
                double pos = x->nh - 1;
                for (int hi = 0; hi + 1 < x->nh; hi++)
                    if (at >= x->hist[hi] && at <= x->hist[hi + 1]) {
                        pos = hi + log((double)at / (double)x->hist[hi]) / log((double)x->hist[hi + 1] / (double)x->hist[hi]);
                        break;
                    }
                double yy = y0 + ph - (pos + 0.5) * ch, xa = left + v * cw;
                fprintf(f, "<line class=\"break-even\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\" stroke-width=\"2\" "
                           "stroke-dasharray=\"6 3\"/>\n",
                        xa, yy, xa + cw, yy);
                char lb[96];
                snprintf(lb, sizeof lb, "%s|%s", map_family_name(be[v].p[i].fa), map_family_name(be[v].p[i].fb));
                psvg_label(f, xa + 3, yy - 3, "start", NULL, "font-size=\"9\"", lb);
            }
        }
    }
    /* every break-even point as text under the panels, those outside the grid's histories too */
    int ty = top + x->nl * (ph + 60) + 4;
    psvg_label(f, left, ty, "start", NULL, "font-size=\"11\"", "break-even history lengths (one isolated request):");
    for (int v = 0; v < x->nv; v++) {
        char t[1200];
        snprintf(t, sizeof t, "%s=%s:", x->axis, x->val[v]);
        for (int i = 0; i < be[v].n; i++) {
            char h[32];
            map_fmt_tokens(h, sizeof h, be[v].p[i].at);
            kv_catf(t, sizeof t, "%s %s|%s at %s", i ? "," : "", map_family_name(be[v].p[i].fa), map_family_name(be[v].p[i].fb), h);
        }
        if (!be[v].n) kv_catf(t, sizeof t, " none in range");
        psvg_label(f, left, ty + 16 * (v + 1), "start", NULL, "font-size=\"11\"", t);
    }
    /* the legend: one swatch per policy that wins somewhere */
    int ly = top;
    psvg_label(f, left + pw + 16, ly - 8, "start", NULL, "", "fastest policy");
    for (int i = 0; i < x->np; i++) {
        if (!legend[i][0]) continue;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", left + pw + 16, ly, psvg_fill(i));
        psvg_label(f, left + pw + 36, ly + 12, "start", NULL, "", legend[i]);
        ly += 20;
    }
    psvg_label(f, left + pw + 16, ly + 16, "start", NULL, "font-size=\"10\"", "dashed: break-even history");
    psvg_end(f);
    return kv_atomic_commit(&af, e);
}

int map_write_md(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *head, KvErr *e)
{
    KvAtomicFile af;
    if (open_aside(&af, dir, "map.md", e) != 0) return -1;
    fprintf(af.f, "# Decision map\n\n%s", head);
    map_print_table(af.f, x, cells, 1);
    map_print_be(af.f, x, be, 1);
    return kv_atomic_commit(&af, e);
}
