/* map_int.h — what map.c (the command: jobs, the spread, the flow) and map_out.c (the table, the
 * break-even lines and the files) share: the command's state and the results per cell. */
#ifndef KV_MAP_INT_H
#define KV_MAP_INT_H

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/base/util.h"

#define MAP_MAX_POL 16
#define MAP_MAX_H 24
#define MAP_MAX_V 12
#define MAP_MAX_L 4
#define MAP_MAX_BE 64 /* break-even points per resource value */

typedef struct MapCtx {
    cJSON *base;                 /* the user's settings: --scenario, --config's keys, model, platform, --set */
    char policies[600];
    char pol[MAP_MAX_POL][32];
    int np;
    int64_t hist[MAP_MAX_H];
    int nh;
    char axis[64], key[64];      /* the axis as given; the setting it sets (link: host_link) */
    char val[MAP_MAX_V][96], res[MAP_MAX_V][96]; /* as given; as set (a NIC's catalog name) */
    int nv;
    double load[MAP_MAX_L];      /* 0: isolated requests; else sessions per second */
    int nl;
    int seeds, draws, requests, requests_load;
    uint64_t seed_base;
    double band;
    int64_t new_tokens;
    int64_t be_max;              /* the break-even scan's longest history */
    const char *store;           /* the store map sets ("" : the user's or the platform's) */
    int spread_store;            /* the draws use the store's p10/p90 spread */
    double spread_lo[2], spread_hi[2]; /* compute, host link: time factors of p10 and p90 */
    char spread_note[300];
    char tmpdir[512];
    int jobs;
} MapCtx;

typedef struct Cell {
    double mean[MAP_MAX_POL];    /* mean over seeds of the policies' mean restoring TTFT (s) */
    int win, run;                /* indices into pol: the first fastest, the fastest of the others (-1: none) */
    int tied[MAP_MAX_POL], ntied; /* every policy at the fastest mean, win first (identical runs) */
    double margin, ci;           /* runner-up − best (s), its 95 % half-width over seeds (NAN: one seed) */
    double flip;                 /* share of draws whose fastest is not among the seed's fastest (NAN: no draws) */
} Cell;

typedef struct BePoint {
    int fa, fb, lower;
    int64_t at;
} BePoint;

typedef struct BeLine {
    BePoint p[MAP_MAX_BE];
    int n;
    int64_t reach;               /* > 0: the scan stopped there, a longer history's request does not fit */
} BeLine;

static inline int n_cells(const MapCtx *x) { return x->nl * x->nh * x->nv; }

/* the table (md: Markdown) and the break-even lines, to f */
void map_print_table(FILE *f, const MapCtx *x, const Cell *cells, int md);
void map_print_be(FILE *f, const MapCtx *x, const BeLine *be, int md);
/* the files --out writes into dir (each written aside, then renamed) */
int map_write_json(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *model, const char *platform, const char *spread, KvErr *e);
int map_write_csv(const char *dir, const MapCtx *x, const Cell *cells, KvErr *e);
int map_write_svg(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *title, KvErr *e);
int map_write_md(const char *dir, const MapCtx *x, const Cell *cells, const BeLine *be, const char *head, KvErr *e);

#endif
