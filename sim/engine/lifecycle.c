/* lifecycle.c — a request from the trace to its end.
 *
 * Responsible for: reading the trace ahead up to the next timed arrival (closed-loop turns wait
 * for their session's previous turn plus think time), the load modes (sim_load_mode;
 * docs/load-modes.md: arrivals=session as just said; arrivals=trace gives a later turn without a timestamp the
 * arrival "previous turn's arrival + think", fixed while reading and the same for every policy, and
 * it waits for its previous turn if that is still running; concurrency=N: N clients each take the
 * stream's next session and send its turns one after another, a turn its think time after the
 * previous one ended, reading the stream on as far as their sessions need), arrivals, release (a turn joins its session's
 * replica's admission FIFO; a new session is routed to the replica with the fewest requests in
 * flight), the admission queue (FIFO, as soon as the KV pool — evicting idle sessions' KV in LRU
 * order, and when nothing is admitted the KV kept for queued turns, newest first — and a batch slot
 * allow, also while an iteration runs so that restoration IO starts at admission; a turn that can
 * never fit the pool is dropped), and request done (the reservation
 * becomes the session's resident KV, the rest of the turn's state is saved, the session's next
 * turn is released). Moves RQ_ARRIVED → RQ_QUEUED, RQ_QUEUED → RQ_DONE (dropped), RQ_DECODE →
 * RQ_DONE.
 * Not responsible for: restoration (restore.c), batching (iteration.c), what is measured
 * (metrics_on_request_done).
 * Invariants: a session has at most one turn released and not done (s->busy); its later turns wait
 * in its pending list in trace order; the pool stays within [0, capacity] (SIM_CHECK in
 * pool_reserve/pool_release); active_count = queued + admitted requests of the replica.
 * Complexity: release O(replicas) for a new session, else O(1); admission O(1) per request plus
 * O(evicted); request done O(active) (removal from the admission-ordered array). Memory: a turn
 * read and not admitted is a Turn (≤ 64 bytes: in its session's pending list, its arrival event or
 * the admission FIFO; sm->turn_bytes counts them), its Request (~0.5 KB) exists from admission to
 * done; arrivals=trace 8 bytes per session; concurrency reads a file ahead until the next turn of a
 * client's session (or the end) shows up: generators O(1), a file with interleaved sessions up to
 * all of its rows. Under overload the FIFO's middle — its turns and the sessions that hold nothing
 * else, with their pending turns — goes to a spill file (waitq.c): memory stays flat in the
 * arrivals not served.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

static void conc_turn_done(Sim *sm, Session *s);
static void pend_append(Sim *sm, Session *s, Turn *t);

_Static_assert(sizeof(Turn) <= 64, "a waiting turn costs at most 64 bytes (engine_int.h)");

/* the head of s's pending turns, unlinked */
static Turn *pend_pop(Session *s)
{
    Turn *nx = s->pend_head;
    s->pend_head = nx->next;
    if (!s->pend_head) s->pend_tail = NULL;
    nx->next = NULL;
    return nx;
}

void request_free(Request *r)
{
    r->s->refs--;
    free(r->gaps);
    free(r->mode);
    free(r->lscale);
    free(r->arrived);
    free(r->layer_units);
    free(r->parts);
    free(r->names);
    free(r);
}

void request_done(Sim *sm, Replica *rp, Request *r)
{
    rq_set_state(sm, r, RQ_DONE);
    if (sm->failed) return;
    sm->done_requests++;
    metrics_on_request_done(sm, r);
    if (sm->observer) sm->observer->request_done(sm, r);
    Session *s = r->s;
    int64_t ctx = r->hist + r->nnew + r->nout;
    /* the reservation becomes the session's resident KV, its named blocks (cached at the first token,
     * or now after a preemption) held by the session */
    if (r->held < r->n_names && blocks_publish(sm, rp, r) != 0) return;
    int64_t keep = blocks_private(sm, ctx, r->held);
    if (keep < r->reserved_tokens) pool_release(sm, rp, r->reserved_tokens - keep);
    if (r->names) {
        SIM_CHECK(sm, !s->pfx_names);
        s->pfx_names = r->names;
        s->pfx_n = r->held;
        r->names = NULL;
        r->held = 0;
    }
    s->resident_tokens = ctx;
    s->last_use_ns = sim_now(sm);
    s->busy = 0;
    if (sm->save_mode != SAVE_DIRECT) tier_save_range(sm, s, ctx); /* the rest of the turn (all of it at turn end) */
    if (sm->save_bpt > 0) /* its saved copy holds these blocks: another session may restore them from it */
        for (int32_t i = 0; i < s->pfx_n; i++)
            if (powners_set(&sm->owners, s->pfx_names[i], s->id) != 0) {
                sim_fail(sm, "out of memory");
                return;
            }
    if (sm->cfg->evict_each_turn) {
        sess_drop_resident(sm, rp, s);
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
    if (sim_load_mode(sm->cfg) == SIM_LOAD_CONCURRENCY) {
        conc_turn_done(sm, s);
    } else {
        if (s->pend_head) {
            Turn *nx = pend_pop(s);
            int64_t now = sim_now(sm);
            int64_t t = nx->when_ns >= 0 ? kv_max_i64(nx->when_ns, now) : t_add(now, nx->think_ns);
            s->busy = 1;
            sim_push(sm, t, EV_RELEASE, nx, 0);
            tier_prefetch_plan(sm, s, t);
        }
    }
    request_free(r);
    sess_maybe_free(sm, s);
}

/* a turn is released: it joins its replica's admission queue */
void release_request(Sim *sm, Turn *r)
{
    Session *s = r->s;
    if (s->replica < 0) {
        const uint64_t *nm = NULL;
        uint32_t nn = 0;
        int named = sm->cfg->router == SIM_ROUTER_PREFIX && sm->names.n && pnames_get(&sm->names, r->id, &nm, &nn);
        int best = 0;
        size_t best_hit = named ? prefix_longest(&sm->rep[0].pfx, nm, nn) : 0;
        for (int i = 1; i < sm->R; i++) {
            size_t hit = named ? prefix_longest(&sm->rep[i].pfx, nm, nn) : 0;
            if (hit > best_hit || (hit == best_hit && sm->rep[i].active_count < sm->rep[best].active_count)) best = i, best_hit = hit;
        }
        s->replica = best;
    }
    Replica *rp = &sm->rep[s->replica];
    r->when_ns = sim_now(sm);
    if (r->offered_ns < 0 || r->offered_ns > r->when_ns) r->offered_ns = r->when_ns; /* closed loop: sent now */
    metrics_on_release(sm, r);
    SIM_CHECK(sm, !r->queued); /* RQ_ARRIVED → RQ_QUEUED */
    r->queued = 1;
    rp->active_count++;
    s->busy = 1;
    qkv_add(rp, s); /* its KV (if any) is kept for this turn */
    if (waitq_push(sm, rp, r) == 0) sim_kick(sm, rp);
}

static void pend_append(Sim *sm, Session *s, Turn *r)
{
    if (s->spill_rec && waitq_pend_add(sm, s, r)) return; /* its queued turn waits in a spill file: r goes there too */
    if (s->pend_tail) s->pend_tail->next = r;
    else s->pend_head = r;
    s->pend_tail = r;
}

/* the blocks t's context names (the prefix cache's keys), kept by its id until admission */
static int turn_names(Sim *sm, Turn *t, const TraceRequest *tr)
{
    int64_t B = tr->prefix_block_tokens, b = sm->cfg->block_tokens > 0 ? sm->cfg->block_tokens : 16;
    if (!sm->pfx_B) {
        if (B < 1 || B % b != 0)
            return sim_fail(sm, "the trace names blocks of %lld tokens: block_tokens=%lld must divide that (or prefix_cache=false)",
                            (long long)B, (long long)b);
        sm->pfx_B = B;
    } else if (B != sm->pfx_B) {
        return sim_fail(sm, "the trace names blocks of %lld tokens after blocks of %lld (session %llu turn %d)", (long long)B,
                        (long long)sm->pfx_B, (unsigned long long)tr->session, tr->turn);
    }
    int64_t n = tr->n_prefix_blocks, whole = ((int64_t)t->hist + t->nnew) / B;
    if (n > whole) n = whole;
    if (n > 0 && pnames_put(&sm->names, t->id, tr->prefix_blocks, (uint32_t)n) != 0) return sim_fail(sm, "out of memory");
    return 0;
}

/* a turn from the trace's next row (the caller has the row in sm->next_tr); NULL after sim_fail */
static Turn *turn_from_trace(Sim *sm, const TraceRequest *tr)
{
    Session *s = sess_get(sm, tr->session);
    if (!s) return sim_fail(sm, "out of memory"), NULL;
    if (!s->name && tr->session_id && sess_set_name(sm, s, tr->session_id) != 0) return sim_fail(sm, "out of memory"), NULL;
    int64_t nnew = tr->new_input_tokens < 1 ? 1 : tr->new_input_tokens, nout = tr->output_tokens < 1 ? 1 : tr->output_tokens;
    if (tr->history_tokens < 0 || tr->history_tokens > TRACE_MAX_TOKENS || nnew > TRACE_MAX_TOKENS || nout > TRACE_MAX_TOKENS)
        return sim_fail(sm, "internal: trace row of session %llu turn %d has token counts past %lld",
                        (unsigned long long)tr->session, tr->turn, (long long)TRACE_MAX_TOKENS), NULL;
    Turn *r = sim_zalloc(sizeof *r);
    if (!r) return sim_fail(sm, "out of memory"), NULL;
    sm->turn_bytes += sizeof *r;
    sim_note_waiting(sm);
    r->id = sm->next_req_id++;
    r->s = s;
    s->refs++;
    r->turn = tr->turn;
    r->hist = (uint32_t)tr->history_tokens;
    r->nnew = (uint32_t)nnew;
    r->nout = (uint32_t)nout;
    r->when_ns = tr->arrival_ns;
    r->think_ns = tr->think_ns;
    r->offered_ns = -1;
    if (tr->n_prefix_blocks > 0 && sm->cfg->prefix_cache && turn_names(sm, r, tr) != 0) {
        turn_free(sm, r);
        return NULL;
    }
    return r;
}

/* admission: the turn becomes its Request (RQ_QUEUED; the session reference moves to it) */
static Request *request_from_turn(Sim *sm, Turn *q)
{
    Request *r = sim_zalloc(sizeof *r);
    if (!r) return sim_fail(sm, "out of memory"), NULL;
    r->id = q->id;
    r->s = q->s;
    r->state = RQ_QUEUED;
    r->turn = q->turn;
    r->replica = q->s->replica;
    r->arrival_ns = q->when_ns;
    r->hist = q->hist;
    r->nnew = q->nnew;
    r->nout = q->nout;
    r->offered_ns = q->offered_ns;
    r->trim = q->trim;
    uint32_t nn = 0;
    if (sm->names.n) pnames_take(&sm->names, q->id, &r->names, &nn);
    r->n_names = (int32_t)nn;
    q->s->refs++;
    turn_free(sm, q);
    return r;
}

/* the next row of the trace into sm->next_tr: 1, 0 (end: trace_done set), -1 (failed) */
static int read_row(Sim *sm)
{
    if (sm->have_next) return 1;
    int rc = trace_next(sm->trace, &sm->next_tr, sm->e);
    if (rc < 0) return sm->failed = 1, -1;
    if (rc == 0) {
        sm->trace_done = 1;
        return 0;
    }
    sm->have_next = 1;
    return 1;
}

/* arrivals=trace: the offered arrival of each dense session's last turn read */
static int64_t *sess_last(Sim *sm, uint64_t session)
{
    if (session >= sm->sess_last_cap) {
        size_t nc = sm->sess_last_cap ? sm->sess_last_cap : 1024;
        while (nc <= session) nc *= 2;
        int64_t *nv = realloc(sm->sess_last_ns, nc * sizeof *nv);
        if (!nv) return NULL;
        for (size_t i = sm->sess_last_cap; i < nc; i++) nv[i] = -1;
        sm->sess_last_ns = nv;
        sm->sess_last_cap = nc;
    }
    return &sm->sess_last_ns[session];
}

void lifecycle_free(Sim *sm)
{
    free(sm->sess_last_ns);
    sm->sess_last_ns = NULL;
    sm->sess_last_cap = 0;
}

/* ------------------------------------------------------------------ concurrency=N */

/* Read one row into its session's pending list; a session seen for the first time joins the FIFO
 * of sessions waiting for a client. 1, 0 (end), -1. */
static int conc_read_one(Sim *sm)
{
    int rc = read_row(sm);
    if (rc <= 0) return rc;
    Turn *r = turn_from_trace(sm, &sm->next_tr);
    if (!r) return -1;
    sm->have_next = 0;
    Session *s = r->s;
    pend_append(sm, s, r);
    if (!s->conc_seen) {
        s->conc_seen = 1;
        if (sm->wait_tail) sm->wait_tail->conc_next = s;
        else sm->wait_head = s;
        sm->wait_tail = s;
    }
    return 1;
}

/* release s's next pending turn: `think` from now (a new session's first turn: now) */
static void conc_release_next(Sim *sm, Session *s, int first)
{
    Turn *nx = pend_pop(s);
    s->busy = 1;
    int64_t t = t_add(sim_now(sm), first ? 0 : nx->think_ns);
    sim_push(sm, t, EV_RELEASE, nx, 0);
    tier_prefetch_plan(sm, s, t);
}

/* give every idle client the next session of the stream */
static int conc_fill(Sim *sm)
{
    if (!sm->conc_started) {
        sm->conc_started = 1;
        sm->clients_idle = sm->cfg->concurrency;
    }
    while (sm->clients_idle > 0 && !sm->failed) {
        if (!sm->wait_head) {
            if (sm->trace_done || conc_read_one(sm) <= 0) break;
            continue;
        }
        Session *s = sm->wait_head;
        sm->wait_head = s->conc_next;
        if (!sm->wait_head) sm->wait_tail = NULL;
        s->conc_next = NULL;
        s->conc_client = 1;
        sm->clients_idle--;
        metrics_on_exogenous(sm, sim_now(sm));
        conc_release_next(sm, s, 1);
    }
    return sm->failed ? -1 : 0;
}

/* s's turn ended (done or dropped): its client sends the session's next turn after its think time,
 * reading the stream on until that turn or the end shows up; a session without more turns frees its
 * client for the next session */
static void conc_turn_done(Sim *sm, Session *s)
{
    while (!s->pend_head && !sm->trace_done && !sm->failed)
        if (conc_read_one(sm) < 0) return;
    if (s->pend_head) {
        conc_release_next(sm, s, 0);
        return;
    }
    s->conc_client = 0;
    sm->clients_idle++;
    conc_fill(sm);
}

/* ------------------------------------------------------------------ open loop and per-session loop */

/* Pull trace requests up to the next timed arrival. arrivals=session: a later turn without a
 * timestamp waits in its session's pending list for the previous turn's end (+ think);
 * arrivals=trace: it arrives at its previous turn's arrival + think (or now, if that passed),
 * fixed here and the same for every policy. concurrency: the clients take sessions. */
int pull_trace(Sim *sm)
{
    SimLoadMode mode = sim_load_mode(sm->cfg);
    if (mode == SIM_LOAD_CONCURRENCY) return conc_fill(sm);
    while (!sm->trace_done && !sm->failed) {
        int rc = read_row(sm);
        if (rc < 0) return -1;
        if (rc == 0) break;
        TraceRequest *tr = &sm->next_tr;
        Turn *r = turn_from_trace(sm, tr);
        if (!r) return -1;
        Session *s = r->s;
        sm->have_next = 0;
        int64_t now = sim_now(sm);
        int64_t *last = NULL;
        if (mode == SIM_LOAD_TRACE && !(last = sess_last(sm, tr->session))) return sim_fail(sm, "out of memory");
        if (tr->arrival_ns >= 0) {
            int64_t t = tr->arrival_ns > now ? tr->arrival_ns : now;
            r->offered_ns = t;
            r->pulls_trace = 1;
            metrics_on_exogenous(sm, t);
            if (last) *last = t;
            sim_push(sm, t, EV_ARRIVAL, r, 0);
            tier_prefetch_plan(sm, s, t);
            return 0; /* read more when this one arrives */
        }
        if (mode == SIM_LOAD_TRACE) { /* open loop: a time fixed by the trace and the think times alone */
            int64_t t = *last >= 0 ? t_add(*last, r->think_ns) : now;
            if (t < now) t = now;
            *last = t;
            r->offered_ns = r->when_ns = t;
            sim_push(sm, t, EV_ARRIVAL, r, 0);
            tier_prefetch_plan(sm, s, t);
            continue;
        }
        /* closed loop: after the session's previous turn */
        if (!s->busy && !s->pend_head) {
            s->busy = 1;
            sim_push(sm, t_add(sim_now(sm), r->think_ns), EV_RELEASE, r, 0);
            tier_prefetch_plan(sm, s, t_add(sim_now(sm), r->think_ns));
        } else {
            pend_append(sm, s, r);
        }
    }
    return 0;
}

void on_arrival(Sim *sm, Turn *r)
{
    Session *s = r->s;
    int pulls = r->pulls_trace;
    if (s->busy || s->pend_head) pend_append(sm, s, r); /* previous turn still running: wait for it */
    else release_request(sm, r);
    if (pulls) pull_trace(sm);
}

/* the head of the queue can never fit the pool: it is dropped (done, with no row; RQ_QUEUED → RQ_DONE) */
static void drop_head(Sim *sm, Replica *rp, Turn *r)
{
    Session *s = r->s;
    waitq_pop(rp);
    metrics_on_drop(sm);
    if (s->resident_tokens) sess_drop_resident(sm, rp, s);
    rp->active_count--;
    s->busy = 0;
    sm->done_requests++;
    if (sim_load_mode(sm->cfg) == SIM_LOAD_CONCURRENCY) {
        conc_turn_done(sm, s);
    } else {
        if (s->pend_head) {
            Turn *nx = pend_pop(s);
            s->busy = 1;
            int64_t t = t_add(sim_now(sm), nx->when_ns >= 0 ? 0 : nx->think_ns);
            sim_push(sm, t, EV_RELEASE, nx, 0);
            tier_prefetch_plan(sm, s, t);
        }
    }
    turn_free(sm, r);
    sess_maybe_free(sm, s);
}

/* How many leading blocks of q's names (nm[0, nn)) it takes from the prefix cache: those its session
 * holds when its history is resident, else the cache's longest match — never the block of its
 * context's last token (that token is computed: its output comes from it, as in vLLM). The rest of
 * a history the cache covers only in part is restored after it: loaded from the session's saved
 * copy, or from another session's copy of the same blocks in a tier this replica reads (*donor: that
 * session), or recomputed. The cache's match, `found` of `asked` blocks, is counted by the caller
 * once the turn is admitted (asked 0: none made) */
static size_t prefix_take(Sim *sm, Replica *rp, const Session *s, const Turn *q, const uint64_t *nm, uint32_t nn,
                          int resident_ok, Session **donor, size_t *found, size_t *asked)
{
    int64_t B = sm->pfx_B, limit = ((int64_t)q->hist + q->nnew - 1) / B;
    size_t n = (int64_t)nn < limit ? nn : (size_t)(limit > 0 ? limit : 0), k = 0;
    *donor = NULL;
    if (resident_ok) {
        while (k < n && k < (size_t)s->pfx_n && s->pfx_names[k] == nm[k]) k++;
        return k;
    }
    k = *found = prefix_longest(&rp->pfx, nm, n);
    *asked = n;
    if ((int64_t)k * B >= q->hist || s->tier != TIER_NONE || s->saving) return k;
    uint64_t id;
    int64_t last = (int64_t)q->hist / B - 1; /* the block that ends the history */
    if (sm->save_bpt <= 0 || q->hist % B != 0 || last >= (int64_t)nn || !powners_get(&sm->owners, nm[last], &id)) return k;
    Session *d = sess_peek(sm, id);
    if (!d || d == s || d->tier == TIER_NONE || d->saved_tokens < (int64_t)q->hist || d->saving || d->spilling ||
        (!tier_table[d->tier].shared && d->replica != s->replica))
        return k;
    *donor = d;
    return k;
}

/* Admission, FIFO, as soon as memory and a batch slot allow — also while an iteration runs, so that
 * a restoration's IO starts at admission and its compute joins the next iteration boundary. */
void admit_queue(Sim *sm, Replica *rp)
{
    while ((rp->q_len || rp->pre_n) && rp->n_active < sm->cfg->max_batch) {
        /* a preempted request goes first (vLLM: the front of the waiting queue), then the FIFO */
        Request *pre = rp->pre_n ? rp->pre[rp->pre_n - 1] : NULL;
        Turn *q = pre ? NULL : waitq_head(sm, rp);
        if (!pre && !q) return; /* failed (reading the spill file back) */
        Session *s = pre ? pre->s : q->s;
        int64_t hist = pre ? pre->hist : q->hist, ctx = hist + (pre ? pre->nnew + pre->nout : q->nnew + q->nout);
        int resident_ok = !pre && hist > 0 && s->resident_tokens >= hist;
        if (!pre && blocks_tokens(sm, ctx) > rp->pool_cap) { /* can never fit: dropped */
            drop_head(sm, rp, q);
            continue;
        }
        /* KV the turn cannot use (its history was cut by max_context, or is longer than what stayed
         * resident) is stale: released now, since request_done replaces it with the turn's own */
        if (!pre && !resident_ok && s->resident_tokens) sess_drop_resident(sm, rp, s);
        const uint64_t *nm = NULL;
        uint32_t nn = 0;
        size_t held = 0; /* the leading named blocks it takes from the prefix cache, pinned from here on */
        size_t found = 0, asked = 0;
        Session *donor = NULL;
        if (!pre && sm->names.n && pnames_get(&sm->names, q->id, &nm, &nn)) {
            held = prefix_take(sm, rp, s, q, nm, nn, resident_ok, &donor, &found, &asked);
            prefix_acquire(&rp->pfx, nm, held);
        }
        /* alloc=reserve: the whole turn; ondemand: its prompt and first token (blocks.c) */
        int64_t need = pre ? blocks_admit_need(sm, pre) : blocks_turn_need(sm, q->hist, q->nnew, q->nout, (int64_t)held);
        int64_t have = resident_ok ? blocks_private(sm, s->resident_tokens, s->pfx_n) : 0;
        int64_t extra = need - have, cap = rp->pool_cap - blocks_admit_headroom(sm, rp);
        /* idle sessions' KV first; the KV kept for queued turns only when nothing admitted is left to
         * free room (else the head could wait forever for KV held by turns queued behind it) */
        while (rp->pool_used + extra > cap && (hbm_evict_one(sm, rp) || (rp->n_active == 0 && hbm_evict_queued(sm, rp, s)))) {
        }
        if (rp->pool_used + extra > cap) {
            prefix_release(&rp->pfx, nm, held);
            break;
        }
        Request *r;
        if (pre) {
            rp->pre_n--;
            r = pre;
        } else {
            waitq_pop(rp);
            qkv_remove(rp, s); /* its resident KV (if any) is the request's from here on */
        }
        pool_reserve(sm, rp, extra);
        if (!pre && !(r = request_from_turn(sm, q))) return;
        if (!pre) {
            if (asked) prefix_count(&rp->pfx, found, asked);
            r->held = (int32_t)held;
            r->donor = donor;
            if (sm->save_bpt > 0 && sm->cfg->tier_dedup && r->n_names > 0 && tier_names_set(sm, s, r->names, r->n_names) != 0) return;
            /* the session's blocks: the request holds those its names share (above), the rest stay
             * cached, unreferenced (all of them when its names were cut with its context) */
            if (resident_ok && s->pfx_names) {
                prefix_release(&rp->pfx, s->pfx_names, (size_t)s->pfx_n);
                free(s->pfx_names);
                s->pfx_names = NULL;
                s->pfx_n = 0;
            }
        }
        r->reserved_tokens = need;
        metrics_on_pool(sm, rp);
        if (r->preempted) { /* back from a preemption: no restoration, its context is recomputed or swapped in */
            if (blocks_readmit(sm, rp, r) != 0) return;
            continue;
        }
        if (restore_admit(sm, rp, r) != 0) return;
    }
}
