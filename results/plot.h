/* plot.h — SVG figures of a comparison: the TTFT CDF of every policy (log-scale time axis).
 * Deterministic text (fixed-precision coordinates), written atomically. */
#ifndef KV_PLOT_H
#define KV_PLOT_H

#include "sim/engine/sim.h"

int plot_ttft_cdf_svg(const char *path, const SimResult *res, int n, const char *title, KvErr *e);

#endif
