/* fuzz_sim.c — libFuzzer harness: a short whole simulation from a fuzzed trace. The first byte picks
 * the policy (every registered one is reachable), the second a few settings (replicas, eviction each
 * turn, time scale); the rest is a canonical CSV trace. Inputs that would make a long run (more than
 * 48 requests or 256 output tokens each, found by reading the trace first) are skipped so that one
 * execution stays in milliseconds; everything else must simulate to the end or fail with a message.
 * The engine's accounting walker runs at every iteration boundary (KVSIM_CHECK=1): a failure it or an
 * always-on check reports ("sim_check:", "internal") is a bug, not a refusal. */
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/engine/sim.h"
#include "traces/trace.h"
#include "tests/fuzz/fuzz_common.h"

static int fuzz_row(void *ctx, const SimRequestRow *row, KvErr *e)
{
    if (row->ttft_ns < 0 || row->done_ns < row->arrival_ns) abort();
    ++*(int *)ctx;
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("KVSIM_CHECK", "1", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const KvPolicyOps *pol = policy_at(data[0] % policy_count());
    unsigned knobs = data[1];
    const char *path = fuzz_file("sim", ".csv", data + 2, size - 2);

    TraceOptions o;
    memset(&o, 0, sizeof o);
    o.source = path;
    o.format = "csv";
    o.seed = 1;
    o.max_context_tokens = 4096;
    o.time_scale = (knobs & 4) ? 0.001 : 1;
    KvErr e = {{0}};
    TraceSource *ts = trace_open(&o, &e);
    if (!ts) return 0;
    TraceRequest r;
    int rc, n = 0, small = 1;
    while ((rc = trace_next(ts, &r, &e)) == 1 && small)
        if (++n > 48 || r.output_tokens > 256) small = 0;
    trace_close(ts);
    if (rc < 0 || !small || n == 0) return 0;

    SimConfig c;
    sim_config_defaults(&c);
    c.quiet = 1;
    int ok = sim_config_set(&c, "model", "Llama-2-7B", &e) == 0 && sim_config_set(&c, "platform", "hcache-a100", &e) == 0 &&
             sim_config_set(&c, "trace", path, &e) == 0 && sim_config_set(&c, "trace_format", "csv", &e) == 0 &&
             sim_config_set(&c, "max_context", "4096", &e) == 0 &&
             sim_config_set(&c, "replicas", (knobs & 1) ? "2" : "1", &e) == 0 &&
             sim_config_set(&c, "evict_each_turn", (knobs & 2) ? "true" : "false", &e) == 0 &&
             sim_config_set(&c, "time_scale", (knobs & 4) ? "0.001" : "1", &e) == 0;
    if (!ok) abort(); /* all of these are valid settings */
    SimWorld w;
    if (sim_world_open(&w, &c, &e) != 0) abort();
    SimResult res;
    memset(&res, 0, sizeof res);
    int rows = 0;
    if (sim_run(&w, pol->name, fuzz_row, &rows, NULL, NULL, &res, &e) == 0) {
        if (res.requests > (uint64_t)n || rows > n) abort();
    } else if (!e.msg[0] || strstr(e.msg, "sim_check:") || strstr(e.msg, "internal")) {
        abort();
    }
    sim_result_free(&res);
    sim_world_close(&w);
    return 0;
}
