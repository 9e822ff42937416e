/* lifecycle.c — a request from the trace to its end.
 *
 * Responsible for: reading the trace ahead up to the next timed arrival (closed-loop turns wait
 * for their session's previous turn plus think time), arrivals, release (a turn joins its session's
 * replica's admission FIFO; a new session is routed to the replica with the fewest requests in
 * flight), the admission queue (FIFO, as soon as the KV pool — evicting idle sessions' KV in LRU
 * order — and a batch slot allow, also while an iteration runs so that restoration IO starts at
 * admission; a turn that can never fit the pool is dropped), and request done (the reservation
 * becomes the session's resident KV, the rest of the turn's state is saved, the session's next
 * turn is released). Moves RQ_ARRIVED → RQ_QUEUED, RQ_QUEUED → RQ_DONE (dropped), RQ_DECODE →
 * RQ_DONE.
 * Not responsible for: restoration (restore.c), batching (iteration.c), what is measured
 * (metrics_on_request_done).
 * Memory: until admission a request is a compact Turn (turn.c, 56 bytes: pending in its session,
 * in its arrival or release event, or queued — 64 bytes with its ring slot); the full Request is
 * made when admit_queue admits it.
 * Invariants: a session has at most one turn released and not done (s->busy); its later turns wait
 * in its pending list in trace order; the pool stays within [0, capacity] (SIM_CHECK in
 * pool_reserve/pool_release); active_count = queued + admitted requests of the replica.
 * Complexity: release O(replicas) for a new session, else O(1); admission O(1) per request plus
 * O(evicted); request done O(active) (removal from the admission-ordered array).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

void request_free(Request *r)
{
    r->s->refs--;
    free(r->mode);
    free(r->arrived);
    free(r);
}

void request_done(Sim *sm, Replica *rp, Request *r)
{
    rq_set_state(sm, r, RQ_DONE);
    if (sm->failed) return;
    sm->done_requests++;
    metrics_on_request_done(sm, r);
    Session *s = r->s;
    int64_t ctx = r->hist + r->nnew + r->nout;
    /* the reservation becomes the session's resident KV */
    int64_t keep = blocks_tokens(sm, ctx);
    if (keep < r->reserved_tokens) pool_release(sm, rp, r->reserved_tokens - keep);
    s->resident_tokens = ctx;
    s->last_use_ns = sim_now(sm);
    s->busy = 0;
    if (sm->save_mode != SAVE_DIRECT) tier_save_range(sm, s, ctx); /* the rest of the turn (all of it at turn end) */
    if (sm->cfg->evict_each_turn) {
        pool_release(sm, rp, keep);
        s->resident_tokens = 0;
    } else {
        hbm_lru_add(rp, s);
    }
    rp->active_count--;
    /* remove from active */
    for (int i = 0; i < rp->n_active; i++)
        if (rp->active[i] == r) {
            memmove(&rp->active[i], &rp->active[i + 1], (size_t)(rp->n_active - i - 1) * sizeof *rp->active);
            rp->n_active--;
            break;
        }
    /* the next turn of the session */
    Turn *nx = s->pend_head;
    if (nx) {
        s->pend_head = nx->next;
        if (!s->pend_head) s->pend_tail = NULL;
        nx->next = NULL;
        int64_t now = sim_now(sm);
        int64_t t = nx->t_ns >= 0 ? kv_max_i64(nx->t_ns, now) : now + nx->think_ns;
        s->busy = 1;
        sim_push(sm, t, EV_RELEASE, nx, 0);
    }
    request_free(r);
    sess_maybe_free(sm, s);
}

static int queue_push(Sim *sm, Replica *rp, Turn *r)
{
    if (rp->q_len == rp->q_cap) {
        size_t nc = rp->q_cap ? rp->q_cap * 2 : 64;
        Turn **nq = malloc(nc * sizeof *nq);
        if (!nq) return sim_fail(sm, "out of memory");
        for (size_t i = 0; i < rp->q_len; i++) nq[i] = rp->queue[(rp->q_head + i) % rp->q_cap];
        free(rp->queue);
        rp->queue = nq;
        rp->q_cap = nc;
        rp->q_head = 0;
    }
    rp->queue[(rp->q_head + rp->q_len) % rp->q_cap] = r;
    rp->q_len++;
    return 0;
}

/* a turn is released: it joins its replica's admission queue */
void release_request(Sim *sm, Turn *r)
{
    Session *s = r->s;
    if (s->replica < 0) {
        int best = 0;
        for (int i = 1; i < sm->R; i++)
            if (sm->rep[i].active_count < sm->rep[best].active_count) best = i;
        s->replica = best;
    }
    Replica *rp = &sm->rep[s->replica];
    r->t_ns = sim_now(sm); /* from here on the release time (RQ_ARRIVED → RQ_QUEUED) */
    rp->active_count++;
    s->busy = 1;
    hbm_lru_remove(rp, s); /* its KV (if any) is about to be used */
    if (queue_push(sm, rp, r) == 0) sim_kick(sm, rp);
}

static void pend_append(Session *s, Turn *r)
{
    if (s->pend_tail) s->pend_tail->next = r;
    else s->pend_head = r;
    s->pend_tail = r;
}

/* pull trace requests up to the next timed arrival */
int pull_trace(Sim *sm)
{
    while (!sm->trace_done && !sm->failed) {
        if (!sm->have_next) {
            int rc = trace_next(sm->trace, &sm->next_tr, sm->e);
            if (rc < 0) return sm->failed = 1, -1;
            if (rc == 0) {
                sm->trace_done = 1;
                break;
            }
            sm->have_next = 1;
        }
        TraceRequest *tr = &sm->next_tr;
        Session *s = sess_get(sm, tr->session);
        if (!s) return sim_fail(sm, "out of memory");
        if (!s->name && tr->session_id && !(s->name = strdup(tr->session_id))) return sim_fail(sm, "out of memory");
        Turn *r = turn_alloc(sm);
        if (!r) return -1;
        r->id = sm->next_req_id++;
        r->s = s;
        s->refs++;
        r->turn = tr->turn;
        r->hist = (int32_t)tr->history_tokens;
        r->nnew = (int32_t)(tr->new_input_tokens < 1 ? 1 : tr->new_input_tokens);
        r->nout = (int32_t)(tr->output_tokens < 1 ? 1 : tr->output_tokens);
        r->t_ns = tr->arrival_ns;
        r->think_ns = tr->think_ns;
        sm->have_next = 0;
        if (tr->arrival_ns >= 0) {
            int64_t now = sim_now(sm);
            sim_push(sm, tr->arrival_ns > now ? tr->arrival_ns : now, EV_ARRIVAL, r, 0);
            return 0; /* read more when this one arrives */
        }
        /* closed loop: after the session's previous turn */
        if (!s->busy && !s->pend_head) {
            s->busy = 1;
            sim_push(sm, sim_now(sm) + r->think_ns, EV_RELEASE, r, 0);
        } else {
            pend_append(s, r);
        }
    }
    return 0;
}

void on_arrival(Sim *sm, Turn *r)
{
    Session *s = r->s;
    if (s->busy || s->pend_head) pend_append(s, r); /* previous turn still running: wait for it */
    else release_request(sm, r);
    pull_trace(sm);
}

/* the head of the queue can never fit the pool: it is dropped (RQ_QUEUED → RQ_DONE, with no row;
 * it never becomes a Request) */
static void drop_head(Sim *sm, Replica *rp, Turn *r)
{
    Session *s = r->s;
    rp->q_head = (rp->q_head + 1) % rp->q_cap;
    rp->q_len--;
    metrics_on_drop(sm);
    if (s->resident_tokens) sess_drop_resident(sm, rp, s);
    rp->active_count--;
    s->busy = 0;
    sm->done_requests++;
    Turn *nx = s->pend_head;
    if (nx) {
        s->pend_head = nx->next;
        if (!s->pend_head) s->pend_tail = NULL;
        nx->next = NULL;
        s->busy = 1;
        sim_push(sm, sim_now(sm) + (nx->t_ns >= 0 ? 0 : nx->think_ns), EV_RELEASE, nx, 0);
    }
    s->refs--;
    turn_free(sm, r);
    sess_maybe_free(sm, s);
}

/* the full Request of an admitted turn (its session reference passes to it), in RQ_QUEUED */
static Request *request_of_turn(Sim *sm, Turn *t)
{
    Request *r = calloc(1, sizeof *r);
    if (!r) {
        sim_fail(sm, "out of memory");
        return NULL;
    }
    r->id = t->id;
    r->s = t->s;
    r->state = RQ_QUEUED;
    r->turn = t->turn;
    r->replica = t->s->replica;
    r->arrival_ns = t->t_ns;
    r->hist = t->hist;
    r->nnew = t->nnew;
    r->nout = t->nout;
    r->think_ns = t->think_ns;
    turn_free(sm, t);
    return r;
}

/* Admission, FIFO, as soon as memory and a batch slot allow — also while an iteration runs, so that
 * a restoration's IO starts at admission and its compute joins the next iteration boundary. */
void admit_queue(Sim *sm, Replica *rp)
{
    while (rp->q_len && rp->n_active < sm->cfg->max_batch) {
        Turn *t = rp->queue[rp->q_head];
        Session *s = t->s;
        int64_t ctx = (int64_t)t->hist + t->nnew + t->nout;
        int64_t need = blocks_tokens(sm, ctx);
        int resident_ok = t->hist > 0 && s->resident_tokens >= t->hist;
        int64_t have = resident_ok ? blocks_tokens(sm, s->resident_tokens) : 0;
        if (need > rp->pool_cap) { /* can never fit: dropped */
            drop_head(sm, rp, t);
            continue;
        }
        int64_t extra = need - have;
        while (rp->pool_used + extra > rp->pool_cap && hbm_evict_one(sm, rp)) {
        }
        if (rp->pool_used + extra > rp->pool_cap) {
            /* the session's own stale KV may be what is in the way */
            if (!resident_ok && s->resident_tokens && rp->pool_used - blocks_tokens(sm, s->resident_tokens) + extra <= rp->pool_cap)
                sess_drop_resident(sm, rp, s);
            else
                break;
        }
        rp->q_head = (rp->q_head + 1) % rp->q_cap;
        rp->q_len--;
        Request *r = request_of_turn(sm, t);
        if (!r) return;
        pool_reserve(sm, rp, extra);
        r->reserved_tokens = need;
        metrics_on_pool(sm, rp);
        if (restore_admit(sm, rp, r) != 0) return;
    }
}
