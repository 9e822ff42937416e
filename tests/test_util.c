/* test_util.c — util.c: atomic writes (a failed write leaves the old file and no temp file; the
 * signal-time cleanup of temp files), outputs checked against inputs, file reading (special files
 * refused), number parsing and formatting (kv_app_fixed against printf), catalog text lookup, the
 * name index. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"
#include "sim/base/nameidx.h"
#include "sim/base/util.h"

TEST(util_atomic_write_replaces_whole_file)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/out.txt", test_tmpdir(t));
    CHECK(kv_write_atomic(path, "first", 5, &e) == 0);
    CHECK(kv_write_atomic(path, "second!", 7, &e) == 0);
    size_t n = 0;
    char *s = kv_read_file(path, &n, &e);
    CHECK(s != NULL);
    CHECK_EQ_U(n, 7);
    CHECK_STR(s, "second!");
    free(s);
}

TEST(util_atomic_abort_keeps_old_file)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/keep.txt", test_tmpdir(t));
    CHECK(kv_write_atomic(path, "good", 4, &e) == 0);
    KvAtomicFile af;
    CHECK(kv_atomic_open(&af, path, &e) == 0);
    fputs("half", af.f);
    kv_atomic_abort(&af);
    char *s = kv_read_file(path, NULL, &e);
    CHECK_STR(s, "good");
    free(s);
    CHECK(access(af.tmp, F_OK) != 0);
}

TEST(util_atomic_write_unwritable_dir_fails_cleanly)
{
    KvErr e = {{0}};
    CHECK(kv_write_atomic("/nonexistent-dir/x.json", "x", 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "/nonexistent-dir/x.json");
}

/* A write that fails (here: past a file size limit, as a full disk fails it) fails the commit with the
 * file and the cause; the old file stays as it was and no temp file is left. In a forked child, so the
 * limit is its own. */
TEST(util_atomic_commit_fails_on_a_failed_write)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/limited.txt", test_tmpdir(t));
    CHECK(kv_write_atomic(path, "old", 3, &e) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {8192, 8192};
        signal(SIGXFSZ, SIG_IGN); /* the write fails with EFBIG instead of killing the process */
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        KvAtomicFile af;
        if (kv_atomic_open(&af, path, &e) != 0) _exit(4);
        for (int i = 0; i < 4096; i++) fputs("0123456789abcdef", af.f); /* 64 KiB */
        if (kv_atomic_commit(&af, &e) == 0) _exit(5);
        if (!strstr(e.msg, path) || !strstr(e.msg, "File too large")) _exit(6);
        if (access(af.tmp, F_OK) == 0) _exit(7);
        if (kv_write_atomic(path, "x", 1, &e) != 0) _exit(8); /* a small one still fits */
        char big[16384];
        memset(big, 'y', sizeof big);
        if (kv_write_atomic(path, big, sizeof big, &e) == 0 || !strstr(e.msg, path)) _exit(9);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    char *s = kv_read_file(path, NULL, &e);
    CHECK(s && !strcmp(s, "x"));
    free(s);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    CHECK(access(tmp, F_OK) != 0);
}

/* The signal-time cleanup removes this process's open temp files and nothing else: not a committed
 * file, not a file its parent has open (called in a forked child). */
TEST(util_atomic_cleanup_on_signal_removes_open_temps)
{
    KvErr e;
    char a[4200], b[4200], c[4200];
    snprintf(a, sizeof a, "%s/sig-a.txt", test_tmpdir(t));
    snprintf(b, sizeof b, "%s/sig-b.txt", test_tmpdir(t));
    snprintf(c, sizeof c, "%s/sig-c.txt", test_tmpdir(t));
    KvAtomicFile fa, fb, fc;
    CHECK(kv_atomic_open(&fa, a, &e) == 0);
    CHECK(kv_atomic_open(&fb, b, &e) == 0);
    CHECK(kv_atomic_open(&fc, c, &e) == 0);
    fputs("done", fc.f);
    CHECK(kv_atomic_commit(&fc, &e) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* the parent's temp files are not the child's */
        kv_atomic_cleanup_on_signal();
        _exit(access(fa.tmp, F_OK) == 0 && access(fb.tmp, F_OK) == 0 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(access(fa.tmp, F_OK) == 0 && access(fb.tmp, F_OK) == 0);
    kv_atomic_cleanup_on_signal();
    CHECK(access(fa.tmp, F_OK) != 0);
    CHECK(access(fb.tmp, F_OK) != 0);
    CHECK(access(a, F_OK) != 0 && access(b, F_OK) != 0);
    CHECK(access(c, F_OK) == 0);
    kv_atomic_abort(&fa);
    kv_atomic_abort(&fb);
}

TEST(util_temp_track_removed_on_signal_untracked_kept)
{
    /* a temporary file outside a KvAtomicFile (plot --sweep's exported CSV): listed, it goes with the
     * signal-time cleanup; untracked, it stays */
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/tracked.csv", test_tmpdir(t));
    snprintf(b, sizeof b, "%s/untracked.csv", test_tmpdir(t));
    KvErr e;
    CHECK(kv_write_atomic(a, "x", 1, &e) == 0);
    CHECK(kv_write_atomic(b, "y", 1, &e) == 0);
    int sa = kv_temp_track(a), sb = kv_temp_track(b);
    CHECK(sa > 0 && sb > 0 && sa != sb);
    kv_temp_untrack(sb);
    kv_atomic_cleanup_on_signal();
    CHECK(access(a, F_OK) != 0);
    CHECK(access(b, F_OK) == 0);
}

TEST(util_paths_check_refuses_an_output_that_is_an_input)
{
    KvErr e = {{0}};
    const char *d = test_tmpdir(t);
    char in[4200], in2[4200], hard[4200], out[4200], res[4200], inres[4200];
    snprintf(in, sizeof in, "%s/trace.csv", d);
    snprintf(in2, sizeof in2, "%s/./trace.csv", d);
    snprintf(hard, sizeof hard, "%s/hard.csv", d);
    snprintf(out, sizeof out, "%s/new.json", d);
    snprintf(res, sizeof res, "%s/res", d);
    snprintf(inres, sizeof inres, "%s/res/summary.json", d);
    CHECK(kv_write_atomic(in, "x", 1, &e) == 0);
    unlink(hard);
    CHECK(link(in, hard) == 0);
    KvPathArg ins[] = {{"--trace", in, 0}, {"--costs", NULL, 0}, {"--config", "", 0}, {"--models", "no-such-file", 0}};
    /* distinct: fine; an absent input (a generator's name) is no file */
    KvPathArg ok[] = {{"--trace-out", out, 0}, {"--emit-schedule", "no-such-file.x", 0}, {"--out", res, 1}};
    CHECK_MSG(kv_paths_check(ins, 4, ok, 3, &e) == 0, "%s", e.msg);
    /* the same file under another spelling, and through a hard link */
    KvPathArg o1[] = {{"--trace-out", in2, 0}};
    CHECK(kv_paths_check(ins, 4, o1, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "--trace-out");
    CHECK_CONTAINS(e.msg, "--trace ");
    CHECK_CONTAINS(e.msg, in);
    KvPathArg o2[] = {{"--emit-schedule", hard, 0}};
    CHECK(kv_paths_check(ins, 4, o2, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, hard);
    /* two outputs, neither there yet, under two spellings */
    char out2[4300];
    snprintf(out2, sizeof out2, "%s/../%s/new.json", d, strrchr(d, '/') + 1);
    KvPathArg o3[] = {{"--trace-out", out, 0}, {"--emit-schedule", out2, 0}};
    CHECK(kv_paths_check(ins, 4, o3, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "--emit-schedule");
    /* an input in the directory a run replaces as a whole */
    CHECK(kv_mkdirs(res, &e) == 0);
    CHECK(kv_write_atomic(inres, "{}", 2, &e) == 0);
    KvPathArg ins2[] = {{"--config", inres, 0}};
    KvPathArg o4[] = {{"--out", res, 1}};
    CHECK(kv_paths_check(ins2, 1, o4, 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "lies in --out");
    CHECK(kv_paths_check(ins2, 1, o4, 0, &e) == 0);
}

TEST(util_read_missing_file_names_it)
{
    KvErr e = {{0}};
    CHECK(kv_read_file("/no/such/file.csv", NULL, &e) == NULL);
    CHECK_CONTAINS(e.msg, "/no/such/file.csv");
}

/* only regular files are read: a directory, a FIFO without a writer (once a hang in fopen) and a
 * device (/dev/zero once grew the buffer to gigabytes) are refused at once, naming the file and
 * what it is */
TEST(util_read_refuses_special_files)
{
    KvErr e = {{0}};
    CHECK(kv_read_file(test_tmpdir(t), NULL, &e) == NULL);
    CHECK_CONTAINS(e.msg, "not a regular file (a directory)");
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo", test_tmpdir(t));
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *paths[] = {fifo, "/dev/zero"}, *kinds[] = {"not a regular file (a FIFO or pipe)", "not a regular file (a device)"};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork(); /* in a child under an alarm: a hang or an endless read fails the test, not the run */
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(5);
            KvErr ce = {{0}};
            char *text = kv_read_file(paths[i], NULL, &ce);
            _exit(!text && strstr(ce.msg, paths[i]) && strstr(ce.msg, kinds[i]) ? 0 : 1);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: kv_read_file %s", paths[i],
                  WIFSIGNALED(status) ? "did not return (killed by its alarm)" : "did not refuse it by name and kind");
    }
}

TEST(util_parse_i64)
{
    KvErr e;
    int64_t v;
    CHECK(kv_parse_i64("42", &v, &e) == 0 && v == 42);
    CHECK(kv_parse_i64("10M", &v, &e) == 0 && v == 10000000);
    CHECK(kv_parse_i64("64Ki", &v, &e) == 0 && v == 65536);
    CHECK(kv_parse_i64("2GiB", &v, &e) == 0 && v == 2147483648LL);
    CHECK(kv_parse_i64("1.5K", &v, &e) == 0 && v == 1500);
    CHECK(kv_parse_i64("1.5", &v, &e) == -1);
    CHECK(kv_parse_i64("12x", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "12x");
    CHECK(kv_parse_i64("", &v, &e) == -1);
}

TEST(util_mkdirs)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/a/b/c", test_tmpdir(t));
    CHECK(kv_mkdirs(path, &e) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(kv_mkdirs(path, &e) == 0);
}

/* the catalogs' name index: names equal without case find one value, the first added; it grows
 * past the size it was made for and keeps every name */
TEST(util_nameidx_case_insensitive_first_value_kept)
{
    KvNameIdx x;
    CHECK(kv_nameidx_init(&x, 1) == 0);
    static char names[5000][16];
    for (int i = 0; i < 5000; i++) {
        snprintf(names[i], sizeof names[i], "Name-%d", i);
        CHECK(kv_nameidx_add(&x, names[i], i) == 0);
    }
    CHECK(kv_nameidx_add(&x, "NAME-17", 99999) == 0); /* already there: keeps 17 */
    int wrong = 0;
    for (int i = 0; i < 5000; i++) {
        char other[16];
        snprintf(other, sizeof other, "nAME-%d", i);
        wrong += kv_nameidx_find(&x, other) != i;
    }
    CHECK_EQ_I(wrong, 0);
    CHECK_EQ_I(kv_nameidx_find(&x, "NAME-17"), 17);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-5000"), -1);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-1 "), -1);
    CHECK_EQ_I(kv_nameidx_find(&x, NULL), -1);
    CHECK(x.n == 5000 && 2 * x.n <= x.cap);
    kv_nameidx_free(&x);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-1"), -1);
}

/* kv_app_fixed and kv_app_u64 write the text printf writes: random doubles of every magnitude below
 * 1e9 (and the exact binary halves, where printf rounds ties to even), each number of decimals,
 * and the printf fallbacks (negative, huge, non-finite) */
TEST(util_app_fixed_is_printf)
{
    uint64_t x = 88172645463325252ull;
    char a[400], b[400];
    int bad = 0;
    for (int i = 0; i < 200000 && bad < 5; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double d;
        switch (i % 4) {
        case 0: d = (double)(x >> 11) / 9007199254740992.0; break;                 /* [0, 1) */
        case 1: d = (double)(x >> 11) / 9007199254740992.0 * 1e9; break;           /* [0, 1e9) */
        case 2: d = ldexp((double)((x >> 40) | 1), -(int)(x % 60)); break;         /* binary fractions */
        default: d = (double)(int64_t)(x % 8000000000000000ull) / 1e9; break;      /* ns as seconds */
        }
        int dec = 1 + (int)(x % 9);
        if (i % 8 == 6) d = ldexp((double)((x >> 44) | 1), -(dec + 1)); /* odd / 2^(dec+1): an exact tie */
        *kv_app_fixed(a, d, dec) = '\0';
        snprintf(b, sizeof b, "%.*f", dec, d);
        if (strcmp(a, b) != 0) {
            bad++;
            CHECK_MSG(0, "%.17g with %d decimals: %s, printf %s", d, dec, a, b);
        }
    }
    const double odd[] = {0.0, 0.5, 0.25, 0.75, 0.125, 0.375, 0.0625, 0.0000005, 0.0000015, 0.0000025, 999999999.9999999, 1e9, -0.0, -1.25, 1e300, INFINITY, NAN};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        for (int dec = 1; dec <= 9; dec++) {
            *kv_app_fixed(a, odd[i], dec) = '\0';
            snprintf(b, sizeof b, "%.*f", dec, odd[i]);
            CHECK_MSG(strcmp(a, b) == 0, "%g with %d decimals: %s, printf %s", odd[i], dec, a, b);
        }
    const uint64_t u[] = {0, 9, 10, 18446744073709551615ull, 1234567890123ull};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        *kv_app_u64(a, u[i]) = '\0';
        snprintf(b, sizeof b, "%llu", (unsigned long long)u[i]);
        CHECK_MSG(strcmp(a, b) == 0, "%s, printf %s", a, b);
    }
}
