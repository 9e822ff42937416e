/* memdev.h — the memory-device tiers: host-attached memory behind a link of its own (a CXL 2.0
 * Type 3 expander), between host DRAM and the SSD array, one row each.
 *
 * A row is the whole definition of such a tier; everything else is made from the rows: the tier
 * (policies/policy.h: TIER_ID, its name), its channel (sim/engine/sim.h: CH_ID; summary.json's
 * bytes.KEY_read / KEY_write and utilisation.KEY), its catalog section of modules (sim/catalog/hw.c:
 * "KEY": [{name, read, write, latency, capacity, basis, source, ...}]) and a platform's "KEY" and
 * "n_KEY", the settings KEY and n_KEY (sim/engine/config.c), `kvsim list KEY`, the stores that
 * contain it, restore_from.KEY and the metric table's per-tier rows. Its modules are interleaved:
 * n modules read and write at n times one module's rates and hold n times its capacity.
 *
 * X(ID, KEY, WHAT, WHATS): ID the enum suffix; KEY the name everywhere (a string literal); WHAT
 * and WHATS one module and several, in messages and `kvsim list`. Rows in the order the tiers are
 * listed, right after host DRAM. */
#ifndef KVSIM_MEMDEV_H
#define KVSIM_MEMDEV_H

#define KV_MEMDEV_ROWS(X) X(CXL, "cxl", "CXL memory module", "CXL memory modules")

/* MEMDEV_ID: a row's index (HwCatalog.memdevs, PlatformSpec.memdev, SimConfig.memdev) */
#define KV_MEMDEV_INDEX_(ID, KEY, WHAT, WHATS) MEMDEV_##ID,
enum { KV_MEMDEV_ROWS(KV_MEMDEV_INDEX_) KV_MEMDEVS };

/* each row's key, what and whats by index */
typedef struct KvMemdevRow {
    const char *key, *what, *whats;
} KvMemdevRow;
#define KV_MEMDEV_ROW_(ID, KEY, WHAT, WHATS) [MEMDEV_##ID] = {KEY, WHAT, WHATS},
static inline const KvMemdevRow *kv_memdev_row(int m)
{
    static const KvMemdevRow rows[KV_MEMDEVS] = {KV_MEMDEV_ROWS(KV_MEMDEV_ROW_)};
    return &rows[m];
}

#endif
