/* test_split.c — the prefix split search (hcache's IO-bound direction, cacheflow's layer axis):
 * split_prefix_best chooses what the exhaustive search chooses, with the same walk bit for bit, on
 * a grid of synthetic costs (ties and degenerate links included) and of costs from the cost model
 * (models, histories, new inputs, tiers, bandwidths, pipeline stages, a channel per stage). */
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"
#include "policies/split.h"
#include "sim/engine/sim.h"
#include "tests/simtest.h"

/* one comparison; returns the candidates split_prefix_best walked */
static int same_choice(TestCtx *t, const SplitPrefix *p, int kmax, const char *what)
{
    int kf = -1, ke = -2, walked = 0;
    double vf = split_prefix_best(p, kmax, &kf, &walked);
    double ve = split_prefix_best_exhaustive(p, kmax, &ke);
    CHECK_MSG(kf == ke && memcmp(&vf, &ve, sizeof vf) == 0,
              "%s: L=%d kmax=%d rec=%.17g load=%.17g hop=%.17g h2d=%.17g start=%.17g per-stage=%d: fast k=%d %.17g, "
              "exhaustive k=%d %.17g",
              what, p->L, kmax, p->rec, p->load, p->hop, p->h2d, p->start, p->hop_per_stage, kf, vf, ke, ve);
    CHECK_MSG(vf == split_prefix_walk_ns(p, kf), "%s: the value returned is not the chosen candidate's walk", what);
    return walked;
}

/* contiguous stages as model_stage_layers cuts them */
static void stages(int L, int S, int *stage_of)
{
    ModelSpec m = {.layers = L};
    ModelLayout ly = {.m = &m, .pp = S, .tp = 1};
    for (int s = 0; s < S; s++) {
        int first, count;
        model_stage_layers(&ly, s, &first, &count);
        for (int l = first; l < first + count; l++) stage_of[l] = s;
    }
}

TEST(split_prefix_best_matches_exhaustive_on_synthetic_costs)
{
    static const int Ls[] = {1, 2, 3, 7, 32, 40, 80};
    static const int Ss[] = {1, 2, 3, 4, 8};
    /* per-layer times in ns: equal recompute and load times (every split ties on compute), equal
     * hops, zero hops (DRAM), zero H2D, and IO far slower or faster than compute */
    static const double recs[] = {1.0e6, 2.5e6, 3.0e6};
    static const double loads[] = {1.0e6, 1.7e6};
    static const double hops[] = {0, 1.0e6, 2.2e6, 9.0e6};
    static const double h2ds[] = {0, 1.0e6, 0.3e6, 4.0e6};
    static const double starts[] = {0, 2.0e6};
    int stage_of[KV_MAX_LAYERS];
    long cases = 0, walked = 0, all = 0;
    for (size_t a = 0; a < KV_ARRAY_LEN(Ls); a++)
        for (size_t b = 0; b < KV_ARRAY_LEN(Ss); b++) {
            int L = Ls[a], S = Ss[b];
            if (S > L) continue;
            stages(L, S, stage_of);
            for (int per = 0; per < 2; per++)
                for (size_t i = 0; i < KV_ARRAY_LEN(recs); i++)
                    for (size_t j = 0; j < KV_ARRAY_LEN(loads); j++)
                        for (size_t h = 0; h < KV_ARRAY_LEN(hops); h++)
                            for (size_t d = 0; d < KV_ARRAY_LEN(h2ds); d++)
                                for (size_t s = 0; s < KV_ARRAY_LEN(starts); s++) {
                                    SplitPrefix p = {.L = L, .stage_of = stage_of, .hop_per_stage = per, .rec = recs[i],
                                                     .load = loads[j], .hop = hops[h], .h2d = h2ds[d], .start = starts[s]};
                                    walked += same_choice(t, &p, L, "grid");
                                    all += L + 1;
                                    cases++;
                                    if (L > 2) same_choice(t, &p, L / 2, "grid, fewer candidates");
                                }
        }
    /* costs with no common factor (ties only by rounding), from a fixed generator */
    uint64_t x = 88172645463325252ULL;
    for (int r = 0; r < 4000; r++) {
        double u[6];
        for (int q = 0; q < 6; q++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u[q] = (double)(x >> 11) / 9007199254740992.0;
        }
        int L = 1 + (int)(u[0] * 96), S = 1 + (int)(u[5] * 6);
        if (S > L) S = L;
        stages(L, S, stage_of);
        SplitPrefix p = {.L = L, .stage_of = stage_of, .hop_per_stage = r & 1, .rec = 1e5 + u[1] * 5e6,
                         .load = 1e5 + u[2] * 3e6, .hop = (r & 2) ? 0 : u[3] * 8e6, .h2d = u[4] * 4e6,
                         .start = (r & 4) ? 2e6 : 0};
        walked += same_choice(t, &p, L, "random");
        all += L + 1;
        cases++;
    }
    /* the search walks few candidates: most are ruled out by their bound */
    CHECK_MSG(walked * 4 < all, "%ld candidates walked of %ld over %ld searches", walked, all, cases);
    /* a stage in two runs of layers, or a negative cost: the exhaustive search, the same choice */
    for (int l = 0; l < 8; l++) stage_of[l] = l % 2;
    SplitPrefix p = {.L = 8, .stage_of = stage_of, .rec = 2e6, .load = 1e6, .hop = 1.5e6, .h2d = 0.5e6, .start = 2e6};
    CHECK_EQ_I(same_choice(t, &p, 8, "interleaved stages"), 9);
    stages(8, 1, stage_of);
    p.rec = -1;
    CHECK_EQ_I(same_choice(t, &p, 8, "negative cost"), 9);
}

static double stub_layer(void *core, int64_t n, int64_t c) { return 1000.0 * (double)(n + c); }
static double stub_load(void *core, Tier tier, int64_t tokens, double bpt, double bpt_gpu) { return 0; }

/* costs of real models from the cost model: the new input's layer with and without a recomputed
 * history (split_iter_costs), loads of the history's KV or hidden states over a tier's channel
 * (none for DRAM) and the stage's H2D link at several bandwidths */
TEST(split_prefix_best_matches_exhaustive_on_model_costs)
{
    static const struct {
        const char *platform, *model;
    } worlds[] = {{"hcache-a100", "Llama-2-7B"}, {"hcache-a100", "Llama-2-13B"}, {"cacheflow-a100-10g", "Llama-3.1-8B"}};
    static const int64_t Ns[] = {64, 700, 1500, 4096, 8000, 20000, 65536};
    static const int64_t ns[] = {1, 64, 512};
    static const double h2d_bw[] = {12.0e9, 25.0e9};            /* PCIe */
    static const double chan_bw[] = {1.25e9, 3.0e9, 12.0e9, 50e9}; /* NIC / SSD array */
    static const int pps[] = {1, 2, 4};
    long walked = 0, all = 0;
    for (size_t wi = 0; wi < KV_ARRAY_LEN(worlds); wi++) {
        SimConfig c;
        SimWorld w;
        KvErr e;
        simtest_iso_config(t, &c, 1000, 100, worlds[wi].platform, worlds[wi].model);
        if (sim_world_open(&w, &c, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        PolicyEnv env = {.ly = &w.ly, .hw = &w.hw, .platform = w.platform, .cost = &w.cost, .iter_overhead_ns = 2000000,
                         .token_budget = 512, .est_layer_ns = stub_layer, .est_load_layer_ns = stub_load};
        int L = w.model->layers;
        double kv = (double)model_kv_bytes_per_token_layer(&w.ly), hid = (double)model_hidden_bytes_per_token_layer(&w.ly);
        for (size_t pi = 0; pi < KV_ARRAY_LEN(pps); pi++) {
            int stage_of[KV_MAX_LAYERS];
            stages(L, pps[pi], stage_of);
            for (size_t a = 0; a < KV_ARRAY_LEN(Ns); a++)
                for (size_t b = 0; b < KV_ARRAY_LEN(ns); b++) {
                    IterCosts ic;
                    split_iter_costs(&env, Ns[a], ns[b], &ic);
                    double N = (double)Ns[a];
                    for (int form = 0; form < 2; form++) /* KV (rec vs plain), hidden states (rec vs hid) */
                        for (int tier = 0; tier < 3; tier++) /* DRAM: no channel; SSD: shared; remote: also per stage */
                            for (size_t hb = 0; hb < KV_ARRAY_LEN(h2d_bw); hb++)
                                for (size_t cb = 0; cb < (tier ? KV_ARRAY_LEN(chan_bw) : 1); cb++)
                                    for (int per = 0; per < (tier == 2 ? 2 : 1); per++) {
                                        double bpt = form ? hid : kv;
                                        SplitPrefix p = {.L = L, .stage_of = stage_of, .hop_per_stage = per, .rec = ic.rec,
                                                         .load = form ? ic.hid : ic.plain,
                                                         .hop = tier ? 20e3 + N * bpt / chan_bw[cb] * 1e9 : 0,
                                                         .h2d = 10e3 + N * bpt / h2d_bw[hb] * 1e9, .start = 2e6};
                                        walked += same_choice(t, &p, L, w.model->name);
                                        all += L + 1;
                                    }
                }
        }
        sim_world_close(&w);
    }
    CHECK_MSG(walked * 4 < all, "%ld candidates walked of %ld", walked, all);
}
