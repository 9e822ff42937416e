/* core.c — the lowest run-time helpers every engine module uses (declared in engine_int.h).
 *
 * Responsible for: the run's error (sim_fail: the first message wins; SIM_CHECK's report with file
 * and line), pushing events with the same-instant order of their kinds, and the request lifecycle
 * table (rq_set_state refuses a move the table in engine_int.h does not list).
 * Not responsible for: anything that decides (every other module).
 * Invariants: after a failure sm->failed stays set and the error is not overwritten.
 * Complexity: O(1) each (plus the event queue's O(log n) push).
 */
#include <stdarg.h>
#include <stdio.h>

#include "sim/engine/engine_int.h"

/* same-instant order: completions, then iteration progress, then arrivals, then scheduling */
const uint32_t sim_ev_rank[] = {0, 0, 1, 2, 3, 3, 4, 3};

int sim_fail(Sim *sm, const char *fmt, ...)
{
    if (!sm->failed && sm->e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sm->e->msg, sizeof sm->e->msg, fmt, ap);
        va_end(ap);
    }
    sm->failed = 1;
    return -1;
}

void sim_check_failed(Sim *sm, const char *file, int line, const char *cond)
{
    sim_fail(sm, "internal: %s:%d: check %s failed (at t=%lld ns)", file, line, cond, (long long)sim_now(sm));
}

uint64_t sim_time_overrun(Sim *sm, int64_t t)
{
    sim_fail(sm, "simulated time would pass the clock's limit of 2^62 ns (about 146 years; next event at %s%.3g s, now %.3g s): "
                 "the run is too long to simulate; give fewer requests or shorter times (iter_overhead, think, time_scale)",
             t == INT64_MAX ? "more than " : "", (double)t / 1e9, (double)sim_now(sm) / 1e9);
    return 0;
}

uint64_t sim_push(Sim *sm, int64_t t, int kind, void *obj, int64_t arg)
{
    if (t > SIM_TIME_MAX_NS) return sim_time_overrun(sm, t);
    uint64_t seq = evq_push(&sm->q, t, sim_ev_rank[kind], (uint32_t)kind, obj, arg, sm->e);
    if (!seq) sm->failed = 1;
    return seq;
}



/* the lifecycle table: the states each state may move to (see engine_int.h) */
#define TO(s) (1u << (s))
static const struct {
    const char *name;
    unsigned next;
} rq_table[RQ_NSTATES] = {
    [RQ_ARRIVED] = {"arrived", TO(RQ_QUEUED)},
    [RQ_QUEUED] = {"queued", TO(RQ_RESTORING) | TO(RQ_PREFILL) | TO(RQ_DONE)},
    [RQ_RESTORING] = {"restoring", TO(RQ_PREFILL)},
    [RQ_PREFILL] = {"prefill", TO(RQ_DECODE)},
    [RQ_DECODE] = {"decode", TO(RQ_DONE) | TO(RQ_QUEUED)},
    [RQ_DONE] = {"done", 0},
};

const char *rq_state_name(RqState s) { return (unsigned)s < RQ_NSTATES ? rq_table[s].name : "?"; }

void rq_move(Sim *sm, Request *r, RqState to, const char *file, int line)
{
    if ((unsigned)r->state >= RQ_NSTATES || !(rq_table[r->state].next & TO(to))) {
        sim_fail(sm, "internal: %s:%d: request %llu (session %llu turn %d): lifecycle move %s -> %s is not in the table",
                 file, line, (unsigned long long)r->id, (unsigned long long)r->s->id, r->turn, rq_state_name(r->state),
                 rq_state_name(to));
        return;
    }
    r->state = to;
}
