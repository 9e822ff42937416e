/* probe_bufs.c — the list of buffers a probe device handed out; see probe.h. */
#include <stdlib.h>
#include <string.h>

#include "calibrate/probe.h"

int probe_bufs_add(ProbeBufs *b, void *p, size_t bytes, KvErr *e)
{
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 16;
        void **nb = realloc(b->bufs, (size_t)nc * sizeof *nb);
        if (!nb) return kv_err(e, "probe: out of memory");
        b->bufs = nb;
        size_t *ns = realloc(b->sizes, (size_t)nc * sizeof *ns);
        if (!ns) return kv_err(e, "probe: out of memory");
        b->sizes = ns;
        b->cap = nc;
    }
    b->bufs[b->n] = p;
    b->sizes[b->n++] = bytes;
    return 0;
}

int probe_bufs_remove(ProbeBufs *b, void *p, size_t *bytes)
{
    for (int i = 0; i < b->n; i++)
        if (b->bufs[i] == p) {
            if (bytes) *bytes = b->sizes[i];
            b->bufs[i] = b->bufs[b->n - 1];
            b->sizes[i] = b->sizes[b->n - 1];
            b->n--;
            return 1;
        }
    return 0;
}

void probe_bufs_free(ProbeBufs *b)
{
    free(b->bufs);
    free(b->sizes);
    memset(b, 0, sizeof *b);
}
