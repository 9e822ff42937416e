/* plot.h — SVG figures of a comparison, made to be read at a glance:
 *   ttft_cdf.svg   the TTFT CDF of every policy (log-scale time axis, linear 0–1 fraction);
 *   ttft_ccdf.svg  the tail: 1 − F on a log axis (down to one request in the run), so p99 and p99.9
 *                  stand apart instead of sharing the top pixels of the CDF;
 *   ttft_split.svg the mean TTFT of each policy as a stacked bar: queue + restore + prefill.
 * The first two draw the TTFT objective (slo_ttft) as a vertical line when it is set. The figures
 * drawn from the result files (utilisation, TTFT against history, the timeline, sweeps) are in
 * plot_util.h, plot_history.h, plot_timeline.h and plot_sweep.h; axes and styles in plot_svg.h.
 *
 * Responsible for: these figures' geometry; plot_style / plot_tick_label are plot_svg's (kept for
 * callers of this header).
 * Not responsible for: rendering to PNG (`make figures`), metrics (they come from the histograms).
 * Invariants: deterministic text (fixed-precision coordinates), written atomically.
 * Complexity: O(policies × 200 quantiles) per figure.
 */
#ifndef KV_PLOT_H
#define KV_PLOT_H

#include <stddef.h>

#include "sim/engine/sim.h"

/* The figures' file names, in the order plot_write_figures writes them: "ttft_cdf.svg, ttft_ccdf.svg, ttft_split.svg". */
const char *plot_file_list(void);
/* Write every figure into dir. slo_ttft_ns <= 0: no SLO line. */
int plot_write_figures(const char *dir, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e);

int plot_ttft_cdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e);
int plot_ttft_ccdf_svg(const char *path, const SimResult *res, int n, const char *title, int64_t slo_ttft_ns, KvErr *e);
int plot_ttft_split_svg(const char *path, const SimResult *res, int n, const char *title, KvErr *e);

/* The style of the i-th policy: a colour ("#rrggbb") and an SVG stroke-dasharray ("" for solid).
 * No two i < 8 × 1000 share both. */
void plot_style(int i, const char **color, char *dash, size_t dash_len);
/* The axis tick formatter: 1000 → "1k", 25000 → "25k", 1e6 → "1M", 0.05 → "0.05", 200 → "200". */
void plot_tick_label(char *buf, size_t len, double v);

#endif
