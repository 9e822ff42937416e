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
static void stages_of(int L, int S, int *stage_of, int *first, int *count)
{
    ModelSpec m = {.layers = L};
    ModelLayout ly = {.m = &m, .pp = S, .tp = 1};
    for (int s = 0; s < S; s++) {
        model_stage_layers(&ly, s, &first[s], &count[s]);
        for (int l = first[s]; l < first[s] + count[s]; l++) stage_of[l] = s;
    }
}

static void stages(int L, int S, int *stage_of)
{
    int first[KV_MAX_STAGES], count[KV_MAX_STAGES];
    stages_of(L, S, stage_of, first, count);
}

/* the candidates the exhaustive stage search walks */
static int stages_candidates(const SplitStages *p)
{
    int n = 0, m = 0;
    for (int s = 0; s < p->S; s++) n += 2 * (p->count[s] + 1), m = p->count[s] > m ? p->count[s] : m;
    return n + m + 1;
}

static int same_stages(TestCtx *t, const SplitStages *p, const char *what)
{
    int ef[KV_MAX_STAGES] = {0}, ee[KV_MAX_STAGES] = {0}, walked = 0;
    double vf = split_stages_best(p, ef, &walked);
    double ve = split_stages_best_exhaustive(p, ee);
    int same = memcmp(&vf, &ve, sizeof vf) == 0;
    for (int s = 0; s < p->S; s++) same = same && ef[s] == ee[s];
    CHECK_MSG(same,
              "%s: L=%d S=%d plain=%.17g load=%.17g lane=%.17g ag=%.17g hop=%.17g h2d=%.17g bnd=%.17g/%.17g per-stage=%d: "
              "fast %d,%d.. %.17g, exhaustive %d,%d.. %.17g",
              what, p->L, p->S, p->plain, p->load, p->rec_lane, p->ag, p->hop, p->h2d, p->bnd_hop, p->bnd_h2d,
              p->hop_per_stage, ef[0], ef[1], vf, ee[0], ee[1], ve);
    CHECK_MSG(vf == split_stages_walk_ns(p, ef), "%s: the value returned is not the chosen splits' walk", what);
    return walked;
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
    p.rec = 2e6, p.h2d = 1e-310; /* subnormal: its rounding is not relative */
    CHECK_EQ_I(same_choice(t, &p, 8, "subnormal cost"), 9);
}

/* the engine's layer estimate recomputed from the cost model (as test_policies.c does) */
static double world_layer(void *core, int64_t n, int64_t c)
{
    SimWorld *w = core;
    if (n < 1) n = 1;
    return simtest_lin(w, n) + cost_lookup_ns(&w->cost, OP_ATTN_PREFILL, n, c, 0);
}
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
    long walked = 0, all = 0, swalked = 0, sall = 0;
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
                         .token_budget = 512, .core = &w, .est_layer_ns = world_layer, .est_load_layer_ns = stub_load};
        int L = w.model->layers;
        double kv = (double)model_kv_bytes_per_token_layer(&w.ly), hid = (double)model_hidden_bytes_per_token_layer(&w.ly);
        for (size_t pi = 0; pi < KV_ARRAY_LEN(pps); pi++) {
            int stage_of[KV_MAX_LAYERS], first[KV_MAX_STAGES], count[KV_MAX_STAGES];
            stages_of(L, pps[pi], stage_of, first, count);
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
                                        if (pps[pi] == 1) continue;
                                        /* the stage-parallel split: boundary activations (hidden
                                         * states of one layer) ahead of the KV, an all-gather or none */
                                        SplitStages q = {.L = L, .S = pps[pi], .stage_of = stage_of, .first = first,
                                                         .count = count, .hop_per_stage = per, .plain = ic.plain,
                                                         .load = p.load, .rec_lane = ic.rec_lane, .ag = form ? 3e4 : 0,
                                                         .hop = p.hop, .h2d = p.h2d, .bnd_hop = tier ? 20e3 + N * hid / chan_bw[cb] * 1e9 : 0,
                                                         .bnd_h2d = 10e3 + N * hid / h2d_bw[hb] * 1e9, .start = 2e6};
                                        swalked += same_stages(t, &q, w.model->name);
                                        sall += stages_candidates(&q);
                                    }
                }
        }
        sim_world_close(&w);
    }
    CHECK_MSG(walked * 4 < all, "%ld candidates walked of %ld", walked, all);
    CHECK_MSG(swalked * 4 < sall, "stage-parallel: %ld candidates walked of %ld", swalked, sall);
}

TEST(split_stages_best_matches_exhaustive_on_synthetic_costs)
{
    static const int Ls[] = {2, 3, 8, 40, 80};
    static const int Ss[] = {2, 3, 4, 8};
    static const double plains[] = {0.4e6, 1.0e6};
    static const double lanes[] = {0, 1.0e6, 2.5e6};
    static const double hops[] = {0, 1.0e6, 3.0e6};
    static const double h2ds[] = {0, 1.0e6, 0.4e6};
    static const double bnds[] = {0, 0.5e6, 4.0e6};
    int stage_of[KV_MAX_LAYERS], first[KV_MAX_STAGES], count[KV_MAX_STAGES];
    long walked = 0, all = 0;
    for (size_t a = 0; a < KV_ARRAY_LEN(Ls); a++)
        for (size_t b = 0; b < KV_ARRAY_LEN(Ss); b++) {
            int L = Ls[a], S = Ss[b];
            if (S > L) continue;
            stages_of(L, S, stage_of, first, count);
            for (int per = 0; per < 2; per++)
                for (size_t i = 0; i < KV_ARRAY_LEN(plains); i++)
                    for (size_t r = 0; r < KV_ARRAY_LEN(lanes); r++)
                        for (size_t h = 0; h < KV_ARRAY_LEN(hops); h++)
                            for (size_t d = 0; d < KV_ARRAY_LEN(h2ds); d++)
                                for (size_t bh = 0; bh < KV_ARRAY_LEN(bnds); bh++)
                                    for (int ag = 0; ag < 2; ag++) {
                                        /* load = plain: loaded and recomputed layers cost the same
                                         * in the walk (ties); bnd_h2d from the same grid, shifted */
                                        SplitStages p = {.L = L, .S = S, .stage_of = stage_of, .first = first,
                                                         .count = count, .hop_per_stage = per, .plain = plains[i],
                                                         .load = (h & 1) ? plains[i] : 0.6e6, .rec_lane = lanes[r],
                                                         .ag = ag ? 0.2e6 : 0, .hop = hops[h], .h2d = h2ds[d],
                                                         .bnd_hop = bnds[bh], .bnd_h2d = bnds[(bh + 1) % 3], .start = 2e6 * ag};
                                        walked += same_stages(t, &p, "grid");
                                        all += stages_candidates(&p);
                                    }
        }
    uint64_t x = 2463534242ULL;
    for (int r = 0; r < 3000; r++) {
        double u[10];
        for (int q = 0; q < 10; q++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u[q] = (double)(x >> 11) / 9007199254740992.0;
        }
        int L = 2 + (int)(u[0] * 90), S = 2 + (int)(u[1] * 7);
        if (S > L) S = L;
        stages_of(L, S, stage_of, first, count);
        SplitStages p = {.L = L, .S = S, .stage_of = stage_of, .first = first, .count = count, .hop_per_stage = r & 1,
                         .plain = 1e5 + u[2] * 1e6, .load = 1e5 + u[3] * 1e6, .rec_lane = u[4] * 4e6,
                         .ag = (r & 2) ? u[5] * 1e5 : 0, .hop = (r & 4) ? 0 : u[6] * 4e6, .h2d = u[7] * 2e6,
                         .bnd_hop = (r & 4) ? 0 : u[8] * 8e6, .bnd_h2d = u[9] * 4e6, .start = (r & 8) ? 2e6 : 0};
        walked += same_stages(t, &p, "random");
        all += stages_candidates(&p);
    }
    CHECK_MSG(walked * 4 < all, "%ld candidates walked of %ld", walked, all);
    /* stages out of layer order: the exhaustive search */
    for (int l = 0; l < 8; l++) stage_of[l] = l < 4 ? 1 : 0;
    first[0] = 4, first[1] = 0, count[0] = count[1] = 4;
    SplitStages p = {.L = 8, .S = 2, .stage_of = stage_of, .first = first, .count = count, .plain = 1e6, .load = 0.5e6,
                     .rec_lane = 1e6, .hop = 1e6, .h2d = 0.5e6, .bnd_hop = 1e6, .bnd_h2d = 0.5e6, .start = 2e6};
    CHECK_EQ_I(same_stages(t, &p, "stages out of order"), stages_candidates(&p));
}
