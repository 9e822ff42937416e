/* session.c — sessions and the HBM they hold.
 *
 * Responsible for: the session map (open addressing keyed by session id, grown at half load,
 * backward-shift deletion so probe chains stay intact), freeing a session once nothing refers to
 * it, the LRU of idle resident sessions per replica (the eviction order when admission needs
 * space), and the KV pool's accounting in tokens (reserve, release, evict).
 * Not responsible for: saved state (tier.c), when a session's turns run (lifecycle.c).
 * Invariants (SIM_CHECK, always on): 0 <= pool_used <= pool_cap after every reserve and release;
 * a session is freed only when it is not busy, holds no pending turn, no request refers to it, it
 * has no resident KV, no saved state and no save, spill or load in flight (so no load parked on it).
 * Complexity: find/get/remove O(1) expected; LRU operations O(1); evict O(1) per session.
 */
#include <stdlib.h>

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

Session *sess_get(Sim *sm, uint64_t id)
{
    Session *s = sess_find(sm, id);
    if (s) return s;
    if ((sm->tab_n + 1) * 2 > sm->tab_cap && sess_grow(sm) != 0) return NULL;
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    s->replica = -1;
    size_t m = sm->tab_cap - 1, i = hash_u64(id) & m;
    while (sm->tab[i]) i = (i + 1) & m;
    sm->tab[i] = s;
    sm->tab_n++;
    sm->sessions_seen++;
    return s;
}

/* remove with backward-shift deletion (keeps probe chains intact) */
static void sess_remove(Sim *sm, Session *s)
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
    free(s->name);
    free(s);
}

void sess_maybe_free(Sim *sm, Session *s)
{
    if (!s->busy && !s->pend_head && !s->refs && s->resident_tokens == 0 && s->tier == TIER_NONE && !s->saving &&
        !s->spilling && !s->loading)
        sess_remove(sm, s);
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
        free(s->name);
        free(s);
    }
    free(sm->tab);
    sm->tab = NULL;
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
    pool_release(sm, rp, blocks_tokens(sm, s->resident_tokens));
    s->resident_tokens = 0;
}

/* evict the least recently used idle resident session's KV from HBM; 0 when there is none */
int hbm_evict_one(Sim *sm, Replica *rp)
{
    Session *s = rp->lru_head;
    if (!s) return 0;
    hbm_lru_remove(rp, s);
    sess_drop_resident(sm, rp, s);
    sess_maybe_free(sm, s);
    return 1;
}
