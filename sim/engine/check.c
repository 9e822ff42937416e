/* check.c — sim_check, the accounting walker (SQLite's assert_pager_state, for the simulator).
 *
 * Responsible for: recomputing, from the structures themselves, what the run's counters claim, and
 * reporting the first mismatch as the run's error:
 *  - per replica: pool_used within [0, pool_cap] and equal to the admitted requests' reservations
 *    plus the resident blocks of sessions with no admitted request (beyond the named blocks they
 *    hold) plus the prefix cache's blocks; the cache's own invariants (prefix_check) and its
 *    reference counts = the blocks held by resident sessions and admitted requests; the HBM LRU holds exactly the
 *    sessions marked in_hbm_lru, each with resident KV, none with a turn queued or admitted (a
 *    session whose next turn waits for its release time stays evictable, by design); the qkv list
 *    holds exactly the sessions marked in_qkv, each resident with a turn queued, and every queued
 *    turn's resident session is in it (so admission can always reach that KV); active_count = queued + admitted;
 *    the FIFO's count = its turns in memory + the entries in its spill file (those are not walked);
 *    every admitted request is in RESTORING, PREFILL or DECODE, every queued one in QUEUED; a
 *    decoding one has no resume, restoration compute (tw, recompute) or new input left;
 *  - per tier and place: used_bytes = the sum of the listed sessions' saved_bytes less their named
 *    blocks held in its block store; that store's references = those blocks and the pins of the
 *    saves and spills in flight to it, no unreferenced block kept, blk_bytes = its blocks' bytes; spilling_bytes =
 *    that of the ones being spilled (within rounding: 1e-6 of the tier's peak + 1 byte), every listed
 *    session in that tier at that place, and as many listed as the session map has there; likewise
 *    its write-through copies: copy_bytes = the sum of the copies in its copy list (each session's
 *    copy counted once per tier), each copy strictly below the tier holding its state and no larger;
 *    per session, its copies in flight = its copy units;
 *  - per channel: nhi / nlo = the lengths of its two queues, nlo_read = the units of the second that
 *    read (what the SSD array's mixing looks at), the tails are the last units, queued
 *    units wait at this channel for their current hop (a run: layer loads at their first hop, counted
 *    as the units it stands for), the unit in service is this channel's; over
 *    all channels, the layer loads queued = the admitted and preempted requests' hi_loads, those
 *    of requests in an iteration = hi_loads_in_iter;
 *  - per session: `saving` = its save units in flight, `loading` = whether its admitted request
 *    still has loads in flight.
 * Enabled at every iteration boundary in KV_DEBUG builds (make DEBUG=1) and by the tests' hook, and
 * at every N-th boundary with KVSIM_CHECK=N in the environment (make check-long: N = 8), plus once
 * at the end of a run.
 * Not responsible for: the always-on checks (SIM_CHECK at the point of change), fixing anything.
 * Complexity: O(session map slots + requests + units in flight + list lengths) per call: two passes
 * over the session map.
 */
#include <math.h>
#include <stdlib.h>

#include "sim/engine/engine_int.h"

static int check_channel(Sim *sm, Channel *c, int replica, int64_t loads[2])
{
    int n = 0;
    Unit *last = NULL;
    for (Unit *u = c->hi_head; u; u = u->next, n++) {
        last = u;
        if (u->state != US_QUEUED || u->hop >= u->nhops || u->chain[u->hop] != c || (u->kind != U_LOAD && u->kind != U_LOAD_TOK))
            return sim_fail(sm, "sim_check: replica %d channel %s/%d: a unit in its load queue is not a load waiting there",
                            replica, c->name, c->stage);
        if (u->run_left < 0 || (u->run_left > 0 && (u->kind != U_LOAD || u->hop != 0 || u->layer + u->run_left >= sm->L)))
            return sim_fail(sm, "sim_check: replica %d channel %s/%d: a run of %d more layers after layer %d in its load queue "
                            "(runs: layer loads at their first hop, within the model's %d layers)",
                            replica, c->name, c->stage, u->run_left, u->layer, sm->L);
        if (u->kind == U_SAVE) u->s->chk_saving++;
        n += u->run_left; /* a run stands for 1 + run_left units */
        if (u->kind == U_LOAD) loads[0] += 1 + u->run_left, loads[1] += (1 + u->run_left) * u->r->in_iter;
    }
    if (n != c->nhi || c->hi_tail != last)
        return sim_fail(sm, "sim_check: replica %d channel %s/%d: load queue counts %d, its list holds %d%s", replica,
                        c->name, c->stage, c->nhi, n, c->hi_tail != last ? " (and the tail is not the last unit)" : "");
    n = 0;
    last = NULL;
    int nread = 0;
    for (Unit *u = c->lo_head; u; u = u->next, n++) {
        last = u;
        nread += ch_unit_reads(u);
        if (u->state != US_QUEUED || u->hop >= u->nhops || u->chain[u->hop] != c || (u->kind != U_SAVE && u->kind != U_SPILL))
            return sim_fail(sm, "sim_check: replica %d channel %s/%d: a unit in its save queue is not a save or spill waiting there",
                            replica, c->name, c->stage);
        if (u->kind == U_SAVE) u->s->chk_saving++;
        if (u->kind == U_SPILL && u->tier_from == TIER_NONE) u->s->cp->chk_inflight++; /* a write-through copy */
    }
    if (n != c->nlo || c->lo_tail != last)
        return sim_fail(sm, "sim_check: replica %d channel %s/%d: save queue counts %d, its list holds %d%s", replica,
                        c->name, c->stage, c->nlo, n, c->lo_tail != last ? " (and the tail is not the last unit)" : "");
    if (nread != c->nlo_read)
        return sim_fail(sm, "sim_check: replica %d channel %s/%d: save queue counts %d reading units, its list holds %d",
                        replica, c->name, c->stage, c->nlo_read, nread);
    if (c->cur) {
        Unit *u = c->cur;
        if (u->state != US_SERVING || u->hop >= u->nhops || u->chain[u->hop] != c)
            return sim_fail(sm, "sim_check: replica %d channel %s/%d: the unit in service is not this channel's", replica,
                            c->name, c->stage);
        if (u->kind == U_SAVE) u->s->chk_saving++;
        if (u->kind == U_SPILL && u->tier_from == TIER_NONE) u->s->cp->chk_inflight++;
    }
    return 0;
}

/* per replica (index R: the shared stores), what the session map holds */
typedef struct {
    int64_t idle_resident_tokens; /* blocks of sessions with resident KV and no admitted turn */
    size_t in_lru;                /* sessions marked in_hbm_lru */
    size_t in_qkv;                /* sessions marked in_qkv */
    size_t in_tier[SIM_TIERS];    /* sessions in each tier at this place */
    size_t in_copy[SIM_TIERS];    /* sessions with a write-through copy in each tier at this place */
    int64_t pfx_refs;             /* prefix-cache blocks held by sessions with resident KV */
    int64_t tb_refs[SIM_TIERS];   /* references to each tier's block store here: states' named blocks, the pins of saves and spills in flight */
} Agg;

/* a tier's list of write-through copies: each a landed copy of a session held in a tier above, of that
 * place; copy_bytes their sum, as many as the session map has there */
static int check_copy_list(Sim *sm, Tier t, int replica, const TierList *tl, size_t want)
{
    double sum = 0;
    size_t n = 0;
    for (Session *s = tl->chead; s; n++) {
        if (!s->cp || s->cp->bytes[t] <= 0 || (!tier_table[t].shared && s->replica != replica))
            return sim_fail(sm, "sim_check: tier %s (replica %d): session %llu is in its copy list without a copy there",
                            tier_name(t), replica, (unsigned long long)s->id);
        if (!s->cp->next[t] && tl->ctail != s)
            return sim_fail(sm, "sim_check: tier %s (replica %d): the copy list's tail is not its last session", tier_name(t), replica);
        sum += s->cp->bytes[t];
        s = s->cp->next[t];
    }
    if (n != want)
        return sim_fail(sm, "sim_check: tier %s (replica %d): its copy list holds %zu sessions, %zu sessions have a copy there",
                        tier_name(t), replica, n, want);
    double tol = 1e-6 * (double)sm->tiers[t].peak_bytes + 1.0;
    if (fabs(tl->copy_bytes - sum) > tol)
        return sim_fail(sm, "sim_check: tier %s (replica %d): %.0f bytes of copies counted, its copies hold %.0f", tier_name(t), replica,
                        tl->copy_bytes, sum);
    return 0;
}

static int check_tier_list(Sim *sm, Tier t, int replica, const TierList *tl, size_t want, int64_t refs)
{
    double sum = 0, spill = 0, bb = (double)sm->pfx_B * sm->save_bpt;
    size_t n = 0;
    for (Session *s = tl->head; s; s = s->t_next, n++) {
        if (s->tier != t || (!tier_table[t].shared && s->replica != replica))
            return sim_fail(sm, "sim_check: tier %s (replica %d): session %llu is listed but is in tier %s of replica %d",
                            tier_name((Tier)(t)), replica, (unsigned long long)s->id, tier_name((Tier)(s->tier)), s->replica);
        if (!s->t_next && tl->tail != s)
            return sim_fail(sm, "sim_check: tier %s (replica %d): the list's tail is not its last session", tier_name((Tier)(t)), replica);
        if (s->tb && (s->tb->n > s->tb->known || (int64_t)s->tb->n * sm->pfx_B > s->saved_tokens))
            return sim_fail(sm, "sim_check: session %llu holds %d named blocks in tier %s (%d known) with %lld tokens saved",
                            (unsigned long long)s->id, s->tb->n, tier_name(t), s->tb->known, (long long)s->saved_tokens);
        sum += s->saved_bytes - (double)(s->tb ? s->tb->n : 0) * bb;
        if (s->spilling) spill += s->spill_bytes;
    }
    if (n != want)
        return sim_fail(sm, "sim_check: tier %s (replica %d): its list holds %zu sessions, %zu sessions are in it",
                        tier_name((Tier)(t)), replica, n, want);
    double tol = 1e-6 * (double)sm->tiers[t].peak_bytes + 1.0;
    if (fabs(tl->used_bytes - sum) > tol)
        return sim_fail(sm, "sim_check: tier %s (replica %d): %.0f bytes counted in use, its sessions hold %.0f",
                        tier_name((Tier)(t)), replica, tl->used_bytes, sum);
    if (prefix_refs_total(&tl->blk) != refs || tl->blk.n_lru != 0 || fabs(tl->blk_bytes - (double)tl->blk.n_blocks * bb) > tol)
        return sim_fail(sm, "sim_check: tier %s (replica %d): its block store counts %lld references (%lld unreferenced blocks, "
                            "%.0f bytes for %lld blocks), its states and saves hold %lld",
                        tier_name(t), replica, (long long)prefix_refs_total(&tl->blk), (long long)tl->blk.n_lru, tl->blk_bytes,
                        (long long)tl->blk.n_blocks, (long long)refs);
    if (fabs(tl->spilling_bytes - spill) > tol)
        return sim_fail(sm, "sim_check: tier %s (replica %d): %.0f bytes counted spilling, its spilling sessions hold %.0f",
                        tier_name((Tier)(t)), replica, tl->spilling_bytes, spill);
    return 0;
}

/* admitted and queued requests of rp: their states, their sessions marked (chk_active) */
static int check_requests(Sim *sm, Replica *rp, int64_t loads[2])
{
    int i = rp->id;
    for (int k = 0; k < rp->n_active; k++) {
        Request *r = rp->active[k];
        if (r->state != RQ_RESTORING && r->state != RQ_PREFILL && r->state != RQ_DECODE)
            return sim_fail(sm, "sim_check: replica %d: admitted request %llu is %s", i, (unsigned long long)r->id,
                            rq_state_name(r->state));
        if (r->state == RQ_DECODE && (r->resume_left > 0 || r->tw || r->recompute_left > 0 || r->new_left > 0))
            return sim_fail(sm, "sim_check: replica %d: decoding request %llu has work of an earlier phase left (resume %lld, "
                            "tw %d, recompute %lld, new input %lld): the batching rule (batch_form) skips its passes for an all-decode batch", i,
                            (unsigned long long)r->id, (long long)r->resume_left, r->tw, (long long)r->recompute_left,
                            (long long)r->new_left);
        r->s->chk_active = 1;
        if (r->loads_left > 0) rq_src(r)->chk_loading++; /* its own session's state, or a donor's */
    }
    if (rp->q_len != rp->qh.n + rp->sp.n + rp->qt.n)
        return sim_fail(sm, "sim_check: replica %d: %zu turns counted queued, %zu + %llu in the spill file + %zu held", i,
                        rp->q_len, rp->qh.n, (unsigned long long)rp->sp.n, rp->qt.n);
    for (size_t k = 0; k < rp->qh.n + rp->qt.n; k++) {
        Turn *r = k < rp->qh.n ? turn_ring_at(&rp->qh, k) : turn_ring_at(&rp->qt, k - rp->qh.n);
        if (!r->queued)
            return sim_fail(sm, "sim_check: replica %d: queued request %llu is %s", i, (unsigned long long)r->id,
                            rq_state_name(RQ_ARRIVED));
        if (r->s->in_hbm_lru)
            return sim_fail(sm, "sim_check: session %llu has a turn queued and is evictable (in the HBM LRU)",
                            (unsigned long long)r->s->id);
        if (r->s->resident_tokens > 0 && !r->s->in_qkv) /* KV no admission could ever evict */
            return sim_fail(sm, "sim_check: session %llu has a turn queued and %lld resident tokens outside the qkv list",
                            (unsigned long long)r->s->id, (long long)r->s->resident_tokens);
    }
    for (int k = 0; k < rp->pre_n; k++) {
        Request *r = rp->pre[k];
        if (r->state != RQ_QUEUED || !r->preempted || r->reserved_tokens != 0)
            return sim_fail(sm, "sim_check: replica %d: preempted request %llu waiting is %s (preempted %d, %lld tokens reserved)", i,
                            (unsigned long long)r->id, rq_state_name(r->state), r->preempted, (long long)r->reserved_tokens);
        r->s->chk_active = 1;
    }
    if (rp->active_count != (uint64_t)rp->q_len + (uint64_t)rp->pre_n + (uint64_t)rp->n_active)
        return sim_fail(sm, "sim_check: replica %d: %llu requests counted in flight, %zu queued + %d preempted + %d admitted", i,
                        (unsigned long long)rp->active_count, rp->q_len, rp->pre_n, rp->n_active);
    for (int k = 0; k < CH_COUNT; k++)
        for (int st = 0; st < rep_ch_count(rp, k, sm->S); st++)
            if (check_channel(sm, &rp->ch[k][st], i, loads) != 0) return -1;
    return 0;
}

/* one pass over the session map: per-session checks, and the aggregates of every replica */
static int check_sessions(Sim *sm, Agg *agg)
{
    for (size_t k = 0; k < sm->tab_cap; k++) {
        Session *s = sm->tab[k];
        if (!s) continue;
        if (s->saving != s->chk_saving)
            return sim_fail(sm, "sim_check: session %llu: %d saves counted in flight, %d save units found",
                            (unsigned long long)s->id, s->saving, s->chk_saving);
        if (s->replica < 0) continue;
        if (s->loading != s->chk_loading)
            return sim_fail(sm, "sim_check: session %llu: loading %d, but %d admitted requests read its saved state",
                            (unsigned long long)s->id, s->loading, s->chk_loading);
        if (s->chk_active && (s->in_hbm_lru || s->in_qkv))
            return sim_fail(sm, "sim_check: session %llu has an admitted turn and is evictable (in the %s)",
                            (unsigned long long)s->id, s->in_hbm_lru ? "HBM LRU" : "qkv list");
        if (s->in_hbm_lru && s->in_qkv)
            return sim_fail(sm, "sim_check: session %llu is in both the HBM LRU and the qkv list", (unsigned long long)s->id);
        Agg *a = &agg[s->replica];
        if (!s->chk_active && s->resident_tokens > 0) a->idle_resident_tokens += blocks_private(sm, s->resident_tokens, s->pfx_n);
        if ((s->pfx_n > 0) != (s->pfx_names != NULL) || (s->pfx_n > 0 && s->resident_tokens < s->pfx_n * sm->pfx_B))
            return sim_fail(sm, "sim_check: session %llu holds %d cached blocks with %lld resident tokens", (unsigned long long)s->id,
                            s->pfx_n, (long long)s->resident_tokens);
        a->pfx_refs += s->pfx_n;
        if (s->in_hbm_lru) a->in_lru++;
        if (s->in_qkv) a->in_qkv++;
        if (s->tier != TIER_NONE) (tier_table[s->tier].shared ? &agg[sm->R] : a)->in_tier[s->tier]++;
        if (s->tb) {
            if (s->tb->n) (tier_table[s->tier].shared ? &agg[sm->R] : a)->tb_refs[s->tier] += s->tb->n;
            const BlockPins *pins[2] = {&s->tb->save, &s->tb->spill};
            for (int j = 0; j < 2; j++)
                if (pins[j]->n) (tier_table[pins[j]->tier].shared ? &agg[sm->R] : a)->tb_refs[pins[j]->tier] += pins[j]->n;
            if ((s->tb->save.n && !s->saving) || (s->tb->spill.n && !s->spilling))
                return sim_fail(sm, "sim_check: session %llu pins %d blocks for a save and %d for a spill with %d saves and %d spills in flight",
                                (unsigned long long)s->id, s->tb->save.n, s->tb->spill.n, s->saving, s->spilling);
        }
        if (s->cp && s->cp->inflight != s->cp->chk_inflight)
            return sim_fail(sm, "sim_check: session %llu: %d write-through copies counted in flight, %d copy units found",
                            (unsigned long long)s->id, s->cp->inflight, s->cp->chk_inflight);
        if (s->cp && s->tier == TIER_NONE)
            return sim_fail(sm, "sim_check: session %llu holds write-through copies and no state", (unsigned long long)s->id);
        if (!s->cp) continue;
        /* copies lie strictly below the tier holding the state, none larger than it */
        int below[SIM_TIERS] = {0};
        for (Tier t = sm->tiers[s->tier].spill_to; t != TIER_NONE; t = sm->tiers[t].spill_to) below[t] = 1;
        for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
            if (s->cp->bytes[t] <= 0) continue;
            if (!below[t] || s->cp->bytes[t] > s->saved_bytes || s->cp->bytes[t] > s->cp->issued[t])
                return sim_fail(sm, "sim_check: session %llu: a copy of %.0f bytes (%.0f issued) in tier %s, its state of %.0f bytes in tier %s",
                                (unsigned long long)s->id, s->cp->bytes[t], s->cp->issued[t], tier_name((Tier)t), s->saved_bytes,
                                tier_name(s->tier));
            (tier_table[t].shared ? &agg[sm->R] : a)->in_copy[t]++;
        }
    }
    return 0;
}

static int check_replica(Sim *sm, Replica *rp, const Agg *a)
{
    int i = rp->id;
    int64_t acc = a->idle_resident_tokens + rp->pfx.n_blocks * sm->pfx_B, refs = a->pfx_refs;
    for (int k = 0; k < rp->n_active; k++) acc += rp->active[k]->reserved_tokens, refs += rp->active[k]->held;
    if (rp->pool_used < 0 || rp->pool_used > rp->pool_cap || acc != rp->pool_used)
        return sim_fail(sm, "sim_check: replica %d: KV pool %lld tokens in use (of %lld), admitted reservations, "
                            "idle resident sessions and cached blocks account for %lld",
                        i, (long long)rp->pool_used, (long long)rp->pool_cap, (long long)acc);
    char msg[160];
    if (prefix_check(&rp->pfx, msg, sizeof msg) != 0) return sim_fail(sm, "sim_check: replica %d: %s", i, msg);
    if (prefix_refs_total(&rp->pfx) != refs)
        return sim_fail(sm, "sim_check: replica %d: the prefix cache counts %lld references, its holders %lld", i,
                        (long long)prefix_refs_total(&rp->pfx), (long long)refs);
    size_t n = 0;
    for (Session *s = rp->lru_head; s; s = s->hbm_next, n++)
        if (!s->in_hbm_lru || s->replica != i || s->resident_tokens <= 0 || (!s->hbm_next && rp->lru_tail != s))
            return sim_fail(sm, "sim_check: replica %d: HBM LRU entry session %llu is not an idle resident session of it", i,
                            (unsigned long long)s->id);
    if (n != a->in_lru)
        return sim_fail(sm, "sim_check: replica %d: HBM LRU holds %zu sessions, %zu are marked in it", i, n, a->in_lru);
    n = 0;
    for (Session *s = rp->qkv_head; s; s = s->hbm_next, n++)
        if (!s->in_qkv || s->replica != i || s->resident_tokens <= 0 || !s->busy || (!s->hbm_next && rp->qkv_tail != s))
            return sim_fail(sm, "sim_check: replica %d: qkv list entry session %llu is not a resident session with a turn queued", i,
                            (unsigned long long)s->id);
    if (n != a->in_qkv)
        return sim_fail(sm, "sim_check: replica %d: the qkv list holds %zu sessions, %zu are marked in it", i, n, a->in_qkv);
    for (int t = TIER_DRAM; t < SIM_TIERS; t++)
        if (!tier_table[t].shared && (check_tier_list(sm, (Tier)t, i, &rp->tier[t], a->in_tier[t], a->tb_refs[t]) != 0 ||
                                      check_copy_list(sm, (Tier)t, i, &rp->tier[t], a->in_copy[t]) != 0))
            return -1;
    return 0;
}

int sim_check(Sim *sm)
{
    for (size_t k = 0; k < sm->tab_cap; k++)
        if (sm->tab[k]) {
            sm->tab[k]->chk_saving = sm->tab[k]->chk_active = sm->tab[k]->chk_loading = 0;
            if (sm->tab[k]->cp) sm->tab[k]->cp->chk_inflight = 0;
        }
    Agg *agg = calloc((size_t)sm->R + 1, sizeof *agg);
    if (!agg) return sim_fail(sm, "out of memory");
    int rc = 0;
    int64_t loads[2] = {0, 0}, counted = 0; /* layer loads queued: all, those of requests in an iteration */
    for (int i = 0; i < sm->R && rc == 0; i++) {
        rc = check_requests(sm, &sm->rep[i], loads);
        for (int k = 0; k < sm->rep[i].n_active; k++) counted += sm->rep[i].active[k]->hi_loads;
        for (int k = 0; k < sm->rep[i].pre_n; k++) counted += sm->rep[i].pre[k]->hi_loads;
    }
    if (rc == 0 && (loads[0] != counted || loads[1] != sm->hi_loads_in_iter))
        rc = sim_fail(sm, "sim_check: %lld layer loads wait in load queues (%lld of requests in an iteration), the requests "
                          "count %lld (%lld)",
                      (long long)loads[0], (long long)loads[1], (long long)counted, (long long)sm->hi_loads_in_iter);
    if (rc == 0) rc = check_sessions(sm, agg);
    for (int i = 0; i < sm->R && rc == 0; i++) rc = check_replica(sm, &sm->rep[i], &agg[i]);
    for (int t = TIER_DRAM; t < SIM_TIERS && rc == 0; t++)
        if (tier_table[t].shared && (rc = check_tier_list(sm, (Tier)t, -1, &sm->shared[t], agg[sm->R].in_tier[t], agg[sm->R].tb_refs[t])) == 0)
            rc = check_copy_list(sm, (Tier)t, -1, &sm->shared[t], agg[sm->R].in_copy[t]);
    free(agg);
    return rc;
}
