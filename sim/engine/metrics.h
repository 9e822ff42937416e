/* metrics.h — every update of a run's results (SimResult) and per-request rows, in one module.
 *
 * Responsible for: the hooks the engine calls where something measurable happens — a request done
 * (its latency split, SLO, class and its requests.csv row), a decode token (TBT), an iteration, an
 * event, a unit's hop (bytes per link and direction), bytes written from the critical path
 * (SAVE_DIRECT), an admission's restore source (misses, fallbacks; the places loaded from are
 * counted when the request is done), a pool reservation (HBM peak), a tier's new occupancy (peak),
 * saved state lost, a drop, a release (warm-up trimming), restoration windows (time with >= 1
 * restoration in progress, and the GPU's and each channel's busy time inside them); and at the end
 * of a run the utilisations (also inside the windows), tier counters, cost-model facts and the load
 * (SimLoad: throughput, goodput, the session wait, warm-up/cool-down trimming, the steady-state test
 * and the overloaded flag). Metric definitions are written where each is computed.
 * Not responsible for: deciding anything (no engine state is changed except the request's TBT
 * statistics and sm->failed when the row writer fails), formatting results (results/).
 * Invariants: a request's row is emitted once (called from request_done only); with trimming off
 * every metric is updated in the same order as before trimming existed (results byte-identical).
 * Complexity: O(1) per hook; metrics_on_run_end O(replicas × stages).
 */
#ifndef KV_METRICS_H
#define KV_METRICS_H

#include "sim/engine/engine_int.h"

/* where an admitted request's history came from */
typedef enum MetricSource { MS_NO_HISTORY, MS_RESIDENT, MS_TIER, MS_RECOMPUTE, MS_PREFIX } MetricSource;

void metrics_on_setup(Sim *sm);
void metrics_on_event(Sim *sm);
/* an iteration of rp is formed (before its per-layer costs) / has ended: its GPU busy time is
 * attributed to the replica's restoration windows in proportion to the window time inside it.
 * metrics_on_iteration_done is where an iteration — or a decode run: rp->run_steps steps from
 * rp->run_start_ns, the last one from rp->iter_start_ns to now — is reported whole (one call each). */
void metrics_on_iteration(Sim *sm, Replica *rp);
void metrics_on_iteration_done(Sim *sm, Replica *rp);
/* a decode run's n steps before its last, when they are taken (nothing else happens until they
 * end): step 1 ends at start_ns + gaps[0], step j + 1 gaps[j] after step j; the items' last
 * tokens came at last_tok_ns (-1: each item's t_last_tok). The iterations, their end events and
 * the TBT histogram's share of every item's tokens, exactly as metrics_on_iteration +
 * metrics_on_token per item and step would have counted them */
void metrics_on_decode_steps(Sim *sm, Replica *rp, int64_t start_ns, int64_t last_tok_ns, const uint64_t *gaps, int64_t n);
/* the TBT histogram's share of metrics_on_token for a decode step of rp's batch ending now (the
 * items' last tokens at last_tok_ns; -1: each item's t_last_tok) */
void metrics_on_step_tokens(Sim *sm, Replica *rp, int64_t last_tok_ns);
/* whether a recording reads an iteration's items when it ends (the timeline, a trace sink) */
int metrics_rec_reads_items(const Sim *sm);
/* each request's own share of metrics_on_token for n steps of a decode run (the items' t_last_tok
 * still that of before them), applied when the run ends */
void metrics_on_decode_tokens(Sim *sm, Replica *rp, int64_t start_ns, const uint64_t *gaps, int64_t n);
/* THE hook of an iteration's span (iteration.c, right after metrics_on_iteration_done): rp ran
 * from t0 to t1 standing for `steps` decode steps; feeds the GPU's utilisation windows, the
 * timeline's compute spans and the trace's iteration events (SimRunOpts) */
void metrics_on_iteration_span(Sim *sm, Replica *rp, int64_t t0_ns, int64_t t1_ns, int steps);
/* walk.c: layer l of rp's iteration in flight ran from t0 to t1 (for the timeline; O(1)) */
void metrics_on_layer_walked(Sim *sm, Replica *rp, int l, int64_t t0_ns, int64_t t1_ns);
/* a request of rp entered (+1) or left (-1) RQ_RESTORING: opens/closes rp's restoration window */
void metrics_on_restoring(Sim *sm, Replica *rp, int delta);
/* a saving policy's restoration recomputes everything: slower = waiting for the save in flight was
 * estimated slower than recomputing (else no saved state, or it covers less than the history) */
void metrics_on_fallback(Sim *sm, int slower);
/* a session's saved state was dropped: why = LOST_TTL or LOST_CAPACITY */
void metrics_on_state_lost(Sim *sm, int why);
/* restore_from of a restoration that loaded from the places in mask (SRC_*): "dram", "dram+ssd",
 * "ssd+in-flight", ... */
const char *metrics_source_name(int mask);
void metrics_on_unit(Sim *sm, const Channel *c, const Unit *u);
void metrics_on_direct_save(Sim *sm, Tier t, double bytes);
void metrics_on_admit(Sim *sm, MetricSource src, Tier t);
void metrics_on_pool(Sim *sm, const Replica *rp);
void metrics_on_prefix(Sim *sm, const Request *r);
void metrics_on_tier_bytes(Sim *sm, Tier t, double used_bytes);
/* bytes written into tier t (a save or direct save landed, a demotion, a write-through copy, a prefetch, a
 * promotion) / bytes the policy saved (a save or direct save): write amplification at the end */
void metrics_on_tier_written(Sim *sm, Tier t, double bytes);
void metrics_on_policy_saved(Sim *sm, double bytes);
void metrics_on_drop(Sim *sm);
void metrics_on_token(Sim *sm, Request *r, int64_t gap_ns);
void metrics_on_request_done(Sim *sm, Request *r);
/* a request released: the run's first and latest arrival, its warm-up trim */
void metrics_on_release(Sim *sm, Turn *r);
/* the load process made an arrival on its own at t (a trace timestamp, a session start, a client
 * given a session): the end of the load window */
void metrics_on_exogenous(Sim *sm, int64_t t_ns);
void metrics_on_run_end(Sim *sm);
/* what a run that ends early leaves in the trimming buffer (sim_teardown) */
void metrics_free(Sim *sm);

#endif
