/* hw.h — the hardware catalog (configs/hardware.json): GPUs, host links, SSDs, NICs, and named
 * platforms composing them. Every bandwidth, size and latency in the file carries its unit
 * (units.h); here everything is in bytes, bytes per second and nanoseconds.
 *
 * Not responsible for: costs of ops (spec.c derives them), simulated state (sim/cluster).
 * Invariants after a successful load: every platform's references resolve; rates > 0; sizes > 0;
 * every number inside its plausible range (hw.c: R_* — e.g. host links 10 MB/s..10 TB/s, latencies
 * 0..1 s, FLOP/s 100 G..100 P), refused otherwise with the key, the value and the range.
 * Exceptions, all meaning "none": GpuSpec.fp8_flops, gpu_link_bytes_per_s and sm_count may be 0;
 * PlatformSpec.dram_bytes 0 = no DRAM tier, remote_bytes 0 = unlimited, ssd/nic/memdev[m] -1 = absent
 * (then n_ssd = 0 and stripe_chunk_bytes = 0; n_memdev[m] = 0). Names are unique per section, compared without
 * case; GpuSpec.pcie holds the canonical name of an existing link. Every entry has a source, and
 * every GPU, link, SSD and NIC a basis (which numbers are vendor_spec/measured/derived/estimate).
 *
 * File format (configs/hardware.json), one object: {"about": "...", "gpus": [...], "links": [...],
 * "ssds": [...], "nics": [...], "cxl": [...], "platforms": [...]}; a missing section is empty; unknown or
 * repeated keys are refused. Quantities are strings with units; a few are plain numbers.
 *  gpus:  name, full_name, fp16, fp8?, fp32 (FLOP/s), mem (size), mem_bw, gpu_link? (rate),
 *         sm_count? (integer), pcie (link name), basis, source, note?
 *  links: name, theoretical, h2d, d2h, h2d_bidir, d2h_bidir (rates), pageable_factor (number in
 *         (0,1]), latency (duration), basis, source, note?
 *  ssds:  name, full_name?, read, write (rates), read_latency, write_latency (durations),
 *         capacity (size), read_iops?, dwpd?, warranty_years?, mixed_efficiency? (numbers), basis,
 *         source, note?
 *  nics:  name, line, effective (rates, effective <= line), latency (duration), basis, source, note?
 *  cxl:   (one section per memory device, sim/base/memdev.h: its KEY) name, full_name?, read,
 *         write (rates, one module), latency (duration), capacity (size, one module), basis, source, note?
 *  platforms: name, description, gpu, gpus_per_node, link, ssd?, n_ssd?, stripe_chunk?, dram,
 *         dram_bw?, nic?, remote?, cxl?, n_cxl? (per memory device: KEY?, n_KEY?), source, note?
 *         (? = optional; null counts as absent)
 */
#ifndef KV_HW_H
#define KV_HW_H

#include <stdint.h>

#include "sim/base/memdev.h"
#include "sim/base/util.h"

typedef struct GpuSpec {
    char name[64];             /* catalog key, e.g. "A100-40GB", "H100-SXM", "H200" */
    char full_name[128];       /* e.g. "NVIDIA H200 SXM 141GB" */
    double fp16_flops;         /* dense FP16/BF16 tensor FLOP/s */
    double fp8_flops;          /* 0 when unsupported */
    double fp32_flops;         /* non-tensor */
    uint64_t mem_bytes;        /* HBM capacity */
    double mem_bw_bytes_per_s; /* HBM bandwidth */
    double gpu_link_bytes_per_s; /* NVLink (per direction) between GPUs of a node; 0: over PCIe */
    int sm_count;              /* 0 if unknown */
    char pcie[16];             /* default host link name, e.g. "pcie4" */
    char source[512];
    char basis[512];           /* which values are vendor_spec / measured / derived / estimate */
    char note[512];            /* "" when none */
} GpuSpec;

typedef struct LinkSpec {
    char name[64];             /* e.g. "pcie4", "pcie5" */
    double theoretical_bytes_per_s; /* per direction */
    double h2d_bytes_per_s;    /* measured pinned, one way */
    double d2h_bytes_per_s;
    double h2d_bidir_bytes_per_s; /* H2D while D2H is busy (the both-ways penalty) */
    double d2h_bidir_bytes_per_s;
    double pageable_factor;    /* pageable / pinned bandwidth ratio */
    int64_t latency_ns;        /* per transfer setup */
    char source[512];
    char basis[512];
    char note[512];
} LinkSpec;

typedef struct SsdSpec {
    char name[64];
    double read_bytes_per_s;   /* sequential, one drive */
    double write_bytes_per_s;
    int64_t read_latency_ns;   /* per IO at low queue depth */
    int64_t write_latency_ns;
    uint64_t capacity_bytes;
    double read_iops;          /* 4 KiB random, 0 if unknown */
    double dwpd;               /* rated endurance: drive writes per day over the warranty (0: not rated) */
    double warranty_years;     /* the period dwpd is rated over (0: not rated) */
    double mixed_efficiency;   /* in (0, 1]: the drive's throughput while reads and writes are both under way, as a
                                * share of what taking turns at the read and write rates would give (0: not given,
                                * taking turns) */
    char source[512];
    char basis[512];
    char note[512];
    char full_name[128];       /* e.g. "Samsung PM9A3 U.2 7.68 TB"; "" when not given */
} SsdSpec;

/* A module of a memory device (sim/base/memdev.h: a CXL 2.0 Type 3 expander): host-attached memory
 * behind its own link, a tier between host DRAM and the SSD array. */
typedef struct MemdevSpec {
    char name[64];
    double read_bytes_per_s;   /* one module */
    double write_bytes_per_s;
    int64_t latency_ns;        /* per transfer, reads and writes */
    uint64_t capacity_bytes;   /* one module */
    char source[512];
    char basis[512];
    char note[512];
    char full_name[128];
} MemdevSpec;

typedef struct NicSpec {
    char name[64];             /* e.g. "10GbE", "100G-IB" */
    double line_bytes_per_s;
    double bytes_per_s;        /* effective (measured or estimated goodput) */
    int64_t latency_ns;
    char source[512];
    char basis[512];
    char note[512];
} NicSpec;

typedef struct PlatformSpec {
    char name[64];             /* e.g. "hcache-a100", "cacheflow-h100-10g", "h200" */
    char description[256];
    int gpu;                   /* index into HwCatalog.gpus */
    int gpus_per_node;
    int link;                  /* index into links */
    int ssd;                   /* index into ssds, -1 when no SSD array */
    int n_ssd;
    uint64_t stripe_chunk_bytes;
    uint64_t dram_bytes;       /* host DRAM available as a KV/hidden-state tier */
    double dram_bytes_per_s;   /* host memory copy bandwidth (0: not limiting) */
    int nic;                   /* index into nics, -1 when no remote store */
    uint64_t remote_bytes;     /* remote store capacity (0: unlimited when nic >= 0) */
    int memdev[KV_MEMDEVS];    /* per memory device: index into memdevs[m], -1 when none */
    int n_memdev[KV_MEMDEVS];  /* its modules (0 without) */
    char source[512];          /* which paper/setup it reproduces */
    char note[512];            /* "" when none */
} PlatformSpec;

typedef struct HwCatalog {
    GpuSpec *gpus;
    int n_gpus;
    LinkSpec *links;
    int n_links;
    SsdSpec *ssds;
    int n_ssds;
    NicSpec *nics;
    int n_nics;
    MemdevSpec *memdevs[KV_MEMDEVS]; /* per memory device (sim/base/memdev.h), its section of modules */
    int n_memdevs[KV_MEMDEVS];
    PlatformSpec *platforms;
    int n_platforms;
    char origin[512];
} HwCatalog;

/* Parse from JSON text; errors name origin and the JSON path ("configs/hardware.json:
 * gpus[2].mem: expected a size with a unit such as \"80 GB\", got \"80\""). */
int hw_catalog_parse(HwCatalog *c, const char *json_text, const char *origin, KvErr *e);
/* Load from override path, $KVSIM_CONFIG_DIR/hardware.json or the embedded default. */
int hw_catalog_load(HwCatalog *c, const char *override_path, KvErr *e);
/* Lay an overlay (same format, every section optional; `kvsim --hardware FILE`) over c: an entry
 * whose name (without case) is already in its section replaces that entry whole (a base platform
 * that referred to a replaced GPU, link, SSD or NIC now gets the overlay's), the others are added.
 * Every overlay entry is validated as in a catalog (fields, plausible ranges, relations), its
 * platforms' references are resolved against the merged catalog; messages name the overlay's
 * origin and its own JSON path ("mybox.json: gpus[0].mem: ..."). On failure c is unchanged.
 * c->origin becomes "BASE + OVERLAY". */
int hw_catalog_overlay(HwCatalog *c, const char *json_text, const char *origin, KvErr *e);
int hw_catalog_overlay_file(HwCatalog *c, const char *path, KvErr *e);
void hw_catalog_free(HwCatalog *c);

/* Lookups by name, case-insensitive; on failure the message lists every known name. */
const GpuSpec *hw_find_gpu(const HwCatalog *c, const char *name, KvErr *e);
const LinkSpec *hw_find_link(const HwCatalog *c, const char *name, KvErr *e);
const SsdSpec *hw_find_ssd(const HwCatalog *c, const char *name, KvErr *e);
/* a NIC also by its line rate ("100GbE", "100G", "100Gbps": the catalog's one NIC of that rate) */
const NicSpec *hw_find_nic(const HwCatalog *c, const char *name, KvErr *e);
const MemdevSpec *hw_find_memdev(const HwCatalog *c, int m, const char *name, KvErr *e);
const PlatformSpec *hw_find_platform(const HwCatalog *c, const char *name, KvErr *e);

#endif
