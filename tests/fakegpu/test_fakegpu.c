/* test_fakegpu.c — tests that run only in build/fakegpu/kvtest-fakegpu (make test-fakegpu), where
 * kernels/gpu.h is the host stand-in tests/fakegpu/fake_gpu.c:
 *  - fakegpu_cuda_semantics: the stand-in itself keeps the CUDA stream/event semantics the cuda
 *    replay relies on (FIFO order per stream, a record capturing the work enqueued before it, a
 *    stream wait capturing the record as of the call, event sync, elapsed time and its two errors);
 *  - fakegpu_replays_validation_cases: schedules emitted by bin/kvsim run --emit-schedule on cases
 *    made as tools/validate.sh makes them (Tiny-Llama-V, a history turn then a restoring turn;
 *    batch 1 and 3, one and two pipeline stages, SSD and DRAM tiers) replayed by exec_run with
 *    backend cuda: dependencies kept on the device, every unit landed, every iteration a positive
 *    duration, restoration no longer than TTFT; and the stand-in's counters: no stream wait on a
 *    never-recorded event, no h2d copy whose landing nothing awaited, no refused call, every
 *    stream, event, device and pinned buffer released.
 * The exec_cuda_* tests of tests/test_execute.c run in the same binary (on the stand-in).
 * Environment: KVSIM_ROOT, KVSIM_BIN (the directory of kvsim; default bin under KVSIM_ROOT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/execute.h"
#include "calibrate/schedule.h"
#include "kernels/gpu.h"
#include "tests/fakegpu/fake_gpu.h"
#include "tests/harness.h"

/* ms between two completed events (the check fails on an error) */
static double ms_between(TestCtx *t, KgpuEvent *a, KgpuEvent *b)
{
    float ms = 0;
    KvErr e = {{0}};
    CHECK_MSG(kgpu_event_elapsed_ms(a, b, &ms, &e) == 0, "%s", e.msg);
    return ms;
}

TEST(fakegpu_cuda_semantics)
{
    KvErr e = {{0}};
    char name[128] = "";
    CHECK_EQ_I(kgpu_device_count(&e), 1);
    CHECK(kgpu_device_info(name, sizeof name, NULL, 0, NULL, 0, &e) == 0 && !strcmp(name, FAKEGPU_DEVICE_NAME));
    FakegpuStats s0, s1;
    fakegpu_stats(&s0);
    fakegpu_set_timing(20000000, 100000, 0); /* kernels 20 ms: slower than anything the host does between calls */
    KgpuCtx *a = kgpu_ctx_create(0, &e), *b = kgpu_ctx_create(0, &e);
    KgpuEvent *ea = NULL, *ea1 = NULL, *eb = NULL, *never = NULL;
    CHECK(a && b);
    if (!a || !b) goto out;
    CHECK(kgpu_event_create(a, &ea, &e) == 0 && kgpu_event_create(a, &ea1, &e) == 0 && kgpu_event_create(b, &eb, &e) == 0 &&
          kgpu_event_create(b, &never, &e) == 0);
    /* FIFO: a memset then a copy over it, then the reverse; read back through pinned memory */
    char pattern[64], *dev = NULL, *host = NULL;
    for (int i = 0; i < 64; i++) pattern[i] = (char)(i + 1);
    CHECK(kgpu_malloc(a, 64, (void **)&dev, &e) == 0 && kgpu_host_alloc(64, 1, (void **)&host, &e) == 0);
    CHECK(kgpu_memset0(a, dev, 64, &e) == 0 && kgpu_copy_h2d(a, dev, pattern, 64, &e) == 0 && kgpu_copy_d2h(a, host, dev, 64, &e) == 0);
    CHECK(kgpu_sync(a, &e) == 0 && !memcmp(host, pattern, 64));
    CHECK(kgpu_copy_h2d(a, dev, pattern, 64, &e) == 0 && kgpu_memset0(a, dev, 64, &e) == 0 && kgpu_copy_d2h(a, host, dev, 64, &e) == 0);
    CHECK(kgpu_sync(a, &e) == 0 && host[0] == 0 && host[63] == 0);
    /* a record captures the work enqueued before it: ea after a 20 ms kernel on a; b waits for it */
    CHECK(kgpu_event_record(a, ea1, &e) == 0);
    CHECK(kgpu_gemm(a, KGPU_F16, 1, 1, 1, dev, dev, dev, &e) == 0 && kgpu_event_record(a, ea, &e) == 0);
    CHECK(kgpu_stream_wait_event(b, ea, &e) == 0);
    /* the wait took ea's record as of the call: recording ea again after another kernel does not move it */
    CHECK(kgpu_gemm(a, KGPU_F16, 1, 1, 1, dev, dev, dev, &e) == 0 && kgpu_event_record(a, ea, &e) == 0);
    CHECK(kgpu_event_record(b, eb, &e) == 0);
    float ms = 0;
    KvErr ne = {{0}};
    CHECK(kgpu_event_elapsed_ms(ea1, ea, &ms, &ne) != 0 && strstr(ne.msg, "cudaErrorNotReady")); /* ea's newest is pending */
    CHECK(kgpu_event_sync(eb, &e) == 0);
    double wait_ms = ms_between(t, ea1, eb);
    CHECK_MSG(wait_ms >= 19.0, "b's record %.3f ms after a's start: b did not wait for the kernel before ea's record", wait_ms);
    CHECK(kgpu_event_sync(ea, &e) == 0);
    double later_ms = ms_between(t, eb, ea);
    CHECK_MSG(later_ms > 10.0, "ea's second record %.3f ms after b's: b waited for a record made after its wait", later_ms);
    CHECK(ms_between(t, ea, eb) < 0); /* negative when `to` completed first */
    /* a never-recorded event: no wait, the host returns at once, elapsed time refused */
    CHECK(kgpu_stream_wait_event(b, never, &e) == 0 && kgpu_event_sync(never, &e) == 0);
    ne.msg[0] = '\0';
    CHECK(kgpu_event_elapsed_ms(never, ea, &ms, &ne) != 0 && strstr(ne.msg, "cudaErrorInvalidResourceHandle"));
    /* an h2d copy from pinned memory is awaited when another stream waits on an event recorded after it */
    CHECK(kgpu_copy_h2d(a, dev, host, 64, &e) == 0 && kgpu_event_record(a, ea, &e) == 0 && kgpu_stream_wait_event(b, ea, &e) == 0);
    CHECK(kgpu_sync(b, &e) == 0 && kgpu_sync(a, &e) == 0);
    fakegpu_stats(&s1);
    CHECK_EQ_I(s1.h2d_unawaited - s0.h2d_unawaited, 0);
    CHECK(kgpu_copy_h2d(a, dev, host, 64, &e) == 0 && kgpu_event_record(a, ea, &e) == 0 && kgpu_sync(a, &e) == 0);
    fakegpu_stats(&s1);
    CHECK_EQ_I(s1.h2d_unawaited - s0.h2d_unawaited, 1); /* nothing waited for that one */
    CHECK_EQ_I(s1.waits_unrecorded - s0.waits_unrecorded, 1);
    CHECK(kgpu_free(a, dev, &e) == 0);
    kgpu_host_free(host, 1);
out:
    kgpu_event_destroy(ea);
    kgpu_event_destroy(ea1);
    kgpu_event_destroy(eb);
    kgpu_event_destroy(never);
    kgpu_ctx_destroy(a);
    kgpu_ctx_destroy(b);
    fakegpu_set_timing(20000, 500000, 0.5);
    fakegpu_stats(&s1);
    CHECK_MSG(!e.msg[0], "%s", e.msg);
    CHECK_EQ_I(s1.ctx_live, s0.ctx_live);
    CHECK_EQ_I(s1.events_live, s0.events_live);
    CHECK_EQ_I(s1.dev_allocs_live, s0.dev_allocs_live);
    CHECK_EQ_I(s1.pinned_live, s0.pinned_live);
}

typedef struct Case {
    const char *policy;
    int hist, batch, pp, dram_tier;
} Case;

/* the case's trace as tools/validate.sh writes it, kvsim run --emit-schedule on it; 0 or -1 (reported) */
static int emit_case(TestCtx *t, const Case *c, const char *sched)
{
    const char *dir = test_tmpdir(t);
    char trace[600], cmd[4096], bin[1024];
    snprintf(trace, sizeof trace, "%s/trace-%s-pp%d-h%d-b%d.csv", dir, c->policy, c->pp, c->hist, c->batch);
    FILE *f = fopen(trace, "w");
    CHECK_MSG(f, "cannot write %s", trace);
    if (!f) return -1;
    fprintf(f, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    for (int i = 0; i < c->batch; i++) fprintf(f, "s%d,0,%d,%d,1,0\n", i, i * 10, c->hist - 1);
    for (int i = 0; i < c->batch; i++) fprintf(f, "s%d,1,100,32,4,%d\n", i, c->hist);
    fclose(f);
    const char *b = getenv("KVSIM_BIN");
    snprintf(bin, sizeof bin, "%s", b && *b == '/' ? b : test_path(b && *b ? b : "bin"));
    /* a spec-costed A100 box; the DRAM tier holds the state unless it is 1 MB (then it spills to the SSD) */
    snprintf(cmd, sizeof cmd,
             "'%s/kvsim' run --policy %s --model Tiny-Llama-V --platform hcache-a100 --pp %d --trace '%s' --set iter_overhead=0 "
             "--set evict_each_turn=true --set store=dram+ssd%s --set think=0 --out '%s/sim' --emit-schedule '%s' --quiet --no-csv "
             "> '%s/kvsim.log' 2>&1",
             bin, c->policy, c->pp, trace, c->dram_tier ? "" : " --set dram=1MB", dir, sched, dir);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s: exit %d (see %s/kvsim.log)", cmd, rc, dir);
    return rc == 0 ? 0 : -1;
}

static void replay_case(TestCtx *t, const Case *c)
{
    char sched[600], tag[128];
    snprintf(tag, sizeof tag, "%s pp %d h %d batch %d%s", c->policy, c->pp, c->hist, c->batch, c->dram_tier ? " dram" : "");
    snprintf(sched, sizeof sched, "%s/%s-pp%d-h%d-b%d.jsonl", test_tmpdir(t), c->policy, c->pp, c->hist, c->batch);
    int failures0 = t->failures; /* this case's own checks (the cases before may have failed) */
    if (emit_case(t, c, sched) != 0) return;
    Schedule s;
    KvErr e = {{0}};
    CHECK_MSG(schedule_load(&s, sched, &e) == 0, "%s: %s", tag, e.msg);
    if (t->failures > failures0) return;
    for (int i = 0; i < s.n_units; i++) CHECK_EQ_I(s.units[i].tier, c->dram_tier ? SCH_TIER_DRAM : SCH_TIER_SSD);
    FakegpuStats s0, s1;
    fakegpu_stats(&s0);
    ExecOptions o = {"cuda", test_tmpdir(t), 2, 0, EXEC_STAT_MEDIAN, EXEC_WAIT_AUTO, 0, 0, 0, 0};
    ExecResult r;
    CHECK_MSG(exec_run(&s, &o, &r, &e) == 0, "%s: %s", tag, e.msg);
    fakegpu_stats(&s1);
    if (t->failures == failures0) {
        printf("      %s: %d units, %d iterations, %d lanes, %ld h2d copies, %ld stream waits\n", tag, r.n_units, r.n_iters, r.n_lanes,
               s1.h2d_async - s0.h2d_async, s1.waits - s0.waits);
        CHECK_MSG(r.deps_ok, "%s: a dependency was not kept: %s", tag, r.deps_why);
        CHECK(r.stage_ok && r.stages == c->pp);
        CHECK_MSG(strstr(r.note, FAKEGPU_DEVICE_NAME), "%s: note '%s'", tag, r.note);
        CHECK(r.n_units > 0 && r.n_iters > 0 && r.n_reqs == c->batch);
        for (int k = 0; k < r.n_units; k++)
            CHECK_MSG(r.unit_end_ns[k] > (double)r.origin_ns, "%s: unit %d landed at %.0f (origin %lld)", tag, k, r.unit_end_ns[k],
                      (long long)r.origin_ns);
        for (int k = 0; k < r.n_iters; k++) {
            CHECK_MSG(r.iter_ns[k] > 0, "%s: iteration %d: %.0f ns", tag, k, r.iter_ns[k]);
            if (k > 0) CHECK_MSG(r.iter_start_ns[k] >= r.iter_start_ns[k - 1], "%s: iteration %d starts before %d", tag, k, k - 1);
        }
        for (int j = 0; j < r.n_lanes; j++) CHECK(r.lane_ns[j] > 0);
        for (int k = 0; k < r.n_reqs; k++)
            CHECK_MSG(r.reqs[k].restore_ns <= r.reqs[k].ttft_ns, "%s: request %llu: restore %lld > ttft %lld", tag,
                      (unsigned long long)r.reqs[k].id, (long long)r.reqs[k].restore_ns, (long long)r.reqs[k].ttft_ns);
        /* each replay (the warm-up one included) copies every unit once, from pinned memory */
        CHECK_MSG(s1.h2d_async - s0.h2d_async >= (long)r.n_units * 2, "%s: %ld h2d copies from pinned memory for %d units", tag,
                  s1.h2d_async - s0.h2d_async, r.n_units);
        exec_result_free(&r);
    }
    CHECK_MSG(s1.waits_unrecorded == s0.waits_unrecorded, "%s: %ld stream waits on never-recorded events", tag,
              s1.waits_unrecorded - s0.waits_unrecorded);
    CHECK_MSG(s1.h2d_unawaited == s0.h2d_unawaited, "%s: %ld h2d copies whose landing no stream waited for", tag,
              s1.h2d_unawaited - s0.h2d_unawaited);
    CHECK_MSG(s1.misuse == s0.misuse, "%s: %ld calls CUDA would refuse", tag, s1.misuse - s0.misuse);
    CHECK_MSG(s1.destroyed_pending == s0.destroyed_pending, "%s: events destroyed before their records completed", tag);
    CHECK_MSG(s1.ctx_live == s0.ctx_live && s1.events_live == s0.events_live && s1.dev_allocs_live == s0.dev_allocs_live &&
                  s1.pinned_live == s0.pinned_live,
              "%s: left alive: %ld streams, %ld events, %ld device buffers, %ld pinned buffers", tag, s1.ctx_live - s0.ctx_live,
              s1.events_live - s0.events_live, s1.dev_allocs_live - s0.dev_allocs_live, s1.pinned_live - s0.pinned_live);
    schedule_free(&s);
}

TEST(fakegpu_replays_validation_cases)
{
    static const Case cases[] = {
        {"kv-offload", 256, 1, 1, 0}, {"kv-offload", 256, 3, 1, 1}, {"hcache", 512, 3, 1, 0},
        {"cake", 256, 1, 1, 0},       {"hcache-cf", 1024, 3, 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) replay_case(t, &cases[i]);
}
