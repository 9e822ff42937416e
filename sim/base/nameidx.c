/* nameidx.c — see nameidx.h. */
#include "sim/base/nameidx.h"

#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

/* FNV-1a over the bytes folded to lower case as strcasecmp folds them (ASCII letters only) */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        h = (h ^ c) * 1099511628211ULL;
    }
    return h;
}

static int table_alloc(KvNameIdx *x, size_t cap)
{
    x->key = calloc(cap, sizeof *x->key);
    x->val = calloc(cap, sizeof *x->val);
    if (!x->key || !x->val) {
        free(x->key);
        free(x->val);
        x->key = NULL;
        x->val = NULL;
        return -1;
    }
    x->cap = cap;
    return 0;
}

int kv_nameidx_init(KvNameIdx *x, size_t expect)
{
    x->n = 0;
    size_t cap = 16;
    while (cap < 2 * expect + 2) cap *= 2;
    return table_alloc(x, cap);
}

/* the slot holding name, or the empty slot where it would go */
static size_t slot_of(const KvNameIdx *x, const char *name)
{
    size_t mask = x->cap - 1, i = (size_t)name_hash(name) & mask;
    while (x->key[i] && strcasecmp(x->key[i], name) != 0) i = (i + 1) & mask;
    return i;
}

int kv_nameidx_find(const KvNameIdx *x, const char *name)
{
    if (!name || !x->cap) return -1;
    size_t i = slot_of(x, name);
    return x->key[i] ? x->val[i] : -1;
}

int kv_nameidx_add(KvNameIdx *x, const char *name, int val)
{
    if (!name || !x->cap) return -1;
    size_t i = slot_of(x, name);
    if (x->key[i]) return 0; /* (the first value stays) */
    if (2 * (x->n + 1) > x->cap) {
        KvNameIdx old = *x;
        if (table_alloc(x, old.cap * 2) != 0) {
            *x = old;
            return -1;
        }
        for (size_t k = 0; k < old.cap; k++)
            if (old.key[k]) {
                size_t j = slot_of(x, old.key[k]);
                x->key[j] = old.key[k];
                x->val[j] = old.val[k];
            }
        free(old.key);
        free(old.val);
        i = slot_of(x, name);
    }
    x->key[i] = name;
    x->val[i] = val;
    x->n++;
    return 0;
}

void kv_nameidx_free(KvNameIdx *x)
{
    free(x->key);
    free(x->val);
    x->key = NULL;
    x->val = NULL;
    x->cap = x->n = 0;
}
