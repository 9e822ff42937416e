/* plot_svg.h — the one SVG toolkit every figure of results/plot*.c draws with: the document, panels
 * with their axes (linear or log, ticks, grid, labels with units), the series styles, the legend,
 * reference lines and escaped text.
 *
 * Responsible for: geometry (a panel maps data to pixels; y grows upward), "nice" axis ends and
 * ticks (linear: 1/2/2.5/5 × 10^k steps; log: whole decades, minor lines at 2..9, labelled at 2 and
 * 5 when the axis spans at most three decades and minor labels are asked for), one tick-label
 * format (1, 10, 1k, 25k, 1M; 0.5, 0.05 below one; never an exponent), a style per series that stays
 * distinct for any number of series (8 hues × a dash pattern per round of 8: solid, then ever
 * different dash arrays) and a fill colour per category, the legend in a column outside the data,
 * XML escaping.
 * Not responsible for: what a figure shows (plot.c, plot_util.c, plot_history.c, plot_timeline.c,
 * plot_sweep.c), writing files atomically (the callers use kv_atomic_open).
 * Invariants: deterministic text (coordinates with one decimal, values with fixed formats); no
 * "nan"/"inf" is ever written (non-finite values are clamped to the axis ends).
 * Complexity: O(ticks) per axis, O(entries) per legend.
 */
#ifndef KV_PLOT_SVG_H
#define KV_PLOT_SVG_H

#include <stddef.h>
#include <stdio.h>

typedef struct PlotAxis {
    int log;          /* log10 scale (lo, hi > 0) */
    double lo, hi;    /* the ends shown (data units) */
    double step;      /* linear: the tick step */
    int minor_labels; /* log: label the 2 and 5 minors when <= 3 decades */
    int no_ticks;     /* neither grid nor tick labels (bars labelled by category) */
    int no_tick_labels; /* x: the grid without labels (a panel above another on the same axis) */
    const char *label;/* with its unit: "TTFT (ms, log scale)" */
} PlotAxis;

typedef struct PlotPanel {
    FILE *f;
    int x0, y0, w, h; /* the data area in px: top-left corner and size */
    PlotAxis x, y;
} PlotPanel;

/* A linear axis over [lo, hi] rounded out to a step near (hi − lo) / ticks; lo == hi widens it. */
void psvg_axis_linear(PlotAxis *a, double lo, double hi, int ticks, const char *label);
/* A log axis over whole decades covering [lo, hi] (lo clamped to >= floor). */
void psvg_axis_log(PlotAxis *a, double lo, double hi, double floor, const char *label);

/* <svg ...> with a white background and the title at the top left; </svg>. The canvas is widened
 * to hold the title when it is longer than width. */
void psvg_begin(FILE *f, int width, int height, const char *title);
void psvg_end(FILE *f);
/* s escaped for XML text and attributes */
void psvg_text(FILE *f, const char *s);
/* <text> at (x, y); anchor "start"|"middle"|"end"; cls may be NULL; extra: more attributes or "" */
void psvg_label(FILE *f, double x, double y, const char *anchor, const char *cls, const char *extra, const char *s);

/* Set up a panel; psvg_axes draws its grid, ticks, tick labels, frame and the axis labels. */
void psvg_panel(PlotPanel *p, FILE *f, int x0, int y0, int w, int h, const PlotAxis *x, const PlotAxis *y);
void psvg_axes(const PlotPanel *p);
/* data → px (clamped to the panel; values <= 0 on a log axis go to its low end) */
double psvg_x(const PlotPanel *p, double v);
double psvg_y(const PlotPanel *p, double v);
/* A vertical (vertical = 1, at x = v) or horizontal reference line across the panel, dashed
 * black, with a label (class "slo" when cls is NULL) at `at` along the line (px) */
void psvg_refline(const PlotPanel *p, int vertical, double v, const char *label, double at, const char *cls);

/* The style of series i: a colour ("#rrggbb") and an SVG stroke-dasharray ("" for solid). No two
 * i < 8 × 1000 share both. */
void psvg_style(int i, const char **color, char *dash, size_t dash_len);
/* A fill colour for category i (bars, lanes, heat-map legends): 10 distinct hues, cycling. */
const char *psvg_fill(int i);
/* ` stroke="..." stroke-width="w"[ stroke-dasharray="..."]` of series i */
void psvg_stroke_attrs(FILE *f, int i, double width);
/* <polyline class="cls" data-series="name" fill="none" {style i} points=" ... the caller writes
 * "x,y " pairs (psvg_point) and closes with psvg_polyline_close. */
void psvg_polyline_open(FILE *f, const char *cls, const char *name, int i, double width);
void psvg_point(FILE *f, double x, double y);
/* x as printf's "%.1f" writes it (the same characters: exact rounding, ties to even, "-0.0"),
 * into buf (≥ 24 bytes) for |x| < 1e14; returns its length, or -1 for any other x (nothing written) */
int psvg_fmt1(char *buf, double x);
void psvg_polyline_close(FILE *f);
/* The width in px that s takes in the figures' sans-serif font at size px: an estimate from the
 * characters' classes (narrow, wide, capitals, the rest) that errs on the wide side, so that text
 * laid out by it is never cut by the canvas edge. UTF-8: one character per code point. */
double psvg_text_width(const char *s, double px);

/* The legend's layout: entries 18 px apart in columns of at most `rows` entries (as many as fit the
 * height it was given, at least one), every column as wide as the longest entry. w, h: its size. */
typedef struct PlotLegend {
    int n, kind, rows, cols, col_w, w, h;
    const int *style; /* entry i drawn in series style style[i] (NULL: style i); set after psvg_legend_fit */
} PlotLegend;
/* Lay out n entries within max_h px of height (<= 0: one column); kind as psvg_legend's. */
void psvg_legend_fit(PlotLegend *L, int n, const char *const *names, int kind, int max_h);
/* Draw a laid-out legend with its top-left corner at (x, y). */
void psvg_legend_draw(FILE *f, const PlotLegend *L, int x, int y, const char *const *names);
/* The legend: a column at (x, y), one entry per name, 18 px apart; kind 0: a line in the series'
 * style (class "legend"), 1: a filled swatch of psvg_fill(i) (class "legend-swatch"). */
void psvg_legend(FILE *f, int x, int y, int n, const char *const *names, int kind);
/* one legend entry: a swatch of `fill` at (x, y) (its vertical centre) and the name after it */
void psvg_swatch(FILE *f, int x, double y, const char *fill, const char *name);

/* The tick formatter: 1000 → "1k", 25000 → "25k", 1e6 → "1M", 0.05 → "0.05", 200 → "200". */
void psvg_tick_label(char *buf, size_t len, double v);
/* ms as "200 ms" or "1.5 s" */
void psvg_ms_label(char *buf, size_t len, double ms);

#endif
