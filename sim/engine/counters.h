/* counters.h — counts of a run, one row each: a row declares the SimResult field (sim.h) and is
 * the metric table's row (results/metric.c: summary.json at its path, the sweep's column, plan
 * targets), so a new count is its row here and the `sm->res->FIELD += n` where it happens. A count
 * of the measured requests only (left out under warm-up and cool-down) goes through a metrics_on_*
 * hook instead (sim/engine/metrics.h).
 *
 * X(field, path, help): path the metric's name and summary.json's place ("saved_state.promoted").
 * Rows in the sweep columns' order. */
#ifndef KVSIM_COUNTERS_H
#define KVSIM_COUNTERS_H

#define SIM_COUNTER_ROWS(X)                                                                                            \
    X(promoted, "saved_state.promoted",                                                                                \
      "promote=true: sessions' states moved up to the first tier after a restoration read them")                      \
    X(prefetched, "saved_state.prefetched",                                                                            \
      "prefetch=true: sessions' states moved up to the first tier ahead of their session's next turn")

#endif
