/* engine.c — sim_run: one policy over one trace, the event loop. The modelling choices are listed
 * in sim.h; the modules and the request lifecycle in engine_int.h.
 *
 * Responsible for: a run's lifetime (the policy's init, the save mode in effect, the trace, the
 * event loop dispatching each event to its module, progress reports, the end-of-run deadlock check
 * and the final metrics), and the tests' hook (sim_test_set_hook).
 * Not responsible for: any decision inside the run (the modules below).
 * Invariants: a run leaves nothing allocated behind (sim_teardown), whether it succeeds or fails;
 * runs are independent (all run state is in the Sim on this stack frame).
 * Complexity: O(events × the cost of each event's handler).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"
#include "sim/engine/schedule_out.h"

static SimTestHook g_hook;
static void *g_hook_ctx;
static int g_hook_check;
static unsigned g_ref_off;

void sim_test_set_reference(unsigned flags) { g_ref_off = flags; }

void sim_test_set_hook(SimTestHook fn, void *ctx, int check)
{
    g_hook = fn;
    g_hook_ctx = ctx;
    g_hook_check = check;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the accounting walker's period in iteration boundaries (0: off): every boundary in KV_DEBUG
 * builds and for the tests' hook; KVSIM_CHECK=N in the environment: every N-th (1: every one) */
static int check_period(void)
{
#ifdef KV_DEBUG
    return 1;
#else
    if (g_hook_check) return 1;
    const char *v = getenv("KVSIM_CHECK");
    if (!v || !*v || strcmp(v, "0") == 0) return 0;
    int n = atoi(v);
    return n >= 1 ? n : 1;
#endif
}

/* whether decode runs go on past their replica's iteration boundaries when nothing happened to it
 * (iteration.c, run_go_on): yes unless KVSIM_DECODE_RUNS_GO_ON=0 in the environment (the same
 * results either way; tools/same_results_replicas.sh compares the two) */
static int runs_go_on(void)
{
    const char *v = getenv("KVSIM_DECODE_RUNS_GO_ON");
    return !(v && strcmp(v, "0") == 0);
}

static void dispatch(Sim *sm, const Event *ev)
{
    switch (ev->kind) {
    case EV_UNIT_DONE:
        ch_on_event(sm, ev->obj, ev->seq);
        break;
    case EV_ITER_RESUME: {
        Replica *rp = ev->obj;
        if (ev->seq == rp->iter_seq) iter_advance(sm, rp);
        break;
    }
    case EV_ITER_DONE: {
        Replica *rp = ev->obj;
        if (ev->seq == rp->iter_seq) iter_done(sm, rp);
        break;
    }
    case EV_ARRIVAL:
        on_arrival(sm, ev->obj);
        break;
    case EV_RELEASE:
        release_request(sm, ev->obj);
        break;
    case EV_FORM:
        form_iteration(sm, ev->obj);
        break;
    case EV_PREFETCH:
        tier_prefetch_fire(sm, (uint64_t)ev->arg);
        break;
    }
}

void sim_trace_options(const SimConfig *c, int64_t max_context, TraceOptions *to)
{
    memset(to, 0, sizeof *to);
    to->source = c->trace;
    to->format = sim_trace_format_name(c->trace_format);
    to->seed = c->seed;
    to->session_rate_per_s = c->session_rate;
    to->time_scale = c->time_scale > 0 ? c->time_scale : 1;
    to->think_ns = c->think_ns;
    to->max_requests = c->requests;
    to->max_context_tokens = max_context;
    to->request_rate_per_s = c->request_rate;
    to->burstiness = c->burstiness;
    to->system_prompt_tokens = c->system_prompt_tokens;
    to->prompt_groups = c->prompt_groups;
    to->rounds = c->rounds;
    to->round_tokens = c->round_tokens;
    to->round_output_tokens = c->round_output_tokens;
}

int sim_run(SimWorld *w, const char *policy, SimRowFn row_fn, void *row_ctx, SimProgressFn prog, void *prog_ctx,
            SimResult *out, KvErr *e)
{
    SimRunOpts o = {0};
    o.row_fn = row_fn;
    o.row_ctx = row_ctx;
    o.prog = prog;
    o.prog_ctx = prog_ctx;
    o.timeline_request = -1;
    return sim_run_ex(w, policy, &o, out, e);
}

int sim_run_ex(SimWorld *w, const char *policy, const SimRunOpts *opts, SimResult *out, KvErr *e)
{
    SimRowFn row_fn = opts->row_fn;
    void *row_ctx = opts->row_ctx;
    SimProgressFn prog = opts->prog;
    void *prog_ctx = opts->prog_ctx;
    memset(out, 0, sizeof *out);
    const KvPolicyOps *pol = policy_find(policy, e);
    if (!pol) return -1;
    snprintf(out->policy, sizeof out->policy, "%s", pol->name);
    Sim sm_;
    Sim *sm = &sm_;
    memset(sm, 0, sizeof *sm);
    sm->w = w;
    sm->cfg = w->cfg;
    sm->pol = pol;
    sm->res = out;
    sm->e = e;
    sm->row_fn = row_fn;
    sm->row_ctx = row_ctx;
    sm->prog = prog;
    sm->prog_ctx = prog_ctx;
    sm->opts = opts; /* the recordings asked for (metrics_rec.c) */
    sm->check = check_period();
    sm->run_on = runs_go_on();
    sm->test_hook = g_hook;
    sm->test_ctx = g_hook_ctx;
    sm->ref_off = g_ref_off;
    double t0 = wall_now();
    int rc = -1;
    memset(w->cost.lookups, 0, sizeof w->cost.lookups);
    memset(w->cost.extrapolations, 0, sizeof w->cost.extrapolations);
    if (evq_init(&sm->q, e) != 0) return -1;
    if (sim_setup(sm) != 0) goto done;
    sm->env = (PolicyEnv){.ly = &w->ly, .hw = &w->hw, .platform = w->platform, .cost = &w->cost,
                          .iter_overhead_ns = sm->overhead_ns, .token_budget = sm->cfg->token_budget, .core = sm,
                          .est_layer_ns = est_layer_ns, .est_load_layer_ns = est_load_layer_ns,
                          .est_load_hops_ns = est_load_hops_ns,
                          .save_tier = w->save_tier, .nic_per_stage = sm->cfg->nic_per_stage, .ops = pol, .knobs = sim_config_knobs(sm->cfg, pol)};
    if (pol->init && pol->init(&sm->env, &sm->pstate, e) != 0) goto done;
    sm->save_bpt = pol->saved_bytes_per_token(sm->pstate, &sm->env);
    sm->save_mode = sim_config_save_mode(sm->cfg, pol);
    out->saved_bytes_per_token = sm->save_bpt;
    if (sched_out_open(sm) != 0) goto done; /* hook: schedule_out (a no-op unless --emit-schedule) */
    int any_tier = 0;
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) any_tier |= sm->tiers[t].on;
    if (sm->save_bpt > 0 && !any_tier) {
        kv_err(e, "policy %s saves state but no tier is configured", pol->name);
        goto done;
    }
    TraceOptions to;
    sim_trace_options(sm->cfg, sm->max_ctx, &to);
    if (!(sm->trace = trace_open(&to, e))) goto done;
    if (pull_trace(sm) != 0) goto done;
    double next_prog = t0 + 1.0;
    Event ev;
    while (!sm->failed) {
        int prc = evq_pop(&sm->q, &ev, e);
        if (prc < 0) {
            sm->failed = 1;
            break;
        }
        if (prc == 0) break;
        metrics_on_event(sm);
        dispatch(sm, &ev);
        if (prog && (out->events & 4095) == 0) {
            double now = wall_now();
            if (now >= next_prog) {
                next_prog = now + 1.0;
                double frac = sm->cfg->requests > 0 ? (double)sm->done_requests / (double)sm->cfg->requests : -1;
                prog(prog_ctx, frac, sm->done_requests, sim_now(sm));
            }
        }
    }
    if (sm->failed) goto done;
    /* everything released must have finished */
    for (int i = 0; i < sm->R; i++)
        if (sm->rep[i].q_len || sm->rep[i].n_active) {
            kv_err(e, "internal: replica %d ended with %zu queued and %d active requests (deadlock)", i, sm->rep[i].q_len,
                   sm->rep[i].n_active);
            goto done;
        }
    if (sm->check && sim_check(sm) != 0) goto done;
    metrics_on_run_end(sm);
    rc = 0;
done:
    if (sched_out_close(sm, rc == 0) != 0) rc = -1; /* hook: schedule_out (a schedule not written whole fails the run) */
    sim_teardown(sm);
    out->wall_s = wall_now() - t0;
    return rc;
}
