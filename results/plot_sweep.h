/* plot_sweep.h — figures of a sweep, drawn from its tidy CSV (kvsim sweep --csv: point, one
 * column per setting, policy, metric, value; a row per point × policy × metric):
 *   slo_vs_load.svg     SLO attainment (metric slo_attainment) against the setting x, a line per
 *                       series (the policy, and the other settings that vary, "policy, k=v"), y 0–1;
 *   metric_vs_load.svg  the same for another metric (when one is asked for);
 *   heatmap.svg         the metric over x × y, a panel per policy, a cell per (x, y) coloured on
 *                       one scale (its value written in it; the mean when other settings vary too).
 * Settings that read as numbers are ordered numerically, others in first-appearance order.
 * Metric names: as in the CSV ("ttft_s.p99") or with '_' for "_s." and '.' ("ttft_p99").
 *
 * Responsible for: grouping, the figures. Not responsible for: the sweep or its database
 * (sim/cli/sweep.c exports the CSV).
 * Complexity: O(rows × distinct values).
 */
#ifndef KV_PLOT_SWEEP_H
#define KV_PLOT_SWEEP_H

#include "sim/base/util.h"

typedef struct PlotSweepSpec {
    const char *csv;     /* the tidy CSV */
    const char *out_dir; /* where the figures go */
    const char *x, *y;   /* settings (columns); y NULL: no heat map */
    const char *metric;  /* NULL: slo_attainment */
    const char *title;   /* NULL: "sweep" */
} PlotSweepSpec;

/* The figures; *written gets their names ("slo_vs_load.svg, heatmap.svg"). */
int plot_sweep(const PlotSweepSpec *s, char *written, size_t wlen, KvErr *e);

#endif
