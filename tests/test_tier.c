/* test_tier.c — tier.c's rules on isolated requests (tests/simtest.h): a restoration's loads parked
 * on a save still crossing D2H wait for it (counted) and read the host copy; saved state unused for
 * state_ttl is dropped and counted as lost (TTL), and state over the last tier's capacity is dropped
 * and counted (capacity); SAVE_DIRECT's small writes on the critical path cost the TBT the HCache
 * paper reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/engine_int.h"
#include "sim/engine/sim.h"
#include "tests/harness.h"
#include "tests/simtest.h"

/* the in-flight case named: kv-offload's turn-end save of a long history is still crossing D2H
 * when the next turn comes; the restoration waits for it (counted) and loads it from DRAM */
TEST(tier_load_waits_parked_for_a_save_in_flight)
{
    SimConfig c;
    simtest_iso_config(t, &c, 16383, 32, "h200", "Llama-2-7B");
    c.think_ns = 0;
    simtest_set(t, &c, "store", "dram");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "kv-offload", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        CHECK_STR(rows.rows[1].restore_from, "in-flight");
        CHECK_EQ_I(rows.rows[1].loaded_tokens, 16384);
    }
    CHECK_EQ_I((long long)res.restore_waits, 1);
    CHECK(res.restore_wait_ns > 0);
    CHECK_EQ_I((long long)res.fallbacks, 0);
    /* the window covers the restoration; the GPU and H2D were busy in it */
    CHECK(res.win_ns > 0);
    CHECK(res.win_util_ch[CH_H2D][0] > 0 && res.win_util_ch[CH_H2D][0] <= 1 + 1e-9);
    CHECK(res.win_util_gpu[0] > 0 && res.win_util_gpu[0] <= 1 + 1e-9);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* the state dropped (state_ttl shorter than the think time): counted as lost and recomputed */
TEST(tier_ttl_drop_counted_as_lost)
{
    SimConfig c;
    simtest_iso_config(t, &c, 2047, 32, "h200", "Llama-2-7B");
    simtest_set(t, &c, "store", "dram");
    simtest_set(t, &c, "state_ttl", "1 s");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "kv-offload", &w, &rows, &res) != 0) return;
    if (rows.n == 2) CHECK_STR(rows.rows[1].restore_from, "recompute");
    CHECK_EQ_I((long long)res.state_lost_ttl, 1);
    CHECK_EQ_I((long long)res.fallbacks, 1);
    CHECK_EQ_I((long long)res.fallback_uncovered, 1);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* the last tier full (DRAM of 1 MB, no tier to spill to): each turn's saved state (2 MB and more) is
 * dropped once it lands, counted as lost to capacity (both turns: 2), and the next turn recomputes
 * its history */
TEST(tier_capacity_drop_counted_as_lost)
{
    SimConfig c;
    simtest_iso_config(t, &c, 2047, 32, "h200", "Llama-2-7B");
    simtest_set(t, &c, "store", "dram");
    simtest_set(t, &c, "dram", "1 MB");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "kv-offload", &w, &rows, &res) != 0) return;
    CHECK_EQ_I(rows.n, 2);
    if (rows.n == 2) {
        CHECK_STR(rows.rows[1].restore_from, "recompute");
        CHECK_EQ_I(rows.rows[1].recomputed_tokens, 2048);
        CHECK_EQ_I(rows.rows[1].loaded_tokens, 0);
    }
    CHECK_EQ_I((long long)res.state_lost_capacity, 2);
    CHECK_EQ_I((long long)res.state_lost_ttl, 0);
    CHECK_EQ_I((long long)res.fallback_uncovered, 1);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* mean TBT of 16 sessions decoding together on the HCache box, hcache with its two-stage saves vs
 * direct writes from the critical path */
static double tbt16(TestCtx *t, const char *save_mode)
{
    char csv[4096];
    int n = snprintf(csv, sizeof csv, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 0; i < 16; i++) n += snprintf(csv + n, sizeof csv - (size_t)n, "s%d,0,0,1024,256,0\n", i);
    SimConfig c;
    sim_config_defaults(&c);
    snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, "b16.csv", csv));
    snprintf(c.platform, sizeof c.platform, "hcache-a100");
    snprintf(c.model, sizeof c.model, "Llama-2-7B");
    simtest_set(t, &c, "store", "dram+ssd");
    simtest_set(t, &c, "save_mode", save_mode);
    c.quiet = 1;
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "hcache", &w, &rows, &res) != 0) return -1;
    double v = res.tbt_mean_ns;
    sim_result_free(&res);
    sim_world_close(&w);
    return v;
}

/* HCache's paper: writing hidden states directly from the critical path costs +34 % TBT at batch 16
 * on Llama2-7B; small writes (a D2H copy and an SSD write IO per 64-token piece per layer, one write in
 * flight per drive) land near that, not at the +8–16 % of one bulk write per iteration */
TEST(tier_direct_save_small_writes_cost_tbt)
{
    double two = tbt16(t, "iteration"), direct = tbt16(t, "direct");
    if (two <= 0 || direct <= 0) return;
    double inc = direct / two - 1;
    CHECK_MSG(inc > 0.25 && inc < 0.50, "direct writes: TBT %.3f ms vs two-stage %.3f ms (+%.1f %%)", direct / 1e6, two / 1e6,
              inc * 100);
}

/* A save's write to the SSD array pays the drive's write latency per transfer, not its read latency:
 * the same run with the write latency 1 s longer keeps the array busy a whole number (>= 1) of
 * seconds longer (one per save or spill transfer) and moves the same bytes. */
TEST(tier_ssd_write_pays_the_write_latency)
{
    double busy[2] = {0, 0}, bytes[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        SimConfig c;
        simtest_iso_config(t, &c, 8000, 32, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", "dram+ssd");
        c.dram_bytes = 1; /* every save spills to the SSD array */
        SimWorld w;
        KvErr e;
        CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
        SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
        CHECK(sd->write_latency_ns != sd->read_latency_ns);
        if (k) sd->write_latency_ns += 1000000000;
        SimResult res;
        CHECK_MSG(sim_run(&w, "kv-offload", NULL, NULL, NULL, NULL, &res, &e) == 0, "%s", e.msg);
        busy[k] = res.util_ch[CH_SSD][0] * (double)res.sim_end_ns;
        bytes[k] = res.ch_bytes[CH_SSD][CH_WRITE];
        sim_result_free(&res);
        sim_world_close(&w);
    }
    double extra = (busy[1] - busy[0]) / 1e9;
    CHECK(extra > 0.5);
    CHECK_NEAR(extra, floor(extra + 0.5), 0, 1e-3);
    CHECK(bytes[0] > 0);
    CHECK_NEAR(bytes[1], bytes[0], 0, 0);
}

/* SSD wear: the bytes written per drive per simulated day over its capacity, and the rated
 * endurance (dwpd × warranty years of drive writes) at that rate; absent without an SSD tier and,
 * for the life, without a rating. */
TEST(tier_ssd_wear_closed_form_and_absent)
{
    for (int k = 0; k < 3; k++) {
        SimConfig c;
        simtest_iso_config(t, &c, 8000, 32, "hcache-a100", "Llama-2-7B");
        simtest_set(t, &c, "store", k == 2 ? "dram" : "dram+ssd");
        c.dram_bytes = 1; /* every save spills to the SSD array */
        SimWorld w;
        KvErr e;
        CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
        SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
        if (k == 1) sd->dwpd = 0; /* not rated */
        SimResult res;
        CHECK_MSG(sim_run(&w, "kv-offload", NULL, NULL, NULL, NULL, &res, &e) == 0, "%s", e.msg);
        if (k == 2) {
            CHECK(isnan(res.ssd_dwpd) && isnan(res.ssd_life_years));
        } else {
            double per_day = res.ch_bytes[CH_SSD][CH_WRITE] / w.platform->n_ssd * 86400e9 / (double)res.sim_end_ns;
            CHECK(res.ch_bytes[CH_SSD][CH_WRITE] > 0);
            CHECK_NEAR(res.ssd_dwpd, per_day / (double)sd->capacity_bytes, 1e-12, 0);
            if (k == 0) {
                CHECK(sd->dwpd > 0 && sd->warranty_years > 0);
                CHECK_NEAR(res.ssd_life_years, sd->dwpd * sd->warranty_years / res.ssd_dwpd, 1e-12, 0);
            } else {
                CHECK(isnan(res.ssd_life_years));
            }
        }
        sim_result_free(&res);
        sim_world_close(&w);
    }
}

/* the tier tests' box: isolated 8,000-token turns of Llama-2-7B on h200 from `text`, chain `store`,
 * 6 GB of DRAM (one session's state, 4.2 GB, not two), one SSD, no state_ttl */
static void one_session_tiers(TestCtx *t, SimConfig *c, const char *file, const char *text, const char *store)
{
    simtest_iso_config(t, c, 8000, 32, "h200", "Llama-2-7B");
    snprintf(c->trace, sizeof c->trace, "%s", test_write_file(t, file, text));
    simtest_set(t, c, "store", store);
    c->dram_bytes = 6000000000ULL;
    c->n_ssd = 1;
    c->state_ttl_ns = 0;
}

/* A chain of tiers: K sessions saved one after another, each tier holding one session's state,
 * then each comes back in the same order (a cyclic pattern under LRU). With K = 1 the state is
 * still in DRAM; with K = 2 it was demoted once (SSD, or the remote store when that comes second);
 * K = 3 reaches the third tier, K = 4 a fourth (CXL memory, the SSD array and the remote store
 * below DRAM); past the end of the chain it is recomputed (dropped for capacity). A shorter chain
 * drops where the next tier would have held it. */
static const char *chain_run(TestCtx *t, const char *store, int K, int row, int promote, Rows *out_rows, SimResult *out)
{
    char text[1024];
    int len = snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int k = 0; k < K; k++) len += snprintf(text + len, sizeof text - (size_t)len, "s%d,0,%d,8000,1,0\n", k, 30 * k);
    for (int k = 0; k < K; k++)
        len += snprintf(text + len, sizeof text - (size_t)len, "s%d,1,%d,32,1,8001\n", k, 30 * (K + k));
    SimConfig c;
    one_session_tiers(t, &c, "chain.csv", text, store);
    c.n_memdev[MEMDEV_CXL] = 1;
    c.promote = promote;
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    w.hw.ssds[w.platform->ssd].capacity_bytes = 6000000000ULL; /* likewise */
    w.hw.memdevs[MEMDEV_CXL][0].capacity_bytes = 6000000000ULL;
    w.hw.platforms[w.platform - w.hw.platforms].remote_bytes = 6000000000ULL; /* and the remote store */
    memset(out_rows, 0, sizeof *out_rows);
    CHECK_MSG(sim_run(&w, "kv-offload", simtest_keep_row, out_rows, NULL, NULL, out, &e) == 0, "%s", e.msg);
    sim_world_close(&w);
    return row < out_rows->n ? out_rows->rows[row].restore_from : "?";
}

static const char *chain_from(TestCtx *t, const char *store, int K, int row, Rows *out_rows, SimResult *out)
{
    return chain_run(t, store, K, row, 0, out_rows, out);
}

TEST(tier_chain_cyclic_sessions_reach_down_the_chain)
{
    static const struct {
        const char *store;
        const char *want[5];
    } cases[] = {
        {"dram,cxl,ssd,remote", {"dram", "cxl", "ssd", "remote", "recompute"}},
        {"dram+ssd+cxl", {"dram", "ssd", "cxl", "recompute", "recompute"}},
        {"dram,ssd,remote", {"dram", "ssd", "remote", "recompute", "recompute"}},
        {"dram+remote+ssd", {"dram", "remote", "ssd", "recompute", "recompute"}},
        {"dram+ssd", {"dram", "ssd", "recompute", "recompute", "recompute"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int K = 1; K <= 5; K++) {
            Rows rows;
            SimResult res;
            /* the first session's second turn: row K (rows in order of completion: the K first turns first) */
            const char *got = chain_from(t, cases[i].store, K, K, &rows, &res);
            CHECK_MSG(!strcmp(got, cases[i].want[K - 1]), "store %s, %d sessions: restored from %s, expected %s", cases[i].store, K,
                      got, cases[i].want[K - 1]);
            if (!strcmp(cases[i].want[K - 1], "recompute")) CHECK(res.state_lost_capacity >= 1);
            else CHECK_EQ_I((long long)res.state_lost_capacity, 0);
            sim_result_free(&res);
        }
}

/* A spill out of the SSD array reads there at the drive's read rate and writes over the NIC: the
 * SSD's bytes read and the NIC's bytes written both carry it. */
TEST(tier_chain_spill_from_ssd_reads_the_array_and_writes_the_nic)
{
    Rows rows;
    SimResult res;
    chain_from(t, "dram+ssd+remote", 3, 3, &rows, &res);
    CHECK(res.ch_bytes[CH_NIC_OUT][CH_READ] > 0);
    CHECK(res.ch_bytes[CH_SSD][CH_READ] >= res.ch_bytes[CH_NIC_OUT][CH_READ]); /* the spill's read, and the restoration's of the K = 2 session */
    CHECK(res.ch_bytes[CH_SSD][CH_WRITE] > 0);
    sim_result_free(&res);
}

/* promote=true: the first session's second turn reads its state from the SSD and moves it up to
 * DRAM, which sends the second session's state down; that session's second turn then reads the SSD.
 * Without promotion the first session's state stays on the SSD and the second's in DRAM. */
TEST(tier_chain_promotion_moves_a_restored_state_up)
{
    for (int promote = 0; promote < 2; promote++) {
        Rows rows;
        SimResult res;
        const char *first = chain_run(t, "dram+ssd", 2, 2, promote, &rows, &res);
        const char *second = rows.n > 3 ? rows.rows[3].restore_from : "?";
        CHECK_STR(first, "ssd");
        CHECK_STR(second, promote ? "ssd" : "dram");
        CHECK_EQ_I((long long)res.promoted, promote ? 2 : 0);
        CHECK_EQ_I((long long)res.state_lost_capacity, 0);
        sim_result_free(&res);
    }
}

/* kv-offload on an open world with the walker at every iteration boundary; the world closed */
static void kv_offload_walked(TestCtx *t, SimWorld *w, Rows *rows, SimResult *out)
{
    KvErr e;
    memset(rows, 0, sizeof *rows);
    sim_test_set_hook(NULL, NULL, 1);
    CHECK_MSG(sim_run(w, "kv-offload", simtest_keep_row, rows, NULL, NULL, out, &e) == 0, "%s", e.msg);
    sim_test_set_hook(NULL, NULL, 0);
    sim_world_close(w);
}

/* K sessions of one 8,000-token turn, 30 s apart (then, with again, each one's second turn in the
 * same order), chain `store`, DRAM and the SSD each holding one session's state; write_through as
 * given. The SSD's write rate and per-IO latency (one drive) come back in rate_w, lat_w. */
static void wt_run(TestCtx *t, const char *store, int K, int again, int write_through, Rows *rows, SimResult *out, double *rate_w,
                   double *lat_w)
{
    char text[1024];
    int len = snprintf(text, sizeof text, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int k = 0; k < K; k++) len += snprintf(text + len, sizeof text - (size_t)len, "s%d,0,%d,8000,1,0\n", k, 30 * k);
    for (int k = 0; k < K && again; k++)
        len += snprintf(text + len, sizeof text - (size_t)len, "s%d,1,%d,32,1,8001\n", k, 30 * (K + k));
    SimConfig c;
    one_session_tiers(t, &c, "wt.csv", text, store);
    simtest_set(t, &c, "write_through", write_through ? "true" : "false");
    SimWorld w;
    KvErr e;
    memset(out, 0, sizeof *out);
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
    sd->capacity_bytes = 6000000000ULL;
    *rate_w = (double)sd->write_bytes_per_s / 1e9;
    *lat_w = (double)sd->write_latency_ns;
    kv_offload_walked(t, &w, rows, out);
}

/* write_through=true on dram,ssd: the one session's save lands in DRAM and is copied to the SSD at
 * once (the run ends when the copy lands: bytes ÷ the drive's write rate + its write latency after
 * the write-back run's end, which is the save's landing); write-back writes nothing to the SSD while
 * DRAM has room. */
TEST(tier_write_through_copies_a_save_down_at_save_time)
{
    Rows rows;
    SimResult wb, wt;
    double rate_w, lat_w;
    wt_run(t, "dram,ssd", 1, 0, 0, &rows, &wb, &rate_w, &lat_w);
    wt_run(t, "dram,ssd", 1, 0, 1, &rows, &wt, &rate_w, &lat_w);
    double bytes = wt.policy_saved_bytes;
    CHECK(bytes > 4e9);
    CHECK_NEAR(wb.policy_saved_bytes, bytes, 0, 0);
    CHECK_NEAR(wb.ch_bytes[CH_SSD][CH_WRITE], 0, 0, 0);
    CHECK_NEAR(wt.ch_bytes[CH_SSD][CH_WRITE], bytes, 0, 0);
    CHECK_EQ_I((long long)(wt.sim_end_ns - wb.sim_end_ns), (long long)ceil(bytes / rate_w + lat_w - 1e-9));
    CHECK_NEAR(wb.tier_written_bytes[TIER_DRAM], bytes, 0, 0);
    CHECK_NEAR(wb.tier_written_bytes[TIER_SSD], 0, 0, 0);
    CHECK_NEAR(wt.tier_written_bytes[TIER_SSD], bytes, 0, 0);
    CHECK(isnan(wt.tier_written_bytes[TIER_REMOTE]) && isnan(wt.write_amp[TIER_CXL]));
    sim_result_free(&wb);
    sim_result_free(&wt);
}

/* Two sessions, DRAM holding one: the second's save demotes the first to the SSD. Write-back writes
 * the first's state there then: one state of the two saved, SSD amplification 1/2 (DRAM's 1);
 * write-through wrote both at save time and the demotion writes nothing more: amplification 1 on
 * both. With the sessions' second turns, the first reads the SSD and the second DRAM either way. */
TEST(tier_write_through_demotion_writes_nothing_and_write_amplification)
{
    for (int wtk = 0; wtk < 2; wtk++) {
        Rows rows;
        SimResult res;
        double rate_w, lat_w;
        wt_run(t, "dram,ssd", 2, 0, wtk, &rows, &res, &rate_w, &lat_w);
        double saved = res.policy_saved_bytes, one = saved / 2;
        CHECK(one > 4e9);
        CHECK_NEAR(res.tier_written_bytes[TIER_DRAM], saved, 0, 0);
        CHECK_NEAR(res.ch_bytes[CH_SSD][CH_WRITE], wtk ? saved : one, 1e-12, 0);
        CHECK_NEAR(res.tier_written_bytes[TIER_SSD], wtk ? saved : one, 1e-12, 0);
        CHECK_NEAR(res.write_amp[TIER_DRAM], 1, 0, 0);
        CHECK_NEAR(res.write_amp[TIER_SSD], wtk ? 1 : 0.5, 1e-12, 0);
        CHECK_EQ_I((long long)res.state_lost_capacity, 0);
        sim_result_free(&res);
        wt_run(t, "dram,ssd", 2, 1, wtk, &rows, &res, &rate_w, &lat_w);
        CHECK_EQ_I(rows.n, 4);
        if (rows.n == 4) {
            CHECK_STR(rows.rows[2].restore_from, "ssd");
            CHECK_STR(rows.rows[3].restore_from, "dram");
        }
        sim_result_free(&res);
    }
}

/* nothing saved (recompute saves nothing): no write amplification, not a 0 */
TEST(tier_write_amplification_absent_without_saves)
{
    SimConfig c;
    simtest_iso_config(t, &c, 2047, 32, "h200", "Llama-2-7B");
    simtest_set(t, &c, "store", "dram,ssd");
    SimWorld w;
    Rows rows;
    SimResult res;
    if (simtest_run(t, &c, "recompute", &w, &rows, &res) != 0) return;
    CHECK_NEAR(res.policy_saved_bytes, 0, 0, 0);
    CHECK(isnan(res.write_amp[TIER_DRAM]) && isnan(res.write_amp[TIER_SSD]));
    CHECK_NEAR(res.tier_written_bytes[TIER_DRAM], 0, 0, 0);
    sim_result_free(&res);
    sim_world_close(&w);
}

/* prefetch: s0's state goes to the SSD when s1's turn (30 s) fills DRAM; s0's second turn comes
 * `gap_s` after s1's. With big_dram nothing is demoted (the DRAM-read reference). The SSD's read
 * rate (bytes per ns, one drive) and latency come back in rate_r, lat_r. */
static void pf_run(TestCtx *t, int gap_s, int prefetch, int64_t lead_ns, int big_dram, Rows *rows, SimResult *out, double *rate_r,
                   double *lat_r)
{
    char text[512];
    snprintf(text, sizeof text,
             "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
             "s0,0,0,8000,1,0\ns1,0,30,8000,1,0\ns0,1,%d,32,1,8001\n",
             30 + gap_s);
    SimConfig c;
    one_session_tiers(t, &c, "pf.csv", text, "dram,ssd");
    c.prefetch = prefetch;
    c.prefetch_lead_ns = lead_ns;
    if (big_dram) c.dram_bytes = 60000000000ULL;
    SimWorld w;
    KvErr e;
    memset(out, 0, sizeof *out);
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    SsdSpec *sd = &w.hw.ssds[w.platform->ssd];
    *rate_r = (double)sd->read_bytes_per_s / 1e9;
    *lat_r = (double)sd->read_latency_ns;
    kv_offload_walked(t, &w, rows, out);
}

static int64_t pf_ttft(const Rows *rows, const char **from)
{
    for (int i = 0; i < rows->n; i++)
        if (rows->rows[i].turn == 1) {
            *from = rows->rows[i].restore_from;
            return rows->rows[i].ttft_ns;
        }
    *from = "?";
    return -1;
}

/* A state on the SSD and a think time longer than its read: prefetched during the think time, the
 * restoration reads DRAM (the TTFT of a state never demoted). A lead shorter than the read: the
 * restoration waits for the rest of the move (read time − lead) and then reads DRAM: a TTFT between
 * that and the SSD read's. Without prefetch it reads the SSD. */
TEST(tier_prefetch_during_think_time_closed_form)
{
    Rows rows;
    SimResult res;
    double rate_r, lat_r;
    const char *from;
    pf_run(t, 30, 0, 0, 1, &rows, &res, &rate_r, &lat_r); /* the DRAM reference */
    int64_t dram = pf_ttft(&rows, &from);
    CHECK_STR(from, "dram");
    sim_result_free(&res);
    pf_run(t, 30, 0, 0, 0, &rows, &res, &rate_r, &lat_r); /* demoted, no prefetch */
    int64_t ssd = pf_ttft(&rows, &from);
    CHECK_STR(from, "ssd");
    CHECK_EQ_I((long long)res.prefetched, 0);
    sim_result_free(&res);
    pf_run(t, 30, 1, 0, 0, &rows, &res, &rate_r, &lat_r); /* prefetched in time (lead: the read's own time) */
    int64_t early = pf_ttft(&rows, &from);
    CHECK_STR(from, "dram");
    CHECK_EQ_I((long long)res.prefetched, 1);
    CHECK_EQ_I((long long)early, (long long)dram);
    double moved = res.ch_bytes[CH_SSD][CH_READ]; /* the prefetch's read, the only one */
    CHECK(moved > 4e9);
    int64_t t_read = (int64_t)ceil(moved / rate_r + lat_r - 1e-9);
    sim_result_free(&res);
    int64_t lead = t_read / 4;
    pf_run(t, 30, 1, lead, 0, &rows, &res, &rate_r, &lat_r); /* a quarter of the read overlaps the think time */
    int64_t late = pf_ttft(&rows, &from);
    CHECK_STR(from, "dram");
    CHECK_EQ_I((long long)res.prefetched, 1);
    CHECK_MSG(dram < late && late < ssd, "TTFT %lld ns, between %lld (DRAM) and %lld (SSD)", (long long)late, (long long)dram, (long long)ssd);
    CHECK_MSG(llabs(late - (t_read - lead + dram)) <= 1000, "TTFT %lld ns, the read's rest %lld + DRAM's %lld", (long long)late,
              (long long)(t_read - lead), (long long)dram);
    sim_result_free(&res);
}

/* s0's state on the SSD array; s1's first turn ends (its save flushing to the array) just before
 * s0's second turn restores from it. Returns s0's restore time; the array's bytes read and written
 * in rd, wr. mixed: the drive's mixed_efficiency (0: not given). */
static int64_t mix_run(TestCtx *t, double mixed, double *rd, double *wr)
{
    SimConfig c;
    simtest_iso_config(t, &c, 8000, 32, "hcache-a100", "Llama-2-7B");
    snprintf(c.trace, sizeof c.trace, "%s",
             test_write_file(t, "mix.csv",
                             "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                             "s0,0,0,8000,1,0\ns1,0,4.3,8000,1,0\ns0,1,5,32,2,8001\n"));
    simtest_set(t, &c, "store", "dram+ssd");
    c.dram_bytes = 1; /* every save spills to the SSD array */
    SimWorld w;
    KvErr e;
    CHECK_MSG(sim_world_open(&w, &c, &e) == 0, "%s", e.msg);
    w.hw.ssds[w.platform->ssd].mixed_efficiency = mixed;
    Rows rows;
    SimResult res;
    kv_offload_walked(t, &w, &rows, &res);
    int64_t restore = -1;
    for (int i = 0; i < rows.n; i++)
        if (rows.rows[i].turn == 1) {
            CHECK_STR(rows.rows[i].restore_from, "ssd");
            restore = rows.rows[i].restore_ns;
        }
    *rd = res.ch_bytes[CH_SSD][CH_READ];
    *wr = res.ch_bytes[CH_SSD][CH_WRITE];
    sim_result_free(&res);
    return restore;
}

/* The drive's mixing share reaches the run: a restore that reads the array while another
 * session's save flushes there takes longer with mixed_efficiency 0.5 than by taking turns, and
 * the same as taking turns with 1 (the value that means none); the bytes moved are the same. */
TEST(tier_ssd_mixing_slows_a_restore_beside_a_save)
{
    double rd[3], wr[3];
    int64_t turns = mix_run(t, 0, &rd[0], &wr[0]), one = mix_run(t, 1, &rd[1], &wr[1]), half = mix_run(t, 0.5, &rd[2], &wr[2]);
    CHECK(turns > 0);
    CHECK_EQ_I((long long)one, (long long)turns);
    CHECK_MSG(half > turns, "restore %lld ns with mixed_efficiency 0.5, %lld ns taking turns", (long long)half, (long long)turns);
    CHECK(rd[0] > 4e9 && wr[0] > 8e9);
    for (int k = 1; k < 3; k++) {
        CHECK_NEAR(rd[k], rd[0], 0, 0);
        CHECK_NEAR(wr[k], wr[0], 0, 0);
    }
}
