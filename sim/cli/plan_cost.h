/* plan_cost.h — what a point of `kvsim plan` costs: the parts it uses, resolved as a run resolves
 * them, priced from a prices file (docs/formats.md "Prices", docs/planning.md).
 *
 * Responsible for: reading and checking a prices file (every price a finite number >= 0, unknown
 * keys refused); which parts a point uses, given its resolved store; the cost of every point of a
 * space; the text and the JSON of a point's priced parts.
 * Not responsible for: resolving a point (plan.c opens its world and fills a PlanPoint), searching.
 *
 * Rules:
 *  - The store's parts are priced where the point's resolved store uses them: DRAM (stores dram,
 *    dram+ssd, dram+remote; per 10^9 bytes of the dram setting), the SSDs (dram+ssd; per drive), the
 *    NIC and the remote store (dram+remote, remote; one NIC per replica, or one per pipeline stage
 *    with nic_per_stage; the remote store per replica). A part the store does not use is not priced,
 *    and the parts text names it as unused. A store part that a point uses and the file does not
 *    price refuses the space, naming the point, its store and the part: an unpriced store part is
 *    what let a point with no SSD look cheaper than it was (its store switched to the remote one,
 *    which cost nothing).
 *  - GPUs (tp × pp per replica), the host link and the platform (one each per replica) are priced in
 *    every point. One of them without a price is left out of every cost when it is the same in
 *    every valid point (it cannot change the ranking; the report says so), and refuses the space
 *    when it varies.
 *  - cost = replicas × Σ over the parts (units × unit price).
 * Invariants: a valid point's cost is finite and >= 0; an invalid point's is NAN.
 * Complexity: O(points × parts) with a lookup per part in the file's small objects.
 */
#ifndef KV_PLAN_COST_H
#define KV_PLAN_COST_H

#include <stddef.h>
#include <stdint.h>

#include "sim/base/util.h"

struct cJSON;

typedef enum {
    PLAN_PART_GPU,
    PLAN_PART_SSD,
    PLAN_PART_DRAM,
    PLAN_PART_NIC,
    PLAN_PART_REMOTE, /* the remote store itself (its share per replica), apart from the NIC to it */
    PLAN_PART_LINK,
    PLAN_PART_PLATFORM,
    PLAN_N_PARTS
} PlanPart;

/* A point as a run resolves it (sim_world_open): its parts and its store. */
typedef struct PlanPoint {
    char gpu[64], ssd[64], nic[64], link[64], platform[64];
    char store[16];     /* the resolved store: "dram", "dram+ssd", "dram+remote" or "remote" */
    int n_gpus;         /* per replica: tp × pp */
    int n_ssd;          /* drives per replica (0: none) */
    int n_nics;         /* NICs to the remote store per replica: pp with nic_per_stage, else 1; 0: nic none */
    int replicas;
    uint64_t dram_bytes; /* the replica's DRAM tier (the dram setting, else the platform's) */
    char invalid[600];  /* "" or why the point cannot run (then it has no cost) */
} PlanPoint;

typedef struct PlanPrices {
    struct cJSON *root;
    const struct cJSON *gpu, *ssd, *nic, *link, *platform; /* name: price objects, or NULL */
    double dram_per_gb;  /* NAN: not given */
    double remote_store; /* per replica; NAN: not given */
    char currency[16];
    char path[512];
} PlanPrices;

/* Read and check a prices file. -1 and e naming the file and the key. Free with plan_prices_free. */
int plan_prices_load(PlanPrices *pr, const char *path, KvErr *e);
void plan_prices_free(PlanPrices *pr);

/* 1 when p's resolved store keeps saved state in DRAM / on the SSDs / in the remote store. */
int plan_store_uses_dram(const PlanPoint *p);
int plan_store_uses_ssd(const PlanPoint *p);
int plan_store_uses_remote(const PlanPoint *p);

/* The units of part k that p uses per replica (GPUs, drives, GB of DRAM, NICs, 1); 0: not used. */
double plan_part_units(const PlanPoint *p, PlanPart k);
/* The unit price of part k at p; NAN when the file has none. */
double plan_part_price(const PlanPrices *pr, const PlanPoint *p, PlanPart k);

typedef struct PlanCosting {
    int counted[PLAN_N_PARTS]; /* 0: left out of every cost (no price, the same part in every valid point) */
    char excluded[1024];       /* those parts, for the report ("platform 'mybox'"), or "" */
} PlanCosting;

/* Every point's cost into cost[0..n) (NAN for an invalid point) by the rules above. labels[i] names
 * point i in messages (may be NULL). -1 and e (the file, the point, the part and the key expected)
 * when a part cannot be priced. */
int plan_price_points(const PlanPrices *pr, const PlanPoint *pt, int n, const char *const *labels, double *cost, PlanCosting *pc,
                      KvErr *e);

/* p's priced parts per replica: "GPU 4× A100-40GB 32,000 + SSD 1× PM9A3 750 + DRAM 16 GB 64 + host
 * link pcie4 0 + platform hcache-a100 12,000", then " (× 2 replicas)" when more than one, then
 * "; not used by the store dram+ssd: NIC 100G" and "; left out (no price): ..." when there are any. */
void plan_parts_text(const PlanPrices *pr, const PlanCosting *pc, const PlanPoint *p, char *buf, size_t n);
/* The same as JSON: [{"part", "name", "units", "unit_price", "cost"}] per replica for the parts priced
 * (unit_price and cost null for a part left out); the parts not used in "unused" when asked. */
struct cJSON *plan_parts_json(const PlanPrices *pr, const PlanCosting *pc, const PlanPoint *p);
struct cJSON *plan_unused_json(const PlanPoint *p);

/* 12345.6 → "12,346"; a value that is not finite → "–". */
void plan_fmt_money(char *buf, size_t n, double v);

#endif
