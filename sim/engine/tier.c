/* tier.c — saved state: the tier table and the sessions' places in it.
 *
 * Responsible for: one row per tier (tier_table: its name, whether one store serves all replicas,
 * the channel a load crosses before H2D and the one a save crosses after D2H), each tier's LRU list
 * of sessions per place with its bytes, saves (background: D2H per stage then on to the tier; or
 * SAVE_DIRECT: written by the iteration), spills of a tier's LRU victims to its spill target,
 * drops when the last tier is full, TTL expiry (state unused for state_ttl is dropped; both are
 * counted as state lost and marked on the session; Sim.state_dropped is told), where a save in
 * flight has got to (per stage: crossed D2H, landed), the restoration loads parked on a session
 * until its save has crossed D2H (or landed) far enough (tier_park; sent as the save progresses), and
 * the load chain of a tier (which channels a restoration's load crosses), write_through's copies
 * down the chain and demotions onto them; the named blocks of the states (traces that name blocks):
 * each place's block store references them once per state holding them, so a block shared by
 * several states is stored and counted against the capacity once, a save or spill skips the blocks
 * its destination holds (pinned there until it lands), and a block goes with the last
 * state holding it. Write-through copies, promotions and prefetches move whole states.
 * Not responsible for: HBM (session.c), what is restored when (restore.c), the byte counters of the
 * results (metrics.c), choosing which tiers are on and their capacities (setup.c).
 * Invariants: a session is in at most one tier list, the one of s->tier at its replica (or the
 * shared one); with write_through, also in the copy list of each tier below s->tier that holds a
 * whole copy of its state (s->cp; a list's copy_bytes the sum of its copies, counted in its
 * capacity; none while s->tier is TIER_NONE); a save in flight is one unit per stage, first over D2H (then its bytes are in host
 * DRAM: d2h_pos, sess_d2h) and on over the tier's link (then in the tier: land_pos, sess_land), so per stage
 * saved_tokens <= land_pos <= d2h_pos <= issued_pos; a list's used_bytes is the sum of its sessions' saved_bytes less
 * their named blocks held in its block store, blk_bytes that store's blocks' bytes, spilling_bytes what its sessions
 * being spilled free when they leave (sim_check verifies all three); sessions with a load, save or spill in
 * flight are never dropped nor spilled.
 * Complexity: link/unlink/touch O(1), and O(named blocks of the state) when a state enters or leaves a tier or
 * a save is issued (hash lookups, no scan); capacity enforcement O(victims + sessions skipped at the
 * LRU heads); TTL expiry O(expired); a save O(stages); parking and unparking O(parked).
 */
#include <math.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

const TierInfo tier_table[SIM_TIERS] = {
    [TIER_NONE] = {0, -1, -1},
    [TIER_DRAM] = {0, -1, -1},
#define TIER_MEMDEV_ROW_(ID, KEY, WHAT, WHATS) [TIER_##ID] = {0, CH_##ID, CH_##ID},
    KV_MEMDEV_ROWS(TIER_MEMDEV_ROW_)
    [TIER_SSD] = {0, CH_SSD, CH_SSD},
    [TIER_REMOTE] = {1, CH_NIC_IN, CH_NIC_OUT},
};

TierList *tier_list(Sim *sm, int replica, Tier t)
{
    return tier_table[t].shared ? &sm->shared[t] : &sm->rep[replica].tier[t];
}

/* ---- named blocks: a state's blocks that traces name are stored once per place, however many
 * sessions' states hold them (each place's block store counts the states holding a block) ---- */

/* the bytes of one named block of saved state */
static double blk_size(const Sim *sm) { return (double)sm->pfx_B * sm->save_bpt; }

static int32_t tb_held(const Session *s) { return s->tb ? s->tb->n : 0; }

/* what s's state adds to its tier's used_bytes: all of it but its named blocks held in the store */
static double tier_private(const Sim *sm, const Session *s) { return s->saved_bytes - (double)tb_held(s) * blk_size(sm); }

int tier_names_set(Sim *sm, Session *s, const uint64_t *names, int32_t n)
{
    if (!s->tb && !(s->tb = sim_zalloc(sizeof *s->tb))) return sim_fail(sm, "out of memory");
    SessBlocks *b = s->tb;
    for (int32_t i = 0; i < b->n; i++)
        if (i >= n || names[i] != b->names[i]) { /* another context (its history was cut): no block added */
            b->known = b->n;
            return 0;
        }
    /* this context's chain replaces the one known (the two agree on the blocks held) */
    uint64_t *h = n > b->known ? realloc(b->names, (size_t)n * sizeof *h) : b->names;
    if (!h) return sim_fail(sm, "out of memory");
    memcpy(h, names, (size_t)n * sizeof *h);
    b->names = h;
    b->known = n;
    return 0;
}

/* the unreferenced blocks of a store go at once (a block no state holds is not kept): their bytes
 * leave the list, counted as moved or dropped in tier t */
static void tb_sweep(Sim *sm, TierList *tl, Tier t, int moved)
{
    int64_t gone = 0;
    while (tl->blk.n_lru > 0 && prefix_evict_lru(&tl->blk)) gone++;
    tl->blk_bytes -= (double)gone * blk_size(sm);
    if (moved) sm->tiers[t].blk_moved += (uint64_t)gone;
    else sm->tiers[t].blk_dropped += (uint64_t)gone;
}

/* s's state (unlinked, saved_tokens final) is going into tier t: the named blocks it covers that t's
 * store does not count for it yet are referenced there, stored once (a block held already is counted
 * deduplicated by the store) */
static void tb_acquire(Sim *sm, Session *s, Tier t)
{
    SessBlocks *b = s->tb;
    if (!b || t == TIER_NONE || sm->pfx_B <= 0) return;
    int64_t k = s->saved_tokens / sm->pfx_B;
    if (k > b->known) k = b->known;
    if (k <= b->n) return;
    TierList *tl = tier_list(sm, s->replica, t);
    int64_t before = tl->blk.n_blocks;
    size_t n = (size_t)(k - b->n);
    if (prefix_insert(&tl->blk, b->names + b->n, n, 1) != (long)n) {
        sim_fail(sm, "out of memory");
        return;
    }
    tl->blk_bytes += (double)(tl->blk.n_blocks - before) * blk_size(sm);
    b->n = (int32_t)k;
}

/* s's state (unlinked) leaves tier t: its references go; a block no other state holds is gone from
 * t (moved: the state went elsewhere; else dropped) */
static void tb_release(Sim *sm, Session *s, Tier t, int moved)
{
    SessBlocks *b = s->tb;
    if (!b || t == TIER_NONE || b->n <= 0) return;
    TierList *tl = tier_list(sm, s->replica, t);
    prefix_release(&tl->blk, b->names, (size_t)b->n);
    tb_sweep(sm, tl, t, moved);
    b->n = 0;
}

/* the named blocks of s's state whose tokens lie in [from, to), held already by t's store: their
 * bytes (a write of that range skips them), each pinned there in `pins` until the write lands */
static double tb_skip(Sim *sm, Session *s, Tier t, int64_t from, int64_t to, BlockPins *pins)
{
    SessBlocks *b = s->tb;
    int64_t B = sm->pfx_B;
    if (!b || t == TIER_NONE || B <= 0) return 0;
    TierList *tl = tier_list(sm, s->replica, t);
    if (!tl->blk.n_blocks) return 0;
    int64_t i = (from + B - 1) / B, end = to / B;
    if (end > b->known) end = b->known;
    double skipped = 0;
    for (; i < end; i++) {
        if (!prefix_has(&tl->blk, b->names[i])) continue;
        skipped += blk_size(sm);
        if (pins->n == pins->cap) {
            int32_t cap = pins->cap ? 2 * pins->cap : 8;
            uint64_t *p = realloc(pins->h, (size_t)cap * sizeof *p);
            if (!p) {
                sim_fail(sm, "out of memory");
                return 0;
            }
            pins->h = p;
            pins->cap = cap;
        }
        pins->h[pins->n++] = b->names[i];
        pins->tier = t;
        prefix_acquire(&tl->blk, &b->names[i], 1);
    }
    return skipped;
}

/* the bytes s's state frees in tier t when it leaves: its private bytes and the named blocks no
 * other state there holds */
static double tier_leaving(Sim *sm, const Session *s, Tier t)
{
    double bytes = tier_private(sm, s);
    if (tb_held(s) <= 0) return bytes;
    const TierList *tl = tier_list(sm, s->replica, t);
    for (int32_t i = 0; i < s->tb->n; i++)
        if (prefix_refs(&tl->blk, s->tb->names[i]) == 1) bytes += blk_size(sm);
    return bytes;
}

/* the write that pinned them landed (or its state went): the pins go, and a block no state holds
 * with them */
static void tb_unpin(Sim *sm, Session *s, BlockPins *pins)
{
    if (!pins->n) return;
    TierList *tl = tier_list(sm, s->replica, pins->tier);
    prefix_release(&tl->blk, pins->h, (size_t)pins->n);
    tb_sweep(sm, tl, pins->tier, 0);
    pins->n = 0;
}

static void tier_unlink(Sim *sm, Session *s)
{
    if (s->tier == TIER_NONE) return;
    TierList *tl = tier_list(sm, s->replica, s->tier);
    LRU_UNLINK(tl->head, tl->tail, s, t_prev, t_next);
    tl->used_bytes -= tier_private(sm, s);
}

static void tier_link(Sim *sm, Session *s, Tier t)
{
    s->tier = t;
    s->last_use_ns = sim_now(sm);
    if (t == TIER_NONE) return;
    TierList *tl = tier_list(sm, s->replica, t);
    LRU_APPEND(tl->head, tl->tail, s, t_prev, t_next);
    tl->used_bytes += tier_private(sm, s);
    metrics_on_tier_bytes(sm, t, tl->used_bytes + tl->blk_bytes + tl->copy_bytes);
}

/* s's state (linked in its tier) goes to tier `to`: its named blocks with it */
static void tier_relink(Sim *sm, Session *s, Tier to)
{
    Tier from = s->tier;
    tier_unlink(sm, s);
    tb_release(sm, s, from, 1);
    tb_acquire(sm, s, to);
    tier_link(sm, s, to);
}

/* a save, spill, load or write-through copy of s is in flight: its state stays where it is */
static int tier_busy(const Session *s) { return s->spilling || s->loading || s->saving || s->prefetching || (s->cp && s->cp->inflight); }

/* ---- write_through=true: whole copies of a session's state in the tiers below the one holding it ---- */

/* s's copy in tier t leaves that tier's copy list (no-op without one); it will get no more copies
 * there (issued: 0 while the state has bytes) until the state itself is demoted there */
static void copy_unlink(Sim *sm, Session *s, Tier t)
{
    SessCopies *cp = s->cp;
    if (!cp) return;
    if (cp->bytes[t] > 0) {
        TierList *tl = tier_list(sm, s->replica, t);
        LRU_UNLINK(tl->chead, tl->ctail, s, cp->prev[t], cp->next[t]);
        tl->copy_bytes -= cp->bytes[t];
    }
    cp->bytes[t] = cp->issued[t] = 0;
}

/* s's copy in tier t is whole: t takes the state from the tier above at no transfer */
static int copy_whole(const Session *s, Tier t)
{
    return s->cp && s->saved_bytes > 0 && s->cp->bytes[t] == s->saved_bytes && s->cp->issued[t] == s->saved_bytes;
}

/* a copy unit landed: its bytes join s's copy in its tier (the most recently used of that list) */
static void copy_done(Sim *sm, Unit *u)
{
    Session *s = u->s;
    Tier t = (Tier)u->tier;
    double bytes = u->bytes[0];
    unit_free(sm, u);
    SessCopies *cp = s->cp;
    cp->inflight--;
    TierList *tl = tier_list(sm, s->replica, t);
    if (cp->bytes[t] > 0) LRU_UNLINK(tl->chead, tl->ctail, s, cp->prev[t], cp->next[t]);
    cp->bytes[t] += bytes;
    tl->copy_bytes += bytes;
    LRU_APPEND(tl->chead, tl->ctail, s, cp->prev[t], cp->next[t]);
    metrics_on_tier_written(sm, t, bytes);
    metrics_on_tier_bytes(sm, t, tl->used_bytes + tl->blk_bytes + tl->copy_bytes);
    tier_enforce_capacity(sm, &sm->rep[s->replica]);
}

/* write_through=true: `bytes` more of s's state landed in its tier (`old` bytes before them). Each
 * tier below it in the chain whose copy keeps up (or that has none yet and the state is new) is
 * written them too, in the background over that tier's own link, from the host memory the save
 * crossed on its way. A tier whose copy was dropped gets no partial one. */
static void copy_down(Sim *sm, Session *s, double old, double bytes)
{
    if (!sm->cfg->write_through || bytes <= 0 || s->tier == TIER_NONE) return;
    for (Tier t = sm->tiers[s->tier].spill_to; t != TIER_NONE; t = sm->tiers[t].spill_to) {
        int out = tier_table[t].out_hop;
        if ((s->cp ? s->cp->issued[t] : 0) != old || out < 0) continue; /* (below the first tier every row has a link) */
        if (!s->cp && !(s->cp = sim_zalloc(sizeof *s->cp))) {
            sim_fail(sm, "out of memory");
            return;
        }
        Unit *u = unit_new(sm);
        if (!u) return;
        u->s = s;
        u->kind = U_SPILL; /* a background write, queued as a spill is */
        u->done = copy_done;
        u->tier = t;
        u->tier_from = TIER_NONE;
        u->chain[0] = rep_channel(&sm->rep[s->replica], out, 0);
        u->bytes[0] = bytes;
        u->nhops = 1;
        s->cp->issued[t] += bytes;
        s->cp->inflight++;
        ch_enqueue(sm, u);
    }
}

void tier_touch(Sim *sm, Session *s)
{
    Tier t = s->tier;
    if (t == TIER_NONE) return;
    tier_unlink(sm, s);
    tier_link(sm, s, t);
}

/* ---- loads parked on a session: waiting for one of its saves to cross D2H (or to land) ---- */

/* u (its chain set, reading from DRAM, or from the destination with land) waits until the session's
 * stage-st save has crossed D2H (landed) up to position `upto`; appended to the session's parked list
 * (FIFO) */
void tier_park(Sim *sm, Request *r, Unit *u, int64_t upto, int land)
{
    Session *s = rq_src(r);
    u->wait_pos = upto;
    u->wait_land = land;
    u->enq_ns = sim_now(sm);
    u->next = NULL;
    Unit **pp = &s->parked;
    while (*pp) pp = &(*pp)->next;
    *pp = u;
    r->parked_units++;
}

/* stage st of s's saves crossed D2H further (or landed): send the loads parked on it that it covers */
static void tier_unpark(Sim *sm, Session *s, int st)
{
    int64_t now = sim_now(sm);
    for (Unit **pp = &s->parked; *pp;) {
        Unit *u = *pp;
        if (u->stage != st || u->wait_land == TIER_WAIT_PREFETCH || u->wait_pos > (u->wait_land ? sess_land(sm, s) : sess_d2h(s))[st]) {
            pp = &u->next;
            continue;
        }
        *pp = u->next;
        u->next = NULL;
        Request *r = u->r;
        r->parked_units--;
        if (now - u->enq_ns > r->wait_max_ns) r->wait_max_ns = now - u->enq_ns;
        ch_enqueue(sm, u);
    }
}

/* s's state moves up from its tier to `to` (a promotion, a prefetch): written there; with
 * write_through the state left below stays as a whole copy */
static void tier_move_up(Sim *sm, Session *s, Tier to)
{
    Tier from = s->tier;
    tier_relink(sm, s, to);
    metrics_on_tier_written(sm, to, s->saved_bytes);
    if (!sm->cfg->write_through || s->saved_bytes <= 0) return;
    if (!s->cp && !(s->cp = sim_zalloc(sizeof *s->cp))) {
        sim_fail(sm, "out of memory");
        return;
    }
    TierList *tl = tier_list(sm, s->replica, from);
    s->cp->bytes[from] = s->cp->issued[from] = s->saved_bytes;
    tl->copy_bytes += s->saved_bytes;
    LRU_APPEND(tl->chead, tl->ctail, s, cp->prev[from], cp->next[from]);
}

/* promote=true: the last load of a restoration from s's state has arrived; a state below the first
 * tier moves up to it (its bytes crossed host memory on their way to the GPU: no transfer of its
 * own), the first tier's LRU sessions going down the chain as a save would send them */
void tier_promote(Sim *sm, Session *s)
{
    Tier first = sm->save_first;
    if (!sm->cfg->promote || s->tier == TIER_NONE || s->tier == first || tier_busy(s)) return;
    tier_move_up(sm, s, first);
    sm->res->promoted++;
    tier_enforce_capacity(sm, &sm->rep[s->replica]);
}

/* ---- prefetch=true: a state moved up to the first tier ahead of its session's next turn ---- */

void tier_prefetch_plan(Sim *sm, Session *s, int64_t t_ns)
{
    Tier first = sm->save_first;
    if (!sm->cfg->prefetch || sm->tiers[first].spill_to == TIER_NONE || (s->tier == TIER_NONE && s->issued_pos == 0)) return;
    int64_t lead = sm->cfg->prefetch_lead_ns;
    if (lead <= 0) { /* the move's own time: its bytes (its saves in flight included) at the read rate of
                      * the tier holding them, or of the second tier while they are still in the first */
        Tier src = s->tier != TIER_NONE && s->tier != first ? s->tier : sm->tiers[first].spill_to;
        int in = tier_table[src].in_hop;
        double bytes = (double)s->issued_pos * sm->save_bpt;
        lead = in >= 0 && sm->hop_rate[in] > 0 ? (int64_t)ceil(bytes / sm->hop_rate[in]) + sm->hop_lat[in] : 0;
    }
    int64_t at = t_ns - lead;
    sim_push(sm, at > sim_now(sm) ? at : sim_now(sm), EV_PREFETCH, NULL, (int64_t)s->id);
}

/* the parked loads of a restoration admitted while s's state was on its way up: sent (from the first tier) */
static void tier_unpark_prefetch(Sim *sm, Session *s)
{
    for (Unit **pp = &s->parked; *pp;) {
        Unit *u = *pp;
        if (u->wait_land != TIER_WAIT_PREFETCH) {
            pp = &u->next;
            continue;
        }
        *pp = u->next;
        u->next = NULL;
        u->r->parked_units--;
        ch_enqueue(sm, u);
    }
}

static void prefetch_done(Sim *sm, Unit *u)
{
    Session *s = u->s;
    unit_free(sm, u);
    s->prefetching = 0;
    tier_move_up(sm, s, sm->save_first);
    sm->res->prefetched++;
    if (s->parked) tier_unpark_prefetch(sm, s);
    tier_enforce_capacity(sm, &sm->rep[s->replica]);
}

/* the time planned for a session's prefetch: its state, if still below the first tier, idle (no save,
 * load, demotion or copy of it in flight) and without KV in HBM (that would serve the turn), is read out of its tier over that
 * tier's link and written into the first (a background transfer, queued as a demotion is) */
void tier_prefetch_fire(Sim *sm, uint64_t session_id)
{
    Session *s = sess_peek(sm, session_id);
    Tier first = sm->save_first;
    if (!s || s->tier == TIER_NONE || s->tier == first || tier_busy(s) || s->resident_tokens > 0) return;
    int in = tier_table[s->tier].in_hop, out = tier_table[first].out_hop;
    if (in < 0) return; /* (below the first tier every row has a link) */
    Unit *u = unit_new(sm);
    if (!u) return;
    Replica *vr = &sm->rep[s->replica];
    u->s = s;
    u->kind = U_SPILL;
    u->done = prefetch_done;
    u->tier = first;
    u->tier_from = s->tier;
    int h = 0;
    u->chain[h] = rep_channel(vr, in, 0), u->bytes[h++] = s->saved_bytes;
    u->read_hops = h;
    if (out >= 0) u->chain[h] = rep_channel(vr, out, 0), u->bytes[h++] = s->saved_bytes;
    u->nhops = h;
    s->prefetching = 1;
    ch_enqueue(sm, u);
}

/* the session's saved state is gone (why: LOST_TTL or LOST_CAPACITY); never called while a save,
 * spill or load of it is in flight */
static void tier_drop(Sim *sm, Session *s, int why)
{
    tier_unlink(sm, s);
    tb_release(sm, s, s->tier, 0);
    if (s->tb) {
        tb_unpin(sm, s, &s->tb->save);
        tb_unpin(sm, s, &s->tb->spill);
    }
    sess_blocks_free(s);
    if (s->cp) {
        for (int t = TIER_DRAM; t < SIM_TIERS; t++) copy_unlink(sm, s, (Tier)t);
        free(s->cp);
        s->cp = NULL;
    }
    s->tier = TIER_NONE;
    s->saved_tokens = 0;
    s->saved_bytes = 0;
    s->issued_pos = 0;
    for (int st = 0; st < sm->S; st++) sess_d2h(s)[st] = sess_land(sm, s)[st] = 0;
    s->lost = why;
    sm->state_drops++;
    metrics_on_state_lost(sm, why);
    if (sm->state_dropped) sm->state_dropped(sm, s); /* the admission queue's: it may spill s whole now */
    else sess_maybe_free(sm, s);
}

/* a spill landed: the session moves down to the target tier (unless it was dropped meanwhile) */
static void spill_done(Sim *sm, Unit *u)
{
    Session *s = u->s;
    Tier from = (Tier)u->tier_from, to = (Tier)u->tier;
    s->spilling = 0;
    /* the bytes counted when it started (a save may have grown the session meanwhile) */
    tier_list(sm, s->replica, from)->spilling_bytes -= s->spill_bytes;
    metrics_on_tier_written(sm, to, u->nhops ? u->bytes[u->nhops - 1] : s->spill_bytes); /* what crossed into it */
    s->spill_bytes = 0;
    if (s->tier != from) { /* dropped meanwhile */
        sess_maybe_free(sm, s);
    } else {
        copy_unlink(sm, s, to);
        tier_relink(sm, s, to);
        if (s->tb) tb_unpin(sm, s, &s->tb->spill); /* the skipped blocks are the state's own now */
        tier_enforce_capacity(sm, &sm->rep[s->replica]);
    }
    unit_free(sm, u);
}

/* one stage's share of a background save reached its destination; the save is done when all have */
static void save_done(Sim *sm, Unit *u)
{
    Session *s = u->s;
    /* bytes[0]: the share on its last hop (the tier's own link), or the GPU's shard of it over D2H */
    double bytes = tier_table[u->tier].out_hop >= 0 ? u->bytes[0] : u->bytes[0] * sm->T;
    int64_t upto = u->upto;
    int st = u->stage;
    if (upto > sess_land(sm, s)[st]) sess_land(sm, s)[st] = upto;
    unit_free(sm, u);
    if (s->parked) tier_unpark(sm, s, st); /* loads waiting for it to land (a store without DRAM) */
    s->save_acc += bytes;
    if (--s->saving > 0) return;
    bytes = s->save_acc;
    s->save_acc = 0;
    s->saved_tokens = s->issued_pos; /* every save issued has landed */
    s->lost = LOST_NONE;
    Tier t = s->tier;
    if (t == TIER_NONE) t = sm->save_first;
    tier_unlink(sm, s);
    double old = s->saved_bytes;
    double add = bytes; /* the state grew by what was written and the blocks its tier held already */
    if (s->tb) {
        add += s->tb->skip;
        s->tb->skip = 0;
    }
    s->saved_bytes += add;
    tb_acquire(sm, s, t);
    if (s->tb) tb_unpin(sm, s, &s->tb->save);
    tier_link(sm, s, t);
    metrics_on_policy_saved(sm, bytes);
    metrics_on_tier_written(sm, t, bytes);
    copy_down(sm, s, old, add);
    /* may drop (and free) s itself when the tiers are full: s is not touched after this */
    tier_enforce_capacity(sm, &sm->rep[s->replica]);
}

/* one stage's share of a save crossed D2H: its bytes are in host DRAM now. Loads parked on it go;
 * then it goes on to the tier's own link (SSD, NIC), or it has arrived (DRAM). */
static void save_d2h_done(Sim *sm, Unit *u)
{
    Session *s = u->s;
    int st = u->stage;
    s->d2h_inflight--;
    if (u->upto > sess_d2h(s)[st]) sess_d2h(s)[st] = u->upto;
    if (s->parked) tier_unpark(sm, s, st);
    int out = tier_table[u->tier].out_hop;
    if (out < 0) {
        save_done(sm, u);
        return;
    }
    u->chain[0] = rep_channel(&sm->rep[s->replica], out, st);
    u->bytes[0] = u->bytes[1];
    u->hop = 0;
    u->done = save_done;
    ch_enqueue(sm, u);
}

/* lists are in touch order: expire from the head while entries are older than the TTL */
static void expire_list(Sim *sm, Session *head, int64_t cutoff)
{
    for (Session *v = head; v && v->last_use_ns < cutoff;) {
        Session *nx = v->t_next;
        if (!tier_busy(v)) tier_drop(sm, v, LOST_TTL);
        v = nx;
    }
}

/* s's saved state, if unused for state_ttl, is dropped now (a restoration about to read it: the
 * lists' expiry runs only when a tier changes) */
void tier_expire_session(Sim *sm, Session *s)
{
    if (sm->cfg->state_ttl_ns <= 0 || s->tier == TIER_NONE || tier_busy(s)) return;
    if (s->last_use_ns < sim_now(sm) - sm->cfg->state_ttl_ns) tier_drop(sm, s, LOST_TTL);
}

/* Keep every tier under its capacity, tier after tier in table order: write-through copies held
 * there are dropped first (least recently written first), then a tier with a spill target moves its
 * LRU sessions there (a spill unit over the target's channel; none where the target holds a whole
 * copy: the session moves at once), the others drop theirs. */
void tier_enforce_capacity(Sim *sm, Replica *rp)
{
    if (sm->cfg->state_ttl_ns > 0) {
        int64_t cutoff = sim_now(sm) - sm->cfg->state_ttl_ns;
        for (int t = TIER_DRAM; t < SIM_TIERS; t++) expire_list(sm, tier_list(sm, rp->id, (Tier)t)->head, cutoff);
    }
    int again; /* a demotion onto a whole copy moved a session at once: its tier is checked again */
    do {
        again = 0;
        for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
            TierList *tl = tier_list(sm, rp->id, (Tier)t);
            const TierRun *tr = &sm->tiers[t];
            while (tr->capped && tl->used_bytes + tl->blk_bytes + tl->copy_bytes - tl->spilling_bytes > tr->cap_bytes) {
                /* write-through copies go first: the states they copy are still held above */
                Session *c = tl->chead;
                while (c && c->cp->inflight) c = c->cp->next[t];
                if (c) {
                    copy_unlink(sm, c, (Tier)t);
                    continue;
                }
                Session *v = tl->head;
                while (v && tier_busy(v)) v = v->t_next;
                if (!v) break;
                if (tr->spill_to == TIER_NONE) {
                    tier_drop(sm, v, LOST_CAPACITY);
                    continue;
                }
                if (copy_whole(v, tr->spill_to)) { /* write-through: the next tier has it already */
                    copy_unlink(sm, v, tr->spill_to);
                    tier_relink(sm, v, tr->spill_to);
                    again = 1;
                    continue;
                }
                Unit *u = unit_new(sm);
                if (!u) return;
                u->s = v;
                u->kind = U_SPILL;
                u->done = spill_done;
                u->tier = tr->spill_to;
                u->tier_from = t;
                /* read out of the tier it leaves over that tier's own link (the SSD array, the NIC), then
                 * written over the target's; the channels of v's replica (a shared tier holds others') */
                Replica *vr = &sm->rep[v->replica];
                int h = 0, in = tier_table[t].in_hop, out = tier_table[tr->spill_to].out_hop;
                /* the named blocks the target holds already are not moved; the bytes leaving are those
                 * no other state here holds */
                double held = v->tb ? tb_skip(sm, v, tr->spill_to, 0, v->saved_tokens, &v->tb->spill) : 0;
                double move = v->saved_bytes - held;
                sm->tiers[tr->spill_to].skip_bytes += held;
                if (in >= 0) u->chain[h] = rep_channel(vr, in, 0), u->bytes[h++] = move;
                u->read_hops = h;
                if (out >= 0) u->chain[h] = rep_channel(vr, out, 0), u->bytes[h++] = move;
                u->nhops = h;
                v->spilling = 1;
                v->spill_bytes = tier_leaving(sm, v, (Tier)t);
                tl->spilling_bytes += v->spill_bytes;
                ch_enqueue(sm, u);
            }
        }
    } while (again);
}

/* write the state of context positions [issued_pos, upto) out: D2H per stage (each GPU its shard),
 * then on to the session's tier over its channel (DRAM: nothing more; SSD or remote: a second hop,
 * the same unit sent on by save_d2h_done) */
void tier_save_range(Sim *sm, Session *s, int64_t upto)
{
    if (sm->save_bpt <= 0 || upto <= s->issued_pos) return;
    double bytes = (double)(upto - s->issued_pos) * sm->save_bpt;
    Tier dest = s->tier != TIER_NONE ? s->tier : sm->save_first;
    /* named blocks its destination holds already are not written (pinned there until it lands) */
    double skip = s->tb ? tb_skip(sm, s, dest, s->issued_pos, upto, &s->tb->save) : 0;
    if (skip > 0) {
        bytes -= skip;
        s->tb->skip += skip;
        sm->tiers[dest].skip_bytes += skip;
    }
    s->issued_pos = upto;
    s->save_dest = dest;
    Replica *rp = &sm->rep[s->replica];
    for (int st = 0; st < sm->S; st++) {
        Unit *u = unit_new(sm);
        if (!u) return;
        u->s = s;
        u->kind = U_SAVE;
        u->done = save_d2h_done;
        u->stage = st;
        u->upto = upto;
        u->tier = dest;
        double share = bytes * sm->stage_layers[st] / sm->L;
        u->chain[0] = rep_channel(rp, CH_D2H, st);
        u->bytes[0] = share / sm->T;
        u->bytes[1] = share; /* for the tier's own link after D2H (not a hop of this unit yet) */
        u->nhops = 1;
        s->saving++;
        s->d2h_inflight++;
        ch_enqueue(sm, u);
    }
}

/* SAVE_DIRECT: the state of [issued_pos, upto) was written by the iteration that just ended */
void tier_direct_saved(Sim *sm, Session *s, int64_t upto)
{
    if (sm->save_bpt <= 0 || upto <= s->issued_pos) return;
    double bytes = (double)(upto - s->issued_pos) * sm->save_bpt;
    s->issued_pos = upto;
    Tier t = s->tier != TIER_NONE ? s->tier : sm->direct_first;
    metrics_on_direct_save(sm, t, bytes);
    tier_unlink(sm, s);
    s->saved_tokens = upto;
    for (int st = 0; st < sm->S; st++) sess_d2h(s)[st] = sess_land(sm, s)[st] = upto;
    s->lost = LOST_NONE;
    double old = s->saved_bytes;
    s->saved_bytes += bytes;
    tb_acquire(sm, s, t);
    tier_link(sm, s, t);
    metrics_on_policy_saved(sm, bytes);
    metrics_on_tier_written(sm, t, bytes);
    copy_down(sm, s, old, bytes);
    tier_enforce_capacity(sm, &sm->rep[s->replica]);
}

/* SAVE_DIRECT: the iteration itself writes its new state out and waits for it, as small writes.
 * The state of each item is cut into 64-token pieces per layer (`pieces` per layer over the batch;
 * a decode token is one piece). Each piece is its own D2H copy of each GPU's shard (per-copy link
 * latency: the copies sit on the critical path between the decode's layers), then its own write IO
 * to the SSD array: per-IO write latency, with DIRECT_QD writes in flight per drive (synchronous
 * writes from the serving loop), plus the bytes at the array's write rate. DRAM-only: the copies
 * alone. */
#define DIRECT_QD 1
double tier_direct_save_ns(Sim *sm, int64_t tokens, int64_t pieces)
{
    if (sm->save_bpt <= 0 || tokens <= 0) return 0;
    double bytes = (double)tokens * sm->save_bpt;
    double ios = (double)pieces * sm->L / sm->S; /* each stage's GPUs copy their own layers, in parallel */
    double t = bytes / sm->S / sm->T / sm->rate_d2h + ios * (double)sm->lat_link;
    if (sm->tiers[TIER_SSD].on && sm->rate_ssd_w > 0) {
        int n = sm->n_ssd > 0 ? sm->n_ssd : 1;
        double waves = ceil((double)pieces * sm->L / ((double)n * DIRECT_QD));
        t += bytes / sm->rate_ssd_w + waves * (double)sm->lat_ssd_w;
    }
    return t;
}

void tier_load_chain(Sim *sm, Unit *u, Replica *rp, Tier src, int stage, double tier_bytes, double gpu_bytes)
{
    int h = 0, in = tier_table[src].in_hop;
    if (in >= 0) {
        u->chain[h] = rep_channel(rp, in, stage);
        u->bytes[h++] = tier_bytes;
    }
    u->chain[h] = rep_channel(rp, CH_H2D, stage);
    u->bytes[h++] = gpu_bytes;
    u->nhops = h;
}
