/* nameidx.h — a case-insensitive index of names: each name (compared as strcasecmp does, ASCII
 * letters without case) maps to a non-negative int, such as its entry's position in a catalog.
 *
 * Responsible for: the duplicate-name checks and name look-ups of catalogs of any size (hw.c,
 * model.c) in O(1) expected time per name instead of a scan of every earlier entry.
 * Not responsible for: owning the strings (the index keeps pointers: they must outlive it and not
 * change, except in case) or what a duplicate means (the caller's message).
 * Invariants: a name is found exactly when an equal name (ignoring case) was added; the first value
 * added for a name is kept; the table is never more than half full.
 * Complexity: add and find O(length of the name) expected (open addressing, linear probing, the
 * table doubled when half full); memory O(names).
 */
#ifndef KV_NAMEIDX_H
#define KV_NAMEIDX_H

#include <stddef.h>

typedef struct KvNameIdx {
    const char **key; /* [cap]: NULL for an empty slot */
    int *val;         /* [cap] */
    size_t cap, n;
} KvNameIdx;

/* An empty index with room for about `expect` names before it grows; -1 when out of memory. */
int kv_nameidx_init(KvNameIdx *x, size_t expect);
/* The value of the name equal to `name` ignoring case, or -1 (also for NULL). */
int kv_nameidx_find(const KvNameIdx *x, const char *name);
/* Add name -> val (val >= 0); a name already present keeps its first value. 0, or -1 when out of memory. */
int kv_nameidx_add(KvNameIdx *x, const char *name, int val);
void kv_nameidx_free(KvNameIdx *x);

#endif
