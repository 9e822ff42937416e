/* test_execute.c — the schedule emitter (sim/engine/schedule_out.c), its reader (calibrate/schedule.c)
 * and the replay (calibrate/execute.c): a tiny case end to end with a loose bound, the dependency
 * order, results unchanged by the emitter, and the reader's errors; the cuda replay where a device
 * is (exec_cuda_*: skipped without one, run by make gpu-check, which fails on a skip; make
 * test-fakegpu runs them on the host stand-in tests/fakegpu/fake_gpu.c, which reports one device)
 * and its clean refusal where none is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate/execute.h"
#include "calibrate/schedule.h"
#include "kernels/gpu.h"
#include "tests/simtest.h"

/* emit the schedule of `policy` on the isolated case (Tiny-Llama-V, n0 history, pp pipeline
 * stages); the state on the SSD, or (dram_tier) in a DRAM tier large enough for it */
static int emit_tier(TestCtx *t, const char *policy, int64_t n0, const char *pp, int dram_tier, const char *path, Rows *rows,
                     SimResult *res)
{
    SimConfig c;
    simtest_iso_config(t, &c, n0, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "dram", dram_tier ? "1 GB" : "1 MB"); /* 1 MB: the history spills to the SSD tier */
    simtest_set(t, &c, "store", dram_tier ? "dram" : "dram+ssd");
    simtest_set(t, &c, "pp", pp);
    SimWorld w;
    sim_schedule_set_path(path);
    int rc = simtest_run(t, &c, policy, &w, rows, res);
    sim_schedule_set_path(NULL);
    if (rc == 0) sim_world_close(&w);
    return rc;
}

static int emit_pp(TestCtx *t, const char *policy, int64_t n0, const char *pp, const char *path, Rows *rows, SimResult *res)
{
    return emit_tier(t, policy, n0, pp, 0, path, rows, res);
}

static int emit(TestCtx *t, const char *policy, int64_t n0, const char *path, Rows *rows, SimResult *res)
{
    return emit_pp(t, policy, n0, "1", path, rows, res);
}

/* the replay's execute.json written to the test's directory as `name` (exec_write_json must succeed) */
static void write_json(TestCtx *t, const Schedule *s, const ExecResult *r, const char *path, const char *name)
{
    char jp[600];
    snprintf(jp, sizeof jp, "%s/%s", test_tmpdir(t), name);
    FILE *f = fopen(jp, "w");
    CHECK(f && exec_write_json(f, s, r, path) == 0);
    if (f) fclose(f);
}

/* emit_tier, then the schedule read back into *s (0; -1: a failure, already reported) */
static int emit_load_tier(TestCtx *t, const char *policy, int64_t n0, const char *pp, int dram_tier, const char *path, Schedule *s)
{
    Rows rows;
    SimResult res;
    if (emit_tier(t, policy, n0, pp, dram_tier, path, &rows, &res) != 0) return -1;
    sim_result_free(&res);
    KvErr e;
    CHECK_MSG(schedule_load(s, path, &e) == 0, "%s", e.msg);
    return t->failures ? -1 : 0;
}

static int emit_load(TestCtx *t, const char *policy, int64_t n0, const char *pp, const char *path, Schedule *s)
{
    return emit_load_tier(t, policy, n0, pp, 0, path, s);
}

/* run `policy` on config c with its schedule emitted to `path`, then read it back into *s (0; -1: a
 * failure, already reported) */
static int emit_config_load(TestCtx *t, SimConfig *c, const char *policy, const char *path, Schedule *s)
{
    SimWorld w;
    Rows rows;
    SimResult res;
    sim_schedule_set_path(path);
    int rc = simtest_run(t, c, policy, &w, &rows, &res);
    sim_schedule_set_path(NULL);
    if (rc != 0) return -1;
    sim_world_close(&w);
    sim_result_free(&res);
    KvErr e;
    CHECK_MSG(schedule_load(s, path, &e) == 0, "%s", e.msg);
    return t->failures ? -1 : 0;
}

TEST(execute_emit_load_replay_kv_offload)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvo.jsonl", test_tmpdir(t));
    Schedule s;
    if (emit_load(t, "kv-offload", 255, "1", path, &s) != 0) return;
    KvErr e;
    CHECK(!strcmp(s.model, "Tiny-Llama-V") && !strcmp(s.policy, "kv-offload"));
    CHECK_EQ_I(s.layers, 8);
    CHECK_EQ_I(s.n_reqs, 2);
    CHECK_EQ_I(s.n_units, 8); /* one load per layer, from the SSD */
    for (int i = 0; i < s.n_units; i++) {
        CHECK_EQ_I(s.units[i].layer, i);
        CHECK_EQ_I(s.units[i].tier, SCH_TIER_SSD);
        CHECK_EQ_I(s.units[i].nhops, 2);
        CHECK(s.units[i].hop[0].end_ns <= s.units[i].hop[1].start_ns);
    }
    /* the layer-wise iteration: layer l waits for unit l + 1 and starts after it landed */
    int seen = 0;
    for (int k = 0; k < s.n_iters; k++) {
        const SchIter *it = &s.iters[k];
        if (!it->items[0].lw) continue;
        seen = 1;
        for (int l = 0; l < s.layers; l++) {
            CHECK_EQ_I(it->layers[l].nwaits, 1);
            CHECK_EQ_U(it->layers[l].waits[0], (uint64_t)l + 1);
            CHECK(it->layers[l].start_ns >= s.units[l].hop[1].end_ns);
        }
    }
    CHECK(seen);
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK_EQ_I(r.n_units, 8);
        CHECK_EQ_I(r.n_reqs, 1);
        CHECK(r.deps_ok);
        CHECK(r.reqs[0].ttft_ns > 0 && r.reqs[0].restore_ns > 0);
        CHECK(r.reqs[0].restore_ns <= r.reqs[0].ttft_ns);
        for (int k = 0; k < r.n_iters; k++) CHECK(r.iter_ns[k] > 0);
        CHECK(!strstr(r.note, "spinning")); /* auto: one stage sleeps while it waits for its units */
        write_json(t, &s, &r, path, "execute.json");
        exec_result_free(&r);
    }
    schedule_free(&s);
}

/* kv-quant.layerwise=false: the whole quantized history in one 256-token chunk from the SSD, then the
 * iteration of the new input dequantizes it at the head of every layer, after the chunk landed; the
 * schedule reads back and replays */
TEST(execute_kv_quant_whole_request_replay)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvq-whole.jsonl", test_tmpdir(t));
    SimConfig c;
    simtest_iso_config(t, &c, 255, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "store", "dram+ssd");
    c.dram_bytes = 1; /* the history spills to the SSD tier */
    simtest_set(t, &c, "kv-quant.layerwise", "false");
    Schedule s;
    if (emit_config_load(t, &c, "kv-quant", path, &s) != 0) return;
    KvErr e;
    CHECK_EQ_I(s.n_reqs, 2);
    CHECK_STR(s.reqs[1].restore, "whole");
    CHECK_EQ_I(s.n_units, 1);
    if (s.n_units == 1) {
        CHECK_MSG(s.units[0].tokwise && s.units[0].tier == SCH_TIER_SSD, "unit: tokwise %d, tier %d, %lld bytes", s.units[0].tokwise, s.units[0].tier, (long long)s.units[0].bytes);
        CHECK_EQ_I(s.units[0].tok_hi - s.units[0].tok_lo, 256);
    }
    int seen = 0;
    for (int k = 0; k < s.n_iters && s.n_units == 1; k++) {
        const SchIter *it = &s.iters[k];
        if (it->items[0].req != s.reqs[1].id || !it->items[0].lw) continue;
        seen++;
        CHECK(it->start_ns >= s.units[0].hop[s.units[0].nhops - 1].end_ns);
        for (int l = 0; l < s.layers; l++) {
            CHECK_EQ_I(it->layers[l].nwork, 1);
            CHECK_EQ_I(it->layers[l].nwaits, 0);
            if (it->layers[l].nwork == 1) {
                CHECK_EQ_I(it->layers[l].work[0].op, SCH_WORK_DEQUANT);
                CHECK_EQ_I(it->layers[l].work[0].tokens, 256);
            }
        }
    }
    CHECK_EQ_I(seen, 1);
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok);
        CHECK(r.n_reqs == 1 && r.reqs[0].ttft_ns > 0);
        exec_result_free(&r);
    }
    schedule_free(&s);
}

TEST(execute_recompute_and_hcache_replay)
{
    const char *pols[] = {"recompute", "hcache"};
    for (int p = 0; p < 2; p++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.jsonl", test_tmpdir(t), pols[p]);
        Schedule s;
        if (emit_load(t, pols[p], 127, "1", path, &s) != 0) return;
        KvErr e;
        if (p == 1) { /* hidden states: the layer-wise iteration projects them */
            int proj = 0;
            for (int k = 0; k < s.n_iters; k++)
                for (int l = 0; l < s.layers; l++)
                    for (int w = 0; w < s.iters[k].layers[l].nwork; w++) proj += s.iters[k].layers[l].work[w].op == SCH_WORK_PROJECTION;
            CHECK(proj > 0);
        }
        ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
        ExecResult r;
        CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s: %s", pols[p], e.msg);
        if (!t->failures) {
            CHECK(r.deps_ok);
            CHECK(r.n_reqs == 1 && r.reqs[0].ttft_ns > 0);
            exec_result_free(&r);
        }
        schedule_free(&s);
    }
}

/* S = 2: hcache-cf restores stage 1's first layers from its boundary activation in stage 1's lane
 * while stage 0 loads and projects its hidden states; emitted, read back and replayed on two stage
 * threads */
TEST(execute_two_stages_with_lanes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/pp2.jsonl", test_tmpdir(t));
    Schedule s;
    if (emit_load(t, "hcache-cf", 255, "2", path, &s) != 0) return;
    KvErr e;
    CHECK_EQ_I(s.stages, 2);
    CHECK(s.stage_first[0] == 0 && s.stage_first[1] == 4 && s.stage_first[2] == 8);
    CHECK(schedule_stage_of(&s, 3) == 0 && schedule_stage_of(&s, 4) == 1);
    int lanes = 0, bnd = 0;
    for (int k = 0; k < s.n_iters; k++) {
        const SchIter *it = &s.iters[k];
        for (int j = 0; j < it->nlanes; j++) {
            const SchLane *ln = &it->lanes[j];
            lanes++;
            CHECK_EQ_I(ln->stage, 1); /* stage 0's layers are loaded; stage 1 recomputes its first ones */
            CHECK_EQ_I(schedule_stage_of(&s, ln->layer), ln->stage);
            CHECK_EQ_I(ln->tokens, 256);
        }
        /* the emitted order is the engine's: an iteration starts only after its after_units landed
         * (a stage-parallel item joins at once: its boundary activations gate its lanes, not the start) */
        for (int j = 0; j < it->nafter; j++) {
            const SchUnit *u = &s.units[it->after_units[j] - 1];
            CHECK_MSG(u->hop[u->nhops - 1].end_ns <= it->start_ns, "iteration %llu starts before its after_unit %llu landed",
                      (unsigned long long)it->id, (unsigned long long)u->id);
        }
    }
    for (int i = 0; i < s.n_units; i++) /* the boundary activation: hidden states of stage 1's first layer, to stage 1 */
        if (s.units[i].layer == 4 && s.units[i].state == SCH_STATE_HIDDEN) {
            bnd++;
            CHECK_EQ_I(s.units[i].stage, 1);
        }
    CHECK(lanes >= 1);
    CHECK(bnd >= 1);
    ExecOptions o = {"cpu", test_tmpdir(t), 2, 1, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0}; /* pinned: stage st on CPU st */
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok);
        CHECK(r.stage_ok);
        CHECK_EQ_I(r.stages, 2);
        CHECK_EQ_I(r.n_lanes, lanes);
        for (int j = 0; j < r.n_lanes; j++) CHECK(r.lane_ns[j] > 0);
        for (int k = 0; k < r.n_iters; k++) {
            CHECK(r.iter_ns[k] > 0);
            for (int l = 0; l < s.layers; l++) CHECK_EQ_I(r.layer_stage[(size_t)k * s.layers + l], l < 4 ? 0 : 1);
        }
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if (ncpu >= 2 && strstr(r.note, "stage st on CPU st")) CHECK(r.cpu_ok); /* pinned where the machine allows it */
        CHECK(r.n_reqs == 1 && r.reqs[0].ttft_ns > 0 && r.reqs[0].restore_ns > 0);
        CHECK(r.reqs[0].restore_ns <= r.reqs[0].ttft_ns);
        /* the request's restoration ends no earlier than its last lane */
        for (int j = 0; j < r.n_lanes; j++) CHECK(r.reqs[0].restored_ns >= (int64_t)r.lane_end_ns[j] - 1);
        CHECK_CONTAINS(r.note, "stage threads wait spinning"); /* auto: the cpu stages of two spin */
        write_json(t, &s, &r, path, "execute-pp2.json");
        exec_result_free(&r);
    }
    /* asleep on the condition variable instead: the same dependencies kept, every layer on its stage */
    o.wait = EXEC_WAIT_SLEEP;
    o.pin = 0;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok);
        CHECK(r.stage_ok);
        CHECK_EQ_I(r.n_lanes, lanes);
        CHECK(!strstr(r.note, "spinning"));
        exec_result_free(&r);
    }
    schedule_free(&s);
}

/* the reader checks each lane names its layer's stage and a layer-wise item of its iteration */
TEST(schedule_lanes_checked)
{
    char path[512];
    snprintf(path, sizeof path, "%s/pp2l.jsonl", test_tmpdir(t));
    Rows rows;
    SimResult res;
    if (emit_pp(t, "hcache-cf", 255, "2", path, &rows, &res) != 0) return;
    sim_result_free(&res);
    size_t len;
    KvErr e;
    char *text = kv_read_file(path, &len, &e);
    CHECK_MSG(text, "%s", e.msg);
    if (!text) return;
    char *lane = strstr(text, "\"lanes\":[{\"stage\":1,\"layer\":4");
    CHECK(lane);
    if (lane) {
        char *bad = strdup(text);
        bad[lane - text + strlen("\"lanes\":[{\"stage\":")] = '0'; /* layer 4 is stage 1's */
        const char *p = test_write_file(t, "badlane.jsonl", bad);
        Schedule s;
        CHECK(schedule_load(&s, p, &e) != 0);
        CHECK_MSG(strstr(e.msg, "field lanes[].stage: expected the stage of the lane's layer"), "got '%s'", e.msg);
        free(bad);
    }
    char *hdr = strstr(text, "\"stage_layers\":[4,4]");
    CHECK(hdr);
    if (hdr) {
        char *bad = strdup(text);
        bad[hdr - text + strlen("\"stage_layers\":[4,")] = '3';
        const char *p = test_write_file(t, "badstl.jsonl", bad);
        Schedule s;
        CHECK(schedule_load(&s, p, &e) != 0);
        CHECK_MSG(strstr(e.msg, "line 1: field stage_layers: expected layer counts that add up to layers"), "got '%s'", e.msg);
        free(bad);
    }
    free(text);
}

/* what is still not replayed is refused naming why */
/* Two replicas (two sessions arriving together: the router gives each replica one): each replica's
 * part replayed on its own, one after another; every restoring request, unit and iteration of both
 * replayed once, dependencies kept, the results in the schedule's frame; a unit that waits for
 * another replica's iteration refused, naming it; the remote tier refused */
TEST(execute_replays_each_replica_on_its_own)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvo2.jsonl", test_tmpdir(t));
    SimConfig c;
    simtest_iso_config(t, &c, 127, 16, "hcache-a100", "Tiny-Llama-V");
    const char *tr = test_write_file(t, "two.csv",
                                     "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                                     "a,0,0,127,1,0\nb,0,0,127,1,0\na,1,,16,2,128\nb,1,,16,2,128\n");
    snprintf(c.trace, sizeof c.trace, "%s", tr);
    simtest_set(t, &c, "dram", "1 MB");
    simtest_set(t, &c, "store", "dram+ssd");
    c.replicas = 2;
    Schedule s;
    KvErr e;
    if (emit_config_load(t, &c, "kv-offload", path, &s) != 0) return;
    CHECK_EQ_I(s.replicas, 2);
    int on[2] = {0, 0}, restoring = 0;
    for (int i = 0; i < s.n_reqs; i++) {
        on[s.reqs[i].replica]++;
        restoring += s.reqs[i].hist > 0;
    }
    CHECK_MSG(on[0] == 2 && on[1] == 2, "requests per replica: %d and %d (the case needs both)", on[0], on[1]);
    CHECK_EQ_I(restoring, 2);
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok);
        CHECK_EQ_I(r.n_reqs, 2);
        CHECK_EQ_I(r.n_units, 16); /* each restoration: one load per layer, from the SSD */
        CHECK_MSG(strstr(r.note, "2 of 2 replicas replayed"), "note '%s'", r.note);
        int seen_u[64] = {0}, seen_i[64] = {0}, rep_of_req[2] = {-1, -1};
        for (int k = 0; k < r.n_units && r.unit_idx[k] < 64; k++) seen_u[r.unit_idx[k]]++;
        for (int k = 0; k < r.n_iters && r.iter_idx[k] < 64; k++) seen_i[r.iter_idx[k]]++;
        for (int k = 0; k < r.n_units; k++) CHECK_EQ_I(seen_u[r.unit_idx[k]], 1);
        for (int k = 0; k < r.n_iters; k++) {
            CHECK_EQ_I(seen_i[r.iter_idx[k]], 1);
            CHECK(r.iter_ns[k] > 0);
            CHECK(r.iter_start_ns[k] >= (double)r.origin_ns);
        }
        int both = 0;
        for (int k = 0; k < r.n_iters; k++) both |= 1 << s.iters[r.iter_idx[k]].replica;
        CHECK_EQ_I(both, 3);
        for (int k = 0; k < r.n_reqs; k++) {
            const SchReq *q = &s.reqs[r.req_idx[k]];
            CHECK_EQ_U(r.reqs[k].id, q->id);
            CHECK(q->hist > 0);
            rep_of_req[k] = q->replica;
            CHECK(r.reqs[k].restore_ns > 0 && r.reqs[k].restore_ns <= r.reqs[k].ttft_ns);
        }
        CHECK(rep_of_req[0] != rep_of_req[1]);
        write_json(t, &s, &r, path, "execute2.json");
        exec_result_free(&r);
    }
    /* a unit of replica 1 made to wait for an iteration of replica 0 */
    int u1 = -1, i0 = -1;
    for (int i = 0; i < s.n_units && u1 < 0; i++)
        if (schedule_req(&s, s.units[i].req)->replica == 1) u1 = i;
    for (int i = 0; i < s.n_iters && i0 < 0; i++)
        if (s.iters[i].replica == 0) i0 = i;
    CHECK(u1 >= 0 && i0 >= 0);
    if (u1 >= 0 && i0 >= 0) {
        SchCause keep = s.units[u1].after;
        s.units[u1].after = (SchCause){SCH_CAUSE_ITER, s.iters[i0].id, 0};
        CHECK(exec_run(&s, &o, &r, &e) != 0);
        CHECK_MSG(strstr(e.msg, "(replica 1) waits for a unit or iteration of another replica"), "got '%s'", e.msg);
        s.units[u1].after = keep;
    }
    s.units[0].tier = SCH_TIER_REMOTE; /* a remote-tier unit that does not come over a NIC: a schedule that contradicts itself */
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "a remote-tier unit whose first hop is") && strstr(e.msg, "expected nic_in"), "got '%s'", e.msg);
    schedule_free(&s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the isolated case restored from the remote tier (a NIC of 10GbE to it, 1 MB of DRAM: the history
 * goes to the remote store), pp stages, nic_per_stage */
static int emit_remote(TestCtx *t, const char *policy, int64_t n0, const char *pp, int per_stage, const char *path, Schedule *s)
{
    SimConfig c;
    simtest_iso_config(t, &c, n0, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "dram", "1 MB");
    simtest_set(t, &c, "nic", "10GbE");
    simtest_set(t, &c, "store", "dram+remote");
    simtest_set(t, &c, "pp", pp);
    simtest_set(t, &c, "nic_per_stage", per_stage ? "true" : "false");
    return emit_config_load(t, &c, policy, path, s);
}

/* The remote tier replayed: every unit fetched from the remote store (a server process over TCP on
 * the loopback interface) over its NIC, then copied; with the network emulated at 16 MB/s and 200 us
 * each fetch of a layer's 128 KiB takes >= 8.4 ms and the one NIC serves them one after another, so
 * the k-th landing comes after k + 1 fetches and the restoration after 8 of them; with a NIC per stage
 * (two stages) two connections, each stage's units over its own */
TEST(execute_remote_tier_replay)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvo-remote.jsonl", test_tmpdir(t));
    Schedule s;
    if (emit_remote(t, "kv-offload", 255, "1", 0, path, &s) != 0) return;
    CHECK_EQ_I(s.nic_per_stage, 0);
    CHECK_EQ_I(s.n_units, 8);
    for (int i = 0; i < s.n_units; i++) {
        CHECK_EQ_I(s.units[i].tier, SCH_TIER_REMOTE);
        CHECK_EQ_I(s.units[i].nhops, 2);
        CHECK_EQ_I(s.units[i].hop[0].ch, SCH_CH_NIC);
        CHECK_EQ_I(s.units[i].hop[1].ch, SCH_CH_H2D);
        CHECK_EQ_I(s.units[i].bytes, 256 * 512);
    }
    KvErr e;
    const double rate = 16e6;
    const int64_t lat = 200000, hop_ns = lat + (int64_t)(256 * 512 / rate * 1e9);
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, rate, lat};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok && r.n_units == 8 && r.n_reqs == 1);
        CHECK_CONTAINS(r.note, "remote tier: a server process per NIC (1) on the loopback interface");
        CHECK_CONTAINS(r.note, "nic hops at least 200 us + bytes / 16 MB/s (emulated)");
        double land[8];
        for (int k = 0; k < 8; k++) land[k] = r.unit_end_ns[k] - (double)r.origin_ns;
        qsort(land, 8, sizeof land[0], cmp_double);
        for (int k = 0; k < r.n_units; k++) /* the one NIC serves them in turn: the k-th lands after k + 1 fetches */
            CHECK_MSG(land[k] >= 0.95 * (double)((k + 1) * hop_ns), "the %d-th unit landed at %.0f ns, after %d fetches of >= %lld", k, land[k], k + 1,
                      (long long)hop_ns);
        CHECK_MSG(r.reqs[0].restore_ns >= 8 * hop_ns * 95 / 100, "restore %lld ns, 8 fetches of >= %lld", (long long)r.reqs[0].restore_ns,
                  (long long)hop_ns);
        CHECK(r.reqs[0].restore_ns <= r.reqs[0].ttft_ns);
        write_json(t, &s, &r, path, "execute-remote.json");
        exec_result_free(&r);
    }
    /* the loopback's own speed: every unit still fetched and landed */
    ExecOptions of = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    CHECK_MSG(exec_run(&s, &of, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok && !strstr(r.note, "emulated"));
        CHECK(r.reqs[0].restore_ns > 0); /* (no upper bound: a loaded machine's loopback keeps none) */
        exec_result_free(&r);
    }
    s.units[3].hop[1].ch = SCH_CH_SSD; /* an ssd hop on a remote-tier unit */
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "unit 4: an ssd hop on a remote-tier unit"), "got '%s'", e.msg);
    s.units[3].hop[1].ch = SCH_CH_H2D;
    s.units[3].hop[0].ch = SCH_CH_H2D; /* a remote-tier unit copied without being fetched */
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "unit 4: a remote-tier unit whose first hop is h2d: expected nic_in"), "got '%s'", e.msg);
    schedule_free(&s);
    /* two stages, a NIC each */
    snprintf(path, sizeof path, "%s/kvo-remote-pp2.jsonl", test_tmpdir(t));
    if (emit_remote(t, "kv-offload", 255, "2", 1, path, &s) != 0) return;
    CHECK_EQ_I(s.nic_per_stage, 1);
    int per[2] = {0, 0};
    for (int i = 0; i < s.n_units; i++)
        if (s.units[i].stage >= 0 && s.units[i].stage < 2) per[s.units[i].stage]++;
    CHECK_MSG(per[0] > 0 && per[1] > 0, "units of stage 0: %d, stage 1: %d", per[0], per[1]);
    o.pin = 0;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok && r.stage_ok);
        CHECK_CONTAINS(r.note, "a server process per NIC (2)");
        exec_result_free(&r);
    }
    schedule_free(&s);
}

/* Cake's schedule of n sessions building `hist` tokens of history 10 s apart, then restoring them at
 * once at 100 s (16 new tokens, `out` output each) from the SSD tier, token budget 64; read back into
 * *s (0; -1: a failure, already reported) */
static int emit_cake_batch(TestCtx *t, int n, int64_t hist, int out, const char *name, Schedule *s)
{
    char path[512], text[1024] = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n", csv[64];
    for (int i = 0; i < n; i++) kv_catf(text, sizeof text, "s%d,0,%d,%lld,1,0\n", i, 10 * i, (long long)(hist - 1));
    for (int i = 0; i < n; i++) kv_catf(text, sizeof text, "s%d,1,100,16,%d,%lld\n", i, out, (long long)hist);
    snprintf(path, sizeof path, "%s/%s.jsonl", test_tmpdir(t), name);
    snprintf(csv, sizeof csv, "%s.csv", name);
    SimConfig c;
    simtest_iso_config(t, &c, hist - 1, 16, "hcache-a100", "Tiny-Llama-V");
    snprintf(c.trace, sizeof c.trace, "%s", test_write_file(t, csv, text));
    simtest_set(t, &c, "dram", "1 MB"); /* the histories spill to the SSD tier */
    simtest_set(t, &c, "store", "dram+ssd");
    simtest_set(t, &c, "token_budget", "64");
    simtest_set(t, &c, "think", "0");
    return emit_config_load(t, &c, "cake", path, s);
}

/* Three Cake restorations raced as one batch (three sessions of 384 history tokens restoring at once,
 * token budget 64): every request restored and its first token measured; each one's chunks tile its
 * own history (computed forward from 0 to its meet, loaded backward from the end to it); the
 * compute chunks that ran in one iteration (the same start and end) hold at most the budget's 64
 * tokens together; the one IO thread serves one chunk at a time; a restored request's first token
 * comes after its restoration. Refused: a batch without the requests' priorities (an older
 * schedule), and one whose loads are served in an order the race does not follow. */
TEST(execute_race_a_batch_by_the_engine_rules)
{
    Schedule s;
    KvErr e;
    if (emit_cake_batch(t, 3, 384, 3, "cake-race3", &s) != 0) return;
    CHECK_EQ_I((int)s.token_budget, 64);
    int tw = 0;
    for (int i = 0; i < s.n_reqs; i++)
        if (s.reqs[i].hist > 0) {
            tw++;
            CHECK(!strcmp(s.reqs[i].restore, "tokenwise") && s.reqs[i].has_low_prio && s.reqs[i].low_prio == 1);
        }
    CHECK_EQ_I(tw, 3);
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, 32e6, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.race && r.n_reqs == 3 && r.race_n == 3);
        for (int k = 0; k < r.n_reqs; k++) {
            const ExecReq *m = &r.reqs[k];
            int64_t fwd = 0, back = 384, io_tok = 0;
            for (int j = 0; j < r.n_chunks; j++) {
                const ExecChunk *ch = &r.chunks[j];
                if (ch->req != m->id) continue;
                if (ch->io) {
                    back = ch->lo < back ? ch->lo : back;
                    io_tok += ch->hi - ch->lo;
                } else {
                    CHECK_MSG(ch->lo == fwd, "request %llu: compute chunk [%lld, %lld) after %lld", (unsigned long long)m->id, (long long)ch->lo,
                              (long long)ch->hi, (long long)fwd);
                    fwd = ch->hi;
                }
            }
            CHECK_MSG(fwd == back && fwd + io_tok == 384 && m->meet == (double)fwd, "request %llu: computed to %lld, loaded from %lld (%lld tokens), meet %g",
                      (unsigned long long)m->id, (long long)fwd, (long long)back, (long long)io_tok, m->meet);
            CHECK(m->restore_ns > 0 && m->restored_ns <= m->first_ns); /* (causal order: the first token after the restoration) */
        }
        for (int j = 0; j < r.n_chunks; j++) {
            const ExecChunk *a = &r.chunks[j];
            if (a->io) {
                for (int k = j + 1; k < r.n_chunks; k++) /* one chunk at a time on the IO thread */
                    if (r.chunks[k].io) CHECK(r.chunks[k].start_ns >= a->end_ns || r.chunks[k].end_ns <= a->start_ns);
                continue;
            }
            int64_t tok = 0;
            for (int k = 0; k < r.n_chunks; k++)
                if (!r.chunks[k].io && r.chunks[k].start_ns == a->start_ns && r.chunks[k].end_ns == a->end_ns) tok += r.chunks[k].hi - r.chunks[k].lo;
            CHECK_MSG(tok <= 64, "an iteration of %lld restoration tokens, the budget 64", (long long)tok);
        }
        write_json(t, &s, &r, "cake-race3.jsonl", "race3.json");
        exec_result_free(&r);
    }
    s.reqs[s.n_reqs - 1].has_low_prio = 0;
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "has no low_prio: a schedule from an older kvsim"), "got '%s'", e.msg);
    s.reqs[s.n_reqs - 1].has_low_prio = 1;
    CHECK_STR(s.io_order, "fifo");
    snprintf(s.io_order, sizeof s.io_order, "policy"); /* a policy's order the race cannot follow */
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "whose loads are served in policy order"), "got '%s'", e.msg);
    schedule_free(&s);
}

/* The IO order a batch is raced in (header io_order): two Cake restorations of 1024 tokens (IO chunks
 * of 128, two in flight each, both claimed at admission): in claim order ("fifo") the second
 * request's first chunks run before the first request's third; serving the oldest request's claim
 * first ("oldest": CacheFlow's batch-aware scheduler) runs every chunk of the first request before
 * any of the second's, since it claims again at each landing while one of its chunks is queued. */
TEST(execute_race_follows_the_io_order)
{
    Schedule s;
    KvErr e;
    if (emit_cake_batch(t, 2, 1024, 2, "cake-race2", &s) != 0) return;
    CHECK_STR(s.io_order, "fifo");
    for (int order = 0; order < 2; order++) {
        snprintf(s.io_order, sizeof s.io_order, "%s", order ? "oldest" : "fifo");
        ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, 64e6, 0, 0};
        ExecResult r;
        CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
        if (t->failures) break;
        uint64_t first = r.reqs[0].id < r.reqs[1].id ? r.reqs[0].id : r.reqs[1].id;
        int64_t last_first = -1, first_other = -1; /* the start of the first request's last IO chunk, of the other's first */
        for (int j = 0; j < r.n_chunks; j++) {
            const ExecChunk *ch = &r.chunks[j];
            if (!ch->io) continue;
            if (ch->req == first && ch->start_ns > last_first) last_first = ch->start_ns;
            if (ch->req != first && (first_other < 0 || ch->start_ns < first_other)) first_other = ch->start_ns;
        }
        CHECK(last_first >= 0 && first_other >= 0);
        if (order) CHECK_MSG(last_first < first_other, "oldest first: the first request's last chunk began at %lld, the other's first at %lld",
                             (long long)last_first, (long long)first_other);
        else CHECK_MSG(first_other < last_first, "claim order: the other's first chunk began at %lld, the first request's last at %lld",
                       (long long)first_other, (long long)last_first);
        exec_result_free(&r);
    }
    schedule_free(&s);
}

/* Cake raced from the remote tier: the IO side's chunks fetched over the NIC, each taking at least
 * the emulated network's time (a 128-token chunk of 4 KiB a token: >= 52 ms at 10 MB/s); where the
 * pointers meet depends on this machine's compute speed, but the chunks tile the history either way */
TEST(execute_race_from_the_remote_tier)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cake-remote.jsonl", test_tmpdir(t));
    SimConfig c;
    simtest_iso_config(t, &c, 383, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "dram", "1 MB");
    simtest_set(t, &c, "nic", "10GbE");
    simtest_set(t, &c, "store", "dram+remote");
    simtest_set(t, &c, "token_budget", "64");
    Schedule s;
    KvErr e;
    if (emit_config_load(t, &c, "cake", path, &s) != 0) return;
    int remote = 0;
    for (int i = 0; i < s.n_units; i++) remote += s.units[i].tier == SCH_TIER_REMOTE;
    CHECK(remote > 0);
    const double rate = 10e6;
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, 0, rate, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.race && r.n_reqs == 1);
        int64_t fwd = 0, back = 384, n_io = 0;
        for (int k = 0; k < r.n_chunks; k++) {
            const ExecChunk *ch = &r.chunks[k];
            if (ch->io) {
                n_io++;
                back = ch->lo < back ? ch->lo : back;
                double want = (double)(ch->hi - ch->lo) * 4096 / rate * 1e9;
                CHECK_MSG((double)(ch->end_ns - ch->start_ns) >= 0.95 * want, "io chunk [%lld, %lld) took %lld ns, the network %.0f",
                          (long long)ch->lo, (long long)ch->hi, (long long)(ch->end_ns - ch->start_ns), want);
            } else {
                CHECK(ch->lo == fwd);
                fwd = ch->hi;
            }
        }
        CHECK(n_io > 0);
        CHECK_MSG(fwd == back && (double)fwd == r.race_meet, "computed to %lld, loaded from %lld, meet %g", (long long)fwd, (long long)back,
                  r.race_meet);
        CHECK_CONTAINS(r.note, "remote tier");
        exec_result_free(&r);
    }
    schedule_free(&s);
}

TEST(execute_emitter_leaves_results_unchanged)
{
    char path[512];
    snprintf(path, sizeof path, "%s/same.jsonl", test_tmpdir(t));
    Rows a, b;
    SimResult ra, rb;
    if (emit(t, "kv-offload", 255, path, &a, &ra) != 0) return;
    SimConfig c;
    simtest_iso_config(t, &c, 255, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "dram", "1 MB");
    simtest_set(t, &c, "store", "dram+ssd");
    SimWorld w;
    if (simtest_run(t, &c, "kv-offload", &w, &b, &rb) == 0) {
        CHECK_EQ_I(a.n, b.n);
        for (int i = 0; i < a.n && i < b.n; i++) CHECK(!memcmp(&a.rows[i].ttft_ns, &b.rows[i].ttft_ns, sizeof a.rows[i].ttft_ns));
        CHECK_EQ_U(ra.events, rb.events);
        sim_result_free(&rb);
        sim_world_close(&w);
    }
    sim_result_free(&ra);
}

/* a bad schedule is refused with the file, the line and the field */
static void bad_schedule(TestCtx *t, const char *name, const char *text, const char *want)
{
    const char *path = test_write_file(t, name, text);
    Schedule s;
    KvErr e;
    int rc = schedule_load(&s, path, &e);
    CHECK_MSG(rc != 0, "%s: accepted", name);
    if (rc == 0) {
        schedule_free(&s);
        return;
    }
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, want), "%s: got '%s', want '%s'", name, e.msg, want);
}

#define HDR                                                                                                            \
    "{\"rec\":\"header\",\"format\":\"kvsim-schedule\",\"version\":1,\"model\":\"m\",\"policy\":\"p\",\"layers\":1,"   \
    "\"stages\":1,\"tp\":1,\"replicas\":1,\"hidden\":64,\"heads\":2,\"kv_heads\":1,\"head_dim\":32,\"intermediate\":128," \
    "\"norms_per_layer\":2,\"rope\":1,\"kv_bytes_per_token_layer\":128,\"hidden_bytes_per_token_layer\":128,"             \
    "\"iter_overhead_ns\":0}\n"
#define REQ                                                                                                            \
    "{\"rec\":\"request\",\"req\":0,\"session\":0,\"turn\":0,\"hist\":0,\"new\":4,\"out\":1,\"release_ns\":0,"          \
    "\"admit_ns\":0,\"restore\":\"none\"}\n"

TEST(schedule_load_errors)
{
    bad_schedule(t, "nohdr.jsonl", REQ, "line 1: field rec: expected the header record first");
    bad_schedule(t, "notjson.jsonl", HDR "{oops\n", "line 2: expected one JSON object per line");
    bad_schedule(t, "badhist.jsonl",
                 HDR "{\"rec\":\"request\",\"req\":0,\"session\":0,\"turn\":0,\"hist\":\"x\",\"new\":4,\"out\":1,"
                     "\"release_ns\":0,\"admit_ns\":0,\"restore\":\"none\"}\n",
                 "line 2: field hist: expected an integer");
    bad_schedule(t, "trunc.jsonl", HDR REQ, "no end record");
    bad_schedule(t, "badreq.jsonl",
                 HDR REQ "{\"rec\":\"iter\",\"iter\":1,\"replica\":0,\"start_ns\":0,\"end_ns\":5,\"overhead_ns\":0,\"pre_ns\":0,"
                         "\"after\":{\"at_ns\":0},\"after_units\":[],\"items\":[{\"req\":7,\"kind\":\"prefill\",\"tokens\":4,"
                         "\"ctx\":0,\"lw\":0}],\"lanes\":[],\"layers\":[{\"layer\":0,\"start_ns\":0,\"end_ns\":5,\"ns\":5,"
                         "\"work\":[],\"waits\":[]}]}\n{\"rec\":\"end\",\"ok\":1}\n",
                 "line 3: field items[].req");
    bad_schedule(t, "badwait.jsonl",
                 HDR REQ "{\"rec\":\"iter\",\"iter\":1,\"replica\":0,\"start_ns\":0,\"end_ns\":5,\"overhead_ns\":0,\"pre_ns\":0,"
                         "\"after\":{\"at_ns\":0},\"after_units\":[],\"items\":[{\"req\":0,\"kind\":\"prefill\",\"tokens\":4,"
                         "\"ctx\":0,\"lw\":0}],\"lanes\":[],\"layers\":[{\"layer\":0,\"start_ns\":0,\"end_ns\":5,\"ns\":5,"
                         "\"work\":[],\"waits\":[3]}]}\n{\"rec\":\"end\",\"ok\":1}\n",
                 "field waits: unit 3 is not in the schedule");
    bad_schedule(t, "badkind.jsonl",
                 HDR REQ "{\"rec\":\"unit\",\"unit\":1,\"req\":0,\"session\":0,\"kind\":\"save\",\"layer\":0,\"stage\":0}\n",
                 "line 3: field kind: expected one of \"load\", \"load_tok\"");
    /* a good one loads */
    const char *ok = test_write_file(t, "ok.jsonl", HDR REQ "{\"rec\":\"end\",\"ok\":1}\n");
    Schedule s;
    KvErr e;
    CHECK_MSG(schedule_load(&s, ok, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK_EQ_I(s.n_reqs, 1);
        schedule_free(&s);
    }
}

TEST(execute_summary_is_median_or_least)
{
    int64_t a[] = {5, 1, 3}, b[] = {5, 1, 3}, c[] = {4, 2, 9, 7}, d[] = {8};
    CHECK(exec_summary_ns(a, 3, EXEC_STAT_MEDIAN) == 3.0);
    CHECK(exec_summary_ns(b, 3, EXEC_STAT_MIN) == 1.0);
    CHECK(exec_summary_ns(c, 4, EXEC_STAT_MEDIAN) == 5.5);
    CHECK(exec_summary_ns(d, 1, EXEC_STAT_MIN) == 8.0);
}

/* the state in a DRAM tier: h2d hops only (no SSD read), from host memory (cuda: pinned) */
TEST(execute_dram_tier_replay)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvo-dram.jsonl", test_tmpdir(t));
    Schedule s;
    if (emit_load_tier(t, "kv-offload", 255, "1", 1, path, &s) != 0) return;
    CHECK(s.n_units > 0);
    for (int i = 0; i < s.n_units; i++) {
        CHECK_EQ_I(s.units[i].tier, SCH_TIER_DRAM);
        CHECK_EQ_I(s.units[i].nhops, 1);
        CHECK_EQ_I(s.units[i].hop[0].ch, SCH_CH_H2D);
    }
    KvErr e;
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s", e.msg);
    if (!t->failures) {
        CHECK(r.deps_ok);
        CHECK(r.n_units == s.n_units && r.n_reqs == 1);
        CHECK(r.reqs[0].restore_ns <= r.reqs[0].ttft_ns);
        exec_result_free(&r);
    }
    schedule_free(&s);
}

/* the backend is checked: a name other than cpu or cuda is refused naming both; without a CUDA
 * device (or in a build without CUDA) --backend cuda fails naming the backend and the reason */
TEST(execute_backend_checked)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvo3.jsonl", test_tmpdir(t));
    Schedule s;
    if (emit_load(t, "kv-offload", 127, "1", path, &s) != 0) return;
    KvErr e = {{0}};
    ExecOptions o = {"tpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK(exec_run(&s, &o, &r, &e) != 0);
    CHECK_MSG(strstr(e.msg, "backend tpu: expected cpu or cuda"), "got '%s'", e.msg);
    KvErr ce = {{0}};
    if (kgpu_device_count(&ce) <= 0) {
        o.backend = "cuda";
        e.msg[0] = '\0';
        CHECK(exec_run(&s, &o, &r, &e) != 0);
        CHECK_MSG(strstr(e.msg, "execute: backend cuda: no CUDA device: "), "got '%s'", e.msg);
        CHECK(r.reqs == NULL && r.n_units == 0); /* nothing half-made is handed back */
    }
    schedule_free(&s);
}

/* one cuda replay of the schedule at `path` (policy `policy`, pp stages) and the invariants any
 * correct replay has: dependencies kept (device-side), every unit landed, every iteration a positive
 * duration, iteration starts in order, restoration no longer than TTFT, the note naming the scheme */
static void cuda_replay_case(TestCtx *t, const char *policy, int64_t n0, const char *pp, int dram_tier, int want_lanes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cuda-%s-pp%s%s.jsonl", test_tmpdir(t), policy, pp, dram_tier ? "-dram" : "");
    Schedule s;
    if (emit_load_tier(t, policy, n0, pp, dram_tier, path, &s) != 0) return;
    for (int i = 0; i < s.n_units; i++) CHECK_EQ_I(s.units[i].tier, dram_tier ? SCH_TIER_DRAM : SCH_TIER_SSD);
    KvErr e = {{0}};
    ExecOptions o = {"cuda", test_tmpdir(t), 2, 1, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s pp %s: %s", policy, pp, e.msg);
    if (t->failures) {
        schedule_free(&s);
        return;
    }
    printf("      %s pp %s: %d units, %d iterations, %d lanes; %s\n", policy, pp, r.n_units, r.n_iters, r.n_lanes, r.note);
    CHECK_MSG(r.deps_ok, "%s pp %s: a dependency was not kept: %s", policy, pp, r.deps_why);
    CHECK(r.stage_ok);
    CHECK_EQ_I(r.stages, s.stages);
    CHECK(strstr(r.note, "cuda") && strstr(r.note, "cudaMemcpyAsync from pinned memory") && strstr(r.note, "stream"));
    CHECK(r.n_units > 0 && r.n_iters > 0 && r.n_reqs >= 1);
    for (int k = 0; k < r.n_units; k++) /* landed, after the replay's start */
        CHECK_MSG(r.unit_end_ns[k] > (double)r.origin_ns, "unit %d landed at %.0f (origin %lld)", k, r.unit_end_ns[k], (long long)r.origin_ns);
    for (int k = 0; k < r.n_iters; k++) {
        CHECK_MSG(r.iter_ns[k] > 0, "iteration %d: %.0f ns", k, r.iter_ns[k]);
        if (k > 0) CHECK_MSG(r.iter_start_ns[k] >= r.iter_start_ns[k - 1], "iteration %d starts before %d", k, k - 1);
        for (int l = 0; l < s.layers; l++) CHECK_EQ_I(r.layer_stage[(size_t)k * s.layers + l], schedule_stage_of(&s, l));
    }
    if (want_lanes) CHECK(r.n_lanes >= 1);
    for (int j = 0; j < r.n_lanes; j++) CHECK(r.lane_ns[j] > 0);
    for (int k = 0; k < r.n_reqs; k++) {
        CHECK_MSG(r.reqs[k].restore_ns <= r.reqs[k].ttft_ns, "request %llu: restore %lld > ttft %lld", (unsigned long long)r.reqs[k].id,
                  (long long)r.reqs[k].restore_ns, (long long)r.reqs[k].ttft_ns);
        CHECK(r.reqs[k].ttft_ns > 0); /* (measured: no bound a busy device keeps) */
    }
    char name[96];
    snprintf(name, sizeof name, "execute-cuda-%s-pp%s%s.json", policy, pp, dram_tier ? "-dram" : "");
    write_json(t, &s, &r, path, name);
    exec_result_free(&r);
    schedule_free(&s);
}

/* With a GPU: the replay on cuda — kv-offload (SSD loads into pinned staging, h2d on the copy
 * stream, layer-wise; and from a pinned DRAM tier), hcache (hidden states projected on the device),
 * and hcache-cf on two stages (two compute streams, the activations handed over by a device copy,
 * stage 1's lanes from its boundary activation). */
TEST(exec_cuda_replays_one_and_two_stages)
{
    KvErr e = {{0}};
    int n = kgpu_device_count(&e);
    if (n == 0) SKIP("%s", e.msg);
    if (n < 0) SKIP("no CUDA device: %s", e.msg);
    cuda_replay_case(t, "kv-offload", 255, "1", 0, 0);
    cuda_replay_case(t, "kv-offload", 255, "1", 1, 0);
    cuda_replay_case(t, "hcache", 127, "1", 0, 0);
    cuda_replay_case(t, "hcache-cf", 255, "2", 0, 1);
}

/* the two pointers raced (ExecOptions.race): Cake on a 384-token history, chunks of 64 computed
 * forward (token budget 64), of 128 loaded backward, 2 in flight. The IO side claims [128, 384) at
 * the start, the compute side [0, 64). Loads of ~1 ms land long before that chunk is computed: the
 * IO side claims [64, 128) and the pointers meet at 64. With the drive emulated so slow that one
 * chunk takes 0.4 s, the compute side takes [64, 128) too before anything lands: they meet at 128.
 * Either way the chunks tile the history (compute [0, meet), IO [meet, 384)), each within its size. */
static void race_case(TestCtx *t, const Schedule *s, double io_rate, int64_t want_meet)
{
    KvErr e;
    ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, io_rate, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(s, &o, &r, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    CHECK(r.race && r.n_reqs == 1 && r.stage_ok);
    { /* the rules on this replay's own times, not on which side a busy machine made faster: a chunk
       * landing before the first compute chunk ended lets the IO side claim [64, 128), else the compute
       * side takes it (want_meet is what an idle machine gives) */
        int64_t land = -1, comp_end = -1;
        for (int k = 0; k < r.n_chunks; k++) {
            if (r.chunks[k].io && (land < 0 || r.chunks[k].end_ns < land)) land = r.chunks[k].end_ns;
            if (!r.chunks[k].io && r.chunks[k].lo == 0) comp_end = r.chunks[k].end_ns;
        }
        if (land >= 0 && comp_end >= 0) want_meet = land < comp_end ? 64 : 128;
    }
    CHECK_MSG(r.race_meet == (double)want_meet, "io rate %g: meet %g, expected %lld", io_rate, r.race_meet, (long long)want_meet);
    int64_t fwd = 0, back = 384;
    for (int k = 0; k < r.n_chunks; k++) { /* in claim order per side: forward from 0, backward from the end */
        const ExecChunk *c = &r.chunks[k];
        CHECK(c->end_ns >= c->start_ns && c->hi > c->lo);
        if (c->io) {
            CHECK_MSG(c->hi <= 384 && c->hi - c->lo <= 128, "io chunk [%lld, %lld)", (long long)c->lo, (long long)c->hi);
            back = c->lo < back ? c->lo : back;
        } else {
            CHECK_MSG(c->lo == fwd && c->hi - c->lo <= 64, "compute chunk [%lld, %lld) after %lld", (long long)c->lo, (long long)c->hi,
                      (long long)fwd);
            fwd = c->hi;
        }
    }
    CHECK_MSG(fwd == want_meet && back == want_meet, "computed to %lld, loaded from %lld", (long long)fwd, (long long)back);
    if (want_meet == 64 && r.n_chunks > 0) {
        /* the IO side claims [64, 128) at a landing: its load starts after the first load landed (the
         * same thread's order, so no busy machine can reverse it; when against the compute side's
         * chunk end is a race between threads, decided above from this replay's own times) */
        int64_t first_land = -1, claimed = -1;
        for (int k = 0; k < r.n_chunks; k++) {
            if (r.chunks[k].io && r.chunks[k].lo != 64 && (first_land < 0 || r.chunks[k].end_ns < first_land)) first_land = r.chunks[k].end_ns;
            if (r.chunks[k].io && r.chunks[k].lo == 64) claimed = r.chunks[k].start_ns;
        }
        CHECK_MSG(claimed >= 0 && first_land >= 0 && claimed >= first_land, "[64, 128) loaded from %lld ns, the first load landed at %lld",
                  (long long)claimed, (long long)first_land);
    }
    CHECK(r.reqs[0].restore_ns <= r.reqs[0].ttft_ns);
    CHECK_CONTAINS(r.note, "race: the two pointers by kvsim's rules at run time");
    if (io_rate > 0) CHECK_CONTAINS(r.note, "emulated");
    write_json(t, s, &r, "race.jsonl", io_rate > 0 ? "race-slow.json" : "race.json");
    exec_result_free(&r);
}

TEST(execute_race_two_pointers_by_the_rules)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cake-race.jsonl", test_tmpdir(t));
    SimConfig c;
    simtest_iso_config(t, &c, 383, 16, "hcache-a100", "Tiny-Llama-V");
    simtest_set(t, &c, "dram", "1 MB"); /* the history spills to the SSD tier */
    simtest_set(t, &c, "store", "dram+ssd");
    simtest_set(t, &c, "token_budget", "64");
    Schedule s;
    KvErr e;
    if (emit_config_load(t, &c, "cake", path, &s) != 0) return;
    const SchReq *q = NULL;
    for (int i = 0; i < s.n_reqs; i++)
        if (s.reqs[i].hist > 0) q = &s.reqs[i];
    CHECK(q && !strcmp(q->restore, "tokenwise") && q->hist == 384);
    if (q) { /* the rules, as the engine ran them (schedule_out.c) */
        CHECK_EQ_I(q->io_chunk, 128);
        CHECK_EQ_I(q->io_depth, 2);
        CHECK_EQ_I(q->comp_budget, 64);
    }
    race_case(t, &s, 0, 64);
    race_case(t, &s, 128.0 * 4096 / 0.4, 128); /* one 128-token chunk (4 KiB a token) in 0.4 s */
    /* refused: a layer-wise restoration, the cuda backend */
    Schedule k;
    snprintf(path, sizeof path, "%s/kvo-race.jsonl", test_tmpdir(t));
    if (emit_load(t, "kv-offload", 127, "1", path, &k) == 0) {
        ExecOptions o = {"cpu", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, 0, 0, 0};
        ExecResult r;
        CHECK(exec_run(&k, &o, &r, &e) != 0);
        CHECK_MSG(strstr(e.msg, "execute --race: request") && strstr(e.msg, "token-wise two pointers"), "got '%s'", e.msg);
        schedule_free(&k);
    }
    ExecOptions oc = {"cuda", test_tmpdir(t), 1, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 1, 0, 0, 0};
    ExecResult rc2;
    e.msg[0] = '\0';
    CHECK(exec_run(&s, &oc, &rc2, &e) != 0);
    schedule_free(&s);
}
