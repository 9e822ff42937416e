/* prefix.c — the content-addressed block store of one place (see prefix.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/blockhash.h"
#include "sim/engine/prefix.h"

struct PrefixEntry {
    uint64_t hash;
    int32_t refs;
    uint32_t prev, next; /* LRU links while refs == 0; next also links the free list */
};

void prefix_init(PrefixStore *p, int64_t cap_blocks)
{
    memset(p, 0, sizeof *p);
    p->cap_blocks = cap_blocks > 0 ? cap_blocks : 0;
}

void prefix_free(PrefixStore *p)
{
    free(p->e);
    free(p->slot);
    int64_t cap = p->cap_blocks;
    prefix_init(p, cap);
}

static size_t home(const PrefixStore *p, uint64_t hash) { return (size_t)kv_mix64(hash) & (p->n_slot - 1); }

/* the table slot holding hash, or the empty slot where it would go */
static size_t find_slot(const PrefixStore *p, uint64_t hash)
{
    size_t j = home(p, hash);
    while (p->slot[j] && p->e[p->slot[j]].hash != hash) j = (j + 1) & (p->n_slot - 1);
    return j;
}

static uint32_t find(const PrefixStore *p, uint64_t hash)
{
    if (!p->n_slot) return 0;
    return p->slot[find_slot(p, hash)];
}

int prefix_has(const PrefixStore *p, uint64_t hash) { return find(p, hash) != 0; }

int32_t prefix_refs(const PrefixStore *p, uint64_t hash)
{
    uint32_t i = find(p, hash);
    return i ? p->e[i].refs : 0;
}

static int grow_table(PrefixStore *p)
{
    size_t n = p->n_slot ? p->n_slot * 2 : 64;
    uint32_t *slot = calloc(n, sizeof *slot);
    if (!slot) return -1;
    uint32_t *old = p->slot;
    size_t n_old = p->n_slot;
    p->slot = slot;
    p->n_slot = n;
    for (size_t i = 0; i < n_old; i++)
        if (old[i]) p->slot[find_slot(p, p->e[old[i]].hash)] = old[i];
    free(old);
    return 0;
}

/* remove the table's slot j by shifting the probe run after it back (no tombstones: lookups stay
 * proportional to the load, however many blocks come and go) */
static void table_remove(PrefixStore *p, size_t j)
{
    size_t mask = p->n_slot - 1;
    p->slot[j] = 0;
    for (size_t k = (j + 1) & mask; p->slot[k]; k = (k + 1) & mask) {
        size_t h = home(p, p->e[p->slot[k]].hash);
        /* the entry at k may move to j when its home is not in (j, k] (cyclically) */
        int stays = j <= k ? (j < h && h <= k) : (j < h || h <= k);
        if (stays) continue;
        p->slot[j] = p->slot[k];
        p->slot[k] = 0;
        j = k;
    }
}

static void lru_unlink(PrefixStore *p, uint32_t i)
{
    struct PrefixEntry *x = &p->e[i];
    if (x->prev) p->e[x->prev].next = x->next;
    else p->lru_head = x->next;
    if (x->next) p->e[x->next].prev = x->prev;
    else p->lru_tail = x->prev;
    x->prev = x->next = 0;
    p->n_lru--;
}

static void lru_push_mru(PrefixStore *p, uint32_t i)
{
    struct PrefixEntry *x = &p->e[i];
    x->prev = p->lru_tail;
    x->next = 0;
    if (p->lru_tail) p->e[p->lru_tail].next = i;
    else p->lru_head = i;
    p->lru_tail = i;
    p->n_lru++;
}

static void entry_free(PrefixStore *p, uint32_t i)
{
    table_remove(p, find_slot(p, p->e[i].hash));
    p->e[i].hash = 0;
    p->e[i].next = p->free_head;
    p->free_head = i;
    p->n_blocks--;
}

/* a new entry for hash, unreferenced and in no list; 0 when out of memory */
static uint32_t entry_new(PrefixStore *p, uint64_t hash)
{
    if ((size_t)(p->n_blocks + 1) * 4 > p->n_slot * 3 && grow_table(p) != 0) return 0;
    uint32_t i = p->free_head;
    if (i) {
        p->free_head = p->e[i].next;
    } else {
        if (p->n_e + 1 >= p->cap_e) {
            if (p->cap_e >= UINT32_MAX / 2) return 0;
            uint32_t cap = p->cap_e ? p->cap_e * 2 : 64;
            struct PrefixEntry *e = realloc(p->e, (size_t)cap * sizeof *e);
            if (!e) return 0;
            p->e = e;
            p->cap_e = cap;
        }
        i = ++p->n_e;
    }
    p->e[i] = (struct PrefixEntry){hash, 0, 0, 0};
    p->slot[find_slot(p, hash)] = i;
    p->n_blocks++;
    return i;
}

size_t prefix_longest(const PrefixStore *p, const uint64_t *h, size_t n)
{
    size_t k = 0;
    while (k < n && find(p, h[k])) k++;
    return k;
}

void prefix_count(PrefixStore *p, size_t found, size_t asked)
{
    p->st.lookups += (int64_t)(found < asked ? found + 1 : found);
    p->st.hits += (int64_t)found;
}

size_t prefix_match(PrefixStore *p, const uint64_t *h, size_t n)
{
    size_t k = prefix_longest(p, h, n);
    prefix_count(p, k, n);
    return k;
}

static void acquire_one(PrefixStore *p, uint32_t i)
{
    if (p->e[i].refs++ == 0) lru_unlink(p, i);
}

void prefix_acquire(PrefixStore *p, const uint64_t *h, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t i = find(p, h[k]);
        if (i) acquire_one(p, i);
    }
}

void prefix_release(PrefixStore *p, const uint64_t *h, size_t n)
{
    /* the tail first: it becomes the least recent of the chain, evicted before the shared front */
    for (size_t k = n; k-- > 0;) {
        uint32_t i = find(p, h[k]);
        if (!i || p->e[i].refs <= 0) continue;
        if (--p->e[i].refs == 0) lru_push_mru(p, i);
    }
}

long prefix_insert(PrefixStore *p, const uint64_t *h, size_t n, int pin)
{
    size_t k = 0;
    long rc = 0;
    for (; k < n; k++) {
        uint32_t i = find(p, h[k]);
        if (i) {
            p->st.deduplicated++;
            acquire_one(p, i); /* held while the rest of the chain goes in: it cannot evict its own front */
            continue;
        }
        if (p->cap_blocks > 0 && p->n_blocks >= p->cap_blocks) {
            if (!p->lru_head) {
                p->st.refused++;
                break;
            }
            uint32_t v = p->lru_head;
            lru_unlink(p, v);
            entry_free(p, v);
            p->st.evicted++;
        }
        i = entry_new(p, h[k]);
        if (!i) {
            rc = -1;
            break;
        }
        p->st.inserted++;
        p->e[i].refs = 1; /* new: in no list yet */
    }
    if (!pin) prefix_release(p, h, k);
    return rc < 0 ? -1 : (long)k;
}

int prefix_drop(PrefixStore *p, uint64_t hash)
{
    uint32_t i = find(p, hash);
    if (!i || p->e[i].refs > 0) return -1;
    lru_unlink(p, i);
    entry_free(p, i);
    return 0;
}

int prefix_evict_lru(PrefixStore *p)
{
    uint32_t v = p->lru_head;
    if (!v) return 0;
    lru_unlink(p, v);
    entry_free(p, v);
    p->st.evicted++;
    return 1;
}

int64_t prefix_refs_total(const PrefixStore *p)
{
    int64_t t = 0;
    for (uint32_t i = 1; i <= p->n_e; i++)
        if (p->e[i].hash) t += p->e[i].refs;
    return t;
}

struct PrefixNamesSlot {
    uint64_t id;             /* + 1 (0: empty) */
    uint64_t *h;
    uint32_t n;
};

static size_t pn_home(const PrefixNames *m, uint64_t key) { return (size_t)kv_mix64(key) & (m->n_slot - 1); }

static size_t pn_find(const PrefixNames *m, uint64_t key)
{
    size_t j = pn_home(m, key);
    while (m->slot[j].id && m->slot[j].id != key) j = (j + 1) & (m->n_slot - 1);
    return j;
}

int pnames_put(PrefixNames *m, uint64_t id, const uint64_t *h, uint32_t n)
{
    if ((m->n + 1) * 4 > m->n_slot * 3) {
        size_t ns = m->n_slot ? m->n_slot * 2 : 64;
        struct PrefixNamesSlot *old = m->slot, *nw = calloc(ns, sizeof *nw);
        if (!nw) return -1;
        size_t n_old = m->n_slot;
        m->slot = nw;
        m->n_slot = ns;
        for (size_t i = 0; i < n_old; i++)
            if (old[i].id) m->slot[pn_find(m, old[i].id)] = old[i];
        free(old);
    }
    uint64_t *c = malloc((size_t)n * sizeof *c);
    if (!c) return -1;
    memcpy(c, h, (size_t)n * sizeof *c);
    m->slot[pn_find(m, id + 1)] = (struct PrefixNamesSlot){id + 1, c, n};
    m->n++;
    return 0;
}

int pnames_take(PrefixNames *m, uint64_t id, uint64_t **h, uint32_t *n)
{
    *h = NULL;
    *n = 0;
    if (!m->n) return 0;
    size_t j = pn_find(m, id + 1), mask = m->n_slot - 1;
    if (!m->slot[j].id) return 0;
    *h = m->slot[j].h;
    *n = m->slot[j].n;
    m->n--;
    m->slot[j].id = 0;
    for (size_t k = (j + 1) & mask; m->slot[k].id; k = (k + 1) & mask) {
        size_t hm = pn_home(m, m->slot[k].id);
        int stays = j <= k ? (j < hm && hm <= k) : (j < hm || hm <= k);
        if (stays) continue;
        m->slot[j] = m->slot[k];
        m->slot[k].id = 0;
        j = k;
    }
    return 1;
}

int pnames_get(const PrefixNames *m, uint64_t id, const uint64_t **h, uint32_t *n)
{
    if (!m->n) return 0;
    size_t j = pn_find(m, id + 1);
    if (!m->slot[j].id) return 0;
    *h = m->slot[j].h;
    *n = m->slot[j].n;
    return 1;
}

void pnames_free(PrefixNames *m)
{
    for (size_t i = 0; i < m->n_slot; i++)
        if (m->slot[i].id) free(m->slot[i].h);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static size_t po_find(const PrefixOwners *m, uint64_t key)
{
    size_t j = (size_t)kv_mix64(key) & (m->n_slot - 1);
    while (m->key[j] && m->key[j] != key) j = (j + 1) & (m->n_slot - 1);
    return j;
}

int powners_set(PrefixOwners *m, uint64_t hash, uint64_t owner)
{
    if ((m->n + 1) * 4 > m->n_slot * 3) {
        size_t ns = m->n_slot ? m->n_slot * 2 : 256, n_old = m->n_slot;
        uint64_t *k = calloc(ns, sizeof *k), *v = calloc(ns, sizeof *v), *ok = m->key, *ov = m->val;
        if (!k || !v) {
            free(k);
            free(v);
            return -1;
        }
        m->key = k, m->val = v, m->n_slot = ns;
        for (size_t i = 0; i < n_old; i++)
            if (ok[i]) {
                size_t j = po_find(m, ok[i]);
                m->key[j] = ok[i], m->val[j] = ov[i];
            }
        free(ok);
        free(ov);
    }
    size_t j = po_find(m, hash);
    if (!m->key[j]) m->key[j] = hash, m->n++;
    m->val[j] = owner;
    return 0;
}

int powners_get(const PrefixOwners *m, uint64_t hash, uint64_t *owner)
{
    if (!m->n) return 0;
    size_t j = po_find(m, hash);
    if (!m->key[j]) return 0;
    *owner = m->val[j];
    return 1;
}

void powners_free(PrefixOwners *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

int prefix_check(const PrefixStore *p, char *msg, size_t len)
{
    int64_t resident = 0, in_lru = 0;
    for (uint32_t i = 1; i <= p->n_e; i++) {
        if (!p->e[i].hash) continue;
        resident++;
        if (p->e[i].refs < 0) return snprintf(msg, len, "prefix store: block %016llx has %d references",
                                              (unsigned long long)p->e[i].hash, p->e[i].refs), -1;
        if (find(p, p->e[i].hash) != i)
            return snprintf(msg, len, "prefix store: block %016llx is not found by its hash", (unsigned long long)p->e[i].hash), -1;
    }
    uint32_t prev = 0;
    for (uint32_t i = p->lru_head; i; prev = i, i = p->e[i].next) {
        if (++in_lru > resident || p->e[i].prev != prev || p->e[i].refs != 0)
            return snprintf(msg, len, "prefix store: the LRU list is broken at block %016llx", (unsigned long long)p->e[i].hash), -1;
    }
    if (prev != p->lru_tail || in_lru != p->n_lru)
        return snprintf(msg, len, "prefix store: the LRU list holds %lld blocks, counted %lld", (long long)in_lru, (long long)p->n_lru), -1;
    if (resident != p->n_blocks)
        return snprintf(msg, len, "prefix store: %lld blocks resident, counted %lld", (long long)resident, (long long)p->n_blocks), -1;
    if (p->cap_blocks > 0 && p->n_blocks > p->cap_blocks)
        return snprintf(msg, len, "prefix store: %lld blocks over a capacity of %lld", (long long)p->n_blocks, (long long)p->cap_blocks), -1;
    int64_t pinned = 0;
    for (uint32_t i = 1; i <= p->n_e; i++)
        if (p->e[i].hash && p->e[i].refs > 0) pinned++;
    if (pinned + in_lru != resident)
        return snprintf(msg, len, "prefix store: %lld pinned + %lld unreferenced != %lld resident", (long long)pinned, (long long)in_lru,
                        (long long)resident), -1;
    return 0;
}
