/* test_map.c — kvsim map's library: the break-even bisection on functions whose root is known,
 * the history labels, the isolated-request trace, the cost perturbation, and the closed form at a
 * break-even point: for one request restored from a remote store (cake-a100: Llama-2-7B's KV over
 * 32 Gb/s), recompute's TTFT equals the layer-wise KV load's at the history the bisection finds,
 * both computed from the cost model's layer costs and the link and NIC rates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cli/map.h"
#include "tests/harness.h"
#include "tests/simtest.h"

typedef struct {
    double root, slope;
    int calls;
} Line;

static int line_diff(void *ctx, int64_t H, double *d, KvErr *e)
{
    (void)e;
    Line *l = ctx;
    l->calls++;
    *d = l->slope * ((double)H - l->root);
    return 0;
}

TEST(map_bisect_finds_a_known_root)
{
    Line l = {3170.4, -2e-6, 0};
    int64_t at = 0;
    int evals = 0;
    KvErr e;
    double fl, fh;
    line_diff(&l, 512, &fl, &e);
    line_diff(&l, 32768, &fh, &e);
    CHECK_MSG(map_bisect(line_diff, &l, 512, fl, 32768, fh, 0.002, &at, &evals, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(at, 3170); /* the interpolation of a line is exact: the root rounded */
    CHECK(evals > 3 && evals < 20);
    /* a curve: the root is found within the tolerance of the bracket */
    Line q = {70000, 1e-9, 0};
    line_diff(&q, 64, &fl, &e);
    line_diff(&q, 131072, &fh, &e);
    CHECK_MSG(map_bisect(line_diff, &q, 64, fl, 131072, fh, 0.002, &at, NULL, &e) == 0, "%s", e.msg);
    CHECK(llabs(at - 70000) <= 1);
}

TEST(map_bisect_refuses_no_sign_change)
{
    Line l = {100, 1, 0};
    int64_t at = -1;
    KvErr e;
    CHECK(map_bisect(line_diff, &l, 200, 100, 400, 300, 0.01, &at, NULL, &e) == -1);
    CHECK(strstr(e.msg, "no sign change") != NULL);
    CHECK_EQ_I(l.calls, 0);
    CHECK_EQ_I(at, -1);
}

TEST(map_token_labels)
{
    char b[32];
    map_fmt_tokens(b, sizeof b, 512);
    CHECK_STR(b, "512");
    map_fmt_tokens(b, sizeof b, 32768);
    CHECK_STR(b, "32K");
    map_fmt_tokens(b, sizeof b, 3174);
    CHECK_STR(b, "3.1K");
    map_fmt_tokens(b, sizeof b, 77210);
    CHECK_STR(b, "75.4K");
    map_fmt_tokens(b, sizeof b, 200000);
    CHECK_STR(b, "195K");
    CHECK_EQ_I(map_family("cake"), map_family("cacheflow"));
    CHECK_EQ_I(map_family("ideal"), -1);
    CHECK_STR(map_family_name(map_family("hcache")), "hcache");
}

TEST(map_trace_is_isolated_and_seeded)
{
    char *a = map_trace_text(4096, 3, 128, 0, 1000), *b = map_trace_text(4096, 3, 128, 7, 1000), *c = map_trace_text(4096, 3, 128, 7, 1000);
    CHECK(strstr(a, "m0,0,0,4095,1,0\nm0,1,,128,16,4096\nm1,0,1000,4095,1,0\n") != NULL);
    CHECK_STR(b, c); /* the same seed, the same bytes */
    int n = 0;
    for (const char *p = b; (p = strstr(p, ",1,,")); p++) {
        long q = strtol(p + 4, NULL, 10);
        CHECK(q >= 64 && q <= 192);
        n++;
    }
    CHECK_EQ_I(n, 3);
    free(a), free(b), free(c);
}

/* restoration from cake-a100's remote store, one request at history H (new input n1) */
static void iso(TestCtx *t, SimConfig *c, int64_t H, int64_t n1)
{
    simtest_iso_config(t, c, H - 1, n1, "cake-a100", "Llama-2-7B");
    simtest_set(t, c, "store", "remote");
    simtest_set(t, c, "recompute.token_budget", "0"); /* one unchunked prefill: a closed form of one iteration */
}

typedef struct {
    TestCtx *t;
    int64_t n1;
} RcLoad;

static int rc_minus_load(void *ctx, int64_t H, double *d, KvErr *e)
{
    RcLoad *r = ctx;
    SimConfig c;
    iso(r->t, &c, H, r->n1);
    double ttft[2];
    if (map_restoring_ttft(&c, "recompute,kv-offload", NULL, ttft, e) != 0) return -1;
    *d = ttft[0] - ttft[1];
    return 0;
}

/* the closed forms (ns): recompute = O + L × (linear(H + n1) + attention of H over itself + of n1
 * over H); the layer-wise load from the remote store: two hops per layer (NIC, then H2D), the
 * slower sets the pace, the other adds once, the iteration waits for k layers (test_restore.c) */
static void closed_forms(SimWorld *w, int64_t H, int64_t n1, double *rc, double *load)
{
    double L = w->model->layers, O = 2e6;
    *rc = O + L * (simtest_lin(w, H + n1) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, H, 0, 0) +
                   cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n1, H, 0));
    const LinkSpec *link = &w->hw.links[w->platform->link];
    double per_gpu = (double)H * (double)model_kv_bytes_per_token_layer_gpu(&w->ly);
    double per_layer = (double)H * (double)model_kv_bytes_per_token_layer(&w->ly);
    double t_h2d = (double)link->latency_ns + per_gpu / link->h2d_bytes_per_s * 1e9;
    double t_nic = (double)w->nic->latency_ns + per_layer / w->nic->bytes_per_s * 1e9;
    double t_io = t_nic > t_h2d ? t_nic : t_h2d, other = t_nic > t_h2d ? t_h2d : t_nic;
    double t_c = simtest_lin(w, n1) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n1, H, 0);
    int k = t_io > t_c ? (int)ceil(L * (1 - t_c / t_io) - 1e-9) : 0;
    double pipe = (t_io > t_c ? L * t_io + t_c : t_io + L * t_c) + other;
    double start = (k ? k * t_io + other : 0) + O + L * t_c;
    *load = pipe > start ? pipe : start;
}

TEST(map_break_even_recompute_equals_load_closed_form)
{
    const int64_t n1 = 128, lo = 1024, hi = 60000;
    RcLoad r = {t, n1};
    KvErr e;
    double dl = 0, dh = 0;
    CHECK_MSG(rc_minus_load(&r, lo, &dl, &e) == 0, "%s", e.msg);
    CHECK_MSG(rc_minus_load(&r, hi, &dh, &e) == 0, "%s", e.msg);
    CHECK_MSG(dl < 0 && dh > 0, "recompute should win at %lld (diff %g s) and lose at %lld (diff %g s)", (long long)lo, dl,
              (long long)hi, dh);
    int64_t at = 0;
    CHECK_MSG(map_bisect(rc_minus_load, &r, lo, dl, hi, dh, 0.002, &at, NULL, &e) == 0, "%s", e.msg);
    SimConfig c;
    iso(t, &c, at, n1);
    SimWorld w;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    double rc, load;
    closed_forms(&w, at, n1, &rc, &load);
    sim_world_close(&w);
    CHECK_MSG(fabs(rc - load) <= 0.01 * load, "at the break-even %lld tokens: recompute %.6g ns, load %.6g ns (closed forms)",
              (long long)at, rc, load);
    /* and the simulation agrees with each closed form there */
    double ttft[2];
    CHECK_MSG(map_restoring_ttft(&c, "recompute,kv-offload", NULL, ttft, &e) == 0, "%s", e.msg);
    CHECK_NEAR(ttft[0] * 1e9, rc, 0.01, 0);
    CHECK_NEAR(ttft[1] * 1e9, load, 0.01, 0);
}

TEST(map_perturbation_scales_the_classes)
{
    SimConfig c;
    iso(t, &c, 8192, 128);
    KvErr e;
    double base[2], slow[2];
    CHECK_MSG(map_restoring_ttft(&c, "recompute,kv-offload", NULL, base, &e) == 0, "%s", e.msg);
    MapPerturb p = {1.2, 1, 1, 1}; /* compute 20 % slower: recompute's one iteration, its overhead aside */
    CHECK_MSG(map_restoring_ttft(&c, "recompute,kv-offload", &p, slow, &e) == 0, "%s", e.msg);
    CHECK_NEAR(slow[0] - 2e-3, (base[0] - 2e-3) * 1.2, 1e-6, 0);
    MapPerturb q = {1, 1, 1.5, 1}; /* the NIC 1.5× slower: the load, NIC-bound, slows; recompute does not */
    CHECK_MSG(map_restoring_ttft(&c, "recompute,kv-offload", &q, slow, &e) == 0, "%s", e.msg);
    CHECK_NEAR(slow[0], base[0], 0, 0);
    CHECK(slow[1] > 1.3 * base[1]);
}
