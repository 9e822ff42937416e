/* resfile.c — SimResult records for worker processes; see resfile.h.
 *
 * Layout: "KVRES001" | u64 sizeof(SimResult) | the struct's bytes (its histogram pointers are
 * meaningless to the reader and replaced) | per histogram, in hists() order: u32 non-zero
 * buckets | (u32 index, u64 count) each.
 */
#include "results/resfile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char k_magic[8] = {'K', 'V', 'R', 'E', 'S', '0', '0', '1'};
#define N_HISTS (7 + 2 * SIM_CLASSES)

static void hists(SimResult *r, Hist **h)
{
    int n = 0;
    h[n++] = &r->ttft;
    h[n++] = &r->queue;
    h[n++] = &r->restore;
    h[n++] = &r->prefill;
    h[n++] = &r->tbt;
    h[n++] = &r->lb_ratio;
    h[n++] = &r->e2e;
    for (int c = 0; c < SIM_CLASSES; c++) {
        h[n++] = &r->cls[c].ttft;
        h[n++] = &r->cls[c].restore;
    }
}

int resfile_write(FILE *f, const SimResult *r, KvErr *e)
{
    uint64_t size = sizeof *r;
    if (fwrite(k_magic, 1, sizeof k_magic, f) != sizeof k_magic || fwrite(&size, sizeof size, 1, f) != 1 ||
        fwrite(r, sizeof *r, 1, f) != 1)
        return kv_err(e, "result record: write failed");
    Hist *h[N_HISTS];
    hists((SimResult *)r, h); /* read only */
    for (int i = 0; i < N_HISTS; i++) {
        uint32_t nz = 0;
        for (uint32_t b = 0; h[i]->b && b < HIST_BUCKETS; b++) nz += h[i]->b[b] != 0;
        if (fwrite(&nz, sizeof nz, 1, f) != 1) return kv_err(e, "result record: write failed");
        for (uint32_t b = 0; h[i]->b && b < HIST_BUCKETS; b++)
            if (h[i]->b[b] && (fwrite(&b, sizeof b, 1, f) != 1 || fwrite(&h[i]->b[b], sizeof h[i]->b[b], 1, f) != 1))
                return kv_err(e, "result record: write failed");
    }
    return ferror(f) ? kv_err(e, "result record: write failed") : 0;
}

int resfile_read(FILE *f, const char *origin, SimResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    char magic[8];
    uint64_t size = 0;
    if (fread(magic, 1, sizeof magic, f) != sizeof magic || memcmp(magic, k_magic, sizeof magic) != 0 ||
        fread(&size, sizeof size, 1, f) != 1 || size != sizeof *r)
        return kv_err(e, "%s: not a result record of this build (magic or size differs)", origin);
    SimResult tmp;
    if (fread(&tmp, sizeof tmp, 1, f) != 1) return kv_err(e, "%s: result record truncated", origin);
    Hist *h[N_HISTS];
    hists(&tmp, h);
    for (int i = 0; i < N_HISTS; i++) h[i]->b = NULL;
    for (int i = 0; i < N_HISTS; i++) {
        uint32_t nz;
        if (fread(&nz, sizeof nz, 1, f) != 1 || nz > HIST_BUCKETS) goto bad;
        if (nz == 0) continue;
        h[i]->b = calloc(HIST_BUCKETS, sizeof *h[i]->b);
        if (!h[i]->b) {
            sim_result_free(&tmp);
            return kv_err(e, "%s: out of memory", origin);
        }
        for (uint32_t j = 0; j < nz; j++) {
            uint32_t b;
            uint64_t c;
            if (fread(&b, sizeof b, 1, f) != 1 || fread(&c, sizeof c, 1, f) != 1 || b >= HIST_BUCKETS) goto bad;
            h[i]->b[b] = c;
        }
        if (!hist_valid(h[i])) {
            sim_result_free(&tmp);
            return kv_err(e, "%s: histogram %d inconsistent (its counts do not sum to n or lie outside [min, max])", origin, i);
        }
    }
    *r = tmp;
    return 0;
bad:
    sim_result_free(&tmp);
    return kv_err(e, "%s: result record truncated or corrupt", origin);
}
