/* plot_timeline.h — one request's restoration, layer by layer: timeline.csv (from a run's
 * SimTimeline) and timeline.svg (drawn from that file) — the picture of HCache and CacheFlow: which
 * layer's state is moving on which link, which layer the GPU computes, and the bubbles between.
 *
 * timeline.csv, one row per span: [seed,]policy,request,replica,history_tokens,layers,lane,stage,
 * layer,what,start_ms,end_ms — times in ms since the request's release; lane "gpu" (what:
 * recompute, prefill, recompute+prefill: the layer of an iteration carrying its work) or a channel
 * (h2d, ssd, nic_in, ...; what: kv, hidden, tokens: one hop of one of its loads); layer -1: every
 * layer (a token-wise chunk, the stage-parallel lanes). Lane "event" rows mark admitted, restored
 * and first token (start = end).
 * timeline.svg: per policy a panel of two blocks over the same time axis — IO (a row per layer,
 * coloured by channel) above GPU (a row per layer, coloured by what it computes), vertical lines at
 * the events; a GPU row empty while an IO row is busy is a bubble.
 *
 * Responsible for: the rows, the figure. Not responsible for: recording (metrics.c), choosing the
 * request (SimRunOpts.timeline_request; the slowest restoration by default).
 * Complexity: O(spans) to write and to draw.
 */
#ifndef KV_PLOT_TIMELINE_H
#define KV_PLOT_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "sim/engine/sim.h"

void plot_timeline_csv_header(FILE *f, int seed_col);
void plot_timeline_csv_rows(FILE *f, const SimTimeline *t, const char *policy, int seed_col, uint64_t seed);
int plot_timeline_svg(const char *path, const char *csv, const char *title, KvErr *e);

#endif
