/* walk.c — the layer walk of an iteration in flight.
 *
 * Responsible for: advancing a replica's cursor layer by layer from where it stands, adding each
 * layer's duration to its stage's busy time, stopping at the first layer whose state (a restoring
 * request's layer-wise load) has not arrived — either re-arming at the cursor (EV_ITER_RESUME) when
 * the cursor is ahead of the clock, or waiting for that state (rp->wait_r, rp->wait_layer: the load's
 * arrival resumes the walk) — and, after the last layer (plus SAVE_DIRECT's synchronous writes),
 * arming EV_ITER_DONE. An iteration with no layer-wise work is one step (every layer costs the same).
 * Not responsible for: the per-layer durations (iteration.c computes rp->layer_ns when forming),
 * what happens when the iteration ends (iteration.c).
 * A stage-parallel restoration's recompute lane of stage s runs when the walk reaches stage s's first
 * layer, from the later of the iteration's start and its boundary activation's arrival (stage_lanes).
 * Invariants: the cursor never goes back; a layer is walked once per iteration; layer-wise
 * recompute finishes (t_restored) when the cursor passes its layer, a request's last projection or
 * dequantize rc_off_ns after the start of its layer (rc_layer, set when the iteration was formed).
 * Complexity: O(layer-wise items) per layer walked (rp->lw_idx, listed when the batch was formed);
 * O(stages) for an iteration without layer-wise work.
 */
#include <math.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

/* The walk reached the first layer of stage st (every state its layer needs has arrived, the
 * boundary activations included): the stage-parallel restorations' recompute lanes of st run on
 * the stage's GPU, in item order, each from the later of the iteration's start (after its host
 * overhead) and its own boundary activation's arrival (stage 0 recomputes from the tokens); the
 * stage's layers start after them. A lane ends that request's recompute on the stage. */
static void stage_lanes(Sim *sm, Replica *rp, int st)
{
    int64_t t = t_add(rp->iter_start_ns, sm->overhead_ns);
    int any = 0;
    for (int j = 0; j < rp->n_lw; j++) {
        IterItem *it = &rp->items[rp->lw_idx[j]];
        if (!it->r->stage_par || it->r->lane_ns[st] <= 0) continue;
        Request *r = it->r;
        if (st > 0 && r->bnd_ns[st] > t) t = r->bnd_ns[st];
        t = t_add(t, round_ns(r->lane_ns[st]));
        if (t > r->t_restored) r->t_restored = t;
        any = 1;
    }
    if (any && t > rp->cursor_ns) rp->cursor_ns = t;
}

void iter_advance(Sim *sm, Replica *rp)
{
    int64_t now = sim_now(sm);
    if (!rp->any_lw && rp->layer == 0) { /* nothing in flight: every layer costs the same, one event */
        int64_t d = round_ns(rp->layer_ns[0]);
        for (int st = 0; st < sm->S; st++) rp->busy_stage_ns[st] += (double)d * sm->stage_layers[st];
        if (sm->observer)
            for (int l = 0; l < sm->L; l++) sm->observer->layer(sm, rp, l, t_add(rp->cursor_ns, t_mul(d, l)), t_add(rp->cursor_ns, t_mul(d, l + 1)));
        rp->cursor_ns = t_add(rp->cursor_ns, t_mul(d, sm->L));
        rp->layer = sm->L;
    }
    while (rp->layer < sm->L) {
        int l = rp->layer;
        Request *waiting = NULL;
        for (int j = 0; j < rp->n_lw; j++) { /* (the layer-wise items, in item order) */
            Request *r = rp->items[rp->lw_idx[j]].r;
            if (!r->arrived[l]) {
                waiting = r;
                break;
            }
        }
        if (waiting) {
            if (rp->cursor_ns > now) {
                rp->iter_seq = sim_push(sm, rp->cursor_ns, EV_ITER_RESUME, rp, 0);
            } else {
                rp->wait_r = waiting;
                rp->wait_layer = l;
            }
            return;
        }
        if (l == 0 || sm->stage_of[l - 1] != sm->stage_of[l]) stage_lanes(sm, rp, sm->stage_of[l]);
        int64_t d = round_ns(rp->layer_ns[l]);
        rp->busy_stage_ns[sm->stage_of[l]] += (double)d;
        int64_t layer_start = rp->cursor_ns;
        rp->cursor_ns = t_add(rp->cursor_ns, d);
        metrics_on_layer_walked(sm, rp, l, layer_start, rp->cursor_ns); /* plots: the timeline's layer spans */
        if (sm->observer) sm->observer->layer(sm, rp, l, layer_start, rp->cursor_ns);
        for (int j = 0; j < rp->n_lw; j++) {
            Request *r = rp->items[rp->lw_idx[j]].r;
            if (!r->stage_par && r->mode[l] == LM_RECOMPUTE && rp->cursor_ns > r->t_restored) r->t_restored = rp->cursor_ns;
            if (r->rc_layer == l) { /* its last projection / dequantize, at the head of the layer */
                int64_t t = t_add(layer_start, round_ns(r->rc_off_ns));
                if (t > rp->cursor_ns) t = rp->cursor_ns;
                if (t > r->t_restored) r->t_restored = t;
            }
        }
        rp->layer++;
    }
    if (rp->direct_save_ns > 0) { /* synchronous writes after the last layer */
        rp->cursor_ns = t_add(rp->cursor_ns, round_ns(rp->direct_save_ns));
        rp->direct_save_ns = 0;
    }
    rp->iter_seq = sim_push(sm, rp->cursor_ns, EV_ITER_DONE, rp, 0);
}
