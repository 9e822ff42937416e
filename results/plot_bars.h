/* plot_bars.h — a grouped bar chart with 95 % interval whiskers from a tidy CSV (kvsim plot --bars).
 *
 * Responsible for: reading the CSV (columns group, series, value, halfwidth; other columns ignored;
 * groups and series in the order they first appear), drawing one cluster of bars per group, one bar
 * per series in psvg_fill(series) with a whisker of ± halfwidth, the legend of the series, and
 * writing the SVG atomically. Not responsible for: computing the values (the CSV's producer, e.g.
 * tools/findings_tables.py fair_csv), the SVG toolkit (plot_svg.c).
 * Invariants: deterministic text; a missing (group, series) pair leaves its slot empty; at most
 * PLOT_BARS_MAX groups and series each (more is an error naming the file).
 * Complexity: O(rows · (groups + series)).
 */
#ifndef KV_PLOT_BARS_H
#define KV_PLOT_BARS_H

#include "sim/base/util.h"

#define PLOT_BARS_MAX 32

/* csv → svg_path; title and ylabel may be NULL (defaults "" / "value"). */
int plot_bars(const char *csv, const char *svg_path, const char *title, const char *ylabel, KvErr *e);

#endif
