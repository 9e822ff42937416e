/* oracle.c — a lower bound on a trace's mean and p99 TTFT that no policy of the engine's class can
 * beat on the platform, computed offline with the whole trace known (docs/model.md "Oracle bound").
 *
 * Responsible for: per request its prefill alone P (the engine's iteration cost of its new input in
 * token-budget chunks), the restoration it cannot hide (a fluid bound: recompute at the best per-token
 * rate of any iteration size, load the smallest form a built-in policy stores from the fastest tier of
 * the chain, both at once; or the engine's own restore/bound where nothing can be kept or
 * prefetched), prefetch during the session's gap at the link's rate, keeping histories resident across
 * gaps under the KV pools' capacity (a consecutive-ones LP, solved exactly as a min-cost flow on the
 * timeline: sim_oracle_keep_lp), and the p99 of each request's own minimum.
 * Not responsible for: running anything (no events; the world's cost model and settings only), the
 * reporting (results/).
 * Invariants: every relaxation lowers the bound (docs/model.md lists them); the same world gives the
 * same numbers (no dependence on any run). The cost model's lookup counters are left as found.
 * Complexity: O(n log n) for the requests (chunks of the new input: O(new / token_budget)), plus the
 * flow: O(augmentations × n log n), each augmentation saturating an interval or a reverse edge.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"

/* ---- the keep LP: max Σ w·x, 0 <= x <= cap, Σ over intervals covering t of x <= pool ---- */

typedef struct FlowEdge {
    int to;
    int64_t cap;  /* residual */
    int64_t cost; /* per unit: −w on an interval edge, 0 on the line */
} FlowEdge;

typedef struct Flow {
    FlowEdge *e;
    int *head, *next; /* adjacency lists over edges */
    int ne, nn;
} Flow;

static int flow_add(Flow *f, int a, int b, int64_t cap, int64_t cost)
{
    int k = f->ne;
    f->e[k] = (FlowEdge){b, cap, cost};
    f->next[k] = f->head[a];
    f->head[a] = k;
    f->e[k + 1] = (FlowEdge){a, 0, -cost};
    f->next[k + 1] = f->head[b];
    f->head[b] = k + 1;
    f->ne += 2;
    return k;
}

/* a binary heap of (distance, node) */
typedef struct HeapItem {
    int64_t d;
    int v;
} HeapItem;

static void heap_push(HeapItem *h, int *n, HeapItem x)
{
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (h[p].d <= x.d) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static HeapItem heap_pop(HeapItem *h, int *n)
{
    HeapItem top = h[0], x = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].d < h[c].d) c++;
        if (h[c].d >= x.d) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* the node of time t among the sorted distinct times */
static int node_of(const int64_t *t, int n, int64_t v)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#define FLOW_INF INT64_MAX / 4

int sim_oracle_keep_lp(const SimOracleInterval *iv, size_t n, int64_t pool, int64_t *x, KvErr *e)
{
    for (size_t i = 0; i < n; i++) x[i] = 0;
    if (n == 0) return 0;
    if (n > (size_t)INT32_MAX / 8) return kv_err(e, "oracle: %zu intervals, at most %d", n, INT32_MAX / 8);
    /* intervals of no length constrain nothing: taken whole; the others become edges */
    int64_t *t = malloc(2 * n * sizeof *t);
    if (!t) return kv_err(e, "out of memory");
    int nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].cap <= 0 || iv[i].w <= 0) continue;
        if (iv[i].t1 <= iv[i].t0) {
            x[i] = iv[i].cap;
            continue;
        }
        t[nt++] = iv[i].t0;
        t[nt++] = iv[i].t1;
    }
    if (nt == 0 || pool <= 0) {
        free(t);
        return 0;
    }
    qsort(t, (size_t)nt, sizeof *t, cmp_i64);
    int m = 0;
    for (int i = 0; i < nt; i++)
        if (m == 0 || t[i] != t[m - 1]) t[m++] = t[i];
    /* an interval whose every point carries at most `pool` even with every interval taken whole
     * meets no binding constraint: taken whole, without the flow (most of a trace whose pool holds
     * its kept histories) */
    int64_t *over = calloc((size_t)m + 1, sizeof *over);
    if (!over) {
        free(t);
        return kv_err(e, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (iv[i].cap > 0 && iv[i].w > 0 && iv[i].t1 > iv[i].t0) {
            over[node_of(t, m, iv[i].t0)] += iv[i].cap;
            over[node_of(t, m, iv[i].t1)] -= iv[i].cap;
        }
    int64_t load = 0, nover = 0;
    for (int j = 0; j < m; j++) { /* over[j] becomes the count of overloaded segments before node j */
        load += over[j];
        over[j] = nover;
        if (load > pool) nover++;
    }
    over[m] = nover;
    size_t bound_n = 0;
    for (size_t i = 0; i < n; i++)
        if (iv[i].cap > 0 && iv[i].w > 0 && iv[i].t1 > iv[i].t0) {
            if (over[node_of(t, m, iv[i].t1)] == over[node_of(t, m, iv[i].t0)]) x[i] = iv[i].cap;
            else bound_n++;
        }
    if (bound_n == 0) {
        free(over);
        free(t);
        return 0;
    }
    size_t max_e = 2 * ((size_t)m + n);
    Flow f = {0};
    f.e = malloc(max_e * sizeof *f.e);
    f.next = malloc(max_e * sizeof *f.next);
    f.head = malloc((size_t)m * sizeof *f.head);
    int *edge_of = malloc(n * sizeof *edge_of);
    int64_t *pot = malloc((size_t)m * sizeof *pot), *dist = malloc((size_t)m * sizeof *dist);
    int *prev = malloc((size_t)m * sizeof *prev);
    HeapItem *heap = malloc(max_e * sizeof *heap);
    int rc = 0;
    if (!f.e || !f.next || !f.head || !edge_of || !pot || !dist || !prev || !heap) {
        rc = kv_err(e, "out of memory");
        goto done;
    }
    f.nn = m;
    for (int v = 0; v < m; v++) f.head[v] = -1;
    /* the line carries what the intervals do not: at most `pool` units cross every point */
    for (int v = 0; v + 1 < m; v++) flow_add(&f, v, v + 1, FLOW_INF, 0);
    for (size_t i = 0; i < n; i++) {
        edge_of[i] = -1;
        if (iv[i].cap <= 0 || iv[i].w <= 0 || iv[i].t1 <= iv[i].t0) continue;
        if (over[node_of(t, m, iv[i].t1)] == over[node_of(t, m, iv[i].t0)]) continue; /* taken whole above */
        edge_of[i] = flow_add(&f, node_of(t, m, iv[i].t0), node_of(t, m, iv[i].t1), iv[i].cap, -iv[i].w);
    }
    /* potentials: shortest distances from node 0 in the DAG (every edge runs forward in time) */
    for (int v = 0; v < m; v++) pot[v] = v == 0 ? 0 : FLOW_INF;
    for (int v = 0; v < m; v++) {
        if (pot[v] >= FLOW_INF) continue;
        for (int k = f.head[v]; k >= 0; k = f.next[k])
            if (f.e[k].cap > 0 && pot[v] + f.e[k].cost < pot[f.e[k].to]) pot[f.e[k].to] = pot[v] + f.e[k].cost;
    }
    /* successive shortest paths from node 0 to node m−1 while a path gains (costs < 0) and supply is left;
     * integral capacities: every augmentation moves >= 1 unit and saturates an edge, so it ends */
    int64_t left = pool;
    while (left > 0) {
        for (int v = 0; v < m; v++) dist[v] = FLOW_INF, prev[v] = -1;
        int hn = 0;
        dist[0] = 0;
        heap_push(heap, &hn, (HeapItem){0, 0});
        while (hn > 0) {
            HeapItem it = heap_pop(heap, &hn);
            if (it.d > dist[it.v]) continue;
            for (int k = f.head[it.v]; k >= 0; k = f.next[k]) {
                const FlowEdge *fe = &f.e[k];
                if (fe->cap <= 0 || pot[fe->to] >= FLOW_INF) continue;
                int64_t rcost = fe->cost + pot[it.v] - pot[fe->to]; /* >= 0 with exact potentials */
                if (rcost < 0) rcost = 0;
                if (it.d + rcost < dist[fe->to]) {
                    dist[fe->to] = it.d + rcost;
                    prev[fe->to] = k;
                    heap_push(heap, &hn, (HeapItem){dist[fe->to], fe->to});
                }
            }
        }
        if (dist[m - 1] >= FLOW_INF) break;
        int64_t path_cost = dist[m - 1] + pot[m - 1] - pot[0];
        for (int v = 0; v < m; v++)
            if (dist[v] < FLOW_INF) pot[v] += dist[v];
        if (path_cost >= 0) break; /* the rest of the supply runs along the line: no gain left */
        int64_t push = left;
        for (int v = m - 1; v != 0; v = f.e[prev[v] ^ 1].to)
            if (f.e[prev[v]].cap < push) push = f.e[prev[v]].cap;
        for (int v = m - 1; v != 0; v = f.e[prev[v] ^ 1].to) {
            f.e[prev[v]].cap -= push;
            f.e[prev[v] ^ 1].cap += push;
        }
        left -= push;
    }
    for (size_t i = 0; i < n; i++)
        if (edge_of[i] >= 0) x[i] = f.e[edge_of[i] ^ 1].cap; /* the flow on it: its reverse residual */
done:
    free(over);
    free(t);
    free(f.e);
    free(f.next);
    free(f.head);
    free(edge_of);
    free(pot);
    free(dist);
    free(prev);
    free(heap);
    return rc;
}

/* ---- per-request quantities ---- */

/* the least per-token recompute time over all L layers spread on S stages: min over iteration sizes
 * M <= m_max of L·linear(M)/(M·S). Sampled on a grid 1, 2, ..., 64, then ×1.03: between grid points
 * c_j <= M <= c_{j+1}, linear(M)/M >= linear(c_j)/c_{j+1} (linear never falls with M), so the
 * minimum of those quotients is below the true minimum. */
static double recompute_ns_per_token(Sim *sm, int64_t m_max)
{
    double best = INFINITY;
    int64_t c = 1;
    while (c <= m_max) {
        int64_t nx = c < 64 ? c + 1 : (int64_t)ceil((double)c * 1.03);
        if (nx > m_max) nx = m_max;
        double q = (double)sm->L * est_linear_ns(sm, c) / ((double)(nx > c ? nx : c) * sm->S);
        if (q < best) best = q;
        if (nx <= c) break;
        c = nx;
    }
    return best;
}

/* the least per-token load time over every tier of the chain and every form a built-in policy stores
 * (KV, hidden states, 4-bit KV), bandwidth only (latencies dropped): each stage over its own H2D, the
 * tier's link shared (one NIC per stage with nic_per_stage) */
static double load_ns_per_token(Sim *sm, const Tier *chain, int n_chain)
{
    double q4 = 4.0 / 16.0 + 1.0 / (double)sm->w->model->head_dim;
    const double form[3][2] = {{sm->kv_tok_layer, sm->kv_tok_layer_gpu},
                               {sm->hid_tok_layer, sm->hid_tok_layer / sm->T},
                               {sm->kv_tok_layer * q4, sm->kv_tok_layer_gpu * q4}};
    double best = INFINITY, S = (double)sm->S;
    for (int i = 0; i < n_chain; i++) {
        int in = tier_table[chain[i]].in_hop;
        for (int f = 0; f < 3; f++) {
            double h2d = (double)sm->L * form[f][1] / sm->rate_h2d / S, hop = 0;
            if (in >= 0 && sm->hop_rate[in] > 0) hop = (double)sm->L * form[f][0] / sm->hop_rate[in];
            if (in == CH_NIC_IN && sm->cfg->nic_per_stage) hop /= S;
            double t = h2d > hop ? h2d : hop;
            if (t < best) best = t;
        }
    }
    return best;
}

/* one request as the oracle sees it */
typedef struct OReq {
    double base;    /* its bound with nothing kept nor prefetched (ns) */
    double save;    /* what keeping it whole would still save after its prefetch (ns) */
    double rho;     /* ns per history token restored (the fluid rate) */
    double best;    /* its own minimum: everything it may keep or prefetch (ns) */
    int64_t keep_t0, keep_t1, keep_cap; /* its keep interval and tokens (cap 0: none) */
    int64_t keep_tokens; /* what keeping the rest of its history whole occupies */
} OReq;

typedef struct OSess {
    int64_t done_ns;  /* the nominal end of its last turn (-1: none yet) */
    int64_t first_ns; /* the nominal first token of its last turn */
    int64_t arr_ns;   /* arrivals=trace: the arrival of its last turn (-1: none) */
    int client;
} OSess;

static int osess_grow(OSess **s, size_t *cap, uint64_t id)
{
    if (id < *cap) return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc <= id) nc *= 2;
    OSess *ns = realloc(*s, nc * sizeof *ns);
    if (!ns) return -1;
    for (size_t i = *cap; i < nc; i++) ns[i] = (OSess){-1, -1, -1, -1};
    *s = ns;
    *cap = nc;
    return 0;
}

/* the prefill of `n` new tokens after `ctx` tokens of context, alone, in token-budget chunks: the
 * engine's iteration cost (overhead + L layers, each rounded to the nanosecond as walk.c does);
 * *t1: the least one layer of one new token costs at that context (what is left after the last of
 * the history is in place) */
static double prefill_alone_ns(Sim *sm, int64_t n, int64_t ctx, double *t1)
{
    int64_t B = sm->cfg->token_budget > 0 ? sm->cfg->token_budget : n;
    int64_t total = 0;
    *t1 = n > 0 ? (double)round_ns(est_layer_ns(sm, 1, ctx)) : 0;
    for (int64_t done = 0; done < n;) {
        int64_t c = n - done < B ? n - done : B;
        total = t_add(total, t_add(sm->overhead_ns, t_mul(round_ns(est_layer_ns(sm, c, ctx + done)), sm->L)));
        done += c;
    }
    return (double)total;
}

/* prefetch 0: the class without prefetch (every built-in policy: a restoration starts at admission) */
static int oracle_compute(Sim *sm, SimOracle *out, OracleRow **rows_out, int prefetch)
{
    const SimConfig *cfg = sm->cfg;
    KvErr *e = sm->e;
    Tier chain[SIM_STORE_MAX_TIERS];
    int n_chain = sim_store_chain(cfg->store, chain);
    SimLoadMode mode = sim_load_mode(cfg);
    int64_t m_max = cfg->token_budget + cfg->max_batch;
    if (m_max < sm->max_ctx) m_max = sm->max_ctx;
    double kappa = recompute_ns_per_token(sm, m_max), tau = load_ns_per_token(sm, chain, n_chain);
    double rho = isfinite(tau) ? kappa * tau / (kappa + tau) : kappa;
    int64_t pool_cap = sm->rep[0].pool_cap, pool_total = pool_cap * sm->R;
    out->pool_tokens = (uint64_t)pool_total;
    TraceOptions to;
    sim_trace_options(cfg, sm->max_ctx, &to);
    TraceSource *src = trace_open(&to, e);
    if (!src) return -1;
    OReq *rq = NULL;
    OSess *ss = NULL;
    int64_t *client_free = NULL;
    size_t n = 0, cap = 0, scap = 0;
    int rc = -1;
    int64_t now = 0; /* the clock when the engine reads the next row (the latest timed arrival) */
    uint64_t dropped = 0;
    if (mode == SIM_LOAD_CONCURRENCY) {
        client_free = calloc((size_t)cfg->concurrency, sizeof *client_free);
        if (!client_free) goto oom;
    }
    for (;;) {
        TraceRequest tr;
        int got = trace_next(src, &tr, e);
        if (got < 0) goto fail;
        if (got == 0) break;
        if (osess_grow(&ss, &scap, tr.session) != 0) goto oom;
        OSess *s = &ss[tr.session];
        int64_t N = tr.history_tokens, nnew = tr.new_input_tokens < 1 ? 1 : tr.new_input_tokens;
        int64_t nout = tr.output_tokens < 1 ? 1 : tr.output_tokens;
        int has_prev = s->done_ns >= 0;
        /* the release on the nominal timeline (every turn's previous one ending at its earliest), and
         * an upper bound on the gap the previous turn's state could be prefetched in */
        int64_t rel, gap = 0;
        if (mode == SIM_LOAD_CONCURRENCY) {
            if (!has_prev) { /* a client takes the session when one is free */
                int k = 0;
                for (int c = 1; c < cfg->concurrency; c++)
                    if (client_free[c] < client_free[k]) k = c;
                s->client = k;
                rel = client_free[k];
            } else {
                rel = t_add(s->done_ns, tr.think_ns);
                gap = tr.think_ns;
            }
        } else if (tr.arrival_ns >= 0) {
            int64_t a = tr.arrival_ns > now ? tr.arrival_ns : now;
            now = a;
            s->arr_ns = a;
            rel = has_prev && s->done_ns > a ? s->done_ns : a;
            if (has_prev && a > s->first_ns) gap = a - s->first_ns; /* the previous turn ends after its first token */
        } else if (mode == SIM_LOAD_TRACE) { /* the previous turn's arrival + think, fixed as lifecycle.c does */
            int64_t a = s->arr_ns >= 0 ? t_add(s->arr_ns, tr.think_ns) : now;
            if (a < now) a = now;
            s->arr_ns = a;
            rel = has_prev && s->done_ns > a ? s->done_ns : a;
            if (has_prev && a > s->first_ns) gap = a - s->first_ns;
        } else { /* closed loop: think after the previous turn's end */
            rel = t_add(has_prev ? s->done_ns : now, tr.think_ns);
            gap = has_prev ? tr.think_ns : 0;
        }
        int64_t ctx = N + nnew + nout;
        if (blocks_tokens(sm, ctx) > pool_cap) { /* dropped by every policy: not in the TTFT figures */
            dropped++;
            s->done_ns = s->first_ns = rel;
            continue;
        }
        /* tokens of the context the prefix cache may hold for it (shared with other sessions) */
        int64_t shared = 0;
        if (cfg->prefix_cache && tr.n_prefix_blocks > 0 && tr.prefix_block_tokens > 0) {
            shared = (int64_t)tr.n_prefix_blocks * tr.prefix_block_tokens;
            if (shared > N + nnew) shared = N + nnew;
        }
        int64_t Np = N - shared > 0 ? N - shared : 0;              /* history to restore */
        int64_t new_done = shared > N ? shared - N : 0;            /* new input found cached */
        double t1 = 0, P = nnew - new_done > 0 ? prefill_alone_ns(sm, nnew - new_done, N + new_done, &t1) : 0;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 1024;
            OReq *nr = realloc(rq, nc * sizeof *nr);
            if (!nr) goto oom;
            rq = nr;
            cap = nc;
        }
        OReq *o = &rq[n++];
        memset(o, 0, sizeof *o);
        o->rho = rho;
        int64_t first = t_add(rel, (int64_t)P);
        /* the earliest end: the first token, then one decode step per further token, each at least the
         * overhead and one token's linear cost in every layer */
        int64_t done = t_add(first, (int64_t)((double)(nout - 1) * ((double)sm->overhead_ns + (double)sm->L * est_linear_ns(sm, 1))));
        /* the GPU computes the new input and whatever of the history is recomputed (k tokens), at
         * best kappa per token; the links bring the rest (tau per token), then one layer of the new
         * input is left: TTFT >= max((n + k)·kappa, (m − k)·tau + t1) for m tokens missing, whose
         * least over k is rho·(m + n) + t1·kappa/(kappa + tau) (rho·m + ... falls by rho per token
         * kept), and TTFT >= P, >= n·kappa whatever is missing */
        int64_t n_eff = nnew - new_done > 0 ? nnew - new_done : 0;
        double floor_ns = P > kappa * (double)n_eff ? P : kappa * (double)n_eff;
        double t1_share = isfinite(tau) ? t1 * kappa / (kappa + tau) : 0;
        if (Np == 0) {
            o->base = o->best = floor_ns;
        } else {
            /* prefetch: the tokens the link brings in the gap (at its rate alone; HBM not charged) */
            int64_t z = 0;
            if (prefetch && has_prev && gap > 0 && isfinite(tau)) z = (double)gap / tau >= (double)Np ? Np : (int64_t)((double)gap / tau);
            int keep = has_prev && !cfg->evict_each_turn;
            double miss = rho * (double)(Np - z + n_eff) + t1_share; /* nothing of the rest kept */
            double after = floor_ns > miss ? floor_ns : miss;
            if (z == 0 && !keep) { /* no choice to make: the engine's own restoration bound too */
                /* the state may be in any tier of the chain: the least of their bounds */
                double lb = n_chain ? INFINITY : restore_bound_ns(sm, Np, TIER_NONE);
                for (int i = 0; i < n_chain; i++) {
                    double b = restore_bound_ns(sm, Np, chain[i]);
                    if (b < lb) lb = b;
                }
                lb += t1;
                o->base = o->best = after > lb ? after : lb;
            } else {
                double all = rho * (double)n_eff + t1_share; /* the rest all kept */
                o->base = o->best = after;
                o->save = after - (floor_ns > all ? floor_ns : all);
                if (keep && o->save > 0) {
                    int64_t y = Np - z; /* what keeping can add */
                    int64_t need = (int64_t)ceil(o->save / rho); /* tokens that still save */
                    o->keep_cap = need < y ? need : y;
                    o->keep_tokens = y;
                    o->keep_t0 = s->done_ns;
                    o->keep_t1 = rel;
                    int64_t solo = o->keep_cap < pool_total ? o->keep_cap : pool_total;
                    double sv = rho * (double)solo;
                    o->best = after - (sv < o->save ? sv : o->save);
                } else {
                    o->save = 0;
                }
            }
        }
        s->first_ns = first;
        s->done_ns = done;
        if (mode == SIM_LOAD_CONCURRENCY && s->client >= 0) client_free[s->client] = done;
    }
    {
        out->requests = n;
        out->dropped = dropped;
        double sum = 0;
        size_t nk = 0;
        for (size_t i = 0; i < n; i++) {
            sum += rq[i].base;
            if (rq[i].keep_cap > 0) nk++;
        }
        double gain = 0;
        if (nk > 0) {
            SimOracleInterval *iv = malloc(nk * sizeof *iv);
            int64_t *x = malloc(nk * sizeof *x);
            size_t *idx = malloc(nk * sizeof *idx);
            if (!iv || !x || !idx) {
                free(iv), free(x), free(idx);
                goto oom;
            }
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (rq[i].keep_cap > 0) {
                    /* ps per token, rounded up: the LP's gain is never below the true one */
                    iv[k] = (SimOracleInterval){rq[i].keep_t0, rq[i].keep_t1, rq[i].keep_cap, (int64_t)ceil(rq[i].rho * 1000.0)};
                    idx[k++] = i;
                }
            int lrc = sim_oracle_keep_lp(iv, nk, pool_total, x, e);
            if (lrc == 0)
                for (size_t j = 0; j < nk; j++) {
                    double g = (double)x[j] * (double)iv[j].w / 1000.0, cap_g = rq[idx[j]].save;
                    gain += g < cap_g ? g : cap_g;
                    if (x[j] > 0) out->kept++;
                }
            free(iv), free(x), free(idx);
            if (lrc != 0) goto fail;
        }
        out->candidates = nk;
        out->ttft_mean_s = n ? (sum - gain) / (double)n / 1e9 : NAN;
        if (out->ttft_mean_s < 0) out->ttft_mean_s = 0;
        /* p99: each request's own minimum, through the histogram the engine reports TTFT with, so a
         * policy's TTFTs (each at least its request's minimum) give a p99 at least this one */
        Hist h = {0};
        for (size_t i = 0; i < n; i++) hist_add(&h, (uint64_t)floor(rq[i].best > 0 ? rq[i].best : 0));
        out->ttft_p99_s = n ? hist_percentile(&h, 0.99) / 1e9 : NAN;
        hist_free(&h);
    }
    if (rows_out) {
        if (!(*rows_out = malloc((n ? n : 1) * sizeof **rows_out))) goto oom;
        for (size_t i = 0; i < n; i++)
            (*rows_out)[i] = (OracleRow){rq[i].base, rq[i].save, rq[i].rho, rq[i].keep_t0, rq[i].keep_t1, rq[i].keep_cap, rq[i].keep_tokens};
    }
    rc = 0;
    goto fail;
oom:
    kv_err(e, "out of memory");
fail:
    trace_close(src);
    free(rq);
    free(ss);
    free(client_free);
    return rc;
}

int oracle_rows(SimWorld *w, SimOracle *out, OracleRow **rows, KvErr *e)
{
    if (rows) *rows = NULL;
    memset(out, 0, sizeof *out);
    out->ttft_mean_s = out->ttft_p99_s = NAN;
    const SimConfig *cfg = w->cfg;
    if (cfg->warmup.n > 0 || cfg->cooldown.n > 0) {
        snprintf(out->basis, sizeof out->basis, "not computed: warmup/cooldown leave requests out of the TTFT figures");
        return 0;
    }
    SimResult res;
    memset(&res, 0, sizeof res);
    Sim sm_;
    Sim *sm = &sm_;
    memset(sm, 0, sizeof *sm);
    sm->w = w;
    sm->cfg = cfg;
    sm->res = &res;
    sm->e = e;
    CostModel *cm = &w->cost;
    uint64_t lk[OP_COUNT], ex[OP_COUNT];
    memcpy(lk, cm->lookups, sizeof lk);
    memcpy(ex, cm->extrapolations, sizeof ex);
    int rc = -1;
    if (evq_init(&sm->q, e) != 0) return -1;
    SimOracle plain;
    memset(&plain, 0, sizeof plain);
    if (sim_setup(sm) == 0 && oracle_compute(sm, out, rows, 1) == 0 && oracle_compute(sm, &plain, NULL, 0) == 0) {
        out->noprefetch_mean_s = plain.ttft_mean_s;
        out->noprefetch_p99_s = plain.ttft_p99_s;
        rc = 0;
    }
    sim_teardown(sm);
    sim_result_free(&res);
    memcpy(cm->lookups, lk, sizeof lk);
    memcpy(cm->extrapolations, ex, sizeof ex);
    if (rc == 0 && !out->basis[0])
        snprintf(out->basis, sizeof out->basis,
                 "per request max(prefill alone, unhidden restoration + one layer); prefetch in the gap at the link's rate; "
                 "%s; p99 of each request's own minimum",
                 cfg->evict_each_turn ? "nothing kept across a gap (evict_each_turn)" : "keeping histories across gaps under the KV pools (LP)");
    return rc;
}

int sim_oracle(SimWorld *w, SimOracle *out, KvErr *e) { return oracle_rows(w, out, NULL, e); }
