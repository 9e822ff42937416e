/* plot_history.h — TTFT against history length, drawn from requests.csv (ttft_history.svg): the
 * requests of each policy with a history binned by history tokens (bins a factor of two wide, on
 * powers of two), and per bin of at least PLOT_HISTORY_MIN requests the median TTFT (left panel)
 * and the p90 (right panel), a line per policy in plot_svg's styles; both axes log. Requests
 * without history (first turns) are counted in the title, not drawn. Under replications every
 * seed's requests are pooled. An SLO line (slo_ttft_ns > 0) is drawn across both panels.
 *
 * Responsible for: binning and the figure. Not responsible for: requests.csv (report.c).
 * Complexity: O(rows log rows) (a sort per policy).
 */
#ifndef KV_PLOT_HISTORY_H
#define KV_PLOT_HISTORY_H

#include <stdint.h>

#include "sim/base/util.h"

#define PLOT_HISTORY_MIN 5

int plot_history_svg(const char *path, const char *requests_csv, const char *title, int64_t slo_ttft_ns, KvErr *e);

#endif
