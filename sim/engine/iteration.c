/* iteration.c — forming an iteration and ending it.
 *
 * Responsible for: the batch of one replica's next iteration (continuous batching under the token
 * budget: decode tokens first; then, in admission order, restoration compute — token-wise chunks,
 * or whole-model recompute of the history as the head of one sequence, capped at restore_share of
 * the budget — and new-input chunks, a layer-wise restoration's first chunk only once its early
 * layers' state arrived; then low-priority restoration compute), its per-layer durations (linear
 * ops over all rows + each item's attention; layer-wise work adds recompute rows to the GEMMs,
 * hidden-state projections, dequantization and all-gathers per layer; stage-parallel restorations
 * run in per-stage lanes before the walk), SAVE_DIRECT's synchronous write time; and at its end the
 * items' progress (recompute, token-wise compute, new input, decode tokens), saves per iteration,
 * and the requests that finished. Moves RQ_RESTORING → RQ_PREFILL (through restore_progress) and
 * RQ_PREFILL → RQ_DECODE (the first output token). Runs the accounting walker at each boundary when
 * enabled.
 * Not responsible for: the walk itself (walk.c), admission (lifecycle.c), the cost composition of a
 * layer (sim/cost/layer_cost via estimate.c).
 * Invariants: a replica runs one iteration at a time; a request is in at most one iteration
 * (in_iter), with at most two items (its last history chunk and its first new-input chunk).
 * Complexity: forming O(active + items × L) (× L only with layer-wise work in the batch); ending
 * O(items).
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

/* the batch: decode first; then, in admission order, restoration compute and new input; then
 * low-priority restoration compute (Cake: decode > ordinary prefill > restoration) */
static void form_batch(Sim *sm, Replica *rp)
{
    rp->n_items = 0;
    int64_t budget = sm->cfg->token_budget;
    /* restoration compute may take at most restore_share of the budget (Cake's emulation of GPU
     * availability); 1 = no cap */
    int64_t rbudget = sm->cfg->restore_share >= 1 ? INT64_MAX : (int64_t)(sm->cfg->restore_share * (double)budget);
    for (int i = 0; i < rp->n_active; i++) {
        Request *r = rp->active[i];
        if (r->state == RQ_DECODE) {
            item_add(sm, rp, (IterItem){r, IT_DECODE, 0, 1, r->hist + r->nnew + r->out_done});
            budget--;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rp->n_active && budget > 0; i++) {
            Request *r = rp->active[i];
            if (pass == r->low_prio) { /* restoration compute in its pass */
                if (r->tw) {
                    int64_t avail = r->tw_io_issued - r->tw_comp;
                    if (avail > 0 && !r->tw_comp_inflight && rbudget > 0) {
                        int64_t c = avail < budget ? avail : budget;
                        if (c > rbudget) c = rbudget;
                        if (r->tw_comp_chunk > 0 && c > r->tw_comp_chunk) c = r->tw_comp_chunk;
                        item_add(sm, rp, (IterItem){r, IT_RECOMP, 0, c, r->tw_comp});
                        r->tw_comp_inflight = c;
                        budget -= c;
                        rbudget -= c;
                    }
                    continue;
                }
                if (r->recompute_left > 0) {
                    /* the history is prefilled again as the head of one sequence: its last chunk and
                     * the first chunk of the new input may share an iteration */
                    if (rbudget <= 0) continue;
                    int unchunked = r->recompute_chunk < 0; /* the policy's: one prefill of it all */
                    int64_t c = r->recompute_left < budget ? r->recompute_left : budget;
                    if (c > rbudget) c = rbudget;
                    if (r->recompute_chunk > 0 && c > r->recompute_chunk) c = r->recompute_chunk;
                    if (unchunked) c = r->recompute_left;
                    item_add(sm, rp, (IterItem){r, IT_RECOMP, 0, c, r->recompute_done});
                    budget = budget > c ? budget - c : 0;
                    rbudget -= c;
                    if (c < r->recompute_left || (budget == 0 && !unchunked) || r->lw_tokens > 0 || pass == 1) continue;
                    goto new_input; /* the history ends in this iteration */
                }
            }
            if (pass == 1 || r->tw || r->recompute_left > 0) continue;
        new_input:
            if (r->new_left > 0) {
                int lw = r->lw_pending;
                if (lw && (r->stage_par ? r->bnd_left > 0 : r->arrived_prefix < r->early_layers)) continue;
                int64_t c = r->new_left < budget ? r->new_left : budget;
                if (r->recompute_chunk < 0 && r->recompute_total > 0) c = r->new_left; /* unchunked prefill */
                item_add(sm, rp, (IterItem){r, IT_NEW, lw, c, r->hist + r->new_done});
                budget = budget > c ? budget - c : 0;
            }
        }
}

/* per-layer durations of the batch in rp->layer_ns, and the stage-parallel lanes (rp->pre_ns) */
static void layer_costs(Sim *sm, Replica *rp)
{
    int64_t M = 0, B = 0, dctx = 0;
    double attn = 0;
    CostModel *cm = &sm->w->cost;
    int any_lw = 0;
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        M += it->tokens;
        if (it->type == IT_DECODE) {
            B++;
            dctx += it->ctx;
        } else {
            attn += ctab_attn_prefill_ns(sm, it->tokens, it->ctx);
        }
        if (it->lw) any_lw = 1;
        it->r->in_iter = 1;
    }
    if (B) attn += ctab_attn_decode_ns(sm, B, dctx);
    double base = est_linear_ns(sm, M) + attn;
    for (int l = 0; l < sm->L; l++) rp->layer_ns[l] = base;
    rp->pre_ns = 0;
    rp->any_lw = any_lw;
    if (!any_lw) return;
    /* stage-parallel restorations first: every stage recomputes its own prefix layers for the
     * history at once (from its boundary activation), the iteration's walk starts after the
     * slowest stage */
    double lane[SIM_MAX_STAGES] = {0};
    for (int i = 0; i < rp->n_items; i++) {
        IterItem *it = &rp->items[i];
        if (!it->lw || !it->r->stage_par) continue;
        Request *r = it->r;
        for (int l = 0; l < sm->L; l++) {
            if (r->mode[l] != LM_RECOMPUTE) continue;
            lane[sm->stage_of[l]] += est_layer_ns(sm, r->lw_tokens, r->recompute_total);
            if (restore_is_boundary(sm, r, l) && sm->T > 1 && cost_has(cm, OP_ALLGATHER))
                lane[sm->stage_of[l]] += cost_lookup_ns(cm, OP_ALLGATHER, r->lw_tokens, 0, 0);
        }
    }
    for (int st = 0; st < sm->S; st++) {
        rp->busy_stage_ns[st] += lane[st];
        if (lane[st] > rp->pre_ns) rp->pre_ns = lane[st];
    }
    /* layer-wise restoration work: recompute rows join the GEMMs, hidden states are projected
     * (all-gathered under TP), quantized KV is dequantized. Within a layer that work runs first, in
     * item order: a request's state of layer l is KV at the layer's start + the work up to its own
     * (rc_layer / rc_off_ns: its last such layer, for the end of its restoration, walk.c) */
    int64_t prevR = -1;
    double prev_lin = base - attn;
    for (int i = 0; i < rp->n_items; i++)
        if (rp->items[i].lw) rp->items[i].r->rc_layer = -1;
    for (int l = 0; l < sm->L; l++) {
        int64_t R = 0;
        double extra = 0, conv = 0;
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (!it->lw) continue;
            Request *r = it->r;
            if (r->mode[l] == LM_RECOMPUTE && r->stage_par) continue; /* done in its stage's lane */
            if (r->mode[l] == LM_RECOMPUTE) {
                R += r->lw_tokens;
                extra += cost_lookup_ns(cm, OP_ATTN_PREFILL, r->lw_tokens, r->recompute_total, 0);
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

void form_iteration(Sim *sm, Replica *rp)
{
    rp->form_pending = 0;
    if (sm->failed) return;
    admit_queue(sm, rp);
    if (rp->iterating || sm->failed) return;
    form_batch(sm, rp);
    int64_t direct_tokens = 0, direct_pieces = 0;
    if (sm->save_mode == SAVE_DIRECT)
        for (int i = 0; i < rp->n_items; i++) {
            IterItem *it = &rp->items[i];
            if (it->type == IT_RECOMP && it->r->tw) continue; /* restored state is saved already */
            direct_tokens += it->tokens;
            direct_pieces += (it->tokens + 63) / 64;
        }
    if (rp->n_items == 0) return;
    metrics_on_iteration(sm, rp);
    layer_costs(sm, rp);
    rp->direct_save_ns = tier_direct_save_ns(sm, direct_tokens, direct_pieces);
    rp->iterating = 1;
    rp->iter_start_ns = sim_now(sm);
    rp->cursor_ns = rp->iter_start_ns + sm->overhead_ns + (int64_t)llround(rp->pre_ns);
    for (int i = 0; i < rp->n_items; i++) /* stage-parallel recompute is done when the lanes are */
        if (rp->items[i].lw && rp->items[i].r->stage_par && rp->cursor_ns > rp->items[i].r->t_restored)
            rp->items[i].r->t_restored = rp->cursor_ns;
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
    int64_t now = sim_now(sm);
    metrics_on_iteration_done(sm, rp);
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
            }
            pos = r->hist + r->new_done;
            break;
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
        r->in_iter = 0;
        if (r->state == RQ_DECODE && r->out_done >= r->nout) rp->items[nd++].r = r;
    }
    for (int i = 0; i < nd; i++) request_done(sm, rp, rp->items[i].r);
    rp->n_items = 0;
    boundary(sm);
    form_iteration(sm, rp);
}
