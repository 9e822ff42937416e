/* blockhash.h — the name of a KV block: a 64-bit hash chained on the block before it.
 *
 * Responsible for: kv_block_hash(parent, content): equal chains of contents give equal hashes, a
 * shared prefix gives shared leading hashes and nothing after the first difference is shared (vLLM's
 * automatic prefix caching names blocks this way; Mooncake's traces give such names as hash_ids).
 * Never 0: 0 is "no parent" for a chain's first block and "no block" to the stores.
 * Not responsible for: what a content id is (the trace readers decide: a Mooncake hash id, a shared
 * prompt's group and block index).
 */
#ifndef KV_BLOCKHASH_H
#define KV_BLOCKHASH_H

#include <stdint.h>

/* splitmix64's finaliser: a full-avalanche 64-bit mix */
static inline uint64_t kv_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t kv_block_hash(uint64_t parent, uint64_t content)
{
    uint64_t h = kv_mix64(parent * 0x9E3779B97F4A7C15ull ^ kv_mix64(content + 0x632BE59BD9B4E019ull));
    return h ? h : 1;
}

#endif
