/* metrics_int.h — what the files of the metrics module share; metrics.h is the contract the engine
 * calls. metrics.c: the hooks that write SimResult, a request's row, the end of a run;
 * metrics_rec.c: the recordings asked for through SimRunOpts (utilisation, timeline, trace events);
 * metrics_trim.c: warm-up/cool-down trimming, the samples of kept requests, the load. */
#ifndef KV_METRICS_INT_H
#define KV_METRICS_INT_H

#include "sim/engine/metrics.h"

/* what a completed request contributes to the reported metrics */
typedef struct ReqSample {
    uint64_t id;
    int64_t offered, done, wait, ttft, queue, restore, prefill, hist, nnew, nout, out_done;
    double lb_ns;
    int slo;
} ReqSample;

/* metrics_rec.c */
void metrics_rec_setup(Sim *sm); /* sm->obs for sm->opts (out of memory: the run fails) */
int metrics_rec_traced(const Sim *sm); /* whether a trace sink takes the run's events */
void metrics_rec_counter(Sim *sm, int replica, const char *name, double v);
/* the hop of u that channel c just served: its utilisation, timeline span and trace event */
void metrics_rec_unit(Sim *sm, const Channel *c, const Unit *u, int load);
/* r is done: restored restore_ns after admission, at restored_at (its timeline record) */
void metrics_rec_request_done(Sim *sm, Request *r, int64_t restore_ns, int64_t restored_at);
/* the utilisation series and the timeline handed to the caller (sm->opts) */
void metrics_rec_run_end(Sim *sm);
void metrics_rec_free(Sim *sm);

/* metrics_trim.c */
int metrics_trim_sample(Sim *sm, Request *r, const ReqSample *x);
/* decide the held-back requests that can be decided (all of them when final) */
void metrics_trim_scan(Sim *sm, int final);
void metrics_trim_free(Sim *sm);
/* SimLoad's window, rates, steady-state test and overloaded flag from the kept samples */
void metrics_load_finish(Sim *sm);

#endif
