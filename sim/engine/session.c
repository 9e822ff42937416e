/* session.c — sessions and the HBM they hold.
 *
 * Responsible for: the session map (open addressing keyed by session id, grown at half load,
 * backward-shift deletion so probe chains stay intact), freeing a session once nothing refers to
 * it, the LRU of idle resident sessions per replica (the eviction order when admission needs
 * space), the qkv list of resident sessions whose turn is queued (release order; evicted newest
 * first, only by an admission that finds nothing admitted), and the KV pool's accounting in tokens
 * (reserve, release, evict).
 * Also the turns read and not admitted (turn_free: their memory, their reference on the session).
 * Not responsible for: saved state (tier.c), when a session's turns run (lifecycle.c).
 * Invariants (SIM_CHECK, always on): 0 <= pool_used <= pool_cap after every reserve and release;
 * a session is freed only when it is not busy, holds no pending turn, no request refers to it, it
 * has no resident KV, no saved state and no save, spill or load in flight (so no load parked on it).
 * Sessions spilled with their queued turn (waitq.c) leave the map: a bitmap over the dense session
 * ids marks them (1 bit per session id seen), and a trace row naming one meanwhile gets a "ghost"
 * (busy, so its turns wait in its pending list) that sess_reattach merges back. A spilled or ghost
 * session is never counted again as a new session (sessions_seen).
 * Complexity: find/get/remove O(1) expected; LRU operations O(1); evict O(1) per session; cold test
 * O(pending turns).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"

static size_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static Session *sess_find(Sim *sm, uint64_t id)
{
    size_t m = sm->tab_cap - 1;
    for (size_t i = hash_u64(id) & m;; i = (i + 1) & m) {
        Session *s = sm->tab[i];
        if (!s) return NULL;
        if (s->id == id) return s;
    }
}

static int sess_grow(Sim *sm)
{
    size_t nc = sm->tab_cap * 2;
    Session **nt = calloc(nc, sizeof *nt);
    if (!nt) return -1;
    for (size_t i = 0; i < sm->tab_cap; i++) {
        Session *s = sm->tab[i];
        if (!s) continue;
        size_t j = hash_u64(s->id) & (nc - 1);
        while (nt[j]) j = (j + 1) & (nc - 1);
        nt[j] = s;
    }
    free(sm->tab);
    sm->tab = nt;
    sm->tab_cap = nc;
    return 0;
}

static int spilled(const Sim *sm, uint64_t id)
{
    return id / 64 < sm->spilled_words && (sm->spilled_bits[id / 64] >> (id % 64) & 1);
}

/* a new session in the map (not counted) */
static Session *sess_new(Sim *sm, uint64_t id)
{
    if ((sm->tab_n + 1) * 2 > sm->tab_cap && sess_grow(sm) != 0) return NULL;
    Session *s = sim_zalloc(sess_size(sm));
    if (!s) return NULL;
    sm->sess_bytes += sess_size(sm);
    sim_note_waiting(sm);
    s->id = id;
    s->replica = -1;
    size_t m = sm->tab_cap - 1, i = hash_u64(id) & m;
    while (sm->tab[i]) i = (i + 1) & m;
    sm->tab[i] = s;
    sm->tab_n++;
    return s;
}

Session *sess_peek(Sim *sm, uint64_t id) { return sess_find(sm, id); }

Session *sess_get(Sim *sm, uint64_t id)
{
    Session *s = sess_find(sm, id);
    if (s) return s;
    int ghost = spilled(sm, id);
    if (!(s = sess_new(sm, id))) return NULL;
    if (ghost) s->busy = 1; /* its queued turn is in a spill file: later turns wait for it */
    else sm->sessions_seen++;
    return s;
}

int sess_set_name(Sim *sm, Session *s, const char *name)
{
    if (!(s->name = strdup(name))) return -1;
    sm->sess_bytes += strlen(name) + 1;
    sim_note_waiting(sm);
    return 0;
}

int sess_is_cold(const Sim *sm, const Session *s, size_t *pending)
{
    size_t n = 0;
    *pending = 0;
    /* concurrency=N: a ghost would look like a session never seen (conc_seen) and get a client; the
     * queue holds at most N turns there anyway */
    if (sim_load_mode(sm->cfg) == SIM_LOAD_CONCURRENCY) return 0;
    for (const Turn *p = s->pend_head; p; p = p->next) n++;
    *pending = n;
    /* nothing but its own turns refers to it, and none of its pointers but its name and pending list is set */
    return s->busy && s->refs == (int)n + (int)s->pend_side_n + 1 && (!s->name || strlen(s->name) <= WR_NAME) && s->resident_tokens == 0 &&
           !s->in_hbm_lru && !s->in_qkv && !s->hbm_prev && !s->hbm_next && s->tier == TIER_NONE && !s->t_prev && !s->t_next &&
           !s->cp && !s->tb && !s->saving && !s->spilling && !s->loading && !s->d2h_inflight && !s->parked && !s->conc_next;
}

int sess_spill_reserve(Sim *sm, uint64_t id)
{
    if (id / 64 < sm->spilled_words) return 0;
    size_t nw = sm->spilled_words ? sm->spilled_words : 64;
    while (nw <= id / 64) nw *= 2;
    uint64_t *nb = realloc(sm->spilled_bits, nw * sizeof *nb);
    if (!nb) return -1;
    memset(nb + sm->spilled_words, 0, (nw - sm->spilled_words) * sizeof *nb);
    sm->sess_bytes += (nw - sm->spilled_words) * sizeof *nb;
    sim_note_waiting(sm);
    sm->spilled_bits = nb;
    sm->spilled_words = nw;
    return 0;
}

static void sess_unmap(Sim *sm, Session *s);

void sess_detach(Sim *sm, Session *s)
{
    sm->spilled_bits[s->id / 64] |= 1ull << (s->id % 64);
    sess_unmap(sm, s);
}

Session *sess_reattach(Sim *sm, const Session *img, const int64_t *pos, const char *name)
{
    Session *s = sess_find(sm, img->id); /* a ghost */
    if (!s && !(s = sess_new(sm, img->id))) return sim_fail(sm, "out of memory"), NULL;
    sm->spilled_bits[img->id / 64] &= ~(1ull << (img->id % 64));
    /* the image, but the ghost's name, turns and references */
    char *own_name = s->name;
    Turn *ph = s->pend_head, *pt = s->pend_tail;
    int refs = s->refs;
    *s = *img;
    memcpy(s->pos, pos, 2 * (size_t)sm->S * sizeof *pos);
    s->name = own_name;
    s->pend_head = ph;
    s->pend_tail = pt;
    s->refs = refs;
    s->chk_saving = s->chk_active = 0;
    if (!s->name && name && sess_set_name(sm, s, name) != 0) return sim_fail(sm, "out of memory"), NULL;
    return s;
}

/* remove with backward-shift deletion (keeps probe chains intact) and free */
static void sess_unmap(Sim *sm, Session *s)
{
    size_t m = sm->tab_cap - 1, i = hash_u64(s->id) & m;
    while (sm->tab[i] != s) i = (i + 1) & m;
    sm->tab[i] = NULL;
    for (size_t j = (i + 1) & m; sm->tab[j]; j = (j + 1) & m) {
        size_t home = hash_u64(sm->tab[j]->id) & m;
        /* move tab[j] to i if its home is not in (i, j] cyclically */
        int between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            sm->tab[i] = sm->tab[j];
            sm->tab[j] = NULL;
            i = j;
        }
    }
    sm->tab_n--;
    sm->sess_bytes -= sess_size(sm) + (s->name ? strlen(s->name) + 1 : 0);
    sess_blocks_free(s);
    free(s->name);
    free(s);
}

void sess_blocks_free(Session *s)
{
    if (!s->tb) return;
    free(s->tb->names);
    free(s->tb->save.h);
    free(s->tb->spill.h);
    free(s->tb);
    s->tb = NULL;
}

void sess_maybe_free(Sim *sm, Session *s)
{
    if (!s->busy && !s->pend_head && !s->refs && s->resident_tokens == 0 && s->tier == TIER_NONE && !s->saving &&
        !s->spilling && !s->loading)
        sess_unmap(sm, s);
}

/* a turn not admitted: its memory and its reference on its session */
void turn_free(Sim *sm, Turn *t)
{
    if (sm->names.n) { /* a turn never admitted: its block names go with it */
        uint64_t *h;
        uint32_t n;
        pnames_take(&sm->names, t->id, &h, &n);
        free(h);
    }
    t->s->refs--;
    sm->turn_bytes -= sizeof *t;
    free(t);
}

void sess_free_all(Sim *sm)
{
    if (!sm->tab) return;
    for (size_t i = 0; i < sm->tab_cap; i++) {
        Session *s = sm->tab[i];
        if (!s) continue;
        Turn *r = s->pend_head;
        while (r) {
            Turn *nx = r->next;
            turn_free(sm, r);
            r = nx;
        }
        while (s->parked) { /* loads still waiting for a save (a run that failed) */
            Unit *nx = s->parked->next;
            free(s->parked);
            s->parked = nx;
        }
        free(s->pfx_names);
        sess_blocks_free(s);
        free(s->cp);
        free(s->name);
        free(s);
    }
    free(sm->tab);
    sm->tab = NULL;
    free(sm->spilled_bits);
    sm->spilled_bits = NULL;
    sm->spilled_words = 0;
}

/* ------------------------------------------------------------------ HBM LRU and the pool */

void hbm_lru_remove(Replica *rp, Session *s)
{
    if (!s->in_hbm_lru) return;
    LRU_UNLINK(rp->lru_head, rp->lru_tail, s, hbm_prev, hbm_next);
    s->in_hbm_lru = 0;
}

void hbm_lru_add(Replica *rp, Session *s)
{
    hbm_lru_remove(rp, s);
    LRU_APPEND(rp->lru_head, rp->lru_tail, s, hbm_prev, hbm_next);
    s->in_hbm_lru = 1;
}

void qkv_add(Replica *rp, Session *s)
{
    hbm_lru_remove(rp, s);
    if (s->in_qkv || s->resident_tokens <= 0) return;
    LRU_APPEND(rp->qkv_head, rp->qkv_tail, s, hbm_prev, hbm_next);
    s->in_qkv = 1;
}

void qkv_remove(Replica *rp, Session *s)
{
    if (!s->in_qkv) return;
    LRU_UNLINK(rp->qkv_head, rp->qkv_tail, s, hbm_prev, hbm_next);
    s->in_qkv = 0;
}

/* the turn released last waits the longest: its KV goes first */
int hbm_evict_queued(Sim *sm, Replica *rp, const Session *keep)
{
    Session *s = rp->qkv_tail;
    if (s && s == keep) s = s->hbm_prev;
    if (!s) return 0;
    sess_drop_resident(sm, rp, s);
    return 1;
}

void pool_reserve(Sim *sm, Replica *rp, int64_t tokens)
{
    rp->pool_used += tokens;
    SIM_CHECK(sm, rp->pool_used >= 0 && rp->pool_used <= rp->pool_cap);
}

void pool_release(Sim *sm, Replica *rp, int64_t tokens)
{
    rp->pool_used -= tokens;
    SIM_CHECK(sm, rp->pool_used >= 0 && rp->pool_used <= rp->pool_cap);
}

void sess_drop_resident(Sim *sm, Replica *rp, Session *s)
{
    qkv_remove(rp, s);
    pool_release(sm, rp, blocks_private(sm, s->resident_tokens, s->pfx_n));
    s->resident_tokens = 0;
    if (s->pfx_names) { /* its named blocks stay cached, unreferenced, until the pool needs the room */
        prefix_release(&rp->pfx, s->pfx_names, (size_t)s->pfx_n);
        free(s->pfx_names);
        s->pfx_names = NULL;
        s->pfx_n = 0;
    }
}

/* evict the least recently used idle resident session's KV from HBM, or when there is none the
 * least recently used unreferenced block of the prefix cache; 0 when there is neither */
int hbm_evict_one(Sim *sm, Replica *rp)
{
    Session *s = rp->lru_head;
    if (!s) {
        if (!prefix_evict_lru(&rp->pfx)) return 0;
        pool_release(sm, rp, sm->pfx_B);
        return 1;
    }
    hbm_lru_remove(rp, s);
    sess_drop_resident(sm, rp, s);
    sess_maybe_free(sm, s);
    return 1;
}
