/* config_resolve.c — a configuration resolved against the catalogs: the catalogs opened with their
 * overlays, the platform's parts replaced by the gpu / host_link / ssd / cxl settings, every
 * "platform" or "profile" value made concrete (GPUs per replica, engine overhead, the SSD array, CXL
 * memory, the NIC, store=auto, DRAM, context, cost device, attention stack) and the store's tiers
 * checked against the parts there are. The settings table itself is config.c's. */
#include <string.h>

#include "sim/engine/sim.h"

int sim_config_resolve(SimConfig *out, const SimConfig *in, const HwCatalog *hw, const PlatformSpec *p,
                       const ModelSpec *m, const NicSpec **nic, KvErr *e)
{
    if (out != in) memcpy(out, in, sizeof *out);
    *nic = NULL;
    /* a replica is one host (DESIGN §4: DRAM, SSD array and NIC per replica): its GPUs are one node's */
    int64_t gpus = (int64_t)in->tp * in->pp;
    if (gpus > p->gpus_per_node)
        return kv_err(e, "tp %d × pp %d = %lld GPUs per replica, but platform %s has %d GPUs per node "
                      "(allowed tp × pp <= %d; a replica runs on one node, each replica on its own)",
                      in->tp, in->pp, (long long)gpus, p->name, p->gpus_per_node, p->gpus_per_node);
    if (!out->gpu[0]) snprintf(out->gpu, sizeof out->gpu, "%s", hw->gpus[p->gpu].name);
    if (!out->host_link[0]) snprintf(out->host_link, sizeof out->host_link, "%s", hw->links[p->link].name);
    if (out->iter_overhead_ns < 0) out->iter_overhead_ns = sim_engine_overhead_ns(out->engine);
    if (out->n_ssd < 0) out->n_ssd = p->ssd >= 0 ? p->n_ssd : 0;
    if (out->n_ssd > 0 && p->ssd < 0 && hw->n_ssds == 0)
        return kv_err(e, "n_ssd: %d SSDs, but the hardware catalog has no SSD", out->n_ssd);
    /* the drive the engine uses: the platform's, else the catalog's first (sim_setup) */
    if (!out->ssd[0] && out->n_ssd > 0) snprintf(out->ssd, sizeof out->ssd, "%s", hw->ssds[p->ssd >= 0 ? p->ssd : 0].name);
    if (!out->ssd[0] && p->ssd >= 0) snprintf(out->ssd, sizeof out->ssd, "%s", hw->ssds[p->ssd].name);
    for (int d = 0; d < KV_MEMDEVS; d++) {
        const KvMemdevRow *row = kv_memdev_row(d);
        int *n = &out->n_memdev[d];
        char *name = out->memdev[d];
        if (*n < 0) *n = p->memdev[d] >= 0 ? p->n_memdev[d] : 0;
        if (*n > 0 && p->memdev[d] < 0 && hw->n_memdevs[d] == 0)
            return kv_err(e, "n_%s: %d modules, but the hardware catalog has no %s", row->key, *n, row->whats);
        /* the module the engine uses: the platform's, else the catalog's first (sim_setup) */
        if (!name[0] && *n > 0) snprintf(name, sizeof out->memdev[d], "%s", hw->memdevs[d][p->memdev[d] >= 0 ? p->memdev[d] : 0].name);
        if (!name[0] && p->memdev[d] >= 0) snprintf(name, sizeof out->memdev[d], "%s", hw->memdevs[d][p->memdev[d]].name);
    }
    if (!out->nic[0]) {
        if (p->nic >= 0) snprintf(out->nic, sizeof out->nic, "%s", hw->nics[p->nic].name);
        else snprintf(out->nic, sizeof out->nic, "none");
    }
    if (strcmp(out->nic, "none") != 0) {
        if (!(*nic = hw_find_nic(hw, out->nic, e))) return kv_err_prefix(e, "nic: ");
        snprintf(out->nic, sizeof out->nic, "%s", (*nic)->name);
    }
    if (out->store == SIM_STORE_AUTO) { /* DRAM, then the SSD array if any, else the remote store if any */
        Tier chain[2] = {TIER_DRAM, out->n_ssd > 0 ? TIER_SSD : TIER_REMOTE};
        out->store = sim_store_of(chain, out->n_ssd > 0 || *nic ? 2 : 1);
    }
    if (sim_store_has(out->store, TIER_SSD) && out->n_ssd == 0)
        return kv_err(e, "store: %s, but platform %s has no SSD (set n_ssd)", sim_store_name(out->store), p->name);
    for (int d = 0; d < KV_MEMDEVS; d++)
        if (sim_store_has(out->store, tier_of_memdev(d)) && out->n_memdev[d] == 0)
            return kv_err(e, "store: %s, but platform %s has no %s (set n_%s, and %s for a module other than the catalog's first)",
                          sim_store_name(out->store), p->name, kv_memdev_row(d)->whats, kv_memdev_row(d)->key, kv_memdev_row(d)->key);
    if (sim_store_has(out->store, TIER_REMOTE) && !*nic)
        return kv_err(e, "store: %s, but platform %s has no NIC to a remote store (set nic)", sim_store_name(out->store), p->name);
    if (out->dram_bytes == 0) out->dram_bytes = p->dram_bytes;
    if (out->max_context == 0) out->max_context = m->max_pos;
    if (!out->cost_device[0]) snprintf(out->cost_device, sizeof out->cost_device, "%s", hw->gpus[p->gpu].name);
    if (spec_stack_check(&hw->gpus[p->gpu], out->stack, e) != 0) return -1;
    out->stack = spec_stack_resolve(&hw->gpus[p->gpu], out->stack);
    return 0;
}

int sim_catalogs_open(const SimConfig *c, ModelCatalog *mc, HwCatalog *hw, KvErr *e)
{
    memset(hw, 0, sizeof *hw);
    if (model_catalog_load(mc, NULL, e) != 0) return -1;
    if ((c->models_overlay[0] && model_catalog_overlay_file(mc, c->models_overlay, e) != 0) ||
        hw_catalog_load(hw, NULL, e) != 0 ||
        (c->hardware_overlay[0] && hw_catalog_overlay_file(hw, c->hardware_overlay, e) != 0)) {
        model_catalog_free(mc);
        hw_catalog_free(hw);
        return -1;
    }
    return 0;
}

int sim_config_apply_parts(const SimConfig *c, HwCatalog *hw, const PlatformSpec *p, KvErr *e)
{
    PlatformSpec *q = &hw->platforms[p - hw->platforms];
    if (c->gpu[0]) {
        const GpuSpec *g = hw_find_gpu(hw, c->gpu, e);
        if (!g) return kv_err_prefix(e, "gpu: ");
        q->gpu = (int)(g - hw->gpus);
    }
    if (c->host_link[0]) {
        const LinkSpec *l = hw_find_link(hw, c->host_link, e);
        if (!l) return kv_err_prefix(e, "host_link: ");
        q->link = (int)(l - hw->links);
    }
    if (c->ssd[0]) {
        const SsdSpec *d = hw_find_ssd(hw, c->ssd, e);
        if (!d) return kv_err_prefix(e, "ssd: ");
        if (q->ssd < 0 && c->n_ssd < 0)
            return kv_err(e, "ssd: %s, but platform %s has no SSD array to take its place (set n_ssd too)", d->name, q->name);
        q->ssd = (int)(d - hw->ssds);
    }
    for (int m = 0; m < KV_MEMDEVS; m++) {
        if (!c->memdev[m][0]) continue;
        const char *key = kv_memdev_row(m)->key;
        const MemdevSpec *x = hw_find_memdev(hw, m, c->memdev[m], e);
        if (!x) return kv_err_prefix(e, "%s: ", key);
        if (q->memdev[m] < 0 && c->n_memdev[m] < 0)
            return kv_err(e, "%s: %s, but platform %s has no %s to take its place (set n_%s too)", key, x->name, q->name,
                          kv_memdev_row(m)->whats, key);
        q->memdev[m] = (int)(x - hw->memdevs[m]);
    }
    return 0;
}
