/* prefix.h — a content-addressed store of KV blocks at one place (a replica's HBM, one tier's copy):
 * blocks named by chained hashes, reference counts, LRU eviction of unreferenced blocks.
 *
 * Responsible for: the blocks one place holds, found by hash in O(1); the longest resident prefix of
 * a request's chain of block hashes; pinning the blocks a request uses (refs > 0: never evicted) and
 * releasing them into the LRU; inserting a chain's blocks, deduplicated by hash, evicting the least
 * recently used unreferenced blocks when the place is full; the counts a run reports (hits, inserts,
 * deduplicated inserts, evictions).
 * The eviction order is vLLM's free-block queue: a released chain enters the LRU tail-block first, so
 * under pressure a chain loses its last blocks before its first and keeps the prefix that others
 * share.
 * Not responsible for: what a block holds or costs (the engine's restoration plan), where a missing
 * block is found (the tiers below, each with its own PrefixStore), the KV pool's token accounting.
 * Blocks are named by sim/base/blockhash.h's hashes, never 0 (0 marks a free entry).
 * Invariants: n_blocks <= cap_blocks (when cap_blocks > 0); a block is in the LRU exactly when its
 * refs are 0; n_lru + (blocks with refs > 0) == n_blocks; every resident hash is found by the table.
 * Complexity: every call O(blocks it is given + blocks it evicts), expected; memory O(cap) — the
 * table and the block array grow by doubling up to the resident count, never scan.
 */
#ifndef KV_PREFIX_H
#define KV_PREFIX_H

#include <stddef.h>
#include <stdint.h>

typedef struct PrefixStats {
    int64_t lookups;       /* blocks asked for by prefix_match (the chain up to the first miss + 1) */
    int64_t hits;          /* of those, resident */
    int64_t inserted;      /* blocks made resident */
    int64_t deduplicated;  /* inserts of a block already resident (stored once) */
    int64_t evicted;       /* unreferenced blocks dropped for room */
    int64_t refused;       /* inserts with no room (every resident block referenced) */
} PrefixStats;

typedef struct PrefixStore {
    struct PrefixEntry *e;   /* entries; index 0 unused (0 is "none" in the links and the table) */
    uint32_t n_e, cap_e;     /* entries in use (with the free list's), allocated */
    uint32_t free_head;      /* a freed entry to reuse (linked through .next), 0: none */
    uint32_t *slot;          /* open addressing (linear probing): entry index, 0 empty */
    size_t n_slot;           /* a power of two, 0 before the first insert */
    uint32_t lru_head, lru_tail; /* unreferenced blocks, least recently used at the head */
    int64_t n_blocks;        /* resident */
    int64_t n_lru;           /* of those, unreferenced */
    int64_t cap_blocks;      /* 0: unlimited */
    PrefixStats st;
} PrefixStore;

/* An empty store holding at most cap_blocks blocks (0: no limit). */
void prefix_init(PrefixStore *p, int64_t cap_blocks);
void prefix_free(PrefixStore *p);

/* How many leading blocks of h[0..n) are resident (counted in st.lookups / st.hits). */
size_t prefix_match(PrefixStore *p, const uint64_t *h, size_t n);
/* The same without counting it (a router comparing places, an admission that may not happen yet)
 * and the count alone: `found` of `asked` leading blocks resident. */
size_t prefix_longest(const PrefixStore *p, const uint64_t *h, size_t n);
void prefix_count(PrefixStore *p, size_t found, size_t asked);
/* Whether one block is resident (not counted); its reference count (0 when absent or unreferenced). */
int prefix_has(const PrefixStore *p, uint64_t hash);
int32_t prefix_refs(const PrefixStore *p, uint64_t hash);

/* Pin h[0..n), every one resident (the caller matched them first): refs + 1, out of the LRU. */
void prefix_acquire(PrefixStore *p, const uint64_t *h, size_t n);
/* Unpin h[0..n) (each pinned): refs − 1; a block reaching 0 enters the LRU as most recently used,
 * the chain's last block first (it is evicted before the blocks in front of it). */
void prefix_release(PrefixStore *p, const uint64_t *h, size_t n);

/* Make h[0..n) resident, in order, stopping at the first block with no room (every resident block
 * referenced, or cap_blocks 0 is impossible: unlimited never stops). pin: the inserted and the
 * already resident blocks are acquired as by prefix_acquire (a request that computed them and keeps
 * using them); else they enter the LRU as released. Returns the blocks of h now resident from the
 * front (n when all fit); -1 when out of memory (the store is unchanged past the blocks done). */
long prefix_insert(PrefixStore *p, const uint64_t *h, size_t n, int pin);

/* Drop one unreferenced block (0 when resident and unreferenced, -1 when absent or referenced). */
int prefix_drop(PrefixStore *p, uint64_t hash);
/* Drop the least recently used unreferenced block (counted in st.evicted): 1, or 0 when every
 * resident block is referenced. */
int prefix_evict_lru(PrefixStore *p);
/* The sum of the resident blocks' reference counts (the walker compares it with the holders'). */
int64_t prefix_refs_total(const PrefixStore *p);

/* Block names waiting for their request (a turn read from the trace and not admitted yet), by the
 * request's id: a turn stays 64 bytes and its names follow it wherever it waits. Linear probing
 * with backward-shift deletion; every call O(1) expected. */
typedef struct PrefixNames {
    struct PrefixNamesSlot *slot;
    size_t n_slot, n;        /* n_slot a power of two (0 before the first put) */
} PrefixNames;
/* Keep a copy of h[0..n) under id (n > 0; id not present); -1 when out of memory. */
int pnames_put(PrefixNames *m, uint64_t id, const uint64_t *h, uint32_t n);
/* Take id's names (the caller owns and frees *h); 0 and *h NULL, *n 0 when id has none. */
int pnames_take(PrefixNames *m, uint64_t id, uint64_t **h, uint32_t *n);
/* Look at id's names without taking them: 1 and *h, *n set, or 0. */
int pnames_get(const PrefixNames *m, uint64_t id, const uint64_t **h, uint32_t *n);
void pnames_free(PrefixNames *m);

/* A block's owner: the session that saved it last, by hash (overwritten, never removed: a reader
 * checks the owner still has it). O(1) expected per call, memory O(distinct blocks saved). */
typedef struct PrefixOwners {
    uint64_t *key, *val;     /* key 0: empty (hashes are never 0) */
    size_t n_slot, n;
} PrefixOwners;
int powners_set(PrefixOwners *m, uint64_t hash, uint64_t owner); /* -1: out of memory */
int powners_get(const PrefixOwners *m, uint64_t hash, uint64_t *owner);  /* 1 found, 0 not */
void powners_free(PrefixOwners *m);

/* The walker's check of the invariants above; 0 when they hold, else -1 with a line in msg. */
int prefix_check(const PrefixStore *p, char *msg, size_t len);

#endif
