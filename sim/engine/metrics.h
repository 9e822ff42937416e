/* metrics.h — every update of a run's results (SimResult) and per-request rows, in one module.
 *
 * Responsible for: the hooks the engine calls where something measurable happens — a request done
 * (its latency split, SLO, class and its requests.csv row), a decode token (TBT), an iteration, an
 * event, a unit's hop (bytes per link and direction), bytes written from the critical path
 * (SAVE_DIRECT), an admission's restore source (hits per tier, misses), a pool reservation (HBM
 * peak), a tier's new occupancy (peak), a drop; and at the end of a run the utilisations, tier
 * counters and cost-model facts. Metric definitions are written where each is computed.
 * Not responsible for: deciding anything (no engine state is changed except the request's TBT
 * statistics and sm->failed when the row writer fails), formatting results (results/).
 * Invariants: a request's row is emitted once (called from request_done only).
 * Complexity: O(1) per hook; metrics_on_run_end O(replicas × stages).
 */
#ifndef KV_METRICS_H
#define KV_METRICS_H

#include "sim/engine/engine_int.h"

/* where an admitted request's history came from */
typedef enum MetricSource { MS_NO_HISTORY, MS_RESIDENT, MS_TIER, MS_RECOMPUTE } MetricSource;

void metrics_on_setup(Sim *sm);
void metrics_on_event(Sim *sm);
void metrics_on_iteration(Sim *sm);
void metrics_on_unit(Sim *sm, const Channel *c, const Unit *u);
void metrics_on_direct_save(Sim *sm, Tier t, double bytes);
void metrics_on_admit(Sim *sm, MetricSource src, Tier t);
void metrics_on_pool(Sim *sm, const Replica *rp);
void metrics_on_tier_bytes(Sim *sm, Tier t, double used_bytes);
void metrics_on_drop(Sim *sm);
void metrics_on_token(Sim *sm, Request *r, int64_t gap_ns);
/* multi-step decode (iteration.c): n tokens of one iteration, each gap_ns after its previous one */
void metrics_on_tokens_n(Sim *sm, int64_t gap_ns, uint64_t n);
/* ... and a request's share of k such iterations: its gaps summed (sum_ns) and their maximum; the
 * same tbt_sum as k metrics_on_token calls when that sum is exact (the caller checks
 * metrics_tokens_exact) */
void metrics_on_request_tokens(Request *r, int64_t sum_ns, int64_t max_ns);
static inline int metrics_tokens_exact(const Request *r, int64_t sum_ns)
{
    return r->tbt_sum + (double)sum_ns < 9007199254740992.0; /* 2^53 */
}
/* k iterations (and the k events that would have ended them) run inside one event */
void metrics_on_iterations_folded(Sim *sm, uint64_t k);
void metrics_on_request_done(Sim *sm, Request *r);
void metrics_on_run_end(Sim *sm);

#endif
