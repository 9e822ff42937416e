/* plot_trace.h — a run's events as a Chrome trace (JSON, the Trace Event Format that
 * chrome://tracing, Perfetto's ui.perfetto.dev and speedscope open).
 *
 * Layout: a process per (run, replica) named "<policy>[ seed S] · replica R"; in it thread 0
 * "iterations" (a complete event "X" per iteration: args items, tokens, steps) and a thread per
 * channel ("h2d stage 0", "ssd", "nic_in", ...: an "X" per transfer hop: args request, layer,
 * bytes; name load / load_tok / save / spill); counters ("C") "queue depth", "restoring" and "kv
 * pool tokens" per replica. ts and dur in µs of simulated time (three decimals: exact ns);
 * metadata events ("M": process_name, thread_name, process_sort_index) name every track used.
 * Bounded: at most max_events events per run; the rest are counted, not written
 * (otherData.dropped_events of the merged file).
 *
 * Two steps, so that runs in worker processes each write their own part: a run streams its events
 * into a part file (ptrace_open → the SimEventSink → ptrace_close), then ptrace_merge joins the
 * parts in run order into one JSON file, written aside and renamed into place.
 * Responsible for: the events' JSON, the parts, the merge. Not responsible for: what happens in the
 * run (the engine calls the sink: metrics.c).
 * Invariants: the output is valid JSON whatever the cap; within a track, events are in time order
 * (each track's spans are sequential and emitted as they end).
 * Complexity: O(1) per event; the merge O(bytes).
 */
#ifndef KV_PLOT_TRACE_H
#define KV_PLOT_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "sim/engine/sim.h"

#define PTRACE_MAX_REPLICAS 64
#define PTRACE_TRACKS 32

typedef struct PlotTrace {
    FILE *f;
    char path[4400];
    int run;                 /* the run's index (process ids run × PTRACE_MAX_REPLICAS + replica + 1) */
    char label[96];
    uint64_t max_events, events, dropped;
    uint32_t used[PTRACE_MAX_REPLICAS]; /* the threads used per replica (bit = tid) */
    int failed;
} PlotTrace;

int ptrace_open(PlotTrace *t, const char *part_path, int run, const char *label, uint64_t max_events, KvErr *e);
/* the sink that writes into t */
void ptrace_sink(PlotTrace *t, SimEventSink *sink);
/* write the tracks' names and close the part */
int ptrace_close(PlotTrace *t, KvErr *e);
void ptrace_abort(PlotTrace *t);
/* join the parts into out (atomically); the parts are left for the caller to remove */
int ptrace_merge(const char *out, const char *const *parts, int n, uint64_t max_events, KvErr *e);

#endif
