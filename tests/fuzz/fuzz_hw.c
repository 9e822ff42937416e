/* fuzz_hw.c — libFuzzer harness: the hardware catalog (sim/catalog/hw.c) on arbitrary JSON text.
 * A catalog that parses must keep hw.h's invariants (references resolve, rates in range). */
#include "sim/catalog/hw.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    HwCatalog c;
    KvErr e = {{0}};
    if (hw_catalog_parse(&c, text, "fuzz.json", &e) != 0) {
        if (!e.msg[0] || c.gpus || c.links || c.ssds || c.nics || c.platforms) abort();
        free(text);
        return 0;
    }
    for (int i = 0; i < c.n_gpus; i++) {
        const GpuSpec *g = &c.gpus[i];
        if (!(g->fp16_flops > 0) || !(g->mem_bw_bytes_per_s > 0) || g->mem_bytes == 0) abort();
        if (hw_find_gpu(&c, g->name, &e) != g || hw_find_link(&c, g->pcie, &e) == NULL) abort();
    }
    for (int i = 0; i < c.n_links; i++)
        if (!(c.links[i].h2d_bytes_per_s > 0) || !(c.links[i].d2h_bidir_bytes_per_s > 0) || c.links[i].latency_ns < 0) abort();
    for (int i = 0; i < c.n_platforms; i++) {
        const PlatformSpec *p = &c.platforms[i];
        if (p->gpu < 0 || p->gpu >= c.n_gpus || p->link < 0 || p->link >= c.n_links) abort();
        if (p->ssd >= c.n_ssds || p->nic >= c.n_nics || (p->ssd >= 0 && p->n_ssd < 1)) abort();
        if (hw_find_platform(&c, p->name, &e) != p) abort();
    }
    (void)hw_find_nic(&c, "no such nic", &e);
    hw_catalog_free(&c);
    free(text);
    return 0;
}
