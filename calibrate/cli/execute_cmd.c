/* execute_cmd.c — kvcal execute: replay a kvsim schedule on this machine (calibrate/execute.h).
 *
 * Responsible for: the options (--backend cpu|cuda checked here, before anything is loaded), reading
 * the schedule, checking --model against its header, the replay, DIR/execute.json and the printed
 * per-request table (measured, predicted, error).
 * Not responsible for: the replay itself (execute.c), parsing the schedule (schedule.c).
 * CLI code: prints; exit codes as in kvcal_cli.h.
 */
#include "calibrate/cli/execute_cmd.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calibrate/cli/kvcal_cli.h"
#include "calibrate/execute.h"
#include "calibrate/schedule.h"
#include "kernels/cpu.h"
#include "sim/base/opt.h"

static const OptSpec k_execute_opts[] = {
    {"--schedule", "FILE", OPT_REQUIRED, "a schedule written by kvsim run --emit-schedule FILE"},
    {"--out", "DIR", OPT_REQUIRED, "where execute.json goes (created when missing)"},
    {"--model", "M", 0, "the model the schedule must be for (default: the schedule's own)"},
    {"--reps", "R", 0, "timed replays after a warm-up; medians are reported (default 3)"},
    {"--stat", "median|min", 0, "what summarises the replays: their median (default) or the least (the undisturbed time on a shared machine)"},
    {"--dir", "SCRATCH", 0, "directory for the saved-state files (default $TMPDIR or /tmp; O_DIRECT where it allows)"},
    {"--backend", "cpu|cuda", 0, "the kernels: cpu (default; h2d = memcpy) or cuda (device 0: cuBLAS + our kernels in fp16, a compute and an h2d stream per stage, h2d = cudaMemcpyAsync from pinned memory)"},
    {"--wait", "auto|spin|sleep", 0, "how a stage thread waits for its inputs: spin (yielding its CPU between checks: the core never idles, as a GPU stays ready) or sleep; auto (default): spin for the cpu stages of a several-stage replay"},
    {"--no-pin", NULL, 0, "do not pin the threads (default: several stages: stage st's compute on CPU st; the IO threads on the last CPU when it is free of stages)"},
    {"--threads", "N", 0, "attention threads of the cpu kernels (default: one per CPU; GEMM threads: OPENBLAS_NUM_THREADS)"},
    {"--race", NULL, 0, "token-wise two pointers (cake, cacheflow token-wise), one restoring request alone, cpu: run them at run time by kvsim's rules instead of the schedule's chunks, and report the measured meet point"},
    {"--io-rate", "MB/S", 0, "every ssd hop takes at least bytes / rate (an emulated drive or network of that bandwidth, in 10^6 bytes per second)"},
    {"--net-rate", "MB/S", 0, "remote tier (fetched from a server process over TCP on the loopback interface): every nic hop takes at least bytes / rate (an emulated network; 10^6 bytes per second)"},
    {"--net-latency", "US", 0, "remote tier: and at least this many microseconds more (an emulated network's latency; default 0)"},
};
static const OptCmd k_execute = {
    "kvcal execute",
    "Replays a kvsim schedule on this machine: real GEMMs, attention, projections and dequantization with\n"
    "the cpu (or cuda) kernels on the schedule's model shapes (random weights), real O_DIRECT reads of saved-state\n"
    "files written beforehand, IO and compute on their own threads with the schedule's dependencies\n"
    "(pipeline stages: one compute thread per stage, stage-parallel restoration lanes on their stage's).\n"
    "Prints per request the measured and predicted TTFT and restore time; writes DIR/execute.json.\n"
    "Exit: 0 replayed, 1 failure (bad schedule, IO, no CUDA device), 2 usage error.",
    k_execute_opts, (int)KV_ARRAY_LEN(k_execute_opts), NULL, 0, 0};

/* a number option of execute (NULL: absent, *out untouched): finite, <= hi, > 0 (or >= 0 with zero_ok);
 * 1 with the message on stderr otherwise */
static int parse_rate(const char *v, const char *opt, const char *want, double hi, int zero_ok, double *out)
{
    if (!v) return 0;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(zero_ok ? x >= 0 : x > 0) || !(x <= hi)) {
        fprintf(stderr, "kvcal execute: %s %s: expected %s\n", opt, v, want);
        return 1;
    }
    *out = x;
    return 0;
}

int kvcal_cmd_execute(int argc, char **argv)
{
    OptArgs a;
    int prc = kvcal_cli_begin(&k_execute, argc, argv, &a);
    if (prc >= 0) return prc;
    int64_t reps;
    int64_t threads;
    if (kvcal_cli_int(&k_execute, &a, "--reps", 1, 1000, 3, &reps) || kvcal_cli_int(&k_execute, &a, "--threads", 0, 256, 0, &threads))
        return KVCAL_USAGE;
    if (threads > 0) kcpu_set_threads((int)threads);
    /* checked before anything is loaded: a usage error leaves nothing to free */
    const char *stat = opt_get(&a, "--stat"), *backend = opt_get(&a, "--backend");
    if (stat && strcmp(stat, "median") && strcmp(stat, "min")) {
        fprintf(stderr, "kvcal execute: --stat %s: expected median or min\n", stat);
        return KVCAL_USAGE;
    }
    if (backend && strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "kvcal execute: --backend %s: expected cpu or cuda\n", backend);
        return KVCAL_USAGE;
    }
    if (threads > 0 && backend && !strcmp(backend, "cuda")) {
        fprintf(stderr, "kvcal execute: --threads is for --backend cpu (the cpu kernels' attention threads)\n");
        return KVCAL_USAGE;
    }
    const char *wait = opt_get(&a, "--wait") ? opt_get(&a, "--wait") : "auto";
    if (strcmp(wait, "auto") && strcmp(wait, "spin") && strcmp(wait, "sleep")) {
        fprintf(stderr, "kvcal execute: --wait %s: expected auto, spin or sleep\n", wait);
        return KVCAL_USAGE;
    }
    double io_rate = 0;
    if (parse_rate(opt_get(&a, "--io-rate"), "--io-rate", "a rate in MB/s, > 0 and at most 1e9", 1e9, 0, &io_rate)) return KVCAL_USAGE;
    double net_rate = 0, net_lat = 0;
    if (parse_rate(opt_get(&a, "--net-rate"), "--net-rate", "a rate in MB/s, > 0 and at most 1e9", 1e9, 0, &net_rate) ||
        parse_rate(opt_get(&a, "--net-latency"), "--net-latency", "microseconds, >= 0 and at most 1e7", 1e7, 1, &net_lat))
        return KVCAL_USAGE;
    int race = opt_count(&a, "--race") > 0;
    if (race && backend && !strcmp(backend, "cuda")) {
        fprintf(stderr, "kvcal execute: --race is for --backend cpu\n");
        return KVCAL_USAGE;
    }
    const char *path = opt_get(&a, "--schedule"), *out = opt_get(&a, "--out"), *model = opt_get(&a, "--model");
    char jp[4200];
    snprintf(jp, sizeof jp, "%s/execute.json", out);
    KvPathArg pin[] = {{"--schedule", path, 0}}, pout[] = {{"--out", jp, 0}};
    if ((prc = kvcal_cli_paths(&k_execute, pin, 1, pout, 1)) != KVCAL_OK) return prc;
    KvErr e = {{0}};
    Schedule s;
    if (schedule_load(&s, path, &e) != 0) return kvcal_cli_fail(&k_execute, &e);
    if (model && strcmp(model, s.model)) {
        kv_err(&e, "%s: the schedule is for model %s, not %s (run kvsim with --model %s)", path, s.model, model, model);
        schedule_free(&s);
        return kvcal_cli_fail(&k_execute, &e);
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        kv_err(&e, "--out %s: cannot create (%s)", out, strerror(errno));
        schedule_free(&s);
        return kvcal_cli_fail(&k_execute, &e);
    }
    ExecOptions o = {backend, opt_get(&a, "--dir"), (int)reps, !opt_count(&a, "--no-pin"),
                     stat && !strcmp(stat, "min") ? EXEC_STAT_MIN : EXEC_STAT_MEDIAN,
                     !strcmp(wait, "spin") ? EXEC_WAIT_SPIN : !strcmp(wait, "sleep") ? EXEC_WAIT_SLEEP : EXEC_WAIT_AUTO,
                     race, io_rate * 1e6, net_rate * 1e6, (int64_t)llround(net_lat * 1e3)};
    ExecResult r;
    if (exec_run(&s, &o, &r, &e) != 0) {
        schedule_free(&s);
        return kvcal_cli_fail(&k_execute, &e);
    }
    KvAtomicFile af; /* written aside, then renamed: never a half result */
    int rc = 0;
    if (kv_atomic_open(&af, jp, &e) != 0) {
        rc = kvcal_cli_fail(&k_execute, &e);
    } else if (exec_write_json(af.f, &s, &r, path) != 0) {
        kv_atomic_abort(&af);
        kv_err(&e, "%s: cannot write", jp);
        rc = kvcal_cli_fail(&k_execute, &e);
    } else if (kv_atomic_commit(&af, &e) != 0) {
        rc = kvcal_cli_fail(&k_execute, &e);
    }
    printf("%s on %s: %d units, %d iterations replayed %d times (%s); dependencies %s\n", s.policy, s.model, r.n_units,
           r.n_iters, r.reps, r.stat == EXEC_STAT_MIN ? "least" : "median", r.deps_ok ? "respected" : "VIOLATED");
    if (!r.deps_ok && r.deps_why[0]) printf("dependency broken: %s\n", r.deps_why);
    if (r.stages > 1)
        printf("%d stages, each layer on its stage's thread: %s; %d stage-parallel lanes replayed\n", r.stages,
               r.stage_ok ? "yes" : "NO", r.n_lanes);
    printf("%s\n", r.note);
    printf("%6s %6s %6s %-10s %12s %12s %8s %12s %12s %8s\n", "req", "hist", "new", "restore", "ttft_ms", "pred_ms", "err",
           "restore_ms", "pred_ms", "err");
    for (int k = 0; k < r.n_reqs; k++) {
        const SchReq *q = &s.reqs[r.req_idx[k]];
        const ExecReq *m = &r.reqs[k];
        double et = m->ttft_ns > 0 ? ((double)q->ttft_ns - (double)m->ttft_ns) / (double)m->ttft_ns * 100 : 0;
        double er = m->restore_ns > 0 ? ((double)q->restore_ns - (double)m->restore_ns) / (double)m->restore_ns * 100 : 0;
        printf("%6llu %6lld %6lld %-10s %12.3f %12.3f %7.1f%% %12.3f %12.3f %7.1f%%\n", (unsigned long long)q->id,
               (long long)q->hist, (long long)q->nnew, q->restore, (double)m->ttft_ns / 1e6, (double)q->ttft_ns / 1e6, et,
               (double)m->restore_ns / 1e6, (double)q->restore_ns / 1e6, er);
    }
    if (r.race) {
        for (int k = 0; k < r.n_reqs; k++) {
            const SchReq *q = &s.reqs[r.req_idx[k]];
            if (q->hist == 0) continue;
            char who[48] = "";
            if (r.n_reqs > 1) snprintf(who, sizeof who, " of request %llu", (unsigned long long)q->id);
            printf("meet%s: %.0f tokens computed forward (predicted %lld) of %lld\n", who, r.reqs[k].meet, (long long)q->meet_tokens,
                   (long long)q->hist);
        }
        printf("%d chunks in the last race\n", r.n_chunks);
    }
    printf("-> %s\n", jp);
    if (rc == 0 && (!r.deps_ok || !r.stage_ok)) rc = KVCAL_FAIL;
    exec_result_free(&r);
    schedule_free(&s);
    return rc;
}
