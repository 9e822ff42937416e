/* blocks.c — the KV blocks of admitted requests: what admission takes, growth, preemption.
 *
 * Responsible for (alloc=ondemand, vLLM's block manager and scheduler; docs/model.md "KV blocks"):
 *  - what a request needs reserved when it is admitted (blocks_admit_need): its history + new input
 *    + the first output token (the prefill produces it; kvsim keeps a turn's whole context as the
 *    session's resident KV, so a request holds the blocks of every token it has produced), and what
 *    admission leaves free (blocks_admit_headroom: block_watermark of the pool's blocks, vLLM's
 *    watermark, default 0.01; none while no request is admitted, so a request that fits is never
 *    held back by it);
 *  - decode growth (blocks_grow, before a batch is formed, in admission order as vLLM schedules its
 *    running queue): a decoding request whose next token crosses a block boundary takes a block; when
 *    the pool has none, idle sessions' resident KV goes first (LRU, like vLLM's evictable prefix-cache
 *    blocks), then — when the request is the only one admitted — the KV kept for queued turns
 *    (newest first, as admission takes it), then the most recently admitted decoding request is
 *    preempted (vLLM's victim: the tail of the running queue; possibly the request itself). Requests still restoring or prefilling
 *    keep the blocks admission gave them (they need no more until their first token);
 *  - preemption: the victim leaves the batch for the head of the admission queue (RQ_DECODE →
 *    RQ_QUEUED). preempt=recompute frees its blocks; re-admitted, it re-prefills its whole context
 *    (history + new + the tokens generated so far, in token-budget chunks: IT_RESUME) and that
 *    prefill produces its next token. preempt=swap copies its blocks to host DRAM over each stage's
 *    D2H (one unit per stage, each GPU its shard; the GPU blocks are reusable at once — the copy is
 *    ordered before their reuse on the GPU's stream) and, re-admitted, back over H2D (after the copy
 *    out has landed); then it decodes on. Swap space in host DRAM is not capped.
 * alloc=reserve (blocks_admit_need: the whole turn, output included) never grows nor preempts.
 * The replica's lists of admitted requests (active_push; admission order) and of preempted ones
 * waiting for re-admission (queue_push_front) are kept here.
 * Not responsible for: the pool's accounting (session.c: pool_reserve / pool_release, SIM_CHECKed
 * within [0, capacity]), the admission FIFO (lifecycle.c), forming and ending iterations
 * (iteration.c calls blocks_grow and blocks_resume_done).
 * Invariants: an admitted request holds reserved_tokens = whole blocks covering at least
 * history + new + out_done tokens (+ 1 before its first token); a queued preempted request holds no
 * blocks and its session no resident KV; a swapped request's swap-in starts only after its swap-out
 * has landed; every token of a preempted request is still delivered (out_done only grows).
 * Complexity: blocks_grow O(active) per batch plus O(active) per preemption; admission O(1).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

static int ondemand(const Sim *sm) { return sm->cfg->alloc == SIM_ALLOC_ONDEMAND; }

/* a preempted request waits for re-admission, before the admission FIFO */
int queue_push_front(Sim *sm, Replica *rp, Request *r)
{
    if (rp->pre_n == rp->pre_cap) {
        int nc = rp->pre_cap ? rp->pre_cap * 2 : 16;
        Request **np = realloc(rp->pre, (size_t)nc * sizeof *np);
        if (!np) return sim_fail(sm, "out of memory");
        rp->pre = np;
        rp->pre_cap = nc;
    }
    rp->pre[rp->pre_n++] = r; /* the last one pushed is admitted first */
    return 0;
}

/* r joins rp's admitted requests (admission order: the batch order, and blocks.c's victim order) */
int active_push(Sim *sm, Replica *rp, Request *r)
{
    if (rp->n_active == rp->cap_active) {
        int nc = rp->cap_active ? rp->cap_active * 2 : 64;
        Request **na = realloc(rp->active, (size_t)nc * sizeof *na);
        if (!na) return sim_fail(sm, "out of memory");
        rp->active = na;
        rp->cap_active = nc;
    }
    rp->active[rp->n_active++] = r;
    return 0;
}

int64_t blocks_turn_need(const Sim *sm, int64_t hist, int64_t nnew, int64_t nout, int64_t held)
{
    return blocks_private(sm, hist + nnew + (ondemand(sm) ? 1 : nout), held);
}

int64_t blocks_admit_need(const Sim *sm, const Request *r)
{
    if (!ondemand(sm)) return blocks_private(sm, r->hist + r->nnew + r->nout, r->held);
    if (!r->preempted) return blocks_private(sm, r->hist + r->nnew + 1, r->held);
    /* swapped: the blocks it had; recompute: its context again, through the token the re-prefill produces */
    int64_t ctx = r->hist + r->nnew + r->out_done;
    return blocks_tokens(sm, sm->cfg->preempt == SIM_PREEMPT_SWAP ? ctx : ctx + 1);
}

int64_t blocks_admit_headroom(const Sim *sm, const Replica *rp)
{
    if (!ondemand(sm) || rp->n_active == 0) return 0;
    int64_t b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16;
    return (int64_t)(sm->cfg->block_watermark * (double)(rp->pool_cap / b)) * b; /* vLLM: int(watermark × blocks) */
}

/* ---- swap: per stage one unit of each GPU's shard of the request's blocks ---- */

static void swap_issue(Sim *sm, Request *r, int in);

static void swap_out_done(Sim *sm, Unit *u)
{
    Request *r = u->r;
    unit_free(sm, u);
    if (--r->swap_out_left > 0 || !r->swap_in_wait) return;
    r->swap_in_wait = 0;
    swap_issue(sm, r, 1); /* re-admitted while its copy out was still crossing */
}

static void swap_in_done(Sim *sm, Unit *u)
{
    Request *r = u->r;
    unit_free(sm, u);
    if (--r->swap_in_left > 0) return;
    rq_set_state(sm, r, RQ_DECODE);
    sim_kick(sm, &sm->rep[r->replica]);
}

/* r's swap_tokens of KV over each stage's D2H (out) or H2D (in); served as loads (ahead of saves:
 * the scheduler waits for them) */
static void swap_issue(Sim *sm, Request *r, int in)
{
    Replica *rp = &sm->rep[r->replica];
    double total = (double)r->swap_tokens * sm->kv_tok_layer * sm->L;
    if (in) sm->res->swap_in_bytes += total;
    else sm->res->swap_out_bytes += total;
    for (int st = 0; st < sm->S; st++) {
        Unit *u = unit_new(sm);
        if (!u) return;
        u->r = r;
        u->kind = U_LOAD;
        u->layer = -1;
        u->stage = st;
        u->done = in ? swap_in_done : swap_out_done;
        u->chain[0] = rep_channel(rp, in ? CH_H2D : CH_D2H, st);
        u->bytes[0] = (double)r->swap_tokens * sm->kv_tok_layer_gpu * sm->stage_layers[st];
        u->nhops = 1;
        if (in) r->swap_in_left++;
        else r->swap_out_left++;
        ch_enqueue(sm, u);
    }
}

/* ---- preemption ---- */

/* r (decoding, not in an iteration) leaves the batch for the head of the admission queue */
static int preempt(Sim *sm, Replica *rp, int idx)
{
    Request *r = rp->active[idx];
    memmove(&rp->active[idx], &rp->active[idx + 1], (size_t)(rp->n_active - idx - 1) * sizeof *rp->active);
    rp->n_active--;
    r->preempts++;
    r->preempted = 1;
    sm->res->preemptions++;
    if (r->preempts == 1) sm->res->preempted_requests++;
    if (sm->cfg->preempt == SIM_PREEMPT_SWAP) {
        r->swap_tokens = r->reserved_tokens + r->held * sm->pfx_B; /* its whole context: its cached blocks too */
        swap_issue(sm, r, 0);
    }
    pool_release(sm, rp, r->reserved_tokens);
    r->reserved_tokens = 0;
    r->s->resident_tokens = 0; /* its KV was this request's blocks: gone (or in host DRAM) */
    prefix_release(&rp->pfx, r->names, (size_t)r->held); /* its cached blocks stay cached, unreferenced */
    r->held = 0;
    rq_set_state(sm, r, RQ_QUEUED);
    return queue_push_front(sm, rp, r);
}

int blocks_grow(Sim *sm, Replica *rp)
{
    if (!ondemand(sm)) return 0;
    for (int i = 0; i < rp->n_active && !sm->failed;) {
        Request *r = rp->active[i];
        if (r->state != RQ_DECODE) {
            i++;
            continue;
        }
        int64_t need = blocks_private(sm, r->hist + r->nnew + r->out_done + 1, r->held) - r->reserved_tokens;
        /* the KV kept for queued turns only when r is the sole admitted request: no other can free
         * room, and preempting r would just swap it back into the same room (or, recomputing, take
         * that KV at re-admission anyway) */
        while (need > 0 && rp->pool_used + need > rp->pool_cap &&
               (hbm_evict_one(sm, rp) || (rp->n_active == 1 && hbm_evict_queued(sm, rp, r->s)))) {
        }
        if (need <= 0 || rp->pool_used + need <= rp->pool_cap) {
            if (need > 0) {
                pool_reserve(sm, rp, need);
                r->reserved_tokens += need;
                metrics_on_pool(sm, rp);
            }
            i++;
            continue;
        }
        /* no block left: the most recently admitted decoding request goes (r itself at the latest) */
        int v = rp->n_active - 1;
        while (rp->active[v]->state != RQ_DECODE) v--;
        if (preempt(sm, rp, v) != 0) return -1;
        if (v == i) continue; /* r itself: the next request moved to index i */
    }
    return sm->failed ? -1 : 0;
}

/* vLLM caches a block as soon as it is computed: at the first token (and again at the request's end
 * after a preemption released them) r's named blocks enter the prefix cache and r holds them; a block
 * another request put there first is kept once and its room in r's reservation given back */
int blocks_publish(Sim *sm, Replica *rp, Request *r)
{
    if (r->held >= r->n_names) return 0;
    int64_t before = rp->pfx.n_blocks, n = r->n_names - r->held;
    if (prefix_insert(&rp->pfx, r->names + r->held, (size_t)n, 1) != n) return sim_fail(sm, "out of memory");
    int64_t inserted = rp->pfx.n_blocks - before;
    r->held = r->n_names;
    r->reserved_tokens -= n * sm->pfx_B;
    SIM_CHECK(sm, r->reserved_tokens >= 0);
    if (n > inserted) pool_release(sm, rp, (n - inserted) * sm->pfx_B);
    return 0;
}

int blocks_readmit(Sim *sm, Replica *rp, Request *r)
{
    if (active_push(sm, rp, r) != 0) return -1;
    r->preempted = 0;
    rq_set_state(sm, r, RQ_PREFILL);
    if (sm->cfg->preempt == SIM_PREEMPT_SWAP) {
        if (r->swap_out_left > 0) r->swap_in_wait = 1;
        else swap_issue(sm, r, 1);
        return sm->failed ? -1 : 0;
    }
    /* recompute: the whole context so far, prefilled from scratch; it produces the next token */
    r->resume_done = 0;
    r->resume_left = r->hist + r->nnew + r->out_done;
    sm->res->preempt_recomputed_tokens += (uint64_t)r->resume_left;
    return 0;
}

void blocks_resume_done(Sim *sm, Request *r, int64_t tokens)
{
    r->resume_left -= tokens;
    r->resume_done += tokens;
    if (r->resume_left > 0) return;
    int64_t now = sim_now(sm);
    metrics_on_token(sm, r, now - r->t_last_tok);
    r->t_last_tok = now;
    r->out_done++;
    rq_set_state(sm, r, RQ_DECODE);
}
