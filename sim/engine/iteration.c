/* iteration.c — forming an iteration and ending it.
 *
 * Responsible for: the batch of one replica's next iteration (continuous batching under the token
 * budget: decode tokens first; then, in admission order, restoration compute — token-wise chunks,
 * or whole-model recompute of the history as the head of one sequence, capped at restore_share of
 * the budget — and new-input chunks, a layer-wise restoration's first chunk only once its early
 * layers' state arrived; then low-priority restoration compute), its per-layer durations (linear
 * ops over all rows + each item's attention; layer-wise work adds recompute rows to the GEMMs,
 * hidden-state projections, dequantization and all-gathers per layer; stage-parallel restorations
 * run in per-stage lanes, each stage's when the walk reaches it), SAVE_DIRECT's synchronous write time; and at its end the
 * items' progress (recompute, token-wise compute, new input, decode tokens), saves per iteration,
 * and the requests that finished. Moves RQ_RESTORING → RQ_PREFILL (through restore_progress) and
 * RQ_PREFILL → RQ_DECODE (the first output token). Runs the accounting walker at each boundary when
 * enabled. Multi-step decode: a batch of decode only advances, when formed, every step that ends
 * before anything else can happen (decode_run), the last step being the iteration in flight; the
 * results are those of one iteration per step, bit for bit.
 * Not responsible for: the walk itself (walk.c), admission (lifecycle.c), the cost composition of a
 * layer (sim/cost/layer_cost via estimate.c).
 * Invariants: a replica runs one iteration at a time; a request is in at most one iteration
 * (in_iter), with at most two items (its last history chunk and its first new-input chunk).
 * Complexity: forming O(active + items + layer-wise items × L) (their indices listed once: rp->lw_idx), plus
 * O(1) per step of a decode run (O(items) on a step where on-demand blocks can grow) and O(items)
 * per run; ending O(items).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

static int item_add(Sim *sm, Replica *rp, IterItem it)
{
    if (rp->n_items == rp->cap_items) {
        int nc = rp->cap_items ? rp->cap_items * 2 : 64;
        IterItem *ni = realloc(rp->items, (size_t)nc * sizeof *ni);
        if (!ni) return sim_fail(sm, "out of memory");
        rp->items = ni;
        rp->cap_items = nc;
    }
    rp->items[rp->n_items++] = it;
    return 0;
}

/* r as the batching rule sees it (a decoding request has no work of an earlier phase left:
 * sim_check's check_requests checks it) */
static BatchReq batch_view(const Request *r)
{
    if (r->state == RQ_DECODE) return (BatchReq){.decode = 1, .decode_ctx = r->hist + r->nnew + r->out_done};
    return (BatchReq){
        .low_prio = r->low_prio,
        .tw = r->tw,
        .tw_busy = r->tw_comp_inflight != 0,
        .lw_pending = r->lw_pending,
        .lw_wait = r->lw_pending && !r->stage_par && r->arrived_prefix < r->early_layers,
        .new_unchunked = r->recompute_chunk < 0 && r->recompute_total > 0,
        .resume_left = r->resume_left,
        .resume_done = r->resume_done,
        .tw_avail = r->tw_whole ? 0 : r->tw_io_issued - r->tw_comp,
        .tw_comp = r->tw_comp,
        .tw_chunk = r->tw_comp_chunk,
        .recompute_left = r->recompute_left,
        .recompute_done = r->recompute_done,
        .recompute_chunk = r->recompute_chunk,
        .lw_tokens = r->lw_tokens,
        .new_left = r->new_left,
        .new_ctx = r->hist + r->new_done,
    };
}

/* the batch, by the batching rule (batch.c) over rp's admitted requests in admission order; a
 * token-wise compute chunk is in flight from now */
static void form_batch(Sim *sm, Replica *rp)
{
    rp->n_items = 0;
    int n = rp->n_active;
    if (n > sm->batch_cap) {
        int nc = n > 2 * sm->batch_cap ? n : 2 * sm->batch_cap;
        BatchReq *nq = realloc(sm->batch_rq, (size_t)nc * sizeof *nq);
        if (nq) sm->batch_rq = nq;
        BatchItem *ni = realloc(sm->batch_it, (size_t)nc * 2 * sizeof *ni);
        if (ni) sm->batch_it = ni;
        if (!nq || !ni) {
            sim_fail(sm, "out of memory");
            return;
        }
        sm->batch_cap = nc;
    }
    /* every request decodes (most iterations): batch_form would give each its decode item in
     * admission order, whatever the budgets; made here without describing the requests to it */
    int all_decode = 1;
    for (int i = 0; i < n && all_decode; i++) all_decode = rp->active[i]->state == RQ_DECODE;
    if (all_decode) {
        for (int i = 0; i < n; i++) {
            Request *r = rp->active[i];
            item_add(sm, rp, (IterItem){r, IT_DECODE, 0, 1, r->hist + r->nnew + r->out_done});
        }
        return;
    }
    for (int i = 0; i < n; i++) sm->batch_rq[i] = batch_view(rp->active[i]);
    int k = batch_form(sm->batch_rq, n, sm->cfg->token_budget, batch_restore_budget(sm->cfg->token_budget, sm->cfg->restore_share),
                       sm->batch_it);
    for (int j = 0; j < k; j++) {
        const BatchItem *b = &sm->batch_it[j];
        Request *r = rp->active[b->req];
        if (b->kind == IT_RECOMP && r->tw) r->tw_comp_inflight = b->tokens;
        item_add(sm, rp, (IterItem){r, b->kind, b->lw, b->tokens, b->ctx});
    }
}

/* per-layer durations of the batch in rp->layer_ns, and the stage-parallel lanes (r->lane_ns) */
static void layer_costs(Sim *sm, Replica *rp)
{
    int64_t M = 0, B = 0, dctx = 0;
    double attn = 0;
    CostModel *cm = &sm->w->cost;
    int any_lw = 0;
    if (rp->cap_lw < rp->n_items) {
        int *ni = realloc(rp->lw_idx, (size_t)rp->cap_items * sizeof *ni);
        if (!ni) {
            sim_fail(sm, "out of memory");
            return;
        }
        rp->lw_idx = ni;
        rp->cap_lw = rp->cap_items;
    }
    rp->n_lw = 0;
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        M += it->tokens;
        if (it->type == IT_DECODE) {
            B++;
            dctx += it->ctx;
        } else {
            attn += ctab_attn_prefill_ns(sm, it->tokens, it->ctx);
        }
        if (it->lw) {
            any_lw = 1;
            rp->lw_idx[rp->n_lw++] = i;
        }
        rq_set_in_iter(sm, it->r, 1);
    }
    if (B) attn += ctab_attn_decode_ns(sm, B, dctx);
    double base = est_linear_ns(sm, M) + attn;
    rp->any_lw = any_lw;
    if (!any_lw) {
        /* every layer costs base: the walk (iter_advance's one step) and tl_iteration read layer 0's
         * only; an observer (schedule_out) records every layer's */
        int nl = sm->observer ? sm->L : 1;
        for (int l = 0; l < nl; l++) rp->layer_ns[l] = base;
        return;
    }
    /* (each layer's duration is set by the per-layer loop at the end) */
    /* stage-parallel restorations: every stage recomputes its own prefix layers for the history in
     * its own lane (r->lane_ns), from its boundary activation; the walk runs a stage's lane when it
     * reaches the stage, starting at the later of the iteration's start and that boundary's arrival,
     * so a stage's lane overlaps the earlier stages' lanes and layers (walk.c) */
    for (int j = 0; j < rp->n_lw; j++) {
        IterItem *it = &rp->items[rp->lw_idx[j]];
        if (!it->r->stage_par) continue;
        Request *r = it->r;
        for (int st = 0; st < sm->S; st++) r->lane_ns[st] = 0;
        for (int l = 0; l < sm->L; l++) {
            if (r->mode[l] != LM_RECOMPUTE) continue;
            double x = est_layer_ns(sm, r->lw_tokens, r->hist - r->lw_tokens);
            if (restore_is_boundary(sm, r, l) && sm->T > 1 && cost_has(cm, OP_ALLGATHER))
                x += cost_lookup_ns(cm, OP_ALLGATHER, r->lw_tokens, 0, 0);
            r->lane_ns[sm->stage_of[l]] += x;
            rp->busy_stage_ns[sm->stage_of[l]] += x;
        }
    }
    /* layer-wise restoration work: recompute rows join the GEMMs, hidden states are projected
     * (all-gathered under TP), quantized KV is dequantized. Within a layer that work runs first, in
     * item order: a request's state of layer l is KV at the layer's start + the work up to its own
     * (rc_layer / rc_off_ns: its last such layer, for the end of its restoration, walk.c) */
    int64_t prevR = -1;
    double prev_lin = base - attn;
    for (int j = 0; j < rp->n_lw; j++) rp->items[rp->lw_idx[j]].r->rc_layer = -1;
    for (int l = 0; l < sm->L; l++) {
        int64_t R = 0;
        double extra = 0, conv = 0;
        for (int j = 0; j < rp->n_lw; j++) {
            IterItem *it = &rp->items[rp->lw_idx[j]];
            Request *r = it->r;
            if (r->mode[l] == LM_RECOMPUTE && r->stage_par) continue; /* done in its stage's lane */
            if (r->mode[l] == LM_RECOMPUTE) {
                R += r->lw_tokens;
                extra += cost_lookup_ns(cm, OP_ATTN_PREFILL, r->lw_tokens, r->hist - r->lw_tokens, 0);
            } else if (r->mode[l] == LM_LOAD_HIDDEN) {
                double x = cost_lookup_ns(cm, OP_GEMM_KV_PROJ, r->lw_tokens, 0, 0);
                if (sm->T > 1 && cost_has(cm, OP_ALLGATHER)) x += cost_lookup_ns(cm, OP_ALLGATHER, r->lw_tokens, 0, 0);
                if (r->lscale && r->lscale[l] > 0 && r->lscale[l] < 1 && cost_has(cm, OP_DEQUANT))
                    x += cost_lookup_ns(cm, OP_DEQUANT, policy_dequant_hidden_tokens(r->lw_tokens, sm->hid_tok_layer / sm->T, sm->kv_tok_layer_gpu), 0, 0);
                extra += x;
                conv += x;
                r->rc_layer = l;
                r->rc_off_ns = conv;
            } else if (r->mode[l] == LM_LOAD_KV && cost_has(cm, OP_DEQUANT) &&
                       (r->lscale && r->lscale[l] > 0 ? r->lscale[l] < 1 : r->kv_scale < 1)) {
                double x = cost_lookup_ns(cm, OP_DEQUANT, r->lw_tokens, 0, 0);
                extra += x;
                conv += x;
                r->rc_layer = l;
                r->rc_off_ns = conv;
            }
        }
        if (R != prevR) {
            prev_lin = est_linear_ns(sm, M + R);
            prevR = R;
        }
        rp->layer_ns[l] = prev_lin + attn + extra;
    }
}

/* Multi-step decode. A batch in which every admitted request decodes (one token each per step)
 * is the same batch step after step until something happens: a request's last token, a save that
 * SAVE_PER_ITERATION writes (64 positions since the session's last), or any event in the queue —
 * an arrival, a release, a transfer ending, another replica's iteration. Nothing can be admitted
 * between its steps either: admission waits for memory or a batch slot, and only a completion or
 * an event frees them (whatever makes admission depend on the step — KV growing per step — must
 * end the run at that step here). So its steps whose ends come before the next event in the queue
 * run at once, when the batch is formed; only the last is an iteration in flight. At that step's
 * end the run goes on when nothing happened to its replica meanwhile (run_go_on, below). */

static int decode_run_ok(const Sim *sm, const Replica *rp)
{
    /* an emitted schedule (schedule_out) lists every step as its own iteration */
    if (rp->n_items != rp->n_active || rp->n_restoring > 0 || sm->save_mode == SAVE_DIRECT || sm->test_hook || sm->observer) return 0;
    for (int i = 0; i < rp->n_items; i++)
        if (rp->items[i].type != IT_DECODE) return 0;
    return 1;
}

/* alloc=ondemand inside a decode run. blocks_grow at a step's formation takes, per request, the
 * blocks its context through its next token needs; in a run, `adv` steps are taken but not yet
 * applied to the requests (decode_run advances out_done when the run ends; nothing else reads it
 * meanwhile), so request i's context through its next token is x = hist + nnew + out_done + adv + 1.
 * Its blocks exceed its reservation exactly when x > ⌊reserved / b⌋·b (blocks_tokens(x) > reserved). */

/* the tokens the next step's formation would take (Σ over the requests of blocks_tokens(x) −
 * reserved where positive, x through the token after the next: adv + 1) */
static int64_t run_need(const Sim *sm, const Replica *rp, int64_t adv)
{
    int64_t total = 0;
    for (int i = 0; i < rp->n_items; i++) {
        const Request *r = rp->items[i].r;
        int64_t need = blocks_tokens(sm, r->hist + r->nnew + r->out_done + adv + 2) - r->reserved_tokens;
        if (need > 0) total += need;
    }
    return total;
}

/* take what blocks_grow takes at the formation of the step after `adv` steps (free blocks: the
 * caller checked run_need against the pool), request by request in item order; returns the steps
 * until one of them can need a block again (<= 0: the next step), and *next_need: run_need(adv) after
 * it — both from the same pass */
static int64_t run_take(Sim *sm, Replica *rp, int64_t adv, int64_t *next_need)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16, slack = INT64_MAX, total = 0;
    for (int i = 0; i < rp->n_items; i++) {
        Request *r = rp->items[i].r;
        int64_t x = r->hist + r->nnew + r->out_done + adv + 1, q = r->reserved_tokens / b * b;
        if (x > q) { /* ⇔ blocks_tokens(x) > reserved */
            int64_t need = blocks_tokens(sm, x) - r->reserved_tokens;
            pool_reserve(sm, rp, need);
            r->reserved_tokens += need;
            metrics_on_pool(sm, rp);
            q = r->reserved_tokens / b * b;
        }
        if (q - x < slack) slack = q - x; /* (growth_slack's count, after adv steps) */
        if (x + 1 > q) total += blocks_tokens(sm, x + 1) - r->reserved_tokens;
    }
    *next_need = total;
    return slack;
}

/* run_take by phase. After run_take(adv) every request's context through its next token fits its
 * reservation: x_i(adv) = base_i + adv ≤ q_i (base_i = hist + nnew + out_done + 1, q_i = ⌊reserved_i
 * / b⌋·b), i.e. its threshold c_i = q_i − base_i ≥ adv. A request takes blocks at run_take(adv')
 * exactly when c_i < adv', and then one block (x = q_i + 1 … q_i + b ⇒ blocks_tokens(x) = q_i + b):
 * c_i grows by b and keeps its phase c_i mod b. So with the invariant c_i ≥ adv − 1 at run_take(adv),
 * the requests that take blocks are those of phase (adv − 1) mod b with c_i = adv − 1, and those
 * that need blocks at the next step (run_need(adv): x + 1 > q) those of phase adv mod b with c_i =
 * adv. Each phase lists its requests in item order, so pool_reserve and metrics_on_pool run in the
 * order of the full pass (run_take); a step costs its two phases' requests instead of the batch's.
 * Made by the first run_take of a run (the full pass, which establishes c_i ≥ adv); the caller
 * then calls run_take_phase at every step (its slack is 0: the bound is no longer tracked) and
 * checks the pool only when the next step needs blocks, as before (slack ≤ 0 ⇔ need > 0). */
/* (RunBlocks: engine_int.h; its scratch is the replica's DecodeRun) */

/* the phases of the run's requests, after a full run_take(adv): 0, or -1 (out of memory: the caller
 * keeps the full passes) */
static int run_phases_build(Sim *sm, Replica *rp, RunBlocks *rb, int64_t adv)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16, n = rp->n_items;
    if (n > rp->dr.rb_cap_items) {
        int64_t nc = n < 64 ? 64 : 2 * n;
        int64_t *c = realloc(rp->dr.rb_c, (size_t)nc * sizeof *c);
        if (!c) return -1;
        rp->dr.rb_c = c;
        int *nx = realloc(rp->dr.rb_next, (size_t)nc * sizeof *nx);
        if (!nx) return -1;
        rp->dr.rb_next = nx;
        rp->dr.rb_cap_items = nc;
    }
    if (b > rp->dr.rb_cap_phases) {
        int *h = realloc(rp->dr.rb_head, (size_t)b * sizeof *h);
        if (!h) return -1;
        for (int64_t p = rp->dr.rb_cap_phases; p < b; p++) h[p] = -1;
        rp->dr.rb_head = h;
        rp->dr.rb_cap_phases = b;
    }
    for (int64_t i = 0; i < n; i++) {
        const Request *r = rp->items[i].r;
        rp->dr.rb_c[i] = r->reserved_tokens / b * b - (r->hist + r->nnew + r->out_done + 1);
        if (rp->dr.rb_c[i] < 0) return -1; /* (cannot be after a full run_take: c_i ≥ adv ≥ 1) */
    }
    /* append in item order: walk backwards, pushing at the head */
    for (int64_t i = n - 1; i >= 0; i--) {
        int64_t p = rp->dr.rb_c[i] % b;
        rp->dr.rb_next[i] = rp->dr.rb_head[p];
        rp->dr.rb_head[p] = (int)i;
    }
    rb->on = 1;
    rb->b = b;
    rb->ph = adv % b; /* the next call's adv − 1 */
    rb->cross_next = 1; /* (not known from the full pass: walk) */
    return 0;
}

/* empty the phases the run's requests used (scratch left all -1) */
static void run_phases_clear(Sim *sm, const Replica *rp, RunBlocks *rb)
{
    if (!rb->on) return;
    for (int i = 0; i < rp->n_items; i++) rp->dr.rb_head[rp->dr.rb_c[i] % rb->b] = -1;
    rb->on = 0;
}

/* run_take(adv) with the phases built, called at every step after the full pass in order (the
 * invariant c_i ≥ adv − 1 holds): the same reservations in the same order, *next_need = run_need(adv) */
static void run_take_phase(Sim *sm, Replica *rp, RunBlocks *rb, int64_t adv, int64_t *next_need)
{
    const int64_t b = rb->b;
    int64_t ph = rb->ph, ph1 = ph + 1 == b ? 0 : ph + 1; /* (adv − 1) mod b, adv mod b */
    /* a request with c_i = adv − 1 has q_i = base_i + adv − 1 and x = base_i + adv = q_i + 1, so
     * blocks_tokens(x) = q_i + b (q_i a multiple of b): its need is x − 1 + b − reserved_i. The
     * requests that take a block now are those the last call found needing one (none: no walk) */
    if (rb->cross_next)
        for (int i = rp->dr.rb_head[ph]; i >= 0; i = rp->dr.rb_next[i]) {
            if (rp->dr.rb_c[i] != adv - 1) continue; /* the same phase, a later block */
            Request *r = rp->items[i].r;
            int64_t x = r->hist + r->nnew + r->out_done + adv + 1;
            int64_t need = x - 1 + b - r->reserved_tokens; /* = blocks_tokens(x) − reserved */
            pool_reserve(sm, rp, need);
            r->reserved_tokens += need;
            metrics_on_pool(sm, rp);
            rp->dr.rb_c[i] += b;
        }
    rb->ph = ph1;
    int64_t total = 0;
    int found = 0;
    for (int i = rp->dr.rb_head[ph1]; i >= 0; i = rp->dr.rb_next[i]) {
        if (rp->dr.rb_c[i] != adv) continue;
        const Request *r = rp->items[i].r;
        /* x + 1 = base_i + adv + 1 = q_i + 1: blocks_tokens(x + 1) − reserved = x + b − reserved */
        total += r->hist + r->nnew + r->out_done + adv + 1 + b - r->reserved_tokens;
        found = 1;
    }
    rb->cross_next = found;
    *next_need = total;
    if (sm->ref_off & SIM_REF_CHECK_PHASES) { /* tests: what the full pass would leave */
        SIM_CHECK(sm, ph == (adv - 1) % b && total == run_need(sm, rp, adv));
        for (int i = 0; i < rp->n_items; i++) {
            const Request *r = rp->items[i].r;
            SIM_CHECK(sm, r->hist + r->nnew + r->out_done + adv + 1 <= r->reserved_tokens / b * b);
        }
    }
}

/* run_take's slack before the run's first step (its context through the token after the next:
 * x + 1 with adv = 0) */
static int64_t growth_slack(const Sim *sm, const Replica *rp)
{
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16, slack = INT64_MAX;
    for (int i = 0; i < rp->n_items; i++) {
        const Request *r = rp->items[i].r;
        int64_t d = r->reserved_tokens / b * b - (r->hist + r->nnew + r->out_done + 1);
        if (d < slack) slack = d;
    }
    return slack;
}

/* room for the durations of steps 0..j of a run in dr->gaps; -1 out of memory */
static int run_gaps_room(Sim *sm, DecodeRun *dr, int64_t j)
{
    if (j < dr->cap_gaps) return 0;
    int64_t nc = dr->cap_gaps ? 2 * dr->cap_gaps : 1024;
    while (nc <= j) nc *= 2;
    uint64_t *ng = realloc(dr->gaps, (size_t)nc * sizeof *ng);
    if (!ng) return sim_fail(sm, "out of memory");
    dr->gaps = ng;
    dr->cap_gaps = nc;
    return 0;
}

/* the time a run's steps must end before: the next event's, or just past the clock's limit (the
 * step that passes it is pushed: refused) */
static int64_t run_stop_time(const Sim *sm)
{
    int64_t t = evq_next_time(&sm->q);
    return t <= SIM_TIME_MAX_NS ? t : SIM_TIME_MAX_NS + 1;
}

/* Take the steps of rp's run that end before t_stop, from the step in flight (dr->t, dr->base):
 * step j costs what its own formation would (each request's context one larger per step: the same
 * lookups, sums and rounding as layer_costs and iter_advance), its GPU time is added to the stages.
 * The run stops (dr->stop) at its kmax-th step and before a step after which the next formation's
 * blocks are not free (that formation must evict or preempt). What decides the next step is
 * computed per step: the decode attention along the line (per step one division while the context
 * stays in one segment of the grid), on-demand blocks (run_take, then by phases); the linear cost
 * of the batch is the same at every step (dr->lin). The first step not taken is the one in flight.
 * Returns the steps taken. O(1) per step (O(items) on a step where on-demand blocks may grow). */
static int64_t run_steps(Sim *sm, Replica *rp, DecodeRun *dr, int64_t t_stop)
{
    const int ondemand = sm->cfg->alloc == SIM_ALLOC_ONDEMAND;
    const int64_t oh = sm->overhead_ns, L = sm->L, B = dr->B, kmax = dr->kmax, n0 = dr->n;
    const int S = sm->S;
    const double lin = dr->lin;
    int64_t t = dr->t, n = dr->n, slack = dr->slack, need = dr->need, dctx = dr->dctx;
    double base = dr->base;
    uint64_t *restrict gaps = dr->gaps; /* (restrict: its stores touch nothing else the loop reads) */
    int64_t cap = gaps ? dr->cap_gaps : 0;
    /* stage 0's busy time in a register: the same additions in the same order (nothing reads it
     * before the loop ends) */
    double busy0 = rp->busy_stage_ns[0];
    const double lay0 = sm->stage_layers[0];
    for (;;) {
        if (n + 1 >= kmax) { /* its last token or a save ends the run: it is the step in flight */
            dr->stop = RUN_STOP_STEPS;
            break;
        }
        int64_t d = round_ns(base); /* = iter_advance's rounding */
        int64_t end = t_add(t_add(t, oh), t_mul(d, L));
        if (end >= t_stop) break; /* something happens before it ends (or it passes the clock's limit): it is the step in flight */
        if (ondemand && slack <= 0) { /* the next step's blocks: free, or its formation must evict or preempt */
            if (need < 0) need = run_need(sm, rp, n);
            if (need > 0 && rp->pool_used + need > rp->pool_cap) { /* (need > 0 whenever the exact slack is ≤ 0) */
                dr->stop = RUN_STOP_BLOCKS;
                break;
            }
        }
        if (n >= cap) {
            if (run_gaps_room(sm, dr, n) != 0) {
                dr->stop = RUN_STOP_BLOCKS;
                break;
            }
            gaps = dr->gaps;
            cap = dr->cap_gaps;
        }
        busy0 += (double)d * lay0;
        for (int st = 1; st < S; st++) rp->busy_stage_ns[st] += (double)d * sm->stage_layers[st];
        gaps[n] = (uint64_t)(end - t);
        if (ondemand && slack <= 0) { /* what blocks_grow takes at the next step's formation */
            if (dr->rb.on) {
                run_take_phase(sm, rp, &dr->rb, n + 1, &need);
            } else {
                slack = run_take(sm, rp, n + 1, &need);
                if (run_phases_build(sm, rp, &dr->rb, n + 1) == 0) slack = 0; /* every later step by its phases */
            }
        } else {
            slack--;
            need = -1;
        }
        t = end;
        dctx += B;
        n++;
        if (!dr->line_on) {
            ctab_attn_decode_line(sm, &dr->line, B);
            dr->line_on = 1;
        }
        double attn = 0;
        attn += cost_line_ns(&dr->line, dctx); /* = ctab_attn_decode_ns(sm, B, dctx) */
        base = lin + attn;
    }
    rp->busy_stage_ns[0] = busy0;
    dr->t = t;
    dr->n = n;
    dr->slack = slack;
    dr->need = need;
    dr->dctx = dctx;
    dr->base = base;
    return n - n0;
}

/* The run of rp ends: what its n steps taken did to its items is applied — each request's own
 * TBT statistics (metrics_on_decode_tokens, from the steps' durations), its tokens and context
 * (out_done, ctx, t_last_tok: read inside the run only by run_need and run_take, which are given the
 * steps taken) — and the counts of the run's lookups. O(items) (+ O(n) per request on the inexact
 * path of its TBT sum). */
static void run_settle(Sim *sm, Replica *rp)
{
    DecodeRun *dr = &rp->dr;
    if (!dr->on) return;
    dr->on = 0;
    run_phases_clear(sm, rp, &dr->rb);
    if (dr->line_on) cost_line_end(&dr->line);
    dr->line_on = 0;
    int64_t n = dr->n;
    if (n <= 0) return;
    metrics_on_decode_tokens(sm, rp, dr->t0, dr->gaps, n);
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        it->r->t_last_tok = dr->t;
        it->r->out_done += n;
        it->ctx += n;
    }
    dr->n = 0;
}

/* the reports of a run's m steps just taken from index k (they started at start_ns, the items'
 * last tokens at last_tok_ns, -1: their own) and of its step in flight, and that step's per-layer
 * time for the walk: what the formations and iteration ends of those steps would have reported */
static void run_report(Sim *sm, Replica *rp, int64_t k, int64_t m, int64_t start_ns, int64_t last_tok_ns)
{
    DecodeRun *dr = &rp->dr;
    if (m > 0) metrics_on_decode_steps(sm, rp, start_ns, last_tok_ns, dr->gaps + k, m);
    rp->run_steps = m + 1;
    metrics_on_iteration(sm, rp);
    rp->layer_ns[0] = dr->base; /* a uniform iteration's walk reads layer 0's only (no schedule_out here) */
    rp->any_lw = 0;
    rp->n_lw = 0;
}

/* the run's step limits from its items as they stand n = dr->n steps into it: dr->kdone, the step
 * whose token is some request's last, and dr->kmax, that or (save_mode=iteration) the first step
 * at whose end iter_done saves (64 positions past a session's issued_pos). O(items) */
static void run_limits(Sim *sm, Replica *rp, DecodeRun *dr)
{
    int64_t n = dr->n, kdone = INT64_MAX, kmax;
    for (int i = 0; i < rp->n_items; i++) {
        const Request *r = rp->items[i].r;
        if (r->nout - r->out_done - n < kdone) kdone = r->nout - r->out_done - n; /* its last token ends the run */
    }
    kmax = kdone;
    if (sm->save_mode == SAVE_PER_ITERATION)
        for (int i = 0; i < rp->n_items; i++) {
            /* after step j its KV covers ctx + j − 1 positions (ctx: the item's context at the
             * step in flight); iter_done saves at 64 past issued_pos */
            int64_t js = 65 + rp->items[i].r->s->issued_pos - (rp->items[i].ctx + n);
            if (js < kmax) kmax = js < 1 ? 1 : js;
        }
    dr->kdone = n + kdone;
    dr->kmax = n + kmax;
}

/* Form a decode run (decode_run_ok): its step in flight and the steps before it that end before
 * the next event (run_steps). The run goes on past that event when its replica's next formation
 * would form it again (run_go_on); else — or where a run may not go on (run_may_go_on) — it ends
 * with its step in flight. Returns the start of the step in flight. O(items) plus run_steps'. */
static int64_t decode_run(Sim *sm, Replica *rp)
{
    DecodeRun *dr = &rp->dr;
    const int ondemand = sm->cfg->alloc == SIM_ALLOC_ONDEMAND;
    int64_t B = rp->n_items, dctx = 0;
    for (int i = 0; i < rp->n_items; i++) dctx += rp->items[i].ctx;
    dr->on = 1;
    dr->stop = 0;
    dr->B = B;
    dr->n = 0;
    run_limits(sm, rp, dr);
    dr->t0 = dr->t = sim_now(sm);
    dr->dctx = dctx;
    dr->slack = ondemand ? growth_slack(sm, rp) : INT64_MAX; /* no block to take while > 0 */
    dr->need = -1; /* run_need(n) when the last run_take gave it, else -1 */
    dr->drops = sm->state_drops;
    dr->rb.on = 0;
    dr->line_on = 0;
    dr->lin = est_linear_ns(sm, B); /* every step's: the others' lookups counted by ctab_linear_count */
    double attn = 0;
    attn += ctab_attn_decode_ns(sm, B, dctx);
    dr->base = dr->lin + attn; /* the step in flight's per-layer time (its formation's layer_costs) */
    int64_t n = run_steps(sm, rp, dr, run_stop_time(sm));
    ctab_linear_count(sm, B, (uint64_t)n); /* the n + 1 steps' linear costs, one looked up above */
    run_report(sm, rp, 0, n, dr->t0, -1);
    for (int i = 0; i < rp->n_items; i++) rq_set_in_iter(sm, rp->items[i].r, 1);
    int64_t t = dr->t;
    if (!sm->run_on || sm->check || metrics_rec_reads_items(sm) || sm->pfx_B) run_settle(sm, rp); /* (run_may_go_on) */
    return t;
}

/* Decode runs across other events. A run formed with its steps before the next event in the
 * queue — which, with several replicas, is mostly another replica's — would be formed again at the
 * end of its step in flight, with the same batch, unless something happened to its replica: the
 * old formation then only re-reads what the run already holds. So at that end (iter_done) the run
 * goes on instead, when its replica's formation would form the same batch and take only free
 * blocks:
 *   - the step that ended is no request's last (request_done) and the run did not stop for want of
 *     a free block; where save_mode=iteration saves at that step (the run stopped for it), or a
 *     saved state was dropped since the last look (a drop resets a session's issued_pos, from which
 *     those saves count), the items' saves are made as iter_done makes them, in item order, and the
 *     run's limits are taken again (run_limits);
 *   - every admitted request is in the batch (nothing was admitted meanwhile; no restoration), and
 *     admission would admit nothing (no turn queued and no preempted request, or no batch slot);
 *   - the blocks of the next step are free (else that formation evicts or preempts).
 * Each boundary reports what the old iteration end and formation reported, at the same event and in
 * the same order — the GPU's utilisation span of the steps since the last boundary (utilisation
 * windows are shared by the replicas and summed in event order), the TBT histogram's adds (its
 * running sum is a double, summed in event order), the iteration counters — and the new steps end
 * before the next event in the queue, as before: the same iteration-end events at the same times,
 * so every other replica's runs and every output are those of one formation per boundary. What is
 * the replica's own — its items' tokens, contexts and TBT statistics, the lookup counts — waits
 * until the run ends (run_settle). What the run skips per boundary: the items' updates, blocks_grow,
 * admission, the batch, the cost setup. (run_may_go_on: not with the accounting walker, which reads
 * every replica's items at any boundary, nor with the timeline or a trace sink, which read the
 * items at each iteration's end, nor once a trace has named blocks for the prefix cache;
 * KVSIM_DECODE_RUNS_GO_ON=0 turns it off, for comparisons.) */

/* whether the blocks the formation after rp's step in flight takes are free (run_steps' test:
 * else that formation must evict or preempt) */
static int run_next_blocks_free(Sim *sm, Replica *rp, DecodeRun *dr)
{
    if (sm->cfg->alloc != SIM_ALLOC_ONDEMAND || dr->slack > 0) return 1;
    if (dr->need < 0) dr->need = run_need(sm, rp, dr->n);
    return !(dr->need > 0 && rp->pool_used + dr->need > rp->pool_cap);
}

/* the step in flight of rp's run ended (now), its next formation's blocks free
 * (run_next_blocks_free): take it as run_steps would have taken it (its GPU time is on the stages
 * already: iter_advance added it); -1 out of memory */
static int run_take_inflight(Sim *sm, Replica *rp, DecodeRun *dr)
{
    int64_t n = dr->n, end = sim_now(sm);
    if (run_gaps_room(sm, dr, n) != 0) return -1;
    SIM_CHECK(sm, end == t_add(t_add(dr->t, sm->overhead_ns), t_mul(round_ns(dr->base), sm->L)));
    dr->gaps[n] = (uint64_t)(end - dr->t);
    if (sm->cfg->alloc == SIM_ALLOC_ONDEMAND && dr->slack <= 0) {
        if (dr->rb.on) {
            run_take_phase(sm, rp, &dr->rb, n + 1, &dr->need);
        } else {
            dr->slack = run_take(sm, rp, n + 1, &dr->need);
            if (run_phases_build(sm, rp, &dr->rb, n + 1) == 0) dr->slack = 0;
        }
    } else {
        dr->slack--;
        dr->need = -1;
    }
    dr->t = end;
    dr->dctx += dr->B;
    dr->n = n + 1;
    if (!dr->line_on) {
        ctab_attn_decode_line(sm, &dr->line, dr->B);
        dr->line_on = 1;
    }
    double attn = 0;
    attn += cost_line_ns(&dr->line, dr->dctx);
    dr->base = dr->lin + attn;
    return 0;
}

/* at the end of rp's step in flight (iter_done): 1 when its run went on (see above), 0 when the
 * iteration ends as any other */
static int run_go_on(Sim *sm, Replica *rp)
{
    DecodeRun *dr = &rp->dr;
    /* save_mode=iteration: the saves iter_done makes at this step, where the run stopped for one or
     * a dropped state may have reset a session's issued_pos */
    /* not once a trace has named blocks (sm->pfx_B): the runs that went on across other replicas'
     * events gave other results with the HBM prefix cache (the Mooncake replay on 4 replicas), so
     * those runs end at every boundary, as before */
    if (sm->pfx_B) return 0;
    int saves = sm->save_mode == SAVE_PER_ITERATION && (dr->stop == RUN_STOP_STEPS || sm->state_drops != dr->drops);
    if (dr->stop == RUN_STOP_BLOCKS || dr->n + 1 >= dr->kdone || (dr->stop && !saves) || rp->n_active != rp->n_items ||
        rp->n_restoring > 0 || ((rp->q_len || rp->pre_n) && rp->n_active < sm->cfg->max_batch) || !run_next_blocks_free(sm, rp, dr))
        return 0;
    int64_t now = sim_now(sm), k = dr->n, last = k > 0 ? dr->t : -1; /* the items' last tokens before this step */
    /* iter_done's reports and saves */
    metrics_on_iteration_done(sm, rp);
    metrics_on_iteration_span(sm, rp, rp->run_start_ns, now, (int)rp->run_steps);
    metrics_on_step_tokens(sm, rp, last);
    if (saves)
        for (int i = 0; i < rp->n_items; i++) {
            Request *r = rp->items[i].r;
            int64_t pos = r->hist + r->new_done + r->out_done + k; /* (its out_done k + 1 steps behind) */
            if (pos - r->s->issued_pos >= 64) tier_save_range(sm, r->s, pos);
        }
    /* form_iteration's */
    rp->form_pending = 0;
    if (run_take_inflight(sm, rp, dr) != 0) return 1; /* (failed: the run ends) */
    if (saves) {
        run_limits(sm, rp, dr);
        dr->stop = 0;
        dr->drops = sm->state_drops;
    }
    rp->run_start_ns = now;
    for (int st = 0; st < sm->S; st++) rp->run_busy0[st] = rp->busy_stage_ns[st];
    int64_t m = run_steps(sm, rp, dr, run_stop_time(sm));
    ctab_linear_count(sm, dr->B, (uint64_t)m + 1);
    run_report(sm, rp, k + 1, m, now, now);
    rp->direct_save_ns = 0;
    rp->iter_start_ns = dr->t;
    rp->cursor_ns = t_add(rp->iter_start_ns, sm->overhead_ns);
    rp->layer = 0;
    rp->wait_r = NULL;
    iter_advance(sm, rp);
    return 1;
}

void form_iteration(Sim *sm, Replica *rp)
{
    rp->form_pending = 0;
    if (sm->failed) return;
    if (!rp->iterating && blocks_grow(sm, rp) != 0) return; /* running requests' blocks before admission (vLLM) */
    admit_queue(sm, rp);
    if (rp->iterating || sm->failed) return;
    form_batch(sm, rp);
    int64_t direct_tokens = 0, direct_pieces = 0;
    if (sm->save_mode == SAVE_DIRECT)
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if ((it->type == IT_RECOMP && it->r->tw) || it->type == IT_RESUME) continue; /* saved already */
            direct_tokens += it->tokens;
            direct_pieces += (it->tokens + 63) / 64;
        }
    if (rp->n_items == 0) return;
    int64_t start = sim_now(sm);
    rp->run_start_ns = start;
    rp->run_steps = 1;
    for (int st = 0; st < sm->S; st++) rp->run_busy0[st] = rp->busy_stage_ns[st];
    if (decode_run_ok(sm, rp)) {
        start = decode_run(sm, rp);
    } else {
        metrics_on_iteration(sm, rp);
        layer_costs(sm, rp);
    }
    rp->direct_save_ns = tier_direct_save_ns(sm, direct_tokens, direct_pieces);
    rp->iterating = 1;
    rp->iter_start_ns = start;
    rp->cursor_ns = t_add(rp->iter_start_ns, sm->overhead_ns);
    if (sm->observer) sm->observer->iter_formed(sm, rp);
    rp->layer = 0;
    rp->wait_r = NULL;
    iter_advance(sm, rp);
}

/* the boundary between two iterations of rp: the tests' hook, then the accounting walker */
static void boundary(Sim *sm)
{
    if (sm->test_hook) sm->test_hook(sm, sm->test_ctx);
    if (sm->check && !sm->failed && ++sm->check_n % (uint64_t)sm->check == 0) sim_check(sm);
}

void iter_done(Sim *sm, Replica *rp)
{
    if (rp->dr.on) {
        if (run_go_on(sm, rp)) return;
        run_settle(sm, rp);
    }
    int64_t now = sim_now(sm);
    if (sm->observer) sm->observer->iter_done(sm, rp);
    metrics_on_iteration_done(sm, rp);
    metrics_on_iteration_span(sm, rp, rp->run_start_ns, now, (int)rp->run_steps); /* plots/trace: the iteration's (or decode run's) one span hook */
    rp->iterating = 0;
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        Request *r = it->r;
        int64_t pos = 0; /* context positions with KV after this iteration (for saving) */
        switch (it->type) {
        case IT_RECOMP:
            if (now > r->t_restored) r->t_restored = now;
            if (r->tw) {
                r->tw_comp += it->tokens;
                r->tw_comp_inflight = 0;
                restore_tw_issue(sm, r);
                restore_tw_check_done(sm, r);
                continue; /* restored state was saved before */
            }
            r->recompute_left -= it->tokens;
            r->recompute_done += it->tokens;
            restore_progress(sm, r);
            pos = r->recompute_done;
            break;
        case IT_NEW:
            if (it->lw) {
                r->lw_pending = 0;
                restore_progress(sm, r);
            }
            r->new_left -= it->tokens;
            r->new_done += it->tokens;
            if (r->new_left == 0) {
                r->t_first = r->t_last_tok = now;
                r->out_done = 1;
                rq_set_state(sm, r, RQ_DECODE);
                if (r->held < r->n_names && blocks_publish(sm, rp, r) != 0) return;
            }
            pos = r->hist + r->new_done;
            break;
        case IT_RESUME:
            blocks_resume_done(sm, r, it->tokens);
            continue; /* its context was saved before */
        case IT_DECODE: {
            metrics_on_token(sm, r, now - r->t_last_tok);
            r->t_last_tok = now;
            r->out_done++;
            pos = r->hist + r->new_done + r->out_done - 1;
            break;
        }
        }
        if (sm->save_mode == SAVE_PER_ITERATION && pos - r->s->issued_pos >= 64) tier_save_range(sm, r->s, pos);
        else if (sm->save_mode == SAVE_DIRECT) tier_direct_saved(sm, r->s, pos);
    }
    /* distinct requests that finished (a request can hold two items: its last history chunk and its
     * first new-input chunk); the items array is free to reuse as scratch now */
    int nd = 0;
    for (int i = 0; i < rp->n_items; i++) {
        Request *r = rp->items[i].r;
        if (!r->in_iter) continue;
        rq_set_in_iter(sm, r, 0);
        if (r->state == RQ_DECODE && r->out_done >= r->nout) rp->items[nd++].r = r;
    }
    for (int i = 0; i < nd; i++) request_done(sm, rp, rp->items[i].r);
    rp->n_items = 0;
    boundary(sm);
    form_iteration(sm, rp);
}
