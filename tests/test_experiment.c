/* test_experiment.c — replications (intervals shrink with more seeds, paired differences of equal
 * policies not significant, a constant difference significant, runs reduced as they arrive give the
 * same outputs), SimResult records read back equal
 * (reports from them byte-identical), the process pool (jobs in order, any worker count gives the
 * same files, a failing job reported with its stderr), SHA-256 of known inputs. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "tests/harness.h"
#include "results/digest.h"
#include "results/replications.h"
#include "results/report.h"
#include "results/verdict.h"
#include "results/resfile.h"
#include "sim/cli/procpool.h"

#include <cJSON.h>

static const int k_ttft = 1; /* repl metric index of ttft_mean_s */

/* res[s * np + p]: policy p's every request at base_ms + (s odd ? +d : -d) ms (+ p * shift_ms) */
static void fill(SimResult *res, int ns, int np, double d_ms, double shift_ms)
{
    memset(res, 0, sizeof *res * (size_t)(ns * np));
    for (int s = 0; s < ns; s++)
        for (int p = 0; p < np; p++) {
            SimResult *r = &res[s * np + p];
            snprintf(r->policy, sizeof r->policy, "p%d", p);
            double ms = 100 + (s % 2 ? d_ms : -d_ms) + p * shift_ms + 0.37 * s;
            for (int i = 0; i < 10; i++) hist_add(&r->ttft, (uint64_t)(ms * 1e6));
            r->requests = 10;
        }
}

static void free_all(SimResult *res, int n)
{
    for (int i = 0; i < n; i++) sim_result_free(&res[i]);
}

TEST(replications_interval_shrinks_with_seeds)
{
    SimResult a[4], b[16];
    uint64_t seeds[16];
    for (int i = 0; i < 16; i++) seeds[i] = (uint64_t)i + 1;
    fill(a, 4, 1, 5, 0);
    fill(b, 16, 1, 5, 0);
    Replications ra = {4, 1, seeds, a, -1, 0.95, NULL, NULL}, rb = {16, 1, seeds, b, -1, 0.95, NULL, NULL};
    ReplStat sa, sb;
    KvErr e;
    CHECK(repl_stat(&ra, 0, k_ttft, 0, &sa, &e) == 0);
    CHECK(repl_stat(&rb, 0, k_ttft, 0, &sb, &e) == 0);
    CHECK_EQ_I(sa.n, 4);
    CHECK_EQ_I(sb.n, 16);
    CHECK(sa.ci95 > 0 && sb.ci95 > 0);
    CHECK_MSG(sb.ci95 < sa.ci95 / 2, "16 seeds: ± %g s, 4 seeds: ± %g s", sb.ci95, sa.ci95);
    CHECK(fabs(sa.mean - 0.1) < 0.01);
    free_all(a, 4);
    free_all(b, 16);
}

TEST(replications_paired_difference_significance)
{
    SimResult same[10], shifted[10];
    uint64_t seeds[5] = {1, 2, 3, 4, 5};
    fill(same, 5, 2, 20, 0);    /* two identical policies */
    fill(shifted, 5, 2, 20, 3); /* p1 = p0 + 3 ms in every seed */
    KvErr e;
    ReplStat st;
    Replications r = {5, 2, seeds, same, 0, 0.95, NULL, NULL};
    CHECK(repl_stat(&r, 1, k_ttft, 1, &st, &e) == 0);
    CHECK(st.mean == 0 && st.ci95 == 0 && !st.significant);
    Replications r2 = {5, 2, seeds, shifted, 0, 0.95, NULL, NULL};
    CHECK(repl_stat(&r2, 1, k_ttft, 1, &st, &e) == 0);
    CHECK_NEAR(st.mean, 0.003, 1e-3, 1e-6);
    CHECK(st.significant);
    /* the spread of p0 alone (±20 ms) would swamp 3 ms: the pairing is what makes it significant */
    ReplStat p0;
    CHECK(repl_stat(&r2, 0, k_ttft, 0, &p0, &e) == 0);
    CHECK(p0.ci95 > 0.003);
    cJSON *j = repl_json(&r, &e);
    CHECK(j != NULL);
    char *txt = cJSON_PrintUnformatted(j);
    CHECK_CONTAINS(txt, "\"paired_differences\"");
    CHECK_CONTAINS(txt, "\"significant\":false");
    cJSON_free(txt);
    cJSON_Delete(j);
    free_all(same, 10);
    free_all(shifted, 10);
}

TEST(resfile_round_trip_gives_the_same_report)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.requests = 60;
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    SimResult r, back;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&w, "hcache", NULL, NULL, NULL, NULL, &r, &e) == 0);
    char p1[4200], p2[4200], rec[4200];
    snprintf(rec, sizeof rec, "%s/rec.bin", test_tmpdir(t));
    FILE *f = fopen(rec, "wb");
    CHECK(f && resfile_write(f, &r, &e) == 0);
    fclose(f);
    f = fopen(rec, "rb");
    CHECK(f && resfile_read(f, rec, &back, &e) == 0);
    fclose(f);
    snprintf(p1, sizeof p1, "%s/a.json", test_tmpdir(t));
    snprintf(p2, sizeof p2, "%s/b.json", test_tmpdir(t));
    CHECK(report_summary_json(p1, &w, "t", &r, 1, &e) == 0);
    CHECK(report_summary_json(p2, &w, "t", &back, 1, &e) == 0);
    char *a = kv_read_file(p1, NULL, &e), *b = kv_read_file(p2, NULL, &e);
    CHECK(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
    sim_result_free(&back);
    /* a truncated record is refused, not misread */
    f = fopen(rec, "r+b");
    CHECK(f && ftruncate(fileno(f), 100) == 0);
    fclose(f);
    f = fopen(rec, "rb");
    CHECK(resfile_read(f, rec, &back, &e) != 0);
    CHECK_CONTAINS(e.msg, "truncated");
    fclose(f);
    sim_result_free(&r);
    sim_result_free(&back);
    sim_world_close(&w);
}

/* Replications reduced run by run (ReplRun scalars, each run's summary object spilled to a file) give
 * summary.json and the tables byte for byte as the runs kept whole: 3 seeds of 2 real policies, one
 * of them overloaded in some seeds (the warning's evidence), a baseline (the paired tables). */
TEST(replications_reduced_runs_give_the_same_outputs)
{
    SimConfig c;
    sim_config_defaults(&c);
    c.requests = 40;
    SimWorld w;
    KvErr e;
    if (sim_world_open(&w, &c, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    enum { NS = 3, NP = 2 };
    static const char *const pol[NP] = {"recompute", "hcache"};
    SimResult res[NS * NP];
    ReplRun runs[NS * NP];
    static const double pct[2] = {50, 99};
    uint64_t seeds[NS] = {1, 2, 3};
    char spill[4200], p1[4200], p2[4200];
    snprintf(spill, sizeof spill, "%s/runs.bin", test_tmpdir(t));
    FILE *f = fopen(spill, "wb");
    CHECK(f != NULL);
    memset(res, 0, sizeof res);
    for (int s = 0; s < NS; s++) {
        SimConfig cs = c;
        cs.seed = seeds[s];
        SimWorld ws;
        if (sim_world_open(&ws, &cs, &e) != 0) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        for (int p = 0; p < NP; p++) {
            SimResult *r = &res[s * NP + p];
            CHECK_MSG(sim_run(&ws, pol[p], NULL, NULL, NULL, NULL, r, &e) == 0, "%s", e.msg);
            if (s == 1) r->load.overloaded = 1; /* as an overloaded seed reports it */
            CHECK_MSG(repl_run_reduce(&runs[s * NP + p], r, pct, 2, &e) == 0, "%s", e.msg);
            CHECK_MSG(report_policy_json_spill(f, w.cfg, r, &e) == 0, "%s", e.msg);
        }
        sim_world_close(&ws);
    }
    fclose(f);
    Replications whole = {NS, NP, seeds, res, 0, 0.95, NULL, NULL}, reduced = {NS, NP, seeds, res, 0, 0.95, runs, spill};
    snprintf(p1, sizeof p1, "%s/whole.json", test_tmpdir(t));
    snprintf(p2, sizeof p2, "%s/reduced.json", test_tmpdir(t));
    CHECK_MSG(report_summary_json_repl(p1, &w, "t", res, NP, &whole, &e) == 0, "%s", e.msg);
    CHECK_MSG(report_summary_json_repl(p2, &w, "t", res, NP, &reduced, &e) == 0, "%s", e.msg);
    char *a = kv_read_file(p1, NULL, &e), *b = kv_read_file(p2, NULL, &e);
    CHECK(a && b && strcmp(a, b) == 0);
    CHECK(a && strstr(a, "\"per_seed\":\t[{"));
    free(a);
    free(b);
    char *ta = NULL, *tb = NULL;
    size_t la = 0, lb = 0;
    FILE *fa = open_memstream(&ta, &la), *fb = open_memstream(&tb, &lb);
    CHECK(repl_markdown(fa, &w, &whole, &e) == 0 && repl_markdown(fb, &w, &reduced, &e) == 0);
    fclose(fa);
    fclose(fb);
    CHECK(ta && tb && strcmp(ta, tb) == 0);
    CHECK_CONTAINS(tb, "overloaded in 1 of 3 seeds (2)");
    free(ta);
    free(tb);
    /* compare's verdict and compact table read the reduced runs as they read the whole results */
    Verdict vw = {res, NS, NP, 0, metric_find("ttft_s.p99"), {50, 99}, 2, 0.95, "out", 0, NULL}, vr = vw;
    vr.runs = runs;
    fa = open_memstream(&ta, &la);
    fb = open_memstream(&tb, &lb);
    CHECK(verdict_write(fa, &w, &vw, &e) == 0 && verdict_table(fa, &w, &vw, &e) == 0);
    CHECK(verdict_write(fb, &w, &vr, &e) == 0 && verdict_table(fb, &w, &vr, &e) == 0);
    fclose(fa);
    fclose(fb);
    CHECK(ta && tb && strcmp(ta, tb) == 0);
    CHECK_CONTAINS(tb, "winner:");
    free(ta);
    free(tb);
    for (int i = 0; i < NS * NP; i++) repl_run_free(&runs[i]);
    free_all(res, NS * NP);
    sim_world_close(&w);
}

typedef struct PoolCtx {
    int fail_job;
    int crash_job; /* dies by SIGKILL (0 = none: job 0 never crashes) */
} PoolCtx;

static int pool_job(void *ctx, int k, const char *path, KvErr *e)
{
    PoolCtx *c = ctx;
    if (k == c->fail_job) {
        return kv_err(e, "job %d broke on purpose", k);
    }
    if (c->crash_job && k == c->crash_job) {
        fputs("about to die\n", stderr);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    if (c->crash_job && k > c->crash_job) usleep(150000); /* the death is seen while these run */
    FILE *f = fopen(path, "w");
    if (!f) return kv_err(e, "%s: cannot write", path);
    fprintf(f, "job %d of pid-independent content\n", k);
    fclose(f);
    return 0;
}

static void pool_label(void *ctx, int k, char *buf, size_t cap)
{
    snprintf(buf, cap, "seed %d", k + 1);
}

static char *pool_outputs(TestCtx *t, int jobs, int procs)
{
    PoolCtx c = {-1, 0};
    ProcPool p = {jobs, procs, test_tmpdir(t), pool_job, pool_label, &c, NULL};
    KvErr e;
    if (procpool_run(&p, &e) != 0) {
        CHECK_MSG(0, "%s", e.msg);
        return NULL;
    }
    char *all = calloc(1, 4096);
    for (int k = 0; k < jobs; k++) {
        char path[4400];
        CHECK(procpool_job_path(test_tmpdir(t), k, path, sizeof path, &e) == 0);
        char *s = kv_read_file(path, NULL, &e);
        CHECK_MSG(s != NULL, "job %d left no file", k);
        if (s) strncat(all, s, 4096 - strlen(all) - 1);
        free(s);
        unlink(path);
    }
    return all;
}

TEST(procpool_any_worker_count_same_files)
{
    char *one = pool_outputs(t, 7, 1), *three = pool_outputs(t, 7, 3), *many = pool_outputs(t, 7, 16);
    CHECK(one && three && many);
    if (one && three && many) {
        CHECK_STR(one, three);
        CHECK_STR(one, many);
        CHECK_CONTAINS(one, "job 6 of");
    }
    free(one);
    free(three);
    free(many);
}

TEST(procpool_reports_the_failing_job)
{
    for (int procs = 1; procs <= 3; procs += 2) {
        PoolCtx c = {4, 0};
        ProcPool p = {6, procs, test_tmpdir(t), pool_job, pool_label, &c, NULL};
        KvErr e;
        CHECK(procpool_run(&p, &e) != 0);
        CHECK_CONTAINS(e.msg, "seed 5: ");
        CHECK_CONTAINS(e.msg, "job 4 broke on purpose");
        for (int k = 0; k < 6; k++) { /* whatever was written is the caller's to remove */
            char path[4400];
            procpool_job_path(test_tmpdir(t), k, path, sizeof path, &e);
            unlink(path);
        }
    }
}

/* A failing job whose stderr capture cannot be written (a full disk: here its stderr is /dev/full)
 * still has its cause reported, not only "exit status 1". */
static int full_disk_job(void *ctx, int k, const char *path, KvErr *e)
{
    if (k == 2) {
        int fd = open("/dev/full", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        return kv_err(e, "%s: write failed: No space left on device", path);
    }
    return pool_job(ctx, k, path, e);
}

TEST(procpool_failed_job_message_survives_a_full_disk)
{
    if (access("/dev/full", W_OK) != 0) {
        SKIP("no /dev/full");
        return;
    }
    { /* in workers (serially the job would run here, and its message is returned as it is) */
        PoolCtx c = {-1, 0};
        ProcPool p = {5, 3, test_tmpdir(t), full_disk_job, pool_label, &c, NULL};
        KvErr e;
        CHECK(procpool_run(&p, &e) != 0);
        CHECK_CONTAINS(e.msg, "seed 3: ");
        CHECK_CONTAINS(e.msg, "No space left on device");
        for (int k = 0; k < 5; k++) {
            char path[4400];
            procpool_job_path(test_tmpdir(t), k, path, sizeof path, &e);
            unlink(path);
        }
    }
}

/* the done callback: in the caller's process, in job order, each job's file complete when it runs
 * (jobs finish out of order: later ones are quicker); a refusing callback stops the pool with its
 * own message and no callback after it */
typedef struct DoneCtx {
    PoolCtx pc;
    const char *dir;
    pid_t parent;
    int order[16], n, refuse_at, bad;
} DoneCtx;

static int done_job(void *ctx, int k, const char *path, KvErr *e)
{
    usleep((useconds_t)(6 - k % 6) * 4000); /* job 0 the slowest of each six */
    return pool_job(&((DoneCtx *)ctx)->pc, k, path, e);
}

static int done_cb(void *ctx, int k, KvErr *e)
{
    DoneCtx *d = ctx;
    char path[4400], want[64];
    procpool_job_path(d->dir, k, path, sizeof path, e);
    char *s = kv_read_file(path, NULL, e);
    snprintf(want, sizeof want, "job %d of pid-independent content\n", k);
    if (getpid() != d->parent || !s || strcmp(s, want)) d->bad++;
    free(s);
    if (d->n < 16) d->order[d->n++] = k;
    if (k == d->refuse_at) return kv_err(e, "merging job %d refused", k);
    return 0;
}

TEST(procpool_done_runs_in_job_order_in_the_caller)
{
    for (int procs = 1; procs <= 4; procs += 3)
        for (int refuse = -1; refuse <= 3; refuse += 4) {
            DoneCtx d = {{-1, 0}, test_tmpdir(t), getpid(), {0}, 0, refuse, 0};
            ProcPool p = {9, procs, d.dir, done_job, pool_label, &d, done_cb};
            KvErr e;
            int rc = procpool_run(&p, &e);
            CHECK_EQ_I(d.bad, 0);
            if (refuse < 0) {
                CHECK_MSG(rc == 0, "%s", e.msg);
                CHECK_EQ_I(d.n, 9);
            } else {
                CHECK(rc != 0);
                CHECK_STR(e.msg, "merging job 3 refused");
                CHECK_EQ_I(d.n, 4);
            }
            for (int i = 0; i < d.n; i++) CHECK_EQ_I(d.order[i], i);
            for (int k = 0; k < 9; k++) {
                char path[4400];
                procpool_job_path(d.dir, k, path, sizeof path, &e);
                unlink(path);
            }
        }
}

/* a job whose worker dies is reported with the signal and its stderr; the jobs after it are
 * not run; workers run several jobs each (at most J processes for K jobs) */
static int pid_job(void *ctx, int k, const char *path, KvErr *e)
{
    FILE *f = fopen(path, "w");
    if (!f) return kv_err(e, "%s: cannot write", path);
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    return 0;
}

TEST(procpool_workers_and_a_dying_job)
{
    PoolCtx c = {-1, 2};
    ProcPool p = {8, 2, test_tmpdir(t), pool_job, pool_label, &c, NULL};
    KvErr e;
    CHECK(procpool_run(&p, &e) != 0);
    CHECK_CONTAINS(e.msg, "seed 3: killed by signal 9");
    CHECK_CONTAINS(e.msg, "about to die");
    char path[4400];
    for (int k = 0; k < 8; k++) {
        procpool_job_path(test_tmpdir(t), k, path, sizeof path, &e);
        if (k >= 4) CHECK_MSG(access(path, F_OK) != 0, "job %d ran after the failure", k);
        unlink(path);
    }
    ProcPool q = {9, 3, test_tmpdir(t), pid_job, pool_label, NULL, NULL};
    CHECK(procpool_run(&q, &e) == 0);
    long pids[9];
    int distinct = 0;
    for (int k = 0; k < 9; k++) {
        procpool_job_path(test_tmpdir(t), k, path, sizeof path, &e);
        char *s = kv_read_file(path, NULL, &e);
        pids[k] = s ? atol(s) : -1;
        free(s);
        unlink(path);
        int seen = 0;
        for (int j = 0; j < k; j++) seen |= pids[j] == pids[k];
        distinct += !seen;
        CHECK(pids[k] > 0 && pids[k] != (long)getpid());
    }
    CHECK_MSG(distinct >= 1 && distinct <= 3, "%d processes ran 9 jobs in a pool of 3", distinct);
}

TEST(embedded_sha256_is_the_embedded_bytes_digest)
{
    char hex[DIGEST_HEX_LEN];
    KvErr e;
    int n = kv_embedded_count();
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        const char *name = kv_embedded_name(i), *sum = kv_embedded_sha256(name);
        size_t len = 0;
        const char *bytes = kv_embedded(name, &len);
        CHECK_MSG(bytes && sum, "%s: embedded without its digest", name);
        if (!bytes || !sum) continue;
        CHECK(digest_sha256_hex(bytes, len, hex, &e) == 0);
        CHECK_MSG(!strcmp(hex, sum), "%s: digest %s, built-in %s", name, hex, sum);
    }
    CHECK(kv_embedded_sha256("configs/none.json") == NULL);
}

TEST(digest_sha256_known_values)
{
    char hex[DIGEST_HEX_LEN];
    KvErr e;
    CHECK(digest_sha256_hex("abc", 3, hex, &e) == 0);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(digest_sha256_hex("", 0, hex, &e) == 0);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *p = test_write_file(t, "abc.txt", "abc");
    CHECK(digest_sha256_file_hex(p, hex, &e) == 0);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(digest_sha256_file_hex("/nonexistent/x", hex, &e) != 0);
    CHECK_CONTAINS(e.msg, "/nonexistent/x");
    /* the padding at every block boundary, and a file of several 64 KiB reads: byte i of the message is
     * (7i + 3) mod 251 (the expected digests from another implementation, Python's hashlib) */
    static const struct { size_t n; const char *hex; } k_len[] = {
        {55, "1deace58c745f3ecadde68a5923f494c3703fa73f0306483ccb898a5826e8d70"},
        {56, "06dbe23685750e4d3881ded95047abaf93fa8f9c5d3501dc57c717a72ff1398e"},
        {63, "47fb38b12335c9298d09280515c0666489a189d1554bb0ac1a0740806ce9d8b6"},
        {64, "dfa798724b1a8014994f363e5da7474ed26ce3757fb29e07aa47ad5a9352d37b"},
        {65, "dd2eab5a5507d7717c63ce953d9ac61752c21e664425ad1227054722a0d97f69"},
        {119, "c6e0f435df5d7d265baacca31e0602c00aa22fa6d3819aed664649294c743756"},
        {120, "17eb8960823a644bde3065620bb9d45931fe8993fd8eb692a17aff0fd725db6a"},
        {200000, "d2979f63fc353288130be1837d34f088e378e76c5baa67b8a6077c950db3c286"},
    };
    static unsigned char msg[200000];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (unsigned char)((i * 7 + 3) % 251);
    for (size_t i = 0; i < sizeof k_len / sizeof k_len[0]; i++) {
        CHECK(digest_sha256_hex(msg, k_len[i].n, hex, &e) == 0);
        CHECK_MSG(!strcmp(hex, k_len[i].hex), "%zu bytes: %s, expected %s", k_len[i].n, hex, k_len[i].hex);
    }
    char big[4200];
    snprintf(big, sizeof big, "%s/msg.bin", test_tmpdir(t));
    FILE *bf = fopen(big, "wb");
    CHECK(bf && fwrite(msg, 1, sizeof msg, bf) == sizeof msg);
    if (bf) fclose(bf);
    CHECK(digest_sha256_file_hex(big, hex, &e) == 0);
    CHECK_STR(hex, k_len[sizeof k_len / sizeof k_len[0] - 1].hex);
}
