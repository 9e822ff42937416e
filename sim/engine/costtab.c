/* costtab.c — the run's cost table: what an iteration asks of the cost model, answered without
 * redoing the same lookups.
 *
 * Responsible for: the per-layer linear cost of M tokens (the composition of sim/cost/layer_cost:
 * four GEMMs, norms, activation, RoPE, all-reduce) memoised per M for M < the larger of
 * token_budget + max_batch + 1 and max_context + 1 (the policies' estimates of recomputing a whole
 * history ask for M up to the context; at most CTAB_MAX_M entries), filled on first use; and the
 * segment hints (CostHint) of the attention lookups the iteration makes (decode attention per
 * batch, prefill attention per item).
 * Not responsible for: the composition itself (layer_cost.c), the cost model's grids (cost.c).
 * Invariants: a table entry holds exactly the double layer_cost_linear_ns returned for that M (a
 * memo of a pure function of M for the run); the cost model's lookup and extrapolation counters
 * advance as the lookups it replaces would have advanced them (per entry the ops that extrapolated,
 * at each hit, so summary.json's extrapolation counts do not change; the lookup counts, which no
 * result reports, are added for all hits when the run ends).
 * A decode run asks the same linear cost at every step and the decode attention along one line
 * (the batch fixed, the context growing): ctab_linear_count counts the repeated hits at once, and
 * ctab_attn_decode_line gives the run a CostLine (its counters added when the run ends).
 * Complexity: a hit O(1) (plus one increment per op looked up); a miss one composition (≤ 9
 * lookups); memory 16 bytes × entries, allocated at the first lookup, freed by ctab_free.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/cost/layer_cost.h"
#include "sim/engine/engine_int.h"

#define CTAB_MAX_M 65536
#define CTAB_FILLED (1u << 31)

static double linear_direct(Sim *sm, int64_t M)
{
    LayerOps ops = layer_ops_of_model(&sm->w->cost);
    return layer_cost_linear_ns(&ops, &sm->w->ly, M, NULL);
}

static void ctab_alloc(Sim *sm)
{
    CostTab *t = &sm->ctab;
    t->tried = 1;
    int64_t n = sm->cfg->token_budget + sm->cfg->max_batch + 1;
    if (n < sm->max_ctx + 1) n = sm->max_ctx + 1; /* (the policies' estimates of a whole history: est_layer_ns) */
    if (n > CTAB_MAX_M) n = CTAB_MAX_M;
    if (n < 1) n = 1;
    t->lin_ns = malloc((size_t)n * sizeof *t->lin_ns);
    t->lin_state = calloc((size_t)n, sizeof *t->lin_state);
    if (!t->lin_ns || !t->lin_state) { /* no table: every lookup composes directly */
        free(t->lin_ns);
        free(t->lin_state);
        t->lin_ns = NULL;
        t->lin_state = NULL;
        return;
    }
    t->n = n;
}

/* add one to each counter whose bit is set in mask */
static inline void count_mask(uint64_t *counters, uint32_t mask)
{
    while (mask) {
        counters[__builtin_ctz(mask)]++;
        mask &= mask - 1;
    }
}

double ctab_linear_ns(Sim *sm, int64_t M)
{
    CostTab *t = &sm->ctab;
    if (!t->tried) ctab_alloc(sm);
    if (M < 0 || M >= t->n) return linear_direct(sm, M);
    CostModel *cm = &sm->w->cost;
    uint32_t st = t->lin_state[M];
    if (st & CTAB_FILLED) {
        t->hits++; /* its lookups are counted when the run ends (ctab_free) */
        if (st != CTAB_FILLED) count_mask(cm->extrapolations, st & ~CTAB_FILLED);
        return t->lin_ns[M];
    }
    uint64_t lk[OP_COUNT], ex[OP_COUNT];
    memcpy(lk, cm->lookups, sizeof lk);
    memcpy(ex, cm->extrapolations, sizeof ex);
    double v = linear_direct(sm, M);
    uint32_t lmask = 0, xmask = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        /* the composition looks each op up at most once */
        SIM_CHECK(sm, cm->lookups[op] - lk[op] <= 1 && cm->extrapolations[op] - ex[op] <= 1);
        if (cm->lookups[op] != lk[op]) lmask |= 1u << op;
        if (cm->extrapolations[op] != ex[op]) xmask |= 1u << op;
    }
    t->lin_lookups = lmask; /* the same ops for every M of a run (the model's has() answers) */
    t->lin_ns[M] = v;
    t->lin_state[M] = CTAB_FILLED | xmask;
    return v;
}

void ctab_linear_count(Sim *sm, int64_t M, uint64_t n)
{
    CostTab *t = &sm->ctab;
    if (M < 0 || M >= t->n || !(t->lin_state[M] & CTAB_FILLED)) { /* not a memo hit: the calls themselves */
        for (uint64_t i = 0; i < n; i++) ctab_linear_ns(sm, M);
        return;
    }
    t->hits += n;
    for (uint32_t mask = t->lin_state[M] & ~CTAB_FILLED; mask; mask &= mask - 1) sm->w->cost.extrapolations[__builtin_ctz(mask)] += n;
}

void ctab_attn_decode_line(Sim *sm, CostLine *ln, int64_t batch)
{
    cost_line_begin(ln, &sm->w->cost, OP_ATTN_DECODE, &sm->ctab.h_decode, batch);
}

double ctab_attn_decode_ns(Sim *sm, int64_t batch, int64_t ctx_tokens)
{
    return cost_lookup_hint_ns(&sm->w->cost, OP_ATTN_DECODE, &sm->ctab.h_decode, batch, ctx_tokens, 0);
}

double ctab_attn_prefill_ns(Sim *sm, int64_t tokens, int64_t ctx_tokens)
{
    return cost_lookup_hint_ns(&sm->w->cost, OP_ATTN_PREFILL, &sm->ctab.h_prefill, tokens, ctx_tokens, 0);
}

void ctab_free(Sim *sm)
{
    CostModel *cm = &sm->w->cost;
    for (int op = 0; op < OP_COUNT; op++)
        if (sm->ctab.lin_lookups >> op & 1) cm->lookups[op] += sm->ctab.hits;
    free(sm->ctab.lin_ns);
    free(sm->ctab.lin_state);
    memset(&sm->ctab, 0, sizeof sm->ctab);
}
