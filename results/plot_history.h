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

#define PLOT_HISTORY_MAXP 64

/* The figure's input: one sample per request (its policy's index, its history tokens, its TTFT in
 * seconds), the policies in the order they first appear (at most PLOT_HISTORY_MAXP; later ones
 * are not drawn). */
typedef struct PlotHistSample {
    int pol;
    double hist, ttft_s;
} PlotHistSample;

typedef struct PlotHistSamples {
    int np;
    const char *pols[PLOT_HISTORY_MAXP]; /* not owned: the strings outlive the set */
    size_t n, cap;
    PlotHistSample *v;
} PlotHistSamples;

/* policy's index, appended when new; -1 when PLOT_HISTORY_MAXP are already there */
int phist_policy(PlotHistSamples *s, const char *policy);
/* one request; -1 when out of memory */
int phist_push(PlotHistSamples *s, int pi, double history_tokens, double ttft_s);
void phist_free(PlotHistSamples *s);

/* from requests.csv (its policy, history_tokens and ttft_s columns) */
int plot_history_svg(const char *path, const char *requests_csv, const char *title, int64_t slo_ttft_ns, KvErr *e);
/* from samples: the same figure the file of the same requests gives */
int plot_history_svg_of(const char *path, const PlotHistSamples *s, const char *title, int64_t slo_ttft_ns, KvErr *e);

#endif
