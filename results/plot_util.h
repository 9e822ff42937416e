/* plot_util.h — utilisation over time: utilisation.csv (written from a run's SimUtilSeries) and
 * utilisation.svg (drawn from that file).
 *
 * utilisation.csv, one row per policy × resource × window (tidy): [seed,]policy,resource,
 * window_start_s,window_end_s,utilisation — utilisation = busy time in the window / (its length ×
 * replicas), in [0, 1] (definition in sim.h, SimUtilSeries). Resources: gpu, h2d, d2h (per stage
 * s > 0: gpu_s1, ...), ssd, nic_in, nic_out where the platform has them.
 * utilisation.svg: one panel per resource (time in s against utilisation 0–1), a line per policy
 * in plot_svg's styles, the legend beside the first panel; under replications the first seed.
 *
 * Responsible for: the file's header and rows, the figure. Not responsible for: measuring (the
 * engine's metrics.c), the result set (the caller names the paths).
 * Invariants: deterministic text (%.6f); values outside [0, 1] are an error when drawing.
 * Complexity: O(rows) to write and to draw.
 */
#ifndef KV_PLOT_UTIL_H
#define KV_PLOT_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "sim/engine/sim.h"

void plot_util_csv_header(FILE *f, int seed_col);
void plot_util_csv_rows(FILE *f, const SimUtilSeries *u, const char *policy, int seed_col, uint64_t seed);
/* utilisation.svg at path from the utilisation.csv at csv */
int plot_util_svg(const char *path, const char *csv, const char *title, KvErr *e);

#endif
