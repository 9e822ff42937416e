/* test_restore.c — restore.c's rules on isolated requests (tests/simtest.h): a layer-wise KV load's
 * pipeline against its closed form (from DRAM, from the SSD array's two hops, compute-bound GQA);
 * where a history's bytes are read from when a save is still in flight (a store without a DRAM tier
 * has no host copy: the restoration waits for the landing, or recomputes when that is slower). */
#include <math.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"

#define keep_row simtest_keep_row
#define iso_config simtest_iso_config
#define lin simtest_lin

static void check_offload(TestCtx *t, int64_t n0, int64_t n1, const char *platform, const char *model, const char *store,
                          const char *want_from)
{
    SimConfig c;
    iso_config(t, &c, n0, n1, platform, model);
    simtest_set(t, &c, "store", store);
    if (!strcmp(want_from, "ssd") || !strcmp(want_from, "cxl")) c.dram_bytes = 1; /* every save spills down */
    if (!strcmp(want_from, "cxl")) simtest_set(t, &c, "n_cxl", "2");
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    Rows rows = {0};
    SimResult res;
    CHECK_MSG(sim_run(&w, "kv-offload", keep_row, &rows, NULL, NULL, &res, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        SimRequestRow *r = &rows.rows[1];
        CHECK_STR(r->restore_from, want_from);
        int64_t H = n0 + 1;
        double L = w.model->layers;
        const LinkSpec *link = &w.hw.links[w.platform->link];
        ModelLayout *ly = &w.ly;
        double per_gpu = (double)H * (double)model_kv_bytes_per_token_layer_gpu(ly);
        double per_layer = (double)H * (double)model_kv_bytes_per_token_layer(ly);
        double t_h2d = (double)link->latency_ns + per_gpu / link->h2d_bytes_per_s * 1e9, t_io = t_h2d, other = 0;
        if (!strcmp(want_from, "ssd")) { /* two hops: the slower sets the pace, the other adds once */
            const SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
            double t_ssd = (double)sd->read_latency_ns + per_layer / (sd->read_bytes_per_s * w.platform->n_ssd) * 1e9;
            t_io = t_ssd > t_h2d ? t_ssd : t_h2d;
            other = t_ssd > t_h2d ? t_h2d : t_ssd;
        }
        if (!strcmp(want_from, "cxl")) { /* likewise over the CXL link, the modules interleaved */
            const MemdevSpec *x = &w.hw.memdevs[MEMDEV_CXL][0];
            double t_cxl = (double)x->latency_ns + per_layer / (x->read_bytes_per_s * 2) * 1e9;
            t_io = t_cxl > t_h2d ? t_cxl : t_h2d;
            other = t_cxl > t_h2d ? t_h2d : t_cxl;
        }
        double t_c = lin(&w, n1) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, n1, H, 0);
        double O = 2e6;
        int k = t_io > t_c ? (int)ceil(L * (1 - t_c / t_io) - 1e-9) : 0;
        /* two-stage pipeline: the first load, then the slower stage L times, then the other's tail;
         * the iteration cannot start before k layers arrived plus its host overhead */
        double pipe = (t_io > t_c ? L * t_io + t_c : t_io + L * t_c) + other;
        double start = (k ? k * t_io + other : 0) + O + L * t_c;
        double want = pipe > start ? pipe : start;
        CHECK_NEAR((double)r->ttft_ns, want, 0.01, 0);
        CHECK_EQ_I(r->loaded_tokens, H);
        CHECK_EQ_I(r->queue_ns + r->restore_ns + r->prefill_ns, r->ttft_ns);
    }
    CHECK_NEAR(res.saved_bytes_per_token, (double)model_kv_bytes_per_token(&w.ly), 0, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(restore_layer_wise_from_dram_closed_form)
{
    check_offload(t, 8000, 200, "hcache-a100", "Llama-2-7B", "dram", "dram");
}

TEST(restore_layer_wise_gqa_compute_bound_closed_form)
{
    /* GQA: small KV per token, loads faster than compute → t_io + L·t_c */
    check_offload(t, 4000, 2000, "hcache-a100", "Llama-3.1-8B", "dram", "dram");
}

TEST(restore_layer_wise_from_ssd_closed_form)
{
    check_offload(t, 8000, 200, "hcache-a100", "Llama-2-7B", "dram+ssd", "ssd");
}

TEST(restore_layer_wise_from_cxl_closed_form)
{
    check_offload(t, 8000, 200, "hcache-a100", "Llama-2-7B", "dram,cxl,ssd", "cxl");
}

/* Whole-request onboarding (kv-offload.layerwise=false, likewise kv-quant's): the history is loaded
 * in chunk_size-token chunks of every layer, two in flight, before the new input is prefilled.
 * Isolated, with K equal chunks over two hops (tier, then H2D) the slower hop sets the pace:
 * K·max + min, each hop's bytes those of the stored form (kv-quant: × bits/16 + 1/d_h); then the
 * iteration: TTFT = load + O + L·(t_c + t_dq), t_dq the dequantize of the history per layer
 * (kv-quant only), which ends the restoration at the head of the last layer. The same request
 * loaded layer by layer is never slower. bits 0: kv-offload. */
static void check_whole(TestCtx *t, const char *store, const char *want_from, int64_t chunk, int bits)
{
    const int64_t n0 = 8191, n1 = 200, H = n0 + 1; /* H = 32 chunks of 256 */
    const char *pol = bits ? "kv-quant" : "kv-offload";
    double ttft[2] = {0, 0};
    for (int whole = 0; whole < 2; whole++) {
        SimConfig c;
        iso_config(t, &c, n0, n1, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", store);
        if (!strcmp(want_from, "ssd") || !strcmp(want_from, "cxl")) c.dram_bytes = 1;
        if (!strcmp(want_from, "cxl")) simtest_set(t, &c, "n_cxl", "1");
        char key[64], b[32];
        if (bits) {
            snprintf(b, sizeof b, "%d", bits);
            simtest_set(t, &c, "kv-quant.bits", b);
        }
        if (whole) {
            snprintf(key, sizeof key, "%s.layerwise", pol);
            simtest_set(t, &c, key, "false");
            snprintf(key, sizeof key, "%s.chunk_size", pol);
            snprintf(b, sizeof b, "%lld", (long long)chunk);
            simtest_set(t, &c, key, b);
        }
        SimWorld w;
        KvErr e;
        CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
        Rows rows = {0};
        SimResult res;
        CHECK_MSG(sim_run(&w, pol, keep_row, &rows, NULL, NULL, &res, &e) == 0, "%s", e.msg);
        CHECK_EQ_I(rows.n, 2);
        if (rows.n == 2) {
            SimRequestRow *r = &rows.rows[1];
            CHECK_STR(r->restore_from, want_from);
            CHECK_EQ_I(r->loaded_tokens, H);
            CHECK_EQ_I(r->recomputed_tokens, 0);
            CHECK_EQ_I(r->queue_ns + r->restore_ns + r->prefill_ns, r->ttft_ns);
            CHECK(r->lb_restore_ns <= (double)r->restore_ns);
            ttft[whole] = (double)r->ttft_ns;
            if (whole) {
                double L = w.model->layers, K = (double)(H / chunk);
                double scale = bits ? bits / 16.0 + 1.0 / w.model->head_dim : 1;
                const LinkSpec *link = &w.hw.links[w.platform->link];
                double bytes_gpu = (double)chunk * L * (double)model_kv_bytes_per_token_layer_gpu(&w.ly) * scale;
                double bytes = (double)chunk * L * (double)model_kv_bytes_per_token_layer(&w.ly) * scale;
                double h = (double)link->latency_ns + bytes_gpu / link->h2d_bytes_per_s * 1e9, load = K * h;
                if (!strcmp(want_from, "ssd")) {
                    const SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
                    double s = (double)sd->read_latency_ns + bytes / (sd->read_bytes_per_s * w.platform->n_ssd) * 1e9;
                    load = s > h ? K * s + h : s + K * h;
                }
                if (!strcmp(want_from, "cxl")) {
                    const MemdevSpec *x = &w.hw.memdevs[MEMDEV_CXL][0];
                    double s = (double)x->latency_ns + bytes / x->read_bytes_per_s * 1e9;
                    load = s > h ? K * s + h : s + K * h;
                }
                double t_c = lin(&w, n1) + cost_lookup_ns(&w.cost, OP_ATTN_PREFILL, n1, H, 0), dq = 0;
                if (bits) {
                    CHECK(cost_has(&w.cost, OP_DEQUANT));
                    dq = cost_lookup_ns(&w.cost, OP_DEQUANT, H, 0, 0);
                }
                double want = load + 2e6 + L * (t_c + dq);
                /* within 1 us: the channels' whole-nanosecond events and the walk's per-layer rounding */
                CHECK_NEAR((double)r->ttft_ns, want, 0, 1000);
                CHECK_NEAR((double)r->restore_ns, bits ? load + 2e6 + (L - 1) * (t_c + dq) + dq : load, 0, 1000);
                CHECK_NEAR(res.ch_bytes[CH_H2D][CH_READ], (double)H * (double)model_kv_bytes_per_token(&w.ly) * scale, 1e-9, 0);
            }
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
    CHECK_MSG(ttft[0] <= ttft[1], "%s from %s: layer-wise %.6f ms, whole %.6f ms", pol, want_from, ttft[0] / 1e6, ttft[1] / 1e6);
}

TEST(restore_whole_request_from_dram_closed_form)
{
    check_whole(t, "dram", "dram", 256, 0);
}

TEST(restore_whole_request_from_ssd_closed_form)
{
    check_whole(t, "dram+ssd", "ssd", 256, 0);
}

TEST(restore_whole_request_from_cxl_closed_form)
{
    check_whole(t, "dram+cxl", "cxl", 256, 0);
}

TEST(restore_whole_request_one_chunk_of_everything)
{
    check_whole(t, "dram", "dram", 8192, 0);
}

/* kv-quant.layerwise=false: the quantized bytes in chunks, then the prefill with its dequantizes */
TEST(restore_whole_request_quantized_closed_form)
{
    for (int bits = 4; bits <= 8; bits += 4) {
        check_whole(t, "dram", "dram", 256, bits);
        check_whole(t, "dram+ssd", "ssd", 512, bits);
        check_whole(t, "dram", "dram", 8192, bits);
    }
}

/* Layer-wise never slower than whole-request for kv-quant, on a grid of histories (short, where the
 * early start and per-chunk latencies dominate, to long) and bandwidths (DRAM over PCIe, the SSD
 * array, a remote store over 10 and 100 GbE) */
TEST(restore_whole_request_quantized_never_faster_than_layer_wise)
{
    static const struct {
        const char *store, *nic, *from;
    } bw[] = {{"dram", NULL, "dram"}, {"dram+ssd", NULL, "ssd"}, {"dram+remote", "10GbE", "remote"}, {"dram+remote", "100GbE", "remote"}};
    static const int64_t hist[] = {300, 2999, 12000};
    int runs = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(bw); i++)
        for (size_t j = 0; j < KV_ARRAY_LEN(hist); j++)
            for (int bits = 4; bits <= 8; bits += 4) {
                int64_t ttft[2] = {0, 0};
                for (int whole = 0; whole < 2; whole++) {
                    SimConfig c;
                    iso_config(t, &c, hist[j], 300, "hcache-a100", "Llama-3.1-8B");
                    simtest_set(t, &c, "store", bw[i].store);
                    if (bw[i].nic) simtest_set(t, &c, "nic", bw[i].nic);
                    if (strcmp(bw[i].from, "dram")) c.dram_bytes = 1; /* every save spills down */
                    simtest_set(t, &c, "kv-quant.bits", bits == 4 ? "4" : "8");
                    if (whole) simtest_set(t, &c, "kv-quant.layerwise", "false");
                    SimWorld w;
                    Rows rows;
                    SimResult res;
                    if (simtest_run(t, &c, "kv-quant", &w, &rows, &res) != 0) return;
                    CHECK_EQ_I(rows.n, 2);
                    if (rows.n == 2) {
                        CHECK_STR(rows.rows[1].restore_from, bw[i].from);
                        CHECK_EQ_I(rows.rows[1].loaded_tokens, hist[j] + 1);
                        ttft[whole] = rows.rows[1].ttft_ns;
                        runs++;
                    }
                    sim_result_free(&res);
                    sim_world_close(&w);
                }
                CHECK_MSG(ttft[0] <= ttft[1], "%s %s, %lld tokens, %d bit: layer-wise %.6f ms, whole %.6f ms", bw[i].store,
                          bw[i].nic ? bw[i].nic : "", (long long)hist[j] + 1, bits, ttft[0] / 1e6, ttft[1] / 1e6);
            }
    CHECK_EQ_I(runs, 2 * 2 * (int)(KV_ARRAY_LEN(bw) * KV_ARRAY_LEN(hist)));
}

/* chunk_size belongs to whole-request loading: set alone it is refused, naming the knob it needs
 * (kv-offload's and kv-quant's alike); kv-quant.adaptive, whose level is chosen per layer, is
 * refused with whole-request loading */
static void check_refused(TestCtx *t, const char *policy, const char *const *kv, const char *want)
{
    SimConfig c;
    iso_config(t, &c, 1000, 100, "hcache-a100", "Llama-2-7B");
    for (int i = 0; kv[i]; i += 2) simtest_set(t, &c, kv[i], kv[i + 1]);
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    SimResult res;
    CHECK(sim_run(&w, policy, NULL, NULL, NULL, NULL, &res, &e) != 0);
    CHECK_MSG(strstr(e.msg, want) != NULL, "%s: %s", policy, e.msg);
    sim_world_close(&w);
}

TEST(restore_whole_request_chunk_size_needs_layerwise_false)
{
    const char *off[] = {"kv-offload.chunk_size", "512", NULL}, *q[] = {"kv-quant.chunk_size", "512", NULL};
    check_refused(t, "kv-offload", off, "kv-offload.layerwise=false");
    check_refused(t, "kv-quant", q, "kv-quant.layerwise=false");
    const char *qa[] = {"kv-quant.adaptive", "true", "kv-quant.layerwise", "false", NULL};
    check_refused(t, "kv-quant", qa, "kv-quant.adaptive=true with kv-quant.layerwise=false");
}

/* A store without a DRAM tier (store=remote) has no host copy a restoration may read: the host
 * buffer a save crosses on its way to the NIC is not a tier. The next turn, arriving while the save
 * is still in flight, waits for it to land in the remote store and loads it from there (every
 * restored byte over the NIC: net_in = h2d), or recomputes when that wait is estimated slower. With a
 * DRAM tier (store=dram+remote) the same turn reads the DRAM copy (nothing over the NIC). */
static void in_flight_no_dram(TestCtx *t, const char *store, const char *nic, const char *want_from, int over_nic)
{
    SimConfig c;
    simtest_iso_config(t, &c, 4096, 100, "cake-a100", "Llama-2-13B");
    c.think_ns = 0;
    simtest_set(t, &c, "store", store);
    simtest_set(t, &c, "nic", nic);
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "kv-offload", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) CHECK_MSG(!strcmp(rows.rows[1].restore_from, want_from), "store=%s nic=%s: restore_from %s, wanted %s", store, nic,
                               rows.rows[1].restore_from, want_from);
    if (!strcmp(want_from, "in-flight")) {
        CHECK_EQ_I((long long)res.restore_waits, 1);
        CHECK(res.ch_bytes[CH_H2D][CH_READ] > 0);
        if (over_nic) CHECK_MSG(res.ch_bytes[CH_NIC_IN][CH_READ] == res.ch_bytes[CH_H2D][CH_READ], "net_in %.0f, h2d %.0f", res.ch_bytes[CH_NIC_IN][CH_READ], res.ch_bytes[CH_H2D][CH_READ]);
        else CHECK_MSG(res.ch_bytes[CH_NIC_IN][CH_READ] == 0, "net_in %.0f with a DRAM copy", res.ch_bytes[CH_NIC_IN][CH_READ]);
    } else {
        CHECK_EQ_I((long long)res.fallback_slower, 1); /* the wait to land was estimated slower: counted */
        CHECK(res.ch_bytes[CH_NIC_IN][CH_READ] == 0);
    }
    sim_result_free(&res);
    sim_world_close(&w);
}

TEST(restore_no_dram_tier_no_host_copy_read)
{
    in_flight_no_dram(t, "remote", "400G", "in-flight", 1);   /* waits for the landing, loads over the NIC */
    in_flight_no_dram(t, "remote", "32Gbps", "recompute", 0); /* landing 3.4 GB at 4 GB/s: slower than recomputing */
    in_flight_no_dram(t, "dram+remote", "400G", "in-flight", 0); /* a DRAM tier: its copy is read */
}
