/* plot_svg.c — see plot_svg.h. */
#include "results/plot_svg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim/base/util.h"

static const char *g_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
#define N_COLORS ((int)KV_ARRAY_LEN(g_colors))
static const char *g_fills[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac"};

void psvg_style(int i, const char **color, char *dash, size_t dash_len)
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

const char *psvg_fill(int i) { return g_fills[(i < 0 ? 0 : i) % (int)KV_ARRAY_LEN(g_fills)]; }

void psvg_tick_label(char *buf, size_t len, double v)
{
    static const char *si[] = {"", "k", "M", "G", "T", "P"};
    if (!(v > 0)) {
        if (v < 0) {
            char b[64];
            psvg_tick_label(b, sizeof b, -v);
            snprintf(buf, len, "−%s", b);
            return;
        }
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

void psvg_ms_label(char *buf, size_t len, double ms)
{
    char b[32];
    if (ms >= 1000) {
        psvg_tick_label(b, sizeof b, ms / 1000);
        snprintf(buf, len, "%s s", b);
    } else {
        psvg_tick_label(b, sizeof b, ms);
        snprintf(buf, len, "%s ms", b);
    }
}

void psvg_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

void psvg_label(FILE *f, double x, double y, const char *anchor, const char *cls, const char *extra, const char *s)
{
    fputs("<text", f);
    if (cls) fprintf(f, " class=\"%s\"", cls);
    fprintf(f, " x=\"%.1f\" y=\"%.1f\"", x, y);
    if (anchor && strcmp(anchor, "start")) fprintf(f, " text-anchor=\"%s\"", anchor);
    if (extra && *extra) fprintf(f, " %s", extra);
    fputc('>', f);
    psvg_text(f, s);
    fputs("</text>\n", f);
}

double psvg_text_width(const char *s, double px)
{
    double em = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: the code point is counted once */
        if (c >= 0x80) em += 0.8;         /* ≤, ±, −, ×, letters with accents: the widest class */
        else if (strchr("iljtfI.,:;'!|() ", (int)c)) em += 0.34;
        else if (strchr("mwMW@%", (int)c)) em += 0.92;
        else if (c >= 'A' && c <= 'Z') em += 0.72;
        else em += 0.62;
    }
    return em * px;
}

void psvg_begin(FILE *f, int width, int height, const char *title)
{
    int need = 16 + (int)ceil(psvg_text_width(title, 14)) + 16;
    if (need > width) width = need;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            width, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    fputs("<text x=\"16\" y=\"22\" font-size=\"14\">", f);
    psvg_text(f, title);
    fputs("</text>\n", f);
}

void psvg_end(FILE *f) { fputs("</svg>\n", f); }

/* a step of 1, 2, 2.5 or 5 × 10^k near raw */
static double nice_step(double raw)
{
    if (!(raw > 0) || !isfinite(raw)) return 1;
    double p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

void psvg_axis_linear(PlotAxis *a, double lo, double hi, int ticks, const char *label)
{
    memset(a, 0, sizeof *a);
    if (!isfinite(lo) || !isfinite(hi)) lo = 0, hi = 1;
    if (hi < lo) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    if (hi == lo) hi = lo + (lo != 0 ? fabs(lo) * 0.5 : 1);
    a->step = nice_step((hi - lo) / (ticks > 0 ? ticks : 5));
    a->lo = floor(lo / a->step + 1e-9) * a->step;
    a->hi = ceil(hi / a->step - 1e-9) * a->step;
    if (a->hi <= a->lo) a->hi = a->lo + a->step;
    a->label = label;
}

void psvg_axis_log(PlotAxis *a, double lo, double hi, double floor_v, const char *label)
{
    memset(a, 0, sizeof *a);
    if (!(lo > 0) || !isfinite(lo)) lo = floor_v > 0 ? floor_v : 1;
    if (floor_v > 0 && lo < floor_v) lo = floor_v;
    if (!(hi > lo) || !isfinite(hi)) hi = lo * 10;
    double d0 = floor(log10(lo) + 1e-9), d1 = ceil(log10(hi) - 1e-9);
    if (d1 <= d0) d1 = d0 + 1;
    a->log = 1;
    a->lo = pow(10, d0);
    a->hi = pow(10, d1);
    a->label = label;
}

void psvg_panel(PlotPanel *p, FILE *f, int x0, int y0, int w, int h, const PlotAxis *x, const PlotAxis *y)
{
    p->f = f;
    p->x0 = x0;
    p->y0 = y0;
    p->w = w;
    p->h = h;
    p->x = *x;
    p->y = *y;
}

/* the fraction of the axis at v, in [0, 1] */
static double frac(const PlotAxis *a, double v)
{
    double r;
    if (a->log) {
        if (!(v > 0)) return 0;
        r = (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    } else {
        r = (v - a->lo) / (a->hi - a->lo);
    }
    if (!isfinite(r)) return v > 0 ? 1 : 0;
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

double psvg_x(const PlotPanel *p, double v) { return p->x0 + frac(&p->x, v) * p->w; }
double psvg_y(const PlotPanel *p, double v) { return p->y0 + p->h - frac(&p->y, v) * p->h; }

/* one tick at v on axis `which` (0 x, 1 y): grid line and, when labelled, the label */
static void tick(const PlotPanel *p, int which, double v, const char *stroke, int labelled, const char *fill)
{
    FILE *f = p->f;
    const PlotAxis *a = which == 0 ? &p->x : &p->y;
    char lab[32];
    psvg_tick_label(lab, sizeof lab, !a->log && fabs(v) < 1e-9 * a->step ? 0 : v); /* (0, not 1e-17) */
    if (which == 0) {
        double x = psvg_x(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n", x, p->y0, x, p->y0 + p->h, stroke);
        if (labelled && !a->no_tick_labels)
            fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\"%s%s%s>%s</text>\n", x, p->y0 + p->h + 16,
                    fill ? " fill=\"" : "", fill ? fill : "", fill ? "\"" : "", lab);
    } else {
        double y = psvg_y(p, v);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"/>\n", p->x0, y, p->x0 + p->w, y, stroke);
        if (labelled)
            fprintf(f, "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\"%s%s%s>%s</text>\n", p->x0 - 6, y + 4,
                    fill ? " fill=\"" : "", fill ? fill : "", fill ? "\"" : "", lab);
    }
}

static void axis_ticks(const PlotPanel *p, int which)
{
    const PlotAxis *a = which == 0 ? &p->x : &p->y;
    if (a->no_ticks) return;
    if (!a->log) {
        int n = (int)llround((a->hi - a->lo) / a->step);
        for (int k = 0; k <= n && k <= 1000; k++) tick(p, which, a->lo + k * a->step, "#ccc", 1, NULL);
        return;
    }
    double d0 = log10(a->lo), d1 = log10(a->hi);
    int decades = (int)llround(d1 - d0);
    /* more than 8 decades: label every other one */
    int every = decades > 8 ? 2 : 1;
    for (int k = 0; k <= decades; k++) {
        double v = pow(10, d0 + k);
        tick(p, which, v, "#ccc", k % every == 0, NULL);
        if (k == decades) break;
        for (int m = 2; m <= 9; m++) /* minor lines at 2..9 × the decade */
            tick(p, which, m * v, "#eee", a->minor_labels && decades <= 3 && (m == 2 || m == 5), "#555");
    }
}

void psvg_axes(const PlotPanel *p)
{
    FILE *f = p->f;
    axis_ticks(p, 0);
    axis_ticks(p, 1);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", p->x0, p->y0, p->w, p->h);
    if (p->x.label) psvg_label(f, p->x0 + p->w / 2.0, p->y0 + p->h + 36, "middle", "xlabel", "", p->x.label);
    if (p->y.label) {
        char tr[96];
        double yc = p->y0 + p->h / 2.0, xc = p->x0 - 52;
        snprintf(tr, sizeof tr, "transform=\"rotate(-90 %.1f %.1f)\"", xc, yc);
        psvg_label(f, xc, yc, "middle", "ylabel", tr, p->y.label);
    }
}

void psvg_refline(const PlotPanel *p, int vertical, double v, const char *label, double at, const char *cls)
{
    FILE *f = p->f;
    const char *c = cls ? cls : "slo";
    double x1, y1, x2, y2;
    if (vertical) x1 = x2 = psvg_x(p, v), y1 = p->y0, y2 = p->y0 + p->h;
    else y1 = y2 = psvg_y(p, v), x1 = p->x0, x2 = p->x0 + p->w;
    fprintf(f, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n",
            c, x1, y1, x2, y2);
    if (!label) return;
    const char *halo = "font-size=\"11\" paint-order=\"stroke\" stroke=\"white\" stroke-width=\"3\"";
    if (vertical && x1 > p->x0 + 0.75 * p->w) psvg_label(f, x1 - 4, at, "end", c, halo, label); /* near the right edge: inside */
    else if (vertical) psvg_label(f, x1 + 4, at, "start", c, halo, label);
    else psvg_label(f, at, y1 - 4, "start", c, halo, label);
}

void psvg_stroke_attrs(FILE *f, int i, double width)
{
    const char *col;
    char dash[32];
    psvg_style(i, &col, dash, sizeof dash);
    fprintf(f, " stroke=\"%s\" stroke-width=\"%g\"", col, width);
    if (dash[0]) fprintf(f, " stroke-dasharray=\"%s\"", dash);
}

void psvg_polyline_open(FILE *f, const char *cls, const char *name, int i, double width)
{
    fprintf(f, "<polyline class=\"%s\" data-series=\"", cls);
    psvg_text(f, name);
    fputs("\" fill=\"none\"", f);
    psvg_stroke_attrs(f, i, width);
    fputs(" points=\"", f);
}

int psvg_fmt1(char *buf, double x)
{
    /* 10x exactly is t + err (the product's rounding error, exact by fma); |t| < 2^50, so t − n
     * is exact and a half-integer is on t's grid: only a t of exactly n ± 0.5 can round otherwise
     * than t does, and err decides it (none: the tie goes to the even n, as printf's does) */
    if (!(fabs(x) < 1e14)) return -1;
    double t = x * 10.0, err = fma(x, 10.0, -t), n = nearbyint(t), r = t - n;
    if (r == 0.5 && err > 0) n += 1;
    else if (r == -0.5 && err < 0) n -= 1;
    uint64_t m = (uint64_t)fabs(n);
    char tmp[24];
    int k = 0;
    tmp[k++] = (char)('0' + m % 10);
    tmp[k++] = '.';
    m /= 10;
    do tmp[k++] = (char)('0' + m % 10), m /= 10;
    while (m);
    int len = 0;
    if (signbit(x)) buf[len++] = '-'; /* printf's sign: "-0.0" for a negative x that rounds to 0 */
    while (k) buf[len++] = tmp[--k];
    buf[len] = '\0';
    return len;
}

void psvg_point(FILE *f, double x, double y)
{
    char b[72];
    int n = psvg_fmt1(b, x), m = n < 0 ? -1 : psvg_fmt1(b + n + 1, y);
    if (m < 0) { /* a coordinate of 1e14 or more, inf or nan */
        fprintf(f, "%.1f,%.1f ", x, y);
        return;
    }
    b[n] = ',';
    b[n + 1 + m] = ' ';
    fwrite(b, 1, (size_t)(n + m + 2), f);
}
void psvg_polyline_close(FILE *f) { fputs("\"/>\n", f); }

void psvg_legend_fit(PlotLegend *L, int n, const char *const *names, int kind, int max_h)
{
    double widest = 0;
    for (int i = 0; i < n; i++) {
        double w = psvg_text_width(names[i], 12);
        if (w > widest) widest = w;
    }
    L->n = n < 0 ? 0 : n;
    L->kind = kind;
    L->style = NULL;
    L->rows = max_h > 0 ? max_h / 18 : L->n;
    if (L->rows < 1) L->rows = 1;
    if (L->rows > L->n) L->rows = L->n > 0 ? L->n : 1;
    L->cols = L->n > 0 ? (L->n + L->rows - 1) / L->rows : 0;
    L->rows = L->cols > 0 ? (L->n + L->cols - 1) / L->cols : 0; /* columns filled evenly */
    L->col_w = (kind == 0 ? 38 : 20) + (int)ceil(widest) + 16;
    L->w = L->cols * L->col_w;
    L->h = L->rows * 18;
}

void psvg_legend_draw(FILE *f, const PlotLegend *L, int x, int y, const char *const *names)
{
    for (int i = 0; i < L->n; i++) {
        int cx = x + (i / L->rows) * L->col_w;
        double ly = y + (i % L->rows) * 18;
        if (L->kind == 0) {
            fprintf(f, "<line class=\"legend\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"", cx, ly, cx + 32, ly);
            psvg_stroke_attrs(f, L->style ? L->style[i] : i, 2.5);
            fputs("/>\n", f);
            psvg_label(f, cx + 38, ly + 4, "start", NULL, "", names[i]);
        } else {
            psvg_swatch(f, cx, ly, psvg_fill(i), names[i]);
        }
    }
}

void psvg_legend(FILE *f, int x, int y, int n, const char *const *names, int kind)
{
    for (int i = 0; i < n; i++) {
        double ly = y + i * 18;
        if (kind == 0) {
            fprintf(f, "<line class=\"legend\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"", x, ly, x + 32, ly);
            psvg_stroke_attrs(f, i, 2.5);
            fputs("/>\n", f);
            psvg_label(f, x + 38, ly + 4, "start", NULL, "", names[i]);
        } else {
            psvg_swatch(f, x, ly, psvg_fill(i), names[i]);
        }
    }
}

void psvg_swatch(FILE *f, int x, double y, const char *fill, const char *name)
{
    fprintf(f, "<rect class=\"legend-swatch\" x=\"%d\" y=\"%.1f\" width=\"14\" height=\"12\" fill=\"%s\"/>\n", x, y - 6, fill);
    psvg_label(f, x + 20, y + 4, "start", NULL, "", name);
}
