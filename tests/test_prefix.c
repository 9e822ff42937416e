/* test_prefix.c — prefix.c, the content-addressed block store: chained hashes, the longest resident
 * prefix, references, vLLM's tail-first LRU eviction, deduplication, and a randomised run against a
 * plain model of the same rules (every operation, then the store's own invariant check). */
#include <stdint.h>
#include <string.h>

#include "tests/harness.h"
#include "sim/base/blockhash.h"
#include "sim/engine/prefix.h"

/* the chain of n blocks of content group g (block k's content g * 1000 + k), from the start */
static void chain(uint64_t *h, size_t n, uint64_t g)
{
    uint64_t parent = 0;
    for (size_t k = 0; k < n; k++) h[k] = parent = kv_block_hash(parent, g * 1000 + k);
}

static int ok(const PrefixStore *p)
{
    char msg[200];
    int rc = prefix_check(p, msg, sizeof msg);
    if (rc) fprintf(stderr, "%s\n", msg);
    return rc == 0;
}

TEST(block_hash_chain_shares_leading_hashes_only)
{
    uint64_t a[4], b[4];
    chain(a, 4, 1);
    chain(b, 4, 1);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* a different second block: the first hash is shared, every later one differs */
    b[1] = kv_block_hash(b[0], 7777);
    b[2] = kv_block_hash(b[1], 1002);
    CHECK(a[0] == b[0] && a[1] != b[1] && a[2] != b[2]);
    /* the same content after a different parent is a different block */
    CHECK(kv_block_hash(1, 5) != kv_block_hash(2, 5));
    for (int k = 0; k < 4; k++) CHECK(a[k] != 0);
}

TEST(prefix_match_insert_and_dedup)
{
    PrefixStore p;
    prefix_init(&p, 0);
    uint64_t a[6], b[6];
    chain(a, 6, 1);
    chain(b, 6, 1);
    b[4] = kv_block_hash(b[3], 99); /* b shares a's first four blocks */
    b[5] = kv_block_hash(b[4], 100);
    CHECK_EQ_U(prefix_match(&p, a, 6), 0);
    CHECK_EQ_I(prefix_insert(&p, a, 6, 0), 6);
    CHECK_EQ_U(prefix_match(&p, a, 6), 6);
    CHECK_EQ_U(prefix_match(&p, b, 6), 4);
    CHECK_EQ_I(prefix_insert(&p, b, 6, 0), 6);
    CHECK_EQ_I(p.n_blocks, 8);       /* the shared four stored once */
    CHECK_EQ_I(p.st.inserted, 8);
    CHECK_EQ_I(p.st.deduplicated, 4);
    CHECK_EQ_I(p.n_lru, 8);
    CHECK(ok(&p));
    /* a lookup counts the blocks found and the first one missing */
    PrefixStats before = p.st;
    uint64_t c[3];
    chain(c, 3, 2);
    CHECK_EQ_U(prefix_match(&p, c, 3), 0);
    CHECK_EQ_I(p.st.lookups - before.lookups, 1);
    CHECK_EQ_I(p.st.hits - before.hits, 0);
    prefix_free(&p);
}

TEST(prefix_references_hold_blocks_and_tail_goes_first)
{
    /* room for 4 blocks: a chain of 4 fills it; a second chain of 2 must evict 2 of the first's,
     * its last two (released tail first), so the first chain still matches its first 2 */
    PrefixStore p;
    prefix_init(&p, 4);
    uint64_t a[4], b[2];
    chain(a, 4, 1);
    chain(b, 2, 2);
    CHECK_EQ_I(prefix_insert(&p, a, 4, 1), 4); /* pinned: a request is using them */
    CHECK_EQ_I(p.n_lru, 0);
    CHECK_EQ_I(prefix_insert(&p, b, 2, 0), 0); /* full of referenced blocks: refused, nothing evicted */
    CHECK_EQ_I(p.st.refused, 1);
    CHECK_EQ_I(p.st.evicted, 0);
    prefix_release(&p, a, 4);
    CHECK_EQ_I(p.n_lru, 4);
    CHECK_EQ_I(prefix_insert(&p, b, 2, 0), 2);
    CHECK_EQ_I(p.st.evicted, 2);
    CHECK(prefix_has(&p, a[0]) && prefix_has(&p, a[1]) && !prefix_has(&p, a[2]) && !prefix_has(&p, a[3]));
    CHECK_EQ_U(prefix_match(&p, a, 4), 2);
    CHECK(ok(&p));
    /* a referenced block cannot be dropped; an unreferenced one can */
    prefix_acquire(&p, a, 2);
    CHECK_EQ_I(prefix_drop(&p, a[0]), -1);
    prefix_release(&p, a, 2);
    CHECK_EQ_I(prefix_drop(&p, a[0]), 0);
    CHECK_EQ_I(prefix_drop(&p, a[0]), -1);
    CHECK(ok(&p));
    prefix_free(&p);
}

TEST(prefix_lru_textbook_sequences)
{
    /* prefixes of 3 blocks each, one request at a time (insert = compute and keep, unpinned after):
     * room for two prefixes: A B A B A hits from the third request on; room for two with three
     * prefixes cycling A B C A B C: LRU misses every time (each evicts the next one needed) */
    uint64_t pre[3][3];
    for (int g = 0; g < 3; g++) chain(pre[g], 3, (uint64_t)g + 1);
    static const int seq_ab[] = {0, 1, 0, 1, 0};
    static const int seq_abc[] = {0, 1, 2, 0, 1, 2};
    PrefixStore p;
    prefix_init(&p, 6);
    int hits = 0;
    for (int i = 0; i < 5; i++) {
        size_t m = prefix_match(&p, pre[seq_ab[i]], 3);
        CHECK_EQ_U(m, i < 2 ? 0 : 3);
        hits += m == 3;
        CHECK_EQ_I(prefix_insert(&p, pre[seq_ab[i]], 3, 0), 3);
    }
    CHECK_EQ_I(hits, 3);
    prefix_free(&p);
    prefix_init(&p, 6);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_U(prefix_match(&p, pre[seq_abc[i]], 3), 0);
        CHECK_EQ_I(prefix_insert(&p, pre[seq_abc[i]], 3, 0), 3);
    }
    CHECK_EQ_I(p.st.evicted, 12); /* the last four requests each evicted a whole prefix */
    CHECK(ok(&p));
    prefix_free(&p);
}

/* a plain model: an array of (hash, refs, last use); eviction takes the unreferenced block with the
 * oldest last use, ties (blocks released together) broken toward the chain's tail */
typedef struct ModelBlock {
    uint64_t h;
    int refs;
    int64_t used; /* release order stamp: larger = more recent */
} ModelBlock;

TEST(prefix_random_operations_agree_with_a_plain_model)
{
    enum { CAP = 24, CHAINS = 12, LEN = 6, STEPS = 20000, MAXB = 64 };
    uint64_t ch[CHAINS][LEN];
    for (int g = 0; g < CHAINS; g++) {
        chain(ch[g], LEN, (uint64_t)g % 4); /* groups of chains share content: deduplication */
        if (g >= 4) /* later chains branch off their group's at block g % LEN */
            for (int k = g % LEN; k < LEN; k++) ch[g][k] = kv_block_hash(k ? ch[g][k - 1] : 0, (uint64_t)(g * 100 + k));
    }
    PrefixStore p;
    prefix_init(&p, CAP);
    ModelBlock m[MAXB];
    int nm = 0;
    int64_t stamp = 0;
    int held[CHAINS] = {0}; /* chains pinned (by how many), with their pinned length */
    size_t held_len[CHAINS][8];
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int g = (int)(x % CHAINS);
        size_t n = (size_t)(1 + (x >> 8) % LEN);
        int op = (int)((x >> 16) % 4);
        if (op == 3 && held[g] > 0) { /* release the latest pin of g */
            size_t k = held_len[g][--held[g]];
            prefix_release(&p, ch[g], k);
            for (size_t b = k; b-- > 0;)
                for (int i = 0; i < nm; i++)
                    if (m[i].h == ch[g][b] && --m[i].refs == 0) m[i].used = ++stamp;
            continue;
        }
        int pin = op == 1 && held[g] < 8;
        /* the model's insert: in order, dedup, evict the least recently used unreferenced */
        size_t done = 0;
        int pinned_now[LEN] = {0};
        for (; done < n; done++) {
            int f = -1;
            for (int i = 0; i < nm; i++)
                if (m[i].h == ch[g][done]) f = i;
            if (f < 0) {
                if (nm >= CAP) {
                    int v = -1;
                    for (int i = 0; i < nm; i++)
                        if (m[i].refs == 0 && (v < 0 || m[i].used < m[v].used)) v = i;
                    if (v < 0) break;
                    m[v] = m[--nm];
                }
                f = nm++;
                m[f] = (ModelBlock){ch[g][done], 0, 0};
            }
            m[f].refs++;
            pinned_now[done] = 1;
        }
        long got = prefix_insert(&p, ch[g], n, pin);
        CHECK_EQ_I(got, (long)done);
        if (pin) {
            held_len[g][held[g]++] = done;
        } else {
            for (size_t b = done; b-- > 0;)
                for (int i = 0; i < nm; i++)
                    if (pinned_now[b] && m[i].h == ch[g][b] && --m[i].refs == 0) m[i].used = ++stamp;
        }
        CHECK_EQ_I(p.n_blocks, nm);
        for (int i = 0; i < nm; i++) CHECK(prefix_has(&p, m[i].h));
        if (step % 1000 == 0) CHECK(ok(&p));
    }
    CHECK(ok(&p));
    CHECK(p.st.evicted > 0 && p.st.deduplicated > 0 && p.st.refused > 0);
    prefix_free(&p);
}
